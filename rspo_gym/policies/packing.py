"""Rows nested in one another scored from one decoder pass: the pass of the longest.

An append-only conversation prompt makes turn ``t + 1``'s prompt turn ``t``'s prompt and reply
plus new tokens, so row ``t``'s real tokens are a prefix of row ``t + 1``'s. Under a causal mask a
token's hidden state depends on the tokens before it only, so a row's states are the first ones of
any row it is a prefix of: one pass over the longest row of a chain (its *host*) holds every
member's, and a member of prompt length ``p`` reads its response's states at host positions
``p - 1 ..``. A 20-turn episode then costs one sequence instead of 20 in forward and backward.

Detection compares each pair of rows through a hash of every prefix (one cumulative sum), not of
the first few tokens: every row of a conversation starts with the same system prompt and task, so
a key on the first tokens would put the whole batch in one bucket. Every match is then verified
by one equality of the ids, so a collision can cost some packing but never a wrong read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

__all__ = ["Packing", "nested_hosts", "nested_chains", "packing", "packed_states"]

_HASH_SEED = 20_241_203


@dataclass(frozen=True)
class Packing:
    """Which pass each row of a batch reads.

    ``hosts``: the rows whose pass is run, in batch order; ``slot[i]``: the index in ``hosts`` of
    row ``i``'s host; ``start[i]``: the host position of the state before row ``i``'s first
    response token (its prompt length - 1); ``width``: the longest host's real length (its pass
    needs no column past it).
    """

    hosts: list[int]
    slot: list[int]
    start: list[int]
    width: int

    @property
    def packs(self) -> bool:
        """Whether some row reads another row's pass."""
        return len(self.hosts) < len(self.slot)


def _prefix_hashes(ids: torch.Tensor) -> torch.Tensor:
    """``(rows, width)`` int64: entry ``q`` identifies ``ids[:, :q + 1]``, a sum of the ids weighted by
    fixed random weights below 2^24 (exact in int64 for ids below 2^21 and rows up to 2^18 long;
    past that the sum wraps around, and equal prefixes still hash equal)."""
    generator = torch.Generator().manual_seed(_HASH_SEED)
    weights = torch.randint(1, 2**24, (ids.shape[1],), generator=generator).to(ids.device)
    return (ids * weights).cumsum(1)


def nested_hosts(ids: torch.Tensor, lengths: Sequence[int], block: int = 256) -> list[int]:
    """Each row's host: the longest row whose first ``lengths[i]`` ids are row ``i``'s (``i`` itself
    when no other row is). Only a strictly longer row can host: identical rows (a group's members
    answering a shared first prompt alike, in any prompt format) keep their own passes, so a batch of
    windowed prompts, where no row is a strict prefix of another, runs exactly as without packing.

    ``ids`` is ``(rows, width)`` with row ``i``'s real ids in columns ``0 .. lengths[i] - 1``
    (``alignment.start_aligned``'s layout). Rows are visited longest first and matched, by prefix
    hash, to the hosts found so far: the prefix relation is transitive, so a row nested in a member
    of a chain is nested in its host. The hash is compared ``block`` rows at a time (a rollout's
    thousands of rows never make a ``rows x rows`` tensor), and every match is verified at once by
    an equality of the ids; a row whose match fails (a collision) is its own host.

    >>> ids = torch.tensor([[1, 2, 3, 0], [1, 2, 3, 4], [1, 5, 0, 0], [1, 2, 0, 0]])
    >>> nested_hosts(ids, [3, 4, 2, 2])
    [1, 1, 2, 1]
    """
    rows = len(lengths)
    order = sorted(range(rows), key=lambda i: -lengths[i])
    rank = {i: k for k, i in enumerate(order)}
    real = torch.as_tensor(lengths, dtype=torch.long).to(ids.device)
    last = (real - 1).clamp(min=0)
    hashes = _prefix_hashes(ids)
    whole = hashes.gather(1, last[:, None]).squeeze(1)
    candidates: dict[int, list[int]] = {}  # row -> rows visited before it whose prefix hashes as it
    for start in range(0, rows, block):
        for j, i in (hashes[:, last[start:start + block]] == whole[None, start:start + block]).nonzero().tolist():
            if lengths[j] > lengths[start + i]:
                candidates.setdefault(start + i, []).append(j)
    host = list(range(rows))
    for i in order:
        host[i] = next((h for h in sorted(candidates.get(i, ()), key=rank.__getitem__) if host[h] == h), i)
    if host == list(range(rows)):
        return host
    columns = torch.arange(ids.shape[1], device=ids.device)
    same = (ids.index_select(0, torch.as_tensor(host, device=ids.device)) == ids) | (columns[None, :] >= real[:, None])
    for i in (~same.all(1)).nonzero().flatten().tolist():
        host[i] = i
    return host


def nested_chains(batch) -> list[int]:
    """``nested_hosts`` of a ``TrainingBatch``'s rows over their real tokens (prompt and response)."""
    from rspo_gym.policies.alignment import start_aligned

    shifted, _ = start_aligned(batch.input_ids, batch.attention_mask, 0)  # the filler is never compared
    return nested_hosts(shifted, [p + r for p, r in batch.lengths()])


def packing(batch) -> Packing:
    """The ``Packing`` of a ``TrainingBatch``: its rows' ``nested_chains``, each host run once."""
    lengths = batch.lengths()
    host = nested_chains(batch)
    hosts = sorted(set(host))
    index = {h: k for k, h in enumerate(hosts)}
    return Packing(hosts, [index[h] for h in host], [p - 1 for p, _ in lengths], max(sum(lengths[h]) for h in hosts))


def packed_states(hidden: torch.Tensor, plan: Packing, length: int, offsets: torch.Tensor | None = None) -> torch.Tensor:
    """``(rows, length, ...)``: each row's states at host positions ``start .. start + length - 1``,
    read from ``hidden`` ``(hosts, width, ...)``, the hosts' pass.

    ``offsets`` ``(hosts,)``: the column of each host's first real token in ``hidden`` (its left
    padding in a padded layout; None: 0, the start-aligned layout). Positions past a row's real
    tokens are its response padding: they read a clamped column, whose scores the response mask
    drops. One ``index_select`` of the flattened states: no per-row copy of a host's pass.
    """
    hosts, width = hidden.shape[:2]
    device = hidden.device
    slot = torch.as_tensor(plan.slot, device=device)
    columns = torch.as_tensor(plan.start, device=device)[:, None] + torch.arange(length, device=device)[None, :]
    if offsets is not None:
        columns = columns + offsets[slot][:, None]
    flat = slot[:, None] * width + columns.clamp(0, width - 1)
    states = hidden.reshape(hosts * width, *hidden.shape[2:]).index_select(0, flat.reshape(-1))
    return states.view(len(plan.slot), length, *hidden.shape[2:])
