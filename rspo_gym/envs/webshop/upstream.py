"""Upstream WebShop's own data files (``data/`` of princeton-nlp/WebShop) as a catalog and goals.

- :class:`UpstreamFiles`, :func:`upstream_files`: the three files and which of them a size reads;
- :func:`load_upstream`: the catalog and the goals in upstream's order, built once and cached on
  disk under the files' content hashes;
- :class:`UpstreamCatalog`: the products, as the env's pages and reward read them;
- :class:`UpstreamGoals`: the goals, with upstream's baseline splits.

Rules follow upstream's ``engine.load_products`` (records whose asin is ``'nan'``, longer than 10
characters or repeated are skipped; ``products[:num_products]`` is taken before that; price tags
``$a``, ``$a to $b`` and ``$100.0`` for no price; option names lower-cased, values stripped,
lower-cased, ``/`` → `` | ``; hidden attributes from ``items_ins_v2``, else ``['DUMMY_ATTR']``;
``query`` lower-cased and stripped), ``engine.generate_product_prices`` (a price range's hidden
price is ``uniform(a, b)``), ``goal.get_human_goals`` / ``get_synthetic_goals`` and the text
env's ``random.seed(233); random.shuffle(goals)``.

Randomness: upstream draws the hidden prices, then each goal's price limit, from Python's global
``random`` before it seeds it with 233 for the shuffle, so its prices and limits change from one
process to the next. Here they are drawn as upstream's baseline scripts get them, as if
``random.seed(233)`` had run before the env was built: a private ``random.Random(233)`` draws the
prices, then the price limits, in upstream's order, is re-seeded with 233 and shuffles the goals.
The caller's global ``random`` is never touched.

Storage: a cache entry (``upstream-<key>/``, the key a hash of the files' contents and the
settings) holds the products and the goals as packed JSON records (``datafiles.Packed``), the
hidden prices, the goal weights, the asins and the search index; loads memory-map them, so a
loaded catalog is a few arrays and the processes of a run share one copy in the page cache.

Deviations, each deliberate: records past ``num_products`` are not read (upstream parses the whole
file first); ``items_human_ins.json`` is needed only for human goals (upstream opens it always);
a product missing from ``items_ins_v2`` under synthetic goals, an instruction without attributes
there, or a malformed record is a one-line ``UserError`` naming the file and the record, where
upstream stops with a ``KeyError`` or an ``AssertionError``.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import random
import re
import shutil
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple, overload

import numpy as np

from rspo_gym.errors import UserError

from .catalog import CatalogItem, ItemCache
from .datafiles import Packed, PackWriter, build_atomically, default_cache_dir, file_digest, iter_json_array
from .goals import PRICE_RANGE, NO_PRICE_UPPER, split_range
from .model import Goal, Product
from .reward import DUMMY_ATTR
from .search import SearchIndex, search_text

__all__ = [
    "SMALL_SET", "SPLIT_SEED", "UpstreamCatalog", "UpstreamData", "UpstreamFiles", "UpstreamGoals",
    "load_upstream", "upstream_files",
]

#: The size of upstream's small set (``items_shuffle_1000.json``, ``items_ins_v2_1000.json``).
SMALL_SET = 1000
#: The seed upstream shuffles its goals with (and, here, the state its draws start from).
SPLIT_SEED = 233
#: Upstream's price tag and hidden price of a product without pricing.
_UNPRICED_TAG, _UNPRICED = "$100.0", 100.0
#: Bumped whenever what is cached changes, so an old cache entry is never read.
_FORMAT = 3
_ASIN_LIMIT = 10


@dataclass(frozen=True)
class UpstreamFiles:
    """Upstream's three data files: ``items`` (``items_shuffle*.json``, the products),
    ``attributes`` (``items_ins_v2*.json``: hidden attributes and synthetic instructions) and
    ``human`` (``items_human_ins.json``: the human instructions)."""

    items: Path
    attributes: Path
    human: Path

    def __post_init__(self) -> None:
        for name in ("items", "attributes", "human"):
            object.__setattr__(self, name, Path(getattr(self, name)))


def upstream_files(data_dir: str | Path, num_products: int | None = SMALL_SET) -> UpstreamFiles:
    """The files of upstream's ``data/`` folder that ``num_products`` reads: the ``_1000`` pair
    up to :data:`SMALL_SET` products, the full ``items_shuffle.json`` / ``items_ins_v2.json``
    above it or for ``None`` (every product); ``items_human_ins.json`` either way."""
    data_dir = Path(data_dir)
    small = num_products is not None and num_products <= SMALL_SET
    items, attributes = (("items_shuffle_1000.json", "items_ins_v2_1000.json") if small
                         else ("items_shuffle.json", "items_ins_v2.json"))
    return UpstreamFiles(data_dir / items, data_dir / attributes, data_dir / "items_human_ins.json")


# ----------------------------------------------------------------------------- records

#: What the pages and the reward need of a product, nothing more (the raw dicts are dropped):
#: asin, name, query, category, product_category, description, bullet points, options
#: ((name, values), ...), price tag, pricing (the numbers), hidden attributes.
_Record = tuple


def _string(p: Mapping[str, Any], key: str) -> str:
    value = p.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key!r} must be a string, got {type(value).__name__}")
    return value


def _pricing(raw: object) -> tuple[str, tuple[float, ...]]:
    """Upstream's price tag and numbers: ``$a`` → ``(a,)``, ``$a - $b`` → ``(a, b)`` shown
    ``$a to $b`` (a third price is dropped), none → ``$100.0``."""
    if raw is None or raw == "":
        return _UNPRICED_TAG, (_UNPRICED,)
    if not isinstance(raw, str):
        raise ValueError(f"'pricing' must be a string, got {type(raw).__name__}")
    try:
        numbers = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in raw.split("$")[1:]]
    except InvalidOperation:
        raise ValueError(f"unparsable 'pricing' {raw!r}") from None
    if not numbers:
        raise ValueError(f"unparsable 'pricing' {raw!r}")
    if len(numbers) == 1:
        return f"${numbers[0]}", (numbers[0],)
    return f"${numbers[0]} to ${numbers[1]}", (numbers[0], numbers[1])


def _options(raw: object) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not raw:
        return ()
    if not isinstance(raw, dict):
        raise ValueError(f"'customization_options' must be an object, got {type(raw).__name__}")
    options: dict[str, tuple[str, ...]] = {}
    for name, contents in raw.items():
        if contents is None:
            continue
        if not isinstance(contents, list):
            raise ValueError(f"option {name!r} must be a list, got {type(contents).__name__}")
        values = []
        for content in contents:
            value = content.get("value") if isinstance(content, dict) else None
            if not isinstance(value, str):
                raise ValueError(f"option {name!r} has an entry without a string 'value': {str(content)[:80]!r}")
            values.append(value.strip().replace("/", " | ").lower())
        options[name.lower()] = tuple(values)  # a repeated lower-cased name keeps the last, as upstream's dict
    return tuple(options.items())


def _str_list(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of strings, got {str(value)[:80]!r}")
    return tuple(value)


def _record(p: object, attributes: Mapping[str, Any]) -> _Record | None:
    """One product by upstream's ``load_products`` rules, or None where upstream skips it."""
    if not isinstance(p, dict):
        raise ValueError(f"expected an object, got {type(p).__name__}")
    asin = _string(p, "asin")
    if asin == "nan" or len(asin) > _ASIN_LIMIT:
        return None
    bullets_raw = p.get("small_description")
    bullets = (bullets_raw,) if isinstance(bullets_raw, str) else _str_list(bullets_raw, "'small_description'")
    price_tag, pricing = _pricing(p.get("pricing"))
    return (asin, _string(p, "name"), _string(p, "query").lower().strip(), _string(p, "category"),
            _string(p, "product_category"), _string(p, "full_description"), bullets,
            _options(p.get("customization_options")), price_tag, pricing, _hidden(attributes, asin))


def _hidden(attributes: Mapping[str, Any], asin: str) -> tuple[str, ...]:
    """The product's mined attributes from ``items_ins_v2``, else upstream's ``['DUMMY_ATTR']``."""
    entry = attributes.get(asin)
    if entry is None:
        return (DUMMY_ATTR,)
    try:
        if not isinstance(entry, dict):
            raise ValueError(f"expected an object, got {type(entry).__name__}")
        return _str_list(entry["attributes"], "'attributes'") if "attributes" in entry else (DUMMY_ATTR,)
    except ValueError as exc:
        raise _AttributesError(f"bad record for asin {asin!r}: {exc}") from None


class _AttributesError(ValueError):
    """A bad ``items_ins_v2`` entry (named by that file, not the product file)."""


def _item(record: list, price: float) -> CatalogItem:
    asin, name, query, top, category, description, bullets, options, tag, pricing, hidden = record
    product = Product(asin=asin, name=name, query=query, category=category, attributes=hidden,
                      bullet_points=bullets, description=description)
    return CatalogItem(
        product=product, options=MappingProxyType({name: tuple(values) for name, values in options}),
        price_text=tag, price=price, price_range=() if tag == _UNPRICED_TAG else tuple(pricing),
        features=tuple(bullets), reviews=(), rating=None, category_top=top)


class UpstreamCatalog:
    """The products of upstream's data, in file order, as the env reads a catalog.

    ``item(i)`` is a :class:`~.catalog.CatalogItem`, decoded from the cache's memory-mapped
    records when asked (a small LRU cache keeps recent ones), so the catalog holds almost nothing
    in memory and processes reading one cache share its pages; ``search_index`` is the BM25
    index of upstream's document text. Reviews are empty and the rating ``N.A.``, as upstream's
    loader leaves them.
    """

    def __init__(self, records: Packed, prices: np.ndarray, files: UpstreamFiles, search_index: SearchIndex,
                 asins_path: Path) -> None:
        self._records = records
        self._prices = prices
        self.files = files
        self.search_index = search_index
        self._asins_path = asins_path
        self._cache = ItemCache()

    def __repr__(self) -> str:
        return f"UpstreamCatalog({len(self)} products from {self.files.items})"

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[CatalogItem]:
        return (self._make(i) for i in range(len(self)))

    def item(self, i: int) -> CatalogItem:
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"item index must be an int, got {type(i).__name__}")
        if not 0 <= i < len(self):
            raise IndexError(f"item index {i} out of range [0, {len(self)})")
        return self._cache.get_or_make(i, self._make)

    __getitem__ = item

    def _make(self, i: int) -> CatalogItem:
        return _item(self._records[i], float(self._prices[i]))

    def asin(self, i: int) -> str:
        return self._records[i][0]

    @functools.cached_property
    def _asins(self) -> dict[str, int]:
        with open(self._asins_path, encoding="utf-8") as f:
            return {asin: i for i, asin in enumerate(json.load(f))}

    def index_of(self, asin: str) -> int:
        """The index of the product with ``asin`` (exact, as upstream's asins are); ``KeyError``."""
        return self._asins[asin]

    def __contains__(self, asin: object) -> bool:
        return asin in self._asins

    def price(self, i: int) -> float:
        """Product ``i``'s hidden price (upstream's ``product_prices``)."""
        return float(self._prices[i])

    def search_document(self, i: int) -> str:
        """Upstream's indexed text of product ``i`` (``convert_product_file_format.py``)."""
        return _document(self._records[i])


def _document(record: list) -> str:
    _, name, _, _, _, description, bullets, options, *_ = record
    return search_text(name, description, bullets, dict(options))


class UpstreamGoals(Sequence[Goal]):
    """The goals in upstream's order (after its seed-233 shuffle), decoded from the cache when
    indexed, with upstream's baseline splits: ``test`` the first 500, ``valid`` the next 1,000,
    ``train`` the rest. ``weights`` are upstream's sampling weights (1 for human goals);
    ``skipped`` counts the human instructions dropped for having no attributes."""

    def __init__(self, goals: Packed, weights: np.ndarray, skipped: int, catalog: UpstreamCatalog) -> None:
        self._goals = goals
        self.weights = weights
        self.skipped = skipped
        self._catalog = catalog

    def __len__(self) -> int:
        return len(self._goals)

    @overload
    def __getitem__(self, g: int) -> Goal: ...
    @overload
    def __getitem__(self, g: slice) -> list[Goal]: ...

    def __getitem__(self, g: int | slice) -> Goal | list[Goal]:
        if isinstance(g, slice):
            return [self[i] for i in range(*g.indices(len(self)))]
        product, attributes, options, price_upper, text = self._goals[g]
        asin, name, query, _, category, *_ = self._catalog._records[product]
        return Goal(name=name, query=query, category=category, attributes=attributes,
                    options=[tuple(o) if isinstance(o, list) else o for o in options],
                    price_upper=price_upper, instruction_text=text, asin=asin)

    def split(self, name: str) -> range:
        """Goal indices of split ``name`` (``test``, ``valid`` or ``train``)."""
        return split_range(name, len(self))

    def __repr__(self) -> str:
        return f"UpstreamGoals({len(self)} goals)"


class UpstreamData(NamedTuple):
    """What :func:`load_upstream` returns."""

    catalog: UpstreamCatalog
    goals: UpstreamGoals


# ----------------------------------------------------------------------------- goals


def _price_upper(rng: random.Random, price: float) -> tuple[float, str]:
    """Upstream's draw: two of the first four PRICE_RANGE values above ``price``, the larger."""
    candidates = [p for p in PRICE_RANGE if p > price][:4]
    if len(candidates) < 2:
        return NO_PRICE_UPPER, ""
    _, upper = sorted(rng.sample(candidates, 2))
    return upper, f", and price lower than {upper:.2f} dollars"


def _human_goals(records: Packed, asins: Sequence[str], prices: Sequence[float], human: Mapping[str, Any],
                 path: Path, rng: random.Random, out: PackWriter) -> tuple[list[float], int]:
    """Upstream's ``get_human_goals``, each goal written to ``out`` as ``[product, attributes,
    options, price_upper, instruction]``; returns the weights and the number skipped."""
    skipped = 0
    for i, (asin, price) in enumerate(zip(asins, prices)):
        if asin not in human:
            continue
        entries = human[asin]
        if not isinstance(entries, list):
            raise UserError(f"{path}: bad record for asin {asin!r}: expected a list of instructions, got {type(entries).__name__}")
        for k, entry in enumerate(entries):
            try:
                if not isinstance(entry, dict):
                    raise ValueError(f"expected an object, got {type(entry).__name__}")
                attributes = _str_list(entry.get("instruction_attributes"), "'instruction_attributes'")
                if not attributes:
                    skipped += 1
                    continue
                text = _string(entry, "instruction")
                options = _str_list(entry.get("instruction_options"), "'instruction_options'")
            except ValueError as exc:
                raise UserError(f"{path}: bad instruction #{k} of asin {asin!r}: {exc}") from None
            upper, clause = _price_upper(rng, price)
            out.add([i, attributes, options, upper, text.strip(".") + clause])
    return [1.0] * len(out), skipped


def _synthetic_goals(records: Packed, asins: Sequence[str], prices: Sequence[float], attributes: Mapping[str, Any],
                     path: Path, rng: random.Random, out: PackWriter) -> list[float]:
    """Upstream's ``get_synthetic_goals`` (one goal per combination of option values), written to
    ``out`` as :func:`_human_goals` writes them; returns the weights."""
    wanted_of: list[tuple[str, ...]] = []
    counts: dict[str, int] = {}
    for i, (asin, price) in enumerate(zip(asins, prices)):
        entry = attributes.get(asin)
        if entry is None:
            raise UserError(f"{path}: no record for asin {asin!r}; synthetic goals need one per product (upstream stops with a KeyError)")
        text = entry.get("instruction")
        if text is None:
            continue
        try:
            if not isinstance(text, str):
                raise ValueError(f"'instruction' must be a string, got {type(text).__name__}")
            wanted = _str_list(entry.get("instruction_attributes"), "'instruction_attributes'")
            if not wanted:
                raise ValueError("'instruction_attributes' is empty (upstream asserts it is not)")
        except ValueError as exc:
            raise UserError(f"{path}: bad record for asin {asin!r}: {exc}") from None
        upper, clause = _price_upper(rng, price)
        options = dict(records[i][7])
        names = sorted(options)
        for combination in itertools.product(*(options[n] for n in names)):
            picked = list(zip(names, combination))
            option_text = ", and ".join(f"{k}: {v}" for k, v in picked)
            out.add([i, wanted, picked, upper, f"{text}{' with ' + option_text if option_text else ''}{clause}"])
            wanted_of.append(wanted)
            for a in wanted:
                counts[a] = counts.get(a, 0) + 1
    return [sum(1.0 / counts[a] for a in w) / len(w) for w in wanted_of]


# ----------------------------------------------------------------------------- loading


def _load_json_object(path: Path, what: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text: {exc.reason}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object mapping asin to {what}, got {type(data).__name__}")
    return data


def _progress(total: int | None, desc: str, unit: str) -> Any:
    from tqdm.auto import tqdm  # noqa: PLC0415 - only when building

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, disable=None, leave=False)


def _read_products(files: UpstreamFiles, num_products: int | None, attributes: Mapping[str, Any],
                   rng: random.Random, out: PackWriter) -> tuple[list[str], array]:
    """Stream the product file into ``out`` (upstream's ``load_products``), drawing each price
    range's hidden price from ``rng`` as it comes (upstream's ``generate_product_prices`` draws
    them in the same order); returns the asins and the hidden prices."""
    asins: list[str] = []
    prices = array("d")
    seen: set[str] = set()
    path = files.items
    with _progress(path.stat().st_size, f"reading {path.name}", "B") as bar:
        stream = iter_json_array(path, on_bytes=bar.update)
        if num_products is not None:
            stream = itertools.islice(stream, num_products)
        try:
            for n, p in enumerate(stream):
                try:
                    record = _record(p, attributes)
                except _AttributesError as exc:
                    raise UserError(f"{files.attributes}: {exc}") from None
                except ValueError as exc:
                    asin = p.get("asin") if isinstance(p, dict) else None
                    raise UserError(f"{path}: bad product record #{n} (asin={asin!r}): {exc}") from None
                if record is None or record[0] in seen:
                    continue
                seen.add(record[0])
                asins.append(record[0])
                pricing = record[9]
                prices.append(rng.uniform(*pricing[:2]) if len(pricing) > 1 else pricing[0])
                out.add(record)
        except UserError:
            raise
        except ValueError as exc:
            raise UserError(str(exc)) from None
    if not asins:
        raise UserError(f"{path}: no usable product (every record was skipped, or the array is empty)")
    return asins, prices


def _build(files: UpstreamFiles, num_products: int | None, human_goals: bool, out: Path) -> None:
    """Read the files, draw prices and goals as upstream, index, and write it all into ``out``."""
    attributes = _load_json_object(files.attributes, "attributes")
    human = _load_json_object(files.human, "human instructions") if human_goals else {}
    rng = random.Random(SPLIT_SEED)  # the state upstream's baseline scripts start from
    writer = PackWriter(out / "records")
    asins, prices = _read_products(files, num_products, attributes, rng, writer)
    writer.close()
    records = Packed.open(out / "records")
    try:
        drawn = PackWriter(out / "drawn")
        if human_goals:
            weights, skipped = _human_goals(records, asins, prices, human, files.human, rng, drawn)
        else:
            weights, skipped = _synthetic_goals(records, asins, prices, attributes, files.attributes, rng, drawn), 0
        drawn.close()
        del attributes, human
        if not weights:
            source = files.human if human_goals else files.attributes
            raise UserError(f"{source}: no goal for the {len(asins)} products of {files.items} (no instruction with attributes for any of their asins)")
        order = list(range(len(weights)))
        rng.seed(SPLIT_SEED)
        rng.shuffle(order)  # the same permutation upstream's shuffle of its goal list makes
        unshuffled = Packed.open(out / "drawn")
        try:
            goals = PackWriter(out / "goals")
            for g in order:
                goals.add_raw(unshuffled.raw(g))
            goals.close()
        finally:
            unshuffled.close()
        for suffix in (".json", ".ends.npy"):
            (out / "drawn").with_suffix(suffix).unlink()
        np.save(out / "weights.npy", np.asarray(weights, dtype=np.float64)[order])
        np.save(out / "prices.npy", np.frombuffer(prices, dtype=np.float64))
        (out / "asins.json").write_text(json.dumps(asins), encoding="utf-8")
        with _progress(len(asins), "indexing products", "doc") as bar:
            def docs() -> Iterator[str]:
                for record in records:
                    bar.update(1)
                    yield _document(record)

            SearchIndex.build(docs(), doc_ids=asins).save(out / "index")
    finally:
        records.close()
    (out / "meta.json").write_text(json.dumps({"format": _FORMAT, "skipped": skipped}), encoding="utf-8")


def _read_cache(entry: Path, files: UpstreamFiles) -> UpstreamData:
    meta = json.loads((entry / "meta.json").read_text(encoding="utf-8"))
    if meta.get("format") != _FORMAT:
        raise ValueError("another cache format")
    records = Packed.open(entry / "records")
    prices = np.load(entry / "prices.npy", mmap_mode="r")
    weights = np.load(entry / "weights.npy", mmap_mode="r")
    goals = Packed.open(entry / "goals")
    if len(prices) != len(records) or len(weights) != len(goals):
        raise ValueError(f"{entry}: inconsistent cache entry")
    catalog = UpstreamCatalog(records, prices, files, SearchIndex.load(entry / "index"), entry / "asins.json")
    return UpstreamData(catalog, UpstreamGoals(goals, weights, int(meta["skipped"]), catalog))


def _cache_key(files: UpstreamFiles, num_products: int | None, human_goals: bool) -> str:
    parts = {"format": _FORMAT, "num_products": num_products, "human_goals": human_goals,
             "items": file_digest(files.items), "attributes": file_digest(files.attributes),
             "human": file_digest(files.human) if human_goals else None}
    return hashlib.blake2b(json.dumps(parts, sort_keys=True).encode(), digest_size=12).hexdigest()


@functools.lru_cache(maxsize=4)
def _load(files: UpstreamFiles, stats: tuple, num_products: int | None, human_goals: bool,
          cache_root: Path) -> UpstreamData:
    """One load per files, their sizes and mtimes (``stats``) and settings, per process."""
    entry = cache_root / f"upstream-{_cache_key(files, num_products, human_goals)}"
    if entry.is_dir():
        try:
            return _read_cache(entry, files)
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            shutil.rmtree(entry, ignore_errors=True)  # damaged or foreign: rebuilt below
    build_atomically(entry, lambda out: _build(files, num_products, human_goals, out))
    return _read_cache(entry, files)


def load_upstream(data_dir: str | Path | UpstreamFiles, num_products: int | None = SMALL_SET,
                  human_goals: bool = True, cache_dir: str | Path | None = None) -> UpstreamData:
    """Upstream's catalog and goals from its ``data/`` folder: ``(catalog, goals)``.

    ``data_dir`` holds upstream's files (:func:`upstream_files` says which ``num_products``
    reads), or is an :class:`UpstreamFiles` naming them. ``num_products`` keeps the first that
    many records of the product file, as upstream (``None``: all); ``human_goals`` picks the human
    instructions (upstream's paper setting) or the synthetic ones made from ``items_ins_v2``
    (one goal per combination of option values). The first call builds the catalog, the goals and
    the search index and caches them under ``cache_dir`` (default
    ``$XDG_CACHE_HOME/rspo_gym/webshop``) keyed by the files' content hashes; later calls, in
    any process, read the cache. Bad or missing files raise a one-line ``UserError`` (a
    ``ValueError``) naming the file and the record, and leave nothing in the cache.
    """
    if num_products is not None and (isinstance(num_products, bool) or not isinstance(num_products, int)):
        raise TypeError(f"num_products must be an int or None, got {num_products!r}")
    if num_products is not None and num_products < 1:
        raise ValueError(f"num_products must be at least 1 (or None for every product), got {num_products}")
    if not isinstance(human_goals, bool):
        raise TypeError(f"human_goals must be a bool, got {human_goals!r}")
    files = data_dir if isinstance(data_dir, UpstreamFiles) else upstream_files(data_dir, num_products)
    needed = (files.items, files.attributes, files.human) if human_goals else (files.items, files.attributes)
    stats = []
    for path in needed:
        try:
            st = path.stat()
        except OSError:
            raise UserError(f"{path}: no such file (upstream WebShop's data folder: items_shuffle_1000.json, "
                            "items_ins_v2_1000.json, items_human_ins.json, or the full items_shuffle.json "
                            "and items_ins_v2.json)") from None
        if not path.is_file():
            raise UserError(f"{path}: not a file")
        stats.append((str(path.resolve()), st.st_size, st.st_mtime_ns))
    cache_root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return _load(files, tuple(stats), num_products, human_goals, cache_root.resolve())
