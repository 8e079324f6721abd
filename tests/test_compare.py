"""``rspo-gym compare`` and the per-episode evaluation records of run folders, on run folders of the
fast policy (``model="drrn"``) trained here in a second or two each."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from rspo_gym.cli import main
from rspo_gym.compare import compare_runs
from rspo_gym.compare.stats import area_under_curve, difference
from rspo_gym.intervals import difference_draws, paired_difference_ci
from rspo_gym.training.eval_records import EVALUATIONS, read_evaluations

#: A tiny ALFWorld run: two groups of two tasks, five turns, evaluated on four tasks every iteration.
ALFWORLD = dict(iterations=2, group_size=2, num_groups=2, eval_tasks=4, eval_every=1, max_turns=5)


def train(out: Path, env: str = "rspo/ALFWorld-v0", seed: int = 0, iterations: int | None = None, resume: bool = False,
          callback=None, **config) -> Path:
    import torch

    from rspo_gym import GRPOTrainer

    torch.set_num_threads(1)  # the scorer's matrices are too small to share out (restored after each test)
    settings = {**ALFWORLD, **config} if env == "rspo/ALFWorld-v0" else config
    trainer = GRPOTrainer(env, model="drrn", seed=seed, progress=False, output_dir=str(out), **settings)
    trainer.learn(iterations, resume=resume, callback=callback)
    trainer.close()
    return out


@pytest.fixture(scope="module")
def alfworld_runs(tmp_path_factory) -> Path:
    """Seeds 0 and 1 of one ALFWorld setting, in ``<root>/a-<seed>``."""
    root = tmp_path_factory.mktemp("runs")
    for seed in (0, 1):
        train(root / f"a-{seed}", seed=seed)
    return root


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["compare", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_each_evaluation_writes_its_episodes(alfworld_runs):
    records = read_evaluations(alfworld_runs / "a-0")
    assert [r["iteration"] for r in records] == [1, 2]
    metrics = [json.loads(line) for line in (alfworld_runs / "a-0" / "metrics.jsonl").read_text().splitlines()]
    for record, row in zip(records, metrics):
        assert record["task_id"] == [0, 1, 2, 3] and record["split"] == "valid_seen"
        assert len(set(record["episode_seed"])) == 4
        assert np.mean(record["success"]) == row["eval/success"] and np.mean(record["steps"]) == row["eval/length"]
    # the same positions get the same episode seeds in every run (so runs pair episode by episode)
    assert records[-1]["episode_seed"] == read_evaluations(alfworld_runs / "a-1")[-1]["episode_seed"]


def test_a_resumed_runs_records_equal_an_uninterrupted_ones(tmp_path):
    whole = train(tmp_path / "whole", iterations=4, checkpoint_every=2)

    def killed_after_iteration_3(trainer, metrics):
        if metrics["iteration"] == 3:  # evaluated and logged; its checkpoint (every 2) never written
            raise KeyboardInterrupt

    part = tmp_path / "part"
    with pytest.raises(KeyboardInterrupt):
        train(part, iterations=4, checkpoint_every=2, callback=killed_after_iteration_3)
    (part / EVALUATIONS / ".000004.json.5f3a9c1e.tmp").write_text('{"format": 1, "iter')  # a write the kill cut short
    assert [r["iteration"] for r in read_evaluations(part)] == [1, 2, 3]
    train(part, iterations=4, checkpoint_every=2, resume=True)
    assert sorted(p.name for p in (part / EVALUATIONS).iterdir()) == [f"{i:06d}.json" for i in (1, 2, 3, 4)]
    assert read_evaluations(part) == read_evaluations(whole)


def test_a_group_against_itself_differs_by_exactly_zero(alfworld_runs, tmp_path, capsys):
    for seed in (0, 1):
        shutil.copytree(alfworld_runs / f"a-{seed}", tmp_path / f"copy-{seed}")
    code, out, err = run_cli(capsys, "--group", f"a={alfworld_runs}/a-*", "--group", f"b={tmp_path}/copy-*",
                             "--baseline", "a", "--out", str(tmp_path / "report"))
    assert code == 0, err
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["evaluated_runs"] == [] and summary["auc_iterations"] == [1, 2]
    assert {(d["measure"], d["metric"]) for d in summary["differences"]} == {("final", "success"), ("auc", "success")}
    for d in summary["differences"]:
        assert d["difference"] == 0.0 and d["ci_low"] <= 0.0 <= d["ci_high"]
        assert d["verdict"] == "no difference at this noise" and d["paired_seeds"] and d["seeds"] == [2, 2] and d["tasks"] == 4
    assert "b − a, final held-out success: +0.000" in out
    for name in ("report.md", "forest.png", "curves_success.png"):
        assert (tmp_path / "report" / name).stat().st_size > 0
    report = (tmp_path / "report" / "report.md").read_text()
    assert "![forest.png](forest.png)" in report and "no difference at this noise" in report


def test_runs_without_records_are_evaluated_from_their_saved_policy(alfworld_runs, tmp_path):
    """An old run folder (no ``evaluations/``): its saved policy, evaluated now on the same
    episodes, gives the record its training's last evaluation wrote."""
    for seed in (0, 1):
        shutil.copytree(alfworld_runs / f"a-{seed}", tmp_path / f"old-{seed}")
        shutil.rmtree(tmp_path / f"old-{seed}" / EVALUATIONS)
    summary = compare_runs(groups={"new": str(alfworld_runs / "a-*"), "old": str(tmp_path / "old-*")}, baseline="new",
                           out=None, progress=False, say=lambda line: None)
    assert summary["evaluated_runs"] == [str(tmp_path / "old-0"), str(tmp_path / "old-1")]
    assert summary["auc_iterations"] is None  # the old runs have no curve on these episodes
    final = [d for d in summary["differences"] if d["measure"] == "final"]
    assert [(d["difference"], d["ci_low"], d["ci_high"]) for d in final] == [(0.0, 0.0, 0.0)]


@pytest.mark.slow
def test_a_worse_group_is_reported_worse(tmp_path):
    """WebShop's score moves within three iterations at a high learning rate and not at all at a
    near-zero one: trained against untrained on the same 12 held-out goals."""
    for seed in (0, 1):
        for name, lr in (("good", 1e-2), ("bad", 1e-9)):
            train(tmp_path / f"{name}-{seed}", env="rspo/WebShop-v0", seed=seed, iterations=3, group_size=4, num_groups=4,
                  eval_tasks=12, eval_every=3, learning_rate=lr, checkpoint_every=0)
    summary = compare_runs([str(tmp_path / "*")], baseline="learning_rate=0.01", out=tmp_path / "report", progress=False)
    assert summary["metrics"] == ["success", "score"]
    score = next(d for d in summary["differences"] if d["metric"] == "score" and d["measure"] == "final")
    assert score["group"] == "learning_rate=1e-09" and score["verdict"] == "worse" and score["ci_high"] < 0
    assert (tmp_path / "report" / "curves_score.png").stat().st_size > 0


@pytest.mark.parametrize("case", ["not a run", "two envs", "two splits", "one seed", "no baseline", "bad group", "no match", "nothing"])
def test_refusals_are_one_line(case, alfworld_runs, tmp_path, capsys):
    runs = f"{alfworld_runs}/a-*"
    if case == "two envs":
        config = json.loads((alfworld_runs / "a-0" / "config.json").read_text())
        shutil.copytree(alfworld_runs / "a-0", tmp_path / "w")
        (tmp_path / "w" / "config.json").write_text(json.dumps({**config, "env_id": "rspo/WebShop-v0"}))
    if case == "two splits":
        config = json.loads((alfworld_runs / "a-0" / "config.json").read_text())
        shutil.copytree(alfworld_runs / "a-0", tmp_path / "w")
        (tmp_path / "w" / "config.json").write_text(json.dumps({**config, "eval_split": "valid_unseen"}))
    argv, expected = {
        "not a run": ([str(alfworld_runs)], "is not a run folder"),
        "two envs": ([runs, str(tmp_path / "w")], "different envs"),
        "two splits": ([runs, str(tmp_path / "w")], "different held-out splits"),
        "one seed": ([str(alfworld_runs / "a-0")], "has one seed"),
        "no baseline": ([runs, "--baseline", "b"], "matches no group"),
        "bad group": (["--group", "a"], "NAME=GLOB"),
        "no match": (["--group", f"a={tmp_path}/none-*"], "matches nothing"),
        "nothing": ([], "name the run folders"),
    }[case]
    code, out, err = run_cli(capsys, *argv, "--out", str(tmp_path / "report"))
    assert code == 2 and expected in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "report").exists()


def test_a_damaged_policy_to_evaluate_is_one_line(alfworld_runs, tmp_path, capsys):
    for seed in (0, 1):
        shutil.copytree(alfworld_runs / f"a-{seed}", tmp_path / f"r-{seed}")
    (tmp_path / "r-0" / "policy" / "action_scorer.pt").write_bytes(b"\x80\x02not a checkpoint" * 8)
    code, out, err = run_cli(capsys, f"{tmp_path}/r-*", "--evaluate", "--out", str(tmp_path / "report"))
    said, error = err.splitlines()  # the run it was evaluating, then the error
    assert code == 2 and said.startswith("evaluating") and error.startswith("rspo-gym: error: ") and "r-0/policy" in error


def test_one_seed_is_accepted_when_asked(alfworld_runs, tmp_path):
    summary = compare_runs([alfworld_runs / "a-0"], one_seed=True, out=tmp_path / "r", progress=False)
    assert summary["one_seed_groups"] == ["all"] and summary["differences"] == []
    assert "tasks only" in (tmp_path / "r" / "report.md").read_text()


def test_unpaired_seeds_resample_each_group_on_its_own():
    a = [[1.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    b = [[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]
    draws = difference_draws(a, b, paired_seeds=False, replicates=500)
    assert draws.shape == (500,) and abs(draws.mean() - (np.mean(a) - np.mean(b))) < 0.1
    with pytest.raises(ValueError, match="same tasks and seeds"):
        difference_draws(a, b, paired_seeds=True)
    # paired on identical shapes: intervals.paired_difference_ci's numbers, to the last bit
    d = difference(a[:2], b, paired_seeds=True)
    assert (d.difference, d.ci_low, d.ci_high) == paired_difference_ci(a[:2], b)


def test_pairing_on_tasks_sees_what_two_means_miss():
    """Two settings whose tasks differ in difficulty far more than the settings do: B wins
    one more task in ten on every seed. The unpaired view (means with intervals that overlap)
    cannot tell them apart; the paired difference can."""
    rng = np.random.default_rng(0)
    easy = rng.random(40) < 0.5
    a = np.array([easy & (rng.random(40) < 0.9) for _ in range(3)], dtype=float)
    b = np.maximum(a, (rng.random((3, 40)) < 0.12)).astype(float)
    d = difference(b, a, paired_seeds=True)
    assert d.verdict == "better" and d.ci_low > 0
    shuffled = a[:, rng.permutation(40)]  # the same results, the tasks no longer matched
    unpaired = difference(b, shuffled, paired_seeds=False)
    assert unpaired.difference == pytest.approx(d.difference) and unpaired.ci_low < 0 < unpaired.ci_high


def test_area_under_curve_is_the_mean_along_training():
    assert area_under_curve([1, 2, 4], np.array([[0.0], [1.0], [1.0]])).tolist() == pytest.approx([(0.5 + 2.0) / 3])
    with pytest.raises(ValueError):
        area_under_curve([3], np.array([[1.0]]))


# --- Hostile inputs (issue 54): every case is exit 2 with one line, or the right result ----------------------------------

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1",
       "OMP_NUM_THREADS": "1"}


def _memory_cap() -> None:
    """3 GiB of address space: a compare that reads or builds without bound fails in it at once
    instead of taking the machine's memory."""
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))


def compare_cli(*argv: str, timeout: float = 120, preexec=_memory_cap, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m rspo_gym compare`` as a user runs it (records only: no policy is evaluated); a
    hang fails the test instead of the suite."""
    return subprocess.run([sys.executable, "-m", "rspo_gym", "compare", *argv], cwd=REPO, env={**ENV, **(env or {})},
                          capture_output=True, text=True, timeout=timeout, preexec_fn=preexec)


def refused(done: subprocess.CompletedProcess, *expected: str) -> str:
    """Exit 2 and one line on stderr holding every ``expected``; that line."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert all(e in lines[0] for e in expected), lines[0]
    return lines[0]


@pytest.fixture
def pair(alfworld_runs, tmp_path) -> Path:
    """Copies of the two ALFWorld runs, ``<tmp>/r-0`` and ``<tmp>/r-1``, to damage."""
    for seed in (0, 1):
        shutil.copytree(alfworld_runs / f"a-{seed}", tmp_path / f"r-{seed}")
    return tmp_path


def test_tasks_out_of_bounds_is_refused_before_a_list_is_made(pair):
    """``--tasks 1000000000`` built a billion-entry tuple (an OOM kill) before the cap was seen;
    under a 3 GB address space the refusal must come at once."""
    for tasks in ("1000000000", "10001", "0"):
        done = compare_cli(f"{pair}/r-*", "--tasks", tasks, "--out", str(pair / "report"))
        refused(done, "--tasks must be from 1 to 10,000", tasks)
    refused(compare_cli(f"{pair}/r-*", "--replicates", "1000000000", "--out", str(pair / "report")), "--replicates")
    assert not (pair / "report").exists()


def _make_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _link_to_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _sparse(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(17 * 2**20)


@pytest.mark.parametrize("name", ["evaluations/000002.json", "metrics.jsonl"])
@pytest.mark.parametrize("damage, expected", [(_make_fifo, "is a FIFO"), (_link_to_zero, "is a character device"),
                                              (_sparse, "over ")])
def test_a_record_that_is_no_regular_file_or_too_big_is_one_line(pair, name, damage, expected):
    """A FIFO record hung compare, and a link to /dev/zero read until a MemoryError."""
    damage(pair / "r-0" / name)
    done = compare_cli(f"{pair}/r-*", "--out", str(pair / "report"), timeout=60)
    refused(done, str(pair / "r-0"), expected)
    assert not (pair / "report").exists()


def _final_record(run: Path) -> Path:
    return run / EVALUATIONS / "000002.json"


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("case, text, field", [
    ("NaN score", lambda r: r.update(score=[float("nan")] * 4), "score[0] is NaN"),
    ("inf score", lambda r: r.update(score=[1.0, float("inf"), 0.0, 0.0]), "score[1] is Infinity"),
    ("1e400 temperature", lambda r: r.update(temperature=float("inf")), "temperature is Infinity"),
    ("null score", lambda r: r.update(score=[None, 0.0, 0.0, 0.0]), "score[0]"),
    ("success 5", lambda r: r.update(success=[5, 0, 0, 0]), "success[0]"),
    ("string success", lambda r: r.update(success=["1", 0, 0, 0]), "success[0]"),
    ("nested score", lambda r: r.update(score=[[1.0], 0.0, 0.0, 0.0]), "score[0]"),
    ("score above 1", lambda r: r.update(score=[1.5, 0.0, 0.0, 0.0]), "score[0]"),
    ("no temperature", lambda r: r.pop("temperature"), "temperature"),
    ("string temperature", lambda r: r.update(temperature="0"), "temperature"),
    ("no env_steps", lambda r: r.pop("env_steps"), "env_steps"),
    ("string env_steps", lambda r: r.update(env_steps="12"), "env_steps"),
    ("short column", lambda r: r.update(steps=r["steps"][:3]), "steps"),
    ("other iteration", lambda r: r.update(iteration=1), "iteration"),
    ("no split", lambda r: r.pop("split"), "split"),
    ("null split", lambda r: r.update(split=None), "split"),
])
def test_bad_values_in_a_record_are_one_line_naming_the_field(pair, case, text, field):
    """NaN or inf scores printed +nan and wrote bare NaN into summary.json; success 5 was a
    success rate of 2.75; strings and lists were tracebacks; a record without temperature or
    env_steps was a KeyError."""
    path = _final_record(pair / "r-0")
    _edit(path, text)  # json.dumps writes NaN and inf bare, as a careless writer would
    if case == "1e400 temperature":
        path.write_text(path.read_text().replace("Infinity", "1e400"))
    done = compare_cli(f"{pair}/r-*", "--out", str(pair / "report"))
    refused(done, str(path), field)
    assert not (pair / "report").exists()


@pytest.mark.parametrize("case, content, expected", [
    ("Infinity", '{"iteration": Infinity}\n', "line 3 has no iteration count"),
    ("1e400", '{"iteration": 1e400}\n', "line 3 has no iteration count"),
    ("string", '{"iteration": "2"}\n', "line 3 has no iteration count"),
    ("deep", "[" * 100_000 + "\n", "line 3 is nested too deep"),
    ("not JSON", '{"iteration": 3\n', "line 3 is not JSON"),
    ("huge int", '{"iteration": ' + "9" * 5000 + "}\n", "line 3 is not JSON"),
])
def test_a_damaged_metrics_row_is_one_line(pair, case, content, expected):
    """``{"iteration": Infinity}`` or ``1e400`` in metrics.jsonl was an OverflowError traceback."""
    with open(pair / "r-1" / "metrics.jsonl", "a") as f:
        f.write(content)
    refused(compare_cli(f"{pair}/r-*", "--out", str(pair / "report")), str(pair / "r-1" / "metrics.jsonl"), expected)


def test_records_past_the_last_metrics_row_are_one_line(pair):
    """metrics.jsonl cut to its first row while the records reach iteration 2: the run stopped
    between an evaluation and its row (or was edited); its policy/ is not the record's."""
    metrics = pair / "r-1" / "metrics.jsonl"
    metrics.write_text(metrics.read_text().splitlines(keepends=True)[0])
    refused(compare_cli(f"{pair}/r-*", "--out", str(pair / "report")), str(pair / "r-1"), "metrics.jsonl ends at iteration 1")


def test_a_record_nested_deep_is_one_line(pair):
    _final_record(pair / "r-1").write_text("[" * 100_000)
    refused(compare_cli(f"{pair}/r-*", "--out", str(pair / "report")), str(_final_record(pair / "r-1")), "nested too deep")


def test_a_config_nested_deep_is_one_line(pair):
    (pair / "r-1" / "config.json").write_text('{"a": ' + "[" * 200_000 + "]" * 200_000 + "}")
    refused(compare_cli(f"{pair}/r-*", "--out", str(pair / "report")), str(pair / "r-1" / "config.json"), "nested too deep")


@pytest.mark.parametrize("value", [{}, [], ["RSPOConfig"]])
def test_a_config_class_that_is_no_name_is_one_line(pair, value):
    """A ``config_class`` that is a JSON object or list was a ``TypeError`` traceback (unhashable)."""
    path = pair / "r-1" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "config_class": value}))
    refused(compare_cli(f"{pair}/r-*", "--out", str(pair / "report")), str(path), "unknown config_class")


def test_compare_draws_the_trainers_episode_seeds(alfworld_runs):
    """compare's ``episode_seeds`` is the trainer's formula (it draws them without torch): the
    records training wrote are the seeds it expects."""
    from rspo_gym.compare.files import episode_seeds

    record = read_evaluations(alfworld_runs / "a-0")[-1]
    assert record["episode_seed"] == episode_seeds(record["eval_seed"], len(record["task_id"]))


def test_episode_seeds_that_are_not_the_evaluation_seeds_are_refused(pair):
    """A record whose episode seeds differ was paired with the others as the same episodes."""
    path = _final_record(pair / "r-1")
    _edit(path, lambda r: r.update(episode_seed=[s + 1 for s in r["episode_seed"]]))
    refused(compare_cli(f"{pair}/r-*", "--out", str(pair / "report")), str(path), "episode_seed")


def test_records_without_episode_seeds_are_not_paired_but_evaluated(pair):
    """A record with no episode seeds (a caller's own env chose them) cannot be the same episodes:
    that run is evaluated on the plan's, and the comparison is the one its own records give."""
    settings = dict(out=None, progress=False, say=lambda line: None, replicates=200, one_seed=True)
    reference = compare_runs(groups={"a": str(pair / "r-0"), "b": str(pair / "r-1")}, **settings)
    for it in (1, 2):
        _edit(pair / "r-1" / EVALUATIONS / f"{it:06d}.json", lambda r: r.update(episode_seed=[None] * len(r["task_id"])))
    summary = compare_runs(groups={"a": str(pair / "r-0"), "b": str(pair / "r-1")}, **settings)
    assert reference["evaluated_runs"] == [] and summary["evaluated_runs"] == [str(pair / "r-1")]
    final = [{k: d[k] for k in ("difference", "ci_low", "ci_high")} for d in reference["differences"] if d["measure"] == "final"]
    assert [{k: d[k] for k in ("difference", "ci_low", "ci_high")} for d in summary["differences"]] == final


def test_a_run_still_being_written_is_refused(pair):
    """With its writer's lock held, a run's policy/ and last record are not its final policy's."""
    import fcntl

    fd = os.open(pair / "r-1" / "rspo-gym.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"{os.getpid()}\n".encode())
        done = compare_cli(f"{pair}/r-*", "--out", str(pair / "report"))
    finally:
        os.close(fd)
    refused(done, str(pair / "r-1"), "being written by another rspo-gym process", f"pid {os.getpid()}", "wait")
    # the lock released (the run ended, or was killed): compared as usual, and the lock file left alone
    assert compare_cli(f"{pair}/r-*", "--out", str(pair / "report"), "--replicates", "200").returncode == 0
    assert (pair / "r-1" / "rspo-gym.lock").read_text() == f"{os.getpid()}\n"


def test_an_out_that_is_a_file_is_one_line(pair):
    (pair / "report").write_text("mine")
    refused(compare_cli(f"{pair}/r-*", "--out", str(pair / "report")), "--out", "is a file")
    refused(compare_cli(f"{pair}/r-*", "--out", str(pair / "report" / "sub")), "--out", "a file")
    assert (pair / "report").read_text() == "mine"


def test_an_out_in_a_read_only_folder_is_one_line(pair, capsys, monkeypatch):
    """A folder this process cannot write: the test runs as root, which writes anywhere (and the
    venv's python is not another user's to run), so the kernel's refusal is made by ``os.mkdir``."""
    locked = pair / "locked"
    locked.mkdir()
    real_mkdir = os.mkdir

    def refusing_mkdir(path, *args, **kwargs):
        if Path(path).parent == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", refusing_mkdir)
    code, out, err = run_cli(capsys, f"{pair}/r-*", "--out", str(locked / "report"), "--replicates", "200")
    assert code == 2 and err.count("\n") == 1 and "cannot write the comparison into" in err and "Permission denied" in err
    assert list(locked.iterdir()) == []


def test_a_full_disk_is_said_in_compares_words_and_leaves_no_out(pair):
    def limit() -> None:
        _memory_cap()
        resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))

    line = refused(compare_cli(f"{pair}/r-*", "--out", str(pair / "report"), preexec=limit), "no room", "compare again")
    assert "--resume" not in line and "run's record" not in line
    assert not (pair / "report").exists() and not list(pair.glob(".report.*"))


@pytest.mark.parametrize("existing", [False, True])
def test_a_compare_killed_while_writing_leaves_out_as_it_was(pair, monkeypatch, existing):
    """Killed after summary.json was written and before the report: --out is the earlier
    comparison's (or none), never a new summary.json beside an old or missing report."""
    from rspo_gym.compare import report

    out = pair / "report"
    if existing:  # an earlier comparison's files (marked, as this one's numbers may equal them)
        assert compare_runs([f"{pair}/r-*"], out=out, progress=False, replicates=200, say=lambda line: None)
        for path in out.iterdir():
            path.write_bytes(path.read_bytes() + b"earlier")
    before = {p.name: p.read_bytes() for p in out.iterdir()} if existing else None

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "report_markdown", killed)
    with pytest.raises(KeyboardInterrupt):
        compare_runs([f"{pair}/r-*"], out=out, progress=False, replicates=300, say=lambda line: None)
    if existing:
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    else:
        assert not out.exists()
    assert [p.name for p in pair.iterdir() if p.name.startswith(".")] == []


def test_a_kill_9_while_compare_writes_leaves_no_out(pair):
    """``kill -9`` as soon as compare starts writing (its staging folder, or the first file in
    --out, appears): no --out, only the hidden staging folder a kill cannot clean, which the next
    compare into that --out removes."""
    import signal
    import time

    out = pair / "report"
    argv = [sys.executable, "-m", "rspo_gym", "compare", f"{pair}/r-*", "--out", str(out), "--replicates", "200"]
    proc = subprocess.Popen(argv, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_memory_cap)
    deadline = time.monotonic() + 120
    while not (list(pair.glob(".report.*.tmp")) or (out / "summary.json").exists()) and proc.poll() is None:
        assert time.monotonic() < deadline, "compare wrote nothing in 120 s"
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not out.exists(), sorted(p.name for p in out.iterdir())
    (left,) = pair.glob(".report.*.tmp")
    stamp = left.stat().st_mtime - 120  # a minute after the kill: no writer can still be starting it
    os.utime(left, (stamp, stamp))
    assert compare_cli(f"{pair}/r-*", "--out", str(out), "--replicates", "200").returncode == 0
    assert list(pair.glob(".report.*")) == [] and (out / "summary.json").exists()


def test_summary_json_is_strict_json(pair):
    done = compare_cli(f"{pair}/r-*", "--out", str(pair / "report"), "--replicates", "200")
    assert done.returncode == 0, done.stderr

    def no_constants(name):
        raise AssertionError(f"summary.json holds {name}")

    json.loads((pair / "report" / "summary.json").read_text(), parse_constant=no_constants)


def _left(path: Path, age: float = 3600, files: tuple[str, ...] = ()) -> Path:
    """A staging folder as a killed compare leaves it, last changed ``age`` seconds ago."""
    path.mkdir()
    for name in files:
        (path / name).write_text("{}")
    stamp = path.stat().st_mtime - age
    os.utime(path, (stamp, stamp))
    return path


def test_the_next_compare_removes_the_staging_folders_dead_writers_left(pair):
    """A killed compare leaves its staging folder (beside a new --out, inside an existing one);
    the next compare into that --out removes those whose writer is gone (no process holds the
    folder's lock, and unchanged for a minute), and leaves a live writer's, a fresh one and
    anything not named as compare's staging."""
    import fcntl

    out = pair / "report"
    dead = [_left(pair / ".report.0badc0de.tmp", files=("summary.json",)), _left(pair / ".report.1badc0de.tmp")]
    live, fresh = _left(pair / ".report.deadbeef.tmp"), _left(pair / ".report.2badc0de.tmp", age=0)
    kept = [live, fresh, _left(pair / ".other.3badc0de.tmp"), _left(pair / ".report.xyz.tmp")]
    holder = os.open(live, os.O_RDONLY)  # a live writer holds its staging folder's lock
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        assert compare_runs([f"{pair}/r-*"], out=out, progress=False, replicates=200, say=lambda line: None)
        assert [p.name for p in dead if p.exists()] == [] and all(p.exists() for p in kept)
        inside = _left(out / ".report.4badc0de.tmp", files=("report.md",))  # an existing --out's staging is inside it
        assert compare_runs([f"{pair}/r-*"], out=out, progress=False, replicates=200, say=lambda line: None)
        assert not inside.exists() and all(p.exists() for p in kept)
    finally:
        os.close(holder)
