"""Draw the results page's answer figures from the committed data, nothing rerun.

    python benchmarks/answer_figures.py

Reads ``docs/results_fast/summary.json`` (the matrix's, the sparse-regime study's, the
explorer study's and the LLM matrix's paired differences), ``docs/results_fast/details.json`` (the equal-total-steps view) and
``docs/quickstart_search.json`` (the quick start's seeds), and writes one forest plot per question
beside this file with ``rspo_gym.plotting.forest_plot``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rspo_gym.compare.stats import verdict
from rspo_gym.plotting import forest_plot

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BASE_LABELS  # noqa: E402

DOCS = Path(__file__).resolve().parent.parent / "docs"
HERE = DOCS / "answers"
ALF, WEB, WEB_V1 = "rspo/ALFWorld-v0", "rspo/WebShop-v0", "rspo/WebShop-v1"
UNTRAINED_WEB = {"start": "untrained", "policy": "drrn"}
UNTRAINED_ALF = {"start": "untrained", "policy": "drrn-memory"}
LLM = {"start": "expert-clone", "policy": "tiny-alfworld"}
#: The LLM matrix's answer rows: the base's gain, RSPO against each base and the explorer's two controls.
LLM_ROWS = (("grpo", ("outcome", "start")), ("grpo", ("agent-helpful", "outcome")), ("grpo", ("agent-helpful", "outcome-nm")),
            ("grpo", ("agent-helpful", "dense-helpful")), ("ppo", ("agent-helpful", "outcome")),
            ("ppo", ("agent-helpful", "outcome-nm-matched")), ("gigpo", ("agent-helpful", "outcome")))


def _find(differences, env, metric, a, b, *, base="grpo", regime=None, seeds=None, names=None):
    """The one difference of ``env``/``metric``/``base`` whose arms are ``a`` − ``b`` ((arm, reward) pairs;
    ``names``: the explorer study's cell arms, where two arms share an (arm, reward) pair)."""
    found = [d for d in differences
             if d["env"] == env and d["metric"] == metric and d["base"] == base and d.get("regime") == regime
             and (d["a"]["arm"], d["a"]["process_reward"]) == a and (d["b"]["arm"], d["b"]["process_reward"]) == b
             and (seeds is None or d["seeds"] == seeds) and (names is None or d.get("names") == names)]
    if len(found) != 1:
        raise LookupError(f"{len(found)} differences match {env} {metric} {base} {a} − {b} {regime}")
    return found[0]


def _llm(differences, base, a, b):
    """The LLM matrix's difference ``a − b`` (cell arms) of ``base``, or None before two seeds of both ran."""
    found = [d for d in differences if d["base"] == base and d["names"] == [a, b]]
    return found[0] if found else None


def _row(label, d):
    return {"label": label, "difference": d["mean"], "ci_low": d["ci_low"], "ci_high": d["ci_high"],
            "verdict": verdict(d["ci_low"], d["ci_high"])}


def figures(docs: Path = DOCS) -> dict[str, dict]:
    """Each answer figure's ``rows`` (``forest_plot``'s), ``title`` and ``xlabel``, by file name."""
    out: dict[str, dict] = {}
    summary = json.loads((docs / "results_fast" / "summary.json").read_text(encoding="utf-8"))
    matrix = [d for d in summary["differences"] if "regime" not in d]
    regimes = [d for d in summary["differences"] if "regime" in d]
    details = json.loads((docs / "results_fast" / "details.json").read_text(encoding="utf-8"))
    equal_total = details["views"]["equal_total"]["differences"]
    outcome, start = ("outcome", None), ("start", None)
    events = {"dense": ("dense", "events"), "explorer": ("rspo-explorer", "events"), "rank": ("rspo-rank", "events")}
    aligned = {ALF: "milestones", WEB: "score"}
    name = {ALF: "ALFWorld", WEB: "WebShop"}

    rows = []
    for env in (ALF, WEB):
        rows += [_row(f"{name[env]}: outcome − start", _find(matrix, env, "success", outcome, start)),
                 _row(f"{name[env]}: dense, potential {aligned[env]} − outcome",
                      _find(matrix, env, "success", ("dense", aligned[env]), outcome)),
                 _row(f"{name[env]}: dense, per-event events − outcome",
                      _find(matrix, env, "success", events["dense"], outcome))]
    out["misaligned.png"] = dict(rows=rows, xlabel="difference of final held-out success",
        title="What a hand-written per-event process reward costs (GRPO, 10 seeds, 95 % intervals)")

    rows = []
    for env in (ALF, WEB):
        rows += [_row(f"{name[env]}: RSPO explorer (events) − dense events",
                      _find(matrix, env, "success", events["explorer"], events["dense"])),
                 _row(f"{name[env]}: RSPO explorer (events) − outcome",
                      _find(matrix, env, "success", events["explorer"], outcome)),
                 _row(f"{name[env]}: RSPO rank (events) − outcome",
                      _find(matrix, env, "success", events["rank"], outcome))]
    out["immune.png"] = dict(rows=rows, xlabel="difference of final held-out success",
        title="RSPO with the farmable reward: explorer swap and rank swap (GRPO, 10 seeds, 95 % intervals)")

    total = [d for d in summary["differences"] if d.get("measure") == "equal_total_env_steps"]
    agent = ("rspo-explorer", "purchase")
    rows = [_row(f"WebShop-v1 score, {label}: RSPO − outcome N+M",
                 _find(total, WEB_V1, "score", agent, outcome, base=base, names=["agent-helpful", "outcome-nm"]))
            for base, label in BASE_LABELS.items()]
    rows += [_row("WebShop-v0 score, GRPO: earlier RSPO − outcome",
                  _find(equal_total, WEB, "score", events["explorer"], outcome, seeds=10)),
             _row("ALFWorld success, GRPO: earlier RSPO − outcome*",
                  _find(matrix, ALF, "success", events["explorer"], outcome))]
    out["vs_outcome.png"] = dict(rows=rows, xlabel="RSPO − outcome base, equal total steps (*: learner steps)",
        title="Does RSPO beat the outcome-trained base? (GRPO 10 seeds, PPO and GiGPO 5; 95 % intervals)")

    purchase = ("dense", "purchase")
    rows = [_row("WebShop score, area under the curve: dense purchase − outcome",
                 _find(regimes, WEB, "auc_score", purchase, outcome, regime=UNTRAINED_WEB)),
            _row("WebShop score, final: dense purchase − outcome",
                 _find(regimes, WEB, "score", purchase, outcome, regime=UNTRAINED_WEB)),
            _row("WebShop score, area: RSPO explorer (purchase) − outcome",
                 _find(regimes, WEB, "auc_score", ("rspo-explorer", "purchase"), outcome, regime=UNTRAINED_WEB)),
            _row("ALFWorld success, area: dense events once − outcome",
                 _find(regimes, ALF, "auc_success", ("dense", "events:once"), outcome, regime=UNTRAINED_ALF)),
            _row("ALFWorld success, final: dense events once − outcome",
                 _find(regimes, ALF, "success", ("dense", "events:once"), outcome, regime=UNTRAINED_ALF))]
    out["faster.png"] = dict(rows=rows, xlabel="difference (area = speed; final = end of the budget)",
        title="A helpful process reward against the outcome, from untrained starts (GRPO, 10 seeds, 95 % intervals)")

    llm = [d for d in summary["differences"] if d.get("regime") == LLM and d["metric"] == "success"
           and d["measure"] == "equal_total_env_steps"]
    rows = [_row(f"{BASE_LABELS[base]}: {a} − {b} ({d['seeds']} seeds)", d)
            for base, (a, b) in LLM_ROWS if (d := _llm(llm, base, a, b)) is not None]
    out["llm.png"] = dict(rows=rows, xlabel="difference of final held-out success at equal total env steps",
        title="With an LLM agent (tiny-alfworld on ALFWorld), does RSPO beat its base? (95 % intervals)")

    search = json.loads((docs / "quickstart_search.json").read_text(encoding="utf-8"))
    runs = sorted((r for r in search["runs"] if r["candidate"] == "default"), key=lambda r: r["seed"])
    rows = [{"label": f"seed {r['seed']}: {100 * r['held_out_success_before_rl']:.1f} % → "
                      f"{100 * r['held_out_success_after_rl']:.1f} %",
             "difference": 100 * r["held_out_gain"], "ci_low": 100 * r["held_out_gain_ci_low"],
             "ci_high": 100 * r["held_out_gain_ci_high"],
             "verdict": verdict(r["held_out_gain_ci_low"], r["held_out_gain_ci_high"])} for r in runs]
    out["quickstart.png"] = dict(rows=rows, xlabel="gain in held-out success, points (after − before)",
        title="What rspo-gym quickstart learns: 24 iterations, 35 held-out tasks × 4 episodes, 95 % intervals")

    return out


def main() -> None:
    for name, figure in figures().items():
        forest_plot(figure["rows"], HERE / name, title=figure["title"], xlabel=figure["xlabel"])


if __name__ == "__main__":
    main()
