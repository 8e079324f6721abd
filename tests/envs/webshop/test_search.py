"""WebShop search: upstream document text, BM25 ranking on a hand-made corpus, persistence, cache."""

import math
import threading

import numpy as np
import pytest

from rspo_gym.envs.webshop.catalog import Catalog
from rspo_gym.envs.webshop.model import Product
from rspo_gym.envs.webshop.search import (
    DEFAULT_INDEX_CACHE,
    HIDDEN_SEARCH_PREFIXES,
    _norm_bytes,
    IndexCache,
    SearchIndex,
    byte4_to_int,
    hidden_search_prefix,
    index_for,
    int_to_byte4,
    search_text,
    uses_hidden_search_prefix,
)

CORPUS = [
    "red running shoe with rubber sole",  # 0
    "blue canvas shoes for the beach",  # 1
    "smoked bacon gluten free pack of 2",  # 2
    "the and of with for to",  # 3: stop words only
    "leather wallet for men",  # 4
    "wireless noise cancelling headphones",  # 5
    "red red red red red red red red red red red red red wallet",  # 6: long, many "red"
]


@pytest.fixture(scope="module")
def index():
    return SearchIndex.build(CORPUS)


def test_len_and_repr(index):
    assert len(index) == len(CORPUS)
    assert "num_docs=7" in repr(index)


def test_stemming_plural_finds_singular(index):
    assert index.search("shoes") == [1, 0]  # doc 1 is shorter
    assert index.search("shoe") == [1, 0]
    assert index.search("headphone") == [5]
    assert index.search("cancelled") == [5]  # cancel(l)ed/cancelling share the stem


def test_stop_words_ignored(index):
    assert index.search("the") == []
    assert index.search("the of and with") == []
    # Stop words add nothing to the ranking.
    assert index.search("a wallet for the men") == index.search("wallet men") == [4, 6]
    np.testing.assert_array_equal(index.scores("the bacon of"), index.scores("bacon"))


def test_exact_top_results(index):
    assert index.search("smoked bacon") == [2]
    assert index.search("red wallet") == [6, 4, 0]
    assert index.search("rubber sole running") == [0]
    assert index.search("leather") == [4]


def test_k1_b_effect():
    docs = ["red shoe", "red red red red shoe padding padding padding padding padding"]
    # b=0, k1 large: term frequency dominates, length is ignored -> the long doc wins "red".
    assert SearchIndex.build(docs, k1=2.0, b=0.0).search("red") == [1, 0]
    # k1=0: tf saturates at once; b irrelevant -> equal scores, tie broken by index.
    flat = SearchIndex.build(docs, k1=0.0, b=1.0)
    assert flat.search("red") == [0, 1]
    scores = flat.scores("red")
    assert scores[0] == pytest.approx(scores[1])
    # Full length normalisation with a moderate k1 -> the short doc wins.
    assert SearchIndex.build(docs, k1=0.9, b=1.0).search("red") == [0, 1]


def test_repeated_query_terms_add_up(index):
    np.testing.assert_allclose(index.scores("bacon bacon"), 2 * index.scores("bacon"))


def test_deterministic_ties():
    docs = ["green mug"] * 5 + ["tea"] + ["green mug"] * 3
    idx = SearchIndex.build(docs)
    assert idx.search("mug") == [0, 1, 2, 3, 4, 6, 7, 8]
    assert idx.search("mug", k=3) == [0, 1, 2]
    assert idx.search("mug", k=7) == [0, 1, 2, 3, 4, 6, 7]
    assert idx.search("mug", k=3) == idx.search("mug", k=3)


def test_k_bounds(index):
    assert index.search("red", k=1) == [6]
    assert index.search("red", k=1000) == [6, 0]  # fewer matches than k: all of them
    assert len(index.search("red wallet shoe bacon headphones", k=2)) == 2
    for bad in (0, -1):
        with pytest.raises(ValueError, match="positive"):
            index.search("red", k=bad)
    for bad in (1.5, "3", None, True):
        with pytest.raises(TypeError, match="k must be an int"):
            index.search("red", k=bad)
    assert index.search("red", k=np.int64(1)) == [6]


@pytest.mark.parametrize(
    "query",
    [
        "",
        " ",
        "\n\t",
        "!!! ??? ...",
        "zzzz qqqq",
        "a",
        "\x00\x01\ufffd",
        "日本語の靴",
        "👟👟👟",
        "[search] click[buy now]",
        "\ud800",  # lone surrogate
    ],
)
def test_junk_queries_return_empty(index, query):
    assert index.search(query) == []


def test_huge_and_unicode_queries(index):
    assert index.search("x" * 100_000) == []
    huge = " ".join(["shoes"] * 20_000 + ["wörd", "ünïcödé"] * 5_000)
    assert index.search(huge) == [1, 0]
    assert index.search("SHOESÜber" * 10_000) == []  # one long glued token, unknown
    assert index.search("Ｓｈｏｅ 靴 shoe") == [1, 0]


def test_query_type_checked(index):
    with pytest.raises(TypeError, match="query must be a str"):
        index.search(None)
    with pytest.raises(TypeError):
        index.search(b"shoe")


def test_build_validation():
    with pytest.raises(ValueError, match="at least one"):
        SearchIndex.build([])
    with pytest.raises(TypeError, match="docs\\[1\\]"):
        SearchIndex.build(["a shoe", 3])
    with pytest.raises(TypeError, match="single string"):
        SearchIndex.build("a shoe")
    with pytest.raises(ValueError, match="k1"):
        SearchIndex.build(["shoe"], k1=-1)
    with pytest.raises(ValueError, match="b must be in"):
        SearchIndex.build(["shoe"], b=1.5)
    with pytest.raises(TypeError, match="b must be a number"):
        SearchIndex.build(["shoe"], b="0.4")
    # Documents with no indexable token are fine; a generator works too.
    idx = SearchIndex.build(d for d in ["", "the", "shoe"])
    assert len(idx) == 3 and idx.search("shoes") == [2]


@pytest.mark.parametrize("mmap", [True, False])
def test_save_load_round_trip(index, tmp_path, mmap):
    index.save(tmp_path / "idx")
    loaded = SearchIndex.load(tmp_path / "idx", mmap=mmap)
    assert len(loaded) == len(index)
    assert (loaded.k1, loaded.b) == (index.k1, index.b)
    for q in ["shoes", "red wallet", "smoked bacon", "the", "", "headphone noise", "men"]:
        assert loaded.search(q) == index.search(q)
        np.testing.assert_array_equal(loaded.scores(q), index.scores(q))


def test_load_errors(tmp_path, index):
    with pytest.raises(FileNotFoundError):
        SearchIndex.load(tmp_path / "missing")
    index.save(tmp_path / "idx")
    meta = tmp_path / "idx" / "rspo_search.json"
    text = meta.read_text()
    meta.write_text(text.replace(' porter"', ' snowball"'))
    with pytest.raises(ValueError, match="analyzer"):
        SearchIndex.load(tmp_path / "idx")
    # An index saved by the bm25s-tokenized version 1 is refused (rebuilt), not misread.
    meta.write_text(text.replace('"version": 2', '"version": 1'))
    with pytest.raises(ValueError, match="version=1.*rebuild"):
        SearchIndex.load(tmp_path / "idx")
    with pytest.raises(TypeError, match="mmap"):
        SearchIndex.load(tmp_path / "idx", mmap="yes")


def test_search_text_upstream_format():
    product = Product(
        asin="B000000001",
        name="Acme Keto Smoked Bacon",
        query="smoked bacon",
        category="grocery › meat",
        bullet_points=("Gluten Free, 4 Ounce", "second bullet is not indexed"),
        description="Thick-cut BACON.",
    )
    options = {"flavor": ["peppered", "original"], "size": ["4 ounce (pack of 2)"]}
    text = search_text(product.title, product.description, product.bullet_points, options)
    assert text == (
        "acme keto smoked bacon thick-cut bacon. gluten free, 4 ounce "
        "flavor: peppered, original, and size: 4 ounce (pack of 2)"
    )
    # No options: upstream still joins an empty option text, leaving a trailing space.
    assert search_text("T", "D", ["B"], {}) == "t d b "
    assert search_text("T", "", [], {"color": ["Red"]}) == "t   color: red"
    with pytest.raises(TypeError):
        search_text("T", "D", "bullet", {})


def test_search_text_is_searchable():
    docs = [
        search_text("Acme Bacon", "smoky", ["crispy"], {"flavor": ["peppered"]}),
        search_text("Runner Shoe", "light", ["mesh"], {"size": ["8.5 wide"]}),
    ]
    idx = SearchIndex.build(docs)
    assert idx.search("peppered bacon") == [0]
    assert idx.search("wide shoes") == [1]


@pytest.mark.parametrize(
    "query, prefix",
    [
        ("<q> smoked bacon", "<q>"),
        ("<Q> smoked bacon", "<q>"),
        ("<r>", "<r>"),
        ("<r> anything", "<r>"),
        ("<c> beauty", "<c>"),
        ("<a> gluten free", "<a>"),
        ("<a>", "<a>"),
        # Not a prefix for upstream: first space-separated token differs.
        ("<r>x", None),
        (" <q> bacon", None),
        ("bacon <q>", None),
        ("<q>\tbacon", None),
        ("<x> bacon", None),
        ("q bacon", None),
        ("", None),
    ],
)
def test_hidden_search_prefixes(query, prefix):
    assert hidden_search_prefix(query) == prefix
    assert uses_hidden_search_prefix(query) is (prefix is not None)


def test_hidden_prefix_constants_and_types():
    assert HIDDEN_SEARCH_PREFIXES == {"<r>", "<a>", "<c>", "<q>"}
    with pytest.raises(TypeError):
        hidden_search_prefix(None)


def test_index_cache_builds_once():
    cache = IndexCache()
    calls = []

    def factory():
        calls.append(1)
        return ["red shoe", "blue hat"]

    first = index_for(("cat", 1), factory, cache=cache)
    second = index_for(("cat", 1), factory, cache=cache)
    assert first is second and len(calls) == 1
    assert ("cat", 1) in cache and len(cache) == 1
    other = index_for(("cat", 2), factory, cache=cache)
    assert other is not first and len(calls) == 2
    cache.clear()
    assert len(cache) == 0
    assert ("cat", 1) not in DEFAULT_INDEX_CACHE
    with pytest.raises(TypeError):
        cache.get(["unhashable"], lambda: first)
    with pytest.raises(TypeError, match="SearchIndex"):
        cache.get("bad", lambda: "not an index")
    assert "bad" not in cache


def test_index_cache_thread_safe():
    cache = IndexCache()
    calls = []

    def build():
        calls.append(1)
        return SearchIndex.build(CORPUS)

    results = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.get("k", build))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(results) == 8
    assert all(r is results[0] for r in results)


def test_default_cache_shared():
    key = ("test_search.py", "default-cache")
    try:
        a = index_for(key, lambda: CORPUS)
        b = index_for(key, lambda: pytest.fail("must not rebuild"))
        assert a is b and DEFAULT_INDEX_CACHE.get(key, lambda: None) is a
    finally:
        DEFAULT_INDEX_CACHE.clear()


# --------------------------------------------------------------------------- Lucene 8 scoring

def test_length_norm_byte_encoding_exact_values():
    assert [int_to_byte4(n) for n in range(24)] == list(range(24))  # exact below 24
    assert [int_to_byte4(n) for n in range(24, 40)] == list(range(24, 40))  # then 3 exact bits
    assert [int_to_byte4(n) for n in (40, 41, 42, 47, 48, 100, 1000, 2**31 - 1)] == [
        40, 40, 41, 43, 44, 57, 87, 255]
    assert [byte4_to_int(c) for c in (40, 41, 43, 44, 57, 87, 255)] == [
        40, 42, 46, 48, 96, 984, 2013265944]
    decoded = [byte4_to_int(c) for c in range(256)]
    assert decoded == sorted(set(decoded))  # strictly increasing
    assert all(int_to_byte4(d) == c for c, d in enumerate(decoded))
    assert all(byte4_to_int(int_to_byte4(n)) <= n for n in range(5000))
    lengths = [*range(5000), 2**20 + 12345, 2**31 - 1]
    assert _norm_bytes(np.array(lengths)).tolist() == [int_to_byte4(n) for n in lengths]
    for bad in (-1, 1.5, True, None):
        with pytest.raises(ValueError, match="length"):
            int_to_byte4(bad)
    for bad in (-1, 256, "3"):
        with pytest.raises(ValueError, match="code"):
            byte4_to_int(bad)


def test_scores_use_the_decoded_length():
    filler = [f"w{i}" for i in range(60)]
    docs = [" ".join(["red"] + filler[:40]),  # 41 terms: stored as 40
            " ".join(["red"] + filler[:39]),  # 40 terms
            " ".join(["red"] + filler[:22]),  # 23 terms: exact
            " ".join(["red"] + filler[:23])]  # 24 terms: exact
    idx = SearchIndex.build(docs, doc_ids=["a", "b", "d", "c"])
    s = idx.scores("red")
    assert s.dtype == np.float32
    assert s[0] == s[1] and s[2] > s[3] > s[0]
    assert idx.search("red") == [2, 3, 0, 1]  # the 41-term doc ties the 40-term one, "a" < "b"


def test_bm25_formula_lucene8():
    idx = SearchIndex.build(["red shoe", "blue shoe", "red red hat"])
    avgdl, idf = 7 / 3, math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    s = idx.scores("red")
    assert s[0] == pytest.approx(idf * 1 / (1 + 0.9 * (0.6 + 0.4 * 2 / avgdl)), rel=1e-6)
    assert s[2] == pytest.approx(idf * 2 / (2 + 0.9 * (0.6 + 0.4 * 3 / avgdl)), rel=1e-6)
    assert s[1] == 0


def test_repeated_term_is_a_boosted_clause():
    idx = SearchIndex.build(["red", "red w0", "blue"])
    one = idx.scores("red").astype(np.float64)
    three = idx.scores("red red red")
    np.testing.assert_allclose(three, 3 * one, rtol=1e-6)
    # Lucene scores the clause of boost 3 as w - w / (1 + tf * normInverse) with w = 3 idf, in
    # float32; that is one float32 step away from 3 x the boost-1 score here.
    f32 = np.float32
    weight = f32(3) * f32(math.log(1 + 1.5 / 2.5))  # "red": in 2 of 3 documents
    avgdl = f32(4 / 3)
    norm_inverse = f32(1) / (f32(0.9) * ((f32(1) - f32(0.4)) + f32(0.4) * f32(1) / avgdl))
    assert three[0] == weight - weight / (f32(1) + f32(1) * norm_inverse)
    assert three[0] != f32(3 * one[0])


def test_ties_broken_by_doc_id():
    docs = ["green mug"] * 5 + ["tea"] + ["green mug"] * 3
    ids = ["e", "c", "i", "a", "g", "b", "h", "d", "f"]
    idx = SearchIndex.build(docs, doc_ids=ids)
    assert [ids[i] for i in idx.search("mug")] == ["a", "c", "d", "e", "f", "g", "h", "i"]
    assert [ids[i] for i in idx.search("mug", k=2)] == ["a", "c"]  # the cut respects ids too
    with pytest.raises(ValueError, match="2 ids for 9"):
        SearchIndex.build(docs, doc_ids=["a", "b"])
    with pytest.raises(TypeError, match="doc_ids"):
        SearchIndex.build(docs, doc_ids="abcdefghi")


def test_ties_survive_save_load(tmp_path):
    docs = ["green mug"] * 4
    idx = SearchIndex.build(docs, doc_ids=["d", "b", "a", "c"])
    idx.save(tmp_path / "idx")
    loaded = SearchIndex.load(tmp_path / "idx")
    assert loaded.search("mug") == idx.search("mug") == [2, 1, 3, 0]
    assert loaded.search("mug mug mug") == idx.search("mug mug mug")
    np.testing.assert_array_equal(loaded.scores("mug mug mug"), idx.scores("mug mug mug"))


def test_catalog_index_orders_ties_by_asin():
    cat = Catalog(300, 3)
    idx = cat.build_search_index()
    ties = 0
    for query in ("pack", "black", "women", "size"):
        hits = idx.search(query, k=300)
        scores = idx.scores(query)[hits]
        for (i, si), (j, sj) in zip(zip(hits, scores), zip(hits[1:], scores[1:])):
            if si == sj:
                ties += 1
                assert cat.asin(i) < cat.asin(j)
    assert ties > 10


def test_reported_scores_follow_anserini():
    idx = SearchIndex.build(["red shoe"] * 3 + ["red red shoe"], doc_ids=["c", "a", "b", "d"])
    hits, reported = idx.search_scored("red")
    assert hits == [3, 1, 2, 0]
    raw = idx.scores("red")
    assert reported[0] == np.float32(round(float(raw[3]), 4))
    top = np.float32(round(float(raw[1]), 4))
    assert reported[1:].tolist() == [top, top - np.float32(1e-6), top - np.float32(2e-6)]
    assert idx.search_scored("nothing") == ([], pytest.approx(np.zeros(0)))


def test_top_k_equals_a_full_sort():
    """The sampled candidate bound never drops a document of the top k (ties at the cut too)."""
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(40)]
    docs = [" ".join(rng.choice(words, size=rng.integers(1, 30))) for _ in range(3000)]
    ids = [f"id{j:05d}" for j in rng.permutation(len(docs))]
    idx = SearchIndex.build(docs, doc_ids=ids)
    for q in range(30):
        query = " ".join(rng.choice(words, size=rng.integers(1, 6)))
        scores = idx.scores(query)
        hits = np.flatnonzero(scores)
        full = sorted(hits.tolist(), key=lambda i: (-scores[i], ids[i]))
        for k in (1, 10, 50, 400):
            assert idx.search(query, k) == full[:k], (query, k)


def test_index_for_passes_doc_ids():
    cache = IndexCache()
    idx = index_for(("mugs",), lambda: ["green mug"] * 3, doc_ids_factory=lambda: ["c", "a", "b"],
                    cache=cache)
    assert idx.search("mug") == [1, 2, 0]


def test_env_index_orders_ties_by_asin():
    import gymnasium as gym

    import rspo_gym  # noqa: F401

    env = gym.make("rspo/WebShop-v0", num_products=300, split="test", catalog_seed=11)
    cat, idx = env.unwrapped.catalog, env.unwrapped.index
    hits = idx.search("pack", k=300)
    scores = idx.scores("pack")[hits]
    tied = [(i, j) for (i, si), (j, sj) in zip(zip(hits, scores), zip(hits[1:], scores[1:]))
            if si == sj]
    assert len(tied) > 10
    assert all(cat.asin(i) < cat.asin(j) for i, j in tied)
