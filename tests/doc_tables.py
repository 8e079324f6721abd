"""Markdown tables of the docs, read back so that tests can hold a page to the code it describes.

- ``tables(markdown)``: every pipe table outside code blocks, as a list of rows (dicts keyed by
  the header's cells).
- ``names(cell)``: the backticked names of a cell (``"`a`, `b/<x>`"`` -> ``["a", "b/<x>"]``).
- ``pattern(name)``: a documented name as a regex; ``<part>`` stands for one name part.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_CODE = re.compile(r"`([^`]+)`")
_PLACEHOLDER = re.compile(r"<[a-z_]+>")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def tables(markdown: str) -> list[list[dict[str, str]]]:
    """The pipe tables of ``markdown`` (code blocks skipped), each a list of rows keyed by header.

    >>> tables("text\\n\\n| key | unit |\\n|---|---|\\n| `a` | s |\\n| `b` | m |\\n\\nafter")
    [[{'key': '`a`', 'unit': 's'}, {'key': '`b`', 'unit': 'm'}]]
    """
    found: list[list[dict[str, str]]] = []
    lines = _FENCE.sub("", markdown).splitlines()
    i = 0
    while i + 1 < len(lines):
        if lines[i].lstrip().startswith("|") and re.fullmatch(r"\s*\|?[\s:|-]+\|?\s*", lines[i + 1]) and "-" in lines[i + 1]:
            header = _cells(lines[i])
            rows = []
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(dict(zip(header, _cells(lines[i]))))
                i += 1
            found.append(rows)
        else:
            i += 1
    return found


def names(cell: str) -> list[str]:
    """The backticked names of a table cell, in order."""
    return _CODE.findall(cell)


def pattern(name: str) -> re.Pattern:
    """``name`` as a full-match regex in which each ``<placeholder>`` is one non-empty name part
    (no ``/``), so ``rollout/success_<task_type>`` matches ``rollout/success_pick_and_place_simple``.

    >>> bool(pattern("rollout/success_<task_type>").fullmatch("rollout/success_look_at_obj_in_light"))
    True
    >>> bool(pattern("rollout/success_<task_type>").fullmatch("rollout/success"))
    False
    """
    parts = _PLACEHOLDER.split(name)
    return re.compile("[^/]+".join(re.escape(part) for part in parts))
