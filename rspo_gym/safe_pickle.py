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

Data only is not yet memory bounded: ``bytearray(3_000_000_000)`` is 30 bytes of pickle, and
torch's weights-only reader accepts it. So the few calls that allocate with a size given as a
number are refused (``bytes`` / ``bytearray`` of an int or any integer-like, an array made at any
shape but numpy's empty placeholder, ``range``, which a list would expand), and ``check_torch_file`` reads the
pickle of a ``torch.save`` file this way before ``torch.load`` does (``scan_pickle``: every name is
a stand-in, nothing is called, the sizes are checked). What is left allocates no more than the
bytes the file holds, times a small factor.

``load_weights`` puts it together for a ``torch.save`` file of tensors and plain data (a cache of
weights): checked, read weights-only, and any failure one line naming the file.
"""

from __future__ import annotations

import importlib
import io
import pickle
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["ALLOWED", "SafeUnpickler", "allowed_classes", "refusal_reason", "is_refusal", "scan_pickle", "check_torch_file",
           "load_weights"]

#: ``(module, name)`` of every callable a checkpoint's pickle may name.
ALLOWED: frozenset[tuple[str, str]] = frozenset({
    *(("builtins", name) for name in ("set", "frozenset", "complex", "slice", "bytearray", "bytes", "tuple", "list",
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
            if (module, name) == ("numpy", "ndarray"):
                return _NDARRAY  # an argument of _reconstruct, never called itself
            found = super().find_class(module, name)
            if (module, name) in _SIZED:
                return _no_int_size(found)
            if name == "_reconstruct":
                return _empty_array(found)
            return found
        raise pickle.UnpicklingError(f"it names {module}.{name}, which a checkpoint may not (only data types are read)")


_SIZED = {("builtins", "bytes"), ("builtins", "bytearray")}


class _ArrayClass:
    """What ``numpy.ndarray`` resolves to: ``_reconstruct``'s argument; called itself (an array of
    any shape, uninitialised), refused."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise pickle.UnpicklingError("it asks numpy for an array the file does not hold")


_NDARRAY = _ArrayClass()


def _no_int_size(make):
    """``bytes`` / ``bytearray`` of a string or bytes, as pickles write them; of a size (gigabytes
    from a few bytes of pickle) refused. A size is anything with ``__index__``, which is what
    ``bytearray`` itself accepts: an ``int``, and also ``numpy.int64`` and any integer-like. In the
    scanner, a ``_StandIn`` is a value the pickle computed by calling a name: no pickler writes one
    there, and what it would be when really called is unknown, so it is refused too."""

    def checked(*args):
        if args and isinstance(args[0], _StandIn):
            raise pickle.UnpicklingError(f"it asks for {make.__name__}(a value the pickle computes), an allocation the file "
                                         f"may not hold")
        if args and hasattr(type(args[0]), "__index__"):
            raise pickle.UnpicklingError(f"it asks for {make.__name__}({args[0]}), an allocation the file does not hold")
        return make(*args)

    return checked


def _empty_array(reconstruct):
    """numpy's ``_reconstruct(ndarray, (0,), dtype)``, the placeholder its pickles fill from their
    own bytes; any other shape or class (an allocation of any size) refused."""

    def checked(cls, shape, dtype):
        if cls is not _NDARRAY or tuple(shape) != (0,):
            raise pickle.UnpicklingError("it asks numpy for an array the file does not hold")
        import numpy

        return reconstruct(numpy.ndarray, shape, dtype)

    return checked


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


def is_refusal(err: BaseException) -> bool:
    """Whether an ``UnpicklingError`` refuses what a file holds (a name, an allocation), rather
    than saying the bytes are no pickle at all (a damaged file)."""
    text = str(err)
    return "Weights only load failed" in text or text.startswith(("it names", "it asks", "its pickle is", "it is built"))


def refusal_reason(err: BaseException) -> str:
    """Why a weights-only read refused a file, as a clause: the line of the error that names what
    the file holds (torch's ``unsupported GLOBAL posix.system``, ours ``it names posix.system``),
    never torch's advice to read it again with ``weights_only=False``, which would run that code."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    for line in lines:
        if "weights_only" not in line and ("GLOBAL" in line or "global" in line or line.startswith("it names")):
            return line.rstrip(".")
    if lines and "weights_only" not in lines[0]:
        return lines[0].rstrip(".")
    return "it holds objects other than tensors and plain data"


#: Largest pickle (``data.pkl``) of a ``torch.save`` file that ``check_torch_file`` reads; the
#: tensors' bytes are separate records, so a model's pickle is kilobytes to a few megabytes.
MAX_TORCH_PICKLE = 256 << 20


class _StandIn:
    """What every name and persistent id of a scanned pickle becomes: accepts whatever the pickle
    does to an object (build, items, appends) and keeps nothing."""

    def __new__(cls, *args: Any, **kwargs: Any) -> "_StandIn":
        return object.__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def append(self, value: Any) -> None:
        pass

    def extend(self, values: Any) -> None:
        pass

    def add(self, value: Any) -> None:
        pass


class _Scanner(pickle.Unpickler):
    """Runs a pickle's opcodes with every name a ``_StandIn`` (nothing is called) but the sized
    constructors, whose size is checked."""

    def find_class(self, module: str, name: str) -> Any:
        if (module.replace("__builtin__", "builtins"), name) in _SIZED:  # protocol 2 names Python 2's module
            return _no_int_size({"bytes": bytes, "bytearray": bytearray}[name])
        return _StandIn

    def persistent_load(self, pid: Any) -> Any:
        return _StandIn()


def scan_pickle(data: bytes) -> None:
    """Raise ``UnpicklingError`` when the pickle ``data`` asks for an allocation it does not hold
    (``bytearray(10**15)``); run nothing. Memory: a small factor of ``len(data)``."""
    try:
        _Scanner(io.BytesIO(data)).load()
    except pickle.UnpicklingError:
        raise
    except (MemoryError, RecursionError) as err:
        raise pickle.UnpicklingError(f"it is built to exhaust the reader ({type(err).__name__})") from None
    except Exception:  # noqa: BLE001 - malformed: torch.load, which reads it next, says what is wrong
        return


def check_torch_file(file: str | BinaryIO) -> None:
    """Before ``torch.load(file, weights_only=True)``: its pickle asks for no allocation it does not
    hold (``scan_pickle``) and is at most ``MAX_TORCH_PICKLE`` bytes; else ``UnpicklingError``.
    A file that is not torch's zip format is left to ``torch.load`` to refuse or read."""
    try:
        archive = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, OSError):
        return
    with archive:
        for info in archive.infolist():
            if info.filename.endswith("data.pkl"):
                if info.file_size > MAX_TORCH_PICKLE:
                    raise pickle.UnpicklingError(f"its pickle is {info.file_size} bytes, more than a weights file holds")
                scan_pickle(archive.read(info))
    if hasattr(file, "seek"):
        file.seek(0)


def load_weights(path: str | Path) -> Any:
    """What the ``torch.save`` file ``path`` holds, its tensors on the CPU, read as checkpoints are
    (``check_torch_file``, then ``torch.load(weights_only=True)`` with ``allowed_classes``); else a
    one-line ``UserError`` naming the file: refused (what it names; nothing in it was run) or
    unreadable (missing, damaged, cut short), where torch's own errors run to a page."""
    import torch

    from rspo_gym.errors import UserError

    try:
        check_torch_file(str(path))
        with torch.serialization.safe_globals(allowed_classes()):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        if is_refusal(err):  # torch's line goes on to tell how to allow what it names: not advice to give here
            raise UserError(f"{path} is refused: {refusal_reason(err).split('. Please')[0]}; nothing in it was run") from None
        raise UserError(f"{path} is unreadable: damaged, or not a torch.save file ({_first_sentence(err)})") from None
    except Exception as err:  # noqa: BLE001 - torch's readers fail on damaged bytes with any type (struct.error, KeyError, ...)
        raise UserError(f"{path} is unreadable: damaged, or not a torch.save file ({_first_sentence(err)})") from None


def _first_sentence(err: BaseException) -> str:
    """The first sentence of ``err``'s first line (torch's go on for a paragraph)."""
    line = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return line.split(". ")[0].rstrip(".")
