"""vmas_transport: VMAS transport, 4 robots push a heavy package onto a goal.

BenchMARL's default task parameters (conf/task/vmas/transport.yaml): 4 agents, 1 package of
0.15 x 0.15 and mass 50, 100 steps. Reward shared by every agent (the package's progress to the
goal, x100); the episode terminates when every package is on the goal, else truncates at
max_steps. Flat by default; `layers=3` puts 2 squads of 2 under a commander (generic learned goals).
"""
from hdppo.sims import vmas_scenario

SCENARIO = vmas_scenario(
    "transport", name="vmas_transport",
    description="VMAS transport, 4 robots push a mass-50 package onto a goal (BenchMARL's task parameters)",
    max_steps=100, squad_size=2,
    n_agents=4, n_packages=1, package_width=0.15, package_length=0.15, package_mass=50)
