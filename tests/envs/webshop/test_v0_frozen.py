"""``rspo/WebShop-v0`` stays bit-identical: recorded episodes replay to the same text and reward.

The fixture (``data/v0_episodes.json``, written by ``v0_episodes.py``) was recorded before
``rspo/WebShop-v1`` was added; a change to v0's catalog, goals, pages or reward fails here.
"""

import json

import pytest

from tests.envs.webshop.v0_episodes import EPISODES, FIXTURE, play

RECORDED = json.loads(FIXTURE.read_text(encoding="utf-8"))


@pytest.mark.parametrize("k", range(len(EPISODES)))
def test_v0_episode_replays_identically(k):
    recorded = RECORDED[k]
    episode = play(recorded["num_products"], recorded["split"], recorded["task_id"], recorded["policy"])
    assert len(episode["steps"]) == len(recorded["steps"])
    for got, want in zip(episode["steps"], recorded["steps"]):
        assert got == want


def test_fixture_covers_wins_and_losses():
    finals = [e["steps"][-1]["reward"] for e in RECORDED]
    assert 1.0 in finals and any(r < 1.0 for r in finals)
