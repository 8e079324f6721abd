"""Product search for WebShop: upstream's document text, a BM25 index, and a shared index cache.

Upstream (princeton-nlp/WebShop) indexes one document per product with pyserini/Lucene and queries
``LuceneSearcher.search(keywords, k=50)`` with BM25 ``k1=0.9, b=0.4`` and Anserini's English
analyzer (Porter stemming, Lucene's 33 English stop words). This module replaces Lucene with
``bm25s`` (``method="lucene"``, same k1/b, same 33 stop words; ``bm25s.stopwords.STOPWORDS_EN`` is
exactly Lucene's ``ENGLISH_STOP_WORDS_SET``) and PyStemmer's English stemmer, which measured 0.85
overlap@10 with the Lucene ranking (``docs/reference/webshop.md`` §4.2). Tokens are bm25s'
default ``(?u)\\b\\w\\w+\\b`` words of the lower-cased text (the measured configuration).

Scores are computed from bm25s' precomputed sparse matrix; ranking is ours so that ties are broken
deterministically by document index and only documents matching at least one query term are
returned (as Lucene does).

Hidden search prefixes: see :func:`hidden_search_prefix`.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from pathlib import Path

import bm25s
import numpy as np
import Stemmer

__all__ = [
    "DEFAULT_INDEX_CACHE",
    "HIDDEN_SEARCH_PREFIXES",
    "IndexCache",
    "SEARCH_RETURN_N",
    "SearchIndex",
    "hidden_search_prefix",
    "index_for",
    "search_text",
    "uses_hidden_search_prefix",
]

#: Upstream's ``SEARCH_RETURN_N``: how many products one search returns (``engine/engine.py``).
SEARCH_RETURN_N = 50

#: The first-keyword markers upstream's ``get_top_n_product_from_keywords`` dispatches on instead of
#: running BM25: ``<r>`` 50 random products, ``<a> attr`` products with a mined attribute, ``<c> cat``
#: products of a category, ``<q> query`` every product whose ``query`` equals the text (an oracle).
HIDDEN_SEARCH_PREFIXES: frozenset[str] = frozenset({"<r>", "<a>", "<c>", "<q>"})

_TOKEN_RE = re.compile(r"(?u)\b\w\w+\b")
_STOPWORDS: frozenset[str] = frozenset(bm25s.stopwords.STOPWORDS_EN)
_STEMMER_NAME = "english"
_META_FILE = "rspo_search.json"
_FORMAT_VERSION = 1


def search_text(
    title: str,
    description: str,
    bullet_points: Sequence[str],
    options: Mapping[str, Sequence[str]],
) -> str:
    """The text upstream indexes for one product (``search_engine/convert_product_file_format.py``).

    ``' '.join([Title, Description, BulletPoints[0], option_text]).lower()`` where ``option_text``
    is ``', and '.join(f'{name}: {", ".join(values)}')`` over the options in mapping order. Option
    names and values are taken as given (upstream's ``load_products`` has already lower-cased and
    stripped them, and replaced ``/`` by ``' | '``). With no options the text ends in a space, as
    upstream's. Upstream would crash on an empty bullet list; here it counts as ``""``.
    """
    if isinstance(bullet_points, str):
        raise TypeError("bullet_points must be a sequence of strings, not a string")
    first_bullet = bullet_points[0] if len(bullet_points) > 0 else ""
    option_text = ", and ".join(
        f"{name}: {', '.join(values)}" for name, values in options.items()
    )
    return " ".join([title, description, first_bullet, option_text]).lower()


def hidden_search_prefix(query: str) -> str | None:
    """The upstream hidden prefix a search query uses, or ``None``.

    Rule (upstream ``web_agent_text_env.py`` lower-cases the ``search[...]`` argument and splits it
    with ``keywords.split(' ')``; ``app.py`` does ``search_query.lower().split(' ')``; then
    ``engine.get_top_n_product_from_keywords`` checks ``keywords[0]``): a query uses a hidden
    prefix iff its first single-space-separated token, lower-cased, is exactly one of
    :data:`HIDDEN_SEARCH_PREFIXES`. So ``"<Q> smoked bacon"`` and ``"<r>"`` do; ``"<r>x"``,
    ``" <r>"`` (first token empty) and ``"bacon <q>"`` do not, and upstream would run them as
    plain BM25 searches.
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be a str, got {type(query).__name__}")
    first = query.lower().split(" ", 1)[0]
    return first if first in HIDDEN_SEARCH_PREFIXES else None


def uses_hidden_search_prefix(query: str) -> bool:
    """Whether the env must refuse ``search[query]`` (see :func:`hidden_search_prefix`)."""
    return hidden_search_prefix(query) is not None


class _Analyzer:
    """Lower-case, word tokens, stop words out, English (Snowball) stemming; memoized stems."""

    def __init__(self) -> None:
        self._stemmer = Stemmer.Stemmer(_STEMMER_NAME)
        # word -> stem, and stop word -> None, so one lookup per token does both
        self._stems: dict[str, str | None] = dict.fromkeys(_STOPWORDS)

    def __call__(self, text: str) -> list[str]:
        words = _TOKEN_RE.findall(text.lower())
        stems = self._stems
        try:
            return [s for s in map(stems.__getitem__, words) if s is not None]
        except KeyError:
            pass
        if len(stems) > 1_000_000:  # bound the memo for adversarial query streams
            stems.clear()
            stems.update(dict.fromkeys(_STOPWORDS))
        missing = [w for w in set(words) if w not in stems]
        stems.update(zip(missing, self._stemmer.stemWords(missing)))
        return [s for s in map(stems.__getitem__, words) if s is not None]


def _check_param(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return value


class SearchIndex:
    """A BM25 index over document strings; results are document indices, best first.

    Build with :meth:`build`, persist with :meth:`save` / :meth:`load`. Read-only after building,
    so one instance can be shared by every env of a process (see :class:`IndexCache`); searching
    is thread-safe apart from the stem memo, whose races only cost recomputation.
    """

    def __init__(self, model: bm25s.BM25, num_docs: int, k1: float, b: float) -> None:
        """Internal; use :meth:`build` or :meth:`load`."""
        self._model = model
        self._num_docs = num_docs
        self.k1 = k1
        self.b = b
        self._analyze = _Analyzer()
        vocab = model.vocab_dict
        self._vocab: dict[str, int] = {t: i for t, i in vocab.items() if t != ""}

    @classmethod
    def build(cls, docs: Iterable[str], *, k1: float = 0.9, b: float = 0.4) -> SearchIndex:
        """Index ``docs`` (document ``i`` is the ``i``-th string) with BM25 (Lucene variant)."""
        k1 = _check_param("k1", k1)
        b = _check_param("b", b)
        if b > 1:
            raise ValueError(f"b must be in [0, 1], got {b}")
        if isinstance(docs, str):
            raise TypeError("docs must be a sequence of strings, not a single string")
        analyze = _Analyzer()
        corpus_tokens = []  # analyzed as they arrive, so a lazy producer overlaps with us
        for i, doc in enumerate(docs):
            if not isinstance(doc, str):
                raise TypeError(f"docs[{i}] must be a str, got {type(doc).__name__}")
            corpus_tokens.append(analyze(doc))
        if not corpus_tokens:
            raise ValueError("docs must contain at least one document")
        model = bm25s.BM25(k1=k1, b=b, method="lucene")
        model.index(corpus_tokens, show_progress=False)
        index = cls(model, len(corpus_tokens), k1, b)
        index._analyze = analyze  # reuse the warm stem memo
        return index

    def __len__(self) -> int:
        return self._num_docs

    def __repr__(self) -> str:
        return f"SearchIndex(num_docs={self._num_docs}, k1={self.k1}, b={self.b})"

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (float64, zeros where nothing matches)."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, got {type(query).__name__}")
        ids = [self._vocab[t] for t in self._analyze(query) if t in self._vocab]
        out = np.zeros(self._num_docs, dtype=np.float64)
        if not ids:
            return out
        # A repeated query term counts once per occurrence, like Anserini's bag-of-words query
        # (term boosted by its count).
        uniq, counts = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
        s = self._model.scores
        data, indices, indptr = s["data"], s["indices"], s["indptr"]
        starts = np.asarray(indptr[uniq], dtype=np.int64)
        ends = np.asarray(indptr[uniq + 1], dtype=np.int64)
        parts_idx, parts_w = [], []
        for start, end, count in zip(starts.tolist(), ends.tolist(), counts.tolist()):
            if end > start:
                parts_idx.append(indices[start:end])
                parts_w.append(np.asarray(data[start:end], dtype=np.float64) * count)
        if parts_idx:
            out = np.bincount(
                np.concatenate(parts_idx), weights=np.concatenate(parts_w), minlength=self._num_docs
            )
        return out

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[int]:
        """Indices of the top ``k`` documents matching ``query``, best first.

        Ties are broken by lower index. Only documents sharing at least one analyzed term with the
        query are returned, so empty, stop-word-only or out-of-vocabulary queries give ``[]``.
        Never raises for a ``str`` query, whatever its length or content.
        """
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise TypeError(f"k must be an int, got {type(k).__name__}")
        if k <= 0:
            raise ValueError(f"k must be a positive int, got {k}")
        scores = self.scores(query)
        hits = np.flatnonzero(scores > 0)
        if hits.size == 0:
            return []
        hit_scores = scores[hits]
        if hits.size > k:
            threshold = np.partition(hit_scores, hits.size - k)[hits.size - k]
            keep = hit_scores >= threshold  # keeps every doc tied at the cut
            hits, hit_scores = hits[keep], hit_scores[keep]
        order = np.lexsort((hits, -hit_scores))
        return hits[order][:k].tolist()

    def save(self, path: str | Path) -> None:
        """Write the index into directory ``path`` (created if needed; files there are replaced)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self._model.save(str(path), show_progress=False)
        meta = {
            "format": "rspo_gym.webshop.search",
            "version": _FORMAT_VERSION,
            "num_docs": self._num_docs,
            "k1": self.k1,
            "b": self.b,
            "method": "lucene",
            "stemmer": _STEMMER_NAME,
            "token_pattern": _TOKEN_RE.pattern,
            "stopwords": sorted(_STOPWORDS),
        }
        (path / _META_FILE).write_text(json.dumps(meta, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path, mmap: bool = True) -> SearchIndex:
        """Load an index written by :meth:`save`; with ``mmap`` the score arrays stay on disk."""
        if not isinstance(mmap, bool):
            raise TypeError("mmap must be a bool")
        path = Path(path)
        meta_path = path / _META_FILE
        if not meta_path.is_file():
            raise FileNotFoundError(f"no search index at {path} (missing {_META_FILE})")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        expected = {
            "format": "rspo_gym.webshop.search",
            "version": _FORMAT_VERSION,
            "method": "lucene",
            "stemmer": _STEMMER_NAME,
            "token_pattern": _TOKEN_RE.pattern,
            "stopwords": sorted(_STOPWORDS),
        }
        for key, value in expected.items():
            if meta.get(key) != value:
                raise ValueError(
                    f"index at {path} has {key}={meta.get(key)!r}, this code expects {value!r}"
                )
        model = bm25s.BM25.load(str(path), mmap=mmap)
        num_docs = int(meta["num_docs"])
        if int(model.scores["num_docs"]) != num_docs:
            raise ValueError(f"index at {path} is inconsistent: num_docs mismatch")
        return cls(model, num_docs, float(meta["k1"]), float(meta["b"]))


class IndexCache:
    """Builds each catalog's :class:`SearchIndex` once and hands the same object to every caller.

    The owner of an ``IndexCache`` owns the indexes in it (they live until :meth:`clear` or the
    cache is dropped). Keys identify a catalog (e.g. ``(catalog_name, seed, num_products)``) and
    must be hashable. Thread-safe: concurrent :meth:`get` calls for one key build it once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._indexes: dict[Hashable, SearchIndex] = {}

    def get(self, key: Hashable, build: Callable[[], SearchIndex]) -> SearchIndex:
        """The index cached under ``key``, calling ``build()`` to make it on the first request."""
        hash(key)  # TypeError for unhashable keys, before taking the lock
        with self._lock:
            index = self._indexes.get(key)
            if index is None:
                index = build()
                if not isinstance(index, SearchIndex):
                    raise TypeError(f"build() must return a SearchIndex, got {type(index).__name__}")
                self._indexes[key] = index
            return index

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._indexes

    def __len__(self) -> int:
        with self._lock:
            return len(self._indexes)

    def clear(self) -> None:
        """Drop every cached index (envs that hold one keep it alive)."""
        with self._lock:
            self._indexes.clear()


#: The process-wide cache used by :func:`index_for`. This is the one deliberate piece of mutable
#: module state: the requirement is exactly one index per catalog per *process*, and the module is
#: the only object whose lifetime is the process; every env constructed in the process reaches it
#: without plumbing. It only ever grows by building immutable indexes (:meth:`IndexCache.clear`
#: frees them); code that wants isolation (tests, multi-tenant servers) passes its own
#: ``IndexCache`` to :func:`index_for`.
DEFAULT_INDEX_CACHE = IndexCache()


def index_for(
    key: Hashable,
    docs_factory: Callable[[], Iterable[str]],
    *,
    cache: IndexCache | None = None,
    k1: float = 0.9,
    b: float = 0.4,
) -> SearchIndex:
    """The shared index for catalog ``key``; ``docs_factory()`` supplies documents on first use.

    Uses :data:`DEFAULT_INDEX_CACHE` unless ``cache`` is given. ``k1``/``b`` only matter on the
    first call for a key, so make them part of ``key`` if they vary.
    """
    target = DEFAULT_INDEX_CACHE if cache is None else cache
    return target.get(key, lambda: SearchIndex.build(docs_factory(), k1=k1, b=b))
