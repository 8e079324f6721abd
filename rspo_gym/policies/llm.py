"""The Hugging Face causal-LM policy the trainers optimise.

- ``LLMPolicy``: generation through a backend (``HFBackend`` by default, vLLM optional),
  teacher-forced log-probs / entropies / values on a ``TrainingBatch``, an optional value head
  for PPO, LoRA adapters through peft, and save / load.
- ``ValueHead``: a linear value head on the last hidden state.

Alignment: for response token ``t`` the log-prob, entropy and value are all read at input
position ``P - 1 + t`` (the state *before* the token), so they line up with the
``(rows, R)`` tensors of ``rollout.trajectory.TrainingBatch``. Log-probs use
``logits / temperature`` exactly as the generation backends do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from rspo_gym.policies.generation import GenerationBackend, GenerationConfig, GenerationOutput
from rspo_gym.policies.hf_backend import HFBackend, position_ids

__all__ = ["LLMPolicy", "ValueHead", "token_logprobs", "load_policy"]


class ValueHead(nn.Module):
    """``hidden -> 1`` state value, initialised small so early values do not swamp advantages.

    PPO's critic: it reads the trunk's last hidden state *detached*, so the value loss trains this
    head only. At the start of training the value loss's gradient norm is ~10x the policy's; on a
    shared trunk it would steer the policy's features and, under one joint clip, shrink the
    policy's step ~9x. Detaching keeps the policy's update exactly independent of ``vf_coef``
    without the memory of a second trunk (verl trains a separate critic model); the price is a
    critic that is a linear read-out of the policy's features.
    """

    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1)
        nn.init.normal_(self.linear.weight, std=1.0 / (hidden_size + 1))
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(hidden).squeeze(-1)


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
    """``logits / temperature`` in float32; temperature 0 (greedy) keeps the raw logits."""
    logits = logits.float()
    return logits / temperature if temperature > 0 else logits


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


class LLMPolicy:
    """A causal LM that acts (generates replies) and learns (log-probs, values).

    Args:
        model: a transformers causal LM.
        tokenizer: its tokenizer; padding is on the left for generation.
        backend: a ``GenerationBackend``; ``HFBackend(model, tokenizer)`` when None.
        value_head: attach a ``ValueHead`` (PPO's critic on the shared trunk).
        micro_batch_size: rows per forward pass in ``forward`` / ``logprobs``.
        seed: seed of the default backend's generator and of the value head's initialisation.
        autocast_dtype: run the model's forward passes (training, log-probs and transformers
            generation) under ``torch.autocast`` in this dtype (``torch.bfloat16`` for
            mixed precision: float32 weights, bfloat16 compute); None runs in the weights' dtype.
    """

    def __init__(
        self,
        model,
        tokenizer,
        *,
        backend: GenerationBackend | None = None,
        value_head: bool = False,
        micro_batch_size: int = 16,
        seed: int = 0,
        autocast_dtype: torch.dtype | None = None,
    ):
        self.model, self.tokenizer = model, tokenizer
        self.autocast_dtype = autocast_dtype
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
        self.backend = backend if backend is not None else HFBackend(model, tokenizer, seed=seed)
        self.micro_batch_size = micro_batch_size
        self.value_head: ValueHead | None = None
        if value_head:
            torch.manual_seed(seed)
            self.value_head = ValueHead(model.config.hidden_size).to(self.device)

    # -- acting --------------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def pad_token_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    def generate(
        self,
        prompt_ids: Sequence[Sequence[int]],
        config: GenerationConfig = GenerationConfig(),
        allowed: Sequence[Sequence[str]] | None = None,
    ) -> GenerationOutput:
        """One reply per prompt, with behaviour log-probs (see ``generation.py``).

        Transformers generation runs under the same autocast as training, so behaviour and
        teacher-forced log-probs share one numerics; other engines keep their own.
        """
        if isinstance(self.backend, HFBackend):
            with self.autocast():
                return self.backend.generate(prompt_ids, config, allowed)
        return self.backend.generate(prompt_ids, config, allowed)

    def sync_weights(self) -> None:
        """Push freshly trained weights to the generation backend (no-op for ``HFBackend``)."""
        self.backend.sync_weights()

    def release_generation_memory(self) -> None:
        """Let the generation engine free its memory until it next generates (vLLM's sleep mode)."""
        sleep = getattr(self.backend, "sleep", None)
        if sleep is not None:
            sleep()

    # -- learning ------------------------------------------------------------------------------
    def autocast(self):
        """The mixed-precision context of forward passes (a no-op without ``autocast_dtype``)."""
        return torch.autocast(self.device.type, dtype=self.autocast_dtype or torch.bfloat16, enabled=self.autocast_dtype is not None)

    def policy_parameters(self) -> list[nn.Parameter]:
        """The trainable parameters of the language model (the actor)."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def critic_parameters(self) -> list[nn.Parameter]:
        """The value head's parameters (empty without one)."""
        return [] if self.value_head is None else list(self.value_head.parameters())

    def parameters(self) -> list[nn.Parameter]:
        return self.policy_parameters() + self.critic_parameters()

    def train(self, mode: bool = True) -> "LLMPolicy":
        self.model.train(mode)
        if self.value_head is not None:
            self.value_head.train(mode)
        return self

    def forward(
        self,
        batch,
        *,
        temperature: float = 1.0,
        entropy: bool = False,
        values: bool = False,
    ) -> dict[str, torch.Tensor]:
        """Teacher-forced ``logprobs`` (and ``entropy`` / ``values``) of a batch, with gradients.

        Returns ``(rows, R)`` tensors aligned with ``batch.response_mask``.
        """
        P = batch.prompt_length
        R = batch.response_mask.shape[1]
        need_hidden = values
        if values and self.value_head is None:
            raise ValueError("this policy has no value head: build it with value_head=True")
        with self.autocast():
            out = self.model(
                input_ids=batch.input_ids,
                attention_mask=batch.attention_mask,
                position_ids=position_ids(batch.attention_mask),
                output_hidden_states=need_hidden,
                use_cache=False,
                logits_to_keep=R + 1,  # only the positions that predict response tokens (+1: the last)
            )
        logits = out.logits[:, :R, :]
        tokens = batch.input_ids[:, P:P + R]
        result = {"logprobs": restricted_logprobs(logits, tokens, batch.allowed, temperature)}
        if entropy:
            result["entropy"] = restricted_entropy(logits, batch.allowed, temperature)
        if values:
            hidden = out.hidden_states[-1][:, P - 1:P - 1 + R, :].detach()  # see ValueHead
            result["values"] = self.value_head(hidden.to(self.value_head.linear.weight.dtype)).float()
        return result

    @torch.no_grad()
    def logprobs(self, batch, *, temperature: float = 1.0, values: bool = False) -> dict[str, torch.Tensor]:
        """``forward`` without gradients, micro-batched (old / reference log-probs, old values)."""
        was_training = self.model.training
        self.train(False)
        parts: list[dict[str, torch.Tensor]] = []
        for start in range(0, len(batch), self.micro_batch_size):
            rows = torch.arange(start, min(start + self.micro_batch_size, len(batch)))
            parts.append(self.forward(batch.index(rows), temperature=temperature, values=values))
        self.train(was_training)
        return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}

    # -- adapters and persistence --------------------------------------------------------------
    def add_lora(self, *, r: int = 8, alpha: int = 16, dropout: float = 0.0, target_modules="all-linear") -> None:
        """Wrap the model with a trainable LoRA adapter (base weights frozen)."""
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError as err:  # pragma: no cover - depends on the install
            raise ImportError("LoRA needs peft: pip install 'rspo-gym[llm]'") from err
        config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules)
        self.model = get_peft_model(self.model, config)
        if isinstance(self.backend, HFBackend):
            self.backend.model = self.model

    def save(self, path: str | Path) -> None:
        """Weights and tokenizer in Hugging Face format (+ ``value_head.pt``)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        if self.value_head is not None:
            torch.save(self.value_head.state_dict(), path / "value_head.pt")

    def state_dict(self) -> dict:
        state = {"model": self.model.state_dict()}
        if self.value_head is not None:
            state["value_head"] = self.value_head.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        if self.value_head is not None and "value_head" in state:
            self.value_head.load_state_dict(state["value_head"])
        self.sync_weights()


def load_policy(
    name: str = "tiny",
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
    backend: str = "hf",
    value_head: bool = False,
    seed: int = 0,
    **backend_kwargs,
) -> LLMPolicy:
    """``load_model(name)`` wrapped as an ``LLMPolicy``, generating with ``backend`` ("hf" or "vllm").

    ``backend_kwargs`` go to ``VLLMBackend`` (e.g. ``kv_cache_memory_bytes``); the transformers
    backend takes none. The vLLM engine is built only when asked for, so "hf" never imports vLLM.

    >>> policy = load_policy("tiny", device="cpu")
    >>> type(policy.backend).__name__, policy.value_head is None
    ('HFBackend', True)
    """
    from rspo_gym.policies.models import load_model

    if backend not in ("hf", "vllm"):
        raise ValueError(f"backend must be 'hf' or 'vllm', not {backend!r}")
    if backend == "hf" and backend_kwargs:
        raise TypeError(f"the transformers backend takes no options, got {sorted(backend_kwargs)}")
    model, tokenizer = load_model(name, device=device, dtype=dtype, seed=seed)
    generation = None
    if backend == "vllm":
        from rspo_gym.policies.vllm_backend import VLLMBackend

        generation = VLLMBackend(model, tokenizer, seed=seed, **backend_kwargs)
    return LLMPolicy(model, tokenizer, backend=generation, value_head=value_head, seed=seed)
