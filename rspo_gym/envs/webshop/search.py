"""Product search for WebShop: upstream's document text, Lucene's BM25 ranking, a shared index cache.

Upstream (princeton-nlp/WebShop) indexes one document per product with pyserini/Lucene 8.11 and
queries ``LuceneSearcher.search(keywords, k=50)``: BM25 with ``k1=0.9, b=0.4``, Anserini's default
English analyzer, ties broken by document id. :class:`SearchIndex` ranks exactly as that does:

* terms come from :class:`~rspo_gym.envs.webshop.analysis.LuceneEnglishAnalyzer` (standard
  tokenizer, possessives, lower case, Lucene's 33 stop words, Lucene's Porter stemmer);
* scoring is Lucene 8's ``BM25Similarity`` in float32: ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``
  over the N documents with at least one term, and per (term, document)
  ``idf - idf / (1 + tf / (k1 (1 - b + b dl / avgdl)))``, where the document length ``dl`` is the
  one-byte norm Lucene stores (:func:`int_to_byte4`: exact below 24, then 4 significant bits,
  decoded by :func:`byte4_to_int`) while ``avgdl`` uses the exact total;
* a query term repeated ``c`` times counts ``c`` times (Anserini boosts the term by its count);
  a document's score is the sum over query terms, rounded to float32 as Lucene does;
* equal scores are ordered by document id string, ascending (Anserini's tie-break), or by index
  when the index was built without ids.

``bm25s`` holds the index: its sparse (term x document) score matrix, its vocabulary, and its
save / memory-mapped load. Its own scoring cannot express Lucene's byte-encoded length norms (it
scores with exact lengths, in its own float order), so the matrix entries are computed here;
``bm25s``' own ``get_scores`` on such a model sums the same per-term scores.

Hidden search prefixes: see :func:`hidden_search_prefix`.
"""

from __future__ import annotations

import json
import threading
from array import array
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np

from .analysis import STOP_WORDS, LuceneEnglishAnalyzer

__all__ = [
    "DEFAULT_INDEX_CACHE",
    "HIDDEN_SEARCH_PREFIXES",
    "IndexCache",
    "SEARCH_RETURN_N",
    "SearchIndex",
    "byte4_to_int",
    "hidden_search_prefix",
    "index_for",
    "int_to_byte4",
    "search_text",
    "uses_hidden_search_prefix",
]

#: Upstream's ``SEARCH_RETURN_N``: how many products one search returns (``engine/engine.py``).
SEARCH_RETURN_N = 50

#: The first-keyword markers upstream's ``get_top_n_product_from_keywords`` dispatches on instead of
#: running BM25: ``<r>`` 50 random products, ``<a> attr`` products with a mined attribute, ``<c> cat``
#: products of a category, ``<q> query`` every product whose ``query`` equals the text (an oracle).
HIDDEN_SEARCH_PREFIXES: frozenset[str] = frozenset({"<r>", "<a>", "<c>", "<q>"})

_META_FILE = "rspo_search.json"
_TIE_RANK_FILE = "tie_rank.npy"
#: 2: Lucene's analyzer, Lucene 8 scores with byte-encoded length norms, ties by document id.
_FORMAT_VERSION = 2
_ANALYZER = "lucene-8.11-english: standard tokenizer, possessive, lowercase, stop, porter"
_SCORING = "lucene-8-bm25: float32, byte4 length norms"

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


def _check_param(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return value


# --------------------------------------------------------------------------- Lucene 8 length norms
#: Lucene's ``SmallFloat``: byte values below this are the length itself.
_NUM_FREE_VALUES = 24


def int_to_byte4(length: int) -> int:
    """Lucene 8's one-byte document-length norm (``SmallFloat.intToByte4``), as an int in [0, 255].

    Lengths below 24 are stored exactly; above, ``length - 24`` keeps its 4 most significant bits
    (a tiny float: 3 mantissa bits, the top one implicit, and a shift), rounding down.

    >>> [int_to_byte4(n) for n in (0, 23, 24, 39, 40, 41, 100, 2**31 - 1)]
    [0, 23, 24, 39, 40, 40, 57, 255]
    """
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 0:
        raise ValueError(f"length must be an int >= 0, got {length!r}")
    length = int(length)
    if length < _NUM_FREE_VALUES:
        return length
    rest = length - _NUM_FREE_VALUES
    bits = rest.bit_length()
    if bits < 4:  # "subnormal": stored exactly
        return _NUM_FREE_VALUES + rest
    shift = bits - 4
    return _NUM_FREE_VALUES + (((rest >> shift) & 0x07) | ((shift + 1) << 3))


def byte4_to_int(code: int) -> int:
    """The length Lucene scores with for norm byte ``code`` (``SmallFloat.byte4ToInt``).

    >>> [byte4_to_int(int_to_byte4(n)) for n in (23, 40, 41, 47, 48, 100)]
    [23, 40, 40, 46, 48, 96]
    """
    if isinstance(code, bool) or not isinstance(code, (int, np.integer)) or not 0 <= code <= 255:
        raise ValueError(f"code must be an int in [0, 255], got {code!r}")
    code = int(code)
    if code < _NUM_FREE_VALUES:
        return code
    small = code - _NUM_FREE_VALUES
    shift = (small >> 3) - 1
    rest = small & 0x07 if shift == -1 else ((small & 0x07) | 0x08) << shift
    return _NUM_FREE_VALUES + rest


#: ``byte4_to_int`` of every byte: the decoded lengths Lucene's ``BM25Similarity`` caches.
_LENGTH_TABLE = np.array([byte4_to_int(c) for c in range(256)], dtype=np.float32)


def _norm_bytes(lengths: np.ndarray) -> np.ndarray:
    """:func:`int_to_byte4` of every length, vectorized (uint8)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    out = lengths.copy()  # below 24 + 8 the byte is the length itself
    rest = lengths - _NUM_FREE_VALUES
    normal = rest >= 8
    r = rest[normal]
    shift = np.frexp(r.astype(np.float64))[1].astype(np.int64) - 4  # bit length - 4, exact
    out[normal] = _NUM_FREE_VALUES + (((r >> shift) & 0x07) | ((shift + 1) << 3))
    return out.astype(np.uint8)


@dataclass(frozen=True)
class _ClauseInputs:
    """What Lucene's ``BM25Scorer`` computes a clause score from, kept so that a query term
    repeated ``c`` times (Anserini: one clause of boost ``c``) is scored exactly:
    ``w - w / (1 + tf * norm_inverse[norm byte])`` with ``w = c * idf``, in float32.
    (``c`` times the boost-1 score can be one float32 step off that.)"""

    idf: np.ndarray  #: per term, float32
    tf: np.ndarray  #: per posting (the score matrix's order), unsigned int
    norm_bytes: np.ndarray  #: per document, uint8 (:func:`int_to_byte4` of its length)
    norm_inverse: np.ndarray  #: per norm byte, float32: ``1 / (k1 (1 - b + b dl / avgdl))``

    FIELDS = ("idf", "tf", "norm_bytes", "norm_inverse")

    def boosted(self, term: int, boost: int, start: int, end: int, rows: np.ndarray) -> np.ndarray:
        """Clause scores of ``term`` at boost ``boost`` for postings ``start:end`` (docs ``rows``)."""
        return _bm25_clause(np.float32(boost) * self.idf[term], self.tf[start:end],
                            self.norm_inverse[self.norm_bytes[rows]])


def _bm25_clause(weight: np.ndarray, tf: np.ndarray, norm_inverse: np.ndarray) -> np.ndarray:
    """Lucene 8's ``BM25Scorer.score``: ``weight - weight / (1 + freq * normInverse)``, float32."""
    freq_norm = np.asarray(tf).astype(np.float32) * norm_inverse
    return weight - weight / (np.float32(1) + freq_norm)


def _lucene_bm25_postings(
    term_ids: np.ndarray, doc_lengths: np.ndarray, num_terms: int, k1: float, b: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, _ClauseInputs]:
    """Lucene 8 BM25 score of every (term, document) pair, as a CSC matrix (data, indices, indptr),
    and the inputs it was computed from.

    ``term_ids`` are the documents' analyzed terms, concatenated in document order;
    ``doc_lengths[d]`` is document ``d``'s number of terms. Columns are terms, rows documents.
    Everything is float32 in Lucene's order of operations (``BM25Similarity`` / ``BM25Scorer``),
    so each entry equals the score Lucene gives one query term of boost 1 in that document.
    """
    num_docs = len(doc_lengths)
    # (term, doc) pairs as term * num_docs + doc, sorted in place: CSC order, few temporaries
    pairs = term_ids.astype(np.int64)
    pairs *= num_docs
    pairs += np.repeat(np.arange(num_docs, dtype=np.int64), doc_lengths)
    pairs.sort()
    starts = np.flatnonzero(np.concatenate(([True], pairs[1:] != pairs[:-1])))
    tf = np.diff(np.append(starts, len(pairs)))
    pairs = pairs[starts]
    terms = pairs // num_docs
    rows = (pairs - terms * num_docs).astype(np.int32)
    del pairs
    df = np.bincount(terms, minlength=num_terms)
    indptr = np.zeros(num_terms + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])

    doc_count = int(np.count_nonzero(doc_lengths))  # documents that have the field
    avgdl = np.float32(len(term_ids) / doc_count)
    k1_, b_ = np.float32(k1), np.float32(b)
    with np.errstate(divide="ignore"):  # k1 = 0: the norm is infinite and tf saturates at once
        norm_inverse = np.float32(1) / (k1_ * ((np.float32(1) - b_) + b_ * _LENGTH_TABLE / avgdl))
    inputs = _ClauseInputs(
        idf=np.log(1 + (doc_count - df + 0.5) / (df + 0.5)).astype(np.float32),
        tf=tf.astype(np.min_scalar_type(int(tf.max()))),
        norm_bytes=_norm_bytes(doc_lengths),
        norm_inverse=norm_inverse.astype(np.float32),
    )
    data = _bm25_clause(inputs.idf[terms], inputs.tf, norm_inverse[inputs.norm_bytes[rows]])
    return data.astype(np.float32), rows, indptr, inputs


# --------------------------------------------------------------------------- the index

class SearchIndex:
    """A BM25 index over document strings ranking as Lucene 8; results are document indices.

    Build with :meth:`build`, persist with :meth:`save` / :meth:`load`. Read-only after building,
    so one instance can be shared by every env of a process (see :class:`IndexCache`); searching
    is thread-safe apart from the analyzer's memo, whose races only cost recomputation.

    >>> index = SearchIndex.build(["red shoe", "blue shoe", "red hat", "shoe rack"],
    ...                           doc_ids=["B2", "B3", "B1", "B4"])
    >>> index.search("red shoes")  # docs 0 and 2 tie on "red"; doc 0 has "shoe" too
    [0, 2, 1, 3]
    >>> index.search("red")  # equal scores: ascending id, B1 before B2
    [2, 0]
    """

    def __init__(
        self,
        model: bm25s.BM25,
        num_docs: int,
        k1: float,
        b: float,
        tie_rank: np.ndarray | None,
        inputs: _ClauseInputs,
    ) -> None:
        """Internal; use :meth:`build` or :meth:`load`."""
        self._model = model
        self._inputs = inputs
        self._num_docs = num_docs
        self.k1 = k1
        self.b = b
        #: Position of each document in the ascending order of the ids (None: ids = indices).
        self._tie_rank = tie_rank
        self._analyze = LuceneEnglishAnalyzer()
        self._vocab: dict[str, int] = model.vocab_dict

    @classmethod
    def build(
        cls,
        docs: Iterable[str],
        *,
        doc_ids: Iterable[str] | None = None,
        k1: float = 0.9,
        b: float = 0.4,
    ) -> SearchIndex:
        """Index ``docs`` (document ``i`` is the ``i``-th string) with Lucene 8's BM25.

        ``doc_ids`` (one string per document, e.g. the ASINs) only order equal scores: ascending
        id, as Anserini does; without them equal scores are ordered by index.
        """
        k1 = _check_param("k1", k1)
        b = _check_param("b", b)
        if b > 1:
            raise ValueError(f"b must be in [0, 1], got {b}")
        if isinstance(docs, str):
            raise TypeError("docs must be a sequence of strings, not a single string")
        analyze = LuceneEnglishAnalyzer()
        vocab: dict[str, int] = {}
        term_id = vocab.__getitem__
        term_ids = array("i")  # compact: a list would hold one int object per token
        lengths = array("i")
        for i, doc in enumerate(docs):  # analyzed as they arrive, so a lazy producer overlaps
            if not isinstance(doc, str):
                raise TypeError(f"docs[{i}] must be a str, got {type(doc).__name__}")
            terms = analyze(doc)
            lengths.append(len(terms))
            start = len(term_ids)
            try:
                term_ids.extend(map(term_id, terms))  # known terms: no Python-level loop
            except KeyError:
                del term_ids[start:]
                term_ids.extend([vocab.setdefault(t, len(vocab)) for t in terms])
        if not lengths:
            raise ValueError("docs must contain at least one document")
        tie_rank = None if doc_ids is None else _tie_rank(doc_ids, len(lengths))
        model = bm25s.BM25(k1=k1, b=b, method="lucene")
        if term_ids:
            data, indices, indptr, inputs = _lucene_bm25_postings(
                np.frombuffer(term_ids, dtype=np.intc),
                np.frombuffer(lengths, dtype=np.intc).astype(np.int64), len(vocab), k1, b)
        else:  # nothing but stop words: no term matches anything
            data, indices = np.zeros(0, np.float32), np.zeros(0, np.int32)
            indptr = np.zeros(1, np.int64)
            inputs = _ClauseInputs(np.zeros(0, np.float32), np.zeros(0, np.uint8),
                                   np.zeros(len(lengths), np.uint8), np.zeros(256, np.float32))
        model.scores = {"data": data, "indices": indices, "indptr": indptr,
                        "num_docs": len(lengths)}
        model.vocab_dict = vocab
        model.unique_token_ids_set = set(vocab.values())
        model.nonoccurrence_array = None  # bm25s' BM25L/BM25+ only; save() expects the attribute
        index = cls(model, len(lengths), k1, b, tie_rank, inputs)
        index._analyze = analyze  # reuse the warm memo
        return index

    def __len__(self) -> int:
        return self._num_docs

    def __repr__(self) -> str:
        return f"SearchIndex(num_docs={self._num_docs}, k1={self.k1}, b={self.b})"

    def analyze(self, text: str) -> list[str]:
        """The index terms of ``text`` (Lucene's English analyzer), in order."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return self._analyze(text)

    def scores(self, query: str) -> np.ndarray:
        """Lucene's BM25 score of every document for ``query`` (float32, 0 where nothing matches)."""
        return self._sums(query).astype(np.float32)

    def _sums(self, query: str) -> np.ndarray:
        """Every document's sum of clause scores, float64 (exact: float32 clauses add up exactly;
        Lucene too sums in double, then rounds the sum to float32)."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, got {type(query).__name__}")
        ids = [self._vocab[t] for t in self._analyze(query) if t in self._vocab]
        if not ids:
            return np.zeros(self._num_docs, dtype=np.float64)
        # A term repeated c times is one clause boosted by c (Anserini's bag-of-words query).
        uniq, counts = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
        s = self._model.scores
        data, indices, indptr = s["data"], s["indices"], s["indptr"]
        parts_idx, parts_w = [], []
        for term, count in zip(uniq.tolist(), counts.tolist()):
            start, end = int(indptr[term]), int(indptr[term + 1])
            rows = indices[start:end]
            parts_idx.append(rows)
            parts_w.append(data[start:end] if count == 1 else self._inputs.boosted(
                term, count, start, end, rows))
        return np.bincount(np.concatenate(parts_idx),
                           weights=np.concatenate(parts_w).astype(np.float64),
                           minlength=self._num_docs)

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[int]:
        """Indices of the top ``k`` documents matching ``query``, best first.

        Equal scores are ordered by ascending document id, as Anserini sorts Lucene's hits
        (without document ids, by index). Only documents sharing at least one analyzed term with
        the query are returned, so empty, stop-word-only or out-of-vocabulary queries give
        ``[]``. Never raises for a ``str`` query.
        """
        return self._top(query, k)[0].tolist()

    def search_scored(self, query: str, k: int = SEARCH_RETURN_N) -> tuple[list[int], np.ndarray]:
        """:meth:`search`'s indices and the float32 scores Anserini reports for them (its
        ``ScoreTiesAdjusterReranker``, which keeps the order): each score rounded to 4 decimals,
        and one within 1e-4 of the previous reported score lowered by 1e-6 per earlier member of
        its run."""
        hits, scores = self._top(query, k)
        return hits.tolist(), _reported_scores(scores)

    def _top(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The top ``k`` matching documents, best first, and their scores."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise TypeError(f"k must be an int, got {type(k).__name__}")
        if k <= 0:
            raise ValueError(f"k must be a positive int, got {k}")
        sums = self._sums(query)
        hits = _candidates(sums, k)
        hit_scores = sums[hits].astype(np.float32)
        if hits.size == 0:
            return hits, hit_scores
        if hits.size > k:
            threshold = np.partition(hit_scores, hits.size - k)[hits.size - k]
            keep = hit_scores >= threshold  # keeps every doc tied at the cut
            hits, hit_scores = hits[keep], hit_scores[keep]
        ties = hits if self._tie_rank is None else np.asarray(self._tie_rank[hits])
        order = np.lexsort((ties, -hit_scores))[:k]
        return hits[order], hit_scores[order]

    def save(self, path: str | Path) -> None:
        """Write the index into directory ``path`` (created if needed; files there are replaced)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self._model.save(str(path), show_progress=False)
        for name in _ClauseInputs.FIELDS:
            np.save(path / f"lucene_{name}.npy", np.asarray(getattr(self._inputs, name)))
        tie_file = path / _TIE_RANK_FILE
        if self._tie_rank is not None:
            np.save(tie_file, np.asarray(self._tie_rank))
        elif tie_file.exists():
            tie_file.unlink()
        meta = {
            "format": "rspo_gym.webshop.search",
            "version": _FORMAT_VERSION,
            "num_docs": self._num_docs,
            "k1": self.k1,
            "b": self.b,
            "analyzer": _ANALYZER,
            "scoring": _SCORING,
            "stopwords": sorted(STOP_WORDS),
            "doc_ids": self._tie_rank is not None,
        }
        (path / _META_FILE).write_text(json.dumps(meta, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path, mmap: bool = True) -> SearchIndex:
        """Load an index written by :meth:`save`; with ``mmap`` the score arrays stay on disk.

        An index written by an older version of this code (another format version, analyzer or
        scoring) is refused with a ``ValueError``: rebuild it with :meth:`build`.
        """
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
            "analyzer": _ANALYZER,
            "scoring": _SCORING,
            "stopwords": sorted(STOP_WORDS),
        }
        for key, value in expected.items():
            if meta.get(key) != value:
                raise ValueError(
                    f"index at {path} has {key}={meta.get(key)!r}, this code expects {value!r}; "
                    "rebuild it with SearchIndex.build"
                )
        model = bm25s.BM25.load(str(path), mmap=mmap)
        num_docs = int(meta["num_docs"])
        if int(model.scores["num_docs"]) != num_docs:
            raise ValueError(f"index at {path} is inconsistent: num_docs mismatch")
        tie_rank = None
        if meta.get("doc_ids"):
            tie_rank = np.load(path / _TIE_RANK_FILE, mmap_mode="r" if mmap else None)
            if len(tie_rank) != num_docs:
                raise ValueError(f"index at {path} is inconsistent: {_TIE_RANK_FILE} length")
        inputs = _ClauseInputs(**{
            name: np.load(path / f"lucene_{name}.npy", mmap_mode="r" if mmap else None)
            for name in _ClauseInputs.FIELDS})
        if len(inputs.norm_bytes) != num_docs or len(inputs.tf) != len(model.scores["data"]):
            raise ValueError(f"index at {path} is inconsistent: lucene_*.npy lengths")
        return cls(model, num_docs, float(meta["k1"]), float(meta["b"]), tie_rank, inputs)


#: :func:`_candidates` estimates the k-th best score from every this-many-th document.
_SAMPLE_STRIDE = 8


def _candidates(sums: np.ndarray, k: int) -> np.ndarray:
    """Indices of the matching documents that can be in the top ``k`` (all of them, or fewer).

    Partitioning every match of a 100k catalog costs more than the rest of a search, so the k-th
    best score of a strided sample bounds the k-th best overall from below (the sample alone has
    k documents at least that good); every document whose float32 score can reach that bound's
    is kept, so ties at the cut survive too.
    """
    sample = sums[::_SAMPLE_STRIDE]
    if k < len(sample):
        bound = np.partition(sample, len(sample) - k)[len(sample) - k]
        floor = float(np.nextafter(np.float32(bound), np.float32(0)))
        if floor > 0:
            return np.flatnonzero(sums >= floor)
    return np.flatnonzero(sums)


def _reported_scores(ranked: np.ndarray) -> np.ndarray:
    """The scores Anserini reports for float32 scores in ranked order: each rounded half up to 4
    decimals, then, when within 1e-4 of the previous reported score, lowered by ``1e-6 * dup``
    where ``dup`` counts the run so far (float32). The product ``s * 1e4`` is taken in double
    precision: rounding it to float32 first would round scores such as 7.28965 (float32) up,
    where Lucene's reported 7.2896 shows they round down."""
    scaled = ranked.astype(np.float64) * 1e4
    out = np.floor(scaled + 0.5).astype(np.float32) / np.float32(1e4)
    dup = 0
    for i in range(1, len(out)):
        if out[i - 1] - out[i] > np.float32(1e-4):
            dup = 0
        else:
            dup += 1
            out[i] = out[i] - np.float32(1e-6) * np.float32(dup)
    return out


def _tie_rank(doc_ids: Iterable[str], num_docs: int) -> np.ndarray:
    """Each document's position when the ids are sorted ascending (the tie-break key)."""
    if isinstance(doc_ids, str):
        raise TypeError("doc_ids must be a sequence of strings, not a single string")
    ids = list(doc_ids)
    if len(ids) != num_docs:
        raise ValueError(f"doc_ids has {len(ids)} ids for {num_docs} documents")
    for i, doc_id in enumerate(ids):
        if not isinstance(doc_id, str):
            raise TypeError(f"doc_ids[{i}] must be a str, got {type(doc_id).__name__}")
    order = sorted(range(num_docs), key=ids.__getitem__)
    rank = np.empty(num_docs, dtype=np.int32)
    rank[order] = np.arange(num_docs, dtype=np.int32)
    return rank

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
    doc_ids_factory: Callable[[], Iterable[str]] | None = None,
    cache: IndexCache | None = None,
    k1: float = 0.9,
    b: float = 0.4,
) -> SearchIndex:
    """The shared index for catalog ``key``; ``docs_factory()`` supplies documents on first use.

    ``doc_ids_factory()`` (optional, same order) supplies the ids that order equal scores. Uses
    :data:`DEFAULT_INDEX_CACHE` unless ``cache`` is given. ``k1``/``b`` only matter on the first
    call for a key, so make them part of ``key`` if they vary.
    """
    target = DEFAULT_INDEX_CACHE if cache is None else cache

    def build() -> SearchIndex:
        doc_ids = None if doc_ids_factory is None else doc_ids_factory()
        return SearchIndex.build(docs_factory(), doc_ids=doc_ids, k1=k1, b=b)

    return target.get(key, build)
