"""Pack a run-folder matrix's finished cells into one archive to commit, without their weights.

A matrix of hours runs across sittings and machines; what a sitting finished is committed so that
the next one, anywhere, extracts it and goes on, and so that the report regenerates from it. Only
finished cells go in (a folder with ``cell.json``): an interrupted one is rerun whole anyway. Per
cell the records ``rspo-gym compare`` reads (``config.json``, ``metrics.jsonl``, ``cell.json``,
``evaluations/``), not ``policy/`` or a checkpoint: megabytes each, and no statistic needs them.
The start's records (``starts/``) go in too, so an extracted matrix does not measure it again.

The archive is reproducible: the same cells give the same bytes (sorted names, fixed times and
owners, a gzip header without a time), so committing it again after a sitting changes the
repository only by the cells added.

Usage::

    python benchmarks/archive_cells.py results/llm-alfworld docs/results_llm_matrix/cells.tar.gz
    mkdir -p results/llm-alfworld && tar xzf docs/results_llm_matrix/cells.tar.gz -C results/llm-alfworld
"""

from __future__ import annotations

import argparse
import gzip
import io
import sys
import tarfile
from pathlib import Path

__all__ = ["CELL_RECORDS", "archived_files", "write_archive", "main"]

#: What of a finished cell's run folder is archived: everything ``rspo-gym compare`` and the report read.
CELL_RECORDS = ("cell.json", "config.json", "metrics.jsonl", "evaluations")

#: The time every member carries (and the day the first cells were archived): a file's own mtime
#: would change the archive's bytes on every extraction.
_MTIME = 1_796_428_800  # 2026-12-05 00:00 UTC


def archived_files(out: Path) -> list[Path]:
    """The files of ``out`` to archive, relative to it, sorted: the start records, then each
    finished cell's records (``CELL_RECORDS``)."""
    files = [p for p in (out / "starts").glob("*.json") if p.is_file()]
    for folder in sorted((out / "runs").glob("*")):
        if not (folder / "cell.json").is_file():
            continue
        for name in CELL_RECORDS:
            record = folder / name
            files += sorted(p for p in record.rglob("*") if p.is_file()) if record.is_dir() else [record] if record.is_file() else []
    return sorted(p.relative_to(out) for p in files)


def _member(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, _MTIME, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_archive(out: Path, archive: Path) -> int:
    """Write ``out``'s finished cells and start records to ``archive`` (a ``.tar.gz``), replacing
    it only once complete; returns the number of cells archived."""
    files = archived_files(out)
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as zipped:
        with tarfile.open(fileobj=zipped, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for relative in files:
                data = (out / relative).read_bytes()
                tar.addfile(_member(relative.as_posix(), len(data)), io.BytesIO(data))
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    partial.write_bytes(buffer.getvalue())
    partial.replace(archive)
    return len({p.parts[1] for p in files if p.parts[0] == "runs"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the matrix's --out folder (with runs/ and starts/)")
    parser.add_argument("archive", type=Path, help="the .tar.gz to write")
    args = parser.parse_args(argv)
    if not (args.out / "runs").is_dir():
        print(f"archive_cells: {args.out} has no runs/ folder: not a run-folder matrix's --out", file=sys.stderr)
        return 2
    cells = write_archive(args.out, args.archive)
    print(f"wrote {args.archive}: {cells} finished cells ({args.archive.stat().st_size / 1024:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
