"""What ``rspo-gym eval`` reports, in the form the papers publish it: pure functions of the episodes.

- ``tally_by_type``: episodes and wins per task type (the type each episode's env reported).
- ``alfworld_table``: success per ALFWorld task type in percent, with the number of games of each,
  in the columns of verl-agent's and GiGPO's tables (Pick, Look, Clean, Heat, Cool, Pick2, All).
- ``webshop_result``: WebShop's Score (100 x the mean final reward, the WebShop paper's "Score")
  and success rate (the share of episodes whose reward is 1), in percent.
- ``eval_report``: all of it as one JSON-ready dict, with the settings that produced it.

Nothing here plays an episode or writes a file: the command line collects the episodes and prints
or saves what these return, so every number can be checked against hand-counted episodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ALFWORLD_COLUMNS", "Tally", "tally_by_type", "alfworld_table", "WebShopResult", "webshop_result", "eval_report"]

#: ALFWorld's six task types (its ``TASK_TYPES`` order) and their column in GiGPO's Table 1.
ALFWORLD_COLUMNS: tuple[tuple[str, str], ...] = (
    ("pick_and_place_simple", "Pick"),
    ("look_at_obj_in_light", "Look"),
    ("pick_clean_then_place_in_recep", "Clean"),
    ("pick_heat_then_place_in_recep", "Heat"),
    ("pick_cool_then_place_in_recep", "Cool"),
    ("pick_two_obj_and_place", "Pick2"),
)


@dataclass(frozen=True)
class Tally:
    """Episodes played and won."""

    episodes: int = 0
    successes: int = 0

    @property
    def percent(self) -> float | None:
        """Success in percent; None for no episode (a column with no game is not a 0 % column).

        >>> Tally(7, 3).percent
        42.857142857142854
        """
        return 100.0 * self.successes / self.episodes if self.episodes else None

    def add(self, won: bool) -> "Tally":
        return Tally(self.episodes + 1, self.successes + int(bool(won)))


def tally_by_type(episodes: Iterable[tuple[str | None, bool]]) -> dict[str, Tally]:
    """``{task type: Tally}`` of ``(task type, won)`` pairs, types in first-seen order; an episode
    whose env reported no type counts as ``"unknown"``.

    >>> tally_by_type([("look_at_obj_in_light", True), ("pick_and_place_simple", False), ("look_at_obj_in_light", False)])
    {'look_at_obj_in_light': Tally(episodes=2, successes=1), 'pick_and_place_simple': Tally(episodes=1, successes=0)}
    """
    tallies: dict[str, Tally] = {}
    for task_type, won in episodes:
        key = task_type or "unknown"
        tallies[key] = tallies.get(key, Tally()).add(won)
    return tallies


def _overall(tallies: Mapping[str, Tally]) -> Tally:
    return Tally(sum(t.episodes for t in tallies.values()), sum(t.successes for t in tallies.values()))


def alfworld_table(tallies: Mapping[str, Tally]) -> str:
    """Success (%) per ALFWorld task type and overall, and the games behind each number, as three
    aligned lines; a type with no game shows ``-``. Episodes of a type that is not one of ALFWorld's
    six (an env of another kind) count in All only.

    >>> print(alfworld_table({"pick_and_place_simple": Tally(2, 1), "pick_two_obj_and_place": Tally(1, 1)}))
                Pick   Look  Clean   Heat   Cool  Pick2    All
    success     50.0      -      -      -      -  100.0   66.7
    games          2      0      0      0      0      1      3
    """
    columns = [(label, tallies.get(task_type, Tally())) for task_type, label in ALFWORLD_COLUMNS]
    columns.append(("All", _overall(tallies)))
    header = f"{'':9s}" + "".join(f"{label:>7s}" for label, _ in columns)
    rates = f"{'success':9s}" + "".join(f"{'-' if t.percent is None else f'{t.percent:.1f}':>7s}" for _, t in columns)
    games = f"{'games':9s}" + "".join(f"{t.episodes:>7d}" for _, t in columns)
    return "\n".join((header, rates, games))


@dataclass(frozen=True)
class WebShopResult:
    """WebShop's two published numbers, in percent, over ``episodes`` goals."""

    episodes: int
    score: float
    """100 x the mean final reward (the WebShop paper's "Score"; no purchase is reward 0)."""
    success: float
    """Percent of episodes with reward exactly 1 (every attribute, option and the price right)."""

    def line(self) -> str:
        """One line, as the papers name the columns.

        >>> WebShopResult(4, 62.5, 25.0).line()
        'score 62.5  success 25.0 %  (4 goals)'
        """
        return f"score {self.score:.1f}  success {self.success:.1f} %  ({self.episodes} goals)"


def webshop_result(rewards: Sequence[float]) -> WebShopResult:
    """WebShop's Score and success rate of the final rewards of ``rewards``' episodes.

    >>> webshop_result([1.0, 0.5, 0.0, 1.0])
    WebShopResult(episodes=4, score=62.5, success=50.0)
    """
    if not rewards:
        raise ValueError("no episode to score")
    n = len(rewards)
    return WebShopResult(n, 100.0 * sum(float(r) for r in rewards) / n, 100.0 * sum(float(r) == 1.0 for r in rewards) / n)


def _tally_json(tally: Tally) -> dict[str, Any]:
    return {"episodes": tally.episodes, "successes": tally.successes, "success_percent": tally.percent}


def eval_report(
    episodes: Sequence[tuple[str | None, bool, float]], *, family: str, settings: Mapping[str, Any],
    metrics: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The JSON of one evaluation: ``settings`` (model, env, split or games, temperature, seed, ...)
    and ``episodes`` (``(task type, won, final reward)`` each) as counts and percents: ``overall``
    always; ``task_types`` (ALFWorld's six, zero counts included, then any other) on ALFWorld;
    ``webshop`` (score and success) on WebShop; ``metrics``, the evaluation's ``eval/`` means.

    >>> report = eval_report([("pick_and_place_simple", True, 1.0)], family="alfworld", settings={"env": "rspo/ALFWorld-v0"})
    >>> report["overall"], report["task_types"]["pick_and_place_simple"]
    ({'episodes': 1, 'successes': 1, 'success_percent': 100.0}, {'episodes': 1, 'successes': 1, 'success_percent': 100.0})
    """
    tallies = tally_by_type((task_type, won) for task_type, won, _ in episodes)
    report: dict[str, Any] = {**settings, "episodes": len(episodes), "overall": _tally_json(_overall(tallies))}
    if family == "alfworld":
        ordered = [task_type for task_type, _ in ALFWORLD_COLUMNS] + [t for t in tallies if t not in dict(ALFWORLD_COLUMNS)]
        report["task_types"] = {t: _tally_json(tallies.get(t, Tally())) for t in ordered}
    if family == "webshop" and episodes:
        result = webshop_result([reward for _, _, reward in episodes])
        report["webshop"] = {"score": result.score, "success_percent": result.success}
    if metrics is not None:
        report["metrics"] = dict(metrics)
    return report
