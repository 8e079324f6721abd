"""The API reference (``docs/reference/``) covers every public name of ``rspo_gym``,
``rspo_gym.envs`` and ``rspo_gym.algos``, and the docstrings it renders read well on the site:
no pointers to texts a reader cannot see, doctest blocks shown as code, Sphinx roles as code."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

import rspo_gym

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"
_DIRECTIVE = re.compile(r"^::: ([\w.]+)\n((?:    .*\n)*)", re.M)
_MEMBERS = re.compile(r"^\s+members: (false|\[[^\]]*\])", re.M)
#: what a docstring must not point at: notes outside the package (the docs' own rule)
_UNSEEN = re.compile(r"design §|reference §|\bF[123]\b|the issue|issue text|issue \d")
PACKAGES = ("rspo_gym", "rspo_gym.envs", "rspo_gym.algos")


def directives() -> dict[str, list[str] | None]:
    """``{dotted path: members shown}`` of every ``:::`` directive of the reference pages: the
    listed members, ``[]`` for ``members: false``, None where the defaults (every public one) hold."""
    found: dict[str, list[str] | None] = {}
    for page in sorted(REFERENCE.glob("*.md")):
        for path, options in _DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            listed = _MEMBERS.search(options)
            if listed is None:
                found[path] = None
            else:
                found[path] = [] if listed.group(1) == "false" else [m.strip() for m in listed.group(1)[1:-1].split(",")]
    return found


def resolve(path: str) -> object:
    """The object a dotted path names: the longest importable module, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(path)


def rendered_docstrings(path: str, members: list[str] | None) -> dict[str, str]:
    """The docstrings the reference shows for a directive: the object's, a class's own
    ``__init__``'s (merged into the class's) and those of the members shown."""
    obj = resolve(path)
    docs = {path: inspect.getdoc(obj) or ""}
    if inspect.isclass(obj):
        init = vars(obj).get("__init__")
        docs[f"{path}.__init__"] = (init.__doc__ or "") if init is not None else ""
        shown = [n for n in vars(obj) if not n.startswith("_")] if members is None else members
        docs.update({f"{path}.{n}": inspect.getdoc(getattr(obj, n)) or "" for n in shown})
    return docs


def test_every_public_name_is_in_the_reference():
    pytest.importorskip("torch")
    shown = {id(resolve(path)) for path in directives()}
    missing = [
        f"{package}.{name}" for package in PACKAGES for name in importlib.import_module(package).__all__
        if name != "__version__" and id(getattr(importlib.import_module(package), name)) not in shown
    ]
    assert not missing, f"not in docs/reference/: {missing}"


def test_reference_directives_name_real_objects_and_members():
    pytest.importorskip("torch")
    for path, members in directives().items():
        obj = resolve(path)
        assert all(hasattr(obj, member) for member in members or ()), (path, members)


def test_rendered_docstrings_point_at_nothing_a_reader_cannot_see():
    pytest.importorskip("torch")
    docs = {}
    for path, members in directives().items():
        docs.update(rendered_docstrings(path, members))
    found = {path: m.group(0) for path, doc in docs.items() if (m := _UNSEEN.search(doc))}
    assert not found, found


def test_unseen_pattern_catches_design_notes():
    assert _UNSEEN.search("the rank swap (design §5)") and not _UNSEEN.search("the rank swap")


@pytest.fixture(scope="module")
def markup():
    """The site's griffe extension (``docs/_ext/docstring_markup.py``), loaded from its file."""
    pytest.importorskip("griffe")
    spec = importlib.util.spec_from_file_location("docstring_markup", ROOT / "docs" / "_ext" / "docstring_markup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_doctest_blocks_become_code_fences_at_their_indent(markup):
    text = "Sums.\n\n>>> 1 + 1\n2\n>>> [0.25, 0.25]\n[0.25, 0.25]\n\nReturns:\n    x\n\n    >>> f()\n    3"
    assert markup.markdown(text) == (
        "Sums.\n\n```pycon\n>>> 1 + 1\n2\n>>> [0.25, 0.25]\n[0.25, 0.25]\n```\n\n"
        "Returns:\n    x\n\n    ```pycon\n    >>> f()\n    3\n    ```"
    )


def test_sphinx_roles_become_code(markup):
    assert markup.markdown("see :func:`~rspo_gym.algos.losses.agg_loss`, :class:`Trainer`") == "see `agg_loss`, `Trainer`"
    assert markup.markdown("no role: `agg_loss`") == "no role: `agg_loss`"
