"""The config reference: every trainer config field with its default and its attribute docstring.

Attribute docstrings (the string literal under a dataclass field) are what ``training/config.py``
documents its fields with, but Python keeps no trace of them at run time: ``help(RSPOConfig)`` does
not show them. This module reads them from the source with ``ast``, so one text serves
``rspo-gym config``, ``rspo-gym train --help`` and the generated ``docs/config.md`` page, and
nothing is written twice. Section titles come from the ``# -- name`` comments between fields;
fields a subclass adds without one are listed under the subclass's name.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
from dataclasses import dataclass
from typing import Any

from rspo_gym.training.config import GiGPOConfig, PPOConfig, RSPOConfig, TrainerConfig

__all__ = ["ALGORITHM_CONFIGS", "ConfigField", "config_fields", "render_text", "render_markdown"]

#: The config class of each ``--algo`` of the command line.
ALGORITHM_CONFIGS: dict[str, type[TrainerConfig]] = {
    "grpo": TrainerConfig, "ppo": PPOConfig, "gigpo": GiGPOConfig, "rspo": RSPOConfig,
}
_SECTION = re.compile(r"^\s*#\s*--\s*(.+?)\s*$")


@dataclass(frozen=True)
class ConfigField:
    """One field of a config class as a reader sees it."""

    name: str
    type: str
    default: Any
    doc: str
    section: str
    defined_in: str
    """The class whose source sets this field's default (a subclass may override its parent's)."""


def _declared_fields(cls: type) -> dict[str, tuple[str, str | None]]:
    """``{field: (section, doc or None)}`` of the fields ``cls`` itself declares, in order."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    body = ast.parse(source).body[0].body
    declared: dict[str, tuple[str, str | None]] = {}
    for index, node in enumerate(body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        section = ""
        for line in reversed(lines[: node.lineno - 1]):
            match = _SECTION.match(line)
            if match:
                section = match.group(1)
                break
        following = body[index + 1] if index + 1 < len(body) else None
        doc = None
        if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant) and isinstance(following.value.value, str):
            doc = inspect.cleandoc(following.value.value)
        declared[node.target.id] = (section, doc)
    return declared


def _declarations(cls: type) -> list[tuple[type, dict[str, tuple[str, str | None]]]]:
    return [(klass, _declared_fields(klass)) for klass in cls.__mro__ if dataclasses.is_dataclass(klass)]


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def config_fields(cls: type[TrainerConfig]) -> list[ConfigField]:
    """Every field of ``cls`` with its effective default and its doc.

    A subclass that overrides a default without a docstring (``RSPOConfig.group_size``) gets the doc
    of the nearest ancestor that declared the field with the same default, else of the nearest
    that documented it at all, so no field is listed without a doc.
    """
    declarations = _declarations(cls)
    result = []
    for field in dataclasses.fields(cls):
        default = _default(field)
        owners = [(klass, declared[field.name]) for klass, declared in declarations if field.name in declared]
        documented = [(klass, info) for klass, info in owners if info[1]]
        same_default = [(klass, info) for klass, info in documented
                        if _default_in(klass, field.name) == default]
        _, (section, doc) = (same_default or documented or owners)[0]
        section = section or next((info[0] for _, info in owners if info[0]), owners[-1][0].__name__)
        result.append(ConfigField(field.name, str(field.type), default, doc or "", section, owners[0][0].__name__))
    return result


def _default_in(klass: type, name: str) -> Any:
    return _default(next(f for f in dataclasses.fields(klass) if f.name == name))


def _one_line(doc: str) -> str:
    return " ".join(doc.split())


def render_text(cls: type[TrainerConfig], width: int = 100) -> str:
    """Plain text for a terminal: ``name = default`` per field, its doc indented below, by section."""
    out = [f"{cls.__name__} fields (set them with --set KEY=VALUE, or as keyword arguments of the trainer):"]
    section = None
    for item in config_fields(cls):
        if item.section != section:
            section = item.section
            out.append(f"\n-- {section}")
        out.append(f"{item.name} = {item.default!r}    ({item.type})")
        out.extend(textwrap.wrap(_one_line(item.doc), width=width, initial_indent="    ", subsequent_indent="    "))
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return _one_line(text).replace("|", "\\|")


def render_markdown() -> str:
    """The ``docs/config.md`` page: ``TrainerConfig``'s fields, then what each subclass adds or changes."""
    out = [
        "# Config reference",
        "",
        "<!-- Generated by `rspo-gym config --markdown > docs/config.md` from the attribute docstrings",
        "     of rspo_gym/training/config.py; a test fails when this page is out of date. -->",
        "",
        "Every trainer takes these fields as keyword arguments (`GRPOTrainer(env, learning_rate=3e-4)`),",
        "as a config object (`config=PPOConfig(...)`) or on the command line as",
        "`rspo-gym train --set learning_rate=3e-4`; `rspo-gym config --algo ppo` prints the same list, and so does",
        "`print(render_text(PPOConfig))` with `render_text` from `rspo_gym.training.config_reference`.",
        "`GRPOTrainer` uses `TrainerConfig`, `PPOTrainer` `PPOConfig`, `GiGPOTrainer` `GiGPOConfig` and",
        "`RSPOTrainer` `RSPOConfig`, which holds the fields of all three bases.",
        "",
    ]
    parents: list[ConfigField] = []
    for cls in (TrainerConfig, GiGPOConfig, PPOConfig, RSPOConfig):
        fields = config_fields(cls)
        if cls is TrainerConfig:
            shown, parents = fields, fields
            out += [f"## {cls.__name__}", "", _one_line(inspect.getdoc(cls) or "")]
        else:
            inherited = {f.name: f.default for f in parents}
            shown = [f for f in fields if f.name not in inherited or f.default != inherited[f.name]]
            out += [f"## {cls.__name__}", "", _one_line(inspect.getdoc(cls) or ""),
                    "", "The `TrainerConfig` fields, with these added or given other defaults:", ""]
        section = None
        for item in shown:
            if cls is TrainerConfig and item.section != section:
                section = item.section
                out += ["", f"### {section}", "", "| field | default | description |", "|---|---|---|"]
            elif cls is not TrainerConfig and section is None:
                section = cls.__name__
                out += ["| field | default | description |", "|---|---|---|"]
            out.append(f"| `{item.name}` | `{item.default!r}` | {_cell(item.doc)} |")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
