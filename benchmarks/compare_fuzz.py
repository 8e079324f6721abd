"""A random attack on ``rspo-gym compare``'s inputs: every trial ends in one line with exit code 2,
or in the result of the unmutated runs, never in a traceback, a hang or a wrong number.

Four small real run folders are trained once (the fast policy on WebShop, two settings x two
seeds, evaluated at iterations 1 and 2: scores with partial credit, so a wrong number shows). Each
trial copies them, applies one to three mutations drawn at random (seeded) to the runs' evaluation
records, ``metrics.jsonl`` and ``config.json`` (a field deleted or of the wrong type, NaN, inf or
huge numbers, a per-episode entry out of range, swapped episode seeds, a truncated file, nesting
100,000 deep, bytes that are not UTF-8, a FIFO, a link to ``/dev/zero``, a folder, a sparse file of
17 MiB, ...; or a change that means nothing: the JSON reformatted, a stray temporary file, blank
lines), runs ``python -m rspo_gym compare`` on them in a subprocess (3 GiB of address space, 60 s)
and classifies it:

- ``refused``: exit 2, exactly one line on stderr (``rspo-gym: error: ...``), no traceback;
- ``equal``: exit 0 and a ``summary.json`` equal to the unmutated runs' (run paths aside);
- anything else is a failure: a traceback, another exit code, a hang, a result that differs, or a
  refusal of a mutation that means nothing (those must give the unmutated result).

No policy is evaluated: no mutation makes a run need one (each either damages a record, which is
refused, or changes nothing), so a trial costs one compare from records (~1-2 s).

``--x total_env_steps`` attacks the runs paired at equal compute instead: GRPO (4 iterations) and
RSPO whose explorer warms up for an iteration (3 iterations: its first record comes late, the
warm-up counted in its first iteration), two seeds each, evaluated every iteration. Besides the
mutations above it draws records' and ``metrics.jsonl``'s ``env_steps`` changed to other counts
(0, 10^9, off by one, another record's: damage, to be refused), and changes that make another
valid run (``valid``): early records removed, a run stopped after fewer iterations, a longer
warm-up, every count of a run scaled. Their result is not the unmutated one, so every exit 0 is
checked against the numbers computed here from the trial's own files, independently of
rspo_gym: each record's ``env_steps`` the sum of its run's ``metrics.jsonl`` rows up to it and
growing; the budget inside every run's records (the most steps every run reached, not before
any run's first record); each group's final value the mean of its runs' curves read there
(linear between records), the area the trapezoids over the span on every record's steps, and
the printed differences equal to these (1e-9). A refusal of valid runs is right only where their
records share no count of steps.

    python benchmarks/compare_fuzz.py --trials 200 --out docs/reliability_compare_fuzz.json
    python benchmarks/compare_fuzz.py --x total_env_steps --trials 200 --out docs/reliability_compare_fuzz_steps.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1",
       "OMP_NUM_THREADS": "1"}
RUNS = ("good-0", "good-1", "bad-0", "bad-1")
RECORDS = ("evaluations/000001.json", "evaluations/000002.json")
#: ``--x``: ``(group, runs' glob)`` of each group, the baseline, and the axis.
GROUPS, BASELINE, AXIS = (("good", "good-*"), ("bad", "bad-*")), "bad", "iterations"
NAN, INF, BIG = "__NaN__", "__Infinity__", "__1e400__"  # written as the bare JSON-ish literals
LITERALS = {f'"{NAN}"': "NaN", f'"{INF}"': "Infinity", f'"{BIG}"': "1e400"}
TOUCHED: set[Path] = set()  # the files changed in the current trial


def build(base: Path) -> None:
    """The four run folders: WebShop, the fast policy, learning rate 1e-2 (good) and 1e-9 (bad).
    Two iterations leave the policy buying nothing, so each record's outcomes are then redrawn
    (seeded, valid: success 0 or 1, a score in [0, 1] that is 1 where the episode succeeded), with
    the good setting ahead: the comparison then has numbers of every kind for a mutation to spoil."""
    import torch

    from rspo_gym import GRPOTrainer

    torch.set_num_threads(1)
    for name in RUNS:
        if (base / name / "policy").is_dir():
            continue
        setting, seed = name.split("-")
        trainer = GRPOTrainer("rspo/WebShop-v0", model="drrn", seed=int(seed), progress=False, output_dir=str(base / name),
                              iterations=2, group_size=2, num_groups=2, eval_tasks=8, eval_every=1, max_turns=15,
                              checkpoint_every=0, learning_rate=1e-2 if setting == "good" else 1e-9)
        trainer.learn()
        trainer.close()
        _redraw(base / name, name, lead=0.25 if setting == "good" else 0.0)


def use_steps_axis() -> None:
    """Switch the script to ``--x total_env_steps``'s runs (module doc)."""
    global RUNS, RECORDS, GROUPS, BASELINE, AXIS
    RUNS = ("grpo-0", "grpo-1", "rspo-0", "rspo-1")
    RECORDS = tuple(f"evaluations/{i:06d}.json" for i in range(1, 5))
    GROUPS, BASELINE, AXIS = (("rspo", "rspo-*"), ("grpo", "grpo-*")), "grpo", "total_env_steps"


def build_steps(base: Path) -> None:
    """The runs of ``--x total_env_steps``: GRPO for 4 iterations, RSPO (an explorer of 2 members
    per task, warmed up for an iteration) for 3, WebShop and the fast policy, seeds 0 and 1, every
    record's outcomes redrawn as ``build`` does, RSPO ahead."""
    import torch

    from rspo_gym import GRPOTrainer, RSPOTrainer

    torch.set_num_threads(1)
    for name in RUNS:
        if (base / name / "policy").is_dir():
            continue
        algo, seed = name.split("-")
        settings = dict(seed=int(seed), progress=False, output_dir=str(base / name), group_size=2, num_groups=2, eval_tasks=8,
                        eval_every=1, max_turns=15, checkpoint_every=0, learning_rate=1e-2)
        trainer = (GRPOTrainer("rspo/WebShop-v0", model="drrn", iterations=4, **settings) if algo == "grpo" else
                   RSPOTrainer("rspo/WebShop-v0", model="drrn", iterations=3, explorer_group_size=2, explorer_warmup_iterations=1,
                               **settings))
        trainer.learn()
        trainer.close()
        _redraw(base / name, name, lead=0.25 if algo == "rspo" else 0.0)


def _redraw(folder: Path, name: str, lead: float) -> None:
    """Each record's outcomes redrawn (seeded, valid): success 0 or 1, a score in [0, 1] that is 1
    where the episode succeeded."""
    rng = random.Random(name)
    for record in sorted((folder / "evaluations").glob("*.json")):
        data = json.loads(record.read_text())
        data["success"] = [int(rng.random() < 0.2 + lead) for _ in data["task_id"]]
        data["score"] = [1.0 if won else round(rng.random() * (0.6 + lead), 6) for won in data["success"]]
        record.write_text(json.dumps(data, separators=(",", ":")) + "\n")


def _memory_cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))


def compare(root: Path, out: Path) -> subprocess.CompletedProcess | None:
    """``rspo-gym compare`` of the two settings under ``root``; None when it hung."""
    groups = [arg for name, runs in GROUPS for arg in ("--group", f"{name}={root}/{runs}")]
    argv = [sys.executable, "-m", "rspo_gym", "compare", *groups, "--baseline", BASELINE, "--replicates", "100", "--x", AXIS,
            "--out", str(out)]
    try:
        return subprocess.run(argv, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=60, preexec_fn=_memory_cap)
    except subprocess.TimeoutExpired:
        return None


def normalized(summary_path: Path, root: Path) -> Any:
    """``summary.json`` with the trial's folder replaced, so trials compare with the reference."""
    return json.loads(summary_path.read_text(encoding="utf-8").replace(str(root), "<root>"))


# --- mutations: each takes (rng, root) and returns (its name, whether it means nothing) -----------------------------------

def _dump(data: Any, rng: random.Random | None = None) -> str:
    text = json.dumps(data) if rng is None else json.dumps(data, indent=rng.choice([None, 1, 4]), sort_keys=rng.random() < 0.5)
    for placeholder, literal in LITERALS.items():
        text = text.replace(placeholder, literal)
    return text


class NoTarget(Exception):
    """Every file a mutation could change has been changed in this trial already."""


def _pick(rng: random.Random, root: Path, files: tuple[str, ...] = RECORDS) -> Path:
    """A file of a random run not yet changed in this trial (each is changed at most once, so a
    mutation never reads what another left: a FIFO would block it)."""
    candidates = [root / run / name for run in RUNS for name in files
                  if root / run / name not in TOUCHED and os.path.lexists(root / run / name)]
    if not candidates:
        raise NoTarget
    path = rng.choice(candidates)
    TOUCHED.add(path)
    return path


def _picked_record(rng: random.Random, root: Path) -> tuple[Path, Any]:
    """A record ``_pick`` chose, and its parsed content: what every record mutation starts from."""
    path = _pick(rng, root)
    return path, json.loads(path.read_text())


BAD_SCALARS = ["x", None, [], {}, True, [[1]], -1, 2**70, NAN, INF, BIG]
BAD_ENTRIES = {
    "success": [5, -1, 0.5, "1", None, [1], True, NAN, INF, 2],
    "score": [NAN, INF, BIG, -0.1, 1.5, None, "0", [0], True],
    "steps": [-1, 1.5, "3", None, 2**70, True],
    "task_id": [-1, "0", None, 1.5, 2**40, True],
    "episode_seed": [-1, "x", 1.5, True, None, "+1"],
}


def delete_field(rng, root):
    path, data = _picked_record(rng, root)
    field = rng.choice(sorted(data))
    del data[field]
    path.write_text(_dump(data))
    return f"record: {field} deleted", False


def wrong_field(rng, root):
    path, data = _picked_record(rng, root)
    field = rng.choice(sorted(data))
    value = rng.choice([v for v in BAD_SCALARS if not (field == "split" and v == "x")])  # another split's name is another plan
    data[field] = value
    path.write_text(_dump(data))
    return f"record: {field} = {value!r}", False


def wrong_entry(rng, root):
    path, data = _picked_record(rng, root)
    column = rng.choice(sorted(BAD_ENTRIES))
    position = rng.randrange(len(data[column]))
    value = rng.choice(BAD_ENTRIES[column])
    data[column][position] = data[column][position] + 1 if value == "+1" else value
    path.write_text(_dump(data))
    return f"record: {column}[k] = {value!r}", False


def swap_seeds(rng, root):
    path, data = _picked_record(rng, root)
    seeds = data["episode_seed"]
    i, j = rng.sample(range(len(seeds)), 2)
    seeds[i], seeds[j] = seeds[j], seeds[i]
    path.write_text(_dump(data))
    return "record: two episode seeds swapped", False


def _truncate(path: Path, rng: random.Random) -> bool:
    """Cut ``path`` at a random byte; whether what is left still reads as the same JSON lines."""
    data = path.read_bytes()
    cut = data[:rng.randrange(len(data))]
    path.write_bytes(cut)
    try:
        before = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        return [json.loads(line) for line in cut.decode().splitlines() if line.strip()] == before
    except ValueError:
        return False


def truncate_record(rng, root):
    return "record truncated", _truncate(_pick(rng, root), rng)


def truncate_metrics(rng, root):
    return "metrics.jsonl truncated", _truncate(_pick(rng, root, ("metrics.jsonl",)), rng)


def truncate_config(rng, root):
    return "config.json truncated", _truncate(_pick(rng, root, ("config.json",)), rng)


def deep(rng, root):
    path = _pick(rng, root, (*RECORDS, "config.json"))
    depth = rng.choice([1_000, 10_000, 100_000, 200_000])
    path.write_text(rng.choice(["[" * depth, "[" * depth + "]" * depth, '{"a": ' * depth]))
    return f"{path.name} nested {depth} deep", False


def deep_metrics_row(rng, root):
    path = _pick(rng, root, ("metrics.jsonl",))
    with open(path, "a") as f:
        f.write("[" * rng.choice([1_000, 100_000]) + "\n")
    return "metrics.jsonl: a row nested deep", False


def not_utf8(rng, root):
    path = _pick(rng, root, (*RECORDS, "metrics.jsonl", "config.json"))
    data = path.read_bytes()
    at = rng.randrange(len(data))
    path.write_bytes(data[:at] + bytes([rng.randrange(0x80, 0x100)]) + b"\xff" + data[at:])
    return f"{path.name}: bytes that are not UTF-8", False


def special_file(rng, root):
    path = _pick(rng, root, (*RECORDS, "metrics.jsonl", "config.json"))
    kind = rng.choice(["fifo", "zero", "null", "dangling", "folder", "sparse", "empty"])
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "null":
        path.symlink_to("/dev/null")
    elif kind == "dangling":
        path.symlink_to(path.parent / "nowhere")
    elif kind == "folder":
        path.mkdir()
    elif kind == "sparse":
        with open(path, "wb") as f:
            f.truncate(17 * 2**20)
    else:
        path.write_bytes(b"")
    return f"{path.name}: {kind}", False


BAD_ROWS = ['{"iteration": Infinity}', '{"iteration": 1e400}', '{"iteration": "2"}', '{"iteration": -1}', "{}", "[]", '"x"',
            '{"iteration": 1', "\xff", '{"iteration": 9' + "9" * 5000 + "}", '{"iteration": true}', '{"iteration": 2.0}',
            '{"iteration": NaN}', '{"iteration": null}']


def bad_metrics_row(rng, root):
    path = _pick(rng, root, ("metrics.jsonl",))
    lines = path.read_text().splitlines()
    row = rng.choice(BAD_ROWS)
    lines.insert(rng.randrange(len(lines) + 1), row)
    path.write_text("\n".join(lines) + "\n", errors="surrogateescape")
    return f"metrics.jsonl: row {row[:30]!r}", False


def metrics_gone(rng, root):
    (_pick(rng, root, ("metrics.jsonl",))).unlink()
    return "metrics.jsonl deleted", False


def wrong_config_field(rng, root):
    """A config field set to a value its validation refuses (a valid value is another setting,
    whose comparison is rightly another: seed 1 once drew ``history_length = None``, valid)."""
    from rspo_gym.training.config import load_config

    path = _pick(rng, root, ("config.json",))
    original = path.read_text()
    data = json.loads(original)
    field = rng.choice(sorted(data))
    for value in rng.sample(BAD_SCALARS, len(BAD_SCALARS)):
        path.write_text(_dump({**data, field: value}))
        try:
            load_config(path)
        except (ValueError, RecursionError):
            return f"config: {field} = {value!r}", False
    path.write_text(original)  # every value is valid for this field (an ignored one, or free text)
    raise NoTarget


# meaning nothing: the unmutated result is the only right one

def reformat(rng, root):
    path = _pick(rng, root, (*RECORDS, "config.json"))
    path.write_text(_dump(json.loads(path.read_text()), rng) + rng.choice(["", "\n", "  \n\n"]))
    return f"{path.name} reformatted", True


def extra_field(rng, root):
    path, data = _picked_record(rng, root)
    data[rng.choice(["note", "host", "zz"])] = rng.choice(["x", [1, 2], {"a": None}, 3.5])
    path.write_text(_dump(data))
    return "record: an unknown field added", True


def float_success(rng, root):
    path, data = _picked_record(rng, root)
    data["success"] = [float(v) for v in data["success"]]
    path.write_text(_dump(data))
    return "record: success as 0.0/1.0", True


def stray_files(rng, root):
    folder = _pick(rng, root, ("evaluations",))
    name = rng.choice([".000002.json.5f3a9c1e.tmp", "notes.txt", "00002.json", "000002.json.bak", ".hidden"])
    (folder / name).write_bytes(rng.choice([b"", b"\xff\xfe", b"[" * 50_000, b'{"format": 1, "iter']))
    return f"evaluations: stray {name}", True


def linked_copy(rng, root):
    path = _pick(rng, root, (*RECORDS, "metrics.jsonl", "config.json"))
    copy = root / f"elsewhere-{rng.randrange(10**9)}"
    shutil.copy(path, copy)
    path.unlink()
    path.symlink_to(copy)
    return f"{path.name}: a link to a copy", True


def metrics_noise(rng, root):
    path = _pick(rng, root, ("metrics.jsonl",))
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rng.shuffle(rows)
    for row in rows:
        row[rng.choice(["loss", "note", "eval/success"])] = rng.choice([float("nan"), "x", None])
    path.write_text("\n\n".join(json.dumps(r) for r in rows) + "\n\n")
    return "metrics.jsonl: rows reordered, blank lines, NaN in other values", True


# --x total_env_steps: env steps the run did not take (damage), and other valid runs ("valid")

def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _records_of(folder: Path) -> list[tuple[Path, dict]]:
    """A run's records, by iteration."""
    paths = [p for p in (folder / "evaluations").iterdir() if re.match(r"^\d{6,}\.json$", p.name)]
    return sorted(((p, json.loads(p.read_text())) for p in paths), key=lambda pair: pair[1]["iteration"])


def wrong_env_steps(rng, root):
    path, data = _picked_record(rng, root)  # the run's other files may be damaged (a FIFO): only this one is read
    steps = data["env_steps"]
    value = rng.choice([v for v in (0, 10**9, steps + 1, steps - 1, steps // 2, steps * 2) if v != steps])
    data["env_steps"] = value
    path.write_text(_dump(data))
    return f"record: env_steps {value}", False


def wrong_metrics_steps(rng, root):
    path = _pick(rng, root, ("metrics.jsonl",))
    rows = _rows(path)
    row = rng.choice(rows)
    row["env_steps"] = rng.choice([0, row["env_steps"] + rng.choice([-1, 1, 37]), 10**9])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f"metrics.jsonl: env_steps {row['env_steps']} at iteration {row['iteration']}", False


def _whole_run(rng: random.Random, root: Path, prefix: str = "") -> Path:
    """A run none of whose files this trial changed, all of them then taken (a valid run's
    change is not mixed with a damaged file's)."""
    runs = [root / run for run in RUNS if run.startswith(prefix) and not any(root / run in t.parents for t in TOUCHED)]
    if not runs:
        raise NoTarget
    folder = rng.choice(runs)
    TOUCHED.update(folder / name for name in (*RECORDS, "metrics.jsonl", "config.json", "evaluations"))
    return folder


def _rewrite_steps(folder: Path, change: Callable[[int, int], int]) -> None:
    """Each row's ``env_steps`` to ``change(iteration, steps)``, each record's to the sum up to it."""
    rows = _rows(folder / "metrics.jsonl")
    for row in rows:
        row["env_steps"] = change(row["iteration"], row["env_steps"])
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for path, data in _records_of(folder):
        data["env_steps"] = sum(r["env_steps"] for r in rows if r["iteration"] <= data["iteration"])
        path.write_text(_dump(data))


def drop_early_records(rng, root):
    folder = _whole_run(rng, root)
    records = _records_of(folder)
    for path, _ in records[:rng.randrange(1, len(records))]:
        path.unlink()
    return f"{folder.name}: early records removed", "valid"


def stop_early(rng, root):
    folder = _whole_run(rng, root)
    last = rng.randrange(1, len(_records_of(folder)))
    for path, data in _records_of(folder):
        if data["iteration"] > last:
            path.unlink()
    rows = [r for r in _rows(folder / "metrics.jsonl") if r["iteration"] <= last]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f"{folder.name}: stopped after iteration {last}", "valid"


def longer_warmup(rng, root):
    folder = _whole_run(rng, root)
    extra = rng.choice([1, 10, 30, 60, 120, 400])
    _rewrite_steps(folder, lambda iteration, steps: steps + (extra if iteration == 1 else 0))
    return f"{folder.name}: {extra} more warm-up steps", "valid"


def scaled_steps(rng, root):
    folder = _whole_run(rng, root)
    factor = rng.choice([2, 3])
    _rewrite_steps(folder, lambda iteration, steps: steps * factor)
    return f"{folder.name}: steps x{factor}", "valid"


MUTATIONS: list[Callable[[random.Random, Path], tuple[str, bool]]] = [
    delete_field, wrong_field, wrong_entry, wrong_entry, swap_seeds, truncate_record, truncate_metrics, truncate_config, deep,
    deep_metrics_row, not_utf8, special_file, special_file, bad_metrics_row, metrics_gone, wrong_config_field,
    reformat, extra_field, float_success, stray_files, linked_copy, metrics_noise,
]
#: ``--x total_env_steps`` adds these.
STEP_MUTATIONS = [wrong_env_steps, wrong_env_steps, wrong_metrics_steps, drop_early_records, stop_early, stop_early, longer_warmup,
                  longer_warmup, scaled_steps]


def _interpolate(points: list[tuple[float, float]], x: float) -> float:
    """The curve through ``points`` (increasing steps) at ``x``, within them."""
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    if [p[0] for p in points] == [x]:  # a run of one record, read at its steps
        return points[0][1]
    raise AssertionError(f"{x} is outside the records' steps {points[0][0]} to {points[-1][0]}")


def expected_steps_result(root: Path) -> tuple[float, float, dict[tuple[str, str], float]] | str:
    """What ``--x total_env_steps`` must give on the runs under ``root``, from their files alone:
    ``(start, budget, {(measure, metric): difference})``, or why no result is right (a run whose
    records' ``env_steps`` are not the steps it took; records that share no count of steps)."""
    curves: dict[str, list[dict[str, list[tuple[float, float]]]]] = {}
    for name, runs in GROUPS:
        for folder in sorted(root.glob(runs)):
            rows = _rows(folder / "metrics.jsonl")
            curve: dict[str, list[tuple[float, float]]] = {"success": [], "score": []}
            for path, record in _records_of(folder):
                trained = sum(r["env_steps"] for r in rows if r["iteration"] <= record["iteration"])
                if record["env_steps"] != trained or (curve["success"] and record["env_steps"] <= curve["success"][-1][0]):
                    return f"{path}: env_steps {record['env_steps']} is not the run's {trained} or does not grow"
                by_task: dict[int, list[int]] = {}
                for position, task in enumerate(record["task_id"]):
                    by_task.setdefault(task, []).append(position)
                for metric in curve:
                    per_task = [sum(record[metric][k] for k in at) / len(at) for at in by_task.values()]
                    curve[metric].append((record["env_steps"], sum(per_task) / len(per_task)))
            curves.setdefault(name, []).append(curve)
    every = [c["success"] for runs in curves.values() for c in runs]
    start, budget = max(c[0][0] for c in every), min(c[-1][0] for c in every)
    if start > budget:
        return f"the records share no count of steps: one starts at {start}, one ends at {budget}"
    grid = sorted({start, budget} | {x for c in every for x, _ in c if start <= x <= budget})

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    def area(points: list[tuple[float, float]]) -> float:
        ys = [_interpolate(points, x) for x in grid]
        return sum((x1 - x0) * (y0 + y1) / 2 for x0, x1, y0, y1 in zip(grid, grid[1:], ys, ys[1:])) / (budget - start)

    (group, _), (base, _) = sorted(GROUPS, key=lambda g: g[0] == BASELINE)
    out = {}
    for metric in ("success", "score"):
        final = {g: mean([_interpolate(c[metric], budget) for c in curves[g]]) for g in (group, base)}
        out[("final", metric)] = final[group] - final[base]
        if budget > start:
            areas = {g: mean([area(c[metric]) for c in curves[g]]) for g in (group, base)}
            out[("auc", metric)] = areas[group] - areas[base]
    return start, budget, out


def check_steps(summary: dict[str, Any], expected: tuple[float, float, dict] | str) -> str | None:
    """Why ``summary`` (an exit 0) is not ``expected``'s result; None when it is."""
    if isinstance(expected, str):
        return f"exit 0 where no result is right ({expected})"
    start, budget, differences = expected
    if summary["total_env_steps"] != budget:
        return f"read at {summary['total_env_steps']} total env steps, not at the budget {budget}"
    if (summary["auc_env_steps"] is None) != (start == budget) or (start == budget and not summary.get("auc_left_out")):
        return f"the area over {start} to {budget} is {summary['auc_env_steps']}, left out: {summary.get('auc_left_out')!r}"
    got = {(d["measure"], d["metric"]): d["difference"] for d in summary["differences"]}
    wanted = {key: value for key, value in differences.items() if key[1] in summary["metrics"]}
    if got.keys() != wanted.keys() or any(abs(got[k] - wanted[k]) > 1e-9 for k in got):
        return f"differences {got} where the records give {wanted}"
    return None


def classify(done: subprocess.CompletedProcess | None, out: Path, root: Path, reference: Any, neutral: bool,
             kinds: set[Any] = frozenset()) -> str:
    """``refused``, ``equal``, or what went wrong."""
    if done is None:
        return "failure: hung (60 s)"
    lines = done.stderr.strip().splitlines()
    valid = "valid" in kinds  # other valid runs: the files say what is right
    if done.returncode == 2:
        if len(lines) != 1 or "Traceback" in done.stderr or not lines[0].startswith("rspo-gym: error: "):
            return f"failure: exit 2 with {len(lines)} stderr lines: {done.stderr[-300:]!r}"
        if valid and False not in kinds and not isinstance(expected_steps_result(root), str):
            return f"failure: refused valid runs whose records share steps: {lines[0][:200]!r}"
        return "failure: refused a mutation that means nothing" if neutral else "refused"
    if done.returncode == 0:
        try:
            result = normalized(out / "summary.json", root)
        except (OSError, ValueError) as err:
            return f"failure: exit 0 without a readable summary.json ({err})"
        if AXIS == "total_env_steps":
            try:
                wrong = check_steps(result, expected_steps_result(root))
            except (OSError, ValueError, KeyError, TypeError, AssertionError) as err:
                wrong = f"exit 0 on files the independent check cannot read ({type(err).__name__}: {err})"
            if wrong:
                return f"failure: {wrong}"
            if valid:
                return "correct"
        return "equal" if result == reference else "failure: exit 0 with a result other than the unmutated runs'"
    return f"failure: exit {done.returncode}: {done.stderr[-300:]!r}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default=None, help="folder for the runs and trials (default: a temporary one)")
    parser.add_argument("--out", default=None, help="write the counts and failures here as JSON")
    parser.add_argument("--x", choices=("iterations", "total_env_steps"), default="iterations",
                        help="the axis the runs are paired at: total_env_steps attacks GRPO against RSPO at equal compute")
    args = parser.parse_args(argv)
    mutations = list(MUTATIONS)
    if args.x == "total_env_steps":
        use_steps_axis()
        mutations += STEP_MUTATIONS
    work = Path(args.work or tempfile.mkdtemp(prefix="compare-fuzz-"))
    base = work / "base"
    start = time.time()
    (build_steps if AXIS == "total_env_steps" else build)(base)
    built = time.time() - start
    ref_root = work / "reference"
    shutil.rmtree(ref_root, ignore_errors=True)
    shutil.copytree(base, ref_root, symlinks=True)
    done = compare(ref_root, ref_root / "report")
    if done is None or done.returncode != 0:
        raise SystemExit(f"the unmutated runs do not compare: {done and done.stderr}")
    reference = normalized(ref_root / "report" / "summary.json", ref_root)
    if AXIS == "total_env_steps" and (wrong := check_steps(reference, expected_steps_result(ref_root))):
        raise SystemExit(f"the unmutated runs' comparison is not what their records give: {wrong}")
    counts: dict[str, int] = {"refused": 0, "equal": 0, "correct": 0, "failure": 0}
    counts_neutral = dict(counts)  # the trials whose every mutation means nothing
    by_mutation: dict[str, dict[str, int]] = {}
    failures = []
    rng = random.Random(args.seed)
    for trial in range(args.trials):
        root = work / "trial"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(base, root, symlinks=True)
        TOUCHED.clear()
        applied = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            mutation = rng.choice(mutations)
            try:
                applied.append((mutation.__name__, *mutation(rng, root)))
            except NoTarget:
                continue
        kinds = {n for _, _, n in applied}
        neutral = kinds <= {True}
        outcome = classify(compare(root, root / "report"), root / "report", root, reference, neutral, kinds)
        kind = outcome.split(":")[0]
        counts[kind] += 1
        if neutral:
            counts_neutral[kind] += 1
        for name in {name for name, _, _ in applied}:
            by_mutation.setdefault(name, dict.fromkeys(counts, 0))[kind] += 1
        if kind == "failure":
            failures.append({"trial": trial, "mutations": [d for _, d, _ in applied], "outcome": outcome})
            print(f"trial {trial}: {[d for _, d, _ in applied]}: {outcome}", flush=True)
    shutil.rmtree(work / "trial", ignore_errors=True)
    result = {"trials": args.trials, "seed": args.seed, "x": AXIS, "counts": counts, "counts_of_neutral_trials": counts_neutral,
              "by_mutation": dict(sorted(by_mutation.items())),
              "failures": failures, "build_seconds": round(built, 1), "trial_seconds": round(time.time() - start - built, 1),
              "python": sys.version.split()[0]}
    print(json.dumps({k: result[k] for k in ("trials", "counts", "counts_of_neutral_trials", "build_seconds", "trial_seconds")}))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
