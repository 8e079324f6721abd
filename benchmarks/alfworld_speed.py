"""Speed of ``rspo/ALFWorld-v0``: steps/s, load and reset times, optionally against TextWorld.

Measured in one process, single-threaded, with deterministic seeds:

- steps/s: an agent that plays random admissible commands with ~10 % malformed ones and reads the
  admissible list and ``won`` after every step (episodes of ``--episode-steps``; resets not timed);
- load: first load of a game (real games: parse ``game.tw-pddl``; generated tasks: generate);
- reset: restart of an already loaded game, reading the intro and the admissible list.

Sections: real games (``--games DIR``, default ``../shared/data/alfworld/json_2.1.1/valid_seen``
beside the repository) and generated tasks (``split="train"``), each through the Gym API
(``gym.make("rspo/ALFWorld-v0")``) and through the bare engine (``engine.Game``).
``--textworld`` also plays the first ``--tw-games`` real games with the original engine
(TextWorld ``PddlEnv`` + ALFWorld's ``AlfredDemangler``, grammar patched to 0.4) and with ours on
the same games and command sequences, and prints the ratios. It needs textworld and alfworld
installed (``pip install 'rspo-gym[textworld]'``)::

    python benchmarks/alfworld_speed.py
    /work/tw-venv/bin/python benchmarks/alfworld_speed.py --textworld --tw-games 12

Prints a table and writes JSON (``--out``, default ``results/benchmarks/alfworld_speed.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402

import rspo_gym  # noqa: E402, F401
from rspo_gym.envs.alfworld.engine import Game  # noqa: E402
from rspo_gym.envs.alfworld.pddl import find_games, load_game  # noqa: E402

ENV_ID = "rspo/ALFWorld-v0"
DEFAULT_GAMES = ROOT.parent / "shared" / "data" / "alfworld" / "json_2.1.1" / "valid_seen"
MALFORMED = ("jump", "go to", "take apple", "look around", "", "open the fridge", "put it down", "go to mars 1")
MALFORMED_RATE = 0.1


def choose(rng: random.Random, admissible: list[str]) -> str:
    if rng.random() < MALFORMED_RATE:
        return rng.choice(MALFORMED)
    return rng.choice(admissible)


# --------------------------------------------------------------------------- bare engines
def bench_game(games: list, steps: int, episode_steps: int, resets: int, seed: int) -> dict:
    """Steps and resets on loaded ``Game``-like objects (ours or ``TextWorldGame``), round-robin."""
    step_time = 0.0
    done_steps = 0
    won_count = 0
    valid_count = 0
    index = 0
    while done_steps < steps:
        game = games[index % len(games)]
        rng = random.Random(seed * 1_000_003 + index)
        game.reset()
        admissible = game.admissible_commands()
        for _ in range(min(episode_steps, steps - done_steps)):
            command = choose(rng, admissible)
            start = time.perf_counter()
            _, valid = game.step(command)
            admissible = game.admissible_commands()
            won = game.won
            step_time += time.perf_counter() - start
            done_steps += 1
            valid_count += valid
            if won:
                won_count += 1
                break
        index += 1
    reset_time = 0.0
    for _ in range(resets):
        for game in games:
            start = time.perf_counter()
            game.reset()
            game.admissible_commands()
            _ = game.won
            reset_time += time.perf_counter() - start
    return {
        "steps": done_steps,
        "episodes": index,
        "valid_fraction": valid_count / max(done_steps, 1),
        "wins": won_count,
        "steps_per_s": done_steps / step_time,
        "us_per_step": 1e6 * step_time / done_steps,
        "resets": resets * len(games),
        "reset_ms": 1e3 * reset_time / max(resets * len(games), 1),
        "resets_per_s": resets * len(games) / reset_time if reset_time else None,
    }


def bench_bare_real(paths: list[Path], args) -> dict:
    start = time.perf_counter()
    worlds = [load_game(path) for path in paths]
    load = (time.perf_counter() - start) / len(paths)
    result = bench_game([Game(world) for world in worlds], args.steps, args.episode_steps, args.resets, args.seed)
    return {"games": len(paths), "load_ms": 1e3 * load, **result}


def bench_bare_generated(args) -> dict:
    from rspo_gym.envs.alfworld.generator import generate_world

    start = time.perf_counter()
    worlds = [generate_world("train", task_id) for task_id in range(args.generated)]
    load = (time.perf_counter() - start) / args.generated
    result = bench_game([Game(world) for world in worlds], args.steps, args.episode_steps, args.resets, args.seed)
    return {"games": args.generated, "load_ms": 1e3 * load, **result}


# ------------------------------------------------------------------------------ Gym API
def bench_gym(env: gym.Env, n_tasks: int, args) -> dict:
    """``gym.make`` env: first reset of each task (load), resets, then steps (info read each step)."""
    start = time.perf_counter()
    for task_id in range(n_tasks):
        env.reset(options={"task_id": task_id})
    load = (time.perf_counter() - start) / n_tasks
    start = time.perf_counter()
    for _ in range(args.resets):
        for task_id in range(n_tasks):
            _, info = env.reset(options={"task_id": task_id})
            _ = info["admissible_actions"], info["won"]
    reset_time = time.perf_counter() - start
    step_time, done_steps, episode = 0.0, 0, 0
    while done_steps < args.steps:
        rng = random.Random(args.seed * 1_000_003 + episode)
        _, info = env.reset(options={"task_id": episode % n_tasks})
        for _ in range(min(args.episode_steps, args.steps - done_steps)):
            command = choose(rng, info["admissible_actions"])
            start = time.perf_counter()
            _, _, terminated, truncated, info = env.step(command)
            _ = info["admissible_actions"], info["won"]
            step_time += time.perf_counter() - start
            done_steps += 1
            if terminated or truncated:
                break
        episode += 1
    resets = args.resets * n_tasks
    return {
        "games": n_tasks,
        "load_ms": 1e3 * load,
        "steps": done_steps,
        "episodes": episode,
        "steps_per_s": done_steps / step_time,
        "us_per_step": 1e6 * step_time / done_steps,
        "resets": resets,
        "reset_ms": 1e3 * reset_time / resets,
        "resets_per_s": resets / reset_time,
    }


# ---------------------------------------------------------------------------- TextWorld
def bench_textworld(paths: list[Path], args) -> tuple[dict, dict]:
    """The original engine and ours on the same games and the same command streams."""
    from rspo_gym.envs.alfworld.textworld_backend import TextWorldGame, load_textworld

    start = time.perf_counter()
    load_textworld()
    import_s = time.perf_counter() - start
    worlds = [load_game(path) for path in paths]
    start = time.perf_counter()
    originals = [TextWorldGame(world, path) for world, path in zip(worlds, paths)]
    tw_load = (time.perf_counter() - start) / len(paths)
    steps = args.tw_steps_per_game * len(paths)
    kwargs = {"steps": steps, "episode_steps": args.tw_steps_per_game, "resets": args.tw_resets, "seed": args.seed}
    # TextWorldGame also steps its lockstep engine.Game; its cost (microseconds) is included.
    tw = {"games": len(paths), "load_ms": 1e3 * tw_load, "import_s": import_s, **bench_game(originals, **kwargs)}
    start = time.perf_counter()
    worlds = [load_game(path) for path in paths]
    ours_load = (time.perf_counter() - start) / len(paths)
    # Ours on the same games with the same episode length and seeds, longer for a stable timing
    # (its first episodes replay the command streams TextWorld got).
    kwargs.update(steps=max(args.steps, steps), resets=max(args.resets, args.tw_resets))
    ours = {"games": len(paths), "load_ms": 1e3 * ours_load, **bench_game([Game(w) for w in worlds], **kwargs)}
    return ours, tw


# ---------------------------------------------------------------------------------- main
def _num(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=Path, default=DEFAULT_GAMES if DEFAULT_GAMES.is_dir() else None,
                        help="directory of real game.tw-pddl files (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=20000, help="timed steps per section (default: %(default)s)")
    parser.add_argument("--episode-steps", type=int, default=50, help="steps per episode (default: %(default)s)")
    parser.add_argument("--resets", type=int, default=5, help="timed resets per game (default: %(default)s)")
    parser.add_argument("--generated", type=int, default=200, help="generated train tasks (default: %(default)s)")
    parser.add_argument("--textworld", action="store_true", help="also run the original TextWorld engine")
    parser.add_argument("--tw-games", type=int, default=12, help="real games for --textworld (default: %(default)s)")
    parser.add_argument("--tw-steps-per-game", type=int, default=30, help="(default: %(default)s)")
    parser.add_argument("--tw-resets", type=int, default=2, help="timed resets per game (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "alfworld_speed.json")
    args = parser.parse_args(argv)
    if args.games is not None and not args.games.exists():
        parser.error(f"--games: no such file or directory: {args.games}")

    rows: dict[str, dict] = {}
    notes: list[str] = []
    paths = find_games(args.games) if args.games is not None else []
    if paths:
        print(f"real games: {len(paths)} from {args.games}", flush=True)
        rows["real / engine"] = bench_bare_real(paths, args)
        rows["real / gym"] = bench_gym(gym.make(ENV_ID, games=paths), len(paths), args)
    else:
        notes.append("real games: skipped (no --games directory found)")
    try:
        import rspo_gym.envs.alfworld.generator  # noqa: F401
    except ImportError as error:
        notes.append(f"generated tasks: skipped (generator not importable: {error})")
    else:
        rows["generated / engine"] = bench_bare_generated(args)
        rows["generated / gym"] = bench_gym(gym.make(ENV_ID, split="train"), args.generated, args)
    ratios = {}
    if args.textworld:
        if not paths:
            notes.append("textworld: skipped (needs real games)")
        else:
            subset = paths[: args.tw_games]
            print(f"textworld: {len(subset)} games x {args.tw_steps_per_game} steps", flush=True)
            try:
                ours, tw = bench_textworld(subset, args)
            except ImportError as error:
                notes.append(f"textworld: skipped ({error})")
            else:
                rows["real subset / engine"], rows["real subset / textworld"] = ours, tw
                ratios = {
                    "steps_per_s": ours["steps_per_s"] / tw["steps_per_s"],
                    "load": tw["load_ms"] / ours["load_ms"],
                    "reset": tw["reset_ms"] / ours["reset_ms"],
                }

    columns = ("games", 5), ("steps", 6), ("steps/s", 10), ("us/step", 9), ("load ms", 9), ("reset ms", 9), ("resets/s", 9)
    header = f"{'section':26}" + "".join(f" {title:>{width}}" for title, width in columns)
    print(header)
    print("-" * len(header))
    for name, row in rows.items():
        print(
            f"{name:26} {row['games']:5d} {row['steps']:6d} {_num(row['steps_per_s']):>10} {row['us_per_step']:9.1f}"
            f" {row['load_ms']:9.2f} {row['reset_ms']:9.3f} {_num(row['resets_per_s']):>9}"
        )
    if ratios:
        print(f"ours / textworld (same games, same seeds): steps/s x{ratios['steps_per_s']:.0f}, "
              f"load x{ratios['load']:.0f} faster, reset x{ratios['reset']:.0f} faster")
    for note in notes:
        print(note)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "alfworld_speed",
        "params": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
        "results": rows,
        "ratios_ours_over_textworld": ratios,
        "notes": notes,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
