"""pytest.ini: ``-m "not slow"`` (the contributors' fast subset, docs/contributing.md) leaves out the
tests marked ``slow``, and a misspelt marker is an error rather than a slow test kept in the subset."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pytest_with_repo_config(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess:
    """pytest with this repository's pytest.ini on one test file holding ``source``."""
    (tmp_path / "test_sample.py").write_text(source)
    return subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pytest.ini"), "--rootdir", str(tmp_path),
                           "-p", "no:cacheprovider", "test_sample.py", *args],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)


def test_not_slow_deselects_the_slow_tests(tmp_path):
    source = "import pytest\n\n@pytest.mark.slow\ndef test_long():\n    pass\n\ndef test_short():\n    pass\n"
    result = pytest_with_repo_config(tmp_path, source, "-m", "not slow", "-rA")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASSED test_sample.py::test_short" in result.stdout and "test_long" not in result.stdout
    assert "1 deselected" in result.stdout


def test_a_misspelt_marker_is_an_error(tmp_path):
    result = pytest_with_repo_config(tmp_path, "import pytest\n\n@pytest.mark.slwo\ndef test_long():\n    pass\n")
    assert result.returncode != 0
    assert "'slwo' not found in `markers`" in result.stdout + result.stderr
