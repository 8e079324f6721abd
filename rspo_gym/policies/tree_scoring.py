"""Every allowed reply of a constrained turn scored in two forward passes, not one per token.

Constrained decoding walks a prefix trie of the allowed replies (``hf_backend.ActionTrie``): at
each node it needs the model's logits after the prompt plus the node's path. Decoding token by
token pays a forward pass, and a Python round trip, per token of the longest reply (an ALFWorld
command is ~7 tokens). Here the trie itself is the input: after one pass over each prompt (which
fills the KV cache), a second pass feeds the prompt's last token and every inner node of its trie
at once, each node attending to the prompt and to its own ancestors only (a tree-shaped 4D mask,
positions ``prompt length - 1 + depth``). Every node then holds the logits a token-by-token
decoder would have seen there, so sampling can walk the trie afterwards with the same draws.

Prompts are right-padded in the first pass and run without a mask: under a causal mask a real
token never sees the padding after it, and PyTorch's attention takes its fused causal path, which
a padding mask would rule out. The second pass masks that padding out of the cache. Inside an
``HFBackend.session`` a prompt that extends one already run runs only its new tokens, after the kept
keys and values (``prefix_cache``), and its cache has padding between the two: the second pass then
takes the columns each row sees as a mask.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import torch

__all__ = ["FlatTrie", "flatten", "child_logits", "tree_inputs", "attention_kind", "supports_tree_mask"]


@dataclass
class FlatTrie:
    """One prompt's trie as the second pass's queries.

    Query 0 is the prompt's last token (whose output chooses the first reply token); query ``j > 0``
    is an inner trie node (a node with children: every node but the end tokens). ``parents[j]`` is
    the query of ``j``'s parent (-1 for query 0), ``depths[j]`` its distance from query 0 and
    ``children[j]`` the ids that may follow it, sorted (``ActionTrie.choices``). ``query_of`` maps
    ``id(node)`` of each inner node (and of the root) to its query.
    """

    tokens: list[int]
    parents: list[int]
    depths: list[int]
    children: list[list[int]]
    query_of: dict[int, int]

    @cached_property
    def edges(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every (query, child) pair as three ``(edges,)`` long tensors: the query, the child's
        place among the query's ``children`` and its id; ``child_logits`` scores them at once."""
        queries = [j for j, kids in enumerate(self.children) for _ in kids]
        slots = [k for kids in self.children for k in range(len(kids))]
        ids = [token for kids in self.children for token in kids]
        return torch.tensor(queries), torch.tensor(slots), torch.tensor(ids)

    @cached_property
    def ancestry(self) -> torch.Tensor:
        """``(T, T)`` bool: ``[j, i]`` when query ``i`` is ``j`` or one of its ancestors (the
        second pass's mask among the queries). Built one depth at a time: a trie is ~7 deep and
        ~150 queries wide."""
        size = len(self.parents)
        parents = torch.tensor(self.parents)
        seen = torch.eye(size, dtype=torch.bool)
        rows, above = torch.arange(size), parents
        while True:
            present = above >= 0
            if not bool(present.any()):
                return seen
            rows, above = rows[present], above[present]
            seen[rows, above] = True
            above = parents[above]


def flatten(root: dict, last_prompt_token: int) -> FlatTrie:
    """``root``'s inner nodes in breadth-first order (parents before children), ends left out:
    nothing follows an end token, so its output is never needed."""
    flat = FlatTrie([int(last_prompt_token)], [-1], [0], [sorted(root)], {id(root): 0})
    frontier = [root]
    while frontier:
        following = []
        for node in frontier:
            parent = flat.query_of[id(node)]
            for token in sorted(node):
                child = node[token]
                if child:
                    flat.query_of[id(child)] = len(flat.tokens)
                    flat.parents.append(parent)
                    flat.depths.append(flat.depths[parent] + 1)
                    flat.children.append(sorted(child))
                    flat.tokens.append(int(token))
                    following.append(child)
        frontier = following
    return flat


def child_logits(hidden: torch.Tensor, head: torch.nn.Module, tries: Sequence[FlatTrie]) -> list[torch.Tensor]:
    """Per trie, ``(queries, most children)`` float32 logits of each query's ``children`` (0-padded).

    Only the ids a constrained step may take are scored: one dot product per trie edge instead of a
    vocabulary-wide output projection per node (152k ids for Qwen2.5), which would cost more than
    the model's layers. ``hidden`` is ``(rows, queries, hidden)``; ``head`` the model's output
    embeddings (logits are ``head(hidden)``).
    """
    device = hidden.device
    edges = [trie.edges for trie in tries]
    rows = torch.cat([torch.full((len(queries),), b, dtype=torch.long) for b, (queries, _, _) in enumerate(edges)]).to(device)
    queries = torch.cat([queries for queries, _, _ in edges]).to(device)
    index = torch.cat([ids for _, _, ids in edges]).to(device)
    picked = hidden[rows, queries].float()
    scores = (picked * head.weight[index].float()).sum(-1)
    if getattr(head, "bias", None) is not None:
        scores = scores + head.bias[index].float()
    out, start = [], 0
    for trie, (queries, slots, _) in zip(tries, edges):
        table = torch.zeros(len(trie.children), max(map(len, trie.children)), device=device)
        table[queries.to(device), slots.to(device)] = scores[start:start + len(queries)]
        start += len(queries)
        out.append(table)
    return out


def tree_inputs(
    prefix_lengths: Sequence[int], tries: Sequence[FlatTrie], cache_width: int, pad_id: int, visible: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The second pass's ``input_ids``, ``position_ids`` and boolean 4D ``attention_mask``.

    Row ``b``'s cache holds ``prefix_lengths[b]`` real prompt tokens then padding up to
    ``cache_width``; or, when ``visible`` (``(rows, cache_width)`` bool) is given, its real tokens
    are the columns ``visible[b]`` marks, in order (a cache extending reused keys and values has
    padding between the reused and the new ones). Its queries are ``tries[b]``'s, right-padded. A
    padding query attends to itself only, so no attention row is empty (an empty row would be NaN).
    """
    rows, width = len(tries), max(len(t.tokens) for t in tries)
    ids = torch.full((rows, width), pad_id, dtype=torch.long)
    positions = torch.zeros((rows, width), dtype=torch.long)
    mask = torch.zeros((rows, 1, width, cache_width + width), dtype=torch.bool)
    mask[:, 0, :, cache_width:] = torch.eye(width, dtype=torch.bool)
    for b, (length, trie) in enumerate(zip(prefix_lengths, tries)):
        size = len(trie.tokens)
        ids[b, :size] = torch.tensor(trie.tokens, dtype=torch.long)
        positions[b, :size] = length + torch.tensor(trie.depths, dtype=torch.long)
        if visible is None:
            mask[b, 0, :size, :length] = True
        else:
            mask[b, 0, :size, :cache_width] = visible[b]
        mask[b, 0, :size, cache_width:cache_width + size] = trie.ancestry
    return {"input_ids": ids, "position_ids": positions, "attention_mask": mask}


def attention_kind(model) -> str | None:
    """The transformers attention implementation ``model`` runs (``"sdpa"``, ``"eager"``, ...)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft wrappers
    return getattr(getattr(base, "config", None), "_attn_implementation", None)


def supports_tree_mask(model) -> bool:
    """Whether ``model`` takes a custom 4D mask: transformers' SDPA and eager attention pass one
    through unchanged; flash-attention kernels take padding masks only."""
    return attention_kind(model) in ("sdpa", "eager")
