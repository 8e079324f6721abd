"""Constrained decoding samples, records and trains on one distribution: the policy restricted to
the allowed tokens and renormalised (``softmax(logits / T)`` over each position's allowed ids)."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

import rspo_gym  # noqa: E402,F401  (registers the environments)
from rspo_gym.rollout.generation import GenerationConfig  # noqa: E402
from rspo_gym.policies.hf_backend import allowed_token_ids, eos_token_ids, position_ids  # noqa: E402
from rspo_gym.policies.llm import load_policy, token_logprobs  # noqa: E402
from rspo_gym.rollout.collector import CollectConfig, collect  # noqa: E402
from rspo_gym.rollout.trajectory import StepRow, to_batch  # noqa: E402
from rspo_gym.rollout.vector import GroupedVectorEnv  # noqa: E402
from tests.policies.alfworld_turns import ALFWORLD, alfworld_turns  # noqa: E402


@pytest.fixture(scope="module")
def policy():
    return load_policy("tiny", device="cpu")


@pytest.fixture(scope="module")
def turns(policy):
    """(prompt ids, allowed replies) of ALFWorld turns with prompts of different lengths."""
    out = alfworld_turns(policy.tokenizer)
    assert len({len(p) for p, _ in out}) > 1
    return out


def _end_id(policy) -> int:
    return eos_token_ids(policy.model, policy.tokenizer)[0]


def _row(prompt_ids, response_ids, logprobs, allowed=None) -> StepRow:
    return StepRow(
        list(prompt_ids), list(response_ids), list(logprobs), 0.0, 0.0, "o", True, True, 0, 0, 0, "a",
        allowed_token_ids=allowed,
    )


def _all_replies(policy, prompt_ids, choices) -> list[StepRow]:
    """One teacher-forced row per distinct allowed reply (its tokens + the end token)."""
    tokenizer, end = policy.tokenizer, _end_id(policy)
    replies = {tuple(tokenizer(c, add_special_tokens=False)["input_ids"] + [end]) for c in choices}
    return [_row(prompt_ids, r, [0.0] * len(r), allowed_token_ids(tokenizer, choices, r, end)) for r in sorted(replies)]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sequence_probabilities_of_all_allowed_replies_sum_to_one(policy, turns, temperature):
    prompt_ids, choices = turns[0]
    rows = _all_replies(policy, prompt_ids, choices)
    assert len(rows) > 3
    batch = to_batch(rows, policy.pad_token_id)
    logprobs = policy.logprobs(batch, temperature=temperature)["logprobs"]
    total = (logprobs * batch.response_mask).sum(1).double().exp().sum().item()
    assert total == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_behaviour_logprobs_are_the_restricted_ones_the_trainer_recomputes(policy, turns, temperature):
    prompts = [p for p, _ in turns]
    allowed = [a for _, a in turns]
    out = policy.generate(prompts, GenerationConfig(temperature=temperature, seed=3), allowed)
    assert out.allowed_token_ids is not None
    for b, (choices, response) in enumerate(zip(allowed, out.response_ids)):
        assert out.texts[b] in choices
        assert out.allowed_token_ids[b] == allowed_token_ids(policy.tokenizer, choices, response, _end_id(policy))
        single = [t for t, ids in enumerate(out.allowed_token_ids[b]) if len(ids) == 1]
        assert single and all(out.logprobs[b][t] == 0.0 for t in single)  # a forced token is certain
    rows = [_row(p, r, lp, a) for p, r, lp, a in zip(prompts, out.response_ids, out.logprobs, out.allowed_token_ids)]
    batch = to_batch(rows, policy.pad_token_id)
    recomputed = policy.logprobs(batch, temperature=temperature)["logprobs"]
    assert ((recomputed - batch.old_logprobs) * batch.response_mask).abs().max().item() < 1e-5


def _reference_entropy(policy, batch, temperature: float) -> torch.Tensor:
    """Entropy of the full-vocabulary distribution masked to each position's allowed ids."""
    P, R = batch.prompt_length, batch.response_mask.shape[1]
    with torch.no_grad():
        logits = policy.model(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=position_ids(batch.attention_mask)
        ).logits[:, P - 1:P - 1 + R, :].float() / temperature
    mask = torch.zeros_like(logits, dtype=torch.bool)
    for b in range(len(batch)):
        for t in range(R):
            ids = batch.allowed[b, t][batch.allowed[b, t] >= 0]
            mask[b, t, ids] = True
    probs = torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)
    return -(probs * torch.log(probs.clamp_min(1e-30))).sum(-1)


def test_entropy_is_that_of_the_restricted_distribution(policy, turns):
    prompt_ids, choices = turns[1]
    batch = to_batch(_all_replies(policy, prompt_ids, choices), policy.pad_token_id)
    with torch.no_grad():
        entropy = policy.forward(batch, temperature=0.7, entropy=True)["entropy"]
    mask = batch.response_mask.bool()
    expected = _reference_entropy(policy, batch, 0.7)
    assert (entropy - expected)[mask].abs().max().item() < 1e-5
    single = mask & ((batch.allowed >= 0).sum(-1) == 1)
    assert single.any() and bool((entropy[single] == 0).all())
    assert bool((entropy[mask & ~single] > 0).all())


def test_a_mixed_batch_keeps_free_rows_on_the_full_vocabulary_and_has_finite_gradients(policy, turns):
    prompt_ids, choices = turns[2]
    constrained = _all_replies(policy, prompt_ids, choices)[0]
    free = _row(turns[0][0], constrained.response_ids[:3], [0.0] * 3)
    batch = to_batch([constrained, free], policy.pad_token_id)
    assert batch.allowed is not None and bool((batch.allowed[1] < 0).all())
    policy.model.zero_grad()
    out = policy.forward(batch, entropy=True)
    mask = batch.response_mask
    ((out["logprobs"] + out["entropy"]) * mask).sum().backward()
    grads = [p.grad for p in policy.model.parameters() if p.grad is not None]
    assert grads and all(bool(torch.isfinite(g).all()) for g in grads)
    policy.model.zero_grad()
    free_only = policy.forward(to_batch([free], policy.pad_token_id))["logprobs"]
    assert to_batch([free], policy.pad_token_id).allowed is None
    assert torch.allclose(out["logprobs"][1, :3], free_only[0, :3], atol=1e-6)


def test_to_batch_pads_allowed_ids_and_index_slices_them():
    rows = [
        _row([1, 2], [5, 6], [-0.1, 0.0], [[5, 7, 8], [6]]),
        _row([3], [9], [-1.0]),
        _row([4], [7, 2, 3], [-0.5, 0.0, 0.0], [[7, 5], [2], [3]]),
    ]
    batch = to_batch(rows, pad_token_id=0)
    assert batch.allowed.tolist() == [
        [[5, 7, 8], [6, -1, -1], [-1, -1, -1]],
        [[-1, -1, -1], [-1, -1, -1], [-1, -1, -1]],
        [[7, 5, -1], [2, -1, -1], [3, -1, -1]],
    ]
    assert batch.index(torch.tensor([2])).allowed.tolist() == [[[7, 5, -1], [2, -1, -1], [3, -1, -1]]]
    assert to_batch(rows[1:2], pad_token_id=0).allowed is None
    with pytest.raises(ValueError, match="allowed"):
        to_batch([_row([1], [5, 6], [0.0, 0.0], [[5]])], pad_token_id=0)


def test_constrained_collect_records_what_the_trainer_recomputes(policy):
    venv = GroupedVectorEnv(ALFWORLD, num_groups=2, group_size=2)
    config = CollectConfig(generation=GenerationConfig(temperature=1.0, seed=0), constrained=True, max_turns=2)
    rollout = collect(policy, venv, config, seed=7)
    batch = to_batch(rollout.rows, policy.pad_token_id)
    assert batch.allowed is not None and all(r.allowed_token_ids is not None for r in rollout.rows)
    recomputed = policy.logprobs(batch)["logprobs"]
    assert ((recomputed - batch.old_logprobs) * batch.response_mask).abs().max().item() < 1e-5
    free = collect(policy, venv, CollectConfig(generation=GenerationConfig(max_new_tokens=4, seed=0), max_turns=1), seed=7)
    assert to_batch(free.rows, policy.pad_token_id).allowed is None
    venv.close()
