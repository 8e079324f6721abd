"""Your own Gymnasium env, played and trained by an LLM agent through the text adapter.

    python examples/custom_text_env.py

Any env with a ``Discrete`` action space can be played as text: ``DiscreteTextAdapter`` names its
actions, renders its observations as sentences (a ``TextPreset`` says how) and adds the info keys
the rollout reads (``admissible_actions``, ``task``, ``won``). The trainers take a factory of such
envs. Here: a corridor where the agent must walk right to the door. Needs the ``[llm]`` extra.
"""

import argparse

import gymnasium as gym
from gymnasium import spaces

from rspo_gym import GRPOTrainer
from rspo_gym.rollout import DiscreteTextAdapter
from rspo_gym.rollout.adapters import TextPreset


class Corridor(gym.Env):
    """Positions 0..length-1; start at 0; action 0 steps left, 1 steps right; reward 1 at the door."""

    def __init__(self, length: int = 4, max_steps: int = 8):
        self.length, self.max_steps = length, max_steps
        self.observation_space = spaces.Discrete(length)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position, self.steps = 0, 0
        return self.position, {}

    def step(self, action):
        self.position = min(self.length - 1, max(0, self.position + (1 if action == 1 else -1)))
        self.steps += 1
        at_door = self.position == self.length - 1
        return self.position, float(at_door), at_door, self.steps >= self.max_steps, {}


CORRIDOR_TEXT = TextPreset(
    actions=("go left", "go right"),
    task="Walk along the corridor to the door at its right end.",
    render=lambda env, obs: f"You are {env.unwrapped.length - 1 - int(obs)} steps from the door.",
)


def make_env() -> gym.Env:
    return DiscreteTextAdapter(Corridor(), CORRIDOR_TEXT)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--num-groups", type=int, default=2, help="groups of episodes per iteration")
    parser.add_argument("--group-size", type=int, default=4, help="trajectories per group")
    parser.add_argument("--max-turns", type=int, default=8, help="turn limit per episode")
    parser.add_argument("--eval-tasks", type=int, default=4, help="evaluation episodes")
    parser.add_argument("--output-dir", default="runs/example-corridor")
    args = parser.parse_args(argv)

    env = make_env()
    obs, info = env.reset(seed=0)
    print(info["task"], "|", obs, "| actions:", info["admissible_actions"])

    trainer = GRPOTrainer(
        make_env, model="tiny-untrained", num_groups=args.num_groups, group_size=args.group_size,
        max_turns=args.max_turns, learning_rate=1e-3, eval_every=args.iterations, eval_tasks=args.eval_tasks,
        eval_temperature=0.5, output_dir=args.output_dir,
    )
    history = trainer.learn(args.iterations)
    print(f"rollout success: {history[0]['rollout/success']:.2f} -> {history[-1]['rollout/success']:.2f}; "
          f"held-out success {history[-1]['eval/success']:.2f}")
    trainer.close()
    return history


if __name__ == "__main__":
    main()
