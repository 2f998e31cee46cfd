"""HierarchyEnv: many env copies under a layered team, as arrays per layer.

One env step: layers whose interval has come decide top-down (each decision's goals are grounded
into the children's observations), units act, the env steps, then rewards and deaths flow
bottom-up and each layer's semi-MDP transitions accrue `sum gamma^i r` and close with discount
`gamma^k` (shorter, or 0, when the episode or the node ends inside the interval).

Decision slots: a bottom-layer slot is a unit; an upper-layer slot is a node (`broadcast`) or a
(parent, child position) pair (`per_child`). `step_iter()` is a generator that yields one
`Decision` per deciding layer and receives that layer's actions, so a trainer batches one forward
pass per layer per step, and a single-layer view can pause at its own layer.
"""
from __future__ import annotations

import contextlib
from typing import Any, Generator, Iterator

import gymnasium as gym
import numpy as np

from hdppo.team import aggregate as agg
from hdppo.errors import ScenarioError
from hdppo.team.assembly import build_graph, make_env_and_graph
from hdppo.team.graph import spatial_groups
from hdppo.team.interfaces import Decision, LayerInfo, LayerStep, Policy, StepResult
from hdppo.team.scenario import Layer, LayerContext, Scenario
from hdppo.team.vecenv import BatchedEnv, EnvStep


def _concat_boxes(*boxes: gym.spaces.Box) -> gym.spaces.Box:
    low = np.concatenate([b.low.reshape(-1) for b in boxes]).astype(np.float32)
    high = np.concatenate([b.high.reshape(-1) for b in boxes]).astype(np.float32)
    return gym.spaces.Box(low, high, dtype=np.float32)


def _with_zero(box: gym.spaces.Box) -> gym.spaces.Box:
    return gym.spaces.Box(np.minimum(box.low, 0), np.maximum(box.high, 0), dtype=np.float32)


class HierarchyEnv:
    """E copies of a scenario's env with its agent graph and layers; see the module docstring."""

    def __init__(self, scenario: Scenario, cfg: Any = None, n_envs: int = 1, seed: int | None = None,
                 autoreset: bool = True, env: BatchedEnv | None = None) -> None:
        self.scenario = scenario
        self.cfg = cfg if cfg is not None else scenario.make_config()
        self.n_envs = n_envs
        self.autoreset = autoreset
        self.detailed_stats = False
        self.gamma = float(self.cfg.gamma)
        self.specs: list[Layer] = scenario.build_layers(self.cfg)
        if env is None:
            self.env, self.graph = make_env_and_graph(scenario, self.cfg, n_envs, seed, self.specs)
        else:
            self.env = env
            opponents = list(getattr(env, "opponents", []))
            self.graph = build_graph(scenario, self.cfg, list(env.units) + opponents, opponents, self.specs)
        self._build_topology()
        self.info = self._build_infos()
        self.reset(seed)

    # ---- construction ----------------------------------------------------------------------
    def _build_topology(self) -> None:
        g, E = self.graph, self.n_envs
        names = g.layers
        self.n_layers = len(names)
        self.idx: list[np.ndarray | None] = []
        self.struct: list[np.ndarray | None] = []
        for name in names[:-1]:
            idx, mask = g.child_index(name)
            self.idx.append(np.repeat(idx[None], E, axis=0))
            self.struct.append(np.repeat(mask[None], E, axis=0))
        self.idx.append(None)
        self.struct.append(None)
        self.parent: list[np.ndarray | None] = [None]
        self.pos: list[np.ndarray | None] = [None]
        for i in range(1, self.n_layers):
            self.parent.append(np.zeros((E, len(g.nodes(names[i]))), dtype=np.int64))
            self.pos.append(np.zeros_like(self.parent[-1]))
            self._refresh_parents(i, np.ones(E, dtype=bool))

    def _refresh_parents(self, i: int, envs: np.ndarray) -> None:
        """parent / position-in-parent of layer i's nodes from layer i-1's child index."""
        idx, struct = self.idx[i - 1], self.struct[i - 1]
        for e in np.flatnonzero(envs):
            rows, cols = np.nonzero(struct[e])
            self.parent[i][e, idx[e, rows, cols]] = rows
            self.pos[i][e, idx[e, rows, cols]] = cols

    def _feature_space(self, i: int) -> gym.spaces.Box:
        spec = self.specs[i]
        if i == self.n_layers - 1:
            box = self.env.obs_space
        elif spec.observe is not None:
            box = spec.observe_space
        else:
            below = _with_zero(self._fspaces[i + 1])
            box = _concat_boxes(below, below, gym.spaces.Box(0.0, 1.0, (1,), np.float32))
        if spec.use_state:
            if self.env.state_space is None:
                raise ScenarioError(f"layer {spec.name!r} has use_state=True but the env has no state()",
                                    "set use_state=False or give the env a state_space and state()",
                                    where=f"scenario {self.scenario.name!r}")
            box = _concat_boxes(box, self.env.state_space)
        return box

    def _goal_feature_space(self, i: int) -> gym.spaces.Box | None:
        if i == 0:
            return None
        parent = self.specs[i - 1]
        if parent.goal_features_space is not None:
            return parent.goal_features_space
        space = parent.goal_space
        if isinstance(space, gym.spaces.Discrete):
            return gym.spaces.Box(0.0, 1.0, (int(space.n),), np.float32)
        return gym.spaces.Box(space.low.reshape(-1).astype(np.float32), space.high.reshape(-1).astype(np.float32),
                              dtype=np.float32)

    def _build_infos(self) -> list[LayerInfo]:
        g = self.graph
        self._fspaces: list[gym.spaces.Box] = [None] * self.n_layers  # type: ignore[list-item]
        for i in reversed(range(self.n_layers)):
            self._fspaces[i] = self._feature_space(i)
        infos = []
        for i, spec in enumerate(self.specs):
            nodes = g.nodes(spec.name)
            gspace = self._goal_feature_space(i)
            own = _concat_boxes(self._fspaces[i], gspace) if gspace is not None else self._fspaces[i]
            bottom = i == self.n_layers - 1
            c = 0 if bottom else self.idx[i].shape[2]
            if bottom:
                slots, obs, act, choice = [str(n) for n in nodes], own, self.env.action_space, None
                roles = np.arange(len(nodes))
            elif spec.choice == "per_child":
                slots = [f"{n}/{j}" for n in nodes for j in range(c)]
                obs = _concat_boxes(own, self._fspaces[i + 1], gym.spaces.Box(0.0, 1.0, (c,), np.float32))
                act, choice = spec.goal_space, "per_child"
                roles = np.tile(np.arange(c), len(nodes))
            else:
                slots, obs, act, choice = [str(n) for n in nodes], own, spec.goal_space, "broadcast"
                roles = np.arange(len(nodes))
            infos.append(LayerInfo(spec.name, i, spec.interval, nodes, slots, choice, obs, act, self._fspaces[i],
                                   gspace, c, roles))
        return infos

    # ---- state -----------------------------------------------------------------------------
    def _reset_state(self, envs: np.ndarray) -> None:
        """Fresh episode bookkeeping for the copies in envs [E] (the env itself already reset)."""
        E = self.n_envs
        if not hasattr(self, "t"):
            self.t = np.zeros(E, dtype=np.int64)
            self.goals: list[np.ndarray | None] = [None]
            for i in range(1, self.n_layers):
                space = self.specs[i - 1].goal_space
                n = len(self.info[i].nodes)
                if isinstance(space, gym.spaces.Discrete):
                    self.goals.append(np.zeros((E, n), dtype=np.int64))
                else:
                    self.goals.append(np.zeros((E, n) + space.shape, dtype=np.float32))
            S = [inf.n_slots for inf in self.info]
            N = [len(inf.nodes) for inf in self.info]
            self.open = [np.zeros((E, s), dtype=bool) for s in S]
            self.acc_r = [np.zeros((E, s), dtype=np.float64) for s in S]
            self.acc_d = [np.ones((E, s), dtype=np.float64) for s in S]
            self.goal_set = [np.zeros((E, n), dtype=bool) for n in N]
            self.achieved = [np.zeros((E, n), dtype=bool) for n in N]
            self.ep_return = [np.zeros((E, n), dtype=np.float64) for n in N]
            self.unit_env_return = np.zeros((E, N[-1]), dtype=np.float64)
            self.goal_stats = [[0, 0] for _ in N]      # per layer: [goals finished, goals achieved]
            self._env_actions = None
        self.t[envs] = 0
        for i in range(self.n_layers):
            self.open[i][envs] = False
            self.acc_r[i][envs] = 0.0
            self.acc_d[i][envs] = 1.0
            self.goal_set[i][envs] = False
            self.achieved[i][envs] = False
            self.ep_return[i][envs] = 0.0
            if self.goals[i] is not None:
                self.goals[i][envs] = 0
        self.unit_env_return[envs] = 0.0
        self._regroup(envs)

    def _regroup(self, envs: np.ndarray) -> None:
        spatial = self.graph.spatial
        if spatial is None or self.n_layers < 2 or not envs.any():
            return
        if self.scenario.positions is None:
            raise ScenarioError("the graph groups units spatially but the scenario gives no positions(env)",
                                "add positions=lambda env: array [E, U, 2] to the Scenario",
                                where=f"scenario {self.scenario.name!r}")
        pos = np.asarray(self.scenario.positions(self.env))
        i = self.n_layers - 2
        n_groups = self.idx[i].shape[1]
        for e in np.flatnonzero(envs):
            group = np.minimum(spatial_groups(pos[e], spatial.group_size), n_groups - 1)
            self.struct[i][e] = False
            fill = np.zeros(n_groups, dtype=np.int64)
            for u, gidx in enumerate(group):
                if fill[gidx] < self.idx[i].shape[2]:
                    self.idx[i][e, gidx, fill[gidx]] = u
                    self.struct[i][e, gidx, fill[gidx]] = True
                    fill[gidx] += 1
        self._refresh_parents(i + 1, envs)

    def reset(self, seed: int | None = None) -> None:
        """Start new episodes in every copy; without a seed the copies' random streams continue."""
        self.env.reset(seed=seed)
        self._reset_state(np.ones(self.n_envs, dtype=bool))
        self._compute_features()

    # ---- observations ----------------------------------------------------------------------
    def _compute_features(self) -> None:
        """Units' env observations and every node's alive flag; upper layers' features on demand."""
        L = self.n_layers
        self._feat: list[np.ndarray | None] = [None] * L
        self.alive: list[np.ndarray] = [None] * L  # type: ignore[list-item]
        self._feat[-1] = self._with_state(L - 1, self.env.obs.copy())
        self.alive[-1] = self.env.alive.copy()
        for i in reversed(range(L - 1)):
            self.alive[i] = agg.any_children(self.alive[i + 1], self.idx[i], self.struct[i])
        self._goal_feat: list[np.ndarray | None] = [None] * L
        self._slot_alive: list[np.ndarray | None] = [None] * L

    def refresh(self) -> None:
        """Recompute features after the env's obs / alive were written from outside (a caller-driven
        env, see hdppo.runtime); goals and the episode's bookkeeping are kept."""
        self._compute_features()

    def features(self, i: int) -> np.ndarray:
        """Layer i's own features [E, N, D]: bottom-up over living children (computed once per step)."""
        if self._feat[i] is None:
            self._feat[i] = self._layer_features(i, self.features(i + 1), self.alive[i + 1], self.alive[i])
        return self._feat[i]

    def _layer_features(self, i: int, below: np.ndarray, alive_below: np.ndarray, alive: np.ndarray) -> np.ndarray:
        idx, struct, spec = self.idx[i], self.struct[i], self.specs[i]
        if spec.observe is not None:
            live = struct & agg.gather_children(alive_below, idx)
            ctx = LayerContext(None, alive, self.goals[i], None, self.t, self.env,  # type: ignore[arg-type]
                               agg.gather_children(below, idx), live)
            f = np.asarray(spec.observe(ctx), dtype=np.float32)
        else:
            f = agg.default_features(below, alive_below, idx, struct)
        return self._with_state(i, f)

    def _with_state(self, i: int, features: np.ndarray) -> np.ndarray:
        """Layer i's features, with the env's global state appended when the layer asks for it."""
        if not self.specs[i].use_state:
            return features
        state = np.asarray(self.env.state(), dtype=np.float32)
        s = np.broadcast_to(state[:, None, :], features.shape[:2] + state.shape[1:])
        return np.concatenate([features, s], axis=2)

    def goal_features(self, i: int) -> np.ndarray | None:
        """Goals of layer i's nodes grounded on their current features [E, N, F] (cached per step)."""
        if i == 0:
            return None
        if self._goal_feat[i] is None:
            self._goal_feat[i] = self._ground(i, self.features(i), self.alive[i], self.goals[i])
        return self._goal_feat[i]

    def _ground(self, i: int, features: np.ndarray, alive: np.ndarray, goals: np.ndarray) -> np.ndarray:
        parent = self.specs[i - 1]
        if parent.goal_features is not None:
            out = np.asarray(parent.goal_features(goals, LayerContext(features, alive, goals, None, self.t, self.env)),
                             dtype=np.float32)
            want = (self.n_envs, len(self.info[i].nodes), self.info[i].goal_feature_space.shape[0])
            if out.shape != want:
                raise ScenarioError(f"goal_features of layer {parent.name!r} returned shape {out.shape}, "
                                    f"expected {want}", "return [E, N_children, F] matching goal_features_space",
                                    where=f"scenario {self.scenario.name!r}")
            return out
        if isinstance(parent.goal_space, gym.spaces.Discrete):
            return agg.one_hot(goals, int(parent.goal_space.n))
        return goals.reshape(goals.shape[0], goals.shape[1], -1).astype(np.float32)

    def context(self, i: int, alive: np.ndarray | None = None) -> LayerContext:
        """What layer i's hooks see now; children's arrays are gathered only if a hook reads them."""
        children = {}
        if i < self.n_layers - 1:
            idx, struct, alive_below = self.idx[i], self.struct[i], self.alive[i + 1]
            children = dict(child_features=lambda: agg.gather_children(self.features(i + 1), idx),
                            child_alive=lambda: struct & agg.gather_children(alive_below, idx))
        return LayerContext(lambda: self.features(i), self.alive[i] if alive is None else alive, self.goals[i],
                            lambda: self.goal_features(i), self.t, self.env, **children)

    def node_obs(self, i: int) -> np.ndarray:
        """Layer i's node observations [E, N, D]: own features plus grounded goal."""
        g = self.goal_features(i)
        f = self.features(i)
        return f if g is None else np.concatenate([f, g], axis=2)

    def decision_obs(self, i: int) -> np.ndarray:
        """The policy input of every slot of layer i [E, S, D]."""
        own = self.node_obs(i)
        if self.info[i].choice != "per_child":
            return own
        idx = self.idx[i]
        E, N, C = idx.shape
        child = agg.gather_children(self.features(i + 1), idx)                 # [E, N, C, Dc]
        parent = np.broadcast_to(own[:, :, None, :], (E, N, C, own.shape[2]))
        onehot = np.broadcast_to(np.eye(C, dtype=np.float32)[None, None], (E, N, C, C))
        return np.concatenate([parent, child, onehot], axis=3).reshape(E, N * C, -1)

    def slot_alive(self, i: int) -> np.ndarray:
        """Slots of layer i whose node (and child, for per_child) is alive [E, S] (cached per step)."""
        if self.info[i].choice != "per_child":
            return self.alive[i]
        if self._slot_alive[i] is None:
            live = self.struct[i] & agg.gather_children(self.alive[i + 1], self.idx[i])
            self._slot_alive[i] = live.reshape(self.n_envs, -1)
        return self._slot_alive[i]

    def _slot_view(self, i: int, node_values: np.ndarray) -> np.ndarray:
        """Node values [E, N] as slot values [E, S] (per_child pairs take their parent's value)."""
        if self.info[i].choice != "per_child":
            return node_values
        return np.repeat(node_values, self.idx[i].shape[2], axis=1)

    def _slot_of_child(self, i: int) -> np.ndarray:
        """For layer i+1's nodes, the slot of layer i that sets their goal [E, Nc]."""
        if self.info[i].choice == "per_child":
            return self.parent[i + 1] * self.idx[i].shape[2] + self.pos[i + 1]
        return self.parent[i + 1]

    # ---- stepping --------------------------------------------------------------------------
    def step(self, act: Policy) -> StepResult:
        """One env step for every copy, asking `act(decision)` for each deciding layer."""
        gen = self.step_iter()
        try:
            decision = next(gen)
            while True:
                decision = gen.send(act(decision))
        except StopIteration as stop:
            return stop.value

    def step_iter(self, pause: bool = False) -> Generator[Decision | None, np.ndarray | None, StepResult]:
        """Yield a Decision per deciding layer (top-down), receive its actions, return the StepResult.

        With `pause`, yield None once more after the last decision and before the env steps (send
        None to go on): a trainer ending its rollout there has the values of every slot's next
        decision state, which bootstrap the transitions that closed on the rollout's last step."""
        L = self.n_layers
        if self._env_actions is None:
            self._env_actions = self._empty_env_actions()
        for i, spec in enumerate(self.specs):
            due = (self.t % spec.interval) == 0
            if not due.any():
                continue
            mask = due[:, None] & self.slot_alive(i)
            amask = self.env.action_mask if i == L - 1 else None
            actions = yield Decision(i, self.decision_obs(i), mask, amask, self.t)
            actions = self._check_actions(i, actions)
            self.open[i] |= mask
            self.acc_r[i][mask] = 0.0
            self.acc_d[i][mask] = 1.0
            if i == L - 1:
                self._env_actions[mask] = actions[mask]
            else:
                self._assign_goals(i, actions, mask)
        if pause:
            yield None
        return self._advance()

    def _empty_env_actions(self) -> np.ndarray:
        space = self.env.action_space
        shape = (self.n_envs, len(self.env.units)) + tuple(space.shape or ())
        return np.zeros(shape, dtype=space.dtype if space.dtype is not None else np.int64)

    def _check_actions(self, i: int, actions: Any) -> np.ndarray:
        a = np.asarray(actions)
        info = self.info[i]
        want = (self.n_envs, info.n_slots) + tuple(info.action_space.shape or ())
        if a.shape != want:
            raise ValueError(f"layer {info.name!r} got actions of shape {a.shape}, expected {want}")
        return a

    def _assign_goals(self, i: int, actions: np.ndarray, mask: np.ndarray) -> None:
        c = i + 1
        slot = self._slot_of_child(i)
        upd = np.take_along_axis(mask, slot, axis=1) & self.alive[c]
        new = np.take_along_axis(actions, slot.reshape(slot.shape + (1,) * (actions.ndim - 2)), axis=1)
        self._finish_goals(c, upd)
        self.goals[c][upd] = new[upd]
        self.goal_set[c][upd] = True
        self.achieved[c][upd] = False
        self._goal_feat[c] = None

    def _finish_goals(self, c: int, which: np.ndarray) -> None:
        """Count the goals of layer c's nodes in `which` that end now (replaced or episode over)."""
        ending = which & self.goal_set[c]
        self.goal_stats[c][0] += int(ending.sum())
        self.goal_stats[c][1] += int((ending & self.achieved[c]).sum())
        self.goal_set[c][which] = False

    def _advance(self) -> StepResult:
        L = self.n_layers
        # _compute_features() below builds new lists, so these keep the pre-step state without copies;
        # goals only change at decisions, so the hooks' goals are the pre-step goals too
        pre_alive, pre_feat, pre_goal_cache = self.alive, self._feat, self._goal_feat
        step: EnvStep = self.env.step(self._env_actions)
        self._check_finite(step)
        self._compute_features()
        # rewards bottom-up: the env (team) reward of each node, then its weighted layer reward
        ext: list[np.ndarray] = [None] * L  # type: ignore[list-item]
        ext[-1] = np.where(pre_alive[-1], step.rewards, 0.0)
        trunc: list[np.ndarray] = [None] * L  # type: ignore[list-item]
        trunc[-1] = step.truncated & pre_alive[-1]
        any_trunc = bool(trunc[-1].any())
        for i in reversed(range(L - 1)):
            ext[i] = agg.sum_children(ext[i + 1], self.idx[i], self.struct[i])
            trunc[i] = (agg.any_children(trunc[i + 1], self.idx[i], self.struct[i]) if any_trunc
                        else np.zeros(self.alive[i].shape, dtype=bool))
        self.unit_env_return += ext[-1]
        done = step.done
        final = _FinalView(self, trunc[-1]) if any_trunc else None
        results = []
        for i, spec in enumerate(self.specs):
            ctx = self.context(i, pre_alive[i])
            ctx._lazy["prev_features"] = lambda i=i: self._pre_features(i, pre_feat, pre_alive)
            ctx._lazy["prev_goal_features"] = (lambda i=i: pre_goal_cache[i] if pre_goal_cache[i] is not None
                                               else self._ground(i, self._pre_features(i, pre_feat, pre_alive),
                                                                 pre_alive[i], self.goals[i]))
            reward = spec.w_ext * ext[i]
            if spec.intrinsic is not None and spec.w_int != 0.0:
                reward = reward + spec.w_int * np.asarray(spec.intrinsic(ctx), dtype=np.float64)
            reward = np.where(pre_alive[i], reward, 0.0)
            self.ep_return[i] += reward
            if i > 0 and self.specs[i - 1].goal_success is not None:
                ok = np.asarray(self.specs[i - 1].goal_success(ctx), dtype=bool)
                self.achieved[i] |= ok & pre_alive[i] & self.goal_set[i]
            results.append(self._close(i, self._slot_view(i, reward), done, trunc, final))
        episodes = []
        if done.any():
            for i in range(1, L):
                self._finish_goals(i, done[:, None] & np.ones_like(self.goal_set[i]))
            episodes = [self._episode_stats(e) for e in np.flatnonzero(done)]
        self.t += 1
        if done.any() and self.autoreset:
            self.env.reset_done(done)
            self._reset_state(done)
            self._compute_features()
        return StepResult(results, step.rewards, done, episodes)

    def _pre_features(self, i: int, cache: list, alive: list) -> np.ndarray:
        """Layer i's features before this env step, from the pre-step cache (filled in on demand;
        a use_state layer then carries the post-step state)."""
        if cache[i] is None:
            cache[i] = self._layer_features(i, self._pre_features(i + 1, cache, alive), alive[i + 1], alive[i])
        return cache[i]

    def _check_finite(self, step: EnvStep) -> None:
        """Refuse NaN or infinite observations and rewards, naming the unit and the copy."""
        for what, arr in (("reward", step.rewards), ("observation", self.env.obs)):
            if not np.isfinite(arr).all():
                bad = np.argwhere(~np.isfinite(arr))[0]
                raise ScenarioError(f"the env gave a non-finite {what} to unit {self.env.units[bad[1]]!r} "
                                    f"(copy {bad[0]}, episode step {self.t[bad[0]]})",
                                    "fix the env (or wrap it to clip/replace NaN) before training on it",
                                    where=f"scenario {self.scenario.name!r}")

    def _close(self, i: int, slot_reward: np.ndarray, done: np.ndarray, trunc: list[np.ndarray],
               final: "_FinalView | None" = None) -> LayerStep:
        """Accrue this step's reward on open slots of layer i and close the finished transitions."""
        open_ = self.open[i]
        self.acc_r[i] += np.where(open_, self.acc_d[i] * slot_reward, 0.0)
        self.acc_d[i] = np.where(open_, self.acc_d[i] * self.gamma, self.acc_d[i])
        ended = open_ & (done[:, None] | ~self.slot_alive(i))
        boundary = ((self.t + 1) % self.specs[i].interval) == 0
        closed = ended | (open_ & boundary[:, None])
        if not ended.any():
            slot_trunc = ended
        elif self.info[i].choice == "per_child":
            slot_trunc = agg.gather_children(trunc[i + 1], self.idx[i]).reshape(self.n_envs, -1)
        else:
            slot_trunc = trunc[i]
        truncated = ended & slot_trunc
        terminal = ended & ~truncated
        final_obs = final.decision_obs(i) if truncated.any() and final is not None else None
        out = LayerStep(closed, self.acc_r[i].astype(np.float32), np.where(terminal, 0.0, self.acc_d[i]).astype(np.float32),
                        terminal, truncated, final_obs)
        self.open[i] = open_ & ~closed
        return out

    def _episode_stats(self, e: int) -> dict:
        stats: dict[str, Any] = {"env": int(e), "length": int(self.t[e] + 1),
                                 "team_return": float(self.unit_env_return[e].sum())}
        for i, spec in enumerate(self.specs):
            stats[f"return/{spec.name}"] = float(self.ep_return[i][e].mean())
        if self.detailed_stats:    # per-node returns and membership, for hdppo check's conservation test
            stats["node_returns"] = {spec.name: self.ep_return[i][e].copy() for i, spec in enumerate(self.specs)}
            stats["unit_env_returns"] = self.unit_env_return[e].copy()
            stats["members"] = {spec.name: self._members(i, e) for i, spec in enumerate(self.specs)}
        stats.update(self.env.episode_info(int(e)))
        return stats

    def _members(self, i: int, e: int) -> list[list[int]]:
        """Unit indices under each node of layer i in copy e (this episode's grouping)."""
        groups = [[u] for u in range(len(self.info[-1].nodes))]
        for j in reversed(range(i, self.n_layers - 1)):
            idx, struct = self.idx[j][e], self.struct[j][e]
            groups = [sum((groups[idx[n, c]] for c in range(idx.shape[1]) if struct[n, c]), [])
                      for n in range(idx.shape[0])]
        return groups

    def pop_goal_counts(self) -> dict[str, tuple[int, int]]:
        """(goals finished, goals achieved) per layer since the last call (layers whose goals have a
        goal_success test and finished at least one goal); counts add up across workers."""
        out = {}
        for i in range(1, self.n_layers):
            n, ok = self.goal_stats[i]
            if n and self.specs[i - 1].goal_success is not None:
                out[self.specs[i].name] = (n, ok)
            self.goal_stats[i] = [0, 0]
        return out

    def pop_goal_stats(self) -> dict[str, float]:
        """Goal success rate per layer since the last call (layers that receive goals)."""
        return {name: ok / n for name, (n, ok) in self.pop_goal_counts().items()}

    def close(self) -> None:
        self.env.close()


class _FinalView:
    """Decision observations at a time limit, with the truncated units counted as alive.

    After the env step PettingZoo has removed every truncated unit, so the plain post-step view of a
    parent at a time limit is "no living child" (all-zero features), a state no decision ever saw.
    Bootstrapping truncation needs the state the layer would have decided in: here the post-step
    observations with the truncated units alive (units that terminated stay dead)."""

    def __init__(self, hier: HierarchyEnv, truncated_units: np.ndarray) -> None:
        L = hier.n_layers
        self.hier = hier
        self.alive: list[np.ndarray] = [None] * L  # type: ignore[list-item]
        self.alive[-1] = hier.alive[-1] | truncated_units
        for i in reversed(range(L - 1)):
            self.alive[i] = agg.any_children(self.alive[i + 1], hier.idx[i], hier.struct[i])
        self.feat: list[np.ndarray | None] = [None] * (L - 1) + [hier._feat[-1]]
        self.goal_feat: list[np.ndarray | None] = [None] * L
        self.slot_alive: list[np.ndarray | None] = [None] * L

    def decision_obs(self, i: int) -> np.ndarray:
        with self._installed():
            return self.hier.decision_obs(i)

    @contextlib.contextmanager
    def _installed(self) -> Iterator[None]:
        """Swap this view's alive flags and caches into the hierarchy (its methods fill them)."""
        h = self.hier
        saved = h.alive, h._feat, h._goal_feat, h._slot_alive
        h.alive, h._feat, h._goal_feat, h._slot_alive = self.alive, self.feat, self.goal_feat, self.slot_alive
        try:
            yield
        finally:
            h.alive, h._feat, h._goal_feat, h._slot_alive = saved
