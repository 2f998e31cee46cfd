"""examples/studies/warehouse_zones.py: the scripted dispatchers do what their names say, and the
comparison it prints separates them on the default floor."""
from __future__ import annotations

import numpy as np

from examples.studies.warehouse_zones import main, nearest_zone, own_task, play
from hdppo.scenarios.warehouse import WarehouseConfig, make_batch
from hdppo.scenarios.warehouse.sim import OFF_CARRY, OFF_ORDERS, OFF_STATION


def test_nearest_zone_is_the_zone_of_the_robots_nearest_open_order():
    env = make_batch(WarehouseConfig(), 1, 0)
    L = env.layout
    zone_of = {int(L.shelf_zone[s]): s for s in range(len(L.shelves))}
    far, near = zone_of[0], zone_of[3]                    # a top-left and a bottom-right shelf
    fx, fy = L.xy(L.shelves[far])
    nx, ny = L.xy(L.shelves[near])
    env.place(0, robots=[(11, 8), (0, 0), (0, 2), (0, 4), (0, 6), (0, 8), (11, 0), (11, 2)],
              orders=[(int(fx), int(fy)), (int(nx), int(ny))])
    got = nearest_zone(env, np.random.default_rng(0))[0]
    assert got[0] == 3 and got[1] == 0          # the bottom-right robot -> zone 3, the top-left one -> zone 0
    assert set(got.tolist()) <= {0, 3}          # an open order exists: no robot gets a random zone


def test_own_task_is_the_station_when_carrying_else_the_nearest_order():
    obs = np.zeros((1, 2, OFF_ORDERS + 6 + 40), np.float32)
    obs[0, :, OFF_STATION:OFF_STATION + 5] = [0.1, 0.2, 0.3, 1, 0]
    obs[0, :, OFF_ORDERS:OFF_ORDERS + 6] = [-0.1, -0.2, 0.4, 0, -1, 1]
    obs[0, 0, OFF_CARRY] = 1.0                                         # robot 0 carries
    task = own_task(obs)
    np.testing.assert_allclose(task[0, 0], [0.1, 0.2, 0.3, 1, 0, 1])
    np.testing.assert_allclose(task[0, 1], [-0.1, -0.2, 0.4, 0, -1, 1])


def test_a_nearest_order_dispatcher_beats_random_zones_and_main_prints_all_three(capsys):
    cfg = WarehouseConfig()
    random, nearest = play(cfg, "random", 20, 0), play(cfg, "nearest", 20, 0)
    assert nearest.mean() > random.mean() + 0.03
    main(["--episodes", "8", "--set", "width=14"])
    out = capsys.readouterr().out
    assert "width=14" in out and all(f"  {name:9s} delivery_rate" in out for name in ("random", "nearest", "no zones"))
