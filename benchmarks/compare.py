"""The algorithm comparison: {GRPO, PPO, GiGPO} x {outcome, dense, RSPO-explorer, -rank, -anneal} x seeds.

Every cell starts from the same policy (``tiny-alfworld`` on ALFWorld, ``tiny-webshop`` on WebShop:
the tiny model after our behaviour cloning of the env's expert; ``tiny`` elsewhere), trains on the same named task set until the
same number of env steps (learner and explorer steps both count), then is evaluated once on the
same held-out tasks with the same evaluation seed (a preset may instead measure WebShop's curve on
its few training goals, with held-out goals at start and end: ``webshop_eval_repeats``). The starting policy is evaluated once per env
(``<out>/initial/<env>.json``; the evaluation seed does not depend on the training seed, so every
cell starts from that number). Each cell runs in a fresh process (``--jobs`` at a time, torch
threads split between them), so its peak RSS is its own. Cells are written to
``<out>/cells/<env>-<algo>-<variant>-seed<k>.json`` as they finish and are not rerun, so an
interrupted comparison resumes where it stopped. Presets with ``eval_every`` also record a
held-out learning curve per cell. At the end it writes ``<out>/compare.json``, a markdown table
``<out>/compare.md`` (mean ± std over seeds of success, WebShop score, wall time per
iteration, peak RSS, generated tokens; with curves, one row per cell and evaluation) and one plot
per env.

    python benchmarks/compare.py --preset cpu-small      # <= 60 min on 2 cores (ALFWorld)
    python benchmarks/compare.py --preset curves --jobs 2  # every combination, both envs, curves
    python benchmarks/compare.py --preset learning --jobs 2  # 11 cells x 2 envs at the quick start's scale
    python benchmarks/compare.py --preset fast --jobs 2  # the fast policy: 11 cells x 2 envs x 10 seeds, intervals
    bash benchmarks/gpu_compare.sh                       # one GPU: SmolLM2-135M-Instruct through vLLM, ALFWorld
    python benchmarks/compare.py --preset micro          # seconds: checks the pipeline
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import run_fresh, write_json  # noqa: E402

BASES = ("grpo", "ppo", "gigpo")
VARIANTS = ("outcome", "dense", "rspo-explorer", "rspo-rank", "rspo-anneal")


@dataclass(frozen=True)
class Preset:
    """One comparison's size."""

    envs: tuple[str, ...]
    seeds: tuple[int, ...]
    env_steps: int
    """Env-step budget per cell (learner + explorer)."""
    eval_tasks: int
    bases: tuple[str, ...] = BASES
    variants: tuple[str, ...] = VARIANTS[:4]
    trainer: dict = field(default_factory=dict)
    eval_every: int = 0
    """Held-out evaluation every this many iterations (a learning curve); 0: only at the end."""
    rspo: dict = field(default_factory=dict)
    """Extra ``RSPOConfig`` fields for the RSPO variants."""
    iterations: int = 0
    """Learner iterations per cell instead of the env-step budget (0: use ``env_steps``)."""
    cells: tuple[tuple[str, str], ...] = ()
    """Only these (base, variant) pairs of ``bases`` x ``variants``; empty: all of them."""
    webshop_train_tasks: int = 0
    """WebShop training goals: the first this many of the train split; 0: the whole split."""
    webshop_eval_tasks: int = 0
    """Held-out WebShop goals per evaluation; 0: ``eval_tasks`` (greedy scores vary more per goal)."""
    webshop_outcome: str = "outcome"
    """WebShop's outcome reward: ``outcome`` (10 x won, verl-agent) or ``score`` (10 x the purchase
    score, the reward of WebShop's own RL); the dense variants add the process reward to it."""
    webshop_eval_repeats: int = 0
    """> 0: WebShop's learning curve is measured on the training goals themselves (the small task
    set), this many seeded episodes each; the held-out test goals are then measured at the start
    and the end only (``heldout`` in the cell and initial records). 0: the curve is held-out."""
    webshop_trainer: dict = field(default_factory=dict)
    """Trainer settings of the WebShop cells only, over ``trainer`` (per-env recipes, as verl-agent's
    per-env scripts)."""
    model: str = ""
    """The starting policy of every cell: empty for the env's behaviour-cloned tiny LLM
    (``tiny-alfworld`` / ``tiny-webshop``), ``drrn`` for the fast action-scoring policy."""
    alfworld_task_type: str | None = "pick_and_place_simple"
    """ALFWorld's task type (training and held-out tasks); None: all six, training tasks drawn by
    seed from the train split."""
    alfworld_clone: tuple[int, int] = (0, 0)
    """The fast policy's ALFWorld start: a partial behaviour clone of the expert on this many
    (episodes, epochs) (``policies/scorer_warmstart.py``), one per seed, shared by that seed's
    cells; (0, 0): from scratch, which wins almost no task in 50 steps and learns nothing in tens of
    thousands of RL steps."""
    per_task: bool = False
    """Record each held-out task's result (for intervals and paired comparisons); the held-out set
    is then every task of ALFWorld's ``valid_seen`` and ``valid_unseen`` (274) and the first
    ``eval_tasks`` WebShop test goals. Cells also record their training rollouts' curve."""

    def pairs(self) -> list[tuple[str, str]]:
        every = [(base, variant) for base in self.bases for variant in self.variants]
        return [pair for pair in every if not self.cells or pair in self.cells]


#: The eleven combinations: every base with outcome, dense and RSPO-explorer, plus GRPO's rank and anneal swaps.
LEARNING_CELLS = tuple((b, v) for b in BASES for v in VARIANTS[:3]) + (("grpo", "rspo-rank"), ("grpo", "rspo-anneal"))
#: The fast preset's env-step budget per cell (learner + explorer steps).
FAST_ENV_STEPS = 16_000

PRESETS = {
    "micro": Preset(("rspo/ALFWorld-v0",), (0,), 16, 2, bases=("grpo", "ppo"), variants=("outcome", "rspo-explorer"),
                    trainer={"num_groups": 1, "group_size": 2, "max_turns": 4}),
    "cpu-small": Preset(("rspo/ALFWorld-v0",), (0, 1), 480, 20, trainer={"num_groups": 2, "group_size": 4, "max_turns": 20}),
    # Issue 5's evidence: all 15 combinations on both envs, one seed, a held-out curve per cell.
    "curves": Preset(("rspo/ALFWorld-v0", "rspo/WebShop-v0"), (0,), 480, 20, variants=VARIANTS, eval_every=1,
                     trainer={"num_groups": 2, "group_size": 4, "max_turns": 20}, rspo={"anneal_iterations": 4}),
    # Issue 5's learning evidence at the quick start's scale: the nine base x {outcome, dense,
    # explorer} cells plus GRPO rank and anneal, 6 iterations of 4 groups x 4 (PPO: 16 x 1), both envs.
    # ALFWorld: 64 training tasks, curve on 30 held-out ones. WebShop (the 0.9M clone does not move
    # held-out goals in CPU minutes): 4 training goals, curve on them (8 episodes each at verl-agent's
    # validation temperature 0.4), 100 held-out test goals at start and end; a larger step
    # (lr 1e-3, 2 epochs of 16-row mini-batches) since 6 iterations at 3e-4 barely move the clone.
    "learning": Preset(("rspo/ALFWorld-v0", "rspo/WebShop-v0"), (0,), 0, 30, variants=VARIANTS, eval_every=2, iterations=6,
                       cells=LEARNING_CELLS,
                       trainer={"num_groups": 4, "group_size": 4, "max_turns": 25}, rspo={"anneal_iterations": 4},
                       webshop_train_tasks=4, webshop_eval_tasks=100, webshop_outcome="score", webshop_eval_repeats=8,
                       webshop_trainer={"learning_rate": 1e-3, "ppo_epochs": 2, "mini_batch_size": 16, "eval_temperature": 0.4}),
    # The statistically sound matrix: the fast action-scoring policy (model="drrn", trained from
    # scratch) in the eleven combinations of "learning", both envs, ten seeds, equal env-step
    # budgets; ALFWorld over all six task types, held out on its 274 validation tasks, WebShop on
    # 200 test goals, trained on its purchase score. Sized for about an hour on 2 cores (--jobs 2).
    "fast": Preset(("rspo/ALFWorld-v0", "rspo/WebShop-v0"), tuple(range(10)), FAST_ENV_STEPS, 200, variants=VARIANTS,
                   cells=LEARNING_CELLS, model="drrn", alfworld_task_type=None, per_task=True, webshop_outcome="score", alfworld_clone=(200, 10),
                   trainer={"num_groups": 8, "group_size": 4, "max_turns": None, "learning_rate": 1e-3, "mini_batch_size": 64,
                            "micro_batch_size": 64, "history_length": 2, "eval_temperature": 0.4}),
    # A real instruction model on one GPU (benchmarks/gpu_compare.sh), sized by estimate for <= 10
    # minutes on an H200 (not yet run on one): SmolLM2-135M-Instruct writing free-text
    # <think>/<action> replies through vLLM, ALFWorld over all six task types; GRPO on the outcome
    # against RSPO-GRPO (explorer), seed 0, 3 iterations of 4 tasks x 4 trajectories (+ 2 explorer
    # trajectories per task), 30 turns, held out on the first 60 valid_seen tasks.
    "gpu": Preset(("rspo/ALFWorld-v0",), (0,), 0, 60, iterations=3, cells=(("grpo", "outcome"), ("grpo", "rspo-explorer")),
                  model="smollm2-135m", alfworld_task_type=None,
                  trainer={"num_groups": 4, "group_size": 4, "max_turns": 30, "generation_backend": "vllm", "think": True,
                           "constrained": False, "max_new_tokens": 256, "max_prompt_length": 2048, "history_length": 2,
                           "learning_rate": 1e-5, "micro_batch_size": 16, "eval_temperature": 0.4}),
}


def _task_sets(env_id: str, preset: Preset) -> dict:
    from rspo_gym.algos.envs import env_family
    from rspo_gym.quickstart import alfworld_task_ids

    if env_family(env_id) == "alfworld" and preset.alfworld_task_type is None:
        return {"eval_split": "valid_seen", "eval_task_ids": list(range(preset.eval_tasks))}  # the final evaluation: _per_task_eval
    if env_family(env_id) == "alfworld":
        return {
            "train_task_ids": alfworld_task_ids("train", "pick_and_place_simple", 64),
            "eval_task_ids": alfworld_task_ids("valid_seen", "pick_and_place_simple", preset.eval_tasks),
            "eval_split": "valid_seen",
            "history_length": 6,
            "eval_temperature": 0.5,
        }
    train = list(range(preset.webshop_train_tasks))
    if preset.webshop_eval_repeats:
        curve = {"eval_task_ids": train * preset.webshop_eval_repeats, "eval_split": "train"}
    else:
        curve = {"eval_task_ids": _webshop_heldout(preset), "eval_split": "test"}
    return {"env_kwargs": {"split": "train"}, **({"train_task_ids": train} if train else {}), **curve}


def _webshop_heldout(preset: Preset) -> list[int]:
    return list(range(preset.webshop_eval_tasks or preset.eval_tasks))


def _heldout(trainer, env_id: str, preset: Preset) -> dict | None:
    """Held-out success and score, when the learning curve is measured on the training goals."""
    from rspo_gym.algos.envs import env_family

    if env_family(env_id) != "webshop" or not preset.webshop_eval_repeats:
        return None
    task_ids = _webshop_heldout(preset)
    metrics = trainer.evaluate(task_ids=task_ids, split="test")
    return {"success": metrics["eval/success"], "score": metrics["eval/score"], "tasks": len(task_ids)}


def _trainer(env_id: str, base: str, variant: str, seed: int, preset: Preset):
    from rspo_gym.algos import GiGPOTrainer, GRPOTrainer, PPOTrainer, RSPOTrainer
    from rspo_gym.algos.envs import env_family

    webshop = env_family(env_id) == "webshop"
    model = preset.model or {"alfworld": "tiny-alfworld", "webshop": "tiny-webshop"}.get(env_family(env_id), "tiny")
    outcome = preset.webshop_outcome if webshop else "outcome"
    common = dict(seed=seed, progress=False, eval_every=preset.eval_every, learning_rate=3e-4, dense_outcome=outcome)
    common.update(_task_sets(env_id, preset), **preset.trainer, **(preset.webshop_trainer if webshop else {}))
    if base == "ppo":
        common["group_size"], common["num_groups"] = 1, common.get("num_groups", 2) * common.get("group_size", 4)
    if variant.startswith("rspo"):
        swap = variant.split("-", 1)[1]
        extra = dict(preset.rspo)
        if swap == "explorer":
            extra["explorer_group_size"] = max(1, common.get("group_size", 4) // 2)
        if base == "ppo" and swap == "explorer":
            common["group_size"], common["num_groups"] = 2, common["num_groups"] // 2
        return RSPOTrainer(env_id, model=model, base=base, swap=swap, reward=outcome, **common, **extra)
    cls = {"grpo": GRPOTrainer, "ppo": PPOTrainer, "gigpo": GiGPOTrainer}[base]
    return cls(env_id, model=model, reward=outcome if variant == "outcome" else variant, **common)


def _start_policy(trainer, env_id: str, seed: int, preset: Preset, cache: Path | None) -> None:
    """Give an ALFWorld fast-policy trainer its partial clone (``Preset.alfworld_clone``), made
    once per seed (deterministic: expert episodes of fixed reset seeds, clone shuffled by ``seed``)
    and kept in ``cache``; the explorer of RSPO is re-synced to it."""
    from rspo_gym.algos.envs import env_family
    from rspo_gym.policies.scorer_warmstart import partial_clone

    episodes, epochs = preset.alfworld_clone
    if preset.model != "drrn" or env_family(env_id) != "alfworld" or not episodes:
        return
    path = cache / f"alfworld-seed{seed}.pt" if cache is not None else None
    partial_clone(trainer.policy, env_id, episodes, epochs, seed=seed, history_length=trainer.config.history_length, cache=path)
    if getattr(trainer, "explorer", None) is not None:
        trainer.sync_explorer()


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def run_cell(env_id: str, base: str, variant: str, seed: int, preset: Preset, threads: int = 1, cache: Path | None = None) -> dict:
    """Train one cell to its env-step budget and evaluate it (run in a fresh worker process)."""
    from common import peak_rss_mb

    _set_threads(threads)
    start = time.perf_counter()
    trainer = _trainer(env_id, base, variant, seed, preset)
    _start_policy(trainer, env_id, seed, preset, cache)
    steps = {"n": 0}

    def within_budget(_trainer, metrics) -> bool:
        steps["n"] += int(metrics["env_steps"])
        return preset.iterations > 0 or steps["n"] < preset.env_steps

    history = trainer.learn(preset.iterations or 10_000, callback=within_budget)
    tasks = _per_task_eval(trainer, env_id, preset) if preset.per_task else None
    final = tasks or (history[-1] if "eval/success" in history[-1] else trainer.evaluate())
    heldout = _heldout(trainer, env_id, preset)
    trainer.close()
    curve, train_curve, done = [], [], 0
    for row in history:
        done += int(row["env_steps"])
        train_curve.append([done, row["rollout/success"], row["rollout/score"]])
        if "eval/success" in row:
            curve.append({"iteration": row["iteration"], "env_steps": done, "success": row["eval/success"], "score": row["eval/score"]})
    return {
        "env": env_id, "base": base, "variant": variant, "seed": seed,
        "iterations": len(history), "env_steps": steps["n"],
        "generated_tokens": int(sum(row["generated_tokens"] for row in history)),
        "success": final["eval/success"], "score": final["eval/score"],
        "seconds": time.perf_counter() - start,
        "seconds_per_iteration": statistics.mean(row["time/collect_s"] + row["time/update_s"] for row in history),
        "peak_rss_mb": peak_rss_mb(),
        "curve": curve,
        **({"heldout": heldout} if heldout else {}),
        **({"per_task": tasks["per_task"], "train_curve": train_curve} if tasks else {}),
    }


def _per_task_eval(trainer, env_id: str, preset: Preset) -> dict:
    """Held-out success and score with each task's result: ``per_task`` lists ``[split, task id,
    won, score]`` in a fixed order (every cell of an env evaluates the same tasks with the same
    sampling seed, so cells pair task by task)."""
    from rspo_gym.algos.envs import env_family, make_vector_env
    from rspo_gym.rollout.collector import collect

    if env_family(env_id) == "alfworld":
        from rspo_gym.envs.alfworld.generator import SPLIT_SIZES

        splits = [(split, list(range(SPLIT_SIZES[split]))) for split in ("valid_seen", "valid_unseen")]
    else:
        splits = [("test", list(range(preset.eval_tasks)))]
    per_task = []
    for split, ids in splits:
        venv, _ = make_vector_env(trainer.env_factory.with_kwargs(split=split), len(ids), 1)
        rollout = collect(trainer.policy, venv, trainer.collect_config(0, evaluation=True), task_ids=ids)
        venv.close()
        per_task += [[split, t.task_id, int(t.won), t.score] for t in rollout.trajectories]
    return {
        "eval/success": sum(r[2] for r in per_task) / len(per_task),
        "eval/score": sum(r[3] for r in per_task) / len(per_task),
        "per_task": per_task,
    }


def evaluate_start(env_id: str, preset: Preset, threads: int = 1, cache: Path | None = None, seed: int = 0) -> dict:
    """Held-out success and score of the policy every cell of ``env_id`` starts from. The fast
    policy's start depends on the seed (its initialisation, its clone): ``seed`` picks it, and
    with ``per_task`` every task's result is kept, so trained cells pair with their own start."""
    _set_threads(threads)
    trainer = _trainer(env_id, "grpo", "outcome", seed, preset)
    _start_policy(trainer, env_id, seed, preset, cache)
    metrics = _per_task_eval(trainer, env_id, preset) if preset.per_task else trainer.evaluate()
    heldout = _heldout(trainer, env_id, preset)
    trainer.close()
    return {"env": env_id, "seed": seed, "success": metrics["eval/success"], "score": metrics["eval/score"],
            **({"heldout": heldout} if heldout else {}), **({"per_task": metrics["per_task"]} if "per_task" in metrics else {})}


def _mean_std(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def summarise(cells: list[dict], initial: dict[str, dict]) -> str:
    """Mean ± std over seeds per (env, algorithm, variant), next to the starting policy's numbers.

    Success and score are where the learning curve is measured (held-out tasks, or the training
    goals when the preset says so); ``held-out score`` is then the separate held-out measurement.
    """
    lines = [
        "| env | algorithm | reward / swap | seeds | success (start) | score (start) | held-out score (start) | s / iteration | peak MB | minutes | tokens |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(c["env"], c["base"], c["variant"]) for c in cells}, key=lambda k: (k[0], BASES.index(k[1]), VARIANTS.index(k[2])))
    for env, base, variant in keys:
        group = [c for c in cells if (c["env"], c["base"], c["variant"]) == (env, base, variant)]
        start = initial.get(env)
        heldout = [c["heldout"]["score"] for c in group if "heldout" in c]
        heldout_text = f"{_mean_std(heldout)}{_start(start.get('heldout') if start else None, 'score')}" if heldout else "–"
        lines.append(
            f"| {env} | {base} | {variant} | {len(group)} | {_mean_std([c['success'] for c in group])}{_start(start, 'success')} | "
            f"{_mean_std([c['score'] for c in group])}{_start(start, 'score')} | {heldout_text} | {_mean_of(group, 'seconds_per_iteration', '.0f')} | "
            f"{_mean_of(group, 'peak_rss_mb', '.0f')} | {statistics.mean(c['seconds'] for c in group) / 60:.1f} | "
            f"{int(statistics.mean(c['generated_tokens'] for c in group))} |"
        )
    return "\n".join(lines) + "\n"


def _start(start: dict | None, key: str) -> str:
    return f" ({start[key]:.3f})" if start else ""


def _mean_of(group: list[dict], key: str, spec: str) -> str:
    """Cells from before a field was recorded show a dash."""
    values = [c[key] for c in group if key in c]
    return format(statistics.mean(values), spec) if values else "–"


def curves_table(cells: list[dict], initial: dict[str, dict]) -> str:
    """One row per cell: success (and score) at iteration 0 (the start) and after each evaluation."""
    lines = ["| env | algorithm | reward / swap | seed | success by iteration (score) |", "|---|---|---|---|---|"]
    for c in sorted(cells, key=lambda c: (c["env"], BASES.index(c["base"]), VARIANTS.index(c["variant"]), c["seed"])):
        if not c.get("curve"):
            continue
        points = [(0, initial[c["env"]])] if c["env"] in initial else []
        points += [(p["iteration"], p) for p in c["curve"]]
        text = " → ".join(f"{it}: {p['success']:.2f} ({p['score']:.2f})" for it, p in points)
        lines.append(f"| {c['env']} | {c['base']} | {c['variant']} | {c['seed']} | {text} |")
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""


def _plot(cells: list[dict], initial: dict[str, dict], out: Path) -> None:
    """Per env: learning curves (success or score against env steps) when cells have them, else bars."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    for env in sorted({c["env"] for c in cells}):
        mine = [c for c in cells if c["env"] == env]
        if all(c.get("curve") for c in mine):
            # WebShop's score is the informative number (success is rare at this scale); ALFWorld has no score
            metric = "score" if "webshop" in env.lower() else "success"
            fig, axes = plt.subplots(1, len(BASES), figsize=(13, 3.8), dpi=120, sharey=True)
            lines = {}
            for ax, base in zip(axes, BASES):
                for k, variant in enumerate(VARIANTS):
                    for c in (c for c in mine if (c["base"], c["variant"]) == (base, variant)):
                        start = [(0, initial[env][metric])] if env in initial else []
                        points = start + [(p["env_steps"], p[metric]) for p in c["curve"]]
                        (lines[variant],) = ax.plot(*zip(*points), marker="o", ms=3, color=f"C{k}", alpha=0.8)
                ax.set_title(base)
                ax.set_xlabel("env steps")
            where = "training-goal" if any("heldout" in c for c in mine) else "held-out"
            axes[0].set_ylabel(f"{where} {metric}")
            ordered = [v for v in VARIANTS if v in lines]
            fig.legend([lines[v] for v in ordered], ordered, loc="upper right", fontsize=7)
            fig.suptitle(f"{env}: {where} learning curves (iteration 0 = the starting policy)")
        else:
            names, means, errors = [], [], []
            for base in BASES:
                for variant in VARIANTS:
                    group = [c["success"] for c in mine if (c["base"], c["variant"]) == (base, variant)]
                    if group:
                        names.append(f"{base}\n{variant}")
                        means.append(statistics.mean(group))
                        errors.append(statistics.stdev(group) if len(group) > 1 else 0.0)
            fig, ax = plt.subplots(figsize=(max(6, len(names) * 0.9), 4), dpi=120)
            ax.bar(range(len(names)), means, yerr=errors, color="C0", capsize=3)
            if env in initial:
                ax.axhline(initial[env]["success"], color="grey", linestyle="--", label="starting policy")
                ax.legend(fontsize=7)
            ax.set_xticks(range(len(names)), names, fontsize=7)
            ax.set_ylabel("held-out success")
            ax.set_title(f"{env}: equal env-step budgets")
        fig.tight_layout()
        fig.savefig(out / f"compare_{env.split('/')[-1]}.png")
        plt.close(fig)


START = "start"
"""``base`` and ``variant`` of a seed's starting policy among per-task records (no training)."""


def _order(key: tuple[str, str, str]) -> tuple:
    """Table order: env, then the start, then bases and variants in their listed order."""
    env, base, variant = key
    return (env, -1, -1) if base == START else (env, BASES.index(base), VARIANTS.index(variant))


def _matrices(cells: list[dict]) -> dict[tuple[str, str, str], dict]:
    """Per (env, base, variant): seeds and ``(seeds, tasks)`` matrices of wins and scores."""
    out: dict[tuple[str, str, str], dict] = {}
    for c in sorted((c for c in cells if "per_task" in c), key=lambda c: c["seed"]):
        entry = out.setdefault((c["env"], c["base"], c["variant"]), {"seeds": [], "won": [], "score": [], "cells": []})
        entry["seeds"].append(c["seed"])
        entry["won"].append([r[2] for r in c["per_task"]])
        entry["score"].append([r[3] for r in c["per_task"]])
        entry["cells"].append(c)
    return out


def _metrics(env: str) -> tuple[str, ...]:
    """What a cell is judged on: ALFWorld's success (its score is the same 0/1), WebShop's score and success."""
    return ("score", "won") if "webshop" in env.lower() else ("won",)


def _ci(mean: float, low: float, high: float) -> str:
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def interval_tables(cells: list[dict], initial: dict[str, dict]) -> str:
    """Mean and 95 % two-level bootstrap interval per cell (seeds and held-out tasks resampled), and
    each RSPO variant's (and the dense reward's) paired difference from its base on the outcome."""
    from rspo_gym.intervals import bootstrap_mean_ci

    data = _matrices(cells)
    if not data:
        return ""
    lines = [
        "| env | algorithm | reward / swap | seeds | held-out tasks | success [95 % CI] | score [95 % CI] | env steps | minutes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(data, key=_order):
        d = data[key]
        won, score = bootstrap_mean_ci(d["won"]), bootstrap_mean_ci(d["score"])
        name = ("–", "start (no training)") if key[1] == START else key[1:]
        lines.append(
            f"| {key[0]} | {name[0]} | {name[1]} | {len(d['seeds'])} | {len(d['won'][0])} | {_ci(*won)} | {_ci(*score)} | "
            f"{statistics.mean(c.get('env_steps', 0) for c in d['cells']):.0f} | {statistics.mean(c.get('seconds', 0.0) for c in d['cells']) / 60:.1f} |"
        )
    starts = [f"{env}: success {s['success']:.3f}, score {s['score']:.3f}" for env, s in sorted(initial.items())]
    lines += ["", "Untrained policy (seed 0's initialisation) on the same tasks: " + "; ".join(starts) + "." if starts else ""]
    lines += ["", "| env | comparison | metric | seeds | difference [95 % CI] | verdict |", "|---|---|---|---|---|---|"]
    for diff in paired_differences(data):
        against = "start" if diff["against"] == START else f"{diff['base']} outcome"
        lines.append(
            f"| {diff['env']} | {diff['base']} {diff['variant']} − {against} | {diff['metric']} | {diff['seeds']} | "
            f"{_ci(diff['difference'], diff['low'], diff['high'])} | {diff['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def paired_differences(data: dict[tuple[str, str, str], dict]) -> list[dict]:
    """Every non-outcome cell minus the same base's outcome cell, and every outcome cell minus the
    seeds' starting policies (does training help at all?), on the seeds both ran, task by task."""
    from rspo_gym.intervals import paired_difference_ci

    out = []
    for (env, base, variant), d in sorted(data.items(), key=lambda kv: _order(kv[0])):
        against = START if variant == "outcome" else "outcome"
        ref = data.get((env, START, START) if against == START else (env, base, "outcome"))
        if base == START or ref is None:
            continue
        seeds = sorted(set(d["seeds"]) & set(ref["seeds"]))
        if not seeds:
            continue
        for metric in _metrics(env):
            a = [d[metric][d["seeds"].index(s)] for s in seeds]
            b = [ref[metric][ref["seeds"].index(s)] for s in seeds]
            diff, low, high = paired_difference_ci(a, b)
            verdict = "better" if low > 0 else "worse" if high < 0 else "no difference shown"
            out.append({"env": env, "base": base, "variant": variant, "against": against, "metric": "success" if metric == "won" else metric,
                        "seeds": len(seeds), "difference": diff, "low": low, "high": high, "verdict": verdict})
    return out


def interval_summary(cells: list[dict], initial: dict[str, dict], preset: str) -> dict:
    """The small record worth keeping of a per-task comparison: each cell's mean and interval, the
    paired differences, the starting policy (the cells themselves hold every task's result)."""
    from rspo_gym.intervals import bootstrap_mean_ci

    data = _matrices(cells)
    rows = []
    for (env, base, variant), d in sorted(data.items(), key=lambda kv: _order(kv[0])):
        won, score = bootstrap_mean_ci(d["won"]), bootstrap_mean_ci(d["score"])
        rows.append({"env": env, "base": base, "variant": variant, "seeds": d["seeds"], "tasks": len(d["won"][0]),
                     "success": won, "score": score, "seconds": statistics.mean(c.get("seconds", 0.0) for c in d["cells"])})
    return {"preset": preset, "initial": initial, "cells": rows, "differences": paired_differences(data)}


def _plot_intervals(cells: list[dict], initial: dict[str, dict], out: Path) -> None:
    """Per env: cell means with 95 % intervals, paired differences from the base, and training-rollout
    curves (mean over seeds with a 95 % bootstrap band)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from rspo_gym.intervals import binned_band, bootstrap_mean_ci

    data = _matrices(cells)
    diffs = paired_differences(data)
    for env in sorted({k[0] for k in data}):
        metric = _metrics(env)[0]
        name = "success" if metric == "won" else metric
        keys = sorted((k for k in data if k[0] == env), key=_order)
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), dpi=120)
        for y, key in enumerate(keys):
            mean, low, high = bootstrap_mean_ci(data[key][metric])
            color = "grey" if key[1] == START else f"C{BASES.index(key[1])}"
            left.errorbar(mean, y, xerr=[[mean - low], [high - mean]], fmt="o", color=color, capsize=3)
        if env in initial:
            left.axvline(initial[env][name], color="grey", linestyle="--", label="untrained")
            left.legend(fontsize=7)
        left.set_yticks(range(len(keys)), ["start" if k[1] == START else f"{k[1]} {k[2]}" for k in keys], fontsize=7)
        left.set_xlabel(f"held-out {name} (95 % CI)")
        mine = [d for d in diffs if d["env"] == env and d["metric"] == name]
        for y, d in enumerate(mine):
            right.errorbar(d["difference"], y, xerr=[[d["difference"] - d["low"]], [d["high"] - d["difference"]]], fmt="o",
                           color=f"C{BASES.index(d['base'])}", capsize=3)
        right.axvline(0.0, color="black", linewidth=0.8)
        right.set_yticks(range(len(mine)), [f"{d['base']} {d['variant']} − {d['against']}" for d in mine], fontsize=7)
        right.set_xlabel(f"paired difference in held-out {name} (95 % CI)")
        fig.suptitle(f"{env}: up to {max(len(data[k]['seeds']) for k in keys)} seeds, {len(data[keys[0]][metric][0])} held-out tasks")
        fig.tight_layout()
        fig.savefig(out / f"intervals_{env.split('/')[-1]}.png")
        plt.close(fig)
        fig, axes = plt.subplots(1, len(BASES), figsize=(13, 3.8), dpi=120, sharey=True)
        column = 1 if metric == "won" else 2
        for ax, base in zip(axes, BASES):
            for k, variant in enumerate(VARIANTS):
                group = data.get((env, base, variant))
                if group is None:
                    continue
                curves = [[(p[0], p[column]) for p in c["train_curve"]] for c in group["cells"]]
                top = max(p[0] for c in curves for p in c)
                x, mean, low, high = binned_band(curves, np.linspace(0, top, 9))
                ax.plot(x, mean, color=f"C{k}", label=variant)
                ax.fill_between(x, low, high, color=f"C{k}", alpha=0.2)
            ax.set_title(base)
            ax.set_xlabel("env steps")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        axes[0].set_ylabel(f"training-rollout {name}")
        fig.suptitle(f"{env}: learner's own rollouts during training (mean over seeds, 95 % band)")
        fig.tight_layout()
        fig.savefig(out / f"curves_{env.split('/')[-1]}.png")
        plt.close(fig)


def _start_path(out: Path, env_id: str, seed: int, preset: Preset) -> Path:
    name = env_id.split("/")[-1]
    return out / "initial" / (f"{name}-seed{seed}.json" if preset.per_task else f"{name}.json")


def _cell_path(out: Path, env_id: str, base: str, variant: str, seed: int) -> Path:
    return out / "cells" / f"{env_id.split('/')[-1]}-{base}-{variant}-seed{seed}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cpu-small")
    parser.add_argument("--out", type=Path, default=Path("results/compare"))
    parser.add_argument("--jobs", type=int, default=1, help="cells trained at once (each in its own process)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads per cell (default: CPUs / jobs)")
    parser.add_argument("--envs", nargs="+", default=None, help="only these of the preset's envs")
    parser.add_argument("--only", nargs="+", default=None, metavar="BASE:VARIANT", help="only these cells (e.g. grpo:rspo-rank)")
    parser.add_argument("--seeds", nargs="+", type=int, default=None, help="these seeds instead of the preset's")
    args = parser.parse_args(argv)
    os.environ.setdefault("RSPO_GYM_RUNS_DIR", str(args.out / "runs"))  # each cell's run folder, beside compare.json
    preset = PRESETS[args.preset]
    if args.seeds:
        preset = replace(preset, seeds=tuple(args.seeds))
    if args.envs:
        unknown = sorted(set(args.envs) - set(preset.envs))
        if unknown:
            parser.error(f"not in preset {args.preset!r}: {unknown} (it has {list(preset.envs)})")
        preset = replace(preset, envs=tuple(e for e in preset.envs if e in args.envs))
    only = None
    if args.only:
        only = {tuple(item.split(":", 1)) for item in args.only}
        wrong = sorted(":".join(c) for c in only if c not in preset.pairs())
        if wrong:
            parser.error(f"--only {wrong}: not BASE:VARIANT cells of preset {args.preset!r}")
    threads = args.threads or max(1, (os.cpu_count() or 1) // max(1, args.jobs))
    out = args.out / args.preset
    (out / "cells").mkdir(parents=True, exist_ok=True)
    (out / "initial").mkdir(parents=True, exist_ok=True)
    todo = [  # seeds outermost and envs interleaved, so a partial run pairs every cell with its base
        (env_id, base, variant, seed)
        for seed in preset.seeds
        for base, variant in preset.pairs()
        for env_id in preset.envs
        if (only is None or (base, variant) in only) and not _cell_path(out, env_id, base, variant, seed).exists()  # resumable
    ]
    starts = [(env_id, seed) for env_id in preset.envs for seed in (preset.seeds if preset.per_task else (0,))
              if not _start_path(out, env_id, seed, preset).exists()]
    def keep(key: tuple, result: dict, _done: int, _total: int) -> None:
        kind, key = key
        if kind == "initial":
            write_json(_start_path(out, *key, preset), result)
            if key[1] == 0:  # seed 0's start is the table's "(start)" column
                write_json(out / "initial" / f"{key[0].split('/')[-1]}.json", result)
            return
        write_json(_cell_path(out, *key), result)
        print(f"{key[0]} {key[1]:5s} {key[2]:13s} seed {key[3]}: success {result['success']:.3f} ({result['seconds']:.0f} s)", flush=True)

    jobs = [(("initial", (env_id, seed)), evaluate_start, (env_id, preset, threads, out / "clones", seed)) for env_id, seed in starts]
    jobs += [(("cell", key), run_cell, (*key, preset, threads, out / "clones")) for key in todo]
    failed = run_fresh(jobs, args.jobs, keep)
    if failed:
        print(f"{failed} job(s) failed; rerun to retry them (finished cells are kept)", file=sys.stderr)
        return 1
    # the table covers every finished cell of the whole preset, also those of envs run separately
    full = PRESETS[args.preset]
    seeds = sorted(set(full.seeds) | set(preset.seeds))  # --seeds adds seeds to the table, it never hides one
    paths = [_cell_path(out, env_id, base, variant, seed) for env_id in full.envs for base, variant in full.pairs() for seed in seeds]
    cells = [json.loads(path.read_text()) for path in paths if path.exists()]
    starts = [out / "initial" / f"{env_id.split('/')[-1]}.json" for env_id in full.envs]
    initial = {env_id: json.loads(path.read_text()) for env_id, path in zip(full.envs, starts) if path.exists()}
    curves = curves_table(cells, initial)
    seeded = [_start_path(out, env_id, seed, full) for env_id in full.envs for seed in seeds] if full.per_task else []
    with_starts = cells + [{**json.loads(path.read_text()), "base": START, "variant": START} for path in seeded if path.exists()]
    intervals = interval_tables(with_starts, initial)
    table = summarise(cells, initial) + ("\n" + curves if curves else "") + ("\n" + intervals if intervals else "")
    (out / "compare.md").write_text(table, encoding="utf-8")
    write_json(out / "compare.json", {"preset": args.preset, "initial": initial, "cells": cells})
    _plot(cells, initial, out)
    if intervals:
        _plot_intervals(with_starts, initial, out)
        write_json(out / "intervals.json", interval_summary(with_starts, initial, args.preset))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
