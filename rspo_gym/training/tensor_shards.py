"""A state's tensors apart from the rest: what a sharded checkpoint is written from and read into.

- ``split_state``: a nested state (dicts, lists, tuples, any picklable object) -> the pickle of
  its skeleton, in which every tensor is a reference to a name, and the tensors by name.
- ``join_state``: the inverse: the skeleton with the tensors put back.
- ``plan_shards``: the names grouped, in order, into shards of at most ``max_bytes`` of tensor data.
- ``shard_layout`` / ``tensor_data``: a shard's safetensors header and its tensors' bytes, in the
  order a writer streams them.

Pure functions: no files. ``training/checkpoints.py`` writes the skeleton and the shards.

A tensor reached through dicts, lists and tuples is named by its path (``policy/model/lm_head.weight``,
``optimizer/state/0/exp_avg``), so a shard is readable by any safetensors tool; one inside another
object is found by the pickler and named ``object/<n>``. Views that are the same (one storage,
offset, shape, strides and dtype: tied weights, which a ``state_dict`` lists under both names) are
stored once, and come back as one tensor under both names. A tensor that safetensors cannot hold
(a sparse or quantized one, a dtype it lacks) stays in the skeleton, as ``torch.save``'s bytes
that ``torch.load(weights_only=True)`` reads. The skeleton is read by ``safe_pickle``'s
unpickler, which builds data types only: a crafted skeleton cannot run code. Tensors come back as
plain tensors (an ``nn.Parameter`` as a tensor with ``requires_grad``); other views that only
share memory (one a slice of another) are stored, and come back, as separate tensors.

>>> weight = torch.arange(6.0).reshape(2, 3)
>>> skeleton, tensors = split_state({"step": 3, "embed": weight, "head": weight.detach(), "moments": [weight.T]})
>>> sorted(tensors)
['embed', 'moments/0']
>>> state = join_state(skeleton, tensors)
>>> state["head"] is state["embed"], state["step"], torch.equal(state["moments"][0], weight.T)
(True, 3, True)
"""

from __future__ import annotations

import io
import json
import pickle
import struct
from typing import Any, Iterator

import torch

from rspo_gym.safe_pickle import SafeUnpickler, check_torch_file

__all__ = ["STORABLE_DTYPES", "split_state", "join_state", "plan_shards", "shard_layout", "tensor_data", "tensor_bytes"]

_SAFETENSORS_DTYPE = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL",
}
#: The dtypes every safetensors release since 0.3 reads (a tensor of another dtype stays in the pickle).
STORABLE_DTYPES = frozenset(_SAFETENSORS_DTYPE)
_HEADER_LENGTH = struct.Struct("<Q")

_View = tuple  # (device, storage address, offset, shape, strides, dtype): equal for the same view


def _storable(tensor: torch.Tensor) -> bool:
    return (
        type(tensor) in (torch.Tensor, torch.nn.Parameter)
        and tensor.layout == torch.strided
        and not tensor.is_quantized
        and tensor.device.type != "meta"
        and tensor.dtype in STORABLE_DTYPES
    )


def _view(tensor: torch.Tensor) -> _View:
    return (
        str(tensor.device), tensor.untyped_storage().data_ptr(), tensor.storage_offset(),
        tuple(tensor.shape), tensor.stride(), tensor.dtype,
    )


def _paths(obj: Any, path: str, seen: set[int]) -> Iterator[tuple[str, torch.Tensor]]:
    """``(path, tensor)`` for every tensor reached through dicts, lists and tuples, in order."""
    if isinstance(obj, torch.Tensor):
        yield path, obj
        return
    if isinstance(obj, (dict, list, tuple)):
        if id(obj) in seen:  # a container met twice (or a cycle) names its tensors once
            return
        seen.add(id(obj))
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        for key, value in items:
            yield from _paths(value, f"{path}/{key}" if path else str(key), seen)


class _SkeletonPickler(pickle.Pickler):
    """Pickles a state with every storable tensor replaced by ``(name, requires_grad)``."""

    def __init__(self, file: io.BytesIO, names: dict[_View, str], taken: set[str]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.names, self.taken, self.tensors, self.hidden = names, taken, {}, 0

    def persistent_id(self, obj: Any) -> tuple | None:
        if not isinstance(obj, torch.Tensor):
            return None
        if not _storable(obj):  # torch's own format, read back with weights_only: no pickled tensor code
            buffer = io.BytesIO()
            torch.save(obj, buffer)
            return (buffer.getvalue(),)
        view = _view(obj)
        name = self.names.get(view)
        if name is None:  # inside an object the path walk does not enter
            name = self.names[view] = _unique(f"object/{self.hidden}", self.taken)
            self.hidden += 1
        self.tensors.setdefault(name, obj)
        return name, obj.requires_grad


class _SkeletonUnpickler(SafeUnpickler):
    """Data types only (``safe_pickle``), tensors from the shards or torch's weights-only reader."""

    def __init__(self, file: io.BytesIO, tensors: dict[str, torch.Tensor]):
        super().__init__(file)
        self.tensors, self.restored = tensors, {}

    def persistent_load(self, pid: tuple) -> torch.Tensor:
        if len(pid) == 1 and isinstance(pid[0], bytes):
            check_torch_file(io.BytesIO(pid[0]))
            return torch.load(io.BytesIO(pid[0]), map_location="cpu", weights_only=True)
        name, requires_grad = pid
        if pid not in self.restored:
            if name not in self.tensors:
                raise ValueError(f"the skeleton refers to tensor {name!r}, which is not among the tensors")
            tensor = self.tensors[name]
            self.restored[pid] = tensor.detach().requires_grad_(True) if requires_grad else tensor
        return self.restored[pid]


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name#1``, ``name#2``, ... when taken (a dict key holding a ``/``); now taken."""
    candidate, n = name, 1
    while candidate in taken:
        candidate, n = f"{name}#{n}", n + 1
    taken.add(candidate)
    return candidate


def split_state(state: Any) -> tuple[bytes, dict[str, torch.Tensor]]:
    """The pickle of ``state`` without its tensors, and the tensors by name (the same objects,
    not copies: nothing is held twice)."""
    names: dict[_View, str] = {}
    taken: set[str] = set()
    for path, tensor in _paths(state, "", set()):
        if _storable(tensor) and _view(tensor) not in names:
            names[_view(tensor)] = _unique(path, taken)
    buffer = io.BytesIO()
    pickler = _SkeletonPickler(buffer, names, taken)
    pickler.dump(state)
    return buffer.getvalue(), pickler.tensors


def join_state(skeleton: bytes, tensors: dict[str, torch.Tensor]) -> Any:
    """The state ``split_state`` split into ``skeleton`` and ``tensors`` (a name the skeleton
    refers to that ``tensors`` lacks raises ``ValueError``; a name of code, ``UnpicklingError``)."""
    return _SkeletonUnpickler(io.BytesIO(skeleton), tensors).load()


def tensor_bytes(tensor: torch.Tensor) -> int:
    """Bytes of ``tensor``'s data (its elements, not its storage)."""
    return tensor.numel() * tensor.element_size()


def plan_shards(tensors: dict[str, torch.Tensor], max_bytes: int) -> list[list[str]]:
    """The names of ``tensors`` in order, cut into shards of at most ``max_bytes`` of data; a
    tensor larger than that is a shard of its own. No tensors: no shards.

    >>> plan_shards({"a": torch.zeros(3), "b": torch.zeros(2), "c": torch.zeros(10), "d": torch.zeros(1)}, 20)
    [['a', 'b'], ['c'], ['d']]
    """
    if max_bytes <= 0:
        raise ValueError(f"max_bytes must be positive, got {max_bytes}")
    shards: list[list[str]] = []
    filled = 0
    for name, tensor in tensors.items():
        size = tensor_bytes(tensor)
        if not shards or filled + size > max_bytes:
            shards.append([])
            filled = 0
        shards[-1].append(name)
        filled += size
    return shards


def shard_layout(tensors: dict[str, torch.Tensor]) -> tuple[bytes, list[str]]:
    """The safetensors header of a shard holding ``tensors`` and the order in which their bytes
    follow it (``tensor_data``), so a shard is written tensor by tensor, never whole in memory.

    The format is safetensors' own: an 8-byte little-endian length, a JSON header (dtype, shape
    and data offsets per tensor), the data. The header is padded with spaces so the data starts
    8-byte aligned, and tensors come largest elements first, so each one's offset is a multiple
    of its element size (as the library lays them out, so a shard maps to aligned tensors).

    >>> header, order = shard_layout({"step": torch.tensor(3, dtype=torch.int8), "w": torch.zeros(2, 3)})
    >>> order, len(header) % 8, header[8:].decode().rstrip()
    (['w', 'step'], 0, '{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"step":{"dtype":"I8","shape":[],"data_offsets":[24,25]}}')
    """
    order = sorted(tensors, key=lambda name: -tensors[name].element_size())  # stable: ties keep their order
    header, offset = {}, 0
    for name in order:
        tensor = tensors[name]
        size = tensor_bytes(tensor)
        header[name] = {"dtype": _SAFETENSORS_DTYPE[tensor.dtype], "shape": list(tensor.shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return _HEADER_LENGTH.pack(len(text)) + text, order


def tensor_data(tensor: torch.Tensor) -> memoryview:
    """``tensor``'s elements as bytes in row-major order, for a shard: no copy of a contiguous
    CPU tensor; a copy of this tensor alone when it is on another device or strided."""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return memoryview(flat.view(torch.uint8).numpy())
