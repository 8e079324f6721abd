"""Lucene's English analyzer: standard-tokenizer word breaks, possessives, stop words, Porter."""

import pytest

from rspo_gym.envs.webshop.analysis import (
    MAX_TOKEN_LENGTH,
    STOP_WORDS,
    LuceneEnglishAnalyzer,
    porter_stem,
    tokenize,
)


@pytest.fixture()
def analyze():
    return LuceneEnglishAnalyzer()


@pytest.mark.parametrize(
    "text, tokens",
    [
        # one-character tokens are kept
        ("pack of 4", ["pack", "of", "4"]),
        ("vitamin c", ["vitamin", "c"]),
        ("x-large", ["x", "large"]),
        ("size: x", ["size", "x"]),
        # decimals and numbers with separators stay whole; letters and digits join directly
        ("5.5 ounce", ["5.5", "ounce"]),
        ("2.4g wireless", ["2.4g", "wireless"]),
        ("v1.5 3.5mm", ["v1.5", "3.5mm"]),
        ("1,000 pcs; 2;3", ["1,000", "pcs", "2;3"]),
        ("60.00 dollars.", ["60.00", "dollars"]),
        ("5'6 tall", ["5'6", "tall"]),
        # a mid character joins only between two letters or two digits
        ("e.g. u.s.a.", ["e.g", "u.s.a"]),
        ("a:b ratio 10:30", ["a:b", "ratio", "10", "30"]),
        ("ab.1 1.ab a1.b 1,a a,b", ["ab", "1", "1", "ab", "a1", "b", "1", "a", "a", "b"]),
        ("men's o'neil", ["men's", "o'neil"]),
        ("rock'n'roll 'quoted'", ["rock'n'roll", "quoted"]),
        # every other ASCII character separates
        ("black/white (2-pack) #1 \"big\" 50% a+b a&b a|b", [
            "black", "white", "2", "pack", "1", "big", "50", "a", "b", "a", "b", "a", "b"]),
        # underscores join (ExtendNumLet) but alone make no token
        ("snake_case _x x_ ___ 1_000", ["snake_case", "_x", "x_", "1_000"]),
        ("", []),
        ("  ?? -- ", []),
    ],
)
def test_tokenize(text, tokens):
    assert tokenize(text) == tokens


def test_long_tokens_are_cut_at_lucene_max_length():
    word = "a" * (MAX_TOKEN_LENGTH + 10)
    assert tokenize(f"x {word} y") == ["x", "a" * MAX_TOKEN_LENGTH, "a" * 10, "y"]


def test_stop_words_are_lucenes_33():
    assert STOP_WORDS == frozenset(
        "a an and are as at be but by for if in into is it no not of on or such that the their "
        "then there these they this to was will with".split()
    )


@pytest.mark.parametrize(
    "text, terms",
    [
        ("Men's Running Shoes", ["men", "run", "shoe"]),
        ("it's the best", ["best"]),  # it's -> it, a stop word
        ("MEN'S", ["men"]),
        ("women\u2019s", ["women"]),  # typographic apostrophe
        ("vitamin c gummies, pack of 4", ["vitamin", "c", "gummi", "pack", "4"]),
        ("2.4g 5.5 x", ["2.4g", "5.5", "x"]),
        ("the and of with to a", []),
        ("size xs or us 10", ["size", "xs", "us", "10"]),  # no stemming of 1-2 letter words
    ],
)
def test_analyzer(analyze, text, terms):
    assert analyze(text) == terms
    assert analyze(text) == terms  # memoized path gives the same


def test_analyzer_non_ascii_and_junk(analyze):
    # è is no vowel to Porter: "crème" has m = 0 and keeps its e
    assert analyze("caf\u00e9 cr\u00e8me") == ["caf\u00e9", "cr\u00e8me"]
    assert analyze("\ud800 \x00 \U0001f45f") == []
    assert analyze("x" * 600) == ["x" * 255, "x" * 255, "x" * 90]


@pytest.mark.parametrize(
    "word, stem",
    [
        ("caresses", "caress"), ("ponies", "poni"), ("ties", "ti"), ("cats", "cat"),
        ("feed", "feed"), ("agreed", "agre"), ("disabled", "disabl"), ("matting", "mat"),
        ("mating", "mate"), ("meeting", "meet"), ("milling", "mill"), ("messing", "mess"),
        ("meetings", "meet"), ("happy", "happi"), ("relational", "relat"),
        ("conditional", "condit"), ("generalization", "gener"), ("hopefulness", "hope"),
        ("adjustment", "adjust"), ("controlling", "control"), ("rolling", "roll"),
        ("electrical", "electr"), ("running", "run"), ("waterproof", "waterproof"),
        # where Lucene's Porter (the C reference) differs from Snowball's "porter"
        ("possibly", "possibl"), ("technology", "technolog"), ("trekking", "trek"),
        ("us", "us"), ("xs", "xs"), ("is", "is"), ("s", "s"),
        # digits and punctuation count as consonants
        ("2.4g", "2.4g"), ("10s", "10"), ("o'neil", "o'neil"), ("e.g", "e.g"),
    ],
)
def test_porter_stem(word, stem):
    assert porter_stem(word) == stem


def test_porter_differs_from_snowball_porter_where_lucene_does():
    stemmer = pytest.importorskip("Stemmer")  # PyStemmer, optional: only for this comparison
    snowball = stemmer.Stemmer("porter")
    assert [snowball.stemWord(w) for w in ("possibly", "trekking", "us")] == [
        "possibli", "trekk", "u"]
