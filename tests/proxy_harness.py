"""What the real-proxy tests share: the stack's proxy config, an HTTP client that sends paths as given, the sandbox fixture.

:func:`sandbox_factory` starts the project's fake vLLM on the engine's loopback port and the
real nginx with a rendered config (and, when the config checks the key, the API-key
Secret's key-check file for :data:`API_KEY`), each in a private sandbox
(:mod:`tests.proxy_sandbox`); test modules import the fixtures they use.
"""

from __future__ import annotations

import http.client
import json
import socket
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pytest

from kimi_k3.serving import api_pod, proxy_edge
from kimi_k3.serving.api_proxy import ApiProxyConfig, render_nginx_conf
from kimi_k3.serving.vllm import VllmServerArgs
from kimi_k3.stack.settings import load_stack
from tests.fake_openai_server import FakeOpenAIServer
from tests.proxy_sandbox import Nginx, PrivateNetwork, require_sandbox

API_KEY = "sk-proxy_Test=+/0f3c"  # characters a header rewrite would mangle
HOST = "127.0.0.1"


def stack_proxy_config(stack: str) -> ApiProxyConfig:
    """The proxy config the composition builds for a stack: the settings, Platform's mapping onto the serving
    args (the settings' ``ServingFront``, the routing tier with two or more replicas), the components' one builder (``api_pod.proxy_config``)."""
    serving = load_stack(stack).serving
    replicas = serving.replicas or 1  # prod names 2; dev 0 (one per node of its one-node block)
    return api_pod.proxy_config(VllmServerArgs(
        contract=serving.contract, api_key=pulumi.Output.secret("unused"), replicas=replicas, routing=serving.routing_for(replicas), front=serving.front,
    ))


STACK_CONFIG = stack_proxy_config("prod")


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


def call(port: int, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None, timeout: float = 10) -> Reply:
    """One HTTP/1.1 request with the path sent exactly as given (no client-side normalisation)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def keyed(key: str = API_KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}


def chat_body(stream: bool = False, content: str = "ping") -> bytes:
    return json.dumps({"model": "Kimi-K3", "messages": [{"role": "user", "content": content}], "stream": stream}).encode()


@dataclass
class Sandbox:
    fake: FakeOpenAIServer
    nginx: Nginx
    config: ApiProxyConfig

    def engine_paths(self) -> list[str]:
        return [r.path for r in self.fake.requests]


def key_check(config: ApiProxyConfig) -> str | None:
    """The API-key Secret's key-check file for :data:`API_KEY`, when the config checks the key."""
    return proxy_edge.key_check_file(API_KEY) if config.check_api_key else None


@pytest.fixture
def sandbox_factory(tmp_path):
    """Start (fake vLLM, nginx with a rendered config) in a private sandbox; torn down after the test."""
    require_sandbox()
    stack = []

    def start(config: ApiProxyConfig = STACK_CONFIG, cgroup_procs: Path | None = None, **behaviour) -> Sandbox:
        net = PrivateNetwork().__enter__()
        stack.append(net.__exit__)
        fake = FakeOpenAIServer(api_key=API_KEY, port=config.engine_port).start()
        stack.append(lambda *a: fake.stop())
        for key, value in behaviour.items():
            setattr(fake.behaviour, key, value)
        nginx = Nginx(render_nginx_conf(config), tmp_path / f"sandbox{len(stack)}", key_check=key_check(config), cgroup_procs=cgroup_procs)
        stack.append(lambda *a: nginx.stop())
        nginx.start(wait_ports=(config.api_port, config.probe_port, config.metrics_port))
        return Sandbox(fake, nginx, config)

    yield start
    for undo in reversed(stack):
        undo(None, None, None)


@pytest.fixture
def sandbox(sandbox_factory) -> Sandbox:
    return sandbox_factory()


class Stream:
    """A streamed chat read line by line, so the test can act in the middle of it."""

    def __init__(self, port: int = 8000) -> None:
        body = chat_body(stream=True)
        self.sock = socket.create_connection((HOST, port), timeout=10)
        self.sock.sendall(
            (f"POST /v1/chat/completions HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer {API_KEY}\r\n"
             f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
        )
        self.resp = http.client.HTTPResponse(self.sock)
        self.resp.begin()
        self.events: list[bytes] = []

    def next_event(self) -> bytes | None:
        while True:
            try:
                line = self.resp.readline()
            except (http.client.IncompleteRead, ConnectionError, OSError):
                return None
            if not line:
                return None
            if line.startswith(b"data:"):
                self.events.append(line.strip())
                return line.strip()

    def rest(self) -> list[bytes]:
        while (event := self.next_event()) is not None and event != b"data: [DONE]":
            pass
        self.close()
        return self.events

    def close(self) -> None:
        # Both: the response's file object keeps the socket open otherwise (and nginx then
        # lingers up to lingering_timeout, 5 s, for a client that might still send).
        self.resp.close()
        self.sock.close()


EVENTS_PER_STREAM = 11  # role + 6 reasoning words + "po" "ng" + finish + [DONE]
