"""Suite-wide fixtures for the tests and the doctests in ``rspo_gym/``.

``Trainer.learn()`` without ``output_dir`` writes a run folder under ``$RSPO_GYM_RUNS_DIR``
(default ``runs`` in the working directory); every test and doctest gets its own temporary one,
so the suite never writes into the repository. torch's thread count is restored after every test:
a test that sets it (a benchmark's worker run in-process) would otherwise change the floating-point
reductions of every later test, so runs that must be bitwise equal to a subprocess's stop being so.

Tests marked ``long`` run a README command or an archived study cell whole and check the numbers
the page or the archive holds; together they would take the suite past its 15-minute budget on 2
cores, so they run only where ``RSPO_GYM_LONG_TESTS=1`` asks for them (before a release, or after
changing what they check).
"""

import os
import sys

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("RSPO_GYM_LONG_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="runs a README command or a study cell whole; set RSPO_GYM_LONG_TESTS=1 to run it")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _runs_in_a_temporary_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSPO_GYM_RUNS_DIR", str(tmp_path_factory.mktemp("runs")))


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is not None and threads is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


# rspo_gym.integrations.verifiers_taskset defines verifiers' classes at import time: collect its
# doctests only where verifiers (an optional peer) is installed.
import importlib.util  # noqa: E402

collect_ignore = [] if importlib.util.find_spec("verifiers") else ["rspo_gym/integrations/verifiers_taskset.py"]
