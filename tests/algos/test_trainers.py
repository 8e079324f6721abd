"""Trainer loop tests: every combination runs, RSPO's invariants hold, resume is exact."""

import time
from dataclasses import replace

import pytest
import torch

import rspo_gym  # noqa: F401

pytest.importorskip("transformers")

from rspo_gym.algos import GiGPOTrainer, GRPOTrainer, PPOTrainer, RSPOTrainer  # noqa: E402
from rspo_gym.training.rspo import merge_replay  # noqa: E402

SMALL = dict(iterations=1, num_groups=2, group_size=2, max_turns=2, eval_every=1, eval_tasks=2, progress=False)

ALFWORLD, WEBSHOP = "rspo/ALFWorld-v0", "rspo/WebShop-v0"
COMBINATIONS = [  # (trainer, settings, the envs on which it runs in the fast subset: slow on the others)
    (GRPOTrainer, {}, (ALFWORLD, WEBSHOP)),
    (GRPOTrainer, {"reward": "dense"}, ()),
    (GiGPOTrainer, {}, ()),
    (GiGPOTrainer, {"reward": "dense"}, (ALFWORLD,)),
    (PPOTrainer, {"num_groups": 2, "group_size": 1}, (WEBSHOP,)),
    (PPOTrainer, {"num_groups": 2, "group_size": 1, "reward": "dense"}, ()),
    (RSPOTrainer, {"base": "grpo", "explorer_group_size": 1}, (WEBSHOP,)),
    (RSPOTrainer, {"base": "gigpo", "explorer_group_size": 1}, ()),
    (RSPOTrainer, {"base": "ppo", "explorer_group_size": 1}, ()),
    (RSPOTrainer, {"base": "grpo", "swap": "rank"}, ()),
    (RSPOTrainer, {"base": "gigpo", "swap": "anneal"}, ()),
]


@pytest.mark.parametrize("cls,extra,env_id", [
    pytest.param(cls, extra, env_id, marks=() if env_id in fast else pytest.mark.slow,
                 id="-".join([cls.__name__, "-".join(f"{k}={x}" for k, x in extra.items()), env_id]))
    for cls, extra, fast in COMBINATIONS for env_id in (ALFWORLD, WEBSHOP)
])
def test_every_combination_runs_end_to_end(cls, extra, env_id):
    # one WebShop turn (the search page) keeps prompts short: results pages cost ~1k prompt tokens
    turns = {"max_turns": 1, "eval_tasks": 1} if "WebShop" in env_id else {}
    trainer = cls(env_id, **{**SMALL, **turns, **extra})
    history = trainer.learn()
    assert len(history) == 1
    row = history[0]
    for key in ("rollout/success", "rollout/process_return", "train/pg_loss", "train/entropy", "eval/success"):
        assert key in row, key
    assert 0.0 <= row["eval/success"] <= 1.0
    if cls is RSPOTrainer and extra.get("swap", "explorer") == "explorer":
        assert "explorer/success" in row and row["explorer/replayed_rows"] > 0
    trainer.close()


def _weights(trainer):
    return {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}


def _comparable(history):
    return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in history]


@pytest.mark.slow
def test_rspo_with_no_explorer_trajectories_is_exactly_the_base_algorithm():
    kwargs = dict(SMALL, iterations=2, eval_every=0, seed=3)
    base = GRPOTrainer("rspo/ALFWorld-v0", **kwargs)
    rspo = RSPOTrainer("rspo/ALFWorld-v0", base="grpo", explorer_group_size=0, **kwargs)
    assert _comparable(base.learn()) == _comparable(rspo.learn())
    a, b = _weights(base), _weights(rspo)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_learner_loss_ignores_the_process_reward_of_a_fixed_buffer():
    trainer = RSPOTrainer("rspo/ALFWorld-v0", base="gigpo", explorer_group_size=2, **dict(SMALL, max_turns=3))
    learner = trainer.collect(0)
    merged = merge_replay(learner, trainer.buffer, 0, trainer.config.replay_age)
    assert any(r.source == "explorer" for r in merged.rows)
    changed = replace(merged, rows=[replace(r, process_reward=r.process_reward + 7.0 * (i % 3)) for i, r in enumerate(merged.rows)])
    results = []
    for rollout in (merged, changed):
        inputs = trainer.learner_inputs(rollout)
        estimate = trainer.estimate(inputs["view"], inputs["batch"], inputs["old_values"])
        results.append((estimate.advantages, inputs["is_weights"]))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


def test_freshly_synced_explorer_replays_with_unit_importance_weights():
    trainer = RSPOTrainer("rspo/ALFWorld-v0", base="grpo", explorer_group_size=2, **SMALL)
    learner = trainer.collect(0)
    merged = merge_replay(learner, trainer.buffer, 0, trainer.config.replay_age)
    inputs = trainer.learner_inputs(merged)
    mask = inputs["batch"].response_mask
    assert torch.allclose(inputs["is_weights"] * mask, mask, atol=1e-4)
    # union groups: each task's group has N learner + M explorer trajectories
    sizes = {}
    for t in merged.trajectories:
        sizes[t.group_id] = sizes.get(t.group_id, 0) + 1
    assert set(sizes.values()) == {2 + 2}


def test_an_explorer_identical_to_its_learner_is_the_base_with_groups_of_n_plus_m():
    """phi == theta (synced every iteration, never updated): the explorer's M samples are the learner's
    own, so the learner's update is the base algorithm's on groups of N + M, weights 1."""
    trainer = RSPOTrainer("rspo/ALFWorld-v0", base="grpo", explorer_group_size=3, explorer_updates=0, explorer_sync_every=1,
                          replay_age=1, **dict(SMALL, max_turns=3))
    trainer.train_on(trainer.collect(0), 0)  # moves the learner: the sync before iteration 1 must catch up
    merged = merge_replay(trainer.collect(1), trainer.buffer, 1, trainer.config.replay_age)
    inputs = trainer.learner_inputs(merged)
    mask = inputs["batch"].response_mask.bool()
    # the explorer sampled as the learner (to float rounding: sampling and rescoring batch rows differently)
    assert torch.allclose(inputs["is_weights"][mask], torch.ones_like(inputs["is_weights"][mask]), atol=1e-5)
    assert torch.allclose(inputs["old_logprobs"][mask], inputs["batch"].old_logprobs[mask], atol=1e-5)
    on_policy = replace(merged, rows=[replace(r, source="learner") for r in merged.rows],
                        trajectories=[replace(t, source="learner") for t in merged.trajectories])
    base = GRPOTrainer("rspo/ALFWorld-v0", **dict(SMALL, max_turns=3, group_size=2 + 3))
    assert torch.equal(trainer.estimate(inputs["view"], inputs["batch"], None).advantages,
                       base.estimate(base.reward_view(on_policy, "outcome"), inputs["batch"], None).advantages)
    sizes = {}
    for t in merged.trajectories:
        sizes[t.group_id] = sizes.get(t.group_id, 0) + 1
    assert set(sizes.values()) == {2 + 3}
    trainer.close(), base.close()


def test_rank_swap_feeds_process_progress_in_outcome_order():
    from rspo_gym.rollout.trajectory import Rollout, StepRow, Trajectory

    trainer = RSPOTrainer("rspo/ALFWorld-v0", base="grpo", swap="rank", **SMALL)
    rows, trajectories = [], []
    for traj, (won, process) in enumerate([(True, 0.2), (False, 0.9), (False, 0.5), (True, 0.7)]):
        rows.append(StepRow([1], [2], [0.0], float(won), process, "o", True, True, 0, traj, 0, "look"))
        trajectories.append(Trajectory(traj, 0, 0, "t", float(won), -0.3, process, won, float(won), 1, 0))
    view = trainer.reward_view(Rollout(rows, trajectories), "outcome")
    # ranked by the peak potential gain: WebShop's summed process rewards are one constant (-0.3 here)
    assert view.episode.tolist() == pytest.approx([0.7, 0.5, 0.2, 0.9])


@pytest.mark.slow
def test_resume_after_interruption_reproduces_the_uninterrupted_run(tmp_path):
    kwargs = dict(SMALL, iterations=3, eval_every=3, seed=5, checkpoint_every=1, base="ppo", explorer_group_size=1)
    full = RSPOTrainer("rspo/ALFWorld-v0", output_dir=str(tmp_path / "full"), **kwargs).learn()
    first = RSPOTrainer("rspo/ALFWorld-v0", output_dir=str(tmp_path / "cut"), **kwargs)

    class Killed(Exception):
        pass

    def kill_after_two(trainer, metrics):
        if metrics["iteration"] == 2:
            raise Killed  # as a kill during iteration 3: only the checkpoint of iteration 2 remains

    with pytest.raises(Killed):
        first.learn(3, callback=kill_after_two)
    del first
    resumed = RSPOTrainer("rspo/ALFWorld-v0", output_dir=str(tmp_path / "cut"), **kwargs)
    history = resumed.learn(3, resume=True)
    assert _comparable(history) == _comparable(full)
    lines = (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 3 and (tmp_path / "cut" / "metrics.csv").exists() and (tmp_path / "cut" / "config.json").exists()


def test_bad_arguments_get_clear_errors():
    with pytest.raises(ValueError, match="base"):
        RSPOTrainer("rspo/ALFWorld-v0", base="sac")
    with pytest.raises(ValueError, match="swap"):
        RSPOTrainer("rspo/ALFWorld-v0", swap="magic", **SMALL)
    with pytest.raises(ValueError, match="outcome"):
        RSPOTrainer("rspo/ALFWorld-v0", reward="dense", **SMALL)
    with pytest.raises(TypeError, match="unknown"):
        GRPOTrainer("rspo/ALFWorld-v0", learning_rat=1.0)
    with pytest.raises(ValueError, match="group_size"):
        GRPOTrainer("rspo/ALFWorld-v0", group_size=0)
    with pytest.raises(ValueError, match="dense_outcome"):
        GRPOTrainer("rspo/ALFWorld-v0", reward="dense", dense_outcome="won")
    with pytest.raises(ValueError, match="reward must be one of"):
        GRPOTrainer("rspo/ALFWorld-v0", reward="vibes", **SMALL)


def test_time_budget_stops_after_an_evaluated_iteration(tmp_path, monkeypatch, capsys):
    from rspo_gym.training import trainer as trainer_module

    monkeypatch.setattr(trainer_module, "another_iteration_fits", lambda *args: False)  # the budget allows one
    trainer = GRPOTrainer("rspo/ALFWorld-v0", output_dir=str(tmp_path), **dict(SMALL, iterations=5, eval_every=10))
    history = trainer.learn(time_budget_s=3600)
    assert len(history) == 1 and "eval/success" in history[-1]
    assert (tmp_path / "checkpoint.pt").exists()
    assert "time budget: stopping after iteration 1, since another would not fit" in capsys.readouterr().out


@pytest.mark.slow
def test_time_budget_is_a_limit_even_mid_collection(tmp_path, capsys):
    trainer = GRPOTrainer("rspo/ALFWorld-v0", output_dir=str(tmp_path), **dict(SMALL, iterations=5))
    started = time.perf_counter()
    history = trainer.learn(time_budget_s=0.0)  # spent before the first turn of the first rollout
    assert history == [] and trainer.iteration == 0
    assert "time budget reached while collecting iteration 1: its partial rollout is dropped" in capsys.readouterr().out
    assert (tmp_path / "policy").is_dir() and not (tmp_path / "checkpoint.pt").exists()
    assert time.perf_counter() - started < 30  # no update and no evaluation ran
    trainer.config = replace(trainer.config, eval_every=0)
    assert len(trainer.learn(1)) == 1 and trainer._collect_deadline is None  # the deadline does not outlive learn()


@pytest.mark.slow
def test_trainers_accept_env_factories_instances_and_vector_envs():
    import gymnasium as gym

    from rspo_gym.rollout import DiscreteTextAdapter, GroupedVectorEnv

    frozen_lake = lambda: DiscreteTextAdapter(gym.make("FrozenLake-v1"))  # noqa: E731
    history = GRPOTrainer(frozen_lake, **dict(SMALL, max_turns=4)).learn()
    assert "eval/success" in history[0]
    GiGPOTrainer(gym.make("rspo/ALFWorld-v0"), **SMALL).learn()
    venv = GroupedVectorEnv("rspo/ALFWorld-v0", 2, 2)
    RSPOTrainer(venv, swap="rank", **SMALL).learn()
    with pytest.raises(ValueError, match="factory"):
        RSPOTrainer(venv, swap="explorer", **SMALL)


@pytest.mark.slow
def test_evaluate_on_another_split_matches_a_trainer_configured_for_it():
    settings = {**SMALL, "model": "tiny-webshop", "max_turns": 7}  # greedy clone buys by turn 5
    trainer = GRPOTrainer("rspo/WebShop-v0", eval_task_ids=[0, 1], **settings)  # held out: the test split
    heldout = trainer.evaluate()
    training = trainer.evaluate(task_ids=[4, 5], split="train")
    configured = GRPOTrainer("rspo/WebShop-v0", eval_task_ids=[4, 5], eval_split="train", **settings)
    assert training == configured.evaluate()
    assert trainer.evaluate() == heldout  # each (split, size) keeps its own env
    assert training["eval/score"] != heldout["eval/score"]
    trainer.close()
    configured.close()


# ---------------------------------------------------------------- defaults that give a useful run
FAST = dict(iterations=1, num_groups=1, group_size=2, max_turns=2, eval_every=0, progress=False)


def _same_weights(policy, name: str) -> bool:
    from rspo_gym.policies.models import load_model

    reference, _ = load_model(name, device="cpu")
    key = "model.embed_tokens.weight"
    return torch.equal(policy.model.state_dict()[key].cpu(), reference.state_dict()[key])


def test_default_model_reward_and_history_follow_the_env_family():
    alfworld = GRPOTrainer("rspo/ALFWorld-v0", **FAST)
    assert _same_weights(alfworld.policy, "tiny-alfworld")
    assert (alfworld.config.reward, alfworld.config.history_length) == ("outcome", 6)  # the clone's prompt history
    webshop = GRPOTrainer("rspo/WebShop-v0", **FAST)
    assert _same_weights(webshop.policy, "tiny-webshop")
    assert (webshop.config.reward, webshop.config.history_length) == ("score", 2)
    untrained = GRPOTrainer("rspo/ALFWorld-v0", model="tiny-untrained", **FAST)
    assert _same_weights(untrained.policy, "tiny") and untrained.config.history_length == 2
    explicit = GRPOTrainer("rspo/WebShop-v0", reward="outcome", history_length=4, **FAST)
    assert (explicit.config.reward, explicit.config.history_length) == ("outcome", 4)
    for trainer in (alfworld, webshop, untrained, explicit):
        trainer.close()


def test_max_turns_defaults_to_the_env_step_limit():
    """17 turns: beyond the old default of 15, within a limit the env is registered with here."""
    from rspo_gym.policies.llm import load_policy

    settings = {k: v for k, v in FAST.items() if k != "max_turns"}
    untrained = load_policy("tiny", device="cpu")
    trainer = GRPOTrainer("rspo/ALFWorld-v0", untrained, env_kwargs={"max_episode_steps": 17}, **{**settings, "group_size": 1})
    assert trainer.config.max_turns is None
    (trajectory,) = trainer.collect(0).trajectories
    assert not trajectory.won and trajectory.length == 17
    trainer.close()


def test_learn_without_output_dir_writes_a_complete_run_folder(tmp_path, monkeypatch, capsys):
    import json
    import re

    from transformers import AutoModelForCausalLM

    from rspo_gym.training.config import TrainerConfig

    runs = tmp_path / "runs"
    monkeypatch.setenv("RSPO_GYM_RUNS_DIR", str(runs))
    trainer = GRPOTrainer("rspo/ALFWorld-v0", **FAST)
    trainer.evaluate(tasks=1)
    assert not runs.exists()  # building and evaluating a trainer writes nothing
    trainer.learn()
    (run,) = runs.iterdir()
    assert re.fullmatch(r"grpo-ALFWorld-v0-\d{8}-\d{6}", run.name)
    assert capsys.readouterr().out.count(f"Logging to {run}") == 1
    for name in ("metrics.csv", "metrics.jsonl", "checkpoint.pt", "learning_curve.png"):
        assert (run / name).is_file(), name
    assert (run / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    AutoModelForCausalLM.from_pretrained(run / "policy")
    saved = json.loads((run / "config.json").read_text())
    assert (saved["env_id"], saved["model"]) == ("rspo/ALFWorld-v0", "tiny-alfworld")
    assert TrainerConfig.from_dict(saved) == trainer.config
    trainer.learn(2)  # more iterations of the same run go to the same folder
    assert [p.name for p in runs.iterdir()] == [run.name] and len((run / "metrics.jsonl").read_text().splitlines()) == 2
    with pytest.raises(ValueError, match="output_dir"):
        GRPOTrainer("rspo/ALFWorld-v0", **FAST).learn(resume=True)  # nothing to resume in a new folder


def test_run_folders_never_collide(tmp_path):
    from rspo_gym.training.runs import create_run_dir, run_name

    name = run_name("rspo-grpo-explorer", "rspo/ALFWorld-v0", "20250101-120000")
    assert name == "rspo-grpo-explorer-ALFWorld-v0-20250101-120000"
    assert run_name("grpo", None, "20250101-120000") == "grpo-env-20250101-120000"
    first, second = create_run_dir(tmp_path, name), create_run_dir(tmp_path, name)
    assert first.name == name and second.name == f"{name}-1" and second.is_dir()


def test_learning_curve_without_matplotlib_says_so_and_skips(tmp_path, monkeypatch, capsys):
    from rspo_gym.plotting import plot_learning_curve

    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)  # import fails as when not installed
    history = [{"iteration": 1, "rollout/success": 0.5, "rollout/score": 0.5}]
    assert plot_learning_curve(history, tmp_path / "curve.png", title="t") is False
    assert not (tmp_path / "curve.png").exists()
    assert capsys.readouterr().out.strip().splitlines() == ["matplotlib is not installed: no curve.png (pip install matplotlib)"]
