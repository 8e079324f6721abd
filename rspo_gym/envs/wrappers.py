"""Gymnasium wrappers shared by the suite's text environments.

- ``ProcessReward``: adds a dense process reward (a potential's shaping, or per-event payments)
  beside the outcome reward.
- ``CheckTaskId``: the outermost wrapper of every env ``gym.make`` gives: a reset's task id is
  refused before any wrapper below sees the reset.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from rspo_gym.envs.core import check_task_id
from rspo_gym.envs.process_rewards import choice_problem, default_process_reward, reward_specs

__all__ = ["ProcessReward", "CheckTaskId"]

MODES = ("info", "process", "sum")


class ProcessReward(gym.Wrapper):
    """The env's process reward ``name`` beside its outcome reward (``rspo_gym.envs.process_rewards``).

    Two kinds (``process_rewards(env_id)`` lists an env's names, each description starting with
    its kind):

    - ``potential``: F_t = scale · (γ Φ(s_{t+1}) − Φ(s_t)) from ``env.unwrapped.process_potential(name)``.
      With ``gamma=1`` the process rewards of an episode sum to scale · (Φ(end) − Φ(start)); envs
      that set ``zero_terminal_potential = True`` (WebShop) get Φ(end) = 0 at termination and
      truncation, so they sum to −scale · Φ(start). It keeps the order of returns: the aligned
      control.
    - ``per-event``: F_t = scale · Σ weight(e) · amount(e) over the events of the step
      (``env.unwrapped.step_events()``); ``weights`` overrides the defaults of the reward's events,
      and ``once=True`` pays each (event, key) at most once per episode. ``gamma`` is not used.
      Repeatable events can be farmed: each env documents how.

    Adds ``info["process_reward"]`` (F_t; 0.0 on reset), ``info["outcome_reward"]`` (the env's own
    reward) and ``info["process_events"]`` (the names of the events paid this step; empty for a
    potential) on every step. The returned reward stays the outcome reward unless
    ``mode="process"`` (F_t) or ``mode="sum"`` (outcome + F_t). ``info["potential"]`` tells how far
    an episode got where the summed process rewards no longer can (``Trajectory.process_progress``,
    which RSPO's rank swap ranks by): for a potential, scale · Φ of the state reached, or at a
    zeroed end the Φ the episode ended on (WebShop: the score of the selection bought, or of the
    one in view at the time limit); for per-event rewards, the process return so far.

    >>> import gymnasium as gym, rspo_gym
    >>> env = ProcessReward(gym.make("rspo/ALFWorld-v0"), "milestones")
    >>> _, info = env.reset(seed=0)
    >>> _, reward, _, _, info = env.step(env.unwrapped.expert_plan()[0])
    >>> sorted(k for k in info if k.startswith("process") or k.endswith("_reward") or k == "potential")
    ['outcome_reward', 'potential', 'process_events', 'process_reward']
    >>> env = ProcessReward(gym.make("rspo/ALFWorld-v0", split="valid_seen"), "valid", weights={"valid": 0.25})
    >>> _ = env.reset(options={"task_id": 0})
    >>> [env.step("look")[-1]["process_reward"] for _ in range(2)]
    [0.25, 0.25]
    """

    def __init__(
        self,
        env: gym.Env,
        name: str | None = None,
        *,
        gamma: float = 1.0,
        scale: float = 1.0,
        mode: str = "info",
        weights: Mapping[str, float] | None = None,
        once: bool = False,
    ) -> None:
        super().__init__(env)
        if mode not in MODES:
            raise ValueError(f"Unknown mode {mode!r}; expected one of {MODES}")
        specs = reward_specs(env)
        if not specs:
            raise TypeError(
                f"{type(env.unwrapped).__name__} offers no process rewards: ProcessReward needs an env with "
                "PROCESS_REWARDS, process_potential(name) and step_events() (see rspo_gym.envs.process_rewards)"
            )
        name = default_process_reward(env) if name is None else name
        problem = choice_problem(specs, name, weights)
        if problem:
            raise ValueError(f"{type(env.unwrapped).__name__}: {problem}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        spec = specs[name]
        self.name = name
        self.kind = spec.kind
        self.weights = {**spec.weights, **{event: float(value) for event, value in (weights or {}).items()}}
        self._wanted = frozenset(event for event, weight in self.weights.items() if weight)
        self.once = bool(once)
        self.gamma = float(gamma)
        self.scale = float(scale)
        self.mode = mode
        self._phi = 0.0
        self._paid: set = set()
        self._base = env.unwrapped  # read at every step: ``unwrapped`` walks the wrapper chain each time

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self._paid = set()
        self._phi = self._base.process_potential(self.name) if self.kind == "potential" else 0.0
        info["process_reward"] = 0.0
        info["potential"] = self.scale * self._phi
        info["outcome_reward"] = 0.0
        info["process_events"] = ()
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.kind == "potential":
            process = self._shaping(info, terminated, truncated)
            info["process_events"] = ()
        else:
            process, paid = self._event_payment()
            self._phi += process
            info["potential"] = self._phi
            info["process_events"] = paid
        info["process_reward"] = process
        info["outcome_reward"] = float(reward)
        if self.mode == "process":
            reward = process
        elif self.mode == "sum":
            reward = float(reward) + process
        return obs, reward, terminated, truncated, info

    def _shaping(self, info: dict, terminated: bool, truncated: bool) -> float:
        reached = self._base.process_potential(self.name)
        zeroed = (terminated or truncated) and getattr(self._base, "zero_terminal_potential", False)
        phi = 0.0 if zeroed else reached
        process = self.scale * (self.gamma * phi - self._phi)
        # what the episode ended on: at a purchase-like termination the env's own Φ is already 0, so
        # the state before it (the selection bought); at a time limit the state in view
        info["potential"] = self.scale * (self._phi if zeroed and terminated else reached)
        self._phi = phi
        return process

    def _event_payment(self) -> tuple[float, tuple[str, ...]]:
        total, paid = 0.0, []
        for event in self._base.step_events(self._wanted):
            weight = self.weights.get(event.name, 0.0)
            if not weight or event.amount == 0:
                continue
            if self.once:
                if (event.name, event.key) in self._paid:
                    continue
                self._paid.add((event.name, event.key))
            total += weight * event.amount
            paid.append(event.name)
        return self.scale * total, tuple(paid)



class CheckTaskId(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Refuses a reset's ``options["task_id"]`` (not an integer, or outside the env's
    ``num_tasks``) before the reset reaches the wrappers below; registered as the envs'
    ``additional_wrappers``, so ``gym.make`` puts it outermost.

    Why: Gymnasium's ``PassiveEnvChecker`` (1.x), which ``gym.make`` puts right around the env,
    marks its first reset as checked before calling it, and keeps that reset's ``(obs, info)`` for
    its first step to compare with. When the first reset raises, nothing is kept, and every later
    step is a ``TypeError`` from the checker, even after a good reset. Refused out here, a bad task
    id never reaches the checker (nor ``TimeLimit``, whose count stays the running episode's). A
    reset that fails inside the env (an unreadable game file) still reaches it: that part is
    Gymnasium's to fix (``docs/reliability.md``)."""

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        if options and "task_id" in options:
            check_task_id(options["task_id"], getattr(self.env.unwrapped, "num_tasks", None))
        return self.env.reset(seed=seed, options=options)
