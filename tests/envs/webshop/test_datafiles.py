"""The JSON array stream, the content hash and the atomic cache build of ``datafiles.py``."""

from __future__ import annotations

import hashlib
import json

import pytest

from rspo_gym.envs.webshop import datafiles
from rspo_gym.envs.webshop.datafiles import build_atomically, default_cache_dir, file_digest, iter_json_array

RECORDS = [{"asin": "B01", "name": "caf\u00e9 \u2603 \U0001f600", "n": [1, 2.5, None, True]}, {}, {"x": "]}[{,"}]


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 20])
def test_records_come_out_as_json_load_reads_them_whatever_the_chunk_size(tmp_path, monkeypatch, chunk):
    """Multi-byte characters and records cut at every position across reads."""
    monkeypatch.setattr(datafiles, "_CHUNK", chunk)
    path = tmp_path / "items.json"
    for text in (json.dumps(RECORDS, indent=2, ensure_ascii=False), json.dumps(RECORDS), " [ ] ", "[]"):
        path.write_text(text, encoding="utf-8")
        seen = []
        assert list(iter_json_array(path, on_bytes=seen.append)) == json.loads(text)
        assert sum(seen) == len(text.encode())


@pytest.mark.parametrize("text, needle", [
    ('{"a": 1}', "expected a JSON array"),
    ("", "expected a JSON array"),
    ('[{"a": 1}, {"b": ', "not valid JSON in record #1"),
    ('[{"a": 1} {"b": 2}]', "after record #0: expected ',' or ']'"),
    ('[{"a": 1},', "ends inside the array (after 1 records)"),
    ('[{"a": 1}] x', "extra data after the array"),
    (b'[{"a": "\xff"}]', "not UTF-8"),
])
def test_malformed_files_are_one_line_naming_the_file(tmp_path, monkeypatch, text, needle):
    monkeypatch.setattr(datafiles, "_CHUNK", 4)
    path = tmp_path / "items.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError) as err:
        list(iter_json_array(path))
    assert str(err.value).startswith(f"{path}: ") and needle in str(err.value) and "\n" not in str(err.value)


def test_stopping_early_reads_no_further(tmp_path, monkeypatch):
    monkeypatch.setattr(datafiles, "_CHUNK", 16)
    path = tmp_path / "items.json"
    path.write_text("[" + ", ".join(['{"i": %d}' % i for i in range(100)]) + ", broken")
    seen = []
    stream = iter_json_array(path, on_bytes=seen.append)
    assert [next(stream) for _ in range(3)] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert sum(seen) <= 64


def test_digest_is_a_sha256_tree_hash_of_the_contents(tmp_path):
    path = tmp_path / "f.bin"
    data = bytes(range(256)) * 400
    path.write_bytes(data)
    segments = [hashlib.sha256(data[i:i + 4096]).digest() for i in range(0, len(data), 4096)]
    expected = hashlib.sha256(str(len(data)).encode() + b"".join(segments)).hexdigest()
    assert file_digest(path, segment_size=4096, chunk_size=1000) == expected
    path.write_bytes(data[:-1] + b"x")
    assert file_digest(path, segment_size=4096) != expected
    path.write_bytes(b"")
    assert file_digest(path) == hashlib.sha256(b"0").hexdigest()


def test_cache_dir_honours_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "rspo_gym" / "webshop"


def test_a_failed_build_leaves_nothing_and_a_finished_one_appears_whole(tmp_path):
    def fails(out):
        (out / "half.bin").write_bytes(b"x")
        raise ValueError("bad record")

    with pytest.raises(ValueError, match="bad record"):
        build_atomically(tmp_path / "entry", fails)
    assert list(tmp_path.iterdir()) == []
    build_atomically(tmp_path / "entry", lambda out: (out / "done.bin").write_bytes(b"y"))
    assert [p.name for p in tmp_path.iterdir()] == ["entry"] and (tmp_path / "entry" / "done.bin").read_bytes() == b"y"
    build_atomically(tmp_path / "entry", lambda out: (out / "other.bin").write_bytes(b"z"))  # lost a race: the first stays
    assert [p.name for p in (tmp_path / "entry").iterdir()] == ["done.bin"] and len(list(tmp_path.iterdir())) == 1


def test_a_pack_gives_back_what_was_written_by_position(tmp_path):
    values = [["B01", "caf\u00e9 \ud800", [["size", ["s", "m"]]], 12.5, 1000000], {"a": None}, [], "x"]
    writer = datafiles.PackWriter(tmp_path / "p")
    for v in values:
        writer.add(v)
    writer.close()
    pack = datafiles.Packed.open(tmp_path / "p")
    assert len(pack) == 4 and list(pack) == values and pack[-1] == "x"
    with pytest.raises(IndexError):
        pack[4]
    pack.close()
    data = tmp_path / "p.json"
    data.write_bytes(data.read_bytes()[:-1])
    with pytest.raises(ValueError, match="disagree"):
        datafiles.Packed.open(tmp_path / "p")
    empty = datafiles.PackWriter(tmp_path / "e")
    empty.close()
    assert len(datafiles.Packed.open(tmp_path / "e")) == 0
