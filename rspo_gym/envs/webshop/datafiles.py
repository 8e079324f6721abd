"""Reading big JSON data files and caching what is built from them, for upstream WebShop's data.

- :func:`iter_json_array`: the records of a JSON array file one at a time, so a 5.5 GB product
  file never sits in memory as one string or one list of dicts;
- :func:`file_digest`: a content hash streamed in chunks on all cores (size and mtime would miss
  a file rewritten in place);
- :func:`default_cache_dir`: ``$XDG_CACHE_HOME/rspo_gym/webshop`` (``~/.cache`` without it);
- :func:`build_atomically`: build a cache entry in a temporary folder and rename it into place,
  so an interrupted or failed build leaves nothing half-built;
- :class:`Packed`, :class:`PackWriter`: JSON values written one after another into one file and
  read back by position, memory-mapped: a catalog of 1.18M products costs about its text, in pages
  every process reading the cache shares, not Python's tens of objects per product.
"""

from __future__ import annotations

import codecs
import concurrent.futures
import hashlib
import json
import mmap
import os
import shutil
import tempfile
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Packed", "PackWriter", "build_atomically", "default_cache_dir", "file_digest", "iter_json_array"]

_CHUNK = 1 << 20
_SEGMENT = 64 << 20
_WHITESPACE = " \t\n\r"


def file_digest(path: Path, segment_size: int = _SEGMENT, chunk_size: int = 8 << 20) -> str:
    """A SHA-256 tree hash of the file's bytes: the SHA-256 of the size and of each
    ``segment_size`` segment's SHA-256, the segments hashed on all cores (hashlib releases the
    GIL) in chunks of ``chunk_size`` (constant memory per thread)."""
    size = os.path.getsize(path)

    def segment(start: int) -> bytes:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            f.seek(start)
            left = min(segment_size, size - start)
            while left > 0:
                chunk = f.read(min(chunk_size, left))
                if not chunk:
                    raise OSError(f"{path}: changed while being read")
                digest.update(chunk)
                left -= len(chunk)
        return digest.digest()

    starts = range(0, size, segment_size)
    workers = max(1, min(len(starts), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        parts = list(pool.map(segment, starts))
    return hashlib.sha256(str(size).encode() + b"".join(parts)).hexdigest()


def default_cache_dir() -> Path:
    """Where built upstream data is cached unless a ``cache_dir`` is given."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "rspo_gym" / "webshop"


class _Reader:
    """A window of decoded text over a binary file, refilled on demand."""

    def __init__(self, f: Any, on_bytes: Callable[[int], None] | None) -> None:
        self._f = f
        self._decode = codecs.getincrementaldecoder("utf-8")().decode
        self._on_bytes = on_bytes
        self.buf = ""
        self.pos = 0
        self.eof = False

    def fill(self) -> None:
        chunk = self._f.read(_CHUNK)
        self.eof = not chunk
        if self._on_bytes is not None and chunk:
            self._on_bytes(len(chunk))
        self.buf = self.buf[self.pos:] + self._decode(chunk, final=self.eof)
        self.pos = 0

    def skip_space(self) -> str:
        """The next non-blank character, consumed ('' at the end of the file)."""
        while True:
            buf, pos = self.buf, self.pos
            while pos < len(buf) and buf[pos] in _WHITESPACE:
                pos += 1
            self.pos = pos
            if pos < len(buf):
                self.pos = pos + 1
                return buf[pos]
            if self.eof:
                return ""
            self.fill()


def iter_json_array(path: Path, on_bytes: Callable[[int], None] | None = None) -> Iterator[Any]:
    """Each element of the JSON array in ``path``, parsed one at a time.

    Malformed files raise ``ValueError`` naming the file and the element. The file is read as far
    as the caller iterates (stopping early leaves the rest unread); ``on_bytes(n)`` is called as
    bytes are read (for a progress bar).
    """
    decoder = json.JSONDecoder()
    with open(path, "rb") as f:
        r = _Reader(f, on_bytes)
        try:
            first = r.skip_space()
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: not UTF-8 text: {exc}") from None
        if first != "[":
            raise ValueError(f"{path}: expected a JSON array of products, the file starts with {first[:1]!r}")
        n = 0
        while True:
            try:
                c = r.skip_space()
                if n == 0 and c == "]":
                    break
                if n > 0:
                    if c == "]":
                        break
                    if c != ",":
                        raise ValueError(f"{path}: not valid JSON after record #{n - 1}: expected ',' or ']', got {c[:1]!r}")
                    c = r.skip_space()
                if not c:
                    raise ValueError(f"{path}: not valid JSON: the file ends inside the array (after {n} records)")
                r.pos -= 1
                while True:
                    try:
                        value, end = decoder.raw_decode(r.buf, r.pos)
                        break
                    except json.JSONDecodeError as exc:
                        if r.eof:
                            raise ValueError(f"{path}: not valid JSON in record #{n}: {exc.msg}") from None
                        r.fill()
            except UnicodeDecodeError as exc:
                raise ValueError(f"{path}: not UTF-8 text near record #{n}: {exc.reason}") from None
            r.pos = end
            yield value
            n += 1
        rest = r.skip_space()
        if rest:
            raise ValueError(f"{path}: not valid JSON: extra data after the array")


def build_atomically(final: Path, build: Callable[[Path], None]) -> Path:
    """``final``, made by ``build(tmp)`` in a sibling temporary folder renamed into place.

    If ``build`` raises (or the process dies), no folder named ``final`` appears and the
    temporary one is removed (a killed process leaves only a ``.tmp-*`` folder, never a
    ``final`` that looks complete). If another process renamed its own build into place first,
    that one is kept.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
    try:
        build(tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process finished first
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


class PackWriter:
    """Appends JSON values to ``<path>.json`` and their end offsets, for :meth:`Packed.open`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f = open(path.with_suffix(".json"), "wb")
        self._ends = array("Q")
        self._pos = 0

    def add(self, value: Any) -> None:
        self.add_raw(json.dumps(value, separators=(",", ":")).encode())  # ASCII: lone surrogates survive

    def add_raw(self, data: bytes) -> None:
        """Append one value already encoded (:meth:`Packed.raw` of another pack)."""
        self._f.write(data)
        self._pos += len(data)
        self._ends.append(self._pos)

    def __len__(self) -> int:
        return len(self._ends)

    def close(self) -> None:
        """Write the offsets; the pack can then be opened."""
        self._f.close()
        np.save(self.path.with_suffix(".ends.npy"), np.frombuffer(self._ends, dtype=np.uint64) if self._ends
                else np.zeros(0, np.uint64))


class Packed(Sequence[Any]):
    """The values a :class:`PackWriter` wrote, each decoded when indexed (memory-mapped)."""

    def __init__(self, data: Any, ends: np.ndarray) -> None:
        self._data = data
        self._ends = ends

    @classmethod
    def open(cls, path: Path) -> Packed:
        """The pack at ``path``; ``ValueError`` if its files disagree (a damaged cache)."""
        ends = np.load(path.with_suffix(".ends.npy"), mmap_mode="r")
        size = os.path.getsize(path.with_suffix(".json"))
        if (int(ends[-1]) if len(ends) else 0) != size:
            raise ValueError(f"{path}: offsets and data disagree")
        if size == 0:
            return cls(b"", ends)
        with open(path.with_suffix(".json"), "rb") as f:
            return cls(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), ends)

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i: int) -> Any:  # type: ignore[override]
        return json.loads(self.raw(i))

    def raw(self, i: int) -> bytes:
        """Value ``i``'s JSON bytes."""
        if not -len(self) <= i < len(self):
            raise IndexError(f"index {i} out of range [0, {len(self)})")
        i %= len(self)
        start = int(self._ends[i - 1]) if i else 0
        return self._data[start:int(self._ends[i])]

    def close(self) -> None:
        if isinstance(self._data, mmap.mmap):
            self._data.close()
