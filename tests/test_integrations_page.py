"""The code blocks of docs/integrations.md run as a reader copies them: each section's Python
blocks in order, in one namespace (a reader's session), in a scratch folder.

Each block is preceded in the page by a marker, ``<!-- snippet: ... -->``, which says what it
needs: ``runs``; ``needs MODULE ...`` (a peer library: skipped where it is not installed);
``GPU`` (skipped without CUDA); ``weights REPO`` (skipped unless the model is in the local Hugging
Face cache: nothing here downloads); ``slow`` (left out of ``-m "not slow"``); or ``not run:
REASON`` for lines that are not a program (the lines to paste into a peer's file), with the test
that covers them instead. A block without a marker fails the first test, so a new block is never
left untested by accident.

A section whose blocks play an episode through the peer's own loop says so in ``PLAYED``: after
its blocks ran with the peer installed, the episode they left behind must be over, its turns
played."""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "integrations.md"
_BLOCK = re.compile(r"^(?:<!-- snippet: (?P<marker>.*?) -->\n)?```python\n(?P<code>.*?)^```", re.M | re.S)


@dataclass(frozen=True)
class Snippet:
    section: str
    code: str
    marker: str | None

    @property
    def words(self) -> list[str]:
        return [] if self.marker is None else [w.strip() for w in self.marker.split(",")]

    def needs(self) -> list[str]:
        return [m for w in self.words if w.startswith("needs ") for m in w.split()[1:]]

    def skip_reason(self) -> str | None:
        """Why this block cannot run here, or None."""
        if self.marker is not None and self.marker.startswith("not run:"):
            return self.marker.removeprefix("not run:").strip()
        missing = [m for m in self.needs() if importlib.util.find_spec(m) is None]
        if missing:
            return f"needs {', '.join(missing)}, not installed here"
        if "GPU" in self.words:
            torch = pytest.importorskip("torch")
            if not torch.cuda.is_available():
                return "needs a CUDA GPU"
        for word in self.words:
            if word.startswith("weights "):
                from huggingface_hub import try_to_load_from_cache

                repo = word.split()[1]
                if not isinstance(try_to_load_from_cache(repo, "config.json"), str):
                    return f"needs {repo}'s weights in the Hugging Face cache (nothing here downloads)"
        return None


#: per section, ``(done, turns)`` of each episode its blocks played, read from what they leave behind
PLAYED = {
    "TRL": lambda ns: [(r["done"], r["turns"]) for r in (episode.result() for episode in ns["rollout"].episodes)],
    "SkyRL": lambda ns: [(ns["out"]["done"], ns["env"].episode.result()["turns"])],
    "OpenRLHF": lambda ns: [(True, ns["result"]["extra_logs"]["turns"])],  # the engine's replies would run out first
    "ART": lambda ns: [(True, ns["trajectory"].metrics["turns"])],  # a Trajectory comes back only at the end
    "verifiers": lambda ns: [("episode_reward" in ns["player"].trace.rewards, ns["player"].trace.info.get("turns"))],
}
#: the turns each played episode may last: the blocks' turn limit (scripted replies never win; the
#: TRL block's model may)
TURNS = {"TRL": range(1, 5), "SkyRL": {3}, "OpenRLHF": {3}, "ART": {3}, "verifiers": {3}}


def snippets(markdown: str) -> list[Snippet]:
    """The page's Python blocks with their section (``## ...``) and marker."""
    found = []
    for match in _BLOCK.finditer(markdown):
        headings = re.findall(r"^## (.+)$", markdown[: match.start()], re.M)
        found.append(Snippet(headings[-1] if headings else "", match.group("code"), match.group("marker")))
    return found


def sections() -> dict[str, list[Snippet]]:
    grouped: dict[str, list[Snippet]] = {}
    for snippet in snippets(PAGE.read_text(encoding="utf-8")):
        grouped.setdefault(snippet.section, []).append(snippet)
    return grouped


def _params() -> list:
    return [pytest.param(name, marks=[pytest.mark.slow] if any("slow" in s.words for s in blocks) else [], id=name)
            for name, blocks in sections().items()]


def test_every_block_says_what_it_needs():
    blocks = snippets(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) >= 8
    unmarked = [b.code.splitlines()[0] for b in blocks if b.marker is None]
    assert not unmarked, f"python blocks without a <!-- snippet: ... --> marker: {unmarked}"
    for block in blocks:
        assert block.marker.startswith("not run: ") or block.words[0] == "runs", block.marker


def test_played_sections_exist():
    assert set(PLAYED) == set(TURNS) and set(PLAYED) <= set(sections())


def test_markers_are_read():
    text = ("## A\n<!-- snippet: runs, needs no_such_module_x -->\n```python\nx = 1\n```\n"
            "## B\n<!-- snippet: not run: lines to paste -->\n```python\ny\n```\n```python\nz\n```\n")
    a, b, c = snippets(text)
    assert (a.section, a.needs(), a.skip_reason()) == ("A", ["no_such_module_x"], "needs no_such_module_x, not installed here")
    assert (b.section, b.skip_reason(), c.marker) == ("B", "lines to paste", None)


@pytest.mark.parametrize("section", _params())
def test_section_runs_as_written(section, tmp_path, monkeypatch):
    """The section's blocks, in order, in one namespace run as a script (``__name__`` is
    ``"__main__"``, so a block written as a script runs its ``main``)."""
    monkeypatch.chdir(tmp_path)  # the blocks write their outputs (runs/, task files) where they run
    from rspo_gym import compat

    # compat.install() stands in for the originals' modules: only for this test
    saved = {name: sys.modules.get(name) for name in compat.ALIASES}
    try:
        _run(section)
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _run(section: str) -> None:
    namespace: dict = {"__name__": "__main__"}
    blocks = sections()[section]
    ran = 0
    for block in blocks:
        reason = block.skip_reason()
        if reason is not None:
            if ran:  # a later block may use what a skipped one defines: stop here
                break
            continue
        exec(compile(block.code, f"{PAGE.name} ({section})", "exec"), namespace)
        ran += 1
    if not ran:
        pytest.skip("; ".join(filter(None, (b.skip_reason() for b in blocks))))
    if section in PLAYED and all(importlib.util.find_spec(m) for b in blocks for m in b.needs()):
        # the peer is here, so its loop played whole episodes, not only wired them
        played = PLAYED[section](namespace)
        assert played and all(done and turns in TURNS[section] for done, turns in played), (section, played)
