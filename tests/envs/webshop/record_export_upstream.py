"""Record what upstream WebShop's own loader makes of an export (``rspo-gym webshop export``).

Usage: ``python tests/envs/webshop/record_export_upstream.py UPSTREAM_CHECKOUT [--num-products 40]``

``UPSTREAM_CHECKOUT`` is an extracted princeton-nlp/WebShop tree (``git -C <mirror> archive HEAD
web_agent_site | tar -x -C /tmp/webshop_upstream``). The export of ``--num-products`` products
(catalog seed 0) is written to a temporary folder and read by upstream's unchanged
``engine.load_products``, ``generate_product_prices`` and ``goal.get_goals``, as its baseline
scripts run them: ``random.seed(233)`` first, then load, goals, ``random.seed(233);
random.shuffle(goals)``; once with human goals, once with synthetic ones. Modules imported but
never called by these functions (pyserini, rank_bm25, cleantext, rich, spaCy, thefuzz) are stubbed.

Writes ``tests/envs/webshop/data/export_upstream_view.json``: upstream's product fields, hidden
prices, goal counts and digests of the goal lists in order (every ``STRIDE``-th goal in full),
which ``test_export.py`` compares with our catalog and with ``load_upstream`` on the same export.
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
OUT = HERE / "data" / "export_upstream_view.json"
#: every this-many-th goal is recorded in full (all goals are in the digest)
STRIDE = 500
#: the product fields of upstream's loaded dicts that the pages and the reward read
PRODUCT_FIELDS = ("asin", "Title", "Description", "BulletPoints", "Price", "pricing", "options", "Attributes",
                  "query", "category", "product_category")


def goal_row(asin: str, text: str, attributes, options, price_upper: float) -> list:
    """One goal as recorded: synthetic goals' option dict as sorted ``[name, value]`` pairs."""
    options = sorted([list(p) for p in options.items()]) if isinstance(options, dict) else \
        [list(o) if isinstance(o, tuple) else o for o in options]
    return [asin, text, list(attributes), options, float(price_upper)]


def goal_digest(rows: list[list]) -> str:
    """sha256 of the goal rows as JSON."""
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def _stub_imports() -> None:
    names = ("spacy", "cleantext", "rank_bm25", "rich", "pyserini", "pyserini.search", "pyserini.search.lucene",
             "thefuzz")
    stubs = {name: types.ModuleType(name) for name in names}
    stubs["spacy"].load = lambda name: None  # goal.py loads it at import; get_goals never tags
    stubs["rank_bm25"].BM25Okapi = object
    stubs["rich"].print = lambda *a, **k: None
    stubs["pyserini.search.lucene"].LuceneSearcher = object
    stubs["thefuzz"].fuzz = types.SimpleNamespace()
    sys.modules.update(stubs)


def _upstream_view(engine, goal_mod, data: Path, names: tuple[str, str, str], human_goals: bool
                   ) -> tuple[list, dict, list]:
    engine.DEFAULT_ATTR_PATH = str(data / names[1])
    engine.HUMAN_ATTR_PATH = str(data / names[2])
    random.seed(233)  # upstream's baseline scripts seed before the env loads
    products, _, prices, _ = engine.load_products(str(data / names[0]), num_products=None, human_goals=human_goals)
    goals = goal_mod.get_goals(products, prices, human_goals=human_goals)
    random.seed(233)
    random.shuffle(goals)  # SimServer
    rows = [goal_row(g["asin"], g["instruction_text"], g["attributes"], g["goal_options"], g["price_upper"])
            for g in goals]
    return products, prices, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("upstream", type=Path, help="extracted princeton-nlp/WebShop tree")
    parser.add_argument("--num-products", type=int, default=40, help="export size (default: 40)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"JSON to write (default: {OUT})")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE.parents[2]))
    from rspo_gym.envs.webshop.export import export_names, export_webshop

    _stub_imports()
    sys.path.insert(0, str(args.upstream))
    from web_agent_site.engine import engine, goal as goal_mod

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        export_webshop(data, args.num_products, 0)
        names = export_names(args.num_products)
        products, prices, human = _upstream_view(engine, goal_mod, data, names, True)
        _, _, synthetic = _upstream_view(engine, goal_mod, data, names, False)
    record = {
        "recorded_with": "tests/envs/webshop/record_export_upstream.py (upstream princeton-nlp/WebShop "
                         "web_agent_site.engine, unchanged)",
        "num_products": args.num_products, "catalog_seed": 0, "stride": STRIDE,
        "products": [{k: p[k] for k in PRODUCT_FIELDS} for p in products],
        "product_prices": [prices[p["asin"]] for p in products],
        "human_goals": {"count": len(human), "digest": goal_digest(human), "every_stride": human[::STRIDE]},
        "synthetic_goals": {"count": len(synthetic), "digest": goal_digest(synthetic),
                            "every_stride": synthetic[::STRIDE]},
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {len(products)} products, {len(human)} human goals, {len(synthetic)} synthetic goals")
    return 0


if __name__ == "__main__":
    sys.exit(main())
