"""Scoring the allowed replies' trie (``tree_scoring``) makes the replies, allowed ids and log-probs
that token-by-token constrained decoding makes, for every attention kind, LoRA and another family."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

import rspo_gym  # noqa: E402,F401  (registers the environments)
from rspo_gym.policies.alignment import realigned, start_aligned  # noqa: E402
from rspo_gym.policies.hf_backend import ActionTrie, HFBackend  # noqa: E402
from rspo_gym.policies.llm import LLMPolicy, load_policy  # noqa: E402
from rspo_gym.policies.tree_scoring import flatten, supports_tree_mask, tree_inputs  # noqa: E402
from rspo_gym.rollout.collector import CollectConfig, collect  # noqa: E402
from rspo_gym.rollout.generation import GenerationConfig  # noqa: E402
from rspo_gym.rollout.vector import GroupedVectorEnv  # noqa: E402
from tests.policies.alfworld_turns import ALFWORLD, alfworld_turns  # noqa: E402



@pytest.fixture(scope="module")
def policy():
    return load_policy("tiny", device="cpu")


@pytest.fixture(scope="module")
def turns(policy):
    """(prompt ids, allowed replies) of ALFWorld turns of several lengths, the first one twice."""
    out = alfworld_turns(policy.tokenizer, action_at=lambda step: step)
    return out + [out[0]]


def _both(model, tokenizer, turns, config):
    prompts, allowed = [p for p, _ in turns], [a for _, a in turns]
    return [HFBackend(model, tokenizer, constrained=method).generate(prompts, config, allowed) for method in ("decode", "tree")]


def _assert_same(decoded, scored, tolerance=1e-5):
    assert scored.texts == decoded.texts
    assert scored.response_ids == decoded.response_ids
    assert scored.allowed_token_ids == decoded.allowed_token_ids
    gap = max(abs(a - b) for x, y in zip(decoded.logprobs, scored.logprobs) for a, b in zip(x, y))
    assert gap < tolerance


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("seeds", ["shared", "per-row"])
def test_tree_scoring_draws_what_token_by_token_decoding_draws(policy, turns, temperature, seeds):
    rows = len(turns)
    config = GenerationConfig(temperature=temperature, seed=3) if seeds == "shared" else \
        GenerationConfig(temperature=temperature, row_seeds=tuple(range(10, 10 + rows)))
    decoded, scored = _both(policy.model, policy.tokenizer, turns, config)
    _assert_same(decoded, scored)
    assert len(set(scored.texts)) > 1


def test_tree_scoring_is_bit_identical_twice_and_shares_a_repeated_prompt(policy, turns):
    prompts, allowed = [p for p, _ in turns], [a for _, a in turns]
    backend = HFBackend(policy.model, policy.tokenizer)
    config = GenerationConfig(temperature=1.0, row_seeds=tuple([7] * len(turns)))
    first, second = (backend.generate(prompts, config, allowed) for _ in range(2))
    assert first == second
    # the repeated first turn (last row) drew from its own generator seeded alike: the same reply
    assert first.response_ids[-1] == first.response_ids[0] and first.logprobs[-1] == first.logprobs[0]


def test_eager_attention_gets_an_additive_mask(turns):
    eager = load_policy("tiny", device="cpu")
    eager.model.set_attn_implementation("eager")
    assert supports_tree_mask(eager.model)
    _assert_same(*_both(eager.model, eager.tokenizer, turns[:3], GenerationConfig(temperature=1.0, seed=5)))


def test_lora_adapters_score_the_tree_through_peft(turns):
    pytest.importorskip("peft")
    learner = load_policy("tiny", device="cpu")
    learner.add_lora(r=4)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, parameter in learner.model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.5)  # zero-initialised B would leave the base's replies
    decoded, scored = _both(learner.model, learner.tokenizer, turns[:4], GenerationConfig(temperature=1.0, seed=2))
    _assert_same(decoded, scored)
    base = HFBackend(learner.model.get_base_model(), learner.tokenizer)
    with learner.model.disable_adapter():
        plain = base.generate([p for p, _ in turns[:4]], GenerationConfig(temperature=1.0, seed=2), [a for _, a in turns[:4]])
    assert plain.logprobs != scored.logprobs  # the adapter took part


def test_another_model_family_with_its_own_rope_scores_the_same(policy, turns):
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=policy.model.config.vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, eos_token_id=policy.tokenizer.eos_token_id,
        pad_token_id=0, attn_implementation="sdpa",
    )
    llama = LlamaForCausalLM(config).eval()
    _assert_same(*_both(llama, policy.tokenizer, turns[:4], GenerationConfig(temperature=0.7, seed=1)))


def test_batches_of_one_prompt_change_no_draw(policy, turns):
    prompts, allowed = [p for p, _ in turns], [a for _, a in turns]
    config = GenerationConfig(temperature=1.0, seed=4)
    roomy = HFBackend(policy.model, policy.tokenizer).generate(prompts, config, allowed)
    tight = HFBackend(policy.model, policy.tokenizer, max_padding=0.0).generate(prompts, config, allowed)
    _assert_same(roomy, tight)


def test_constrained_rollouts_match_between_the_two_methods(policy):
    def rollout(method):
        venv = GroupedVectorEnv(ALFWORLD, num_groups=3, group_size=2)
        learner = LLMPolicy(policy.model, policy.tokenizer, backend=HFBackend(policy.model, policy.tokenizer, constrained=method))
        out = collect(learner, venv, CollectConfig(generation=GenerationConfig(temperature=1.0, seed=0), constrained=True, max_turns=4),
                      task_ids=[0, 1, 2])
        venv.close()
        return out

    decoded, scored = rollout("decode"), rollout("tree")
    assert [r.action for r in scored.rows] == [r.action for r in decoded.rows]
    assert max(abs(a - b) for x, y in zip(decoded.rows, scored.rows) for a, b in zip(x.logprobs, y.logprobs)) < 1e-5


def test_flattened_trie_and_its_mask():
    #   replies [5 6 E], [5 7 E], [8 E] with E = 1; prompt's last token 9
    trie = ActionTrie([[5, 6, 1], [5, 7, 1], [8, 1]])
    flat = flatten(trie.root, 9)
    assert flat.tokens == [9, 5, 8, 6, 7] and flat.parents == [-1, 0, 0, 1, 1] and flat.depths == [0, 1, 1, 2, 2]
    assert flat.query_of[id(trie.root)] == 0 and flat.query_of[id(trie.root[5][6])] == 3
    queries, slots, ids = flat.edges  # every (query, child) pair, as child_logits scores them
    assert (queries.tolist(), slots.tolist(), ids.tolist()) == ([0, 0, 1, 1, 2, 3, 4], [0, 1, 0, 1, 0, 0, 0], [5, 8, 6, 7, 1, 1, 1])
    inputs = tree_inputs([3], [flat], cache_width=4, pad_id=0)
    assert inputs["position_ids"].tolist() == [[3, 4, 4, 5, 5]]
    mask = inputs["attention_mask"][0, 0].int().tolist()
    assert mask == [
        # cache: 3 real tokens, 1 padding | queries 9 5 8 6 7
        [1, 1, 1, 0, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 1, 1, 0, 0, 0],
        [1, 1, 1, 0, 1, 0, 1, 0, 0],
        [1, 1, 1, 0, 1, 1, 0, 1, 0],
        [1, 1, 1, 0, 1, 1, 0, 0, 1],
    ]
    padded = tree_inputs([3, 1], [flat, flatten(ActionTrie([[4, 1]]).root, 2)], cache_width=4, pad_id=0)
    assert padded["attention_mask"][1, 0].int().tolist() == [
        [1, 0, 0, 0, 1, 0, 0, 0, 0],  # queries 2 (the prompt's last token) and 4
        [1, 0, 0, 0, 1, 1, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 1, 0, 0],  # padding queries see themselves only
        [0, 0, 0, 0, 0, 0, 0, 1, 0],
        [0, 0, 0, 0, 0, 0, 0, 0, 1],
    ]


def test_start_aligned_rows_read_back_at_their_original_columns():
    ids = torch.tensor([[0, 0, 5, 6, 7], [3, 4, 5, 6, 0]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 0]])
    shifted, leading = start_aligned(ids, mask, pad_id=0)
    assert shifted.tolist() == [[5, 6, 7, 0, 0], [3, 4, 5, 6, 0]] and leading.tolist() == [2, 0]
    hidden = shifted[:, :, None].float().expand(-1, -1, 2)
    assert realigned(hidden, leading, start=2, length=2)[:, :, 0].tolist() == [[5, 6], [5, 6]]


def test_a_policy_scoring_full_logits_decodes_its_constrained_replies(policy):
    class FullLogits(LLMPolicy):
        logprob_chunk_size = None  # logits that are more than the output embeddings of the last hidden state

    assert LLMPolicy(policy.model, policy.tokenizer).backend.constrained == "tree"
    assert FullLogits(policy.model, policy.tokenizer).backend.constrained == "decode"


def test_tries_are_built_once_per_allowed_set_in_a_bounded_memo(policy, turns, monkeypatch):
    import rspo_gym.policies.hf_backend as hf_backend

    prompts, allowed = [p for p, _ in turns], [a for _, a in turns]
    config = GenerationConfig(temperature=1.0, seed=3)
    backend = HFBackend(policy.model, policy.tokenizer)
    first = backend.generate(prompts, config, allowed)
    kept = dict(backend._flat)
    assert len(kept) == len({(tuple(a), p[-1]) for p, a in turns}) < len(turns)  # the repeated turn shares one
    again = backend.generate(prompts, config, allowed)
    assert all(backend._flat[key] is built for key, built in kept.items())  # nothing rebuilt
    monkeypatch.setattr(hf_backend, "TRIE_MEMO_SIZE", 2)
    small = HFBackend(policy.model, policy.tokenizer)
    bounded = small.generate(prompts, config, allowed)
    assert len(small._flat) == 2
    for out in (again, bounded):
        assert (out.response_ids, out.logprobs, out.allowed_token_ids) == (first.response_ids, first.logprobs, first.allowed_token_ids)
