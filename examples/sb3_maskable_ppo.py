"""A classic RL baseline: sb3-contrib's MaskablePPO on WebShop through the SB3 adapters.

    python examples/sb3_maskable_ppo.py                         # WebShop, 60k steps, ~2 CPU minutes
    python examples/sb3_maskable_ppo.py --timesteps 5000 --eval-goals 20

``make_sb3_env`` turns the text env into hashed word features (a ``Box``) and the k-th admissible
command into action ``k``, masked to the commands that exist. Training shows SB3's progress bar
(``--no-progress``: none). Needs the ``[sb3]`` extra.
"""

import argparse

import numpy as np
from sb3_contrib import MaskablePPO

import rspo_gym  # noqa: F401 - registers the environments
from rspo_gym.envs.sb3 import make_sb3_env


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--timesteps", type=int, default=60_000, help="training env steps")
    parser.add_argument("--eval-goals", type=int, default=100, help="held-out test goals (task ids 0..n-1)")
    parser.add_argument("--num-products", type=int, default=1000, help="catalog size")
    parser.add_argument("--dim", type=int, default=4096, help="hashed feature size")
    parser.add_argument("--n-steps", type=int, default=2048, help="env steps per PPO rollout")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar while training")
    args = parser.parse_args(argv)

    env = make_sb3_env("rspo/WebShop-v0", dim=args.dim, num_products=args.num_products, split="train")
    model = MaskablePPO("MlpPolicy", env, n_steps=args.n_steps, batch_size=min(64, args.n_steps), seed=args.seed, verbose=0)
    model.learn(total_timesteps=args.timesteps, progress_bar=not args.no_progress)  # SB3's bar: tqdm and rich, in the [sb3] extra

    test = make_sb3_env("rspo/WebShop-v0", dim=args.dim, num_products=args.num_products, split="test")
    wins, scores = [], []
    for task_id in range(args.eval_goals):
        obs, info = test.reset(options={"task_id": task_id})
        done = False
        while not done:
            action, _ = model.predict(obs, action_masks=test.action_masks(), deterministic=True)
            obs, reward, terminated, truncated, info = test.step(int(action))
            done = terminated or truncated
        wins.append(info["won"])
        scores.append(reward)
    print(f"MaskablePPO on {args.eval_goals} held-out goals: success {np.mean(wins):.1%}, mean final reward {np.mean(scores):.3f}")
    return float(np.mean(wins))


if __name__ == "__main__":
    main()
