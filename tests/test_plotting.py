"""``rspo_gym.plotting``: figures the pages show whole."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

import matplotlib.image  # noqa: E402

from rspo_gym.plotting import forest_plot  # noqa: E402


def test_a_forest_plots_long_labels_are_not_cut_at_the_image_edge(tmp_path):
    rows = [{"label": "PPO: agent-helpful − outcome-nm-matched (5 seeds)", "difference": 0.003, "ci_low": -0.136,
             "ci_high": 0.141, "verdict": "none"}]
    path = tmp_path / "forest.png"
    assert forest_plot(rows, path, title="a title", xlabel="difference of final held-out success at equal total env steps")
    image = matplotlib.image.imread(path)
    edges = {"left": image[:, 0, :3], "right": image[:, -1, :3], "top": image[0, :, :3], "bottom": image[-1, :, :3]}
    inked = [side for side, pixels in edges.items() if (pixels < 0.9).any()]
    assert not inked, f"text or lines reach the {inked} edge: something is cut off"
