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
README_MAX_LINES = 120
PROSE_MAX_CHARS = 100
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
    block = lines[first_block + 1 : lines.index("```", first_block + 1)]
    commands = [line for line in block if not line.startswith("#")]
    assert len(commands) == 2 and commands[0].endswith("rspo-gym quickstart"), block
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci, "the README's test line must be the one .ci/run runs"


def long_prose_lines(markdown: str, limit: int = PROSE_MAX_CHARS) -> list[str]:
    """The lines outside code blocks and tables that are longer than ``limit`` once each link's
    target is left out: prose wraps, a long link target or a table row cannot."""
    text = _FENCE.sub("", markdown)
    prose = [line for line in text.splitlines() if not line.lstrip().startswith("|")]
    return [line for line in prose if len(re.sub(r"(\]\()[^)\s]+(\))", r"\1\2", line)) > limit]


def test_long_prose_lines_leave_out_code_tables_and_link_targets():
    long = "word " * 25
    text = f"{long}\n```\n{long}\n```\n| {long} |\n[a](docs/{'x' * 120}.md) fits\n"
    assert long_prose_lines(text) == [long]


def test_readme_prose_wraps_at_100_characters():
    long = long_prose_lines((ROOT / "README.md").read_text(encoding="utf-8"))
    assert not long, f"README.md lines over {PROSE_MAX_CHARS} characters:\n" + "\n".join(long)


def test_no_broken_relative_links_in_readme_and_docs():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = [f"{page.relative_to(ROOT)}: {target}" for page in pages for target in broken_links(page)]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_broken_link_is_reported(tmp_path):
    (tmp_path / "page.md").write_text("see [gone](missing.md#part) and [here](page.md)\n")
    assert broken_links(tmp_path / "page.md") == ["missing.md#part"]


def test_config_reference_page_is_current():
    pytest.importorskip("torch")
    from rspo_gym.training.config_reference import render_markdown

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



def _answer_figures():
    import importlib.util

    spec = importlib.util.spec_from_file_location("answer_figures", ROOT / "benchmarks" / "answer_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.figures()


def test_results_page_quotes_the_numbers_its_figures_draw():
    """Every row of the results page's answer figures is quoted on the page as the committed data
    gives it (``+0.068 [0.049, 0.087]``; the quick start's gains in points, ``+10.7 [+1.4, +20.7]``),
    and every figure is committed and embedded."""
    pytest.importorskip("numpy")
    page = " ".join((ROOT / "docs" / "results.md").read_text(encoding="utf-8").replace("**", "").split())
    missing = []
    for name, figure in _answer_figures().items():
        assert f"(answers/{name})" in page, f"docs/results.md does not embed answers/{name}"
        assert (ROOT / "docs" / "answers" / name).stat().st_size > 0
        for row in figure["rows"]:
            if name == "quickstart.png":
                quoted = f"{row['difference']:+.1f} [{row['ci_low']:+.1f}, {row['ci_high']:+.1f}]"
            else:
                quoted = f"{row['difference']:+.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
            quoted = quoted.replace("-", "−")
            if quoted not in page:
                missing.append(f"{name}: {row['label']}: {quoted}")
    assert not missing, "not quoted on docs/results.md:\n" + "\n".join(missing)


def test_results_pages_stay_small():
    pages = sorted((ROOT / "docs").glob("results*.md"))
    assert len(pages) >= 6
    big = [f"{p.name}: {p.stat().st_size} B" for p in pages if p.stat().st_size > 20_000]
    assert not big, big


def python_blocks(markdown: str) -> list[str]:
    """The ```` ```python ```` blocks of a page, in order, as a reader copies them."""
    return re.findall(r"^```python\n(.*?)^```", markdown, re.M | re.S)


def test_readme_env_example_plays_on_both_envs():
    """The README's env example steps an action that does something on ALFWorld and, as its
    comment invites, on WebShop: the first listed WebShop action is verl-agent's template
    ``search[<your query>]``, which searches for "<your query>" and finds nothing."""
    pytest.importorskip("gymnasium")
    code = python_blocks((ROOT / "README.md").read_text(encoding="utf-8"))[0]
    assert 'gym.make("rspo/ALFWorld-v0")' in code and "rspo/WebShop-v1" in code
    for env_id, kwargs in (("rspo/ALFWorld-v0", ""), ("rspo/WebShop-v1", ", num_products=200")):
        namespace: dict = {}
        exec(code.replace('gym.make("rspo/ALFWorld-v0")', f'gym.make("{env_id}"{kwargs})'), namespace)
        obs, info = namespace["obs"], namespace["info"]
        assert info["valid"] and "Nothing happens" not in obs and "Total results: 0" not in obs, (env_id, obs[:300])


def test_readme_trainer_example_trains_the_clone_on_its_task_type(monkeypatch, capsys):
    """The README's trainer example is the quick start's training, sized to show learning on a CPU:
    the clone on the one task type it was cloned on (the default model on all six types and 50
    turns stays at success 0 for the 20 iterations, ~18 minutes, the example used to run); it
    prints held-out success before and at each evaluation, and the page says what it costs."""
    pytest.importorskip("torch")
    from rspo_gym.envs.alfworld.tasks import GeneratedTasks
    from rspo_gym.training.rspo import RSPOTrainer

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    code = python_blocks(readme)[1]
    learned: list = []
    rows = [{"iteration": i, "rollout/success": 0.5, **({"eval/success": i / 48} if i % 6 == 0 else {})} for i in range(1, 25)]
    monkeypatch.setattr(RSPOTrainer, "learn", lambda self, iterations=None, **kw: learned.append(iterations) or rows)
    monkeypatch.setattr(RSPOTrainer, "evaluate", lambda self, *args, **kw: {"eval/success": 0.25})
    namespace: dict = {}
    exec(code, namespace)
    trainer = namespace["trainer"]
    try:
        tasks = GeneratedTasks("train")
        assert {tasks.world(k).task.task_type for k in trainer.config.train_task_ids} == {"pick_and_place_simple"}
        assert trainer.config.max_turns == 25 and learned == [24]
    finally:
        trainer.close()
    assert capsys.readouterr().out == "held-out success: 25.0% -> 12.5% -> 25.0% -> 37.5% -> 50.0%\n"
    after = readme.split(code, 1)[1].split("**The command line", 1)[0]
    assert re.search(r"\d+(\.\d+)?\s+minutes", after) and "idle" in after, after


def _intel_xeon_with_avx512() -> bool:
    """Whether this CPU is the kind the README's numbers of its own runs name: a 2-core Intel Xeon
    with AVX-512, torch on its default 2 threads."""
    import torch

    from rspo_gym.quickstart import cpu_description

    machine = cpu_description()
    return ("Intel" in machine["cpu"] and "Xeon" in machine["cpu"] and machine["cpu_capability"] == "AVX512"
            and torch.get_num_threads() == 2)


@pytest.mark.slow
@pytest.mark.long
def test_readme_trainer_example_prints_what_the_readme_quotes(tmp_path):
    """The README's trainer example, run whole (5.4 idle minutes on 2 cores), prints the line the
    README quotes, to the digit, on the CPU the README names."""
    pytest.importorskip("transformers")
    if not _intel_xeon_with_avx512():
        pytest.skip("the README quotes the trainer example's output on a 2-core Intel Xeon with AVX-512 (torch's "
                    "default kernels and threads); other CPUs round floats differently and print other numbers")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quoted = re.search(r"`(held-out success: [^`]*)`", " ".join(readme.split())).group(1)
    script = python_blocks(readme)[1]
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=4 * 3600,
                         cwd=tmp_path, env={**os.environ, "RSPO_GYM_RUNS_DIR": str(tmp_path / "runs")})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == quoted


def readme_train_line() -> str:
    """The ``rspo-gym train`` line of the README's command-line example, its comment left out."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```bash\n(.*?)^```", readme, re.M | re.S)
    (line,) = [line for block in blocks for line in block.splitlines() if line.startswith("rspo-gym train")]
    return line.split("#", 1)[0].strip()


def test_the_command_line_page_quotes_the_readmes_train_line():
    line = readme_train_line()
    assert "--model drrn" in line  # an LLM with the defaults takes minutes an iteration and learns nothing in 20
    assert line in (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_readmes_train_line_learns_what_the_readme_says(tmp_path):
    """The README's ``rspo-gym train`` line, run as written (minutes on 2 cores), gives the training
    scores and the held-out scores the README quotes, on the CPU it names."""
    pytest.importorskip("torch")
    import json
    import shlex

    if not _intel_xeon_with_avx512():
        pytest.skip("the README quotes the train line's numbers on a 2-core Intel Xeon with AVX-512; MKL rounds the "
                    "scorer's floats differently on other CPUs")
    words = shlex.split(readme_train_line())
    out = subprocess.run([sys.executable, "-m", "rspo_gym", *words[1:], "--output-dir", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=3600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    first, last = (sum(r["rollout/score"] for r in part) / len(part) for part in (rows[:10], rows[-10:]))
    held_out = {r["iteration"]: r["eval/score"] for r in rows if "eval/score" in r}
    printed = re.search(r"^eval/score\s+([\d.]+)$", out.stdout, re.M).group(1)
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    said = (f"its training score averages {first:.2f} over the first 10 iterations and {last:.2f} over the last 10, "
            f"and the held-out score it prints at the end is {float(printed):.3f} on 8 goals "
            f"({held_out[5]:.3f} at iteration 5)")
    assert f"{held_out[len(rows)]:.4f}" == printed  # the last row's, as printed
    assert said in readme, said
