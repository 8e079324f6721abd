"""Checkpoints that know their run and detect damage; run folders that are resumed or refused.

- ``run_identity``: what a checkpoint belongs to: trainer class, algorithm, model, the policy's
  parameter names and shapes, and every config field but ``RESUMABLE_FIELDS``.
- ``write_checkpoint`` / ``read_checkpoint``: the trainer state in two parts. Its tensors go into
  safetensors shards of at most ``MAX_SHARD_SIZE`` bytes in a fresh folder
  ``checkpoint_tensors/<tag>/``; ``checkpoint.pt`` holds the rest (a pickle in which each tensor
  is a name: ``training/tensor_shards.py``), every shard's name, size and sha256, the run's identity
  and a sha256 over all of it. Reading checks that digest, then the identity, then every shard's
  size and sha256, before anything is loaded (to the CPU), and says in one line what is wrong.
- ``claim_run_dir``: a fresh run refuses a folder that holds another run unless told to
  overwrite it (then that run's record is removed); a resume takes it as it is.
- ``remove_leftovers``: the temporary files a killed writer of the folder left, removed by the next.
- ``restore_metrics``: on resume, ``metrics.jsonl`` is rewritten from the checkpoint's history.
- ``load_optimizer_state``: an optimizer's saved state, checked against its parameters, then loaded.

Layout of ``checkpoint.pt``: ``MAGIC``, the payload, the trailer (UTF-8 JSON: ``format``,
``payload_bytes``, ``sha256``, ``identity``, and in format 2 ``tensors``: the shard folder and
``{file, bytes, sha256}`` per shard), the trailer's length (8 bytes, big endian).

- Format 2 (written): the payload is the skeleton's pickle, kilobytes for any model; the digest
  covers it, the canonical JSON of the identity and that of ``tensors``, so a changed byte
  anywhere but in the digest itself is caught, and each shard is pinned by its own sha256.
- Format 1 (read, and written with ``single_file=True``): the payload is ``torch.save`` of the
  whole state, tensors included; the digest covers it and the identity. ``torch.load`` reads it
  through a window on the file: nothing is held twice in memory, writing or reading.

Why a kill at any moment leaves one complete checkpoint: the shards are written (each flushed to
disk) into a folder no ``checkpoint.pt`` names yet; then ``checkpoint.pt.tmp`` is written, flushed
and renamed over ``checkpoint.pt`` (the one step that switches checkpoints), and the rename is
flushed; only then are the other folders under ``checkpoint_tensors/`` removed: the previous
checkpoint's, and those a killed save left (never read, since no ``checkpoint.pt`` names them).
A save that fails (an error, or Ctrl-C's ``KeyboardInterrupt``, which Python raises between any
two steps, the rename's return and the next one included) removes its folder only when
``checkpoint.pt`` does not name it; what it leaves otherwise, the next save removes.
A shard is streamed tensor by tensor in safetensors' file format (``tensor_shards.shard_layout``)
and hashed as it is written, so the writer reads nothing back and holds no more than one tensor
beyond the state (a copy of one off the CPU or strided). Reading maps each verified shard with
the safetensors library (``safe_open``, copy-on-write): a tensor is paged in from the file when
first used, so a resume holds the checkpoint's tensors once.

Why ``metrics.jsonl`` is rewritten from the checkpoint rather than trimmed or reordered: the
checkpoint's history is the record of every iteration up to it, so the rewrite is exact
whatever the moment of the kill (a row appended after the checkpoint, a torn last line, no
checkpoint yet); the iterations after it are trained again, with the same seeds, and logged again.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import json
import math
import numbers
import os
import pickle
import secrets
import shutil
import struct
from pathlib import Path
from typing import Any, BinaryIO, Iterable

import torch

from rspo_gym.atomic import atomic_write, fsync_dir, remove_stale_temporaries, restore_swapped_folders
from rspo_gym.safe_pickle import allowed_classes, check_torch_file, refusal_reason
from rspo_gym.training.eval_records import EVALUATIONS, remove_evaluations
from rspo_gym.training.tensor_shards import join_state, plan_shards, shard_layout, split_state, tensor_data
from rspo_gym.errors import UserError

__all__ = [
    "MAGIC",
    "MAX_SHARD_SIZE",
    "RESUMABLE_FIELDS",
    "RUN_RECORD",
    "run_identity",
    "identity_mismatch",
    "write_checkpoint",
    "read_checkpoint",
    "tensors_folder",
    "claim_run_dir",
    "remove_leftovers",
    "remove_stale",
    "save_tag",
    "restore_metrics",
    "load_optimizer_state",
]

MAGIC = b"rspo-gym checkpoint\n"
FORMAT = 2  # what write_checkpoint writes; read_checkpoint reads 1 and 2
SINGLE_FILE_FORMAT = 1
_LENGTH = struct.Struct(">Q")
_CHUNK = 1 << 20
_ADVICE = "resume from an intact copy, or start over (rspo-gym train --overwrite; learn(overwrite=True))"
_UNSAFE = ("nothing in it was run; it was not written by rspo-gym, or was altered after: resume from a copy you trust, "
           "or start over (rspo-gym train --overwrite; learn(overwrite=True))")

#: Most tensor bytes in one shard file. The writer holds one shard's bytes beyond the state, so
#: this bounds its extra memory; a 7B model with AdamW state (~84 GB in float32) is ~42 files.
MAX_SHARD_SIZE = 2_000_000_000

#: Config fields a resumed run may change: how it is executed, measured or logged, not what it
#: trains. Every other field (and the trainer, the model, the parameter shapes) must match.
RESUMABLE_FIELDS = frozenset({
    "iterations", "output_dir", "progress", "checkpoint_every", "processes",
    "eval_every", "eval_tasks", "eval_split", "eval_task_ids", "eval_temperature", "eval_seed",
    "micro_batch_size", "max_tokens_per_micro_batch", "gradient_checkpointing", "ref_offload",
    "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode", "vllm_tensor_parallel_size",
    "env_pool", "env_workers", "report_to", "transfer_episodes",
    "vllm_server_url", "vllm_server_model", "vllm_server_timeout", "vllm_weight_sync_host", "vllm_weight_sync_port",
})

#: What makes a folder a run's: a fresh run over one needs ``overwrite``, which removes these.
RUN_RECORD = (
    "config.json", "metrics.jsonl", "metrics.csv", "checkpoint.pt", "checkpoint.pt.tmp", "checkpoint_tensors",
    "checkpoint_engine", "tensorboard", "policy", "adapter", "learning_curve.png", "evaluations", "transfer.json",
)


#: The run's files rewritten through ``atomic_write``; a kill between a temporary's creation and
#: its rename leaves ``.<name>.<8 hex digits>.tmp`` beside them.
REWRITTEN = ("config.json", "metrics.jsonl", "metrics.csv", "learning_curve.png", "transfer.json")
#: The run's folders saved through ``atomic_folder`` (the end of ``learn()``).
SAVED_FOLDERS = ("policy", "adapter")


def run_identity(trainer: Any) -> dict[str, Any]:
    """What ``trainer``'s checkpoints belong to (JSON-able), compared key by key on resume."""
    shapes = sorted(f"{name}:{list(shape)}" for name, shape in _shapes(trainer.policy.state_dict()))
    config = {k: v for k, v in trainer.config.to_dict().items() if k not in RESUMABLE_FIELDS}
    return {
        "trainer": type(trainer).__name__,
        "algo": trainer.algo,
        "model": trainer.model_name,
        "parameters": hashlib.sha256("\n".join(shapes).encode()).hexdigest()[:16],
        **{f"config.{k}": v for k, v in config.items()},
    }


def _shapes(state: Any, prefix: str = ""):
    if isinstance(state, torch.Tensor):
        yield prefix, tuple(state.shape)
    elif isinstance(state, dict):
        for key, value in state.items():
            yield from _shapes(value, f"{prefix}.{key}" if prefix else str(key))


def identity_mismatch(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``key: saved -> current`` for every key whose value differs (JSON round trip first, so a
    tuple and the list it was saved as are equal).

    >>> identity_mismatch({"config.num_groups": 2, "trainer": "GRPOTrainer"}, {"config.num_groups": 1, "trainer": "GRPOTrainer"})
    ['num_groups: 2 in the checkpoint, 1 here']
    """
    current = json.loads(json.dumps(current))
    keys = sorted(set(saved) | set(current))
    if saved.get("trainer") != current.get("trainer"):
        keys = ["trainer", "algo"]  # another algorithm: its config fields differ as a matter of course
    return [
        f"{key.removeprefix('config.')}: {saved.get(key)!r} in the checkpoint, {current.get(key)!r} here"
        for key in keys
        if saved.get(key) != current.get(key)
    ]


def _canonical(identity: dict[str, Any]) -> bytes:
    return json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()


class _HashingWriter(io.RawIOBase):
    """A write-only stream onto ``file`` that feeds every byte to ``digest`` and counts them."""

    def __init__(self, file: BinaryIO, digest: "hashlib._Hash"):
        self.file, self.digest, self.count = file, digest, 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.digest.update(data)
        self.count += len(data)
        return self.file.write(data)


class _Window(io.RawIOBase):
    """Bytes ``[start, start + length)`` of ``file`` as a seekable stream of their own."""

    def __init__(self, file: BinaryIO, start: int, length: int):
        self.file, self.start, self.length, self.position = file, start, length, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.length}[whence]
        self.position = min(max(base + offset, 0), self.length)
        return self.position

    def readinto(self, buffer) -> int:
        count = min(len(buffer), self.length - self.position)
        if count <= 0:
            return 0
        self.file.seek(self.start + self.position)
        data = self.file.read(count)
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)


def tensors_folder(path: str | Path) -> Path:
    """Where the shards of checkpoint ``path`` live: ``checkpoint.pt`` -> ``checkpoint_tensors/``."""
    path = Path(path)
    return path.with_name(path.stem + "_tensors")


def save_tag(label: str = "") -> str:
    """A fresh folder name for one save's files: ``label`` (the iteration) and 8 random hex digits,
    so a save never writes into the folder the current checkpoint names."""
    return f"{label}-{secrets.token_hex(4)}" if label else secrets.token_hex(8)


def write_checkpoint(
    path: str | Path,
    state: dict[str, Any],
    identity: dict[str, Any],
    *,
    max_shard_size: int | None = None,
    label: str = "",
    single_file: bool = False,
) -> Path:
    """Write ``state`` with ``identity`` to ``path`` and its tensors to shards of at most
    ``max_shard_size`` bytes (default ``MAX_SHARD_SIZE``) in ``checkpoint_tensors/<label>-<random>/``
    (format 2), in the order that keeps the previous checkpoint whole until the new one is.
    ``single_file=True`` writes format 1 instead: one file, tensors in its pickle, as rspo-gym
    wrote before format 2 (older versions read it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    root = tensors_folder(path)
    if single_file:
        _write_single_file(path, state, identity)
        if root.is_dir():  # a sharded checkpoint's tensors, which nothing names any more
            fsync_dir(path.parent)
            remove_stale(root, keep="")
        return path
    skeleton, tensors = split_state(state)
    plan = plan_shards(tensors, max_shard_size or MAX_SHARD_SIZE)
    tag = save_tag(label)
    folder, named = root / tag, f"{root.name}/{tag}"
    folder.mkdir(parents=True)
    try:
        shards = [
            _write_shard(folder / f"tensors-{i:05d}-of-{len(plan):05d}.safetensors", {name: tensors[name] for name in names})
            for i, names in enumerate(plan, 1)
        ]
        fsync_dir(folder)
        fsync_dir(root)
        manifest = {"folder": named, "shards": shards}
        digest = hashlib.sha256(skeleton)
        digest.update(_canonical(identity))
        digest.update(_canonical(manifest))
        trailer = json.dumps({
            "format": FORMAT, "payload_bytes": len(skeleton), "sha256": digest.hexdigest(),
            "identity": identity, "tensors": manifest,
        }).encode()
        tmp = path.with_suffix(path.suffix + ".tmp")
        _write_synced(tmp, [MAGIC, skeleton, trailer, _LENGTH.pack(len(trailer))])
        os.replace(tmp, path)
    except BaseException:
        # a save that fails (a full disk) leaves nothing behind; but a Ctrl-C can land between the rename's
        # return and here, and then the folder is the checkpoint's: whether it is, checkpoint.pt says
        if not _keeps_tensors_in(path, named):
            shutil.rmtree(folder, ignore_errors=True)
        raise
    fsync_dir(path.parent)  # the rename is on disk before the previous checkpoint's shards go
    remove_stale(root, keep=tag)
    return path


def _keeps_tensors_in(path: Path, folder: str) -> bool:
    """Whether ``path`` is an intact format-2 checkpoint whose shards are in ``folder``."""
    try:
        with open(path, "rb") as f:
            trailer, _ = _verified_trailer(f, path)
    except (OSError, UserError):
        return False
    tensors = trailer.get("tensors")
    return isinstance(tensors, dict) and tensors.get("folder") == folder


def _write_shard(file: Path, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Write ``tensors`` as one safetensors file, tensor by tensor; its name, size and sha256."""
    header, order = shard_layout(tensors)
    size, sha256 = _write_synced(file, itertools.chain([header], (tensor_data(tensors[name]) for name in order)))
    return {"file": file.name, "bytes": size, "sha256": sha256}


def _write_synced(file: Path, parts: Iterable[bytes | memoryview]) -> tuple[int, str]:
    """Write ``parts`` to ``file``, flush them to disk; their length and sha256, taken as written."""
    digest = hashlib.sha256()
    with open(file, "wb") as f:
        out = _HashingWriter(f, digest)
        for part in parts:
            out.write(part)
        f.flush()
        os.fsync(f.fileno())
    return out.count, digest.hexdigest()


def remove_stale(root: Path, keep: str) -> None:
    """Remove everything under ``root`` but ``keep``: the previous checkpoint's shards (or engine
    state) and those of killed saves. What cannot be removed now is tried again at the next save."""
    for entry in root.iterdir():
        if entry.name == keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()


def _write_single_file(path: Path, state: dict[str, Any], identity: dict[str, Any]) -> None:
    """Format 1: ``state`` whole (``torch.save``) in one file, temporary name + rename."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    digest = hashlib.sha256()
    with open(tmp, "wb") as f:
        f.write(MAGIC)
        payload = _HashingWriter(f, digest)
        torch.save(state, payload)
        digest.update(_canonical(identity))
        trailer = json.dumps(
            {"format": SINGLE_FILE_FORMAT, "payload_bytes": payload.count, "sha256": digest.hexdigest(), "identity": identity}
        ).encode()
        f.write(trailer + _LENGTH.pack(len(trailer)))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_checkpoint(path: str | Path, expected: dict[str, Any] | None = None) -> dict[str, Any]:
    """The state in ``path`` (format 1 or 2), its tensors on the CPU, once its digest and its
    shards' are right and (given ``expected``) its identity equals ``expected``; else a one-line
    ``UserError`` saying what is wrong and what to do."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            trailer, start = _verified_trailer(f, path)
            if expected is not None:
                different = identity_mismatch(trailer["identity"], expected)
                if different:
                    raise UserError(
                        f"{path} belongs to another run ({'; '.join(different)}): resume with the settings it was "
                        f"written with, or start over in this folder (rspo-gym train --overwrite; learn(overwrite=True))"
                    )
            if trailer["format"] == SINGLE_FILE_FORMAT:
                try:
                    payload = _Window(f, start, trailer["payload_bytes"])
                    check_torch_file(payload)
                    with torch.serialization.safe_globals(allowed_classes()):
                        return torch.load(payload, map_location="cpu", weights_only=True)
                except pickle.UnpicklingError as err:  # torch's message is a page long; its first line names the culprit
                    raise UserError(f"{path} is refused: {refusal_reason(err)}; {_UNSAFE}") from None
            f.seek(start)
            skeleton = f.read(trailer["payload_bytes"])
        tensors = _read_shards(path, trailer["tensors"])
    except OSError as err:
        raise UserError(f"cannot read {err.filename or path}: {err.strerror or err}") from err
    try:
        return join_state(skeleton, tensors)
    except pickle.UnpicklingError as err:
        raise UserError(f"{path} is refused: {refusal_reason(err)}; {_UNSAFE}") from None
    except (ValueError, TypeError, AttributeError, EOFError, RecursionError) as err:
        raise UserError(f"{path} is damaged ({_first_line(err)}): {_ADVICE}") from None


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def _verified_trailer(f: BinaryIO, path: Path) -> tuple[dict[str, Any], int]:
    """The trailer of the open checkpoint ``f`` and where its payload starts, once the payload's
    length and the digest are right."""
    damaged = f"{path} is damaged"
    size = f.seek(0, io.SEEK_END)
    f.seek(0)
    head = f.read(len(MAGIC))
    if head != MAGIC:
        what = "written by an older rspo-gym, without identity or checksum" if head[:2] == b"PK" else "not an rspo-gym checkpoint"
        raise UserError(f"{path} is {what}: {_ADVICE}")
    if size < len(MAGIC) + _LENGTH.size:
        raise UserError(f"{damaged} (cut short at {size} bytes): {_ADVICE}")
    f.seek(size - _LENGTH.size)
    (trailer_bytes,) = _LENGTH.unpack(f.read(_LENGTH.size))
    start, end = len(MAGIC), size - _LENGTH.size - trailer_bytes
    if end < start:
        raise UserError(f"{damaged} (cut short, or its trailer is overwritten): {_ADVICE}")
    try:
        f.seek(end)
        trailer = json.loads(f.read(trailer_bytes).decode())
        payload_bytes, sha256, identity, fmt = trailer["payload_bytes"], trailer["sha256"], trailer["identity"], trailer["format"]
        tensors = trailer["tensors"] if fmt == FORMAT else None  # the shard list, under the digest
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError, MemoryError):
        raise UserError(f"{damaged} (its trailer is unreadable: cut short or overwritten): {_ADVICE}") from None
    if fmt not in (SINGLE_FILE_FORMAT, FORMAT):
        raise UserError(f"{path} has checkpoint format {fmt!r}, unknown to this rspo-gym (written by a newer one, or damaged): "
                        f"upgrade rspo-gym, or start over (rspo-gym train --overwrite; learn(overwrite=True))")
    if payload_bytes != end - start:
        raise UserError(f"{damaged} (its length does not match its trailer): {_ADVICE}")
    digest = hashlib.sha256()
    f.seek(start)
    for chunk in iter(lambda: f.read(min(_CHUNK, end - f.tell())), b""):
        digest.update(chunk)
    digest.update(_canonical(identity))
    if tensors is not None:
        digest.update(_canonical(tensors))
    if digest.hexdigest() != sha256:
        raise UserError(f"{damaged} (sha256 mismatch: its bytes changed after it was written): {_ADVICE}")
    return trailer, start


def _read_shards(path: Path, manifest: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The tensors of checkpoint ``path``, loaded to the CPU once every shard's size and sha256
    (read in chunks) are those its trailer lists."""
    from safetensors import safe_open

    files = [(path.parent / manifest["folder"] / shard["file"], shard) for shard in manifest["shards"]]
    for file, shard in files:
        _verify_shard(file, shard, path)
    tensors: dict[str, torch.Tensor] = {}
    for file, _ in files:
        with safe_open(str(file), framework="pt", device="cpu") as f:
            for name in f.keys():
                tensors[name] = f.get_tensor(name)
    return tensors


def _verify_shard(file: Path, shard: dict[str, Any], path: Path) -> None:
    if not file.is_file():
        raise UserError(f"{file} is missing (it holds tensors of {path}): {_ADVICE}")
    size, expected = file.stat().st_size, shard["bytes"]
    if size != expected:
        change = "cut short at" if size < expected else "grown to"
        raise UserError(f"{file} is damaged ({change} {size} bytes of {expected}): {_ADVICE}")
    digest = hashlib.sha256()
    with open(file, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    if digest.hexdigest() != shard["sha256"]:
        raise UserError(f"{file} is damaged (sha256 mismatch: its bytes changed after it was written): {_ADVICE}")


def claim_run_dir(out: Path, *, resume: bool, overwrite: bool) -> None:
    """Make ``out`` ready for a run: kept as it is for a resume; for a fresh run, refused when it
    holds a run's record unless ``overwrite``, which removes that record (``RUN_RECORD``; of
    ``evaluations/``, only the files rspo-gym wrote)."""
    if resume and overwrite:
        raise UserError("resume and overwrite exclude each other: resume continues the run in the folder, overwrite discards it")
    present = [name for name in RUN_RECORD if (out / name).exists()]
    if resume or not present:
        return
    if not overwrite:
        raise UserError(
            f"{out} holds a run ({', '.join(present)}): continue it with --resume (learn(resume=True)), "
            f"start over with --overwrite (learn(overwrite=True)), or pick another --output-dir"
        )
    for name in present:
        target = out / name
        if name == EVALUATIONS:  # a user's own files may sit beside the records
            remove_evaluations(out)
        else:
            shutil.rmtree(target) if target.is_dir() else target.unlink()


def remove_leftovers(out: Path) -> None:
    """Remove what a killed writer of run folder ``out`` left: the temporary files of the files it
    rewrites (``REWRITTEN``), the staging folders of those it saves (``SAVED_FOLDERS``, whose
    previous folder comes back if the kill fell inside the swap) and ``checkpoint.pt.tmp``. For the folder's one writer (it holds the
    lock, ``runs.lock_run_dir``), so each is a dead process's; called once a run is open (a fresh
    run, ``--overwrite``, or a resume past its checks), so a refused command leaves them too."""
    remove_stale_temporaries(out, (*REWRITTEN, *SAVED_FOLDERS))
    restore_swapped_folders(out, SAVED_FOLDERS)
    with contextlib.suppress(OSError):
        (out / "checkpoint.pt.tmp").unlink()


def restore_metrics(out: Path, history: list[dict[str, Any]]) -> None:
    """Rewrite ``out/metrics.jsonl`` as ``history``, one row per line (``atomic_write``): after
    every iteration, and on resume, the record of the run up to its checkpoint."""
    with atomic_write(out / "metrics.jsonl") as f:
        f.writelines(json.dumps(row, sort_keys=True) + "\n" for row in history)


def load_optimizer_state(optimizer: torch.optim.Optimizer, saved: Any, name: str = "optimizer") -> None:
    """``optimizer.load_state_dict(saved)`` once ``saved`` is checked against the optimizer's own
    parameters; else ``ValueError`` naming the first thing wrong, and ``name`` (the state's key in
    the checkpoint: ``optimizer``, ``explorer_optimizer``, ...) to say whose (the trainer's resume
    turns it into one line).

    ``load_state_dict`` checks only the number of groups and parameters: moments of another shape
    are copied in as they are, and AdamW's fused kernel then reads past them (a segfault), NaN
    moments make NaN weights, and transposed ones are trained with. A checkpoint's sha256 has no
    key, so these are what a crafted file holds. Checked: each parameter's state is a dict of
    finite values; every tensor but ``step`` has the parameter's shape and a floating dtype (and
    the second moments, ``exp_avg_sq`` / ``max_exp_avg_sq``, are not negative: their square root
    divides); ``step`` is one number >= 0; the groups' hyperparameters are finite numbers."""
    groups = saved.get("param_groups") if isinstance(saved, dict) else None
    states = saved.get("state") if isinstance(saved, dict) else None
    if not isinstance(groups, list) or not isinstance(states, dict) or len(groups) != len(optimizer.param_groups):
        raise ValueError(f"{name} state has no param_groups for its {len(optimizer.param_groups)} group(s)")
    params: dict[Any, torch.Tensor] = {}
    for group, own in zip(groups, optimizer.param_groups):
        if not isinstance(group, dict) or not isinstance(group.get("params"), list) or len(group["params"]) != len(own["params"]):
            raise ValueError(f"{name} state's param_groups do not list this run's {len(own['params'])} parameters")
        for key, value in group.items():
            numbers = value if isinstance(value, (tuple, list)) and key != "params" else (value,)
            if key != "params" and any(_not_finite_number(v) for v in numbers):
                raise ValueError(f"{name} state's {key} is {value!r}, not a finite number")
        params.update(zip(group["params"], own["params"]))
    for index, state in states.items():
        if index not in params or not isinstance(state, dict):
            raise ValueError(f"{name} state has an entry {index!r} for no parameter")
        param = params[index]
        for key, value in state.items():
            where = f"{name} state {key} of parameter {index}"
            if not isinstance(value, torch.Tensor):
                if _not_finite_number(value):
                    raise ValueError(f"{where} is {value!r}, not a finite number")
                continue
            if key == "step":
                if value.numel() != 1 or value.is_complex() or not bool(torch.isfinite(value).all()) or float(value) < 0:
                    raise ValueError(f"{where} is not one number >= 0")
                continue
            if tuple(value.shape) != tuple(param.shape):
                raise ValueError(f"{where} has shape {list(value.shape)}, its parameter {list(param.shape)}")
            if not value.is_floating_point():
                raise ValueError(f"{where} is {value.dtype}, not floating point")
            if not bool(torch.isfinite(value).all()):
                raise ValueError(f"{where} holds NaN or infinite values")
            if key.endswith("exp_avg_sq") and bool((value < 0).any()):
                raise ValueError(f"{where} holds negative values")
    optimizer.load_state_dict(saved)


def _not_finite_number(value: Any) -> bool:
    """A number (a real, or a one-element real tensor, as torch allows for ``lr``) that is NaN or
    infinite, or a value that is no number, string, flag or ``None`` at all."""
    if value is None or isinstance(value, (bool, str)):
        return False
    if isinstance(value, numbers.Real):
        return not math.isfinite(float(value))
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
        return not bool(torch.isfinite(value).all())
    return True
