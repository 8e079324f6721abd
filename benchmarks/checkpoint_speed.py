"""Trainer checkpoints, one file (format 1) against safetensors shards (format 2): time and memory.

The state is what ``Trainer.state()`` holds for a full fine-tuning run: the weights of a randomly
initialised Qwen2 of a named shape (``train_scale.SHAPES``: Qwen2.5's published config values and
151,936-token vocabulary, tied embeddings for 0.5B/1.5B, nothing downloaded; ``--layers`` cuts the
depth), AdamW's state after one step (two moments per parameter and a 0-dim ``step``), a history
and the config. Each measurement runs in a fresh process, so peaks do not carry over:

- ``write``: ``write_checkpoint`` (``single_file=True`` for format 1), flushed to disk; peak RSS
  growth over the state already built, sampled every 5 ms;
- ``read``: a resume: ``read_checkpoint`` (digests checked, tensors on the CPU), then
  ``load_state_dict`` into a model and AdamW built beforehand; peak RSS growth over them, all of
  it and its anonymous part (format 2 maps the shards, whose pages are the page cache's), and
  whether the loaded weights and moments equal the saved ones bit for bit.

Reads follow the writes, so the files are mostly in the page cache: they measure the reader, not
the disk. ``--repeats`` alternates the formats' order.

    python benchmarks/checkpoint_speed.py --shape qwen2.5-0.5b --layers 2

Writes a markdown table to stdout and JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import write_json  # noqa: E402
from train_scale import SHAPES  # noqa: E402

FORMATS = {1: "one file (format 1)", 2: "safetensors shards (format 2)"}


class PeakRss:
    """The process's peak resident set size during a ``with`` block, all of it and its anonymous
    part (what is not a mapped file's pages), sampled every 5 ms."""

    def __enter__(self) -> "PeakRss":
        self.before, self.anonymous_before = _rss()
        self.peak, self.anonymous_peak = self.before, self.anonymous_before
        self._running = True
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def __exit__(self, *exc) -> None:
        self._running = False
        self._sampler.join()
        self._take()

    def _take(self) -> None:
        resident, anonymous = _rss()
        self.peak, self.anonymous_peak = max(self.peak, resident), max(self.anonymous_peak, anonymous)

    def _sample(self) -> None:
        while self._running:
            self._take()
            time.sleep(0.005)


def _rss() -> tuple[int, int]:
    """Resident bytes, and those not backed by a file."""
    with open("/proc/self/statm") as f:
        resident, shared = (int(field) * os.sysconf("SC_PAGE_SIZE") for field in f.read().split()[1:3])
    return resident, resident - shared


def build(shape_name: str, layers: int, seed: int):
    """A random Qwen2 of ``shape_name`` and its AdamW after one step (random gradients)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    shape = SHAPES[shape_name]
    config = Qwen2Config(
        vocab_size=shape.vocab_size, hidden_size=shape.hidden_size, intermediate_size=shape.intermediate_size,
        num_hidden_layers=layers, num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads, tie_word_embeddings=shape.tie_word_embeddings,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    for parameter in model.parameters():
        parameter.grad = torch.randn_like(parameter)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return model, optimizer


def trainer_state(model, optimizer, label: str) -> dict[str, Any]:
    """What ``Trainer.state()`` holds for a full fine-tuning run."""
    return {
        "iteration": 1,
        "history": [{"iteration": 1, "train/loss": 0.5}],
        "policy": {"model": model.state_dict()},
        "optimizer": optimizer.state_dict(),
        "config": {"model": label},
    }


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One measurement, in this process."""
    import torch

    from rspo_gym.training.checkpoints import read_checkpoint, tensors_folder, write_checkpoint

    path = args.dir / f"format{args.format}" / "checkpoint.pt"
    label = f"random {args.shape}, {args.layers} layers"
    if args.child == "write":
        state = trainer_state(*build(args.shape, args.layers, args.seed), label)
        start = time.perf_counter()
        with PeakRss() as rss:
            write_checkpoint(path, state, {"trainer": "benchmark"}, single_file=args.format == 1, max_shard_size=args.max_shard_size)
        seconds = time.perf_counter() - start
        files = [path, *sorted(tensors_folder(path).rglob("*.safetensors"))]
        return {
            "seconds": seconds, "growth_bytes": rss.peak - rss.before, "anonymous_growth_bytes": rss.anonymous_peak - rss.anonymous_before,
            "files": len(files), "bytes": sum(f.stat().st_size for f in files), "checkpoint_pt_bytes": path.stat().st_size,
            "tensor_bytes": sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in _tensors(state)}.values()),
        }
    model, optimizer = build(args.shape, args.layers, args.seed + 1)  # the resumed trainer's own weights, then overwritten
    start = time.perf_counter()
    with PeakRss() as rss:
        state = read_checkpoint(path)
        model.load_state_dict(state["policy"]["model"])
        optimizer.load_state_dict(state["optimizer"])
        del state
    seconds = time.perf_counter() - start
    saved = trainer_state(*build(args.shape, args.layers, args.seed), label)
    exact = all(map(torch.equal, _tensors(saved), _tensors(trainer_state(model, optimizer, label))))
    return {"seconds": seconds, "growth_bytes": rss.peak - rss.before, "anonymous_growth_bytes": rss.anonymous_peak - rss.anonymous_before,
            "exact": exact}


def _tensors(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _tensors(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _tensors(value)


def measure(args: argparse.Namespace, operation: str, fmt: int) -> dict[str, Any]:
    command = [
        sys.executable, __file__, "--child", operation, "--format", str(fmt), "--dir", str(args.dir),
        "--shape", args.shape, "--layers", str(args.layers), "--seed", str(args.seed),
    ] + (["--max-shard-size", str(args.max_shard_size)] if args.max_shard_size else [])
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> dict[str, Any]:
    runs: dict[int, dict[str, list[dict]]] = {fmt: {"write": [], "read": []} for fmt in FORMATS}
    for repeat in range(args.repeats):
        for fmt in (1, 2) if repeat % 2 == 0 else (2, 1):
            runs[fmt]["write"].append(measure(args, "write", fmt))
            runs[fmt]["read"].append(measure(args, "read", fmt))
            print(f"repeat {repeat + 1}, format {fmt}: write {runs[fmt]['write'][-1]['seconds']:.2f} s, "
                  f"read {runs[fmt]['read'][-1]['seconds']:.2f} s", file=sys.stderr)
    return {
        "shape": args.shape, "layers": args.layers, "max_shard_size": args.max_shard_size, "repeats": args.repeats,
        "cpus": os.cpu_count(), "load_average": os.getloadavg(), "runs": runs,
    }


def table(result: dict[str, Any]) -> str:
    gb = 1e9
    lines = [
        f"{result['shape']}, {result['layers']} layers, AdamW state: {result['runs'][1]['write'][0]['tensor_bytes'] / gb:.2f} GB "
        f"of tensors; median of {result['repeats']} runs (load average {result['load_average'][0]:.1f} on {result['cpus']} CPUs)",
        "",
        "| checkpoint | files | GB on disk | checkpoint.pt | write s | write peak RSS growth GB | resume s "
        "| resume peak RSS growth GB (anonymous) | exact |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for fmt, name in FORMATS.items():
        writes, reads = result["runs"][fmt]["write"], result["runs"][fmt]["read"]
        median = lambda rows, key: statistics.median(row[key] for row in rows)  # noqa: E731
        lines.append(
            f"| {name} | {writes[0]['files']} | {writes[0]['bytes'] / gb:.2f} | {writes[0]['checkpoint_pt_bytes'] / 1e3:,.0f} kB | "
            f"{median(writes, 'seconds'):.2f} | {median(writes, 'growth_bytes') / gb:.2f} | {median(reads, 'seconds'):.2f} | "
            f"{median(reads, 'growth_bytes') / gb:.2f} ({median(reads, 'anonymous_growth_bytes') / gb:.2f}) | "
            f"{all(row['exact'] for row in reads)} |"
        )
    lines.append("\nresume: read_checkpoint, then load_state_dict of the model and AdamW (built beforehand, not timed)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-0.5b")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-shard-size", type=int, default=None, help="bytes per shard (default: checkpoints.MAX_SHARD_SIZE)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=Path, default=None, help="where the checkpoints go (default: a temporary folder, removed)")
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/checkpoint_speed.json"))
    parser.add_argument("--child", choices=("write", "read"), help=argparse.SUPPRESS)
    parser.add_argument("--format", type=int, choices=sorted(FORMATS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return 0
    temporary = args.dir is None
    args.dir = Path(tempfile.mkdtemp(prefix="checkpoint_speed-")) if temporary else args.dir
    try:
        result = run(args)
    finally:
        if temporary:
            shutil.rmtree(args.dir, ignore_errors=True)
    print(table(result))
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
