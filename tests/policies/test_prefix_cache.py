"""Inside ``HFBackend.session`` a prompt extending one already run reuses its keys and values
(``prefix_cache``): replies, allowed ids and log-probs are those of scoring every prompt whole."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from rspo_gym.policies import hf_backend  # noqa: E402
from rspo_gym.policies.hf_backend import ActionTrie, HFBackend  # noqa: E402
from rspo_gym.policies.llm import LLMPolicy, load_policy  # noqa: E402
from rspo_gym.policies.tree_scoring import flatten  # noqa: E402
from rspo_gym.rollout.generation import GenerationConfig  # noqa: E402
from tests.policies.alfworld_turns import alfworld_turns  # noqa: E402


@pytest.fixture(scope="module")
def policy():
    return load_policy("tiny", device="cpu")


@pytest.fixture(scope="module")
def conversation(policy):
    """Three batches of (prompt ids, allowed replies), each prompt of a later batch but the fresh
    ones its row's earlier prompt + an allowed reply + new tokens: rows sharing a prompt (that then
    diverge), prompts of different lengths, and rows with no earlier prompt among extending ones."""
    tokenizer, end = policy.tokenizer, policy.backend.eos_ids[0]
    # the prompts' tails and a few replies: the same structure, fewer tokens to run
    base = [(list(p[-(40 + 16 * i):]), a[:6]) for i, (p, a) in enumerate(alfworld_turns(tokenizer))]

    def extended(turns, shift):
        out = []
        for i, (prompt, allowed) in enumerate(turns):
            reply = tokenizer(allowed[(i + shift) % len(allowed)], add_special_tokens=False)["input_ids"] + [end]
            news = tokenizer(f" You see a key {i}." * (1 + (i + shift) % 3), add_special_tokens=False)
            out.append((prompt + reply + news["input_ids"], allowed))
        return out

    first = [base[0], base[0], base[2], base[4]]
    second = extended(first, 0) + [base[1], base[1]]
    return [first, second, extended(second, 1) + [base[3]]]


def _run(backend, batches, temperature=1.0, seed=3, per_row=False):
    """Each batch's replies, drawn with one seed or (``per_row``) one per row."""
    def config(rows):
        return GenerationConfig(temperature=temperature, row_seeds=tuple(range(seed, seed + rows))) if per_row else \
            GenerationConfig(temperature=temperature, seed=seed)

    return [backend.generate([p for p, _ in batch], config(len(batch)), [a for _, a in batch]) for batch in batches]


def _assert_same(expected, got, tolerance=1e-5):
    for x, y in zip(expected, got):
        assert y.response_ids == x.response_ids and y.texts == x.texts
        assert y.allowed_token_ids == x.allowed_token_ids
        assert max(abs(a - b) for r, s in zip(x.logprobs, y.logprobs) for a, b in zip(r, s)) < tolerance


def _node_logits(backend, batch):
    """``_tree_scores`` of a batch's prompts, every trie node's allowed logits, one chunk."""
    tries = [flatten(ActionTrie.from_texts(backend.tokenizer, a, backend.eos_ids[0]).root, p[-1]) for p, a in batch]
    return backend._tree_scores([p for p, _ in batch], tries, torch.device("cpu"))


def _assert_cached_scores_match(model, tokenizer, batches, **kwargs):
    """Scoring each batch after the earlier ones inside a session gives every node's logits of
    scoring it whole, and the later batches reused keys and values."""
    cached, plain = HFBackend(model, tokenizer, **kwargs), HFBackend(model, tokenizer, **kwargs)
    with cached.session():
        for batch in batches:
            reused = cached.prefix_stats["reused_tokens"]
            for x, y in zip(_node_logits(plain, batch), _node_logits(cached, batch)):
                assert (x - y).abs().max() < 1e-5
        assert reused < cached.prefix_stats["reused_tokens"]


@pytest.mark.parametrize("temperature, seeds, max_padding", [
    (1.0, "shared", 0.25), (1.0, "per-row", 10.0), (0.7, "shared", 10.0), (0.7, "per-row", 0.25),
])
def test_a_session_draws_what_scoring_whole_prompts_draws(policy, conversation, temperature, seeds, max_padding):
    plain = HFBackend(policy.model, policy.tokenizer, max_padding=max_padding)
    cached = HFBackend(policy.model, policy.tokenizer, max_padding=max_padding)
    expected = _run(plain, conversation, temperature, per_row=seeds == "per-row")
    with cached.session():
        got = _run(cached, conversation, temperature, per_row=seeds == "per-row")
    _assert_same(expected, got)
    assert len({text for out in got for text in out.texts}) > 1
    stats = cached.prefix_stats
    assert stats["prompt_tokens"] == sum(len(p) - 1 for b in conversation for p in {tuple(p) for p, _ in b})
    # row i of a later batch extends row i of the batch before: it may reuse all of that prompt
    # but its last token, and does where a batch is one chunk (a chunk that would reuse little runs whole)
    most = sum(len(p) - 1 for b in conversation[:2] for p, _ in b)
    assert 0 < stats["reused_tokens"] <= most and (max_padding < 1 or stats["reused_tokens"] == most)
    assert plain.prefix_stats == {"prompt_tokens": 0, "reused_tokens": 0} and cached._prefixes is None


def test_kept_keys_and_values_give_every_nodes_logits(policy, conversation):
    _assert_cached_scores_match(policy.model, policy.tokenizer, conversation)


def test_a_fresh_session_twice_is_bit_identical_and_a_nested_one_keeps_the_outer(policy, conversation):
    backend = HFBackend(policy.model, policy.tokenizer, max_padding=10.0)
    runs = []
    for _ in range(2):
        with backend.session():
            runs.append(_run(backend, conversation[:2], seed=9, per_row=True))
            kept = backend._prefixes
            with backend.session():
                assert backend._prefixes is kept
            assert len(kept) > 0
        assert backend._prefixes is None
    assert runs[0] == runs[1]
    assert backend.prefix_stats["reused_tokens"] > 0


def test_an_in_place_weight_change_drops_what_was_kept(conversation):
    learner = load_policy("tiny", device="cpu")
    cached = HFBackend(learner.model, learner.tokenizer)
    with cached.session():
        _run(cached, conversation[:1])
        with torch.no_grad():  # as an optimizer step does (``.data`` writes bypass the version counter)
            learner.model.model.layers[0].self_attn.k_proj.weight.add_(0.01)
        reused = cached.prefix_stats["reused_tokens"]
        got = _node_logits(cached, conversation[1])
        assert cached.prefix_stats["reused_tokens"] == reused  # the kept keys were the old weights'
        again = _node_logits(cached, conversation[2])  # the new weights' are kept
        assert cached.prefix_stats["reused_tokens"] > reused
    plain = HFBackend(learner.model, learner.tokenizer)
    for x, y in zip(_node_logits(plain, conversation[1]), got):
        assert (x - y).abs().max() < 1e-5
    for x, y in zip(_node_logits(plain, conversation[2]), again):
        assert (x - y).abs().max() < 1e-5


def test_eager_attention_gets_additive_masks(conversation):
    eager = load_policy("tiny", device="cpu")
    eager.model.set_attn_implementation("eager")
    _assert_cached_scores_match(eager.model, eager.tokenizer, conversation, max_padding=10.0)


def test_lora_adapters_reuse_only_what_their_own_routing_kept(conversation):
    pytest.importorskip("peft")
    learner = load_policy("tiny", device="cpu")
    learner.add_lora(r=4)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, parameter in learner.model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.5)  # zero-initialised B would leave the base's replies
    _assert_cached_scores_match(learner.model, learner.tokenizer, conversation[:2])
    cached = learner.backend
    with learner.generation_session():
        with learner.model.disable_adapter():  # another routing: what the adapter's pass kept is dropped
            base = _node_logits(cached, conversation[0])
        reused = cached.prefix_stats["reused_tokens"]
        with_adapter = _node_logits(cached, conversation[1])
        assert cached.prefix_stats["reused_tokens"] == reused
    plain = HFBackend(learner.model, learner.tokenizer)
    for x, y in zip(_node_logits(plain, conversation[1]), with_adapter):
        assert (x - y).abs().max() < 1e-5
    assert any((x - y).abs().max() > 1e-3 for x, y in zip(_node_logits(plain, conversation[0]), base))


def test_the_byte_bound_evicts_least_recently_used_prompts(policy, conversation):
    expected = _run(HFBackend(policy.model, policy.tokenizer), conversation, seed=5)
    reused = {}
    for budget in (1 << 30, 1 << 18, 0):
        backend = HFBackend(policy.model, policy.tokenizer, prefix_cache_bytes=budget)
        with backend.session():
            _assert_same(expected, _run(backend, conversation, seed=5))
            assert backend._prefixes.nbytes <= budget
        reused[budget] = backend.prefix_stats["reused_tokens"]
    assert reused[1 << 30] > reused[1 << 18] > reused[0] == 0


def test_allowed_replies_are_tokenised_once_and_the_memo_is_bounded(policy, conversation, monkeypatch):
    backend = HFBackend(policy.model, policy.tokenizer)
    allowed = [a for _, a in conversation[1]]
    for _ in range(2):
        tries = backend._tries(allowed)
        assert [t.root for t in tries] == [ActionTrie.from_texts(policy.tokenizer, a, backend.eos_ids[0]).root for a in allowed]
    assert len(backend._reply_ids) == len({text for a in allowed for text in a})
    monkeypatch.setattr(hf_backend, "REPLY_MEMO_SIZE", 5)
    fresh = ["go to drawer 99", "open drawer 99"]
    assert [t.root for t in backend._tries([fresh])] == [ActionTrie.from_texts(policy.tokenizer, fresh, backend.eos_ids[0]).root]
    assert len(backend._reply_ids) == 5 and list(backend._reply_ids)[-2:] == fresh
    with pytest.raises(ValueError, match="at least one allowed reply"):
        backend._tries([[]])


def test_a_policy_without_backend_sessions_gets_a_no_op_one(policy):
    class NoSessions:
        pass

    with policy.generation_session():
        assert policy.backend._prefixes is not None
    with LLMPolicy(policy.model, policy.tokenizer, backend=NoSessions()).generation_session() as inside:
        assert inside is None


def test_chunks_sort_by_widths_and_still_budget_the_prompts_tokens(policy):
    """Inside a session the tries' queries, not the prompts, are a scoring pass's widest input."""
    backend = HFBackend(policy.model, policy.tokenizer, max_batch_tokens=100)
    lengths = [50, 10, 40]
    assert backend.chunks(lengths) == [[1, 2], [0]]
    assert backend.chunks(lengths, widths=[1, 9, 2]) == [[0, 2], [1]]  # 3 rows x 50 tokens would pass the budget
    assert backend.chunks([10, 10, 10], 0.25, widths=[10, 10, 30]) == [[0, 1], [2]]
