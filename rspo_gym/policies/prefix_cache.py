"""Keys and values of prompts already run, kept so that a prompt extending one runs only its new tokens.

In a conversation-format rollout, turn t+1's prompt is turn t's prompt, its reply and the new
observation: every turn re-running the whole prompt (~800 tokens for ALFWorld) pays again for
what the previous turn computed. ``HFBackend.session`` keeps each prompt's per-layer keys and
values here, and the next prompt that starts with one of them runs only the rest.

Entries are looked up by exact token ids (a dict keyed by the id tuple, tried at each cached
length, longest first): the lookup costs a few tuple hashes per prompt, not a trie walk over
hundreds of tokens. The store is bounded by bytes, least recently used first out, and holds
no reference to a batch's tensors (each entry is its row's own copy), so evicting an entry frees
its memory.

Keys and values depend on the weights they were computed with: ``validate`` drops everything when
the caller's fingerprint of the weights changed (an optimizer step between two turns).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from typing import Hashable, Sequence

import torch

__all__ = ["PrefixCache", "Layers"]

#: One prompt's keys and values, per layer ``(keys, values)``, each ``(kv_heads, length, head_dim)``.
Layers = list[tuple[torch.Tensor, torch.Tensor]]


def _nbytes(layers: Layers) -> int:
    return sum(t.numel() * t.element_size() for kv in layers for t in kv)


class PrefixCache:
    """Least-recently-used ``tuple(ids) -> Layers`` store of at most ``max_bytes`` of tensors."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._entries: OrderedDict[tuple[int, ...], Layers] = OrderedDict()
        self._lengths: Counter[int] = Counter()  # cached lengths (entries of each), the lookup's candidates
        self._fingerprint: Hashable = None

    def __len__(self) -> int:
        return len(self._entries)

    def validate(self, fingerprint: Hashable) -> None:
        """Drop every entry unless ``fingerprint`` (of the weights) is the one they were made with."""
        if fingerprint != self._fingerprint:
            self.clear()
            self._fingerprint = fingerprint

    def clear(self) -> None:
        self._entries.clear()
        self._lengths.clear()
        self.nbytes = 0

    def longest(self, ids: Sequence[int]) -> tuple[int, Layers | None]:
        """The longest entry whose ids start ``ids`` (its length and layers), or ``(0, None)``."""
        for length in sorted((k for k in self._lengths if k <= len(ids)), reverse=True):
            key = tuple(ids[:length])
            layers = self._entries.get(key)
            if layers is not None:
                self._entries.move_to_end(key)
                return length, layers
        return 0, None

    def __contains__(self, ids: Sequence[int]) -> bool:
        return tuple(ids) in self._entries

    def put(self, ids: Sequence[int], layers: Layers) -> None:
        """Store ``layers`` for ``ids``, evicting the least recently used entries beyond the bound
        (an entry larger than the whole bound is not stored)."""
        key, size = tuple(ids), _nbytes(layers)
        if key in self._entries or size > self.max_bytes:
            return
        self._entries[key] = layers
        self._lengths[len(key)] += 1
        self.nbytes += size
        while self.nbytes > self.max_bytes:
            old, evicted = self._entries.popitem(last=False)
            self.nbytes -= _nbytes(evicted)
            self._lengths[len(old)] -= 1
            if not self._lengths[len(old)]:
                del self._lengths[len(old)]
