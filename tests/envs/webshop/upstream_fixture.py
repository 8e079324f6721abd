"""Small data files in upstream WebShop's three formats, with the edge cases its loader handles.

Shared by the tests (``test_upstream_data.py``) and the script that records upstream's own
results on them (``record_upstream.py``), so both see the same bytes. Deterministic: one seeded
``random.Random``. ``write_fixture(folder)`` writes ``items_shuffle_1000.json``,
``items_ins_v2_1000.json`` and ``items_human_ins.json`` (and the same content under the full
names, ``items_shuffle.json`` / ``items_ins_v2.json``).

Edge cases: asins ``'nan'``, longer than 10 characters and repeated; range prices (two and three
numbers), a comma in a price, no price (missing key and ``""``), prices past $980 (no price
clause); ``customization_options`` None, a group whose contents are None, values with ``/`` and
upper case and spaces, a value containing a colour word inside another word ("standard" holds
"tan": upstream's synthetic goal asking for it cannot be met); ``small_description`` a string or
a list; instructions ending in ``.``, instructions without attributes (skipped), products with no
human instruction, products without mined attributes (``DUMMY_ATTR``) or without a synthetic
instruction.

``fixture_nouns`` is the title tagger both sides use in place of spaCy's ``en_core_web_sm`` (not
installable offline): every alphabetic token is a noun.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

NUM_PRODUCTS = 50

_TYPES = [
    ("running shoes", "Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running", "fashion"),
    ("hair extensions", "Beauty & Personal Care › Hair Care › Hair Extensions", "beauty"),
    ("face moisturizer", "Beauty & Personal Care › Skin Care › Face › Moisturizers", "beauty"),
    ("bluetooth headphones", "Electronics › Headphones › Over-Ear Headphones", "electronics"),
    ("office chair", "Home & Kitchen › Furniture › Home Office Furniture › Chairs", "furniture"),
    ("dark chocolate", "Grocery & Gourmet Food › Candy & Chocolate › Chocolate Bars", "grocery"),
]
_ATTRS = ["long lasting", "easy to use", "high quality", "gluten free", "non slip", "light weight",
          "water resistant", "noise cancelling", "natural looking", "heavy duty", "machine wash",
          "sugar free", "fast charging", "rubber sole", "hair loss", "dry skin"]
_GROUPS = {
    "Color": ["Black", "Navy Blue", "red", "Black/White", "ivory", " Olive Green ", "silver"],
    "Size": ["Small", "Medium", "Large", "X-Large", "8.5", "9 Wide", "one size"],
    "Style": ["Standard", "Classic", "Pro Max", "Deluxe"],
    "Item Package Quantity": ["1", "2", "Pack of 3", "12 Count"],
}
_OPENINGS = ["i am looking for", "i need", "im looking for", "i want", "find me", "i would like"]


def fixture_nouns(title: str) -> list[str]:
    """The stand-in noun tagger: the title's alphabetic tokens, lower-cased, in order."""
    return [t.lower() for t in re.findall(r"[^\W_]+", title) if t.isalpha()]


def _price(r: random.Random, n: int) -> str | None:
    kind = n % 9
    if kind == 0:
        return None
    if kind == 1:
        return ""
    if kind == 2:
        a = round(r.uniform(5, 90), 2)
        return f"${a:.2f} - ${a + round(r.uniform(1, 40), 2):.2f}"
    if kind == 3:
        return "$12.00 - $15.50 - $19.99"
    if kind == 4:
        return f"${r.choice(['985.00', '1,234.50', '979.99'])}"
    return f"${r.uniform(1, 400):.2f}"


def _options(r: random.Random, n: int) -> dict | None:
    if n % 7 == 0:
        return None
    if n % 7 == 1:
        return {}
    names = r.sample(sorted(_GROUPS), r.randint(1, 3))
    out: dict = {}
    for name in names:
        values = r.sample(_GROUPS[name], r.randint(2, 4))
        out[name] = [{"value": v, "image": f"https://example.com/{n}/{i}.jpg"} for i, v in enumerate(values)]
    if n % 7 == 2:
        out["Pattern Name"] = None
    return out


def products() -> tuple[list[dict], dict, dict]:
    """``(items_shuffle records, items_ins_v2 mapping, items_human_ins mapping)``."""
    r = random.Random(20260)
    items: list[dict] = []
    ins: dict = {}
    human: dict = {}
    for n in range(NUM_PRODUCTS):
        query, category, top = _TYPES[n % len(_TYPES)]
        asin = f"B0{n:08d}"
        attrs = r.sample(_ATTRS, 4)
        shown = attrs[:2]
        name = f"Acme {shown[0].title()} {query.title()} Model {r.randint(10, 99)}"
        bullets = [f"{shown[1].upper()}: this {query} is {shown[1]}", "Ships in a gift box"]
        options = _options(r, n)
        record = {
            "asin": asin, "name": name, "query": f" {query.title()} " if n % 5 == 0 else query,
            "category": top, "product_category": category,
            "full_description": f"The {name} is made to last. {attrs[2]} and {attrs[3]}.",
            "small_description": bullets if n % 4 else bullets[0],
            "customization_options": options, "images": [f"https://example.com/{n}.jpg"],
            "brand": "Acme", "product_information": {"weight": "1 pound"}, "list_price": "",
        }
        price = _price(r, n)
        if price is not None:
            record["pricing"] = price
        items.append(record)
        if n % 11 != 5:  # a few products without mined attributes (DUMMY_ATTR)
            ins[asin] = {"attributes": attrs,
                         "instruction": None if n % 13 == 4 else f"Find me {shown[0]} {query} with {shown[1]}",
                         "instruction_attributes": shown}
        else:
            ins[asin] = {"instruction": f"Find me a {query}", "instruction_attributes": [attrs[0]]}
        if n % 8 == 3:
            continue  # no human instruction for this product
        groups = [[x["value"].strip().replace("/", " | ").lower() for x in g] for g in (options or {}).values() if g]
        entries = []
        for k in range(r.randint(30, 50)):
            wanted = r.sample(attrs[:3], r.randint(0 if k % 9 == 0 else 1, 2))
            chosen = [r.choice(g) for g in r.sample(groups, min(len(groups), r.randint(0, 2)))]  # one per group
            text = f"{r.choice(_OPENINGS)} {query} that is {' and '.join(wanted) or 'nice'}"
            text += "".join(f" in {v}" for v in chosen) + ("." if k % 3 == 0 else "")
            entries.append({"asin": asin, "instruction": text, "instruction_attributes": wanted,
                            "instruction_options": chosen, "options": [f"x: {v}" for v in chosen],
                            "attributes": attrs, "worker_id": f"W{k}", "assignment_id": f"A{n}{k}"})
        human[asin] = entries
    # records upstream skips: an asin 'nan', one too long, and a repeat of an earlier asin
    items.insert(7, {**items[3], "asin": "nan", "name": "Skipped Nan"})
    items.insert(12, {**items[4], "asin": "B0123456789X", "name": "Skipped Long Asin"})
    items.insert(20, {**items[5], "name": "Skipped Repeat"})
    return items, ins, human


def write_fixture(folder: Path) -> Path:
    """Write the three files (under the small and the full names) into ``folder``; return it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    items, ins, human = products()
    for name, data in (("items_shuffle_1000.json", items), ("items_shuffle.json", items),
                       ("items_ins_v2_1000.json", ins), ("items_ins_v2.json", ins),
                       ("items_human_ins.json", human)):
        (folder / name).write_text(json.dumps(data, indent=1), encoding="utf-8")
    return folder
