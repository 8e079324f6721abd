"""Settings are discoverable from the command line: ``--version``, defaults in every help,
``rspo-gym config`` lists each field with its default and doc, ``train`` has flags for the common ones."""

import dataclasses

import pytest

import rspo_gym
from rspo_gym import cli
from rspo_gym.cli import main


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out == f"rspo-gym {rspo_gym.__version__}\n"


@pytest.mark.parametrize("command", [["quickstart"], ["demo"], ["webshop", "serve"], ["webshop", "export"], ["train"], ["eval"], ["compare"], ["config"]])
def test_every_help_shows_defaults(command, capsys):
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    out = " ".join(capsys.readouterr().out.split())  # unwrap argparse's line breaks
    assert "(default:" in out
    if command == ["quickstart"]:
        assert "held-out tasks per evaluation (default: 35)" in out and "seed of everything (default: 0)" in out
        assert "seeded episodes per held-out task (default: 4)" in out and "--time-limit-minutes" in out
    if command == ["train"]:
        for flag in ("--group-size", "--num-groups", "--eval-tasks", "--max-turns"):
            assert flag in out
        assert "`rspo-gym config --algo ALGO` lists them all with their defaults and docs" in out


def test_train_flags_reach_the_config(monkeypatch):
    seen = {}

    class _Stop(Exception):
        pass

    def fake_trainer(algo, env, model, overrides):
        seen.update(overrides, algo=algo)
        raise _Stop

    monkeypatch.setattr(cli, "_trainer", fake_trainer)
    with pytest.raises(_Stop):
        main(["train", "--algo", "grpo", "--group-size", "8", "--num-groups", "3", "--eval-tasks", "5", "--max-turns", "12"])
    assert {k: seen[k] for k in ("algo", "group_size", "num_groups", "eval_tasks", "max_turns")} == {
        "algo": "grpo", "group_size": 8, "num_groups": 3, "eval_tasks": 5, "max_turns": 12}
    seen.clear()
    with pytest.raises(_Stop):
        main(["train", "--algo", "ppo"])
    assert not {"group_size", "num_groups", "eval_tasks", "max_turns"} & set(seen)  # unset flags leave the config's


def test_config_command_lists_every_field_with_default_and_doc(capsys):
    pytest.importorskip("torch")
    from rspo_gym.training.config import PPOConfig, RSPOConfig

    assert main(["config", "--algo", "ppo"]) == 0
    out = capsys.readouterr().out
    for field in dataclasses.fields(PPOConfig):
        assert f"\n{field.name} = " in out, field.name
    assert "num_groups = 8    (int)\n    Episodes per iteration, one per task" in out
    assert "vf_coef = 0.5    (float)\n    Value-loss weight." in out
    assert "\n-- rollout\n" in out and "\n-- PPOConfig\n" in out
    assert main(["config"]) == 0  # rspo by default: every field of RSPOConfig
    out = capsys.readouterr().out
    assert all(f"\n{f.name} = " in out for f in dataclasses.fields(RSPOConfig))


def test_config_fields_inherit_the_doc_matching_their_default():
    pytest.importorskip("torch")
    from rspo_gym.training.config import RSPOConfig
    from rspo_gym.training.config_reference import config_fields

    by_name = {f.name: f for f in config_fields(RSPOConfig)}
    # RSPOConfig re-declares group_size = 4 without a doc: TrainerConfig's (default 4), not PPOConfig's (1)
    assert by_name["group_size"].default == 4 and by_name["group_size"].doc.startswith("Trajectories per task")
    assert by_name["group_size"].section == "rollout" and by_name["gamma"].section == "GiGPOConfig"
    assert all(f.doc for f in by_name.values())
