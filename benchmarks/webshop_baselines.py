"""How hard WebShop is here: the WebShop paper's baselines on the test goals, against catalog size.

Policies (each on the first ``--goals`` goals of the ``test`` split, through the Gym API):

- ``rule``: the WebShop paper's rule baseline (Yao et al. 2022, Table 2: score 45.6, success 9.6 %
  on the original's 500 test goals and 1,181,436 products): search the instruction text, click
  the first result, buy it with the default options (none selected);
- ``random``: a uniformly random admissible action (``WebShopEnv.sample_admissible``: the search
  template becomes a search for the instruction), cut at the registered 15-step limit
  (verl-agent's; upstream's env has none), seeded per goal;
- ``expert``: the scripted shopper (``WebShopEnv.expert_action``).

Each (env id, catalog size) runs in its own fresh process, one after another, so its build time
(catalog and search index, the first ``gym.make``) and peak RSS are its own. Besides score and
success the rows give, for the rule: how often the target is the first result and on page 1;
per goal: attributes and options requested, the share with no option and with a price clause, and
the number of products that would score 1.0 (estimated from ``--sample`` products of the target's
type, bought with the options that match best, times the products of that type: a lower bound,
since other types can score 1.0 too); and the share of an instruction's content words (Lucene
tokens without the opening and the price clause) found in the target's title. The instructions'
wording is compared with the 12,087 real ones of ``shared/data/webshop/human_goals.json`` (length,
colour, size and digit shares, ``goals.style_stats``) when that file is there.

Results go to ``--out`` (default ``docs/webshop_baselines.json``, committed, so the report can be
redrawn without rerunning); ``--report`` only redraws: it prints the markdown tables and writes
the figure (``docs/webshop_baselines.png``: score and success against catalog size, the
original's point marked)::

    python benchmarks/webshop_baselines.py                                  # everything (~15 min)
    python benchmarks/webshop_baselines.py --env-ids rspo/WebShop-v1 --sizes 1000000 --policies rule
    python benchmarks/webshop_baselines.py --report

A run merges its rows into the existing JSON (same env id and size are replaced).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import platform
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

from common import load_instructions, write_json  # benchmarks/common.py (on sys.path)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ENV_IDS = ("rspo/WebShop-v0", "rspo/WebShop-v1")
SIZES = (1_000, 10_000, 100_000, 1_000_000)
POLICIES = ("rule", "random", "expert")
OUT = ROOT / "docs" / "webshop_baselines.json"
FIGURE = ROOT / "docs" / "webshop_baselines.png"
HUMAN_GOALS = ROOT.parent / "shared" / "data" / "webshop" / "human_goals.json"
#: The WebShop paper, Table 2 (1,181,436 products, 500 human test goals).
ORIGINAL = {"num_products": 1_181_436, "rule": {"score": 45.6, "success": 9.6}}
_OPENING_WORDS = frozenset("i im am looking for would like to need want buy get find me some "
                           "pair please can you show help searching interested in".split())


@functools.cache
def _analyzer():
    from rspo_gym.envs.webshop.analysis import LuceneEnglishAnalyzer

    return LuceneEnglishAnalyzer()


def content_words(instruction: str) -> set[str]:
    """Lucene-analysed tokens of an instruction without its price clause and opening words."""
    from rspo_gym.envs.webshop.goals import strip_price_clause

    analyze = _analyzer()
    opening = {t for w in _OPENING_WORDS for t in analyze(w)}
    return set(analyze(strip_price_clause(instruction).lower())) - opening


def title_overlap(instruction: str, title: str) -> float:
    """Share of the instruction's content words that the title contains (Lucene tokens)."""
    words = content_words(instruction)
    return len(words & set(_analyzer()(title.lower()))) / len(words) if words else 0.0


def best_options(item, goal) -> dict[str, str]:
    """Per option group, a value that matches a goal option (the group's first value if none)."""
    from rspo_gym.envs.webshop.reward import option_reward

    chosen = {}
    for name, values in item.options.items():
        chosen[name] = next((v for v in values if option_reward([v], goal.options)[0]), values[0])
    return chosen


def same_type_indices(catalog, type_index: int) -> list[int]:
    """Every item of ``type_index``: one per block of ``len(types)`` items (``Catalog.type_index_of``)."""
    n = len(catalog.product_types)
    slot = catalog._type_perm.index(type_index)
    out = []
    for block in range((len(catalog) + n - 1) // n):
        i = block * n + (slot - 7 * block) % n
        if i < len(catalog):
            out.append(i)
    return out


def full_match_count(catalog, goal, target: int, sample: int, rng: random.Random, nouns) -> float:
    from rspo_gym.envs.webshop.reward import score

    same = same_type_indices(catalog, catalog.type_index_of(target))
    picked = same if len(same) <= sample else rng.sample(same, sample)
    wins = 0
    for i in picked:
        it = catalog.item(i)
        wins += score(it.product, goal, best_options(it, goal), it.price, nouns)[0] == 1.0
    return wins / len(picked) * len(same)


def run_config(env_id: str, num_products: int, goals: int, policies: tuple[str, ...],
               sample: int) -> dict:
    """One (env, size) in this (fresh) process: build, then every policy on the test goals."""
    import gymnasium as gym

    import rspo_gym  # noqa: F401
    from rspo_gym.envs.webshop.reward import shared_lexicon_nouns

    start = time.perf_counter()
    env = gym.make(env_id, num_products=num_products, split="test", allow_large_catalog=True)
    u = env.unwrapped
    build_s = time.perf_counter() - start
    peak_build = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n = min(goals, u.num_tasks)
    nouns = shared_lexicon_nouns(u.catalog.noun_lexicon)
    row: dict = {"env_id": env_id, "num_products": num_products, "goals": n,
                 "build_s": round(build_s, 2), "peak_rss_build_mb": round(peak_build)}

    # goal statistics
    gs = [u.goals[u.task_ids[k]] for k in range(n)]
    targets = [u.catalog.index_of(g.asin) for g in gs]
    rng = random.Random(0)
    row["goal_stats"] = {
        "attributes": sum(len(g.attributes) for g in gs) / n,
        "options": sum(len(g.options) for g in gs) / n,
        "no_option_pct": 100 * sum(not g.options for g in gs) / n,
        "price_clause_pct": 100 * sum("price lower than" in g.instruction_text for g in gs) / n,
        "title_overlap": sum(title_overlap(g.instruction_text, g.name) for g in gs) / n,
    }
    t0 = time.perf_counter()
    counts = sorted(full_match_count(u.catalog, g, t, sample, rng, nouns) for g, t in zip(gs, targets))
    row["full_match"] = {"mean": sum(counts) / n, "median": counts[n // 2],
                         "le_1_pct": 100 * sum(c <= 1 for c in counts) / n,
                         "sample": sample, "seconds": round(time.perf_counter() - t0, 1)}

    for policy in policies:
        t0 = time.perf_counter()
        total = wins = steps = first = page1 = 0
        for k in range(n):
            obs, info = env.reset(seed=k, options={"task_id": k})
            reward, done, trunc, t = 0.0, False, False, 0
            while not (done or trunc):
                if policy == "rule":
                    action = (f"search[{info['task']}]" if t == 0 else
                              next(a for a in info["admissible_actions"] if a.startswith("click[b0"))
                              if t == 1 else "click[buy now]")
                elif policy == "random":
                    action = u.sample_admissible()
                else:
                    action = u.expert_action()
                obs, reward, done, trunc, info = env.step(action)
                if policy == "rule" and t == 0:
                    hits = u.session._s.hits
                    first += bool(hits) and hits[0] == targets[k]
                    page1 += targets[k] in hits[:10]
                t += 1
            score = reward if done else 0.0
            total += score
            wins += score == 1.0
            steps += t
        row[policy] = {"score": round(100 * total / n, 2), "success": round(100 * wins / n, 2),
                       "steps": round(steps / n, 2), "seconds": round(time.perf_counter() - t0, 1)}
        if policy == "rule":
            row[policy].update(target_first_pct=100 * first / n, target_page1_pct=100 * page1 / n)
    row["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    env.close()
    return row


#: The levers, one at a time then together: (label, catalog version, goal recipe or None for v0's).
LEVERS = (
    ("v0", 0, None),
    ("attributes off the title (v0's counts)", 0, dict(attribute_weights=(0.5, 0.36, 0.14), option_rate=0.75, unindexed_share=0.0)),
    ("+ unindexed Features attributes first", 0, dict(attribute_weights=(0.5, 0.36, 0.14), option_rate=0.75, unindexed_share=1.0)),
    ("+ every option group requested", 0, dict(attribute_weights=(0.5, 0.36, 0.14), option_rate=1.0, unindexed_share=1.0)),
    ("+ mostly one attribute (v1's goals on v0's catalog)", 0, dict(attribute_weights=(0.9, 0.1), option_rate=1.0, unindexed_share=1.0)),
    ("v1's catalog (2-3 option groups), v0's goals", 1, None),
    ("v1 (v1's catalog and goals)", 1, dict(attribute_weights=(0.9, 0.1), option_rate=1.0, unindexed_share=1.0)),
)


def levers(num_products: int, goals: int) -> list[dict]:
    """The rule on the test goals' targets with each lever of :data:`LEVERS` (no env: a session)."""
    from rspo_gym.envs.webshop.catalog import Catalog
    from rspo_gym.envs.webshop.goals import goals_for
    from rspo_gym.envs.webshop.goals_v1 import TaskRecipe, make_goal_v1
    from rspo_gym.envs.webshop.search import SearchIndex
    from rspo_gym.envs.webshop.session import Session

    rows, indexes = [], {}
    for label, version, recipe in LEVERS:
        catalog = Catalog(num_products, 0, version=version)
        if version not in indexes:
            indexes[version] = SearchIndex.build((catalog.search_document(i) for i in range(num_products)),
                                                 doc_ids=(catalog.asin(i) for i in range(num_products)))
        v0_goals = goals_for(catalog)  # its order picks the targets, the same for every lever
        total = wins = 0
        n = min(goals, len(v0_goals.split("test")))
        for g in v0_goals.split("test")[:n]:
            goal = v0_goals[g] if recipe is None else make_goal_v1(catalog, *v0_goals.locate(g), TaskRecipe(**recipe))
            session = Session(catalog, indexes[version], goal)
            session.step(f"search[{goal.instruction_text}]")
            hits = session._s.hits
            result = session.score_of(hits[0], {})[0] if hits else 0.0
            total += result
            wins += result == 1.0
        rows.append({"lever": label, "score": round(100 * total / n, 1), "success": round(100 * wins / n, 1)})
        print(rows[-1], flush=True)
    return rows


def wording(env_ids: tuple[str, ...], count: int = 2000) -> dict:
    """Instruction wording of each env's first ``count`` goals (1,000 products) and of the real ones."""
    import gymnasium as gym

    import rspo_gym  # noqa: F401
    from rspo_gym.envs.webshop.goals import style_stats

    out = {}
    human = load_instructions(HUMAN_GOALS)
    if human is not None:
        out["human (original)"] = style_stats(human)
    for env_id in env_ids:
        u = gym.make(env_id, num_products=1000, split="train").unwrapped
        out[env_id] = style_stats(u.goals[g].instruction_text for g in range(count))
    return out


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"rows": []}


def report(result: dict, figure: Path) -> str:
    """Markdown tables of ``result`` and the figure at ``figure``."""
    rows = sorted(result["rows"], key=lambda r: (r["env_id"], r["num_products"]))
    lines = ["| env | products | rule score | rule success % | target first % | target on page 1 % "
             "| expert score / success % | random score / success % | attributes / goal | options / goal "
             "| no option % | price clause % | full-match products / goal (mean, median) "
             "| instruction words in title | build s | peak RSS MB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g, f = r["goal_stats"], r["full_match"]

        def pair(p: str) -> str:
            return f"{r[p]['score']:.1f} / {r[p]['success']:.1f}" if p in r else "–"

        rule = r.get("rule", {})
        lines.append(
            f"| {r['env_id'].split('/')[-1]} | {r['num_products']:,} | {rule.get('score', float('nan')):.1f} "
            f"| {rule.get('success', float('nan')):.1f} | {rule.get('target_first_pct', float('nan')):.1f} "
            f"| {rule.get('target_page1_pct', float('nan')):.1f} | {pair('expert')} | {pair('random')} "
            f"| {g['attributes']:.2f} | {g['options']:.2f} | {g['no_option_pct']:.1f} "
            f"| {g['price_clause_pct']:.1f} | {f['mean']:,.0f}, {f['median']:,.0f} "
            f"| {100 * g['title_overlap']:.0f} % | {r['build_s']:.1f} | {r['peak_rss_mb']:,} |")
    lines.append(f"| original (paper) | {ORIGINAL['num_products']:,} | {ORIGINAL['rule']['score']} "
                 f"| {ORIGINAL['rule']['success']} | – | – | – | – | – | – | – | – | – | – | – | – |")
    if result.get("wording"):
        lines += ["", "| instructions | words (mean) | colour word % | size word % | digit % | 'pack of' % |",
                  "|---|---|---|---|---|---|"]
        for name, s in result["wording"].items():
            lines.append(f"| {name} | {s['mean_words']:.1f} | {100 * s['color']:.0f} | {100 * s['size']:.0f} "
                         f"| {100 * s['digit']:.0f} | {100 * s['pack_of']:.0f} |")
    if result.get("levers"):
        sizes = sorted(result["levers"], key=int)
        lines += ["", "| the rule, score / success % | " + " | ".join(f"{int(n):,} products" for n in sizes) + " |",
                  "|---|" + "---|" * len(sizes)]
        for k, lever in enumerate(result["levers"][sizes[0]]):
            cells = [f"{result['levers'][n][k]['score']:.1f} / {result['levers'][n][k]['success']:.1f}" for n in sizes]
            lines.append(f"| {lever['lever']} | " + " | ".join(cells) + " |")
    _figure(rows, figure)
    return "\n".join(lines)


def _figure(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, key, label in ((axes[0], "score", "rule score"), (axes[1], "success", "rule success %")):
        for env_id, style in (("rspo/WebShop-v0", "o--"), ("rspo/WebShop-v1", "s-")):
            pts = [(r["num_products"], r["rule"][key]) for r in rows if r["env_id"] == env_id and "rule" in r]
            if pts:
                ax.plot(*zip(*sorted(pts)), style, label=env_id)
        ax.plot([ORIGINAL["num_products"]], [ORIGINAL["rule"][key]], "r*", markersize=14,
                label="original (WebShop paper)")
        ax.set_xscale("log")
        ax.set_xlabel("products in the catalog")
        ax.set_ylabel(label)
        ax.set_ylim(0, 100 if key == "score" else 40)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="lower left", fontsize=8)
    fig.suptitle("Rule baseline (search the instruction, buy the first result) on 500 test goals")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def _fresh_run(env_id: str, size: int, goals: int, policies: list[str], sample: int) -> dict:
    """:func:`run_config` in a fresh interpreter (its own build time and peak RSS; a plain
    process, so the catalog may start its own document workers)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import webshop_baselines as w; "
            "print(json.dumps(w.run_config(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), "
            "tuple(sys.argv[6:]), int(sys.argv[5]))))")
    done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), env_id, str(size),
                           str(goals), str(sample), *policies], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-ids", nargs="+", default=list(ENV_IDS))
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    parser.add_argument("--goals", type=int, default=500)
    parser.add_argument("--sample", type=int, default=100, help="same-type products per goal for the full-match count")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--figure", type=Path, default=FIGURE)
    parser.add_argument("--report", action="store_true", help="only redraw the tables and figure from --out")
    parser.add_argument("--levers", type=int, metavar="PRODUCTS", default=None,
                        help="instead: the rule with each calibration lever at this catalog size")
    args = parser.parse_args(argv)
    result = _load(args.out)
    if args.levers:
        result["levers"] = {**result.get("levers", {}), str(args.levers): levers(args.levers, args.goals)}
        write_json(args.out, result)
    elif not args.report:
        for env_id in args.env_ids:
            for size in args.sizes:
                row = _fresh_run(env_id, size, args.goals, args.policies, args.sample)
                old = next((r for r in result["rows"] if (r["env_id"], r["num_products"]) == (env_id, size)), {})
                row = {**old, **row}  # a run of fewer policies keeps the others' numbers
                result["rows"] = [r for r in result["rows"]
                                  if (r["env_id"], r["num_products"]) != (env_id, size)] + [row]
                print(json.dumps(row), flush=True)
                result.update(machine={"cpu": platform.processor() or platform.machine(),
                                       "python": platform.python_version(),
                                       "note": "shared 2-core machine, other jobs running"},
                              date=dt.date.today().isoformat())
                write_json(args.out, result)
        result["wording"] = wording(tuple(ENV_IDS))
        write_json(args.out, result)
    print(report(result, args.figure))
    return 0


if __name__ == "__main__":
    sys.exit(main())
