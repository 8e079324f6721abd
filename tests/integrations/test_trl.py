"""TRL's own ``GRPOTrainer`` on our envs: its tool loop (``environment_factory``) with a scripted
policy playing whole ALFWorld and WebShop episodes, and ``WindowedRollout`` with the tiny random
model; each runs one real optimizer step on the CPU."""

from __future__ import annotations

import json

import pytest

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from rspo_gym.integrations import trl as rspo_trl  # noqa: E402
from rspo_gym.integrations.episode import EPISODE_OVER  # noqa: E402
from rspo_gym.policies.models import load_model  # noqa: E402

SETTINGS = {"rspo/ALFWorld-v0": {"split": "valid_seen"}, "rspo/WebShop-v0": {"num_products": 200, "split": "test"}}
#: tasks the scripted shopper / expert finish in 5-6 turns, so whole episodes fit the tiny model's 4,096 positions
SHORT_TASKS = {"rspo/ALFWorld-v0": 1, "rspo/WebShop-v0": 2}


def tiny():
    model, tokenizer = load_model("tiny", device="cpu", seed=0)
    return model.train(), rspo_trl.tool_chat_template(tokenizer)


def config(tmp_path, **fields):
    settings = dict(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, max_steps=1,
                    max_completion_length=4096, logging_steps=1, report_to="none", use_cpu=True, save_strategy="no",
                    learning_rate=1e-2)
    return trl.GRPOConfig(**{**settings, **fields})


class ScriptedTrainer(trl.GRPOTrainer):
    """GRPOTrainer whose generation is a scripted stand-in: members 0 and 2 of a group call ``act``
    with the env's expert action until the episode ends, members 1 and 3 with ``look``/a no-op; the
    tool loop, ``reset``, ``get_reward`` and the update are TRL's own."""

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if len(prompt_ids) == len(self.environments) and all(env.episode.turns == 0 for env in self.environments):
            self.calling = list(range(len(self.environments)))  # the first turn: every slot
        assert len(self.calling) == len(prompt_ids)  # TRL generates again for the slots that called a tool
        texts, still = [], []
        for i in self.calling:
            episode = self.environments[i].episode
            if episode.done:
                texts.append("done<|im_end|>")
                continue
            action = episode.env.unwrapped.expert_action() if i % 2 == 0 else "inventory"
            call = json.dumps({"name": "act", "arguments": {"action": action}})
            texts.append(f"<tool_call>\n{call}\n</tool_call><|im_end|>")
            still.append(i)
        self.calling = still
        ids = [self.processing_class(t, add_special_tokens=False)["input_ids"] for t in texts]
        return ids, [[0.0] * len(x) for x in ids]


@pytest.mark.slow
@pytest.mark.parametrize("env_id", list(SETTINGS))
def test_tool_loop_plays_whole_episodes_and_updates(env_id, tmp_path):
    model, tokenizer = tiny()
    before = [p.detach().clone() for p in model.parameters()]
    factory = rspo_trl.environment_factory(env_id, env_kwargs=SETTINGS[env_id], max_turns=8)
    dataset = rspo_trl.task_dataset(env_id, ids=[SHORT_TASKS[env_id]], env_kwargs=SETTINGS[env_id])
    trainer = ScriptedTrainer(model=model, processing_class=tokenizer, args=config(tmp_path, max_tool_calling_iterations=20),
                              train_dataset=dataset, environment_factory=factory)
    trainer.train()
    results = [env.episode.result() for env in trainer.environments]
    assert len({r["task_id"] for r in results}) == 1 == len(set(dataset["task_id"]))  # the group shares its task
    assert [r["won"] for r in results] == [True, False, True, False] and all(r["done"] for r in results)
    assert [r["reward"] for r in results] == [10.0, 0.0, 10.0, 0.0]
    assert trainer.state.global_step == 1
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters()))  # the step moved the weights


def test_windowed_rollout_with_the_tiny_model(tmp_path):
    model, tokenizer = tiny()
    env_id = "rspo/ALFWorld-v0"
    dataset = rspo_trl.task_dataset(env_id, 1, env_kwargs=SETTINGS[env_id], first_prompt=True)
    rollout = rspo_trl.WindowedRollout(env_id, dataset=dataset, env_kwargs=SETTINGS[env_id], max_turns=3, max_new_tokens=6)
    trainer = trl.GRPOTrainer(model=model, processing_class=tokenizer, args=config(tmp_path, max_completion_length=6),
                              train_dataset=dataset, reward_funcs=rspo_trl.episode_reward, rollout_func=rollout)
    trainer.train()
    assert trainer.state.global_step == 1
    episodes = rollout.episodes[:4]
    assert {e.task_id for e in episodes} == set(dataset["task_id"]) and all(e.turns == 3 for e in episodes)
    window = episodes[0].prompt()  # a later prompt keeps only the last history_length steps
    assert "Below are the most recent 2 observations" in window


def test_tool_chat_template_passes_trls_check():
    from trl.chat_template_utils import supports_tool_calling

    _, tokenizer = load_model("tiny", device="cpu")
    assert not supports_tool_calling(tokenizer)
    assert supports_tool_calling(rspo_trl.tool_chat_template(tokenizer))


def test_env_tool_answers_after_the_end():
    env = rspo_trl.environment_factory("rspo/WebShop-v0", env_kwargs=SETTINGS["rspo/WebShop-v0"], max_turns=1)()
    first = env.reset(task_id=0, prompt=[])
    assert "WebShop" in first and "search[<your query>]" in first
    assert env.act("click[buy now]").endswith(EPISODE_OVER)  # the one turn is spent
    assert env.act("click[buy now]") == EPISODE_OVER and env.get_reward() == 0.0


def test_tool_loop_warns_when_max_completion_length_cuts_an_episode(tmp_path):
    """TRL drops tool answers past ``max_completion_length`` and ends the rollout there, with no
    word of it: the episode is scored unfinished (reward 0). The env says so, once, with the turns."""
    env_id = "rspo/ALFWorld-v0"
    model, tokenizer = tiny()
    factory = rspo_trl.environment_factory(env_id, env_kwargs=SETTINGS[env_id], max_turns=8)
    dataset = rspo_trl.task_dataset(env_id, ids=[SHORT_TASKS[env_id]], env_kwargs=SETTINGS[env_id])
    trainer = ScriptedTrainer(model=model, processing_class=tokenizer, args=config(tmp_path, max_completion_length=200),
                              train_dataset=dataset, environment_factory=factory)
    with pytest.warns(rspo_trl.EpisodeCutWarning, match=r"max_completion_length") as caught:
        trainer.train()
    assert not any(env.episode.done for env in trainer.environments)
    cut = [str(w.message) for w in caught if w.category is rspo_trl.EpisodeCutWarning]
    assert len(cut) == 1 and "of at most 8" in cut[0], cut  # once, not once per episode


def test_finished_episodes_are_scored_without_a_warning(recwarn):
    env = rspo_trl.environment_factory("rspo/ALFWorld-v0", env_kwargs=SETTINGS["rspo/ALFWorld-v0"], max_turns=1)()
    env.reset(task_id=0, prompt=[])
    env.act("look")
    assert env.get_reward() == 0.0 and not [w for w in recwarn if w.category.__name__ == "EpisodeCutWarning"]
