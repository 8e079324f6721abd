"""The one-GPU configuration, at CPU size: every memory saver on in one RSPO iteration.

A random Qwen2 with Qwen2.5's 151,936-token vocabulary (width 64, one layer) trains through
bf16-mixed precision, gradient checkpointing, token-budget micro-batches, a LoRA learner, a LoRA
explorer on the same base and a KL reference that is that base with the adapters disabled.
"""

import pytest
import torch

import rspo_gym  # noqa: F401

pytest.importorskip("peft")

from transformers import Qwen2Config, Qwen2ForCausalLM  # noqa: E402

from rspo_gym.algos import RSPOTrainer  # noqa: E402
from rspo_gym.policies.llm import LLMPolicy  # noqa: E402
from rspo_gym.policies.models import IM_END, PAD, _prepare, _tiny_tokenizer  # noqa: E402

VOCAB = 151_936


@pytest.fixture(scope="module")
def wide_vocab_policy() -> LLMPolicy:
    tokenizer = _tiny_tokenizer()
    tokenizer.add_tokens([f"<x{i}>" for i in range(VOCAB - len(tokenizer))])
    config = Qwen2Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, tie_word_embeddings=True, eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD),
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    _prepare(model, tokenizer)
    return LLMPolicy(model.eval(), tokenizer)


def test_every_memory_saver_in_one_rspo_iteration(wide_vocab_policy):
    trainer = RSPOTrainer(
        "rspo/ALFWorld-v0", model=wide_vocab_policy, base="gigpo", precision="bf16-mixed", gradient_checkpointing=True,
        max_tokens_per_micro_batch=2048, micro_batch_size=4, mini_batch_size=64, lora_r=4, kl_coef=0.01,
        num_groups=1, group_size=2, explorer_group_size=1, max_turns=2, max_new_tokens=6, max_prompt_length=1024,
        constrained=False, think=True, learning_rate=1e-3, eval_every=0, progress=False, seed=0,
    )
    learner, explorer, reference = trainer.policy, trainer.explorer, trainer.reference
    assert explorer.model is learner.model is reference.model and reference.adapters_off
    assert learner.autocast_dtype == torch.bfloat16 and learner.model.is_gradient_checkpointing
    assert {p.dtype for _, p in learner.model.named_parameters() if "lora_" in _} == {torch.float32}
    base = {n: p.detach().clone() for n, p in learner.model.named_parameters() if "lora_" not in n}
    adapters = {n: p.detach().clone() for n, p in learner.model.named_parameters() if "lora_" in n}
    rollout = trainer.collect(0)
    metrics = trainer.train_on(rollout, 0)
    named = dict(learner.model.named_parameters())
    assert all(torch.equal(named[n], p) for n, p in base.items())  # the base never moves
    moved = {n.split(".lora_")[1].split(".")[1] for n, p in adapters.items() if not torch.equal(named[n], p)}
    assert moved == {"default", "explorer"}  # learner and explorer each trained their own adapter
    for key in ("train/kl", "train/grad_norm", "explorer/grad_norm", "train/pg_loss"):
        assert torch.isfinite(torch.tensor(metrics[key])), key
