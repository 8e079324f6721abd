"""Left-padded rows moved to start at column 0, so a causal pass needs no attention mask.

A training row is ``[left padding][prompt][response][right padding]``. Under a causal mask a token
never sees what follows it, so once each row starts at column 0 its trailing padding cannot reach a
real token, positions are plain ``0..L-1``, and the pass can run without an attention mask. That
lets PyTorch take its fused causal attention kernel (forward and backward) instead of the general
path, which materialises a ``(rows, heads, L, L)`` score tensor to apply the padding mask.
"""

from __future__ import annotations

import torch

__all__ = ["start_aligned", "realigned"]


def start_aligned(input_ids: torch.Tensor, attention_mask: torch.Tensor, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``input_ids`` with each row shifted left by its count of leading padding (freed columns get
    ``pad_id``), and those counts ``(rows,)``.

    >>> ids = torch.tensor([[0, 0, 5, 6], [7, 8, 9, 0]]); mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 0]])
    >>> start_aligned(ids, mask, pad_id=0)
    (tensor([[5, 6, 0, 0],
            [7, 8, 9, 0]]), tensor([2, 0]))
    """
    width = input_ids.shape[1]
    leading = (attention_mask.long().cumsum(-1) == 0).sum(-1)
    columns = torch.arange(width, device=input_ids.device)
    source = columns[None, :] + leading[:, None]
    shifted = input_ids.gather(1, source.clamp(max=width - 1))
    return shifted.masked_fill(source >= width, pad_id), leading


def realigned(hidden: torch.Tensor, leading: torch.Tensor, start: int, length: int) -> torch.Tensor:
    """Columns ``start .. start + length - 1`` of the original (left-padded) layout, read from
    ``hidden`` computed on the ``start_aligned`` layout: ``(rows, length, ...)``."""
    columns = start - leading[:, None] + torch.arange(length, device=hidden.device)[None, :]
    index = columns.clamp(min=0).view(*columns.shape, *([1] * (hidden.dim() - 2))).expand(-1, -1, *hidden.shape[2:])
    return hidden.gather(1, index)
