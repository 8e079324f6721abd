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
    x = int(r.random() * n)
    return x if x < n else n - 1  # == min(x, n - 1) for ints


def between(r: random.Random, lo: int, hi: int) -> int:
    """Uniform int in ``[lo, hi]``."""
    return lo + below(r, hi - lo + 1)


def choice(r: random.Random, seq: Sequence[Any]) -> Any:
    n = len(seq)
    x = int(r.random() * n)
    return seq[x if x < n else n - 1]


def sample_indices(r: random.Random, n: int, k: int) -> list[int]:
    """``k`` distinct indices of ``range(n)`` in draw order (partial Fisher-Yates)."""
    pool = list(range(n))
    rand = r.random
    for j in range(k):
        w = n - j
        x = int(rand() * w)
        m = j + (x if x < w else w - 1)
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
    i = 0
    for w in weights:
        x -= w
        if x < 0:
            return i
        i += 1
    return len(weights) - 1


def shuffled(r: random.Random, seq: Sequence[Any]) -> list[Any]:
    """A shuffled copy (Fisher-Yates over ``random()`` draws)."""
    out = list(seq)
    n = len(out)
    rand = r.random
    for j in range(n - 1):
        w = n - j
        x = int(rand() * w)
        m = j + (x if x < w else w - 1)
        out[j], out[m] = out[m], out[j]
    return out


def gauss(r: random.Random) -> float:
    """Standard normal by Box-Muller (``random.gauss``'s algorithm is not promised stable)."""
    u1, u2 = r.random(), r.random()
    return math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)
