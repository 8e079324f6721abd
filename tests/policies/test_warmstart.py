import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from rspo_gym.rollout.generation import GenerationConfig, GenerationOutput  # noqa: E402
from rspo_gym.policies.hf_backend import eos_token_ids  # noqa: E402
from rspo_gym.policies.llm import LLMPolicy  # noqa: E402
from rspo_gym.policies.models import load_model  # noqa: E402
from rspo_gym.policies.warmstart import (  # noqa: E402
    WarmStartConfig,
    behaviour_clone,
    expert_demonstrations,
    warm_start,
)
from rspo_gym.rollout.collector import CollectConfig, collect  # noqa: E402
from rspo_gym.rollout.prompts import ALFWORLD as ALFWORLD_TEMPLATE, PromptBuilder  # noqa: E402
from rspo_gym.rollout.trajectory import to_batch  # noqa: E402
from rspo_gym.rollout.vector import GroupedVectorEnv  # noqa: E402

ALFWORLD = "rspo/ALFWorld-v0"


def _policy(seed: int = 0) -> LLMPolicy:
    model, tokenizer = load_model("tiny", seed=seed, device="cpu")
    return LLMPolicy(model, tokenizer, micro_batch_size=4)


@pytest.fixture(scope="module")
def tokenizer():
    return _policy().tokenizer


class _Replay:
    """Stand-in policy replying with the recorded expert actions, in order (one env)."""

    def __init__(self, tokenizer, actions):
        self.tokenizer, self.actions, self.prompts = tokenizer, list(actions), []

    def generate(self, prompt_ids, config, allowed=None):
        self.prompts += [list(p) for p in prompt_ids]
        text = self.actions[len(self.prompts) - 1]
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return GenerationOutput([text], [ids], [[0.0] * len(ids)])


@pytest.mark.parametrize("env_id", [ALFWORLD, "rspo/WebShop-v0"])
def test_demonstration_prompts_are_the_collectors(tokenizer, env_id):
    policy = _policy()
    end = eos_token_ids(policy.model, tokenizer)[0]
    rows = expert_demonstrations(env_id, 1, tokenizer, end, seed=3)
    assert rows and all(r.source == "expert" and r.traj_id == 0 for r in rows)
    assert [r.step for r in rows] == list(range(len(rows)))
    assert all(r.response_ids[-1] == end and len(r.logprobs) == len(r.response_ids) for r in rows)
    assert tokenizer.convert_ids_to_tokens(end) == "<|im_end|>"

    replay = _Replay(tokenizer, [r.action for r in rows])
    venv = GroupedVectorEnv(env_id, num_groups=1, group_size=1)
    rollout = collect(replay, venv, CollectConfig(), seed=3)
    venv.close()
    assert replay.prompts == [r.prompt_ids for r in rows]
    assert [r.response_ids for r in rollout.rows] == [r.response_ids[:-1] for r in rows]
    assert rollout.trajectories[0].outcome == sum(r.reward for r in rows) > 0


def test_task_type_filter_and_history_length(tokenizer):
    builder = PromptBuilder(ALFWORLD_TEMPLATE, history_length=1)
    rows = expert_demonstrations(
        ALFWORLD, 2, tokenizer, 3, builder=builder, task_types=["pick_and_place_simple"]
    )
    assert {r.traj_id for r in rows} == {0, 1}
    text = tokenizer.decode(rows[-1].prompt_ids)
    assert "put" in text and "Below are the most recent 1 observations" in text


@pytest.mark.slow
def test_behaviour_clone_lowers_the_loss_and_is_deterministic(tokenizer):
    rows = expert_demonstrations(ALFWORLD, 2, tokenizer, 3, seed=0)[:12]
    results = []
    for _ in range(2):
        policy = _policy()
        history = behaviour_clone(policy, rows, epochs=4, lr=3e-3, batch_size=4, seed=1)
        results.append((history, policy.logprobs(to_batch(rows, policy.pad_token_id))["logprobs"]))
    (history, logprobs), (history2, logprobs2) = results
    losses = [h["loss"] for h in history]
    assert losses[-1] < 0.7 * losses[0]
    assert losses == [h["loss"] for h in history2]
    assert torch.equal(logprobs, logprobs2)
    assert not policy.model.training


def test_warm_start_then_collect_with_constraints():
    policy = _policy()
    config = WarmStartConfig(episodes=1, epochs=1, batch_size=8)
    history = warm_start(policy, ALFWORLD, config)
    assert len(history) == 1 and history[0]["rows"] > 0 and history[0]["loss"] > 0
    venv = GroupedVectorEnv(ALFWORLD, num_groups=2, group_size=1, env_kwargs={"split": "valid_seen"})
    rollout = collect(
        policy,
        venv,
        CollectConfig(generation=GenerationConfig(temperature=0), constrained=True, max_turns=2),
        task_ids=[0, 1],
    )
    venv.close()
    assert all(r.valid for r in rollout.rows)


def test_cosine_schedule_warms_up_and_decays_to_zero(tokenizer):
    rows = expert_demonstrations(ALFWORLD, 1, tokenizer, 3, seed=0)[:8]
    policy = _policy()
    history = behaviour_clone(
        policy, rows, epochs=2, lr=1e-3, batch_size=4, seed=0, warmup_steps=2, schedule="cosine"
    )
    assert [h["epoch"] for h in history] == [0, 1]
    assert 0 < history[0]["lr"] < 1e-3 and history[-1]["lr"] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError):
        behaviour_clone(policy, rows, epochs=1, lr=1e-3, batch_size=4, seed=0, schedule="linear")


def _nested(rows) -> bool:
    return all(b.prompt_ids[:len(a.prompt_ids) + len(a.response_ids)] == a.prompt_ids + a.response_ids for a, b in zip(rows, rows[1:]))


def test_conversation_demonstrations_with_detours_stay_nested_and_constrained(tokenizer):
    """Detours' steps are left out and each episode's rows still nest (one packed pass);
    constrained targets carry the ids constrained decoding would allow."""
    end = eos_token_ids(_policy().model, tokenizer)[0]
    kwargs = dict(prompt_format="conversation", env_kwargs={"split": "train"}, task_types=["pick_and_place_simple"], seed=0)
    plain = expert_demonstrations(ALFWORLD, 4, tokenizer, end, **kwargs)
    detoured = expert_demonstrations(ALFWORLD, 4, tokenizer, end, explore=0.3, constrained=True, **kwargs)
    for rows in (plain, detoured):
        for episode in range(4):
            assert _nested([r for r in rows if r.traj_id == episode])
    steps = [[r.step for r in rows if r.traj_id == episode] for rows in (plain, detoured) for episode in range(4)]
    assert all(s == list(range(len(s))) for s in steps[:4])  # the expert alone: every step is a row
    assert any(s != list(range(len(s))) for s in steps[4:])  # detours' own steps are left out
    assert sum(1 for r in detoured if r.allowed_token_ids is not None) > 0.9 * len(detoured)
    assert all(r.allowed_token_ids is None for r in plain)
    for row in (r for r in detoured if r.allowed_token_ids is not None):  # the expert's own step, its reply allowed
        assert tokenizer.decode(row.response_ids, skip_special_tokens=True) == row.action
        assert len(row.allowed_token_ids) == len(row.response_ids)
        assert all(token in ids and ids == sorted(ids) for token, ids in zip(row.response_ids, row.allowed_token_ids))
