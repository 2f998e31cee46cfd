"""Skill training (`hdppo train SCENARIO --skills`): the bottom layer alone learns to reach the goals
the layers above give it, rewarded by its goal reward only (`w_ext` 0, `w_int` 1, unless its config sets them),
while the untrained layers above sample the goals: with their scenario's `scripted` controller
where they have one (a scenario's own goal sampler), else uniformly over the goal space."""
from __future__ import annotations

import dataclasses

from hdppo.engine.spec import RunSpec
from hdppo.errors import ConfigError

SKILL_WEIGHTS = {"w_ext": 0.0, "w_int": 1.0}     # the bottom layer's reward: its goal reward alone


def skill_spec(spec: RunSpec, layer_flag: str = "all") -> RunSpec:
    """`spec` turned into a skill run: its bottom layer trained on SKILL_WEIGHTS where the config sets no weight."""
    resolved = spec.resolve()
    specs = resolved.scenario.build_layers(resolved.config)
    name = resolved.scenario.name
    if len(specs) < 2:
        raise ConfigError(f"scenario {name!r} has one layer here, so its units receive no goals to learn",
                          "train skills on a configuration with layers above the units (e.g. layers=3)")
    bottom = specs[-1]
    if layer_flag not in ("all", bottom.name):
        raise ConfigError(f"--skills trains the bottom layer {bottom.name!r}, not --layer {layer_flag}",
                          f"drop --layer, or pass --layer {bottom.name}")
    if bottom.intrinsic is None:
        raise ConfigError(f"layer {bottom.name!r} of scenario {name!r} has no intrinsic reward, so with "
                          f"w_ext.{bottom.name}=0 its skills would learn from nothing",
                          "give the bottom Layer an intrinsic(ctx) reward for reaching its goal "
                          "(docs/writing-a-scenario.md), or train with --layer and your own weights")
    extra = {f"{key}.{bottom.name}": value for key, value in SKILL_WEIGHTS.items()
             if bottom.name not in (getattr(resolved.config, key, None) or {})}     # set in the config: it wins
    return dataclasses.replace(spec, layers=[bottom.name], scenario_overrides={**spec.scenario_overrides, **extra},
                               resolved=None)
