"""What a frame shows: a scenario's scene (units, opponents, landmarks), the team drawn over it, and
the drawing of both as an RGB array.

A scenario that renders gives `Scenario.scene(env) -> Scene` (env: its PettingZoo env) and its env's
`render()` returns `render_frame(self, scene(self))` for render_mode="rgb_array". `hdppo render`
(hdppo.runtime.render) adds the team's `Overlay` (squads and goals) to each frame.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

if TYPE_CHECKING:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

SQUAD_COLOURS = ["#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#bcbd22", "#8c564b", "#e377c2", "#7f7f7f"]


@dataclass
class Scene:
    """What a frame shows, in world coordinates (x right, y up) inside `extent` (xmin, xmax, ymin, ymax)."""

    extent: tuple[float, float, float, float]
    units: np.ndarray                           # [U, 2]
    alive: np.ndarray                           # [U] bool
    enemies: np.ndarray | None = None           # [K, 2]
    enemies_alive: np.ndarray | None = None     # [K] bool
    landmarks: np.ndarray | None = None         # [P, 2]: points, targets, zones
    landmark_colours: list[str] | None = None
    walls: np.ndarray | None = None             # [W, 2] cells drawn as grey squares
    title: str = ""


@dataclass
class Overlay:
    """The team drawn over a scene: squads by colour, squad goals (lines from the squad's centroid to its
    target, a star there) and unit goals (thin lines, a cross at the target)."""

    groups: list[list[int]] = field(default_factory=list)   # unit indices per squad
    squad_targets: np.ndarray | None = None                  # [G, 2], NaN: no place
    unit_targets: np.ndarray | None = None                   # [U, 2]


class Canvas:
    """A reusable matplotlib figure that turns scenes into RGB arrays (Agg, no display)."""

    def __init__(self, pixels: int = 320) -> None:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        self.fig = plt.figure(figsize=(pixels / 80, pixels / 80), dpi=80)
        self.ax = self.fig.add_axes((0, 0, 1, 0.93))

    def draw(self, scene: Scene, overlay: Overlay | None = None) -> np.ndarray:
        ax = self.ax
        ax.clear()
        x0, x1, y0, y1 = scene.extent
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        if scene.walls is not None and len(scene.walls):
            ax.scatter(scene.walls[:, 0], scene.walls[:, 1], marker="s", s=30, c="#cccccc", zorder=1)
        if scene.landmarks is not None:
            colours = scene.landmark_colours or ["#ff7f0e"] * len(scene.landmarks)
            ax.scatter(scene.landmarks[:, 0], scene.landmarks[:, 1], marker="D", s=70, c=colours,
                       edgecolors="black", linewidths=0.5, zorder=2)
        colour = np.array(["#444444"] * len(scene.units), dtype=object)
        groups = overlay.groups if overlay is not None else []
        for g, members in enumerate(groups):
            colour[members] = SQUAD_COLOURS[g % len(SQUAD_COLOURS)]
        if overlay is not None and overlay.unit_targets is not None:
            for u in np.flatnonzero(scene.alive & np.isfinite(overlay.unit_targets).all(axis=1)):
                (ux, uy), (tx, ty) = scene.units[u], overlay.unit_targets[u]
                ax.plot([ux, tx], [uy, ty], color=colour[u], alpha=0.35, linewidth=0.8, zorder=3)
                ax.scatter([tx], [ty], marker="x", s=25, c=[colour[u]], zorder=3)
        if overlay is not None and overlay.squad_targets is not None:
            for g, members in enumerate(groups):
                living = [u for u in members if scene.alive[u]]
                if not living or g >= len(overlay.squad_targets) or not np.isfinite(overlay.squad_targets[g]).all():
                    continue
                cx, cy = scene.units[living].mean(axis=0)
                tx, ty = overlay.squad_targets[g]
                c = SQUAD_COLOURS[g % len(SQUAD_COLOURS)]
                ax.plot([cx, tx], [cy, ty], color=c, linewidth=2.0, zorder=4)
                ax.scatter([tx], [ty], marker="*", s=160, c=[c], edgecolors="black", linewidths=0.5, zorder=5)
        live = scene.alive
        ax.scatter(scene.units[live, 0], scene.units[live, 1], s=45, c=list(colour[live]), edgecolors="black",
                   linewidths=0.5, zorder=6)
        ax.scatter(scene.units[~live, 0], scene.units[~live, 1], s=20, marker="x", c="#999999", zorder=6)
        if scene.enemies is not None:
            ea = np.ones(len(scene.enemies), bool) if scene.enemies_alive is None else scene.enemies_alive
            ax.scatter(scene.enemies[ea, 0], scene.enemies[ea, 1], s=45, c="#d62728", marker="^",
                       edgecolors="black", linewidths=0.5, zorder=6)
        self.fig.suptitle(scene.title, fontsize=8, y=0.99)
        self.fig.canvas.draw()
        canvas = cast("FigureCanvasAgg", self.fig.canvas)      # matplotlib.use("Agg") above
        return np.asarray(canvas.buffer_rgba())[..., :3].copy()

    def close(self) -> None:
        import matplotlib.pyplot as plt
        plt.close(self.fig)


def render_frame(env: Any, scene: Scene, overlay: Overlay | None = None) -> np.ndarray | None:
    """An env's render(): the scene as an RGB array when render_mode is "rgb_array", else None."""
    if getattr(env, "render_mode", None) != "rgb_array":
        return None
    canvas = env.__dict__.get("_canvas")
    if canvas is None:
        canvas = env._canvas = Canvas()
    return canvas.draw(scene, overlay)
