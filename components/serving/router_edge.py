"""What a client of the router's API port can cost it: the key check at the first layer, per-address limits, bounded reads, memory.

The routing tier (:mod:`kimi_k3.serving.router`) stands in front of the pod proxies' key check, so
everything the proxy bounds for unauthenticated clients (:mod:`kimi_k3.serving.proxy_edge`) must
be bounded here first, or one client can take the replicas' only way in down (issue 31: 8,000
stalled unauthenticated uploads OOM-killed a 512 MiB router that buffered 64 KiB of each body). So,
following Envoy's "Configuring Envoy as an edge proxy" (envoyproxy.io/docs/envoy/v1.39.1/configuration/
best_practices/edge) and going further where the numbers say so:

* **the key is checked at the first layer, after the headers, before any body byte is read**: a
  Lua filter (:data:`KEY_CHECK_LUA`, Envoy's LuaJIT; Envoy has no hash function for a filter to
  call, so SHA-256 is written out in Lua and tested against :mod:`hashlib` with the real binary)
  compares the SHA-256 of the bearer token with the digest in a file mounted from the API-key
  Secret (:data:`KEY_DIGEST_FILE`; the key itself is in no ConfigMap, the digest neither), split as
  vLLM splits it (scheme ``Bearer`` in any case, one space, the token). A request without the key
  gets a JSON 401 from the router at once and its connection is closed: its body is never read,
  never buffered, never forwarded. The pod proxies check the key again (the second wall);
* **per-address limits for the whole tier** (Envoy's local rate limit, one token bucket per client
  address: ``max_dynamic_descriptors``): requests without the key get
  :attr:`~kimi_k3.serving.proxy_edge.EdgeLimits.unauthenticated_rate_per_s` a second (burst
  :attr:`~kimi_k3.serving.proxy_edge.EdgeLimits.unauthenticated_burst`) across the tier: each of
  the ``router_replicas`` pods holds its own bucket, so each gets that share
  (:func:`per_pod_share`); the NLB spreads a client's connections over the pods, so a client gets
  at most the stated rate from the whole tier, and a client whose connections all land on one pod
  gets that pod's share. Beyond it: JSON 429. The proxies' per-replica limits stay as the backstop.
  Envoy 1.39 has no per-address *connection* count (the connection limit filter and the overload
  manager count all connections together), so what one address can hold is bounded by the rate,
  the header timeout and the global connection bound below;
* **bounded reads**: the whole header within :data:`REQUEST_HEADERS_TIMEOUT_S` and at most
  :data:`MAX_REQUEST_HEADERS_KIB` (the proxy's own bound), an idle connection closed after
  :data:`IDLE_TIMEOUT_S`, HTTP/1.1 only (a cleartext HTTP/2 preface is a protocol error: nothing
  multiplexes a hundred streams onto one slot; the NLB passes TCP and the OpenAI clients speak
  HTTP/1.1), buffers of :data:`BUFFER_LIMIT` per connection both ways (the edge guide's 32 KiB);
* **sized memory**: at most :func:`max_connections` downstream connections
  (``envoy.resource_monitors.global_downstream_max_connections``; more are closed at accept), each
  slot costing at most :data:`SLOT_BYTES` with its upstream side, so the heap's worst case is
  :func:`worst_case_heap_bytes`; the overload manager's fixed-heap monitor is set to that
  (:func:`overload_manager`): at 90 % the heap is shrunk, at 95 % keep-alive is off and no new
  request (JSON 503) or connection is accepted, at 98 % new connections are reset. The container's
  limit is the heap's worst case plus what is not heap (:func:`memory_limit_mib`).
* **retries and large bodies**: a request is retried on another replica when it failed before any
  response byte (connect failure, reset, refused stream); Envoy can retry only a body it still holds
  whole, and it holds at most :data:`BUFFER_LIMIT` of it. The rule: a body above
  :data:`BUFFER_LIMIT` is forwarded as it streams and is not retried; if its replica fails before
  answering, the client gets the router's JSON 503 (retry it), never a cut stream.
"""

from __future__ import annotations

import math

KIB = 1024
MIB = 1024 * 1024

BUFFER_LIMIT = 32 * KIB
"""``per_connection_buffer_limit_bytes`` of the listener and the clusters (Envoy's edge guide: 32 KiB); also the most of a
request body Envoy keeps for a retry."""

MAX_REQUEST_HEADERS_KIB = 32
"""``max_request_headers_kb``: the pod proxy accepts at most 1 KiB + 4 x 8 KiB of header (:mod:`kimi_k3.serving.proxy_edge`);
a longer header is a JSON 431 here."""

REQUEST_HEADERS_TIMEOUT_S = 5
"""``request_headers_timeout``: the whole header within this (a client sends it in one packet); a slow header loses its slot."""

IDLE_TIMEOUT_S = 60
"""``common_http_protocol_options.idle_timeout`` of a downstream connection with no request (the OpenAI SDKs reuse within seconds)."""

DELAYED_CLOSE_S = 0.1
"""``delayed_close_timeout``: how long a connection the router closes itself waits for the peer to close first (the answer is
flushed before; Envoy's default is 1 s). Measured: 2,000 unkeyed uploads answered at once held 47 KiB each for that second."""

DEFAULT_MAX_CONNECTIONS = 2048
"""Downstream connections one router pod accepts at once (each replica's proxy has 2,048 slots; a proxied request takes two)."""

SLOT_BYTES = 96 * KIB
"""The most one downstream connection costs Envoy's heap with its share of the upstream side, with room to spare.

Measured with Envoy 1.39.1 under a memory cgroup (``tests/test_router_edge.py``, ``tools/bench_router_edge.py``): an
unfinished header that filled :data:`MAX_REQUEST_HEADERS_KIB` about 45 KiB; an idle or slow-header connection about
20 KiB; a request without the key nothing once answered (its connection is closed). A keyed, proxied request holds its
downstream connection (buffer limit 32 KiB, headers, codec), its upstream connection (buffer limit 32 KiB) and at most
:data:`BUFFER_LIMIT` of body for a retry: under 96 KiB in all beyond the buffers' common case."""

BASE_HEAP_BYTES = 32 * MIB
"""Envoy's heap with the config and no connection (about 12 MiB measured: clusters, stats, Lua states), with room to spare."""

NON_HEAP_BYTES = 64 * MIB
"""What the container is charged beyond the heap: the binary's resident pages (about 25 MiB measured), thread stacks,
tcmalloc's unreturned pages, and the kernel's socket structures (about 2 KiB a connection)."""

HEAP_THRESHOLDS = {"shrink_heap": 0.90, "disable_http_keepalive": 0.95, "stop_accepting_requests": 0.95, "stop_accepting_connections": 0.95,
                   "reject_incoming_connections": 0.98}
"""The overload manager's actions (``envoy.overload_actions.<name>``) and the fixed-heap pressure at which each starts."""

MIN_MEMORY_MIB = 256
"""The least memory limit of a router pod."""

KEY_DIR = "/run/kimi-k3-router-key"
"""Where the API-key Secret's digest file is mounted in the router pod (read-only; the volume holds only that file)."""

KEY_DIGEST_FILE = "key-sha256"
"""The digest file's name, and its key in the API-key Secret: the SHA-256 of the API key, lowercase hex, one line."""

KEYED_HEADER = "x-kimi-k3-keyed"
"""Set by the key check on every request (``1`` with the right key, ``0`` without; a client's own value is replaced) for the rate
limit's descriptor; removed before the request leaves the router."""


def worst_case_heap_bytes(max_connections: int) -> int:
    """Envoy's heap with every connection slot held by the costliest client: ``max_connections x SLOT_BYTES + BASE_HEAP_BYTES``."""
    return max_connections * SLOT_BYTES + BASE_HEAP_BYTES


def memory_limit_mib(max_connections: int) -> int:
    """The router container's memory (request = limit, MiB): the heap's worst case plus :data:`NON_HEAP_BYTES`, in 64 MiB steps.

    2,048 slots: 2,048 x 96 KiB + 32 MiB = 224 MiB of heap at most, + 64 MiB = 288 MiB, so 320 MiB."""
    return max(MIN_MEMORY_MIB, 64 * math.ceil((worst_case_heap_bytes(max_connections) + NON_HEAP_BYTES) / (64 * MIB)))


def per_pod_share(tier_value: int, router_replicas: int) -> int:
    """A per-address budget of the whole tier split over its router pods (each holds its own bucket), at least 1."""
    return max(1, math.ceil(tier_value / router_replicas))


def key_digest(api_key: str) -> str:
    """The content of the Secret's :data:`KEY_DIGEST_FILE`: the SHA-256 of the key, lowercase hex, and a newline."""
    import hashlib

    return hashlib.sha256(api_key.encode("utf-8")).hexdigest() + "\n"


def overload_manager(max_connections: int) -> dict:
    """The bootstrap's ``overload_manager``: the global connection bound and the fixed-heap monitor at the heap's worst case."""
    heap = "envoy.resource_monitors.fixed_heap"
    return {
        "refresh_interval": "0.25s",
        "resource_monitors": [
            {"name": heap, "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig",
                "max_heap_size_bytes": worst_case_heap_bytes(max_connections),
            }},
            {"name": "envoy.resource_monitors.global_downstream_max_connections", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig",
                "max_active_downstream_connections": max_connections,
            }},
        ],
        "actions": [
            {"name": f"envoy.overload_actions.{action}", "triggers": [{"name": heap, "threshold": {"value": value}}]}
            for action, value in HEAP_THRESHOLDS.items()
        ],
    }


# SHA-256 (FIPS 180-4) in LuaJIT's 32-bit bit operations; bit.tohex gives 8 lowercase hex digits of a word.
KEY_CHECK_LUA = r"""-- kimi-k3 router: the API key check (components/serving/router_edge.py). The key's SHA-256 is read once from the
-- Secret's file; a request's bearer token is hashed and compared. Unkeyed requests are tagged here and answered 401 by
-- the second Lua filter, after the per-address rate limit has counted them.
local bit = require("bit")
local band, bor, bxor, bnot, rshift, lshift, ror, tobit, tohex = bit.band, bit.bor, bit.bxor, bit.bnot, bit.rshift, bit.lshift, bit.ror, bit.tobit, bit.tohex
local K = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}
local function sha256_hex(msg)
  local len = #msg
  local bits = len * 8
  -- Headers are at most 32 KiB: the 64-bit length's upper word is 0.
  msg = msg .. "\128" .. string.rep("\0", (55 - len) % 64) .. "\0\0\0\0" ..
    string.char(band(rshift(bits, 24), 255), band(rshift(bits, 16), 255), band(rshift(bits, 8), 255), band(bits, 255))
  local h0, h1, h2, h3, h4, h5, h6, h7 = 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19
  local w = {}
  for chunk = 1, #msg, 64 do
    for i = 0, 15 do
      local a, b, c, d = msg:byte(chunk + 4 * i, chunk + 4 * i + 3)
      w[i] = bor(lshift(a, 24), lshift(b, 16), lshift(c, 8), d)
    end
    for i = 16, 63 do
      local s0 = bxor(ror(w[i - 15], 7), ror(w[i - 15], 18), rshift(w[i - 15], 3))
      local s1 = bxor(ror(w[i - 2], 17), ror(w[i - 2], 19), rshift(w[i - 2], 10))
      w[i] = tobit(w[i - 16] + s0 + w[i - 7] + s1)
    end
    local a, b, c, d, e, f, g, h = h0, h1, h2, h3, h4, h5, h6, h7
    for i = 0, 63 do
      local t1 = tobit(h + bxor(ror(e, 6), ror(e, 11), ror(e, 25)) + bxor(band(e, f), band(bnot(e), g)) + K[i + 1] + w[i])
      local t2 = tobit(bxor(ror(a, 2), ror(a, 13), ror(a, 22)) + bxor(band(a, b), band(a, c), band(b, c)))
      h, g, f, e, d, c, b, a = g, f, e, tobit(d + t1), c, b, a, tobit(t1 + t2)
    end
    h0, h1, h2, h3 = tobit(h0 + a), tobit(h1 + b), tobit(h2 + c), tobit(h3 + d)
    h4, h5, h6, h7 = tobit(h4 + e), tobit(h5 + f), tobit(h6 + g), tobit(h7 + h)
  end
  return tohex(h0) .. tohex(h1) .. tohex(h2) .. tohex(h3) .. tohex(h4) .. tohex(h5) .. tohex(h6) .. tohex(h7)
end
local expected = nil
local file = io.open("@DIGEST_PATH@", "r")
if file then
  local line = file:read("*l")
  file:close()
  if line and line:match("^%x+$") and #line == 64 then expected = line:lower() end
end
function envoy_on_request(handle)
  local headers = handle:headers()
  -- First the tag a client may have sent is replaced: should anything below fail, the request stays unkeyed.
  headers:replace("@KEYED_HEADER@", "0")
  local auth = headers:get("authorization")
  -- vLLM's rule (AuthenticationMiddleware.verify_token): scheme Bearer in any case, one space, the token exactly.
  if expected ~= nil and auth ~= nil and #auth > 7 and auth:sub(1, 7):lower() == "bearer " then
    local ok, digest = pcall(sha256_hex, auth:sub(8))
    if ok and digest == expected then headers:replace("@KEYED_HEADER@", "1") end
  end
end
"""
"""The first Lua filter: tags every request with :data:`KEYED_HEADER` (``@DIGEST_PATH@`` and ``@KEYED_HEADER@`` are filled in by
:func:`key_check_source`). Without a readable digest file every request is unkeyed (the check fails closed)."""

UNKEYED_REPLY_LUA = r"""-- kimi-k3 router: a request without the key is answered 401 (JSON, by the local reply config) and its connection closed.
function envoy_on_request(handle)
  local headers = handle:headers()
  if headers:get("@KEYED_HEADER@") ~= "1" then
    handle:respond({[":status"] = "401", ["connection"] = "close"}, "")
    return
  end
  headers:remove("@KEYED_HEADER@")
end
"""
"""The second Lua filter, after the rate limit: answers the unkeyed; the keyed go on without the tag."""


def key_check_source(digest_path: str) -> str:
    """:data:`KEY_CHECK_LUA` reading the digest from ``digest_path``."""
    return KEY_CHECK_LUA.replace("@DIGEST_PATH@", digest_path).replace("@KEYED_HEADER@", KEYED_HEADER)


def unkeyed_reply_source() -> str:
    """:data:`UNKEYED_REPLY_LUA` with the tag's name."""
    return UNKEYED_REPLY_LUA.replace("@KEYED_HEADER@", KEYED_HEADER)


def _lua(name: str, source: str) -> dict:
    return {"name": name, "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua", "default_source_code": {"inline_string": source}}}


def _bucket(tokens: int, burst: int) -> dict:
    return {"max_tokens": max(1, burst), "tokens_per_fill": tokens, "fill_interval": "1s"}


def rate_limit_filter(unkeyed_rate_per_s: int, unkeyed_burst: int, max_addresses: int) -> dict:
    """Envoy's local rate limit, one bucket per client address for requests without the key (``max_dynamic_descriptors``
    addresses, least recently used first out); keyed requests match no descriptor and pass."""
    fraction = {"default_value": {"numerator": 100, "denominator": "HUNDRED"}}
    return {"name": "envoy.filters.http.local_ratelimit", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
        "stat_prefix": "per_address",
        # The filter's own bucket is only the fallback for a request no descriptor matches: never the one that limits.
        "token_bucket": _bucket(1_000_000, 1_000_000),
        "filter_enabled": {**fraction, "runtime_key": "kimi_k3.per_address.enabled"},
        "filter_enforced": {**fraction, "runtime_key": "kimi_k3.per_address.enforced"},
        "max_dynamic_descriptors": max_addresses,
        "rate_limits": [{"actions": [
            {"header_value_match": {"descriptor_key": "key", "descriptor_value": "none", "expect_match": True,
                                    "headers": [{"name": KEYED_HEADER, "string_match": {"exact": "0"}}]}},
            {"remote_address": {}},
        ]}],
        "descriptors": [{"entries": [{"key": "key", "value": "none"}, {"key": "remote_address"}],
                         "token_bucket": _bucket(unkeyed_rate_per_s, unkeyed_burst)}],
    }}


def key_filters(digest_path: str | None, unkeyed_rate_per_s: int, unkeyed_burst: int, max_addresses: int) -> list[dict]:
    """The API listener's filters before the router: the key check, the per-address rate limit, the 401 (none without a key)."""
    if digest_path is None:
        return []
    return [_lua("kimi_k3.key_check", key_check_source(digest_path)), rate_limit_filter(unkeyed_rate_per_s, unkeyed_burst, max_addresses),
            _lua("kimi_k3.unkeyed_reply", unkeyed_reply_source())]


__all__ = [
    "BASE_HEAP_BYTES",
    "BUFFER_LIMIT",
    "DEFAULT_MAX_CONNECTIONS",
    "DELAYED_CLOSE_S",
    "HEAP_THRESHOLDS",
    "IDLE_TIMEOUT_S",
    "KEYED_HEADER",
    "KEY_CHECK_LUA",
    "KEY_DIGEST_FILE",
    "KEY_DIR",
    "MAX_REQUEST_HEADERS_KIB",
    "NON_HEAP_BYTES",
    "REQUEST_HEADERS_TIMEOUT_S",
    "SLOT_BYTES",
    "key_check_source",
    "key_digest",
    "key_filters",
    "memory_limit_mib",
    "overload_manager",
    "per_pod_share",
    "rate_limit_filter",
    "unkeyed_reply_source",
    "worst_case_heap_bytes",
]
