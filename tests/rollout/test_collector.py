import random

import gymnasium as gym
import pytest
import torch

import rspo_gym  # noqa: F401
from rspo_gym.rollout.generation import GenerationConfig, GenerationOutput
from rspo_gym.rollout.adapters import DiscreteTextAdapter
from rspo_gym.rollout.collector import CollectConfig, collect, constrained_choices, turn_row_seeds
from rspo_gym.rollout.trajectory import to_batch
from rspo_gym.rollout.vector import GroupedVectorEnv

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def policy():
    from rspo_gym.policies.llm import LLMPolicy
    from rspo_gym.policies.models import load_model

    model, tokenizer = load_model("tiny", seed=0)
    return LLMPolicy(model, tokenizer)


def _check_rollout(rollout, venv, group_size):
    by_group = {}
    for t in rollout.trajectories:
        by_group.setdefault(t.group_id, set()).add(t.task_id)
    assert len(by_group) == venv.num_groups and all(len(ids) == 1 for ids in by_group.values())
    for t in rollout.trajectories:
        rows = [r for r in rollout.rows if r.traj_id == t.traj_id]
        assert [r.step for r in rows] == list(range(t.length))
        assert all(r.group_id == t.group_id for r in rows)
    # rows of one trajectory are contiguous
    seen, last = set(), None
    for row in rollout.rows:
        if row.traj_id != last:
            assert row.traj_id not in seen
            seen.add(row.traj_id)
            last = row.traj_id


@pytest.mark.parametrize("env_id", ["rspo/ALFWorld-v0", pytest.param("rspo/WebShop-v0", marks=pytest.mark.slow)])
def test_grouped_rollout_is_aligned_and_logprobs_match_teacher_forcing(policy, env_id):
    venv = GroupedVectorEnv(env_id, num_groups=8, group_size=4)
    config = CollectConfig(generation=GenerationConfig(max_new_tokens=24, temperature=1.0, seed=0), constrained=True, max_turns=3)
    rollout = collect(policy, venv, config, seed=100)
    _check_rollout(rollout, venv, 4)
    assert len(rollout.trajectories) == 32 and len(rollout.rows) == 32 * 3
    assert all(r.valid for r in rollout.rows)  # constrained replies are admissible actions
    batch = to_batch(rollout.rows, policy.pad_token_id)
    recomputed = policy.logprobs(batch)["logprobs"]
    diff = ((recomputed - batch.old_logprobs) * batch.response_mask).abs().max().item()
    assert diff < 1e-4
    venv.close()


class _Scripted:
    """Replies with a fixed action per env index in call order (stand-in for a model)."""

    def __init__(self, tokenizer, replies):
        self.tokenizer, self.replies, self.calls = tokenizer, replies, []

    def generate(self, prompt_ids, config, allowed=None):
        self.calls.append(len(prompt_ids))
        texts = [self.replies[len(self.calls) - 1]] * len(prompt_ids)
        ids = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        return GenerationOutput(texts, ids, [[0.0] * len(i) for i in ids])


def test_frozen_lake_through_the_adapter_masks_finished_members(policy):
    venv = GroupedVectorEnv(lambda: DiscreteTextAdapter(gym.make("FrozenLake-v1", is_slippery=False)), 2, 2)
    # "left" at the start is a no-op move; "down" twice then "right" reaches a hole at (2,2)? no:
    # the deterministic 4x4 map: S F F F / F H F H / F F F H / H F F G
    scripted = _Scripted(policy.tokenizer, ["right", "down", "jump", "down"])
    rollout = collect(scripted, venv, CollectConfig(max_turns=10), seed=0)
    # right -> (1,2); down -> (2,2) is a hole: every env ends after 2 steps
    assert scripted.calls == [4, 4]
    assert [t.length for t in rollout.trajectories] == [2, 2, 2, 2]
    assert not any(t.won for t in rollout.trajectories)
    assert venv.active.tolist() == [False] * 4
    venv.close()


def test_frozen_lake_collect_with_the_tiny_model(policy):
    venv = GroupedVectorEnv(lambda: DiscreteTextAdapter(gym.make("FrozenLake-v1")), 2, 3)
    rollout = collect(policy, venv, CollectConfig(generation=GenerationConfig(max_new_tokens=4), constrained=True, max_turns=6), seed=1)
    _check_rollout(rollout, venv, 3)
    assert all(r.action in {"left", "down", "right", "up"} for r in rollout.rows)
    venv.close()


def test_constrained_choices_make_webshop_search_concrete():
    assert constrained_choices(["search[<your query>]", "help"], " red shoes ") == ["search[red shoes]"]
    assert constrained_choices(["look", "help", "go to desk 1"], "t") == ["look", "go to desk 1"]


def test_turn_seeds_are_numpys_seed_sequence_of_the_row_seed_and_turn():
    import numpy as np

    seeds = [int(s) for s in np.random.default_rng(0).integers(0, 2**32, 50)] + [0, 2**32 - 1, 2**32, 2**70 + 3]
    table = turn_row_seeds(seeds, 7)
    assert table.shape == (len(seeds), 7)
    assert table.tolist() == [[int(np.random.SeedSequence([s, t]).generate_state(1)[0]) for t in range(7)] for s in seeds]


def test_merged_rollouts_need_distinct_trajectory_ids(policy):
    venv = GroupedVectorEnv(lambda: DiscreteTextAdapter(gym.make("FrozenLake-v1")), 1, 2)
    config = CollectConfig(generation=GenerationConfig(max_new_tokens=4), constrained=True, max_turns=2)
    a = collect(policy, venv, config, seed=0)
    b = collect(policy, venv, config, seed=0, source="explorer", traj_offset=2)
    merged = a.extend(b)
    assert len(merged.trajectories) == 4 and set(merged.rows_of("explorer")) == set(range(len(a.rows), len(merged.rows)))
    with pytest.raises(ValueError, match="collide"):
        a.extend(a)
    venv.close()


def test_to_batch_layout():
    from rspo_gym.rollout.trajectory import StepRow

    rows = [
        StepRow([1, 2, 3], [7, 8], [-0.5, -0.25], 0.0, 0.0, "o", True, True, 0, 0, 0, "a"),
        StepRow([4], [9], [-1.0], 1.0, 0.0, "o", True, True, 0, 0, 1, "b"),
    ]
    batch = to_batch(rows, pad_token_id=0)
    assert batch.prompt_length == 3
    assert batch.input_ids.tolist() == [[1, 2, 3, 7, 8], [0, 0, 4, 9, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1], [0, 0, 1, 1, 0]]
    assert batch.response_mask.tolist() == [[1, 1], [1, 0]]
    assert torch.equal(batch.old_logprobs, torch.tensor([[-0.5, -0.25], [-1.0, 0.0]]))



def _row_by_row_batch(rows, pad_token_id):
    """``to_batch``'s layout written the plain way, one row at a time (the reference)."""
    P = max(len(r.prompt_ids) for r in rows)
    R = max(max(len(r.response_ids) for r in rows), 1)
    input_ids = torch.full((len(rows), P + R), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(rows), P + R), dtype=torch.long)
    response_mask, old = torch.zeros((len(rows), R)), torch.zeros((len(rows), R))
    constrained = [r.allowed_token_ids for r in rows if r.allowed_token_ids is not None]
    K = max((len(ids) for per_position in constrained for ids in per_position), default=1)
    allowed = torch.full((len(rows), R, K), -1, dtype=torch.long)
    for b, row in enumerate(rows):
        p, r = len(row.prompt_ids), len(row.response_ids)
        input_ids[b, P - p:P] = torch.tensor(row.prompt_ids, dtype=torch.long)
        attention[b, P - p:P + r] = 1
        input_ids[b, P:P + r] = torch.tensor(row.response_ids, dtype=torch.long)
        response_mask[b, :r] = 1.0
        old[b, :r] = torch.tensor(row.logprobs, dtype=torch.float32)
        for t, ids in enumerate(row.allowed_token_ids or []):
            allowed[b, t, :len(ids)] = torch.tensor(ids, dtype=torch.long)
    return input_ids, attention, response_mask, old, (allowed if constrained else None)


def test_to_batch_equals_the_row_by_row_layout_on_ragged_rows():
    from rspo_gym.rollout.trajectory import StepRow

    rng = random.Random(0)

    def row(constrained):
        response = [rng.randrange(1, 99) for _ in range(rng.randrange(0, 4))]
        allowed = [[rng.randrange(0, 99) for _ in range(rng.randrange(0, 5))] for _ in response] if constrained else None
        return StepRow([rng.randrange(1, 99) for _ in range(rng.randrange(0, 9))], response, [rng.random() for _ in response],
                       0.0, 0.0, "o", True, True, 0, 0, 0, "a", allowed_token_ids=allowed)

    for constrained in ([False] * 6, [True] * 6, [True, False] * 3):
        rows = [row(c) for c in constrained]
        batch = to_batch(rows, pad_token_id=5)
        *tensors, allowed = _row_by_row_batch(rows, 5)
        assert all(torch.equal(a, b) for a, b in zip((batch.input_ids, batch.attention_mask, batch.response_mask, batch.old_logprobs), tensors))
        assert (batch.allowed is None and allowed is None) or torch.equal(batch.allowed, allowed)

def test_deadline_stops_a_rollout_between_turns(policy):
    import time

    from rspo_gym.rollout.collector import CollectionDeadline

    venv = GroupedVectorEnv(lambda: DiscreteTextAdapter(gym.make("FrozenLake-v1", is_slippery=False)), 1, 2)
    deadline = time.perf_counter() + 0.05

    class _PastTheDeadline(_Scripted):
        def generate(self, prompt_ids, config, allowed=None):
            while time.perf_counter() <= deadline:  # the first turn outlasts the deadline
                time.sleep(0.01)
            return super().generate(prompt_ids, config, allowed)

    scripted = _PastTheDeadline(policy.tokenizer, ["right", "right", "down", "down"])
    with pytest.raises(CollectionDeadline, match="before turn 2"):
        collect(scripted, venv, CollectConfig(max_turns=10, deadline=deadline), seed=0)
    assert scripted.calls == [2]  # one turn played, none started after the deadline
    unbounded = _Scripted(policy.tokenizer, ["right", "right", "down", "down", "down", "right"])
    assert len(collect(unbounded, venv, CollectConfig(max_turns=6), seed=0).rows) > 2  # no deadline: plays on
    venv.close()
