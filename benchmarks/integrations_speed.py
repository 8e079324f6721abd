"""Env steps/s through each peer's env loop against our own collector, with a scripted policy.

Every loop plays the same ``--tasks`` tasks (``valid_seen`` ALFWorld, ``test`` WebShop at
``--num-products``) with the same scripted policy, the env expert's actions recorded once per task
and replayed, so the episodes, their lengths and the env work are the same everywhere and what
differs is the loop around the env: prompt rendering, message building, the adapter's
bookkeeping, and whatever the peer's own loop does (OpenRLHF's executor tokenizes every feedback).
The tokenizer is the offline ``tiny`` one wherever a loop tokenizes.

- ``env``: ``gym.make`` + ``step`` alone, no prompt: the floor.
- ``collector``: ``rspo_gym.rollout.collect`` over a ``GroupedVectorEnv`` (one env per task), the
  replies of a scripted backend tokenized, decoded and parsed as a model's would be, every prompt
  rendered and tokenized: the baseline the overhead column is measured against.
- ``episode``: ``rspo_gym.integrations.episode.Episode`` alone (what every adapter wraps).
- ``verl-agent``: ``build_*_envs`` vector envs stepped as verl-agent's ``TrajectoryCollector`` does.
- ``trl``: the ``environment_factory`` class: ``reset(**row)``, then ``act`` per turn (TRL's tool
  loop calls these; its generation and tokenization are TRL's, not timed).
- ``skyrl``: ``skyrl_gym.make`` + ``init`` + ``step`` as SkyRL's generator (needs ``[skyrl]``).
- ``openrlhf``: OpenRLHF's own ``MultiTurnAgentExecutor.execute`` over our agent file, a scripted
  engine answering the expert's action (needs OpenRLHF importable).
- ``art``: ``rollout`` into ``art.Trajectory`` with a scripted chat client (needs ``openpipe-art``).
- ``verifiers``: ``RspoEnv.run`` with a scripted player (needs ``verifiers``).

A loop whose peer is not installed is left out of the table. Times are CPU seconds of this process
(``time.process_time``: every loop runs in it, and a shared machine's load moves wall times far
more), each loop timed whole, construction of its envs included. The two last columns are each
loop's time per step against the collector's and against the bare env's (negative: faster).
Each loop first runs once over every task (imports, catalogs, caches), then ``--repeats`` times,
round-robin with the others, the best kept.

    python benchmarks/integrations_speed.py --tasks 32 --repeats 3

Writes JSON (``--out``, default ``results/benchmarks/integrations_speed.json``) and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gymnasium as gym  # noqa: E402
from common import write_json  # noqa: E402

import rspo_gym  # noqa: E402,F401
from rspo_gym.integrations.episode import Episode  # noqa: E402

ENVS = {"rspo/ALFWorld-v0": {"split": "valid_seen"}, "rspo/WebShop-v0": {"split": "test"}}


def _expert(env) -> str:
    return env.unwrapped.expert_action()


def record_plans(env_id, kwargs, tasks) -> dict[int, list[str]]:
    """The expert's actions for each task, played once: the scripted policy every loop replays."""
    env = gym.make(env_id, **kwargs)
    plans = {}
    for task in tasks:
        env.reset(options={"task_id": task})
        plans[task], done = [], False
        while not done:
            action = _expert(env)
            plans[task].append(action)
            _, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
    return plans


class Replay:
    """One task's recorded actions, in order."""

    def __init__(self, plan):
        self.actions = iter(plan)

    def next(self) -> str:
        return next(self.actions)


class ScriptedBackend:
    """A ``GenerationBackend`` answering each active sub-env's next recorded action, tokenized."""

    def __init__(self, venv, tokenizer, replays):
        self.venv, self.tokenizer, self.replays = venv, tokenizer, replays

    def generate(self, prompt_ids, config, allowed=None):
        from rspo_gym.rollout.generation import GenerationOutput

        texts = [replay.next() for replay, live in zip(self.replays, self.venv.active) if live]
        ids = [self.tokenizer(t, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id] for t in texts]
        return GenerationOutput(texts=texts, response_ids=ids, logprobs=[[0.0] * len(x) for x in ids])


def run_env(env_id, kwargs, plans, tokenizer):
    env = gym.make(env_id, **kwargs)
    steps = 0
    for task, plan in plans.items():
        env.reset(options={"task_id": task})
        for action in plan:
            env.step(action)
            steps += 1
    return steps


def run_collector(env_id, kwargs, plans, tokenizer):
    from rspo_gym.rollout import CollectConfig, GroupedVectorEnv, collect

    venv = GroupedVectorEnv(env_id, num_groups=len(plans), group_size=1, env_kwargs=kwargs)
    policy = ScriptedBackend(venv, tokenizer, [Replay(plan) for plan in plans.values()])
    policy.tokenizer = tokenizer
    rollout = collect(policy, venv, CollectConfig(), task_ids=list(plans))
    venv.close()
    return len(rollout.rows)


def run_episode(env_id, kwargs, plans, tokenizer):
    steps = 0
    episode = Episode(env_id=env_id, env_kwargs=kwargs)
    for task, plan in plans.items():
        episode.reset(task)
        for action in plan:
            episode.step(action)
            steps += 1
    return steps


def run_verl_agent(env_id, kwargs, plans, tokenizer):
    from rspo_gym.integrations.verl_agent import build_alfworld_envs, build_webshop_envs

    replays = [Replay(plan) for plan in plans.values()]
    n = len(plans)
    if env_id.endswith("ALFWorld-v0"):
        envs = build_alfworld_envs(None, 0, n, 1, {}, is_train=False, env_kwargs={"eval_dataset": "eval_in_distribution"})
        for slot, task in zip(envs.envs, plans):
            slot._order = [task]  # the benchmark's tasks instead of the seeded game list's
        envs.reset()
        step, limit = envs.step, 50
    else:
        envs = build_webshop_envs(0, n, 1, {}, is_train=False, env_kwargs={"num_products": kwargs.get("num_products"),
                                                                          "task_version": int(env_id[-1])})
        envs.reset(goal_indices=list(plans))
        step, limit = envs.step, 15
    live, steps = [True] * n, 0
    for _ in range(limit):
        dones = step([replay.next() if on else "look" for replay, on in zip(replays, live)])[-2]
        steps += sum(live)
        live = [on and not done for on, done in zip(live, dones)]
        if not any(live):
            break
    return steps


def run_trl(env_id, kwargs, plans, tokenizer):
    from rspo_gym.integrations.trl import environment_factory

    env = environment_factory(env_id, env_kwargs=kwargs)()
    steps = 0
    for task, plan in plans.items():
        env.reset(prompt=[], task_id=task)
        for action in plan:
            env.act(action)
            steps += 1
        env.get_reward()
    return steps


def run_skyrl(env_id, kwargs, plans, tokenizer):
    import skyrl_gym
    from rspo_gym.integrations.skyrl import register_skyrl_envs

    name = "rspo_alfworld" if env_id.endswith("ALFWorld-v0") else "rspo_webshop"
    register_skyrl_envs({name: env_id})  # the benchmark's WebShop version, whatever the default
    steps = 0
    for task, plan in plans.items():
        env = skyrl_gym.make(name, env_config={"env_kwargs": kwargs}, extras={"task_id": task})
        chat, _ = env.init([{"role": "user", "content": ""}])
        for action in plan:
            out = env.step(action)
            chat += out["observations"]
            steps += 1
        env.close()
    return steps


def run_openrlhf(env_id, kwargs, plans, tokenizer):
    from rspo_gym.integrations.openrlhf import agent_classes

    _, executor_cls = agent_classes({"env_id": env_id, "env_kwargs": kwargs}, tokenizer)

    class Engine:
        def __init__(self, replay):
            self.replay = replay

        async def generate(self, tokens, params, multi_modal_data=None):
            action = self.replay.next()
            ids = tokenizer(action, add_special_tokens=False)["input_ids"]
            return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, text=action, finish_reason="stop")])

    executor = executor_cls()
    steps = 0
    for task, plan in plans.items():
        params = SimpleNamespace(logprobs=None, max_tokens=None)
        result = asyncio.run(executor.execute("", json.dumps({"task_id": task}), params, 10**7, tokenizer, Engine(Replay(plan))))
        steps += len(result["action_ranges"])
    return steps


def run_art(env_id, kwargs, plans, tokenizer):
    from openai.types.chat import ChatCompletion

    from rspo_gym.integrations.art import rollout

    class Client:
        def __init__(self, replay):
            self.replay = replay
            self.chat = self.completions = self

        async def create(self, *, model, messages, **kw):
            return ChatCompletion.model_validate({"id": "x", "object": "chat.completion", "created": 0, "model": model,
                                                  "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": self.replay.next()}}]})

    steps = 0
    for task, plan in plans.items():
        trajectory = asyncio.run(rollout(SimpleNamespace(name="scripted"), task, env_id=env_id, client=Client(Replay(plan)), env_kwargs=kwargs))
        steps += trajectory.metrics["turns"]
    return steps


def run_verifiers(env_id, kwargs, plans, tokenizer):
    from rspo_gym.integrations import verifiers_taskset as rspo_vf

    env = rspo_vf.load_environment(env_id=env_id, env_kwargs=kwargs)
    by_id = {task.data.info["task_id"]: task for task in env.taskset.include(idx=[f"0:{max(plans) + 1}"])}
    steps = 0
    for task_id, plan in plans.items():
        replay, info = Replay(plan), {}

        class Player:
            @asynccontextmanager
            async def interaction(self, task):
                class Interaction:
                    trace = SimpleNamespace(info=info, record_reward=lambda *a: None)

                    async def turn(self, message=None):
                        return SimpleNamespace(terminated=False, last_reply=replay.next())

                yield Interaction()

        asyncio.run(env.run(by_id[task_id], SimpleNamespace(player=Player())))
        steps += info["turns"]
    return steps


LOOPS = {"env": run_env, "collector": run_collector, "episode": run_episode, "verl-agent": run_verl_agent, "trl": run_trl,
         "skyrl": run_skyrl, "openrlhf": run_openrlhf, "art": run_art, "verifiers": run_verifiers}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--tasks", type=int, default=16, help="tasks per env (ids 0..n-1)")
    parser.add_argument("--num-products", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--loops", nargs="+", default=list(LOOPS), choices=list(LOOPS))
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/integrations_speed.json"))
    args = parser.parse_args(argv)
    from rspo_gym.policies.models import load_model

    _, tokenizer = load_model("tiny", device="cpu")
    results = []
    for env_id, kwargs in ENVS.items():
        kwargs = dict(kwargs, num_products=args.num_products) if "WebShop" in env_id else dict(kwargs)
        plans = record_plans(env_id, kwargs, range(args.tasks))
        rows, ready = {}, []
        for name in args.loops:
            try:
                LOOPS[name](env_id, kwargs, plans, tokenizer)  # warm-up over every task: imports, catalogs, caches
            except ImportError as error:
                print(f"{env_id} {name}: skipped ({error})")
                continue
            ready.append(name)
        for _ in range(args.repeats):  # round-robin, so a drifting machine load touches every loop alike
            for name in ready:
                start = time.process_time()
                steps = LOOPS[name](env_id, kwargs, plans, tokenizer)
                seconds = time.process_time() - start
                if name not in rows or seconds < rows[name]["seconds"]:
                    rows[name] = {"env": env_id, "loop": name, "steps": steps, "seconds": seconds, "steps_per_s": steps / seconds}
        for row in rows.values():
            for base in ("collector", "env"):
                if base in rows:
                    row[f"vs_{base}"] = (row["seconds"] / row["steps"]) / (rows[base]["seconds"] / rows[base]["steps"]) - 1
            results.append(row)
    print(f"{'env':18} {'loop':11} {'steps':>6} {'steps/CPU s':>12} {'vs collector':>13} {'vs env':>9}")
    for row in results:
        versus = [f"{100 * row[k]:+.0f} %" if k in row else "" for k in ("vs_collector", "vs_env")]
        print(f"{row['env']:18} {row['loop']:11} {row['steps']:6d} {row['steps_per_s']:12.0f} {versus[0]:>13} {versus[1]:>9}")
    write_json(args.out, {"tasks": args.tasks, "num_products": args.num_products, "repeats": args.repeats, "results": results})
    return results


if __name__ == "__main__":
    main()
