"""``docs/metrics.md`` documents every key a trainer logs, and nothing no trainer logs.

One short iteration of each trainer (GRPO, PPO, GiGPO and RSPO with its explorer), with the
settings that add keys of their own (a KL reference, KL in the reward, dynamic sampling, a
critic, two task types per rollout and per evaluation), writes ``metrics.jsonl``; every key in it
must match a name of the page's tables, and every name of the tables must match a logged key.
The fast ``drrn`` policy runs the same training loop as the language models in a fraction of
the time.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.doc_tables import names, pattern, tables

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "metrics.md"

pytest.importorskip("torch")

#: one iteration, two groups on two tasks of different types, two held-out tasks of different types
TINY = dict(
    model="drrn", iterations=1, num_groups=2, group_size=2, max_turns=2, train_task_ids=[0, 1],
    eval_every=1, eval_tasks=2, progress=False, seed=0,
)


def documented_names(markdown: str) -> list[str]:
    """The names in the first column (``key``) of the page's tables."""
    return [name for table in tables(markdown) for row in table if "key" in row for name in names(row["key"])]


def undocumented(logged: set[str], documented: list[str]) -> list[str]:
    """The logged keys no documented name (or ``<placeholder>`` pattern) matches."""
    patterns = [pattern(name) for name in documented]
    return sorted(key for key in logged if not any(p.fullmatch(key) for p in patterns))


def never_logged(logged: set[str], documented: list[str]) -> list[str]:
    """The documented names that match no logged key."""
    return [name for name in documented if not any(pattern(name).fullmatch(key) for key in logged)]


def test_undocumented_keys_are_found():
    page = "| key | meaning |\n|---|---|\n| `rollout/success`, `eval/success` | won |\n| `rollout/success_<task_type>` | per type |\n"
    documented = documented_names(page)
    assert documented == ["rollout/success", "eval/success", "rollout/success_<task_type>"]
    logged = {"rollout/success", "rollout/success_pick_and_place_simple", "rollout/score", "eval/success_x/y"}
    assert undocumented(logged, documented) == ["eval/success_x/y", "rollout/score"]
    assert never_logged({"rollout/success"}, documented) == ["eval/success", "rollout/success_<task_type>"]


@pytest.fixture(scope="module")
def logged_keys(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    pytest.importorskip("transformers")
    from rspo_gym.algos import GiGPOTrainer, GRPOTrainer, PPOTrainer, RSPOTrainer

    runs = {
        "grpo": (GRPOTrainer, dict(kl_coef=0.01, filter_groups=True, max_num_gen_batches=2)),
        "ppo": (PPOTrainer, dict(kl_coef=0.01, use_kl_in_reward=True, kl_ctrl="adaptive")),
        "gigpo": (GiGPOTrainer, {}),
        "rspo": (RSPOTrainer, dict(base="ppo", swap="explorer", explorer_group_size=1, explorer_warmup_iterations=1)),
    }
    keys: set[str] = set()
    for name, (cls, extra) in runs.items():
        folder = tmp_path_factory.mktemp(name)
        trainer = cls("rspo/ALFWorld-v0", output_dir=str(folder), **{**TINY, **extra})
        trainer.learn()
        trainer.close()
        for line in (folder / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
            keys |= set(json.loads(line))
    return keys


def test_every_logged_key_is_in_the_glossary(logged_keys):
    missing = undocumented(logged_keys, documented_names(GLOSSARY.read_text(encoding="utf-8")))
    assert not missing, f"docs/metrics.md lacks: {missing}"


def test_every_glossary_key_is_logged(logged_keys):
    stale = never_logged(logged_keys, documented_names(GLOSSARY.read_text(encoding="utf-8")))
    assert not stale, f"docs/metrics.md documents keys no trainer logged here: {stale}"


def test_glossary_rows_give_meaning_unit_and_direction():
    rows = [row for table in tables(GLOSSARY.read_text(encoding="utf-8")) for row in table]
    assert rows and all(set(row) == {"key", "meaning", "unit", "rising is"} for row in rows)
    empty = [row["key"] for row in rows if not all(re.search(r"\w", row[column]) for column in row)]
    assert not empty, empty
