"""PPO with a value head: token-level GAE on each step row, the episode score at its last token.

This is verl-agent's multi-turn PPO (reference §2.2): each env step is its own sequence whose
only reward is the trajectory's training score (minus the invalid penalty) on the last response
token; ``gae_gamma = gae_lambda = 1`` by default, so the advantage of a token is that score minus
the token's value, whitened over the batch. The critic is a value head on the policy's trunk
(``critic="head"``) or a separate LM critic (``critic="separate"``, ``policies/critic.py``).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from rspo_gym.algos.estimates import ppo_estimate
from rspo_gym.training.checkpoints import load_optimizer_state
from rspo_gym.training.config import PPOConfig
from rspo_gym.training.trainer import Trainer
from rspo_gym.errors import UserError

__all__ = ["PPOTrainer", "ppo_estimate"]


class PPOTrainer(Trainer):
    """Proximal Policy Optimization with a critic (Schulman et al., 2017): a value head on the
    policy's trunk (``critic="head"``) or a separate LM critic (``critic="separate"``)."""

    algo = "ppo"
    config_class = PPOConfig

    def __init__(self, env: Any, model: Any = "tiny", config: PPOConfig | None = None, **overrides: Any):
        super().__init__(env, model, config, **overrides)
        if self.config.critic == "separate":
            self.critic = self._make_critic()
            c = self.config
            lr = c.critic_lr if c.critic_lr is not None else 10 * c.learning_rate
            self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=lr, weight_decay=c.weight_decay)

    @property
    def needs_values(self) -> bool:
        """A value head on the policy: only for ``critic="head"``."""
        return self.config.critic == "head"

    def _make_critic(self):
        """The separate critic: ``critic_model`` loaded anew, else the policy's starting model (a
        fresh load by name, or a copy of a given policy's model), in the policy's precision."""
        from rspo_gym.training.defaults import resolve_model
        from rspo_gym.policies.critic import LMCritic
        from rspo_gym.policies.llm import LLMPolicy
        from rspo_gym.policies.models import load_model

        c, policy = self.config, self.policy
        if not isinstance(policy, LLMPolicy):
            raise UserError("critic='separate' is a language-model critic: the action-scoring policy takes critic='head'")
        if self.dist.world_size > 1:
            raise UserError("critic='separate' runs in one process: use critic='head' under a launcher")
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float32
        name = c.critic_model if c.critic_model is not None else self.model_name
        if name is None:
            if policy.adapter is not None:
                raise UserError("a given LoRA policy's critic needs critic_model (the base to copy is not the policy's model)")
            model = copy.deepcopy(policy.model).to(dtype)
        else:
            model, tokenizer = load_model(resolve_model(name, self.env_id), seed=c.seed, dtype=dtype, device=policy.device)
            if tokenizer.get_vocab() != policy.tokenizer.get_vocab():
                raise UserError(f"critic_model {name!r} has another tokenizer than the policy: pick a model of the policy's family")
        return LMCritic(model, micro_batch_size=c.micro_batch_size, seed=c.seed + 2, autocast_dtype=policy.autocast_dtype)

    def old_policy_outputs(self, policy, batch):
        """The base's old log-probs; the old values from the separate critic when there is one."""
        old_logprobs, old_values = super().old_policy_outputs(policy, batch)
        if self.critic is not None:
            old_values = self.critic.values(batch, max_tokens=self.config.max_tokens_per_micro_batch)
        return old_logprobs, old_values

    def estimate(self, view, batch, old_values):
        return ppo_estimate(view, self.config, batch.response_mask, old_values, self.dist.sum_tensor)

    def state(self) -> dict[str, Any]:
        state = super().state()
        if self.critic is not None:
            state["critic"] = self.critic.state_dict()
            state["critic_optimizer"] = self.critic_optimizer.state_dict()
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        if self.critic is not None and "critic" in state:
            self.critic.load_state_dict(state["critic"])
            load_optimizer_state(self.critic_optimizer, state["critic_optimizer"], "critic_optimizer")
