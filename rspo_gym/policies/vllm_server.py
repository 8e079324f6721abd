"""Generation on a separate ``vllm serve`` process, weights pushed with vLLM's own transfer engine.

``VLLMServerBackend(model, tokenizer, url, transport=...)`` implements ``GenerationBackend`` (see
``generation.py``) over vLLM's OpenAI-compatible server: the trainer trains on its GPUs, the server
generates on others (verl / OpenRLHF / TRL's "server mode"). Plain HTTP (stdlib ``urllib``) carries
the requests; vLLM is imported only by ``NCCLWeightTransport``, the weight path.

How it works, and why:

- One ``/v1/completions`` request per prompt: the prompt as token ids, ``n=1``, the row's own
  ``seed`` (vLLM seeds per request, and our rollouts depend on (task, member, turn) seeds, not on
  which rows share a call), ``logprobs=0`` (the sampled token's log-prob) and
  ``return_token_ids=true`` (the sampled ids, so nothing is re-tokenised). Requests run
  concurrently from a thread pool and the server batches them. Every sampling knob a server fills
  from the model's ``generation_config.json`` when a request leaves it out (``top_k``,
  ``repetition_penalty``, ... -- Qwen2.5-Instruct ships ``top_k=20``) is sent explicitly, so the
  server samples exactly ``softmax(logits / T)`` with top-p and nothing else.
- Log-probs follow the protocol (the sampled token under ``softmax(logits / T)`` before top-p).
  A server's ``--logprobs-mode`` is fixed at launch: ``raw_logprobs`` (vLLM's default) is the
  untempered distribution, exact at temperature 1 (and greedy); ``processed_logprobs`` is taken
  after the temperature and top-p, exact whenever ``top_p=1``. The backend reads the mode from the
  server (``/server_info``) and refuses, in one line, a call whose log-probs the mode cannot give.
- Weight sync: ``sync_weights()`` marks the server's copy stale and the next ``generate`` pushes
  the weights first: ``/pause`` (vLLM aborts nothing of ours, since the trainer waits for its
  requests, and drops the prefix cache, whose KV was computed with the old weights), the
  transport's ``send`` of ``merged_weights(model, adapter)`` (a LoRA learner sends ``W + ΔW`` under
  the base model's names), then ``/resume``. Under a launcher (several ranks on one server) the
  push happens in ``sync_weights`` itself, which every rank reaches after the same update, with
  a barrier after it so no rank generates before the server holds the new weights.
- ``NCCLWeightTransport``: vLLM's trainer-side ``NCCLTrainerWeightTransferEngine``, its control
  plane driven over the server's RL routes (``/init_weight_transfer_engine``,
  ``/start_weight_update``, ``/update_weights``, ``/finish_weight_update``) by
  ``VLLMServerClient`` and its data broadcast over NCCL from rank 0 (the sender) to every server
  worker. The server must run with ``VLLM_SERVER_DEV_MODE=1`` (the routes) and
  ``--weight-transfer-config '{"backend": "nccl"}'``. NCCL needs GPUs on both sides.
- ``sharing(model)`` is a second backend on the same server for another model of the same
  architecture (RSPO's explorer): whichever backend generates pushes its own weights first when
  the server holds the other's, as the colocated vLLM backend does. One process only: ranks
  taking turns on one server would need a barrier at every switch.
- ``allowed`` (constrained actions) is not supported; use the transformers backend for it.
- Errors are one line (``UserError``): server unreachable, no answer within the timeout, an HTTP
  error (with vLLM's own message), malformed JSON, an answer without token ids or log-probs, a
  model name the server does not serve.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Protocol, Sequence

from rspo_gym.errors import UserError
from rspo_gym.policies.adapters import merged_weights
from rspo_gym.rollout.generation import GenerationConfig, GenerationOutput, refuse_constraints
from rspo_gym.policies.hf_backend import eos_token_ids

__all__ = [
    "VLLMServerBackend", "VLLMServerClient", "WeightTransport", "NCCLWeightTransport", "server_backend", "routable_address",
    "wire_dtype",
]

#: ``--logprobs-mode`` values whose log-probs are the protocol's for some settings (module docstring).
LOGPROBS_MODES = ("raw_logprobs", "processed_logprobs")

_INSTALL_HINT = (
    "pushing weights to a vLLM server needs vLLM's trainer-side transfer engine: install the [vllm] "
    "extra in the trainer's environment (pip install 'rspo-gym[vllm]'), or set vllm_weight_sync='none' "
    "to evaluate with the server's own weights"
)


class VLLMServerClient:
    """JSON over HTTP to one vLLM server, every failure a one-line ``UserError``.

    Also vLLM's ``VLLMWeightSyncClient`` (the four weight-update routes, a structural protocol),
    which its trainer-side engines drive; vLLM's own HTTP client would drop the server's error
    message (``raise_for_status``).

    >>> VLLMServerClient("http://127.0.0.1:9", timeout=5).request("GET", "/v1/models")
    Traceback (most recent call last):
    ...
    rspo_gym.errors.UserError: cannot reach the vLLM server at http://127.0.0.1:9 ([Errno 111] Connection refused); is `vllm serve` running there?
    """

    def __init__(self, url: str, timeout: float = 600.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def request(self, method: str, route: str, body: Any = None) -> Any:
        """The decoded JSON answer of ``method route`` (``body`` sent as JSON when given)."""
        where = f"{method} {route} on the vLLM server at {self.url}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{route}", data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise UserError(f"{where} failed with HTTP {error.code}: {_error_message(error)}") from None
        except (TimeoutError, socket.timeout):
            raise UserError(f"{where}: no answer within {self.timeout:g} s (vllm_server_timeout)") from None
        except (urllib.error.URLError, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise UserError(f"{where}: no answer within {self.timeout:g} s (vllm_server_timeout)") from None
            raise UserError(f"cannot reach the vLLM server at {self.url} ({reason}); is `vllm serve` running there?") from None
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise UserError(f"{where} answered with malformed JSON: {raw[:120]!r}") from None

    # -- vLLM's weight-sync control plane (``VLLMWeightSyncClient``)
    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self.request("POST", "/init_weight_transfer_engine", {"init_info": init_info})

    def start_weight_update(self) -> None:
        self.request("POST", "/start_weight_update", {})

    def update_weights(self, update_info: Any) -> None:
        self.request("POST", "/update_weights", {"update_info": update_info})

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self.request("POST", "/finish_weight_update", {} if weight_version is None else {"weight_version": weight_version})


def _error_message(error: urllib.error.HTTPError) -> str:
    """vLLM's message in an error answer (OpenAI's ``{"error": {"message"}}``, the RL routes'
    ``{"error": "..."}`` or FastAPI's ``{"detail"}``), else the raw body, on one line."""
    raw = error.read().decode(errors="replace")
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    message: Any = raw or error.reason
    if isinstance(body, dict):
        inner = body.get("error", body.get("detail", body.get("message")))
        message = inner.get("message", inner) if isinstance(inner, dict) else inner if inner is not None else raw
    return " ".join(str(message).split())[:500]


class WeightTransport(Protocol):
    """Moves a model's weights into the server's model (the server is paused meanwhile)."""

    def send(self, weights: list[tuple[str, Any]]) -> None:
        """Load ``weights`` (name, tensor) pairs, checkpoint names, into the server's model."""
        ...


def routable_address(url: str) -> str:
    """This machine's address on the route to the server at ``url``: where its workers find the
    NCCL rendezvous (a UDP ``connect`` picks the interface and sends nothing).

    >>> routable_address("http://127.0.0.1:8000")
    '127.0.0.1'
    """
    host = urllib.parse.urlsplit(url).hostname or "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((host, 9))
            return probe.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


class NCCLWeightTransport:
    """vLLM's dense NCCL weight transfer (``NCCLTrainerWeightTransferEngine``) to a server.

    Built on every trainer rank (vLLM's contract): rank 0 is the sender, which opens the NCCL group
    with the server's workers (``1 + /get_world_size`` ranks, rendezvous at ``host:port`` on this
    machine) and drives the update routes; other ranks only replay the weights' iteration. The
    weights arrive whole (``merged_weights`` gathers FSDP2 shards on every rank).
    """

    def __init__(self, client: VLLMServerClient, *, rank: int = 0, host: str | None = None, port: int | None = None):
        try:
            from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource
            from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory
            from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo
        except ImportError as error:
            raise UserError(_INSTALL_HINT) from error

        wire = _server_dtype(client) if rank == 0 else None

        class LatestWeights(WeightSource):
            """The weights handed to the last ``send`` (vLLM replays its source every round), each
            floating-point tensor cast, one at a time, to the server model's dtype on the way."""

            def __init__(self) -> None:
                self.weights: list[tuple[str, Any]] = []

            def metadata(self) -> list:
                return [ParamMeta(name, wire_dtype(tensor.dtype, wire), tuple(tensor.shape)) for name, tensor in self.weights]

            def __iter__(self):
                return ((name, tensor.to(wire_dtype(tensor.dtype, wire))) for name, tensor in self.weights)

        self._source = LatestWeights()
        self.is_sender = rank == 0
        if self.is_sender:
            answer = client.request("GET", "/get_world_size")
            if not isinstance(answer, dict) or not isinstance(answer.get("world_size"), int):
                raise UserError(f"the vLLM server at {client.url} answered /get_world_size without a world size: {str(answer)[:120]}")
            workers = answer["world_size"]
            host = host or routable_address(client.url)
            port = port or _free_port(host)
        else:  # joins no NCCL group: only replays the iteration
            workers, host, port = 0, host or "", port or 0
        info = NCCLTrainerInitInfo(master_address=host, master_port=port, world_size=1 + workers, rank=rank)
        self._engine = WeightTransferTrainerFactory.trainer_init(info, client=client, source=self._source)

    def send(self, weights: list[tuple[str, Any]]) -> None:
        self._source.weights = [(name, tensor.contiguous()) for name, tensor in weights]
        try:
            self._engine.send_weights()
        finally:
            self._source.weights = []

    def shutdown(self) -> None:
        self._engine.shutdown()


class _Server:
    """One server and which backend's weights it holds (backends sharing it take turns)."""

    def __init__(self, client: VLLMServerClient, model_name: str, logprobs_mode: str, transport: WeightTransport | None):
        self.client = client
        self.model_name = model_name
        self.logprobs_mode = logprobs_mode
        self.transport = transport
        self.holder: Any = None  # None: the weights the server was launched with


class VLLMServerBackend:
    """Generation on a running ``vllm serve`` from the weights of a transformers model."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        url: str,
        *,
        transport: WeightTransport | None = None,
        model_name: str | None = None,
        timeout: float = 600.0,
        max_concurrency: int = 256,
        barrier: Callable[[], None] | None = None,
    ):
        """Connect to the server at ``url`` and check what it serves.

        ``transport``: how weights reach the server (``NCCLWeightTransport``, or a test's); None
        generates with the server's launch weights and makes ``sync_weights`` an error.
        ``model_name``: the served model to request; None takes the only one the server lists.
        ``barrier``: the ranks' barrier under a launcher; weights are then pushed in
        ``sync_weights`` on every rank (module docstring), else at the next ``generate``.
        """
        client = VLLMServerClient(url, timeout)
        served = _served_models(client)
        if model_name is None:
            if len(served) != 1:
                raise UserError(f"the vLLM server at {client.url} serves {len(served)} models ({', '.join(served)}): set vllm_server_model to one")
            model_name = served[0]
        elif model_name not in served:
            raise UserError(f"the vLLM server at {client.url} serves {', '.join(served)}, not {model_name!r} (vllm_server_model)")
        self._server = _Server(client, model_name, _logprobs_mode(client), transport)
        self.model = model
        self.tokenizer = tokenizer
        self.adapter: str | None = None  # see sharing()
        self.stop_token_ids = eos_token_ids(model, tokenizer)
        self._barrier = barrier
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="rspo-vllm-server")
        self._stale = transport is not None  # the server holds its launch weights, not ``model``'s
        if barrier is not None and self._stale:
            self._push_weights()

    def sharing(self, model: Any, adapter: str | None = None) -> "VLLMServerBackend":
        """A backend for ``model`` (same architecture and tokenizer) on this backend's server.

        ``adapter``: the peft adapter whose merged weights this backend pushes (None: the active
        one), for two policies that are two adapters of one model.
        """
        if self._barrier is not None:
            raise UserError(
                "RSPO's explorer cannot share one vLLM server between several ranks (the weights "
                "switch at every turn of policy): use swap='rank' or 'anneal' under a launcher, or one process"
            )
        other = object.__new__(VLLMServerBackend)
        other.__dict__.update(self.__dict__)
        other.model, other.adapter = model, adapter
        other._stale = self._server.transport is not None
        return other

    def generate(
        self,
        prompt_ids: Sequence[Sequence[int]],
        config: GenerationConfig,
        allowed: Sequence[Sequence[str]] | None = None,
    ) -> GenerationOutput:
        """Sample one response per prompt; the log-probs are tempered and untruncated."""
        refuse_constraints(allowed, "VLLMServerBackend")
        if not prompt_ids:
            return GenerationOutput(texts=[], response_ids=[], logprobs=[])
        self._check_logprobs(config)
        if self._barrier is None and (self._stale or (self._server.transport is not None and self._server.holder is not self)):
            self._push_weights()
        bodies = [self.request_body(ids, config, config.row_seed(i)) for i, ids in enumerate(prompt_ids)]
        answers = list(self._pool.map(self._complete, bodies))
        response_ids = [ids for ids, _ in answers]
        logprobs = [logps for _, logps in answers]
        texts = self.tokenizer.batch_decode(response_ids, skip_special_tokens=True)
        return GenerationOutput(texts=texts, response_ids=response_ids, logprobs=logprobs)

    def request_body(self, prompt_ids: Sequence[int], config: GenerationConfig, seed: int | None) -> dict[str, Any]:
        """The ``/v1/completions`` body of one prompt: every sampling knob explicit (module docstring)."""
        greedy = config.temperature <= 0.0
        return {
            "model": self._server.model_name,
            "prompt": [int(token) for token in prompt_ids],
            "n": 1,
            "max_tokens": config.max_new_tokens,
            "temperature": 0.0 if greedy else config.temperature,
            "top_p": 1.0 if greedy else config.top_p,
            "top_k": 0,
            "min_p": 0.0,
            "repetition_penalty": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "min_tokens": 0,
            "seed": seed,
            "stop_token_ids": list(self.stop_token_ids),
            "logprobs": 0,
            "return_token_ids": True,
            "stream": False,
        }

    def _complete(self, body: dict[str, Any]) -> tuple[list[int], list[float]]:
        answer = self._server.client.request("POST", "/v1/completions", body)
        where = f"the vLLM server at {self._server.client.url}"
        try:
            choice = answer["choices"][0]
        except (TypeError, KeyError, IndexError):
            raise UserError(f"{where} answered /v1/completions without a choice: {str(answer)[:200]}") from None
        ids = choice.get("token_ids")
        logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
        if not isinstance(ids, list) or not isinstance(logprobs, list):
            raise UserError(f"{where} answered without response token ids or log-probs (vLLM >= 0.32 returns them for return_token_ids and logprobs=0)")
        if len(ids) != len(logprobs) or any(not isinstance(v, (int, float)) for v in logprobs):
            raise UserError(f"{where} answered {len(ids)} token ids with {len(logprobs)} log-probs (some missing)")
        if choice.get("finish_reason") == "abort":
            raise UserError(f"{where} aborted a request (paused or shut down by someone else?)")
        return [int(token) for token in ids], [float(value) for value in logprobs]

    def _check_logprobs(self, config: GenerationConfig) -> None:
        """One line when the server's ``--logprobs-mode`` cannot give the protocol's log-probs."""
        mode = self._server.logprobs_mode
        if config.temperature <= 0.0:
            return  # greedy: both modes give the untempered log-probs, as the protocol says
        if mode == "raw_logprobs" and config.temperature != 1.0:
            raise UserError(
                f"the vLLM server returns untempered log-probs (--logprobs-mode raw_logprobs) but temperature is "
                f"{config.temperature:g}: relaunch it with --logprobs-mode processed_logprobs, or sample at temperature 1"
            )
        if mode == "processed_logprobs" and config.top_p < 1.0:
            raise UserError(
                f"the vLLM server returns log-probs after top-p (--logprobs-mode processed_logprobs) but top_p is "
                f"{config.top_p:g}: use top_p=1, or relaunch it with --logprobs-mode raw_logprobs and sample at temperature 1"
            )

    def sync_weights(self) -> None:
        """Generate with ``model``'s current weights from now on (module docstring: weight sync)."""
        if self._server.transport is None:
            raise UserError(
                "this vLLM server backend has no weight transport (vllm_weight_sync='none'), so the server "
                "would keep generating with its launch weights: set vllm_weight_sync='nccl' to train"
            )
        self._stale = True
        if self._barrier is not None:
            self._push_weights()

    def _push_weights(self) -> None:
        """Pause the server (dropping its prefix cache), send this backend's weights, resume."""
        server = self._server
        sender = getattr(server.transport, "is_sender", True)  # under a launcher, rank 0 drives the server
        if sender:
            server.client.request("POST", "/pause?mode=abort&clear_cache=true")
        try:
            server.transport.send(merged_weights(self.model, self.adapter))
        finally:
            if sender:
                server.client.request("POST", "/resume")
        server.holder, self._stale = self, False
        if self._barrier is not None:
            self._barrier()

    def shutdown(self) -> None:
        """Stop the request threads and the weight transport (the server keeps running)."""
        self._pool.shutdown(wait=False)
        stop = getattr(self._server.transport, "shutdown", None)
        if stop is not None:
            stop()


def _served_models(client: VLLMServerClient) -> list[str]:
    answer = client.request("GET", "/v1/models")
    try:
        return [str(entry["id"]) for entry in answer["data"]]
    except (TypeError, KeyError):
        raise UserError(f"the server at {client.url} answered /v1/models without a model list: is it vLLM's OpenAI server?") from None


def wire_dtype(dtype: Any, server: Any | None) -> Any:
    """The dtype a tensor of ``dtype`` travels in to a server whose model computes in ``server``.

    Floating-point weights go in the server's dtype: float32 master weights (``bf16-mixed``) sent
    as the server's bfloat16 cost half the bytes, and the server would cast them on load anyway.
    Integer tensors, and every tensor when the server's dtype is unknown (None), keep their own.

    >>> import torch
    >>> wire_dtype(torch.float32, torch.bfloat16), wire_dtype(torch.int64, torch.bfloat16), wire_dtype(torch.float32, None)
    (torch.bfloat16, torch.int64, torch.float32)
    """
    return server if server is not None and dtype.is_floating_point else dtype


def _server_dtype(client: VLLMServerClient) -> Any | None:
    """The server model's dtype (``model_config.dtype`` of ``/server_info``, written ``torch.bfloat16``),
    or None when the answer does not say."""
    import torch

    try:
        name = str(client.request("GET", "/server_info?config_format=json")["vllm_config"]["model_config"]["dtype"])
    except (UserError, TypeError, KeyError):
        return None
    dtype = getattr(torch, name.removeprefix("torch."), None)
    return dtype if isinstance(dtype, torch.dtype) and dtype.is_floating_point else None


def _logprobs_mode(client: VLLMServerClient) -> str:
    """The server's ``--logprobs-mode``, from ``/server_info`` (dev mode), else vLLM's default."""
    try:
        info = client.request("GET", "/server_info?config_format=json")
    except UserError as error:
        if "HTTP 404" in str(error):  # no dev mode: the server runs with vLLM's default
            return "raw_logprobs"
        raise
    try:
        mode = info["vllm_config"]["model_config"]["logprobs_mode"]
    except (TypeError, KeyError):
        raise UserError(f"the vLLM server at {client.url} answered /server_info without model_config.logprobs_mode") from None
    if mode not in LOGPROBS_MODES:
        raise UserError(f"the vLLM server runs with --logprobs-mode {mode}, which returns logits: relaunch it with processed_logprobs or raw_logprobs")
    return mode


def server_backend(model: Any, tokenizer: Any, config: Any, *, rank: int = 0, world_size: int = 1,
                   barrier: Callable[[], None] | None = None) -> VLLMServerBackend:
    """The backend a ``TrainerConfig`` with ``generation_backend="vllm-server"`` asks for, on this
    rank: its NCCL transport unless ``vllm_weight_sync="none"``, the ranks' ``barrier`` under a
    launcher."""
    client = VLLMServerClient(config.vllm_server_url, config.vllm_server_timeout)
    transport = None
    if config.vllm_weight_sync == "nccl":
        transport = NCCLWeightTransport(client, rank=rank, host=config.vllm_weight_sync_host, port=config.vllm_weight_sync_port)
    return VLLMServerBackend(
        model, tokenizer, config.vllm_server_url, transport=transport, model_name=config.vllm_server_model,
        timeout=config.vllm_server_timeout, barrier=barrier if world_size > 1 else None,
    )
