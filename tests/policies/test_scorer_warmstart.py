"""The fast policy's expert clone: which tasks it demonstrates."""

import gymnasium as gym
import pytest

pytest.importorskip("torch")

from rspo_gym.policies.action_scorer import ActionScorerPolicy  # noqa: E402
from rspo_gym.policies.scorer_warmstart import expert_choices  # noqa: E402

ALFWORLD = "rspo/ALFWorld-v0"


def _first_observation(task_id: int) -> str:
    env = gym.make(ALFWORLD)
    try:
        observation, _ = env.reset(seed=0, options={"task_id": task_id})
    finally:
        env.close()
    return observation


def test_given_task_ids_the_expert_episodes_play_them_in_turn():
    rows = expert_choices(ActionScorerPolicy(seed=0), ALFWORLD, 3, seed=7, task_ids=[5, 9])
    openings = [row.anchor for row in rows if row.step == 0]
    assert openings == [_first_observation(5), _first_observation(9), _first_observation(5)]


def test_without_task_ids_the_reset_seeds_draw_the_tasks():
    rows = expert_choices(ActionScorerPolicy(seed=0), ALFWORLD, 2, seed=7)
    env = gym.make(ALFWORLD)
    try:
        drawn = [env.reset(seed=7 + episode)[0] for episode in range(2)]
    finally:
        env.close()
    assert [row.anchor for row in rows if row.step == 0] == drawn


class _Crafted:
    """A class a weights-only read refuses to build (a crafted cache would name ``os.system``)."""


def _another_policys(path):
    import torch

    torch.save({"model": {"nothing": torch.zeros(1)}, "commands": []}, path)


@pytest.mark.parametrize("spoil", [
    lambda path: path.write_bytes(b"not a torch file at all"),
    lambda path: path.write_bytes(b"junk"),  # torch's legacy reader: a struct.error
    lambda path: path.write_bytes(path.read_bytes()[:200]),  # cut short
    lambda path: __import__("torch").save({"model": _Crafted()}, path),
    _another_policys,
], ids=["garbage", "four-bytes", "cut-short", "crafted", "another-policy"])
def test_a_bad_clone_cache_is_named_in_one_line_and_made_again(tmp_path, capsys, spoil):
    import torch

    from rspo_gym.policies.scorer_warmstart import partial_clone

    cache = tmp_path / "clones" / "ALFWorld-v0-seed0.pt"
    fresh = ActionScorerPolicy(seed=0)
    partial_clone(fresh, ALFWORLD, 1, 1, seed=0, history_length=2, cache=cache)
    expected = {k: v.clone() for k, v in fresh.model.state_dict().items()}
    spoil(cache)
    capsys.readouterr()
    policy = ActionScorerPolicy(seed=0)
    partial_clone(policy, ALFWORLD, 1, 1, seed=0, history_length=2, cache=cache)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: the cached clone {cache} ") and err[0].endswith(": cloning again")
    assert all(torch.equal(v, expected[k]) for k, v in policy.model.state_dict().items())  # the same seeded clone
    again = ActionScorerPolicy(seed=0)
    partial_clone(again, ALFWORLD, 1, 1, seed=0, history_length=2, cache=cache)  # the cache was replaced: read, silently
    assert capsys.readouterr().err == "" and all(torch.equal(v, expected[k]) for k, v in again.model.state_dict().items())
