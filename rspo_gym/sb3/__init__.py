"""Stable-Baselines3 support: train SB3 (and sb3-contrib's ``MaskablePPO``) on the text envs.

- ``envs``: adapters from the text envs to what SB3 takes: a fixed task subset, the admissible
  commands as ``Discrete(K)`` actions, hashed n-gram features, per-command slots, the action mask;
  ``make_sb3_env`` stacks them for an env id. Needs gymnasium and numpy only.
- ``drrn``: ``DRRNPolicy``, a DRRN-style ``MaskablePPO`` policy that scores each (state, command)
  pair with shared weights. Needs torch and sb3-contrib (the ``[sb3]`` extra).

Modules are imported explicitly (``from rspo_gym.sb3.envs import make_sb3_env``), so importing
this package imports neither torch nor SB3. The adapters' old import path under ``rspo_gym.envs``
still works (a lazy alias).

May import: ``rspo_gym.envs`` and every room below SB3 support (the room order is checked by
``tests/test_layout.py``); nothing below imports it.
"""
