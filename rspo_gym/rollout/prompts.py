"""Prompts and action parsing for multi-turn text agents, in verl-agent's style.

- ``PromptTemplate`` and the three templates ``ALFWORLD``, ``WEBSHOP``, ``GENERIC``;
  ``template_for(env_id)`` picks one.
- ``PromptBuilder``: task + the last ``history_length`` (observation, action) pairs + the current
  observation + the admissible actions, as one user message; ``chat_ids`` applies the tokenizer's
  chat template; ``fitted_ids`` drops history entries oldest-first until the prompt fits a token
  budget (``FittedPrompt``).
- ``Conversation``: the ``"conversation"`` prompt format: one env's episode as a growing chat (an
  opening user message, then each reply and the next observation appended), so every prompt's ids
  extend the previous prompt's plus its reply and a generation backend can keep their KV cache.
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
    "Conversation",
    "PROMPT_FORMATS",
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
    opening: str = (
        "You are an agent acting in a text environment. Your task is to: {task}\n"
        "Your current observation is: {observation}{actions}\n\n{instruction}"
    )
    """The ``"conversation"`` format's first user message: ``first`` with the actions line optional."""
    turn: str = "Your current observation is: {observation}{actions}"
    """The ``"conversation"`` format's later user messages: the new observation only."""
    actions_line: str = "\nYour admissible actions of the current situation are: [{actions}]."
    """The admissible-actions sentence of ``opening`` and ``turn`` (``Conversation.list_actions``)."""


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
    opening=(  # the first observation states the task
        "You are an expert agent operating in the ALFRED Embodied Environment.\n"
        "Your current observation is: {observation}{actions}\n\n{instruction}"
    ),
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
    opening=(
        "You are an expert autonomous agent operating in the WebShop e-commerce platform.\n"
        "Your task is to: {task}.\n"
        "Your current observation is: {observation}.{actions}\n\n{instruction}"
    ),
    turn="Your current observation is: {observation}.{actions}",
    actions_line="\nYour admissible actions of the current situation are:\n[\n{actions}\n].",
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

    @property
    def instruction(self) -> str:
        return _THINK_INSTRUCTION if self.think else _PLAIN_INSTRUCTION

    def actions_text(self, admissible_actions: Sequence[str]) -> str:
        """The admissible actions as the prompt lists them: each quoted, ``help`` left out."""
        actions = [a for a in admissible_actions if a != "help"]
        separator = "',\n'" if self.template is WEBSHOP else "'\n '"
        return f"'{separator.join(actions)}'" if actions else ""

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
        fields = dict(
            task=task,
            observation=self.observation_text(observation),
            actions=self.actions_text(admissible_actions),
            instruction=self.instruction,
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


#: How a policy's prompts hold the episode so far: ``"window"`` is verl-agent's (one user message
#: with the step count and the last ``history_length`` steps, rewritten every turn);
#: ``"conversation"`` is a growing chat (``Conversation``) whose ids only ever get longer.
PROMPT_FORMATS = ("window", "conversation")


class _ChatPieces(NamedTuple):
    """The chat template's text between messages, found once per template."""

    after_reply: str
    """What closes an assistant reply and opens the next user message (ChatML:
    ``<|im_end|>\n<|im_start|>user\n``)."""
    before_reply: str
    """What closes a user message and opens the assistant's (ChatML: ``<|im_end|>\n<|im_start|>assistant\n``)."""


_SENTINELS = ("\x00user\x00", "\x00reply\x00", "\x00next\x00")


def _chat_pieces(tokenizer) -> _ChatPieces:
    """Renders a user, assistant, user exchange with sentinel contents and reads off the template's
    own text between them, so any chat template (not only ChatML) gives its exact separators."""
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        return _ChatPieces("\n", "\n")
    messages = [{"role": role, "content": text} for role, text in zip(("user", "assistant", "user"), _SENTINELS)]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    _, rest = rendered.split(_SENTINELS[1], 1)
    after_reply, rest = rest.split(_SENTINELS[2], 1)
    return _ChatPieces(after_reply, rest)


class Conversation:
    """One env's episode as a growing chat: the ``"conversation"`` prompt format.

    The first user message is the template's ``opening`` (the task, the first observation, the
    instruction); every later turn appends the policy's reply *as generated* (its token ids, not a
    re-tokenisation of its text) and a user message with the new observation. So a turn's prompt
    ids are the previous prompt's, its reply's and a few new ones: a generation backend keeps the
    previous prompt's KV cache and runs only the new tokens, and a trajectory's training rows nest
    (each row's prompt and reply are the start of the next row's prompt), so one pass over the last
    row scores them all. verl-agent's ``"window"`` format instead rewrites the step count near the
    prompt's start every turn, and every turn pays for its whole ~800-token prompt.

    ``list_actions`` adds the admissible actions to every user message; constrained decoding
    offers them through the reply trie instead, so it can leave them out and keep turns short
    (ALFWorld: ~60 tokens a turn against ~300 with the list). Over ``max_length`` the oldest
    exchanges (reply + observation) go first; the opening always stays.
    """

    def __init__(self, builder: PromptBuilder, tokenizer, end_id: int, *, list_actions: bool = False):
        self.builder, self.tokenizer, self.end_id, self.list_actions = builder, tokenizer, int(end_id), list_actions
        self.pieces = _chat_pieces(tokenizer)
        self.end_text = tokenizer.decode([self.end_id])
        self.head: list[int] = []
        self.exchanges: list[list[int]] = []
        self._ids: list[int] = []

    def _actions(self, admissible_actions: Sequence[str]) -> str:
        if not self.list_actions:
            return ""
        return self.builder.template.actions_line.format(actions=self.builder.actions_text(admissible_actions))

    def open(self, task: str, observation: str, admissible_actions: Sequence[str] = ()) -> None:
        """Starts the chat with the opening user message (forgetting any earlier one)."""
        builder = self.builder
        text = builder.template.opening.format(
            task=task, observation=builder.observation_text(observation),
            actions=self._actions(admissible_actions), instruction=builder.instruction,
        )
        self.head = builder.chat_ids(self.tokenizer, text)
        self.exchanges = []
        self._ids = list(self.head)

    def append(self, response_ids: Sequence[int], observation: str, admissible_actions: Sequence[str] = ()) -> None:
        """Adds the policy's reply (closed with the end token when the reply was cut before it) and
        the next observation's user message."""
        reply = [int(t) for t in response_ids]
        close = self.pieces.after_reply
        if reply and reply[-1] == self.end_id and close.startswith(self.end_text):
            close = close[len(self.end_text):]
        text = close + self.builder.template.turn.format(
            observation=self.builder.observation_text(observation), actions=self._actions(admissible_actions)
        ) + self.pieces.before_reply
        exchange = reply + self.tokenizer(text, add_special_tokens=False)["input_ids"]
        self.exchanges.append(exchange)
        self._ids += exchange

    def prompt(self, max_length: int | None = None) -> FittedPrompt:
        """The ids of the chat so far, ending with the assistant's header; over ``max_length`` the
        oldest exchanges are left out (counted in ``dropped``), down to the opening alone."""
        if max_length is None or len(self._ids) <= max_length:
            return FittedPrompt(list(self._ids), 0)
        kept, total = len(self.exchanges), len(self._ids)
        while kept and total > max_length:
            total -= len(self.exchanges[len(self.exchanges) - kept])
            kept -= 1
        ids = list(self.head)
        for exchange in self.exchanges[len(self.exchanges) - kept:]:
            ids += exchange
        return FittedPrompt(ids, len(self.exchanges) - kept)


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
