"""A small OpenAI-compatible server for testing ``kimi-k3 verify`` offline.

It speaks just enough of vLLM's OpenAI API to exercise the verifier:
``GET /v1/models``, ``POST /v1/chat/completions`` (plain, streamed as
server-sent events with a final usage chunk, and tool calls),
``POST /v1/completions`` (plain), ``GET /health``.
Every ``/v1`` request must carry ``Authorization: Bearer <api_key>``; anything
else gets a 401 like vLLM started with ``--api-key``.

Like vLLM, it also answers the routes ``--api-key`` does not guard
(:data:`UNPROTECTED_ROUTES`: ``/invocations``, ``/pause``, ``/update_weights``,
``/tokenize``, ``/metrics``...) with 200 and no key at all, so a test can show
they are open on the engine's own port and refused through the proxy.

It listens on 127.0.0.1 on an ephemeral port, in a daemon thread, using only
the standard library. For load tests (``kimi-k3 bench``) it can stream exactly
the requested number of tokens with a set delay per token and fail every N-th
request. :class:`Behaviour` switches on the ways a real deployment
goes wrong (wrong served name, empty answer, no tool call, malformed tool
arguments, a slow first token) and, like vLLM's reasoning parser, it puts
reasoning text in ``reasoning_content`` (or ``reasoning``) next to the answer.

Usage::

    with FakeOpenAIServer(api_key="sk-test") as server:
        server.url        # http://127.0.0.1:PORT
        server.base_url   # http://127.0.0.1:PORT/v1
        server.behaviour.empty_answer = True
        server.requests   # the JSON bodies received, in order
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = "pong"
REASONING = "The user wants one word back."


@dataclass
class Behaviour:
    """How the fake server answers; mutate it between requests to misbehave.

    Attributes:
        served_model: the name ``/v1/models`` lists and chat requests must use
            (a request for another name gets vLLM's 404).
        non_json_body: answer every authorised ``/v1`` request with HTTP 200 and
            this body instead (a login page or another service behind the URL).
        non_json_content_type: the Content-Type sent with ``non_json_body``.
        empty_answer: plain and streamed chats return no content at all.
        no_tool_call: requests with tools get a text answer instead of a call.
        malformed_tool_arguments: the tool call's ``arguments`` is not JSON.
        tool_arguments_missing_required: the arguments are ``{}``.
        first_token_delay: seconds to wait, after the response headers, before
            the first streamed chunk (streamed requests only).
        token_delay: seconds between streamed chunks.
        reasoning_field: ``"reasoning_content"``, ``"reasoning"`` or ``None``
            (no reasoning output).
        stream_usage: send the final usage chunk when the client asks for it;
            off, the client has to count chunks.
        usage_completion_tokens: report this many completion tokens in
            ``usage`` instead of the number of chunks/words generated.
        reject_tools: answer requests that carry tools with HTTP 400 and this
            message, as vLLM does without ``--enable-auto-tool-choice``.
        health_status: HTTP status of ``/health`` (vLLM answers 503 while the
            engine is dead).
        honour_max_tokens: answer a text request with exactly as many content
            tokens (one word per streamed chunk) as its ``max_completion_tokens``
            or ``max_tokens`` asks for, with no reasoning output, and report
            ``usage.prompt_tokens`` as the number of whitespace-separated words
            in the messages (what a load generator's word-level tokenizer counts).
        fail_every: answer every N-th chat completion request (1-based count of
            chat requests) with HTTP ``fail_status`` instead; 0 never fails.
        fail_status: the HTTP status of those failures (vLLM answers 500 on an
            engine error, 503 while it is not ready).
        unprotected_routes_open: answer :data:`UNPROTECTED_ROUTES` like vLLM
            itself (200, no key); off, like vLLM behind the stack's API proxy
            (the proxy's JSON 404, nothing reaches the engine).
        tool_call_failures: the first N requests with tools get malformed
            arguments, the next ones a well-formed call (K3's occasional
            unexpected tool-call format, which ``verify`` retries once).
    """

    served_model: str = "Kimi-K3"
    non_json_body: str | None = None
    non_json_content_type: str = "text/html; charset=utf-8"
    empty_answer: bool = False
    no_tool_call: bool = False
    malformed_tool_arguments: bool = False
    tool_arguments_missing_required: bool = False
    first_token_delay: float = 0.0
    token_delay: float = 0.0
    reasoning_field: str | None = "reasoning_content"
    stream_usage: bool = True
    usage_completion_tokens: int | None = None
    reject_tools: str | None = None
    health_status: int = 200
    honour_max_tokens: bool = False
    fail_every: int = 0
    fail_status: int = 500
    unprotected_routes_open: bool = True
    tool_call_failures: int = 0


UNPROTECTED_ROUTES: dict[str, str] = {
    "/invocations": "POST",
    "/generative_scoring": "POST",
    "/pooling": "POST",
    "/classify": "POST",
    "/score": "POST",
    "/rerank": "POST",
    "/pause": "POST",
    "/resume": "POST",
    "/is_paused": "GET",
    "/scale_elastic_ep": "POST",
    "/is_scaling_elastic_ep": "POST",
    "/init_weight_transfer_engine": "POST",
    "/update_weights": "POST",
    "/get_world_size": "GET",
    "/abort_requests": "POST",
    "/tokenize": "POST",
    "/detokenize": "POST",
    "/ping": "GET",
    "/version": "GET",
    "/load": "GET",
    "/tokenizer_info": "GET",
    "/server_info": "GET",
    "/reset_prefix_cache": "POST",
    "/reset_mm_cache": "POST",
    "/reset_encoder_cache": "POST",
    "/sleep": "POST",
    "/wake_up": "POST",
    "/is_sleeping": "GET",
    "/collective_rpc": "POST",
    "/start_profile": "POST",
    "/stop_profile": "POST",
    "/metrics": "GET",
}
"""Routes vLLM serves without the API key (vllm-project/vllm docs/usage/security.md,
"Unprotected Endpoints"; ``/health`` is answered separately), with their method. The
wrong method gets FastAPI's 405, as in vLLM."""

METRICS_TEXT = "# HELP vllm:num_requests_waiting Requests waiting.\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"Kimi-K3\"} 0.0\n"
"""What the fake's ``/metrics`` answers (Prometheus text format)."""


@dataclass
class ReceivedRequest:
    """One request the server saw: method, path and the parsed JSON body."""

    method: str
    path: str
    body: dict[str, Any] | None
    authorized: bool


class _Listener(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` with a listen backlog for load tests.

    socketserver's default backlog of 5 drops connections beyond it, which the
    client retries after a one-second SYN timeout: at concurrency 16 that
    showed as a 1 s p99 time to first token that was the fake, not the load.
    """

    request_queue_size = 256


class FakeOpenAIServer:
    """An OpenAI-compatible HTTP server on 127.0.0.1 that runs in a thread.

    Use it as a context manager; ``url``/``base_url`` are valid inside it.
    """

    def __init__(self, api_key: str, behaviour: Behaviour | None = None, port: int = 0) -> None:
        """``port`` 0 picks an ephemeral port; a fixed one (e.g. vLLM's loopback port behind the proxy) must be free."""
        self.api_key = api_key
        self.behaviour = behaviour or Behaviour()
        self._port = port
        self.requests: list[ReceivedRequest] = []
        self._lock = threading.Lock()
        self._chat_count = 0
        self._tool_calls = 0
        self._httpd: _Listener | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The TCP port the server listens on (only while started)."""
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` — the endpoint without ``/v1``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` — what an OpenAI client takes as base_url."""
        return f"{self.url}/v1"

    def start(self) -> FakeOpenAIServer:
        """Bind an ephemeral port on 127.0.0.1 and serve in a daemon thread."""
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = _Listener(("127.0.0.1", self._port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def record(self, request: ReceivedRequest) -> None:
        """Remember a request (thread-safe)."""
        with self._lock:
            self.requests.append(request)

    def next_chat_fails(self) -> bool:
        """Count one chat completion request; True when ``fail_every`` says it fails (thread-safe)."""
        with self._lock:
            self._chat_count += 1
            every = self.behaviour.fail_every
            return every > 0 and self._chat_count % every == 0

    def next_tool_call_flaky(self) -> bool:
        """Count one request with tools; True while :attr:`Behaviour.tool_call_failures` are not used up (thread-safe)."""
        with self._lock:
            self._tool_calls += 1
            return self._tool_calls <= self.behaviour.tool_call_failures

    def chat_requests(self) -> list[dict[str, Any]]:
        """The bodies of the authorised chat completion requests received so far."""
        with self._lock:
            return [
                r.body
                for r in self.requests
                if r.path == "/v1/chat/completions" and r.authorized and r.body is not None
            ]


def _sample_arguments(parameters: dict[str, Any]) -> dict[str, Any]:
    """Arguments that satisfy a JSON schema's required keys (strings, enums, numbers)."""
    properties = parameters.get("properties", {})
    arguments: dict[str, Any] = {}
    for key in parameters.get("required", []):
        prop = properties.get(key, {})
        if "enum" in prop:
            arguments[key] = prop["enum"][0]
        elif prop.get("type") in ("number", "integer"):
            arguments[key] = 1
        elif prop.get("type") == "boolean":
            arguments[key] = True
        else:
            arguments[key] = "Paris"
    return arguments


class _Handler(BaseHTTPRequestHandler):
    """Request handler; ``fake`` is bound to the owning :class:`FakeOpenAIServer`."""

    fake: FakeOpenAIServer
    server_version = "fake-vllm/0"

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    # -- plumbing ---------------------------------------------------------

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _unprotected(self, method: str) -> bool:
        """Answer a route vLLM serves without a key (200, or 405 for the wrong method); False if not one."""
        path = self.path.split("?", 1)[0]
        if path not in UNPROTECTED_ROUTES:
            return False
        if not self.fake.behaviour.unprotected_routes_open:
            self._send_json(404, {"error": {"message": "Not Found", "type": "NotFoundError", "code": 404}})
            return True
        body = self._read_body() if method == "POST" else None
        self.fake.record(ReceivedRequest(method, self.path, body, self._authorized()))
        if UNPROTECTED_ROUTES[path] != method:
            self._send_json(405, {"detail": "Method Not Allowed"})
        elif path == "/metrics":
            data = METRICS_TEXT.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif path == "/version":
            self._send_json(200, {"version": "0.0.0+fake"})
        else:
            self._send_json(200, {"status": "ok", "route": path})
        return True

    def _send_non_json(self) -> bool:
        """Answer with :attr:`Behaviour.non_json_body` if set; True when it did."""
        body = self.fake.behaviour.non_json_body
        if body is None:
            return False
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", self.fake.behaviour.non_json_content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return True

    def _authorized(self) -> bool:
        # vLLM 0.27.1's AuthenticationMiddleware.verify_token: scheme "Bearer" in any case, one space, the key exactly.
        scheme, _, token = self.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and token == self.fake.api_key

    def _read_body(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return None
        try:
            body = json.loads(self.rfile.read(length))
        except json.JSONDecodeError:
            return None
        return body if isinstance(body, dict) else None

    def _error(self, status: int, message: str, kind: str) -> None:
        self._send_json(
            status,
            {"object": "error", "message": message, "type": kind, "param": None, "code": status},
        )

    # -- routes -------------------------------------------------------------

    def _admitted(self, method: str, body: Any) -> bool:
        """Record the request, then answer 401 without the key or the configured non-JSON reply; True: go on."""
        authorized = self._authorized()
        self.fake.record(ReceivedRequest(method, self.path, body, authorized))
        if not authorized:
            self._send_json(401, {"error": "Unauthorized"})
            return False
        return not self._send_non_json()

    def do_GET(self) -> None:
        """``/health`` (no auth, like vLLM) and ``/v1/models``."""
        if self.path == "/health":
            self.fake.record(ReceivedRequest("GET", self.path, None, True))
            self.send_response(self.fake.behaviour.health_status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self._unprotected("GET"):
            return
        if not self._admitted("GET", None):
            return
        if self.path != "/v1/models":
            self._error(404, f"Not Found: {self.path}", "NotFoundError")
            return
        name = self.fake.behaviour.served_model
        self._send_json(
            200,
            {
                "object": "list",
                "data": [
                    {
                        "id": name,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "vllm",
                        "root": "moonshotai/Kimi-K3",
                        "parent": None,
                        "max_model_len": 262144,
                    }
                ],
            },
        )

    def do_POST(self) -> None:
        """``/v1/chat/completions``: plain, streamed and tool-calling answers."""
        if self._unprotected("POST"):
            return
        body = self._read_body()
        if not self._admitted("POST", body):
            return
        if self.path == "/v1/completions":
            self._text_completion(body)
            return
        if self.path != "/v1/chat/completions":
            self._error(404, f"Not Found: {self.path}", "NotFoundError")
            return
        if body is None or not isinstance(body.get("messages"), list):
            self._error(400, "request body must be JSON with 'messages'", "BadRequestError")
            return
        behaviour = self.fake.behaviour
        if body.get("model") != behaviour.served_model:
            self._error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
            return
        if body.get("tools") and behaviour.reject_tools:
            self._error(400, behaviour.reject_tools, "BadRequestError")
            return
        if self.fake.next_chat_fails():
            self._error(behaviour.fail_status, "EngineCore encountered an issue.", "InternalServerError")
            return
        tool_call = self._tool_call_for(body)
        if body.get("stream"):
            self._stream(body, tool_call)
        else:
            self._complete(body, tool_call)

    # -- answers ------------------------------------------------------------

    def _text_completion(self, body: dict[str, Any] | None) -> None:
        """``/v1/completions`` (legacy text completions), non-streamed."""
        behaviour = self.fake.behaviour
        if body is None or "prompt" not in body:
            self._error(400, "request body must be JSON with 'prompt'", "BadRequestError")
            return
        if body.get("model") != behaviour.served_model:
            self._error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
            return
        self._send_json(
            200,
            {
                "id": f"cmpl-{uuid.uuid4().hex}",
                "object": "text_completion",
                "created": int(time.time()),
                "model": behaviour.served_model,
                "choices": [{"index": 0, "text": ANSWER, "logprobs": None, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
            },
        )

    def _tool_call_for(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The tool call this request gets, or ``None`` for a text answer."""
        behaviour = self.fake.behaviour
        tools = body.get("tools") or []
        if not tools or body.get("tool_choice") == "none" or behaviour.no_tool_call:
            return None
        function = tools[0].get("function", {})
        flaky = self.fake.next_tool_call_flaky()
        if behaviour.malformed_tool_arguments or flaky:
            arguments = '{"city": "Paris", "unit": '
        elif behaviour.tool_arguments_missing_required:
            arguments = "{}"
        else:
            arguments = json.dumps(_sample_arguments(function.get("parameters", {})))
        return {
            "id": f"chatcmpl-tool-{uuid.uuid4().hex[:16]}",
            "type": "function",
            "function": {"name": function.get("name", ""), "arguments": arguments},
        }

    def _requested_tokens(self, body: dict[str, Any]) -> int | None:
        """The answer length a ``honour_max_tokens`` server generates, or ``None``."""
        if not self.fake.behaviour.honour_max_tokens or body.get("tools"):
            return None
        value = body.get("max_completion_tokens", body.get("max_tokens"))
        return value if isinstance(value, int) and value > 0 else None

    def _prompt_tokens(self, body: dict[str, Any]) -> int:
        """``usage.prompt_tokens``: words in the messages with ``honour_max_tokens``, else 20."""
        if not self.fake.behaviour.honour_max_tokens:
            return 20
        words = 0
        for message in body.get("messages", []):
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            if isinstance(content, str):
                words += len(content.split())
        return words

    def _answer_text(self, body: dict[str, Any]) -> str:
        if self.fake.behaviour.empty_answer:
            return ""
        requested = self._requested_tokens(body)
        if requested is not None:
            return " ".join(["tok"] * requested)
        if body.get("tools"):
            return "I cannot look up the weather."
        return ANSWER

    def _complete(self, body: dict[str, Any], tool_call: dict[str, Any] | None) -> None:
        behaviour = self.fake.behaviour
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": []}
        if tool_call is not None:
            message["tool_calls"] = [tool_call]
            finish = "tool_calls"
            completion_tokens = 12
        else:
            message["content"] = self._answer_text(body)
            finish = "length" if self._requested_tokens(body) is not None else "stop"
            completion_tokens = 8 + len(message["content"].split())
            if self._requested_tokens(body) is not None:
                completion_tokens = len(message["content"].split())
        if behaviour.reasoning_field and self._requested_tokens(body) is None:
            message[behaviour.reasoning_field] = REASONING
        if behaviour.usage_completion_tokens is not None:
            completion_tokens = behaviour.usage_completion_tokens
        self._send_json(
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": behaviour.served_model,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                "usage": {
                    "prompt_tokens": self._prompt_tokens(body),
                    "completion_tokens": completion_tokens,
                    "total_tokens": self._prompt_tokens(body) + completion_tokens,
                },
            },
        )

    def _stream(self, body: dict[str, Any], tool_call: dict[str, Any] | None) -> None:
        behaviour = self.fake.behaviour
        chunk_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": behaviour.served_model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }

        events: list[dict[str, Any]] = [chunk({"role": "assistant", "content": ""})]
        requested = self._requested_tokens(body)
        if behaviour.reasoning_field and requested is None:
            for word in REASONING.split(" "):
                events.append(chunk({behaviour.reasoning_field: word + " "}))
        if tool_call is not None:
            events.append(chunk({"tool_calls": [{"index": 0, **tool_call}]}))
            finish = "tool_calls"
        elif requested is not None:
            text = self._answer_text(body)
            for n, word in enumerate(text.split(" ")):
                events.append(chunk({"content": word if n == 0 else " " + word}))
            finish = "length"
        else:
            text = self._answer_text(body)
            for i in range(0, len(text), 2):
                events.append(chunk({"content": text[i : i + 2]}))
            finish = "stop"
        events.append(chunk({}, finish))
        generated = len(events) - 2  # not the role chunk, not the finish chunk
        if behaviour.usage_completion_tokens is not None:
            generated = behaviour.usage_completion_tokens
        options = body.get("stream_options") or {}
        if options.get("include_usage") and behaviour.stream_usage:
            events.append(
                {
                    "id": chunk_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": behaviour.served_model,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": self._prompt_tokens(body),
                        "completion_tokens": generated,
                        "total_tokens": self._prompt_tokens(body) + generated,
                    },
                }
            )

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        try:
            if behaviour.first_token_delay:
                time.sleep(behaviour.first_token_delay)
            for n, event in enumerate(events):
                if n and behaviour.token_delay:
                    time.sleep(behaviour.token_delay)
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. its read timeout); nothing to do
