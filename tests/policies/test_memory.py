"""Training memory: chunked log-probs keep no vocabulary-wide tensor for backward, micro-batches are
packed by tokens and cut to their own padding, and gradient checkpointing changes no number.

The model is a random Qwen2 with Qwen2.5's 151,936-token vocabulary and a tiny body, so that the
vocabulary dominates what a forward pass keeps, as it does for the 1.5B/7B models users train."""

import random

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
from transformers import Qwen2Config, Qwen2ForCausalLM  # noqa: E402

from rspo_gym.policies.llm import LLMPolicy, chunked_scores, restricted_entropy, restricted_logprobs  # noqa: E402
from rspo_gym.policies.models import load_model  # noqa: E402
from rspo_gym.rollout.trajectory import StepRow, micro_batches, pack_by_tokens, to_batch  # noqa: E402

VOCAB = 151_936
SHAPES = [(5, 3), (9, 7), (2, 1), (7, 4), (3, 6)]  # (prompt, response) tokens of each row


@pytest.fixture(scope="module")
def tokenizer():
    return load_model("tiny", device="cpu")[1]


def _policy(tokenizer, seed: int = 0) -> LLMPolicy:
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2)
    return LLMPolicy(Qwen2ForCausalLM(config), tokenizer, value_head=True, seed=seed)


def _batch(shapes=SHAPES, seed: int = 1):
    """Rows of random tokens; every other row constrained to its own token and three others."""
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for b, (p, r) in enumerate(shapes):
        ids = torch.randint(0, VOCAB, (p + r,), generator=generator).tolist()
        allowed = None
        if b % 2 == 0:
            others = torch.randint(0, VOCAB, (r, 3), generator=generator).tolist()
            allowed = [sorted({ids[p + t], *others[t]}) for t in range(r)]
        rows.append(StepRow(ids[:p], ids[p:], [0.0] * r, 0.0, 0.0, "o", True, True, 0, b, 0, "a", allowed_token_ids=allowed))
    return to_batch(rows, 0)


def _reference(policy, batch, temperature):
    """Today's scores: the model's full logits through ``restricted_logprobs`` / ``restricted_entropy``."""
    P, R = batch.prompt_length, batch.response_mask.shape[1]
    out = policy.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                       position_ids=(batch.attention_mask.cumsum(-1) - 1).clamp(min=0), use_cache=False,
                       output_hidden_states=True)
    logits, tokens = out.logits[:, P - 1:P - 1 + R], batch.input_ids[:, P:P + R]
    return {
        "logprobs": restricted_logprobs(logits, tokens, batch.allowed, temperature),
        "entropy": restricted_entropy(logits, batch.allowed, temperature),
        "values": policy.value_head(out.hidden_states[-1][:, P - 1:P - 1 + R].detach()),
    }


def _loss(out, mask):
    return ((1.3 * out["logprobs"] - 0.5 * out["entropy"] + out["values"]) * mask).sum() / mask.sum()


def _gradient(policy) -> torch.Tensor:
    parameters = policy.parameters()
    gradient = torch.cat([p.grad.flatten() for p in parameters if p.grad is not None])
    for p in parameters:
        p.grad = None
    return gradient


def saved_bytes(run) -> tuple[object, int]:
    """``run()``'s result and the bytes of the distinct storages autograd saved for its backward."""
    storages: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = run()
    return out, sum(storages.values())


# ----------------------------------------------------------------------------- chunked scores
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_scores_match_the_full_logits_and_keep_no_vocabulary_wide_tensor(tokenizer, temperature):
    policy, batch = _policy(tokenizer), _batch()
    mask = batch.response_mask
    reference = _reference(policy, batch, temperature)
    _loss(reference, mask).backward()
    expected = _gradient(policy)
    policy.logprob_chunk_size = 4  # 4 positions a chunk: chunks cross rows and the last is partial
    out, kept = saved_bytes(lambda: policy.forward(batch, temperature=temperature, entropy=True, values=True))
    scored = mask.bool()  # past a row's response the positions hold padding: any value is as good
    for key in ("logprobs", "entropy", "values"):
        assert torch.allclose(out[key][scored], reference[key][scored], atol=1e-5, rtol=0), key
    _loss(out, mask).backward()
    gradient = _gradient(policy)
    assert float((gradient - expected).norm() / expected.norm()) < 1e-5
    assert kept < mask.numel() * VOCAB * 4  # less than one float32 logit row per scored position


def test_chunked_scores_of_a_mixed_batch_equal_the_restricted_scores_of_the_logits():
    generator = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(8, 50, bias=False)
    hidden = torch.randn(3, 5, 8, generator=generator, requires_grad=True)
    tokens = torch.randint(0, 50, (3, 5), generator=generator)
    allowed = torch.full((3, 5, 4), -1)
    allowed[0, :, :2] = torch.stack([tokens[0], (tokens[0] + 1) % 50], -1)  # row 0 constrained, rows 1-2 free
    logprobs, entropy = chunked_scores(head, hidden, tokens, allowed, 0.8, entropy=True, chunk_size=4)
    logits = head(hidden)
    assert torch.allclose(logprobs, restricted_logprobs(logits, tokens, allowed, 0.8), atol=1e-6)
    assert torch.allclose(entropy, restricted_entropy(logits, allowed, 0.8), atol=1e-6)
    (logprobs.sum() + entropy.sum()).backward()
    assert torch.isfinite(hidden.grad).all() and torch.isfinite(head.weight.grad).all()


def test_a_peft_wrapped_model_scores_through_its_output_embeddings(tokenizer):
    policy, batch = _policy(tokenizer), _batch()
    policy.add_lora()
    for name, parameter in policy.model.named_parameters():
        if "lora_B" in name:  # zero at initialisation: make the adapters change the numbers
            torch.nn.init.normal_(parameter, std=0.05)
    reference = _reference(policy, batch, 1.0)
    _loss(reference, batch.response_mask).backward()
    expected = _gradient(policy)
    out, kept = saved_bytes(lambda: policy.forward(batch, entropy=True, values=True))
    scored = batch.response_mask.bool()
    for key in ("logprobs", "entropy", "values"):
        assert torch.allclose(out[key][scored], reference[key][scored], atol=1e-5, rtol=0), key
    _loss(out, batch.response_mask).backward()
    assert float((_gradient(policy) - expected).norm() / expected.norm()) < 1e-5
    assert kept < batch.response_mask.numel() * VOCAB * 4


# ----------------------------------------------------------------------------- gradient checkpointing
@pytest.mark.parametrize("lora", [False, True])
def test_gradient_checkpointing_keeps_less_and_changes_no_gradient(tokenizer, lora):
    policy, batch = _policy(tokenizer), _batch()
    if lora:
        policy.add_lora()
        for name, parameter in policy.model.named_parameters():
            if "lora_B" in name:
                torch.nn.init.normal_(parameter, std=0.05)
    policy.train(True)
    out, plain = saved_bytes(lambda: policy.forward(batch, entropy=True, values=True))
    _loss(out, batch.response_mask).backward()
    expected = _gradient(policy)
    policy.enable_gradient_checkpointing()
    out, checkpointed = saved_bytes(lambda: policy.forward(batch, entropy=True, values=True))
    _loss(out, batch.response_mask).backward()
    assert float((_gradient(policy) - expected).norm() / expected.norm()) < 1e-6
    assert checkpointed < plain / 2


# ----------------------------------------------------------------------------- packing and trimming
def test_pack_by_tokens_respects_the_budget_and_covers_every_row_once():
    rng = random.Random(0)
    for _ in range(200):
        lengths = [(rng.randint(1, 60), rng.randint(0, 30)) for _ in range(rng.randint(1, 40))]
        budget = rng.randint(20, 400)
        groups = pack_by_tokens(lengths, budget)
        assert sorted(i for group in groups for i in group) == list(range(len(lengths)))
        for group in groups:
            padded = len(group) * (max(lengths[i][0] for i in group) + max(lengths[i][1] for i in group))
            assert padded <= budget or len(group) == 1  # only a row over the budget alone exceeds it
        totals = [sum(lengths[i]) for group in groups for i in group]
        assert totals == sorted(totals, reverse=True)  # longest first: similar lengths share a pass


def test_row_micro_batches_take_rows_longest_first():
    assert micro_batches([(3, 1), (10, 6), (4, 2), (2, 2), (8, 0)], 2) == [[1, 4], [2, 0], [3]]
    assert micro_batches([(3, 1), (10, 6)], 2, max_tokens=20) == [[1], [0]]


def test_trimmed_batches_are_cut_to_their_own_padding_and_give_the_same_scores(tokenizer):
    policy, batch = _policy(tokenizer), _batch()
    for rows in ([2, 0], [1, 3], [4], [0, 1, 2, 3, 4]):
        sub = batch.index(torch.tensor(rows))
        trimmed = sub.trimmed()
        p = max(SHAPES[i][0] for i in rows)
        r = max(SHAPES[i][1] for i in rows)
        assert trimmed.prompt_length == p and trimmed.input_ids.shape == (len(rows), p + r)
        assert trimmed.allowed is None or trimmed.allowed.shape[:2] == (len(rows), r)
        assert trimmed.lengths() == sub.lengths()
        full = policy.forward(sub, entropy=True, values=True)
        cut = policy.forward(trimmed, entropy=True, values=True)
        mask = trimmed.response_mask.bool()
        for key in ("logprobs", "entropy", "values"):
            assert torch.allclose(cut[key][mask], full[key][:, :r][mask], atol=1e-5, rtol=0), key


def test_trimming_drops_allowed_id_padding_only():
    batch = _batch()
    sub = batch.index(torch.tensor([0, 2]))  # constrained rows with 4 or fewer allowed ids each
    assert sub.trimmed().allowed.shape[-1] == int((sub.allowed >= 0).sum(-1).max())
    free = batch.index(torch.tensor([1, 3])).trimmed()  # no constrained row: one all -1 column left
    assert free.allowed.shape[-1] == 1 and bool((free.allowed == -1).all())


@pytest.mark.parametrize("max_tokens", [None, 1, 30])
def test_packed_logprobs_come_back_in_row_order_and_the_full_layout(tokenizer, max_tokens):
    policy, batch = _policy(tokenizer), _batch()
    policy.micro_batch_size = 2
    expected = policy.forward(batch, values=True)
    got = policy.logprobs(batch, values=True, max_tokens=max_tokens)
    mask = batch.response_mask.bool()
    for key in ("logprobs", "values"):
        assert got[key].shape == expected[key].shape
        assert torch.allclose(got[key][mask], expected[key][mask].detach(), atol=1e-5, rtol=0), key
