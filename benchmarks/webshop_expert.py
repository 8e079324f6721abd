"""Score of the scripted WebShop shopper (``expert.py``) on the canonical goals.

Plays :meth:`WebShopEnv.expert_action` through the Gym API (``rspo/WebShop-v0``, default
1,000-product catalog, 15-step limit) on the first ``--goals`` goals of the ``test`` split (the
acceptance set: score 1.0 on >= 95 %) and of the ``valid`` split (a held-out check, so heuristics
tuned on test failures are not just fitted to them). Prints success (score 1.0) %, mean score and
mean steps per split and writes them as JSON (``--out``, default
``results/benchmarks/webshop_expert.json``).

``--num-products`` picks the catalog size (1,000 as verl-agent; 100,000 for the large catalog).
``--policy random`` plays the random baseline instead: ``search[<instruction>]`` on the search page,
elsewhere a uniformly random ``click[...]`` of the admissible actions (seeded per goal), so its
score shows what the search ranking alone hands a policy that reads nothing.

``--failures`` also prints, for every goal not won, the instruction, the expert's actions, the
target's and the bought item's pages (title, price, options, Features, Description), the target's
rank for the expert's query and the hidden goal - for failure analysis only; the expert itself
never sees any of it::

    python benchmarks/webshop_expert.py --failures test
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import random
import sys
import time
from pathlib import Path

from common import write_json  # benchmarks/common.py (the script folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402

import rspo_gym  # noqa: E402, F401
from rspo_gym.envs.webshop.session import Page  # noqa: E402

ENV_ID = "rspo/WebShop-v0"
SPLITS = ("test", "valid")


def random_action(env: gym.Env, info: dict, rng: random.Random) -> str:
    """The random baseline: search with the instruction itself, else a uniformly random click."""
    clicks = [a for a in info["admissible_actions"] if a.startswith("click[")]
    if env.unwrapped.session.page is Page.SEARCH or not clicks:
        return f"search[{info['task']}]"
    return rng.choice(clicks)


def play(env: gym.Env, task_id: int, policy: str = "expert") -> tuple[float, int, list[str], dict]:
    """One episode of ``policy`` (``expert`` or ``random``): (score, steps, actions, last info)."""
    obs, info = env.reset(options={"task_id": task_id})
    rng = random.Random(task_id)
    done = trunc = False
    reward, actions = 0.0, []
    while not (done or trunc):
        if policy == "random":
            action = random_action(env, info, rng)
        else:
            action = env.unwrapped.expert_action()
        actions.append(action)
        obs, reward, done, trunc, info = env.step(action)
    return (reward if done else 0.0), len(actions), actions, info


def _item_lines(u, label: str, index: int) -> list[str]:
    it = u.catalog.item(index)
    opts = "; ".join(f"{k}: {' / '.join(v)}" for k, v in it.options.items())
    return [f"  {label} {it.asin}: {it.title} | {it.price_text} | {opts}",
            f"  {label} features: " + " / ".join(it.features),
            f"  {label} description: " + it.description]


def failure_report(env: gym.Env, query: str | None) -> str:
    """What the target's (and the bought item's) pages show, where the target ranks for the
    expert's query, and the hidden goal — for the failure report only."""
    u = env.unwrapped
    goal = u.session.goal
    target = u.goals.target_index(u.task_ids[u.task_id])
    lines = _item_lines(u, "target", target)
    bought = u.session.purchase
    if bought is not None and bought.asin != goal.asin:
        lines += _item_lines(u, "bought", u.catalog.index_of(bought.asin))
    if query is not None:
        hits = list(u.index.search(query, 50))
        rank = hits.index(target) if target in hits else None
        lines.append(f"  target rank for the query: {rank}; top: "
                     + ", ".join(u.catalog.asin(i) for i in hits[:5]))
    lines.append(f"  hidden goal: attrs={goal.attributes} opts={goal.options} "
                 f"price_upper={goal.price_upper}")
    return "\n".join(lines)


def run_split(split: str, n: int, failures: bool, num_products: int = 1000,
              policy: str = "expert") -> dict:
    env = gym.make(ENV_ID, split=split, num_products=num_products, allow_large_catalog=True)
    n = min(n, len(env.unwrapped.task_ids))
    t0 = time.perf_counter()
    scores, steps, lost = [], [], []
    for k in range(n):
        r, s, actions, info = play(env, k, policy)
        scores.append(r)
        steps.append(s)
        if r < 1.0:
            lost.append(k)
            if failures:
                goal = env.unwrapped.session.goal
                bought = env.unwrapped.session.purchase
                print(f"--- {split} {k} score {r:.3f} target {goal.asin}")
                print("  instruction:", goal.instruction_text)
                print("  actions:", " | ".join(actions))
                if bought is not None:
                    print(f"  bought {bought.asin} options {dict(bought.options)} "
                          f"parts {info.get('reward_parts')}")
                query = next((a[7:-1] for a in actions if a.startswith("search[")), None)
                print(failure_report(env, query))
    env.close()
    return {
        "split": split,
        "goals": n,
        "success_pct": round(100 * sum(r == 1.0 for r in scores) / n, 2),
        "mean_score": round(sum(scores) / n, 4),
        "mean_steps": round(sum(steps) / n, 2),
        "failed_task_ids": lost,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--goals", type=int, default=500, help="first N goals of each split")
    parser.add_argument("--splits", nargs="+", default=list(SPLITS), choices=SPLITS)
    parser.add_argument("--num-products", type=int, default=1000, help="catalog size")
    parser.add_argument("--policy", default="expert", choices=("expert", "random"),
                        help="the scripted shopper, or the random baseline")
    parser.add_argument("--failures", nargs="*", default=[], choices=SPLITS,
                        help="splits whose lost goals are printed in detail")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "results" / "benchmarks" / "webshop_expert.json")
    args = parser.parse_args(argv)
    if args.goals <= 0 or args.num_products <= 0:
        parser.error("--goals and --num-products must be positive")
    rows = [run_split(s, args.goals, s in args.failures, args.num_products, args.policy)
            for s in args.splits]
    print("split | goals | success % | mean score | mean steps | seconds")
    for r in rows:
        print(f"{r['split']} | {r['goals']} | {r['success_pct']} | {r['mean_score']} | "
              f"{r['mean_steps']} | {r['seconds']}")
    write_json(args.out, {
        "benchmark": "webshop_expert",
        "date": dt.date.today().isoformat(),
        "python": platform.python_version(),
        "env": ENV_ID,
        "num_products": args.num_products,
        "policy": args.policy,
        "max_steps": 15,
        "results": rows,
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
