"""The verl-agent change documented in docs/integrations.md, made as a user makes it: the page's
import lines inside ``make_envs`` of a package laid out as verl-agent's, whose env packages'
``__init__`` import their Ray/TextWorld workers (``from .envs import build_alfworld_envs``: torchvision,
ray, TextWorld). verl-agent itself is not installable here; ``test_verl_agent_managers.py`` runs
its real managers where ``VERL_AGENT_SRC`` points at a checkout.

The layout mirrors verl-agent's ``agent_system/environments``: ``env_manager.make_envs`` imports
``build_<env>_envs`` and ``<env>_projection`` from ``env_package/<env>`` inside its branches, and
each ``env_package/<env>/__init__.py`` imports its ``projection`` and then its ``envs``."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_ENV_PACKAGE_INIT = "from .projection import {env}_projection\nfrom .envs import build_{env}_envs\n"
_WORKERS = "import torchvision  # verl-agent's env workers: torchvision, ray, TextWorld\nimport ray\nimport textworld\n"
_PROJECTION = '''
import re
from typing import List


def {env}_projection(actions: List[str], {pool}: List):
    """verl-agent's signature: the <action> of each reply, and whether it parsed."""
    found = [re.search(r"<action>(.*?)</action>", a, re.S) for a in actions]
    return [m.group(1).strip().lower() if m else "" for m in found], [int(m is not None) for m in found]
'''


def documented_change() -> list[str]:
    """The import lines the page's verl-agent section tells a user to put in ``env_manager.py``."""
    page = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    section = page.split("\n## verl-agent\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def make_checkout(root: Path, lines: list[str]) -> None:
    """A verl-agent-shaped package under ``root`` whose ``make_envs`` imports with ``lines``
    (written for ALFWorld; WebShop's branch swaps the env's name, as the page says)."""
    files = {
        "agent_system/__init__.py": "",
        "agent_system/environments/__init__.py": "from .env_manager import make_envs\n",
        "agent_system/environments/env_package/__init__.py": "",
    }
    for env, pool in (("alfworld", "action_pools"), ("webshop", "available_actions")):
        package = f"agent_system/environments/env_package/{env}"
        files[f"{package}/__init__.py"] = _ENV_PACKAGE_INIT.format(env=env)
        files[f"{package}/envs.py"] = _WORKERS
        files[f"{package}/projection.py"] = _PROJECTION.format(env=env, pool=pool)
    imports = {env: textwrap.indent("\n".join(lines).replace("alfworld", env), " " * 8) for env in ("alfworld", "webshop")}
    files["agent_system/environments/env_manager.py"] = f'''
def make_envs(env_name):
    if "alfworld" in env_name:
{imports["alfworld"]}
        envs = build_alfworld_envs(None, 0, 1, 1, {{"num_cpus": 0.1}}, is_train=False)
        return envs, alfworld_projection
    if "webshop" in env_name:
{imports["webshop"]}
        envs = build_webshop_envs(0, 1, 1, {{"num_cpus": 0.1}}, is_train=False, env_kwargs={{"num_products": 200}})
        return envs, webshop_projection
'''
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """The package on ``sys.path``, its modules forgotten again after the test."""
    make_checkout(tmp_path, documented_change())
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n == "agent_system" or n.startswith("agent_system.")]:
        del sys.modules[name]


@pytest.mark.parametrize("env", ["alfworld", "webshop"])
def test_documented_change_runs_make_envs_without_verl_agents_workers(checkout, env):
    from agent_system.environments.env_manager import make_envs

    envs, projection = make_envs(env)
    source = checkout / f"agent_system/environments/env_package/{env}/projection.py"
    assert Path(projection.__code__.co_filename) == source  # verl-agent's own projection, not a copy
    actions, valid = projection(["<think>x</think><action>look</action>", "no tags"], [[], []])
    assert (actions, valid) == (["look", ""], [1, 0])
    assert "torchvision" not in sys.modules and "textworld" not in sys.modules
    first = envs.reset()
    assert len(first[0]) == 1 and isinstance(first[0][0], str)
    envs.close()


def test_projection_without_verl_agent_says_what_is_missing(monkeypatch):
    from rspo_gym.integrations import verl_agent

    monkeypatch.setattr(sys, "path", [p for p in sys.path if not (Path(p) / "agent_system").is_dir()])
    with pytest.raises(ImportError, match="its agent_system package is not importable"):
        verl_agent.verl_agent_projection("alfworld")
