"""What the API proxy costs: latency through the real nginx vs straight to the (fake) engine.

    .venv/bin/python tools/bench_api_proxy.py [--requests 500] [--streams 20]

Runs the stack's rendered nginx.conf in the same private network/mount namespace the
tests use (needs root), in front of the fake vLLM on 127.0.0.1:8001, and prints the
median and p99 of: a small request (``GET /v1/models``, new connection each time, as
the proxy does upstream) and the first chunk of a streamed chat (engine delay 0).
Only loopback addresses inside the private namespace are used.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kimi_k3.serving.api_proxy import ApiProxyConfig, render_nginx_conf
from tests.fake_openai_server import FakeOpenAIServer
from tests.proxy_sandbox import Nginx, PrivateNetwork, require_sandbox

KEY = "sk-bench"
HEADERS = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
STREAM_BODY = b'{"model":"Kimi-K3","messages":[{"role":"user","content":"ping"}],"stream":true}'


def timed_models(port: int) -> float:
    """Seconds for one authorised ``GET /v1/models`` through the proxy on ``port``."""
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/v1/models", headers=HEADERS)
    resp = conn.getresponse()
    resp.read()
    conn.close()
    assert resp.status == 200
    return time.perf_counter() - t0


def timed_first_chunk(port: int) -> float:
    """Seconds from sending a streamed chat completion to its first ``data:`` line."""
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/v1/chat/completions", body=STREAM_BODY, headers=HEADERS)
    resp = conn.getresponse()
    while not resp.readline().startswith(b"data:"):
        pass
    first = time.perf_counter() - t0
    resp.read()
    conn.close()
    return first


def summary(samples: list[float]) -> str:
    """Median and p99 of ``samples`` (seconds), in milliseconds."""
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"median {statistics.median(ordered) * 1000:6.2f} ms  p99 {p99 * 1000:6.2f} ms"


def main() -> int:
    """Time requests to the fake engine directly and through the real nginx proxy and print both; 2 when no sandbox can run nginx."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--streams", type=int, default=20)
    args = parser.parse_args()
    try:
        require_sandbox()
    except BaseException as err:  # pytest.skip outside pytest
        print(f"cannot run: {err}", file=sys.stderr)
        return 2
    config = ApiProxyConfig(max_model_len=262_144)
    with PrivateNetwork(), FakeOpenAIServer(api_key=KEY, port=config.engine_port), Nginx(render_nginx_conf(config), Path(tempfile.mkdtemp())) as nginx:
        nginx.start(wait_ports=(config.api_port,))
        for name, probe, count in (("GET /v1/models", timed_models, args.requests), ("first streamed chunk", timed_first_chunk, args.streams)):
            direct = [probe(config.engine_port) for _ in range(count)]
            proxied = [probe(config.api_port) for _ in range(count)]
            print(f"{name:22s} direct  {summary(direct)}")
            print(f"{name:22s} proxied {summary(proxied)}   (+{(statistics.median(proxied) - statistics.median(direct)) * 1000:.2f} ms median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
