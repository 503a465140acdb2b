"""Fake OpenAI-compatible replicas that simulate vLLM's prefix cache (standard library only: the router tests start them in a
child process, see tests/routing_harness.py).

Each :class:`FakeReplica` answers ``POST /v1/chat/completions`` (streamed, chunked) on its own loopback address and the API
port, and ``GET /health`` on the probe port. It keeps a per-replica LRU of prompt blocks (16 tokens, each hashed with
everything before it, as vLLM's automatic prefix caching does) and waits ``base + per-token x uncached tokens`` before the
first token; it reports ``usage.prompt_tokens_details.cached_tokens`` like vLLM. Any other POST answers ``{"engine":
"reached"}``: what a router must never forward.

``python -m tests.fake_replicas COUNT CAPACITY BASE_MS PER_TOKEN_MS CHUNK_MS`` serves ``COUNT`` replicas on 127.0.0.11… (ports
8000 and 8081), prints ``ready`` and runs until SIGTERM.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import signal
import socket
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API_PORT = 8000
"""The pod proxy's API port (kimi_k3.core.catalog.API_PORT; a test checks they agree)."""
PROBE_PORT = 8081
"""The pod proxy's probe port (kimi_k3.serving.api_proxy.PROBE_PORT)."""
BLOCK_TOKENS = 16


class _QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 without Nagle (as uvicorn and nginx: small SSE writes are not held for the peer's delayed ACK), no access log."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args) -> None:
        """No access log."""


@dataclass
class CacheModel:
    """How a fake replica's time to first token depends on its cache."""

    capacity_tokens: int = 16_000
    """Prompt tokens the replica's KV cache holds (LRU by block)."""
    base_ms: float = 2.0
    """Time to first token of a fully cached prompt."""
    per_token_ms: float = 0.02
    """Added per uncached prompt token (the prefill)."""
    chunk_delay_ms: float = 1.0
    """Between two streamed chunks."""


def tokens_of(messages: list[dict]) -> list[str]:
    """A word-level tokenisation of the chat: the role, then the words of each message."""
    out: list[str] = []
    for message in messages:
        out.append(f"<{message.get('role', 'user')}>")
        out.extend(str(message.get("content", "")).split())
    return out


class FakeReplica:
    """One replica: API port and probe port on its own loopback address (see the module docstring)."""

    def __init__(self, name: str, address: str, port: int, probe_port: int, model: CacheModel) -> None:
        self.name, self.address, self.port, self.probe_port, self.model = name, address, port, probe_port, model
        self.cache: OrderedDict[str, None] = OrderedDict()
        self.lock = threading.Lock()
        self.requests = 0
        self.sessions: list[str] = []
        self.healthy = True
        self.api = _server(address, port, self._api_handler())
        self.probe = _server(address, probe_port, self._probe_handler())

    def lookup(self, tokens: list[str]) -> int:
        """Cached tokens of this prompt (the longest cached block prefix); inserts its blocks (LRU)."""
        digest = hashlib.sha256()
        keys = []
        for start in range(0, len(tokens) - len(tokens) % BLOCK_TOKENS, BLOCK_TOKENS):
            digest.update(" ".join(tokens[start:start + BLOCK_TOKENS]).encode())
            keys.append(digest.hexdigest())
        with self.lock:
            hit = 0
            for key in keys:
                if key not in self.cache:
                    break
                hit += 1
            for key in keys:
                self.cache[key] = None
                self.cache.move_to_end(key)
            while len(self.cache) * BLOCK_TOKENS > self.model.capacity_tokens:
                self.cache.popitem(last=False)
        return hit * BLOCK_TOKENS

    def _api_handler(self) -> type[BaseHTTPRequestHandler]:
        replica = self

        class Handler(_QuietHandler):
            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    self._json(200, {"object": "list", "data": [{"id": "kimi-k3", "object": "model"}]})
                else:
                    self._json(404, {"error": {"message": "engine route", "type": "NotFoundError", "code": 404}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path != "/v1/chat/completions":
                    self._json(200, {"engine": "reached", "path": self.path})  # what the router must never forward
                    return
                with replica.lock:
                    replica.requests += 1
                    replica.sessions.append(self.headers.get("x-session-id") or "")
                tokens = tokens_of(body.get("messages", []))
                cached = replica.lookup(tokens)
                model = replica.model
                chunk_delay = float(self.headers.get("x-fake-chunk-delay-ms") or model.chunk_delay_ms) / 1000
                time.sleep((model.base_ms + model.per_token_ms * (len(tokens) - cached)) / 1000)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("x-fake-replica", replica.name)
                self.send_header("x-fake-forwarded-for", self.headers.get("x-forwarded-for") or "")
                self.end_headers()
                for i in range(int(body.get("max_tokens") or 4)):
                    self._chunk({"choices": [{"index": 0, "delta": {"content": f"w{i} "}}]})
                    time.sleep(chunk_delay)
                usage = {"prompt_tokens": len(tokens), "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": cached}}
                self._chunk({"choices": [], "usage": usage})
                self._write(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _chunk(self, payload: dict) -> None:
                self._write(f"data: {json.dumps(payload)}\n\n".encode())

            def _write(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _json(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("x-fake-replica", replica.name)
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def _probe_handler(self) -> type[BaseHTTPRequestHandler]:
        replica = self

        class Handler(_QuietHandler):
            def do_GET(self) -> None:
                status = 200 if self.path == "/health" and replica.healthy else 503
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        return Handler

    def close(self) -> None:
        for server in (self.api, self.probe):
            server.shutdown()
            server.server_close()

    def kill(self) -> None:
        """The replica dies: its ports refuse connections and every open connection is cut (kept-alive ones included)."""
        self.close()
        for server in (self.api, self.probe):
            server.cut_open_connections()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # 36 clients connecting at once (the stdlib's 5 drops connections)

    def __init__(self, *args, **kwargs) -> None:
        self.open_connections: set = set()
        super().__init__(*args, **kwargs)

    def process_request(self, request, client_address) -> None:
        self.open_connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request) -> None:
        self.open_connections.discard(request)
        super().shutdown_request(request)

    def cut_open_connections(self) -> None:
        for request in list(self.open_connections):
            with contextlib.suppress(OSError):
                request.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request, client_address) -> None:
        pass  # Envoy closing an idle pooled connection (a reset) is no error of the test


def _server(address: str, port: int, handler: type[BaseHTTPRequestHandler]) -> _Server:
    server = _Server((address, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _serve(argv: list[str]) -> None:
    count, capacity, base, per_token, chunk = int(argv[0]), int(argv[1]), float(argv[2]), float(argv[3]), float(argv[4])
    model = CacheModel(capacity_tokens=capacity, base_ms=base, per_token_ms=per_token, chunk_delay_ms=chunk)
    replicas = [FakeReplica(f"r{i}", f"127.0.0.{11 + i}", API_PORT, PROBE_PORT, model) for i in range(count)]
    print("ready", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    for replica in replicas:
        replica.close()


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    _serve(sys.argv[1:])
