"""Speed of the WebShop search index (``rspo_gym.envs.webshop.search``): build, query, memory.

Synthetic documents shaped like §4.2 of ``docs/reference/webshop.md``: title 8–20 words, bullet
10–30 words, 0–3 option groups of 2–6 values, joined with :func:`search_text`. Words come from a
fixed vocabulary (the words of ``human_goals.json`` when it exists, with their frequencies; else
5,000 synthetic words with Zipf weights) drawn with a seeded rng. Queries: ``--queries``
instructions from ``human_goals.json`` (seeded sample), else synthetic 14-word queries. Single
process, single thread, k = 50. Peak RSS is the process high-water mark after each size (it only
grows, so later sizes include earlier ones' peak)::

    python benchmarks/webshop_search_speed.py --sizes 1000 100000

Prints a table and writes JSON (``--out``, default ``results/benchmarks/webshop_search_speed.json``).
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from common import load_instructions, peak_rss_mb, write_json  # benchmarks/common.py (the script folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from rspo_gym.envs.webshop.search import SearchIndex, search_text  # noqa: E402

DEFAULT_GOALS = ROOT.parent / "shared" / "data" / "webshop" / "human_goals.json"


def vocabulary(goals: list[str] | None, rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
    if goals:
        counts = Counter(w for g in goals for w in g.lower().split())
        words = sorted(counts)
        weights = np.array([counts[w] for w in words], dtype=np.float64)
    else:
        letters = list("abcdefghijklmnopqrstuvwxyz")
        words = sorted({"".join(rng.choice(letters, size=rng.integers(3, 10))) for _ in range(5000)})
        weights = 1.0 / np.arange(1, len(words) + 1)
    return words, weights / weights.sum()


def make_docs(n: int, words: list[str], probs: np.ndarray, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = np.array(words, dtype=object)
    total = n * 3 * 60
    pool = vocab[rng.choice(len(words), size=total, p=probs)]
    pos = 0

    def take(m: int) -> str:
        nonlocal pos
        if pos + m > total:
            pos = 0
        out = " ".join(pool[pos : pos + m])
        pos += m
        return out

    docs = []
    for _ in range(n):
        title = take(int(rng.integers(8, 21)))
        bullet = take(int(rng.integers(10, 31)))
        options = {
            take(1): [take(int(rng.integers(1, 3))) for _ in range(int(rng.integers(2, 7)))]
            for _ in range(int(rng.integers(0, 4)))
        }
        docs.append(search_text(title, "", [bullet], options))
    return docs


def bench(n: int, queries: list[str], words, probs, seed: int, k: int) -> dict:
    t0 = time.perf_counter()
    docs = make_docs(n, words, probs, seed)
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    index = SearchIndex.build(docs)
    build_s = time.perf_counter() - t0
    del docs
    for q in queries[:5]:  # warm-up (stem memo, page cache)
        index.search(q, k=k)
    times, hits = [], []
    for q in queries:
        t0 = time.perf_counter()
        res = index.search(q, k=k)
        times.append(time.perf_counter() - t0)
        hits.append(len(res))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        index.save(tmp)
        save_s = time.perf_counter() - t0
        size_mb = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
        t0 = time.perf_counter()
        loaded = SearchIndex.load(tmp, mmap=True)
        load_s = time.perf_counter() - t0
        same = all(loaded.search(q, k=k) == index.search(q, k=k) for q in queries[:20])
    ms = np.array(times) * 1e3
    return {
        "num_docs": n,
        "docgen_s": round(gen_s, 3),
        "build_s": round(build_s, 3),
        "query_p50_ms": round(float(np.percentile(ms, 50)), 3),
        "query_p95_ms": round(float(np.percentile(ms, 95)), 3),
        "query_max_ms": round(float(ms.max()), 3),
        "mean_hits": round(float(np.mean(hits)), 1),
        "save_s": round(save_s, 3),
        "load_mmap_s": round(load_s, 4),
        "index_size_mb": round(size_mb, 2),
        "mmap_results_identical": same,
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--goals", type=Path, default=DEFAULT_GOALS)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "results" / "benchmarks" / "webshop_search_speed.json"
    )
    args = parser.parse_args(argv)
    if any(n <= 0 for n in args.sizes) or args.queries <= 0 or args.k <= 0:
        parser.error("--sizes, --queries and --k must be positive")

    rng = np.random.default_rng(args.seed)
    goals = load_instructions(args.goals)
    words, probs = vocabulary(goals, rng)
    if goals:
        picks = rng.choice(len(goals), size=min(args.queries, len(goals)), replace=False)
        queries = [goals[i] for i in sorted(picks)]
        query_source = str(args.goals)
    else:
        queries = [" ".join(rng.choice(words, size=14, p=probs)) for _ in range(args.queries)]
        query_source = "synthetic"
    base_rss = peak_rss_mb()
    rows = [bench(n, queries, words, probs, args.seed + i, args.k) for i, n in enumerate(args.sizes)]

    cols = ["num_docs", "build_s", "query_p50_ms", "query_p95_ms", "index_size_mb", "peak_rss_mb"]
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r[c]) for c in cols))
    result = {
        "benchmark": "webshop_search_speed",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "query_source": query_source,
        "num_queries": len(queries),
        "vocabulary_size": len(words),
        "k": args.k,
        "base_peak_rss_mb": round(base_rss, 1),
        "results": rows,
    }
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
