"""The memory scorer (``model="drrn-memory"``): its memory is the episode's own, its log-probs are
the distribution it sampled from, its gradients are the formula's, and seeded runs repeat."""

import pytest
import torch

import rspo_gym  # noqa: F401
from rspo_gym.algos import GRPOTrainer, RSPOTrainer
from rspo_gym.policies.action_scorer import (
    SECTIONS, ActionScorer, ActionScorerPolicy, CommandRegistry, HashingTokenizer, ScorerConfig, _Scores, listed_choices,
    listed_prompt_ids, section_bags,
)
from rspo_gym.policies.scorer_memory import FEATURES, command_key, memory_ids, split_memory
from rspo_gym.rollout.collector import CollectConfig, collect
from rspo_gym.rollout.generation import GenerationConfig
from rspo_gym.rollout.trajectory import to_batch
from rspo_gym.training.envs import make_vector_env

ENVS = ["rspo/ALFWorld-v0", "rspo/WebShop-v0"]
TAKEN_STRIDE = 1 << 32


def _memory_policy(seed: int = 1) -> ActionScorerPolicy:
    """A memory scorer away from its start: random memory weights, larger other weights, so a
    wrong feature or choice index would move the log-probs."""
    policy = ActionScorerPolicy(ScorerConfig(memory=True), seed=seed)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.mul_(5.0)
        policy.model.memory.weight.normal_(0.0, 3.0, generator=torch.Generator().manual_seed(seed))
    return policy


def _kinds(prompt_ids: list[int], buckets: int) -> list[tuple[int, int]]:
    """``(kind, command key)`` of a prompt's memory ids."""
    offset = SECTIONS * buckets
    return [((i - offset) // TAKEN_STRIDE, (i - offset) % TAKEN_STRIDE) for i in prompt_ids if i >= offset]


@pytest.mark.parametrize("env_id", ENVS)
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_memory_logprobs_equal_the_sampling_distribution(env_id, temperature):
    policy = _memory_policy()
    venv, _ = make_vector_env(env_id, 2, 3)
    config = CollectConfig(generation=GenerationConfig(temperature=temperature, seed=5), constrained=True, max_turns=6)
    rollout = collect(policy, venv, config, seed=11, row_seeds=list(range(6)))
    venv.close()
    batch = to_batch(rollout.rows, policy.pad_token_id)
    recomputed = policy.logprobs(batch, temperature=temperature)["logprobs"]
    assert len(rollout.rows) >= 24
    assert float((recomputed - batch.old_logprobs).abs().max()) < 1e-4
    assert float(batch.old_logprobs.min()) < -0.5  # real choices, not near-certain ones
    # the memory reached the scores: later rows carry memory ids, and zeroing W_m changes them
    assert sum(bool(_kinds(r.prompt_ids, policy.config.buckets)) for r in rollout.rows) >= len(rollout.rows) - 6
    with torch.no_grad():
        policy.model.memory.weight.zero_()
    assert float((policy.logprobs(batch, temperature=temperature)["logprobs"] - recomputed).abs().max()) > 1e-3


def test_memory_is_per_sub_env_and_starts_empty_each_episode():
    policy = _memory_policy()
    buckets = policy.config.buckets
    venv, _ = make_vector_env("rspo/ALFWorld-v0", 2, 2)
    config = CollectConfig(generation=GenerationConfig(temperature=1.0, seed=3), constrained=True, max_turns=5)
    for episode in range(2):  # the second collect plays new episodes in the same sub-envs
        rollout = collect(policy, venv, config, seed=20 + episode, row_seeds=[7 * episode + i for i in range(4)])
        by_traj: dict[int, list] = {}
        for row in rollout.rows:
            by_traj.setdefault(row.traj_id, []).append(row)
        assert len(by_traj) == 4
        for rows in by_traj.values():
            rows.sort(key=lambda r: r.step)
            assert _kinds(rows[0].prompt_ids, buckets) == []  # an episode's first prompt remembers nothing
            for k, row in enumerate(rows):
                kinds = _kinds(row.prompt_ids, buckets)
                taken = [key for kind, key in kinds if kind == 0]
                assert taken == [command_key(r.action) for r in rows[:k]]  # its own sub-env's commands, in order
                last = [key for kind, key in kinds if kind == 2]
                assert last == ([command_key(rows[k - 1].action)] if k else [])
    venv.close()


def test_memory_features_equal_their_definition():
    task = "put a clean mug in desk."
    history = [("You are in the room.", "go to desk 1"), ("You arrive at desk 1. On the desk 1, you see a pen 1.", "go to shelf 1"),
               ("You arrive at shelf 1. On the shelf 1, you see a mug 2.", "go to desk 1"),
               ("You arrive at desk 1. On the desk 1, you see a pen 1.", "go to shelf 1")]
    current = "You arrive at shelf 1. On the shelf 1, you see nothing."
    buckets = 16
    ids = memory_ids(task, history, current, buckets, SECTIONS)
    commands = ["go to desk 1", "go to shelf 1", "look", "take mug 2 from shelf 1"]
    pair_keys = torch.tensor([command_key(c) for c in commands]).numpy()
    rows = torch.zeros(len(ids), dtype=torch.long).numpy()
    _, kept, features = split_memory(rows, torch.tensor(ids).numpy(), SECTIONS * buckets, torch.zeros(4, dtype=torch.long).numpy(), pair_keys)
    assert len(kept) == 0 and FEATURES == ("taken", "taken_twice", "found", "last")
    # desk: taken twice, the desk's observations name no task word but "desk" (the command's own);
    # shelf: taken twice, last; found only from its first visit (the mug), which its latest visit
    # (nothing) replaced
    assert features.tolist() == [[1, 1, 0, 0], [1, 1, 0, 1], [0, 0, 0, 0], [0, 0, 0, 0]]
    history[-1:] = []  # the latest shelf visit undone: the mug is what followed the shelf's latest
    ids = memory_ids(task, history, "You arrive at desk 1. On the desk 1, you see a pen 1.", buckets, SECTIONS)
    _, _, features = split_memory(torch.zeros(len(ids), dtype=torch.long).numpy(), torch.tensor(ids).numpy(), SECTIONS * buckets,
                                  torch.zeros(4, dtype=torch.long).numpy(), pair_keys)
    assert features[1].tolist() == [1, 0, 1, 0] and features[0].tolist() == [1, 1, 0, 1]


def test_an_untrained_memory_scorer_plays_as_the_plain_one_of_its_seed():
    plain, memory = ActionScorerPolicy(seed=3), ActionScorerPolicy(ScorerConfig(memory=True), seed=3)
    assert all(torch.equal(a, b) for a, b in zip(plain.model.parameters(), memory.model.parameters()))
    assert float(memory.model.memory.weight.detach().abs().sum()) == 0.0
    venv, _ = make_vector_env("rspo/ALFWorld-v0", 2, 2)
    config = CollectConfig(generation=GenerationConfig(temperature=1.0, seed=3), constrained=True, max_turns=8)
    actions = [[r.action for r in collect(p, venv, config, seed=5, row_seeds=[1, 2, 3, 4]).rows] for p in (plain, memory)]
    venv.close()
    assert actions[0] == actions[1]


def test_the_memory_term_of_the_hand_written_backward_equals_finite_differences():
    torch.manual_seed(0)
    config = ScorerConfig(buckets=16, embed_dim=3, hidden=4, memory=True)
    model = ActionScorer(config).double()
    with torch.no_grad():
        model.memory.weight.normal_()
    tok = HashingTokenizer(16, memory=True)
    registry = CommandRegistry(tok, ["take mug 1", "look", "go to desk 1", "open fridge 1"])
    history = [("You are in the room.", "go to desk 1"), ("On the desk 1, you see a mug 1.", "look")]
    prompts = [tok.encode("go to fridge", 2), tok.encode("a mug 1", 2) + memory_ids("heat a mug.", history, "a mug 1", 16, SECTIONS),
               tok.encode("look", 2) + memory_ids("heat a mug.", history[:1], "x", 16, SECTIONS)]
    choices = listed_choices([[3, 1], [2, 0], [1, 0, 2]])
    rows, ids = listed_prompt_ids(prompts)
    rows, ids, features = split_memory(rows, ids, SECTIONS * 16, choices.rows.numpy(), registry.keys(choices.distinct)[choices.commands.numpy()])
    assert float(features.sum()) >= 4  # taken, found (the mug after the desk), last
    sections = section_bags(rows, ids, len(prompts), 16)
    bags = sections.join(registry.bags(choices.distinct))
    weights = tuple(model.parameters())
    assert len(weights) == 10

    def scores(*params):
        table, state = _Scores.apply(*params[:9], bags, len(sections.counts), choices, params[9], features.double())
        return table.clamp(min=-1e9), state

    assert torch.autograd.gradcheck(scores, weights)


@pytest.mark.parametrize("cls,extra", [(GRPOTrainer, {}), (RSPOTrainer, {"base": "grpo", "swap": "explorer", "explorer_group_size": 1})])
def test_seeded_memory_runs_are_bit_identical(cls, extra, tmp_path):
    def run(folder):
        trainer = cls("rspo/ALFWorld-v0", model="drrn-memory", num_groups=2, group_size=2, max_turns=6, eval_every=0, progress=False,
                      seed=4, learning_rate=1e-2, output_dir=str(tmp_path / folder), checkpoint_every=0, **extra)
        history = trainer.learn(3)
        weights = [p.detach().clone() for p in trainer.policy.parameters()]
        trainer.close()
        return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in history], weights

    (h1, w1), (h2, w2) = run("a"), run("b")
    assert h1 == h2
    assert all(torch.equal(a, b) for a, b in zip(w1, w2))
    assert float(w1[-1].abs().sum()) > 0  # the memory weights moved from zero


def test_a_memory_policy_saves_and_loads_as_one(tmp_path):
    policy = _memory_policy(seed=2)
    policy.commands.ids(["look", "go to desk 1"])
    policy.save(tmp_path / "p")
    loaded = ActionScorerPolicy.load(tmp_path / "p")
    assert loaded.config.memory and loaded.tokenizer.memory is not None
    assert all(torch.equal(a, b) for a, b in zip(policy.model.parameters(), loaded.model.parameters()))
