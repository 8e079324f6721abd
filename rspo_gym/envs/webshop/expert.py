"""A scripted WebShop shopper that reads only the page text and the instruction.

:class:`ScriptedShopper` never looks at the hidden goal (target ASIN, goal attributes/options,
hidden attributes or hidden reward price). It

1. searches with the instruction minus its opening phrase, price clause and filler words;
2. on a results page parses the ``[SEP]`` segments into ``(asin, title, price text)`` rows, drops
   rows whose *shown* price (the lowest of a range) is above the instruction's ``price lower than
   X dollars`` bound, and opens the best-ranked untried row (search rank first, then title overlap
   with the instruction's non-option words, less for a title without the request's head noun or a
   price range reaching over the bound); rows far below the page's best overlap wait until the
   closer ones are tried;
3. on the item page picks, per option group, the value the instruction names (where it names
   several, the one named last, as option mentions follow the attributes; "a | b" read as
   "a and b"), then checks which instruction words the title, the picked options, the group names,
   Features and (if still needed) Description do not explain; option mentions of the instruction
   (``pack of N``, ``N inch``, ``N ounce (pack of N)``, sizes, colours named as colours, option
   values seen on any item page, an option kind named for which the item's group offers nothing
   asked for) that the item does not offer, a title without the head noun ("controller" of "a
   gaming controller that's wireless") and the chance that a price range ends over the bound (the
   hidden price is somewhere in it) lower its coverage; an item with such a visible defect is left
   at once while the budget allows;
4. buys an item that explains every word; otherwise moves on to the next row while the budget
   still allows coming back (``< Prev`` + click) to the best item seen (re-scored with the option
   values seen since), and buys that one.

It is deterministic: the same pages give the same actions. On the 500 test goals of the default
1,000-product catalog it scores 0.991 mean / 97.0 % success (``--policy random``: 0.218 / 5.4 %),
in 7.9 steps on average; on the 1,000 valid goals 0.989 / 96.2 %; on the 500 test goals of the
100,000-product catalog 0.984 / 94.6 % (``benchmarks/webshop_expert.py``).
The remaining failures are look-alike items ranked above the target whose visible pages explain
the instruction as well (the deciding attributes are in Features/Description of a target the
15-step budget does not reach, or nowhere visible), and options the instruction names without a
cue. Used by :meth:`WebShopEnv.expert_action`.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

__all__ = ["ScriptedShopper", "head_noun", "price_bound", "price_risk", "search_query"]

_SEP = " [SEP] "
_PRICE_RE = re.compile(r",?\s*and price lower than (\d+(?:\.\d+)?) dollars\s*$")
_MONEY_RE = re.compile(r"\$\s*([\d,]+(?:\.\d+)?)")
_WORD_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_ASIN_RE = re.compile(r"^[A-Z0-9]{10}$")

#: ordinary request openings ("i am looking for", "do you have", ...); the longest match is cut
_OPENERS = tuple(sorted((
    "i am looking for", "i'm looking for", "im looking for", "i am searching for",
    "im searching for", "i'm searching for", "i am shopping for", "im shopping for",
    "i am interested in", "im interested in", "i'm interested in", "i would like to buy",
    "i would like to get", "i would like", "i'd like to buy", "id like to buy", "i'd like",
    "id like",
    "i want to find", "i want to buy", "i want to get", "i want", "i need to find", "i need to buy",
    "i need", "i wish to buy", "i wish to get", "i have to buy", "i have to get", "i must have",
    "i require", "i am trying to find", "im trying to find", "i'm trying to find", "we need",
    "my wife needs", "my husband needs", "do you have", "can i get", "can you find me",
    "can you find", "please find", "please get me", "help me find", "find me", "get me", "order me",
    "buy me", "show me", "looking for", "search for", "look for",
), key=len, reverse=True))
_STOP = frozenset("""
a an the and or of for to in on with without that thats that's which who having has have is are be
it its it's this these those my me i im i'm we our you your some any one ones pair pack please
would like want need looking find get order buy search also good great nice best color colour
colored size sized style type kind made make by from as at about very really just so all can
could should will am require requires required interested searching shopping get some
""".split())
from rspo_gym.envs.webshop.reward import COLOR_SET  # noqa: E402

_COLOR_WORDS = frozenset(COLOR_SET)
_COLOR_CUES = frozenset({"in", "color", "colour", "colored", "and"})

#: words that name option values (colours, sizes, counts): missing from an item page they mean the
#: item cannot be bought with the asked-for option
_OPTION_WORDS = frozenset(COLOR_SET) | frozenset("""
small medium large xl xxl xs pack pc pcs count oz fl inch ft feet foot queen king twin full gb tb
""".split())
#: result rows this far below the page's best title overlap (share of the instruction's content
#: words) are opened only once the closer rows are tried
RANK_MARGIN = 0.34
OPT_PEN = 0.15  # coverage penalty per asked-for option the item does not offer
HEAD_PEN = 0.3  # title-overlap and coverage penalty for a title without the request's head noun
#: coverage penalty times the chance that the hidden price is over the bound (a failed price
#: costs a whole share of the reward, like a missing attribute of a short instruction)
PRICE_PEN = 0.3
PRICE_RANK_PEN = 0.05  # result-row penalty times that chance


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(text.lower())


def _stem(w: str) -> str:
    w = w.replace("'s", "").replace("'", "")
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("es") and w[-3] in "sxz":
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def _content(text: str) -> list[str]:
    return [_stem(w) for w in _words(text) if w not in _STOP]


def price_bound(instruction: str) -> float | None:
    """The ``price lower than X dollars`` bound of ``instruction``, or None."""
    m = _PRICE_RE.search(instruction.strip().lower())
    return float(m.group(1)) if m else None


def _strip(instruction: str) -> str:
    text = _PRICE_RE.sub("", instruction.strip().lower())
    for op in _OPENERS:
        if text.startswith(op + " "):
            text = text[len(op) + 1:]
            break
    return text


_HEAD_END = re.compile(r"\b(?:that|thats|that's|which|who|with|without|having|has|have|for|in|"
                       r"good|suitable|as|size|pack|flavor|scent|style|pattern)\b|[,(]|\d")
_HEAD_LEAD = re.compile(r"^(?:(?:a|an|some|the|one|pair|of|to|buy|get)\s+)+")


def head_noun(instruction: str) -> str | None:
    """The (stemmed) noun the request is about: the last word of its opening noun phrase, before
    the first clause, option or colour ("a gaming controller that's wireless" -> "controller")."""
    body = _strip(instruction)
    m = _HEAD_END.search(body)
    words = _words(_HEAD_LEAD.sub("", (body[:m.start()] if m else body).strip()))
    if words and words[-1] in {"color", "colour", "colored"}:  # "... speaker rose gold color"
        words.pop()
        while words and words[-1] in _COLOR_WORDS:
            words.pop()
    return _stem(words[-1]) if words and words[-1] not in _STOP else None


def search_query(instruction: str) -> str:
    """The instruction without opener, price clause and filler words (order kept, ASCII only)."""
    words = [w for w in _words(_strip(instruction)) if w not in _STOP and w.isascii()]
    query = " ".join(words).strip()
    return query or "product"


def _shown_low(price_text: str) -> float | None:
    nums = [float(x.replace(",", "")) for x in _MONEY_RE.findall(price_text)]
    return min(nums) if nums else None


def price_risk(price_text: str, bound: float | None) -> float:
    """Chance that the price behind ``price_text`` is over ``bound``: 0 or 1 for a single price,
    the share of a shown range ``$a to $b`` above the bound (the price is somewhere in it)."""
    nums = [float(x.replace(",", "")) for x in _MONEY_RE.findall(price_text)]
    if bound is None or not nums:
        return 0.0
    lo, hi = min(nums), max(nums)
    if hi <= bound:
        return 0.0
    if lo > bound or hi == lo:
        return 1.0
    return (hi - bound) / (hi - lo)


class ScriptedShopper:
    """Deterministic page-reading expert: ``reset(instruction)``, then ``act(obs, actions)``."""

    #: step budget it plans for (the registered env truncates at 15)
    max_steps = 15

    def __init__(self, instruction: str = "") -> None:
        self.reset(instruction)

    def reset(self, instruction: str) -> None:
        self.instruction = instruction
        self.body = _strip(instruction)
        self.body_norm = " " + " ".join(_words(self.body)) + " "
        self.bound = price_bound(instruction)
        self.query = search_query(instruction)
        self.want = list(dict.fromkeys(_content(self.body)))
        self.want_set = frozenset(self.want)
        # adjacent content-word pairs of the instruction (phrase evidence for option-like words)
        cw = [_stem(w) for w in _words(self.body) if w not in _STOP]
        self.pairs = {(a, b) for a, b in zip(cw, cw[1:])}
        self.steps = 0
        self.tried: set[str] = set()
        self.item: str | None = None  # asin being viewed
        self.selected: dict[int, str] = {}  # option group index -> clicked value
        self.page_text: dict[str, str] = {}  # sub-page texts of the current item
        self.pending_sub: str | None = None
        self.best: tuple[float, str, int] | None = None  # (coverage, asin, option clicks)
        #: items seen: asin -> (coverage before option-mention penalties, option value parts,
        #: normalized title, option clicks to buy, penalty for an unoffered colour seen at once)
        self.seen: dict[str, tuple[float, set[str], str, int, float]] = {}
        self.final = False  # committed to buying the current item
        self.goto: str | None = None  # asin to return to and buy
        self.seen_vals: set[str] = set()  # normalized option-value parts seen on item pages
        self.base_mentions = self._static_mentions()
        # option mentions are looked for in option lists, not in result titles
        opt_words = set(_content(" ".join(self.base_mentions)))
        self.title_want = frozenset(w for w in self.want if w not in opt_words) or self.want_set
        self.noun = head_noun(instruction)

    # ------------------------------------------------------------------ option mentions

    def _static_mentions(self) -> set[str]:
        """Option-like phrases of the instruction (counts, sizes, colours), normalized."""
        nb = self.body_norm
        out = set()
        for rx in (r"(?= (\d+ ounce pack of \d+) )", r"(?= (pack of \d+) )",
                   r"(?= (\d+(?: \d+)? inch) )", r"(?= (\d+ ?[gt]b) )",
                   r"(?= size ((?:california )?(?:king|queen|full|twin)(?: xl)?) )",
                   r"(?= ((?:california )?(?:king|queen|full|twin)(?: xl)?) size )"):
            out.update(m.group(1) for m in re.finditer(rx, nb))
        # colour runs named as a colour: "in gold", "color black and red", "in the color green",
        # "blue color", "in grey king size"
        words = nb.split()
        for i, w in enumerate(words):
            if w not in _COLOR_WORDS or (i and words[i - 1] in _COLOR_WORDS):
                continue
            j = i
            while j + 1 < len(words) and words[j + 1] in _COLOR_WORDS:
                j += 1
            prev = words[i - 1] if i else ""
            nxt = words[j + 1] if j + 1 < len(words) else ""
            cued = prev in _COLOR_CUES and (nxt in _STOP or nxt in _OPTION_WORDS
                                             or nxt in {"", "colour"})
            if cued or nxt in {"color", "colour"}:
                out.add(" ".join(words[i:j + 1]))
        return out

    def _mentions(self) -> set[str]:
        nb = self.body_norm
        out = set(self.base_mentions)
        out.update(v for v in self.seen_vals if f" {v} " in nb)
        return {m for m in out if not any(m != o and f" {m} " in f" {o} " for o in out)}

    def _offered(self, m: str, parts: set[str], title: str = "") -> bool:
        pm = f" {m} "
        if m not in self.base_mentions and pm in title:
            return True  # named by the title (an attribute that is also an option value)
        return any(p == m or (pm in f" {p} " and f" {p} " in self.body_norm) for p in parts)

    # ------------------------------------------------------------------ scoring

    def _title_score(self, title: str) -> float:
        if not self.want:
            return 0.0
        toks = _content(title)
        s = len(self.title_want.intersection(toks)) / len(self.title_want)
        return s - (HEAD_PEN if self.noun is not None and self.noun not in toks else 0.0)

    def _choose(self, rows: list[tuple[str, str, str]]) -> str | None:
        ok = []
        for k, (asin, title, price) in enumerate(rows):
            low = _shown_low(price)
            if self.bound is not None and low is not None and low > self.bound:
                continue
            ok.append((k, asin, title, price))
        if not ok:
            return None
        top = max(self._title_score(t) for _, _, t, _ in ok)
        # rows close to the best title overlap first; once those are tried, the rest in rank order
        for margin in (RANK_MARGIN, 1.0):
            best: tuple[float, str] | None = None
            for k, asin, title, price in ok:
                if asin.lower() in self.tried:
                    continue
                s = self._title_score(title)
                if s < top - margin or s <= 0:
                    continue
                key = s * 0.5 - 0.1 * k - PRICE_RANK_PEN * price_risk(price, self.bound)
                if best is None or key > best[0]:
                    best = (key, asin)
            if best is not None:
                return best[1]
        return None

    # ------------------------------------------------------------------ acting

    def act(self, observation: str, available_actions: Mapping[str, Any]) -> str:
        """The next action (a ``search[...]`` or ``click[...]`` valid on this page)."""
        self.steps += 1
        clickables = list(available_actions.get("clickables", ()))
        cset = set(clickables)
        if available_actions.get("has_search_bar"):
            self.item = None
            return f"search[{self.query}]"
        segs = [s.strip() for s in observation.split(_SEP)]
        if any(re.match(r"^Page \d+ \(Total results: \d+\)$", s) for s in segs):
            return self._on_results(segs, cset)
        if "buy now" in cset:
            return self._on_item(segs, cset)
        if "< prev" in cset and self.pending_sub is not None:  # a sub-page: read it, go back
            body = segs[segs.index("< Prev") + 1:] if "< Prev" in segs else []
            self.page_text[self.pending_sub] = " ".join(body).lower()
            self.pending_sub = None
            return "click[< prev]"
        if "< prev" in cset:
            return "click[< prev]"
        if "back to search" in cset:
            return "click[back to search]"
        return f"click[{clickables[0]}]" if clickables else f"search[{self.query}]"

    def _left(self) -> int:
        """Actions still allowed, this one included."""
        return self.max_steps - self.steps + 1

    def _on_results(self, segs: list[str], cset: set[str]) -> str:
        self.item = None
        start = next(i for i, s in enumerate(segs) if s.startswith("Page ") and "Total results" in s)
        rows: list[tuple[str, str, str]] = []
        i = start + 1
        while i < len(segs):
            s = segs[i]
            if _ASIN_RE.match(s) and s.lower() in cset:
                rows.append((s, segs[i + 1] if i + 1 < len(segs) else "",
                             segs[i + 2] if i + 2 < len(segs) else ""))
                i += 3
            else:
                i += 1
        if self.goto is not None and self.goto.lower() in cset:
            asin = self.goto
            self._open(asin)
            self.final = True
            return f"click[{asin.lower()}]"
        pick = self._choose(rows)
        if pick is None:
            if self.best is not None and self.best[1].lower() in cset:
                self.goto = self.best[1]
                return self._on_results(segs, cset)
            if not rows:
                return "click[back to search]"
            pick = max(((a, self._title_score(t)) for a, t, _ in rows), key=lambda x: x[1])[0]
        self._open(pick)
        return f"click[{pick.lower()}]"

    def _open(self, asin: str) -> None:
        self.tried.add(asin.lower())
        self.item = asin
        self.selected = {}
        self.page_text = {}
        self.pending_sub = None

    def _missing(self, title: str, picked: list[str]) -> list[str]:
        """Instruction content words the item's seen pages do not explain (``picked``: the picked
        option values and the option group names, e.g. "flavor" of "decaf flavor")."""
        strong = set(_content(title))
        for v in picked:
            strong.update(_content(v))
        subs = " ".join(self.page_text.values())
        sub_toks = _content(subs)
        weak = set(sub_toks)
        sub_pairs = set(zip(sub_toks, sub_toks[1:]))
        out = []
        for w in self.want:
            if w in strong:
                continue
            if w in weak:
                if not (w in _OPTION_WORDS or w.isdigit()):
                    continue
                if any((a == w or b == w) and (a, b) in sub_pairs for a, b in self.pairs):
                    continue
            out.append(w)
        return out

    def _parse_item(self, segs: list[str], cset: set[str]
                    ) -> tuple[list[list[str]], list[str], str]:
        """Option groups (values lower-case, page order), their names and the title."""
        start = segs.index("< Prev") + 1 if "< Prev" in segs else 0
        pi = next((i for i, s in enumerate(segs) if s.startswith("Price: ")), len(segs))
        title = segs[pi - 1] if pi > 0 else ""
        groups: list[list[str]] = []
        names: list[str] = []
        for s in segs[start:pi - 1]:
            if s.lower() in cset and groups:
                groups[-1].append(s.lower())
            else:
                groups.append([])
                names.append(s.lower())
        keep = [i for i, g in enumerate(groups) if g]
        return [groups[i] for i in keep], [names[i] for i in keep], title

    def _option_pick(self, values: list[str]) -> str | None:
        """The value of one option group the instruction names: a value phrase named verbatim
        (where several are, the one named last - option mentions follow the attributes, as in "with
        chamomile and peppermint flavor rooibos" - then the longest), else a value whose words all
        occur in the instruction (the longest)."""
        body = self.body_norm
        best: tuple[tuple[int, int, int], str] | None = None
        for v in values:
            vw = _words(v.replace(" | ", " and "))
            if not vw:
                continue
            phrase = " " + " ".join(vw) + " "
            if phrase in body:
                key = (2, body.rindex(phrase) + len(phrase), len(phrase))
            else:
                stems = {_stem(w) for w in _words(v) if w not in {"and", "with", "of"}}
                if not stems or not all(f" {w} " in body or w in self.want_set for w in stems):
                    continue
                key = (1, 0, len(phrase))
            if best is None or key > best[0]:
                best = (key, v)
        return None if best is None else best[1]

    def _rescore(self) -> float:
        """Coverage of every item seen so far, with the option mentions known now (values seen on
        later pages can show that an earlier item lacks an asked-for option); sets ``best`` (the
        first-seen of the highest) and returns the current item's coverage."""
        mentions = self._mentions()
        self.best = None
        cur = 0.0
        for asin, (base, parts, tnorm, n_opt, early) in self.seen.items():
            miss = sum(1 for m in mentions if not self._offered(m, parts, tnorm))
            cov = base - OPT_PEN * miss - early
            if asin == self.item:
                cur = cov
            if self.best is None or cov > self.best[0]:
                self.best = (cov, asin, n_opt)
        return cur

    def _on_item(self, segs: list[str], cset: set[str]) -> str:
        groups, names, title = self._parse_item(segs, cset)
        picks = [self._option_pick(g) for g in groups]
        n_opt = sum(1 for p in picks if p is not None)
        left = self._left()
        if not self.final and self.item is not None:
            parts = {" ".join(_words(x)) for g in groups for v in g
                     for x in [v.replace(" | ", " and "), *v.split(" | ")]}
            self.seen_vals.update(x for x in parts if x)
            tnorm = " " + " ".join(_words(title)) + " "
            opt_miss = [m for m in self._mentions() if not self._offered(m, parts, tnorm)]
            # an option kind the instruction names ("style nude", "decaf flavor") for which the
            # item's group offers nothing the instruction names
            named = sum(1 for n, p in zip(names, picks) if p is None and _words(n)
                        and f" {_words(n)[0]} " in self.body_norm)
            missing = self._missing(title, [p for p in picks if p] + names)
            base = 1.0 - len(missing) / max(1, len(self.want)) - OPT_PEN * named
            other_kind = self.noun is not None and self.noun not in _content(title)
            if other_kind:
                base -= HEAD_PEN  # probably another kind of product
            price = next((s for s in segs if s.startswith("Price: ")), "")
            risk = price_risk(price, self.bound)
            base -= PRICE_PEN * risk
            early = self.seen.get(self.item, (0.0,) * 5)[4]
            self.seen[self.item] = (base, parts, tnorm, n_opt, early)
            cov = self._rescore()
            buy_cost = n_opt + 1
            if self.best[1] == self.item:
                finish = buy_cost
            else:
                finish = max(buy_cost, 3 + self.best[2])
            allvals = set(_content(" ".join(v for g in groups for v in g)))
            optlike = [w for w in missing if w in COLOR_SET and w not in allvals
                       and re.search(rf"\b(in|color|colou?r:?|the color) {w}\b|\b{w} colou?r\b",
                                     self.body)]
            # a visible defect no sub-page can repair: leave at once while the budget allows
            if (optlike or opt_miss or named or other_kind) and not self.page_text \
                    and "< prev" in cset and left - 2 >= 3 + max(self.best[2], n_opt) + 1:
                self.seen[self.item] = (base, parts, tnorm, n_opt, 0.5 if optlike else 0.0)
                self._rescore()
                return "click[< prev]"
            if cov < 1.0 and len(missing) > 0:
                for sub in ("features", "description"):
                    if sub not in self.page_text and sub in cset and left - 2 >= finish:
                        self.pending_sub = sub
                        return f"click[{sub}]"
            if cov < 1.0 and "< prev" in cset:
                # another candidate: prev + click, and still able to come back to the best
                best_n = self.best[2]
                if left - 2 >= 3 + max(best_n, n_opt) + 1:
                    return "click[< prev]"
                if self.best[1] != self.item and left >= 3 + best_n:
                    self.goto = self.best[1]
                    return "click[< prev]"
            self.final = True
        for gi, values in enumerate(groups):
            if gi in self.selected:
                continue
            v = picks[gi]
            self.selected[gi] = v or ""
            if v is not None and v in cset:
                return f"click[{v}]"
        return "click[buy now]"
