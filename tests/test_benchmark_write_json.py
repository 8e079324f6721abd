"""``benchmarks/common.write_json``: a matrix cell is written whole or not at all."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _file_size_limit(limit: int):
    def apply() -> None:  # a full disk, in miniature: writes past ``limit`` bytes fail with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_write_that_fails_midway_leaves_the_previous_cell(tmp_path):
    cell = tmp_path / "cells" / "cell.json"
    cell.parent.mkdir()
    cell.write_text(json.dumps({"seed": 0, "evals": [1]}))
    script = (f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); from common import write_json; "
              f"from pathlib import Path; write_json(Path({str(cell)!r}), {{'seed': 0, 'evals': list(range(5000))}})")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, preexec_fn=_file_size_limit(4096))
    assert done.returncode != 0 and "File too large" in done.stderr
    assert json.loads(cell.read_text()) == {"seed": 0, "evals": [1]}  # not a truncated new one
    assert [p.name for p in cell.parent.iterdir()] == ["cell.json"]  # nor a temporary beside it
