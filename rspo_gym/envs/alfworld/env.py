"""``rspo/ALFWorld-v0``: ALFWorld 0.4's text game as a Gymnasium environment.

Observations and actions are text (``gymnasium.spaces.Text``). ``obs`` is the raw game text: the
reset observation has ALFWorld's ``-= Welcome to TextWorld, ALFRED! =-`` banner, the room and the
task, as the original prints it (verl-agent style prompts drop the banner themselves).

``info`` on reset and step: ``admissible_actions`` (sorted, ``help`` included as in ALFWorld 0.4),
``task``, ``task_id``, ``task_type``, ``won``, ``anchor`` (the raw observation, as GiGPO's
anchor states); on step also ``valid``. Reward 1.0 on the step that wins; ``terminated`` on a
win; the registered env truncates at 50 steps (ALFWorld's and verl-agent's limit).

Games come from real ``game.tw-pddl`` files (``games=``) or from the generator (``split=``, the
default ``train``, needs no file). ``reset(seed=s)`` picks a task from the seed, so group members
reset with the same seed share a task; ``reset(options={"task_id": k})`` picks task k (real
games: the k-th file in sorted path order). ``backend="textworld"`` plays real games through the
original TextWorld engine instead, behind the same API.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from rspo_gym.envs.alfworld import process
from rspo_gym.envs.alfworld.engine import Game
from rspo_gym.envs.alfworld.tasks import GameFiles, GeneratedTasks
from rspo_gym.envs.alfworld.world import World
from rspo_gym.envs.core import text_space

__all__ = ["AlfworldEnv"]

MAX_TEXT_LENGTH = 8192
BACKENDS = ("python", "textworld")


class AlfworldEnv(gym.Env[str, str]):
    """ALFWorld household tasks in text.

    >>> import gymnasium as gym, rspo_gym
    >>> env = gym.make("rspo/ALFWorld-v0", split="valid_seen")
    >>> obs, info = env.reset(options={"task_id": 0})
    >>> obs.startswith("-= Welcome to TextWorld, ALFRED! =-")
    True
    >>> obs, reward, terminated, truncated, info = env.step("jump")
    >>> obs, reward, info["valid"]
    ('Nothing happens.', 0.0, False)
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}
    #: Process rewards by name (``rspo_gym.envs.process_rewards``; documented in ``alfworld/process.py``).
    PROCESS_REWARDS = process.PROCESS_REWARDS

    def __init__(
        self,
        games: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
        split: str = "train",
        backend: str = "python",
        render_mode: str | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"Unknown backend {backend!r}; expected one of {BACKENDS}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"Unknown render_mode {render_mode!r}; expected one of {self.metadata['render_modes']}")
        if backend == "textworld" and games is None:
            raise ValueError("backend='textworld' plays real game files: pass games=PATH")
        self.tasks = GameFiles(games) if games is not None else GeneratedTasks(split)
        self.backend = backend
        self.render_mode = render_mode
        self.observation_space = text_space(MAX_TEXT_LENGTH)
        self.action_space = text_space(MAX_TEXT_LENGTH)
        self.game: Game | None = None
        self._expert = None
        self.task_id: int = 0
        self._obs = ""

    @property
    def num_tasks(self) -> int | None:
        """Tasks of this env (ids ``0 .. num_tasks - 1``): the split's or the game folder's count."""
        return self.tasks.size

    # ----------------------------------------------------------------------------- gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        options = options or {}
        if "task_id" in options:
            task_id = options["task_id"]
        else:
            high = self.tasks.size if self.tasks.size is not None else 2**31 - 1
            task_id = int(self.np_random.integers(high))
        world = self.tasks.world(task_id)
        self.task_id = int(task_id)
        self.game = self._new_game(world, self.task_id)
        self._obs = self.game.reset()
        return self._obs, self._info(self._obs)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self.game is None:
            raise gym.error.ResetNeeded("Call reset() before step().")
        was_won = self.game.won
        feedback, valid = self.game.step(action)  # any input: invalid ones are no-ops
        won = self.game.won
        self._obs = feedback
        info = self._info(feedback)
        info["valid"] = valid
        reward = 1.0 if won and not was_won else 0.0
        if self.render_mode == "human":
            self.render()
        return feedback, reward, won, False, info

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._obs
        if self.render_mode == "human":
            print(self._obs)
        return None

    def close(self) -> None:
        close_game = getattr(self.game, "close", None)  # the TextWorld backend holds an engine
        if close_game is not None:
            close_game()
        self.game = None

    def sample_admissible(self) -> str:
        """A uniformly random admissible command, drawn from the env's ``np_random`` (so
        ``reset(seed=s)`` makes the draws reproducible). ``action_space.sample()`` draws random
        strings over the charset, which are never commands; this is the random policy."""
        if self.game is None:
            raise gym.error.ResetNeeded("Call reset() before sample_admissible().")
        commands = self.game.admissible_commands()
        return commands[int(self.np_random.integers(len(commands)))]

    # ------------------------------------------------------------------------------ experts
    @property
    def world(self) -> World:
        """The current game's world (static scene, task, initial state)."""
        if self.game is None:
            raise gym.error.ResetNeeded("Call reset() before reading the world.")
        return self.game.world

    def expert_plan(self) -> list[str]:
        """The optimal full-knowledge plan from the current state (empty when already won)."""
        from rspo_gym.envs.alfworld.planner import optimal_plan

        plan = optimal_plan(self.world, self.game.state)
        if plan is None:
            raise RuntimeError(f"Task {self.task_id} cannot be solved from the current state")
        return plan

    def expert_action(self) -> str:
        """The partially-observable expert's next command (it remembers what it saw this episode)."""
        if self._expert is None:
            from rspo_gym.envs.alfworld.expert import ExploringExpert

            self._expert = ExploringExpert(self.world, seed=self.task_id)
        return self._expert.act(self.game)

    def process_potential(self, name: str = "milestones") -> float:
        """A progress potential of the current state (``"milestones"`` or ``"distance"``)."""
        if name not in process.POTENTIALS:
            raise ValueError(f"Unknown ALFWorld potential {name!r}; expected one of {sorted(process.POTENTIALS)}")
        if self.game is None:
            return 0.0
        derived = getattr(self.game, "derived", None)  # the TextWorld backend keeps none
        if derived is None:
            return process.POTENTIALS[name](self.world, self.game.state)
        key = ("potential", name)
        if key not in derived:
            derived[key] = process.POTENTIALS[name](self.world, self.game.state)
        return derived[key]

    def step_events(self, wanted: frozenset[str] | None = None) -> list:
        """The per-event process-reward events of the last step (``alfworld/process.py``); with
        ``wanted``, events outside it may be left out (the goal-condition rate is not computed)."""
        if self.game is None:
            return []
        goal_rate = wanted is None or "goal_rate" in wanted
        return process.step_events(self.world, self.game.state, self.game.last_action, goal_rate=goal_rate)

    # ----------------------------------------------------------------------------- helpers
    def _new_game(self, world: World, task_id: int) -> Game:
        self._expert = None
        if self.game is not None and self.game.world is world:
            return self.game  # same task again: reuse (a TextWorld game would reload for ~1 s)
        if self.backend == "textworld":
            from rspo_gym.envs.alfworld.textworld_backend import TextWorldGame

            return TextWorldGame(world, self.tasks.paths[task_id])
        return Game(world)

    def _info(self, obs: str) -> dict[str, Any]:
        task = self.game.world.task
        return {
            "admissible_actions": self.game.admissible_commands(),
            "task": task.text,
            "task_id": self.task_id,
            "task_type": task.task_type,
            "won": self.game.won,
            "anchor": obs,
        }
