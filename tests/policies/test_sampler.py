"""``HFBackend``'s sampler: exact draws from ``softmax(logits / T)`` (top-p truncated), reproducible
from a seed, on the model's device, and one host read per token step whatever the batch size."""

from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402

from rspo_gym.rollout.generation import GenerationConfig  # noqa: E402
from rspo_gym.policies.hf_backend import HFBackend, sample  # noqa: E402
from rspo_gym.policies.models import load_model  # noqa: E402

#: Tensor methods that copy device data to the host (each a wait for the device on a GPU).
HOST_READS = {"__bool__", "__float__", "__index__", "__int__", "cpu", "item", "numpy", "tolist"}


class FixedLogits(torch.nn.Module):
    """A causal-LM stand-in whose next-token logits are always ``logits``: draws are then i.i.d."""

    def __init__(self, logits: torch.Tensor):
        super().__init__()
        self.logits = torch.nn.Parameter(logits, requires_grad=False)

    def forward(self, input_ids, attention_mask=None, position_ids=None, use_cache=False, logits_to_keep=0, past_key_values=None):
        return SimpleNamespace(logits=self.logits.expand(input_ids.shape[0], 1, -1), past_key_values=None)


class LetterTokenizer:
    """Letter ``a`` + i is id i; ``end`` ends a reply and pads."""

    def __init__(self, end: int):
        self.eos_token_id = self.pad_token_id = end

    def __call__(self, text: str | list[str], add_special_tokens: bool = False) -> dict:
        """One text's ids, or a list of texts' lists of ids, as a transformers tokenizer returns them."""
        if isinstance(text, list):
            return {"input_ids": [self(t)["input_ids"] for t in text]}
        return {"input_ids": [ord(c) - ord("a") for c in text]}

    def batch_decode(self, ids, skip_special_tokens: bool = True) -> list[str]:
        return ["".join(chr(ord("a") + i) for i in row if i != self.eos_token_id) for row in ids]


class HostReads(TorchFunctionMode):
    """Counts device-to-host reads of tensors."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.count += getattr(func, "__name__", "") in HOST_READS
        return func(*args, **(kwargs or {}))


def _fixed(vocab: int = 50, end_logit: float | None = None) -> tuple[HFBackend, torch.Tensor]:
    """A backend over seeded random logits (the last id ends a reply; ``end_logit`` overrides its logit)."""
    logits = 1.5 * torch.randn(vocab, generator=torch.Generator().manual_seed(11))
    if end_logit is not None:
        logits[-1] = end_logit
    return HFBackend(FixedLogits(logits), LetterTokenizer(vocab - 1), micro_batch_size=4096), logits


def _draws(backend: HFBackend, rows: int, config: GenerationConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """First tokens of ``rows`` one-token prompts and their recorded log-probs."""
    out = backend.generate([[0]] * rows, config)
    return torch.tensor([ids[0] for ids in out.response_ids]), torch.tensor([lp[0] for lp in out.logprobs])


def _assert_frequencies(tokens: torch.Tensor, probs: torch.Tensor) -> None:
    """Each id's empirical frequency within 4.5 standard errors of its probability."""
    n = len(tokens)
    freq = torch.bincount(tokens, minlength=len(probs)).double() / n
    p = probs.double()
    assert torch.all((freq - p).abs() <= 4.5 * (p * (1 - p) / n).sqrt() + 1e-3), (freq - p).abs().max()


def test_draws_follow_the_tempered_distribution_and_record_its_logprobs():
    backend, logits = _fixed()
    tokens, logprobs = _draws(backend, 4000, GenerationConfig(max_new_tokens=1, temperature=0.7, seed=1))
    expected = torch.softmax(logits / 0.7, dim=-1)
    _assert_frequencies(tokens, expected)
    assert torch.allclose(logprobs, expected.log()[tokens], atol=1e-5)
    # the test tells temperatures apart: the untempered distribution is far off
    assert (torch.softmax(logits, -1) - expected).abs().max() > 0.1


def test_top_p_draws_only_the_nucleus_renormalised_and_records_untruncated_logprobs():
    backend, logits = _fixed()
    tokens, logprobs = _draws(backend, 4000, GenerationConfig(max_new_tokens=1, temperature=1.0, top_p=0.6, seed=2))
    probs = torch.softmax(logits, dim=-1)
    ordered, order = probs.sort(descending=True)
    nucleus = order[ordered.cumsum(0) - ordered < 0.6]
    truncated = torch.zeros_like(probs)
    truncated[nucleus] = probs[nucleus] / probs[nucleus].sum()
    assert 1 < len(nucleus) < len(probs) and set(tokens.tolist()) <= set(nucleus.tolist())
    _assert_frequencies(tokens, truncated)
    assert torch.allclose(logprobs, probs.log()[tokens], atol=1e-5)


def test_constrained_draws_follow_the_restricted_distribution_and_record_its_logprobs():
    backend, logits = _fixed()
    allowed = ["c", "h", "k", "q"]
    ids = torch.tensor([ord(a) - ord("a") for a in allowed])
    tokens, logprobs = _draws_constrained(backend, 4000, GenerationConfig(max_new_tokens=1, temperature=0.7, seed=4), allowed)
    restricted = torch.zeros_like(logits)
    restricted[ids] = torch.softmax(logits[ids] / 0.7, dim=-1)
    assert set(tokens.tolist()) == set(ids.tolist())
    _assert_frequencies(tokens, restricted)
    assert torch.allclose(logprobs, restricted.log()[tokens], atol=1e-5)


def _draws_constrained(backend: HFBackend, rows: int, config: GenerationConfig, allowed: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    out = backend.generate([[0]] * rows, config, [allowed] * rows)
    return torch.tensor([ids[0] for ids in out.response_ids]), torch.tensor([lp[0] for lp in out.logprobs])


def test_sample_never_draws_a_zero_probability_id():
    """Zeros in every block layout: whole blocks, the short last block, single ids (vocabulary 37)."""
    probs = torch.rand(2000, 37, generator=torch.Generator().manual_seed(0))
    probs[:, 7:14] = 0.0
    probs[:, 30:] = 0.0
    probs[:, ::3] = 0.0
    probs[1::2] *= 5.0  # unnormalised rows are fine
    tokens = sample(probs, torch.Generator().manual_seed(3))
    assert torch.all(probs.gather(1, tokens[:, None]) > 0)
    assert len(set(tokens.tolist())) == int((probs[0] > 0).sum())  # and every positive id is reachable


def test_one_host_read_per_token_step_whatever_the_batch_size():
    backend, _ = _fixed(end_logit=-1e9)  # replies never end early
    for rows in (1, 16):
        with HostReads() as reads:
            out = backend.generate([[0]] * rows, GenerationConfig(max_new_tokens=6, seed=0))
        assert [len(ids) for ids in out.response_ids] == [6] * rows
        assert reads.count == 6


def test_constrained_steps_read_the_host_at_most_twice():
    """The sampled ids, and ``restricted_logprobs``' check that every row is constrained."""
    backend, _ = _fixed()
    with HostReads() as reads:
        out = backend.generate([[0]] * 16, GenerationConfig(seed=0), [["abc", "abd", "b"]] * 16)
    assert {out.texts[i] for i in range(16)} <= {"abc", "abd", "b"}
    assert reads.count <= 2 * max(len(ids) for ids in out.response_ids)


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = load_model("tiny", device="cpu")
    prompts = [
        tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": c}], add_generation_prompt=True, tokenize=False), add_special_tokens=False)
        for c in ("look", "Your task is to: put a clean mug in coffeemachine.", "go to desk 1", "inventory")
    ]
    return model, tokenizer, prompts


ALLOWED = [["look", "go to desk 1", "go to drawer 2"], ["inventory", "open drawer 1"]] * 2


def _generate(backend: HFBackend, prompts, seed: int | None, allowed=None):
    out = backend.generate(prompts, GenerationConfig(max_new_tokens=12, temperature=1.0, seed=seed), allowed)
    return out.response_ids, out.logprobs


@pytest.mark.parametrize("allowed", [None, ALLOWED], ids=["free", "constrained"])
def test_a_seed_repeats_its_samples_and_another_seed_differs(tiny, allowed):
    model, tokenizer, prompts = tiny
    backend = HFBackend(model, tokenizer)
    first = _generate(backend, prompts, 5, allowed)
    assert _generate(HFBackend(model, tokenizer, seed=9), prompts, 5, allowed) == first
    assert _generate(backend, prompts, 6, allowed)[0] != first[0]


def test_seedless_calls_continue_the_backends_own_generator_on_the_model_device(tiny):
    model, tokenizer, prompts = tiny
    backend = HFBackend(model, tokenizer, seed=3)
    first, second = _generate(backend, prompts, None), _generate(backend, prompts, None)
    assert first[0] != second[0]
    again = HFBackend(model, tokenizer, seed=3)
    assert [_generate(again, prompts, None), _generate(again, prompts, None)] == [first, second]
    device = next(model.parameters()).device
    assert backend.generator(device) is backend.generator(device) and backend.generator(device).device == device
