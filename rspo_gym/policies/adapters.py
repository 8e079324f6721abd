"""LoRA adapters on one shared base model: several policies, one copy of the base weights.

- ``adapter_parameters``: the parameters of one named adapter.
- ``active_adapter`` / ``adapters_disabled``: contexts that route a forward pass through one
  adapter, or through the bare base model (the KL reference of a LoRA learner); ``adapter_routing``
  says which routing is on.
- ``merged_weights``: the base model's checkpoint with an adapter folded in (``W + ΔW``), for a
  vLLM engine or a plain export, computed without modifying the model; ``save_merged`` writes it.

Why: with a 7B base, a frozen KL reference and an RSPO explorer as full copies cost two more
copies of the model. As adapters on the learner's own base (peft's multi-adapter ``PeftModel``)
the reference is the base with adapters disabled and the explorer is a second adapter; each costs
only its low-rank matrices.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Any, Iterator

import torch

__all__ = [
    "is_peft", "adapter_parameters", "active_adapter", "adapters_disabled", "adapter_routing", "merged_weights", "save_merged",
]


def is_peft(model: Any) -> bool:
    """Whether ``model`` is a peft model (adapters on a base)."""
    return hasattr(model, "get_base_model") and hasattr(model, "peft_config")


def adapter_parameters(model: Any, adapter: str) -> list[tuple[str, torch.nn.Parameter]]:
    """The ``(name, parameter)`` pairs of ``adapter`` (its LoRA matrices), whatever is trainable now.

    peft toggles ``requires_grad`` to the active adapter, so the set is chosen by name instead.
    """
    marker = f".{adapter}."
    return [(name, p) for name, p in model.named_parameters() if "lora_" in name and marker in f"{name}."]


@contextmanager
def active_adapter(model: Any, adapter: str | None) -> Iterator[None]:
    """Run ``model`` through ``adapter`` (None: leave the model as it is)."""
    if adapter is None or not is_peft(model):
        yield
        return
    if model.active_adapter != adapter:
        model.set_adapter(adapter)
    yield


def adapters_disabled(model: Any):
    """A context in which ``model`` computes with its base weights only (peft's ``disable_adapter``)."""
    return model.disable_adapter() if is_peft(model) else nullcontext()


def adapter_routing(model: Any) -> tuple:
    """Which adapters a forward pass of ``model`` runs through now (hashable; empty without peft):
    its active adapters, and whether ``adapters_disabled`` bypasses them."""
    if not is_peft(model):
        return ()
    return tuple(model.active_adapters), bool(getattr(model, "_adapters_disabled", False))


def merged_weights(model: Any, adapter: str | None = None) -> list[tuple[str, Any]]:
    """``model``'s weights under the base model's checkpoint names, ``adapter`` merged in.

    For a plain transformers model these are its state-dict tensors (detached, not copied; a model
    sharded by FSDP2 gives each whole, gathered: a collective every rank makes in the same order,
    as every rank pushes to its own engine after the same update). For a peft model each
    LoRA-wrapped layer contributes ``base + ΔW`` of ``adapter`` (default: the active one; a new
    tensor, the model is not modified) and the adapters' own tensors are left out.
    """
    if not is_peft(model):
        return [(name, _whole(tensor)) for name, tensor in model.state_dict().items()]
    base = model.get_base_model()
    adapter = adapter or model.active_adapter
    merged: list[tuple[str, Any]] = []
    with torch.no_grad():
        for prefix, module in base.named_modules():
            if hasattr(module, "base_layer") and hasattr(module, "get_delta_weight") and adapter in getattr(module, "lora_A", {}):
                layer = module.base_layer
                merged.append((f"{prefix}.weight", layer.weight + module.get_delta_weight(adapter).to(layer.weight.dtype)))
                if getattr(layer, "bias", None) is not None:
                    merged.append((f"{prefix}.bias", layer.bias.detach()))
        wrapped = {name for name, _ in merged}
        for name, tensor in base.state_dict().items():
            plain = name.replace(".base_layer.", ".")
            if "lora_" in name or plain in wrapped:
                continue
            merged.append((plain, tensor.detach()))
    return merged


def _whole(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` detached, gathered whole first when it is a shard (a ``DTensor``)."""
    gather = getattr(tensor, "full_tensor", None)
    return (gather() if gather is not None else tensor).detach()


def save_merged(model: Any, path: Any, adapter: str | None = None, **save_kwargs: Any) -> None:
    """Write ``merged_weights(model, adapter)`` as a plain Hugging Face checkpoint of the base model
    (``save_pretrained`` options, e.g. ``max_shard_size``, pass through)."""
    base = model.get_base_model() if is_peft(model) else model
    base.save_pretrained(path, state_dict=dict(merged_weights(model, adapter)), **save_kwargs)
