"""Speed and memory of ``rspo/WebShop-v0``: catalog + index build, env creation, step and reset latency.

For each catalog size in ``--sizes`` (default ``1000 100000``; ``1000000`` works but is slow),
in one process, single-threaded, with seeded rngs:

- build: the first ``gym.make("rspo/WebShop-v0", num_products=n)`` of the process, split into
  catalog + goal set (``shared_catalog``), generating the search documents (one catalog item per
  product) and BM25 indexing (``SearchIndex.build`` via ``index_for``); current RSS
  (``/proc/self/statm``) after each stage and the process peak RSS (``ru_maxrss``; it only grows,
  so later sizes include earlier sizes' peak and objects — envs of earlier sizes stay alive);
- second env: another ``gym.make`` with the same settings; it must share the catalog and the index
  (checked by identity) — its time and RSS delta;
- steps: a random agent through the Gym API (``TimeLimit`` 15 steps): on the search page it plays
  ``search[<instruction>]`` with a real instruction from ``human_goals.json`` (seeded choice;
  the env's own instructions when the file is missing), elsewhere a uniformly random
  ``click[...]`` from ``info["admissible_actions"]``; latencies of ``env.step`` (including the
  observation and ``info``) are kept per action kind, until ``--steps`` clicks and ``--searches``
  searches have been timed (after ``--warmup`` untimed steps); ``reset(seed=...)`` latency is timed
  at every episode start.

``--estimate 1000000`` estimates a size from a timed partial run: it creates the catalog of that
size, generates and indexes only the first ``--partial`` of its documents (the index is thrown
away, no env is made) and extrapolates time and RSS linearly (search latency is estimated as the
partial index's query latency scaled by the same factor, a rough upper bound since posting-list
work is linear and the per-query overhead is not)::

    python benchmarks/webshop_speed.py --sizes 1000 100000 --estimate 1000000

Prints a table and writes JSON (``--out``, default ``results/benchmarks/webshop_speed.json``) with
the upstream reference numbers of ``docs/reference/webshop.md`` §5 and our ratios to them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import os
import platform
import random
import sys
import time
from pathlib import Path

from common import load_instructions, peak_rss_mb, write_json  # benchmarks/common.py (the script folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import rspo_gym  # noqa: E402, F401
from rspo_gym.envs.webshop import env as env_mod  # noqa: E402
from rspo_gym.envs.webshop.catalog import Catalog  # noqa: E402
from rspo_gym.envs.webshop.search import SearchIndex  # noqa: E402
from rspo_gym.envs.webshop.session import MAX_QUERY_CHARS, Page  # noqa: E402

ENV_ID = "rspo/WebShop-v0"
DEFAULT_GOALS = ROOT.parent / "shared" / "data" / "webshop" / "human_goals.json"
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

#: docs/reference/webshop.md §5.1: unmodified upstream text env, 1,000 products, 2-core x86.
UPSTREAM = {
    "source": "docs/reference/webshop.md §5.1-5.2 (upstream princeton-nlp/WebShop text env, 1000 products)",
    "step_ms_range": [8.0, 43.0],
    "step_p50_ms": {"search": 37.5, "item": 20.0, "option": 13.7, "sub": 8.1, "prev": 12.8, "buy": 21.4},
    "step_mean_ms": {"search": 43.0, "item": 21.3, "option": 14.0, "sub": 7.1, "prev": 18.9, "buy": 22.6},
    "reset_p50_ms": 2.9,
    "peak_rss_mb_1k": 542.0,
    "peak_rss_gb_full_catalog": [12.0, 18.0],
}
# Our click kinds (Session._clickable_map) -> upstream's table rows.
UPSTREAM_KIND = {"item": "item", "option": "option", "sub": "sub", "to_results": "prev",
                 "prev_page": "prev", "to_item": "prev", "buy": "buy"}


def rss_mb() -> float:
    """Current resident set size in MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_SIZE / 2**20


def load_queries(path: Path) -> list[str] | None:
    instructions = load_instructions(path)
    return None if instructions is None else [g for g in instructions if usable_query(g)]


def usable_query(q: str) -> bool:
    """What the env accepts as a search (others would be cheap invalid actions, not searches)."""
    return (bool(q.strip()) and len(q) <= MAX_QUERY_CHARS and q.isascii() and q.isprintable()
            and "[" not in q and "]" not in q and not q.split(" ", 1)[0].startswith("<"))


def pct(xs: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(xs) * 1e3, q)), 3) if xs else float("nan")


def stats(xs: list[float]) -> dict:
    return {"n": len(xs), "p50_ms": pct(xs, 50), "p95_ms": pct(xs, 95),
            "mean_ms": round(float(np.mean(xs)) * 1e3, 3) if xs else float("nan"),
            "max_ms": round(float(np.max(xs)) * 1e3, 3) if xs else float("nan")}


# --------------------------------------------------------------------------- build + envs
def make_first_env(n: int, seed: int) -> tuple[gym.Env, dict]:
    """Cold ``gym.make`` with the env module's ``shared_catalog`` / ``index_for`` wrapped to time
    and measure each stage of the real construction path."""
    stages: dict[str, float] = {}
    orig_catalog, orig_index_for = env_mod.shared_catalog, env_mod.index_for

    def timed_catalog(*a, **kw):
        t0 = time.perf_counter()
        out = orig_catalog(*a, **kw)
        stages["catalog_s"] = time.perf_counter() - t0
        stages["rss_after_catalog_mb"] = rss_mb()
        return out

    def timed_index_for(key, docs_factory, **kw):
        def factory():
            t0 = time.perf_counter()
            docs = list(docs_factory())
            stages["docgen_s"] = time.perf_counter() - t0
            stages["rss_after_docgen_mb"] = rss_mb()
            stages["docs_chars"] = sum(map(len, docs))
            return docs

        t0 = time.perf_counter()
        out = orig_index_for(key, factory, **kw)
        stages["index_total_s"] = time.perf_counter() - t0
        stages["rss_after_index_mb"] = rss_mb()
        return out

    env_mod.shared_catalog, env_mod.index_for = timed_catalog, timed_index_for
    try:
        t0 = time.perf_counter()
        env = gym.make(ENV_ID, num_products=n, split="train", catalog_seed=seed, allow_large_catalog=True)
        stages["env_total_s"] = time.perf_counter() - t0
    finally:
        env_mod.shared_catalog, env_mod.index_for = orig_catalog, orig_index_for
    stages["index_build_s"] = stages["index_total_s"] - stages.get("docgen_s", 0.0)
    return env, stages


# --------------------------------------------------------------------------- steps
def play(env: gym.Env, queries: list[str], steps: int, searches: int, warmup: int, seed: int) -> dict:
    rng = random.Random(seed)
    session = lambda: env.unwrapped.session  # noqa: E731
    times: dict[str, list[float]] = {}
    resets: list[float] = []
    episodes = valid = timed = 0
    won = 0
    n_click = n_search = 0
    todo = warmup
    obs, info = env.reset(seed=seed)
    while n_click < steps or n_search < searches:
        sess = session()
        if sess.page is Page.SEARCH:
            action, kind = f"search[{rng.choice(queries)}]", "search"
        else:
            action = rng.choice([a for a in info["admissible_actions"] if a.startswith("click[")])
            kind = sess._clickable_map()[action[6:-1]][0]
        t0 = time.perf_counter()
        obs, reward, terminated, truncated, info = env.step(action)
        dt_s = time.perf_counter() - t0
        if todo > 0:
            todo -= 1
        else:
            times.setdefault(kind, []).append(dt_s)
            timed += 1
            valid += info["valid"]
            if kind == "search":
                n_search += 1
            else:
                n_click += 1
        if terminated or truncated:
            won += bool(info.get("won"))
            episodes += 1
            t0 = time.perf_counter()
            obs, info = env.reset(seed=seed + episodes)
            resets.append(time.perf_counter() - t0)
    clicks = [t for k, v in times.items() if k != "search" for t in v]
    return {
        "timed_steps": timed,
        "valid_fraction": round(valid / max(timed, 1), 4),
        "episodes": episodes,
        "won": won,
        "search": stats(times.get("search", [])),
        "click": stats(clicks),
        "all_steps": stats([t for v in times.values() for t in v]),
        "reset": stats(resets),
        "click_by_kind": {k: stats(v) for k, v in sorted(times.items()) if k != "search"},
    }


def bench_size(n: int, seed: int, queries: list[str] | None, args) -> tuple[dict, list]:
    gc.collect()
    rss0, peak0 = rss_mb(), peak_rss_mb()
    env1, st = make_first_env(n, seed)
    rss1 = rss_mb()
    t0 = time.perf_counter()
    env2 = gym.make(ENV_ID, num_products=n, split="train", catalog_seed=seed, allow_large_catalog=True)
    env2_s = time.perf_counter() - t0
    rss2 = rss_mb()
    shares = env2.unwrapped.index is env1.unwrapped.index and env2.unwrapped.catalog is env1.unwrapped.catalog
    query_source = "human_goals.json"
    if not queries:
        goals = env1.unwrapped.goals
        queries = [g.instruction_text for g in (goals[i] for i in range(min(len(goals), 5000)))]
        queries = [q for q in queries if usable_query(q)]
        query_source = "env instructions"
    runs = play(env1, queries, args.steps, args.searches, args.warmup, seed)
    row = {
        "num_products": n,
        "catalog_s": round(st["catalog_s"], 4),
        "docgen_s": round(st.get("docgen_s", float("nan")), 3),
        "index_build_s": round(st["index_build_s"], 3),
        "first_env_s": round(st["env_total_s"], 3),
        "second_env_s": round(env2_s, 5),
        "second_env_shares_catalog_and_index": shares,
        "docs_mb": round(st.get("docs_chars", 0) / 1e6, 1),
        "rss_before_mb": round(rss0, 1),
        "rss_after_catalog_mb": round(st["rss_after_catalog_mb"], 1),
        "rss_after_docgen_mb": round(st.get("rss_after_docgen_mb", float("nan")), 1),
        "rss_after_index_mb": round(st["rss_after_index_mb"], 1),
        "rss_after_first_env_mb": round(rss1, 1),
        "first_env_rss_delta_mb": round(rss1 - rss0, 1),
        "second_env_rss_delta_mb": round(rss2 - rss1, 2),
        "peak_rss_before_mb": round(peak0, 1),
        "peak_rss_after_build_mb": round(peak_rss_mb(), 1),
        "query_source": query_source,
        **runs,
        "rss_after_steps_mb": round(rss_mb(), 1),
    }
    return row, [env1, env2]


def estimate_size(n: int, partial: int, seed: int, queries: list[str] | None) -> dict:
    """Timed partial build of a size-``n`` catalog: the first ``partial`` documents only."""
    gc.collect()
    rss0 = rss_mb()
    t0 = time.perf_counter()
    catalog = Catalog(n, seed)
    catalog_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    docs = [catalog.search_document(i) for i in range(partial)]
    docgen_s = time.perf_counter() - t0
    rss_docs = rss_mb()
    t0 = time.perf_counter()
    index = SearchIndex.build(docs)
    index_s = time.perf_counter() - t0
    rss_index = rss_mb()
    del docs
    gc.collect()
    rss_kept = rss_mb()
    qs = (queries or ["organic green tea bags", "wireless bluetooth headphones"])[:200]
    qt = []
    for q in qs:
        t0 = time.perf_counter()
        index.search(q)
        qt.append(time.perf_counter() - t0)
    f = n / partial
    del index
    gc.collect()
    return {
        "num_products": n,
        "estimated_from_partial": partial,
        "scale": round(f, 2),
        "partial_docgen_s": round(docgen_s, 3),
        "partial_index_build_s": round(index_s, 3),
        "partial_peak_delta_mb": round(rss_index - rss0, 1),
        "partial_kept_delta_mb": round(rss_kept - rss0, 1),
        "partial_query_p50_ms": pct(qt, 50),
        "est_docgen_s": round(docgen_s * f, 1),
        "est_index_build_s": round(index_s * f, 1),
        "est_first_env_s": round(catalog_s + (docgen_s + index_s) * f, 1),
        "est_build_peak_delta_mb": round((rss_index - rss0) * f, 0),
        "est_kept_delta_mb": round((rss_kept - rss0) * f, 0),
        "est_search_p50_ms_upper": round(pct(qt, 50) * f, 1),
        "note": "linear extrapolation from a partial run, not a measurement",
        "rss_docs_mb": round(rss_docs, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000])
    parser.add_argument("--steps", type=int, default=2000, help="timed click steps per size")
    parser.add_argument("--searches", type=int, default=300, help="at least this many timed searches")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--goals", type=Path, default=DEFAULT_GOALS)
    parser.add_argument("--estimate", type=int, nargs="*", default=[],
                        help="sizes to estimate from a timed partial run (e.g. 1000000)")
    parser.add_argument("--partial", type=int, default=100_000, help="documents built for --estimate")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "webshop_speed.json")
    args = parser.parse_args(argv)
    if any(n <= 0 for n in args.sizes) or args.steps <= 0 or args.searches < 0 or args.warmup < 0:
        parser.error("--sizes and --steps must be positive, --searches and --warmup non-negative")
    if any(n < args.partial for n in args.estimate):
        parser.error("--estimate sizes must be at least --partial")

    queries = load_queries(args.goals)
    import_rss = rss_mb()
    rows, keep = [], []
    for n in args.sizes:
        row, envs = bench_size(n, args.seed, queries, args)
        rows.append(row)
        keep.extend(envs)  # envs stay alive, as in a process that hosts several sizes
        print(f"  done {n}: first env {row['first_env_s']} s", file=sys.stderr, flush=True)
    estimates = [estimate_size(n, args.partial, args.seed, queries) for n in args.estimate]

    print(f"import RSS {import_rss:.0f} MB; upstream: 8-43 ms/step, ~542 MB peak RSS at 1k products")
    cols = ["num_products", "catalog_s", "docgen_s", "index_build_s", "first_env_s", "second_env_s",
            "first_env_rss_delta_mb", "second_env_rss_delta_mb", "peak_rss_after_build_mb"]
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r[c]) for c in cols))
    print("num_products | search p50/p95 ms | click p50/p95 ms | reset p50/p95 ms | valid | searches/clicks")
    for r in rows:
        print(f"{r['num_products']} | {r['search']['p50_ms']}/{r['search']['p95_ms']} | "
              f"{r['click']['p50_ms']}/{r['click']['p95_ms']} | {r['reset']['p50_ms']}/{r['reset']['p95_ms']} | "
              f"{r['valid_fraction']} | {r['search']['n']}/{r['click']['n']}")
    for r in rows:
        kinds = ", ".join(f"{k} {v['p50_ms']}" for k, v in r["click_by_kind"].items())
        print(f"{r['num_products']} click p50 by kind (ms): {kinds}")
    for e in estimates:
        print(f"ESTIMATE {e['num_products']} (from {e['estimated_from_partial']} docs, linear): "
              f"first env ~{e['est_first_env_s']} s (docgen {e['est_docgen_s']} + index {e['est_index_build_s']}), "
              f"build peak +{e['est_build_peak_delta_mb']:.0f} MB, kept +{e['est_kept_delta_mb']:.0f} MB, "
              f"search p50 <~{e['est_search_p50_ms_upper']} ms")

    ratios = []
    for r in rows:
        ours = {"search": r["search"]["p50_ms"]}
        for k, v in r["click_by_kind"].items():
            if k in UPSTREAM_KIND:
                ours.setdefault(UPSTREAM_KIND[k], v["p50_ms"])
        ratios.append({
            "num_products": r["num_products"],
            "upstream_over_ours_p50": {k: round(UPSTREAM["step_p50_ms"][k] / v, 1)
                                       for k, v in ours.items() if v > 0},
            "upstream_reset_over_ours_p50": round(UPSTREAM["reset_p50_ms"] / r["reset"]["p50_ms"], 1),
            "upstream_range_over_ours_all_steps_p50": [
                round(x / r["all_steps"]["p50_ms"], 1) for x in UPSTREAM["step_ms_range"]],
            "upstream_1k_rss_over_our_peak": round(UPSTREAM["peak_rss_mb_1k"] / r["peak_rss_after_build_mb"], 2),
        })
    result = {
        "benchmark": "webshop_speed",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "arch": platform.machine(), "platform": platform.platform(),
                    "processor": platform.processor()},
        "seed": args.seed,
        "steps": args.steps,
        "min_searches": args.searches,
        "warmup": args.warmup,
        "query_source": str(args.goals) if queries else "env instructions",
        "import_rss_mb": round(import_rss, 1),
        "upstream_reference": UPSTREAM,
        "results": rows,
        "ratios_upstream_over_ours": ratios,
        "estimates": estimates,
    }
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
