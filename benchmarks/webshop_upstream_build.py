"""Time and memory of building WebShop from upstream-format data files, at upstream's two sizes.

Upstream's data (``items_shuffle*.json`` etc.) cannot be downloaded here, so the files are our own
synthetic catalog exported in upstream's formats (``rspo-gym webshop export``,
``rspo_gym/envs/webshop/export.py``): at 1,000 products (upstream's small set) and at 1,181,436
(its full set, whose ``items_shuffle.json`` is 5.48 GB; ours is smaller, its records are shorter).

For each size in ``--sizes``, each stage runs in a fresh Python process (``--stages``, default all):

- ``export``: ``export_webshop(DIR, N)``; wall time, peak RSS, bytes written;
- ``build``: ``load_upstream(DIR, num_products=...)`` (``rspo_gym/envs/webshop/upstream.py``) with an
  empty cache folder: the products, goals and search index built from the files;
- ``cached``: the same call again, the index now read from the cache;
- then, in each build process, one ``gym.make("rspo/WebShop-v1", data_dir=DIR, ...)`` reset and
  search, to show the result plays (its time is reported apart).

Wall time is measured around the child process (its interpreter start included, about 1 s), peak
RSS is the child's own ``ru_maxrss`` from ``os.wait4`` (worker processes it starts are counted
separately, as their own peaks). Results are merged into ``--out`` (default
``docs/webshop_upstream_build.json``) by (size, stage), so a long size can run alone, detached::

    python benchmarks/webshop_upstream_build.py --sizes 1000
    setsid nohup python benchmarks/webshop_upstream_build.py --sizes 1181436 &> /tmp/big.log &
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

STAGES = ("export", "build", "cached")
FULL = 1_181_436
#: docs/reference/webshop.md §3.3 and §5.2.
UPSTREAM = {
    "items_shuffle_bytes_full": 5_479_720_229,
    "items_shuffle_bytes_1000": 4_467_013,
    "peak_rss_gb_full_estimate": [12.0, 18.0],
    "source": "docs/reference/webshop.md §3.3 (file sizes), §5.2 (memory estimate for upstream's loader)",
}


# ----------------------------------------------------------------------------- child side


def _child(stage: str, size: int, data_dir: Path, cache_dir: Path) -> dict:
    """Run one stage in this (fresh) process; the measured numbers besides wall time and RSS."""
    started = time.perf_counter()
    if stage == "export":
        from rspo_gym.envs.webshop.export import export_webshop

        summary = export_webshop(data_dir, size, progress=False)
        return {"seconds_inner": time.perf_counter() - started, "bytes": summary.files,
                "num_goals": summary.num_goals}
    import gymnasium as gym

    import rspo_gym  # noqa: F401 - registers the envs
    from rspo_gym.envs.webshop.upstream import load_upstream

    num_products = 1000 if size == 1000 else None
    loaded = load_upstream(data_dir, num_products=num_products, human_goals=True, cache_dir=cache_dir)
    inner = time.perf_counter() - started
    rss_after_load = _rss_mb()
    t = time.perf_counter()
    from rspo_gym.envs.webshop.catalog import Catalog
    from rspo_gym.envs.webshop.reward import shared_lexicon_nouns

    nouns = shared_lexicon_nouns(Catalog(1, 0, version=1).noun_lexicon)  # spaCy's model is not installed here
    env = gym.make("rspo/WebShop-v1", data_dir=str(data_dir), num_products=num_products, split="test",
                   cache_dir=str(cache_dir), noun_extractor=nouns)
    obs, info = env.reset(options={"task_id": 0})
    obs, *_ = env.step(f"search[{info['task']}]")
    play = time.perf_counter() - t
    return {"seconds_inner": inner, "rss_after_load_mb": rss_after_load, "env_make_reset_search_s": play,
            "loaded": _describe(loaded), "results_page_starts": obs[:80]}


def _describe(loaded: object) -> str:
    return type(loaded).__name__ if not isinstance(loaded, tuple) else \
        "(" + ", ".join(f"{type(x).__name__}[{len(x)}]" if hasattr(x, "__len__") else type(x).__name__ for x in loaded) + ")"


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


# ----------------------------------------------------------------------------- parent side


def run_stage(stage: str, size: int, data_dir: Path, cache_dir: Path) -> dict:
    """The stage in a fresh process: wall seconds, the child's peak RSS, and what it reported."""
    cmd = [sys.executable, __file__, "--child", stage, "--sizes", str(size), "--data-dir", str(data_dir),
           "--cache-dir", str(cache_dir)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    row = {"size": size, "stage": stage, "seconds": round(seconds, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
           "exit": proc.returncode}
    lines = out.strip().splitlines()
    if proc.returncode == 0 and lines:
        row.update(json.loads(lines[-1]))
    return row


def _merge(path: Path, rows: list[dict]) -> dict:
    old = json.loads(path.read_text()) if path.is_file() else {}
    keep = [r for r in old.get("rows", []) if (r["size"], r["stage"]) not in {(x["size"], x["stage"]) for x in rows}]
    merged = sorted(keep + rows, key=lambda r: (r["size"], STAGES.index(r["stage"])))
    return {
        "benchmark": "benchmarks/webshop_upstream_build.py",
        "updated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()}",
        "upstream": UPSTREAM,
        **({"notes": old["notes"]} if "notes" in old else {}),  # written by hand: how the machine was loaded
        "rows": merged,
    }


def _table(rows: list[dict]) -> str:
    head = "| products | stage | wall (s) | peak RSS (MB) | files (MB) | note |\n|---|---|---|---|---|---|"
    lines = [head]
    for r in rows:
        files = f"{sum(r['bytes'].values()) / 1e6:,.1f}" if isinstance(r.get("bytes"), dict) else ""
        note = "" if r.get("exit", 0) == 0 else f"exit {r['exit']}"
        if "env_make_reset_search_s" in r:
            note = f"then gym.make + reset + search {r['env_make_reset_search_s']:.2f} s"
        lines.append(f"| {r['size']:,} | {r['stage']} | {r['seconds']:,.1f} | {r['peak_rss_mb']:,.0f} | {files} | {note} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, FULL], help="catalog sizes (default: 1000 1181436)")
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES), help="stages to run (default: all)")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/webshop_upstream_build"),
                        help="where the exports go, one folder per size (default: /tmp/webshop_upstream_build)")
    parser.add_argument("--cache-dir", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "webshop_upstream_build.json",
                        help="JSON results, merged by (size, stage) (default: docs/webshop_upstream_build.json)")
    parser.add_argument("--keep", action="store_true", help="keep the exported files and caches afterwards")
    parser.add_argument("--child", choices=STAGES, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.sizes[0], args.data_dir, args.cache_dir)))
        return 0
    rows = []
    for size in args.sizes:
        data_dir = args.data_dir / f"n{size}" / "data"
        cache_dir = args.data_dir / f"n{size}" / "cache"
        for stage in args.stages:
            if stage == "build":
                shutil.rmtree(cache_dir, ignore_errors=True)
            row = run_stage(stage, size, data_dir, cache_dir)
            rows.append(row)
            print(_table([row]).splitlines()[-1], flush=True)
            result = _merge(args.out, [row])
            args.out.write_text(json.dumps(result, indent=2) + "\n")
        if not args.keep and "cached" in args.stages:
            shutil.rmtree(args.data_dir / f"n{size}", ignore_errors=True)
    print()
    print(_table(json.loads(args.out.read_text())["rows"]))
    print(f"wrote {args.out}")
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
