"""LLM policies (need the ``[llm]`` extra: torch, transformers, peft).

- ``generation.py``: the generation-backend interface (token ids in, tokens + log-probs out).
- ``hf_backend.py``: batched transformers generation with exact behaviour log-probs.
- ``vllm_backend.py``: the optional vLLM backend (``[vllm]`` extra).
- ``llm.py``: ``LLMPolicy`` (acting, teacher-forced log-probs, value head, LoRA).
- ``models.py``: ``load_model("tiny" | "smollm2-135m" | HF id | path)``; ``llm.load_policy`` wraps it.
- ``warmstart.py``: behaviour cloning from the environments' experts.

Modules are imported explicitly (``from rspo_gym.policies.llm import LLMPolicy``) so that this
package imports without torch.
"""
