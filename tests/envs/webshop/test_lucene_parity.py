"""Our search against upstream's Lucene on recorded rankings (``shared/data/webshop/lucene_reference``).

The reference holds 10,000 catalog documents exactly as Lucene indexed them, 600 queries (300
human instructions, 300 generated) and pyserini 0.17.0 / Lucene 8.11's top 50 with scores.
Skipped when the data is absent.
"""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from rspo_gym.envs.webshop.search import SearchIndex

REFERENCE = Path(__file__).resolve().parents[4] / "shared" / "data" / "webshop" / "lucene_reference"


@pytest.fixture(scope="module")
def reference():
    if not (REFERENCE / "lucene_top50.json").is_file():
        pytest.skip(f"no Lucene reference rankings at {REFERENCE}")
    with gzip.open(REFERENCE / "docs.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    queries = json.loads((REFERENCE / "queries.json").read_text(encoding="utf-8"))
    top50 = json.loads((REFERENCE / "lucene_top50.json").read_text(encoding="utf-8"))
    ids = [r["id"] for r in rows]
    index = SearchIndex.build((r["contents"] for r in rows), doc_ids=ids)
    return index, ids, queries, top50


def _agreement(ours: list[str], lucene: list[str]) -> tuple[float, bool, bool]:
    """overlap@10, identical top 10, same top 1 (the reference README's definitions)."""
    a, b = ours[:10], lucene[:10]
    overlap = len(set(a) & set(b)) / max(len(a), len(b)) if (a or b) else 1.0
    return overlap, a == b, a[:1] == b[:1]


@pytest.mark.parametrize("source", ["human", "generated"])
def test_top10_agrees_with_lucene(reference, source):
    index, ids, queries, top50 = reference
    rows = []
    for q in (q for q in queries if q["source"] == source):
        ours = [ids[i] for i in index.search(q["query"], 50)]
        rows.append(_agreement(ours, [d for d, _ in top50[q["qid"]]]))
    overlap, identical, top1 = (np.mean(col) for col in zip(*rows))
    assert len(rows) == 300
    assert identical >= 0.95 and overlap >= 0.99 and top1 >= 0.99, (identical, overlap, top1)
    assert identical == 1.0  # measured: every top 10 is Lucene's


def test_scores_agree_with_lucene(reference):
    """Raw scores within 1e-4 relative of Lucene's on the top 10; the whole top 50 and the
    scores Anserini reports (rounded to 4 decimals, ties perturbed by 1e-6) bit for bit."""
    index, ids, queries, top50 = reference
    worst = 0.0
    for q in queries:
        lucene = top50[q["qid"]]
        hits, reported = index.search_scored(q["query"], 50)
        assert [ids[i] for i in hits] == [d for d, _ in lucene], q["qid"]
        np.testing.assert_array_equal(reported, np.array([s for _, s in lucene], np.float32))
        raw = index.scores(q["query"])[hits[:10]]
        lucene10 = np.array([s for _, s in lucene[:10]], dtype=np.float64)
        if len(raw):
            worst = max(worst, float(np.max(np.abs(raw - lucene10) / lucene10)))
    assert worst < 1e-4
