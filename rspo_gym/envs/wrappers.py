"""Gymnasium wrappers shared by the suite's text environments.

- ``ProcessReward``: adds a dense, potential-based process reward beside the outcome reward.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

__all__ = ["ProcessReward"]

MODES = ("info", "process", "sum")


class ProcessReward(gym.Wrapper):
    """Potential-based process reward F_t = scale · (γ Φ(s_{t+1}) − Φ(s_t)) from an env potential.

    Adds ``info["process_reward"]`` (F_t; 0.0 on reset) and ``info["outcome_reward"]`` (the env's
    own reward) on every step. The returned reward stays the outcome reward unless
    ``mode="process"`` (F_t) or ``mode="sum"`` (outcome + F_t). With ``gamma=1`` the process
    rewards of an episode sum to scale · (Φ(end) − Φ(start)); envs that set
    ``zero_terminal_potential = True`` (WebShop) get Φ(end) = 0 at termination and truncation, so
    the process rewards of every episode sum to −scale · Φ(start). ``info["potential"]`` is
    scale · Φ of the state reached, or at a zeroed end the Φ the episode ended on (WebShop: the
    score of the selection bought, or of the one in view at the time limit). It still tells how far
    an episode got where the summed process rewards no longer can (``Trajectory.process_progress``,
    which RSPO's rank swap ranks by). The
    potential comes from ``env.unwrapped.process_potential(name)``; each env documents its
    potentials and how they can disagree with the outcome (for ALFWorld:
    ``rspo_gym.envs.alfworld.process``).

    >>> import gymnasium as gym, rspo_gym
    >>> env = ProcessReward(gym.make("rspo/ALFWorld-v0"), potential="milestones")
    >>> _, info = env.reset(seed=0)
    >>> _, reward, _, _, info = env.step(env.unwrapped.expert_plan()[0])
    >>> sorted(k for k in info if k.endswith("_reward") or k == "potential")
    ['outcome_reward', 'potential', 'process_reward']
    """

    def __init__(
        self,
        env: gym.Env,
        potential: str = "milestones",
        *,
        gamma: float = 1.0,
        scale: float = 1.0,
        mode: str = "info",
    ) -> None:
        super().__init__(env)
        if mode not in MODES:
            raise ValueError(f"Unknown mode {mode!r}; expected one of {MODES}")
        if not hasattr(env.unwrapped, "process_potential"):
            raise TypeError(
                f"{type(env.unwrapped).__name__} has no process_potential(name); "
                "ProcessReward needs an env that defines its progress potentials"
            )
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.potential = potential
        self.gamma = float(gamma)
        self.scale = float(scale)
        self.mode = mode
        self._phi = 0.0
        env.unwrapped.process_potential(potential)  # fail now on an unknown potential name

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self._phi = self.env.unwrapped.process_potential(self.potential)
        info["process_reward"] = 0.0
        info["potential"] = self.scale * self._phi
        info["outcome_reward"] = 0.0
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        reached = self.env.unwrapped.process_potential(self.potential)
        zeroed = (terminated or truncated) and getattr(self.env.unwrapped, "zero_terminal_potential", False)
        phi = 0.0 if zeroed else reached
        process = self.scale * (self.gamma * phi - self._phi)
        # what the episode ended on: at a purchase-like termination the env's own Φ is already 0, so
        # the state before it (the selection bought); at a time limit the state in view
        info["potential"] = self.scale * (self._phi if zeroed and terminated else reached)
        self._phi = phi
        info["process_reward"] = process
        info["outcome_reward"] = float(reward)
        if self.mode == "process":
            reward = process
        elif self.mode == "sum":
            reward = float(reward) + process
        return obs, reward, terminated, truncated, info
