"""Nested rows scored from one pass (``policies/packing.py``): the same log-probs, entropies, values
and gradients as one pass per row, micro-batches that keep a chain together, and an update that
does not depend on whether rows were packed.

Rows are the turns of append-only conversations (turn ``t + 1``'s prompt is turn ``t``'s prompt and
reply plus an observation), shuffled so that hosts are not the last rows, plus an unrelated row.
A read at the wrong host position scores another token's state and fails every comparison."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from rspo_gym.policies.critic import LMCritic  # noqa: E402
from rspo_gym.policies.llm import LLMPolicy  # noqa: E402
from rspo_gym.policies.models import load_model  # noqa: E402
from rspo_gym.policies.packing import nested_chains, nested_hosts, packing  # noqa: E402
from rspo_gym.rollout.trajectory import Rollout, StepRow, Trajectory, micro_batches, to_batch  # noqa: E402

TURNS = 4


def _row(prompt, response, traj=0, step=0, allowed=None) -> StepRow:
    return StepRow(list(prompt), list(response), [0.0] * len(response), 0.0, 0.0, "o", True, True, 0, traj, step, "a",
                   allowed_token_ids=allowed)


def _conversations(vocab: int, trajectories: int = 3, constrained: bool = False, seed: int = 0) -> list[StepRow]:
    """``trajectories`` conversations of ``TURNS`` nested turns (contiguous, in time order), then one
    unrelated row; constrained rows allow their own token and three others at each position."""
    generator = torch.Generator().manual_seed(seed)

    def ids(n):
        return torch.randint(3, vocab, (n,), generator=generator).tolist()

    def turn(prompt, response, traj, step):
        return _row(prompt, response, traj, step, [sorted({token, *ids(3)}) for token in response] if constrained else None)

    rows = []
    for traj in range(trajectories):
        prompt = ids(10)
        for step in range(TURNS):
            response = ids(3 + 2 * step + traj)
            rows.append(turn(prompt, response, traj, step))
            prompt = prompt + response + ids(4)
    rows.append(turn(ids(7), ids(5), trajectories, 0))
    return rows


def _shuffled(rows: list[StepRow], seed: int = 1) -> list[StepRow]:
    order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed)).tolist()
    return [rows[i] for i in order]


def _policy(lora: bool = False, value_head: bool = True) -> LLMPolicy:
    model, tokenizer = load_model("tiny", device="cpu", seed=0)
    policy = LLMPolicy(model, tokenizer, value_head=value_head, seed=0)
    if lora:
        policy.add_lora(r=4)
        with torch.no_grad():  # peft starts B at 0: move it so that the adapter changes the scores
            for name, parameter in policy.model.named_parameters():
                if "lora_B" in name:
                    parameter.normal_(0, 0.05, generator=torch.Generator().manual_seed(3))
    return policy


def _outputs(policy: LLMPolicy, batch, pack: bool, temperature: float = 1.0) -> dict[str, torch.Tensor]:
    policy.pack_rows = pack
    return policy.forward(batch, temperature=temperature, entropy=True, values=True)


@pytest.fixture(scope="module")
def policy() -> LLMPolicy:
    return _policy()


# ----------------------------------------------------------------------------- detection
def test_hosts_and_offsets_of_small_id_lists():
    rows = [
        _row([1, 2], [3]),  # 0: a prefix of 1 and 2
        _row([1, 2, 3, 4], [5, 6]),  # 1: a prefix of 2
        _row([1, 2, 3, 4, 5, 6, 7], [8]),  # 2: host of 0, 1, 5
        _row([1, 2], [4]),  # 3: shares a prompt with 0, not its reply: its own host
        _row([9], [8, 7]),  # 4: unrelated
        _row([1, 2, 3, 4, 5], [6]),  # 5: prompt and reply cut elsewhere, the same tokens: nested in 2
        _row([9], [8, 7]),  # 6: equal to 4: only a strictly longer row hosts, so its own host
    ]
    plan = packing(to_batch(rows, pad_token_id=0))
    assert plan.hosts == [2, 3, 4, 6]
    assert plan.slot == [0, 0, 0, 1, 2, 0, 3]
    assert plan.start == [1, 3, 6, 1, 0, 4, 0]  # prompt length - 1: the state before the first reply token
    assert plan.width == 8 and plan.packs
    assert nested_hosts(torch.tensor([[5, 6, 7], [5, 6, 0], [6, 0, 0]]), [3, 2, 1]) == [0, 0, 2]
    lone = packing(to_batch([_row([1, 2], [3]), _row([1, 2], [4])], pad_token_id=0))
    assert lone.hosts == [0, 1] and not lone.packs


def test_a_hash_collision_never_makes_a_wrong_host(monkeypatch):
    import rspo_gym.policies.packing as module

    ids = torch.tensor([[1, 2, 3, 0], [1, 2, 3, 4], [1, 5, 0, 0], [1, 2, 0, 0], [7, 0, 0, 0]])
    right = nested_hosts(ids, [3, 4, 2, 2, 1])
    monkeypatch.setattr(module, "_prefix_hashes", torch.zeros_like)  # every prefix collides with every other
    assert nested_hosts(ids, [3, 4, 2, 2, 1]) == right == [1, 1, 2, 1, 4]


# ----------------------------------------------------------------------------- scores and gradients
@pytest.mark.parametrize("constrained", [False, True], ids=["free", "constrained"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_packed_scores_equal_one_pass_per_row(policy, temperature, constrained):
    batch = to_batch(_shuffled(_conversations(policy.model.config.vocab_size, constrained=constrained)), policy.pad_token_id)
    assert (batch.allowed is not None) == constrained
    assert len(packing(batch).hosts) == 4  # three conversations and the unrelated row
    with torch.no_grad():
        packed, alone = _outputs(policy, batch, True, temperature), _outputs(policy, batch, False, temperature)
    mask = batch.response_mask.bool()
    for key in ("logprobs", "entropy", "values"):
        torch.testing.assert_close(packed[key][mask], alone[key][mask], atol=2e-6, rtol=0)


def _gradient(policy: LLMPolicy, batch, pack: bool, weights: torch.Tensor) -> torch.Tensor:
    out = _outputs(policy, batch, pack)
    loss = ((out["logprobs"] * weights[0] + out["values"] * weights[1]) * batch.response_mask).sum()
    loss.backward()
    parameters = policy.parameters()
    gradient = torch.cat([p.grad.flatten() for p in parameters])
    for p in parameters:
        p.grad = None
    return gradient


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_packed_gradients_equal_one_pass_per_row(lora):
    policy = _policy(lora=lora)
    batch = to_batch(_shuffled(_conversations(policy.model.config.vocab_size, constrained=lora)), policy.pad_token_id)
    weights = torch.randn((2, *batch.response_mask.shape), generator=torch.Generator().manual_seed(2))
    packed, alone = _gradient(policy, batch, True, weights), _gradient(policy, batch, False, weights)
    assert float(alone.norm()) > 0
    assert float((packed - alone).norm() / alone.norm()) < 1e-5


def test_a_batch_without_nested_rows_runs_exactly_as_unpacked(policy):
    vocab = policy.model.config.vocab_size
    rows = [_conversations(vocab, trajectories=1, seed=seed)[step] for seed, step in ((3, 0), (4, 2), (5, 3))]
    rows.append(_conversations(vocab, trajectories=1, seed=6)[-1])  # the unrelated row
    batch = to_batch(rows, policy.pad_token_id)
    assert not packing(batch).packs
    packed, alone = _outputs(policy, batch, True), _outputs(policy, batch, False)
    for key in packed:
        assert torch.equal(packed[key], alone[key])
    weights = torch.randn((2, *batch.response_mask.shape), generator=torch.Generator().manual_seed(2))
    assert torch.equal(_gradient(policy, batch, True, weights), _gradient(policy, batch, False, weights))
    # with the next turn of the first row's conversation, the first row reads that turn's pass
    nested = to_batch(rows + [_conversations(vocab, trajectories=1, seed=3)[1]], policy.pad_token_id)
    assert packing(nested).hosts == [1, 2, 3, 4]
    with torch.no_grad():
        extra = _outputs(policy, nested, True)
    r = len(rows[0].response_ids)
    for key in packed:
        torch.testing.assert_close(extra[key][0, :r], alone[key][0, :r].detach(), atol=2e-6, rtol=0)


# ----------------------------------------------------------------------------- micro-batches
def test_micro_batches_keep_chains_together_within_a_host_token_budget(policy):
    batch = to_batch(_shuffled(_conversations(policy.model.config.vocab_size, trajectories=4)), policy.pad_token_id)
    lengths, chains = batch.lengths(), nested_chains(batch)
    budget = 2 * max(p + r for p, r in lengths)
    groups = micro_batches(lengths, 16, budget, chains)
    assert sorted(i for group in groups for i in group) == list(range(len(batch)))
    for group in groups:
        assert {i for i in range(len(batch)) if chains[i] in {chains[j] for j in group}} == set(group)  # whole chains
        hosts = sorted({chains[i] for i in group})
        assert len(hosts) * (max(lengths[h][0] for h in hosts) + max(lengths[h][1] for h in hosts)) <= budget
    assert len(groups) == 3  # pairs of the four conversations, and the unrelated row
    assert len(micro_batches(lengths, 16, budget)) > len(groups)  # by row tokens, the budget splits more
    assert len(micro_batches(lengths, 2, None, chains)) == 3  # max_rows counts chains
    with torch.no_grad():
        packed = policy.logprobs(batch, values=True, max_tokens=budget)
        policy.pack_rows = False
        alone = policy.logprobs(batch, values=True, max_tokens=budget)
        policy.pack_rows = True
    mask = batch.response_mask.bool()
    for key in packed:
        torch.testing.assert_close(packed[key][mask], alone[key][mask], atol=2e-6, rtol=0)


def test_the_separate_critic_packs_as_the_policy():
    model, tokenizer = load_model("tiny", device="cpu", seed=0)
    critic = LMCritic(model, seed=1)
    batch = to_batch(_shuffled(_conversations(model.config.vocab_size)), tokenizer.pad_token_id)
    mask = batch.response_mask.bool()
    values = []
    for pack in (True, False):
        critic.pack_rows = pack
        assert (critic.chains(batch) is not None) == pack
        out = critic.forward(batch)
        (out * batch.response_mask).sum().backward()
        values.append((out[mask], torch.cat([p.grad.flatten() for p in critic.parameters()])))
        for p in critic.parameters():
            p.grad = None
    (packed, packed_grad), (alone, alone_grad) = values
    torch.testing.assert_close(packed, alone, atol=2e-6, rtol=0)
    assert float((packed_grad - alone_grad).norm() / alone_grad.norm()) < 1e-5


# ----------------------------------------------------------------------------- an update
def _update(pack: bool) -> dict[str, float]:
    from rspo_gym.algos import GRPOTrainer

    trainer = GRPOTrainer(
        "rspo/ALFWorld-v0", model="tiny-untrained", num_groups=1, group_size=4, max_turns=TURNS, eval_every=0,
        progress=False, seed=0, mini_batch_size=8, micro_batch_size=4, max_tokens_per_micro_batch=160,
        recompute_old_logprobs=True, learning_rate=1e-3,
    )
    trainer.policy.pack_rows = pack
    rows = _conversations(trainer.policy.model.config.vocab_size)
    trajectories = [
        Trajectory(traj, 0, 0, "t", float(won), 0.0, 0.0, won, float(won), TURNS if traj < 3 else 1, 0)
        for traj, won in enumerate([True, False, True, False])
    ]
    for row in rows:
        row.reward = float(trajectories[row.traj_id].won and row.step == trajectories[row.traj_id].length - 1)
    metrics = trainer.train_on(Rollout(rows, trajectories), 0)
    trainer.close()
    return metrics


def test_an_update_is_the_same_packed_and_unpacked():
    packed, alone = _update(True), _update(False)
    assert packed.keys() == alone.keys() and alone["train/grad_norm"] > 0
    for key in alone:
        assert packed[key] == pytest.approx(alone[key], rel=1e-5, abs=1e-6), key
