"""The training machinery: the loop, the four trainers, their configs, checkpoints and run folders.

- ``trainer``: ``Trainer``, the loop every algorithm shares (collect, advantages, update,
  evaluate, log, checkpoint).
- ``grpo``, ``ppo``, ``gigpo``, ``rspo``: ``GRPOTrainer``, ``PPOTrainer``, ``GiGPOTrainer``,
  ``RSPOTrainer``, one file per algorithm.
- ``config``: the config dataclasses (``TrainerConfig``, ``PPOConfig``, ``GiGPOConfig``,
  ``RSPOConfig``); ``validation``: their checks; ``config_reference``: every field with its default
  and documentation (``rspo-gym config``, ``docs/config.md``); ``defaults``: the fields left None
  that depend on the env or the model; ``presets``: named settings (``preset="verl-agent"``).
- ``envs``: the grouped vector envs a trainer trains and evaluates on; ``dynamic_sampling``:
  keeping the groups that teach something (``filter_groups``).
- ``checkpoints``, ``tensor_shards``: atomic, verified checkpoints read without running code
  (``rspo_gym.safe_pickle``); ``runs``: run folders and their one-writer lock; ``progress``, ``reporting``: the progress line, TensorBoard.
- ``distributed``: data-parallel training under ``accelerate launch`` / ``torchrun`` (DDP, FSDP,
  DeepSpeed).

Why the trainers stand here, beside the loop, and not beside the math (TRL keeps its trainers and
their configs in one ``trainer`` room the same way): a trainer class is a few overrides of
``Trainer`` (its estimator call, a critic, RSPO's explorer and replay buffer), so it is read with
the loop it overrides and the config it takes. What each one computes, its estimator, is a pure
function in ``rspo_gym.algos.estimates``; one file per algorithm keeps the class a reader looks for
under the algorithm's name.

May import: ``rspo_gym.algos`` (the math), ``rspo_gym.policies``, ``rspo_gym.rollout``,
``rspo_gym.envs``, ``rspo_gym.errors``, ``rspo_gym.plotting``, ``rspo_gym.atomic``,
``rspo_gym.safe_pickle`` (the room order is checked by
``tests/test_layout.py``). Importing ``rspo_gym.training.config`` (or ``validation``,
``config_reference``, ``runs``) imports no torch: ``rspo-gym config`` and a bad ``--set`` answer
fast. The trainers and configs are top-level names too (``from rspo_gym import RSPOTrainer``).
"""
