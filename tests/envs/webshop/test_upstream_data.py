"""``rspo/WebShop-v1`` on upstream WebShop's own data files (``data_dir``), checked against
upstream's own functions: ``data/upstream_expected.json`` was written by ``record_upstream.py``,
which runs upstream's ``load_products``, ``get_goals`` and ``get_reward`` on the fixture of
``upstream_fixture.py`` (the goals in full every 25th, all of them in a digest)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import gymnasium as gym
import pytest

from rspo_gym.envs.webshop import upstream
from rspo_gym.envs.webshop.session import Session
from rspo_gym.envs.webshop.upstream import UpstreamFiles, load_upstream, upstream_files
from rspo_gym.errors import UserError
from tests.envs.webshop.record_upstream import goal_digest
from tests.envs.webshop.upstream_fixture import fixture_nouns, products, write_fixture

EXPECTED = json.loads((Path(__file__).parent / "data" / "upstream_expected.json").read_text(encoding="utf-8"))
CASES = {"human_all": (1000, True), "human_20": (20, True), "synthetic_all": (1000, False), "synthetic_20": (20, False)}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_fixture(tmp_path_factory.mktemp("webshop") / "data")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def rows(goals) -> list:
    """The goals as the recorder writes upstream's (options of synthetic goals as sorted pairs)."""
    out = []
    for g in goals:
        options = sorted(g.options) if g.options and isinstance(g.options[0], tuple) else g.options
        out.append(json.loads(json.dumps((g.asin, g.instruction_text, list(g.attributes), list(options), g.price_upper))))
    return out


def make(data, cache, split="test", **kwargs):
    return gym.make("rspo/WebShop-v1", data_dir=data, split=split, cache_dir=cache, noun_extractor=fixture_nouns, **kwargs)


@pytest.mark.parametrize("case", sorted(CASES))
def test_products_and_goals_are_upstreams_in_its_order(data, cache, case):
    num_products, human = CASES[case]
    expected = EXPECTED[case]
    catalog, goals = load_upstream(data, num_products=num_products, human_goals=human, cache_dir=cache)
    assert [catalog.asin(i) for i in range(len(catalog))] == expected["asins"]
    got = rows(goals)
    assert len(got) == expected["num_goals"]
    assert {str(i): got[i] for i in range(0, len(got), 25)} == expected["goals"]
    assert goal_digest([tuple(r) for r in got]) == expected["goal_digest"]
    assert list(goals.weights[::25]) == pytest.approx(expected["weights"], rel=1e-12)


def test_skipped_records_and_instructions_are_upstreams(data, cache):
    catalog, goals = load_upstream(data, cache_dir=cache)
    assert {"nan", "B0123456789X"}.isdisjoint(catalog.asin(i) for i in range(len(catalog)))
    assert catalog.item(catalog.index_of("B000000005")).title != "Skipped Repeat"  # the first record of an asin wins
    human = products()[2]
    no_attributes = sum(1 for entries in human.values() for e in entries if not e["instruction_attributes"])
    assert goals.skipped == no_attributes > 0
    assert len(goals) == sum(len(entries) for entries in human.values()) - no_attributes


def test_pages_show_upstreams_price_tags_options_and_hidden_prices(data, cache):
    catalog, _ = load_upstream(data, cache_dir=cache)
    recorded = EXPECTED["human_all"]["products"]
    assert len(recorded) == len(catalog)
    for asin, p in recorded.items():
        item = catalog.item(catalog.index_of(asin))
        assert (item.price_text, item.price, item.product.query) == (p["price_tag"], p["price"], p["query"])
        assert {k: list(v) for k, v in item.options.items()} == p["options"]
        assert (list(item.product.attributes), list(item.features)) == (p["attributes"], p["bullets"])
    tags = {p["price_tag"] for p in recorded.values()}
    assert {"$100.0", "$12.0 to $15.5", "$1234.5", "$985.0"} <= tags  # missing, 3-number range, comma, no clause


@pytest.mark.parametrize("case", ["human_all", "synthetic_all"])
def test_rewards_are_upstreams(data, cache, case):
    catalog, goals = load_upstream(data, human_goals=case.startswith("human"), cache_dir=cache)
    for i, recorded in EXPECTED[case]["rewards"].items():
        session = Session(catalog, catalog.search_index, goals[int(i)], noun_extractor=fixture_nouns)
        chosen, reward = recorded["own"]
        assert session.score_of(catalog.index_of(goals[int(i)].asin), chosen)[0] == reward
        asin, options, reward = recorded["other"]
        assert session.score_of(catalog.index_of(asin), options)[0] == reward


def _buy(env, goal) -> tuple[str, float]:
    """Search the target's name, page to it, select the goal's options, buy; (item page, reward)."""
    catalog = env.unwrapped.catalog
    item = catalog.item(catalog.index_of(goal.asin))
    obs, *_ = env.step(f"search[{item.title}]")
    while f"[SEP] {goal.asin} [SEP]" not in obs:
        obs, *_ = env.step("click[next >]")
    page, *_ = env.step(f"click[{goal.asin.lower()}]")
    for option in goal.options:
        env.step(f"click[{option[1] if isinstance(option, tuple) else option}]")
    _, reward, terminated, _, _ = env.step("click[buy now]")
    assert terminated
    return page, reward


@pytest.mark.parametrize("split", ["test", "valid", "train"])
def test_every_split_plays_in_upstreams_order_and_its_goals_score_one(data, cache, split):
    env = make(data, cache, split=split)
    start = {"test": 0, "valid": 500, "train": 1500}[split]
    assert env.unwrapped.num_tasks == {"test": 500, "valid": 1000, "train": EXPECTED["human_all"]["num_goals"] - 1500}[split]
    tags = EXPECTED["human_all"]["products"]
    for k in (0, 25, 100, 150):
        obs, info = env.reset(options={"task_id": k})
        asin, text, *_ = EXPECTED["human_all"]["goals"][str(start + k)]
        assert info["task"] == text and obs == f"WebShop [SEP] Instruction: [SEP] {text} [SEP] Search"
        page, reward = _buy(env, env.unwrapped.session.goal)
        assert f"[SEP] Price: {tags[asin]['price_tag']} [SEP]" in page
        assert reward == 1.0


def test_synthetic_goals_score_what_upstream_gives_their_own_product(data, cache):
    """Upstream's synthetic goals pass (name, value) pairs to the option match: a value holding a
    colour word inside another word ("standard" holds "tan") never matches, so buying the target
    scores below 1 there too."""
    env = make(data, cache, human_goals=False)
    rewards = EXPECTED["synthetic_all"]["rewards"]
    got = {}
    for i in rewards:
        env.reset(options={"task_id": int(i)})
        got[i] = _buy(env, env.unwrapped.session.goal)[1]
    assert got == {i: r["own"][1] for i, r in rewards.items()}
    assert 1.0 in got.values() and min(got.values()) < 1.0


def test_num_products_picks_the_files_and_keeps_upstreams_slice(data, cache, tmp_path):
    assert upstream_files(data).items.name == "items_shuffle_1000.json"
    assert upstream_files(data, None).attributes.name == upstream_files(data, 5000).attributes.name == "items_ins_v2.json"
    full = load_upstream(data, num_products=None, cache_dir=cache)
    assert rows(full.goals) == rows(load_upstream(data, cache_dir=cache).goals)  # the same records under both names
    assert full.catalog.files.items.name == "items_shuffle.json"
    with pytest.raises(TypeError, match="num_products"):
        load_upstream(data, num_products=1.5, cache_dir=cache)


def test_the_callers_global_random_is_left_alone(data, tmp_path):
    random.seed(7)
    state = random.getstate()
    load_upstream(data, cache_dir=tmp_path)
    assert random.getstate() == state


def test_the_build_is_cached_on_disk_under_the_files_hashes(data, tmp_path, monkeypatch):
    first = load_upstream(data, cache_dir=tmp_path)
    entries = [p.name for p in tmp_path.iterdir()]
    assert len(entries) == 1 and entries[0].startswith("upstream-")
    upstream._load.cache_clear()

    def no_build(*args):
        raise AssertionError("rebuilt although cached")

    monkeypatch.setattr(upstream, "_build", no_build)
    again = load_upstream(data, cache_dir=tmp_path)
    assert rows(again.goals) == rows(first.goals) and list(again.goals.weights) == list(first.goals.weights)
    assert [again.catalog.item(i) for i in range(len(again.catalog))] == [first.catalog.item(i) for i in range(len(first.catalog))]
    assert again.catalog.search_index.search("running shoes") == first.catalog.search_index.search("running shoes")
    monkeypatch.undo()
    changed = write_fixture(tmp_path / "changed")
    human = json.loads((changed / "items_human_ins.json").read_text())
    human.popitem()
    (changed / "items_human_ins.json").write_text(json.dumps(human))
    load_upstream(changed, cache_dir=tmp_path / "c2")
    load_upstream(data, cache_dir=tmp_path / "c2")
    assert len(list((tmp_path / "c2").iterdir())) == 2  # another content, another entry


def test_a_damaged_cache_entry_is_rebuilt(data, tmp_path):
    load_upstream(data, cache_dir=tmp_path)
    (entry,) = tmp_path.iterdir()
    records = entry / "records.json"
    records.write_bytes(records.read_bytes()[:-10])  # cut short
    upstream._load.cache_clear()
    catalog, goals = load_upstream(data, cache_dir=tmp_path)
    assert len(goals) == EXPECTED["human_all"]["num_goals"]


def test_an_interrupted_build_leaves_nothing_in_the_cache(data, tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(upstream.SearchIndex, "build", interrupted)
    with pytest.raises(KeyboardInterrupt):
        load_upstream(data, cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def _rewrite(folder: Path, name: str, change) -> None:
    path = folder / name
    data = json.loads(path.read_text())
    path.write_text(change(data) if callable(change) else change)


def _set(index: int, **fields):
    def change(items):
        items[index] = {**items[index], **fields}
        for key, value in fields.items():
            if value is ...:
                del items[index][key]
        return json.dumps(items)
    return change


@pytest.mark.parametrize("name, change, needle", [
    ("items_shuffle_1000.json", lambda items: json.dumps(items)[:-400], "not valid JSON in record #"),
    ("items_shuffle_1000.json", "{}", "expected a JSON array"),
    ("items_shuffle_1000.json", "[1, 2", "record #0 (asin=None): expected an object"),
    ("items_shuffle_1000.json", _set(2, asin=...), "record #2 (asin=None): 'asin' must be a string"),
    ("items_shuffle_1000.json", _set(4, name=17), "record #4 (asin='B000000004'): 'name' must be a string"),
    ("items_shuffle_1000.json", _set(5, pricing=[12.5]), "record #5 (asin='B000000005'): 'pricing' must be a string"),
    ("items_shuffle_1000.json", _set(6, pricing="$1.2.3"), "unparsable 'pricing'"),
    ("items_shuffle_1000.json", _set(8, customization_options={"Size": [{"value": 9}]}), "'value'"),
    ("items_shuffle_1000.json", _set(9, small_description=None), "'small_description' must be a list"),
    ("items_shuffle_1000.json", "[]", "no usable product"),
    ("items_ins_v2_1000.json", "[]", "expected a JSON object mapping asin"),
    ("items_ins_v2_1000.json", lambda m: json.dumps({**m, "B000000000": 3}), "bad record for asin 'B000000000': expected an object"),
    ("items_human_ins.json", "{\"a\": ", "items_human_ins.json: not valid JSON"),
    ("items_human_ins.json", lambda m: json.dumps({**m, "B000000001": [{"instruction_attributes": ["x"]}]}),
     "instruction #0 of asin 'B000000001': 'instruction' must be a string"),
])
def test_bad_data_is_one_line_naming_the_file_and_record(tmp_path, name, change, needle):
    folder = write_fixture(tmp_path / "data")
    _rewrite(folder, name, change)
    cache = tmp_path / "cache"
    with pytest.raises(UserError) as err:
        load_upstream(folder, cache_dir=cache)
    message = str(err.value)
    assert "\n" not in message and str(folder / name) in message and needle in message, message
    assert not cache.exists() or list(cache.iterdir()) == []


def test_missing_files_and_synthetic_goals_without_their_record(tmp_path):
    folder = write_fixture(tmp_path / "data")
    (folder / "items_human_ins.json").unlink()
    with pytest.raises(UserError, match="items_human_ins.json: no such file"):
        load_upstream(folder, cache_dir=tmp_path / "cache")
    load_upstream(folder, human_goals=False, cache_dir=tmp_path / "cache")  # not needed for synthetic goals
    _rewrite(folder, "items_ins_v2_1000.json", lambda m: json.dumps({k: v for k, v in m.items() if k != "B000000003"}))
    with pytest.raises(UserError, match=r"items_ins_v2_1000.json: no record for asin 'B000000003'"):
        load_upstream(folder, human_goals=False, cache_dir=tmp_path / "cache")


def test_env_arguments(data, cache):
    with pytest.raises(ValueError, match="human_goals"):
        gym.make("rspo/WebShop-v1", human_goals=False)
    with pytest.raises(ValueError, match="goal_style"):
        make(data, cache, goal_style="synthetic")
    files = UpstreamFiles(data / "items_shuffle.json", data / "items_ins_v2_1000.json", data / "items_human_ins.json")
    env = gym.make("rspo/WebShop-v1", data_dir=files, cache_dir=cache, noun_extractor=fixture_nouns, split="test")
    assert env.reset(options={"task_id": 0})[1]["task"] == EXPECTED["human_all"]["goals"]["0"][1]


def test_without_spacy_the_env_says_what_to_install_or_pass(data, cache, monkeypatch):
    from rspo_gym.envs.webshop import reward

    def missing():
        raise ImportError("no spacy")

    monkeypatch.setattr(reward, "_spacy_pipeline", missing)
    with pytest.raises(ImportError, match="en_core_web_sm.*noun_extractor") as err:
        gym.make("rspo/WebShop-v1", data_dir=data, cache_dir=cache)
    assert "\n" not in str(err.value)
