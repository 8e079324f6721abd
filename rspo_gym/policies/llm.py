"""The Hugging Face causal-LM policy the trainers optimise.

- ``LLMPolicy``: generation through a backend (``HFBackend`` by default, vLLM optional),
  teacher-forced log-probs / entropies / values on a ``TrainingBatch``, an optional value head
  for PPO, LoRA adapters through peft, and save / load.
- ``ValueHead``: a linear value head on the last hidden state.

Alignment: for response token ``t`` the log-prob, entropy and value are all read at input
position ``P - 1 + t`` (the state *before* the token), so they line up with the
``(rows, R)`` tensors of ``rollout.trajectory.TrainingBatch``. Log-probs use
``logits / temperature`` exactly as the generation backends do.

Memory: a response token's float32 log-softmax over a 151,936-token vocabulary is 0.6 MB, and the
log-prob and entropy graph keeps three such tensors per token for backward. ``chunked_scores``
keeps only the last hidden state instead and recomputes the logits of a chunk of positions in
backward; ``LLMPolicy.logprobs`` and the trainer run micro-batches cut to their own padding.

Nested rows: the turns of an append-only conversation are prefixes of one another, and scoring
each as its own sequence repeats the earlier turns' tokens in every later pass. ``forward`` runs
the decoder once per chain of nested rows and reads each row's states from that pass
(``packing.py``); micro-batches keep a chain's rows together (``chains``).
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import torch
from torch import nn

from rspo_gym.policies.alignment import realigned, start_aligned
from rspo_gym.policies.adapters import active_adapter, adapter_parameters, adapters_disabled, is_peft, save_merged
from rspo_gym.rollout.generation import GenerationBackend, GenerationConfig, GenerationOutput
from rspo_gym.policies.hf_backend import HFBackend, eos_token_ids, position_ids
from rspo_gym.policies.logprobs import chunked_scores, restricted_entropy, restricted_logprobs, token_logprobs
from rspo_gym.policies.packing import nested_chains, packed_states, packing
from rspo_gym.rollout.trajectory import micro_batches

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["LLMPolicy", "ValueHead", "token_logprobs", "chunked_scores", "load_policy"]


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


class LLMPolicy:
    """A causal LM that acts (generates replies) and learns (log-probs, values).

    Args:
        model: a transformers causal LM.
        tokenizer: its tokenizer; padding is on the left for generation.
        backend: a ``GenerationBackend``; ``HFBackend(model, tokenizer)`` when None.
        value_head: attach a ``ValueHead`` (PPO's critic on the shared trunk).
        micro_batch_size: rows per forward pass in ``logprobs`` (a chain of nested rows counts as one).
        seed: seed of the default backend's generator and of the value head's initialisation.
        autocast_dtype: run the model's forward passes (training, log-probs and transformers
            generation) under ``torch.autocast`` in this dtype (``torch.bfloat16`` for
            mixed precision: float32 weights, bfloat16 compute); None runs in the weights' dtype.
        pack_rows: score rows whose real tokens (prompt and response) are a prefix of another row's
            from that row's decoder pass (``packing.py``): the same numbers within float rounding
            for a fraction of the tokens when turns are nested (an append-only conversation). A
            batch without nested rows runs exactly as with False. Applies on the start-aligned
            path only (``logprob_chunk_size`` set, no data-parallel engine).

    Several policies can share one peft model (see ``adapters.py``): ``adapter`` names the LoRA
    adapter this policy computes and trains with, and a policy made by ``sibling(adapters_off=True)``
    computes with the adapters disabled (a KL reference at the cost of no copy).
    """

    logprob_chunk_size: int | None = 512
    """Response positions (rows x tokens) scored per chunk by ``chunked_scores``. 512 bounds the
    transient vocabulary-wide tensors to ~0.3 GB each at Qwen2.5's 151,936 ids and keeps the head's
    matmul large. None scores the model's own full logits instead (the path for a model whose logits
    are not ``get_output_embeddings()`` of the last hidden state, e.g. with logit soft-capping)."""

    train_model: nn.Module | None = None
    """A data-parallel engine's wrapper of ``model`` (DDP, FSDP2, DeepSpeed; set by
    ``training/distributed.py``) or None. When set, ``forward`` makes one top-level call through it,
    scoring the model's own logits (engines hook the top-level call), and generation keeps using
    ``model``."""
    train_value_head: nn.Module | None = None
    """The engine's wrapper of ``value_head``, or None."""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        *,
        backend: GenerationBackend | None = None,
        value_head: bool = False,
        micro_batch_size: int = 16,
        seed: int = 0,
        autocast_dtype: torch.dtype | None = None,
        pack_rows: bool = True,
    ):
        self.model, self.tokenizer = model, tokenizer
        self.autocast_dtype = autocast_dtype
        self.pack_rows = pack_rows
        self.adapter: str | None = None
        self.adapters_off = False
        self.compute_device: torch.device | None = None
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
        if backend is None:  # scoring a trie reads logits as chunked_scores does: decode where that is off
            backend = HFBackend(model, tokenizer, seed=seed, constrained="tree" if self.logprob_chunk_size is not None else "decode")
        self.backend = backend
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

    @property
    def end_token_id(self) -> int:
        """The token that ends a reply (``<|im_end|>`` for ChatML models): what constrained replies
        end with, and what closes a reply in a ``Conversation``."""
        return eos_token_ids(self.model, self.tokenizer)[0]

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
        with self.routing():
            if isinstance(self.backend, HFBackend):
                with self.autocast():
                    return self.backend.generate(prompt_ids, config, allowed)
            return self.backend.generate(prompt_ids, config, allowed)

    def generation_session(self):
        """A context over the turns of a rollout in which the backend may reuse earlier prompts'
        work (``HFBackend.session``); a backend without sessions gets a no-op context."""
        session = getattr(self.backend, "session", None)
        return session() if session is not None else nullcontext()

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

    def routing(self):
        """The context that makes the shared model compute as this policy (its adapter, or none)."""
        return adapters_disabled(self.model) if self.adapters_off else active_adapter(self.model, self.adapter)

    def policy_parameters(self) -> list[nn.Parameter]:
        """The trainable parameters of the language model (the actor): this policy's adapter's, or
        every parameter that requires a gradient."""
        if self.adapter is not None:
            return [p for _, p in adapter_parameters(self.model, self.adapter)]
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

    def enable_gradient_checkpointing(self) -> None:
        """Recompute each decoder layer's activations in backward instead of keeping them.

        Training passes then keep about one hidden state per layer and token. Non-reentrant
        checkpointing works with the ``use_cache=False`` of every training pass and needs no input
        that requires grad, so LoRA adapters on frozen embeddings train too. Deep copies of the
        model (RSPO's explorer) keep the setting.
        """
        kwargs = {"use_reentrant": False}
        if hasattr(self.model, "activation_checkpointing_enable"):  # transformers 5.x renamed it; the old name warns
            self.model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)

    def _scoring_head(self) -> nn.Module | None:
        """The output embeddings ``chunked_scores`` reads on the start-aligned path; None where the
        path is off (no ``logprob_chunk_size``, an engine's wrapper, a model without them)."""
        if self.logprob_chunk_size is None or self.train_model is not None:
            return None
        return self.model.get_output_embeddings()

    def chains(self, batch) -> list[int] | None:
        """Each row's chain of nested rows (``packing.nested_chains``), the ``chains`` of
        ``micro_batches`` that keep a chain in one pass; None where ``forward`` does not pack."""
        return nested_chains(batch) if self.pack_rows and self._scoring_head() is not None else None

    def forward(
        self,
        batch,
        *,
        temperature: float = 1.0,
        entropy: bool = False,
        values: bool = False,
    ) -> dict[str, torch.Tensor]:
        """Teacher-forced ``logprobs`` (and ``entropy`` / ``values``) of a batch, with gradients.

        Returns ``(rows, R)`` tensors aligned with ``batch.response_mask``. Scores come from
        ``chunked_scores`` on the decoder's last hidden states, or from the full logits when
        ``logprob_chunk_size`` is None or the model has no output embeddings. Under ``pack_rows`` the
        start-aligned path runs one pass per chain of nested rows.
        """
        if values and self.value_head is None:
            raise ValueError("this policy has no value head: build it with value_head=True")
        P = batch.prompt_length
        R = batch.response_mask.shape[1]
        tokens = batch.input_ids[:, P:P + R]
        engine = self.train_model is not None
        head = self._scoring_head()
        with self.routing(), self.autocast():
            if head is None:
                model = self.train_model if engine else self.model
                out = model(
                    input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=position_ids(batch.attention_mask),
                    use_cache=False, output_hidden_states=values, logits_to_keep=R + 1,  # +1: the last position
                )
                hidden = out.hidden_states[-1][:, P - 1:P - 1 + R, :] if values else None
            else:  # start-aligned and unmasked: the fused causal attention kernel (alignment.py)
                shifted, leading = start_aligned(batch.input_ids, batch.attention_mask, self.pad_token_id)
                plan = packing(batch) if self.pack_rows else None
                if plan is not None and plan.packs:
                    hosts = shifted.index_select(0, torch.as_tensor(plan.hosts, device=shifted.device))[:, :plan.width]
                    hidden = packed_states(self.model.get_decoder()(input_ids=hosts, use_cache=False).last_hidden_state, plan, R)
                else:
                    hidden = realigned(self.model.get_decoder()(input_ids=shifted, use_cache=False).last_hidden_state, leading, P - 1, R)
                logprobs, entropies = chunked_scores(
                    head, hidden, tokens, batch.allowed, temperature, entropy=entropy, chunk_size=self.logprob_chunk_size
                )
        if head is None:
            logits = out.logits[:, :R, :]
            logprobs = restricted_logprobs(logits, tokens, batch.allowed, temperature)
            entropies = restricted_entropy(logits, batch.allowed, temperature) if entropy else None
        result = {"logprobs": logprobs}
        if entropy:
            result["entropy"] = entropies
        if values:
            hidden = hidden.detach().to(self.value_head.linear.weight.dtype)  # detached: see ValueHead
            result["values"] = (self.train_value_head or self.value_head)(hidden).float()
        return result

    @torch.no_grad()
    def logprobs(
        self, batch, *, temperature: float = 1.0, values: bool = False, max_tokens: int | None = None
    ) -> dict[str, torch.Tensor]:
        """``forward`` without gradients (old / reference log-probs, old values), micro-batched.

        Micro-batches are ``micro_batches(batch.lengths(), micro_batch_size, max_tokens, chains)``, each cut
        to its own padding (``TrainingBatch.trimmed``); results come back in the batch's row order
        and ``(rows, R)`` layout, 0 past the longest response of a row's micro-batch (padding).
        A policy kept off its compute device (``compute_device``: a reference offloaded to the CPU)
        moves there for the call and back after it.
        """
        was_training = self.model.training
        home = self.device
        if self.compute_device is not None and self.compute_device != home:
            self.model.to(self.compute_device)
        self.train(False)
        width = batch.response_mask.shape[1]
        result: dict[str, torch.Tensor] = {}
        try:
            for group in micro_batches(batch.lengths(), self.micro_batch_size, max_tokens, self.chains(batch)):
                rows = torch.tensor(group, device=batch.input_ids.device)
                for key, value in self.forward(batch.index(rows).trimmed(), temperature=temperature, values=values).items():
                    if key not in result:
                        result[key] = value.new_zeros(len(batch), width)
                    result[key][rows, :value.shape[1]] = value
        finally:
            self.train(was_training)
            self.model.to(home)
        return result

    # -- adapters and persistence --------------------------------------------------------------
    def add_lora(
        self, *, r: int = 8, alpha: float = 16, dropout: float = 0.0, target_modules="all-linear", name: str = "default"
    ) -> None:
        """Give this policy a trainable LoRA adapter ``name`` (base weights frozen).

        The first adapter wraps the model with peft; a later one is added beside the others on the
        same base (peft's multi-adapter model), so policies sharing the model never copy the base.
        """
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError as err:  # pragma: no cover - depends on the install
            raise ImportError("LoRA needs peft: pip install 'rspo-gym[llm]'") from err
        config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules)
        if is_peft(self.model):
            self.model.add_adapter(name, config)
        else:
            self.model = get_peft_model(self.model, config, adapter_name=name)
            if hasattr(self.backend, "model"):  # the backend generates from the wrapped model now
                self.backend.model = self.model
        self.adapter = name
        for _, parameter in adapter_parameters(self.model, name):
            parameter.requires_grad_(True)

    def sibling(self, *, adapters_off: bool = False, backend: GenerationBackend | None = None,
                value_head: bool = False, seed: int = 0) -> "LLMPolicy":
        """Another policy on this policy's model: ``adapters_off`` computes with the bare base
        (the KL reference of a LoRA learner), otherwise ``add_lora`` gives it its own adapter."""
        other = LLMPolicy(
            self.model, self.tokenizer, backend=backend, value_head=value_head, micro_batch_size=self.micro_batch_size,
            seed=seed, autocast_dtype=self.autocast_dtype, pack_rows=self.pack_rows,
        )
        other.adapters_off = adapters_off
        return other

    def save(self, path: str | Path, *, merged: bool = False, max_shard_size: str = "5GB", weights: dict | None = None) -> None:
        """Weights and tokenizer in Hugging Face format (+ ``value_head.pt``), sharded safetensors.

        A LoRA policy saves its adapter in peft's format (``adapter_config.json`` +
        ``adapter_model.safetensors``, loadable onto the base); ``merged=True`` writes the base with
        the adapter folded in instead, a plain model ``AutoModelForCausalLM`` loads. ``weights``:
        the model's whole state gathered from a sharding engine (FSDP), written instead of the
        module's own (sharded) tensors.
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if weights is not None:
            if self.adapter is not None:
                raise ValueError("gathered weights are saved for a fully fine-tuned model only, not a LoRA adapter")
            self.model.save_pretrained(path, state_dict=weights, max_shard_size=max_shard_size)
        elif self.adapter is not None and not merged:
            self.model.save_pretrained(path, selected_adapters=[self.adapter])
        else:
            save_merged(self.model, path, self.adapter, max_shard_size=max_shard_size)
        self.tokenizer.save_pretrained(path)
        if self.value_head is not None:
            torch.save(self.value_head.state_dict(), path / "value_head.pt")

    def state_dict(self) -> dict:
        """What a checkpoint needs: the whole model, or only this policy's adapter."""
        if self.adapter is not None:
            state = {"adapter": {name: p.detach().clone() for name, p in adapter_parameters(self.model, self.adapter)}}
        else:
            state = {"model": self.model.state_dict()}
        if self.value_head is not None:
            state["value_head"] = self.value_head.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        if "adapter" in state:
            own = dict(adapter_parameters(self.model, self.adapter or ""))
            if set(own) != set(state["adapter"]):
                raise ValueError(f"the checkpoint's adapter does not match adapter {self.adapter!r} of this policy")
            with torch.no_grad():
                for name, tensor in state["adapter"].items():
                    own[name].copy_(tensor)
        else:
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

    ``dtype`` None loads float32 weights on every device: a policy loaded to be trained needs
    float32 master weights (a trainer under ``bf16-mixed`` autocasts its passes to bfloat16), and
    bfloat16 AdamW steps at lr 1e-6 mostly round away. Pass ``dtype="bfloat16"`` for a policy that
    only acts (half the memory).

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
    model, tokenizer = load_model(name, device=device, dtype=torch.float32 if dtype is None else dtype, seed=seed)
    generation = None
    if backend == "vllm":
        from rspo_gym.policies.vllm_backend import VLLMBackend

        generation = VLLMBackend(model, tokenizer, seed=seed, **backend_kwargs)
    return LLMPolicy(model, tokenizer, backend=generation, value_head=value_head, seed=seed)
