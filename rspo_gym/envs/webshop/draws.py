"""Random draws that are the same on every machine, process and Python version.

``random.Random``'s ``random()`` stream is the one Python promises to keep; ``randrange``,
``choice``, ``shuffle``, ``sample`` and ``gauss`` may change algorithm between versions. So the
catalog and the goals seed a ``random.Random`` from a BLAKE2b digest (``stable_rng``) and draw only
through ``random()`` with the helpers below, so task ``k`` of a catalog is canonical everywhere.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from typing import Any

__all__ = ["stable_rng", "below", "between", "choice", "sample_indices", "sample", "weighted", "shuffled",
           "gauss"]


def stable_rng(domain: bytes, *parts: object) -> random.Random:
    """A ``random.Random`` seeded from ``blake2b(repr(parts))`` personalised with ``domain``."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=16, person=domain).digest()
    return random.Random(int.from_bytes(digest, "big"))


def below(r: random.Random, n: int) -> int:
    """Uniform int in ``[0, n)`` from one ``random()`` draw."""
    return min(int(r.random() * n), n - 1)


def between(r: random.Random, lo: int, hi: int) -> int:
    """Uniform int in ``[lo, hi]``."""
    return lo + below(r, hi - lo + 1)


def choice(r: random.Random, seq: Sequence[Any]) -> Any:
    return seq[below(r, len(seq))]


def sample_indices(r: random.Random, n: int, k: int) -> list[int]:
    """``k`` distinct indices of ``range(n)`` in draw order (partial Fisher-Yates)."""
    pool = list(range(n))
    for j in range(k):
        m = j + below(r, n - j)
        pool[j], pool[m] = pool[m], pool[j]
    return pool[:k]


def sample(r: random.Random, seq: Sequence[Any], k: int, keep_order: bool = False) -> list[Any]:
    idx = sample_indices(r, len(seq), min(k, len(seq)))
    if keep_order:
        idx.sort()
    return [seq[i] for i in idx]


def weighted(r: random.Random, weights: Sequence[float]) -> int:
    """An index drawn with probability proportional to ``weights``."""
    x = r.random() * sum(weights)
    for i, w in enumerate(weights):
        x -= w
        if x < 0:
            return i
    return len(weights) - 1


def shuffled(r: random.Random, seq: Sequence[Any]) -> list[Any]:
    """A shuffled copy (Fisher-Yates over ``random()`` draws)."""
    out = list(seq)
    for j in range(len(out) - 1):
        m = j + below(r, len(out) - j)
        out[j], out[m] = out[m], out[j]
    return out


def gauss(r: random.Random) -> float:
    """Standard normal by Box-Muller (``random.gauss``'s algorithm is not promised stable)."""
    u1, u2 = r.random(), r.random()
    return math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)
