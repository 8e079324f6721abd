"""``benchmarks/archive_cells.py``: a matrix's finished cells packed to commit, reproducibly and
without weights, and extracted into a matrix that goes on from them."""

import json
import tarfile

from tests.algos.test_rspo_matrix import _module


def _matrix(out, finished=("outcome-seed0", "outcome-seed1"), interrupted=("outcome-seed2",)):
    (out / "starts").mkdir(parents=True)
    (out / "starts" / "ALFWorld-v0.record.json").write_text(json.dumps({"success": [0.25]}))
    for name in finished + interrupted:
        folder = out / "runs" / name
        (folder / "evaluations").mkdir(parents=True)
        (folder / "policy").mkdir()
        (folder / "policy" / "model.safetensors").write_bytes(b"\0" * 1000)
        (folder / "config.json").write_text(json.dumps({"seed": name[-1]}))
        (folder / "metrics.jsonl").write_text('{"iteration": 1}\n')
        (folder / "evaluations" / "000001.json").write_text(json.dumps({"success": [1.0]}))
        if name in finished:
            (folder / "cell.json").write_text(json.dumps({"seconds": 1.0}))


def test_finished_cells_are_archived_without_weights_and_the_same_cells_give_the_same_bytes(tmp_path, capsys):
    archive_cells = _module("archive_cells")
    out = tmp_path / "matrix"
    _matrix(out)
    first, second = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    assert archive_cells.main([str(out), str(first)]) == 0
    assert "2 finished cells" in capsys.readouterr().out
    (out / "runs" / "outcome-seed0" / "cell.json").touch()  # a newer mtime, the same bytes
    assert archive_cells.main([str(out), str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as tar:
        names = tar.getnames()
        assert {(m.uid, m.gid, m.mtime) for m in tar.getmembers()} == {(0, 0, archive_cells._MTIME)}
    assert names == ["runs/outcome-seed0/cell.json", "runs/outcome-seed0/config.json", "runs/outcome-seed0/evaluations/000001.json",
                     "runs/outcome-seed0/metrics.jsonl", "runs/outcome-seed1/cell.json", "runs/outcome-seed1/config.json",
                     "runs/outcome-seed1/evaluations/000001.json", "runs/outcome-seed1/metrics.jsonl",
                     "starts/ALFWorld-v0.record.json"]
    extracted = tmp_path / "next-sitting"
    with tarfile.open(first) as tar:
        tar.extractall(extracted, filter="data")
    rspo_matrix = _module("rspo_matrix")
    assert [rspo_matrix.is_done(extracted / "runs" / f"outcome-seed{k}") for k in range(3)] == [True, True, False]
    for name in names:
        assert (extracted / name).read_bytes() == (out / name).read_bytes()


def test_a_folder_that_is_not_a_matrix_is_refused_with_a_clear_message(tmp_path, capsys):
    archive_cells = _module("archive_cells")
    assert archive_cells.main([str(tmp_path), str(tmp_path / "a.tar.gz")]) == 2
    assert "has no runs/ folder" in capsys.readouterr().err and not (tmp_path / "a.tar.gz").exists()
