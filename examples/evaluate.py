"""Evaluate a model on held-out tasks: a trained run folder (an LLM or drrn), a preset or a Hugging Face model.

    python examples/evaluate.py --model runs/example-rspo-alfworld --tasks 30
    python examples/evaluate.py --model tiny --env rspo/WebShop-v1 --tasks 20

A run folder is evaluated the way it was trained (its env, turn limit, history and evaluation
temperature, read from its ``config.json``); ``rspo-gym eval`` does the same from the shell.
A progress bar on stderr counts the episodes (a line every 10 s when stderr is no terminal).
Needs the ``[llm]`` extra.
"""

import argparse

from rspo_gym import GRPOTrainer
from rspo_gym.training.config import load_config
from rspo_gym.training.runs import find_run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model", default="tiny", help="a run folder (or its policy/), a preset or an HF id")
    parser.add_argument("--env", default=None, help="env id (default: the run's, else rspo/ALFWorld-v0)")
    parser.add_argument("--tasks", type=int, default=16, help="held-out tasks, the split's first")
    parser.add_argument("--temperature", type=float, default=None, help="0 is greedy (default: the run's, else 0)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)

    model, env, settings = args.model, args.env, {}
    run = find_run(args.model)
    if run is not None:  # a trained run: its policy, env and how it acted
        policy_dir, config_path = run
        config, info = load_config(config_path)
        model, env = str(policy_dir), env or info.get("env_id")
        settings = {name: getattr(config, name) for name in ("max_turns", "history_length", "think", "constrained", "eval_temperature")}
    if args.temperature is not None:
        settings["eval_temperature"] = args.temperature
    trainer = GRPOTrainer(env or "rspo/ALFWorld-v0", model=model, num_groups=1, group_size=1, progress=not args.no_progress, **settings)
    metrics = trainer.evaluate(tasks=args.tasks)
    for key in sorted(metrics):
        print(f"{key:32s} {metrics[key]:.3f}")
    trainer.close()
    return metrics


if __name__ == "__main__":
    main()
