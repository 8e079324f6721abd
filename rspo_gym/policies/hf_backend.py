"""Batched generation with a transformers causal LM, with exact behaviour log-probs.

- ``HFBackend``: left-padded batched sampling (temperature, top-p, seed) with a KV cache, and
  optional constrained decoding to given action strings (a token-prefix trie per row).
- ``ActionTrie``: the prefix trie of token-id sequences used for constraining.
- ``allowed_token_ids``: the ids allowed at each position of a constrained reply, the same lists
  ``HFBackend`` records, so a trainer can rebuild the mask of any reply.

Why our own loop rather than ``model.generate``: the log-probs we return must be the ones a
trainer recomputes by teacher forcing (tempered softmax before top-p, see ``generation.py``), the
position ids must be the same ``cumsum(attention_mask) - 1`` the trainer uses, and constraining
needs per-row state. Under constraints the recorded log-probs are those of the *restricted*
distribution (``softmax(logits / T)`` renormalised over the allowed ids, computed by
``llm.restricted_logprobs`` as the trainer does): that is the distribution the tokens were drawn
from, so it is the policy being optimised. The trainer recomputes it from the recorded allowed ids,
importance ratios start at 1, and the policy gradient has no ``∇ log Z`` term pushing probability
on or off the allowed set.
"""

from __future__ import annotations

import inspect
from typing import Sequence

import torch

from rspo_gym.policies.generation import GenerationConfig, GenerationOutput

__all__ = ["HFBackend", "ActionTrie", "allowed_token_ids", "position_ids", "eos_token_ids"]


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding: ``cumsum(mask) - 1`` (0 on padding)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp_(min=0)


def eos_token_ids(model, tokenizer) -> list[int]:
    """Every token that ends a reply: the generation config's and the tokenizer's end tokens."""
    ids: list[int] = []
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (configured, tokenizer.eos_token_id):
        if value is None:
            continue
        for token in value if isinstance(value, (list, tuple)) else [value]:
            if token not in ids:
                ids.append(int(token))
    if not ids:
        raise ValueError("the model and tokenizer define no end-of-sequence token")
    return ids


class ActionTrie:
    """Token-id prefix trie of a set of replies, each followed by the end token."""

    def __init__(self, sequences: Sequence[Sequence[int]]):
        self.root: dict = {}
        self.depth = max((len(seq) for seq in sequences), default=0)
        for seq in sequences:
            node = self.root
            for token in seq:
                node = node.setdefault(int(token), {})

    @classmethod
    def from_texts(cls, tokenizer, texts: Sequence[str], end_id: int) -> "ActionTrie":
        if not texts:
            raise ValueError("constrained decoding needs at least one allowed reply")
        return cls([tokenizer(t, add_special_tokens=False)["input_ids"] + [end_id] for t in texts])

    @staticmethod
    def choices(node: dict) -> list[int]:
        """The ids that may follow ``node`` (sorted, so recorded lists are reproducible)."""
        return sorted(node)

    def allowed_along(self, response: Sequence[int]) -> list[list[int]]:
        """``choices`` at each position of ``response``, walking the trie along its tokens."""
        node, allowed = self.root, []
        for token in response:
            if int(token) not in node:
                raise ValueError(f"token {int(token)} does not continue any allowed reply")
            allowed.append(self.choices(node))
            node = node[int(token)]
        return allowed


def allowed_token_ids(tokenizer, texts: Sequence[str], response_ids: Sequence[int], end_id: int) -> list[list[int]]:
    """The ids constrained decoding to ``texts`` allowed at each position of ``response_ids``.

    What ``HFBackend.generate`` records for a constrained row; teacher-forcing any allowed reply
    (not only sampled ones) needs the same lists, and building both from one trie keeps them equal.
    """
    return ActionTrie.from_texts(tokenizer, texts, end_id).allowed_along(response_ids)


def _nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero the tail beyond ``top_p`` cumulative mass (the top token always stays)."""
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    keep = sorted_probs.cumsum(-1) - sorted_probs < top_p
    sorted_probs = sorted_probs * keep
    return torch.zeros_like(probs).scatter_(-1, order, sorted_probs)


def _padded(choices: Sequence[Sequence[int]]) -> torch.Tensor:
    """``(rows, K)`` long ids, right-padded with ``-1`` (the layout ``restricted_logprobs`` takes)."""
    out = torch.full((len(choices), max(len(c) for c in choices)), -1, dtype=torch.long)
    for row, ids in enumerate(choices):
        out[row, :len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


def _cache_argument(model) -> str:
    """The KV-cache keyword: ``cache`` in transformers >= 5.2x, ``past_key_values`` before."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft wrappers
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def _cache_of(output):
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


class HFBackend:
    """Generation straight from the trainer's model (so weight sync is a no-op).

    Args:
        model: a transformers causal LM (trained in place by the trainer).
        tokenizer: its tokenizer (``pad_token_id`` used for padding).
        seed: seed of the backend's own generator, used when a call gives no seed.
        micro_batch_size: most prompts per batched call.
        max_batch_tokens: most padded prompt tokens per batched call (bounds prefill memory).
    """

    def __init__(self, model, tokenizer, *, seed: int = 0, micro_batch_size: int = 64, max_batch_tokens: int = 65536):
        self.model, self.tokenizer = model, tokenizer
        self.eos_ids = eos_token_ids(model, tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]
        self.micro_batch_size = micro_batch_size
        self.max_batch_tokens = max_batch_tokens
        self.generator = torch.Generator(device="cpu").manual_seed(seed)

    def sync_weights(self) -> None:
        """Nothing to do: generation reads the trained model itself."""

    def chunks(self, lengths: Sequence[int]) -> list[list[int]]:
        """Prompt indices grouped by similar length, each chunk within the row and token budgets.

        Prompts of a multi-turn batch differ a lot in length (ALFWorld: ~300-1,100 tokens), and a
        left-padded batch pays for its longest prompt in every row; sorting first keeps the
        padding small while each chunk stays one batched call.
        """
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        chunks: list[list[int]] = []
        for i in order:
            if chunks:
                rows = len(chunks[-1]) + 1
                if rows <= self.micro_batch_size and rows * lengths[i] <= self.max_batch_tokens:
                    chunks[-1].append(i)
                    continue
            chunks.append([i])
        return chunks

    @torch.no_grad()
    def generate(
        self,
        prompt_ids: Sequence[Sequence[int]],
        config: GenerationConfig,
        allowed: Sequence[Sequence[str]] | None = None,
    ) -> GenerationOutput:
        if allowed is not None and len(allowed) != len(prompt_ids):
            raise ValueError(f"allowed has {len(allowed)} entries for {len(prompt_ids)} prompts")
        generator = self.generator
        if config.seed is not None:
            generator = torch.Generator(device="cpu").manual_seed(config.seed)
        n = len(prompt_ids)
        texts: list[str] = [""] * n
        response_ids: list[list[int]] = [[] for _ in range(n)]
        logprobs: list[list[float]] = [[] for _ in range(n)]
        allowed_ids: list[list[list[int]]] | None = None if allowed is None else [[] for _ in range(n)]
        for chunk in self.chunks([len(p) for p in prompt_ids]):
            part = self._generate(
                [prompt_ids[i] for i in chunk], config, None if allowed is None else [allowed[i] for i in chunk], generator
            )
            for k, i in enumerate(chunk):
                texts[i], response_ids[i], logprobs[i] = part.texts[k], part.response_ids[k], part.logprobs[k]
                if allowed_ids is not None:
                    allowed_ids[i] = part.allowed_token_ids[k]
        return GenerationOutput(texts, response_ids, logprobs, allowed_ids)

    def _generate(self, prompt_ids, config, allowed, generator) -> GenerationOutput:
        from rspo_gym.policies.llm import restricted_logprobs  # here: llm.py imports this module

        model = self.model
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        B, P = len(prompt_ids), max(len(p) for p in prompt_ids)
        ids = torch.full((B, P), self.pad_id, dtype=torch.long)
        attention = torch.zeros((B, P), dtype=torch.long)
        for b, p in enumerate(prompt_ids):
            ids[b, P - len(p):] = torch.tensor(list(p), dtype=torch.long)
            attention[b, P - len(p):] = 1
        ids, attention = ids.to(device), attention.to(device)
        positions = position_ids(attention)
        nodes, max_new_tokens = None, config.max_new_tokens
        if allowed is not None:  # a constrained reply always completes, whatever max_new_tokens says
            tries = [ActionTrie.from_texts(self.tokenizer, a, self.eos_ids[0]) for a in allowed]
            nodes = [trie.root for trie in tries]
            max_new_tokens = max(max_new_tokens, max(trie.depth for trie in tries))
        eos = torch.tensor(self.eos_ids, device=device)
        tokens: list[list[int]] = [[] for _ in range(B)]
        logps: list[list[float]] = [[] for _ in range(B)]
        allowed_ids: list[list[list[int]]] = [[] for _ in range(B)]
        finished = torch.zeros(B, dtype=torch.bool, device=device)
        cache_arg = _cache_argument(model)
        out = model(
            input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=True, logits_to_keep=1
        )
        last_pos = positions[:, -1]
        for _ in range(max_new_tokens):
            raw = out.logits[:, -1, :]
            logits = raw.float()
            if config.temperature > 0:
                logits = logits / config.temperature
            sample_logits, choices = logits, None
            if nodes is not None:  # a finished row may take anything (the end token): it is discarded
                choices = [ActionTrie.choices(node) if node else [self.eos_ids[0]] for node in nodes]
                mask = torch.full_like(logits, float("-inf"))
                for b, ids in enumerate(choices):
                    mask[b, ids] = 0.0
                sample_logits = logits + mask
            if config.temperature > 0:
                probs = torch.softmax(sample_logits, dim=-1)
                if config.top_p < 1.0:
                    probs = _nucleus(probs, config.top_p)
                # exponential race: argmax(p / E), E ~ Exp(1), draws from p (as multinomial does, but
                # one vectorised pass instead of CPU multinomial's per-row cumulative sums)
                race = torch.empty(probs.shape, dtype=torch.float32).exponential_(generator=generator)
                next_tokens = (probs.cpu() / race).argmax(dim=-1).to(device)
            else:
                next_tokens = sample_logits.argmax(dim=-1)
            if choices is None:
                chosen = torch.log_softmax(logits, dim=-1).gather(1, next_tokens[:, None]).squeeze(1)
            else:  # the restricted distribution, by the trainer's own function (see the module docstring)
                chosen = restricted_logprobs(raw, next_tokens, _padded(choices).to(device), config.temperature)
            for b in torch.nonzero(~finished).flatten().tolist():
                token = int(next_tokens[b])
                tokens[b].append(token)
                logps[b].append(float(chosen[b]))
                if choices is not None:
                    allowed_ids[b].append(choices[b])
                    nodes[b] = nodes[b].get(token, {})
            finished |= torch.isin(next_tokens, eos)
            if bool(finished.all()):
                break
            next_tokens = torch.where(finished, torch.full_like(next_tokens, self.pad_id), next_tokens)
            attention = torch.cat([attention, torch.ones((B, 1), dtype=attention.dtype, device=device)], dim=1)
            last_pos = last_pos + 1
            out = model(
                input_ids=next_tokens[:, None],
                attention_mask=attention,
                position_ids=last_pos[:, None],
                use_cache=True,
                logits_to_keep=1,
                **{cache_arg: _cache_of(out)},
            )
        if was_training:
            model.train()
        texts = self.tokenizer.batch_decode(tokens, skip_special_tokens=True)
        return GenerationOutput(texts, tokens, logps, None if nodes is None else allowed_ids)
