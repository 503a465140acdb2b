"""The real nginx at the edge: what a client without the key can cost it, and the errors it answers itself.

Runs the rendered config in the sandbox of ``tests/proxy_sandbox.py`` (private network and
mount namespaces, the container's UID and command), in front of the fake vLLM. Clients use
many source addresses (any ``127.x.y.z`` is local in the private namespace), as an attacker
with many addresses would, so the per-address limits do not hide the per-connection cost.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import time

import pytest

from kimi_k3.serving import proxy_edge, proxy_errors
from kimi_k3.serving.api_proxy import ApiProxyConfig, container_resources, render_nginx_conf
from kimi_k3.serving.proxy_edge import EdgeLimits
from tests.proxy_harness import API_KEY, EVENTS_PER_STREAM, HOST, STACK_CONFIG, Stream, call, chat_body, key_check, keyed
from tests.proxy_sandbox import MemoryCgroup, Nginx, PrivateNetwork, peak_rss_bytes, require_sandbox

QUICK = EdgeLimits(header_timeout_s=1, body_timeout_s=1, lingering_time_s=1)
"""Short timeouts, so a test can watch them fire."""


def source(n: int) -> str:
    """The ``n``-th client address (``127.1.0.1`` onwards): one attacker address per connection."""
    return f"127.{1 + n // 65_000}.{(n // 250) % 260 % 256}.{1 + n % 250}"


def connect_from(address: str, port: int = 8000) -> socket.socket:
    sock = socket.socket()
    sock.bind((address, 0))
    sock.connect((HOST, port))
    return sock


def raw(data: bytes, port: int = 8000, timeout: float = 5) -> bytes:
    """Send ``data`` as is and read until the server closes (or ``timeout``)."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(data)
        out = b""
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := sock.recv(65536):
                out += chunk
    return out


def status_and_body(response: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def assert_json_error(response: bytes, status: int) -> None:
    code, headers, body = status_and_body(response)
    assert code == status, response[:300]
    assert headers["content-type"] == "application/json", headers
    assert json.loads(body) == {"error": {"message": proxy_errors.error_of(status).message, "type": proxy_errors.error_of(status).type, "param": None, "code": status}}


@pytest.fixture(autouse=True)
def _many_descriptors():
    """The tests hold a thousand sockets or more: raise this process's soft limit to its hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# --- what a client without the key costs ------------------------------------------------------------


def test_the_worst_case_is_half_the_memory_limit():
    config = STACK_CONFIG
    worst = proxy_edge.worst_case_bytes(config.cpu, config.worker_connections)
    limit_mib = int(container_resources(config)["memory"].removesuffix("Mi"))
    # 1 worker x 2,048 slots x 96 KiB + 16 MiB worker + 8 MiB master + 3 x 1 MiB zones = 219 MiB; the limit is 512 MiB.
    assert (config.cpu, config.worker_connections, worst // 2**20) == (1, 2048, 219)
    assert limit_mib == 512 and 2 * worst <= limit_mib * 2**20
    assert f"worker_connections {config.worker_connections};" in render_nginx_conf(config)
    assert "client_body_buffer_size 64k;" in render_nginx_conf(config) and "large_client_header_buffers 4 8k;" in render_nginx_conf(config)


SLOW_HEADER = b"POST /v1/chat/completions HTTP/1.1\r\nHost: api\r\n" + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 7000) for i in range(4))
"""A header that fills all four large header buffers and never ends (the costliest slow-header client)."""

UPLOAD_BODY = 256 * 1024
"""Body bytes each stalled upload sends before it stalls: four times the body buffer."""


def test_stalled_uploads_and_slow_headers_without_the_key_leave_a_stream_intact_under_the_memory_limit(sandbox_factory, tmp_path):
    limit = int(container_resources(STACK_CONFIG)["memory"].removesuffix("Mi")) * 2**20
    cgroup = MemoryCgroup.create(f"kimi-k3-proxy-edge-{os.getpid()}", limit)
    if cgroup is None:
        pytest.skip("no writable memory cgroup here (cgroup v2 with the memory controller, or cgroup v1)")
    try:
        box = sandbox_factory(STACK_CONFIG, cgroup_procs=cgroup.procs, token_delay=0.2)
        workers = box.nginx.worker_pids()
        baseline = cgroup.peak_bytes()
        stream = Stream()  # a keyed stream, live through the attack
        assert stream.next_event() is not None
        n = 700
        held = []
        upload = f"POST /v1/chat/completions HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: {STACK_CONFIG.max_body_bytes}\r\n\r\n".encode()
        for i in range(n):
            slow = connect_from(source(i))
            slow.sendall(SLOW_HEADER)
            held.append(slow)
        time.sleep(0.3)  # let nginx read what was sent
        after_headers = cgroup.peak_bytes()
        for i in range(n):
            stalled = connect_from(source(n + i))
            stalled.sendall(upload + b"x" * UPLOAD_BODY)
            held.append(stalled)
        time.sleep(0.3)
        peak = cgroup.peak_bytes()
        events = stream.rest()
        assert events[-1] == b"data: [DONE]" and len(events) == EVENTS_PER_STREAM, events  # the stream went through untouched
        assert box.nginx.worker_pids() == workers and cgroup.oom_kills() == 0  # no worker was killed
        assert peak < limit / 2, (peak, limit)
        per_slow_header, per_upload = (after_headers - baseline) / n, (peak - after_headers) / n
        assert per_slow_header < proxy_edge.SLOT_BYTES and per_upload < proxy_edge.SLOT_BYTES, (per_slow_header, per_upload)
        assert peak_rss_bytes(workers[0]) < limit / 2
        # Nothing of it reached the engine, and a keyed request still gets through.
        assert all(r.authorized for r in box.fake.requests)
        for sock in held:
            sock.close()
        assert call(8000, "GET", "/v1/models", headers=keyed()).status == 200
        print(
            f"without the key, {n} slow headers then {n} stalled uploads ({UPLOAD_BODY // 1024} KiB sent each), one address each: "
            f"cgroup v{cgroup.version} peak {peak / 2**20:.1f} MiB (baseline {baseline / 2**20:.1f} MiB, limit {limit / 2**20:.0f} MiB); "
            f"{per_slow_header / 1024:.1f} KiB per slow header, {per_upload / 1024:.1f} KiB per stalled upload; "
            f"worker peak RSS {peak_rss_bytes(workers[0]) / 2**20:.1f} MiB"
        )
    finally:
        with contextlib.suppress(Exception):
            box.nginx.stop()
        cgroup.remove()


def test_without_the_key_no_body_is_read(sandbox_factory):
    box = sandbox_factory(STACK_CONFIG)
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: api\r\nContent-Length: {STACK_CONFIG.max_body_bytes}\r\n\r\n".encode()
    with connect_from(source(1)) as sock:
        sock.settimeout(5)
        sock.sendall(head + b"x" * 1024)  # a body that has barely started
        answer = sock.recv(65536)
    assert_json_error(answer, 401)  # answered at once, the body neither awaited nor buffered
    assert box.engine_paths() == []


def test_a_flood_without_the_key_from_one_address_gets_429_and_keyed_clients_are_not_limited(sandbox_factory):
    box = sandbox_factory(STACK_CONFIG)
    limits = STACK_CONFIG.limits
    statuses = [call(8000, "GET", "/v1/models").status for _ in range(limits.unauthenticated_burst + 15)]
    assert statuses[: limits.unauthenticated_burst] == [401] * limits.unauthenticated_burst
    assert 429 in statuses[limits.unauthenticated_burst :]
    reply = call(8000, "GET", "/v1/models")
    assert reply.status == 429 and reply.json()["error"]["type"] == "RateLimitError"
    # The same address with the key is not limited by the unauthenticated zone.
    assert [call(8000, "GET", "/v1/models", headers=keyed()).status for _ in range(40)] == [200] * 40
    assert len(box.fake.requests) == 40


def test_slow_clients_lose_their_slot_at_the_timeouts_and_get_no_answer(sandbox_factory):
    sandbox_factory(ApiProxyConfig(max_model_len=STACK_CONFIG.max_model_len, limits=QUICK))
    # A header that never ends: closed (reset) once the header timeout passes; nginx sends nothing (its 408 is log-only).
    with connect_from(source(7)) as slow:
        slow.settimeout(5)
        slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: api\r\n")
        t0 = time.monotonic()
        with contextlib.suppress(ConnectionResetError):
            assert slow.recv(1024) == b""
        assert 0.8 < time.monotonic() - t0 < 3
    # A keyed body that stalls: closed at the body timeout, no 408 either.
    with connect_from(source(8)) as stalled:
        stalled.settimeout(5)
        stalled.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer {API_KEY}\r\nContent-Length: 1000\r\n\r\n{{".encode())
        t0 = time.monotonic()
        with contextlib.suppress(ConnectionResetError):
            assert stalled.recv(1024) == b""
        assert 0.8 < time.monotonic() - t0 < 3


# --- errors clients can parse -----------------------------------------------------------------------------


def test_every_error_nginx_answers_on_the_api_port_is_json_in_vllms_shape(sandbox):
    assert_json_error(raw(b"GARBAGE\r\n\r\n"), 400)
    assert_json_error(raw(b"GET /v1/models HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n"), 401)
    assert_json_error(raw(b"GET /nothing HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n"), 404)
    big = f"POST /v1/chat/completions HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer {API_KEY}\r\nContent-Length: {STACK_CONFIG.max_body_bytes + 1}\r\nConnection: close\r\n\r\n"
    assert_json_error(raw(big.encode()), 413)
    assert_json_error(raw(b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: api\r\n\r\n"), 414)
    assert_json_error(raw(b"GET /v1/models HTTP/1.1\r\nHost: api\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n"), 431)  # nginx's 494
    assert_json_error(raw(f"POST /v1/models HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer {API_KEY}\r\nTransfer-Encoding: gzip\r\n\r\n".encode()), 501)
    assert_json_error(raw(b"GET /v1/models HTTP/3.0\r\nHost: api\r\n\r\n"), 505)
    for path in (f"{proxy_errors.ERROR_PREFIX}/502", proxy_edge.AUTH_LOCATION):  # the internal locations are not reachable
        assert_json_error(raw(f"GET {path} HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer {API_KEY}\r\nConnection: close\r\n\r\n".encode()), 404)
    assert sandbox.engine_paths() == []


def test_while_the_engine_is_down_the_proxy_answers_502_json_on_every_port(sandbox):
    sandbox.fake.stop()
    assert_json_error(raw(f"GET /v1/models HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer {API_KEY}\r\nConnection: close\r\n\r\n".encode()), 502)
    assert_json_error(raw(b"GET /health HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n", port=8081), 502)  # the NLB sees an unhealthy target
    assert_json_error(raw(b"GET /metrics HTTP/1.1\r\nHost: metrics\r\nConnection: close\r\n\r\n", port=9090), 502)
    livez = call(8081, "GET", "/livez")
    assert livez.status == 200  # the proxy itself is alive: the kubelet does not restart it


def test_the_engines_own_errors_pass_through_unchanged(sandbox):
    fake = sandbox.fake
    cases = [("POST", "/v1/chat/completions", b'{"model": "Kimi-K3"}'), ("POST", "/v1/chat/completions", chat_body().replace(b"Kimi-K3", b"other"))]
    for method, path, body in cases:
        direct, proxied = call(8001, method, path, body, keyed()), call(8000, method, path, body, keyed())
        assert proxied.status == direct.status >= 400 and proxied.body == direct.body and proxied.headers["content-type"] == direct.headers["content-type"]
    fake.behaviour.fail_every, fake.behaviour.fail_status = 1, 503  # vLLM not ready: its own 503, not the proxy's
    direct, proxied = call(8001, "POST", "/v1/chat/completions", chat_body(), keyed()), call(8000, "POST", "/v1/chat/completions", chat_body(), keyed())
    assert proxied.status == direct.status == 503 and proxied.body == direct.body
    assert b"EngineCore" in proxied.body


def test_every_error_page_is_json_whatever_triggers_it(tmp_path):
    # A server with the API server's error pages whose locations answer each status bare (no body): what nginx does on
    # a timeout, an internal failure or a refused method. The statuses nobody can trigger through the API port here (500,
    # 503, 504, 405) get their pages checked this way; 408 and 499 are never sent (the connection is closed instead).
    statuses = [e.status for e in proxy_errors.PROXY_ERRORS if e.status not in proxy_errors.NO_PAGE]
    bare = "\n".join(f"        location = /status/{s} {{ return {s}; }}" for s in statuses)
    server = "\n".join(["    server {", "        listen 8099;", *proxy_errors.error_page_lines(), bare, "    }"])
    text = render_nginx_conf(STACK_CONFIG)
    text = text[: text.rindex("}")] + server + "\n}\n"
    require_sandbox()
    with PrivateNetwork(), Nginx(text, tmp_path / "pages", key_check=key_check(STACK_CONFIG)) as nginx:
        nginx.start(wait_ports=(8099,))
        for status in statuses:
            if status not in proxy_errors.NEVER_SENT:
                assert_json_error(raw(f"GET /status/{status} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode(), port=8099), status)
    assert {500, 503, 504, 405} <= set(statuses)


ROUTER_POD = "10.99.0.7"
"""A router pod's address (a private range the proxy trusts behind the router), added to the sandbox's loopback."""


def _unkeyed_statuses(xff: str, count: int, source_address: str = ROUTER_POD) -> list[int]:
    import http.client

    statuses = []
    for _ in range(count):
        conn = http.client.HTTPConnection(HOST, 8000, timeout=5, source_address=(source_address, 0))
        conn.request("GET", "/v1/models", headers={"X-Forwarded-For": xff})
        statuses.append(conn.getresponse().status)
        conn.close()
    return statuses


def _add_router_address() -> None:
    import subprocess

    subprocess.run(["ip", "addr", "add", f"{ROUTER_POD}/32", "dev", "lo"], check=True)


def test_behind_the_router_the_limits_count_each_client_not_the_router(sandbox_factory):
    """Every request comes from a router pod; the client is the last X-Forwarded-For entry, the one Envoy appends (prod: two replicas)."""
    assert STACK_CONFIG.behind_router
    sandbox_factory(STACK_CONFIG)
    _add_router_address()
    burst = STACK_CONFIG.limits.unauthenticated_burst
    flood = _unkeyed_statuses("203.0.113.1", burst + 15)
    flooded = time.monotonic()
    assert flood[:burst] == [401] * burst and 429 in flood[burst:]
    # A client cannot dodge its limit by writing its own X-Forwarded-For: the router's entry comes last. nginx's bucket
    # leaks in real time (rate r/s): a slot freed since the flood may admit one (401), a loaded machine may free more;
    # honouring the spoofed entry would give a fresh budget, all ten admitted.
    spoofed = _unkeyed_statuses("198.51.100.7, 203.0.113.1", 10)
    leaked = int((time.monotonic() - flooded) * STACK_CONFIG.limits.unauthenticated_rate_per_s) + 1
    assert 429 in spoofed and spoofed.count(401) <= leaked, (spoofed, leaked)
    # Another client behind the same router keeps its own budget.
    assert _unkeyed_statuses("203.0.113.2", 5) == [401] * 5
    # Only private ranges are trusted: from any other address the header is ignored (loopback here is not a router).
    assert 429 in _unkeyed_statuses("203.0.113.3", burst + 15, source_address="127.0.0.1")
    assert 429 in _unkeyed_statuses("203.0.113.4", 3, source_address="127.0.0.1")


def test_without_the_router_setting_every_client_behind_a_router_would_share_one_budget(sandbox_factory):
    import dataclasses

    sandbox_factory(dataclasses.replace(STACK_CONFIG, behind_router=False))
    _add_router_address()
    burst = STACK_CONFIG.limits.unauthenticated_burst
    assert 429 in _unkeyed_statuses("203.0.113.1", burst + 15)
    assert 429 in _unkeyed_statuses("203.0.113.2", 5)  # the address nginx sees is the router's: one budget for all
