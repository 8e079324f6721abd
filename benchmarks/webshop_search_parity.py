"""Agreement of our WebShop search with upstream's Lucene on recorded rankings.

Reads ``shared/data/webshop/lucene_reference`` (10,000 catalog documents exactly as Lucene indexed
them, 600 queries: 300 human instructions and 300 generated ones, and pyserini 0.17.0 / Lucene
8.11's top 50 with scores; see its README), indexes the documents with
:class:`~rspo_gym.envs.webshop.search.SearchIndex` and prints, per query source, the share of
queries whose top 10 is identical to Lucene's, the mean overlap@10, top-1 agreement, identical
top 50, the largest relative difference of our raw scores to Lucene's on the top 10, and how many
of the scores Anserini reports (rounded to 4 decimals, ties perturbed) we reproduce bit for bit.
``--ties index`` orders equal scores by document index instead of by id (Lucene's order), to show
what the tie-break is worth::

    python benchmarks/webshop_search_parity.py

Writes JSON (``--out``, default ``results/benchmarks/webshop_search_parity.json``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

from common import write_json  # benchmarks/common.py (the script folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from rspo_gym.envs.webshop.search import SearchIndex  # noqa: E402

DEFAULT_REFERENCE = ROOT.parent / "shared" / "data" / "webshop" / "lucene_reference"


def compare(index: SearchIndex, ids: list[str], queries: list[dict], top50: dict) -> dict:
    rows: dict[str, list[tuple]] = {}
    for q in queries:
        lucene = top50[q["qid"]]
        hits, reported = index.search_scored(q["query"], 50)
        ours = [ids[i] for i in hits]
        theirs = [d for d, _ in lucene]
        a, b = ours[:10], theirs[:10]
        overlap = len(set(a) & set(b)) / max(len(a), len(b)) if (a or b) else 1.0
        raw = index.scores(q["query"])[hits[:10]].astype(np.float64)
        ref = np.array([s for _, s in lucene[:10]], dtype=np.float64)
        rel = float(np.max(np.abs(raw - ref) / ref)) if a == b and a else 0.0
        exact = sum(o == t and s == np.float32(r) for o, s, (t, r) in zip(ours, reported, lucene))
        for key in (q["source"], "all"):
            rows.setdefault(key, []).append(
                (a == b, overlap, a[:1] == b[:1], ours == theirs, rel, exact, len(lucene)))
    out = {}
    for key, r in rows.items():
        same10, overlap, top1, same50, rel, exact, total = zip(*r)
        out[key] = {
            "queries": len(r),
            "identical_top10": round(float(np.mean(same10)), 4),
            "overlap_at_10": round(float(np.mean(overlap)), 4),
            "top1_agreement": round(float(np.mean(top1)), 4),
            "identical_top50": round(float(np.mean(same50)), 4),
            "max_rel_score_diff_top10": float(max(rel)),
            "reported_scores_bit_exact": f"{sum(exact)}/{sum(total)}",
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--ties", choices=("id", "index"), default="id")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "results" / "benchmarks" / "webshop_search_parity.json"
    )
    args = parser.parse_args(argv)
    if not (args.reference / "lucene_top50.json").is_file():
        parser.error(f"no Lucene reference rankings at {args.reference}")
    with gzip.open(args.reference / "docs.jsonl.gz", "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    queries = json.loads((args.reference / "queries.json").read_text(encoding="utf-8"))
    top50 = json.loads((args.reference / "lucene_top50.json").read_text(encoding="utf-8"))
    ids = [d["id"] for d in docs]
    t0 = time.perf_counter()
    index = SearchIndex.build((d["contents"] for d in docs),
                              doc_ids=ids if args.ties == "id" else None)
    build_s = time.perf_counter() - t0
    result = compare(index, ids, queries, top50)
    cols = ["identical_top10", "overlap_at_10", "top1_agreement", "identical_top50",
            "max_rel_score_diff_top10", "reported_scores_bit_exact"]
    print("source | " + " | ".join(cols))
    for key, r in result.items():
        print(f"{key} | " + " | ".join(str(r[c]) for c in cols))
    write_json(args.out, {"benchmark": "webshop_search_parity", "ties": args.ties,
                          "documents": len(docs), "build_s": round(build_s, 3),
                          "results": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
