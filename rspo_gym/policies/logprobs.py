"""Log-probabilities and entropies of tokens under the tempered, optionally restricted softmax.

The numbers every policy-gradient quantity rests on, as pure tensor functions that the policy
(``llm.LLMPolicy``, teacher-forced) and the generation backend (``hf_backend.draw``, behaviour
log-probs while sampling) both import, so the two compute them the same way and neither module
imports the other for them.

- ``token_logprobs``: log-prob of each token under ``softmax(logits / temperature)``.
- ``restricted_logprobs`` / ``restricted_entropy``: the same distribution renormalised over the
  allowed ids of constrained decoding (what was actually sampled).
- ``chunked_scores``: both from hidden states, a chunk of positions at a time under activation
  checkpointing (no vocabulary-wide tensor per token kept for backward).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

__all__ = ["token_logprobs", "restricted_logprobs", "restricted_entropy", "chunked_scores"]


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-prob of each ``tokens`` entry under ``softmax(logits / temperature)`` (float32 math)."""
    logits = logits.float()
    if temperature > 0:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def _entropy(logits: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def _tempered(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """``logits / temperature`` in float32; temperature 0 (greedy) and 1 keep the raw logits (no copy)."""
    logits = logits.float()
    return logits / temperature if temperature > 0 and temperature != 1 else logits


def _allowed_logits(scaled: torch.Tensor, allowed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(..., K)`` logits at the allowed ids (``-1`` = padding) and the ``(...)`` constrained mask.

    Gathering K entries per position avoids a ``(..., vocab)`` mask. Padding becomes ``-inf`` only
    at constrained positions: an unconstrained position (no allowed id) gathers finite filler, so
    the softmax over it stays finite and its discarded ``torch.where`` branch sends no NaN gradient.
    """
    constrained = (allowed >= 0).any(-1)
    choices = scaled.gather(-1, allowed.clamp(min=0))
    return choices.masked_fill((allowed < 0) & constrained.unsqueeze(-1), float("-inf")), constrained


def restricted_logprobs(
    logits: torch.Tensor, tokens: torch.Tensor, allowed: torch.Tensor | None, temperature: float = 1.0
) -> torch.Tensor:
    """Log-prob of ``tokens`` under ``softmax(logits / temperature)`` renormalised over ``allowed``.

    Constrained decoding samples from that restricted distribution, so it is the policy whose
    ratios, gradients and KL the trainer needs: the unrestricted log-prob differs by ``log Z`` (the
    allowed mass), whose gradient would push probability on or off the allowed set. ``allowed``
    (``(..., K)`` ids, ``-1``-padded, see ``TrainingBatch``) marks a position without any allowed id
    as unconstrained: it keeps ``token_logprobs``, as does every position when ``allowed`` is None.
    ``HFBackend`` records behaviour log-probs with this same function.
    """
    if allowed is None:
        return token_logprobs(logits, tokens, temperature)
    scaled = _tempered(logits, temperature)
    choices, constrained = _allowed_logits(scaled, allowed)
    restricted = scaled.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) - choices.logsumexp(-1)
    if bool(constrained.all()):  # the usual constrained batch: no full-vocabulary softmax
        return restricted
    return torch.where(constrained, restricted, token_logprobs(logits, tokens, temperature))


def restricted_entropy(logits: torch.Tensor, allowed: torch.Tensor | None, temperature: float = 1.0) -> torch.Tensor:
    """Entropy of the distribution ``restricted_logprobs`` scores (0 where one id is allowed).

    The entropy bonus should measure the randomness of what is actually sampled; over the full
    vocabulary it would mostly reward mass on tokens constrained decoding can never pick.
    """
    scaled = _tempered(logits, temperature)
    if allowed is None:
        return _entropy(scaled)
    choices, constrained = _allowed_logits(scaled, allowed)
    logp = torch.log_softmax(choices, dim=-1)
    restricted = -(logp.exp() * logp.masked_fill(allowed < 0, 0.0)).sum(-1)  # 0 · -inf would be NaN
    if bool(constrained.all()):
        return restricted
    return torch.where(constrained, restricted, _entropy(scaled))


def _scores(
    head: nn.Module, hidden: torch.Tensor, tokens: torch.Tensor, allowed: torch.Tensor | None, temperature: float, entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``restricted_logprobs`` (and ``restricted_entropy``) of ``tokens`` from hidden states."""
    logits = head(hidden)
    logprobs = restricted_logprobs(logits, tokens, allowed, temperature)
    return logprobs, restricted_entropy(logits, allowed, temperature) if entropy else None


def chunked_scores(
    head: nn.Module,
    hidden: torch.Tensor,
    tokens: torch.Tensor,
    allowed: torch.Tensor | None,
    temperature: float = 1.0,
    *,
    entropy: bool = False,
    chunk_size: int = 512,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(B, R)`` log-probs (and entropies) of ``tokens`` from ``(B, R, hidden)`` states, by chunks.

    The same numbers as ``restricted_logprobs`` / ``restricted_entropy`` of ``head(hidden)``, but
    ``B * R`` positions are scored ``chunk_size`` at a time, each chunk under non-reentrant
    activation checkpointing when gradients are on: backward keeps only the chunk's hidden states
    (``hidden`` floats per token) and recomputes its logits, instead of the float32 logits,
    log-softmax and probabilities of every token (three ``vocab``-sized tensors each). At most one
    chunk's vocabulary-wide tensors exist at a time, in the forward and in the backward pass.
    """
    rows, width = tokens.shape
    flat_hidden = hidden.reshape(rows * width, hidden.shape[-1])
    flat_tokens = tokens.reshape(-1)
    flat_allowed = None if allowed is None else allowed.reshape(rows * width, allowed.shape[-1])
    logprobs, entropies = [], []
    for start in range(0, rows * width, chunk_size):
        part = slice(start, start + chunk_size)
        args = (head, flat_hidden[part], flat_tokens[part], None if flat_allowed is None else flat_allowed[part], temperature, entropy)
        logp, ent = checkpoint(_scores, *args, use_reentrant=False) if torch.is_grad_enabled() else _scores(*args)
        logprobs.append(logp)
        entropies.append(ent)
    return torch.cat(logprobs).view(rows, width), torch.cat(entropies).view(rows, width) if entropy else None
