"""``rspo-gym quickstart``: an agent that measurably learns ALFWorld with RSPO on a CPU.

The main job of the suite, end to end on an embedded default with no downloads:

1. load the ``tiny-alfworld`` model: the offline ``tiny`` model after our behaviour cloning of
   ALFWorld's expert (``policies/warmstart.py``; shipped, because that cloning takes 35-40 CPU
   minutes), or, with ``warm_start=True``, build ``tiny`` and clone the expert here;
2. measure it on held-out tasks, several seeded episodes per task;
3. train RSPO (base GRPO by default) for a fixed number of iterations on a small fixed set of
   generated training tasks, measuring it the same way at fixed points;
4. write ``metrics.csv`` / ``metrics.jsonl``, ``config.json``, ``checkpoint.pt`` (+
   ``checkpoint_tensors/``), the trained ``policy/``, ``learning_curve.png`` (held-out success with
   its 95 % interval) and ``summary.md`` / ``summary.json`` to the output folder.

The work is fixed, not timed: the iterations, tasks, episodes and seeds come from the config
alone, and torch runs on a fixed number of threads with its AVX2 kernels (float sums split over a
different number of threads, or over wider vectors, round differently), so the same command prints
the same numbers on CPUs with and without AVX-512; only the time changes. A time limit is opt-in (``time_limit_minutes``), and the summary says when it cut
training short.

The gain is the paired difference after − before over the same (task, episode seed) pairs. Its
95 % interval resamples tasks (``rspo_gym.intervals``, one row of per-task means): the episodes of a
task are nested in it, not a population of their own, so they narrow each task's mean rather than
being resampled. Several episodes per task at the training temperature narrow the interval for
less than more tasks would (``valid_seen`` has only 35 of the default type).

For ALFWorld the task set is one task type (default ``pick_and_place_simple``): training tasks from
the ``train`` split, held-out tasks of the same type from ``valid_seen`` (it has 35). For WebShop it
is ``train`` goals and the first ``test`` goals.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rspo_gym.cpu_settings import mkl_branch

__all__ = ["QuickstartConfig", "run_quickstart", "alfworld_task_ids", "plan", "estimated_seconds", "held_out_matrix"]

# Measured on the 2-core development machine (``REFERENCE_CPU``, torch's AVX2 kernels pinned), idle,
# with the defaults (``docs/results_llm.md``: 5.4 min for the run; a 2-core Intel Xeon took 8.5):
# what the up-front estimate scales; the ETA rescales it by the speed actually seen.
REFERENCE_SECONDS = {"load": 7.0, "eval_episode": 0.21, "train_trajectory": 0.59}
REFERENCE_CPU = "AMD EPYC"


#: Upper bounds of the quick start's sizes, far above its small fixed task set: a typo (extra
#: zeros) is one line at once, not minutes of silent task scanning or gigabytes of episode lists.
#: The training tasks are found by scanning generated ALFWorld tasks (about 30 ms per match).
QUICKSTART_LIMITS = {"train_tasks": 1000, "eval_tasks": 10_000, "eval_episodes": 1000, "threads": 1024}
MAX_EVAL_EPISODES = 65_536
#: The held-out episodes' seed is the run's seed plus this (``eval_seed``), so the two never meet.
EVAL_SEED_OFFSET = 1000


#: The quick start's starting model per env family: the shipped clones (``policies/models.py``).
QUICKSTART_MODELS = {"alfworld": "tiny-alfworld", "webshop": "tiny-webshop"}

#: ``QuickstartConfig.cpu_capability``'s values (None: torch's own choice).
CPU_CAPABILITIES = ("avx2", "avx512", "default", None)


def pin_cpu_kernels(capability: str | None) -> None:
    """Ask torch, MKL and oneDNN for ``capability``'s kernels, before torch runs its first op.

    torch reads ``ATEN_CPU_CAPABILITY`` when it first dispatches a vector kernel, MKL (torch's
    matmuls) ``MKL_CBWR`` and ``MKL_ENABLE_INSTRUCTIONS`` at its first call. ``MKL_CBWR=AVX2``
    gives the same results on every Intel CPU with AVX2, but a user's ``MKL_ENABLE_INSTRUCTIONS``
    overrides it (``AVX512``: other bits), so the pin takes that variable out of the environment.
    MKL ignores ``MKL_CBWR=AVX2`` on other vendors' CPUs and takes its own branch there: AMD CPUs
    print other numbers. Its ``COMPATIBLE`` branch would hold on every vendor's, at about twice the
    CPU time of the model's matmuls (``benchmarks/numeric_portability.py``, docs/results_llm.md).
    oneDNN is capped likewise by ``ONEDNN_MAX_CPU_ISA``.
    """
    if capability is None:
        return
    os.environ["ATEN_CPU_CAPABILITY"] = capability
    os.environ.pop("MKL_ENABLE_INSTRUCTIONS", None)
    if capability == "avx2":
        os.environ["MKL_CBWR"] = "AVX2"
        os.environ["ONEDNN_MAX_CPU_ISA"] = "AVX2"


def weights_sha256(policy_dir: str | os.PathLike) -> str:
    """sha256 over the tensors of a saved policy's ``*.safetensors`` files, by name: the trained
    weights' fingerprint, which two runs share only if every float of training came out the same."""
    import torch
    from safetensors.torch import load_file

    digest = hashlib.sha256()
    for file in sorted(Path(policy_dir).glob("*.safetensors")):
        for name, tensor in sorted(load_file(file).items()):
            digest.update(name.encode())
            digest.update(tensor.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def cpu_description() -> dict[str, str]:
    """The CPU's model name, the vector kernels torch runs with and MKL's branch: what a run's
    numbers depend on."""
    import torch

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            model = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), model)
    except OSError:
        pass
    return {"cpu": model, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "mkl_branch": mkl_branch()}


@dataclass
class QuickstartConfig:
    """What the quick start runs; the defaults take 5.4 minutes on 2 idle AMD EPYC cores (8.5 on
    2 Intel Xeon ones)."""

    env_id: str = "rspo/ALFWorld-v0"
    """Environment (``rspo/ALFWorld-v0`` or ``rspo/WebShop-v1``)."""
    base: str = "grpo"
    """RSPO's base algorithm: ``grpo``, ``ppo`` or ``gigpo``."""
    swap: str = "rank"
    """RSPO's swap: ``rank`` (the process reward's spread, handed out in outcome order within each
    group: a signal where every member failed, at no extra sampling), ``explorer`` or ``anneal``.
    ``rank`` learned more per minute than ``explorer`` here (``docs/results.md``)."""
    model: str | None = None
    """Model preset, Hugging Face id or local path; None: the env's clone, ``tiny-alfworld`` or
    ``tiny-webshop``."""
    warm_start: bool = False
    """Clone the expert before RL (``WarmStartConfig`` defaults: ~35-40 CPU minutes for ``tiny``)."""
    history_length: int | None = None
    """Past steps in a window prompt; None: what the model was trained with (its preset's, else 2)."""
    prompt_format: str | None = None
    """``"window"`` or ``"conversation"`` prompts; None: what the model was trained with (its preset's)."""
    task_type: str = "pick_and_place_simple"
    """ALFWorld task type of the small task set."""
    train_tasks: int = 64
    """Size of the fixed training task set."""
    iterations: int = 24
    """RL iterations: the fixed amount of training."""
    eval_tasks: int = 35
    """Held-out tasks per evaluation (ALFWorld's ``valid_seen`` has 35 of the default type)."""
    eval_episodes: int = 4
    """Episodes per held-out task, each with its own seed (the same seeds at every evaluation, so
    before and after are paired)."""
    eval_every: int = 12
    """Held-out evaluation every this many iterations too (0: only at the start and the end). Each
    costs about a minute on 2 cores; evaluation draws no training randomness, so adding or removing
    some changes no other number."""
    threads: int = 2
    """torch's CPU threads, fixed so that the numbers do not depend on the machine's core count."""
    cpu_capability: str | None = "avx2"
    """ATen's vector kernels for the run (``avx2``, ``avx512`` or ``default``), pinned so that the
    numbers do not depend on whether the CPU has AVX-512: torch otherwise takes its widest kernels,
    whose float sums round differently. Every x86-64 CPU this runs on has AVX2. None keeps torch's
    choice. Takes effect when the quick start is the first thing in its process to run torch."""
    time_limit_minutes: float | None = None
    """Opt-in wall-clock limit: training stops after the first iteration that leaves no room for
    another plus the final evaluation, which always runs. None: the whole plan runs."""
    output_dir: str = "results/quickstart"
    """Where everything is written."""
    seed: int = 0
    """Seed of the model, the warm start, training and the evaluation episodes."""
    trainer_overrides: dict[str, Any] = field(
        default_factory=lambda: {
            "learning_rate": 3e-4, "max_turns": 25, "eval_temperature": 1.0, "num_groups": 4, "group_size": 4
        }
    )
    """``RSPOConfig`` fields. Held-out success is measured at the training temperature (1.0): at a
    low temperature the tiny clone's success swings from checkpoint to checkpoint, hiding a gain."""
    warm_start_overrides: dict[str, Any] = field(default_factory=dict)
    """Extra ``WarmStartConfig`` fields."""

    def __post_init__(self) -> None:
        for name in ("train_tasks", "iterations", "eval_tasks", "eval_episodes", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
            if value > QUICKSTART_LIMITS.get(name, value):
                raise ValueError(f"{name} must be at most {QUICKSTART_LIMITS[name]} in the quick start, got {value} "
                                 f"(rspo-gym train takes larger task sets)")
        if self.eval_tasks * self.eval_episodes > MAX_EVAL_EPISODES:
            raise ValueError(f"eval_tasks x eval_episodes must be at most {MAX_EVAL_EPISODES} episodes per evaluation, "
                             f"got {self.eval_tasks} x {self.eval_episodes}")
        if isinstance(self.eval_every, bool) or not isinstance(self.eval_every, int) or self.eval_every < 0:
            raise ValueError(f"eval_every must be an integer >= 0 (0: only at the start and the end), got {self.eval_every!r}")
        if self.prompt_format not in ("window", "conversation", None):
            raise ValueError(f"prompt_format must be 'window', 'conversation' or None (the model's), got {self.prompt_format!r}")
        if self.cpu_capability not in CPU_CAPABILITIES:
            raise ValueError(f"cpu_capability must be one of {CPU_CAPABILITIES}, got {self.cpu_capability!r}")
        if self.time_limit_minutes is not None and not self.time_limit_minutes > 0:
            raise ValueError(f"time_limit_minutes must be > 0 or None (no limit), got {self.time_limit_minutes!r}")
        self._check_env_and_seed()

    def _check_env_and_seed(self) -> None:
        """What used to fail only once the model had loaded (seconds in), or never: an env id
        Gymnasium lacks or that is neither ALFWorld nor WebShop (the task sets are theirs), an
        ALFWorld task type that does not exist (its search of the unbounded ``train`` split never
        ended) and a seed whose evaluation seed (``seed + EVAL_SEED_OFFSET``) is out of range; the
        seed is reported as given, not as that derived ``eval_seed``."""
        import gymnasium as gym

        from rspo_gym.envs.alfworld.vocab import TASK_TYPES
        from rspo_gym.training.envs import env_family
        from rspo_gym.training.validation import MAX_SEED

        highest = MAX_SEED - EVAL_SEED_OFFSET
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= highest:
            raise ValueError(f"seed must be an integer from 0 to {highest}, got {self.seed!r}")
        import rspo_gym  # noqa: F401 - registers our envs

        try:
            gym.spec(self.env_id)
        except gym.error.Error as err:
            raise ValueError(f"unknown env id {self.env_id!r}: {err}") from None
        if env_family(self.env_id) not in QUICKSTART_MODELS:
            raise ValueError(f"the quick start runs on ALFWorld or WebShop, not {self.env_id!r} (rspo-gym train takes any text env)")
        if _is_alfworld(self) and self.task_type not in TASK_TYPES:
            raise ValueError(f"task_type {self.task_type!r} is not an ALFWorld task type: one of {', '.join(TASK_TYPES)}")


def alfworld_task_ids(split: str, task_type: str, count: int) -> list[int]:
    """The first ``count`` task ids of ``split`` whose generated task has ``task_type``.

    An unknown ``task_type`` is refused first: the generated ``train`` split is unbounded, so the
    search for it would never end."""
    from rspo_gym.envs.alfworld.tasks import GeneratedTasks
    from rspo_gym.envs.alfworld.vocab import TASK_TYPES

    if task_type not in TASK_TYPES:
        raise ValueError(f"task_type {task_type!r} is not an ALFWorld task type: one of {', '.join(TASK_TYPES)}")
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
    """``config`` with its env- and model-dependent defaults (model, prompt format, history) filled in."""
    from rspo_gym.training.defaults import default_history_length, default_prompt_format

    model = config.model or (QUICKSTART_MODELS["alfworld"] if _is_alfworld(config) else QUICKSTART_MODELS["webshop"])
    return replace(
        config,
        model=model,
        history_length=config.history_length if config.history_length is not None else default_history_length(model),
        prompt_format=config.prompt_format if config.prompt_format is not None else default_prompt_format(model),
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


def _trajectories_per_iteration(config: QuickstartConfig) -> int:
    overrides = config.trainer_overrides
    groups, size = overrides.get("num_groups", 4), overrides.get("group_size", 4)
    explorer = overrides.get("explorer_group_size", 2) if config.swap == "explorer" else 0  # RSPOConfig's default
    return groups * (size + explorer)


def plan(config: QuickstartConfig) -> dict[str, Any]:
    """What the quick start will do, from the config alone (never the clock): the iterations, the
    iterations after which it evaluates, the task ids and the episodes per evaluation."""
    config = resolved(config)
    tasks = task_sets(config)
    points = [0] + [it for it in range(1, config.iterations + 1) if it % config.eval_every == 0 or it == config.iterations] \
        if config.eval_every > 0 else [0, config.iterations]
    return {
        "iterations": config.iterations,
        "evaluate_after": sorted(set(points)),
        "train_task_ids": tasks["train_task_ids"],
        "eval_task_ids": tasks["eval_task_ids"],
        "eval_episodes": config.eval_episodes,
        "trajectories_per_iteration": _trajectories_per_iteration(config),
        "seed": config.seed,
    }


def estimated_seconds(work: dict[str, Any]) -> float:
    """The plan's wall time on the 2-core reference machine, idle."""
    episodes = len(work["eval_task_ids"]) * work["eval_episodes"] * len(work["evaluate_after"])
    trajectories = work["iterations"] * work["trajectories_per_iteration"]
    ref = REFERENCE_SECONDS
    return ref["load"] + episodes * ref["eval_episode"] + trajectories * ref["train_trajectory"]


def episode_matrix(trajectories: list[Any], task_ids: list[int], episodes: int, metric: str = "won") -> list[list[float]]:
    """``(episodes, tasks)`` results of an evaluation that played ``task_ids`` repeated ``episodes``
    times (``_evaluation_ids``), trajectories in the order of those ids.

    >>> from types import SimpleNamespace as T
    >>> episode_matrix([T(won=True), T(won=False), T(won=False), T(won=True)], [3, 5], 2)
    [[1.0, 0.0], [0.0, 1.0]]
    """
    if len(trajectories) != len(task_ids) * episodes:
        raise ValueError(f"expected {len(task_ids) * episodes} episodes, got {len(trajectories)}")
    n = len(task_ids)
    return [[float(getattr(t, metric)) for t in trajectories[e * n:(e + 1) * n]] for e in range(episodes)]


def _evaluation_ids(work: dict[str, Any]) -> list[int]:
    """Every held-out task once per episode round: position k plays task ``k % n`` with its own seed."""
    return list(work["eval_task_ids"]) * work["eval_episodes"]


def held_out_matrix(trainer: Any, work: dict[str, Any]) -> tuple[dict[str, float], list[list[float]]]:
    """One held-out evaluation of ``trainer``'s policy as the plan says: its metrics and its
    ``(episodes, tasks)`` success matrix, on the same episode seeds every time it is called."""
    metrics, trajectories = trainer.evaluate(task_ids=_evaluation_ids(work), return_episodes=True)
    return metrics, episode_matrix(trajectories, work["eval_task_ids"], work["eval_episodes"])


def per_task(matrix: list[list[float]]) -> list[list[float]]:
    """The ``(episodes, tasks)`` matrix as one row of per-task means: what the interval resamples.

    >>> per_task([[1.0, 0.0], [0.0, 0.0]])
    [[0.5, 0.0]]
    """
    return [[sum(column) / len(column) for column in zip(*matrix)]]


class _Clock:
    """Elapsed time, the plan's estimate and an ETA rescaled by the speed seen so far."""

    def __init__(self, work: dict[str, Any]):
        self.started = time.perf_counter()
        self.estimate = estimated_seconds(work)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def eta(self, expected_done_s: float) -> str:
        """Time left, assuming the rest runs at the speed of the part done (expected to take ``expected_done_s``)."""
        speed = self.elapsed() / max(expected_done_s, 1e-9)
        return f"{max(0.0, (self.estimate - expected_done_s) * speed) / 60:.1f} min to go"


def run_quickstart(config: QuickstartConfig = QuickstartConfig()) -> dict[str, Any]:
    """Run the quick start; returns the summary (also written to ``summary.md`` / ``summary.json``)."""
    pin_cpu_kernels(config.cpu_capability)
    import torch

    from rspo_gym.training.rspo import RSPOTrainer
    from rspo_gym.intervals import bootstrap_mean_ci, paired_difference_ci
    from rspo_gym.plotting import plot_learning_curve
    from rspo_gym.policies.llm import LLMPolicy
    from rspo_gym.policies.models import load_model
    from rspo_gym.policies.warmstart import WarmStartConfig, warm_start

    config = resolved(config)
    torch.set_num_threads(config.threads)
    machine = cpu_description()
    if config.cpu_capability is not None and machine["cpu_capability"].lower() != config.cpu_capability:
        print(f"note: torch already runs its {machine['cpu_capability']} kernels in this process, not the pinned "
              f"{config.cpu_capability}: the numbers may differ from another machine's", flush=True)
    if config.cpu_capability == "avx2" and machine["mkl_branch"] not in ("AVX2", "n/a"):
        print(f"note: MKL runs its {machine['mkl_branch']} branch, not the pinned AVX2 (it honours that branch on Intel "
              f"CPUs only, and only if the quick start is the first to use it in its process): the numbers may differ "
              f"from another machine's", flush=True)
    work = plan(config)
    clock = _Clock(work)
    episodes_per_eval = len(work["eval_task_ids"]) * config.eval_episodes
    print(f"plan: {config.iterations} RL iterations of {work['trajectories_per_iteration']} trajectories on "
          f"{len(work['train_task_ids'])} training tasks; held-out evaluation after iterations {work['evaluate_after']}, "
          f"{len(work['eval_task_ids'])} tasks × {config.eval_episodes} episodes each; "
          f"about {clock.estimate / 60:.1f} min on 2 idle {REFERENCE_CPU} cores (the ETA below rescales it to this machine)",
          flush=True)
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    network, tokenizer = load_model(config.model, seed=config.seed)
    policy = LLMPolicy(network, tokenizer, value_head=config.base == "ppo", seed=config.seed)
    warm_history: list[dict] = []
    if config.warm_start:
        warm = WarmStartConfig(seed=config.seed, history_length=config.history_length, prompt_format=config.prompt_format)
        if _is_alfworld(config):
            warm = replace(warm, task_types=(config.task_type,))
        else:  # WebShop goals have no task types; clone on the train goals (as tiny-webshop was)
            warm = replace(warm, task_types=None, env_kwargs=(("split", "train"),), episodes=400, epochs=3)
        warm = replace(warm, **config.warm_start_overrides)
        print(f"[1/3] warm start: cloning the expert on {config.env_id} ...", flush=True)
        warm_history = warm_start(policy, config.env_id, warm)
        print(f"      done in {clock.elapsed():.0f} s (final loss {warm_history[-1]['loss']:.3f})", flush=True)
        clock = _Clock(work)  # the estimate covers RL and its evaluations, not the optional cloning
    else:
        print(f"[1/3] starting from the {config.model!r} model", flush=True)
    trainer = RSPOTrainer(
        config.env_id, model=policy, base=config.base, swap=config.swap, seed=config.seed,
        iterations=config.iterations, eval_every=0, output_dir=str(out), history_length=config.history_length,
        prompt_format=config.prompt_format,
        **{**task_sets(config), **config.trainer_overrides, "eval_seed": config.seed + EVAL_SEED_OFFSET},
    )
    ref = REFERENCE_SECONDS
    expected_eval_s = episodes_per_eval * ref["eval_episode"]
    expected_iteration_s = work["trajectories_per_iteration"] * ref["train_trajectory"]
    evaluations: list[dict[str, Any]] = []
    matrices: dict[int, list[list[float]]] = {}
    eval_seconds = [0.0]  # the last evaluation's duration: what the time limit keeps in reserve

    def evaluate(iteration: int) -> None:
        started = time.perf_counter()
        metrics, matrix = held_out_matrix(trainer, work)
        matrices[iteration] = matrix
        mean, low, high = bootstrap_mean_ci(per_task(matrix), seed=config.seed)
        evaluations.append({"iteration": iteration, "success": mean, "ci_low": low, "ci_high": high,
                            "score": metrics["eval/score"], "wins": matrix})
        eval_seconds[0] = time.perf_counter() - started
        done_s = ref["load"] + len(evaluations) * expected_eval_s + iteration * expected_iteration_s
        print(f"      iteration {iteration}: held-out success {mean:.1%} [{low:.1%}, {high:.1%}] "
              f"({clock.elapsed() / 60:.1f} min in, {clock.eta(done_s)})", flush=True)

    print(f"[2/3] held-out evaluation of the starting policy: {episodes_per_eval} episodes ...", flush=True)
    evaluate(0)
    deadline = None if config.time_limit_minutes is None else clock.started + 60.0 * config.time_limit_minutes

    def after_iteration(trainer_: Any, metrics: dict) -> None:
        if metrics["iteration"] in work["evaluate_after"] and metrics["iteration"] < config.iterations:
            evaluate(metrics["iteration"])

    print(f"[3/3] RSPO-{config.base} ({config.swap}) on {len(work['train_task_ids'])} training tasks, "
          f"{config.iterations} iterations ...", flush=True)
    budget = None if deadline is None else deadline - time.perf_counter() - eval_seconds[0]
    # a new run, not a resume: a previous quick start's record in the folder is replaced
    history = trainer.learn(config.iterations, callback=after_iteration, time_budget_s=budget, overwrite=True)
    if history:  # a time limit shorter than the first iteration leaves the start as the result
        evaluate(len(history))
    before, after = matrices[0], matrices[len(history)]
    gain, gain_low, gain_high = paired_difference_ci(per_task(after), per_task(before), seed=config.seed)
    summary = {**_summarise(config, work, evaluations, history, (gain, gain_low, gain_high), clock.elapsed(), warm_history), **machine}
    summary["weights_sha256"] = weights_sha256(out / "policy")
    title = f"RSPO-{config.base} on {config.env_id} ({config.model})"
    bands = [(e["iteration"], e["ci_low"], e["ci_high"]) for e in evaluations]
    plot_learning_curve(_curve_rows(history, evaluations), out / "learning_curve.png", title=title,
                        start={"eval/success": evaluations[0]["success"]}, held_out_bands=bands)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(_markdown(summary), encoding="utf-8")
    trainer.close()
    print(_markdown(summary))
    written = ("metrics.csv", "learning_curve.png", "summary.md", "config.json", "checkpoint.pt", "checkpoint_tensors/", "policy/")
    print(f"results in {out}/ ({', '.join(name for name in written if (out / name).exists())})")
    return summary


def _curve_rows(history: list[dict], evaluations: list[dict]) -> list[dict]:
    """The training rows with the quick start's own held-out measurements put on their iterations."""
    measured = {e["iteration"]: e for e in evaluations}
    return [{**row, **({"eval/success": measured[row["iteration"]]["success"]} if row["iteration"] in measured else {})}
            for row in history]


def _summarise(config, work, evaluations, history, gain, seconds, warm_history) -> dict[str, Any]:
    return {
        "config": asdict(config),
        "held_out_success_before_rl": evaluations[0]["success"],
        "held_out_success_after_rl": evaluations[-1]["success"],
        "held_out_gain": gain[0],
        "held_out_gain_ci_low": gain[1],
        "held_out_gain_ci_high": gain[2],
        "held_out_episodes": len(work["eval_task_ids"]) * config.eval_episodes,
        "evaluations": evaluations,
        "iterations_planned": work["iterations"],
        "iterations": len(history),
        "cut_short_by_time_limit": len(history) < work["iterations"],
        "warm_start_final_loss": warm_history[-1]["loss"] if warm_history else None,
        "warm_start_rows": warm_history[-1]["rows"] if warm_history else 0,
        "seconds": seconds,
    }


def _markdown(summary: dict[str, Any]) -> str:
    c = summary["config"]
    ran = summary["iterations"]
    iterations = f"{ran} RL iterations" if not summary["cut_short_by_time_limit"] else \
        f"{ran} of the {summary['iterations_planned']} planned RL iterations (the time limit cut training short)"
    lines = [
        f"# Quick start: RSPO-{c['base']} ({c['swap']}) on {c['env_id']}",
        "",
        f"- model `{c['model']}`, {c['train_tasks']} training tasks; held out: {c['eval_tasks']} tasks"
        + (f" of type `{c['task_type']}`" if "alfworld" in c["env_id"].lower() else "")
        + f" × {c['eval_episodes']} episodes at T = {c['trainer_overrides'].get('eval_temperature', 1.0)}, seed {c['seed']}",
        f"- held-out success before RL: {summary['held_out_success_before_rl']:.1%}",
        f"- held-out success after {iterations}: {summary['held_out_success_after_rl']:.1%}",
        f"- gain: {summary['held_out_gain']:+.1%}, 95 % interval [{summary['held_out_gain_ci_low']:+.1%}, "
        f"{summary['held_out_gain_ci_high']:+.1%}] (paired over the same tasks and episode seeds)",
        f"- wall time: {summary['seconds'] / 60:.1f} min",
        "",
        "| iteration | held-out success | 95 % interval |",
        "|---|---|---|",
    ]
    lines += [f"| {e['iteration']} | {e['success']:.1%} | [{e['ci_low']:.1%}, {e['ci_high']:.1%}] |" for e in summary["evaluations"]]
    return "\n".join(lines) + "\n"
