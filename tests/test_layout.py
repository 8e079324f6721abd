"""The package's rooms: no import circle between modules, and no room importing from a room above it.

Every ``import`` of the package's sources is read with ``ast``, function-level imports included
(they run, only later), ``if TYPE_CHECKING:`` blocks excluded (they never run). Two things are not
imports and are not edges:

- the lazy names of a package's ``__getattr__`` map (``rspo_gym._LAZY``, ``rspo_gym.algos``'s
  trainers and functions, the ``rspo_gym.envs.sb3`` alias): a string naming a module, imported on
  first use by a user. ``from rspo_gym import GRPOTrainer`` *inside* the package, however, is an
  edge to the module that defines ``GRPOTrainer``: the test resolves such names through the maps;
- ``import rspo_gym``: the root package is every module's parent, imported before any of them, and
  all it runs is ``register_envs``; modules import it to have the environments registered.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The rooms, lowest first: a module may import from its own room and from the rooms below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("rspo_gym.errors", "rspo_gym.intervals", "rspo_gym.plotting", "rspo_gym.atomic", "rspo_gym.safe_pickle",
     "rspo_gym.cpu_settings"),  # leaves: nothing of ours
    ("rspo_gym.algos",),  # the math: tensors in, tensors out (no envs, no rollouts, no models)
    ("rspo_gym.envs",),  # the text environments
    ("rspo_gym.compat",),  # the originals' Python APIs over the envs
    ("rspo_gym.rollout",),  # vector envs, prompts, collection, the generation interface
    ("rspo_gym.policies",),  # models and generation backends
    ("rspo_gym.training",),  # the loop, the trainers, configs, checkpoints, run folders
    ("rspo_gym.sb3", "rspo_gym.integrations"),  # add-ons nothing below depends on: SB3, the peer trainers
    ("rspo_gym.compare",),  # comparisons of run folders: reads them, evaluates their policies
    ("rspo_gym.quickstart", "rspo_gym.cli", "rspo_gym.__main__"),  # what a person runs
)
FACADE = "rspo_gym"


# -- reading the imports

def module_names(root: Path, package: str) -> dict[str, Path]:
    """``{dotted module name: file}`` of every module of ``package`` under ``root``."""
    found = {}
    for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, in_getattr: bool = False):
    """``(node, inside a module __getattr__)`` for every node, skipping ``if TYPE_CHECKING:`` bodies."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child.test):
            for other in child.orelse:
                yield other, in_getattr
                yield from _walk(other, in_getattr)
            continue
        inside = in_getattr or (isinstance(child, ast.FunctionDef) and child.name == "__getattr__")
        yield child, inside
        yield from _walk(child, inside)


def _defines(tree: ast.Module, name: str) -> bool:
    """Whether a module's top level binds ``name`` (def, class, assignment or import)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name.split(".")[0]) == name for a in node.names):
            return True
    return False


def lazy_maps(modules: dict[str, Path], trees: dict[str, ast.Module]) -> dict[str, dict[str, str]]:
    """``{module: {lazy name: defining module}}`` of every module with a ``__getattr__``: the
    ``{str: "rspo_gym...."}`` dicts it keeps (read from the imported module: they may be built)."""
    maps = {}
    for name, tree in trees.items():
        if not any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body):
            continue
        module = importlib.import_module(name)
        merged: dict[str, str] = {}
        for value in vars(module).values():
            if isinstance(value, dict) and value and all(
                isinstance(k, str) and isinstance(v, str) and v.split(".")[0] == FACADE for k, v in value.items()
            ):
                merged.update(value)
        maps[name] = merged
    return maps


def _known(modules: dict[str, Path], dotted: str) -> str | None:
    """The longest prefix of ``dotted`` that is a module of ours."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        if ".".join(parts[:cut]) in modules:
            return ".".join(parts[:cut])
    return None


def import_edges(root: Path, package: str, resolve_lazy: bool = True) -> tuple[dict[str, set[str]], list[str], dict[tuple[str, str], str]]:
    """``({module: modules it imports}, problems, {(module, target): "file:line"})``."""
    modules = module_names(root, package)
    trees = {name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, path in modules.items()}
    maps = lazy_maps(modules, trees) if resolve_lazy else {}
    edges: dict[str, set[str]] = {name: set() for name in modules}
    where: dict[tuple[str, str], str] = {}
    problems: list[str] = []
    for name, tree in trees.items():
        is_package = modules[name].name == "__init__.py"
        for node, in_getattr in _walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's package
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in modules:
                        targets.append(full)
                    elif base in maps and alias.name in maps[base]:
                        targets.append(maps[base][alias.name])
                    elif base in maps and base in trees and not _defines(trees[base], alias.name) and alias.name != "*":
                        problems.append(f"{modules[name]}:{node.lineno}: from {base} import {alias.name}: a lazy name in no map")
                    else:
                        targets.append(base)
            elif (
                isinstance(node, ast.Call) and not in_getattr and isinstance(node.func, ast.Attribute)
                and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                targets = [node.args[0].value]
            for target in targets:
                known = _known(modules, target)
                if known is None or known == name or (known == package and package == FACADE):
                    continue
                edges[name].add(known)
                where.setdefault((name, known), f"{modules[name].relative_to(root)}:{node.lineno}")
    return edges, problems, where


# -- the two checks

def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def room_of(module: str, layers=LAYERS) -> tuple[int, str] | None:
    """``(layer, room)`` of a module: the longest room name that is it or its package."""
    best = None
    for level, rooms in enumerate(layers):
        for room in rooms:
            if (module == room or module.startswith(room + ".")) and (best is None or len(room) > len(best[1])):
                best = (level, room)
    return best


def upward_imports(edges: dict[str, set[str]], where: dict[tuple[str, str], str], layers=LAYERS, facade: str = FACADE) -> list[str]:
    """Every import of a module from a room above its own."""
    found = []
    for source, targets in sorted(edges.items()):
        mine = len(layers) if source == facade else room_of(source, layers)[0]
        for target in sorted(targets):
            theirs = len(layers) if target == facade else room_of(target, layers)[0]
            if theirs > mine:
                found.append(f"{where[(source, target)]}: {source} ({room_of(source, layers)[1]}) imports {target} "
                             f"({room_of(target, layers)[1]}), a room above it")
    return found


# -- the package

@pytest.fixture(scope="module")
def graph():
    return import_edges(ROOT, FACADE)


def test_every_module_is_in_a_room():
    unplaced = [m for m in module_names(ROOT, FACADE) if m != FACADE and room_of(m) is None]
    assert not unplaced, f"put these in a room of LAYERS (tests/test_layout.py): {unplaced}"


def test_no_import_circle_between_modules(graph):
    edges, problems, where = graph
    assert not problems, problems
    found = circles(edges)
    detail = [" -> ".join(c) + "\n    " + "\n    ".join(where[(a, b)] + f": {a} imports {b}" for a in c for b in c if (a, b) in where)
              for c in found]
    assert not found, "import circles:\n" + "\n".join(detail)


def test_no_room_imports_from_a_room_above_it(graph):
    edges, problems, where = graph
    assert not problems, problems
    found = upward_imports(edges, where)
    assert not found, "imports against the room order (LAYERS in tests/test_layout.py):\n" + "\n".join(found)


# -- the checker itself

def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def test_checker_finds_a_circle_through_a_function_level_import_and_skips_type_checking(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/low/a.py": "from pkg.low.b import f\n",
        "pkg/low/b.py": "def f():\n    from pkg.low import a\n",
        "pkg/low/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high import d\n",
        "pkg/high/__init__.py": "",
        "pkg/high/d.py": "from pkg.low.c import *\n",
    })
    edges, problems, where = import_edges(tmp_path, "pkg", resolve_lazy=False)
    assert circles(edges) == [["pkg.low.a", "pkg.low.b"]]
    assert where[("pkg.low.b", "pkg.low.a")] == "pkg/low/b.py:2"
    assert "pkg.high.d" not in edges["pkg.low.c"]
    layers = (("pkg.low",), ("pkg.high",))
    assert upward_imports(edges, where, layers, facade="pkg") == []
    _write(tmp_path, {"pkg/low/c.py": "def g():\n    import pkg.high.d\n"})
    edges, _, where = import_edges(tmp_path, "pkg", resolve_lazy=False)
    assert upward_imports(edges, where, layers, facade="pkg") == [
        "pkg/low/c.py:2: pkg.low.c (pkg.low) imports pkg.high.d (pkg.high), a room above it"
    ]


def test_lazy_maps_are_read_from_the_packages_that_keep_them():
    modules = module_names(ROOT, FACADE)
    trees = {name: ast.parse(modules[name].read_text(encoding="utf-8")) for name in (FACADE, "rspo_gym.algos")}
    maps = lazy_maps(modules, trees)
    assert maps[FACADE]["GRPOTrainer"] == maps["rspo_gym.algos"]["GRPOTrainer"] == "rspo_gym.training.grpo"
    assert maps["rspo_gym.algos"]["gae_advantages"] == "rspo_gym.algos.advantages"


# -- names users import keep working

def test_old_sb3_import_path_is_a_lazy_alias():
    code = ("import sys, rspo_gym.envs.sb3 as old; loaded = 'rspo_gym.sb3.envs' in sys.modules; "
            "from rspo_gym.envs.sb3 import make_sb3_env, TextFeaturizer; import rspo_gym.sb3.envs as new; "
            "print(loaded, make_sb3_env is new.make_sb3_env, TextFeaturizer is new.TextFeaturizer, "
            "sorted(old.__all__) == sorted(new.__all__), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.split() == ["False", "True", "True", "True", "False"]


def test_trainers_and_configs_stay_reachable_from_rspo_gym_algos_without_torch():
    code = ("import sys, rspo_gym.algos as algos; print(algos.RSPOConfig.__module__, sorted(algos._TRAINERS) == sorted("
            "('GRPOTrainer', 'PPOTrainer', 'GiGPOTrainer', 'RSPOTrainer', 'TrainerConfig', 'GiGPOConfig', 'PPOConfig', 'RSPOConfig')), "
            "'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.split() == ["rspo_gym.training.config", "True", "False"]
