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

import functools
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np

from hdppo.errors import ScenarioError
from hdppo.sims.base import BatchedEnv, EnvStep
from hdppo.team import aggregate as agg
from hdppo.team.assembly import build_graph, make_env_and_graph
from hdppo.team.attention import attended
from hdppo.team.episodes import episode_stats
from hdppo.team.final_view import FinalView
from hdppo.team.goal_mask import legal_goals
from hdppo.team.goals import GoalBook, ground_goals
from hdppo.team.guards import check_actions, check_finite, check_shapes
from hdppo.team.interfaces import Decision, LayerInfo, LayerStep, Policy, StepResult
from hdppo.team.layer_info import build_infos
from hdppo.team.scenario import Layer, LayerContext, Scenario
from hdppo.team.smdp import Transitions
from hdppo.team.topology import LayerTopology, build_topology, regroup

# the step contracts are defined in interfaces.py; importing them from here keeps working
__all__ = ["Decision", "HierarchyEnv", "LayerInfo", "LayerState", "LayerStep", "Policy", "StepResult"]


@dataclass
class LayerState:
    """One layer inside a HierarchyEnv: who its children are, its slots' open transitions, the goals
    its nodes received (none at the top) and their episode returns."""

    topology: LayerTopology
    transitions: Transitions
    goals: GoalBook | None
    ep_return: np.ndarray          # [E, N]


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
        self._build()
        self.reset(seed)

    # ---- construction ----------------------------------------------------------------------
    def _build(self) -> None:
        """Per-layer topology and descriptions; the per-layer state is made by the first reset."""
        self.n_layers = len(self.graph.layers)
        self.topology = build_topology(self.graph, self.n_envs)
        # lists over layers of the same arrays the per-layer objects hold (updated in place, never
        # replaced), built once: the step loop indexes them many times per env step
        self.idx: list[np.ndarray] = [tp.idx for tp in self.topology]  # type: ignore[misc]
        self.struct: list[np.ndarray] = [tp.struct for tp in self.topology]  # type: ignore[misc]
        self.parent = [tp.parent for tp in self.topology]
        self.pos = [tp.pos for tp in self.topology]
        nodes = [self.graph.nodes(name) for name in self.graph.layers]
        self.info = build_infos(self.specs, nodes, self.env, self.topology, self.scenario.name)

    # a layer's open flags are replaced at every close, so they are read from the objects
    open = property(lambda self: [x.transitions.open for x in self.layers])

    def _reset_state(self, envs: np.ndarray) -> None:
        """Fresh episode bookkeeping for the copies in envs [E] (the env itself already reset)."""
        E = self.n_envs
        if not hasattr(self, "layers"):
            self.t = np.zeros(E, dtype=np.int64)
            self.layers = [LayerState(self.topology[i], Transitions(E, inf.n_slots, self.gamma),
                                      self._goal_book(i) if i else None,
                                      np.zeros((E, len(inf.nodes)), dtype=np.float64))
                           for i, inf in enumerate(self.info)]
            self.goals = [None if x.goals is None else x.goals.goals for x in self.layers]   # updated in place
            self.unit_env_return = np.zeros((E, len(self.info[-1].nodes)), dtype=np.float64)
            self._env_actions: np.ndarray | None = None
        self.t[envs] = 0
        for layer in self.layers:
            layer.transitions.reset(envs)
            layer.ep_return[envs] = 0.0
            if layer.goals is not None:
                layer.goals.reset(envs)
        self.unit_env_return[envs] = 0.0
        if self.graph.spatial is not None and self.n_layers >= 2 and envs.any():
            if self.scenario.positions is None:
                raise ScenarioError("the graph groups units spatially but the scenario gives no positions(env)",
                                    "add positions=lambda env: array [E, U, 2] to the Scenario",
                                    where=f"scenario {self.scenario.name!r}")
            regroup(self.topology, np.asarray(self.scenario.positions(self.env)), self.graph.spatial.group_size,
                    envs)

    def reset(self, seed: int | None = None) -> None:
        """Start new episodes in every copy; without a seed the copies' random streams continue."""
        self.env.reset(seed=seed)
        self._reset_state(np.ones(self.n_envs, dtype=bool))
        check_shapes(self.env, self.t, self.scenario.name)
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
        f = self._feat[i]
        if f is None:
            f = self._feat[i] = self._layer_features(i, self.features(i + 1), self.alive[i + 1], self.alive[i])
        return f

    def _layer_features(self, i: int, below: np.ndarray, alive_below: np.ndarray, alive: np.ndarray) -> np.ndarray:
        idx, struct, spec = self.idx[i], self.struct[i], self.specs[i]
        if spec.observe is not None:
            live = struct & agg.gather_children(alive_below, idx)
            ctx = LayerContext(None, alive, self.goals[i], None, self.t, self.env,
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

    def _ground(self, i: int, features: np.ndarray, alive: np.ndarray, goals: np.ndarray | None) -> np.ndarray:
        assert goals is not None                               # layers below the top receive goals
        ctx = LayerContext(features, alive, goals, None, self.t, self.env)
        return ground_goals(self.specs[i - 1], goals, ctx, len(self.info[i].nodes), self.scenario.name)

    def context(self, i: int, alive: np.ndarray | None = None) -> LayerContext:
        """What layer i's hooks see now; children's arrays are gathered only if a hook reads them."""
        children = {}
        if i < self.n_layers - 1:
            idx, struct, alive_below = self.idx[i], self.struct[i], self.alive[i + 1]
            book = self.layers[i + 1].goals
            assert book is not None
            children = dict(child_features=lambda: agg.gather_children(self.features(i + 1), idx),
                            child_alive=lambda: struct & agg.gather_children(alive_below, idx),
                            child_goals=lambda: agg.gather_children(book.goals, idx).copy(),
                            child_holds=lambda: struct & agg.gather_children(book.set, idx))
        return LayerContext(lambda: self.features(i), self.alive[i] if alive is None else alive, self.goals[i],
                            lambda: self.goal_features(i), self.t, self.env, **children)

    def node_obs(self, i: int) -> np.ndarray:
        """Layer i's node observations [E, N, D]: own features (filtered by the layer's attend) plus
        grounded goal."""
        g = self.goal_features(i)
        f = self.features(i)
        if self.specs[i].attend is not None:
            f = attended(self.specs[i], f, self.context(i), self.scenario.name)
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
        live = self._slot_alive[i]
        if live is None:
            children = self.struct[i] & agg.gather_children(self.alive[i + 1], self.idx[i])
            live = self._slot_alive[i] = children.reshape(self.n_envs, -1)
        return live

    def _slot_view(self, i: int, node_values: np.ndarray) -> np.ndarray:
        """Node values [E, N, ...] as slot values [E, S, ...] (per_child pairs take their parent's value)."""
        if self.info[i].choice != "per_child":
            return node_values
        return np.repeat(node_values, self.idx[i].shape[2], axis=1)

    def _slot_of_child(self, i: int) -> np.ndarray:
        """For layer i+1's nodes, the slot of layer i that sets their goal [E, Nc]."""
        parent, pos = self.parent[i + 1], self.pos[i + 1]
        assert parent is not None and pos is not None          # every layer below the top has parents
        if self.info[i].choice == "per_child":
            return parent * self.idx[i].shape[2] + pos
        return parent

    # ---- stepping --------------------------------------------------------------------------
    def step(self, act: Policy) -> StepResult:
        """One env step for every copy, asking `act(decision)` for each deciding layer."""
        return _drive(self.step_iter(), act)

    def decide(self, act: Policy) -> np.ndarray:
        """The decisions of one env step as `step` takes them, without stepping the env: the units'
        actions [E, U, ...] (held until they decide again). No reward, transition or episode end is
        kept: a deployed team (hdppo.runtime) steps its own simulator, writes the next observations
        into the env and calls `refresh`."""
        _drive(self._decisions(), act)
        self.t += 1
        assert self._env_actions is not None
        return self._env_actions

    def step_iter(self, pause: bool = False) -> Generator[Decision | None, np.ndarray | None, StepResult]:
        """Yield a Decision per deciding layer (top-down), receive its actions, return the StepResult.

        With `pause`, yield None once more after the last decision and before the env steps (send
        None to go on): a trainer ending its rollout there has the values of every slot's next
        decision state, which bootstrap the transitions that closed on the rollout's last step."""
        yield from self._decisions()
        if pause:
            yield None
        return self._advance()

    def _decisions(self) -> Generator[Decision | None, np.ndarray | None, None]:
        """Yield a Decision per deciding layer (top-down) and apply the actions it is sent back."""
        L = self.n_layers
        if self._env_actions is None:
            self._env_actions = self._empty_env_actions()
        for i, spec in enumerate(self.specs):
            due = (self.t % spec.interval) == 0
            if not due.any():
                continue
            mask = due[:, None] & self.slot_alive(i)
            amask = self.env.action_mask if i == L - 1 else self.goal_mask(i)
            actions = yield Decision(i, self.decision_obs(i), mask, amask, self.t)
            actions = check_actions(self.info[i], actions, self.n_envs)
            self.layers[i].transitions.start(mask)
            if i == L - 1:
                self._env_actions[mask] = actions[mask]
            else:
                self._assign_goals(i, actions, mask)

    def goal_mask(self, i: int) -> np.ndarray | None:
        """The goals each slot of upper layer i may choose now [E, S, n], from its goal_mask (None without one)."""
        spec = self.specs[i]
        if spec.goal_mask is None:
            return None
        per_child = self.info[i].choice == "per_child"
        legal = legal_goals(spec, self.context(i), self.scenario.name, self.idx[i].shape[2] if per_child else None)
        if legal.ndim == 4:                              # a row per child slot: slots are node-major
            return legal.reshape(self.n_envs, -1, legal.shape[-1])
        return self._slot_view(i, legal)

    def _empty_env_actions(self) -> np.ndarray:
        space = self.env.action_space
        shape = (self.n_envs, len(self.env.units)) + tuple(space.shape or ())
        return np.zeros(shape, dtype=space.dtype if space.dtype is not None else np.int64)

    def _assign_goals(self, i: int, actions: np.ndarray, mask: np.ndarray) -> None:
        """Each living child whose deciding slot is in mask gets its goal from actions."""
        c = i + 1
        slot = self._slot_of_child(i)
        upd = np.take_along_axis(mask, slot, axis=1) & self.alive[c]
        new = np.take_along_axis(actions, slot.reshape(slot.shape + (1,) * (actions.ndim - 2)), axis=1)
        book = self.layers[c].goals
        assert book is not None
        book.assign(upd, new)
        self._goal_feat[c] = None

    def _advance(self) -> StepResult:
        L = self.n_layers
        # _compute_features() below builds new lists, so these keep the pre-step state without copies;
        # goals only change at decisions, so the hooks' goals are the pre-step goals too
        pre_alive, pre_feat, pre_goal_cache = self.alive, self._feat, self._goal_feat
        assert self._env_actions is not None
        step: EnvStep = self.env.step(self._env_actions)
        check_shapes(self.env, self.t, self.scenario.name, step)
        check_finite(step, self.env, self.t, self.scenario.name)
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
        final = FinalView(self, trunc[-1]) if any_trunc else None
        results = []
        for i, spec in enumerate(self.specs):
            ctx = self.context(i, pre_alive[i])
            ctx._lazy["prev_features"] = functools.partial(self._pre_features, i, pre_feat, pre_alive)
            ctx._lazy["prev_goal_features"] = functools.partial(self._pre_goal_features, i, pre_feat, pre_alive,
                                                                pre_goal_cache)
            reward = spec.w_ext * (self._team_reward(ext[-1], ext[i].shape) if spec.shared_reward else ext[i])
            if spec.intrinsic is not None and spec.w_int != 0.0:
                reward = reward + spec.w_int * np.asarray(spec.intrinsic(ctx), dtype=np.float64)
            reward = np.where(pre_alive[i], reward, 0.0)
            self.layers[i].ep_return += reward
            book = self.layers[i].goals
            success = self.specs[i - 1].goal_success if i else None
            if book is not None and success is not None:
                book.mark_achieved(np.asarray(success(ctx), dtype=bool) & pre_alive[i])
            results.append(self._close(i, self._slot_view(i, reward), done, trunc, final))
        episodes = []
        if done.any():
            for layer in self.layers[1:]:
                assert layer.goals is not None
                layer.goals.finish(np.broadcast_to(done[:, None], layer.goals.set.shape))
            episodes = [episode_stats(self, int(e)) for e in np.flatnonzero(done)]
        self.t += 1
        if done.any() and self.autoreset:
            self.env.reset_done(done)
            self._reset_state(done)
            self._compute_features()
        return StepResult(results, step.rewards, done, episodes)

    @staticmethod
    def _team_reward(unit_rewards: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """A shared_reward layer's env reward: every node gets its copy's total over all units [E, N]."""
        return np.broadcast_to(unit_rewards.sum(axis=1, keepdims=True), shape)

    def _goal_book(self, i: int) -> GoalBook:
        space = self.specs[i - 1].goal_space
        assert space is not None                 # every layer above the bottom has one (Scenario.build_layers)
        return GoalBook(self.n_envs, len(self.info[i].nodes), space)

    def _pre_goal_features(self, i: int, cache: list, alive: list, goal_cache: list) -> np.ndarray:
        """Layer i's grounded goals before this env step."""
        if goal_cache[i] is not None:
            return goal_cache[i]
        return self._ground(i, self._pre_features(i, cache, alive), alive[i], self.goals[i])

    def _pre_features(self, i: int, cache: list, alive: list) -> np.ndarray:
        """Layer i's features before this env step, from the pre-step cache (filled in on demand;
        a use_state layer then carries the post-step state)."""
        if cache[i] is None:
            cache[i] = self._layer_features(i, self._pre_features(i + 1, cache, alive), alive[i + 1], alive[i])
        return cache[i]

    def _close(self, i: int, slot_reward: np.ndarray, done: np.ndarray, trunc: list[np.ndarray],
               final: FinalView | None = None) -> LayerStep:
        """Accrue this step's reward on layer i's open slots and close the finished transitions."""
        tr = self.layers[i].transitions
        tr.accrue(slot_reward)
        ended = done[:, None] | ~self.slot_alive(i)
        if not (ended & tr.open).any():
            slot_trunc = np.zeros_like(ended)
        elif self.info[i].choice == "per_child":
            slot_trunc = agg.gather_children(trunc[i + 1], self.idx[i]).reshape(self.n_envs, -1)
        else:
            slot_trunc = trunc[i]
        out = tr.close(((self.t + 1) % self.specs[i].interval) == 0, ended, slot_trunc)
        final_obs = final.decision_obs(i) if out.truncated.any() and final is not None else None
        return LayerStep(out.closed, out.reward, out.discount, out.terminal, out.truncated, final_obs)

    def pop_goal_counts(self) -> dict[str, tuple[int, int]]:
        """(goals finished, goals achieved) per layer since the last call (layers whose goals have a
        goal_success test and finished at least one goal); counts add up across workers."""
        out = {}
        for i, layer in enumerate(self.layers[1:], start=1):
            assert layer.goals is not None
            n, ok = layer.goals.pop_counts()
            if n and self.specs[i - 1].goal_success is not None:
                out[self.specs[i].name] = (n, ok)
        return out

    def pop_goal_stats(self) -> dict[str, float]:
        """Goal success rate per layer since the last call (layers that receive goals)."""
        return {name: ok / n for name, (n, ok) in self.pop_goal_counts().items()}

    def close(self) -> None:
        self.env.close()


def _drive(gen: Generator[Decision | None, np.ndarray | None, Any], act: Policy) -> Any:
    """Run a decision generator to its end, answering each Decision with `act`; its return value."""
    try:
        decision = next(gen)
        while True:
            assert decision is not None        # the generators pause only when asked to
            decision = gen.send(act(decision))
    except StopIteration as stop:
        return stop.value
