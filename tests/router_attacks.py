"""The routing tier as an attacker meets it: the real Envoy (the rendered config, in a memory cgroup at the router pod's limit)
in front of the real nginx proxy (the rendered prod config) in front of the fake vLLM, and the attacks of issue 31.

* :func:`tier`: one private network namespace (:class:`tests.proxy_sandbox.PrivateNetwork`) holding the fake engine on the
  engine port, nginx on the pod's ports (its own mount namespace, the key-check file mounted), and Envoy on
  :data:`tests.routing_harness.TEST_LISTEN_PORT` with the replicas' name resolving to nginx; Envoy joins a memory cgroup with
  the limit the stack renders for the router container (:func:`kimi_k3.serving.router.memory_mib`).
* :class:`Probe`: a keyed streamed chat through the router every half second, recording each one's time to first event.
* :func:`stalled_uploads`, :func:`unfinished_headers`, :func:`h2c_streams`: the attacks, loopback only, bounded counts; every
  socket they open is closed when the caller's ``with`` ends.

Shared by ``tests/test_router_edge.py`` (small counts) and ``tools/bench_router_edge.py`` (the issue's counts, before and after).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import resource
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kimi_k3.serving import router, router_config
from kimi_k3.serving.api_proxy import render_nginx_conf
from tests import proxy_harness
from tests import routing_harness as harness
from tests.fake_openai_server import FakeOpenAIServer
from tests.proxy_sandbox import MemoryCgroup, Nginx, PrivateNetwork, require_sandbox

HOST = "127.0.0.1"
PORT = harness.TEST_LISTEN_PORT
API_KEY = proxy_harness.API_KEY
"""The key both walls check (Envoy its SHA-256, nginx its MD5)."""

ATTACKER = "127.0.0.2"
"""The one client address of the single-address attacks."""


def source(n: int) -> str:
    """The ``n``-th attacker address (``127.1.0.1`` onwards): one address per connection in the many-address attacks."""
    return f"127.{1 + n // 62_500}.{(n // 250) % 250}.{1 + n % 250}"


def raise_descriptor_limit() -> int:
    """Raise this process's soft open-file limit to its hard limit (Envoy and nginx, started after, inherit it); returns it."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


@dataclass
class Tier:
    """What :func:`tier` started."""

    fake: FakeOpenAIServer
    nginx: Nginx
    envoy: harness.EnvoyRouter
    cgroup: MemoryCgroup
    limit_bytes: int

    def alive(self) -> bool:
        """Envoy still runs and the kernel killed nothing in its cgroup."""
        return self.envoy.proc is not None and self.envoy.proc.poll() is None and self.cgroup.oom_kills() == 0

    def stat(self, name: str) -> int:
        """One counter or gauge from Envoy's admin ``/stats`` (0 when absent)."""
        for line in self.envoy.admin(f"/stats?filter=^{name}$").splitlines():
            key, _, value = line.partition(": ")
            if key == name:
                return int(value)
        return 0


def stack_router_config() -> router_config.RouterConfig:
    """The prod stack's router config (tests/test_routing_stack.py asserts it is the plan's, byte for byte)."""
    from tests.test_routing_stack import stack_config

    return stack_config()


@contextlib.contextmanager
def tier(workdir: Path, config: router_config.RouterConfig | None = None, limit_bytes: int | None = None, envoy_yaml: str | None = None,
         token_delay: float = 0.02) -> Iterator[Tier]:
    """The three layers in one private network namespace; ``limit_bytes``: the cgroup's limit (default: the rendered one);
    ``envoy_yaml``: run this text instead of ``config``'s rendering (the bench's "before", the old config), addresses substituted."""
    harness.require_root()
    require_sandbox()
    config = config or stack_router_config()
    limit = limit_bytes or router.memory_mib(config, router.ConversationRouting()) * 2**20
    cgroup = MemoryCgroup.create(f"kimi-k3-router-edge-{os.getpid()}-{time.monotonic_ns()}", limit)
    if cgroup is None:
        import pytest

        pytest.skip("no writable memory cgroup here (cgroup v2 with the memory controller, or cgroup v1)")
    proxy = proxy_harness.STACK_CONFIG
    try:
        with PrivateNetwork():
            fake = FakeOpenAIServer(api_key=API_KEY, port=proxy.engine_port).start()
            fake.behaviour.token_delay = token_delay
            try:
                with Nginx(render_nginx_conf(proxy), workdir / "nginx", key_check=proxy_harness.key_check(proxy)) as nginx:
                    nginx.start(wait_ports=(proxy.api_port, proxy.probe_port))
                    replica = harness.ReplicaAddress("r0", HOST, proxy.api_port, proxy.probe_port)
                    envoy = harness.EnvoyRouter(harness.substituted(config, [replica]), workdir / "envoy", api_key=API_KEY, cgroup_procs=cgroup.procs)
                    if envoy_yaml is not None:
                        envoy.yaml.write_text(envoy_yaml)
                    try:
                        envoy.start([HOST])
                        yield Tier(fake, nginx, envoy, cgroup, limit)
                    finally:
                        envoy.stop()
            finally:
                fake.stop()
    finally:
        for _ in range(50):  # the cgroup can be removed once the kernel has reaped its last process
            cgroup.remove()
            if not cgroup.path.exists():
                break
            time.sleep(0.1)


def chat(stream: bool = True) -> bytes:
    """A chat request body."""
    return proxy_harness.chat_body(stream=stream)


def keyed_headers(key: str = API_KEY) -> dict[str, str]:
    """Headers of a keyed JSON request."""
    return {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}


@dataclass
class Probe:
    """A keyed streamed chat through the router every ``every_s`` seconds, on one kept-alive connection (as the OpenAI SDKs
    pool them; ``fresh``: a new connection each time), each one's time to its first event recorded (``None``: it failed)."""

    every_s: float = 0.5
    fresh: bool = False
    timeout_s: float = 5.0
    results: list[float | None] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _once(self, conn: http.client.HTTPConnection | None) -> http.client.HTTPConnection | None:
        if conn is None or self.fresh:
            if conn is not None:
                conn.close()
            conn = http.client.HTTPConnection(HOST, PORT, timeout=self.timeout_s)
        start = time.perf_counter()
        try:
            conn.request("POST", "/v1/chat/completions", body=chat(), headers=keyed_headers())
            resp = conn.getresponse()
            first = resp.readline() if resp.status == 200 else b""
            took = time.perf_counter() - start
            resp.read()
            if resp.status == 200 and first.startswith(b"data:"):
                self.results.append(took)
            else:
                self.results.append(None)
                self.errors.append(f"status {resp.status}")
            return conn
        except (OSError, http.client.HTTPException) as err:
            self.results.append(None)
            self.errors.append(f"{type(err).__name__}: {err}")
            conn.close()
            return None

    def _run(self, conn: http.client.HTTPConnection | None) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            conn = self._once(conn)
            self._stop.wait(max(0.0, self.every_s - (time.monotonic() - started)))
        if conn is not None:
            conn.close()

    def __enter__(self) -> Probe:
        conn = self._once(None)  # the first one before the attack: its connection is the pooled one
        assert conn is not None and self.results[-1] is not None, self.errors
        self.results.clear()
        self._thread = threading.Thread(target=self._run, args=(conn,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_s + 2)

    def within(self, seconds: float) -> int:
        """Probes that got their first event within ``seconds``."""
        return sum(1 for r in self.results if r is not None and r <= seconds)


@contextlib.contextmanager
def held(sockets: list[socket.socket]) -> Iterator[list[socket.socket]]:
    """Close every socket when the block ends."""
    try:
        yield sockets
    finally:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()


def _connect(address: str) -> socket.socket | None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((address, 0))
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.connect((HOST, PORT))
        return sock
    except OSError:
        sock.close()
        return None


def _send_all(sockets: list[socket.socket], data: bytes, within_s: float = 10.0) -> None:
    """Send ``data`` on every (non-blocking) socket as far as the kernel takes it; sockets the server closed are skipped."""
    pending = dict.fromkeys(sockets, 0)
    deadline = time.monotonic() + within_s
    while pending and time.monotonic() < deadline:
        for sock, sent in list(pending.items()):
            try:
                n = sock.send(data[sent:])
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                del pending[sock]
                continue
            if sent + n >= len(data):
                del pending[sock]
            else:
                pending[sock] = sent + n
        if pending:
            time.sleep(0.005)


def stalled_uploads(count: int, address: str = ATTACKER, body_sent: int = 60 * 1024, declared: int = 1024 * 1024) -> list[socket.socket]:
    """``count`` POSTs without the key from one ``address``: headers declaring ``declared`` bytes of body, ``body_sent`` of it sent,
    then nothing (the issue's 8,000 x 60 KiB of 1 MiB)."""
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n").encode()
    sockets = [s for s in (_connect(address) for _ in range(count)) if s is not None]
    _send_all(sockets, head + b"x" * body_sent)
    return sockets


UNFINISHED_HEADER = b"POST /v1/chat/completions HTTP/1.1\r\nHost: api\r\n" + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 7000) for i in range(4))
"""A header of about 28 KiB (under the router's 32 KiB bound, so it is held, not refused) that never ends: the costliest slot."""


def unfinished_headers(count: int, data: bytes = UNFINISHED_HEADER) -> list[socket.socket]:
    """``count`` connections from as many addresses, each sending ``data`` (a header that never ends)."""
    sockets = [s for s in (_connect(source(i)) for i in range(count)) if s is not None]
    _send_all(sockets, data)
    return sockets


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def h2c_payload(streams: int) -> bytes:
    """Cleartext HTTP/2 (prior knowledge): the preface, SETTINGS, then ``streams`` HEADERS frames opening a POST each (no body)."""
    # HPACK: :method POST (indexed 3), :scheme http (6), :path / (4), :authority "api" (literal, indexed name 1).
    block = bytes([0x83, 0x86, 0x84, 0x41, 0x03]) + b"api"
    frames = [_frame(0x4, 0x0, 0, b"")] + [_frame(0x1, 0x4, 2 * i + 1, block) for i in range(streams)]  # END_HEADERS, no END_STREAM
    return b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"".join(frames)


def h2c_streams(connections: int, streams: int) -> list[socket.socket]:
    """``connections`` connections from as many addresses, each opening ``streams`` HTTP/2 streams that never send a body."""
    sockets = [s for s in (_connect(source(i)) for i in range(connections)) if s is not None]
    _send_all(sockets, h2c_payload(streams))
    return sockets


def answered_and_closed(sock: socket.socket, wait_s: float = 2.0) -> tuple[bytes, bool]:
    """What the server sent on ``sock`` (non-blocking, read for up to ``wait_s``) and whether it then closed it."""
    sock.setblocking(True)
    sock.settimeout(wait_s)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
        return data, True
    except ConnectionResetError:
        return data, True
    except TimeoutError:
        return data, False


def status_of(response: bytes) -> int | None:
    """The status code of a raw HTTP/1.1 response (``None`` if there is none)."""
    if not response.startswith(b"HTTP/1."):
        return None
    return int(response.split(b" ", 2)[1])


def json_body(response: bytes) -> dict:
    """The JSON body of a raw HTTP/1.1 response."""
    return json.loads(response.partition(b"\r\n\r\n")[2])
