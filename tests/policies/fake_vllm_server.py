"""A stand-in for ``vllm serve`` on 127.0.0.1: the routes ``VLLMServerBackend`` uses, answered by a
transformers model, every request recorded.

- ``/v1/completions`` samples from the model as vLLM does for one request (its own seeded
  generator, temperature, top-p, stop token ids) and answers in vLLM 0.32's shape (``token_ids``
  with ``return_token_ids``, ``logprobs.token_logprobs``): raw log-probs (``raw_logprobs``, the
  untempered ones) or processed ones (after the temperature; top-p is not renormalised here, so the
  fake is exact only at ``top_p=1``, the only case the backend accepts in that mode).
- ``/v1/models``, and with ``dev_mode`` (``VLLM_SERVER_DEV_MODE=1``) ``/server_info``,
  ``/get_world_size``, ``/pause``, ``/resume`` and the weight-update routes; without it those answer
  404 as vLLM's do.
- ``overrides[route] = (status, body bytes)`` makes a route answer something else (errors,
  malformed JSON); ``delay`` slows every completion down (timeouts).

``CopyTransport`` is the weight transport of the tests: it copies the weights into the fake's
model, checking that the server is paused meanwhile.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import torch


class FakeVLLMServer:
    def __init__(self, model, *, model_name: str = "served-model", logprobs_mode: str = "processed_logprobs",
                 dev_mode: bool = True, world_size: int = 1):
        self.model = model.eval()
        self.model_name = model_name
        self.logprobs_mode = logprobs_mode
        self.dev_mode = dev_mode
        self.world_size = world_size
        self.requests: list[tuple[str, str, Any]] = []  # (method, path with query, JSON body)
        self.completions_while_paused = 0
        self.overrides: dict[str, tuple[int, bytes]] = {}
        self.delay = 0.0
        self.paused = False
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                status, payload = fake.handle(method, self.path, json.loads(raw) if raw else None)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "FakeVLLMServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def bodies(self, route: str) -> list[Any]:
        return [body for _, path, body in self.requests if urlsplit(path).path == route]

    def routes(self) -> list[str]:
        return [urlsplit(path).path for _, path, _ in self.requests]

    # -- routes
    def handle(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        with self._lock:
            self.requests.append((method, path, body))
        route = urlsplit(path).path
        if route in self.overrides:
            return self.overrides[route]
        if route == "/v1/models" and method == "GET":
            return 200, {"object": "list", "data": [{"id": self.model_name, "object": "model", "root": self.model_name}]}
        if route == "/v1/completions" and method == "POST":
            return self.complete(body)
        dev = {
            ("GET", "/server_info"): lambda: {
                "vllm_config": {"model_config": {"logprobs_mode": self.logprobs_mode, "dtype": str(self.model.dtype)}},
            },
            ("GET", "/get_world_size"): lambda: {"world_size": self.world_size},
            ("POST", "/pause"): lambda: self._set_paused(True),
            ("POST", "/resume"): lambda: self._set_paused(False),
            ("POST", "/init_weight_transfer_engine"): lambda: {"message": "Weight transfer initialized"},
            ("POST", "/start_weight_update"): lambda: {"message": "Weight update started"},
            ("POST", "/update_weights"): lambda: {"message": "Weights updated"},
            ("POST", "/finish_weight_update"): lambda: {"message": "Weight update finished"},
        }
        if self.dev_mode and (method, route) in dev:
            return 200, dev[(method, route)]()
        return 404, {"detail": "Not Found"}

    def _set_paused(self, paused: bool) -> dict:
        self.paused = paused
        return {"status": "paused" if paused else "resumed"}

    def complete(self, body: dict) -> tuple[int, Any]:
        if body.get("model") != self.model_name:
            message = f"The model `{body.get('model')}` does not exist."
            return 404, {"error": {"message": message, "type": "NotFoundError", "param": "model", "code": 404}}
        if self.paused:
            self.completions_while_paused += 1
        time.sleep(self.delay)
        prompt = list(body["prompt"])
        temperature, top_p = body["temperature"], body["top_p"]
        generator = None if body.get("seed") is None else torch.Generator().manual_seed(body["seed"])
        tokens: list[int] = []
        logprobs: list[float] = []
        finish = "length"
        with self._lock, torch.no_grad():
            for _ in range(body["max_tokens"]):
                logits = self.model(torch.tensor([prompt + tokens])).logits[0, -1].float()
                if temperature == 0:
                    token = int(logits.argmax())
                    reported = torch.log_softmax(logits, -1)
                else:
                    tempered = torch.log_softmax(logits / temperature, -1)
                    probs = tempered.exp()
                    order = probs.argsort(descending=True)
                    keep = probs[order].cumsum(0) - probs[order] < top_p
                    nucleus = torch.zeros_like(probs).scatter(0, order[keep], probs[order][keep])
                    token = int(torch.multinomial(nucleus, 1, generator=generator))
                    reported = tempered if self.logprobs_mode == "processed_logprobs" else torch.log_softmax(logits, -1)
                tokens.append(token)
                logprobs.append(float(reported[token]))
                if token in body.get("stop_token_ids", []):
                    finish = "stop"
                    break
        choice = {
            "index": 0, "text": "", "finish_reason": finish, "stop_reason": None, "token_ids": tokens,
            "logprobs": {"text_offset": [0] * len(tokens), "token_logprobs": logprobs,
                         "tokens": [f"t{t}" for t in tokens], "top_logprobs": [None] * len(tokens)},
        }
        return 200, {"id": "cmpl-0", "object": "text_completion", "created": 0, "model": self.model_name,
                     "choices": [choice], "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(tokens)}}


class CopyTransport:
    """Copies the weights into the fake server's model; records what it sent and whether the
    server was paused while it did."""

    def __init__(self, server: FakeVLLMServer):
        self.server = server
        self.sent: list[dict[str, torch.Tensor]] = []
        self.paused_during_send: list[bool] = []

    def send(self, weights: list[tuple[str, Any]]) -> None:
        self.paused_during_send.append(self.server.paused)
        state = {name: tensor.detach().clone() for name, tensor in weights}
        with self.server._lock:
            self.server.model.load_state_dict(state, strict=True)
        self.sent.append(state)
