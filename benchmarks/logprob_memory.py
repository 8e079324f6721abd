"""Bytes the training forward keeps for backward, per response token: full logits vs chunked scores.

A random Qwen2 with Qwen2.5's 151,936-token vocabulary and a small body (``--hidden``, 2 layers),
so the numbers isolate what the vocabulary costs. One ``LLMPolicy.forward`` with log-probs,
entropies and values of ``--rows`` x ``--response`` tokens after ``--prompt``-token prompts, in
float32, under ``torch.autograd.graph.saved_tensors_hooks`` that sum the distinct storages saved
for backward. Three settings: ``logprob_chunk_size=None`` (the full-logits path the trainer used
before chunking), the default chunked path, and chunked with gradient checkpointing. What
non-reentrant checkpointing keeps alive by reference (a chunk's hidden states: ``hidden`` floats
per token) is outside the hooks; it is added to the chunked rows as ``hidden x 4`` bytes per token.
The body's own activations grow with ``--hidden`` and the layer count; a 1.5B model's (hidden
1,536, 28 layers) are what gradient checkpointing trims.

::

    python benchmarks/logprob_memory.py --rows 4 --response 256

Prints a table and writes JSON (``--out``, default ``results/benchmarks/logprob_memory.json``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from common import saved_bytes, write_json  # noqa: E402  (benchmarks/ is on sys.path)
from rspo_gym.policies.llm import LLMPolicy  # noqa: E402
from rspo_gym.policies.models import load_model  # noqa: E402
from rspo_gym.rollout.trajectory import StepRow, to_batch  # noqa: E402

VOCAB = 151_936


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--response", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "logprob_memory.json")
    args = parser.parse_args()

    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=VOCAB, hidden_size=args.hidden, intermediate_size=2 * args.hidden, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
    )
    _, tokenizer = load_model("tiny", device="cpu")
    policy = LLMPolicy(Qwen2ForCausalLM(config), tokenizer, value_head=True)
    ids = torch.randint(0, VOCAB, (args.rows, args.prompt + args.response)).tolist()
    rows = [StepRow(r[:args.prompt], r[args.prompt:], [0.0] * args.response, 0.0, 0.0, "o", True, True, 0, b, 0, "a")
            for b, r in enumerate(ids)]
    batch = to_batch(rows, policy.pad_token_id)
    tokens = args.rows * args.response
    policy.train(True)

    def forward():
        return policy.forward(batch, entropy=True, values=True)

    results = {}
    for name, chunk, checkpointing in (("full logits", None, False), ("chunked", LLMPolicy.logprob_chunk_size, False),
                                       ("chunked + checkpointing", LLMPolicy.logprob_chunk_size, True)):
        if checkpointing:
            policy.enable_gradient_checkpointing()
        policy.logprob_chunk_size = chunk
        kept = saved_bytes(forward) + (0 if chunk is None else tokens * args.hidden * 4)
        results[name] = {"bytes": kept, "bytes_per_response_token": kept / tokens}
    print(f"{args.rows} rows x {args.response} response tokens, prompt {args.prompt}, vocab {VOCAB}, hidden {args.hidden}")
    print(f"{'setting':<26}{'saved MB':>12}{'bytes/token':>14}")
    for name, row in results.items():
        print(f"{name:<26}{row['bytes'] / 1e6:>12.1f}{row['bytes_per_response_token']:>14,.0f}")
    write_json(args.out, {"rows": args.rows, "prompt": args.prompt, "response": args.response, "vocab": VOCAB,
                          "hidden": args.hidden, "results": results})


if __name__ == "__main__":
    main()
