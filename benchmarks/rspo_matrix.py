"""The comparison that can see what RSPO does: outcome, aligned and misaligned dense rewards, RSPO.

Per env and base algorithm (GRPO, PPO, GiGPO), each arm trains the fast action-scoring policy
(``model="drrn"``) from the same start, on the outcome (10 x won) or a dense reward, and is held out
along training:

============================  =================================================================
arm                           what the learner optimises, and where the process reward goes
============================  =================================================================
``outcome``                   10 x won
``dense-aligned``             10 x won + the env's potential shaping (ALFWorld ``milestones``,
                              WebShop ``score``): keeps the order of returns
``dense-misaligned``          10 x won + the per-event ``events`` reward: paid on every repeat
``explorer-misaligned``       RSPO (explorer swap): the outcome; an explorer trained on
                              ``dense-misaligned``'s reward samples extra trajectories, replayed
                              with their outcome
``explorer-aligned``          the same with the aligned potential
``rank-misaligned``           RSPO (rank swap) with the ``events`` reward
``explorer-misaligned-syncK`` the explorer re-synced to the learner every K iterations (0: never;
                              the other explorer arms every 5)
============================  =================================================================

Budgets: every arm trains ``learner_steps`` env steps of its own learner; evaluation points at
fractions of it (1/3, 2/3, 1) measure held-out success (and WebShop's score) on every held-out
task at the training temperature (1.0), plus once at the end at verl-agent's validation
temperature (0.4). An explorer arm samples half as many trajectories again (M = N/2), so its
2/3 point has spent about the budget in *total* env steps: the comparison at equal total steps
pairs that point with the other arms' end (each cell records both step counts at every point).

Each cell runs in a fresh process (``--jobs`` at a time, one torch thread each) and is written to
``<out>/cells/<env>-<base>-<arm>-seed<k>.json`` when it finishes; a rerun skips finished cells, so
an interrupted matrix resumes (a file that is not a whole record, cut off by a kill or a full disk,
is run again; the report names it and leaves it out). Bad arguments (an ``--out`` that is a file,
a seed or ``--set`` that a cell's config refuses) are one line and exit 2 before any job starts. The start of each seed (ALFWorld: a partial clone of the expert,
cached in ``<out>/clones/``; WebShop: the untrained policy) is evaluated the same way
(``<out>/starts/``). ``rspo_matrix_report.py`` turns the cells into intervals, paired differences,
curves and ``summary.json``.

    python benchmarks/rspo_matrix.py --jobs 2                      # the whole matrix
    python benchmarks/rspo_matrix.py --envs rspo/ALFWorld-v0 --bases grpo --arms outcome --seeds 0 1   # a slice
    python benchmarks/rspo_matrix.py --preset pilot --lr 1e-4 --seeds 0 1                           # settings pilot
    python benchmarks/rspo_matrix.py --preset pilot --set filter_groups=true --out results/pilot-filter
    python benchmarks/rspo_matrix.py --preset pilot --task-type pick_and_place_simple --out results/pilot-pick

The regimes study (``--preset regimes``): does RSPO's advantage depend on where training starts
and on the policy? A *regime* is (start, policy): start ``untrained`` or ``clone-<episodes>``
(``EnvPlan.clone``), policy the trainer's ``model`` (``drrn``, ``drrn-memory``), named
``<start>-<policy>`` (e.g. ``clone-50-drrn-memory``). ALFWorld runs ``drrn-memory`` from
``untrained``, ``clone-25``, ``clone-50`` and ``clone-200`` at GRPO's ALFWorld settings; WebShop
both policies ``untrained``. The arms (``REGIME_ARMS``) add a ``helpful`` process reward
(``HELPFUL``: per env a name, ``once`` and weights; ``--helpful ENV=NAME[:once]`` overrides it) to
the misaligned ``events``. A regime's files are ``cells/<env>-<regime>-<base>-<arm>-seed<k>.json``,
``starts/<env>-<regime>-seed<k>.json`` and ``clones/<env>-clone<episodes>x<epochs>-<policy>-seed<k>.pt``;
its cells and starts record ``"regime": {"start": ..., "policy": ...}``, its cells the process
reward's ``once`` and, per training iteration, ``"groups": [[learner steps, groups/all_fail,
groups/explorer_wins, groups/explorer_rescued], ...]``; the explorer study's cells (the
``webshop-v1`` preset) add ``groups/wins``, ``groups/explorer_win_count`` and ``explorer/synced``
to each row, and record their ``explorer`` settings, ``extra_samples`` and ``axis``; cells with an
explorer also record ``"mechanism": {"keys": [...], "rows": [...]}``, the ``MECHANISM_KEYS`` of
each iteration (importance weights, log-prob gains and revisits of the replay, ``docs/metrics.md``).

    python benchmarks/rspo_matrix.py --preset regimes --jobs 2                        # the whole study
    python benchmarks/rspo_matrix.py --preset regimes --regimes clone-50-drrn-memory untrained-drrn --bases grpo --seeds 0 1
    python benchmarks/rspo_matrix.py --preset regimes --envs rspo/WebShop-v0 --helpful WebShop-v0=events:once --out results/regimes-events

Run-folder presets (``EnvPlan.run_folders``): each cell is the trainer's own run folder,
``<out>/runs/<env>[-<regime>]-<base>-<arm>-seed<k>/`` (``config.json``, ``metrics.jsonl``,
``evaluations/`` at the plan's points with the start's record as iteration 0, ``policy/``, and last
``cell.json``: wall time, generated tokens, the CPU); the start is the same policy on the same
episodes for every seed and arm, so it is measured once (``<out>/starts/``). A folder without
``cell.json`` is an interrupted cell: it is removed and run again; ``touch <out>/STOP`` ends a run
once its running cells finish. The workers run torch's and MKL's AVX2 code paths, as the quick
start does. ``rspo-gym compare`` (``rspo_gym.compare.compare_runs``)
compares them, at equal total env steps with ``--x total_env_steps``. The presets:
``llm-alfworld`` (the LLM matrix: ``tiny-alfworld`` at the quick start's scale), ``learning``
(every base with the outcome, the dense reward and the explorer, six quick-start iterations),
``llm-micro`` (seconds; the tests), ``gpu`` (SmolLM2-135M-Instruct through vLLM, about ten minutes
on one GPU: ``benchmarks/gpu_compare.sh``) and ``gpu-paper`` (Qwen2.5-1.5B-Instruct at verl-agent's
scale on ALFWorld and WebShop-v1, GRPO and GiGPO, seeds 0-2; sized by estimate, not yet run). The
GPU presets need a CUDA GPU and the ``[vllm]`` extra; nothing is downloaded, so ``gpu-paper``'s
model must be in the Hugging Face cache or a local folder named by ``$RSPO_GYM_PAPER_MODEL``.

    python benchmarks/rspo_matrix.py --preset llm-alfworld --jobs 2 --out results/llm-alfworld
    python benchmarks/run_folder_report.py results/llm-alfworld --out docs/results_llm_matrix --merge-summary docs/results_fast/summary.json
    python benchmarks/rspo_matrix.py --preset learning --jobs 2
    rspo-gym compare --group outcome='results/rspo_matrix/learning/runs/*-grpo-outcome-seed*' \
        --group explorer='results/rspo_matrix/learning/runs/*-grpo-explorer-aligned-seed*' --baseline outcome \
        --x total_env_steps --out results/rspo_matrix/learning/compare-grpo
    RSPO_GYM_PAPER_MODEL=/models/Qwen2.5-1.5B-Instruct python benchmarks/rspo_matrix.py --preset gpu-paper --envs rspo/WebShop-v1
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import peak_rss_mb, run_fresh, write_json  # noqa: E402

from rspo_gym.cli import _config_overrides  # noqa: E402

ALFWORLD, WEBSHOP, WEBSHOP_V1 = "rspo/ALFWorld-v0", "rspo/WebShop-v0", "rspo/WebShop-v1"
WEBSHOPS = (WEBSHOP, WEBSHOP_V1)
BASES = ("grpo", "ppo", "gigpo")
#: The process reward each role names, per env family.
PROCESS = {"aligned": {ALFWORLD: "milestones", WEBSHOP: "score", WEBSHOP_V1: "score"},
           "misaligned": {ALFWORLD: "events", WEBSHOP: "events", WEBSHOP_V1: "events"}}
#: Each env's validation split: what pilots choose settings on (``--validation``), never the held-out one.
VALIDATION = {ALFWORLD: "valid_seen", WEBSHOP: "valid", WEBSHOP_V1: "valid"}


@dataclass(frozen=True)
class ProcessChoice:
    """A process reward as the trainer takes it: ``process_reward``, ``process_once``, ``process_weights``."""

    name: str
    once: bool = False
    """Pay each event only the first time in an episode (per-event rewards)."""
    weights: dict | None = field(default=None, hash=False)
    """Event weights over the reward's defaults (None: the defaults)."""


#: The ``helpful`` role's process reward per env, chosen by the regimes pilot (docs/results_fast.md):
#: ALFWorld's sub-goal events paid the first time each (receptacle opened, object picked up,
#: treated, placed): an exploration bonus that cannot be farmed; WebShop's purchase score (Buy Now
#: pays upstream's partial credit), the one per-event reward that did not drive success down
#: (``option``, ``product`` and ``events`` did, even paid once and weighted down to 0.1).
#: A run overrides them with ``--helpful ENV=NAME[:once]``.
HELPFUL = {ALFWORLD: ProcessChoice("events", once=True), WEBSHOP: ProcessChoice("purchase"), WEBSHOP_V1: ProcessChoice("purchase")}


@dataclass(frozen=True)
class Arm:
    """What one cell trains: the learner's reward, the RSPO swap (if any), the process reward's role."""

    kind: str
    """``outcome``, ``dense``, ``rspo-explorer`` or ``rspo-rank`` (the ``summary.json`` arm)."""
    role: str | None = None
    """``aligned`` or ``misaligned`` (``PROCESS``), ``helpful`` (``HELPFUL``, or the plan's
    ``EnvPlan.helpful``); None: no process reward reaches training."""
    sync: int = 5
    """The explorer's ``explorer_sync_every`` (0: never)."""
    explorer: tuple = ()
    """Further RSPO settings of an explorer arm, ``((field, value), ...)`` (the levers of
    ``RSPOConfig``: warm-up, sync on overtake, kept optimizer, updates, group size)."""
    extra_samples: bool = False
    """An outcome arm whose groups hold N + M members: what an explorer arm's extra samples
    alone buy (M = N / 2 as the explorer arms')."""
    matched: bool = False
    """With ``extra_samples``: PPO on the explorer arms' own tasks per iteration and episodes per
    task (half the tasks, 2 + 1 episodes each), not ``outcome-nm``'s one episode on 1.5 times
    the tasks; GRPO's and GiGPO's ``outcome-nm`` is matched already (N + M on the same groups)."""

    def process(self, env_id: str, helpful: ProcessChoice | None = None) -> ProcessChoice | None:
        """The process reward this arm trains with on ``env_id`` (``helpful``: the plan's choice
        for the ``helpful`` role; None: ``HELPFUL``'s)."""
        if not self.role:
            return None
        if self.role == "helpful":
            return helpful or HELPFUL[env_id]
        if self.role in CANDIDATES:
            return CANDIDATES[self.role]
        return ProcessChoice(PROCESS[self.role][env_id])

    def process_reward(self, env_id: str, helpful: ProcessChoice | None = None) -> str | None:
        choice = self.process(env_id, helpful)
        return choice.name if choice else None

    @property
    def has_explorer(self) -> bool:
        return self.kind == "rspo-explorer"


ARMS = {
    "outcome": Arm("outcome"),
    "dense-aligned": Arm("dense", "aligned"),
    "dense-misaligned": Arm("dense", "misaligned"),
    "explorer-misaligned": Arm("rspo-explorer", "misaligned"),
    "explorer-aligned": Arm("rspo-explorer", "aligned"),
    "rank-misaligned": Arm("rspo-rank", "misaligned"),
    "explorer-misaligned-sync20": Arm("rspo-explorer", "misaligned", sync=20),
    "explorer-misaligned-sync0": Arm("rspo-explorer", "misaligned", sync=0),
    "dense-helpful": Arm("dense", "helpful"),
    "explorer-helpful": Arm("rspo-explorer", "helpful"),
    "rank-helpful": Arm("rspo-rank", "helpful"),
    "outcome-nm": Arm("outcome", extra_samples=True),
    "outcome-nm-matched": Arm("outcome", extra_samples=True, matched=True),
}
#: The explorer levers every explorer arm starts from: the settings before the explorer study (one
#: update per iteration, a fresh optimizer at each sync, no warm-up, no sync on overtaking), so
#: that the earlier arms' cells regenerate whatever ``RSPOConfig``'s defaults become.
EARLIER_EXPLORER = (("explorer_updates", 1), ("explorer_sync_on_overtake", False), ("explorer_overtake_window", 5),
                    ("explorer_keep_optimizer", False), ("explorer_warmup_iterations", 0))
#: The first round's dense-reward agent explorer, from which the explorer pilot (docs/explorer_method.md) moved one lever at a time.
AGENT_EXPLORER = (("explorer_warmup_iterations", 20), ("explorer_sync_every", 0), ("explorer_sync_on_overtake", True),
                  ("explorer_keep_optimizer", True), ("explorer_updates", 1))
#: What the pilot chose (validation goals, seeds 100-102): a warm-up of 48 iterations (about a quarter of
#: the total env steps), two updates per iteration, the optimizer kept, re-synced only when the learner
#: overtakes it over 20 iterations (seldom: the explorer won 1.7x as often per episode as its learner).
CHOSEN_EXPLORER = (("explorer_warmup_iterations", 48), ("explorer_sync_every", 0), ("explorer_sync_on_overtake", True),
                   ("explorer_overtake_window", 20), ("explorer_keep_optimizer", True), ("explorer_updates", 2))
ARMS.update({
    "agent-helpful": Arm("rspo-explorer", "helpful", sync=0, explorer=CHOSEN_EXPLORER),
    # the chosen explorer without its warm-up: what the warm-up's share of the budget costs or buys
    "agent-w0u2-win20-helpful": Arm("rspo-explorer", "helpful", sync=0,
                                    explorer=tuple({**dict(CHOSEN_EXPLORER), "explorer_warmup_iterations": 0}.items())),
    "agent-misaligned": Arm("rspo-explorer", "misaligned", sync=0, explorer=CHOSEN_EXPLORER),
    "agent-w20-helpful": Arm("rspo-explorer", "helpful", sync=0, explorer=AGENT_EXPLORER),
})
def _agent(**levers) -> tuple:
    """``AGENT_EXPLORER`` with these levers changed (an arm's ``explorer``)."""
    return tuple({**dict(AGENT_EXPLORER), **levers}.items())


#: The explorer pilot's levers, one changed at a time from ``AGENT_EXPLORER`` (``agent-w20-helpful``),
#: plus the premise search's candidates (``dense-cand-*``: the dense arm with a candidate reward).
PILOT_ARMS = {
    "agent-nowarm-helpful": Arm("rspo-explorer", "helpful", sync=0, explorer=_agent(explorer_warmup_iterations=0)),
    "agent-m4-helpful": Arm("rspo-explorer", "helpful", sync=0, explorer=_agent(explorer_group_size=4)),
    "agent-isnone-helpful": Arm("rspo-explorer", "helpful", sync=0, explorer=_agent(is_level="none")),
    "dense-cand-purchase10": Arm("dense", "cand-purchase10"),
    "dense-cand-search": Arm("dense", "cand-search"),
    "dense-cand-price": Arm("dense", "cand-price"),
    "dense-cand-product": Arm("dense", "cand-product"),
    # the second round: a warm-up of about a quarter of the budget (48 iterations of M = 2, or 24 of M = 4)
    "agent-w48-helpful": Arm("rspo-explorer", "helpful", sync=0, explorer=_agent(explorer_warmup_iterations=48)),
    "agent-w48u2-helpful": Arm("rspo-explorer", "helpful", sync=0, explorer=_agent(explorer_warmup_iterations=48, explorer_updates=2)),
    "agent-w24m4-helpful": Arm("rspo-explorer", "helpful", sync=0, explorer=_agent(explorer_warmup_iterations=24, explorer_group_size=4)),
    # the third round: overtaking over 5 iterations is a coin flip between two equal policies (a few wins each), so
    # once synced the explorer was re-synced about every 10 iterations; never sync, or judge over 20 iterations
    "agent-w48u2-never-helpful": Arm("rspo-explorer", "helpful", sync=0,
                                     explorer=_agent(explorer_warmup_iterations=48, explorer_updates=2, explorer_sync_on_overtake=False)),
    "agent-w48u2-win20-helpful": Arm("rspo-explorer", "helpful", sync=0,
                                     explorer=_agent(explorer_warmup_iterations=48, explorer_updates=2, explorer_overtake_window=20)),
}
ARMS.update(PILOT_ARMS)
CANDIDATES = {"cand-purchase10": ProcessChoice("purchase", weights={"purchase": 10.0}), "cand-search": ProcessChoice("search", once=True),
              "cand-price": ProcessChoice("price", once=True), "cand-product": ProcessChoice("product", once=True)}
"""Premise candidates (WebShop): the purchase score paid ten-fold (rewards settling for a near
match over finding the exact item); query coverage paid once per query (teaches searching);
opening a product within the budget, or a matching one, paid once per product (teach browsing
toward the goal, then pull away from buying)."""
MAIN_ARMS = ("outcome", "dense-aligned", "dense-misaligned", "explorer-misaligned", "explorer-aligned", "rank-misaligned")
REGIME_ARMS = ("outcome", "dense-helpful", "dense-misaligned", "explorer-helpful", "explorer-misaligned", "rank-helpful", "rank-misaligned")
"""The arms of the regimes study."""
SYNC_ARMS = ("explorer-misaligned", "explorer-misaligned-sync20", "explorer-misaligned-sync0")


@dataclass(frozen=True)
class EnvPlan:
    """How one env's cells train and are measured."""

    learner_steps: int
    """Env steps of the learner per cell (the explorer's come on top)."""
    trainer: dict = field(default_factory=dict)
    """Trainer settings of every cell (a base's own in ``bases``)."""
    clone: tuple[int, int] = (0, 0)
    """The start: a partial behaviour clone of the expert on (episodes, epochs); (0, 0): untrained."""
    heldout: tuple[tuple[str, int], ...] = ()
    """Held-out (split, number of tasks from task 0)."""
    heldout_episodes: int = 1
    """Episodes per held-out task, averaged into the task's row: at T = 1.0 one episode's win is a
    coin flip, and more episodes shrink that noise in every interval and paired difference."""
    task_type: str | None = None
    """ALFWorld: one task type for everything: training on the first ``train_pool`` train tasks of
    it, the clone on the next ones, and held out on the tasks of it among each split's first
    ``count`` (None: all six types, training tasks drawn by seed)."""
    bases: dict = field(default_factory=dict)
    """Per base, the fields it sets otherwise (``trainer`` merged into the plan's), e.g. a
    learning rate and budget its own pilot chose; a base without an entry uses the plan as is."""
    model: str = "drrn"
    """The trainer's ``model`` (the policy): ``drrn`` or ``drrn-memory``."""
    regime: bool = False
    """A plan of the regimes study: its cells, starts and clones are named by its regime
    (``regime_name``) and record it (``regime_info``) and the trainer's group outcomes."""
    helpful: ProcessChoice | None = None
    """The ``helpful`` role's process reward here (None: ``HELPFUL``'s for the env)."""
    axis: str = "learner"
    """What ``learner_steps`` and the evaluation points count: ``learner`` env steps (an
    explorer's come on top) or ``total`` env steps, the explorer's (and its warm-up's) included:
    equal compute, every arm measured at the same total-step marks."""
    train_pool: int = 1000
    """Training tasks of a ``task_type`` plan: the first this many train tasks of the type (the
    quick start's 64 for the LLM; the clone's come after them)."""
    run_folders: bool = False
    """Cells are run folders (``runs/<cell>/``: the trainer's ``config.json``,
    ``metrics.jsonl``, ``evaluations/``, ``policy/``, plus ``cell.json``), compared by
    ``rspo-gym compare``'s library; the start is measured once and its record is each run's
    ``evaluations/000000.json``. Needs one held-out split. False: the fast matrix's JSON cells."""
    keep_policies: bool = False
    """Keep each cell's final policy in ``<out>/policies/<cell>/`` (``policy_path``): what
    ``benchmarks/transfer_control.py`` plays the explorer-only goals with (a drrn policy is ~1 MB)."""
    explorer: tuple = ()
    """RSPO settings over every explorer arm's own on this plan, ``((field, value), ...)``: levers
    (the chosen explorer's warm-up is a quarter of the budget, so it scales with the plan) and
    what its cells measure (``TRANSFER``)."""
    start_name: str = ""
    """The regime's ``start`` where it is not a clone of ours (the LLM's: ``expert-clone``, the
    preset model that is itself a behaviour clone of the expert)."""

    @property
    def start(self) -> str:
        """``untrained``, ``clone-<episodes>`` or the plan's ``start_name``."""
        return self.start_name or (f"clone-{self.clone[0]}" if self.clone[0] else "untrained")

    @property
    def regime_info(self) -> dict:
        """What a regime cell records: ``{"start": ..., "policy": ...}``."""
        return {"start": self.start, "policy": self.model}

    @property
    def regime_name(self) -> str:
        return regime_name(self.regime_info)

    def for_base(self, base: str) -> "EnvPlan":
        """The plan ``base``'s cells train and are measured under."""
        own = dict(self.bases.get(base, {}))
        return replace(self, **{**own, "trainer": {**self.trainer, **own.get("trainer", {})}}, bases={})

    def overridden(self, trainer: dict | None = None, **fields) -> "EnvPlan":
        """These trainer settings and fields for every base (a pilot's): a base's own value of
        any of them gives way."""
        trainer = trainer or {}
        if "model" in trainer:  # ``--set model=...``: the policy of every cell
            fields = {**fields, "model": trainer["model"]}

        def without(own: dict) -> dict:
            kept = {k: v for k, v in own.items() if k not in fields}
            return {**kept, "trainer": {k: v for k, v in own.get("trainer", {}).items() if k not in trainer}}

        return replace(self, trainer={**self.trainer, **trainer}, **fields, bases={b: without(own) for b, own in self.bases.items()})

    @property
    def episode_counts(self) -> list[int]:
        """Every base's held-out episodes per task: the starts are measured at each."""
        return sorted({self.heldout_episodes, *(own.get("heldout_episodes", self.heldout_episodes) for own in self.bases.values())})


def regime_name(regime: dict) -> str:
    """``<start>-<policy>``, e.g. ``clone-50-drrn-memory``: the name in file names and ``--regimes``."""
    return f"{regime['start']}-{regime['policy']}"


def env_of(key: str) -> str:
    """The env id of a plan key: the env id itself, or ``<env id>@<regime name>``."""
    return key.split("@", 1)[0]


def short(key: str) -> str:
    """A plan key in file names: ``ALFWorld-v0`` or ``ALFWorld-v0-<regime name>``."""
    return key.split("/")[-1].replace("@", "-")


def regimes(env_id: str, plans) -> dict:
    """``{"<env id>@<regime name>": plan}`` of regime plans (``regime`` set on each)."""
    out = {}
    for plan in plans:
        plan = replace(plan, regime=True)
        out[f"{env_id}@{plan.regime_name}"] = plan
    return out




@functools.lru_cache(maxsize=None)
def typed_task_ids(split: str, task_type: str, count: int) -> list[int]:
    """The first ``count`` tasks of ``task_type`` in ``split`` (fewer where the split has fewer)."""
    from rspo_gym.quickstart import alfworld_task_ids

    return alfworld_task_ids(split, task_type, count)


def typed_train_tasks(plan: EnvPlan) -> tuple[list[int], list[int]]:
    """A ``task_type`` plan's training pool and, after it, the clone's tasks: one scan of the
    train split (~15 s for 1,000 tasks) serves both."""
    ids = typed_task_ids("train", plan.task_type, plan.train_pool + plan.clone[0])
    return ids[:plan.train_pool], ids[plan.train_pool:]


@dataclass(frozen=True)
class Plan:
    """The whole matrix."""

    envs: dict
    """plan key -> ``EnvPlan``: the env id, or ``<env id>@<regime name>`` for a regime plan."""
    cells: tuple
    """``(base, seeds, arms)`` entries; a base may have several (the sync sweep runs on fewer seeds)."""
    fractions: tuple[float, ...] = (1 / 3, 2 / 3, 1.0)
    """Evaluation points, as fractions of ``learner_steps``, at the training temperature."""
    curve_temperature: float = 1.0
    final_temperature: float = 0.4

    def todo(self) -> list[tuple[str, str, str, int]]:
        """Every cell: the first entry (GRPO's) seed by seed, then the other entries seed by seed
        together (an interrupted matrix has whole seeds of every base, which pair), envs interleaved."""
        first, *rest = self.cells
        order = [(base, seed, arms) for base, seeds, arms in [first] for seed in seeds]
        order += sorted(((base, seed, arms) for base, seeds, arms in rest for seed in seeds), key=lambda entry: entry[1])
        return [(env_id, base, arm, seed) for base, seed, arms in order for arm in arms for env_id in self.envs]


TRANSFER = (("transfer_tasks", 100), ("transfer_episodes", 4), ("eval_temperature", 1.0))
"""An explorer cell's end: up to 100 training goals only its explorer won and 100 nobody won, 4
episodes each by the learner's start and final weights (``RSPOTrainer.measure_transfer``), at the
curve temperature (``eval_temperature``, which the cells' own evaluations do not read) and at the
final one (``run_cell``)."""
COMMON = {"model": "drrn", "num_groups": 8, "group_size": 4, "history_length": 2, "mini_batch_size": 64,
          "micro_batch_size": 64, "learning_rate": 3e-4, "eval_every": 0, "checkpoint_every": 0, "progress": False,
          "max_turns": None}
GRPO_ALFWORLD = {"learner_steps": 128_000, "trainer": {"learning_rate": 1e-4}, "heldout_episodes": 4}
"""GRPO's own ALFWorld settings, from its second pilot (docs/results_fast.md): at lr 3e-4 and 64k
steps the outcome arm ended +0.011 [-0.020, 0.043] over its start; at 1e-4 and 128k it rose on
every pilot seed, and 4 held-out episodes per task keep the evaluation's coin flips from hiding it."""
ENVS = {
    ALFWORLD: EnvPlan(64_000, COMMON, clone=(200, 10), heldout=(("valid_seen", 140), ("valid_unseen", 134)),
                      bases={"grpo": GRPO_ALFWORLD}),
    WEBSHOP: EnvPlan(24_000, COMMON, heldout=(("test", 200),)),
}


UNTRAINED_ALFWORLD = {"learner_steps": 64_000, "learning_rate": 1e-3}
"""The untrained ALFWorld start's budget and learning rate, from the regimes pilot: lr 1e-3
damages a clone (0.14 -> 0.09 held-out success) but an untrained policy has none to damage; at
1e-4 even the clones barely move in 128k steps; and at 1e-3 the outcome arm and the helpful
reward separate within 64k."""


def _regime_plans() -> dict:
    """The regimes study: ALFWorld with the memory policy from four starts (the clones at GRPO's
    ALFWorld settings: 128k learner steps, lr 1e-4, 4 held-out episodes per task, for every base;
    the untrained start at ``UNTRAINED_ALFWORLD``); WebShop untrained with either policy (24k
    steps, as the matrix)."""
    alfworld = ENVS[ALFWORLD].for_base("grpo")
    memory = {**alfworld.trainer, "model": "drrn-memory"}
    untrained = replace(alfworld, learner_steps=UNTRAINED_ALFWORLD["learner_steps"], model="drrn-memory", clone=(0, 0),
                        trainer={**memory, "learning_rate": UNTRAINED_ALFWORLD["learning_rate"]})
    out = regimes(ALFWORLD, [untrained] + [replace(alfworld, trainer=memory, model="drrn-memory", clone=clone)
                                           for clone in ((25, 10), (50, 10), (200, 10))])
    out.update(regimes(WEBSHOP, [replace(ENVS[WEBSHOP], trainer={**COMMON, "model": model}, model=model)
                                 for model in ("drrn", "drrn-memory")]))
    return out


WEBSHOP_V1_PLAN = EnvPlan(36_000, COMMON, heldout=(("test", 200),), axis="total", explorer=TRANSFER, keep_policies=True)
"""WebShop-v1, untrained drrn, at equal *total* env steps: 36k each (the v0 matrix's explorer arms
spent 36k in all for 24k of their learner's), every arm evaluated at the same total-step marks."""
V1_FRACTIONS = (1 / 6, 1 / 3, 2 / 3, 1.0)
"""The v1 study's evaluation points: the premise reward's test reads the first third's area."""
V1_GRPO_ARMS = ("outcome", "outcome-nm", "dense-helpful", "dense-misaligned", "agent-helpful", "agent-misaligned", "agent-w0u2-win20-helpful")
V1_OTHER_ARMS = ("outcome", "outcome-nm", "agent-helpful")
V1_PPO_ARMS = (*V1_OTHER_ARMS, "outcome-nm-matched")
"""PPO's arms add the control on the explorer arm's own task sampling (``Arm.matched``)."""

LLM_TRAINER = {"model": "tiny-alfworld", "num_groups": 4, "group_size": 4, "learning_rate": 3e-4, "max_turns": 25, "eval_temperature": 1.0,
               "eval_every": 0, "checkpoint_every": 0, "progress": False}
"""The quick start's training (``QuickstartConfig.trainer_overrides``): 4 groups of 4 at lr 3e-4, 25
turns, held out at the training temperature (at 0.4 the tiny clone's success swings between
checkpoints, hiding a gain)."""
LLM_ALFWORLD = EnvPlan(7_500, LLM_TRAINER, heldout=(("valid_unseen", 134),), heldout_episodes=12, task_type="pick_and_place_simple",
                       train_pool=64, model="tiny-alfworld", regime=True, axis="total", run_folders=True, start_name="expert-clone",
                       explorer=(("explorer_warmup_iterations", 12), ("transfer_tasks", 16), ("transfer_episodes", 4)))
"""The LLM matrix on ALFWorld at the quick start's task type and scale: ``tiny-alfworld`` trained on
the first 64 ``pick_and_place_simple`` train tasks to 7,500 *total* env steps (the quick start's 24
iterations of 16 episodes take about that), held out on the 24 tasks of the type in
``valid_unseen`` x 12 episodes. Not ``valid_seen``: the quick start's settings, which these are,
were chosen on its 35 tasks of the type. The three evaluations take ~4.5 of a cell's 14-21
minutes (two cells at a time on 2 cores); the update takes most of the rest. The chosen
explorer's warm-up is a quarter of the budget, as on WebShop: 12 iterations of its 8 episodes."""
LLM_GRPO_ARMS = ("outcome", "agent-helpful", "dense-helpful", "outcome-nm", "agent-misaligned", "dense-misaligned")
LLM_OTHER_ARMS = ("outcome", "agent-helpful")
LLM_PPO_ARMS = (*LLM_OTHER_ARMS, "outcome-nm-matched")
ARMS["rank-aligned"] = Arm("rspo-rank", "aligned")
LEARNING_ALFWORLD = replace(LLM_ALFWORLD, learner_steps=LLM_ALFWORLD.learner_steps // 4, explorer=())
"""The ``learning`` preset (once ``benchmarks/compare.py --preset learning``): does every
combination learn from ``tiny-alfworld`` at the quick start's scale? Six of the quick start's 24
iterations (a quarter of ``LLM_ALFWORLD``'s 7,500 total env steps), held out as the LLM matrix
(24 ``pick_and_place_simple`` tasks of ``valid_unseen`` x 12 episodes at T = 1.0). Its explorer is the one the old
comparison ran (``EARLIER_EXPLORER``: no warm-up, re-synced every 5 iterations), and its process
reward the potential it shaped with (``milestones``, the ``aligned`` role). ALFWorld only: the old
preset's WebShop half started from ``tiny-webshop``, a clone that does not generalise (it did not
move held-out goals in CPU minutes, so that half measured its 4 training goals), which says
nothing a held-out run-folder comparison can read."""
LEARNING_ARMS = ("outcome", "dense-aligned", "explorer-aligned")
"""Every base with the outcome, the dense reward and RSPO's explorer (GRPO also with the rank
swap): the old comparison's eleven combinations less the anneal ablation, whose schedule
(``anneal_iterations``) this runner does not set."""

GPU_TRAINER = {"num_groups": 4, "group_size": 4, "max_turns": 30, "generation_backend": "vllm", "think": True, "constrained": False,
               "max_new_tokens": 256, "max_prompt_length": 2048, "history_length": 2, "learning_rate": 1e-5, "micro_batch_size": 16,
               "eval_temperature": 0.4, "eval_every": 0, "checkpoint_every": 0, "progress": False}
"""The ``gpu`` preset's training (once ``compare.py --preset gpu``): a real instruction model writing
free-text ``<think>``/``<action>`` replies through the colocated vLLM engine, 4 tasks x 4
trajectories, 30 turns, 256 new tokens per reply, lr 1e-5, evaluated at verl-agent's validation
temperature."""
GPU_ALFWORLD = EnvPlan(3 * 16 * 30, GPU_TRAINER, heldout=(("valid_seen", 60),), model="smollm2-135m", axis="total", run_folders=True,
                       start_name="instruct", explorer=(("explorer_warmup_iterations", 1), ("explorer_lora", True)))
"""The 10-minute device check (``benchmarks/gpu_compare.sh``), sized by estimate for one H200 and
not yet run on one: SmolLM2-135M-Instruct on ALFWorld's six task types, three iterations' worth
of total env steps (3 x 16 episodes x 30 turns, as the old preset's 3 iterations at most), held
out once at the end on the first 60 ``valid_seen`` tasks. Its explorer is ``gpu-paper``'s (a LoRA adapter, a warm-up of a sixth of
the budget), so the check runs the paper preset's code path at a small model's cost."""

PAPER_MODEL = os.environ.get("RSPO_GYM_PAPER_MODEL", "Qwen/Qwen2.5-1.5B-Instruct")
"""``gpu-paper``'s policy: a Hub id that must already be in the Hugging Face cache (nothing is
downloaded: ``HF_HUB_OFFLINE=1``), or a local folder holding the model (``save_pretrained``'s
files) named by ``$RSPO_GYM_PAPER_MODEL``."""
PAPER_TRAINER = {"preset": "verl-agent", "num_groups": 16, "group_size": 8, "generation_backend": "vllm", "max_tokens_per_micro_batch": 16_384,
                 "eval_every": 0, "checkpoint_every": 0, "progress": False}
"""verl-agent's GiGPO scripts (the ``verl-agent`` trainer preset, per env: 16 tasks x 8
trajectories, given here too since ``make_trainer`` sizes PPO and the explorer by them; 50 / 15
turns, prompts of 2,048 / 4,096 tokens, replies of 512, lr 1e-6, KL 0.01, gradient checkpointing,
T = 0.4 held out) on one GPU as docs/training_at_scale.md fits it in 80 GB: vLLM colocated,
micro-batches of 16,384 tokens. No checkpoints: an interrupted cell is rerun whole."""
PAPER_STEPS = {ALFWORLD: 150 * 128 * 33, WEBSHOP_V1: 150 * 128 * 10}
"""Total env steps per cell: the paper's 150 iterations of 128 episodes, at an estimated mean of
33 steps per ALFWorld episode (of at most 50: the start loses most of them, a trained policy wins
in about 15) and 10 per WebShop one (of at most 15)."""
PAPER_EXPLORER = (("explorer_warmup_iterations", 75), ("explorer_lora", True))
"""The chosen explorer at this scale: a warm-up of a quarter of the budget's episodes (75
iterations of 16 tasks x 4), as a LoRA adapter on a frozen copy (a full copy's weights and AdamW
state, 23 GiB, do not fit an 80 GB card beside vLLM)."""
PAPER_ENVS = {env_id: EnvPlan(PAPER_STEPS[env_id], PAPER_TRAINER, heldout=(split,), model=PAPER_MODEL, axis="total", run_folders=True,
                              start_name="instruct", explorer=PAPER_EXPLORER)
              for env_id, split in ((ALFWORLD, ("valid_seen", 140)), (WEBSHOP_V1, ("test", 200)))}
"""``gpu-paper``: Qwen2.5-1.5B-Instruct at verl-agent's scale on ALFWorld (held out on all 140
``valid_seen`` tasks) and WebShop-v1 (the first 200 test goals), equal total env steps. Sized by
estimate and not yet run: 24 cells of many GPU-hours each."""
PAPER_ARMS = ("outcome", "agent-helpful")
PAPER_FRACTIONS = (0.2, 0.4, 0.6, 0.8, 1.0)
"""Five held-out points: 140 or 200 episodes each against the budget's 19,200, under 6 % of a cell's rollouts."""
_MICRO = {**COMMON, "num_groups": 2, "group_size": 2, "max_turns": 5}
_MICRO_V1 = {**_MICRO, "env_kwargs": {"num_products": 200}}
PLANS = {
    "matrix": Plan(ENVS, (("grpo", tuple(range(10)), MAIN_ARMS), ("ppo", tuple(range(5)), MAIN_ARMS),
                          ("gigpo", tuple(range(5)), MAIN_ARMS), ("grpo", tuple(range(5)), SYNC_ARMS[1:]))),
    # the settings pilot: GRPO on the outcome alone, a few seeds, to see that it learns
    "pilot": Plan(ENVS, (("grpo", (0, 1), ("outcome",)),)),
    # seconds: checks the pipeline (tests)
    "micro": Plan({ALFWORLD: EnvPlan(60, {**COMMON, "num_groups": 2, "group_size": 2, "max_turns": 5}, clone=(2, 1),
                                     heldout=(("valid_seen", 3),)),
                   WEBSHOP: EnvPlan(40, {**COMMON, "num_groups": 2, "group_size": 2, "max_turns": 5}, heldout=(("test", 3),))},
                  (("grpo", (0,), ("outcome", "explorer-misaligned", "rank-misaligned")), ("ppo", (0,), ("explorer-misaligned",)))),
    # the regimes study: start (untrained / a partial clone) x policy (drrn / drrn-memory), helpful rewards
    "regimes": Plan(_regime_plans(), (("grpo", tuple(range(10)), REGIME_ARMS), ("ppo", tuple(range(5)), REGIME_ARMS),
                                      ("gigpo", tuple(range(5)), REGIME_ARMS))),
    # the explorer study on WebShop-v1 at equal total env steps (docs/results_explorer.md)
    "webshop-v1": Plan({WEBSHOP_V1: WEBSHOP_V1_PLAN}, (("grpo", tuple(range(10)), V1_GRPO_ARMS), ("ppo", tuple(range(5)), V1_PPO_ARMS),
                                                     ("gigpo", tuple(range(5)), V1_OTHER_ARMS)), fractions=V1_FRACTIONS),
    # its pilots: validation goals (--validation), seeds from 100, GRPO
    "explorer-pilot": Plan({WEBSHOP_V1: WEBSHOP_V1_PLAN}, (("grpo", (100, 101, 102), ("outcome", "outcome-nm", "dense-helpful",
                                                                                      "agent-w48-helpful", "agent-w48u2-helpful",
                                                                                      "agent-w24m4-helpful", "explorer-helpful",
                                                                                      "agent-w48u2-never-helpful", "agent-w48u2-win20-helpful")),
                                                          ("grpo", (100,), ("agent-w20-helpful", *list(PILOT_ARMS)[:7]))),
                           fractions=V1_FRACTIONS),
    # seconds: the v1 pipeline at equal total steps (tests)
    "micro-v1": Plan({WEBSHOP_V1: EnvPlan(60, _MICRO_V1, heldout=(("test", 3),), axis="total")},
                     (("grpo", (0,), ("outcome", "outcome-nm", "agent-helpful")),), fractions=V1_FRACTIONS),
    # seconds: one explorer cell per base and PPO's matched control, rerun against tests/algos/data/micro_v1_cells.json
    "micro-v1-bases": Plan({WEBSHOP_V1: EnvPlan(600, {**_MICRO_V1, "max_turns": 10}, heldout=(("test", 5),), axis="total",
                                                explorer=(("explorer_warmup_iterations", 2),))},
                           (("grpo", (0,), ("agent-helpful",)), ("ppo", (0,), ("agent-helpful", "outcome-nm-matched")),
                            ("gigpo", (0,), ("agent-helpful",))), fractions=V1_FRACTIONS),
    # the LLM matrix (docs/results_llm_matrix.md): tiny-alfworld at the quick start's scale, run folders, equal total env steps
    "llm-alfworld": Plan(regimes(ALFWORLD, [LLM_ALFWORLD]), (("grpo", tuple(range(10)), LLM_GRPO_ARMS), ("ppo", tuple(range(5)), LLM_PPO_ARMS),
                                                        ("gigpo", tuple(range(5)), LLM_OTHER_ARMS))),
    # seconds: the run-folder pipeline with the LLM (tests)
    "llm-micro": Plan(regimes(ALFWORLD, [replace(LLM_ALFWORLD, learner_steps=40, train_pool=4, heldout_episodes=2, explorer=(("explorer_warmup_iterations", 1),),
                                                 trainer={**LLM_TRAINER, "num_groups": 1, "group_size": 2, "max_turns": 5})]),
                      (("grpo", (0, 1), ("outcome", "agent-helpful")),)),
    # seconds: the regimes pipeline (tests); the plain drrn in both regimes
    "micro-regimes": Plan(regimes(ALFWORLD, [EnvPlan(60, _MICRO, clone=clone, heldout=(("valid_seen", 2),)) for clone in ((0, 0), (2, 1))]),
                          (("grpo", (0, 1), ("outcome", "dense-helpful", "explorer-helpful")),)),
    # every base x {outcome, dense, explorer} (and GRPO's rank swap) from tiny-alfworld, six quick-start iterations;
    # two seeds (the old preset ran one): rspo-gym compare's intervals over training seeds need two
    "learning": Plan(regimes(ALFWORLD, [LEARNING_ALFWORLD]), (("grpo", (0, 1), (*LEARNING_ARMS, "rank-aligned")), ("ppo", (0, 1), LEARNING_ARMS),
                                                             ("gigpo", (0, 1), LEARNING_ARMS))),
    # ten minutes on one GPU: SmolLM2-135M-Instruct through vLLM, GRPO outcome against the explorer (benchmarks/gpu_compare.sh)
    "gpu": Plan({ALFWORLD: GPU_ALFWORLD}, (("grpo", (0,), PAPER_ARMS),), fractions=(1.0,)),
    # the paper's scale: Qwen2.5-1.5B-Instruct, verl-agent's settings, both envs, GRPO and GiGPO, seeds 0-2
    "gpu-paper": Plan(PAPER_ENVS, (("grpo", (0, 1, 2), PAPER_ARMS), ("gigpo", (0, 1, 2), PAPER_ARMS)), fractions=PAPER_FRACTIONS),
}

def make_trainer(env_id: str, base: str, arm: Arm, seed: int, plan: EnvPlan, output_dir: str | None = None):
    """The trainer of one cell."""
    cls, settings = trainer_settings(env_id, base, arm, seed, plan, output_dir)
    return cls(env_id, **settings)


def trainer_settings(env_id: str, base: str, arm: Arm, seed: int, plan: EnvPlan, output_dir: str | None = None) -> tuple[type, dict]:
    """The trainer class of one cell and its keyword arguments (``model`` and config fields)."""
    from rspo_gym.algos import GiGPOTrainer, GRPOTrainer, PPOTrainer, RSPOTrainer

    process = arm.process(env_id, plan.helpful)
    settings = dict(plan.trainer, model=plan.model, seed=seed, dense_outcome="outcome", process_reward=process.name if process else None,
                    process_once=bool(process and process.once), process_weights=dict(process.weights or {}) if process else {},
                    env_kwargs={**plan.trainer.get("env_kwargs", {}), **({"split": "train"} if env_id in WEBSHOPS else {})},
                    output_dir=output_dir)
    if plan.task_type:
        settings["train_task_ids"] = typed_train_tasks(plan)[0]
    if plan.run_folders:  # the runs evaluate at the plan's points (run_folder_cell), on the plan's episodes
        split, ids = heldout_episodes(plan)
        settings.update(eval_split=split, eval_task_ids=ids, eval_tasks=len(ids), eval_every=0)
    groups, size = settings.pop("num_groups"), settings.pop("group_size")
    if base == "ppo":  # PPO needs no groups: the same episodes per iteration, one per task
        groups, size = groups * size, 1
    if arm.kind.startswith("rspo"):
        swap = arm.kind.split("-", 1)[1]
        extra = {}
        if swap == "explorer":
            if base == "ppo":  # one explorer episode per task needs a learner group: 2 + 1 per task
                groups, size = groups // 2, 2
            extra = {"explorer_group_size": max(1, size // 2), "explorer_sync_every": arm.sync, **dict(EARLIER_EXPLORER), **dict(arm.explorer),
                     **dict(plan.explorer)}
        return RSPOTrainer, dict(base=base, swap=swap, reward="outcome", num_groups=groups, group_size=size, **settings, **extra)
    if arm.extra_samples and base == "ppo":  # PPO's N + M: one more episode per pair of tasks, or (matched) the explorer arms' 2 + 1 per task
        groups, size = (groups // 2, 3) if arm.matched else (groups * 3 // 2, 1)
    elif arm.extra_samples:  # N + M: the explorer arms' M = N / 2
        size += max(1, size // 2)
    cls = {"grpo": GRPOTrainer, "ppo": PPOTrainer, "gigpo": GiGPOTrainer}[base]
    return cls, dict(reward=arm.kind, num_groups=groups, group_size=size, **settings)


def check_cells(plan: Plan) -> None:
    """Build the config of every cell of ``plan``, so a bad seed or ``--set`` fails here in one line
    (``UserError``), not in every worker after the matrix started."""
    from rspo_gym.training.presets import preset_overrides
    from rspo_gym.training.validation import unknown_fields_error

    for key, base, arm, seed in plan.todo():
        env_plan = replace(plan.envs[key].for_base(base), task_type=None)  # a task type's pool is a scan of seconds: ids are checked in the cell
        cls, settings = trainer_settings(env_of(key), base, ARMS[arm], seed, env_plan)
        settings.pop("model")
        config_class = cls.config_class
        preset = settings.pop("preset", None)
        if preset is not None:  # as the trainer: the preset's fields under the cell's own
            settings = {**preset_overrides(preset, env_of(key), config_class), **settings}
        unknown = set(settings) - {f.name for f in fields(config_class)}
        if unknown:
            raise unknown_fields_error(config_class, unknown)
        config_class(**settings)


def start_policy(trainer, env_id: str, seed: int, plan: EnvPlan, cache: Path | None) -> None:
    """Give the trainer its seed's start: the partial clone (made once per seed, cached), or nothing."""
    from rspo_gym.policies.scorer_warmstart import partial_clone

    episodes, epochs = plan.clone
    if not episodes:
        return
    path = cache / clone_name(env_id, seed, plan) if cache is not None else None
    task_ids = typed_train_tasks(plan)[1] if plan.task_type else None
    partial_clone(trainer.policy, env_id, episodes, epochs, seed=seed, history_length=trainer.config.history_length,
                  cache=path, task_ids=task_ids)
    if getattr(trainer, "explorer", None) is not None:
        trainer.sync_explorer()
    trainer.reset_reference()  # a KL reference (kl_coef > 0) anchors the start, not the untrained policy


def clone_name(env_id: str, seed: int, plan: EnvPlan) -> str:
    """The cached clone's file: ``<env>-seed<k>.pt`` (the matrix's plans), or per (clone episodes,
    epochs, policy, seed) for a regime plan, ``<env>-clone<episodes>x<epochs>-<model>-seed<k>.pt``."""
    if not plan.regime:
        return f"{env_id.split('/')[-1]}-seed{seed}.pt"
    episodes, epochs = plan.clone
    return f"{env_id.split('/')[-1]}-clone{episodes}x{epochs}-{plan.model}-seed{seed}.pt"


def heldout(trainer, env_id: str, plan: EnvPlan, temperature: float) -> list[list]:
    """``[split, task id, won, score, events]`` for every held-out task, in task order: the means
    over its ``plan.heldout_episodes`` episodes at ``temperature`` with the trainer's fixed
    evaluation seed (every cell plays the same streams). ``events`` counts what the misaligned
    reward would pay in the episode, whatever the cell trained on, so every arm's farming is
    measured the same way."""
    from rspo_gym.training.envs import EnvFactory, ProcessSettings, make_vector_env
    from rspo_gym.rollout.collector import collect

    config = trainer.collect_config(0, evaluation=True)
    config = replace(config, generation=replace(config.generation, temperature=temperature))
    counted = ProcessSettings(PROCESS["misaligned"][env_id])
    rows = []
    for split, count in plan.heldout:
        task_ids = [t for t in typed_task_ids(split, plan.task_type, count) if t < count] if plan.task_type else list(range(count))
        factory = EnvFactory(env_id, {**trainer.env_factory.kwargs, "split": split}, counted)
        played = task_ids * plan.heldout_episodes
        venv, _ = make_vector_env(factory, len(played), 1)
        rollout = collect(trainer.policy, venv, config, task_ids=played)
        venv.close()
        episodes: dict[int, list[tuple[float, float, float]]] = {t: [] for t in task_ids}
        for t in rollout.trajectories:
            episodes[t.task_id].append((float(t.won), t.score, sum(t.process_events.values())))
        rows += [[split, task, *(sum(column) / len(column) for column in zip(*episodes[task]))] for task in task_ids]
    return rows


def _evaluation(trainer, env_id: str, plan: EnvPlan, temperature: float, learner: int, total: int) -> dict:
    per_task = heldout(trainer, env_id, plan, temperature)
    n = len(per_task)
    return {"learner_steps": learner, "total_steps": total, "temperature": temperature, "episodes": plan.heldout_episodes,
            "success": sum(r[2] for r in per_task) / n, "score": sum(r[3] for r in per_task) / n, "per_task": per_task}


def run_cell(key: str, base: str, arm_name: str, seed: int, plan: Plan, cache: Path | None = None,
             results: Path | None = None) -> dict:
    """Train one cell of plan key ``key``, evaluating it at every point of the plan (run in a fresh
    worker process); a plan that keeps policies writes its final one under ``results``."""
    import tempfile

    import torch

    torch.set_num_threads(1)
    env_id = env_of(key)
    arm, env_plan = ARMS[arm_name], plan.envs[key].for_base(base)
    started = time.perf_counter()
    budget = env_plan.learner_steps
    points = [round(f * budget) for f in plan.fractions]
    axis = env_plan.axis
    # cells of the explorer study also count wins per iteration: a share of wins is a ratio of sums
    counts_wins = bool(arm.explorer or arm.extra_samples or axis != "learner")
    group_keys = ("all_fail", "explorer_wins", "explorer_rescued") + (("wins", "explorer_win_count") if counts_wins else ())
    evals, train_curve, groups, counted = [], [], [], {"learner": 0, "total": 0}
    mechanism = []  # the explorer's replay, per iteration: MECHANISM_KEYS
    with tempfile.TemporaryDirectory() as out:
        trainer = make_trainer(env_id, base, arm, seed, env_plan, output_dir=out)
        start_policy(trainer, env_id, seed, env_plan, cache)

        def after_iteration(_trainer, metrics) -> bool:
            explorer = int(metrics.get("explorer/env_steps", 0))
            counted["learner"] += int(metrics["env_steps"]) - explorer
            counted["total"] += int(metrics["env_steps"])
            train_curve.append([counted["learner"], counted["total"], metrics["rollout/success"], metrics["rollout/score"],
                                metrics["rollout/process_events"], metrics["rollout/process_return"],
                                metrics.get("explorer/success"), metrics.get("explorer/process_events")])
            groups.append([counted["learner"], *(metrics.get(f"groups/{k}") for k in group_keys)]
                          + ([metrics.get("explorer/synced")] if counts_wins else []))
            if "explorer/is_weight_win" in metrics:
                mechanism.append([counted["learner"], *(metrics[f"explorer/{k}"] for k in MECHANISM_KEYS)])
            while points and counted[axis] >= points[0]:
                if points[0] == budget:  # the final point also at verl-agent's validation temperature
                    evals.append(_evaluation(trainer, env_id, env_plan, plan.final_temperature, counted["learner"], counted["total"]))
                evals.append(_evaluation(trainer, env_id, env_plan, plan.curve_temperature, counted["learner"], counted["total"]))
                points.pop(0)
            return bool(points)

        trainer.learn(10**6, callback=after_iteration)
        transfer = [] if getattr(trainer, "transfer", None) is None else [trainer.transfer, trainer.measure_transfer(plan.final_temperature)]
        trainer.close()
        if env_plan.keep_policies and results is not None:
            keep_policy(Path(trainer.output_dir) / "policy", policy_path(results, key, base, arm_name, seed))
    process = arm.process(env_id, env_plan.helpful)
    record = {"env": env_id, **({"regime": env_plan.regime_info} if env_plan.regime else {}), "base": base, "arm": arm_name,
              "kind": arm.kind, "process_reward": process.name if process else None}
    if env_plan.regime or arm.role == "helpful":  # the matrix's arms' cells as they were
        record["process_once"] = bool(process and process.once)
        if process and process.weights:
            record["process_weights"] = dict(process.weights)
    if counts_wins:  # the earlier arms' cells as they were
        record.update({"explorer": dict(arm.explorer), "extra_samples": arm.extra_samples, "axis": env_plan.axis})
        if arm.matched:  # the earlier arms' cells as they were
            record["matched"] = True
    record.update({"sync": arm.sync if arm.has_explorer else None, "seed": seed, "learner_steps": counted["learner"],
                   "total_steps": counted["total"], "evals": evals, "train_curve": train_curve})
    if env_plan.regime or counts_wins:
        record["groups"] = groups
    if mechanism:
        record["mechanism"] = {"keys": ["learner_steps", *MECHANISM_KEYS], "rows": mechanism}
    if transfer:  # at the curve and at the final temperature (``TRANSFER``)
        record["transfer"] = transfer
    return {**record, "seconds": time.perf_counter() - started, "peak_rss_mb": peak_rss_mb()}


#: what the explorer's replay does to its learner, per iteration (``docs/metrics.md``, ``explorer/<key>``)
MECHANISM_KEYS = ("replay_win_tokens", "is_weight_win", "is_weight_win_low", "replay_loss_tokens", "is_weight_loss", "is_weight_loss_low",
                  "replay_win_logp_tokens", "replay_win_logp_gain", "own_win_logp_tokens", "own_win_logp_gain",
                  "revisits_explorer_only", "revisit_success_explorer_only", "revisits_nobody", "revisit_success_nobody")


def heldout_episodes(plan: EnvPlan) -> tuple[str, list[int]]:
    """A run-folder plan's held-out split and the task ids its evaluations play: every held-out
    task (of the plan's type) ``heldout_episodes`` times, each position with its own episode seed,
    so every cell and the start play the same episodes (``rspo-gym compare`` averages a task's
    episodes into one column, and resamples tasks)."""
    if len(plan.heldout) != 1:
        raise ValueError(f"a run-folder plan holds out on one split (rspo-gym compare compares one), got {plan.heldout}")
    split, count = plan.heldout[0]
    ids = [t for t in typed_task_ids(split, plan.task_type, count) if t < count] if plan.task_type else list(range(count))
    return split, ids * plan.heldout_episodes


def run_folder(out: Path, key: str, base: str, arm: str, seed: int) -> Path:
    """``runs/<env>[-<regime>]-<base>-<arm>-seed<k>/``: a run-folder cell."""
    return out / "runs" / f"{short(key)}-{base}-{arm}-seed{seed}"


def start_record_path(out: Path, key: str) -> Path:
    """``starts/<env>[-<regime>].record.json``: a run-folder plan's start, measured once."""
    return out / "starts" / f"{short(key)}.record.json"


def is_done(folder: Path) -> bool:
    """A run-folder cell is finished once its ``cell.json`` (the last thing it writes) is whole."""
    return is_record(read_record(folder / "cell.json"), CELL_JSON_KEYS)


#: What every record of a whole cell, start or run-folder ``cell.json`` holds: a file without them
#: (cut off by a kill or a full disk, or not written here) is run again.
CELL_KEYS = ("env", "base", "arm", "seed", "evals")
START_KEYS = ("env", "seed", "evals")
CELL_JSON_KEYS = ("seconds",)


def read_record(path: Path) -> dict | None:
    """The JSON object in ``path``; None when it is missing, unreadable, cut off or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def is_record(record: dict | None, keys: tuple[str, ...]) -> bool:
    """Whether ``record`` is whole: it has ``keys``, and its ``evals`` (if any) is a list of
    evaluations, each with its temperature."""
    if record is None or not all(k in record for k in keys):
        return False
    evals = record.get("evals", [])
    return isinstance(evals, list) and all(isinstance(e, dict) and "temperature" in e for e in evals)


def measure_start(key: str, plan: Plan) -> dict:
    """The evaluation record of a run-folder plan's start (iteration 0, no env steps): the same
    policy and episodes for every seed and arm (the preset model, the fixed evaluation seed), so it
    is measured once (a fresh worker process)."""
    import torch

    torch.set_num_threads(1)
    env_id, env_plan = env_of(key), plan.envs[key]
    trainer = make_trainer(env_id, "grpo", ARMS["outcome"], 0, env_plan)
    try:
        _, record = trainer.evaluate_record()
    finally:
        trainer.close()
    return record


def run_folder_cell(key: str, base: str, arm_name: str, seed: int, plan: Plan, out: Path) -> dict:
    """Train one cell of a run-folder plan into its run folder, evaluating its policy (records
    in ``evaluations/``) at each of the plan's points of the budget, on the plan's ``axis``; then
    copy the start's record in as iteration 0 and write ``cell.json`` (a fresh worker process). A
    folder an interrupted cell left is removed first: a cell is minutes, and rerunning it whole
    keeps its records the uninterrupted run's."""
    import shutil

    import torch

    from rspo_gym.quickstart import cpu_description
    from rspo_gym.training.eval_records import write_evaluation

    torch.set_num_threads(1)
    env_id = env_of(key)
    arm, env_plan = ARMS[arm_name], plan.envs[key].for_base(base)
    folder = run_folder(out, key, base, arm_name, seed)
    if folder.exists():
        shutil.rmtree(folder)
    started = time.perf_counter()
    budget, axis = env_plan.learner_steps, env_plan.axis
    points = [round(f * budget) for f in plan.fractions]
    counted = {"learner": 0, "total": 0}
    trainer = make_trainer(env_id, base, arm, seed, env_plan, output_dir=str(folder))

    def after_iteration(trainer, metrics) -> bool:
        counted["learner"] += int(metrics["env_steps"]) - int(metrics.get("explorer/env_steps", 0))
        counted["total"] += int(metrics["env_steps"])
        if points and counted[axis] >= points[0]:  # a point is measured once, at the first iteration past it
            _, record = trainer.evaluate_record(iteration=int(metrics["iteration"]), env_steps=counted["total"])
            write_evaluation(folder, record)
        while points and counted[axis] >= points[0]:
            points.pop(0)
        return bool(points)

    try:
        history = trainer.learn(10**6, callback=after_iteration)
    finally:
        trainer.close()
    write_evaluation(folder, json.loads(start_record_path(out, key).read_text()))
    (folder / "checkpoint.pt").unlink(missing_ok=True)  # finished: nothing to resume, and it is the optimizer's state
    shutil.rmtree(folder / "checkpoint_tensors", ignore_errors=True)
    process = arm.process(env_id, env_plan.helpful)
    cell = {"env": env_id, "regime": env_plan.regime_info, "base": base, "arm": arm_name, "kind": arm.kind,
            "process_reward": process.name if process else None, "process_once": bool(process and process.once),
            "explorer": dict(arm.explorer) | dict(env_plan.explorer) if arm.has_explorer else {}, "extra_samples": arm.extra_samples,
            "axis": axis, "seed": seed, "iterations": len(history), "learner_steps": counted["learner"], "total_steps": counted["total"],
            "generated_tokens": int(sum(row["generated_tokens"] for row in history)), "seconds": time.perf_counter() - started,
            "peak_rss_mb": peak_rss_mb(), "cpu": cpu_description(), **({"matched": True} if arm.matched else {})}
    write_json(folder / "cell.json", cell)
    return cell


def evaluate_start(key: str, seed: int, plan: Plan, cache: Path | None = None, episode_counts: tuple[int, ...] = (1,)) -> dict:
    """The seed's starting policy, held out as the cells are (both temperatures), at each of
    ``episode_counts`` episodes per task (the bases' own, ``EnvPlan.episode_counts``). The start
    is the env plan's: a base's own settings are training settings, not a different start."""
    import torch

    torch.set_num_threads(1)
    env_id, env_plan = env_of(key), plan.envs[key]
    trainer = make_trainer(env_id, "grpo", ARMS["outcome"], seed, env_plan)
    start_policy(trainer, env_id, seed, env_plan, cache)
    evals = [_evaluation(trainer, env_id, replace(env_plan, heldout_episodes=k), t, 0, 0)
             for k in episode_counts for t in (plan.curve_temperature, plan.final_temperature)]
    trainer.close()
    return {"env": env_id, **({"regime": env_plan.regime_info} if env_plan.regime else {}), "base": "start", "arm": "start",
            "kind": "start", "process_reward": None, "seed": seed, "evals": evals}


def policy_path(out: Path, key: str, base: str, arm: str, seed: int) -> Path:
    """``policies/<cell>/``: a cell's final policy, where its plan keeps them."""
    return out / "policies" / cell_path(out, key, base, arm, seed).stem


def keep_policy(saved: Path, dest: Path) -> None:
    """Copy a run's ``policy/`` to ``dest`` whole or not at all (a kill leaves no half policy)."""
    import shutil

    from rspo_gym.atomic import atomic_folder

    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_folder(dest) as staging:
        shutil.copytree(saved, staging, dirs_exist_ok=True)


def cell_path(out: Path, key: str, base: str, arm: str, seed: int) -> Path:
    """``cells/<env>-<base>-<arm>-seed<k>.json``; a regime plan's ``cells/<env>-<regime>-<base>-<arm>-seed<k>.json``."""
    return out / "cells" / f"{short(key)}-{base}-{arm}-seed{seed}.json"


def start_path(out: Path, key: str, seed: int) -> Path:
    """``starts/<env>-seed<k>.json``; a regime plan's ``starts/<env>-<regime>-seed<k>.json``."""
    return out / "starts" / f"{short(key)}-seed{seed}.json"


def start_episode_counts(out: Path, key: str, seed: int) -> set[int]:
    """The episodes per task the seed's start has been measured at (none: not yet)."""
    record = read_record(start_path(out, key, seed))
    return {e.get("episodes", 1) for e in record["evals"]} if is_record(record, START_KEYS) else set()


def load_results(out: Path) -> tuple[list[dict], list[dict]]:
    """Every finished cell and start under ``out``; a file that is not a whole record is named on
    stderr in one line and left out (the matrix's next run runs it again)."""
    def read(folder: str, keys: tuple[str, ...]) -> list[dict]:
        records = []
        for path in sorted((out / folder).glob("*.json")):
            record = read_record(path)
            if is_record(record, keys):
                records.append(record)
            else:
                print(f"skipped {path}: not a whole record (cut off, or not written by rspo_matrix.py); rspo_matrix.py runs it again",
                      file=sys.stderr)
        return records

    return read("cells", CELL_KEYS), read("starts", START_KEYS)


def parse_helpful(values: list[str]) -> dict[str, ProcessChoice]:
    """``--helpful ENV=NAME[:once]`` (ENV: ``ALFWorld-v0`` or ``rspo/ALFWorld-v0``) -> env id -> choice."""
    from rspo_gym.envs import process_rewards

    ids = {e.split("/")[-1].lower(): e for e in (ALFWORLD, *WEBSHOPS)} | {e.lower(): e for e in (ALFWORLD, *WEBSHOPS)}
    out = {}
    for value in values:
        env, _, spec = value.partition("=")
        name, _, flag = spec.partition(":")
        if env.lower() not in ids or not name or flag not in ("", "once"):
            raise ValueError(f"--helpful {value!r}: expected ENV=NAME[:once] with ENV one of {sorted({*ids.values()})}")
        env_id = ids[env.lower()]
        if name not in process_rewards(env_id):
            raise ValueError(f"--helpful {value!r}: {env_id}'s process rewards are {sorted(process_rewards(env_id))}")
        out[env_id] = ProcessChoice(name, once=flag == "once")
    return out


def select_regimes(envs: dict, names: list[str]) -> dict:
    """The regime plans among ``envs`` whose regime name, start or policy is one of ``names``
    (plans without a regime are kept); a name matching none is an error."""
    matched = {n: False for n in names}
    kept = {}
    for key, plan in envs.items():
        hits = {plan.regime_name, plan.start, plan.model} & set(names) if plan.regime else set()
        for n in hits:
            matched[n] = True
        if not plan.regime or hits:
            kept[key] = plan
    unknown = [n for n, hit in matched.items() if not hit]
    if unknown:
        known = sorted({p.regime_name for p in envs.values() if p.regime})
        raise ValueError(f"--regimes {' '.join(unknown)}: no such regime, start or policy (regimes: {', '.join(known) or 'none in this preset'})")
    return kept


def _select(plan: Plan, args: argparse.Namespace) -> Plan:
    envs = {e: p for e, p in plan.envs.items() if not args.envs or env_of(e) in args.envs}
    if args.regimes:
        envs = select_regimes(envs, args.regimes)
    settings = {**({"learning_rate": args.lr} if args.lr is not None else {}), **_config_overrides(args.set)}
    fields = {**({"learner_steps": args.steps} if args.steps is not None else {}),
              **({"heldout_episodes": args.heldout_episodes} if args.heldout_episodes is not None else {})}
    if settings or fields:
        envs = {e: p.overridden(settings, **fields) for e, p in envs.items()}
    if args.task_type:
        envs = {e: replace(p, task_type=args.task_type) if env_of(e) == ALFWORLD else p for e, p in envs.items()}
    if args.validation:  # choose settings on validation tasks: the held-out ones are for the report only
        envs = {e: replace(p, heldout=tuple((VALIDATION[env_of(e)], count) for _, count in p.heldout)) for e, p in envs.items()}
    if args.helpful:
        helpful = parse_helpful(args.helpful)
        envs = {e: replace(p, helpful=helpful[env_of(e)]) if env_of(e) in helpful else p for e, p in envs.items()}
    envs = {f"{env_of(e)}@{p.regime_name}" if p.regime else e: p for e, p in envs.items()}  # --set model=... renames a regime
    cells = []
    for base, seeds, arms in plan.cells:
        if args.bases and base not in args.bases:
            continue
        seeds = tuple(args.seeds) if args.seeds else seeds
        arms = tuple(a for a in arms if not args.arms or a in args.arms)
        cells.append((base, seeds, arms))
    return replace(plan, envs=envs, cells=tuple(cells))


#: A file of this name in a run-folder matrix's ``--out`` ends the run between cells: the running
#: cells finish and are kept, no other starts (a sitting ends without losing a cell in flight).
STOP_FILE = "STOP"


def run_folder_matrix(plan: Plan, out: Path, jobs: int) -> int:
    """Run a run-folder plan: each env plan's start once (``measure_start``), then every cell not
    finished (``is_done``), ``jobs`` at a time in fresh processes with torch's AVX2 kernels and
    MKL's AVX2 branch (as the quick start: the same numbers on every Intel CPU). Creating
    ``out/STOP`` starts no further cell; the next run removes it and goes on."""
    from rspo_gym.quickstart import pin_cpu_kernels

    if not all(p.run_folders for p in plan.envs.values()):
        raise ValueError("a preset's plans are all run-folder plans or none")
    pin_cpu_kernels("avx2")  # inherited by the spawned workers, which load torch after it
    for folder in ("starts", "runs"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    stop_file = out / STOP_FILE
    if stop_file.exists():
        stop_file.unlink()
        print(f"removed {stop_file}, left by the run it stopped", flush=True)
    starts = [key for key in plan.envs if read_record(start_record_path(out, key)) is None]
    todo = [key for key in plan.todo() if not is_done(run_folder(out, *key))]
    print(f"{len(starts)} starts and {len(todo)} cells to run ({len(plan.todo())} in the plan) in {out}", flush=True)

    def keep(key: tuple, result: dict, done: int, total: int) -> None:
        kind, key = key
        if kind == "start":
            write_json(start_record_path(out, *key), result)
            print(f"[{done}/{total}] start {key[0]}: held-out success {sum(result['success']) / len(result['success']):.3f}", flush=True)
            return
        final = json.loads(sorted((run_folder(out, *key) / "evaluations").glob("*.json"))[-1].read_text())
        print(f"[{done}/{total}] cell {' '.join(map(str, key))}: held-out success {sum(final['success']) / len(final['success']):.3f} "
              f"({result['seconds']:.0f} s)", flush=True)

    failed = run_fresh([(("start", (key,)), measure_start, (key, plan)) for key in starts], jobs, keep, stop_file.exists)
    if not failed:
        failed = run_fresh([(("cell", key), run_folder_cell, (*key, plan, out)) for key in todo], jobs, keep, stop_file.exists)
    if failed:
        print(f"{failed} job(s) failed; rerun to retry them (finished cells are kept)", file=sys.stderr)
    return 1 if failed else 0


def _refuse(message: str) -> None:
    """End the run before any job: ``message`` in one line on stderr, exit status 2 (argparse's)."""
    print(f"rspo_matrix.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _positive(text: str) -> int:
    """argparse's type of a count: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PLANS), default="matrix")
    parser.add_argument("--out", type=Path, default=None, help="default: results/rspo_matrix/<preset>")
    parser.add_argument("--jobs", type=_positive, default=1, help="cells trained at once (each in its own process, one thread)")
    parser.add_argument("--envs", nargs="+", default=None)
    parser.add_argument("--bases", nargs="+", default=None, choices=BASES)
    parser.add_argument("--arms", nargs="+", default=None, choices=sorted(ARMS))
    parser.add_argument("--seeds", nargs="+", type=int, default=None, help="these seeds instead of each entry's")
    parser.add_argument("--lr", type=float, default=None, help="learning rate of every cell (pilots)")
    parser.add_argument("--steps", type=_positive, default=None, help="learner env steps per cell (pilots)")
    parser.add_argument("--task-type", default=None, help="ALFWorld: train, clone and hold out on this task type only (pilots)")
    parser.add_argument("--heldout-episodes", type=_positive, default=None, help="episodes per held-out task, averaged (pilots)")
    parser.add_argument("--validation", action="store_true",
                        help="measure on each env's validation split (ALFWorld valid_seen, WebShop valid) instead of the held-out "
                             "one: pilots choose settings there (use another --out)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="any trainer setting of every cell, as `rspo-gym train --set` (pilots; repeatable)")
    parser.add_argument("--regimes", nargs="+", default=None, metavar="NAME",
                        help="only these regimes (a regime's name, e.g. clone-50-drrn-memory, or a start or policy: "
                             "untrained, drrn-memory) of a regimes preset")
    parser.add_argument("--helpful", action="append", default=[], metavar="ENV=NAME[:once]",
                        help="the helpful arms' process reward on ENV (e.g. ALFWorld-v0=events:once; repeatable); "
                             "default HELPFUL. Use another --out when changing it: finished cells are not rerun")
    args = parser.parse_args(argv)
    out = args.out or Path("results/rspo_matrix") / args.preset
    if out.exists() and not out.is_dir():
        _refuse(f"--out {out}: not a folder (an existing file)")
    try:
        plan = _select(PLANS[args.preset], args)
        check_cells(plan)  # UserError is a ValueError
    except ValueError as error:
        _refuse(str(error))
    run_folders = any(p.run_folders for p in plan.envs.values())
    try:
        for folder in ("starts", "runs") if run_folders else ("cells", "starts", "clones"):
            (out / folder).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        _refuse(f"--out {out}: cannot make its folders ({error.strerror or error})")
    if run_folders:
        return run_folder_matrix(plan, out, args.jobs)
    seeds = sorted({s for _, seeds, _ in plan.cells for s in seeds})
    measured = {(e, s): start_episode_counts(out, e, s) for e in plan.envs for s in seeds}
    starts = [(e, s, missing) for (e, s), have in measured.items()
              if (missing := tuple(k for k in plan.envs[e].episode_counts if k not in have))]
    todo = [key for key in plan.todo() if not is_record(read_record(cell_path(out, *key)), CELL_KEYS)]  # resumable
    print(f"{len(starts)} starts and {len(todo)} cells to run ({len(plan.todo())} in the plan) in {out}", flush=True)
    def keep(key: tuple, result: dict, done: int, total: int) -> None:
        kind, key = key
        before = read_record(start_path(out, *key)) if kind == "start" else None
        if is_record(before, START_KEYS):  # measured before at other episode counts
            result = {**result, "evals": before["evals"] + result["evals"]}
        write_json(start_path(out, *key) if kind == "start" else cell_path(out, *key), result)
        final = [e for e in result["evals"] if e["temperature"] == plan.curve_temperature][-1]
        print(f"[{done}/{total}] {kind} {' '.join(map(str, key))}: held-out success {final['success']:.3f} "
              f"score {final['score']:.3f}" + (f" ({result['seconds']:.0f} s)" if kind == "cell" else ""), flush=True)

    jobs = [(("start", (e, s)), evaluate_start, (e, s, plan, out / "clones", missing)) for e, s, missing in starts]
    jobs += [(("cell", key), run_cell, (*key, plan, out / "clones", out)) for key in todo]
    failed = run_fresh(jobs, args.jobs, keep)
    if failed:
        print(f"{failed} job(s) failed; rerun to retry them (finished cells are kept)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
