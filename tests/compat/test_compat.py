"""The originals' call sequences, unchanged, against ``rspo_gym.compat``: ReAct's ALFWorld notebook
(banner strip, task type from the gamefile folder, ``info['won'][0]``) and verl-agent's WebShop
worker (``reset(session=k)``, ``get_available_actions()``, the 4-tuple ``step``)."""

from __future__ import annotations

import re
import sys
import time

import gymnasium as gym
import pytest

from rspo_gym import compat
from rspo_gym.compat.alfworld import AlfredTWEnv, default_config, get_environment
from rspo_gym.compat.webshop import WebAgentTextEnv
from rspo_gym.envs.webshop.expert import ScriptedShopper
from rspo_gym.envs.webshop.goals import split_range

REACT_PREFIXES = {
    "pick_and_place": "put", "pick_clean_then_place": "clean", "pick_heat_then_place": "heat",
    "pick_cool_then_place": "cool", "look_at_obj": "examine", "pick_two_obj": "puttwo",
}


@pytest.fixture
def installed():
    """``compat.install()`` for one test; the originals' module entries are restored after it."""
    saved = {name: sys.modules.get(name) for name in compat.ALIASES}
    yield compat.install()
    for name, module in saved.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module


def react_episode(env, plan_source) -> tuple[float, str, str]:
    """ReAct's ``alfworld_run`` loop with a scripted policy; (reward, task family, first observation)."""
    ob, info = env.reset()
    ob = "\n".join(ob[0].split("\n\n")[1:])  # ReAct strips the welcome banner itself
    name = "/".join(info["extra.gamefile"][0].split("/")[-3:-1])
    family = next(v for k, v in REACT_PREFIXES.items() if name.startswith(k))
    for action in plan_source():
        observation, reward, done, info = env.step([action])
        observation, reward, done = observation[0], info["won"][0], done[0]
        if done:
            return reward, family, ob
    return 0, family, ob


def test_react_notebook_runs_unchanged(installed):
    import alfworld
    import alfworld.agents.environment

    config = default_config()
    split = "eval_out_of_distribution"
    env = getattr(alfworld.agents.environment, config["env"]["type"])(config, train_eval=split)
    env = env.init_env(batch_size=1)
    env.seed(0)
    reward, family, first = react_episode(env, lambda: env.envs[0].expert_plan())
    assert reward is True and family in REACT_PREFIXES.values()
    assert not first.startswith("-= Welcome") and "Your task is to:" in first
    assert env.envs[0].unwrapped.tasks.split == "valid_unseen"


def test_alfworld_batch_shapes_and_cycling():
    env = AlfredTWEnv(None, "eval_in_distribution")
    assert env.num_games == 140 and len(env.game_files) == 140 and env.split == "valid_seen"
    batch = env.init_env(batch_size=2)
    batch.seed(3)
    obs, infos = batch.reset()
    assert len(obs) == 2 and obs[0].startswith("-= Welcome to TextWorld, ALFRED! =-")
    assert set(infos) == {"won", "admissible_commands", "extra.gamefile"} and infos["won"] == [False, False]
    first = infos["extra.gamefile"]
    _, infos = batch.reset()
    assert infos["extra.gamefile"] != first  # the next games of the shuffled list
    batch.seed(3)
    assert batch.reset()[1]["extra.gamefile"] == first  # the same seed, the same order
    obs, scores, dones, infos = batch.step(["jump", "look"])
    assert obs[0] == "Nothing happens." and scores == [0, 0] and dones == [False, False]
    with pytest.raises(ValueError, match="Expected 2 commands"):
        batch.step(["look"])


def test_alfworld_train_is_a_finite_list_and_step_limit_ends_episodes():
    config = default_config()
    config["dataset"]["num_train_games"] = 20
    config["dagger"]["training"]["max_nb_steps_per_episode"] = 3
    config["env"]["task_types"] = [1]
    env = AlfredTWEnv(config, "train")
    assert 0 < env.num_games <= 20 and all("pick_and_place_simple-" in path for path in env.game_files)
    assert AlfredTWEnv(None, "train").num_games == 3553  # upstream's count when the split is unbounded
    batch = env.init_env(1)
    batch.reset()
    dones = [batch.step(["look"])[2][0] for _ in range(4)]
    assert dones == [False, False, True, True]


def test_alfworld_real_games_when_the_data_path_exists(alfworld_data):
    config = default_config()
    config["dataset"]["eval_id_data_path"] = str(alfworld_data / "json_2.1.1" / "valid_seen")
    env = AlfredTWEnv(config, "eval_in_distribution")
    _, infos = env.init_env(1).reset()
    assert infos["extra.gamefile"][0].endswith("game.tw-pddl") and str(alfworld_data) in infos["extra.gamefile"][0]


def test_alfworld_errors_are_one_line():
    with pytest.raises(ValueError, match="Unknown train_eval"):
        AlfredTWEnv(None, "valid")
    with pytest.raises(ValueError, match="THOR"):
        get_environment("AlfredThorEnv")
    assert get_environment("AlfredTWEnv") is AlfredTWEnv


@pytest.mark.parametrize("case,expected", [
    ("batch_size=10**6", "batch_size must be an integer from 1 to 65536, got 1000000"),  # was 5.8 GB, then MemoryError
    ("batch_size=True", "batch_size must be an integer from 1 to 65536, got True"),
    ("num_train_games=10**9", "dataset.num_train_games must be -1 or an integer from 1 to 100000, got 1000000000"),  # MemoryError
    ("num_eval_games=2.5", "dataset.num_eval_games must be -1 or an integer from 1 to 100000, got 2.5"),
])
def test_alfworld_sizes_beyond_their_bounds_are_refused_before_they_allocate(case, expected):
    config = default_config()
    started = time.perf_counter()
    with pytest.raises(ValueError, match=re.escape(expected)):
        if case.startswith("batch_size"):
            AlfredTWEnv(config, "eval_in_distribution").init_env(batch_size=eval(case.split("=")[1]))
        else:
            key, value = case.split("=")
            config["dataset"][key] = eval(value)
            AlfredTWEnv(config, "train" if key == "num_train_games" else "eval_in_distribution")
    assert time.perf_counter() - started < 5


def test_verl_agent_webshop_worker_idioms(installed):
    from web_agent_site.envs import WebAgentTextEnv as Installed

    env = Installed(observation_mode="text", num_products=200)
    assert Installed is WebAgentTextEnv and len(env.server.goals) >= 1500
    obs, info = env.reset(session=3)
    assert info is None and obs.startswith("WebShop [SEP] Instruction: [SEP] ")
    reference = gym.make("rspo/WebShop-v1", num_products=200, split="test")
    assert reference.reset(options={"task_id": 3})[0] == obs  # upstream's session 3 is the test split's goal 3
    assert env.get_available_actions() == {"has_search_bar": True, "clickables": ["search"]}
    shopper = ScriptedShopper(env.get_instruction_text())  # a scripted stand-in: it reads the page only
    for _ in range(15):
        obs, reward, done, info = env.step(shopper.act(obs, env.get_available_actions()))
        if done:
            break
    assert done and info is None and 0.0 < reward <= 1.0


def test_webshop_sessions_map_to_splits():
    env = WebAgentTextEnv(num_products=200)
    n = len(env.server.goals)
    for session, split in ((0, "test"), (500, "valid"), (1500, "train")):
        obs, _ = env.reset(session=session)
        expected = gym.make("rspo/WebShop-v1", num_products=200, split=split).reset(options={"task_id": session - split_range(split, n).start})[0]
        assert obs == expected
    assert env.reset(session="fixed_500")[0] == env.reset(session=500)[0]
    with pytest.raises(ValueError, match="out of range"):
        env.reset(session=n)
    with pytest.raises(ValueError, match="not offered"):
        WebAgentTextEnv(observation_mode="html")
    with pytest.raises(ValueError, match="num_prev_obs"):
        WebAgentTextEnv(num_products=200, num_prev_obs=2)


@pytest.mark.parametrize("version", [1, 0])
def test_webshop_api_plays_the_calibrated_tasks_unless_asked_for_v0(version):
    """A user of the originals' API expects the original's difficulty: ``rspo/WebShop-v1``'s
    tasks by default; v0's, kept for old results, one argument away."""
    env = WebAgentTextEnv(num_products=200, **({} if version == 1 else {"task_version": 0}))
    expected = gym.make(f"rspo/WebShop-v{version}", num_products=200, split="test").reset(options={"task_id": 3})[0]
    assert env.reset(session=3)[0] == expected


def test_upstream_gym_id_after_install(installed):
    """Upstream's ``web_agent_site.envs`` registers ``WebAgentTextEnv-v0``, and its scripts make
    the env through ``gym.make`` with its own arguments; the env is the bare API, unwrapped."""
    import web_agent_site.envs  # noqa: F401  (upstream registers its ids on this import)

    env = gym.make("WebAgentTextEnv-v0", observation_mode="text", num_products=200)
    assert isinstance(env, WebAgentTextEnv)
    obs, info = env.reset(session=3)
    assert info is None and obs == WebAgentTextEnv(num_products=200).reset(session=3)[0]
    obs, reward, done, info = env.step("search[red shoes]")
    assert (reward, done, info) == (0.0, False, None) and "Back to Search" in obs


@pytest.mark.parametrize("bad", [1.5, True, float("nan")])
def test_webshop_num_products_that_is_no_whole_number_is_refused_by_name(bad):
    """``int(1.5)`` and ``int(True)`` would quietly play a one-product catalog, and ``int(nan)``
    fails without saying which argument was wrong."""
    with pytest.raises((TypeError, ValueError), match="num_products"):
        WebAgentTextEnv(num_products=bad)


@pytest.mark.parametrize("session", ["fixed_-1", "fixed_x", "fixed_"])
def test_webshop_fixed_session_naming_no_goal_is_refused_with_the_range(session):
    """A pinned session that names no goal is a mistake, not a request for a random goal."""
    env = WebAgentTextEnv(num_products=200)
    with pytest.raises(ValueError, match=rf"\[0, {len(env.server.goals)}\)"):
        env.reset(session=session)


def test_webshop_file_path_plays_upstreams_data(installed, tmp_path):
    """Upstream's ``file_path`` (its ``items_shuffle`` file, the other two beside it) plays its
    products and goals in its order, through the class and through upstream's Gym id."""
    import web_agent_site.envs  # noqa: F401  (upstream registers its ids on this import)
    from rspo_gym.envs.webshop.upstream import load_upstream
    from tests.envs.webshop.upstream_fixture import fixture_nouns, write_fixture

    data = write_fixture(tmp_path / "data")
    kwargs = {"file_path": str(data / "items_shuffle_1000.json"), "human_goals": True, "cache_dir": tmp_path / "cache",
              "noun_extractor": fixture_nouns}
    env = WebAgentTextEnv(observation_mode="text", **kwargs)
    goals = load_upstream(data, cache_dir=tmp_path / "cache").goals
    assert list(env.server.goals) == list(goals)
    for session in (0, 500, 1500, "fixed_1501"):
        obs, info = env.reset(session=session)
        index = session if isinstance(session, int) else 1501
        assert info is None and env.get_instruction_text() == goals[index].instruction_text in obs
    assert list(WebAgentTextEnv(num_products=20, **kwargs).server.goals) == list(load_upstream(data, 20, cache_dir=tmp_path / "cache").goals)
    made = gym.make("WebAgentTextEnv-v0", observation_mode="text", **kwargs)
    assert made.reset(session=7)[0] == env.reset(session=7)[0]
    obs, reward, done, info = made.step("search[running shoes]")
    assert (reward, done, info) == (0.0, False, None) and "Total results" in obs


def test_webshop_file_path_without_human_goals_plays_synthetic_goals_as_upstreams_text_env(tmp_path):
    """Upstream's text env passes ``kwargs.get('human_goals')``, None unless given, so its loader
    and ``get_goals`` make the synthetic goals."""
    from rspo_gym.envs.webshop.upstream import load_upstream
    from tests.envs.webshop.upstream_fixture import fixture_nouns, write_fixture

    data = write_fixture(tmp_path / "data")
    env = WebAgentTextEnv(observation_mode="text", file_path=str(data / "items_shuffle_1000.json"),
                          cache_dir=tmp_path / "cache", noun_extractor=fixture_nouns)
    assert list(env.server.goals) == list(load_upstream(data, human_goals=False, cache_dir=tmp_path / "cache").goals)
