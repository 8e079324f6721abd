"""Prompts and action parsing for multi-turn text agents, in verl-agent's style.

- ``PromptTemplate`` and the three templates ``ALFWORLD``, ``WEBSHOP``, ``GENERIC``;
  ``template_for(env_id)`` picks one.
- ``PromptBuilder``: task + the last ``history_length`` (observation, action) pairs + the current
  observation + the admissible actions, as one user message; ``chat_ids`` applies the tokenizer's
  chat template; ``fitted_ids`` drops history entries oldest-first until the prompt fits a token
  budget (``FittedPrompt``).
- ``parse_action``: the action inside ``<action>...</action>`` (or the whole reply when tags are
  off) and a format-validity flag.

The prompt is a policy-side view: environments never see it, and anchors stay the raw
observations. The wording follows verl-agent's ALFWorld/WebShop prompts (reference §2.3): a first
step without history, later steps with the step count and the recent history, ``help`` dropped from
the action list. ``think=False`` replaces the reasoning instruction by "reply with one admissible
action only", which is what small models (and constrained decoding) use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import NamedTuple, Sequence

__all__ = [
    "PromptTemplate",
    "ALFWORLD",
    "WEBSHOP",
    "GENERIC",
    "template_for",
    "PromptBuilder",
    "FittedPrompt",
    "ParsedAction",
    "parse_action",
]

_THINK_INSTRUCTION = (
    "Now it's your turn to take an action.\n"
    "You should first reason step-by-step about the current situation. This reasoning process MUST "
    "be enclosed within <think> </think> tags.\n"
    "Once you've finished your reasoning, you should choose an admissible action for current step "
    "and present it within <action> </action> tags."
)
_PLAIN_INSTRUCTION = "Now it's your turn to take an action. Reply with one admissible action only."


@dataclass(frozen=True)
class PromptTemplate:
    """The fixed text of one environment family's prompt (``str.format`` fields in braces)."""

    name: str
    first: str
    """Step 1 (no history): fields ``task``, ``observation``, ``actions``."""
    later: str
    """Later steps: adds ``step_count``, ``history_length``, ``history``, ``current_step``."""
    tail_chars: int = 30
    """An unparseable reply is sent to the env as its last ``tail_chars`` characters (verl-agent)."""
    strip_pattern: str | None = None
    """A regex removed once from the start of observations: WebShop's ``Instruction: [SEP] ...
    [SEP]`` (the task is shown apart), ALFWorld's welcome banner (it carries no information)."""


ALFWORLD = PromptTemplate(
    name="alfworld",
    first=(
        "You are an expert agent operating in the ALFRED Embodied Environment.\n"
        "Your current observation is: {observation}\n"
        "Your admissible actions of the current situation are: [{actions}].\n\n{instruction}"
    ),
    later=(
        "You are an expert agent operating in the ALFRED Embodied Environment. Your task is to: {task}\n"
        "Prior to this step, you have already taken {step_count} step(s). Below are the most recent "
        "{history_length} observations and the corresponding actions you took: {history}\n"
        "You are now at step {current_step} and your current observation is: {observation}\n"
        "Your admissible actions of the current situation are: [{actions}].\n\n{instruction}"
    ),
    tail_chars=30,
    strip_pattern=r"^-= Welcome to TextWorld, ALFRED! =-\n\n",
)

WEBSHOP = PromptTemplate(
    name="webshop",
    first=(
        "You are an expert autonomous agent operating in the WebShop e-commerce platform.\n"
        "Your task is to: {task}.\n"
        "Your current observation is: {observation}.\n"
        "Your admissible actions of the current situation are:\n[\n{actions}\n].\n\n{instruction}"
    ),
    later=(
        "You are an expert autonomous agent operating in the WebShop e-commerce platform.\n"
        "Your task is to: {task}.\n"
        "Prior to this step, you have already taken {step_count} step(s). Below are the most recent "
        "{history_length} observations and the corresponding actions you took: {history}\n"
        "You are now at step {current_step} and your current observation is: {observation}.\n"
        "Your admissible actions of the current situation are:\n[\n{actions}\n].\n\n{instruction}"
    ),
    tail_chars=20,
    strip_pattern=r"^\s*(?:WebShop \[SEP\] )?Instruction: \[SEP\] .*? \[SEP\] ",
)

GENERIC = PromptTemplate(
    name="generic",
    first=(
        "You are an agent acting in a text environment. Your task is to: {task}\n"
        "Your current observation is: {observation}\n"
        "Your admissible actions of the current situation are: [{actions}].\n\n{instruction}"
    ),
    later=(
        "You are an agent acting in a text environment. Your task is to: {task}\n"
        "Prior to this step, you have already taken {step_count} step(s). Below are the most recent "
        "{history_length} observations and the corresponding actions you took: {history}\n"
        "You are now at step {current_step} and your current observation is: {observation}\n"
        "Your admissible actions of the current situation are: [{actions}].\n\n{instruction}"
    ),
)


def template_for(env_id: str | None) -> PromptTemplate:
    """The template of an env id's family (``ALFWORLD``, ``WEBSHOP``), else ``GENERIC``."""
    name = (env_id or "").lower()
    if "alfworld" in name:
        return ALFWORLD
    if "webshop" in name:
        return WEBSHOP
    return GENERIC


@lru_cache(maxsize=None)
def _compiled(pattern: str) -> re.Pattern:
    """A template's ``strip_pattern``, compiled once (``re.sub`` looks it up in re's cache per call)."""
    return re.compile(pattern, re.S)


class FittedPrompt(NamedTuple):
    """A prompt's token ids and how many history entries were left out to fit the token budget
    (a named tuple: one is made at every env step, at two thirds of a frozen dataclass's cost)."""

    ids: list[int]
    dropped: int
    """Entries of the ``history_length`` window left out, oldest first (0: the prompt is untouched)."""


@dataclass(frozen=True)
class PromptBuilder:
    """Renders the user message for one env at one step.

    Args:
        template: the env family's wording.
        history_length: how many past (observation, action) pairs to show (verl-agent: 2).
        think: ask for ``<think>``/``<action>`` tags (True) or for a bare action (False).
    """

    template: PromptTemplate = GENERIC
    history_length: int = 2
    think: bool = False

    def observation_text(self, obs: str) -> str:
        pattern = self.template.strip_pattern
        return _compiled(pattern).sub("", obs, count=1) if pattern else obs

    def build(
        self,
        task: str,
        observation: str,
        admissible_actions: Sequence[str],
        history: Sequence[tuple[str, str]] = (),
    ) -> str:
        """The user message; ``history`` is every past (observation, action) pair, oldest first."""
        actions = [a for a in admissible_actions if a != "help"]
        separator = "',\n'" if self.template is WEBSHOP else "'\n '"  # each action quoted
        action_text = f"'{separator.join(actions)}'" if actions else ""
        fields = dict(
            task=task,
            observation=self.observation_text(observation),
            actions=action_text,
            instruction=_THINK_INSTRUCTION if self.think else _PLAIN_INSTRUCTION,
        )
        if not history:
            return self.template.first.format(**fields)
        recent = list(history)[-self.history_length:] if self.history_length > 0 else []
        first_index = len(history) - len(recent) + 1
        lines = [
            f"\n[Observation {first_index + k}: '{self.observation_text(o)}', Action {first_index + k}: '{a}']"
            for k, (o, a) in enumerate(recent)
        ]
        return self.template.later.format(
            step_count=len(history),
            history_length=len(recent),
            history="".join(lines),
            current_step=len(history) + 1,
            **fields,
        )

    def chat_ids(self, tokenizer, content: str) -> list[int]:
        """Token ids of ``content`` as one user turn, ending with the assistant's turn header."""
        messages = [{"role": "user", "content": content}]
        if getattr(tokenizer, "chat_template", None):
            ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
                ids = ids["input_ids"]
            return list(ids)
        return tokenizer(content, add_special_tokens=True)["input_ids"]

    def fitted_ids(
        self,
        tokenizer,
        task: str,
        observation: str,
        admissible_actions: Sequence[str],
        history: Sequence[tuple[str, str]] = (),
        max_length: int | None = None,
    ) -> FittedPrompt:
        """The chat ids of ``build(...)`` keeping the most recent history entries that fit ``max_length``.

        Real runs bound prompts (verl-agent: 2048 tokens for ALFWorld, 4096 for WebShop) and long
        episodes with history outgrow them; the history is the only part that can go, since the
        task, the current observation and the admissible actions are what the reply must answer.
        Entries go oldest-first; a truncated prompt keeps the later template (task, step count,
        "the most recent k observations"). The kept count is found by binary search (assuming
        fewer entries never tokenise longer), so a prompt that fits is tokenised once and one that
        does not ``2 + log2(window)`` times. When even no history fits, the no-history ids are
        returned with every window entry counted as dropped: the caller checks ``len(ids)``.
        (verl-agent's WebShop instead falls back to its no-history template above 13,000
        characters; here the rule is the token budget.)
        """
        if max_length is None:  # a tokenizer that reads the fields instead of the rendered text (the fast policy's)
            direct = getattr(tokenizer, "prompt_ids", None)
            ids = None if direct is None else direct(self, task, observation, history)
            if ids is not None:
                return FittedPrompt(ids, 0)
        window = max(min(self.history_length, len(history)), 0)

        def keeping(k: int) -> list[int]:
            return self.chat_ids(tokenizer, replace(self, history_length=k).build(task, observation, admissible_actions, history))

        ids = self.chat_ids(tokenizer, self.build(task, observation, admissible_actions, history))  # = keeping(window)
        if max_length is None or len(ids) <= max_length or window == 0:
            return FittedPrompt(ids, 0)
        fits, over, ids = 0, window, keeping(0)
        if len(ids) > max_length:
            return FittedPrompt(ids, window)
        while over - fits > 1:  # keeping `fits` entries fits, keeping `over` does not
            middle = (fits + over) // 2
            candidate = keeping(middle)
            if len(candidate) <= max_length:
                fits, ids = middle, candidate
            else:
                over = middle
        return FittedPrompt(ids, window - fits)


@dataclass(frozen=True)
class ParsedAction:
    """What a reply asks the env to do."""

    action: str
    """The text sent to the env."""
    format_valid: bool
    """The reply followed the requested format (tags present, no CJK characters)."""


_ACTION_RE = re.compile(r"<action>(.*?)</action>", re.S | re.I)
_THINK_RE = re.compile(r"<think>.*?</think>", re.S | re.I)
_CJK_RE = re.compile(r"[\u4e00-\u9fff\u3040-\u30ff\uac00-\ud7af]")


def parse_action(reply: str, *, think: bool, tail_chars: int = 30) -> ParsedAction:
    """verl-agent's projection: lower-case, take the first ``<action>...</action>``, flag format errors.

    With ``think=True`` a reply is valid only with a ``<think>`` block, an action block and no CJK
    characters (verl-agent's ``is_action_valid``). The first action block is the action, even when
    the reply is invalid for another reason; a reply without one is sent as its last
    ``tail_chars`` characters, so the env answers with its own no-op text. With ``think=False`` the
    whole stripped reply is the action and the reply is invalid only if empty or CJK. Whether the
    env accepts the command is not a format question: an unknown command is the env's no-op.

    >>> parse_action("<think>the mug is here</think><action>Take mug 1 from desk 1</action>", think=True)
    ParsedAction(action='take mug 1 from desk 1', format_valid=True)
    >>> parse_action("<think>two ideas</think><action>look</action> or <action>inventory</action>", think=True)
    ParsedAction(action='look', format_valid=True)
    >>> parse_action("take mug 1", think=True, tail_chars=30)
    ParsedAction(action='take mug 1', format_valid=False)
    """
    text = reply.lower()
    if not think:
        action = text.strip()
        return ParsedAction(action, bool(action) and not _CJK_RE.search(reply))
    found = _ACTION_RE.search(text)
    if found is None:
        return ParsedAction(text[-tail_chars:].strip(), False)
    return ParsedAction(found.group(1).strip(), bool(_THINK_RE.search(text)) and not _CJK_RE.search(reply))
