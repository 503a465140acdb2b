"""The router's front door with the real binaries: what a client without the key can cost the routing tier, and its failure answers.

The real Envoy runs the rendered prod config (addresses substituted) in a memory cgroup at the router pod's rendered limit, in
front of the real nginx running the rendered prod proxy config, in front of the fake vLLM (``tests/router_attacks.py``). The
attacks use small counts here (a few seconds each); ``tools/bench_router_edge.py`` runs the issue's counts, before and after.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import socket
import threading
import time

import pytest

from kimi_k3.serving import proxy_errors, router, router_config, router_edge
from tests import router_attacks as ra
from tests import routing_harness as harness
from tests.test_routing_stack import stack_config


@pytest.fixture(scope="module", autouse=True)
def _no_envoy_left_behind():
    harness.require_root()
    ra.raise_descriptor_limit()
    try:
        yield
    finally:
        harness.kill_leftovers()


def _raw(data: bytes, address: str = ra.ATTACKER, wait_s: float = 3.0) -> tuple[bytes, bool]:
    sock = socket.socket()
    sock.bind((address, 0))
    sock.connect((ra.HOST, ra.PORT))
    try:
        sock.sendall(data)
        return ra.answered_and_closed(sock, wait_s)
    finally:
        sock.close()


def _router_error(response: bytes, status: int) -> None:
    assert ra.status_of(response) == status, response[:300]
    head = response.partition(b"\r\n\r\n")[0].lower()
    assert b"content-type: application/json" in head, head
    error = ra.json_body(response)["error"]
    assert error["code"] == status and error["type"] == proxy_errors.error_of(status).type, error


# --- the arithmetic ----------------------------------------------------------------------------------


def test_the_router_pod_is_sized_from_the_slots_it_can_hold():
    config = stack_config()
    rendered = router_config.envoy_config(config)
    heap = next(m for m in rendered["overload_manager"]["resource_monitors"] if m["name"] == "envoy.resource_monitors.fixed_heap")
    connections = next(m for m in rendered["overload_manager"]["resource_monitors"] if m["name"].endswith("global_downstream_max_connections"))
    # 2,048 slots x 96 KiB + 32 MiB = 224 MiB of heap at most; + 64 MiB not heap = 288 MiB, in 64 MiB steps 320 MiB.
    assert connections["typed_config"]["max_active_downstream_connections"] == 2048
    assert heap["typed_config"]["max_heap_size_bytes"] == 224 * 2**20
    assert router.memory_mib(config, router.ConversationRouting()) == 320
    actions = {a["name"].rsplit(".", 1)[1]: a["triggers"][0]["threshold"]["value"] for a in rendered["overload_manager"]["actions"]}
    assert actions["shrink_heap"] < actions["stop_accepting_requests"] <= actions["stop_accepting_connections"] < actions["reject_incoming_connections"] < 1
    api = rendered["static_resources"]["listeners"][0]
    hcm = api["filter_chains"][0]["filters"][0]["typed_config"]
    assert api["per_connection_buffer_limit_bytes"] == 32 * 1024 and hcm["codec_type"] == "HTTP1" and hcm["max_request_headers_kb"] == 32
    assert all(c["per_connection_buffer_limit_bytes"] == 32 * 1024 for c in rendered["static_resources"]["clusters"])
    # The per-address budget of the tier, split over its two pods.
    bucket = next(f for f in hcm["http_filters"] if f["name"] == "envoy.filters.http.local_ratelimit")["typed_config"]["descriptors"][0]["token_bucket"]
    assert (bucket["tokens_per_fill"], bucket["max_tokens"]) == (5, 10)


def test_the_key_digest_lives_in_the_api_key_secret_never_in_the_config(prod_plan):
    from tests.test_routing_stack import NAME, by

    pod = by(prod_plan, "Deployment", router.router_name(NAME))["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "api-key-digest")
    assert volume["secret"]["secretName"] == f"{NAME}-api-key" and volume["secret"]["items"] == [{"key": "key-sha256", "path": "key-sha256"}]
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "api-key-digest")
    assert mount == {"name": "api-key-digest", "mountPath": router_edge.KEY_DIR, "readOnly": True}
    assert pod["containers"][0]["resources"]["limits"]["memory"] == "320Mi" == pod["containers"][0]["resources"]["requests"]["memory"]
    text = by(prod_plan, "ConfigMap", router.router_name(NAME))["data"][router_config.CONFIG_FILE]
    assert router.KEY_DIGEST_PATH in text and hashlib.sha256(b"").hexdigest() not in text


# --- the key check, with the real Envoy -----------------------------------------------------------------


def test_the_key_checks_sha256_is_sha256_at_every_length(tmp_path):
    """The Lua SHA-256 the router ships, run by the real Envoy, against hashlib: every length across the padding boundaries."""
    source = router_edge.key_check_source("/nonexistent") + (
        '\nfunction envoy_on_request(handle) handle:respond({[":status"] = "200"}, sha256_hex(handle:headers():get("x-m") or "")) end\n'
    )
    bootstrap = {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 19902}}},
        "static_resources": {"listeners": [{"name": "t", "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
            "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": "t", "route_config": {"virtual_hosts": [{"name": "t", "domains": ["*"], "routes": [
                    {"match": {"prefix": "/"}, "direct_response": {"status": 404}}]}]},
                "http_filters": [router_edge._lua("sha", source), {"name": "envoy.filters.http.router", "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
            }}]}]}]},
    }
    with harness.sandbox():
        path = tmp_path / "sha.yaml"
        path.write_text(json.dumps(bootstrap))
        import subprocess

        proc = subprocess.Popen([harness.envoy_binary(), "-c", str(path), "--disable-hot-restart", "--concurrency", "1", "--log-level", "error",
                                 "--base-id", "7"], start_new_session=True)
        try:
            port = None
            for _ in range(200):
                with contextlib.suppress(OSError):
                    listeners = json.loads(urllib_get("http://127.0.0.1:19902/listeners?format=json"))
                    port = listeners["listener_statuses"][0]["local_address"]["socket_address"]["port_value"]
                    break
                time.sleep(0.05)
            assert port, "envoy did not start"
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            for length in [*range(0, 130), 1000, 8000]:
                message = "".join(chr(33 + (i * 7 + length) % 94) for i in range(length))
                conn.request("GET", "/", headers={"x-m": message})
                resp = conn.getresponse()
                assert resp.read().decode() == hashlib.sha256(message.encode()).hexdigest(), length
        finally:
            harness._kill_group(proc)


def urllib_get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=2) as resp:
        return resp.read().decode()


def engine_requests(tier: ra.Tier) -> list:
    """What reached the engine, its health checks (the router's, through the proxy's probe port) aside."""
    return [r for r in tier.fake.requests if r.path != "/health"]


@pytest.fixture
def tier(tmp_path):
    with ra.tier(tmp_path) as running:
        yield running


def test_without_the_key_the_router_answers_401_after_the_headers_and_never_reads_the_body(tier):
    declared = f"POST /v1/chat/completions HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: {1024 * 1024}\r\n".encode()
    for auth in (b"", b"Authorization: Bearer wrong\r\n", f"Authorization: Basic {ra.API_KEY}\r\n".encode(),
                 f"Authorization: Bearer  {ra.API_KEY}\r\n".encode(), f"Authorization: Bearer {ra.API_KEY}x\r\n".encode(),
                 b"x-kimi-k3-keyed: 1\r\n"):
        answer, closed = _raw(declared + auth + b"\r\n" + b"x" * 1024)  # a body that has barely started
        _router_error(answer, 401)
        assert closed and b"connection: close" in answer.lower()  # the rest of the body is never awaited
    assert engine_requests(tier) == []  # nothing reached the engine
    assert tier.stat("cluster.spread.upstream_rq_total") + tier.stat("cluster.affinity.upstream_rq_total") == 0
    # With the key (the scheme in any case, as vLLM accepts it) the request goes through both walls.
    for scheme in ("Bearer", "bearer", "BEARER"):
        conn = http.client.HTTPConnection(ra.HOST, ra.PORT, timeout=5)
        conn.request("POST", "/v1/chat/completions", body=ra.chat(stream=False), headers={**ra.keyed_headers(), "Authorization": f"{scheme} {ra.API_KEY}"})
        assert conn.getresponse().status == 200
        conn.close()
    assert len(engine_requests(tier)) == 3


def test_one_address_gets_the_tiers_unkeyed_rate_once_and_keyed_requests_are_not_limited(tier):
    share = 10  # the proxy's stated burst of 20 for the whole tier, halved for each of the two router pods

    def unkeyed(address: str, count: int) -> list[int]:
        out = []
        for _ in range(count):
            conn = http.client.HTTPConnection(ra.HOST, ra.PORT, timeout=5, source_address=(address, 0))
            conn.request("GET", "/v1/models", headers={"X-Forwarded-For": "198.51.100.1"})
            out.append(conn.getresponse().status)
            conn.close()
        return out

    flood = unkeyed("127.0.0.5", share + 10)
    assert flood[:share] == [401] * share and flood[share:].count(429) >= 9, flood
    assert unkeyed("127.0.0.6", 3) == [401] * 3  # another address keeps its own budget; a spoofed X-Forwarded-For changes nothing
    conn = http.client.HTTPConnection(ra.HOST, ra.PORT, timeout=5, source_address=("127.0.0.5", 0))
    for _ in range(30):
        conn.request("GET", "/v1/models", headers=ra.keyed_headers())
        assert conn.getresponse().read() and True
    conn.close()
    reply, _closed = _raw(b"GET /v1/models HTTP/1.1\r\nHost: api\r\n\r\n", address="127.0.0.5")
    _router_error(reply, 429)


def test_cleartext_http2_is_refused_at_the_first_bytes(tier):
    answer, closed = _raw(ra.h2c_payload(200))
    assert ra.status_of(answer) == 400 and closed, answer[:200]
    assert tier.stat("http.api.downstream_cx_protocol_error") == 1 and engine_requests(tier) == []


# --- the attacks: memory against the arithmetic, a keyed stream every half second --------------------------


ATTACKS = {
    # name: (the attack, connections the router may hold at once, a new connection per probe)
    "stalled unauthenticated uploads from one address": (lambda: ra.stalled_uploads(2500), True),
    "unfinished headers from many addresses": (lambda: ra.unfinished_headers(3000), False),
    "cleartext HTTP/2, many streams": (lambda: ra.h2c_streams(1500, 500), True),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_under_attack_the_router_stays_within_its_arithmetic_and_keyed_streams_flow(tier, name):
    attack, fresh = ATTACKS[name]
    config = tier.envoy.config
    baseline = tier.cgroup.peak_bytes()
    with ra.Probe(fresh=fresh) as probe, ra.held(attack()) as sockets:
        time.sleep(2.0)  # four probes while every attacking connection is open
        held_now = tier.stat("http.api.downstream_cx_active")
        assert tier.alive(), tier.envoy.log.read_text()[-2000:]
    peak = tier.cgroup.peak_bytes()
    print(f"\n{name}: {len(sockets)} connections, {held_now} held by the router; cgroup v{tier.cgroup.version} peak {peak / 2**20:.1f} MiB "
          f"(baseline {baseline / 2**20:.1f}, limit {tier.limit_bytes / 2**20:.0f}); probes {[round(r, 3) if r else r for r in probe.results]}")
    assert tier.alive() and tier.cgroup.oom_kills() == 0
    assert held_now <= config.max_connections
    # The arithmetic: what the attack added stays within the slots it could hold at their worst.
    assert peak - baseline <= config.max_connections * router_edge.SLOT_BYTES, (peak, baseline)
    assert peak <= router_edge.worst_case_heap_bytes(config.max_connections) + router_edge.NON_HEAP_BYTES <= tier.limit_bytes
    assert probe.results and all(r is not None and r < 2.0 for r in probe.results), (probe.results, probe.errors)
    assert all(r.authorized and r.path == "/v1/chat/completions" for r in engine_requests(tier))  # only the probes reached the engine


# --- failure answers ------------------------------------------------------------------------------------


def test_with_no_ready_engine_the_router_answers_its_own_503_within_about_2_s(tier):
    conn = http.client.HTTPConnection(ra.HOST, ra.PORT, timeout=5)
    tier.fake.behaviour.health_status = 503  # the engine is not ready: vLLM's /health, through the proxy's probe port
    since = time.monotonic()
    while True:
        conn.request("POST", "/v1/chat/completions", body=ra.chat(stream=False), headers=ra.keyed_headers())
        resp = conn.getresponse()
        body = json.loads(resp.read())
        if resp.status == 503 and body["error"]["message"] == router_config._ROUTER_MESSAGES[503]:
            break
        assert time.monotonic() - since < 2.0, (resp.status, body)
        time.sleep(0.05)
    took = time.monotonic() - since
    assert body["error"] == {"message": router_config._ROUTER_MESSAGES[503], "type": "ServiceUnavailableError", "param": None, "code": 503}
    assert resp.getheader("content-type") == "application/json"
    print(f"\nthe router's 503 {took:.2f} s after the engine stopped being ready")
    tier.fake.behaviour.health_status = 200
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        conn.request("GET", "/v1/models", headers=ra.keyed_headers())
        resp = conn.getresponse()
        resp.read()
        if resp.status == 200:
            break
        time.sleep(0.05)
    assert resp.status == 200  # back as soon as one check passes
    conn.close()


def test_a_dead_replica_leaves_within_about_2_s_and_no_request_fails(tmp_path):
    with harness.sandbox(), harness.fake_replicas(2) as replicas, harness.router(tmp_path, stack_config(), replicas) as envoy:
        statuses: list = []
        stop = threading.Event()

        def traffic() -> None:
            while not stop.is_set():
                conn = http.client.HTTPConnection("127.0.0.1", harness.TEST_LISTEN_PORT, timeout=5)
                try:
                    conn.request("POST", "/v1/chat/completions", body=json.dumps({"messages": [], "max_tokens": 1, "stream": True}),
                                 headers={"Authorization": f"Bearer {harness.API_KEY}", "Content-Type": "application/json"})
                    resp = conn.getresponse()
                    resp.read()
                    statuses.append(resp.status)
                except (OSError, http.client.HTTPException) as err:  # a stream cut by the kill: recorded, the test says so
                    statuses.append(repr(err))
                conn.close()
                time.sleep(0.02)

        reader = threading.Thread(target=traffic)
        reader.start()
        time.sleep(0.3)
        killed_at = time.monotonic()
        replicas[1].kill()  # the replica dies: its ports refuse connections, its open connections are cut
        try:
            while envoy.host_flags(router_config.SPREAD_CLUSTER).get(replicas[1].address) == "healthy":
                assert time.monotonic() - killed_at < 3.0, envoy.host_flags(router_config.SPREAD_CLUSTER)
                time.sleep(0.02)
            took = time.monotonic() - killed_at
        finally:
            stop.set()
            reader.join(timeout=10)
    print(f"\nthe dead replica left the rotation {took:.2f} s after it died; {len(statuses)} requests meanwhile")
    assert took <= 2.5, (took, statuses)
    # A refused connection is retried on the other replica: every request answered 200, but the one the kill may have caught
    # in the middle of its answer (a stream already begun cannot move: cut, never a 5xx).
    failures = [s for s in statuses if s != 200]
    assert statuses.count(200) > 10 and len(failures) <= 1 and all(isinstance(f, str) for f in failures), statuses


def test_a_body_above_the_buffer_limit_is_not_retried_and_gets_a_json_503(tmp_path):
    """The rule: Envoy retries only a body it holds whole (router_edge.BUFFER_LIMIT); a larger one that its replica drops
    before answering gets the router's JSON 503, at once, never a cut stream; a small one is retried (and here fails again)."""
    from tests.fake_replicas import _server

    attempts: list[int] = []

    def drop_after_reading() -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.11", 8000))
        listener.listen(64)
        listener.settimeout(0.2)
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(2)
            data = b""
            with contextlib.suppress(OSError):
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                attempts.append(len(data))
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # close with a reset
            conn.close()
        listener.close()

    done = threading.Event()
    with harness.sandbox():
        from http.server import BaseHTTPRequestHandler

        class Health(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        probe = _server("127.0.0.11", 8081, Health)
        dropper = threading.Thread(target=drop_after_reading)
        dropper.start()
        replica = harness.ReplicaAddress("r0", "127.0.0.11", 8000, 8081)
        try:
            with harness.router(tmp_path, stack_config(), [replica]):
                results = {}
                # The large body three times: the replica fails while it still arrives (Envoy's 507) in most runs, after in others.
                for run, size in enumerate((1024, 4 * router_edge.BUFFER_LIMIT, 4 * router_edge.BUFFER_LIMIT, 4 * router_edge.BUFFER_LIMIT)):
                    attempts.clear()
                    conn = http.client.HTTPConnection("127.0.0.1", harness.TEST_LISTEN_PORT, timeout=10)
                    body = json.dumps({"messages": [{"role": "user", "content": "x" * size}], "stream": True}).encode()
                    conn.request("POST", "/v1/chat/completions", body=body, headers={"Authorization": f"Bearer {harness.API_KEY}", "Content-Type": "application/json"})
                    resp = conn.getresponse()
                    results[run] = (resp.status, resp.getheader("content-type"), json.loads(resp.read()), len(attempts))
                    conn.close()
        finally:
            done.set()
            dropper.join(timeout=5)
            probe.shutdown()
            probe.server_close()
    small, large = results[0], [results[1], results[2], results[3]]
    for status, content_type, body, _tries in (small, *large):
        assert status == 503 and content_type == "application/json" and body["error"]["type"] == "ServiceUnavailableError", body
    assert small[3] == 3 and [r[3] for r in large] == [1, 1, 1], results  # retried twice while held whole; a large body once only
    # Failed while the large body still arrived: Envoy's 507, answered as the router's 503; after it had arrived: the plain 503.
    assert {r[2]["error"]["message"] for r in large} <= {router_config.RETRY_ABANDONED_MESSAGE, router_config._ROUTER_MESSAGES[503]}, large
