"""``learning_curve.png``: success (and WebShop's score) against iteration, from a metric history.

Shared by ``Trainer.learn`` (every run folder gets one) and the quick start (which adds the
evaluation of the starting policy at iteration 0). matplotlib is optional: without it the curve
is skipped with one line saying so, and ``metrics.csv`` still has every number.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from rspo_gym.atomic import atomic_write

__all__ = ["plot_learning_curve"]


def _series(history: Sequence[dict[str, Any]], key: str, start: dict[str, Any] | None = None) -> list[tuple[int, float]]:
    """``(iteration, value)`` where ``key`` was measured (evaluations only every few iterations)."""
    points = [(0, float(start[key]))] if start is not None and key in start else []
    return points + [(int(row["iteration"]), float(row[key])) for row in history if key in row]


def _scores_differ(history: Sequence[dict[str, Any]]) -> bool:
    """Whether the score says more than success (WebShop's partial credit; ALFWorld's score is the win)."""
    return any(f"{p}/score" in row and row[f"{p}/score"] != row[f"{p}/success"] for row in history for p in ("rollout", "eval"))


def plot_learning_curve(
    history: Sequence[dict[str, Any]], path: str | Path, *, title: str, start: dict[str, Any] | None = None,
    held_out_bands: Sequence[tuple[int, float, float]] = (),
) -> bool:
    """Write the curve of ``history`` (``Trainer.learn``'s rows) to ``path``; False when skipped.

    Training-rollout success is drawn every iteration, held-out (``eval/``) success where it was
    measured, with ``start`` (an ``evaluate()`` of the starting policy) at iteration 0; scores are
    drawn dashed when they differ from success. ``held_out_bands`` (iteration, low, high) shades
    the held-out success's interval, so a reader sees which changes are larger than the noise.
    """
    path = Path(path)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no {path.name} (pip install matplotlib)")
        return False
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    curves = [("rollout/success", "0.6", "-", "training success"), ("eval/success", "C0", "-", "held-out success")]
    if _scores_differ(history):
        curves += [("rollout/score", "0.6", "--", "training score"), ("eval/score", "C0", "--", "held-out score")]
    for key, color, style, label in curves:
        points = _series(history, key, start if key.startswith("eval/") else None)
        if points:
            marker = "o" if key.startswith("eval/") else None
            ax.plot(*zip(*points), color=color, linestyle=style, marker=marker, label=label)
    if held_out_bands:
        iterations, lows, highs = zip(*held_out_bands)
        ax.fill_between(iterations, lows, highs, color="C0", alpha=0.2, label="held-out 95 % interval")
    ax.set_xlabel("RL iteration (0 = the starting policy)" if start is not None else "RL iteration")
    ax.set_ylabel("success rate" if len(curves) == 2 else "success rate / score")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.legend(loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    try:
        with atomic_write(path, "wb") as f:  # a full disk leaves the previous curve
            fig.savefig(f, format=path.suffix.lstrip(".") or "png")
    finally:
        plt.close(fig)
    return True
