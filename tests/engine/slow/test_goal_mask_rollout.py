"""A trained upper layer with a goal mask samples, stores and learns under it (tests/fixtures/goal_masked_grid.py)."""
from __future__ import annotations

import numpy as np
import torch

from hdppo.engine.config import resolve_overrides, train_config_to_dict
from hdppo.engine.params import MemoryParams
from hdppo.engine.worker import Worker, WorkerSpec
from tests.helpers import TESTS
from tests.helpers.engine import GRID_LAYERS

SCENARIO = str(TESTS / "fixtures" / "goal_masked_grid.py")


def test_the_commander_and_squads_sample_only_legal_goals_and_their_batches_keep_the_masks() -> None:
    tc, _ = resolve_overrides({"envs_per_worker": "8", "rollout": "8", "minibatches": "1"}, GRID_LAYERS, set())
    w = Worker(WorkerSpec(SCENARIO, {}, train_config_to_dict(tc), 0, GRID_LAYERS), MemoryParams())
    batches: dict[str, list] = {"high": [], "mid": []}
    while min(sum(len(b) for b in got) for got in batches.values()) < 60:
        for name in w.collect().due:
            if name != "low":
                batches[name].append(w.by_name[name].batch)
    for name, got in batches.items():
        assert all(b.action_mask is not None for b in got), f"{name}: the batch lost the goal masks"
        masks = np.concatenate([b.action_mask for b in got])
        actions = np.concatenate([b.actions for b in got]).reshape(-1, 1).astype(np.int64)
        assert not masks[:, 3].any() and set(masks.sum(-1).tolist()) <= {2, 3}, f"{name}: not the fixture's masks"
        assert np.take_along_axis(masks, actions, axis=1).all(), f"{name}: a sampled goal was masked"
        b = got[-1]
        # the learner scores the batch under its masks: an illegal goal has no probability
        net = w.by_name[name].net
        with torch.no_grad():
            dist = net.distribution(torch.from_numpy(b.obs), torch.from_numpy(b.action_mask), None)
            illegal = torch.full((len(b),), 3)                                # the last target
            assert dist.log_prob(illegal).exp().max() < 1e-6
        g = w.gradient(name, 0, 0)
        assert g.grad is not None and np.isfinite(g.grad).all()
