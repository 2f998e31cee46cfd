"""Errors that reach the user as one clear message (no traceback unless --debug)."""
from __future__ import annotations


class HdppoError(Exception):
    """An error the CLI reports as `problem` + `fix`, exiting non-zero."""

    def __init__(self, problem: str, fix: str = "", *, where: str = "") -> None:
        self.problem = problem
        self.fix = fix
        self.where = where
        super().__init__(self.message())

    def message(self) -> str:
        head = f"{self.where}: {self.problem}" if self.where else self.problem
        return f"{head}\n  fix: {self.fix}" if self.fix else head


class ScenarioError(HdppoError):
    """A scenario file, its graph, its layers or its config is wrong."""


class GraphError(ScenarioError):
    """The agent graph breaks a rule of the agent graph (docs/architecture.md) (layering, leaves, cycles)."""


class ConfigError(HdppoError):
    """A config value or override is malformed or unknown."""
