"""``shuffle_chains``: mini-batches of whole conversation trajectories, each scored in one packed pass."""

from collections import Counter

import pytest

import rspo_gym.training.trainer as trainer_module

pytest.importorskip("transformers")

SETTINGS = dict(num_groups=2, group_size=2, max_turns=4, eval_every=0, progress=False, seed=0, mini_batch_size=5, micro_batch_size=64)


def _mini_batch_chains(monkeypatch, **config) -> tuple[list[list], Counter]:
    """The chain key of every row of each mini-batch of one update, and each chain's size in the batch."""
    from rspo_gym.training.grpo import GRPOTrainer

    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld-chat", **SETTINGS, **config)
    rollout = trainer.collect(1)
    seen: list[list] = []
    original = trainer_module.micro_batches

    def spy(lengths, max_rows, max_tokens=None, chains=None):
        seen.append(list(chains) if chains is not None else [None] * len(lengths))
        return original(lengths, max_rows, max_tokens, chains)

    monkeypatch.setattr(trainer_module, "micro_batches", spy)
    trainer.train_on(rollout, 1)
    whole = trainer.policy.chains(trainer_module.to_batch(rollout.rows, trainer.policy.pad_token_id, trainer.policy.device))
    trainer.close()
    return seen, Counter(whole)


def _incidences(seen: list[list]) -> int:
    """(chain, mini-batch) pairs: how many passes the chains' rows are spread over."""
    return sum(len(set(mini)) for mini in seen)


def test_a_chain_lands_whole_in_one_mini_batch_except_at_the_cut(monkeypatch):
    seen, sizes = _mini_batch_chains(monkeypatch, shuffle_chains=True)
    assert len(seen) > 1 and max(sizes.values()) > 1
    # each chain in one mini-batch, but where mini_batch_size cuts one between two (row shuffling,
    # seen here: 9 against this bound of 7)
    assert _incidences(seen) <= len(sizes) + len(seen) - 1
    for mini in seen:  # a chain's rows are consecutive in its mini-batch
        keys = [k for i, k in enumerate(mini) if i == 0 or mini[i - 1] != k]
        assert len(keys) == len(set(keys))
