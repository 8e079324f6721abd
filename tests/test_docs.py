"""The README stays a one-screen guide, every relative link in it and in ``docs/`` resolves, the
generated config reference is current, and the docs site builds with ``mkdocs build --strict``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 200
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(markdown: str) -> list[str]:
    """Targets of the markdown links and images outside code blocks that point into the repository."""
    text = _FENCE.sub("", markdown)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [target for target in _LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:|^#", target)]


def broken_links(path: Path) -> list[str]:
    """The relative link targets of ``path`` whose file does not exist (anchors are left to mkdocs)."""
    targets = relative_links(path.read_text(encoding="utf-8"))
    return [target for target in targets if not (path.parent / target.split("#", 1)[0]).exists()]


def test_relative_links_finds_links_outside_code_only():
    text = "[a](docs/a.md) ![p](p.png) [w](https://x.org) [s](#top) `[c](c.md)`\n```\n[d](d.md)\n```\n"
    assert relative_links(text) == ["docs/a.md", "p.png"]


def test_readme_fits_on_a_few_screens_and_starts_with_title_and_setup():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    assert lines[0].startswith("# ")
    first_block = lines.index("```bash")
    commands = lines[first_block + 1 : first_block + 3]
    assert commands[0].endswith("rspo-gym quickstart")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci, "the README's test line must be the one .ci/run runs"


def test_no_broken_relative_links_in_readme_and_docs():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = [f"{page.relative_to(ROOT)}: {target}" for page in pages for target in broken_links(page)]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_broken_link_is_reported(tmp_path):
    (tmp_path / "page.md").write_text("see [gone](missing.md#part) and [here](page.md)\n")
    assert broken_links(tmp_path / "page.md") == ["missing.md#part"]


def test_config_reference_page_is_current():
    pytest.importorskip("torch")
    from rspo_gym.algos.config_reference import render_markdown

    committed = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert committed == render_markdown(), "regenerate it: rspo-gym config --markdown > docs/config.md"


def test_docs_pages_refer_to_nothing_a_reader_cannot_see():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    pattern = re.compile(r"design §|reference §|\bF[123]\b|the issue|issue text")
    found = [f"{p.name}: {m.group(0)}" for p in pages for m in pattern.finditer(p.read_text(encoding="utf-8"))]
    assert not found, found


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "config" / "index.html").exists()
    assert (tmp_path / "site" / "reference" / "trainers" / "index.html").exists()

