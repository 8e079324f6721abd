"""TRL's GRPOTrainer on ALFWorld or WebShop, through rspo_gym.integrations.trl (CPU, the offline tiny model).

    python examples/trl_grpo.py                              # ALFWorld, windowed prompts, 2 steps
    python examples/trl_grpo.py --env rspo/WebShop-v0 --mode tools

``--mode window``: a ``rollout_func`` plays each task with our verl-agent prompts (the last 2 steps
shown), one turn per episode is trained with the episode's reward. ``--mode tools``: TRL's own
tool loop, the env as an ``environment_factory`` with one tool, ``act(action)``. A group of
``--group-size`` rollouts shares one task (the dataset's ``task_id`` column). Needs the ``[trl]``
extra. Prints the mean episode reward of each step (10 per win).
"""

import argparse
import os

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from rspo_gym.integrations import trl as rspo_trl  # noqa: E402
from rspo_gym.policies.models import load_model  # noqa: E402

SETTINGS = {"rspo/ALFWorld-v0": {"split": "train"}, "rspo/WebShop-v0": {"split": "train"}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--env", default="rspo/ALFWorld-v0", choices=sorted(SETTINGS))
    parser.add_argument("--mode", default="window", choices=["window", "tools"])
    parser.add_argument("--model", default="tiny", help="a model preset or a local path (ChatML for --mode tools)")
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps")
    parser.add_argument("--tasks", type=int, default=8, help="tasks in the dataset")
    parser.add_argument("--group-size", type=int, default=4, help="rollouts per task (GRPO's num_generations)")
    parser.add_argument("--max-turns", type=int, default=4, help="turns per episode")
    parser.add_argument("--max-new-tokens", type=int, default=16, help="reply length per turn")
    parser.add_argument("--max-completion-length", type=int, default=256,
                        help="--mode tools: the whole episode's budget (replies and env answers)")
    parser.add_argument("--output-dir", default="runs/trl_grpo")
    args = parser.parse_args(argv)

    model, tokenizer = load_model(args.model, device="cpu")
    model.train()
    config = GRPOConfig(output_dir=args.output_dir, per_device_train_batch_size=args.group_size, num_generations=args.group_size,
                        max_steps=args.steps, logging_steps=1, report_to="none", use_cpu=True, save_strategy="no",
                        max_completion_length=args.max_new_tokens if args.mode == "window" else args.max_completion_length)
    env_kwargs = SETTINGS[args.env]
    if args.mode == "window":
        dataset = rspo_trl.task_dataset(args.env, args.tasks, env_kwargs=env_kwargs, first_prompt=True)
        rollout = rspo_trl.WindowedRollout(args.env, dataset=dataset, env_kwargs=env_kwargs, max_turns=args.max_turns,
                                           max_new_tokens=args.max_new_tokens)
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config, train_dataset=dataset,
                              reward_funcs=rspo_trl.episode_reward, rollout_func=rollout)
    else:
        dataset = rspo_trl.task_dataset(args.env, args.tasks, env_kwargs=env_kwargs)
        factory = rspo_trl.environment_factory(args.env, env_kwargs=env_kwargs, max_turns=args.max_turns)
        trainer = GRPOTrainer(model=model, processing_class=rspo_trl.tool_chat_template(tokenizer), args=config,
                              train_dataset=dataset, environment_factory=factory)
    trainer.train()
    rewards = [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]
    for step, reward in enumerate(rewards, 1):
        print(f"step {step}: mean episode reward {reward:.2f}")
    return rewards


if __name__ == "__main__":
    main()
