"""The run folders of a comparison: found, checked, grouped, and measured on one set of episodes.

- ``load_runs``: run folders from paths and globs; anything that is not one is refused in one line.
- ``group_runs``: groups by setting (the config without the seed and the fields that only say how a
  run was executed or measured), named by the fields in which the groups differ; or the groups a
  caller names, each from its own globs.
- ``final_records``: each run's held-out record of its final policy on one common list of tasks
  and episode seeds: the run's own last evaluation where it is that, else a fresh evaluation of
  its saved ``policy/`` the way ``rspo-gym eval`` does it (same settings, the common tasks).

Nothing here imports torch until a run must be evaluated.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from rspo_gym.compare.files import check_env_steps, check_not_running, episode_seeds, last_iteration, learner_env_steps, read_config, read_records
from rspo_gym.errors import UserError
from rspo_gym.training.envs import default_eval_split
from rspo_gym.training.runs import find_run
from rspo_gym.training.validation import MAX_TASKS

__all__ = [
    "Run", "Group", "EvaluationPlan", "SETTING_IGNORED", "load_runs", "group_runs", "named_groups", "check_groups",
    "check_tasks", "plan_evaluation", "needs_evaluation", "evaluate_run", "final_records",
]

#: Config fields that say how a run was executed, logged or measured, not what it trained: runs
#: that differ only in these (and the seed) are one setting.
SETTING_IGNORED = frozenset({
    "seed", "output_dir", "progress", "checkpoint_every", "processes", "report_to", "micro_batch_size",
    "max_tokens_per_micro_batch", "gradient_checkpointing", "ref_offload", "env_pool", "env_workers",
    "eval_every", "eval_tasks", "eval_split", "eval_task_ids", "eval_temperature", "eval_seed",
    "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode", "vllm_tensor_parallel_size", "vllm_server_url",
    "vllm_server_model", "vllm_server_timeout", "vllm_weight_sync_host", "vllm_weight_sync_port",
})
#: ``config_class`` of a run's ``config.json`` -> the algorithm it names in a group's name.
_ALGOS = {"TrainerConfig": "grpo", "GiGPOConfig": "gigpo", "PPOConfig": "ppo", "RSPOConfig": "rspo"}


@dataclass
class Run:
    """A run folder: its ``config.json`` (as saved), evaluation records and last iteration."""

    path: Path
    config: dict[str, Any]
    records: list[dict[str, Any]]
    last_iteration: int
    has_policy: bool = True
    """Whether ``policy/`` is there: a run whose weights were removed to save space still compares
    on its records, but cannot be evaluated anew."""

    @functools.cached_property
    def learner_steps(self) -> dict[int, int] | None:
        """Iteration -> the learner's env steps by then (``files.learner_env_steps``), read only
        when runs are paired at equal learner steps."""
        return learner_env_steps(self.path)

    @property
    def seed(self) -> int:
        return int(self.config.get("seed", 0))

    @property
    def env_id(self) -> str:
        return str(self.config.get("env_id"))

    @property
    def split(self) -> str | None:
        return self.config.get("eval_split") or default_eval_split(self.env_id)

    def setting(self) -> dict[str, Any]:
        """The config fields that make the run's setting (its algorithm as ``algo``)."""
        out = {k: v for k, v in self.config.items() if k not in SETTING_IGNORED and k != "config_class"}
        out["algo"] = _ALGOS.get(self.config.get("config_class", "TrainerConfig"), self.config.get("config_class"))
        return out


@dataclass
class Group:
    """Runs of one setting, by seed; ``settings``: where it differs from the other groups."""

    name: str
    runs: list[Run]
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.runs]


def load_run(path: str | Path) -> Run:
    """The run in folder ``path``; ``UserError`` when it is none (neither ``policy/`` nor
    ``evaluations/`` beside a trainer's ``config.json``), when another process is still writing
    it, or when its ``config.json``, ``metrics.jsonl`` or records are not files rspo-gym wrote
    (``files.py``), their ``env_steps`` included."""
    from rspo_gym.training.config import load_config

    found = find_run(path) or _records_only(path)
    if found is None:
        inside = Path(path).is_dir() and any(find_run(p) for p in Path(path).iterdir() if p.is_dir())
        hint = f": it holds run folders, give them as {Path(path) / '*'}" if inside else \
            " (a run folder holds config.json and policy/ or evaluations/, as rspo-gym train writes them)"
        raise UserError(f"{path} is not a run folder{hint}")
    _, config_path = found
    folder = config_path.parent
    check_not_running(folder)
    data = read_config(config_path)  # bounded and depth-safe before the config loader parses it again
    try:
        load_config(config_path)
    except ValueError as err:
        raise UserError(str(err).splitlines()[0]) from None
    records, last = read_records(folder, env_id=data.get("env_id")), last_iteration(folder)
    if records and records[-1]["iteration"] > last:
        # the trainer logs an iteration's row right after its evaluation: a record past the last row is
        # a run stopped between the two (its policy/ is an earlier save) or files changed by hand
        raise UserError(f"{folder} has an evaluation record at iteration {records[-1]['iteration']} but metrics.jsonl ends at "
                        f"iteration {last}: the run stopped mid-iteration (resume it to finish) or its files were changed")
    check_env_steps(folder, records)
    return Run(folder, data, records, last, has_policy=(folder / "policy").is_dir())


def _records_only(path: str | Path) -> tuple[None, Path] | None:
    """``(None, config.json)`` for a run folder whose ``policy/`` is gone but whose held-out
    records are there (``evaluations/`` beside the trainer's ``config.json``), else None."""
    folder = Path(path).expanduser()
    if (folder / "evaluations").is_dir() and (folder / "config.json").is_file():
        return None, folder / "config.json"
    return None


def _expand(pattern: str) -> list[str]:
    """A path, or the sorted folders a glob pattern matches (none: refused)."""
    if glob.has_magic(pattern):
        matches = sorted(glob.glob(str(Path(pattern).expanduser())))
        if not matches:
            raise UserError(f"{pattern!r} matches nothing")
        return matches
    return [pattern]


def load_runs(patterns: Sequence[str]) -> list[Run]:
    """The run folders of ``patterns`` (paths or globs), each once, in order."""
    runs, seen = [], set()
    for pattern in patterns:
        for path in _expand(pattern):
            run = load_run(path)
            if run.path.resolve() not in seen:
                seen.add(run.path.resolve())
                runs.append(run)
    if not runs:
        raise UserError("no run folders given: name them (paths or globs), or use --group NAME=GLOB")
    return runs


def _differing(settings: list[dict[str, Any]]) -> list[str]:
    """The fields that take two or more values among the settings that have them (a field of one
    algorithm's config alone, such as RSPO's ``swap``, is named only where it varies)."""
    keys = sorted({k for s in settings for k in s}, key=lambda k: (k != "algo", k))
    return [k for k in keys if len({json.dumps(s[k], sort_keys=True) for s in settings if k in s}) > 1]


def _names(settings: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Each setting's name (its values of the differing fields it has) and those values."""
    differing = _differing(settings)
    shown = [{k: s[k] for k in differing if k in s} for s in settings]
    names = [", ".join(f"{k}={v}" for k, v in values.items()) or "all" for values in shown]
    return [(name if names.count(name) == 1 else f"{name} #{k + 1}", values) for k, (name, values) in enumerate(zip(names, shown))]


def _by_seed(runs: list[Run]) -> list[Run]:
    return sorted(runs, key=lambda r: (r.seed, str(r.path)))


def group_runs(runs: list[Run]) -> list[Group]:
    """Groups of runs with one setting, in the order their first run was given, each named by
    the fields in which the settings differ (``learning_rate=0.001``; ``all`` for one group)."""
    by_key: dict[str, list[Run]] = {}
    for run in runs:
        by_key.setdefault(json.dumps(run.setting(), sort_keys=True), []).append(run)
    named = _names([json.loads(key) for key in by_key])
    return [Group(name, _by_seed(members), shown) for (name, shown), members in zip(named, by_key.values())]


def named_groups(specs: Sequence[str]) -> list[Group]:
    """The groups of ``NAME=GLOB`` specs (a name given twice gathers its globs), in order."""
    patterns: dict[str, list[str]] = {}
    for spec in specs:
        name, sep, pattern = spec.partition("=")
        if not sep or not name.strip() or not pattern.strip():
            raise UserError(f"--group expects NAME=GLOB, got {spec!r}")
        patterns.setdefault(name.strip(), []).append(pattern.strip())
    groups = [Group(name, _by_seed(load_runs(globs))) for name, globs in patterns.items()]
    owners: dict[Path, str] = {}
    for g in groups:
        for r in g.runs:
            other = owners.setdefault(r.path.resolve(), g.name)
            if other != g.name:
                raise UserError(f"{r.path} is in two groups ({other} and {g.name}): a run can be in one")
    for g, (_, shown) in zip(groups, _names([g.runs[0].setting() for g in groups])):
        g.settings = shown
    return groups


def check_groups(groups: list[Group], *, one_seed: bool) -> None:
    """Refuse, in one line, groups that cannot be compared: runs on different envs or held-out
    splits, or a group of one seed (whose interval cannot include the training noise) unless
    ``one_seed``."""
    envs = sorted({r.env_id for g in groups for r in g.runs})
    if len(envs) > 1:
        raise UserError(f"the runs are on different envs ({', '.join(envs)}): compare runs of one env")
    splits = sorted({str(r.split) for g in groups for r in g.runs})
    if len(splits) > 1:
        raise UserError(f"the runs are evaluated on different held-out splits ({', '.join(splits)}): compare runs of one split")
    if not one_seed:
        for g in groups:
            if len(g.runs) < 2:
                raise UserError(
                    f"group {g.name!r} has one seed ({g.runs[0].path}): an interval over training seeds needs two; train "
                    f"more seeds, or pass --one-seed to accept intervals over held-out tasks only")


@dataclass(frozen=True)
class EvaluationPlan:
    """The episodes every run is measured on: ``task_ids`` of ``split`` in that order, at
    ``temperature``, with the episode seeds ``eval_seed`` gives each position (``episode_seeds``)."""

    split: str | None
    task_ids: tuple[int, ...]
    temperature: float
    eval_seed: int
    episode_seeds: tuple[int, ...]

    @functools.cached_property
    def positions(self) -> tuple[tuple[int, ...], ...]:
        """The positions of each distinct task in ``task_ids``, tasks in order of first play."""
        at: dict[int, list[int]] = {}
        for position, task in enumerate(self.task_ids):
            at.setdefault(task, []).append(position)
        return tuple(tuple(p) for p in at.values())

    @property
    def tasks(self) -> int:
        """Distinct held-out tasks: the columns every interval resamples."""
        return len(self.positions)

    def per_task(self, values: Sequence[float]) -> list[float]:
        """A record's per-episode ``values`` as one mean per task: a task played k times is one
        column, so an interval resamples tasks (whose difficulty is shared by their episodes), not
        episodes as if each were a task of its own.

        >>> plan = EvaluationPlan("valid_seen", (3, 5, 3, 5), 1.0, 0, (0, 1, 2, 3))
        >>> plan.per_task([1, 0, 0, 0]), plan.tasks
        ([0.5, 0.0], 2)
        """
        return [sum(values[p] for p in at) / len(at) for at in self.positions]

    def matches(self, record: dict[str, Any]) -> bool:
        """Whether ``record`` (checked by ``files.check_record``) played these episodes: the same
        tasks with the same episode seeds, at the same temperature. A record with other seeds is
        other episodes, however alike its tasks and ``eval_seed`` read."""
        return (record["split"] == self.split and tuple(record["task_id"]) == self.task_ids
                and float(record["temperature"]) == self.temperature and record["eval_seed"] == self.eval_seed
                and tuple(record["episode_seed"]) == self.episode_seeds)


def _final(run: Run) -> dict[str, Any] | None:
    """The run's record of its final policy: its last evaluation, where that is at its last iteration."""
    if run.records and run.records[-1]["iteration"] == run.last_iteration:
        return run.records[-1]
    return None


def check_tasks(tasks: int | None) -> None:
    """Refuse a ``--tasks`` outside 1 to ``MAX_TASKS`` (the most an evaluation plays) before any
    list of that many is made: a typo of a few zeros must be one line, not the machine's memory."""
    if tasks is not None and (not isinstance(tasks, int) or isinstance(tasks, bool) or not 1 <= tasks <= MAX_TASKS):
        raise UserError(f"--tasks must be from 1 to {MAX_TASKS:,} (held-out tasks per evaluation), got {tasks!r}")


def plan_evaluation(groups: list[Group], *, tasks: int | None = None) -> EvaluationPlan:
    """The common episodes: the first run's final evaluation (its task list, temperature and
    evaluation seed), or with ``tasks`` the split's first ``tasks`` tasks; a first run without
    records gives those its config names. The episode seeds are always the ones the evaluation
    seed gives each position, as every evaluation of the suite's envs plays them."""
    check_tasks(tasks)
    first = groups[0].runs[0]
    record = _final(first)
    c = first.config
    if tasks is not None:
        ids = tuple(range(tasks))
    elif record is not None:
        ids = tuple(record["task_id"])
    else:
        ids = tuple(c.get("eval_task_ids") or range(int(c.get("eval_tasks", 8))))
    temperature = float(record["temperature"]) if record is not None else float(c.get("eval_temperature", 0.0))
    eval_seed = int(record["eval_seed"]) if record is not None else int(c.get("eval_seed", 1000))
    return EvaluationPlan(first.split, ids, temperature, eval_seed, tuple(episode_seeds(eval_seed, len(ids))))


def needs_evaluation(run: Run, plan: EvaluationPlan) -> bool:
    """Whether ``run`` has no record of its final policy on ``plan``'s episodes."""
    record = _final(run)
    return record is None or not plan.matches(record)


def evaluate_run(run: Run, plan: EvaluationPlan, *, progress: bool = True) -> dict[str, Any]:
    """The record of ``run``'s saved ``policy/`` on ``plan``'s episodes, played as ``rspo-gym
    eval`` plays a run (its env, turn limit, history and decoding settings)."""
    from rspo_gym.training.config import RUN_EVAL_FIELDS
    from rspo_gym.training.grpo import GRPOTrainer


    settings = {name: run.config[name] for name in RUN_EVAL_FIELDS if name in run.config}
    settings.update(eval_split=plan.split, eval_task_ids=list(plan.task_ids), eval_tasks=len(plan.task_ids),
                    eval_temperature=plan.temperature, eval_seed=plan.eval_seed, num_groups=1, group_size=1, progress=progress)
    try:
        trainer = GRPOTrainer(run.env_id, model=str(run.path / "policy"), **settings)
    except UserError:
        raise
    except Exception as err:  # a damaged or foreign policy/ (torch.load's, safetensors' or the scorer's own errors)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"cannot load the policy of {run.path} ({type(err).__name__}: {first}): evaluate it with rspo-gym eval "
                        f"--model {run.path} to see more, or leave the run out") from None
    try:
        _, record = trainer.evaluate_record(iteration=run.last_iteration)
    finally:
        trainer.close()
    return record


def final_records(groups: list[Group], plan: EvaluationPlan, *, evaluate: bool = False, say: Callable[[str], None] = print,
                  progress: bool = True) -> tuple[dict[Path, dict[str, Any]], list[Path]]:
    """Each run's record of its final policy on ``plan``: its own where it has one (and not
    ``evaluate``), else a fresh evaluation, said run by run; and the runs evaluated."""
    runs = [r for g in groups for r in g.runs]
    todo = [r for r in runs if evaluate or needs_evaluation(r, plan)]
    weightless = [r for r in todo if not r.has_policy]
    if weightless:  # before any evaluation: a refusal after minutes of them would waste them
        raise UserError(f"{weightless[0].path} has no policy/ (its weights were removed) and must be evaluated "
                        f"{'anew (--evaluate)' if evaluate else 'on these tasks'}: compare on the episodes its records hold, or leave it out")
    if todo and importlib.util.find_spec("torch") is None:
        raise UserError(f"{len(todo)} runs have no record of their final policy on these tasks and must be evaluated, "
                        f"which needs torch: pip install 'rspo-gym[llm]'")
    out = {r.path: _final(r) for r in runs if not any(r is t for t in todo)}
    for k, run in enumerate(todo, 1):
        say(f"evaluating {run.path} ({k} of {len(todo)}): {len(plan.task_ids)} tasks of {plan.split}")
        out[run.path] = evaluate_run(run, plan, progress=progress)
    return out, [r.path for r in todo]
