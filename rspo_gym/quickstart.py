"""``rspo-gym quickstart``: an agent that learns ALFWorld with RSPO on a CPU, with a curve.

The main job of the suite, end to end on an embedded default with no downloads:

1. load the ``tiny-alfworld`` model: the offline ``tiny`` model after our behaviour cloning of
   ALFWorld's expert (``policies/warmstart.py``; shipped, because that cloning takes 35-40 CPU
   minutes), or, with ``warm_start=True``, build ``tiny`` and clone the expert here;
2. train RSPO (base GRPO by default) on a small fixed set of generated training tasks;
3. evaluate on held-out tasks before RL and every few iterations, within a time budget;
4. write ``metrics.csv`` / ``metrics.jsonl``, ``config.json``, ``checkpoint.pt`` (+ ``checkpoint_tensors/``), the trained
   ``policy/``, ``learning_curve.png`` and ``summary.md`` to the output folder.

For ALFWorld the task set is one task type (default ``pick_and_place_simple``): training tasks from
the ``train`` split, held-out tasks of the same type from ``valid_seen``. For WebShop it is
``train`` goals and the first ``test`` goals.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

__all__ = ["QuickstartConfig", "run_quickstart", "alfworld_task_ids"]


@dataclass
class QuickstartConfig:
    """What the quick start runs; the defaults fit about 10 minutes on 2 CPU cores."""

    env_id: str = "rspo/ALFWorld-v0"
    """Environment (``rspo/ALFWorld-v0`` or ``rspo/WebShop-v0``)."""
    base: str = "grpo"
    """RSPO's base algorithm: ``grpo``, ``ppo`` or ``gigpo``."""
    swap: str = "explorer"
    """RSPO's swap: ``explorer``, ``rank`` or ``anneal``."""
    model: str | None = None
    """Model preset, Hugging Face id or local path; None: the env's clone, ``tiny-alfworld`` or
    ``tiny-webshop``."""
    warm_start: bool = False
    """Clone the expert before RL (``WarmStartConfig`` defaults: ~35-40 CPU minutes for ``tiny``)."""
    history_length: int | None = None
    """Past steps in the prompt; None: what the env's clone was trained with (ALFWorld 6, WebShop 2)."""
    task_type: str = "pick_and_place_simple"
    """ALFWorld task type of the small task set."""
    train_tasks: int = 64
    """Size of the fixed training task set."""
    eval_tasks: int = 30
    """Held-out tasks per evaluation."""
    budget_minutes: float = 9.0
    """Wall-clock limit of the whole run: training stops early enough for the run, its last
    evaluation included, to end within it (saving the policy and the plot takes seconds more).
    Loading the model and the first held-out evaluation (about a minute on 2 cores) are not cut
    short, so a budget below them ends right after them, with the start measured and no training."""
    iterations: int = 40
    """Upper bound on RL iterations."""
    eval_every: int = 2
    """Held-out evaluation every this many iterations (and at the end)."""
    output_dir: str = "results/quickstart"
    """Where everything is written."""
    seed: int = 0
    """Seed of the model, the warm start and training."""
    trainer_overrides: dict[str, Any] = field(
        default_factory=lambda: {
            "learning_rate": 3e-4, "max_turns": 25, "eval_temperature": 0.5, "num_groups": 4, "group_size": 4
        }
    )
    """``RSPOConfig`` fields (the tiny clone needs low-temperature sampling: greedy decoding loops)."""
    warm_start_overrides: dict[str, Any] = field(default_factory=dict)
    """Extra ``WarmStartConfig`` fields."""


def alfworld_task_ids(split: str, task_type: str, count: int) -> list[int]:
    """The first ``count`` task ids of ``split`` whose generated task has ``task_type``."""
    from rspo_gym.envs.alfworld.tasks import GeneratedTasks

    tasks = GeneratedTasks(split)
    ids: list[int] = []
    task_id = 0
    while len(ids) < count and (tasks.size is None or task_id < tasks.size):
        if tasks.world(task_id).task.task_type == task_type:
            ids.append(task_id)
        task_id += 1
    if not ids:
        raise ValueError(f"no {task_type!r} tasks in split {split!r}")
    return ids


def _is_alfworld(config: QuickstartConfig) -> bool:
    return "alfworld" in config.env_id.lower()


def resolved(config: QuickstartConfig) -> QuickstartConfig:
    """``config`` with its env-dependent defaults (model, history length) filled in."""
    alfworld = _is_alfworld(config)
    return replace(
        config,
        model=config.model or ("tiny-alfworld" if alfworld else "tiny-webshop"),
        history_length=config.history_length if config.history_length is not None else (6 if alfworld else 2),
    )


def task_sets(config: QuickstartConfig) -> dict[str, Any]:
    """The training and held-out task ids (and splits) of the quick start's env, as trainer fields."""
    if _is_alfworld(config):
        return {
            "train_task_ids": alfworld_task_ids("train", config.task_type, config.train_tasks),
            "eval_task_ids": alfworld_task_ids("valid_seen", config.task_type, config.eval_tasks),
            "eval_split": "valid_seen",
        }
    return {
        "train_task_ids": list(range(config.train_tasks)),
        "env_kwargs": {"split": "train"},
        "eval_task_ids": list(range(config.eval_tasks)),
        "eval_split": "test",
    }


def run_quickstart(config: QuickstartConfig = QuickstartConfig()) -> dict[str, Any]:
    """Run the quick start; returns the summary (also written to ``summary.md`` / ``summary.json``)."""
    from rspo_gym.algos.rspo import RSPOTrainer
    from rspo_gym.plotting import plot_learning_curve
    from rspo_gym.policies.llm import LLMPolicy
    from rspo_gym.policies.models import load_model
    from rspo_gym.policies.warmstart import WarmStartConfig, warm_start

    start = time.perf_counter()
    config = resolved(config)
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    network, tokenizer = load_model(config.model, seed=config.seed)
    policy = LLMPolicy(network, tokenizer, value_head=config.base == "ppo", seed=config.seed)
    tasks = task_sets(config)
    warm_history: list[dict] = []
    if config.warm_start:
        warm = WarmStartConfig(seed=config.seed, history_length=config.history_length)
        if _is_alfworld(config):
            warm = replace(warm, task_types=(config.task_type,))
        else:  # WebShop goals have no task types; clone on the train goals (as tiny-webshop was)
            warm = replace(warm, task_types=None, env_kwargs=(("split", "train"),), episodes=400, epochs=3)
        warm = replace(warm, **config.warm_start_overrides)
        print(f"[1/3] warm start: cloning the expert on {config.env_id} ...", flush=True)
        warm_history = warm_start(policy, config.env_id, warm)
        print(f"      done in {time.perf_counter() - start:.0f} s (final loss {warm_history[-1]['loss']:.3f})", flush=True)
    else:
        print(f"[1/3] starting from the {config.model!r} model", flush=True)
    trainer = RSPOTrainer(
        config.env_id,
        model=policy,
        base=config.base,
        swap=config.swap,
        seed=config.seed,
        iterations=config.iterations,
        eval_every=config.eval_every,
        output_dir=str(out),
        history_length=config.history_length,
        **tasks,
        **config.trainer_overrides,
    )
    print("[2/3] held-out evaluation of the starting policy ...", flush=True)
    before = trainer.evaluate()
    budget = 60.0 * config.budget_minutes - (time.perf_counter() - start)
    print(f"[3/3] RSPO-{config.base} ({config.swap}) on {len(tasks['train_task_ids'])} training tasks ...", flush=True)
    # a new run, not a resume: a previous quick start's record in the folder is replaced
    history = trainer.learn(config.iterations, time_budget_s=budget, overwrite=True)  # also writes policy/ and config.json
    summary = _summarise(config, before, history, time.perf_counter() - start, warm_history)
    title = f"RSPO-{config.base} on {config.env_id} ({config.model})"
    plot_learning_curve(history, out / "learning_curve.png", title=title, start=before)  # the curve with iteration 0
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(_markdown(summary), encoding="utf-8")
    trainer.close()
    print(_markdown(summary))
    written = ("metrics.csv", "learning_curve.png", "summary.md", "config.json", "checkpoint.pt", "checkpoint_tensors/", "policy/")
    print(f"results in {out}/ ({', '.join(name for name in written if (out / name).exists())})")
    return summary


def _summarise(config, before, history, seconds, warm_history) -> dict[str, Any]:
    evaluations = [(0, before["eval/success"])] + [(row["iteration"], row["eval/success"]) for row in history if "eval/success" in row]
    return {
        "config": asdict(config),
        "held_out_success_before_rl": before["eval/success"],
        "held_out_success_after_rl": evaluations[-1][1],
        "best_held_out_success": max(v for _, v in evaluations),
        "evaluations": evaluations,
        "iterations": len(history),
        "warm_start_final_loss": warm_history[-1]["loss"] if warm_history else None,
        "warm_start_rows": warm_history[-1]["rows"] if warm_history else 0,
        "seconds": seconds,
    }


def _markdown(summary: dict[str, Any]) -> str:
    c = summary["config"]
    lines = [
        f"# Quick start: RSPO-{c['base']} ({c['swap']}) on {c['env_id']}",
        "",
        f"- model `{c['model']}`, {c['train_tasks']} training tasks, {c['eval_tasks']} held-out tasks"
        + (f" of type `{c['task_type']}`" if "alfworld" in c["env_id"].lower() else ""),
        f"- held-out success before RL: {summary['held_out_success_before_rl']:.1%}",
        f"- held-out success after {summary['iterations']} RL iterations: {summary['held_out_success_after_rl']:.1%}"
        f" (best {summary['best_held_out_success']:.1%})",
        f"- wall time: {summary['seconds'] / 60:.1f} min",
        "",
        "| iteration | held-out success |",
        "|---|---|",
    ]
    lines += [f"| {it} | {value:.1%} |" for it, value in summary["evaluations"]]
    return "\n".join(lines) + "\n"
