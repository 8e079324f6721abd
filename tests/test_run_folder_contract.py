"""A run folder is a contract: one writer at a time; a resume continues the run or refuses, and
never shrinks its record, whatever the new flags say; every record file is written whole or not
at all (a full disk is one line, the record intact); a run's files run no code and allocate no
more than they hold; ``eval --seed`` is the evaluation's seed.

The command-line cases run ``python -m rspo_gym`` in a subprocess with the fast drrn policy, as a
user does, so exit codes, line counts and files are the real ones."""

import json
import os
import pickle
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.forged_checkpoint import Payload, forged

pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1"}
C = ["--model", "drrn", "--algo", "grpo", "--num-groups", "1", "--group-size", "2", "--max-turns", "3", "--set", "eval_every=0",
     "--seed", "5", "--set", "progress=false"]
RECORD = ("config.json", "metrics.jsonl", "metrics.csv", "checkpoint.pt")


def _cli(*args: str, stdin: str | None = None, limit_bytes: int | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    limit = None if limit_bytes is None else (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes)))
    return subprocess.run([sys.executable, "-m", "rspo_gym", *args], cwd=REPO, env=ENV, capture_output=True, text=True,
                          input=stdin, timeout=timeout, preexec_fn=limit)


def _refused(done: subprocess.CompletedProcess, expected: str) -> str:
    """Exit 2 and one line on stderr holding ``expected``; that line."""
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr[-3000:]
    return lines[0]


def _record(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in RECORD if (out / name).is_file()}


def _rows(out: Path) -> list[int]:
    return [json.loads(line)["iteration"] for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def base2(tmp_path_factory) -> Path:
    """A 2-iteration drrn GRPO run made with ``C`` (a checkpoint every iteration)."""
    out = tmp_path_factory.mktemp("base") / "run"
    done = _cli("train", *C, "--iterations", "2", "--output-dir", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.fixture
def run(base2, tmp_path) -> Path:
    """A copy of ``base2`` the test may change."""
    return Path(shutil.copytree(base2, tmp_path / "run"))


# ---------------------------------------------------------------------------- one writer
def test_a_second_writer_is_refused_while_the_first_runs_and_a_kill_9_frees_the_folder(tmp_path):
    out = tmp_path / "run"
    first = subprocess.Popen([sys.executable, "-m", "rspo_gym", "train", *C, "--iterations", "500", "--output-dir", str(out)],
                             cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not (out / "checkpoint.pt").exists():
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()[-3000:] if first.stderr else ""
            time.sleep(0.2)
        for extra in (["--resume"], ["--overwrite"]):
            _refused(_cli("train", *C, "--iterations", "500", "--output-dir", str(out), *extra), "is in use by another rspo-gym process")
        assert first.poll() is None, "the first writer died"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    rows = _rows(out)
    assert rows == list(range(1, len(rows) + 1))
    done = _cli("train", *C, "--iterations", str(len(rows)), "--output-dir", str(out), "--resume")  # the kernel freed the lock
    assert done.returncode == 0, done.stderr[-3000:]
    assert _rows(out) == rows



@pytest.mark.parametrize("kind", ["symlink", "hard link", "fifo"])
def test_a_lock_file_that_is_not_a_plain_file_of_the_run_is_one_line_and_writes_nothing_outside(kind, tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("precious\n")
    out = tmp_path / "run"
    out.mkdir()
    lock = out / "rspo-gym.lock"
    {"symlink": lambda: lock.symlink_to(precious), "hard link": lambda: os.link(precious, lock), "fifo": lambda: os.mkfifo(lock)}[kind]()
    _refused(_cli("train", *C, "--iterations", "1", "--output-dir", str(out)), f"{lock} is not a plain file")
    assert precious.read_text() == "precious\n" and sorted(p.name for p in out.iterdir()) == ["rspo-gym.lock"]


# ---------------------------------------------------------------------------- no shrink
@pytest.mark.parametrize("removed", [("checkpoint.pt",), ("checkpoint.pt", "metrics.jsonl")], ids=["checkpoint", "checkpoint+jsonl"])
def test_a_resume_never_shrinks_the_record_whatever_the_new_flags_say(run, removed):
    for name in removed:
        (run / name).unlink()
    before = _record(run)
    # the run's own checkpoint_every (1) decides whether a restart would replace rows, not the command line's
    for iterations in ("1", "2"):
        _refused(_cli("train", *C, "--iterations", iterations, "--output-dir", str(run), "--resume", "--set", "checkpoint_every=9"),
                 "has no checkpoint.pt but its metrics reach iteration 2")
    assert _record(run) == before


def test_a_refused_resume_leaves_config_json_as_it_was(run):
    before = _record(run)
    _refused(_cli("train", *C, "--iterations", "1", "--output-dir", str(run), "--resume"), "ask for at least 2")
    assert _record(run) == before
    from rspo_gym import GRPOTrainer
    from rspo_gym.errors import UserError

    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="drrn", num_groups=1, group_size=2, max_turns=3, eval_every=0, seed=5,
                          progress=False, output_dir=str(run))
    with pytest.raises(UserError, match="ask for at least 2"):
        trainer.learn(1, resume=True)
    trainer.close()
    assert _record(run) == before


def test_overwrite_removes_the_evaluation_records_rspo_gym_wrote_and_keeps_a_users_files(run):
    evaluations = run / "evaluations"
    evaluations.mkdir()
    (evaluations / "000002.json").write_text("{}\n")  # a record, and a temporary file a kill left
    (evaluations / ".000002.json.0123abcd.tmp").write_text("{")
    (evaluations / "notes.txt").write_text("mine\n")
    (evaluations / "plots").mkdir()
    done = _cli("train", *C, "--iterations", "1", "--output-dir", str(run), "--overwrite")
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in evaluations.iterdir()) == ["notes.txt", "plots"] and _rows(run) == [1]
    assert (evaluations / "notes.txt").read_text() == "mine\n"


# ---------------------------------------------------------------------------- atomic record files
def test_a_full_disk_during_a_resume_is_one_line_and_leaves_every_record_file_whole(run):
    before = _record(run)
    assert len(before["metrics.jsonl"]) < len(before["config.json"])  # the limit lets the first through, not the second
    limit = (len(before["metrics.jsonl"]) + len(before["config.json"])) // 2
    done = _cli("train", *C, "--iterations", "3", "--output-dir", str(run), "--resume", limit_bytes=limit)
    _refused(done, "no room")
    assert _record(run) == before
    assert not [p.name for p in run.iterdir() if p.name.endswith(".tmp")]
    assert _cli("eval", "--model", str(run), "--set", "progress=false", "--tasks", "1").returncode == 0


def test_atomic_write_keeps_the_previous_file_when_the_write_fails(tmp_path):
    from rspo_gym.atomic import atomic_write, write_text_atomic

    path = tmp_path / "config.json"
    write_text_atomic(path, "old")
    with pytest.raises(RuntimeError), atomic_write(path) as f:
        f.write("half of the new")
        raise RuntimeError("disk full")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["config.json"]


# ---------------------------------------------------------------------------- no code from a run folder
def _evil_model_folder(folder: Path, marker: Path) -> None:
    """A model folder that, loaded with remote code allowed, touches ``marker``."""
    folder.mkdir(parents=True, exist_ok=True)
    code = f"import pathlib\npathlib.Path({str(marker)!r}).touch()\nfrom transformers import PretrainedConfig\n" \
           "class EvilConfig(PretrainedConfig):\n    model_type = 'evil'\n"
    (folder / "evil.py").write_text(code)
    (folder / "config.json").write_text(json.dumps({
        "auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel", "AutoTokenizer": ["evil.EvilConfig", None]},
    }))


def test_a_policy_folder_naming_code_is_refused_and_runs_nothing(run, tmp_path):
    marker = tmp_path / "marker"
    shutil.rmtree(run / "policy")
    _evil_model_folder(run / "policy", marker)
    line = _refused(_cli("eval", "--model", str(run), "--set", "progress=false", stdin="y\ny\ny\n"), "names code to run (auto_map)")
    assert "evil" not in line.split(":")[-1]
    _refused(_cli("train", *C, "--model", str(run / "policy"), "--iterations", "1", "--output-dir", str(tmp_path / "new"), stdin="y\ny\ny\n"),
             "names code to run (auto_map)")
    assert not marker.exists()


def test_weights_holding_a_pickle_payload_are_one_line_without_torchs_advice(run, tmp_path):
    import torch

    marker = tmp_path / "marker"
    torch.save({"evil": Payload(marker)}, run / "policy" / "action_scorer.pt")
    line = _refused(_cli("eval", "--model", str(run), "--set", "progress=false"), "action_scorer.pt is refused")
    assert "posix.system" in line and "weights_only" not in line
    hf = tmp_path / "hf"
    from rspo_gym.policies.models import load_model

    model, tokenizer = load_model("tiny-untrained")
    model.save_pretrained(hf, safe_serialization=True)
    tokenizer.save_pretrained(hf)
    for file in hf.glob("*.safetensors"):
        file.unlink()
    torch.save({"evil": Payload(marker)}, hf / "pytorch_model.bin")
    line = _refused(_cli("eval", "--model", str(hf), "--set", "progress=false", "--max-turns", "1", "--tasks", "1"),
                    f"the weights of {hf} are refused")
    assert "posix.system" in line and "weights_only" not in line
    assert not marker.exists()


# ---------------------------------------------------------------------------- bounded allocation
class _Huge:
    """Unpickled, ``bytearray(size)``: gigabytes from a few bytes of pickle."""

    def __init__(self, size: int):
        self.size = size

    def __reduce__(self):
        return bytearray, (self.size,)


class _Tensor:
    """A tensor's name in a checkpoint's skeleton, kept as it was."""

    def __init__(self, pid):
        self.pid = pid


def _with_extra(skeleton: bytes, protocol: int = pickle.HIGHEST_PROTOCOL, **extra) -> bytes:
    """The trainer-state skeleton ``skeleton`` with ``extra`` entries, its tensor names kept."""
    import io

    class Reader(pickle.Unpickler):
        def persistent_load(self, pid):
            return _Tensor(pid)

    class Writer(pickle.Pickler):
        def persistent_id(self, obj):
            return obj.pid if isinstance(obj, _Tensor) else None

    state = Reader(io.BytesIO(skeleton)).load()
    out = io.BytesIO()
    Writer(out, protocol=protocol).dump({**state, **extra})
    return out.getvalue()


def _skeleton(path: Path) -> bytes:
    import struct

    data = path.read_bytes()
    (length,) = struct.unpack(">Q", data[-8:])
    trailer = json.loads(data[-8 - length:-8])
    start = len(b"rspo-gym checkpoint\n")
    return data[start:start + trailer["payload_bytes"]]


@pytest.mark.parametrize("size", [3 * 10**9, 10**15, "numpy.int64(10**15)"])
def test_a_checkpoint_asking_for_gigabytes_is_refused_before_they_are_taken(run, size):
    import numpy

    size = numpy.int64(10**15) if size == "numpy.int64(10**15)" else size  # any integer-like is a size
    forged(run / "checkpoint.pt", _with_extra(_skeleton(run / "checkpoint.pt"), x=_Huge(size)))
    _refused(_cli("train", *C, "--iterations", "3", "--output-dir", str(run), "--resume"),
             f"checkpoint.pt is refused: it asks for bytearray({size})")


def test_a_torch_file_asking_for_gigabytes_through_an_integer_like_is_refused_before_torch_loads_it(tmp_path):
    import numpy
    import torch

    from rspo_gym.safe_pickle import check_torch_file

    path = tmp_path / "action_scorer.pt"
    torch.save({"x": _Huge(numpy.int64(10**15))}, path)
    with pytest.raises(pickle.UnpicklingError, match=r"it asks for bytearray\(a value the pickle computes\)"):
        check_torch_file(str(path))


@pytest.mark.parametrize("buckets,expected", [(10_000_000, "does not match the tensors of action_scorer.pt"),
                                              (20_000_000, "buckets, embed_dim and hidden must be integers from 1 to")])
def test_a_scorer_config_that_disagrees_with_its_tensors_is_refused_before_it_allocates(run, buckets, expected):
    config = json.loads((run / "policy" / "scorer_config.json").read_text())
    (run / "policy" / "scorer_config.json").write_text(json.dumps({**config, "buckets": buckets}))
    started = time.perf_counter()
    _refused(_cli("eval", "--model", str(run), "--set", "progress=false"), expected)
    assert time.perf_counter() - started < 60  # 2.7 GB of embedding used to be built first


# ---------------------------------------------------------------------------- eval --seed
def test_eval_seed_is_the_evaluations_seed(run):
    from rspo_gym.cli import _eval_plan, build_parser

    for seed in (1, 2):
        _, _, overrides = _eval_plan(build_parser().parse_args(["eval", "--model", str(run), "--seed", str(seed)]))
        assert overrides["eval_seed"] == seed and "seed" not in overrides


# ---------------------------------------------------------------------------- hostile files: one line
def _trailer(path: Path) -> tuple[bytes, dict]:
    import struct

    data = path.read_bytes()
    (length,) = struct.unpack(">Q", data[-8:])
    return data, json.loads(data[-8 - length:-8])


def _swap_first_matrix_shape(run: Path) -> None:
    """Swap the shape of the first non-square matrix in the checkpoint's first shard (same bytes),
    then recompute the shard's sha256 in the trailer and the trailer's own: what anyone can write."""
    import hashlib
    import struct

    data, trailer = _trailer(run / "checkpoint.pt")
    shard = trailer["tensors"]["shards"][0]
    file = run / trailer["tensors"]["folder"] / shard["file"]
    raw = file.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    name = next(k for k, v in header.items() if k != "__metadata__" and len(v["shape"]) == 2 and v["shape"][0] != v["shape"][1])
    header[name]["shape"] = header[name]["shape"][::-1]
    text = json.dumps(header, separators=(",", ":")).encode().ljust(size)
    raw = raw[:8] + text + raw[8 + size:]
    file.write_bytes(raw)
    shard["sha256"] = hashlib.sha256(raw).hexdigest()
    forged(run / "checkpoint.pt", _skeleton(run / "checkpoint.pt"), tensors=trailer["tensors"])


def _with_deep_history(skeleton: bytes, depth: int) -> bytes:
    """The skeleton with a history of one row nested ``depth`` dicts deep, written as raw pickle
    opcodes (Python's pickler itself recurses too deep to write it)."""
    import struct

    marker = "DEEP-HISTORY-ROW"
    data = _with_extra(skeleton, protocol=3, history=[marker])  # protocol 3: no frames whose lengths would change
    string = b"X" + struct.pack("<I", len(marker)) + marker.encode()
    assert data.count(string) == 1
    return data.replace(string, (b"}" + b"X\x01\x00\x00\x00x") * depth + b"}" + b"s" * depth)


def test_hostile_checkpoints_and_records_are_one_line(run, tmp_path):
    resume = ["train", *C, "--iterations", "3", "--resume"]
    deep = tmp_path / "deep-trailer"
    shutil.copytree(run, deep)
    nested = b"[" * 100_000
    (deep / "checkpoint.pt").write_bytes(b"rspo-gym checkpoint\n" + nested + len(nested).to_bytes(8, "big"))
    _refused(_cli(*resume, "--output-dir", str(deep)), "its trailer is unreadable")

    deep_row = tmp_path / "deep-row"
    shutil.copytree(run, deep_row)
    (deep_row / "metrics.jsonl").write_text(json.dumps({"iteration": 1}) + "\n" + "[" * 20_000 + "\n")
    (deep_row / "checkpoint.pt").unlink()
    shutil.rmtree(deep_row / "checkpoint_tensors")
    (deep_row / "metrics.csv").unlink()
    done = _cli(*resume[:-2], "1", "--resume", "--output-dir", str(deep_row))  # row 1 is before the first checkpoint
    assert done.returncode == 0, done.stderr[-3000:]

    deep_history = tmp_path / "deep-history"
    shutil.copytree(run, deep_history)
    forged(deep_history / "checkpoint.pt", _with_deep_history(_skeleton(deep_history / "checkpoint.pt"), 20_000))
    _refused(_cli(*resume, "--output-dir", str(deep_history)), "checkpoint.pt")

    swapped = tmp_path / "swapped"
    shutil.copytree(run, swapped)
    _swap_first_matrix_shape(swapped)
    _refused(_cli(*resume, "--output-dir", str(swapped)), "does not fit this run's model and optimizer")


def _with_moments(path: Path, change) -> None:
    """``path`` rewritten with ``change(exp_avg, exp_avg_sq)`` applied to the AdamW moments of the
    learner's 4th parameter (a 64 x 32 matrix) and its 1st (8192 x 32), identity kept: what anyone
    holding the code can write."""
    from rspo_gym.training.checkpoints import read_checkpoint, write_checkpoint

    _, trailer = _trailer(path)
    state = read_checkpoint(path)
    for moments in (state["optimizer"]["state"][0], state["optimizer"]["state"][3]):
        moments["exp_avg"], moments["exp_avg_sq"] = change(moments["exp_avg"].clone(), moments["exp_avg_sq"].clone())
    write_checkpoint(path, state, trailer["identity"], label="forged")


@pytest.mark.parametrize("case,expected", [
    ("cut", "optimizer state exp_avg of parameter 0 has shape [1, 32], its parameter [8192, 32]"),  # was a segfault
    ("transposed", "optimizer state exp_avg of parameter 0 has shape [32, 8192], its parameter [8192, 32]"),  # was accepted
    ("nan", "optimizer state exp_avg of parameter 0 holds NaN or infinite values"),  # was NaN weights saved, exit 0
    ("negative", "optimizer state exp_avg_sq of parameter 0 holds negative values"),  # its square root is NaN
    ("int", "optimizer state exp_avg of parameter 0 is torch.int64, not floating point"),
])
def test_a_crafted_optimizer_state_is_one_line_before_it_is_loaded(run, case, expected):
    import torch

    change = {"cut": lambda m, v: (m[:1], v[:1]), "transposed": lambda m, v: (m.t().contiguous(), v.t().contiguous()),
              "nan": lambda m, v: (m.fill_(float("nan")), v), "negative": lambda m, v: (m, v.fill_(-1.0)),
              "int": lambda m, v: (m.to(torch.int64), v)}[case]
    _with_moments(run / "checkpoint.pt", change)
    before = _record(run)
    line = _refused(_cli("train", *C, "--iterations", "3", "--output-dir", str(run), "--resume"), expected)
    assert "does not fit this run's model and optimizer" in line
    assert _record(run) == before


@pytest.mark.parametrize("nested", ["{\"a\":" * 200_000 + "1" + "}" * 200_000, "[" * 200_000])
def test_a_config_json_nested_too_deep_to_read_is_one_line(run, nested):
    (run / "config.json").write_text(nested)
    _refused(_cli("eval", "--model", str(run), "--set", "progress=false", timeout=120),
             f"rspo-gym eval: cannot read {run / 'config.json'}: it is nested too deep to read")
    from rspo_gym.training.config import load_config  # what compare reads a run's config with too

    with pytest.raises(ValueError, match="it is nested too deep to read"):
        load_config(run / "config.json")


def test_webshop_serve_without_flask_is_one_line():
    # None in sys.modules: importing flask fails and find_spec finds nothing, as where it is not installed
    code = "import sys; sys.modules['flask'] = None; from rspo_gym.cli import main; raise SystemExit(main(['webshop', 'serve']))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=120)
    _refused(done, "rspo-gym webshop serve needs Flask: pip install 'rspo-gym[web]'")


def test_webshop_serve_with_a_flask_that_fails_to_import_is_one_line(tmp_path):
    broken = tmp_path / "site" / "flask"
    broken.mkdir(parents=True)  # installed, so find_spec finds it, but its import fails: a werkzeug too new for it
    (broken / "__init__.py").write_text("raise ImportError(\"cannot import name 'url_quote' from 'werkzeug.urls'\")\n")
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), ENV["PYTHONPATH"]])}
    done = subprocess.run([sys.executable, "-m", "rspo_gym", "webshop", "serve", "--num-products", "200"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    line = _refused(done, "rspo-gym webshop serve needs Flask, which is installed but does not import "
                          "(cannot import name 'url_quote' from 'werkzeug.urls')")
    assert "pip install" in line


@pytest.mark.parametrize("args,expected", [
    (["--port", "-1"], "--port must be an integer from 0 to 65535, got -1"),  # was an OverflowError traceback
    (["--port", "70000"], "--port must be an integer from 0 to 65535, got 70000"),
    (["--num-products", "0"], "rspo-gym webshop serve: num_products must be in [1, 5000000], got 0"),  # was a ValueError traceback
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_webshop_serve_settings_are_one_line_before_it_serves(args, expected):
    _refused(_cli("webshop", "serve", *args, timeout=60), expected)


@pytest.mark.parametrize("args,expected", [
    (["quickstart", "--iterations", "-1"], "iterations must be a positive integer, got -1"),
    (["quickstart", "--time-limit-minutes", "-5"], "time_limit_minutes must be > 0"),
    (["quickstart", "--eval-episodes", "1000000000"], "eval_episodes must be at most 1000"),
    (["quickstart", "--train-tasks", "100000000"], "train_tasks must be at most 1000"),
    (["demo", "--task-id", str(10**15)], "--task-id must be an integer from 0 to"),
    (["demo", "--split", "nope"], "Unknown split 'nope'"),
    (["demo", "--games", "/etc/passwd", "--episodes", "1"], "/etc/passwd: not a readable game.tw-pddl JSON file"),
    (["demo", "--episodes", "-3"], "--episodes must be an integer from 1 to"),
    (["train", "--set", "a=" + "[" * 60_000], "--set a: its JSON value is nested too deep to read"),
    # these used to loop forever (the generated train split is unbounded), or fail after the model loaded
    (["quickstart", "--task-type", "nosuchtype"], "task_type 'nosuchtype' is not an ALFWorld task type: one of pick_and_place_simple"),
    (["eval", "--model", "drrn", "--split", "train", "--task-type", "nosuchtype"], "task_type 'nosuchtype' is not an ALFWorld task"),
    (["quickstart", "--seed", str(10**23)], f"seed must be an integer from 0 to {2**63 - 1 - 1000}, got {10**23}"),
    (["quickstart", "--env", "rspo/Nope-v0"], "unknown env id 'rspo/Nope-v0'"),
    (["quickstart", "--env", "CartPole-v1"], "the quick start runs on ALFWorld or WebShop, not 'CartPole-v1'"),
    (["demo", "--task-id", "999999999"], "--task-id 999999999 out of range: split 'valid_seen' has 140 tasks (ids 0 to 139)"),
    (["demo", "--task-id", "139"], "--task-id 139 with --episodes 3 needs tasks 139 to 141: split 'valid_seen' has 140"),
], ids=lambda v: " ".join(v)[:40] if isinstance(v, list) else None)
def test_quickstart_demo_and_set_errors_are_one_line_at_once(args, expected, tmp_path):
    started = time.perf_counter()
    done = _cli(*args, "--output-dir", str(tmp_path / "out"), timeout=60) if args[0] == "quickstart" else _cli(*args, timeout=60)
    line = _refused(done, expected)
    assert time.perf_counter() - started < 10 and not (tmp_path / "out").exists()
    assert "eval_seed" not in line and "1000000001" not in line  # only what the user gave


@pytest.mark.parametrize("case", ["text env", "task ids", "dangling link"])
def test_env_task_and_folder_errors_come_before_torch_is_imported(case, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    args, expected = {
        "text env": (["--env", "CartPole-v1"], "CartPole-v1 is not a text env"),
        "task ids": (["--env", "rspo/WebShop-v0", "--set", "train_task_ids=[99999999]"], "train_task_ids [99999999] out of range"),
        "dangling link": (["--output-dir", str(link / "run")], f"{link} is a link to"),
    }[case]
    code = "import sys; from rspo_gym.cli import main; rc = main(sys.argv[1:]); print('torch' in sys.modules); raise SystemExit(rc)"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, "train", *C, *args], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=120)
    seconds = time.perf_counter() - started
    assert done.stdout.strip() == "False", "torch was imported before the error"
    _refused(subprocess.CompletedProcess(done.args, done.returncode, "", done.stderr), expected)
    assert seconds < 10  # about a second on an idle machine (0.6-1.1 s measured); torch alone is 2-4 s


def test_a_large_webshop_catalog_says_its_cost_and_is_built_only_when_asked():
    import gymnasium as gym

    import rspo_gym  # noqa: F401 - registers the envs
    from rspo_gym.envs.webshop.env import check_catalog_size

    with pytest.raises(ValueError, match=r"num_products=5000000 builds a catalog and search index of about 13\.5 GB in about 10 min"):
        gym.make("rspo/WebShop-v0", num_products=5_000_000)
    check_catalog_size(5_000_000, allow_large_catalog=True)  # the documented way to build it anyway
    started = time.perf_counter()
    _refused(_cli("train", *C, "--env", "rspo/WebShop-v0", "--set", 'env_kwargs={"num_products": 5000000}'), "allow_large_catalog=True")
    _refused(_cli("webshop", "serve", "--num-products", "5000000"), "--allow-large-catalog for webshop serve")
    assert time.perf_counter() - started < 20


def test_a_catalog_cost_under_a_minute_is_said_in_seconds():
    from rspo_gym.envs.webshop.env import check_catalog_size

    with pytest.raises(ValueError, match=r"num_products=200000 builds a catalog and search index of about 0\.5 GB in about 25 s "):
        check_catalog_size(200_000)  # was "in about 0 min"
