"""Our envs inside the trainers people already use, one small module per peer, each importing its
peer lazily (install the peer's extra, e.g. ``pip install 'rspo-gym[trl]'``):

- ``episode``: what every peer shares: an :class:`~rspo_gym.integrations.episode.Episode` played
  from a task id, verl-agent's reward (10 × won, WebShop's score apart), an optional process
  reward, append-only or windowed messages.
- ``trl``: ``environment_factory``, ``task_dataset``, ``WindowedRollout`` (a ``rollout_func``),
  ``tool_chat_template``.
- ``verl_agent``: ``build_alfworld_envs`` / ``build_webshop_envs`` with verl-agent's signatures.
- ``skyrl``: ``BaseTextEnv`` classes registered as ``rspo_alfworld`` / ``rspo_webshop``.
- ``openrlhf``: an ``--agent_func_path`` file and a task exporter.
- ``art``: an async ``rollout`` into ``art.Trajectory`` and ``groups``.
- ``verifiers_taskset``: a verifiers taskset package (``RspoTaskset``, ``RspoEnv``).

The originals' own Python APIs (ALFWorld's ``AlfredTWEnv``, WebShop's ``WebAgentTextEnv``) are in
``rspo_gym.compat``. See ``docs/integrations.md``.

May import: every room below it (``rspo_gym.envs``, ``rspo_gym.rollout``, ``rspo_gym.compat``;
the room order is checked by ``tests/test_layout.py``); nothing imports it.
"""
