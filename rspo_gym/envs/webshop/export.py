"""``rspo/WebShop-v1``'s synthetic catalog and goals written as upstream WebShop's three data files.

Why: upstream's own code (``web_agent_site.engine.engine.load_products`` and ``engine.goal.get_goals``),
tools built on it (verl-agent, agentgym) and our loader of upstream's data
(:mod:`rspo_gym.envs.webshop.upstream`) all read ``items_shuffle*.json``, ``items_ins_v2*.json`` and
``items_human_ins.json``. Exporting our catalog in those formats lets any of them play it, and lets
the loader's build time and memory be measured at upstream's full size (1,181,436 products) without
upstream's 5.5 GB file.

What is written (``docs/reference/webshop.md`` §3.1), for the v1 env's catalog of ``num_products``
items and ``catalog_seed`` (``Catalog(num_products, catalog_seed, version=1)``), into one folder:

- ``items_shuffle_1000.json`` (``num_products == 1000``, upstream's name for its small set) or
  ``items_shuffle.json``: a JSON array of product records in catalog order (``asin``, ``name``,
  ``full_description``, ``small_description`` (the bullet list), ``pricing``, ``images``,
  ``category``, ``query``, ``product_category``, ``customization_options``);
- ``items_ins_v2_1000.json`` or ``items_ins_v2.json``: ``asin -> {attributes, instruction,
  instruction_attributes}``: the hidden attributes, and an instruction in upstream's synthetic style
  ("Find me ...", :func:`~.goals._synthetic_text`) over the attributes of the product's first v1 goal;
  upstream's ``human_goals=False`` appends every combination of option values to it;
- ``items_human_ins.json``: ``asin -> [{asin, instruction, instruction_attributes,
  instruction_options, options, attributes, worker_id, assignment_id}, ...]``: every v1 goal of the
  product (``goals_v1_for(catalog)``: ``ceil(12087 / num_products)`` per product), its instruction
  without the price clause, ``options`` as ``"name: value"``, ``worker_id`` ``"rspo_gym"`` and
  ``assignment_id`` the goal's position in our canonical order (``"goal-<g>"``).

What survives upstream's transformations, and what cannot:

- Option values are written so that upstream's ``value.strip().replace('/', ' | ').lower()`` gives
  ours back (" | " is written "/"); :func:`option_value_text` refuses a value that would not.
- Prices are written ``"$12.99"``, ``"$10.99 - $15.99"`` or ``""`` (unpriced): the shown numbers
  and the hidden price of a single price come back exactly. Upstream formats the tag with Python's
  float ``repr``, so a price whose cents end in 0 is shown ``"$12.5"`` where our catalog shows
  ``"$12.50"``; and upstream draws the hidden price of a range anew (``random.uniform(a, b)``).
- Upstream draws every goal's price limit anew (``random.sample`` over the next four
  ``PRICE_RANGE`` values) and shuffles the goals with seed 233, so the price clauses and the goal
  order of a loaded export are upstream's, not ours; the goals themselves (target, instruction
  without the price clause, attributes, options) are ours. ``assignment_id`` says where each stood.
- Reviews and ratings are not written (upstream's loader has review loading commented out; the
  env hides them by default too). The catalog has no images: ``images`` is ``[""]``.

Files are streamed (one record in memory at a time) and written atomically through
:func:`rspo_gym.atomic.atomic_write`: an export that is killed or fails leaves the folder's previous
files, never a half-written one. Strings are written ASCII-escaped, so a reader that opens the file
in a non-UTF-8 locale (upstream's ``open(filepath)`` names no encoding) reads the same text.

Item ``i`` and its goal variants do not depend on ``num_products`` (they are pure functions of the
seed, ``i`` and the variant), so a 1000-product export is the first 1000 products of a larger one,
as upstream's small set is of its full set. Its ``items_human_ins.json`` is not: it holds
``ceil(12087 / N)`` goals per product, so one folder holds one export's three files.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from array import array
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rspo_gym.atomic import atomic_write, remove_stale_temporaries

from .catalog import MAX_PRODUCTS, Catalog, CatalogItem
from .goals import GoalSet, _synthetic_text, strip_price_clause
from .goals_v1 import goals_v1_for, make_goal_v1
from .model import Goal

__all__ = [
    "ExportSummary", "UPSTREAM_FULL_SIZE", "UPSTREAM_SMALL_SIZE", "WORKER_ID", "attributes_record",
    "export_names", "export_webshop", "human_instruction_record", "option_value_text",
    "pricing_text", "product_record", "upstream_option_value",
]

#: Size of upstream's small set (``items_shuffle_1000.json``).
UPSTREAM_SMALL_SIZE = 1000
#: Products in upstream's full ``items_shuffle.json`` (the WebShop paper's count).
UPSTREAM_FULL_SIZE = 1_181_436
#: ``worker_id`` of every exported instruction: they were written by this package, not by a person.
WORKER_ID = "rspo_gym"
_HUMAN_FILE = "items_human_ins.json"


def export_names(num_products: int) -> tuple[str, str, str]:
    """``(products, attributes, human instructions)`` file names for a catalog of ``num_products``:
    upstream's ``_1000`` names for its small set, the plain names otherwise."""
    if num_products == UPSTREAM_SMALL_SIZE:
        return "items_shuffle_1000.json", "items_ins_v2_1000.json", _HUMAN_FILE
    return "items_shuffle.json", "items_ins_v2.json", _HUMAN_FILE


# ----------------------------------------------------------------------------- records


def upstream_option_value(raw: str) -> str:
    """What upstream's ``load_products`` makes of a written option value."""
    return raw.strip().replace("/", " | ").lower()


@functools.lru_cache(maxsize=4096)
def option_value_text(value: str) -> str:
    """``value`` as written in ``customization_options``, so that upstream's loader gives it back
    (:func:`upstream_option_value`); ``ValueError`` for a value no text would survive as
    (one with a '/', capitals, or a '|' not written " | ")."""
    raw = value.replace(" | ", "/")
    if upstream_option_value(raw) != value:
        raise ValueError(f"option value {value!r} cannot be written so that upstream's loader reads it back")
    return raw


def pricing_text(item: CatalogItem) -> str:
    """Upstream's ``pricing`` string: ``"$a"``, ``"$a - $b"``, or ``""`` for an unpriced item."""
    return " - ".join(f"${x:.2f}" for x in item.price_range)


def product_record(item: CatalogItem) -> dict[str, Any]:
    """One ``items_shuffle*.json`` record (the fields upstream's ``load_products`` reads)."""
    options = item.options
    for name in options:
        if name != name.lower():
            raise ValueError(f"option name {name!r} is not lower case; upstream's loader lowercases it")
    product = item.product
    return {
        "asin": product.asin,
        "name": product.name,
        "full_description": product.description,
        "small_description": list(item.features),
        "pricing": pricing_text(item),
        "images": [""],
        "category": item.category_top,
        "query": product.query,
        "product_category": product.category,
        "customization_options": {
            name: [{"value": option_value_text(v), "image": None} for v in values]
            for name, values in options.items()
        } if options else None,
    }


def attributes_record(item: CatalogItem, goal: Goal) -> dict[str, Any]:
    """One ``items_ins_v2*.json`` value: the hidden attributes and a synthetic-style instruction
    over ``goal``'s attributes (upstream's ``human_goals=False`` adds the options and the price)."""
    return {
        "attributes": list(item.product.attributes),
        "instruction": _synthetic_text(None, item.product.query, goal.attributes),
        "instruction_attributes": list(goal.attributes),
    }


def _option_pairs(item: CatalogItem, goal: Goal) -> list[tuple[str, str]]:
    """``(option name, value)`` of each of ``goal``'s option values, in the item's group order
    (v1 goals pick at most one value per group, in that order)."""
    pairs: list[tuple[str, str]] = []
    groups = list(item.options.items())
    start = 0
    for value in goal.options:
        if not isinstance(value, str):
            raise ValueError(f"goal option {value!r} is not a value string (human-style goals only)")
        for j in range(start, len(groups)):
            if value in groups[j][1]:
                pairs.append((groups[j][0], value))
                start = j + 1
                break
        else:
            raise ValueError(f"goal option {value!r} is not offered by {item.asin}")
    return pairs


def human_instruction_record(item: CatalogItem, goal: Goal, goal_index: int) -> dict[str, Any]:
    """One element of an ``items_human_ins.json`` list: ``goal`` without its price clause (upstream
    adds its own)."""
    return {
        "asin": item.asin,
        "instruction": strip_price_clause(goal.instruction_text),
        "instruction_attributes": list(goal.attributes),
        "instruction_options": list(goal.options),
        "options": [f"{name}: {value}" for name, value in _option_pairs(item, goal)],
        "attributes": list(item.product.attributes),
        "worker_id": WORKER_ID,
        "assignment_id": f"goal-{goal_index}",
    }


# ----------------------------------------------------------------------------- export


@dataclass(frozen=True)
class ExportSummary:
    """What :func:`export_webshop` wrote: ``files`` maps each file name to its size in bytes."""

    directory: Path
    num_products: int
    catalog_seed: int
    num_goals: int
    files: Mapping[str, int]
    seconds: float

    @property
    def total_bytes(self) -> int:
        return sum(self.files.values())


def _goal_positions(goals: GoalSet) -> array:
    """``positions[variant * num_products + product]`` = the goal's place in the canonical order
    (the inverse of :meth:`GoalSet.locate`, 8 bytes per goal)."""
    n = goals.num_products
    positions = array("q", bytes(8 * len(goals)))
    for g in range(len(goals)):
        product, variant = goals.locate(g)
        positions[variant * n + product] = g
    return positions


def _check_directory(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"{directory} is not a folder")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot create the folder {directory}: {err.strerror or err}") from None


def _check_args(num_products: object, catalog_seed: object) -> None:
    if isinstance(num_products, bool) or not isinstance(num_products, int):
        raise TypeError(f"num_products must be an int, got {type(num_products).__name__}")
    if not 1 <= num_products <= MAX_PRODUCTS:
        raise ValueError(f"num_products must be from 1 to {MAX_PRODUCTS:,}, got {num_products}")
    if isinstance(catalog_seed, bool) or not isinstance(catalog_seed, int):
        raise TypeError(f"catalog_seed must be an int, got {type(catalog_seed).__name__}")


#: Catalog size from which the records are rendered by worker processes (as the catalog's own
#: search-document scan, ``catalog._PARALLEL_MIN``), in chunks of ``_CHUNK`` products.
_PARALLEL_MIN = 200_000
_WORKERS = 2
_CHUNK = 2_000


def _render(num_products: int, catalog_seed: int, start: int, goal_ids: list[list[int]]
            ) -> tuple[str, str, str]:
    """The three files' records of products ``start .. start + len(goal_ids) - 1``, each file's
    joined by ``",\n"``; ``goal_ids[k]`` are product ``start + k``'s goal positions by variant.
    A pure function of its arguments, so worker processes render the same text."""
    catalog = Catalog(num_products, catalog_seed, version=1)
    products, attrs, human = [], [], []
    for k, ids in enumerate(goal_ids):
        i = start + k
        item = catalog.item(i)
        variants = [make_goal_v1(catalog, i, v) for v in range(len(ids))]
        asin = json.dumps(item.asin)
        products.append(json.dumps(product_record(item)))
        attrs.append(f"{asin}: {json.dumps(attributes_record(item, variants[0]))}")
        records = [human_instruction_record(item, goal, g) for goal, g in zip(variants, ids)]
        human.append(f"{asin}: {json.dumps(records)}")
    return ",\n".join(products), ",\n".join(attrs), ",\n".join(human)


def _chunks(num_products: int, catalog_seed: int, positions: array, per_product: int,
            workers: int) -> Iterator[tuple[int, tuple[str, str, str]]]:
    """``(products in the chunk, rendered records)`` in catalog order, from ``workers`` processes
    (a window of chunks ahead) or in this one."""
    def goal_ids(start: int, stop: int) -> list[list[int]]:
        return [[positions[v * num_products + i] for v in range(per_product)] for i in range(start, stop)]

    starts = range(0, num_products, _CHUNK)
    if workers <= 1:
        for start in starts:
            stop = min(start + _CHUNK, num_products)
            yield stop - start, _render(num_products, catalog_seed, start, goal_ids(start, stop))
        return
    import concurrent.futures
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else methods[0])
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        pending: deque = deque()
        todo = iter(starts)
        try:
            for start in todo:
                stop = min(start + _CHUNK, num_products)
                pending.append((stop - start, pool.submit(_render, num_products, catalog_seed, start,
                                                          goal_ids(start, stop))))
                if len(pending) >= 3 * workers:
                    count, future = pending.popleft()
                    yield count, future.result()
            while pending:
                count, future = pending.popleft()
                yield count, future.result()
        finally:
            for _, future in pending:
                future.cancel()


def export_webshop(directory: str | Path, num_products: int = UPSTREAM_SMALL_SIZE,
                   catalog_seed: int = 0, *, progress: bool = False, workers: int | None = None
                   ) -> ExportSummary:
    """Write the v1 catalog of ``num_products`` items (seed ``catalog_seed``) and its goals into
    ``directory`` in upstream's three formats (module docstring); files of those names there are
    replaced whole. ``progress``: a tqdm bar on stderr (when it is a terminal). ``workers``:
    processes rendering records (default: 2 from 200,000 products, else none; the files are the
    same either way).

    ``ValueError``/``TypeError`` (one line) for a size outside ``1 .. MAX_PRODUCTS``, a folder that
    is a file or cannot be made; ``OSError`` for a folder that cannot be written (nothing written).
    """
    _check_args(num_products, catalog_seed)
    directory = Path(directory)
    _check_directory(directory)
    if workers is None:
        workers = _WORKERS if num_products >= _PARALLEL_MIN else 1
    names = export_names(num_products)
    remove_stale_temporaries(directory, names)
    started = time.perf_counter()
    goals = goals_v1_for(Catalog(num_products, catalog_seed, version=1))
    positions = _goal_positions(goals)

    from tqdm.auto import tqdm

    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(atomic_write(directory / name)) for name in names]
        bar = stack.enter_context(tqdm(total=num_products, unit=" products", unit_scale=True,
                                       desc="export", disable=None if progress else True))
        for f, opening in zip(files, "[{{"):
            f.write(opening)
        first = True
        for count, texts in _chunks(num_products, catalog_seed, positions, goals.goals_per_product,
                                    workers):
            for f, text in zip(files, texts):
                f.write(("\n" if first else ",\n") + text)
            first = False
            bar.update(count)
        for f, closing in zip(files, "]}}"):
            f.write(f"\n{closing}\n")
    sizes = {name: (directory / name).stat().st_size for name in names}
    return ExportSummary(directory=directory, num_products=num_products, catalog_seed=catalog_seed,
                         num_goals=len(goals), files=sizes, seconds=time.perf_counter() - started)
