"""The original engine (TextWorld ``PddlEnv`` + ALFWorld's demangler) against ``engine.Game``.

The cross-checks run only where ``textworld`` and ``alfworld`` import and the real games exist
beside the repository (``../shared/data/alfworld/json_2.1.1``); they play a seeded random walk on
each of the 200 ``valid_train`` games through both engines and compare every feedback, validity,
admissible list and ``won``; about a third of each walk's moves follow the Python planner's next
command, so walks also take, heat, cool, clean, turn on lamps and win (73 of the 200 walks win).
They are ``slow``: TextWorld needs about 2.5 s to load and reset a game and 50-250 ms per step,
about 8 s a game, 25 minutes for the 200 on one core. The import-hint tests run everywhere.
"""

import importlib.util
import json
import random
import subprocess
import sys
import zlib
from pathlib import Path

import gymnasium as gym
import pytest

import rspo_gym  # noqa: F401
from rspo_gym.envs.alfworld import textworld_backend
from rspo_gym.envs.alfworld.engine import Game
from rspo_gym.envs.alfworld.pddl import find_games, load_game
from rspo_gym.envs.alfworld.scenes import tiny_kitchen
from rspo_gym.envs.alfworld.textworld_backend import INSTALL_HINT, TextWorldGame, patch_game_data

from rspo_gym.envs.alfworld.planner import optimal_plan

SHARED_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"
GAMES_DIR = SHARED_DATA / "alfworld" / "json_2.1.1"
# One case per game where the original engine can run; a single skipped case elsewhere.
_ENGINE_INSTALLED = all(importlib.util.find_spec(name) for name in ("textworld", "alfworld", "fast_downward"))
TRAIN_GAMES = (
    find_games(GAMES_DIR / "valid_train") if _ENGINE_INSTALLED and (GAMES_DIR / "valid_train").is_dir() else []
)
WALK_STEPS = 20
MALFORMED = (
    "",
    "   ",
    "jump",
    "go to",
    "go to nowhere 1",
    "take",
    "LOOK",
    "look around",
    "inventory please",
    "go  to countertop 1",
    "examine",
)


def _original_engine():
    pytest.importorskip("textworld")
    pytest.importorskip("alfworld")
    pytest.importorskip("fast_downward")


# ------------------------------------------------------------------------- runs everywhere
def test_importing_the_backend_does_not_import_textworld():
    code = (
        "import sys, rspo_gym.envs.alfworld.textworld_backend\n"
        "loaded = [m for m in ('textworld', 'alfworld', 'fast_downward') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_engine_raises_import_error_with_install_hint(monkeypatch, tmp_path):
    for module in ("textworld", "textworld.core", "textworld.envs", "textworld.envs.pddl", "fast_downward",
                   "alfworld", "alfworld.agents", "alfworld.agents.environment",
                   "alfworld.agents.environment.alfred_tw_env"):
        monkeypatch.setitem(sys.modules, module, None)  # None in sys.modules makes the import fail
    monkeypatch.setattr(textworld_backend, "_ENGINE", {})
    with pytest.raises(ImportError) as caught:
        TextWorldGame(tiny_kitchen(), tmp_path / "game.tw-pddl")
    assert str(caught.value) == (
        "backend='textworld' needs the original engine: pip install 'rspo-gym[textworld]' "
        "(textworld[pddl]==1.7.0 and alfworld==0.4.2; Fast-Downward compiles from source, about 2 minutes)"
    )
    assert str(caught.value) == INSTALL_HINT


def test_patch_upgrades_a_2_1_1_game_once():
    old = {
        "pddl_domain": "(define (domain alfred)\n(:action look)\n)\n",
        "grammar": 'a "put {o} in/on {r}" b "You put the {o.name} in/on the {r.name}." c "You arrive at {lend.name}."',
        "pddl_problem": "(problem)",
    }
    new = patch_game_data(old)
    assert new["grammar"].startswith(
        'a "move {o} to {r}" b "You move the {o.name} to the {r.name}." c "You arrive at {r.name}."'
    )
    assert "action help {" in new["grammar"] and 'template :: "help";' in new["grammar"]
    assert new["pddl_domain"].count("(:action help") == 1 and new["pddl_domain"].rstrip().endswith(")\n)")
    assert patch_game_data(new) == new  # idempotent: 0.4 games are left as they are
    assert old["grammar"].startswith('a "put')  # the input is not modified


# ------------------------------------------------------------------ needs the original engine
def _compare(where: str, ours: tuple, theirs: tuple) -> None:
    assert ours == theirs, f"{where}\n  python:    {ours!r}\n  textworld: {theirs!r}"


def _walk(path: Path, steps: int = WALK_STEPS) -> bool:
    """A seeded walk in both engines, compared at every step; returns whether it won."""
    world = load_game(path)
    original, python = TextWorldGame(world, path), Game(world)
    rng = random.Random(zlib.crc32(str(path.relative_to(GAMES_DIR)).encode()))
    name = path.parent.parent.name
    _compare(f"{name}: reset", python.reset(), original.reset())
    any_won = False
    for step in range(steps):
        _compare(f"{name}: admissible before step {step}", python.admissible_commands(), original.admissible_commands())
        admissible = python.admissible_commands()
        roll = rng.random()
        plan = None
        if 0.17 <= roll < 0.45:
            plan = optimal_plan(world, python.state)
        if roll < 0.12:
            command = rng.choice(MALFORMED)
        elif roll < 0.17:
            command = f"  {rng.choice(admissible)} "  # admissible once stripped, as in TextWorld
        elif plan:  # towards the goal, so walks also take, heat, cool, clean, use, move and win
            command = plan[0]
        elif roll < 0.7:
            others = [c for c in admissible if not c.startswith("go to ")]
            command = rng.choice(others)
        else:
            command = rng.choice(admissible)
        ours, theirs = python.step(command), original.step(command)
        _compare(f"{name}: step {step} {command!r} (feedback, valid)", ours, theirs)
        _compare(f"{name}: won after step {step} {command!r}", python.won, original.won)
        assert original.state.key() == python.state.key()
        any_won = any_won or original.won
    _compare(f"{name}: final admissible", python.admissible_commands(), original.admissible_commands())
    return any_won


@pytest.mark.slow
@pytest.mark.parametrize("path", TRAIN_GAMES or [None], ids=lambda p: p.parent.parent.name if p else "no-data")
def test_random_walks_match_textworld(path):
    if path is None:
        pytest.skip(f"real ALFWorld games not found at {GAMES_DIR / 'valid_train'}")
    _original_engine()
    _walk(path)


@pytest.mark.slow
def test_gym_env_with_textworld_backend_matches_python_backend():
    if not TRAIN_GAMES:
        pytest.skip(f"real ALFWorld games not found at {GAMES_DIR / 'valid_train'}")
    _original_engine()
    games = TRAIN_GAMES[:3]
    original = gym.make("rspo/ALFWorld-v0", games=games, backend="textworld")
    python = gym.make("rspo/ALFWorld-v0", games=games)
    for task_id in (0, 2):
        obs_t, info_t = original.reset(options={"task_id": task_id})
        obs_p, info_p = python.reset(options={"task_id": task_id})
        assert obs_t == obs_p and info_t == info_p
        assert obs_t.startswith("-= Welcome to TextWorld, ALFRED! =-") and "help" in info_t["admissible_actions"]
        rng = random.Random(task_id)
        for _ in range(6):
            command = rng.choice(info_p["admissible_actions"] + ["jump"])
            result_t, result_p = original.step(command), python.step(command)
            assert result_t == result_p
            info_t = result_t[-1]
            info_p = result_p[-1]
        assert original.unwrapped.game.state.key() == python.unwrapped.game.state.key()
        assert original.unwrapped.process_potential() == python.unwrapped.process_potential()
    help_t, help_p = original.step("help"), python.step("help")
    assert help_t[0].lstrip("\n").startswith("Available commands:\n  look:")
    assert help_t == help_p


@pytest.mark.slow
def test_optimal_plan_wins_in_textworld():
    """The Python planner's plan, played in TextWorld, wins on the last step (reward 1, terminated)."""
    if not TRAIN_GAMES:
        pytest.skip(f"real ALFWorld games not found at {GAMES_DIR / 'valid_train'}")
    _original_engine()
    pytest.importorskip("rspo_gym.envs.alfworld.planner")
    games = [p for p in TRAIN_GAMES if json.loads(p.read_text()).get("solvable", True)][:2]
    env = gym.make("rspo/ALFWorld-v0", games=games, backend="textworld")
    for task_id in range(len(games)):
        env.reset(options={"task_id": task_id})
        plan = env.unwrapped.expert_plan()
        for i, command in enumerate(plan):
            _, reward, terminated, _, info = env.step(command)
            assert info["valid"] and info["won"] == (i == len(plan) - 1) and terminated == info["won"]
        assert reward == 1.0
