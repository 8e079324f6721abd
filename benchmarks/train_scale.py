"""One RSPO-GiGPO iteration at real model shapes: time, throughput and memory per phase.

A randomly initialised Qwen2 of a named shape (``qwen2.5-0.5b``, ``qwen2.5-1.5b``, ``qwen2.5-7b``:
the published config values below, Qwen2.5's 151,936-token vocabulary, nothing downloaded) plays
ALFWorld through the trainer at verl-agent's settings (16 tasks x 8 trajectories, 50 turns,
prompts up to 2,048 tokens, replies up to 512) or smaller ones, and the script times three phases
of one iteration:

- ``generation``: every ``generate`` call of the learner and the explorer (env steps excluded);
- ``old_logprobs``: the learner's no-grad pass over the rollout (old log-probs / values);
- ``update``: the clipped policy-gradient epochs (forward + backward + optimizer).

Per phase it reports wall time, tokens per second and peak memory (CUDA: max allocated, reset per
phase; CPU: the process's peak RSS sampled every 5 ms), and the update's activation memory in
bytes per token per layer: what autograd saves for backward on the largest micro-batch (model
weights excluded), divided by its padded tokens and the number of layers. Old log-probs are
recomputed (as verl does, and as the trainer does with vLLM) so that phase is always measured.
A random model never ends a reply, so every reply runs to ``--max-new-tokens``: the worst case.

    python benchmarks/train_scale.py --shape qwen2.5-1.5b --layers 2 --groups 2 --group-size 2 \
        --max-turns 1 --max-new-tokens 32 --max-prompt-length 2048        # CPU, minutes
    python benchmarks/train_scale.py --shape qwen2.5-1.5b --backend vllm   # one GPU, verl-agent's settings

Writes a markdown table to stdout and JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import saved_bytes, write_json  # noqa: E402


@dataclass(frozen=True)
class Shape:
    """The published ``config.json`` values of a Qwen2.5 Instruct model."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    tie_word_embeddings: bool
    vocab_size: int = 151_936
    max_position_embeddings: int = 32_768
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6


SHAPES = {
    "qwen2.5-0.5b": Shape(896, 4864, 24, 14, 2, True),
    "qwen2.5-1.5b": Shape(1536, 8960, 28, 12, 2, True),
    "qwen2.5-7b": Shape(3584, 18944, 28, 28, 4, False),
}


def random_policy(shape: Shape, layers: int | None, seed: int = 0):
    """An ``LLMPolicy`` over a random Qwen2 of ``shape`` (``layers`` overrides the depth).

    The tokenizer is the tiny model's byte-level BPE grown to the shape's vocabulary with
    placeholder tokens, so prompts tokenise like real text and every sampled id decodes.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rspo_gym.policies.llm import LLMPolicy
    from rspo_gym.policies.models import IM_END, PAD, _prepare, _tiny_tokenizer

    tokenizer = _tiny_tokenizer()
    tokenizer.add_tokens([f"<x{i}>" for i in range(shape.vocab_size - len(tokenizer))])
    config = Qwen2Config(
        vocab_size=shape.vocab_size, hidden_size=shape.hidden_size, intermediate_size=shape.intermediate_size,
        num_hidden_layers=layers or shape.num_hidden_layers, num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads, max_position_embeddings=shape.max_position_embeddings,
        rope_theta=shape.rope_theta, rms_norm_eps=shape.rms_norm_eps, tie_word_embeddings=shape.tie_word_embeddings,
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END), pad_token_id=tokenizer.convert_tokens_to_ids(PAD),
    )
    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = Qwen2ForCausalLM(config)
    _prepare(model, tokenizer)
    return LLMPolicy(model.eval(), tokenizer, seed=seed)


class PeakMemory:
    """Peak memory of a phase: CUDA max allocated, else the process's RSS sampled every 5 ms."""

    def __init__(self):
        import torch

        self.cuda = torch.cuda.is_available()
        self._peak = 0
        self._running = False

    def current(self) -> int:
        import torch

        if self.cuda:
            return torch.cuda.memory_allocated()
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    @contextmanager
    def phase(self) -> Iterator[dict]:
        import torch

        reading: dict[str, int] = {"before": self.current()}
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            yield reading
            torch.cuda.synchronize()
            reading["peak"] = torch.cuda.max_memory_allocated()
            return
        self._peak, self._running = reading["before"], True
        sampler = threading.Thread(target=self._sample, daemon=True)
        sampler.start()
        try:
            yield reading
        finally:
            self._running = False
            sampler.join()
            reading["peak"] = max(self._peak, self.current())

    def _sample(self) -> None:
        while self._running:
            self._peak = max(self._peak, self.current())
            time.sleep(0.005)


def activation_bytes(policy, batch, config) -> dict[str, int]:
    """Bytes saved for backward by the training forward of the batch's largest micro-batch."""
    from rspo_gym.rollout.trajectory import micro_batches

    groups = micro_batches(batch.lengths(), config.micro_batch_size, config.max_tokens_per_micro_batch, policy.chains(batch))
    subs = [batch.index(group).trimmed() for group in groups]
    largest = max(subs, key=lambda sub: sub.input_ids.numel())
    weights = {p.untyped_storage().data_ptr() for p in policy.model.parameters()}
    policy.train(True)
    try:
        saved = saved_bytes(lambda: policy.forward(largest, temperature=config.temperature, entropy=True), exclude=weights)
    finally:
        policy.train(False)
    return {"saved_bytes": saved, "tokens": int(largest.input_ids.numel())}


class PhaseClock:
    """Wraps the trainer's generation, old log-prob and update calls to time and size each phase."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.memory = PeakMemory()
        self.phases: dict[str, dict[str, float]] = {}
        self.activations = {"saved_bytes": 0, "tokens": 0}

    def record(self, name: str, seconds: float, tokens: int, reading: dict) -> None:
        phase = self.phases.setdefault(name, {"seconds": 0.0, "tokens": 0, "peak_bytes": 0, "growth_bytes": 0})
        phase["seconds"] += seconds
        phase["tokens"] += tokens
        phase["peak_bytes"] = max(phase["peak_bytes"], reading["peak"])
        phase["growth_bytes"] = max(phase["growth_bytes"], reading["peak"] - reading["before"])

    def wrap_generate(self, policy) -> None:
        original = policy.generate

        def generate(prompt_ids, config, allowed=None):
            with self.memory.phase() as reading:
                start = time.perf_counter()
                out = original(prompt_ids, config, allowed)
                seconds = time.perf_counter() - start
            tokens = sum(len(p) for p in prompt_ids) + sum(len(r) for r in out.response_ids)
            self.record("generation", seconds, tokens, reading)
            return out

        policy.generate = generate

    def wrap_trainer(self) -> None:
        trainer = self.trainer
        old_outputs, update = trainer.old_policy_outputs, trainer.update

        def old_policy_outputs(policy, batch):
            with self.memory.phase() as reading:
                start = time.perf_counter()
                out = old_outputs(policy, batch)
                seconds = time.perf_counter() - start
            self.record("old_logprobs", seconds, int(batch.attention_mask.sum()), reading)
            return out

        def timed_update(policy, optimizer, batch, estimate, it, **kwargs):
            c = trainer.config
            if policy is trainer.policy:
                self.activations = activation_bytes(policy, batch, c)
            with self.memory.phase() as reading:
                start = time.perf_counter()
                out = update(policy, optimizer, batch, estimate, it, **kwargs)
                seconds = time.perf_counter() - start
            self.record("update", seconds, int(batch.attention_mask.sum()) * c.ppo_epochs, reading)
            return out

        trainer.old_policy_outputs, trainer.update = old_policy_outputs, timed_update


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    import rspo_gym  # noqa: F401
    from rspo_gym.algos import RSPOTrainer

    shape = SHAPES[args.shape]
    layers = args.layers or shape.num_hidden_layers
    policy = random_policy(shape, args.layers)
    trainer = RSPOTrainer(
        "rspo/ALFWorld-v0", model=policy, base="gigpo", swap="explorer", lora_r=args.lora_r,
        explorer_group_size=args.group_size // 2 if args.explorer_group_size is None else args.explorer_group_size, num_groups=args.groups, group_size=args.group_size,
        max_turns=args.max_turns, max_prompt_length=args.max_prompt_length, max_new_tokens=args.max_new_tokens,
        think=True, constrained=False, generation_backend=args.backend, precision=args.precision, recompute_old_logprobs=True,
        gradient_checkpointing=args.gradient_checkpointing, max_tokens_per_micro_batch=args.max_tokens_per_micro_batch,
        micro_batch_size=args.micro_batch_size, mini_batch_size=args.mini_batch_size, learning_rate=1e-6, kl_coef=0.01,
        eval_every=0, progress=False, seed=args.seed,
    )
    clock = PhaseClock(trainer)
    clock.wrap_generate(trainer.policy)
    if trainer.explorer is not None:
        clock.wrap_generate(trainer.explorer)
    clock.wrap_trainer()
    start = time.perf_counter()
    rollout = trainer.collect(0)  # the loop of learn(), without its evaluation, logging and saving
    trainer.policy.release_generation_memory()
    metrics = {**trainer.rollout_metrics(rollout), **trainer.train_on(rollout, 0)}
    total = time.perf_counter() - start
    explorer_rows = trainer._explorer_rollout.rows if trainer._explorer_rollout is not None else []
    rows = list(rollout.rows) + list(explorer_rows)
    per_token_layer = clock.activations["saved_bytes"] / max(clock.activations["tokens"], 1) / layers
    return {
        "shape": args.shape, "layers": layers, "backend": args.backend, "precision": trainer.precision,
        "lora_r": args.lora_r, "gradient_checkpointing": args.gradient_checkpointing,
        "max_tokens_per_micro_batch": args.max_tokens_per_micro_batch, "groups": args.groups,
        "group_size": args.group_size, "max_turns": args.max_turns, "max_prompt_length": args.max_prompt_length,
        "max_new_tokens": args.max_new_tokens, "device": "cuda" if torch.cuda.is_available() else "cpu",
        "parameters": sum(p.numel() for p in trainer.policy.model.parameters()),
        "env_steps": len(rows), "generated_tokens": sum(len(r.response_ids) for r in rows),
        "success": metrics["rollout/success"], "iteration_seconds": total, "phases": clock.phases,
        "update_bytes_per_token_per_layer": per_token_layer, "train": {k: v for k, v in metrics.items() if k.startswith("train/")}, "largest_micro_batch_tokens": clock.activations["tokens"],
    }


def table(result: dict[str, Any]) -> str:
    lines = ["| phase | seconds | tokens | tokens/s | peak GiB | growth GiB |", "|---|---|---|---|---|---|"]
    for name, phase in result["phases"].items():
        rate = phase["tokens"] / phase["seconds"] if phase["seconds"] else 0.0
        lines.append(
            f"| {name} | {phase['seconds']:.2f} | {phase['tokens']} | {rate:,.0f} | "
            f"{phase['peak_bytes'] / 2**30:.2f} | {phase['growth_bytes'] / 2**30:.2f} |"
        )
    lines.append(f"\nupdate activations saved for backward: {result['update_bytes_per_token_per_layer'] / 1024:.1f} KiB per "
                 f"token per layer ({result['layers']} layers, largest micro-batch {result['largest_micro_batch_tokens']} padded tokens)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-1.5b")
    parser.add_argument("--layers", type=int, default=None, help="depth override (CPU runs: 1-2)")
    parser.add_argument("--backend", choices=("hf", "vllm"), default="hf")
    parser.add_argument("--precision", choices=("fp32", "bf16-mixed", "bf16"), default=None)
    parser.add_argument("--lora-r", type=int, default=0, help="LoRA rank of the learner (0: full fine-tuning)")
    parser.add_argument("--explorer-group-size", type=int, default=None, help="RSPO's M (default: half the group size; 0: GiGPO alone)")
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-turns", type=int, default=50)
    parser.add_argument("--max-prompt-length", type=int, default=2048)
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--micro-batch-size", type=int, default=16)
    parser.add_argument("--mini-batch-size", type=int, default=256)
    parser.add_argument("--max-tokens-per-micro-batch", type=int, default=16384)
    parser.add_argument("--no-gradient-checkpointing", dest="gradient_checkpointing", action="store_false")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/train_scale.json"))
    args = parser.parse_args(argv)
    result = run(args)
    print(table(result))
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
