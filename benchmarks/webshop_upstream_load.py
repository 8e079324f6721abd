"""Cost of reading upstream WebShop's data files (``rspo_gym.envs.webshop.upstream.load_upstream``).

Three measurements:

- hashing: ``file_digest`` (the cache key: a SHA-256 tree hash on all cores) against one-thread
  SHA-256 and BLAKE2b over a file of ``--hash-mb`` random MB (read from the page cache, so this
  is the CPU's share; a cold 5.5 GB read adds the disk's), extrapolated to upstream's full
  ``items_shuffle.json`` (5,479,720,229 bytes);
- parsing: ``iter_json_array`` (the product file as a stream, one record at a time) against
  ``json.load`` of the whole file, over ``--parse-mb`` MB of product-like records (600-word
  descriptions), extrapolated to the full file;
- loading: ``load_upstream`` on a data folder (``--data-dir``, or our v1 catalog exported in
  upstream's formats at each ``--export`` size): the first build (JSON stream, goals, search index,
  cache written) and a later load from the cache, each in a fresh process with its peak RSS.

    python benchmarks/webshop_upstream_load.py --export 1000 10000

Prints a table and writes JSON (``--out``, default ``results/benchmarks/webshop_upstream_load.json``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import peak_rss_mb, run_fresh, write_json  # noqa: E402

FULL_ITEMS_BYTES = 5_479_720_229


def _hash_rates(mb: int) -> dict[str, float]:
    from rspo_gym.envs.webshop.datafiles import file_digest

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "probe.bin"
        with open(path, "wb") as f:
            for _ in range(mb):
                f.write(os.urandom(1 << 20))

        def one_thread(name: str) -> None:
            with open(path, "rb") as f:
                hashlib.file_digest(f, name)

        rates = {}
        for label, run in (("file_digest (sha256 tree, all cores)", lambda: file_digest(path)),
                           ("sha256, one thread", lambda: one_thread("sha256")),
                           ("blake2b, one thread", lambda: one_thread("blake2b"))):
            best = min(_timed(run) for _ in range(2))
            rates[label] = mb / 1024 / best  # GiB/s
        return rates


def _parse_rates(mb: int) -> dict[str, float]:
    import json
    import random

    from rspo_gym.envs.webshop.datafiles import iter_json_array

    r = random.Random(0)
    words = ["".join(r.choice("abcdefghij") for _ in range(r.randint(2, 9))) for _ in range(5000)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "items.json"
        with open(path, "w", encoding="utf-8") as f:
            f.write("[")
            i = 0
            while f.tell() < mb * 1_000_000:
                record = {"asin": f"B{i:09d}", "name": " ".join(r.choices(words, k=15)),
                          "full_description": " ".join(r.choices(words, k=600)),
                          "small_description": [" ".join(r.choices(words, k=30)) for _ in range(5)],
                          "pricing": "$12.99", "customization_options": {"Color": [{"value": w} for w in r.choices(words, k=6)]}}
                f.write((", " if i else "") + json.dumps(record))
                i += 1
            f.write("]")
        size = path.stat().st_size / 1e6

        def load() -> None:
            with open(path, encoding="utf-8") as f:
                json.load(f)

        return {"iter_json_array": size / _timed(lambda: sum(1 for _ in iter_json_array(path))),
                "json.load": size / _timed(load)}


def _timed(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def _load(data_dir: str, num_products: int | None, cache_dir: str) -> dict:
    from rspo_gym.envs.webshop.upstream import load_upstream

    started = time.perf_counter()  # the import (about 1 s) is not counted
    catalog, goals = load_upstream(data_dir, num_products=num_products, cache_dir=cache_dir)
    return {"seconds": time.perf_counter() - started, "peak_rss_mb": peak_rss_mb(),
            "products": len(catalog), "goals": len(goals)}


def _export(folder: Path, n: int) -> None:
    from rspo_gym.envs.webshop.export import export_webshop

    export_webshop(folder, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hash-mb", type=int, default=512)
    parser.add_argument("--parse-mb", type=int, default=200)
    parser.add_argument("--data-dir", type=Path, default=None, help="upstream's data/ folder (default: exports)")
    parser.add_argument("--num-products", type=int, default=1000, help="with --data-dir (0: every product)")
    parser.add_argument("--export", type=int, nargs="*", default=[1000], help="catalog sizes to export and load")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "webshop_upstream_load.json")
    args = parser.parse_args()

    result: dict = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}}
    # loads first: a spawned process's peak RSS counts its parent's, as it was at the fork
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        if args.data_dir is not None:
            cases.append((str(args.data_dir), args.num_products or None, str(args.data_dir)))
        for n in args.export:
            folder = Path(tmp) / f"export-{n}"
            run_fresh([(n, _export, (folder, n))], 1, lambda *a: None)
            cases.append((str(folder), n, f"our v1 catalog exported, {n} products"))
        rows = []
        for data_dir, num, label in cases:
            cache = str(Path(tmp) / f"cache-{len(rows)}")
            got: dict = {}
            for phase in ("build", "cached"):
                run_fresh([(phase, _load, (data_dir, num, cache))], 1, lambda key, res, *a: got.__setitem__(key, res))
            rows.append({"data": label, "num_products": num, **{f"{k}_{m}": v[m] for k, v in got.items()
                                                                  for m in ("seconds", "peak_rss_mb")},
                         "products": got["build"]["products"], "goals": got["build"]["goals"]})
    result["loads"] = rows
    print(f"\n{'data':<45} {'products':>9} {'goals':>7} {'build s':>8} {'build MB':>9} {'cached s':>9} {'cached MB':>10}")
    for r in rows:
        print(f"{r['data']:<45} {r['products']:>9} {r['goals']:>7} {r['build_seconds']:>8.2f} {r['build_peak_rss_mb']:>9.0f} "
              f"{r['cached_seconds']:>9.2f} {r['cached_peak_rss_mb']:>10.0f}")
    rates = _hash_rates(args.hash_mb)
    result["hash_gib_per_s"] = rates
    print(f"\nhashing {args.hash_mb} MB (page cache)          GiB/s   s for 5.48 GB")
    for label, rate in rates.items():
        print(f"  {label:<40} {rate:6.2f}   {FULL_ITEMS_BYTES / 2**30 / rate:6.1f}")

    parse = _parse_rates(args.parse_mb)
    result["parse_mb_per_s"] = parse
    print(f"\nparsing {args.parse_mb} MB of product records   MB/s   s for 5.48 GB")
    for label, rate in parse.items():
        print(f"  {label:<40} {rate:6.0f}   {FULL_ITEMS_BYTES / 1e6 / rate:6.0f}")

    write_json(args.out, result)


if __name__ == "__main__":
    main()
