"""A griffe extension of the API reference: docstrings written for ``doctest`` and Sphinx read
well as Markdown.

The package's docstrings carry their examples as bare doctest blocks (``>>>`` lines and their
expected output, ended by a blank line, as the ``doctest`` module reads them), not under an
``Examples:`` heading, so that ``pytest --doctest-modules`` runs them as written. Markdown would
show such a block as three nested block quotes and read ``[0.25, 0.25]`` in its output as a
link; fenced as ``pycon`` it is highlighted Python. Sphinx roles (``:func:`agg_loss```) would
show their role name; they become code spans.
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

#: a doctest block: from a ``>>>`` line to the first blank line (or the end), with its indent
_BLOCK = re.compile(r"^([ \t]*)>>>[ \t].*?(?=\n[ \t]*\n|\Z)", re.M | re.S)
#: a Sphinx cross-reference role; ``~`` shows the last part of the dotted name only
_ROLE = re.compile(r":(?:func|meth|class|attr|mod|data|obj|exc):`(~?)([^`]+)`")


def fenced(text: str) -> str:
    """``text`` with every doctest block in a ``pycon`` code fence at the block's own indent.

    >>> fenced("Adds one.\\n\\n>>> 1 + 1\\n2\\n\\nMore.").splitlines()
    ['Adds one.', '', '```pycon', '>>> 1 + 1', '2', '```', '', 'More.']
    """
    return _BLOCK.sub(lambda m: f"{m.group(1)}```pycon\n{m.group(0)}\n{m.group(1)}```", text)


def unroled(text: str) -> str:
    """``text`` with its Sphinx roles as code spans.

    >>> unroled("see :func:`~rspo_gym.algos.losses.agg_loss` and :attr:`infos`")
    'see `agg_loss` and `infos`'
    """
    return _ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)


def markdown(text: str) -> str:
    """A docstring as the reference renders it: roles unwrapped, then doctest blocks fenced."""
    return fenced(unroled(text))


class DocstringMarkup(Extension):
    """Rewrites the docstring of every object the reference loads (see the module docstring)."""

    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
