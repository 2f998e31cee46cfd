"""Use a trained team outside training: `hdppo.load(RUN)` -> Team; `act(observations)` per env step.

`hdppo.runtime.onnx_team.OnnxTeam` runs a team exported with `hdppo export` (onnxruntime, no torch).
"""
from hdppo.runtime.host_env import HostEnv
from hdppo.runtime.team import LayerDescription, Team, load

__all__ = ["HostEnv", "LayerDescription", "Team", "load"]
