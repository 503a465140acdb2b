"""Reproduce docs/routing.md's front-door figures: the router under issue 31's attacks, before and after, and the key check's cost.

    sudo .venv/bin/python tools/bench_router_edge.py                 # both configs, the three attacks, the latency
    sudo .venv/bin/python tools/bench_router_edge.py --only after --skip-latency

Runs what tests/test_router_edge.py runs (tests/router_attacks.py: the real Envoy in a memory cgroup at the router pod's limit,
in front of the real nginx with the prod proxy config, in front of the fake vLLM; root for the namespaces and the cgroup), at
the issue's counts:

* ``uploads``: 8,000 POSTs without the key from one address, each sending 60 KiB of a declared 1 MiB body, then stalling;
* ``headers``: unfinished headers of about 28 KiB from as many addresses as this process's open-file limit allows (less 1,000);
* ``h2c``: 1,000 connections of cleartext HTTP/2 with 1,000 streams each.

Each attack is held for ``--hold`` seconds while two keyed streamed chats go through the router every half second: one on a
kept-alive connection opened before the attack (as the OpenAI SDKs pool them), one on a new connection each time.

``before``: main's router config (``git show BASE:components/serving/router_config.py``, rendered with the stack's values) at
main's router memory (512 MiB); ``after``: this tree's, at its rendered memory.

Latency: 200 sequential streamed requests (after 20 warm-ups), p50 of the time to the first event: straight to the proxy
(nginx, the second wall alone), through main's router (no key check at Envoy) and through this router (the key checked first).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kimi_k3.serving import api_proxy  # noqa: E402
from tests import router_attacks as ra  # noqa: E402
from tests import routing_harness as harness  # noqa: E402

BASE = "c5dd254"
"""main's commit before the front door (issue 31)."""
BEFORE_MEMORY_MIB = 512
"""main's router container memory (ConversationRouting.memory_mib)."""


def before_yaml(base: str) -> str:
    """main's rendered router config, with the test addresses (what routing_harness.substituted does to this tree's)."""
    source = subprocess.run(["git", "show", f"{base}:components/serving/router_config.py"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("router_config_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    exec(compile(source, f"{base}:router_config.py", "exec"), module.__dict__)  # our own file at a commit
    config = module.RouterConfig(
        replicas_host=harness.HOST_NAME, replicas_port=8000, replicas_probe_port=8081, listen_port=harness.TEST_LISTEN_PORT,
        health_port=harness.TEST_HEALTH_PORT, session_header="x-session-id", balance_factor=120, routes=api_proxy.DEFAULT_ROUTES,
        max_generation_s=1800, drain_s=1800,
    )
    return module.render_envoy_config(config)


def attacks(descriptors: int) -> dict:
    """The three attacks at the issue's counts."""
    return {
        "uploads": lambda: ra.stalled_uploads(8000),
        "headers": lambda: ra.unfinished_headers(max(1000, descriptors - 1000)),
        "h2c": lambda: ra.h2c_streams(1000, 1000),
    }


def _fmt(results: list) -> str:
    ok = [r for r in results if r is not None and r < 2.0]
    worst = max((r for r in results if r is not None), default=None)
    return f"{len(ok)}/{len(results)} within 2 s" + (f" (slowest {worst * 1000:.0f} ms)" if worst is not None else "")


def run_attack(name: str, attack, which: str, workdir: Path, hold_s: float) -> dict:
    """One attack against one config; the figures of the row."""
    yaml = before_yaml(BASE) if which == "before" else None
    limit = BEFORE_MEMORY_MIB * 2**20 if which == "before" else None
    with ra.tier(workdir / f"{which}-{name}", limit_bytes=limit, envoy_yaml=yaml) as tier:
        baseline = tier.cgroup.peak_bytes()
        pooled, fresh = ra.Probe(), ra.Probe(fresh=True)
        started = time.perf_counter()
        with pooled, fresh, ra.held(attack()) as sockets:
            opened = time.perf_counter() - started
            held = 0
            deadline = time.monotonic() + hold_s
            while time.monotonic() < deadline:
                if tier.alive():
                    with contextlib.suppress(OSError):
                        held = max(held, tier.stat("http.api.downstream_cx_active"))
                time.sleep(0.25)
        return {
            "config": which, "attack": name, "connections": len(sockets), "opened_s": round(opened, 1), "held": held,
            "peak_mib": round(tier.cgroup.peak_bytes() / 2**20, 1), "baseline_mib": round(baseline / 2**20, 1),
            "limit_mib": tier.limit_bytes // 2**20, "alive": tier.alive(), "oom_kills": tier.cgroup.oom_kills(),
            "pooled": _fmt(pooled.results), "fresh": _fmt(fresh.results),
        }


def _p50_first_event(port: int, count: int = 200, warmup: int = 20) -> float:
    times = []
    conn = http.client.HTTPConnection(ra.HOST, port, timeout=10)
    for i in range(count + warmup):
        start = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body=ra.chat(), headers=ra.keyed_headers())
        resp = conn.getresponse()
        first = resp.readline()
        took = time.perf_counter() - start
        resp.read()
        assert resp.status == 200 and first.startswith(b"data:"), (resp.status, first)
        if i >= warmup:
            times.append(took)
    conn.close()
    return statistics.median(times) * 1000


def latency(workdir: Path) -> dict:
    """p50 time to first event: direct to the proxy, through main's router, through this router."""
    out = {}
    with ra.tier(workdir / "lat-before", envoy_yaml=before_yaml(BASE), limit_bytes=BEFORE_MEMORY_MIB * 2**20, token_delay=0.0):
        out["direct to the proxy"] = _p50_first_event(8000)
        out["through main's router"] = _p50_first_event(ra.PORT)
    with ra.tier(workdir / "lat-after", token_delay=0.0):
        out["direct to the proxy (again)"] = _p50_first_event(8000)
        out["through this router (key checked first)"] = _p50_first_event(ra.PORT)
    return {k: round(v, 3) for k, v in out.items()}


def main() -> int:
    """Print one row per (config, attack), then the latency."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("before", "after"), help="one config only")
    parser.add_argument("--attack", choices=("uploads", "headers", "h2c"), action="append", help="these attacks only (repeatable)")
    parser.add_argument("--hold", type=float, default=5.0, help="seconds each attack is held (default 5)")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    harness.require_root()
    descriptors = ra.raise_descriptor_limit()
    start = time.perf_counter()
    print("| config | attack | connections opened (s) | held by Envoy | peak MiB (baseline) / limit | Envoy alive, OOM kills | keyed probe, pooled | keyed probe, new connection |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for which in [args.only] if args.only else ["before", "after"]:
                for name, attack in attacks(descriptors).items():
                    if args.attack and name not in args.attack:
                        continue
                    row = run_attack(name, attack, which, Path(tmp), args.hold)
                    print(f"| {row['config']} | {row['attack']} | {row['connections']} ({row['opened_s']}) | {row['held']} | {row['peak_mib']} ({row['baseline_mib']}) / "
                          f"{row['limit_mib']} | {row['alive']}, {row['oom_kills']} | {row['pooled']} | {row['fresh']} |", flush=True)
            if not args.skip_latency:
                for name, p50 in latency(Path(tmp)).items():
                    print(f"p50 time to first event, {name}: {p50} ms")
        finally:
            harness.kill_leftovers()
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
