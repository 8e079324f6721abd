"""Reading a checkpoint's pickled part without running code: an unpickler that builds data only.

A pickle names callables (``module.name``) that the reader calls to rebuild objects; an
unrestricted reader calls whatever the file names, ``os.system`` included. Checkpoints travel
(downloaded runs, shared cluster scratch), and their sha256 has no key (anyone can recompute it),
so the digest proves a file undamaged, never harmless. ``SafeUnpickler`` therefore resolves only
the names in ``ALLOWED``: containers, numbers, numpy scalars and arrays, torch dtypes and sizes,
and the rollout's dataclasses, each of which only stores what it is given. Any other name is an
``UnpicklingError`` before anything is called.

``ALLOWED_CLASSES`` is the same list for ``torch.load(weights_only=True)`` (``safe_globals``),
which reads single-file checkpoints.
"""

from __future__ import annotations

import importlib
import pickle
from typing import Any

__all__ = ["ALLOWED", "SafeUnpickler", "allowed_classes"]

#: ``(module, name)`` of every callable a checkpoint's pickle may name.
ALLOWED: frozenset[tuple[str, str]] = frozenset({
    *(("builtins", name) for name in ("set", "frozenset", "complex", "slice", "range", "bytearray", "bytes", "tuple", "list",
                                      "dict", "int", "float", "str", "bool")),
    *(("collections", name) for name in ("OrderedDict", "defaultdict", "deque", "Counter")),
    ("types", "SimpleNamespace"),
    *((module, name) for module in ("numpy.core.multiarray", "numpy._core.multiarray") for name in ("scalar", "_reconstruct")),
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("torch", "Size"),
    ("torch", "device"),
    *(("rspo_gym.rollout.trajectory", name) for name in ("StepRow", "Trajectory", "Rollout")),
})


class SafeUnpickler(pickle.Unpickler):
    """A ``pickle.Unpickler`` that resolves only ``ALLOWED`` names (and torch dtypes, which are
    values); anything else raises ``UnpicklingError`` naming it."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ALLOWED or _is_torch_dtype(module, name):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"it names {module}.{name}, which a checkpoint may not (only data types are read)")


def _is_torch_dtype(module: str, name: str) -> bool:
    if module != "torch":
        return False
    import torch

    return isinstance(getattr(torch, name, None), torch.dtype)


def allowed_classes() -> list[Any]:
    """The ``ALLOWED`` objects outside ``builtins``, for ``torch.serialization.safe_globals``."""
    found = []
    for module, name in sorted(ALLOWED):
        if module == "builtins":
            continue
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):  # numpy's module moved in 2.0: one of the two exists
            continue
    return found
