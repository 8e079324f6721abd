"""The procedural generator: canonical splits, ALFWorld-like scenes, valid and solvable tasks."""

import hashlib
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from rspo_gym.envs.alfworld import vocab
from rspo_gym.envs.alfworld.engine import Game
from rspo_gym.envs.alfworld.generator import (
    HELD_OUT_COMBOS,
    MAX_RECEPTACLES,
    MIN_RECEPTACLES,
    SPLIT_SIZES,
    TASK_TYPE_COUNTS,
    generate_world,
    scene_layout,
    split_scenes,
)
from rspo_gym.envs.alfworld.goals import goal_satisfied
from rspo_gym.envs.alfworld.planner import optimal_plan
from rspo_gym.envs.alfworld.world import World

TRAIN_SAMPLE = 500
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def worlds() -> dict[str, list[World]]:
    """500 train worlds and both valid splits in full, generated once for the module."""
    return {
        "train": [generate_world("train", i) for i in range(TRAIN_SAMPLE)],
        "valid_seen": [generate_world("valid_seen", i) for i in range(SPLIT_SIZES["valid_seen"])],
        "valid_unseen": [generate_world("valid_unseen", i) for i in range(SPLIT_SIZES["valid_unseen"])],
    }


def all_worlds(worlds):
    return [w for split in worlds.values() for w in split]


def fingerprint(world: World) -> str:
    """Everything a world holds, in a text that does not depend on hash randomisation."""
    state = world.initial
    parts = [
        world.name, world.receptacles, world.items, world.task, sorted(world.can_contain),
        state.agent_location, state.held, [sorted(c) for c in state.contents],
        [sorted(c) for c in state.item_locations], sorted(state.opened), sorted(state.hot),
        sorted(state.cool), sorted(state.clean), sorted(state.sliced), sorted(state.toggled),
    ]
    return repr(parts)


def scene_of(world: World) -> int:
    return int(world.name.rsplit("-", 1)[1])


def combo_of(world: World) -> tuple[str, str, str]:
    task = world.task
    return (task.task_type, task.object_type, task.parent_type or task.toggle_type)


# ------------------------------------------------------------------------------- API, determinism
def test_split_sizes_and_argument_errors():
    assert dict(SPLIT_SIZES) == {"train": None, "valid_seen": 140, "valid_unseen": 134}
    assert generate_world("valid_seen", 139).task.text.endswith(".")
    assert fingerprint(generate_world("train", np.int64(5))) == fingerprint(generate_world("train", 5))
    generate_world("train", 10**12)  # train is unbounded
    for split in ("test", "valid", "", None, 3):
        with pytest.raises(ValueError, match="Unknown split"):
            generate_world(split, 0)
    for split, index in (("valid_seen", 140), ("valid_unseen", 134), ("train", -1), ("valid_seen", -1)):
        with pytest.raises(ValueError, match="out of range"):
            generate_world(split, index)
    for index in (1.0, "3", None, True):
        with pytest.raises(TypeError, match="integer"):
            generate_world("train", index)


def test_same_world_and_same_texts_every_time():
    for split, index in (("train", 0), ("train", 12345), ("valid_seen", 7), ("valid_unseen", 133)):
        first, second = generate_world(split, index), generate_world(split, index)
        assert fingerprint(first) == fingerprint(second)
        game_a, game_b = Game(first), Game(second)
        assert game_a.reset() == game_b.reset()
        assert game_a.admissible_commands() == game_b.admissible_commands()


def test_same_worlds_in_another_process_with_other_hash_seed():
    keys = [("train", i) for i in range(0, 40, 7)] + [("valid_seen", 3), ("valid_unseen", 100)]
    code = (
        "import hashlib, sys\n"
        "from tests.envs.alfworld.test_generator import fingerprint\n"
        "from rspo_gym.envs.alfworld.generator import generate_world\n"
        f"text = ''.join(fingerprint(generate_world(s, i)) for s, i in {keys!r})\n"
        "print(hashlib.sha256(text.encode()).hexdigest())\n"
    )
    expected = hashlib.sha256("".join(fingerprint(generate_world(s, i)) for s, i in keys).encode()).hexdigest()
    for hash_seed in ("1", "987"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO)}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == expected


def test_different_indices_and_splits_give_different_worlds(worlds):
    prints = [fingerprint(w).split(",", 1)[1] for w in all_worlds(worlds)]  # without the name
    assert len(set(prints)) == len(prints)
    intros = {Game(w).reset() for w in worlds["train"][:200]}
    assert len(intros) > 180  # the intro shows only the layout and the task sentence


def test_generation_is_fast():
    start = time.perf_counter()
    for i in range(200):
        generate_world("train", 50_000 + i)
    mean = (time.perf_counter() - start) / 200
    assert mean < 0.015, f"{mean * 1000:.1f} ms per world"  # ~2 ms on a 2-core laptop-class machine


# ------------------------------------------------------------------------------------- layouts
def test_layouts_depend_on_the_scene_only_and_stay_in_size():
    sizes, sharing = [], []
    for room, scenes in vocab.SCENES.items():
        for scene in scenes:
            layout = scene_layout(scene)
            assert layout == scene_layout(scene) and layout.room == room
            assert MIN_RECEPTACLES <= len(layout.receptacles) <= MAX_RECEPTACLES
            types = {rtype for rtype, _, _ in layout.receptacles}
            assert types <= {rtype for rtype, _, _, _ in vocab.ROOM_RECEPTACLES[room]}
            locations = Counter(location for _, location, _ in layout.receptacles)
            assert sorted(locations) == list(range(len(locations)))
            sizes.append(len(layout.receptacles))
            sharing.append(sum(n for n in locations.values() if n > 1))
            for rtype, _, openable in layout.receptacles:
                assert not openable or rtype in vocab.OPENABLE
    assert 15 < statistics.mean(sizes) < 30 and 1.5 < statistics.mean(sharing) < 6
    with pytest.raises(ValueError, match="Unknown scene"):
        scene_layout(31)


def test_a_layout_recurs_identically_across_tasks(worlds):
    by_scene: dict[int, tuple] = {}
    for world in all_worlds(worlds):
        layout = scene_layout(scene_of(world))
        assert len(world.receptacles) == len(layout.receptacles)
        assert by_scene.setdefault(scene_of(world), world.receptacles) == world.receptacles
    assert len(by_scene) > 60


# --------------------------------------------------------------------------------------- splits
def test_valid_unseen_layouts_and_combinations_are_held_out(worlds):
    unseen_scenes = set(vocab.UNSEEN_SCENES)
    assert {s for scenes in split_scenes("valid_unseen").values() for s in scenes} == unseen_scenes
    for split in ("train", "valid_seen"):
        assert not {s for scenes in split_scenes(split).values() for s in scenes} & unseen_scenes
        for world in worlds[split]:
            assert scene_of(world) not in unseen_scenes
            assert combo_of(world) not in HELD_OUT_COMBOS
    combos = Counter(combo_of(w) for w in worlds["valid_unseen"])
    assert {scene_of(w) for w in worlds["valid_unseen"]} == unseen_scenes
    assert set(combos) <= HELD_OUT_COMBOS and len(combos) >= 15
    seen = {fingerprint(w).split(",", 1)[1] for w in worlds["train"]}
    assert not seen & {fingerprint(w).split(",", 1)[1] for w in worlds["valid_seen"]}


def test_held_out_combinations_are_valid_task_parameters():
    for task_type, otype, parent in HELD_OUT_COMBOS:
        assert otype in vocab.TASK_OBJECTS[task_type]
        if task_type == "look_at_obj_in_light":
            assert parent in vocab.LOOK_LAMPS
        else:
            assert parent in vocab.TASK_PARENTS[task_type] and vocab.can_contain(parent, otype)


def test_task_type_mix_and_rooms(worlds):
    for split in ("valid_seen", "valid_unseen"):
        counts = Counter(w.task.task_type for w in worlds[split])
        assert tuple(counts[t] for t in vocab.TASK_TYPES) == TASK_TYPE_COUNTS[split]
    counts = Counter(w.task.task_type for w in worlds["train"])
    mix = TASK_TYPE_COUNTS["train"]
    for task_type, n in zip(vocab.TASK_TYPES, mix):
        assert abs(counts[task_type] / TRAIN_SAMPLE - n / sum(mix)) < 0.06
    room_of = {scene: room for room, scenes in vocab.SCENES.items() for scene in scenes}
    for world in all_worlds(worlds):
        assert room_of[scene_of(world)] in vocab.TASK_ROOMS[world.task.task_type]


# ---------------------------------------------------------------------------------------- tasks
def test_task_parameters_and_text(worlds):
    used = set()
    for world in all_worlds(worlds):
        task = world.task
        assert task.object_type in vocab.TASK_OBJECTS[task.task_type]
        if task.task_type == "look_at_obj_in_light":
            assert task.parent_type is None and task.toggle_type in vocab.LOOK_LAMPS
        else:
            assert task.toggle_type is None and task.parent_type in vocab.TASK_PARENTS[task.task_type]
            assert any(r.rtype == task.parent_type for r in world.receptacles)
            assert (task.parent_type, task.object_type) in world.can_contain
        texts = [
            t.format(obj=task.object_type, recep=task.parent_type, toggle=task.toggle_type) + "."
            for t in vocab.GOAL_TEMPLATES[task.task_type]
        ]
        assert task.text in texts and task.text == task.text.lower()
        used.add((task.task_type, texts.index(task.text)))
    assert used == {(t, i) for t in vocab.TASK_TYPES for i in (0, 1)}  # both templates of each type


def test_initial_state_invariants(worlds):
    extra = {(r, o) for r, objects in vocab.INITIAL_EXTRA.items() for o in objects}
    for world in all_worlds(worlds):
        state, task = world.initial, world.task
        assert not goal_satisfied(world, state)
        assert world.receptacles_at_location(state.agent_location) == ()
        assert state.held == -1 and not state.opened and not state.hot and not state.clean and not state.toggled
        targets = [i for i, item in enumerate(world.items) if item.otype == task.object_type]
        low, high = vocab.TARGET_COUNT[task.task_type]
        assert low <= len(targets) <= high
        holders = {o: [r for r, c in enumerate(state.contents) if o in c] for o in range(len(world.items))}
        assert all(len(holders[o]) == 1 and world.items[o].pickupable for o in targets)
        for o, receptacles in holders.items():
            item = world.items[o]
            assert len(receptacles) <= 1
            for r in receptacles:
                rtype = world.receptacles[r].rtype
                assert world.receptacles[r].location in state.item_locations[o]
                if item.otype == task.object_type:
                    assert (rtype, item.otype) in world.can_contain and rtype != task.parent_type
                    assert (o in state.cool) == (rtype in vocab.COOL_RECEPTACLES)
                elif item.pickupable and item.otype not in vocab.LOOSE_PICKUPABLE:
                    assert (rtype, item.otype) in world.can_contain or (rtype, item.otype) in extra
                else:
                    assert rtype in dict(vocab.FIXTURE_HOSTS[item.otype][1])
        assert state.cool <= set(targets)
        for r, contents in enumerate(state.contents):
            assert len(contents) <= vocab.MAX_ITEMS.get(world.receptacles[r].rtype, vocab.DEFAULT_MAX_ITEMS)
        if task.task_type == "look_at_obj_in_light":
            lamps = [o for o, item in enumerate(world.items) if item.otype == task.toggle_type]
            assert len(lamps) == 1 and world.items[lamps[0]].toggleable
            assert world.receptacles[holders[lamps[0]][0]].rtype in dict(vocab.LAMP_RECEPTACLES)
        if task.task_type == "pick_two_obj_and_place":
            assert len(targets) >= 2


# ---------------------------------------------------------------------------------- solvability
def assert_solved_within_50_steps(world: World) -> int:
    plan = optimal_plan(world, world.initial)
    assert plan is not None and 0 < len(plan) <= 50, world.name
    game = Game(world)
    game.reset()
    for command in plan:
        assert not game.won
        _, valid = game.step(command)
        assert valid, (world.name, command)
    assert game.won, world.name
    return len(plan)


def test_a_sample_is_solved_by_the_optimal_planner(worlds):
    sample = worlds["train"][:165] + worlds["valid_seen"][::2] + worlds["valid_unseen"][::2]
    lengths = Counter()
    for world in sample:
        lengths[world.task.task_type] = max(lengths[world.task.task_type], assert_solved_within_50_steps(world))
    assert set(lengths) == set(vocab.TASK_TYPES) and max(lengths.values()) <= 15


@pytest.mark.slow
def test_two_thousand_tasks_are_solvable():
    for i in range(1726):
        assert_solved_within_50_steps(generate_world("train", 10_000 + i))
    for split in ("valid_seen", "valid_unseen"):
        for i in range(SPLIT_SIZES[split]):
            assert_solved_within_50_steps(generate_world(split, i))


# ------------------------------------------------------------------------------ vs. real games
def test_statistics_resemble_the_real_games(alfworld_data, worlds):
    """Reported, loosely checked: receptacles 7-55 (mean 24), objects 19-73 (mean 44), 4.3 of a
    game's receptacles share a location (real games; reference section 3.3)."""
    from rspo_gym.envs.alfworld.pddl import find_games, load_game

    real = [load_game(p) for p in find_games(alfworld_data / "json_2.1.1" / "valid_seen")]
    stats = {}
    for name, sample in (("real", real), ("generated", all_worlds(worlds))):
        receptacles = [len(w.receptacles) for w in sample]
        objects = [len(w.items) for w in sample]
        sharing = [sum(len(v) for v in w.receptacles_at.values() if len(v) > 1) for w in sample]
        stats[name] = (statistics.mean(receptacles), statistics.mean(objects), statistics.mean(sharing))
        print(
            f"{name}: receptacles {min(receptacles)}-{max(receptacles)} (mean {stats[name][0]:.1f}), "
            f"objects {min(objects)}-{max(objects)} (mean {stats[name][1]:.1f}), sharing {stats[name][2]:.2f}"
        )
    for real_mean, generated_mean in zip(stats["real"], stats["generated"]):
        assert 0.5 * real_mean < generated_mean < 1.5 * real_mean
