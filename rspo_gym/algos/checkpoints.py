"""Checkpoints that know their run and detect damage; run folders that are resumed or refused.

- ``run_identity``: what a checkpoint belongs to: trainer class, algorithm, model, the policy's
  parameter names and shapes, and every config field but ``RESUMABLE_FIELDS``.
- ``write_checkpoint`` / ``read_checkpoint``: one file, written to a temporary name and renamed
  (a kill never leaves half a checkpoint), holding the trainer state (``torch.save``) and a
  trailer with the identity and the sha256 of both. Reading checks the digest, then the identity,
  before anything is loaded, and says in one line what is wrong.
- ``claim_run_dir``: a fresh run refuses a folder that holds another run unless told to
  overwrite it (then that run's record is removed); a resume takes it as it is.
- ``restore_metrics``: on resume, ``metrics.jsonl`` is rewritten from the checkpoint's history.

File layout (format 1): ``MAGIC``, the ``torch.save`` payload, the trailer (UTF-8 JSON:
``format``, ``payload_bytes``, ``sha256``, ``identity``), the trailer's length (8 bytes, big
endian). The digest covers the payload and the canonical JSON of the identity, so a changed byte
anywhere but in the digest itself is caught. ``torch.load`` reads the payload through a window on
the file: nothing is held twice in memory, writing or reading.

Why ``metrics.jsonl`` is rewritten from the checkpoint rather than trimmed or reordered: the
checkpoint's history is the record of every iteration up to it, so the rewrite is exact
whatever the moment of the kill (a row appended after the checkpoint, a torn last line, no
checkpoint yet); the iterations after it are trained again, with the same seeds, and logged again.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any, BinaryIO

import torch

from rspo_gym.errors import UserError

__all__ = [
    "MAGIC",
    "RESUMABLE_FIELDS",
    "RUN_RECORD",
    "run_identity",
    "identity_mismatch",
    "write_checkpoint",
    "read_checkpoint",
    "claim_run_dir",
    "restore_metrics",
]

MAGIC = b"rspo-gym checkpoint\n"
FORMAT = 1
_LENGTH = struct.Struct(">Q")

#: Config fields a resumed run may change: how it is executed, measured or logged, not what it
#: trains. Every other field (and the trainer, the model, the parameter shapes) must match.
RESUMABLE_FIELDS = frozenset({
    "iterations", "output_dir", "progress", "checkpoint_every", "processes",
    "eval_every", "eval_tasks", "eval_split", "eval_task_ids", "eval_temperature", "eval_seed",
    "micro_batch_size", "max_tokens_per_micro_batch", "gradient_checkpointing", "ref_offload",
    "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode", "vllm_tensor_parallel_size",
    "env_pool", "env_workers", "report_to",
    "vllm_server_url", "vllm_server_model", "vllm_server_timeout", "vllm_weight_sync_host", "vllm_weight_sync_port",
})

#: What makes a folder a run's: a fresh run over one needs ``overwrite``, which removes these.
RUN_RECORD = (
    "config.json", "metrics.jsonl", "metrics.csv", "checkpoint.pt", "checkpoint.pt.tmp", "checkpoint_engine", "tensorboard",
)


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


def write_checkpoint(path: str | Path, state: dict[str, Any], identity: dict[str, Any]) -> Path:
    """Write ``state`` with ``identity`` and their digest to ``path`` (temporary file + rename,
    flushed to disk before the rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    digest = hashlib.sha256()
    with open(tmp, "wb") as f:
        f.write(MAGIC)
        payload = _HashingWriter(f, digest)
        torch.save(state, payload)
        digest.update(_canonical(identity))
        trailer = json.dumps(
            {"format": FORMAT, "payload_bytes": payload.count, "sha256": digest.hexdigest(), "identity": identity}
        ).encode()
        f.write(trailer + _LENGTH.pack(len(trailer)))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def read_checkpoint(path: str | Path, expected: dict[str, Any] | None = None) -> dict[str, Any]:
    """The state in ``path`` once its digest is right and (given ``expected``) its identity equals
    ``expected``; else a one-line ``UserError`` saying what is wrong and what to do."""
    path = Path(path)
    damaged = f"{path} is damaged"
    advice = "resume from an intact copy, or start over (rspo-gym train --overwrite; learn(overwrite=True))"
    try:
        with open(path, "rb") as f:
            size = f.seek(0, io.SEEK_END)
            f.seek(0)
            head = f.read(len(MAGIC))
            if head != MAGIC:
                what = "written by an older rspo-gym, without identity or checksum" if head[:2] == b"PK" else "not an rspo-gym checkpoint"
                raise UserError(f"{path} is {what}: {advice}")
            if size < len(MAGIC) + _LENGTH.size:
                raise UserError(f"{damaged} (cut short at {size} bytes): {advice}")
            f.seek(size - _LENGTH.size)
            (trailer_bytes,) = _LENGTH.unpack(f.read(_LENGTH.size))
            start, end = len(MAGIC), size - _LENGTH.size - trailer_bytes
            if end < start:
                raise UserError(f"{damaged} (cut short, or its trailer is overwritten): {advice}")
            try:
                f.seek(end)
                trailer = json.loads(f.read(trailer_bytes).decode())
                payload_bytes, sha256, identity = trailer["payload_bytes"], trailer["sha256"], trailer["identity"]
            except (ValueError, KeyError, TypeError, OverflowError):
                raise UserError(f"{damaged} (its trailer is unreadable: cut short or overwritten): {advice}") from None
            if trailer.get("format") != FORMAT or payload_bytes != end - start:
                raise UserError(f"{damaged} (its length does not match its trailer): {advice}")
            digest = hashlib.sha256()
            f.seek(start)
            for chunk in iter(lambda: f.read(min(1 << 20, end - f.tell())), b""):
                digest.update(chunk)
            digest.update(_canonical(identity))
            if digest.hexdigest() != sha256:
                raise UserError(f"{damaged} (sha256 mismatch: its bytes changed after it was written): {advice}")
            if expected is not None:
                different = identity_mismatch(identity, expected)
                if different:
                    raise UserError(
                        f"{path} belongs to another run ({'; '.join(different)}): resume with the settings it was "
                        f"written with, or start over in this folder (rspo-gym train --overwrite; learn(overwrite=True))"
                    )
            return torch.load(_Window(f, start, payload_bytes), map_location="cpu", weights_only=False)
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror or err}") from err


def claim_run_dir(out: Path, *, resume: bool, overwrite: bool) -> None:
    """Make ``out`` ready for a run: kept as it is for a resume; for a fresh run, refused when it
    holds a run's record unless ``overwrite``, which removes that record (``RUN_RECORD``)."""
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
        shutil.rmtree(target) if target.is_dir() else target.unlink()


def restore_metrics(out: Path, history: list[dict[str, Any]]) -> None:
    """Rewrite ``out/metrics.jsonl`` as ``history``, one row per line as ``Trainer._log`` writes
    them (temporary file + rename): the record of the resumed run up to its checkpoint."""
    tmp = out / "metrics.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, sort_keys=True) + "\n" for row in history)
    os.replace(tmp, out / "metrics.jsonl")
