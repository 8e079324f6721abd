"""VLLMServerBackend against a fake ``vllm serve`` (tests/policies/fake_vllm_server.py) backed by the
tiny transformers model: the exact request bodies, the parsing of token ids and log-probs, every
error a server can answer, the weight sync around pause/resume, and trainer iterations that
generate on the server and push the updated weights into it. No vLLM needed; the test against a
real ``vllm serve`` is tests/policies/test_vllm_server_real.py.
"""

from __future__ import annotations

import socket

import pytest
import torch

from rspo_gym.errors import UserError
from rspo_gym.rollout.generation import GenerationConfig
from rspo_gym.policies.models import load_model
from rspo_gym.policies.vllm_server import VLLMServerBackend, VLLMServerClient, routable_address
from tests.policies.fake_vllm_server import CopyTransport, FakeVLLMServer

PROMPTS = [[5, 6, 7, 8], [9, 10], [5, 6, 7, 8]]
SAMPLING = GenerationConfig(max_new_tokens=6, temperature=0.7, top_p=1.0, row_seeds=(11, 12, 13))


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = load_model("tiny-untrained", device="cpu", seed=0)
    return model, tokenizer


@pytest.fixture
def server(tiny):
    served, _ = load_model("tiny-untrained", device="cpu", seed=0)
    with FakeVLLMServer(served) as fake:
        yield fake


def expected_body(prompt, seed, *, max_tokens=6, temperature=0.7, top_p=1.0, stop=None, model="served-model"):
    return {
        "model": model, "prompt": prompt, "n": 1, "max_tokens": max_tokens, "temperature": temperature, "top_p": top_p,
        "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
        "min_tokens": 0, "seed": seed, "stop_token_ids": stop, "logprobs": 0, "return_token_ids": True, "stream": False,
    }


def teacher_forced(model, prompt, response, temperature):
    with torch.no_grad():
        logits = model(torch.tensor([prompt + response])).logits[0, len(prompt) - 1:-1].float()
    scaled = logits / temperature if temperature > 0 else logits
    return torch.log_softmax(scaled, -1).gather(-1, torch.tensor(response).unsqueeze(-1)).squeeze(-1)


def test_requests_carry_token_ids_row_seeds_and_every_sampling_knob(tiny, server):
    model, tokenizer = tiny
    backend = VLLMServerBackend(model, tokenizer, server.url)
    output = backend.generate(PROMPTS, SAMPLING)
    stop = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    bodies = sorted(server.bodies("/v1/completions"), key=lambda body: body["seed"])
    assert bodies == [expected_body(p, s, stop=stop) for p, s in zip(PROMPTS, (11, 12, 13))]
    # the call's seed, when rows have none, is seed + row (rows of one prompt must differ)
    backend.generate(PROMPTS[:2], GenerationConfig(max_new_tokens=3, temperature=0.0, seed=40))
    greedy = sorted(server.bodies("/v1/completions")[3:], key=lambda body: body["seed"])
    assert greedy == [expected_body(p, s, max_tokens=3, temperature=0.0, stop=stop) for p, s in zip(PROMPTS[:2], (40, 41))]
    assert server.routes()[:2] == ["/v1/models", "/server_info"]
    assert len(output.response_ids) == 3


def test_token_ids_and_logprobs_are_parsed_in_row_order(tiny, server):
    model, tokenizer = tiny
    backend = VLLMServerBackend(model, tokenizer, server.url)
    output = backend.generate(PROMPTS, SAMPLING)
    for prompt, ids, logprobs, text in zip(PROMPTS, output.response_ids, output.logprobs, output.texts):
        assert 1 <= len(ids) == len(logprobs) <= 6
        expected = teacher_forced(model, prompt, ids, SAMPLING.temperature)
        assert torch.allclose(torch.tensor(logprobs), expected, atol=1e-5)
        assert text == tokenizer.decode(ids, skip_special_tokens=True)
    again = backend.generate(PROMPTS, SAMPLING)
    assert again.response_ids == output.response_ids  # the row seeds reproduce
    assert output.response_ids[0] != output.response_ids[2]  # one prompt, two seeds, two samples


def test_sync_pauses_the_server_sends_the_weights_and_resumes(tiny, server):
    model, tokenizer = tiny
    learner, _ = load_model("tiny-untrained", device="cpu", seed=5)  # not the weights the server started with
    transport = CopyTransport(server)
    backend = VLLMServerBackend(learner, tokenizer, server.url, transport=transport)
    backend.generate(PROMPTS[:1], SAMPLING)
    assert server.routes()[2:] == ["/pause", "/resume", "/v1/completions"]  # the first call pushes
    assert server.requests[2][1] == "/pause?mode=abort&clear_cache=true"
    backend.generate(PROMPTS[:1], SAMPLING)
    assert len(transport.sent) == 1  # nothing changed: no second push
    with torch.no_grad():
        for parameter in learner.parameters():
            parameter.add_(0.01)
    backend.sync_weights()
    output = backend.generate(PROMPTS, SAMPLING)
    assert len(transport.sent) == 2 and transport.paused_during_send == [True, True]
    assert server.routes()[-5:-3] == ["/pause", "/resume"] and not server.paused
    for name, tensor in learner.state_dict().items():
        assert torch.equal(server.model.state_dict()[name], tensor)
    for prompt, ids, logprobs in zip(PROMPTS, output.response_ids, output.logprobs):
        assert torch.allclose(torch.tensor(logprobs), teacher_forced(learner, prompt, ids, 0.7), atol=1e-5)
    assert server.completions_while_paused == 0


def test_a_shared_server_generates_each_backends_own_weights(tiny, server):
    _, tokenizer = tiny
    learner, _ = load_model("tiny-untrained", device="cpu", seed=5)
    explorer, _ = load_model("tiny-untrained", device="cpu", seed=6)
    transport = CopyTransport(server)
    backend = VLLMServerBackend(learner, tokenizer, server.url, transport=transport)
    other = backend.sharing(explorer)
    for policy_backend, model in ((other, explorer), (backend, learner), (backend, learner), (other, explorer)):
        output = policy_backend.generate(PROMPTS[:1], SAMPLING)
        expected = teacher_forced(model, PROMPTS[0], output.response_ids[0], 0.7)
        assert torch.allclose(torch.tensor(output.logprobs[0]), expected, atol=1e-5)
    assert len(transport.sent) == 3  # explorer, learner, explorer: one push per switch


@pytest.mark.parametrize("sender", [True, False])
def test_under_a_launcher_every_rank_pushes_in_sync_weights_then_waits(tiny, server, sender):
    """Ranks share one server: the push happens where every rank is (after the update), rank 0
    alone pauses and resumes the server, and the barrier keeps the others from generating early."""
    model, tokenizer = tiny
    transport = CopyTransport(server)
    transport.is_sender = sender
    waits = []
    backend = VLLMServerBackend(model, tokenizer, server.url, transport=transport, barrier=lambda: waits.append(len(transport.sent)))
    assert len(transport.sent) == 1 and waits == [1]  # the start's push, at construction
    backend.generate(PROMPTS[:1], SAMPLING)
    backend.sync_weights()
    assert len(transport.sent) == 2 and waits == [1, 2]
    backend.generate(PROMPTS[:1], SAMPLING)
    assert len(transport.sent) == 2
    pauses = ["/pause", "/resume", "/v1/completions", "/pause", "/resume", "/v1/completions"]
    assert server.routes()[2:] == (pauses if sender else ["/v1/completions", "/v1/completions"])
    with pytest.raises(UserError, match="cannot share one vLLM server between several ranks"):
        backend.sharing(model)


def test_weight_routes_carry_vllms_bodies(server):
    client = VLLMServerClient(server.url)
    init = {"master_address": "10.0.0.1", "master_port": 29500, "rank_offset": 1, "world_size": 2, "packed": True}
    update = {"names": ["w"], "dtype_names": ["float32"], "shapes": [[2, 3]]}
    client.init_weight_transfer_engine(init)
    client.start_weight_update()
    client.update_weights(update)
    client.finish_weight_update()
    client.finish_weight_update("7")
    assert server.requests == [
        ("POST", "/init_weight_transfer_engine", {"init_info": init}),
        ("POST", "/start_weight_update", {}),
        ("POST", "/update_weights", {"update_info": update}),
        ("POST", "/finish_weight_update", {}),
        ("POST", "/finish_weight_update", {"weight_version": "7"}),
    ]


def test_the_nccl_rendezvous_address_is_on_the_route_to_the_server():
    assert routable_address("http://127.0.0.1:8000") == "127.0.0.1"
    assert routable_address("http://localhost:8000") == "127.0.0.1"


def test_without_a_transport_sync_weights_refuses(tiny, server):
    model, tokenizer = tiny
    backend = VLLMServerBackend(model, tokenizer, server.url)
    backend.generate(PROMPTS[:1], SAMPLING)
    assert "/pause" not in server.routes()
    with pytest.raises(UserError, match="no weight transport .*vllm_weight_sync='nccl'"):
        backend.sync_weights()


# ------------------------------------------------------------------------------------ errors
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def test_unreachable_server(tiny):
    model, tokenizer = tiny
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(UserError, match=f"cannot reach the vLLM server at {url} .*is `vllm serve` running there") as error:
        VLLMServerBackend(model, tokenizer, url, timeout=5)
    one_line(error)


def test_no_answer_within_the_timeout(tiny, server):
    model, tokenizer = tiny
    backend = VLLMServerBackend(model, tokenizer, server.url, timeout=0.3)
    server.delay = 1.5
    with pytest.raises(UserError, match=r"POST /v1/completions .*no answer within 0.3 s \(vllm_server_timeout\)") as error:
        backend.generate(PROMPTS[:1], SAMPLING)
    one_line(error)


@pytest.mark.parametrize("status, body, message", [
    (400, b'{"error": {"message": "This model\'s maximum context length is 32 tokens.\\nShorten it.", "code": 400}}',
     "HTTP 400: This model's maximum context length is 32 tokens. Shorten it."),
    (500, b'{"error": "Failed to pause generation: boom"}', "HTTP 500: Failed to pause generation: boom"),
    (422, b'{"detail": [{"msg": "field required"}]}', "HTTP 422: [{'msg': 'field required'}]"),
    (502, b"<html>Bad Gateway</html>", "HTTP 502: <html>Bad Gateway</html>"),
])
def test_http_errors_carry_the_servers_message(tiny, server, status, body, message):
    model, tokenizer = tiny
    backend = VLLMServerBackend(model, tokenizer, server.url)
    server.overrides["/v1/completions"] = (status, body)
    with pytest.raises(UserError) as error:
        backend.generate(PROMPTS[:1], SAMPLING)
    assert one_line(error) == f"POST /v1/completions on the vLLM server at {server.url} failed with {message}"


@pytest.mark.parametrize("body, message", [
    (b"not json", "answered with malformed JSON: b'not json'"),
    (b'{"choices": []}', "answered /v1/completions without a choice"),
    (b'{"choices": [{"text": "x", "logprobs": {"token_logprobs": [-1.0]}}]}', "without response token ids or log-probs"),
    (b'{"choices": [{"text": "x", "token_ids": [3], "logprobs": null}]}', "without response token ids or log-probs"),
    (b'{"choices": [{"token_ids": [3, 4], "logprobs": {"token_logprobs": [-1.0]}}]}', "2 token ids with 1 log-probs"),
    (b'{"choices": [{"token_ids": [3], "logprobs": {"token_logprobs": [null]}}]}', "1 token ids with 1 log-probs (some missing)"),
])
def test_malformed_answers(tiny, server, body, message):
    model, tokenizer = tiny
    backend = VLLMServerBackend(model, tokenizer, server.url)
    server.overrides["/v1/completions"] = (200, body)
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")) as error:
        backend.generate(PROMPTS[:1], SAMPLING)
    one_line(error)


def test_model_names(tiny, server):
    model, tokenizer = tiny
    with pytest.raises(UserError, match=r"serves served-model, not 'Qwen/Qwen2.5-7B' \(vllm_server_model\)"):
        VLLMServerBackend(model, tokenizer, server.url, model_name="Qwen/Qwen2.5-7B")
    server.overrides["/v1/models"] = (200, b'{"data": [{"id": "a"}, {"id": "b"}]}')
    with pytest.raises(UserError, match=r"serves 2 models \(a, b\): set vllm_server_model to one"):
        VLLMServerBackend(model, tokenizer, server.url)
    backend = VLLMServerBackend(model, tokenizer, server.url, model_name="a")
    server.overrides.pop("/v1/models")
    with pytest.raises(UserError, match=r"HTTP 404: The model `a` does not exist."):  # vLLM's own message
        backend.generate(PROMPTS[:1], SAMPLING)
    server.overrides["/v1/models"] = (200, b'{"models": []}')
    with pytest.raises(UserError, match="without a model list: is it vLLM's OpenAI server"):
        VLLMServerBackend(model, tokenizer, server.url)


def test_logprobs_mode_must_give_the_protocols_logprobs(tiny):
    model, tokenizer = tiny
    served, _ = load_model("tiny-untrained", device="cpu", seed=0)
    with FakeVLLMServer(served, logprobs_mode="raw_logprobs") as raw:
        backend = VLLMServerBackend(model, tokenizer, raw.url)
        with pytest.raises(UserError, match="untempered log-probs .* temperature is 0.7: relaunch it with --logprobs-mode processed_logprobs"):
            backend.generate(PROMPTS[:1], SAMPLING)
        at_one = GenerationConfig(max_new_tokens=4, temperature=1.0, top_p=0.8, seed=1)
        output = backend.generate(PROMPTS[:1], at_one)  # raw log-probs are exact at temperature 1, any top-p
        expected = teacher_forced(model, PROMPTS[0], output.response_ids[0], 1.0)
        assert torch.allclose(torch.tensor(output.logprobs[0]), expected, atol=1e-5)
    with FakeVLLMServer(served) as processed:
        backend = VLLMServerBackend(model, tokenizer, processed.url)
        with pytest.raises(UserError, match="after top-p .* top_p is 0.8: use top_p=1"):
            backend.generate(PROMPTS[:1], at_one)
    with FakeVLLMServer(served, dev_mode=False) as plain:  # no /server_info: vLLM's default mode
        backend = VLLMServerBackend(model, tokenizer, plain.url)
        with pytest.raises(UserError, match="untempered log-probs"):
            backend.generate(PROMPTS[:1], SAMPLING)
    with FakeVLLMServer(served, logprobs_mode="raw_logits") as logits:
        with pytest.raises(UserError, match="--logprobs-mode raw_logits, which returns logits"):
            VLLMServerBackend(model, tokenizer, logits.url)


def test_weights_travel_in_the_servers_dtype(server):
    from rspo_gym.policies.vllm_server import _server_dtype, wire_dtype

    client = VLLMServerClient(server.url, timeout=10)
    assert _server_dtype(client) == torch.float32  # what /server_info writes: "torch.float32"
    server.model.to(torch.bfloat16)
    assert _server_dtype(client) == torch.bfloat16
    assert wire_dtype(torch.float32, torch.bfloat16) == torch.bfloat16  # bf16-mixed master weights: half the bytes
    server.overrides["/server_info"] = (200, b'{"vllm_config": {"model_config": {"dtype": "auto"}}}')
    assert _server_dtype(client) is None  # not a dtype: every tensor keeps its own
    server.dev_mode, server.overrides = False, {}
    assert _server_dtype(client) is None  # no /server_info at all


def test_constrained_decoding_is_refused(tiny, server):
    model, tokenizer = tiny
    backend = VLLMServerBackend(model, tokenizer, server.url)
    with pytest.raises(NotImplementedError, match="HF-only"):
        backend.generate(PROMPTS[:1], SAMPLING, allowed=[["look"]])


# ------------------------------------------------------------------------------------ trainers
def served_clone() -> FakeVLLMServer:
    """A fake server on the tiny ALFWorld clone's architecture, with other (random) weights."""
    model, _ = load_model("tiny-untrained", device="cpu", seed=3)
    return FakeVLLMServer(model)


@pytest.fixture
def clone_server(monkeypatch):
    """``(server, transports)``: a ``served_clone`` and the copy transports into it that
    trainers build in place of the NCCL transport."""
    made: list[CopyTransport] = []
    with served_clone() as server:
        def transport(client, **_):
            assert client.url == server.url
            made.append(CopyTransport(server))
            return made[-1]

        monkeypatch.setattr("rspo_gym.policies.vllm_server.NCCLWeightTransport", transport)
        yield server, made


TRAINER_SETTINGS = dict(
    model="tiny", generation_backend="vllm-server", constrained=False, num_groups=1, group_size=2, max_turns=2,
    max_new_tokens=6, eval_every=0, progress=False, learning_rate=1e-3,
)


def test_grpo_iteration_generates_on_the_server_and_syncs_the_update(clone_server):
    import rspo_gym  # noqa: F401
    from rspo_gym.algos import GRPOTrainer

    server, transports = clone_server
    trainer = GRPOTrainer("rspo/ALFWorld-v0", vllm_server_url=server.url, **TRAINER_SETTINGS)
    assert trainer.recompute_old_logprobs
    (transport,) = transports
    before = {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}
    trainer.learn(1)
    assert transport.sent and all(torch.equal(before[k], v) for k, v in transport.sent[0].items())  # first push: the start
    rollouts = len(server.bodies("/v1/completions"))
    assert rollouts >= 2 and server.routes()[2:4] == ["/pause", "/resume"]
    after = trainer.policy.model.state_dict()
    assert any(not torch.equal(before[k], v) for k, v in after.items()), "the update changed nothing"
    trainer.collect(1)  # the next generation pushes the updated weights first
    assert len(transport.sent) == 2 and transport.paused_during_send == [True, True]
    assert server.routes()[2 + 2 + rollouts:][:2] == ["/pause", "/resume"]
    for name, tensor in after.items():
        assert torch.equal(server.model.state_dict()[name], tensor), name
    assert server.completions_while_paused == 0


def test_a_lora_learner_sends_its_merged_weights_under_the_base_names(clone_server):
    import rspo_gym  # noqa: F401
    from rspo_gym.algos import GRPOTrainer
    from rspo_gym.policies.adapters import merged_weights

    server, transports = clone_server
    trainer = GRPOTrainer("rspo/ALFWorld-v0", vllm_server_url=server.url, lora_r=4, **TRAINER_SETTINGS)
    trainer.learn(1)
    trainer.collect(1)
    (transport,) = transports
    merged = dict(merged_weights(trainer.policy.model, trainer.policy.adapter))
    base = trainer.policy.model.get_base_model()
    assert set(transport.sent[-1]) == set(server.model.state_dict()) == set(merged)
    frozen = {n.replace(".base_layer.", "."): t for n, t in base.state_dict().items() if "lora_" not in n}
    folded = [name for name in merged if not torch.equal(merged[name], frozen[name])]
    assert folded and all(name.endswith("proj.weight") for name in folded)  # W + ΔW of the LoRA layers only
    for name, tensor in merged.items():
        assert torch.equal(server.model.state_dict()[name], tensor), name


def test_rspo_explorer_shares_the_server(clone_server):
    import rspo_gym  # noqa: F401
    from rspo_gym.algos import RSPOTrainer

    server, transports = clone_server
    trainer = RSPOTrainer("rspo/ALFWorld-v0", vllm_server_url=server.url, base="grpo", explorer_group_size=1,
                          vllm_server_timeout=60.0, **TRAINER_SETTINGS)
    assert trainer.explorer.backend._server is trainer.policy.backend._server
    snapshot = lambda policy: {k: v.clone() for k, v in policy.model.state_dict().items()}  # noqa: E731
    pushed = [snapshot(trainer.policy), snapshot(trainer.explorer)]
    history = trainer.learn(1)
    assert "explorer/success" in history[-1]
    trainer.collect(1)  # learner and explorer generate again, each with its updated weights
    pushed += [snapshot(trainer.policy), snapshot(trainer.explorer)]
    assert not all(torch.equal(pushed[1][k], v) for k, v in pushed[3].items()), "the explorer's update changed nothing"
    (transport,) = transports
    assert len(transport.sent) == 4  # learner, explorer, learner, explorer: one push per switch
    for sent, weights in zip(transport.sent, pushed):
        assert all(torch.equal(sent[k], v) for k, v in weights.items())


def test_training_refuses_a_server_without_weight_sync():
    import rspo_gym  # noqa: F401
    from rspo_gym.algos import GRPOTrainer

    with served_clone() as server:
        trainer = GRPOTrainer("rspo/ALFWorld-v0", vllm_server_url=server.url, vllm_weight_sync="none", **TRAINER_SETTINGS)
        with pytest.raises(UserError, match="vllm_weight_sync='none' leaves the server generating with its launch weights"):
            trainer.learn(1)
        metrics = trainer.evaluate()  # evaluation with the server's own weights is what 'none' is for
        assert "eval/success" in metrics
