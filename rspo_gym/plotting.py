"""The suite's figures; matplotlib is optional: without it a figure is skipped with one line
saying so, and the numbers stay in the files beside it.

- ``plot_learning_curve``: ``learning_curve.png``, success (and WebShop's score) against
  iteration, from a metric history. Shared by ``Trainer.learn`` (every run folder gets one) and
  the quick start (which adds the evaluation of the starting policy at iteration 0).
- ``forest_plot``: paired differences, one row each, the 95 % interval as a bar and 0 marked:
  what a comparison claims, readable at a glance (``rspo-gym compare``, the results pages).
- ``curves_with_bands``: held-out curves of several groups, each with its 95 % band, one panel
  per group beside a shared panel of the means, so no band hides another.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rspo_gym.atomic import atomic_write

__all__ = ["plot_learning_curve", "forest_plot", "curves_with_bands", "Band"]

#: A verdict's colour in a forest plot: better, worse, or no difference at this noise.
_VERDICT_COLOURS = {"better": "tab:green", "worse": "tab:red"}


def _series(history: Sequence[dict[str, Any]], key: str, start: dict[str, Any] | None = None) -> list[tuple[int, float]]:
    """``(iteration, value)`` where ``key`` was measured (evaluations only every few iterations)."""
    points = [(0, float(start[key]))] if start is not None and key in start else []
    return points + [(int(row["iteration"]), float(row[key])) for row in history if key in row]


def _scores_differ(history: Sequence[dict[str, Any]]) -> bool:
    """Whether the score says more than success (WebShop's partial credit; ALFWorld's score is the win)."""
    return any(f"{p}/score" in row and row[f"{p}/score"] != row[f"{p}/success"] for row in history for p in ("rollout", "eval"))


def _pyplot(path: Path):
    """matplotlib's pyplot on the Agg backend, or None (said in one line) when not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no {path.name} (pip install matplotlib)")
        return None
    return plt


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
    plt = _pyplot(path)
    if plt is None:
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


def forest_plot(rows: Sequence[dict[str, Any]], path: str | Path, *, title: str, xlabel: str = "difference (95 % interval)") -> bool:
    """Write a forest plot of ``rows`` to ``path``; False when matplotlib is missing.

    Each row is a dict with ``label``, ``difference``, ``ci_low`` and ``ci_high`` (``summary.json``'s
    differences carry the last three), and optionally ``verdict`` (colours the row: green better,
    red worse, grey no difference). Rows are drawn top to bottom in the order given, the interval
    as a bar, the difference as a dot and 0 as a vertical line.
    """
    path = Path(path)
    plt = _pyplot(path)
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(7, 1.1 + 0.42 * max(len(rows), 1)), dpi=120)
    for y, row in enumerate(reversed(list(rows))):
        colour = _VERDICT_COLOURS.get(row.get("verdict", ""), "0.35")
        ax.plot([row["ci_low"], row["ci_high"]], [y, y], color=colour, linewidth=5, alpha=0.55, solid_capstyle="butt")
        ax.plot([row["difference"]], [y], "o", color=colour, markersize=6)
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [row["label"] for row in reversed(list(rows))], fontsize=8)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel(xlabel)
    fig.suptitle(textwrap.fill(title, 90), fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight", pad_inches=0.1)  # long row labels push a long x label past the figure's edge
    plt.close(fig)
    return True


@dataclass(frozen=True)
class Band:
    """One group's curve: ``x`` (iterations or env steps), its ``mean`` and 95 % band (``low``, ``high``)."""

    label: str
    x: Sequence[float]
    mean: Sequence[float]
    low: Sequence[float]
    high: Sequence[float]


def curves_with_bands(bands: Sequence[Band], path: str | Path, *, title: str, xlabel: str = "RL iteration",
                      ylabel: str = "held-out success") -> bool:
    """Write the curves of ``bands`` to ``path``; False when matplotlib is missing.

    The first panel overlays the means (which rises first, which ends higher); each group then
    has a panel of its own with its band, on the same axes, so overlapping bands hide nothing.
    """
    path = Path(path)
    plt = _pyplot(path)
    if plt is None:
        return False
    panels = 1 + len(bands)
    columns = min(panels, 4)
    rows = -(-panels // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.4 * columns, 2.9 * rows), dpi=110, sharex=True, sharey=True, squeeze=False)
    flat = [ax for row in axes for ax in row]
    for k, band in enumerate(bands):
        colour = f"C{k % 10}"
        flat[0].plot(band.x, band.mean, color=colour, marker="o", markersize=3, label=band.label)
        ax = flat[k + 1]
        ax.fill_between(band.x, band.low, band.high, color=colour, alpha=0.25, linewidth=0)
        ax.plot(band.x, band.mean, color=colour, marker="o", markersize=3)
        ax.set_title(band.label, fontsize=8)
    flat[0].set_title("means", fontsize=8)
    flat[0].legend(fontsize=6)
    for ax in flat[panels:]:
        ax.axis("off")
    for ax in flat[:panels]:
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel(xlabel)
    for row in axes:
        row[0].set_ylabel(ylabel)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
