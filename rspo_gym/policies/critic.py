"""A separate LM critic for PPO (``PPOConfig.critic="separate"``), as verl's and verl-agent's PPO have.

``LMCritic`` is a decoder trunk of its own (any causal LM sharing the policy's tokenizer: a
smaller one fits) with a ``ValueHead`` on its last hidden state. Unlike the default value head on
the policy's detached trunk, the value loss trains the whole critic, so its features are its own;
its parameters share no storage with the policy's, so its updates cannot touch them. Values are
read at position ``P - 1 + t`` for response token ``t``, the same alignment as ``LLMPolicy``, and
rows nested in one another share one pass as the policy's do (``packing.py``), so that the
trainer's micro-batches, which keep such rows together, cost the critic what they cost the policy.
"""

from __future__ import annotations

import torch
from torch import nn

from rspo_gym.policies.hf_backend import position_ids
from rspo_gym.policies.llm import ValueHead
from rspo_gym.policies.packing import nested_chains, packed_states, packing
from rspo_gym.rollout.trajectory import micro_batches

__all__ = ["LMCritic"]


class LMCritic:
    """A value model: ``model``'s decoder (its LM head is dropped) plus a fresh ``ValueHead``.

    Args:
        model: a transformers causal LM, trained whole; float32 master weights are the caller's.
        micro_batch_size: rows per no-gradient pass in ``values`` (a chain of nested rows counts as one).
        seed: seed of the value head's initialisation.
        autocast_dtype: as ``LLMPolicy``'s: bfloat16 compute under ``bf16-mixed``.
        pack_rows: as ``LLMPolicy``'s: one pass per chain of nested rows.
    """

    def __init__(self, model, *, micro_batch_size: int = 16, seed: int = 0, autocast_dtype: torch.dtype | None = None,
                 pack_rows: bool = True):
        self.trunk: nn.Module = model.get_decoder()
        self.micro_batch_size = micro_batch_size
        self.autocast_dtype = autocast_dtype
        self.pack_rows = pack_rows
        device = next(self.trunk.parameters()).device
        torch.manual_seed(seed)
        self.value_head = ValueHead(model.config.hidden_size).to(device)
        for parameter in self.trunk.parameters():
            parameter.requires_grad_(True)

    @property
    def device(self) -> torch.device:
        return next(self.trunk.parameters()).device

    def parameters(self) -> list[nn.Parameter]:
        return list(self.trunk.parameters()) + list(self.value_head.parameters())

    def train(self, mode: bool = True) -> "LMCritic":
        self.trunk.train(mode)
        self.value_head.train(mode)
        return self

    def chains(self, batch) -> list[int] | None:
        """As ``LLMPolicy.chains``: each row's chain of nested rows, None without ``pack_rows``."""
        return nested_chains(batch) if self.pack_rows else None

    def forward(self, batch) -> torch.Tensor:
        """``(rows, R)`` float32 values of a batch's response positions, with gradients."""
        P, R = batch.prompt_length, batch.response_mask.shape[1]
        plan = packing(batch) if self.pack_rows else None
        run = batch.index(plan.hosts).trimmed() if plan is not None and plan.packs else batch
        with torch.autocast(self.device.type, dtype=self.autocast_dtype or torch.bfloat16, enabled=self.autocast_dtype is not None):
            hidden = self.trunk(
                input_ids=run.input_ids, attention_mask=run.attention_mask,
                position_ids=position_ids(run.attention_mask), use_cache=False,
            ).last_hidden_state
            if run is batch:
                hidden = hidden[:, P - 1:P - 1 + R, :]
            else:  # hosts are left-padded: a host's real tokens start past its padding
                padding = run.prompt_length - run.attention_mask[:, :run.prompt_length].sum(1)
                hidden = packed_states(hidden, plan, R, padding)
            return self.value_head(hidden.to(self.value_head.linear.weight.dtype)).float()

    @torch.no_grad()
    def values(self, batch, *, max_tokens: int | None = None) -> torch.Tensor:
        """``forward`` without gradients, micro-batched as ``LLMPolicy.logprobs`` (the old values)."""
        was_training = self.trunk.training
        self.train(False)
        result = torch.zeros(len(batch), batch.response_mask.shape[1], device=batch.input_ids.device)
        try:
            for group in micro_batches(batch.lengths(), self.micro_batch_size, max_tokens, self.chains(batch)):
                rows = torch.tensor(group, device=batch.input_ids.device)
                values = self.forward(batch.index(rows).trimmed())
                result[rows, :values.shape[1]] = values
        finally:
            self.train(was_training)
        return result

    def state_dict(self) -> dict:
        return {"trunk": self.trunk.state_dict(), "value_head": self.value_head.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.trunk.load_state_dict(state["trunk"])
        self.value_head.load_state_dict(state["value_head"])
