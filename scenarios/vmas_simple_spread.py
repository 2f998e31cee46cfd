"""vmas_simple_spread: VMAS's port of MPE simple_spread, 3 agents cover 3 landmarks in 25 steps.

The MPE task of the side-by-side with BenchMARL (examples/benchmarks/vs_benchmarl.py), run on VMAS
on both sides: 3 agents, other agents observed, 25 steps (MPE's max_cycles; BenchMARL's
conf/task/vmas/simple_spread.yaml says 100, the comparison sets 25 on both sides). Continuous
actions like BenchMARL's default. For mpe2's own simple_spread see the `spread` scenario.
"""
from hdppo.sims import vmas_scenario

SCENARIO = vmas_scenario(
    "simple_spread", name="vmas_simple_spread",
    description="VMAS simple_spread (MPE port), 3 agents cover 3 landmarks in 25 steps",
    max_steps=25, squad_size=3,
    n_agents=3, obs_agents=True)
