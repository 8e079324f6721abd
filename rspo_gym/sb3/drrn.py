"""A DRRN-style policy for sb3-contrib's ``MaskablePPO``: one shared scorer over (state, command) pairs.

``make_sb3_env(..., layout="pairs")`` (``rspo_gym.sb3.envs.ActionSlotFeaturizer``) lays each
observation out as ``[state (state_dim) | slot 0 | ... | slot K-1]``, slot ``k`` describing the
k-th admissible command. :class:`DRRNPolicy` encodes the state and every slot with two MLPs and
scores each (state, slot) pair with one shared scorer, as the Deep Reinforcement Relevance Network
does (He et al. 2016, "Deep Reinforcement Learning with a Natural Language Action Space"); the K
scores are the logits that ``MaskablePPO`` masks to the admissible commands. The value is read from
the state encoding alone.

Why: the command behind index k changes every step (ALFWorld lists 15-50 commands, sorted), so an
MLP from one flat vector to K logits must learn each command anew at every index where it can
appear, and rarely sees the same (index, meaning) twice. Shared weights make the policy
permutation-equivariant: moving a command to another slot moves its logit with it, so what is
learnt about "take the task's object" applies wherever that command is listed.

Usage::

    from sb3_contrib import MaskablePPO
    from rspo_gym.sb3.drrn import DRRNPolicy
    from rspo_gym.sb3.envs import make_sb3_env

    env = make_sb3_env("rspo/ALFWorld-v0", layout="pairs", dim=4096)
    model = MaskablePPO(DRRNPolicy, env, policy_kwargs={"state_dim": 4096, "net_arch": [128, 128]})

Needs torch and sb3-contrib: install the ``[sb3]`` extra, ``pip install 'rspo-gym[sb3]'``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

try:
    import torch as th
    from gymnasium import spaces
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
    from stable_baselines3.common.type_aliases import Schedule
    from torch import nn
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "rspo_gym.sb3.drrn needs torch and sb3-contrib: install the [sb3] extra, pip install 'rspo-gym[sb3]'"
    ) from error

__all__ = ["DRRNExtractor", "DRRNPolicy"]


def _mlp(in_dim: int, sizes: list[int], activation_fn: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for size in sizes:
        layers += [nn.Linear(in_dim, size), activation_fn()]
        in_dim = size
    return nn.Sequential(*layers)


class DRRNExtractor(nn.Module):
    """Stands in for SB3's ``MlpExtractor``: the actor latent is already one logit per slot.

    ``forward_actor`` returns ``(batch, num_slots)`` scores, ``scorer([s, a, s * a])`` for the state
    encoding ``s`` and each slot encoding ``a``; ``forward_critic`` returns ``s``. Slots past the
    last non-empty one of the batch are all zeros, so they are scored once per row as an empty slot
    and broadcast: the logits equal scoring all ``num_slots``, at the cost of the commands listed.
    """

    def __init__(self, state_dim: int, slot_dim: int, num_slots: int, net_arch: list[int], activation_fn: type[nn.Module]) -> None:
        super().__init__()
        self.state_dim, self.slot_dim, self.num_slots = state_dim, slot_dim, num_slots
        hidden = net_arch[-1]
        self.state_encoder = _mlp(state_dim, net_arch, activation_fn)
        self.action_encoder = _mlp(slot_dim, net_arch, activation_fn)
        self.scorer = nn.Sequential(nn.Linear(3 * hidden, hidden), activation_fn(), nn.Linear(hidden, 1))
        self.latent_dim_pi = num_slots
        self.latent_dim_vf = hidden

    def _score(self, state: th.Tensor, slots: th.Tensor) -> th.Tensor:
        actions = self.action_encoder(slots)
        states = state.unsqueeze(1).expand_as(actions)
        return self.scorer(th.cat([states, actions, states * actions], dim=-1)).squeeze(-1)

    def _logits(self, features: th.Tensor, state: th.Tensor) -> th.Tensor:
        slots = features[:, self.state_dim :].reshape(len(features), self.num_slots, self.slot_dim)
        listed = slots.any(dim=2).any(dim=0).nonzero()
        used = int(listed[-1]) + 1 if len(listed) else 0
        logits = self._score(state, slots[:, :used])
        if used < self.num_slots:
            empty = self._score(state, slots.new_zeros(len(features), 1, self.slot_dim))
            logits = th.cat([logits, empty.expand(-1, self.num_slots - used)], dim=1)
        return logits

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        state = self.state_encoder(features[:, : self.state_dim])
        return self._logits(features, state), state

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        return self._logits(features, self.state_encoder(features[:, : self.state_dim]))

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self.state_encoder(features[:, : self.state_dim])


class DRRNPolicy(MaskableActorCriticPolicy):
    """``MaskableActorCriticPolicy`` whose logits come from :class:`DRRNExtractor`.

    ``state_dim`` is the length of the state block (``make_sb3_env``'s ``dim``); the slot length is
    ``(obs length - state_dim) / K`` for ``Discrete(K)`` actions. ``net_arch`` (a list of layer
    sizes, default ``[128, 128]``) sizes both encoders; the scorer has one hidden layer of the last
    size. ``action_net`` is the identity, since the extractor's actor latent is the logits; with
    ``ortho_init`` the scorer's output layer starts at gain 0.01 (a near-uniform first policy) and
    the value head at gain 1, as SB3 does for its action and value heads. Other keyword arguments
    go to ``MaskableActorCriticPolicy`` (the default activation here is ReLU).
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        net_arch: list[int] | None = None,
        activation_fn: type[nn.Module] = nn.ReLU,
        *,
        state_dim: int,
        **kwargs: Any,
    ) -> None:
        net_arch = [128, 128] if net_arch is None else list(net_arch)
        if not net_arch or not all(isinstance(n, int) and n > 0 for n in net_arch):
            raise ValueError(f"net_arch must be a non-empty list of layer sizes, got {net_arch!r}")
        if not isinstance(action_space, spaces.Discrete):
            raise TypeError(f"DRRNPolicy needs Discrete actions, got {action_space}")
        if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
            raise TypeError(f"DRRNPolicy needs a flat Box observation, got {observation_space}")
        slots_length = observation_space.shape[0] - state_dim
        if not 0 < state_dim < observation_space.shape[0] or slots_length % int(action_space.n):
            raise ValueError(
                f"observation length {observation_space.shape[0]} is not state_dim={state_dim} plus "
                f"{action_space.n} equal slots; build the env with make_sb3_env(layout='pairs', dim=state_dim)"
            )
        self.state_dim = int(state_dim)
        self.slot_dim = slots_length // int(action_space.n)
        super().__init__(observation_space, action_space, lr_schedule, net_arch=net_arch, activation_fn=activation_fn, **kwargs)

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = DRRNExtractor(self.state_dim, self.slot_dim, int(self.action_space.n), self.net_arch, self.activation_fn)

    def _build(self, lr_schedule: Schedule) -> None:
        self._build_mlp_extractor()
        self.action_net = nn.Identity()
        self.value_net = nn.Linear(self.mlp_extractor.latent_dim_vf, 1)
        if self.ortho_init:
            self.mlp_extractor.apply(partial(self.init_weights, gain=np.sqrt(2)))
            self.mlp_extractor.scorer[-1].apply(partial(self.init_weights, gain=0.01))
            self.value_net.apply(partial(self.init_weights, gain=1.0))
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "state_dim": self.state_dim}
