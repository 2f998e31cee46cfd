"""vmas_balance: VMAS balance, 4 robots carry a package on a line to a goal without dropping it.

BenchMARL's default task parameters (conf/task/vmas/balance.yaml): 4 agents, package mass 5,
package placed at random on the line, 100 steps. Reward shared by every agent (the package's
progress to the goal, a penalty when the package or line touches the ground); the episode
terminates when the package is on the goal or touches the ground, else truncates at max_steps.
Flat by default; `layers=3` puts 2 squads of 2 under a commander (generic learned goals).
"""
from hdppo.sims import vmas_scenario

SCENARIO = vmas_scenario(
    "balance", name="vmas_balance",
    description="VMAS balance, 4 robots carry a package on a line to a goal (BenchMARL's task parameters)",
    max_steps=100, squad_size=2,
    n_agents=4, package_mass=5, random_package_pos_on_line=True)
