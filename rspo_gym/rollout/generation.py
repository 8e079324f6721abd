"""The generation-backend interface: token ids in, sampled tokens and behaviour log-probs out.

- ``GenerationConfig``: sampling settings shared by every backend.
- ``GenerationOutput``: what one batched call returns.
- ``GenerationBackend``: the protocol a backend implements (transformers, vLLM, ...).

Prompts travel as token ids, not text, so the ids a trainer stores are exactly the ids the model
saw. Behaviour log-probs are the log-probabilities of the sampled tokens under
``softmax(logits / temperature)`` -- the tempered distribution *before* top-p truncation -- which
is what a trainer recomputes with teacher forcing (verl does the same), so the two agree to
numerical precision and the importance ratio starts at exactly 1.

Under constrained decoding (``allowed``) the tokens are drawn from that distribution restricted to
the ids that continue an allowed reply and renormalised, and the behaviour log-probs are of this
restricted distribution: it is what was sampled, hence the policy being optimised. The output
carries the allowed ids of every position (``GenerationOutput.allowed_token_ids``) so a trainer
recomputes the same restricted log-probs; ratios start at 1 and the policy gradient has no
``∇ log Z`` term moving mass on or off the allowed set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence, runtime_checkable

__all__ = ["GenerationConfig", "GenerationOutput", "GenerationBackend"]


@dataclass(frozen=True)
class GenerationConfig:
    """Sampling settings for one generation call."""

    max_new_tokens: int = 64
    """Upper bound on response length; a response that hits it has no end token."""
    temperature: float = 1.0
    """Softmax temperature; 0 means greedy (log-probs are then those of the untempered logits)."""
    top_p: float = 1.0
    """Nucleus sampling mass; 1.0 disables it. Log-probs ignore it (see the module docstring)."""
    seed: int | None = None
    """Seed for this call's sampling; None continues the backend's own generator."""
    row_seeds: tuple[int, ...] | None = None
    """One seed per prompt, overriding ``seed``: prompt i samples from its own stream, so its reply
    does not depend on which other prompts share the call (rollouts the same however envs are
    split over processes or ranks)."""

    def row_seed(self, row: int) -> int | None:
        """Row ``row``'s seed for engines that seed each request: its own, else the call's
        ``seed + row`` (rows of one call must differ), else None.

        >>> GenerationConfig(seed=5).row_seed(2), GenerationConfig(seed=5, row_seeds=(9, 8)).row_seed(1)
        (7, 8)
        """
        if self.row_seeds is not None:
            return int(self.row_seeds[row])
        return None if self.seed is None else self.seed + row

    def checked_row_seeds(self, rows: int) -> tuple[int, ...] | None:
        """``row_seeds`` for a call of ``rows`` prompts (None: none given); ``ValueError`` when their
        count differs, since a missing or extra seed would give a row another row's stream.

        >>> GenerationConfig(row_seeds=(9, 8)).checked_row_seeds(2), GenerationConfig().checked_row_seeds(3)
        ((9, 8), None)
        """
        if self.row_seeds is not None and len(self.row_seeds) != rows:
            raise ValueError(f"row_seeds has {len(self.row_seeds)} entries for {rows} prompts")
        return self.row_seeds


def refuse_constraints(allowed: Sequence[Sequence[str]] | None, backend: str) -> None:
    """``NotImplementedError`` for ``allowed`` on a backend that samples without constraints."""
    if allowed is not None:
        raise NotImplementedError(
            f"constrained decoding is HF-only: {backend} cannot restrict responses to allowed "
            "actions (nor record their restricted log-probs); use HFBackend (backend='hf')"
        )


@dataclass
class GenerationOutput:
    """One batched generation: row i answers prompt i."""

    texts: list[str]
    """Decoded responses, special tokens removed."""
    response_ids: list[list[int]]
    """Sampled token ids, including the end token when one was produced."""
    logprobs: list[list[float]] = field(default_factory=list)
    """Behaviour log-prob of each sampled token, aligned with ``response_ids``."""
    allowed_token_ids: list[list[list[int]]] | None = None
    """Under constrained decoding, row -> position -> the token ids allowed there (aligned with
    ``response_ids``); None when generation was unconstrained."""


@runtime_checkable
class GenerationBackend(Protocol):
    """What the rollout collector needs from a generator."""

    def generate(
        self,
        prompt_ids: Sequence[Sequence[int]],
        config: GenerationConfig,
        allowed: Sequence[Sequence[str]] | None = None,
    ) -> GenerationOutput:
        """Sample one response per prompt.

        ``allowed``, when given, restricts response i to one of ``allowed[i]`` (followed by the end
        token, which may take more than ``max_new_tokens``); backends that cannot constrain raise
        ``NotImplementedError``.
        """
        ...

    def sync_weights(self) -> None:
        """Make generation use the trainer's current weights (a no-op when they share memory)."""
        ...
