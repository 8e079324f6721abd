"""The conversation prompt format: a growing chat whose ids only get longer, in the collector and in
the warm start's demonstrations alike."""

import gymnasium as gym
import pytest

import rspo_gym  # noqa: F401
from rspo_gym.rollout.collector import CollectConfig, collect
from rspo_gym.rollout.generation import GenerationConfig
from rspo_gym.rollout.prompts import ALFWORLD, WEBSHOP, Conversation, PromptBuilder, _chat_pieces
from rspo_gym.rollout.vector import GroupedVectorEnv

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def policy():
    from rspo_gym.policies.llm import LLMPolicy
    from rspo_gym.policies.models import load_model

    model, tokenizer = load_model("tiny", seed=0)
    return LLMPolicy(model, tokenizer)


def _nested(rows) -> bool:
    """Each row's prompt + reply starts the next row's prompt."""
    return all(
        later.prompt_ids[:len(earlier.prompt_ids) + len(earlier.response_ids)] == earlier.prompt_ids + earlier.response_ids
        for earlier, later in zip(rows, rows[1:])
    )


def test_chat_pieces_are_the_templates_own_separators(policy):
    pieces = _chat_pieces(policy.tokenizer)
    assert pieces.after_reply == "<|im_end|>\n<|im_start|>user\n"
    assert pieces.before_reply == "<|im_end|>\n<|im_start|>assistant\n"


def test_a_conversation_reads_as_the_chat_template_renders_it(policy):
    tokenizer, end = policy.tokenizer, policy.end_token_id
    chat = Conversation(PromptBuilder(ALFWORLD), tokenizer, end)
    chat.open("", "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in a room.\n\nYour task is to: put a mug in desk.", ["go to desk 1", "help"])
    reply = tokenizer("go to desk 1", add_special_tokens=False)["input_ids"] + [end]
    chat.append(reply, "You arrive at desk 1.", ["take mug 1 from desk 1"])
    messages = [
        {"role": "user", "content": "You are an expert agent operating in the ALFRED Embodied Environment.\nYour current observation is: "
                                    "You are in a room.\n\nYour task is to: put a mug in desk.\n\nNow it's your turn to take an "
                                    "action. Reply with one admissible action only."},
        {"role": "assistant", "content": "go to desk 1"},
        {"role": "user", "content": "Your current observation is: You arrive at desk 1."},
    ]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert tokenizer.decode(chat.prompt().ids) == rendered  # constrained replies: no action list


def test_listed_actions_and_a_reply_cut_before_its_end_token(policy):
    tokenizer, end = policy.tokenizer, policy.end_token_id
    chat = Conversation(PromptBuilder(WEBSHOP), tokenizer, end, list_actions=True)
    chat.open("a red mug", "WebShop [SEP] Instruction: [SEP] a red mug [SEP] Search", ["search[<your query>]"])
    opening = tokenizer.decode(chat.prompt().ids)
    assert "Your admissible actions of the current situation are:\n[\n'search[<your query>]'\n]." in opening
    cut = tokenizer("search[red", add_special_tokens=False)["input_ids"]  # max_new_tokens reached, no end token
    chat.append(cut, "Results", ["click[back to search]", "click[b01]"])
    text = tokenizer.decode(chat.prompt().ids)
    assert text.endswith("search[red<|im_end|>\n<|im_start|>user\nYour current observation is: Results.\nYour admissible actions "
                         "of the current situation are:\n[\n'click[back to search]',\n'click[b01]'\n].<|im_end|>\n<|im_start|>assistant\n")


def test_over_the_budget_the_oldest_exchanges_go_first(policy):
    tokenizer, end = policy.tokenizer, policy.end_token_id
    chat = Conversation(PromptBuilder(ALFWORLD), tokenizer, end)
    chat.open("", "You are in a room.", [])
    head = len(chat.prompt().ids)
    for k in range(3):
        chat.append(tokenizer(f"look {k}", add_special_tokens=False)["input_ids"] + [end], f"Nothing happens {k}.", [])
    full = chat.prompt()
    assert full.dropped == 0
    sizes = [len(e) for e in chat.exchanges]
    kept = chat.prompt(head + sizes[1] + sizes[2])
    assert kept.dropped == 1 and kept.ids == chat.head + chat.exchanges[1] + chat.exchanges[2]
    assert chat.prompt(head).ids == chat.head and chat.prompt(head).dropped == 3
    assert chat.prompt(head - 1).dropped == 3  # the opening alone is over: the caller's check says so


@pytest.mark.parametrize("constrained", [True, False])
def test_collected_rows_nest_within_each_trajectory(policy, constrained):
    venv = GroupedVectorEnv("rspo/ALFWorld-v0", num_groups=2, group_size=2, env_kwargs={"split": "valid_seen"})
    config = CollectConfig(generation=GenerationConfig(max_new_tokens=8, seed=3), constrained=constrained, max_turns=4,
                           prompt_format="conversation")
    rollout = collect(policy, venv, config, task_ids=[0, 1])
    venv.close()
    for trajectory in rollout.trajectories:
        rows = [r for r in rollout.rows if r.traj_id == trajectory.traj_id]
        assert len(rows) == trajectory.length > 1
        assert _nested(rows)
        listed = "Your admissible actions" in policy.tokenizer.decode(rows[-1].prompt_ids)
        assert listed == (not constrained)


def test_windowed_rows_do_not_nest(policy):
    venv = GroupedVectorEnv("rspo/ALFWorld-v0", num_groups=1, group_size=1, env_kwargs={"split": "valid_seen"})
    rollout = collect(policy, venv, CollectConfig(generation=GenerationConfig(seed=3), constrained=True, max_turns=3), task_ids=[0])
    venv.close()
    assert not _nested(rollout.rows)


def test_the_warm_starts_demonstrations_are_the_collectors_prompts(policy):
    """An expert episode recorded for cloning, replayed through the collector by a policy that
    answers the expert's commands, gives the same prompt ids turn for turn."""
    from rspo_gym.policies.warmstart import expert_demonstrations

    demos = expert_demonstrations("rspo/ALFWorld-v0", 1, policy.tokenizer, policy.end_token_id, prompt_format="conversation",
                                  env_kwargs={"split": "valid_seen"}, seed=0)
    replies = iter(demos)

    class Replay:
        tokenizer, end_token_id = policy.tokenizer, policy.end_token_id

        def generate(self, prompt_ids, config, allowed=None):
            from rspo_gym.rollout.generation import GenerationOutput

            row = next(replies)
            assert list(prompt_ids[0]) == row.prompt_ids
            text = self.tokenizer.decode(row.response_ids, skip_special_tokens=True)
            return GenerationOutput([text], [row.response_ids], [[0.0] * len(row.response_ids)], None)

    env = gym.make("rspo/ALFWorld-v0", split="valid_seen")
    _, info = env.reset(seed=0)
    venv = GroupedVectorEnv("rspo/ALFWorld-v0", num_groups=1, group_size=1, env_kwargs={"split": "valid_seen"})
    rollout = collect(Replay(), venv, CollectConfig(prompt_format="conversation", constrained=True), task_ids=[info["task_id"]])
    venv.close()
    assert len(rollout.rows) == len(demos) and rollout.trajectories[0].won
    assert _nested(demos)


def test_an_unknown_prompt_format_is_refused():
    with pytest.raises(ValueError, match="prompt_format"):
        CollectConfig(prompt_format="chat")
