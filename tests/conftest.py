"""Shared fixtures: the optional real data beside the repository (``../shared/data``)."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# ART imports litellm, which would fetch a model price list from the network at import
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
ALFWORLD_DATA = SHARED_DATA / "alfworld"


@pytest.fixture(scope="session")
def alfworld_data() -> Path:
    """The real ALFWorld games and traces; the test is skipped where they are absent."""
    if not (ALFWORLD_DATA / "json_2.1.1").is_dir():
        pytest.skip(f"real ALFWorld data not found at {ALFWORLD_DATA}")
    return ALFWORLD_DATA
