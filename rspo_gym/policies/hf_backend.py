"""Batched generation with a transformers causal LM, with exact behaviour log-probs.

- ``HFBackend``: left-padded batched sampling (temperature, top-p, seed) with a KV cache, and
  optional constrained decoding to given action strings (a token-prefix trie per row); inside its
  ``session`` a prompt extending an earlier one reuses that one's keys and values.
- ``ActionTrie``: the prefix trie of token-id sequences used for constraining.
- ``allowed_token_ids``: the ids allowed at each position of a constrained reply, the same lists
  ``HFBackend`` records, so a trainer can rebuild the mask of any reply.
- ``sample``: exact sampling of one id per row on the probabilities' own device; ``draw``: one
  token step (sampled ids and their log-probs) with the least work over the vocabulary.

Why our own loop rather than ``model.generate``: the log-probs we return must be the ones a
trainer recomputes by teacher forcing (tempered softmax before top-p, see ``generation.py``), the
position ids must be the same ``cumsum(attention_mask) - 1`` the trainer uses, and constraining
needs per-row state. Under constraints the recorded log-probs are those of the *restricted*
distribution (``softmax(logits / T)`` renormalised over the allowed ids, computed by
``logprobs.restricted_logprobs`` as the trainer does): that is the distribution the tokens were drawn
from, so it is the policy being optimised. The trainer recomputes it from the recorded allowed ids,
importance ratios start at 1, and the policy gradient has no ``∇ log Z`` term pushing probability
on or off the allowed set.

A token step stays on the model's device (random numbers from a generator there) and reads back
only the sampled ids and their log-probs, once for the whole batch: with a 152k vocabulary, drawing
on the host cost more than the step itself, and reading row by row waited for a GPU once per row.
"""

from __future__ import annotations

import inspect
import math
from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator, Sequence

import torch

from rspo_gym.policies.adapters import adapter_routing
from rspo_gym.policies.logprobs import _allowed_logits, _tempered, restricted_logprobs
from rspo_gym.policies.prefix_cache import PrefixCache
from rspo_gym.policies.tree_scoring import FlatTrie, attention_kind, child_logits, flatten, supports_tree_mask, tree_inputs
from rspo_gym.rollout.generation import GenerationConfig, GenerationOutput

__all__ = ["HFBackend", "ActionTrie", "allowed_token_ids", "sample", "draw", "position_ids", "eos_token_ids"]


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding: ``cumsum(mask) - 1`` (0 on padding)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp_(min=0)


def eos_token_ids(model, tokenizer) -> list[int]:
    """Every token that ends a reply: the generation config's and the tokenizer's end tokens."""
    ids: list[int] = []
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (configured, tokenizer.eos_token_id):
        if value is None:
            continue
        for token in value if isinstance(value, (list, tuple)) else [value]:
            if token not in ids:
                ids.append(int(token))
    if not ids:
        raise ValueError("the model and tokenizer define no end-of-sequence token")
    return ids


class ActionTrie:
    """Token-id prefix trie of a set of replies, each followed by the end token."""

    def __init__(self, sequences: Sequence[Sequence[int]]):
        self.root: dict = {}
        self.depth = max((len(seq) for seq in sequences), default=0)
        for seq in sequences:
            node = self.root
            for token in seq:
                node = node.setdefault(int(token), {})

    @classmethod
    def from_texts(cls, tokenizer, texts: Sequence[str], end_id: int) -> "ActionTrie":
        return cls.from_ids([tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts], end_id)

    @classmethod
    def from_ids(cls, replies: Sequence[Sequence[int]], end_id: int) -> "ActionTrie":
        """The trie of replies given as token ids (without the end token)."""
        if not replies:
            raise ValueError("constrained decoding needs at least one allowed reply")
        return cls([list(ids) + [end_id] for ids in replies])

    @staticmethod
    def choices(node: dict) -> list[int]:
        """The ids that may follow ``node`` (sorted, so recorded lists are reproducible)."""
        return sorted(node)

    def allowed_along(self, response: Sequence[int]) -> list[list[int]]:
        """``choices`` at each position of ``response``, walking the trie along its tokens."""
        node, allowed = self.root, []
        for token in response:
            if int(token) not in node:
                raise ValueError(f"token {int(token)} does not continue any allowed reply")
            allowed.append(self.choices(node))
            node = node[int(token)]
        return allowed


def allowed_token_ids(tokenizer, texts: Sequence[str], response_ids: Sequence[int], end_id: int) -> list[list[int]]:
    """The ids constrained decoding to ``texts`` allowed at each position of ``response_ids``.

    What ``HFBackend.generate`` records for a constrained row; teacher-forcing any allowed reply
    (not only sampled ones) needs the same lists, and building both from one trie keeps them equal.
    """
    return ActionTrie.from_texts(tokenizer, texts, end_id).allowed_along(response_ids)


def _nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero the tail beyond ``top_p`` cumulative mass (the top token always stays)."""
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    keep = sorted_probs.cumsum(-1) - sorted_probs < top_p
    sorted_probs = sorted_probs * keep
    return torch.zeros_like(probs).scatter_(-1, order, sorted_probs)


#: ``HFBackend``'s ways of constraining replies (see its ``constrained`` argument).
CONSTRAINED_METHODS = ("tree", "decode")

#: Most allowed-reply texts whose token ids an ``HFBackend`` remembers (``HFBackend._tries``).
REPLY_MEMO_SIZE = 65536

#: Most (allowed replies, last prompt token) pairs whose tries an ``HFBackend`` keeps for ``"tree"``
#: scoring (``HFBackend._flat_tries``; ~50 kB each).
TRIE_MEMO_SIZE = 256

#: One generator for the batch, or one per row (``GenerationConfig.row_seeds``: a row's draws then
#: do not depend on which other rows share its batch).
Generators = torch.Generator | list[torch.Generator]


def _noise(like: torch.Tensor, generator: Generators, fill) -> torch.Tensor:
    """A tensor shaped like ``like`` filled in place by ``fill(tensor, generator)``: all rows from one
    generator, or row ``b`` from ``generator[b]``."""
    if isinstance(generator, torch.Generator):
        return fill(torch.empty_like(like), generator)
    return torch.cat([fill(torch.empty_like(like[b:b + 1]), g) for b, g in enumerate(generator)])


def _exponentials(like: torch.Tensor, generator: Generators) -> torch.Tensor:
    """I.i.d. ``Exp(1)`` noise shaped like ``like``."""
    return _noise(like, generator, lambda tensor, g: tensor.exponential_(generator=g))


def inverse_cdf(weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Index ``i`` of each row of ``(rows, K)`` ``weights`` with probability ``weights[i] / weights.sum()``,
    given one uniform in ``[0, 1)`` per row (``(rows,)``).

    ``1 - u`` is in ``(0, 1]``, so the first index whose cumulative weight reaches ``(1 - u) *
    total`` never has weight 0 (nor does zero-weight padding after the row's last choice).
    """
    cdf = weights.cumsum(dim=-1)
    threshold = (1.0 - uniforms)[:, None] * cdf[:, -1:]
    return (cdf < threshold).sum(dim=-1).clamp_(max=weights.shape[-1] - 1)


def _inverse_cdf(weights: torch.Tensor, generator: Generators) -> torch.Tensor:
    """``inverse_cdf`` with each row's uniform drawn from ``generator``.

    One uniform per row, whatever ``K``: a row's random stream must not depend on how wide the
    batch's padded choice lists are (with one generator per row, the other rows set that width).
    """
    uniform = _noise(weights[:, -1:], generator, lambda tensor, g: tensor.uniform_(generator=g))
    return inverse_cdf(weights, uniform[:, 0])


def _race(weights: torch.Tensor, generator: Generators) -> torch.Tensor:
    """Index ``i`` of each row with probability ``weights[i] / weights.sum()``: ``argmax(w / E)``.

    The exponential race: with ``E_i ~ Exp(1)`` i.i.d., ``E_i / w_i ~ Exp(w_i)`` and the smallest
    of independent exponentials is the ``i``-th with probability ``w_i / sum(w)``. A zero weight
    never wins; ``exponential_`` may round to 0, hence the clamp (``0 / 0`` is NaN, which argmax
    would take as the largest).
    """
    race = _exponentials(weights, generator).clamp_(min=torch.finfo(weights.dtype).tiny)
    return (weights / race).argmax(dim=-1)


def _block_race(weights: torch.Tensor, generator: Generators) -> tuple[torch.Tensor, torch.Tensor]:
    """``sample``'s draw and each row's total weight, the sum of the block masses it raced over."""
    rows, vocab = weights.shape
    width = math.isqrt(vocab - 1) + 1
    whole = vocab - vocab % width
    # float32 sums are tree-reduced: as accurate as the float32 weights themselves
    mass = torch.cat([weights[:, :whole].reshape(rows, -1, width).sum(dim=-1), weights[:, whole:].sum(dim=-1, keepdim=True)], dim=1)
    ids = _race(mass, generator)[:, None] * width + torch.arange(width, device=weights.device)  # the block's ids
    inside = ids < vocab  # the last block may be short (and the extra, empty one has mass 0)
    block = weights.gather(1, ids.clamp(max=vocab - 1)) * inside
    return ids.gather(1, _race(block, generator)[:, None]).squeeze(1), mass.sum(dim=-1)


def sample(probs: torch.Tensor, generator: Generators) -> torch.Tensor:
    """One id per row of ``(rows, V)`` non-negative ``probs`` (need not sum to 1), drawn exactly.

    Two exponential races: one over blocks of ``~sqrt(V)`` ids weighted by their mass, one inside
    the chosen block, so ``P(id) = P(block) P(id | block) = p_id / sum(p)``. Why not one race over
    the vocabulary (or ``torch.multinomial``, which runs that race and also reads a validity check
    back to the host, a sync per call): random numbers cost ~30 ns each on a CPU, ~300 ms a step for
    64 rows x 152k ids, while two races need ``2 sqrt(V)`` per row (~800); on a GPU either is cheap.
    Everything stays on ``probs``'s device, drawn from ``generator`` (on that device too), so a
    seed reproduces the samples on the same device.
    """
    return _block_race(probs, generator)[0]


def draw(
    logits: torch.Tensor,
    config: GenerationConfig,
    allowed: torch.Tensor | None,
    generator: Generators,
    scratch: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token step: the next id of each row of ``(rows, V)`` raw ``logits`` and its log-prob.

    The log-prob is the trainer's (``logprobs.restricted_logprobs``: the tempered softmax, renormalised
    over ``allowed`` (``(rows, K)`` ids, ``-1``-padded) when given; top-p only truncates what is
    drawn). Work over the whole vocabulary is what a step's cost grows with, so each path keeps it
    to the minimum: under constraints none (the K allowed logits are gathered and one uniform
    per row picks among them);
    unconstrained at ``top_p = 1``, one max, one ``exp`` and one block sum, whose total is also the
    softmax's normaliser, so the log-prob needs no second softmax. That path writes its weights
    into ``scratch`` (a float32 tensor of ``logits``'s shape) when given: a loop that reuses one
    spares a vocabulary-sized allocation per step, which on a CPU costs more than the ``exp``
    (fresh pages fault in on first touch: ~17 ms for 64 x 152k).
    """
    temperature = config.temperature
    if allowed is not None:
        choices = _allowed_logits(_tempered(logits, temperature), allowed)[0]  # (rows, K), padding -inf
        if temperature > 0:
            probs = torch.softmax(choices, dim=-1)
            picked = _inverse_cdf(_nucleus(probs, config.top_p) if config.top_p < 1.0 else probs, generator)
        else:
            picked = choices.argmax(dim=-1)
        tokens = allowed.gather(1, picked[:, None]).squeeze(1)
        return tokens, restricted_logprobs(logits, tokens, allowed, temperature)
    scaled = _tempered(logits, temperature)
    if temperature == 0:
        tokens = scaled.argmax(dim=-1)
    elif config.top_p < 1.0:
        tokens = sample(_nucleus(torch.softmax(scaled, dim=-1), config.top_p), generator)
    else:
        top = scaled.amax(dim=-1, keepdim=True)
        weights = torch.sub(scaled, top, out=scratch).exp_() if scratch is not None else (scaled - top).exp_()
        tokens, total = _block_race(weights, generator)
        return tokens, weights.gather(1, tokens[:, None]).squeeze(1).log() - total.log()
    return tokens, restricted_logprobs(logits, tokens, None, temperature)


def _to_host(tokens: torch.Tensor, logprobs: torch.Tensor) -> tuple[list[int], list[float]]:
    """Sampled ids and their log-probs as host lists, in one device-to-host copy.

    float64 holds every id (< 2**53) and every float32 log-prob exactly; reading row by row instead
    would wait for the device once per row per token.
    """
    ids, values = torch.stack([tokens.double(), logprobs.double()]).tolist()
    return [int(i) for i in ids], values


def _padded(choices: Sequence[Sequence[int]]) -> torch.Tensor:
    """``(rows, K)`` long ids, right-padded with ``-1`` (the layout ``restricted_logprobs`` takes)."""
    out = torch.full((len(choices), max(len(c) for c in choices)), -1, dtype=torch.long)
    for row, ids in enumerate(choices):
        out[row, :len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


def _cache_argument(model) -> str:
    """The KV-cache keyword: ``cache`` in transformers >= 5.2x, ``past_key_values`` before."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft wrappers
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def _cache_of(output):
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


class HFBackend:
    """Generation straight from the trainer's model (so weight sync is a no-op).

    Args:
        model: a transformers causal LM (trained in place by the trainer).
        tokenizer: its tokenizer (``pad_token_id`` used for padding).
        seed: seed of the backend's own generators (one per device, made when first needed), used
            when a call gives no seed.
        micro_batch_size: most prompts per batched call.
        max_batch_tokens: most padded prompt tokens per batched call (bounds prefill memory).
        constrained: how replies constrained to allowed texts are made. ``"tree"`` (default) scores
            every allowed reply in two forward passes (``tree_scoring``) and then samples along the
            trie; ``"decode"`` runs one forward pass per reply token, as free generation does. Both
            sample the same distribution with the same random draws. ``"tree"`` reads logits as the
            output embeddings of the last hidden state: a model whose logits are more than that
            (soft-capped, scaled) must decode. Models whose attention takes no custom 4D mask
            (flash-attention kernels) always decode.
        max_padding: under ``"tree"``, the most padding a prompt batch may add, as a fraction of its
            real tokens: prompts are sorted by length and a new batch starts where the next prompt
            would pad more (on a CPU a batch of one prompt is nearly as fast per token as 32).
        prefix_cache_bytes: inside a ``session``, the most bytes of prompts' keys and values kept
            for later prompts that extend them (least recently used first out).

    ``prefix_stats`` counts, over every session, the tokens of the prompts ``"tree"`` scoring ran
    (``"prompt_tokens"``: each distinct prompt but its last token) and those of them whose keys and
    values it reused instead of computing them (``"reused_tokens"``).
    """

    def __init__(
        self, model, tokenizer, *, seed: int = 0, micro_batch_size: int = 64, max_batch_tokens: int = 65536,
        constrained: str = "tree", max_padding: float = 0.25, prefix_cache_bytes: int = 1 << 30,
    ):
        if constrained not in CONSTRAINED_METHODS:
            raise ValueError(f"constrained must be one of {CONSTRAINED_METHODS}, not {constrained!r}")
        self.model, self.tokenizer = model, tokenizer
        self.eos_ids = eos_token_ids(model, tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]
        self.micro_batch_size = micro_batch_size
        self.max_batch_tokens = max_batch_tokens
        self.constrained = constrained
        self.max_padding = max_padding
        self.seed = seed
        self._generators: dict[torch.device, torch.Generator] = {}
        self.prefix_cache_bytes = prefix_cache_bytes
        self.prefix_stats = {"prompt_tokens": 0, "reused_tokens": 0}
        self._prefixes: PrefixCache | None = None  # open while a session is
        self._reply_ids: dict[str, list[int]] = {}  # allowed text -> its token ids (``_tries``)
        self._flat: OrderedDict[tuple, tuple[ActionTrie, FlatTrie]] = OrderedDict()  # ``_flat_tries``

    def generator(self, device: torch.device, seed: int | None = None) -> torch.Generator:
        """A fresh generator on ``device`` seeded with ``seed``, or the backend's own for that device.

        Sampling draws its random numbers where the probabilities are: a CPU generator would make
        every token step draw on the host and copy the model's probabilities there.
        """
        if seed is not None:
            return torch.Generator(device=device).manual_seed(seed)
        if device not in self._generators:
            self._generators[device] = torch.Generator(device=device).manual_seed(self.seed)
        return self._generators[device]

    def sync_weights(self) -> None:
        """Nothing to do: generation reads the trained model itself."""

    @contextmanager
    def session(self) -> Iterator[None]:
        """A context in which ``"tree"`` scoring keeps each prompt's keys and values, so that a later
        prompt extending one (the next turn of a conversation) runs only its new tokens
        (``prefix_cache``); a session opened inside another is that one. Outside a session nothing
        is kept and scoring is exactly the same as without one.

        What is kept is dropped when the model would compute other keys and values: a parameter
        modified in place (an optimizer step, ``load_state_dict``; writes through ``.data`` are
        invisible to its version counter), another adapter routing, another autocast.
        """
        if self._prefixes is not None:
            yield
            return
        self._prefixes = PrefixCache(self.prefix_cache_bytes)
        try:
            yield
        finally:
            self._prefixes = None

    def _fingerprint(self) -> tuple:
        """What the model's keys and values depend on besides its inputs (see ``session``)."""
        first = next(self.model.parameters())
        kind = first.device.type
        return (
            tuple(p._version for p in self.model.parameters()), first.device, first.dtype, adapter_routing(self.model),
            torch.is_autocast_enabled(kind) and torch.get_autocast_dtype(kind),
        )

    def _tries(self, allowed: Sequence[Sequence[str]]) -> list[ActionTrie]:
        """``ActionTrie.from_texts`` of each list of replies, tokenising each text once per backend.

        A rollout offers the same commands at every turn of every row (~30 texts x 32 rows a turn):
        tokenising them every time cost ~25 ms a turn on a CPU, 40x the memo's look-ups. New texts
        are tokenised in one batched call; the memo forgets its oldest texts beyond
        ``REPLY_MEMO_SIZE``.
        """
        memo = self._reply_ids
        missing = list(dict.fromkeys(text for texts in allowed for text in texts if text not in memo))
        if missing:
            memo.update(zip(missing, self.tokenizer(missing, add_special_tokens=False)["input_ids"]))
        tries = [ActionTrie.from_ids([memo[text] for text in texts], self.eos_ids[0]) for texts in allowed]
        for _ in range(len(memo) - REPLY_MEMO_SIZE):
            del memo[next(iter(memo))]
        return tries

    def _flat_tries(self, keys: Sequence[tuple[Sequence[str], int]]) -> list[tuple[ActionTrie, FlatTrie]]:
        """The trie of each (allowed replies, prompt's last token) and its ``flatten``, built once
        per backend while recently used (``TRIE_MEMO_SIZE``).

        An env offers the same commands turn after turn (ALFWorld: wherever the agent stands
        again), and a conversation's prompts all end with the same assistant header: rebuilding the
        trie, its flat queries, their ancestry mask and edge list every turn was ~10 % of a
        rollout's time.
        """
        memo = self._flat
        wanted = [(tuple(texts), int(last)) for texts, last in keys]
        missing = list(dict.fromkeys(key for key in wanted if key not in memo))
        for key, trie in zip(missing, self._tries([texts for texts, _ in missing]) if missing else []):
            memo[key] = (trie, flatten(trie.root, key[1]))
        for key in wanted:
            memo.move_to_end(key)
        out = [memo[key] for key in wanted]
        while len(memo) > TRIE_MEMO_SIZE:
            memo.popitem(last=False)
        return out

    def chunks(self, lengths: Sequence[int], max_padding: float | None = None, widths: Sequence[int] | None = None) -> list[list[int]]:
        """Prompt indices grouped by similar length, each chunk within the row and token budgets.

        Prompts of a multi-turn batch differ a lot in length (ALFWorld: ~300-1,100 tokens), and a
        padded batch pays for its longest prompt in every row; sorting first keeps the padding
        small while each chunk stays one batched call. ``max_padding`` also caps a chunk's padding
        at that fraction of its real tokens. ``widths`` (one per prompt) sorts and caps the
        padding by those instead, for a pass whose widest input is not the prompt; the token
        budget still counts the prompts.
        """
        keys = lengths if widths is None else widths
        order = sorted(range(len(lengths)), key=lambda i: keys[i])
        chunks: list[list[int]] = []
        real = longest = 0
        for i in order:
            if chunks:
                rows = len(chunks[-1]) + 1
                padded = rows * keys[i]  # sorted: the newcomer is the widest
                if rows <= self.micro_batch_size and rows * max(longest, lengths[i]) <= self.max_batch_tokens and (
                    max_padding is None or padded <= (1 + max_padding) * (real + keys[i])
                ):
                    chunks[-1].append(i)
                    real += keys[i]
                    longest = max(longest, lengths[i])
                    continue
            chunks.append([i])
            real, longest = keys[i], lengths[i]
        return chunks

    @torch.no_grad()
    def generate(
        self,
        prompt_ids: Sequence[Sequence[int]],
        config: GenerationConfig,
        allowed: Sequence[Sequence[str]] | None = None,
    ) -> GenerationOutput:
        if allowed is not None and len(allowed) != len(prompt_ids):
            raise ValueError(f"allowed has {len(allowed)} entries for {len(prompt_ids)} prompts")
        n = len(prompt_ids)
        device = next(self.model.parameters()).device
        row_seeds = config.checked_row_seeds(n)
        if row_seeds is not None:
            generators: list[torch.Generator] = [self.generator(device, seed) for seed in row_seeds]
        else:
            generators = [self.generator(device, config.seed)] * n
        if allowed is not None and self.constrained == "tree" and supports_tree_mask(self.model):
            return self._generate_tree(prompt_ids, config, allowed, generators if row_seeds is not None else generators[0])
        texts: list[str] = [""] * n
        response_ids: list[list[int]] = [[] for _ in range(n)]
        logprobs: list[list[float]] = [[] for _ in range(n)]
        allowed_ids: list[list[list[int]]] | None = None if allowed is None else [[] for _ in range(n)]
        for chunk in self.chunks([len(p) for p in prompt_ids]):
            part = self._generate(
                [prompt_ids[i] for i in chunk], config, None if allowed is None else [allowed[i] for i in chunk],
                generators[chunk[0]] if row_seeds is None else [generators[i] for i in chunk],
            )
            for k, i in enumerate(chunk):
                texts[i], response_ids[i], logprobs[i] = part.texts[k], part.response_ids[k], part.logprobs[k]
                if allowed_ids is not None:
                    allowed_ids[i] = part.allowed_token_ids[k]
        return GenerationOutput(texts, response_ids, logprobs, allowed_ids)

    def _generate(self, prompt_ids, config, allowed, generator) -> GenerationOutput:
        model = self.model
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        B, P = len(prompt_ids), max(len(p) for p in prompt_ids)
        ids = torch.full((B, P), self.pad_id, dtype=torch.long)
        attention = torch.zeros((B, P), dtype=torch.long)
        for b, p in enumerate(prompt_ids):
            ids[b, P - len(p):] = torch.tensor(list(p), dtype=torch.long)
            attention[b, P - len(p):] = 1
        ids, attention = ids.to(device), attention.to(device)
        positions = position_ids(attention)
        nodes, max_new_tokens = None, config.max_new_tokens
        if allowed is not None:  # a constrained reply always completes, whatever max_new_tokens says
            tries = self._tries(allowed)
            nodes = [trie.root for trie in tries]
            max_new_tokens = max(max_new_tokens, max(trie.depth for trie in tries))
        eos = torch.tensor(self.eos_ids, device=device)
        tokens: list[list[int]] = [[] for _ in range(B)]
        logps: list[list[float]] = [[] for _ in range(B)]
        allowed_ids: list[list[list[int]]] = [[] for _ in range(B)]
        active = list(range(B))  # rows still generating, on the host (``finished`` is its device twin)
        finished = torch.zeros(B, dtype=torch.bool, device=device)
        cache_arg = _cache_argument(model)
        out = model(
            input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=True, logits_to_keep=1
        )
        last_pos = positions[:, -1]
        scratch = None  # draw's weights, one buffer for every step
        for _ in range(max_new_tokens):
            choices, allowed_now = None, None
            if nodes is not None:  # a finished row may take anything (the end token): it is discarded
                choices = [ActionTrie.choices(node) if node else [self.eos_ids[0]] for node in nodes]
                allowed_now = _padded(choices).to(device)
            logits = out.logits[:, -1, :]
            if scratch is None:
                scratch = torch.empty(logits.shape, dtype=torch.float32, device=device)
            next_tokens, chosen = draw(logits, config, allowed_now, generator, scratch)
            step_tokens, step_logps = _to_host(next_tokens, chosen)
            for b in active:
                tokens[b].append(step_tokens[b])
                logps[b].append(step_logps[b])
                if choices is not None:
                    allowed_ids[b].append(choices[b])
                    nodes[b] = nodes[b].get(step_tokens[b], {})
            active = [b for b in active if step_tokens[b] not in self.eos_ids]
            if not active:
                break
            finished |= torch.isin(next_tokens, eos)
            next_tokens = torch.where(finished, torch.full_like(next_tokens, self.pad_id), next_tokens)
            attention = torch.cat([attention, torch.ones((B, 1), dtype=attention.dtype, device=device)], dim=1)
            last_pos = last_pos + 1
            out = model(
                input_ids=next_tokens[:, None],
                attention_mask=attention,
                position_ids=last_pos[:, None],
                use_cache=True,
                logits_to_keep=1,
                **{cache_arg: _cache_of(out)},
            )
        if was_training:
            model.train()
        texts = self.tokenizer.batch_decode(tokens, skip_special_tokens=True)
        return GenerationOutput(texts, tokens, logps, None if nodes is None else allowed_ids)

    def _generate_tree(self, prompt_ids, config, allowed, generators) -> GenerationOutput:
        """Constrained replies from ``tree_scoring``'s logits at every trie node, drawn along the
        tries by ``_walk``, chunk by chunk as ``_generate`` draws them token by token: the same
        random numbers pick the same tokens, whichever way the logits were computed.

        Rows with the same prompt and allowed replies (a group's first turn, repeated evaluation
        episodes) share their forward passes; each still draws its own reply.
        """
        model = self.model
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        unique: dict[tuple, int] = {}  # (prompt, replies) -> its index in ``first``
        first: list[int] = []  # the first row of each distinct (prompt, replies)
        which: list[int] = []  # each row's index in ``first``
        for row, key in enumerate(zip(map(tuple, prompt_ids), map(tuple, allowed))):
            if key not in unique:
                unique[key] = len(first)
                first.append(row)
            which.append(unique[key])
        tries, flat = zip(*self._flat_tries([(allowed[row], prompt_ids[row][-1]) for row in first]))
        node_logits: list[torch.Tensor] = [torch.empty(0)] * len(unique)
        widths = self._session_widths([prompt_ids[row] for row in first], flat) if self._prefixes is not None else None
        for chunk in self.chunks([len(prompt_ids[row]) for row in first], self.max_padding, widths):
            scores = self._tree_scores([prompt_ids[first[u]] for u in chunk], [flat[u] for u in chunk], device)
            for u, table in zip(chunk, scores):
                node_logits[u] = table
        if was_training:
            model.train()
        n = len(prompt_ids)
        tokens: list[list[int]] = [[] for _ in range(n)]
        logps: list[list[float]] = [[] for _ in range(n)]
        allowed_ids: list[list[list[int]]] = [[] for _ in range(n)]
        for chunk in self.chunks([len(p) for p in prompt_ids]):
            self._walk(
                chunk, [tries[which[b]].root for b in chunk],
                [(node_logits[which[b]], flat[which[b]].query_of) for b in chunk], config,
                generators if isinstance(generators, torch.Generator) else [generators[b] for b in chunk],
                (tokens, logps, allowed_ids),
            )
        return GenerationOutput(self.tokenizer.batch_decode(tokens, skip_special_tokens=True), tokens, logps, allowed_ids)

    def _session_widths(self, prompts: Sequence[Sequence[int]], flat: Sequence[FlatTrie]) -> list[int]:
        """Each prompt's tokens past its longest kept prefix plus its trie's queries: inside a
        session the inputs of its two scoring passes, so the widths to chunk by (a conversation's
        prompts differ more in their tries, ~40-300 queries, than in their new tokens)."""
        kept = self._prefixes
        kept.validate(self._fingerprint())
        return [len(p) - 1 - kept.longest(p[:-1])[0] + len(f.tokens) for p, f in zip(prompts, flat)]

    def _walk(self, rows, nodes, scores, config, generator, outputs) -> None:
        """Draw the replies of ``rows`` down their tries (``nodes``: each row's root), one token step
        for every row at a time like ``_generate``, from ``scores``: each row's ``child_logits``
        table and query index of each inner node. Appends to ``outputs`` (tokens, log-probs,
        allowed ids).

        ``draw`` runs on the children's logits with local ids ``0..K-1`` standing for the node's
        sorted choices: the same K logits, in the same order, as ``_generate`` gathers from the
        vocabulary, so the same uniform picks the same token with the same restricted log-prob.
        """
        tokens, logps, allowed_ids = outputs
        device = scores[0][0].device
        active = list(range(len(rows)))
        while active:
            # a finished row may take anything (the end token): it is discarded, but draws as in _generate
            choices = [ActionTrie.choices(node) if node else [self.eos_ids[0]] for node in nodes]
            logits = torch.zeros(len(rows), max(map(len, choices)), device=device)
            for k, (node, (table, query_of)) in enumerate(zip(nodes, scores)):
                if node:
                    logits[k, :len(choices[k])] = table[query_of[id(node)], :len(choices[k])]
            local = _padded([list(range(len(c))) for c in choices]).to(device)
            picked, chosen = draw(logits, config, local, generator)
            step_picks, step_logps = _to_host(picked, chosen)
            for k in active:
                b, token = rows[k], choices[k][step_picks[k]]
                tokens[b].append(token)
                logps[b].append(step_logps[k])
                allowed_ids[b].append(choices[k])
                nodes[k] = nodes[k].get(token, {})
            active = [k for k in active if choices[k][step_picks[k]] not in self.eos_ids]

    def _tree_scores(self, prompts: Sequence[Sequence[int]], tries: Sequence[FlatTrie], device: torch.device) -> list[torch.Tensor]:
        """Each trie's ``child_logits`` (``tree_scoring``): one pass over the prompts but their last
        tokens (``_prefill``, or inside a session ``_prefill_reusing``), then one over the tries,
        reading the final hidden states.

        Every pass calls the model itself, not its decoder, as a sharding engine (FSDP2) needs its
        root module's hooks; ``logits_to_keep=1`` keeps its vocabulary-wide head to one position.
        """
        model = self.model
        prefixes = [list(p[:-1]) for p in prompts]
        if self._prefixes is None:
            cache, visible = self._prefill(prefixes, device), None
        else:
            cache, visible = self._prefill_reusing(prefixes, device)
        width = 0 if cache is None else cache.get_seq_length()
        inputs = tree_inputs([len(p) for p in prefixes], tries, width, self.pad_id, visible)
        hidden = model(
            input_ids=inputs["input_ids"].to(device), position_ids=inputs["position_ids"].to(device),
            attention_mask=self._attention_mask(inputs["attention_mask"], device), use_cache=cache is not None,
            logits_to_keep=1, output_hidden_states=True, **({} if cache is None else {_cache_argument(model): cache}),
        ).hidden_states[-1]
        return child_logits(hidden, model.get_output_embeddings(), tries)

    def _attention_mask(self, mask: torch.Tensor, device: torch.device) -> torch.Tensor:
        """A boolean 4D mask as the model's attention takes it: eager attention adds its mask to the scores."""
        mask = mask.to(device)
        if attention_kind(self.model) == "eager":
            mask = torch.zeros(mask.shape, device=device).masked_fill_(~mask, torch.finfo(torch.float32).min)
        return mask

    def _prefill(self, prefixes: Sequence[Sequence[int]], device: torch.device):
        """The model's cache after ``prefixes``, right-padded and run unmasked (``tree_scoring``), or
        None when every prefix is empty."""
        width = max(map(len, prefixes))
        if not width:
            return None
        ids = torch.full((len(prefixes), width), self.pad_id, dtype=torch.long)
        for b, prefix in enumerate(prefixes):
            ids[b, :len(prefix)] = torch.tensor(prefix, dtype=torch.long)
        positions = torch.arange(width).expand(len(prefixes), width)
        return _cache_of(self.model(input_ids=ids.to(device), position_ids=positions.to(device), use_cache=True, logits_to_keep=1))

    def _prefill_reusing(self, prefixes: Sequence[Sequence[int]], device: torch.device):
        """``_prefill`` inside a session: the cache, the columns of it each row sees (``tree_inputs``'s
        ``visible``), and each prefix's keys and values kept for later prompts.

        Each prefix starts from the longest kept one it extends (``_extend``), unless the chunk would
        reuse less than half its tokens: the masked pass is slower per token than the fused causal
        one, so then every row runs whole, as outside a session.
        """
        kept = self._prefixes
        kept.validate(self._fingerprint())
        hits = [kept.longest(p) for p in prefixes]
        total, reused = sum(map(len, prefixes)), sum(k for k, _ in hits)
        self.prefix_stats["prompt_tokens"] += total
        if not reused or 2 * reused < total:
            hits = [(0, None)] * len(prefixes)
            cache = self._prefill(prefixes, device)
        else:
            self.prefix_stats["reused_tokens"] += reused
            cache = self._extend(prefixes, hits, device)
        start = max(k for k, _ in hits)  # the first column of the new tokens
        visible = torch.zeros(len(prefixes), 0 if cache is None else cache.get_seq_length(), dtype=torch.bool)
        for b, (prefix, (k, _)) in enumerate(zip(prefixes, hits)):
            end = start + len(prefix) - k
            visible[b, :k] = visible[b, start:end] = True
            if end > start and prefix not in kept:  # a row's own copy: an entry must not hold the batch's tensors
                kept.put(prefix, [
                    tuple(torch.cat([t[b, :, :k], t[b, :, start:end]], dim=1) for t in (layer.keys, layer.values))
                    for layer in cache.layers
                ])
        return cache, visible

    def _extend(self, prefixes: Sequence[Sequence[int]], hits, device: torch.device):
        """The cache after ``prefixes`` given ``hits`` (per prefix, the length of its kept start and
        that start's layers, ``(0, None)`` when none): the kept keys and values right-padded to the
        longest, then one pass over the rest of every prefix, right-padded too. A new token sees its
        row's kept tokens and its row's new tokens up to itself, at positions continuing the kept
        ones; a padding token sees itself only."""
        from transformers import DynamicCache  # here: the action scorer imports this module without transformers

        rows, start = len(prefixes), max(k for k, _ in hits)
        cache = DynamicCache()
        for i, (keys, values) in enumerate(next(layers for k, layers in hits if k)):
            past = [t.new_zeros(rows, t.shape[0], start, t.shape[2]) for t in (keys, values)]
            for b, (k, layers) in enumerate(hits):
                if k:
                    past[0][b, :, :k], past[1][b, :, :k] = layers[i]
            cache.update(*past, i)
        suffixes = [prefix[k:] for prefix, (k, _) in zip(prefixes, hits)]
        width = max(map(len, suffixes))
        if not width:
            return cache
        ids = torch.full((rows, width), self.pad_id, dtype=torch.long)
        positions = torch.arange(width).repeat(rows, 1)
        mask = torch.zeros((rows, 1, width, start + width), dtype=torch.bool)
        mask[:, 0, :, start:] = torch.eye(width, dtype=torch.bool)
        causal = torch.ones(width, width, dtype=torch.bool).tril()
        for b, (suffix, (k, _)) in enumerate(zip(suffixes, hits)):
            ids[b, :len(suffix)] = torch.tensor(suffix, dtype=torch.long)
            positions[b] += k
            mask[b, 0, :len(suffix), :k] = True
            mask[b, 0, :len(suffix), start:start + len(suffix)] = causal[:len(suffix), :len(suffix)]
        return _cache_of(self.model(
            input_ids=ids.to(device), position_ids=positions.to(device), attention_mask=self._attention_mask(mask, device),
            use_cache=True, logits_to_keep=1, **{_cache_argument(self.model): cache},
        ))
