"""Lucene's English analyzer (as upstream WebShop's search runs it), in pure Python.

Upstream indexes and queries with Anserini's default English analyzer on Lucene 8.11: the standard
tokenizer (Unicode word breaks, UAX #29), the English possessive filter, lower-casing, Lucene's 33
English stop words and Lucene's Porter stemmer. :class:`LuceneEnglishAnalyzer` reproduces that
chain token for token on printable ASCII text, which is everything the env lets into its catalog
and its search box:

* **Tokens** (:func:`tokenize`) are maximal runs of letters, digits and ``_``, joined across one
  ``:``, ``.`` or ``'`` between two letters (``e.g``, ``men's``) and across one ``,``, ``;``,
  ``.`` or ``'`` between two digits (``5.5``, ``1,000``); letters and digits join directly
  (``2.4g``, ``v1.5``, ``3.5mm``). So one-character tokens (``4``, ``x``, ``c``) are kept, decimals
  stay whole, and every other ASCII character (space, ``-``, ``/``, ``"``, ``(``, ...) separates.
  A run of ``_`` alone is no token. Tokens longer than 255 characters are cut at 255 and the rest
  re-tokenized (Lucene's ``maxTokenLength``).
* **Possessives**: a trailing ``'s`` (or ``’s``) is dropped (``men's`` -> ``men``; ``it's`` ->
  ``it``, then a stop word).
* **Stop words**: Lucene's ``ENGLISH_STOP_WORDS_SET`` (:data:`STOP_WORDS`), removed before stemming.
* **Stemming**: :func:`porter_stem`, Lucene's ``PorterStemmer`` (Martin Porter's C version: words of
  one or two characters are left alone, ``-bli`` -> ``-ble`` and ``-logi`` -> ``-log``). Snowball's
  ``porter`` (PyStemmer) differs on such words (``us`` -> ``u``, ``possibly`` -> ``possibli``), so
  the Lucene variant is implemented here; stems are memoized per word.

Where this knowingly differs from Lucene (none of it reachable from the env, which refuses
non-ASCII searches and whose catalog is ASCII): outside ASCII, letters are what Python's ``\\w``
calls letters and digits what ``\\d`` calls digits, joined by the same rules plus the typographic
apostrophe ``’``; Lucene instead splits Chinese/Japanese ideographs and Hiragana into one token per
character, joins Katakana and Hebrew by their own rules, keeps Thai/Lao/Myanmar runs whole, keeps
emoji as tokens, absorbs combining marks and format characters (soft hyphen, zero-width joiner)
into the word, and lower-cases per code point (Python's ``str.lower`` may change a token's
length, e.g. ``İ``).
"""

from __future__ import annotations

import re

import bm25s

__all__ = ["LuceneEnglishAnalyzer", "MAX_TOKEN_LENGTH", "STOP_WORDS", "porter_stem", "tokenize"]

#: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (33 words; bm25s ships the same list).
STOP_WORDS: frozenset[str] = frozenset(bm25s.stopwords.STOPWORDS_EN)

#: ``StandardTokenizer``'s default ``maxTokenLength``: longer tokens are cut into pieces.
MAX_TOKEN_LENGTH = 255

_LETTER = r"[^\W\d_]"
#: UAX #29 rules WB5-WB13b restricted to what a tokenizer of ASCII text meets: ``\w`` runs (letters,
#: digits and ExtendNumLet ``_`` never break between each other: WB5, WB8-WB10, WB13a/b), joined by
#: MidLetter ``:``, MidNumLet ``.`` or Single_Quote ``'`` between letters (WB6/7) and by MidNum
#: ``,`` ``;``, MidNumLet ``.`` or Single_Quote ``'`` between digits (WB11/12).
#: Possessive quantifiers only skip backtracking that can never succeed (no ``\w`` is a joiner).
_TOKEN_RE = re.compile(
    rf"\w++(?:(?:(?<={_LETTER})[:.'\u2019](?={_LETTER})|(?<=\d)[,;.'\u2019](?=\d))\w++)*+"
)
_POSSESSIVE_ENDINGS = ("'s", "\u2019s")


def tokenize(text: str) -> list[str]:
    """``StandardTokenizer``'s tokens of ``text`` (case kept), in order; see the module doc.

    >>> tokenize("Men's 2.4G Pack-of-4 vitamin C, 1,000 ct. e.g. x_1 ___")
    ["Men's", '2.4G', 'Pack', 'of', '4', 'vitamin', 'C', '1,000', 'ct', 'e.g', 'x_1']
    """
    out: list[str] = []
    for token in _TOKEN_RE.findall(text):
        if len(token) > MAX_TOKEN_LENGTH:
            out.append(token[:MAX_TOKEN_LENGTH])
            out.extend(tokenize(token[MAX_TOKEN_LENGTH:]))
        elif token.strip("_"):
            out.append(token)
    return out


# --------------------------------------------------------------------------- Porter stemmer
# Lucene's PorterStemmer (org.apache.lucene.analysis.en), i.e. Martin Porter's reference C version
# of the 1980 algorithm. Working on a str ``w`` (the current word); ``stem`` below is the part
# before a matched suffix (Porter's ``b[k0..j]``).

def _is_cons(w: str, i: int) -> bool:
    """Whether ``w[i]`` is a consonant: not a, e, i, o, u; ``y`` is one at the start or after a
    vowel. Digits and punctuation count as consonants."""
    c = w[i]
    if c in "aeiou":
        return False
    if c == "y":
        return i == 0 or not _is_cons(w, i - 1)
    return True


def _measure(w: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in ``w`` ([C](VC)^m[V])."""
    n, i, end = 0, 0, len(w)
    while i < end and _is_cons(w, i):
        i += 1
    while True:
        while i < end and not _is_cons(w, i):
            i += 1
        if i >= end:
            return n
        while i < end and _is_cons(w, i):
            i += 1
        n += 1


def _has_vowel(w: str) -> bool:
    return any(not _is_cons(w, i) for i in range(len(w)))


def _double_cons(w: str) -> bool:
    """Whether ``w`` ends in a double consonant (``tt``, ``ss``)."""
    return len(w) >= 2 and w[-1] == w[-2] and _is_cons(w, len(w) - 1)


def _cvc(w: str) -> bool:
    """Whether ``w`` ends consonant-vowel-consonant, the last not w, x or y (``hop``, not ``box``)."""
    i = len(w) - 1
    return (i >= 2 and _is_cons(w, i) and not _is_cons(w, i - 1) and _is_cons(w, i - 2)
            and w[i] not in "wxy")


def _step1(w: str) -> str:
    """Plurals, -ed, -ing: caresses -> caress, ponies -> poni, agreed -> agree, matting -> mat."""
    if w.endswith("s"):
        if w.endswith("sses"):
            w = w[:-2]
        elif w.endswith("ies"):
            w = w[:-2]
        elif len(w) >= 2 and w[-2] != "s":
            w = w[:-1]
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
        return w
    for suffix in ("ed", "ing"):
        if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
            w = w[: -len(suffix)]
            if w.endswith(("at", "bl", "iz")):
                return w + "e"
            if _double_cons(w):
                return w if w[-1] in "lsz" else w[:-1]
            if _measure(w) == 1 and _cvc(w):
                return w + "e"
            return w
    return w


def _step2(w: str) -> str:
    """Terminal y -> i when the stem has a vowel: happy -> happi."""
    if w.endswith("y") and _has_vowel(w[:-1]):
        return w[:-1] + "i"
    return w


#: (suffix, replacement) lists keyed by the character Lucene switches on; the first suffix that
#: matches decides, and it is replaced only when the stem before it has m > 0.
_STEP3 = {
    "a": (("ational", "ate"), ("tional", "tion")),
    "c": (("enci", "ence"), ("anci", "ance")),
    "e": (("izer", "ize"),),
    "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
    "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
    "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
    "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
    "g": (("logi", "log"),),
}
_STEP4 = {
    "e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
    "i": (("iciti", "ic"),),
    "l": (("ical", "ic"), ("ful", "")),
    "s": (("ness", ""),),
}
#: Step 5 suffixes, removed when the stem has m > 1 (``ion`` only after s or t).
_STEP5 = {
    "a": ("al",), "c": ("ance", "ence"), "e": ("er",), "i": ("ic",), "l": ("able", "ible"),
    "n": ("ant", "ement", "ment", "ent"), "o": ("ion", "ou"), "s": ("ism",), "t": ("ate", "iti"),
    "u": ("ous",), "v": ("ive",), "z": ("ize",),
}


def _replace_suffix(w: str, rules: tuple[tuple[str, str], ...]) -> str:
    for suffix, replacement in rules:
        if w.endswith(suffix):
            stem = w[: -len(suffix)]
            return stem + replacement if _measure(stem) > 0 else w
    return w


def _step5(w: str) -> str:
    """-ant, -ence, ... off when m > 1: adjustment -> adjust."""
    for suffix in _STEP5.get(w[-2], ()):
        if w.endswith(suffix):
            stem = w[: -len(suffix)]
            if suffix == "ion" and not (stem and stem[-1] in "st"):
                continue
            return stem if _measure(stem) > 1 else w
    return w


def _step6(w: str) -> str:
    """A final -e off when m > 1 (or m == 1 and not cvc); -ll -> -l when m > 1."""
    if w.endswith("e"):
        m = _measure(w)
        if m > 1 or (m == 1 and not _cvc(w[:-1])):
            w = w[:-1]
    if w.endswith("l") and _double_cons(w) and _measure(w) > 1:
        w = w[:-1]
    return w


def porter_stem(word: str) -> str:
    """Lucene's Porter stem of a lower-case token; words of one or two characters are kept.

    >>> [porter_stem(w) for w in ("caresses", "ponies", "relational", "possibly", "us", "2.4g")]
    ['caress', 'poni', 'relat', 'possibl', 'us', '2.4g']
    """
    if len(word) <= 2:
        return word
    w = _step2(_step1(word))
    if len(w) > 1:
        w = _replace_suffix(w, _STEP3.get(w[-2], ()))
    w = _replace_suffix(w, _STEP4.get(w[-1], ()))
    if len(w) > 1:
        w = _step5(w)
    return _step6(w)


# --------------------------------------------------------------------------- the analyzer

class LuceneEnglishAnalyzer:
    """Text -> index terms, as Anserini's default English analyzer; memoizes each token's term.

    Thread-safe in the sense that races on the memo only cost recomputation.

    >>> LuceneEnglishAnalyzer()("The Men's vitamin C gummies, pack of 4 (5.5 oz)")
    ['men', 'vitamin', 'c', 'gummi', 'pack', '4', '5.5', 'oz']
    """

    #: Memo entries kept before the memo is cleared (bounds memory on adversarial query streams).
    max_memo = 1_000_000

    def __init__(self) -> None:
        # lower-case token -> term, or None for a stop word, so one lookup per token does all
        self._terms: dict[str, str | None] = dict.fromkeys(STOP_WORDS)

    def __call__(self, text: str) -> list[str]:
        if not text.isascii():
            return self._analyze_unicode(text)
        tokens = _TOKEN_RE.findall(text.lower())
        terms = self._terms
        try:
            return [t for t in map(terms.__getitem__, tokens) if t is not None]
        except KeyError:
            pass
        missing = {t for t in tokens if t not in terms}
        if any(len(t) > MAX_TOKEN_LENGTH for t in missing):
            return self._analyze_unicode(text)  # cut into pieces there; never memoized
        self._bound_memo()
        for token in missing:  # a run of "_" alone is no token, so it has no term
            terms[token] = self.term(token) if token.strip("_") else None
        return [t for t in map(terms.__getitem__, tokens) if t is not None]

    def _analyze_unicode(self, text: str) -> list[str]:
        """Non-ASCII text (lower-cased token by token, as Lucene), or over-long tokens."""
        self._bound_memo()
        terms = self._terms
        out = []
        for token in tokenize(text):
            lowered = token.lower()
            term = terms.get(lowered, "")
            if term == "":
                term = terms[lowered] = self.term(token)
            if term is not None:
                out.append(term)
        return out

    def _bound_memo(self) -> None:
        if len(self._terms) > self.max_memo:
            self._terms.clear()
            self._terms.update(dict.fromkeys(STOP_WORDS))

    @staticmethod
    def term(token: str) -> str | None:
        """One token's index term (possessive off, lower-cased, stemmed), ``None`` if a stop word."""
        if token.endswith(_POSSESSIVE_ENDINGS) or token.endswith(("'S", "\u2019S")):
            token = token[:-2]
        token = token.lower()
        if token in STOP_WORDS:
            return None
        return porter_stem(token)
