"""`python examples/studies/rware_scripted.py --env rware-tiny-4ag-hard-v2 --episodes 20 --seed 0`: how many
requested shelves per 500-step episode a hand-planned (scripted, centralized) robot team delivers on RWARE.

The controller reads the exact state of rware's own `Warehouse` (`env.unwrapped`) and plans every robot:

* tasks: a robot carrying a requested shelf DELIVERs it to a goal cell; a robot carrying any other shelf
  RETURNs it to the nearest empty shelf cell (non-highway, no shelf, not claimed by another robot) and
  drops it; an empty robot is matched (greedy by path length, a small bonus for keeping its current
  shelf) to a requested standing shelf no other robot holds, drives under it and lifts it; an empty
  robot with nothing to fetch PARKs under a standing shelf at spread-out waiting spots (greedy k-median
  of the requested-shelf distribution), out of the highways.
* paths: shortest paths in (x, y, facing) with turns as steps (a turn is one step, forward one step),
  from exact backward BFS tables per target (cached). An empty robot may drive anywhere (under
  shelves); a loaded one only on highways, besides the cell it starts in and the cell it drops into
  (rware cancels a loaded robot's move into a standing shelf).
* collisions and deadlocks: windowed cooperative A* (Silver 2005) re-planned every step: robots are
  planned in priority order (lifting/dropping, then delivering, returning, fetching, parking, nearer
  first; while any robot has made no progress for `stuck_after` steps the order is drawn at random each
  step, and the robots not yet planned are obstacles for the whole window instead of the first step: a
  deadlock breaker) in space-time against a
  reservation table of the higher robots' planned cells (vertex and swap conflicts; following a robot
  that moves away is allowed, as rware's chain rule commits it), within a window of `window` steps,
  beyond which the BFS table is the cost to go. In the first step a robot may not enter a cell where a
  not-yet-planned robot stands, so the joint first move is conflict-free under rware's rules; a robot
  whose target is reserved later in the window waits elsewhere. Only the first action is executed.

It also prints an optimistic no-congestion ceiling (see `ceiling`).
"""
from __future__ import annotations

import argparse
import heapq
import itertools
import random
import time
from collections import deque
from typing import Any

import numpy as np

# rware's Direction: UP=0, DOWN=1, LEFT=2, RIGHT=3; rware turns RIGHT = clockwise along UP, RIGHT, DOWN, LEFT.
DX = (0, 0, -1, 1)
DY = (-1, 1, 0, 0)
_CW = (0, 3, 1, 2)  # clockwise order of direction values
LEFT_OF = {d: _CW[(_CW.index(d) - 1) % 4] for d in range(4)}
RIGHT_OF = {d: _CW[(_CW.index(d) + 1) % 4] for d in range(4)}
NOOP, FORWARD, LEFT, RIGHT, TOGGLE = 0, 1, 2, 3, 4
INF = 10 ** 9

DELIVER, RETURN, FETCH, PARK = "deliver", "return", "fetch", "park"
_RANK = {DELIVER: 1, RETURN: 2, FETCH: 3, PARK: 4}


class Layout:
    """The static map of a Warehouse: size, highways, goals, and cached distance tables."""

    def __init__(self, env):
        self.h, self.w = env.grid_size
        self.highway = np.asarray(env.highways, dtype=bool)
        self.goals = [tuple(map(int, g)) for g in env.goals]  # (x, y)
        self.shelf_cells = [(x, y) for y in range(self.h) for x in range(self.w) if not self.highway[y, x]]
        self._tables: dict = {}

    def inside(self, x, y):
        return 0 <= x < self.w and 0 <= y < self.h

    def dist_table(self, targets, loaded):
        """dist[y, x, d]: fewest steps (turn = forward = 1) from state (x, y, d) to any target cell.

        Empty robots may enter every cell; loaded ones only highways and the targets, and may start in
        any cell (they only leave it). Exact backward BFS."""
        key = (tuple(sorted(targets)), loaded)
        table = self._tables.get(key)
        if table is not None:
            return table
        tset = set(targets)
        dist = np.full((self.h, self.w, 4), INF, dtype=np.int64)
        q: deque = deque()
        for x, y in tset:
            for d in range(4):
                dist[y, x, d] = 0
                q.append((x, y, d))
        while q:
            x, y, d = q.popleft()
            nd = dist[y, x, d] + 1
            # a turn into d came from the direction on either side of d
            for pd in (LEFT_OF[d], RIGHT_OF[d]):
                if dist[y, x, pd] > nd:
                    dist[y, x, pd] = nd
                    q.append((x, y, pd))
            enterable = (not loaded) or self.highway[y, x] or (x, y) in tset
            if not enterable:
                continue
            px, py = x - DX[d], y - DY[d]
            if self.inside(px, py) and dist[py, px, d] > nd:
                dist[py, px, d] = nd  # (a loaded robot's start-only cell expands only its turns, above)
                q.append((px, py, d))
        self._tables[key] = dist
        return dist

    def forward_costs(self, starts, loaded, targets=()):
        """Forward BFS from {state: initial cost}: cost[y, x, d] of reaching each state (exact)."""
        tset = set(targets)
        cost = np.full((self.h, self.w, 4), INF, dtype=np.int64)
        buckets: dict[int, list] = {}
        for (x, y, d), c in starts.items():
            if c < cost[y, x, d]:
                cost[y, x, d] = c
                buckets.setdefault(c, []).append((x, y, d))
        c = min(buckets) if buckets else 0
        while buckets:
            if c not in buckets:
                c += 1
                continue
            for x, y, d in buckets.pop(c):
                if cost[y, x, d] != c:
                    continue
                nxt = [(x, y, LEFT_OF[d]), (x, y, RIGHT_OF[d])]
                nx_, ny_ = x + DX[d], y + DY[d]
                if self.inside(nx_, ny_) and ((not loaded) or self.highway[ny_, nx_] or (nx_, ny_) in tset):
                    nxt.append((nx_, ny_, d))
                for sx, sy, sd in nxt:
                    if cost[sy, sx, sd] > c + 1:
                        cost[sy, sx, sd] = c + 1
                        buckets.setdefault(c + 1, []).append((sx, sy, sd))
            c += 1
        return cost


def space_time_astar(lay: Layout, start, targets, loaded, table, window, vertex, edges, first_blocked,
                     block_until=1):
    """Cooperative A* in (x, y, d, t) up to `window` steps. Returns the list of states from start.

    vertex: {(x, y, t)} reserved cells; edges: {(from_cell, to_cell, t)} moves of higher robots arriving at
    t (a swap against one is refused); first_blocked: cells that may not be entered at t <= block_until. A node is
    terminal when it stands on a target cell that no reservation claims later in the window (cost g), or
    when t == window (cost g + BFS cost to go)."""
    tset = set(targets)
    x0, y0, d0 = start
    h0 = table[y0, x0, d0]
    if h0 >= INF:
        return [start]
    reserved_later: dict = {}
    for (x, y, t) in vertex:
        if (x, y) in tset:
            reserved_later[(x, y)] = max(reserved_later.get((x, y), -1), t)
    counter = itertools.count()
    openq = [(h0, 0, next(counter), x0, y0, d0, 0)]
    parent: dict = {(x0, y0, d0, 0): None}
    closed = set()
    while openq:
        _, _, _, x, y, d, t = heapq.heappop(openq)
        node = (x, y, d, t)
        if node in closed:
            continue
        closed.add(node)
        if t == window or ((x, y) in tset and reserved_later.get((x, y), -1) <= t):
            path = []
            while node is not None:
                path.append(node[:3])
                node = parent[node]
            return path[::-1]
        nt = t + 1
        succ = [(x, y, d), (x, y, LEFT_OF[d]), (x, y, RIGHT_OF[d])]
        fx, fy = x + DX[d], y + DY[d]
        if lay.inside(fx, fy) and ((not loaded) or lay.highway[fy, fx] or (fx, fy) in tset):
            if not (nt <= block_until and (fx, fy) in first_blocked) and (fx, fy, x, y, nt) not in edges:
                succ.append((fx, fy, d))
        for sx, sy, sd in succ:
            child = (sx, sy, sd, nt)
            if (sx, sy, nt) in vertex or child in parent:
                continue
            hh = table[sy, sx, sd]
            if hh >= INF:
                continue
            parent[child] = node
            heapq.heappush(openq, (nt + hh, -nt, next(counter), sx, sy, sd, nt))
    return [start]


def action_between(a, b):
    """The rware action taking state a = (x, y, d) to the next planned state b."""
    (x, y, d), (nx_, ny_, nd) = a, b
    if (nx_, ny_) != (x, y):
        return FORWARD
    if nd == d:
        return NOOP
    return LEFT if nd == LEFT_OF[d] else RIGHT


class ScriptedTeam:
    """A centralized hand-planned controller for one rware Warehouse (see the module docstring)."""

    def __init__(self, env, window: int = 16, seed: int = 0, stuck_after: int = 16):
        self.env = env
        self.lay = Layout(env)
        self.window = window
        self.rng = random.Random(seed)
        self.stuck_after = stuck_after
        n = env.n_agents
        self.fetch_of: dict[int, int] = {}   # robot index -> shelf id it goes to lift
        self.drop_of: dict[int, tuple] = {}  # robot index -> cell it returns its shelf to
        self.best_h = [INF] * n
        self.stuck = [0] * n
        self.task_key: list = [None] * n
        self._spots = self._waiting_spots(n)

    # -- waiting spots for idle robots -------------------------------------------------------------
    def _waiting_spots(self, n):
        """For k idle robots, k shelf cells greedily minimizing the mean distance (empty robot, its best
        facing) to a uniformly random shelf cell."""
        lay = self.lay
        cells = lay.shelf_cells
        d = np.array([[lay.dist_table([c], loaded=False)[sy, sx].min() for c in cells] for (sx, sy) in cells],
                     dtype=np.float64)  # d[spot, shelf]
        spots: dict[int, list] = {0: []}
        chosen: list[int] = []
        best = np.full(len(cells), np.inf)
        for k in range(1, n + 1):
            scores = np.minimum(best[None, :], d).mean(1)
            scores[chosen] = np.inf
            i = int(scores.argmin())
            chosen.append(i)
            best = np.minimum(best, d[i])
            spots[k] = [cells[j] for j in chosen]
        return spots

    # -- one step -----------------------------------------------------------------------------------
    def act(self):
        env, lay = self.env, self.lay
        agents = env.agents
        n = len(agents)
        shelf_grid = env.grid[1]
        requested = {s.id for s in env.request_queue}
        states = [(int(a.x), int(a.y), int(a.dir.value)) for a in agents]
        carrying = [a.carrying_shelf for a in agents]
        carried_ids = {s.id for s in carrying if s is not None}
        # standing shelves only (rware's shelf layer also shows the shelves robots carry)
        shelf_grid = np.where(np.isin(shelf_grid, list(carried_ids)), 0, shelf_grid) if carried_ids else shelf_grid

        tasks: list = [None] * n
        targets: list = [None] * n
        toggles = set()

        # loaded robots: deliver a requested shelf, else return it
        for i in range(n):
            s = carrying[i]
            if s is None:
                self.drop_of.pop(i, None)
                continue
            self.fetch_of.pop(i, None)
            if s.id in requested:
                self.drop_of.pop(i, None)
                tasks[i], targets[i] = DELIVER, list(lay.goals)
        claimed = {c for j, c in self.drop_of.items() if carrying[j] is not None and carrying[j].id not in requested}
        for i in range(n):
            s = carrying[i]
            if s is None or s.id in requested:
                continue
            cell = self.drop_of.get(i)
            if cell is None or shelf_grid[cell[1], cell[0]] != 0:
                claimed.discard(cell)
                cell = self._nearest_drop(states[i], claimed, shelf_grid)
                if cell is not None:
                    self.drop_of[i] = cell
                    claimed.add(cell)
            tasks[i], targets[i] = RETURN, [cell] if cell is not None else None
            x, y, _ = states[i]
            if cell == (x, y):
                toggles.add(i)

        # empty robots: match to requested standing shelves, greedy by path length
        empty = [i for i in range(n) if carrying[i] is None]
        free_shelves = [s for s in env.request_queue if s.id not in carried_ids]
        pairs = []
        for i in empty:
            x, y, d = states[i]
            for s in free_shelves:
                c = int(lay.dist_table([(int(s.x), int(s.y))], loaded=False)[y, x, d])
                if self.fetch_of.get(i) == s.id:
                    c -= 2
                pairs.append((c, self.rng.random(), i, s))
        pairs.sort(key=lambda p: (p[0], p[1]))
        new_fetch: dict[int, int] = {}
        taken = set()
        for _c, _, i, s in pairs:
            if i in new_fetch or s.id in taken:
                continue
            new_fetch[i] = s.id
            taken.add(s.id)
        self.fetch_of = new_fetch
        by_id = {s.id: s for s in env.shelfs}
        idle = [i for i in empty if i not in new_fetch]
        for i, sid in new_fetch.items():
            s = by_id[sid]
            tasks[i], targets[i] = FETCH, [(int(s.x), int(s.y))]
            if (states[i][0], states[i][1]) == (int(s.x), int(s.y)):
                toggles.add(i)
        if idle:
            self._assign_spots(idle, states, tasks, targets, shelf_grid, claimed)

        # progress bookkeeping for the priority boost
        for i in range(n):
            key = (tasks[i], tuple(targets[i]) if targets[i] else None)
            if key != self.task_key[i]:
                self.task_key[i], self.best_h[i], self.stuck[i] = key, INF, 0
            if targets[i] and i not in toggles:
                x, y, d = states[i]
                h = int(lay.dist_table(targets[i], loaded=carrying[i] is not None)[y, x, d])
                if h < self.best_h[i]:
                    self.best_h[i], self.stuck[i] = h, 0
                elif h > 0:
                    self.stuck[i] += 1

        # priority order
        def prio(i):
            if i in toggles:
                return (0, 0.0)
            h = self.best_h[i] if self.best_h[i] < INF else 0
            return (_RANK.get(tasks[i], 5), h + self.rng.random())

        order = sorted(range(n), key=prio)
        block_until = 1
        if max(self.stuck) >= self.stuck_after:
            block_until = self.window  # and the robots not yet planned are obstacles for the whole window
            # deadlock breaker: while a robot is stuck, the order of the non-toggling robots is drawn at random
            # each step, so a robot that blocks a stuck one's only way out is planned first now and then
            fixed = [i for i in order if i in toggles]
            rest = [i for i in order if i not in toggles]
            self.rng.shuffle(rest)
            order = fixed + rest
        vertex: set = set()
        edges: set = set()
        actions = [NOOP] * n
        W = self.window
        for k, i in enumerate(order):
            first_blocked = {(states[j][0], states[j][1]) for j in order[k + 1:]}
            x, y, d = states[i]
            if i in toggles or not targets[i]:
                path = [states[i]]
                actions[i] = TOGGLE if i in toggles else NOOP
            else:
                loaded = carrying[i] is not None
                table = lay.dist_table(targets[i], loaded)
                path = space_time_astar(lay, states[i], targets[i], loaded, table, W, vertex, edges, first_blocked,
                                         block_until)
                if len(path) > 1:
                    actions[i] = action_between(path[0], path[1])
                    # the windowed search may leave a wait as its first step; it is still a legal plan
            # reserve: the path, then its end cell until the window closes
            for t, (px, py, _) in enumerate(path):
                vertex.add((px, py, t))
                if t > 0:
                    qx, qy, _ = path[t - 1]
                    if (qx, qy) != (px, py):
                        edges.add((qx, qy, px, py, t))
            ex, ey, _ = path[-1]
            for t in range(len(path), W + 1):
                vertex.add((ex, ey, t))
        return actions

    def _nearest_drop(self, state, claimed, shelf_grid):
        lay = self.lay
        x, y, d = state
        occupied = {(int(a.x), int(a.y)) for a in self.env.agents}
        best, best_c = None, INF
        for c in lay.shelf_cells:
            if shelf_grid[c[1], c[0]] != 0 or c in claimed or (c in occupied and c != (x, y)):
                continue
            cost = int(lay.dist_table([c], loaded=True)[y, x, d])
            if cost < best_c:
                best, best_c = c, cost
        return best

    def _assign_spots(self, idle, states, tasks, targets, shelf_grid, claimed):
        lay = self.lay
        spots = self._spots[min(len(idle), len(self._spots) - 1)]
        # a spot must stay under a standing shelf (empty shelf cells are for returning robots)
        usable = []
        for sx, sy in spots:
            if shelf_grid[sy, sx] != 0:
                usable.append((sx, sy))
                continue
            alt = min((c for c in lay.shelf_cells if shelf_grid[c[1], c[0]] != 0 and c not in usable),
                      key=lambda c: abs(c[0] - sx) + abs(c[1] - sy), default=None)
            if alt is not None:
                usable.append(alt)
        pairs = []
        for i in idle:
            x, y, d = states[i]
            for c in usable:
                pairs.append((int(lay.dist_table([c], loaded=False)[y, x, d]), i, c))
        pairs.sort()
        done_r, done_c = set(), set()
        for _, i, c in pairs:
            if i in done_r or c in done_c:
                continue
            done_r.add(i)
            done_c.add(c)
            tasks[i], targets[i] = PARK, [c]


def run_episode(env_id: str, seed: int, window: int = 16, render: bool = False):
    """One seeded episode; returns (deliveries, per-robot deliveries, failed forward moves, longest run of steps
    without a delivery, seconds)."""
    import gymnasium as gym
    import rware  # noqa: F401  (registers the envs)

    env = gym.make(env_id, disable_env_checker=True)
    env.reset(seed=seed)
    u: Any = env.unwrapped
    team = ScriptedTeam(u, window=window, seed=seed)
    total = np.zeros(u.n_agents)
    failed, gap, max_gap = 0, 0, 0
    t0 = time.perf_counter()
    done = False
    while not done:
        acts = team.act()
        before = [(a.x, a.y) for a in u.agents]
        _, rew, term, trunc, _ = env.step(acts)
        failed += sum(1 for a, b, act in zip(u.agents, before, acts) if act == FORWARD and (a.x, a.y) == b)
        got = np.asarray(rew, dtype=np.float64)
        total += got
        gap = 0 if got.sum() > 0 else gap + 1
        max_gap = max(max_gap, gap)
        done = bool(term or trunc)
    env.close()
    return float(total.sum()), total, failed, max_gap, time.perf_counter() - t0


def random_episode(env_id: str, seed: int) -> float:
    """Deliveries of a team taking uniformly random actions (the same seeding)."""
    import gymnasium as gym
    import rware  # noqa: F401

    env = gym.make(env_id, disable_env_checker=True)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    total, done = 0.0, False
    while not done:
        _, rew, term, trunc, _ = env.step(env.action_space.sample())
        total += float(np.sum(np.asarray(rew, dtype=np.float64)))
        done = bool(term or trunc)
    env.close()
    return total


def ceiling(env_id: str, steps: int | None = None) -> dict:
    """Optimistic no-congestion figures for deliveries per episode (exact shortest paths, a turn = 1 step).

    L(B): steps to carry shelf B from its cell to a goal cell (best facing). L_hw: loaded robots on highways
    only (rware's real rule as long as no shelf cell is empty); L_any: through any cell (a loose lower bound,
    as if every shelf cell on the way were empty).

    cycle_own: one robot's steady cycle, shelves A (previous) and B (next) uniform: from a goal (facing free)
      carry A back to its own cell, drop (1), drive empty to B, lift (1), carry B to a goal; facing carried
      exactly through the legs. n_agents x steps / E[cycle]: what a congestion-free team that returns each
      shelf to its own cell and fetches its next shelf itself could reach. Not a bound on cleverer teams.
    robot_time: every delivery takes, of some robot's time, at least lift (1) + L_any(B) + the path from a
      goal to the nearest shelf cell (any cell passable) + drop (1); the empty drive to B is counted as 0 (a
      robot already waiting under it). n_agents x steps / E[that]: a bound on any team.
    queue_hw / queue_any: only `request_queue_size` requests are open at once, and each, once drawn, needs a
      robot under it to lift (1) and carry it (L). queue x steps / E[1 + L]. A bound on any team, except that
      rware draws new requests among all shelves not requested, including shelves robots carry (which can
      be delivered at once); queue_strict allows for that: at most n_agents of the shelves - queue
      candidates are carried, so E[time per request] >= (1 - p)(1 + E[L_any]) + p with p = n/(shelves - q).
    ceiling = min(robot_time, queue_strict): no team, however planned, beats it in expectation.
    ceiling_hw = min(robot_time, queue_hw): the same if carried shelves were never re-requested and loaded
      robots kept to highways."""
    import gymnasium as gym
    import rware  # noqa: F401

    env = gym.make(env_id, disable_env_checker=True)
    env.reset(seed=0)
    u: Any = env.unwrapped
    steps = steps or u.max_steps
    lay = Layout(u)
    cells = lay.shelf_cells
    to_goal = lay.dist_table(lay.goals, loaded=True)
    to_goal_any = lay.dist_table(lay.goals, loaded=False)
    goal_starts = {(gx, gy, d): 0 for gx, gy in lay.goals for d in range(4)}

    total, count = 0.0, 0
    for a in cells:
        c1 = lay.forward_costs(goal_starts, loaded=True, targets=[a])  # goal -> A's cell, loaded
        starts = {(a[0], a[1], d): int(c1[a[1], a[0], d]) + 1 for d in range(4)}
        c2 = lay.forward_costs(starts, loaded=False)  # drop (+1), then empty anywhere
        for bx, by in cells:
            total += min(int(c2[by, bx, d]) + 1 + int(to_goal[by, bx, d]) for d in range(4))
            count += 1
    cyc_own = total / count
    from_goal_any = lay.forward_costs(goal_starts, loaded=False)
    drop_any = min(int(from_goal_any[y, x].min()) for x, y in cells)
    l_hw = float(np.mean([to_goal[y, x].min() for x, y in cells]))
    l_any = float(np.mean([to_goal_any[y, x].min() for x, y in cells]))
    n, q, nshelf = u.n_agents, u.request_queue_size, len(cells)
    p = min(1.0, n / (nshelf - q))
    out = {
        "n_agents": n, "queue": q, "steps": steps, "goals": len(lay.goals), "shelves": nshelf,
        "L_hw": l_hw, "L_any": l_any, "drop_any": drop_any,
        "cycle_own": cyc_own, "bound_cycle_own": n * steps / cyc_own,
        "robot_time": 2 + l_any + drop_any, "bound_robot_time": n * steps / (2 + l_any + drop_any),
        "bound_queue_hw": q * steps / (1 + l_hw), "bound_queue_any": q * steps / (1 + l_any),
        "p_carried": p, "bound_queue_strict": q * steps / ((1 - p) * (1 + l_any) + p),
    }
    out["ceiling"] = min(out["bound_robot_time"], out["bound_queue_strict"])
    out["ceiling_hw"] = min(out["bound_robot_time"], out["bound_queue_hw"])
    env.close()
    return out


def main(argv: list[str] | None = None) -> None:
    from hdppo.stats import t_ci

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="rware-tiny-4ag-hard-v2")
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--window", type=int, default=16, help="cooperative A* window (steps)")
    ap.add_argument("--no-ceiling", action="store_true")
    args = ap.parse_args(argv)

    per_ep, per_robot, gaps, fails, secs = [], [], [], 0, 0.0
    for i in range(args.episodes):
        tot, robots, failed, max_gap, sec = run_episode(args.env, args.seed + i, window=args.window)
        gaps.append(max_gap)
        per_ep.append(tot)
        per_robot.append(robots)
        fails += failed
        secs += sec
        print(f"episode {i} seed {args.seed + i}: {tot:.0f} deliveries, per robot {robots.astype(int).tolist()}, "
              f"failed forward moves {failed}, longest gap {max_gap} steps, {sec:.1f}s", flush=True)
    m, lo, hi = t_ci(per_ep)
    rm, rlo, rhi = t_ci([r.mean() for r in per_robot])
    print(f"{args.env}: scripted team, {args.episodes} episodes (seeds {args.seed}..{args.seed + args.episodes - 1})")
    print(f"  deliveries per episode: mean {m:.2f}, 95% t interval [{lo:.2f}, {hi:.2f}], "
          f"min {min(per_ep):.0f}, max {max(per_ep):.0f}")
    print(f"  per robot: mean {rm:.2f} [{rlo:.2f}, {rhi:.2f}]; failed forward moves in all: {fails}; "
          f"{secs / max(args.episodes, 1):.1f}s per episode")
    print(f"  longest stretch without a delivery: median {int(np.median(gaps))} steps, max {max(gaps)}; "
          f"episodes with a stretch of 100+ steps (a deadlock): {sum(g >= 100 for g in gaps)}")
    if not args.no_ceiling:
        c = ceiling(args.env)
        print(f"  ceilings ({c['n_agents']} robots, queue {c['queue']}, {c['goals']} goal cells, "
              f"{c['shelves']} shelves, {c['steps']} steps); mean carry to a goal L_hw {c['L_hw']:.2f}, "
              f"L_any {c['L_any']:.2f} steps:")
        print(f"    cycle, shelf back to its own cell, fetch own next: {c['cycle_own']:.2f} steps -> "
              f"{c['bound_cycle_own']:.1f} per episode (a simple team's congestion-free figure)")
        print(f"    robot time per delivery >= {c['robot_time']:.2f} steps -> {c['bound_robot_time']:.1f}")
        print(f"    request queue: {c['queue']} x {c['steps']} / (1 + L_hw) = {c['bound_queue_hw']:.1f}; "
              f"(1 + L_any): {c['bound_queue_any']:.1f}; allowing re-requests of carried shelves "
              f"(p <= {c['p_carried']:.3f}): {c['bound_queue_strict']:.1f}")
        print(f"    ceiling: {c['ceiling']:.1f} (strict); {c['ceiling_hw']:.1f} with highway-only carries and "
              f"no re-requests of carried shelves")


if __name__ == "__main__":
    main()
