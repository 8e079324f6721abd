"""Bounded prompt lengths: history goes oldest-first, the rest always stays, overflow is an error."""

import pytest

import rspo_gym  # noqa: F401
from rspo_gym.training.trainer import Trainer
from rspo_gym.rollout.generation import GenerationConfig, GenerationOutput
from rspo_gym.rollout.collector import CollectConfig, collect
from rspo_gym.rollout.prompts import ALFWORLD, PromptBuilder
from rspo_gym.rollout.vector import GroupedVectorEnv

pytest.importorskip("transformers")

ENV = "rspo/ALFWorld-v0"
SEED = 3


@pytest.fixture(scope="module")
def policy():
    from rspo_gym.policies.llm import load_policy

    return load_policy("tiny", device="cpu")


def _config(max_prompt_length: int | None) -> CollectConfig:
    generation = GenerationConfig(max_new_tokens=12, temperature=1.0, seed=0)
    return CollectConfig(
        generation=generation, constrained=True, history_length=50, max_turns=8, max_prompt_length=max_prompt_length
    )


def _rollout(policy, max_prompt_length: int | None):
    venv = GroupedVectorEnv(ENV, num_groups=1, group_size=2)
    try:
        return collect(policy, venv, _config(max_prompt_length), seed=SEED)
    finally:
        venv.close()


@pytest.fixture(scope="module")
def episodes(policy):
    """The tiny model's ALFWorld episodes (constrained, seeded) with unlimited prompts."""
    return _rollout(policy, None)


class _Replay:
    """A stand-in policy replaying a rollout's actions turn by turn: the same episodes, any prompts."""

    def __init__(self, tokenizer, rollout):
        self.tokenizer, self.rollout, self.calls = tokenizer, rollout, []

    def generate(self, prompt_ids, config, allowed=None):
        turn = len(self.calls)
        self.calls.append(len(prompt_ids))
        texts = [r.action for r in sorted(self.rollout.rows, key=lambda r: r.traj_id) if r.step == turn]
        assert len(texts) == len(prompt_ids)
        ids = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        return GenerationOutput(texts, ids, [[0.0] * len(i) for i in ids])


def _parts(text: str) -> tuple[str, int, list[str], str]:
    """A decoded later-step prompt as (the head with the task, the shown count, the history
    entries, the tail with the current observation and the admissible actions)."""
    head, rest = text.split(" Below are the most recent ", 1)
    count, rest = rest.split(" observations and the corresponding actions you took: ", 1)
    history, tail = rest.split("\nYou are now at step", 1)
    return head, int(count), history.split("\n[Observation ")[1:], tail


def test_long_history_is_dropped_oldest_first_and_the_rest_is_kept(policy, episodes):
    limit = 350
    assert max(len(r.prompt_ids) for r in episodes.rows) > limit
    rollout = _rollout(_Replay(policy.tokenizer, episodes), limit)
    assert [(r.traj_id, r.step, r.action) for r in rollout.rows] == [(r.traj_id, r.step, r.action) for r in episodes.rows]
    tasks = {t.traj_id: t.task for t in episodes.trajectories}
    truncated = {t.traj_id: 0 for t in episodes.trajectories}
    dropped = dict(truncated)
    for full, cut in zip(episodes.rows, rollout.rows):
        assert len(cut.prompt_ids) <= limit
        if cut.prompt_ids == full.prompt_ids:
            continue
        head, count, history, tail = _parts(policy.tokenizer.decode(full.prompt_ids))
        cut_head, cut_count, cut_history, cut_tail = _parts(policy.tokenizer.decode(cut.prompt_ids))
        assert f"Your task is to: {tasks[cut.traj_id]}" in cut_head and cut_head == head
        assert cut_tail == tail  # the current observation, every admissible action, the instruction
        assert "Your admissible actions of the current situation are: [" in cut_tail
        assert cut_count == len(cut_history) < count == len(history) == cut.step
        assert cut_history == history[count - cut_count:]  # the most recent entries: the oldest went
        truncated[cut.traj_id] += 1
        dropped[cut.traj_id] += count - cut_count
    assert sum(truncated.values()) > 0
    assert {t.traj_id: t.truncated_prompts for t in rollout.trajectories} == truncated
    assert {t.traj_id: t.dropped_history for t in rollout.trajectories} == dropped
    metrics = Trainer.rollout_metrics(rollout)
    assert metrics["rollout/truncated_prompts"] == pytest.approx(sum(truncated.values()) / len(rollout.rows))
    assert Trainer.rollout_metrics(episodes)["rollout/truncated_prompts"] == 0.0


def test_prompts_that_fit_are_untouched(policy, episodes):
    limit = max(len(r.prompt_ids) for r in episodes.rows)  # the longest prompt fits exactly
    rollout = _rollout(_Replay(policy.tokenizer, episodes), limit)
    assert [r.prompt_ids for r in rollout.rows] == [r.prompt_ids for r in episodes.rows]
    assert all(t.truncated_prompts == 0 and t.dropped_history == 0 for t in rollout.trajectories)


def test_fitted_ids_keep_the_most_recent_entries_that_fit(policy):
    tokenizer = policy.tokenizer
    history = [(f"You arrive at drawer {k}. On the drawer {k}, you see nothing.", f"go to drawer {k}") for k in range(1, 9)]
    args = ("put a mug in desk.", "You arrive at desk 1.", ["look", "go to desk 1", "take mug 1 from desk 1"], history)

    def length(keep: int) -> int:
        builder = PromptBuilder(ALFWORLD, history_length=keep)
        return len(builder.chat_ids(tokenizer, builder.build(*args)))

    lengths = [length(k) for k in range(7)]
    assert lengths == sorted(set(lengths))
    builder = PromptBuilder(ALFWORLD, history_length=6)
    for limit in range(lengths[0], lengths[-1] + 2):
        fitted = builder.fitted_ids(tokenizer, *args, max_length=limit)
        kept = max(k for k in range(7) if lengths[k] <= limit)  # brute force
        assert fitted.dropped == 6 - kept and len(fitted.ids) == lengths[kept]
    assert builder.fitted_ids(tokenizer, *args).dropped == 0  # no limit
    overflow = builder.fitted_ids(tokenizer, *args, max_length=lengths[0] - 1)
    assert len(overflow.ids) == lengths[0] and overflow.dropped == 6  # the caller decides it is an error


class _Recorder:
    """A stand-in policy that records its generation calls."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, []

    def generate(self, prompt_ids, config, allowed=None):
        self.calls.append(len(prompt_ids))
        return GenerationOutput(["look"] * len(prompt_ids), [[0]] * len(prompt_ids), [[0.0]] * len(prompt_ids))


def test_a_prompt_too_long_without_history_fails_before_generation(policy):
    recorder = _Recorder(policy.tokenizer)
    venv = GroupedVectorEnv(ENV, num_groups=1, group_size=2)
    observations, _ = venv.reset(seed=SEED)
    info = venv.infos[0]
    builder = PromptBuilder(ALFWORLD, history_length=50)
    length = len(builder.chat_ids(policy.tokenizer, builder.build(info["task"], observations[0], info["admissible_actions"])))
    limit = length - 1
    message = rf"env 0: the prompt is {length} tokens .* max_prompt_length={limit}; raise max_prompt_length or shorten the observation"
    with pytest.raises(ValueError, match=message):
        collect(recorder, venv, _config(limit), seed=SEED)
    assert recorder.calls == []
    venv.close()
