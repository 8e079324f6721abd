"""Metric reporters beside a run's own ``metrics.jsonl`` / ``metrics.csv``: TensorBoard or W&B.

``report_to`` takes TRL's names: ``"none"``, ``"tensorboard"`` or ``"wandb"``. Each backend is
imported only when asked for, and ``check_report_to`` says in one line what to install when it is
missing, so a trainer fails at construction rather than after its first iteration.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

__all__ = ["REPORT_TO", "check_report_to", "make_reporter"]

REPORT_TO = ("none", "tensorboard", "wandb")
_PACKAGES = {
    "tensorboard": ("tensorboard", "pip install tensorboard (the [llm] extra includes it)"),
    "wandb": ("wandb", "pip install wandb, then `wandb login` (or set WANDB_MODE=offline)"),
}


def check_report_to(report_to: str) -> None:
    """Raise ``ValueError`` for an unknown ``report_to`` or one whose package is not installed."""
    if report_to not in REPORT_TO:
        raise ValueError(f"report_to must be one of {REPORT_TO}, got {report_to!r}")
    if report_to in _PACKAGES:
        package, install = _PACKAGES[report_to]
        if importlib.util.find_spec(package) is None:
            raise ValueError(f"report_to={report_to!r} needs the {package} package, which is not installed: {install}")


def _scalars(metrics: dict[str, Any]) -> dict[str, float]:
    return {key: float(value) for key, value in metrics.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "iteration"}


class TensorBoardReporter:
    """Event files in ``<output_dir>/tensorboard`` (``tensorboard --logdir runs``).

    ``first_step``: the step this writer logs first. Events of that step and later left by an
    interrupted run (iterations logged after its last checkpoint, which a resume trains again) are
    purged, so the curves show each iteration once, as ``metrics.jsonl`` does.
    """

    def __init__(self, output_dir: Path, first_step: int = 1):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(output_dir / "tensorboard"), purge_step=first_step)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        for key, value in _scalars(metrics).items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbReporter:
    """A Weights & Biases run named after the run folder, with the config as its config."""

    def __init__(self, output_dir: Path, config: dict[str, Any]):
        import wandb

        self.run = wandb.init(name=output_dir.name, dir=str(output_dir), config=config)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self.run.log(_scalars(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


def make_reporter(
    report_to: str, output_dir: Path, config: dict[str, Any], first_step: int = 1
) -> TensorBoardReporter | WandbReporter | None:
    """The reporter of ``report_to`` writing for the run in ``output_dir`` from ``first_step`` on;
    None for ``"none"``."""
    check_report_to(report_to)
    if report_to == "tensorboard":
        return TensorBoardReporter(output_dir, first_step)
    if report_to == "wandb":
        return WandbReporter(output_dir, config)
    return None
