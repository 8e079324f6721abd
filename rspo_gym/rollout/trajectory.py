"""Rollout data: one row per env step, one summary per trajectory, and their training tensors.

- ``StepRow``: what a step contributes to training (prompt and response ids, behaviour
  log-probs, rewards, anchor, validity, group / trajectory ids, source policy).
- ``Trajectory``: per-trajectory summary (outcome, process return, won, score, length, prompts
  truncated to the token budget).
- ``Rollout``: rows + trajectories, with ``extend`` (union of two rollouts, e.g. learner and
  explorer) and ``to_batch``.
- ``TrainingBatch`` / ``to_batch``: rows become padded tensors once, in one place.
- ``pack_by_tokens`` / ``micro_batches``: which rows share a forward pass (token-budget packing,
  rows nested in one another together).

Rows of one trajectory are contiguous and in time order (GiGPO's step returns rely on it).
Tensors use the response-aligned layout of verl: prompts left-padded to ``P``, responses
right-padded to ``R``, the model input ``[prompt | response]``; every per-token quantity
(log-probs, advantages, masks) is ``(rows, R)``. Rows generated under constrained decoding also
carry the token ids allowed at each response position, as ``TrainingBatch.allowed`` ``(rows, R,
K)``, so that the trainer scores them under the restricted distribution they were sampled from.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from itertools import chain
from typing import Any, Hashable, Sequence

__all__ = ["StepRow", "Trajectory", "Rollout", "TrainingBatch", "to_batch", "pack_by_tokens", "micro_batches", "rows_by_key", "group_outcomes"]


@dataclass
class StepRow:
    """One env step of one trajectory."""

    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    """Behaviour log-probs of ``response_ids`` under the policy that sampled them."""
    reward: float
    """The env's (outcome) reward for this step."""
    process_reward: float
    """``info["process_reward"]`` when a ProcessReward wrapper is present, else 0."""
    anchor: Hashable
    """The raw observation the action answered (GiGPO's anchor state)."""
    valid: bool
    """The env understood the action (``info["valid"]``)."""
    format_valid: bool
    """The reply followed the prompt's format."""
    group_id: int
    traj_id: int
    step: int
    action: str
    source: str = "learner"
    allowed_token_ids: list[list[int]] | None = None
    """Constrained decoding only: the token ids allowed at each position of ``response_ids``."""


@dataclass
class Trajectory:
    """The summary of one episode."""

    traj_id: int
    group_id: int
    task_id: Any
    task: str
    outcome: float
    """Sum of env rewards (ALFWorld: 1 if won; WebShop: the purchase score)."""
    process_return: float
    """Sum of process rewards."""
    process_progress: float
    """How far the episode got: Φ(end) − Φ(start) from ``info["potential"]`` (the process return
    where the env reports none). At γ = 1 this is the process return, except where the env zeroes
    its end potential so that dense = outcome + a constant (WebShop): there every process return
    is −Φ(start), and Φ(end) is the potential the episode ended on (the score of the selection
    bought, or of the one in view at the time limit)."""
    won: bool
    score: float
    """``info["score"]`` at the end when the env reports one (WebShop), else ``float(won)``."""
    length: int
    invalid: int
    """Steps whose action the env did not accept."""
    source: str = "learner"
    task_type: str | None = None
    truncated_prompts: int = 0
    """Steps whose prompt left out history entries to fit ``max_prompt_length``."""
    dropped_history: int = 0
    """History entries left out over the episode (summed over its truncated prompts)."""
    process_events: dict[str, int] = field(default_factory=dict)
    """How many times each event of a per-event process reward was paid (empty for a potential):
    how hard the episode farmed it."""


@dataclass
class Rollout:
    """Step rows and trajectory summaries of one collection."""

    rows: list[StepRow] = field(default_factory=list)
    trajectories: list[Trajectory] = field(default_factory=list)

    def extend(self, other: "Rollout") -> "Rollout":
        """The union of two rollouts; trajectory ids must not collide (give collectors an offset)."""
        ids = {t.traj_id for t in self.trajectories}
        if any(t.traj_id in ids for t in other.trajectories):
            raise ValueError("trajectory ids collide: collect the second rollout with a traj_id offset")
        return Rollout(self.rows + other.rows, self.trajectories + other.trajectories)

    def rows_of(self, source: str) -> list[int]:
        return [i for i, row in enumerate(self.rows) if row.source == source]

    def success_rate(self) -> float:
        return sum(t.won for t in self.trajectories) / max(len(self.trajectories), 1)


@dataclass
class TrainingBatch:
    """Padded tensors for a set of step rows (torch tensors; see the module docstring)."""

    input_ids: Any  # (B, P + R) long
    attention_mask: Any  # (B, P + R) long
    response_mask: Any  # (B, R) float: 1 on real response tokens
    old_logprobs: Any  # (B, R) float: behaviour log-probs, 0 on padding
    prompt_length: int  # P
    allowed: Any = None
    """(B, R, K) long: the ids allowed at each constrained response position, right-padded with
    -1 (K = the most at any position). A position with no id (all -1) is unconstrained: rows
    generated freely and response padding. None when no row is constrained."""

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def _map(self, fn) -> "TrainingBatch":
        """The batch with ``fn`` applied to every tensor (``prompt_length`` and a None ``allowed`` kept)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return TrainingBatch(**{k: (v if k == "prompt_length" or v is None else fn(v)) for k, v in values.items()})

    def index(self, rows: Sequence[int] | Any) -> "TrainingBatch":
        """The sub-batch of rows ``rows`` (indices; a micro-batch); keeps the padding widths.

        By ``index_select``: on CPU, ``tensor[rows]`` (advanced indexing) costs several times as much."""
        import torch

        rows = torch.as_tensor(rows, dtype=torch.long, device=self.input_ids.device)
        return self._map(lambda tensor: tensor.index_select(0, rows))

    def lengths(self) -> list[tuple[int, int]]:
        """Each row's real ``(prompt, response)`` token counts (what packing and trimming need)."""
        prompt = self.attention_mask[:, :self.prompt_length].sum(1)
        response = self.attention_mask[:, self.prompt_length:].sum(1)
        return list(zip(prompt.tolist(), response.tolist()))

    def trimmed(self) -> "TrainingBatch":
        """The batch cut to its own longest prompt and response (and most allowed ids per position).

        ``index`` keeps the whole rollout's padding, so a micro-batch of short rows would still run
        at the longest row's width. Prompts are left-padded, so the last ``p`` prompt columns hold
        every real prompt token; responses are right-padded, so the first ``r`` response columns
        hold every real response token; allowed ids are right-padded with -1, so the first ``k``
        hold every allowed id. Only padding is dropped: attention masks it and position ids skip
        it, so every real position's log-prob, entropy and value is unchanged, and a ``(rows, r)``
        result is the first ``r`` columns of the untrimmed one.
        """
        lengths = self.lengths()
        p = max(prompt for prompt, _ in lengths)
        r = max(max(response for _, response in lengths), 1)  # to_batch keeps R >= 1 too
        columns = slice(self.prompt_length - p, self.prompt_length + r)
        allowed = self.allowed
        if allowed is not None:
            k = max(int((allowed[:, :r] >= 0).sum(-1).max()), 1)
            allowed = allowed[:, :r, :k]
        return TrainingBatch(
            self.input_ids[:, columns], self.attention_mask[:, columns], self.response_mask[:, :r],
            self.old_logprobs[:, :r], p, allowed,
        )

    def to(self, device: Any) -> "TrainingBatch":
        """The batch with every tensor on ``device``."""
        return self._map(lambda tensor: tensor.to(device))


def group_outcomes(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """How much outcome signal the groups an update reads carry, the quantities of the sparse
    regime: ``groups/all_fail``, the share of groups in which no trajectory won (GRPO's outcome
    advantage is 0 on every row of such a group); ``groups/explorer_wins``, the share of the wins
    that came from trajectories another policy played (RSPO's explorer, ``source != "learner"``);
    and ``groups/explorer_rescued``, the share of groups whose only wins are such trajectories,
    i.e. groups that would carry no outcome signal without the explorer. ``groups/wins`` and
    ``groups/explorer_win_count`` count the wins: a share of the wins over many iterations is the
    ratio of their sums (averaging ``groups/explorer_wins`` counts an iteration without a win as 0).

    >>> def played(group, won, source="learner"): return Trajectory(0, group, 0, "", float(won), 0.0, 0.0, won, float(won), 1, 0, source)
    >>> outcomes = group_outcomes([played(0, False), played(0, False), played(1, True), played(1, False), played(2, False), played(2, True, "explorer")])
    >>> outcomes["groups/all_fail"], outcomes["groups/explorer_wins"], outcomes["groups/explorer_rescued"]
    (0.3333333333333333, 0.5, 0.3333333333333333)
    >>> outcomes["groups/wins"], outcomes["groups/explorer_win_count"]
    (2, 1)
    """
    wins: dict[int, list[int]] = {}  # group -> [learner wins, other wins]
    for t in trajectories:
        counts = wins.setdefault(t.group_id, [0, 0])
        counts[t.source != "learner"] += int(t.won)
    groups = max(len(wins), 1)
    learner_wins, other_wins = (sum(column) for column in zip(*wins.values())) if wins else (0, 0)
    return {
        "groups/all_fail": sum(a + b == 0 for a, b in wins.values()) / groups,
        "groups/explorer_wins": other_wins / max(learner_wins + other_wins, 1),
        "groups/explorer_rescued": sum(a == 0 and b > 0 for a, b in wins.values()) / groups,
        "groups/wins": learner_wins + other_wins,
        "groups/explorer_win_count": other_wins,
    }


def _longest_first(lengths: Sequence[tuple[int, int]]) -> list[int]:
    """Row indices by decreasing real length (prompt + response), ties in row order."""
    return sorted(range(len(lengths)), key=lambda i: -sum(lengths[i]))


def pack_by_tokens(lengths: Sequence[tuple[int, int]], budget: int) -> list[list[int]]:
    """Rows packed greedily, longest first, into groups whose padded size stays within ``budget``.

    ``lengths`` are each row's real ``(prompt, response)`` token counts. A group, cut to its own
    padding (``TrainingBatch.trimmed``), is ``rows x (longest prompt + longest response)`` tokens:
    that is what a forward pass's activations scale with, so that is what the budget bounds (it
    is at least ``rows x`` the group's longest row). A row over the budget on its own gets its own
    group. Sorting by length first puts rows of similar length together, so little is padding.
    This is verl's ``ppo_max_token_len_per_gpu`` (dynamic batch size) for padded batches.

    >>> pack_by_tokens([(3, 1), (10, 6), (4, 2), (2, 2)], 24)
    [[1], [2, 0, 3]]
    """
    groups: list[list[int]] = []
    prompt = response = 0
    for i in _longest_first(lengths):
        p, r = lengths[i]
        if groups and (len(groups[-1]) + 1) * (max(prompt, p) + max(response, r)) <= budget:
            groups[-1].append(i)
            prompt, response = max(prompt, p), max(response, r)
        else:
            groups.append([i])
            prompt, response = p, r
    return groups


def rows_by_key(keys: Sequence[Hashable]) -> list[list[int]]:
    """The indices of equal ``keys`` grouped, groups in order of first appearance, each in order
    (a chain's or a trajectory's rows).

    >>> rows_by_key(["a", "b", "a", "c"])
    [[0, 2], [1], [3]]
    """
    groups: dict[Hashable, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def micro_batches(
    lengths: Sequence[tuple[int, int]], max_rows: int, max_tokens: int | None = None, chains: Sequence[Hashable] | None = None,
) -> list[list[int]]:
    """The rows of each forward pass: ``pack_by_tokens`` under ``max_tokens`` (then any number of
    rows), else ``max_rows`` at a time.

    Rows are taken longest first either way, so each group, cut to its own padding, pads little.

    >>> micro_batches([(3, 1), (10, 6), (4, 2), (2, 2)], 2)
    [[1, 2], [0, 3]]

    ``chains``: a key per row, equal for rows whose real tokens are prefixes of one sequence (their
    host in ``policies/packing.py``, for a policy that scores such rows from one pass). Rows of a
    chain go to one pass together and count as one row of the chain's longest row's lengths, in
    ``max_rows`` and in the token budget: what the pass runs. Without chains every row is its own.

    >>> micro_batches([(3, 1), (10, 6), (4, 2), (2, 2)], 2, chains=[2, 1, 2, 3])
    [[1, 0, 2], [3]]
    """
    units = [[i] for i in range(len(lengths))] if chains is None else rows_by_key(chains)
    longest = [max((lengths[i] for i in unit), key=sum) for unit in units]
    if max_tokens is not None:
        groups = pack_by_tokens(longest, max_tokens)
    else:
        order = _longest_first(longest)
        groups = [order[start:start + max_rows] for start in range(0, len(order), max_rows)]
    return [[i for u in group for i in units[u]] for group in groups]


def _lengths(rows: Sequence[Sequence[Any]]) -> Any:
    import numpy as np
    import torch

    return torch.from_numpy(np.fromiter(map(len, rows), dtype=np.int64, count=len(rows)))


def _filled(lengths: Any, width: int, right: bool) -> Any:
    """``(len(lengths), width)`` bool: the cells rows ``lengths`` long fill, right-padded or left-padded.

    Assigning a flat concatenation of the rows through this mask places every row at once, in
    row-major order (one indexing call, not a slice assignment per row)."""
    import torch

    columns = torch.arange(width)
    return columns < lengths[:, None] if right else columns >= width - lengths[:, None]


def _flat(rows: Sequence[Sequence[Any]], dtype: Any) -> Any:
    """The rows' items, concatenated, as a 1-D tensor of ``dtype`` (``torch.long`` or ``torch.float32``).

    Read by ``numpy.fromiter``: ``torch.tensor`` of a Python list converts item by item at several
    times the cost, and a rollout's prompts are hundreds of thousands of ids."""
    import numpy as np
    import torch

    kind = np.int64 if dtype == torch.long else np.float32
    return torch.from_numpy(np.fromiter(chain.from_iterable(rows), dtype=kind, count=sum(map(len, rows))))


def _place(target: Any, mask: Any, values: Any) -> None:
    """``target[mask] = values`` for CPU tensors, through their NumPy views (which share their
    memory): torch's boolean-mask assignment runs a ``nonzero`` pass and an ``index_put``, ~5x
    NumPy's on a rollout's prompts (hundreds of thousands of ids)."""
    target.numpy()[mask.numpy()] = values.numpy()


def _allowed_tensor(rows: Sequence[StepRow], R: int) -> Any:
    """``TrainingBatch.allowed`` of ``rows``: -1-padded ``(B, R, K)`` ids, None if none is constrained."""
    import torch

    constrained = [(b, row.allowed_token_ids) for b, row in enumerate(rows) if row.allowed_token_ids is not None]
    if not constrained:
        return None
    for b, per_position in constrained:
        if len(per_position) != len(rows[b].response_ids):
            raise ValueError(
                f"row {b}: allowed ids for {len(per_position)} positions, {len(rows[b].response_ids)} response tokens"
            )
    cells = [ids for _, per_position in constrained for ids in per_position]  # (row, position) pairs in order
    counts = _lengths(cells)
    K = int(counts.max()) if cells else 1
    per_cell = torch.full((len(cells), K), -1, dtype=torch.long)
    _place(per_cell, _filled(counts, K, right=True), _flat(cells, torch.long))
    per_row = torch.full((len(constrained), R, K), -1, dtype=torch.long)
    _place(per_row, _filled(_lengths([per_position for _, per_position in constrained]), R, right=True), per_cell)
    allowed = torch.full((len(rows), R, K), -1, dtype=torch.long)
    allowed[[b for b, _ in constrained]] = per_row
    return allowed


def to_batch(rows: Sequence[StepRow], pad_token_id: int, device: Any = None) -> TrainingBatch:
    """Left-pad prompts, right-pad responses, and align behaviour log-probs (and allowed ids) with
    the responses.

    Every row is placed by one masked assignment per tensor (``_filled``), not a slice assignment
    per row: a rollout of the fast policy has thousands of rows."""
    import torch

    if not rows:
        raise ValueError("to_batch needs at least one row")
    for b, row in enumerate(rows):
        if len(row.logprobs) != len(row.response_ids):
            raise ValueError(f"row {b}: {len(row.logprobs)} log-probs for {len(row.response_ids)} response tokens")
    prompt_lengths = _lengths([row.prompt_ids for row in rows])
    response_lengths = _lengths([row.response_ids for row in rows])
    P = int(prompt_lengths.max())
    R = max(int(response_lengths.max()), 1)
    B = len(rows)
    input_ids = torch.full((B, P + R), pad_token_id, dtype=torch.long)
    prompt, response = _filled(prompt_lengths, P, right=False), _filled(response_lengths, R, right=True)
    _place(input_ids[:, :P], prompt, _flat([row.prompt_ids for row in rows], torch.long))
    _place(input_ids[:, P:], response, _flat([row.response_ids for row in rows], torch.long))
    attention = torch.cat([prompt, response], dim=1).long()
    response_mask = response.float()
    old = torch.zeros((B, R), dtype=torch.float32)
    _place(old, response, _flat([row.logprobs for row in rows], torch.float32))
    batch = TrainingBatch(input_ids, attention, response_mask, old, P, _allowed_tensor(rows, R))
    return batch if device is None else batch.to(device)
