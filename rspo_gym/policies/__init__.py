"""Policies: language models and the fast action scorer, with their generation backends.

Most modules need the ``[llm]`` extra (torch, transformers, peft).

- ``logprobs.py``: log-probs and entropies under the tempered, optionally restricted softmax (pure
  tensor functions that ``llm.py`` and ``hf_backend.py`` both use).
- ``hf_backend.py``: batched transformers generation with exact behaviour log-probs;
  ``tree_scoring.py``: constrained replies scored over their token trie; ``prefix_cache.py``:
  prompts' keys and values kept for the next turn's prompt.
- ``vllm_backend.py``: the optional vLLM backend (``[vllm]`` extra); ``vllm_server.py``: generation
  on a separate ``vllm serve`` process.
- ``llm.py``: ``LLMPolicy`` (acting, teacher-forced log-probs, value head, LoRA).
- ``adapters.py``: LoRA adapters on one shared base model; ``critic.py``: PPO's separate LM critic.
- ``models.py``: ``load_model("tiny" | "smollm2-135m" | HF id | path)``; ``llm.load_policy`` wraps it.
- ``warmstart.py``: behaviour cloning from the environments' experts.
- ``action_scorer.py``: the fast DRRN-style action-scoring policy; ``scorer_warmstart.py``: its
  behaviour cloning.

Every backend implements the generation interface of ``rspo_gym.rollout.generation`` (which the
collector calls). May import: ``rspo_gym.rollout``, ``rspo_gym.envs``, ``rspo_gym.algos``,
``rspo_gym.errors`` (the room order is checked by ``tests/test_layout.py``); nothing of the
training machinery. Modules are imported explicitly (``from rspo_gym.policies.llm import
LLMPolicy``) so that this package imports without torch.
"""
