"""vmas_navigation: VMAS navigation, 3 robots each reach their own goal without colliding.

BenchMARL's default task parameters (conf/task/vmas/navigation.yaml): 3 agents, collisions on,
one agent per goal, own goal observed only, per-agent reward (shared_rew false), lidar range
0.35, agent radius 0.1, 100 steps. The episode terminates when every robot is on its goal, else
truncates at max_steps. Flat by default; `layers=3` gives a commander over squads of 2 and 1.
"""
from hdppo.sims import vmas_scenario

SCENARIO = vmas_scenario(
    "navigation", name="vmas_navigation",
    description="VMAS navigation, 3 robots reach their own goals, lidar, collisions (BenchMARL's task parameters)",
    max_steps=100, squad_size=2,
    n_agents=3, collisions=True, agents_with_same_goal=1, split_goals=False, observe_all_goals=False,
    shared_rew=False, lidar_range=0.35, agent_radius=0.1)
