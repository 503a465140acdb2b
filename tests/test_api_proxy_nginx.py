"""The real nginx, running exactly the nginx.conf the stack renders, in front of the fake vLLM.

Each test gets a private network namespace and a private mount namespace
(:mod:`tests.proxy_sandbox`), so the pod's fixed ports (8000, 127.0.0.1:8001, 8081,
9090) and paths (``/etc/nginx``, ``/tmp``) are used as they are, in parallel with
anything else on the machine. The fake vLLM listens where vLLM will: on loopback,
port :data:`~kimi_k3.serving.api_proxy.ENGINE_PORT`. What a client without the key can
cost and the JSON errors are in ``tests/test_api_proxy_edge.py``.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import re
import signal
import socket
import time
from pathlib import Path

import pytest

from kimi_k3.serving import api_pod, api_proxy
from kimi_k3.serving.api_proxy import ApiProxyConfig, ApiRoute, render_nginx_conf
from tests.conftest import DATA
from tests.fake_openai_server import UNPROTECTED_ROUTES
from tests.proxy_harness import API_KEY, EVENTS_PER_STREAM, HOST, STACK_CONFIG, Stream, call, chat_body, key_check, keyed, stack_proxy_config
from tests.proxy_sandbox import Nginx, require_sandbox

# --- what the sandbox really runs ------------------------------------------------------


def _plan_config_text(plan) -> str:
    (config_map,) = [m for m in plan.kubernetes_objects() if m["kind"] == "ConfigMap" and m["metadata"]["name"].endswith("-api-proxy")]
    return config_map["data"][api_proxy.CONFIG_FILE]


def test_the_sandbox_runs_the_bytes_the_prod_plan_ships(prod_plan, dev_plan):
    # The ConfigMap the prod stack's plan declares is exactly what this module's sandboxes run.
    assert _plan_config_text(prod_plan) == render_nginx_conf(STACK_CONFIG)
    assert _plan_config_text(dev_plan) == render_nginx_conf(stack_proxy_config("dev"))
    assert STACK_CONFIG.api_port == 8000 and STACK_CONFIG.engine_port == 8001
    (workload,) = [m for m in prod_plan.kubernetes_objects() if m["kind"] in ("Deployment", "StatefulSet") and m["metadata"]["name"] == "kimi-k3-serving"]
    annotations = workload["spec"]["template"]["metadata"]["annotations"]
    assert annotations[api_pod.CONFIG_CHECKSUM_ANNOTATION] == api_proxy.config_checksum(STACK_CONFIG)


def test_nginx_runs_as_the_containers_uid_with_a_read_only_root(sandbox):
    master = sandbox.nginx.process.pid
    status = Path(f"/proc/{master}/status").read_text()
    assert re.search(r"^Uid:\s+10001\s+10001\s+10001\s+10001$", status, re.M), status
    assert re.search(r"^CapEff:\s+0+$", status, re.M) and re.search(r"^NoNewPrivs:\s+1$", status, re.M)
    mounts = Path(f"/proc/{master}/mounts").read_text().splitlines()
    root = [m for m in mounts if m.split()[1] == "/"][-1]
    assert "ro" in root.split()[3].split(","), root
    tmp = [m for m in mounts if m.split()[1] == "/tmp"][-1]
    assert tmp.split()[2] == "tmpfs"
    assert call(8000, "GET", "/v1/models", headers=keyed()).status == 200  # and it serves


# --- the allowlist -----------------------------------------------------------------------


def test_allowed_routes_reach_vllm(sandbox):
    models = call(8000, "GET", "/v1/models", headers=keyed())
    assert models.status == 200 and [m["id"] for m in models.json()["data"]] == ["Kimi-K3"]
    chat = call(8000, "POST", "/v1/chat/completions", chat_body(), keyed())
    assert chat.status == 200 and chat.json()["choices"][0]["message"]["content"] == "pong"
    completion = call(8000, "POST", "/v1/completions", json.dumps({"model": "Kimi-K3", "prompt": "ping"}).encode(), keyed())
    assert completion.status == 200 and completion.json()["choices"][0]["text"] == "pong"
    assert [(r.method, r.path, r.authorized) for r in sandbox.fake.requests] == [
        ("GET", "/v1/models", True), ("POST", "/v1/chat/completions", True), ("POST", "/v1/completions", True),
    ]


def _read_stream(port: int, body: bytes) -> tuple[list[tuple[float, bytes]], dict[str, str], float]:
    """POST a streamed chat; returns ``[(seconds since send, line)]`` of every ``data:`` line, headers, send time."""
    sock = socket.create_connection((HOST, port), timeout=10)
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer {API_KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    start = time.monotonic()
    sock.sendall(request)
    resp = http.client.HTTPResponse(sock)
    resp.begin()
    headers = {k.lower(): v for k, v in resp.getheaders()}
    events = []
    while True:
        line = resp.readline()
        if not line:
            break
        if line.startswith(b"data:"):
            events.append((time.monotonic() - start, line.strip()))
            if line.strip() == b"data: [DONE]":
                break
    sock.close()
    return events, headers, start


def _deltas(events: list[tuple[float, bytes]]) -> list:
    return [json.loads(line[5:])["choices"] if line != b"data: [DONE]" else "[DONE]" for _, line in events]


def test_a_streamed_completion_arrives_chunk_by_chunk(sandbox):
    sandbox.fake.behaviour.first_token_delay = 0.2
    sandbox.fake.behaviour.token_delay = 0.1
    direct, _, _ = _read_stream(8001, chat_body(stream=True))
    proxied, headers, _ = _read_stream(8000, chat_body(stream=True))
    assert headers["content-type"].startswith("text/event-stream") and "content-length" not in headers
    assert _deltas(proxied) == _deltas(direct) and proxied[-1][1] == b"data: [DONE]"
    first, last = proxied[0][0], proxied[-1][0]
    # 10 events 0.1 s apart after a 0.2 s first token: the first must arrive ~0.9 s before the end.
    assert first < 0.2 + 0.3, f"first chunk after {first:.3f} s: buffered?"
    assert last - first > 0.7, f"stream spread over {last - first:.3f} s only"
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(proxied)]
    assert sum(g > 0.05 for g in gaps) >= 0.8 * len(gaps), f"chunks bunched together: {gaps}"  # slack for a busy CI core
    print(f"first chunk: direct {direct[0][0] * 1000:.1f} ms, through nginx {first * 1000:.1f} ms")


def test_every_unprotected_vllm_route_is_open_directly_and_refused_through_the_proxy(sandbox):
    paths = _doc_unprotected_paths() | {"/metrics"}
    for path in sorted(paths):
        method = UNPROTECTED_ROUTES.get(path, "GET")
        direct = call(8001, method, path, b"{}" if method == "POST" else None, {"Content-Type": "application/json"})
        assert direct.status == 200, (path, direct.status)  # vLLM answers without any key
    seen_directly = len(sandbox.fake.requests)
    for path in sorted(paths):
        for method in ("GET", "POST"):
            for headers in ({}, keyed()):
                reply = call(8000, method, path, b"{}" if method == "POST" else None, headers)
                assert reply.status == 404, (method, path, reply.status)
                assert reply.json()["error"]["code"] == 404 and reply.headers["content-type"] == "application/json"
    assert len(sandbox.fake.requests) == seen_directly  # not one refused request reached the engine


REFUSED_SPELLINGS = [
    "/invocations/", "//invocations", "/%69nvocations", "/invocations?x=1", "/INVOCATIONS",
    "/v1/models/../../invocations", "/v1/chat/completions/../../pause", "/v1/chat/completions%2F..%2F..%2Finvocations",
    "/v1/models/", "/V1/models", "/v1/models.json", "/v1/chat/completions/batch", "/v1/completions/render",
    "/v1/embeddings", "/v1/responses", "/v1/load_lora_adapter", "/inference/v1/generate", "/v2/rerank", "/", "/docs", "/openapi.json",
]


def test_other_spellings_and_neighbours_of_the_allowed_paths_are_refused(sandbox):
    for path in REFUSED_SPELLINGS:
        for method in ("GET", "POST"):
            assert call(8000, method, path, b"{}" if method == "POST" else None, keyed()).status == 404, (method, path)
    assert sandbox.engine_paths() == []
    # Spellings that normalise onto an allowed route reach vLLM as exactly that path.
    for path in ("/v1//models", "/invocations/../v1/models", "/v1/%6dodels", "/v1/./models"):
        assert call(8000, "GET", path, headers=keyed()).status == 200, path
    assert sandbox.engine_paths() == ["/v1/models"] * 4
    call(8000, "GET", "/v1/models?limit=1", headers=keyed())
    assert sandbox.engine_paths()[-1] == "/v1/models?limit=1"  # the query string is kept


def test_a_wrong_method_on_an_allowed_path_is_a_404(sandbox):
    for method, path in [("GET", "/v1/chat/completions"), ("POST", "/v1/models"), ("PUT", "/v1/completions"), ("DELETE", "/v1/models"),
                         ("OPTIONS", "/v1/chat/completions"), ("PATCH", "/v1/chat/completions"), ("HEAD", "/v1/models")]:
        reply = call(8000, method, path, headers=keyed())
        assert reply.status == 404, (method, path, reply.status)
    assert sandbox.engine_paths() == []


def test_a_wrong_or_missing_key_gets_the_proxys_401_and_never_reaches_vllm(sandbox):
    for headers in (keyed("sk-wrong"), {}, keyed(API_KEY.lower()), {"Authorization": f"Bearer  {API_KEY}"}, {"Authorization": f"Basic {API_KEY}"}):
        reply = call(8000, "POST", "/v1/chat/completions", chat_body(), headers)
        assert reply.status == 401 and reply.headers["content-type"] == "application/json", (headers, reply.status)
        assert reply.json()["error"] == {"message": "Missing or wrong API key: send Authorization: Bearer <key>", "type": "AuthenticationError", "param": None, "code": 401}
    assert call(8000, "GET", "/v1/models").status == 401
    assert sandbox.engine_paths() == []  # nginx judged the key itself, before any body
    # The right key passes with its header untouched (vLLM checks it again); the scheme is case-insensitive, as in vLLM.
    assert call(8000, "POST", "/v1/chat/completions", chat_body(), keyed()).status == 200
    assert call(8000, "GET", "/v1/models", headers={"Authorization": f"bearer {API_KEY}"}).status == 200
    assert [r.authorized for r in sandbox.fake.requests] == [True, True]  # and vLLM agrees
    assert call(8000, "GET", "/nothing-here").status == 404  # outside the allowlist the answer is still 404, key or not


def test_without_a_key_the_proxy_checks_none(sandbox_factory):
    config = ApiProxyConfig(max_model_len=STACK_CONFIG.max_model_len, check_api_key=False)
    assert "auth_request" not in render_nginx_conf(config) and not re.search(r"^\s*include ", render_nginx_conf(config), re.M)
    box = sandbox_factory(config)
    assert call(8000, "GET", "/v1/models").status == 401  # vLLM's own answer, passed through
    assert box.engine_paths() == ["/v1/models"]


def _body_of_size(size: int) -> bytes:
    envelope = chat_body(content="")
    body = chat_body(content="x" * (size - len(envelope)))
    assert len(body) == size
    return body


def test_a_body_up_to_the_computed_limit_passes_and_a_larger_one_gets_413(sandbox):
    limit = STACK_CONFIG.max_body_bytes
    assert limit == 262_144 * api_proxy.BODY_BYTES_PER_TOKEN == 4 * 1024 * 1024
    t0 = time.monotonic()
    at_limit = call(8000, "POST", "/v1/chat/completions", _body_of_size(limit), keyed(), timeout=30)
    elapsed = time.monotonic() - t0
    assert at_limit.status == 200, at_limit.body[:200]
    assert len(sandbox.fake.chat_requests()[-1]["messages"][0]["content"]) > limit - 200  # it arrived whole
    over = call(8000, "POST", "/v1/chat/completions", _body_of_size(limit + 1), keyed(), timeout=30)
    assert over.status == 413 and over.json()["error"]["code"] == 413
    # A chunked upload has no Content-Length to check up front; nginx counts and still refuses it.
    chunks = (_body_of_size(limit + 1)[i : i + 65536] for i in range(0, limit + 1, 65536))
    conn = http.client.HTTPConnection(HOST, 8000, timeout=30)
    conn.request("POST", "/v1/chat/completions", body=chunks, headers=keyed(), encode_chunked=True)
    assert conn.getresponse().status == 413
    conn.close()
    assert len(sandbox.fake.requests) == 1
    print(f"4 MiB body through nginx in {elapsed * 1000:.0f} ms")


# --- probes and metrics ------------------------------------------------------------------


def test_the_probe_port_forwards_only_vllms_health(sandbox):
    assert call(8081, "GET", "/health").status == 200
    sandbox.fake.behaviour.health_status = 503
    assert call(8081, "GET", "/health").status == 503  # an unhealthy engine fails the probe
    assert sandbox.engine_paths() == ["/health", "/health"]
    livez = call(8081, "GET", "/livez")
    assert livez.status == 200 and livez.json() == {"status": "ok"}
    for method, path in [("POST", "/health"), ("GET", "/v1/models"), ("GET", "/metrics"), ("GET", "/ping"), ("GET", "/invocations"), ("GET", "/health/")]:
        assert call(8081, method, path, headers=keyed()).status == 404, (method, path)
    assert call(8000, "GET", "/health").status == 404  # not on the API port
    assert call(9090, "GET", "/health").status == 404
    assert sandbox.engine_paths() == ["/health", "/health"]  # /livez is nginx's own answer


def test_the_metrics_port_serves_only_get_metrics(sandbox):
    metrics = call(9090, "GET", "/metrics")
    assert metrics.status == 200 and b"vllm:num_requests_waiting" in metrics.body
    assert metrics.headers["content-type"].startswith("text/plain")
    for method, path in [("POST", "/metrics"), ("GET", "/health"), ("GET", "/v1/models"), ("GET", "/metrics/"), ("POST", "/invocations")]:
        assert call(9090, method, path, headers=keyed()).status == 404, (method, path)
    assert call(8000, "GET", "/metrics").status == 404  # not on the API port
    assert sandbox.engine_paths() == ["/metrics"]


def test_an_extra_route_from_settings_is_forwarded(sandbox_factory):
    config = ApiProxyConfig(max_model_len=STACK_CONFIG.max_model_len, extra_routes=(ApiRoute("POST", "/v1/embeddings"),))
    box = sandbox_factory(config)
    call(8000, "POST", "/v1/embeddings", b"{}", keyed())
    assert call(8000, "GET", "/v1/embeddings", headers=keyed()).status == 404
    assert box.engine_paths() == ["/v1/embeddings"]


# --- stopping ----------------------------------------------------------------------------


def _refuses_new_connections(port: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection((HOST, port), timeout=0.2).close()
        except ConnectionRefusedError:
            return True
        time.sleep(0.02)
    return False




@pytest.mark.parametrize("signum", [signal.SIGQUIT, signal.SIGTERM], ids=["SIGQUIT", "SIGTERM"])
def test_any_stop_signal_lets_the_in_flight_stream_finish(sandbox, signum):
    # The kubelet sends the image's STOPSIGNAL (SIGQUIT in nginx's images) or SIGTERM: the wrapper makes both graceful.
    sandbox.fake.behaviour.token_delay = 0.1
    stream = Stream()
    assert stream.next_event() is not None
    t0 = time.monotonic()
    sandbox.nginx.signal(signum)
    assert _refuses_new_connections(8000, within_s=1.0), f"nginx kept accepting after {signum!r}"
    events = stream.rest()
    done = time.monotonic() - t0
    assert len(events) == EVENTS_PER_STREAM and events[-1] == b"data: [DONE]", events
    assert sandbox.nginx.wait(timeout=10) == 0
    exited = time.monotonic() - t0
    assert exited - done < 1.0, f"nginx exited {exited - done:.2f} s after the last stream ended"
    print(f"graceful stop on {signum!r}: stream finished {done:.2f} s and nginx exited {exited:.2f} s after the signal")


def test_the_drain_is_bounded_by_drain_timeout(sandbox_factory):
    box = sandbox_factory(ApiProxyConfig(max_model_len=STACK_CONFIG.max_model_len, drain_s=1), token_delay=0.3)
    stream = Stream()
    assert stream.next_event() is not None
    t0 = time.monotonic()
    box.nginx.signal(signal.SIGQUIT)
    events = stream.rest()
    box.nginx.wait(timeout=5)
    took = time.monotonic() - t0
    assert events[-1] != b"data: [DONE]" and len(events) < EVENTS_PER_STREAM  # a 3 s stream cut at the 1 s bound
    assert 0.9 < took < 2.5, took


def test_nginxs_own_sigterm_would_cut_the_stream(sandbox):
    # Why the wrapper: SIGTERM straight to nginx (the kubelet's default stop signal) is its fast stop, which aborts at once.
    sandbox.fake.behaviour.token_delay = 0.1
    stream = Stream()
    assert stream.next_event() is not None
    os.kill(sandbox.nginx.master_pid(), signal.SIGTERM)
    events = stream.rest()
    assert events[-1] != b"data: [DONE]" and len(events) < EVENTS_PER_STREAM


# --- nginx -t over several settings --------------------------------------------------------


CONFIGS = {
    "prod stack": STACK_CONFIG,
    "1M context, images, 4 CPUs": ApiProxyConfig(max_model_len=1_048_576, inline_media_bytes=27 * 1024 * 1024, cpu=4, worker_connections=8192),
    "extra routes (one path, two methods)": ApiProxyConfig(
        max_model_len=131_072,
        extra_routes=(ApiRoute("POST", "/v1/embeddings"), ApiRoute("POST", "/v1/responses"), ApiRoute("GET", "/v1/responses"), ApiRoute("POST", "/v2/rerank")),
    ),
    "short generations, 1 s drain, other ports": ApiProxyConfig(max_model_len=1024, max_generation_s=60, drain_s=1, api_port=8080, engine_port=18000, probe_port=8082, metrics_port=9400),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_nginx_accepts_every_rendered_config(name, tmp_path):
    require_sandbox()
    result = Nginx(render_nginx_conf(CONFIGS[name]), tmp_path, key_check=key_check(CONFIGS[name])).check()
    assert result.returncode == 0, result.stderr
    assert "syntax is ok" in result.stderr and "test is successful" in result.stderr


def test_nginx_t_does_reject_a_broken_config(tmp_path):
    require_sandbox()
    broken = render_nginx_conf(STACK_CONFIG).replace("proxy_buffering off;", "proxy_buffering sometimes;")
    result = Nginx(broken, tmp_path, key_check=key_check(STACK_CONFIG)).check()
    assert result.returncode != 0 and "proxy_buffering" in result.stderr


# --- helpers -------------------------------------------------------------------------------


def _doc_unprotected_paths() -> set[str]:
    """The paths vLLM's security guide lists as unprotected (vendored excerpt, see tests/data/README.md)."""
    text = (DATA / "vllm-security-api-key-limitations.md").read_text()
    section = text.split("### Unprotected Endpoints", 1)[1].split("### Security Implications", 1)[0]
    return set(re.findall(r"^- `(/[^`]*)`", section, re.M))
