"""Record upstream WebShop's own results on the test fixture (``upstream_fixture.py``).

Usage: ``python tests/envs/webshop/record_upstream.py UPSTREAM_CHECKOUT [--deps DIR]``

``UPSTREAM_CHECKOUT`` is an extracted princeton-nlp/WebShop tree (e.g. ``git -C <mirror> archive
HEAD | tar -x -C /tmp/webshop_upstream``); ``--deps`` a folder on ``sys.path`` holding
``thefuzz`` 0.22.1 (``pip install --target DIR thefuzz==0.22.1``). Upstream's
``engine.load_products``, ``generate_product_prices``, ``goal.get_goals`` and ``get_reward`` run
unchanged on the fixture, as its baseline scripts run them: ``random.seed(233)`` first, then
load, goals, ``random.seed(233); random.shuffle(goals)``. Modules it imports but these functions
never call (pyserini, rank_bm25, cleantext, rich) are stubbed; spaCy's ``en_core_web_sm`` (not
installable offline) is replaced by ``upstream_fixture.fixture_nouns``, the tagger the tests
pass to our env too, so the recorded rewards check everything but spaCy's tagging.

Writes ``tests/envs/webshop/data/upstream_expected.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "data" / "upstream_expected.json"
#: every this-many-th goal is recorded in full (all goals are in the digest)
STRIDE = 25


def goal_digest(goals: list[tuple]) -> str:
    """sha256 of the goals' ``(asin, instruction, attributes, options, price_upper)`` as JSON."""
    return hashlib.sha256(json.dumps(goals, sort_keys=True).encode()).hexdigest()


def _stub_imports(nouns) -> None:
    class Token:
        def __init__(self, text: str) -> None:
            self.text, self.pos_ = text, "NOUN"

    spacy = types.ModuleType("spacy")
    spacy.load = lambda name: (lambda text: [Token(t) for t in nouns(text)])
    stubs = {"spacy": spacy, "cleantext": types.ModuleType("cleantext"),
             "rank_bm25": types.ModuleType("rank_bm25"), "rich": types.ModuleType("rich"),
             "pyserini": types.ModuleType("pyserini"), "pyserini.search": types.ModuleType("pyserini.search"),
             "pyserini.search.lucene": types.ModuleType("pyserini.search.lucene")}
    stubs["rank_bm25"].BM25Okapi = object
    stubs["rich"].print = lambda *a, **k: None
    stubs["pyserini.search.lucene"].LuceneSearcher = object
    sys.modules.update(stubs)


def _goal_row(g: dict) -> tuple:
    options = g["goal_options"]
    options = sorted(options.items()) if isinstance(options, dict) else list(options)
    return (g["asin"], g["instruction_text"], list(g["attributes"]), [list(o) if isinstance(o, tuple) else o for o in options],
            g["price_upper"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("upstream", type=Path)
    parser.add_argument("--deps", type=Path, default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from upstream_fixture import fixture_nouns, write_fixture

    if args.deps is not None:
        sys.path.insert(0, str(args.deps))
    sys.path.insert(0, str(args.upstream))
    _stub_imports(fixture_nouns)
    from web_agent_site.engine import engine, goal  # noqa: E402 - after the stubs

    data = write_fixture(Path(tempfile.mkdtemp()) / "data")
    engine.DEFAULT_ATTR_PATH = str(data / "items_ins_v2_1000.json")
    engine.HUMAN_ATTR_PATH = str(data / "items_human_ins.json")
    out: dict = {"tagger": "fixture_nouns (every alphabetic token is a noun), in place of en_core_web_sm"}
    for human in (True, False):
        for num in (None, 20):
            random.seed(233)
            products, by_asin, prices, _ = engine.load_products(str(data / "items_shuffle_1000.json"), num, human)
            goals = goal.get_goals(products, prices, human)
            random.seed(233)
            random.shuffle(goals)
            rows = [_goal_row(g) for g in goals]
            case: dict = {"num_goals": len(goals), "asins": [p["asin"] for p in products],
                          "goal_digest": goal_digest(rows),
                          "weights": [g["weight"] for g in goals[::STRIDE]],
                          "goals": {str(i): rows[i] for i in range(0, len(rows), STRIDE)}}
            if num is None:
                case["products"] = {p["asin"]: {"price_tag": p["Price"], "price": prices[p["asin"]],
                                                "options": p["options"], "attributes": p["Attributes"],
                                                "bullets": p["BulletPoints"], "query": p["query"]}
                                    for p in products}
                rewards = {}
                for i in range(0, len(goals), STRIDE):
                    g = goals[i]
                    own = by_asin[g["asin"]]
                    if isinstance(g["goal_options"], dict):
                        chosen = dict(g["goal_options"])
                    else:
                        chosen = {name: v for v in g["goal_options"]
                                  for name, values in own["options"].items() if v in values}
                    other = products[(i * 7) % len(products)]
                    other_options = {k: v[-1] for k, v in other["options"].items() if v}
                    rewards[str(i)] = {
                        "own": [chosen, goal.get_reward(own, g, prices[own["asin"]], chosen)],
                        "other": [other["asin"], other_options,
                                  goal.get_reward(other, g, prices[other["asin"]], other_options)],
                    }
                case["rewards"] = rewards
            out[f"{'human' if human else 'synthetic'}_{num or 'all'}"] = case
    OUT.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
