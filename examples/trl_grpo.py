"""TRL's GRPOTrainer on ALFWorld or WebShop, through rspo_gym.integrations.trl (CPU, offline).

    python examples/trl_grpo.py                              # ALFWorld, windowed prompts, 2 steps
    python examples/trl_grpo.py --env rspo/WebShop-v1 --mode tools --model PATH

``--mode window``: a ``rollout_func`` plays each task with our verl-agent prompts, one turn per
episode is trained with the episode's reward. The default model, ``tiny``, is the env's clone
(``tiny-alfworld`` / ``tiny-webshop``, cloned from the env's expert in these prompts), so the
episodes are played and some are won from the first step. ``--mode tools``: TRL's own tool loop,
the env as an ``environment_factory`` with one tool, ``act(action)``. That loop needs a model that
writes tool calls (Qwen2.5-Instruct-style ``<tool_call>`` JSON, ``--model PATH``): the offline
tiny models write actions, not tool calls, so with them no env step is played (the run says so).
A group of ``--group-size`` rollouts shares one task (the dataset's ``task_id`` column). Needs the
``[trl]`` extra. Prints, per step, the episodes played and won, their turns and mean reward (10 per
win).
"""

import argparse
import os

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from rspo_gym.integrations import trl as rspo_trl  # noqa: E402
from rspo_gym.policies.models import load_model  # noqa: E402
from rspo_gym.quickstart import alfworld_task_ids  # noqa: E402
from rspo_gym.training.defaults import default_history_length, resolve_model  # noqa: E402

SETTINGS = {"rspo/ALFWorld-v0": {"split": "train"}, "rspo/WebShop-v1": {"split": "train"}, "rspo/WebShop-v0": {"split": "train"}}
#: the episode budget of TRL's tool loop per turn: a tool call and the env's answer, ~280 (ALFWorld)
#: to ~320 (WebShop) tokens of the tiny tokenizer at the median, up to ~620 (docs/integrations.md)
TOKENS_PER_TURN = 350


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--env", default="rspo/ALFWorld-v0", choices=sorted(SETTINGS))
    parser.add_argument("--mode", default="window", choices=["window", "tools"])
    parser.add_argument("--model", default="tiny", help="a model preset or a local path; tiny: the env's clone (tools: a tool-calling ChatML model)")
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps")
    parser.add_argument("--tasks", type=int, default=8, help="tasks in the dataset")
    parser.add_argument("--group-size", type=int, default=4, help="rollouts per task (GRPO's num_generations)")
    parser.add_argument("--max-turns", type=int, default=15, help="turns per episode")
    parser.add_argument("--max-new-tokens", type=int, default=16, help="--mode window: reply length per turn")
    parser.add_argument("--max-completion-length", type=int, default=None,
                        help=f"--mode tools: the whole episode's budget (replies and env answers); default {TOKENS_PER_TURN} per turn")
    parser.add_argument("--output-dir", default="runs/trl_grpo")
    args = parser.parse_args(argv)

    model_name = resolve_model(args.model, args.env)
    model, tokenizer = load_model(model_name, device="cpu")
    model.train()
    budget = args.max_completion_length or TOKENS_PER_TURN * args.max_turns
    config = GRPOConfig(output_dir=args.output_dir, per_device_train_batch_size=args.group_size, num_generations=args.group_size,
                        max_steps=args.steps, logging_steps=1, report_to="none", use_cpu=True, save_strategy="no",
                        max_completion_length=args.max_new_tokens if args.mode == "window" else budget)
    env_kwargs = SETTINGS[args.env]
    played: list[list[dict]] = []  # each step's episode results, with the actions taken
    # ALFWorld: the task type tiny-alfworld was cloned on, so that some episodes are won from the start
    ids = alfworld_task_ids("train", "pick_and_place_simple", args.tasks) if "ALFWorld" in args.env else None
    if args.mode == "window":
        dataset = rspo_trl.task_dataset(args.env, args.tasks, ids=ids, env_kwargs=env_kwargs, first_prompt=True)
        windowed = rspo_trl.WindowedRollout(args.env, dataset=dataset, env_kwargs=env_kwargs, max_turns=args.max_turns,
                                            max_new_tokens=args.max_new_tokens, history_length=default_history_length(model_name))

        def rollout(prompts, trainer):
            out = windowed(prompts, trainer)
            played.append([{**e.result(), "task": e.task, "actions": [a for _, a in e.history]} for e in windowed.episodes[: len(prompts)]])
            return out

        trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config, train_dataset=dataset,
                              reward_funcs=rspo_trl.episode_reward, rollout_func=rollout)
    else:
        dataset = rspo_trl.task_dataset(args.env, args.tasks, ids=ids, env_kwargs=env_kwargs)
        factory = rspo_trl.environment_factory(args.env, env_kwargs=env_kwargs, max_turns=args.max_turns)
        trainer = GRPOTrainer(model=model, processing_class=rspo_trl.tool_chat_template(tokenizer), args=config,
                              train_dataset=dataset, environment_factory=factory)
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    rewards = [entry["reward"] for entry in logs]
    for step, entry in enumerate(logs, 1):
        line = f"step {step}: mean episode reward {entry['reward']:.2f}"
        if step <= len(played):  # one rollout per step (TRL's steps_per_generation is 1 here)
            results = played[step - 1]
            turns = sum(r["turns"] for r in results) / len(results)
            line += f", {len(results)} episodes played, {sum(r['won'] for r in results)} won, {turns:.1f} turns on average"
        if "tools/call_frequency" in entry:
            line += f", {entry['tools/call_frequency']:.1f} tool calls per rollout"
        print(line)
    if played:
        episode = played[-1][0]
        print(f"an episode of the last step ({'won' if episode['won'] else 'not won'}): {episode['task']}\n  "
              + " -> ".join(episode["actions"]))
    if args.mode == "tools" and not any(entry.get("tools/call_frequency", 0) for entry in logs):
        print(f"{model_name} called no tool, so no env step was played: --mode tools needs a model that writes "
              f"<tool_call> JSON (--model PATH to a Qwen2.5-Instruct-style model)")
    return rewards


if __name__ == "__main__":
    main()
