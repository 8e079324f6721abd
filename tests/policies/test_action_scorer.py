"""The fast action-scoring policy (``model="drrn"``) through the shared collector and trainers."""

import math

import pytest
import torch

import rspo_gym  # noqa: F401
from rspo_gym.algos import GiGPOTrainer, GRPOTrainer, PPOTrainer, RSPOTrainer
from rspo_gym.training.envs import make_vector_env
from rspo_gym.policies.action_scorer import ActionScorerPolicy, HashingTokenizer, padded_choices, padded_section_bags
from rspo_gym.rollout.generation import GenerationConfig
from rspo_gym.rollout.collector import CollectConfig, collect
from rspo_gym.rollout.trajectory import to_batch

ENVS = ["rspo/ALFWorld-v0", "rspo/WebShop-v0"]
SMALL = dict(iterations=1, num_groups=2, group_size=2, max_turns=3, eval_every=1, eval_tasks=2, progress=False)
TRAINERS = [
    (GRPOTrainer, {}),
    (GiGPOTrainer, {"reward": "dense"}),
    (PPOTrainer, {"num_groups": 2, "group_size": 1}),
    (RSPOTrainer, {"base": "grpo", "swap": "explorer", "explorer_group_size": 1}),
    (RSPOTrainer, {"base": "ppo", "swap": "explorer", "explorer_group_size": 1}),
    (RSPOTrainer, {"base": "gigpo", "swap": "explorer", "explorer_group_size": 1}),
    (RSPOTrainer, {"base": "grpo", "swap": "rank"}),
    (RSPOTrainer, {"base": "gigpo", "swap": "anneal"}),
]


def _weights(policy):
    return [p.detach().clone() for p in policy.parameters()]


@pytest.mark.parametrize("env_id", ENVS)
@pytest.mark.parametrize("cls,extra", TRAINERS, ids=lambda v: v.__name__ if isinstance(v, type) else "-".join(f"{k}={x}" for k, x in v.items()))
def test_every_trainer_trains_the_fast_policy(env_id, cls, extra, tmp_path):
    trainer = cls(env_id, model="drrn", output_dir=str(tmp_path), learning_rate=1e-2, **{**SMALL, **extra})
    assert isinstance(trainer.policy, ActionScorerPolicy)
    before = _weights(trainer.policy)
    (row,) = trainer.learn()
    assert all(torch.isfinite(torch.tensor(v)) for k, v in row.items() if k.startswith(("train/", "explorer/")))
    assert 0.0 <= row["eval/success"] <= 1.0
    assert any(not torch.equal(a, b) for a, b in zip(before, _weights(trainer.policy)))
    if trainer.needs_values:
        assert "train/value_loss" in row and trainer.policy.value_head is not None
    if getattr(trainer, "explorer", None) is not None:
        assert trainer.explorer.commands is trainer.policy.commands  # merged batches share command ids
        assert row["explorer/replayed_rows"] > 0 and "explorer/pg_loss" in row
    assert (tmp_path / "policy" / "action_scorer.pt").is_file()
    trainer.close()


@pytest.mark.parametrize("env_id", ENVS)
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_behaviour_logprobs_equal_recomputed_ones(env_id, temperature):
    policy = ActionScorerPolicy(seed=1)
    with torch.no_grad():  # away from the near-uniform start, so a wrong choice index would show
        for p in policy.parameters():
            p.mul_(5.0)
    venv, _ = make_vector_env(env_id, 2, 3)
    config = CollectConfig(generation=GenerationConfig(temperature=temperature, seed=5), constrained=True, max_turns=4)
    rollout = collect(policy, venv, config, seed=11)
    batch = to_batch(rollout.rows, policy.pad_token_id)
    recomputed = policy.logprobs(batch, temperature=temperature)["logprobs"]
    assert len(rollout.rows) >= 12
    assert float((recomputed - batch.old_logprobs).abs().max()) < 1e-4  # float32 sums of other batch shapes
    assert float(batch.old_logprobs.min()) < -0.5  # real choices, not near-certain ones
    venv.close()


def test_a_short_seeded_run_beats_a_random_policy_on_a_fixed_task_set(tmp_path):
    # WebShop's purchase score (its success needs every attribute, option and the price right,
    # which four goals' worth of episodes do not reach): the uniform policy scores 0.06 here
    tasks = [0, 1, 2, 3]
    common = dict(model="drrn", num_groups=4, group_size=4, train_task_ids=tasks, eval_task_ids=tasks * 4, eval_split="train",
                  env_kwargs={"split": "train"}, eval_temperature=1.0, eval_every=0, learning_rate=3e-3, seed=0,
                  max_turns=8, progress=False)
    trained = GRPOTrainer("rspo/WebShop-v0", output_dir=str(tmp_path / "trained"), **common)
    uniform = GRPOTrainer("rspo/WebShop-v0", output_dir=str(tmp_path / "uniform"), **common)
    with torch.no_grad():  # a zero last layer scores every command alike: the uniform random policy
        uniform.policy.model.scorer[-1].weight.zero_()
        uniform.policy.model.scorer[-1].bias.zero_()
    random_score = uniform.evaluate()["eval/score"]
    trained.learn(6)
    trained_score = trained.evaluate()["eval/score"]
    assert trained_score >= random_score + 0.15, (random_score, trained_score)
    trained.close()
    uniform.close()


def test_save_load_and_copies_keep_weights_and_command_ids(tmp_path):
    policy = ActionScorerPolicy(value_head=True, seed=2)
    ids = [policy.commands.id(text) for text in ("go to fridge 1", "take apple 1 from fridge 1")]
    explorer = policy.copy(seed=3)
    assert explorer.commands is policy.commands and explorer.value_head is not policy.value_head
    assert explorer.commands.id("open fridge 1") == 2 and policy.commands.texts[2] == "open fridge 1"
    policy.save(tmp_path)
    loaded = ActionScorerPolicy.load(tmp_path)
    assert loaded.commands.texts[:2] == ["go to fridge 1", "take apple 1 from fridge 1"] and ids == [0, 1]
    for a, b in zip(policy.parameters(), loaded.parameters()):
        assert torch.equal(a, b)
    other = ActionScorerPolicy()
    other.commands.id("look")
    with pytest.raises(ValueError, match="command ids disagree"):
        other.load_state_dict(policy.state_dict())


def test_a_trainer_loads_a_saved_policy_folder_with_the_head_it_needs(tmp_path):
    """A drrn run's ``policy/`` is a model a trainer takes (``rspo-gym eval --model runs/<run>``);
    PPO adds the value head a GRPO run did not save, GRPO leaves a saved one out."""
    saved = ActionScorerPolicy(seed=4)
    saved.commands.id("look")
    saved.save(tmp_path / "policy")
    ppo = PPOTrainer("rspo/ALFWorld-v0", model=tmp_path / "policy", num_groups=1, progress=False)
    assert ppo.policy.value_head is not None and ppo.policy.commands.texts == ["look"]
    assert all(torch.equal(a, b) for a, b in zip(saved.policy_parameters(), ppo.policy.policy_parameters()))
    ppo.policy.save(tmp_path / "ppo")
    grpo = GRPOTrainer("rspo/ALFWorld-v0", model=str(tmp_path / "ppo"), num_groups=1, progress=False)
    assert grpo.policy.value_head is None
    ppo.close()
    grpo.close()


def test_settings_the_fast_policy_cannot_use_are_refused():
    with pytest.raises(ValueError, match="constrained=True"):
        GRPOTrainer("rspo/ALFWorld-v0", model="drrn", constrained=False, progress=False)
    with pytest.raises(ValueError, match="value_head=True"):
        PPOTrainer("rspo/ALFWorld-v0", model=ActionScorerPolicy(), progress=False)
    with pytest.raises(ValueError, match="constrained=True"):
        ActionScorerPolicy().generate([[1, 2]], GenerationConfig(), None)


def test_a_kl_reference_is_a_frozen_copy_that_stays_put(tmp_path):
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="drrn", kl_coef=0.1, learning_rate=1e-2, output_dir=str(tmp_path), **SMALL)
    frozen = _weights(trainer.reference)
    assert all(not p.requires_grad for p in trainer.reference.parameters())
    assert trainer.reference.commands is trainer.policy.commands
    (row,) = trainer.learn()
    assert "train/kl" in row
    assert all(torch.equal(a, b) for a, b in zip(frozen, _weights(trainer.reference)))
    trainer.close()


def test_reset_reference_anchors_the_kl_at_weights_loaded_after_the_trainer_was_built(tmp_path):
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="drrn", kl_coef=0.1, output_dir=str(tmp_path), **SMALL)
    with torch.no_grad():  # a warm start loaded by hand, as partial_clone(trainer.policy, ...) does
        for parameter in trainer.policy.parameters():
            parameter.add_(0.5)
    assert not all(torch.equal(a, b) for a, b in zip(_weights(trainer.policy), _weights(trainer.reference)))
    trainer.reset_reference()
    assert all(torch.equal(a, b) for a, b in zip(_weights(trainer.policy), _weights(trainer.reference)))
    assert all(not p.requires_grad for p in trainer.reference.parameters())
    trainer.close()
    without = GRPOTrainer("rspo/ALFWorld-v0", model="drrn", output_dir=str(tmp_path / "none"), **SMALL)
    without.reset_reference()  # kl_coef 0: nothing to anchor
    assert without.reference is None
    without.close()


def _padded_commands(registry, ids):
    """Commands' hashed ids as 0-padded rows, from the registry's own token lists."""
    tokens = [registry.tokens[i] for i in ids.tolist()]
    width = max(map(len, tokens))
    return torch.tensor([t + [0] * (width - len(t)) for t in tokens])


def _reference_scores(model, prompts, commands, choices):
    """The scorer written as its formula: per-section means by a one-hot matmul over the padded ids,
    ``w · tanh(W [s; a; s ⊙ a])`` (torch's own tanh and autograd) on every (state, command) slot,
    padding masked to -inf."""
    def pooled(ids):
        sections = torch.nn.functional.one_hot(ids // model.buckets, 5).float() * (ids > 0).unsqueeze(-1)
        return (sections.transpose(1, 2) @ model.embed(ids % model.buckets)) / sections.sum(1).clamp(min=1.0).unsqueeze(-1)

    state = torch.tanh(model.state[0](pooled(prompts)[:, 1:, :].flatten(1)))
    a = torch.tanh(model.command[0](pooled(commands)[:, 0, :]))[choices.clamp(min=0)]
    s = state[:, None, :].expand_as(a)
    hidden = torch.tanh(model.scorer[0](torch.cat([s, a, s * a], dim=-1)))
    return model.scorer[2](hidden).squeeze(-1).masked_fill(choices < 0, float("-inf"))


def test_scores_and_their_gradients_equal_the_formula_on_ragged_batches():
    policy = ActionScorerPolicy(seed=4)
    tok = policy.tokenizer
    prompts = [tok(text)["input_ids"] for text in (
        "Your task is to: put a mug in the desk.\nYour current observation is: You see a mug 1.\nYour admissible actions of the current situation are: ['take mug 1'].",
        "You arrive at fridge 1. The fridge 1 is closed.",
    )]
    width = max(map(len, prompts))
    prompts = torch.tensor([[0] * (width - len(p)) + p for p in prompts])  # left-padded, as in a batch
    choices = torch.tensor([[0, 2, 1, -1], [3, -1, -1, -1]])
    ids = torch.tensor(policy.commands.ids(["take mug 1", "go to desk 1", "look", "open fridge 1"]))
    commands = _padded_commands(policy.commands, ids)
    model = policy.model
    pairs = padded_choices(torch.where(choices >= 0, ids[choices.clamp(min=0)], -1))  # as registry ids
    fast, _ = model.scores(padded_section_bags(prompts, model.buckets), policy.commands.bags(pairs.distinct), pairs)
    reference = _reference_scores(model, prompts, commands, choices)
    assert torch.equal(torch.isinf(fast), choices < 0)
    assert torch.allclose(fast[choices >= 0], reference[choices >= 0], atol=1e-6)
    grads = []
    for scores in (fast, reference):
        model.zero_grad()
        torch.log_softmax(scores, -1)[choices >= 0].sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    assert all(torch.allclose(f, r, atol=1e-6) for f, r in zip(*grads))


def test_the_tokenizer_remembers_parts_without_changing_ids():
    tok = HashingTokenizer(64)
    prompt = "Your task is to: put a mug in the desk.\nYour current observation is: You see a mug 1.\nYour admissible actions of the current situation are: ['take mug 1']."
    first, again = tok(prompt)["input_ids"], tok(prompt)["input_ids"]
    assert first == again == [i for section, part in tok.sections(prompt) for i in tok.encode(part, section)]
    again.append(7)  # a caller's list is its own: the remembered parts stay intact
    assert tok(prompt)["input_ids"] == first


def test_the_hand_written_backward_equals_finite_differences_in_float64():
    """``_Scores`` (every parameter's gradient, and the state codes' for a value head), and the
    sigmoid form of tanh against torch's."""
    from rspo_gym.policies.action_scorer import (
        ActionScorer, CommandRegistry, ScorerConfig, _Scores, _tanh_addmm, listed_choices, listed_section_bags,
    )

    torch.manual_seed(0)
    model = ActionScorer(ScorerConfig(buckets=16, embed_dim=3, hidden=4)).double()
    tok = HashingTokenizer(16)
    prompts = listed_section_bags([tok(text)["input_ids"] for text in ("go to fridge", "Your task is to: heat a mug.\nYour "
                                   "current observation is: a mug 1\nYour admissible actions", "look")], 16)
    registry = CommandRegistry(tok, ["take mug 1", "look", "go to desk 1", "open fridge 1"])
    choices = listed_choices([[3, 1], [2], [1, 0, 3]])  # ragged
    commands = registry.bags(choices.distinct)
    weights = tuple(model.parameters())
    assert len(weights) == 9

    def scores(*params):
        table, state = _Scores.apply(*params, prompts.join(commands), len(prompts.counts), choices)
        return table.clamp(min=-1e9), state

    assert torch.autograd.gradcheck(scores, weights)
    x = torch.linspace(-20, 20, 4001)[:, None]
    one, zero = torch.ones(1, 1), torch.zeros(4001, 1)
    assert float((_tanh_addmm(zero, x, one) - torch.tanh(x)).abs().max()) < 3e-7
    # the doubling folded into addmm (alpha = beta = 2) is the doubled product bit for bit
    torch.manual_seed(1)
    for rows in (1, 64, 2730):
        bias, inputs, weight = torch.randn(rows, 64), torch.randn(rows, 64), torch.randn(64, 64)
        for b in (bias, bias[0]):  # a per-row term, and a broadcast bias
            assert torch.equal(_tanh_addmm(b, inputs, weight), torch.sigmoid(torch.addmm(b, inputs, weight) * 2).mul_(2).sub_(1))


def test_a_prompt_pools_alike_in_its_rollout_turn_and_in_a_training_batch():
    """The rollout scores prompts from their id lists, the update from the left-padded batch; the
    bags (hence the means, hence the log-probs) are the same."""
    from rspo_gym.policies.action_scorer import listed_section_bags, padded_section_bags

    tok = HashingTokenizer(64)
    prompts = [tok(text)["input_ids"] for text in (
        "Your task is to: put a mug in the desk.\nPrior to this step, you have already taken 1 step(s). Below are the most "
        "recent 1 observations and the corresponding actions you took: \n[Observation 1: 'You see a desk 1.', Action 1: "
        "'go to desk 1']\nYou are now at step 2 and your current observation is: You see a mug 1.\nYour admissible actions "
        "of the current situation are: ['take mug 1'].", "You arrive at fridge 1.", "look")]
    width = max(map(len, prompts))
    padded = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    for a, b in zip(listed_section_bags(prompts, 64), padded_section_bags(padded, 64)):
        assert a.tolist() == b.tolist()
    mask = (padded > 0).long()
    mask[1, -1] = 0  # a masked real id is left out, as the masked product leaves it
    for a, b in zip(padded_section_bags(padded * mask, 64), padded_section_bags(padded, 64, mask)):
        assert a.tolist() == b.tolist()


def test_registry_ids_of_a_remembered_list_are_a_fresh_list_and_stay_true():
    from rspo_gym.policies.action_scorer import CommandRegistry

    registry = CommandRegistry(HashingTokenizer(64), ["look"])
    first = registry.ids(["go to desk 1", "look"])
    assert first == [1, 0] and registry.texts == ["look", "go to desk 1"]
    first.append(9)  # the caller's own list: what is remembered is untouched
    assert registry.ids(("go to desk 1", "look")) == [1, 0]
    assert registry.ids(["look", "open fridge 1"]) == [0, 2]


def test_distinct_ids_equal_numpy_unique_dense_and_spread():
    import numpy as np

    from rspo_gym.policies.action_scorer import distinct_ids

    rng = np.random.default_rng(0)
    for ids in (rng.integers(0, 60, 2730), rng.integers(0, 10**9, 50), np.array([7]), np.array([0, 0, 3, 1, 3])):
        distinct, local = distinct_ids(ids)
        expected, inverse = np.unique(ids, return_inverse=True)
        assert np.array_equal(distinct, expected) and np.array_equal(local, inverse.reshape(-1))


def test_prompt_ids_read_from_the_fields_equal_the_parsed_rendered_prompt():
    """``HashingTokenizer.prompt_ids`` skips rendering the prompt; wherever it answers, its parts
    are what parsing the rendered prompt finds, on fields full of the templates' markers."""
    import random

    from rspo_gym.policies.action_scorer import prompt_sections
    from rspo_gym.rollout.prompts import ALFWORLD, GENERIC, WEBSHOP, PromptBuilder

    tok = HashingTokenizer(64)
    rng = random.Random(0)
    pieces = ["current observation is: ", "\n", "\nYour admissible actions", "Your task is to: ", "x y", "'", "', Action ",
              "', Action 3: '", "']", "[Observation 2: '", ".", "-= Welcome to TextWorld, ALFRED! =-\n\n", "Instruction: [SEP] a [SEP] "]

    def text(k=6):
        return "".join(rng.choice(pieces) for _ in range(rng.randint(0, k)))

    answered = 0
    for _ in range(20_000):
        builder = PromptBuilder(rng.choice([ALFWORLD, WEBSHOP, GENERIC]), history_length=rng.choice([0, 1, 2]))
        task, observation, history = text(), text(), [(text(), text()) for _ in range(rng.choice([0, 1, 3]))]
        parts = prompt_sections(builder, task, observation, history)
        if parts is not None:
            answered += 1
            assert parts == tok.sections(builder.build(task, observation, [text(3)], history))
            assert tok.prompt_ids(builder, task, observation, history) == tok(builder.build(task, observation, ["look"], history))["input_ids"]
    assert answered > 5_000


def _generate_rows(policy, seeds, *, seed=7, temperature=1.0):
    """One pick per row seed, every row the same prompt and the same six commands."""
    prompt = policy.tokenizer("Your task is to: put a mug in cabinet. You are in the middle of a room.")["input_ids"]
    commands = [f"go to cabinet {k}" for k in range(1, 7)]
    config = GenerationConfig(temperature=temperature, seed=seed, row_seeds=tuple(seeds))
    out = policy.generate([prompt] * len(seeds), config, [commands] * len(seeds))
    return [commands.index(text) for text in out.texts], out


def test_generate_samples_each_row_from_its_own_seed_not_the_calls():
    # The collector passes a seed per sub-env and turn (row_seeds) and keeps the call's seed for the
    # whole iteration: were row_seeds ignored, every turn of an iteration would replay one stream.
    policy = ActionScorerPolicy(seed=3)
    seeds = list(range(1000, 1064))
    first, _ = _generate_rows(policy, seeds)
    assert _generate_rows(policy, seeds, seed=8)[0] == first  # the call's seed is overridden
    assert _generate_rows(policy, [s + 10**6 for s in seeds])[0] != first  # the next turn's row seeds
    assert _generate_rows(policy, seeds[5:9])[0] == first[5:9]  # a row's draw depends on its seed alone


def test_generate_draws_follow_the_tempered_softmax():
    policy = ActionScorerPolicy(seed=3)
    picks, out = _generate_rows(policy, range(6000), temperature=0.7)
    logprob_of = {k: lp[0] for k, lp in zip(picks, out.logprobs)}
    assert sorted(logprob_of) == list(range(6))
    probs = torch.tensor([math.exp(logprob_of[k]) for k in range(6)])
    counts = torch.bincount(torch.tensor(picks), minlength=6).double()
    expected = probs.double() * len(picks)
    assert float(((counts - expected) ** 2 / expected).sum()) < 20.5  # chi-square, 5 dof: p ~ 0.001


def test_a_row_seed_count_that_differs_from_the_prompts_is_refused_by_both_samplers():
    from rspo_gym.policies.hf_backend import HFBackend
    from rspo_gym.policies.models import load_model

    commands = ["go to cabinet 1", "look"]
    policy = ActionScorerPolicy(seed=3)
    prompt = policy.tokenizer("Your task is to: put a mug in cabinet.")["input_ids"]
    for seeds in ((1,), (1, 2, 3)):
        with pytest.raises(ValueError, match=f"row_seeds has {len(seeds)} entries for 2 prompts"):
            policy.generate([prompt] * 2, GenerationConfig(row_seeds=seeds), [commands] * 2)
    model, tokenizer = load_model("tiny", device="cpu")
    backend = HFBackend(model, tokenizer)
    with pytest.raises(ValueError, match="row_seeds has 1 entries for 2 prompts"):
        backend.generate([[1, 2], [3]], GenerationConfig(max_new_tokens=2, row_seeds=(1,)))
