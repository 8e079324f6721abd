"""Ctrl-C (``KeyboardInterrupt``) anywhere in a checkpoint write leaves a run that resumes, and
the next writer of a run folder removes the temporary files a killed writer left."""

import os
from pathlib import Path

from rspo_gym.atomic import remove_stale_temporaries


def test_remove_stale_temporaries_removes_only_the_named_targets_temporaries(tmp_path):
    kept = [".metrics.csv.tmp", ".metrics.csv.0badc0de.tmp.bak", ".notes.txt.0badc0de.tmp", "metrics.csv", ".metrics.csv.0BADC0DE.tmp"]
    for name in [*kept, ".metrics.csv.0badc0de.tmp", ".learning_curve.png.12345678.tmp"]:
        (tmp_path / name).write_text("x")
    (tmp_path / ".out.abcdef01.tmp").mkdir()  # a staging folder, with what was staged in it
    (tmp_path / ".out.abcdef01.tmp" / "summary.json").write_text("{}")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    os.symlink(outside, tmp_path / ".out.fedcba98.tmp")  # a link is removed, never followed

    removed = remove_stale_temporaries(tmp_path, ["metrics.csv", "learning_curve.png", "out"])

    assert [p.name for p in removed] == [".learning_curve.png.12345678.tmp", ".metrics.csv.0badc0de.tmp", ".out.abcdef01.tmp",
                                         ".out.fedcba98.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)
    assert (outside / "precious").read_text() == "keep"
    assert remove_stale_temporaries(tmp_path, []) == [] and remove_stale_temporaries(tmp_path / "absent", ["out"]) == []
