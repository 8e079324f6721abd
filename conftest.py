"""Suite-wide fixtures for the tests and the doctests in ``rspo_gym/``.

``Trainer.learn()`` without ``output_dir`` writes a run folder under ``$RSPO_GYM_RUNS_DIR``
(default ``runs`` in the working directory); every test and doctest gets its own temporary one,
so the suite never writes into the repository.
"""

import pytest


@pytest.fixture(autouse=True)
def _runs_in_a_temporary_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSPO_GYM_RUNS_DIR", str(tmp_path_factory.mktemp("runs")))
