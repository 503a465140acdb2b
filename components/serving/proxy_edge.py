"""What a client of the API port can cost the proxy: the key check, per-address limits, timeouts, buffers, memory.

Threat: anyone the NetworkPolicy admits to port 8000 (the client CIDRs behind the NLB,
the client namespaces in-cluster) may send anything, slowly. Without the measures below a
client without the key could make nginx hold about a megabyte per stalled upload (the
body is read before vLLM sees the key) until the worker is OOM-killed and every live
stream of the replica is cut. So:

* **the key is checked before the body is read**: ``auth_request`` (access phase) asks an
  internal location, answered by nginx itself, whether ``secure_link`` matched: the MD5 of
  the bearer token against the digest in a file mounted from the API-key Secret
  (:func:`key_check_file`; the key itself is in no ConfigMap, file or manifest). nginx
  reads a request body only in the content phase (``proxy_pass``), after access: a client
  without the key gets the JSON 401 and its body is discarded, never buffered. The match
  follows vLLM's own (``AuthenticationMiddleware.verify_token``, vLLM 0.27.1
  ``vllm/entrypoints/serve/utils/server_utils.py``): the scheme ``Bearer`` in any case,
  one space, then the token exactly. Comparing digests leaks nothing of the key through
  timing. vLLM checks the key again behind the proxy;
* **per-address limits** (preaccess, before the key check): a client address without the
  key gets :attr:`EdgeLimits.unauthenticated_rate_per_s` requests a second (burst
  :attr:`EdgeLimits.unauthenticated_burst`) and
  :attr:`EdgeLimits.unauthenticated_requests_per_address` at once, then 429; every
  address, keyed or not, at most :func:`requests_per_address` requests at once. Behind the
  NLB the address is the client's own: the target group has ``preserve_client_ip.enabled=true``
  (:mod:`kimi_k3.serving.nlb`; off by default for IP targets, AWS Load Balancer Controller
  v3.5.0 annotations, "Access control") and no proxy protocol, so ``$remote_addr`` is the
  client's address; in-cluster clients reach the pod through kube-proxy's DNAT, which keeps
  the client pod's address. Clients behind one NAT share one address. Behind the routing tier
  (:mod:`kimi_k3.serving.router`) every request comes from a router pod: there the proxy takes
  the client's address from the last entry of ``X-Forwarded-For``, the one Envoy appended from
  the connection it accepted (:func:`real_ip_lines`), so the limits still count per client;
* **bounded reads**: the whole header within :attr:`EdgeLimits.header_timeout_s`, at most
  :data:`HEADER_BUFFER` plus :data:`LARGE_HEADER_BUFFERS`; a body read stalled longer than
  :attr:`EdgeLimits.body_timeout_s`, a client not reading its answer longer than
  :attr:`EdgeLimits.send_timeout_s`, an idle keep-alive longer than
  :attr:`EdgeLimits.keepalive_timeout_s` are closed; timed-out connections are reset, so
  their kernel buffers go at once; a refused request's body is discarded for at most
  :attr:`EdgeLimits.lingering_time_s`;
* **sized memory**: every connection slot costs at most :data:`SLOT_BYTES`, so a worker with
  ``worker_connections`` slots all taken by the worst clients needs :func:`worst_case_bytes`,
  and the container's memory limit is twice that (:func:`memory_limit_mib`): whatever
  clients do, the worker stays under half its limit. Authenticated bodies above
  :data:`BODY_BUFFER` go to a temporary file in the ``emptyDir`` (node disk: page cache the
  kernel reclaims, not worker memory).

What remains: the slots themselves. A client that opens connections and sends nothing
holds one slot each until the header timeout; nginx cannot count connections per address
before it has read a request. With every slot taken new connections wait in the listen
queue or are refused; established streams are untouched (nothing is OOM-killed). The NLB's
and the NetworkPolicy's client CIDRs bound who can try.

Streaming is unaffected: the limits count requests, not bytes, and ``proxy_buffering off``
still forwards every chunk as it arrives.
"""

from __future__ import annotations

import base64
import hashlib
import math
from dataclasses import dataclass

from kimi_k3.errors import UserError

KIB = 1024
MIB = 1024 * 1024

HEADER_BUFFER = 1 * KIB
"""``client_header_buffer_size``: an OpenAI client's request line and headers fit in one kilobyte."""

LARGE_HEADER_BUFFERS = (4, 8 * KIB)
"""``large_client_header_buffers``: at most four 8 KiB buffers for a longer header (one header line must fit in one);
more is a 431 (nginx's 494). 33 KiB per connection at most with :data:`HEADER_BUFFER`."""

BODY_BUFFER = 64 * KIB
"""``client_body_buffer_size``: a keyed request body up to this stays in memory, a larger one goes to a temporary file."""

UPSTREAM_BUFFER = 8 * KIB
"""``proxy_buffer_size``: the buffer each proxied answer is read into (buffering is off: chunks pass straight through)."""

SLOT_BYTES = 96 * KIB
"""The most one connection slot costs the worker, with room to spare over what the real nginx shows.

Measured with Debian's nginx 1.22 under a memory cgroup (``tests/test_api_proxy_edge.py``): a
slow-header connection that filled all four large header buffers costs about 47 KiB (the 33
KiB of buffers plus the connection, request and pool structures); a stalled upload without
the key about 3 KiB (its body is discarded). A keyed, proxied request takes two slots (client
and engine) and at most 46 KiB of client side, :data:`BODY_BUFFER`, :data:`UPSTREAM_BUFFER`,
the engine request's headers and two pools: under 2 x 96 KiB."""

WORKER_BASE_BYTES = 16 * MIB
"""A worker's memory with no connection (code, configuration, pools; about 6 MiB measured) with room to spare."""

MASTER_BYTES = 8 * MIB
"""The master process (about 7 MiB measured)."""

ZONE_BYTES = 1 * MIB
"""Size of each shared-memory zone of the per-address limits (tens of thousands of addresses each)."""

ZONES = 3
"""Shared-memory zones: unauthenticated requests (rate), unauthenticated requests at once, requests at once per address."""

MEMORY_FACTOR = 2
"""The container's memory limit over the worst case: the worst case stays under half the limit."""

MIN_MEMORY_MIB = 512
"""The least memory limit of the proxy container."""

MAX_WORST_CASE_BYTES = 4 * 1024 * MIB
"""The largest worst case accepted (4 GiB): more slots than that belong to more replicas, not one proxy."""

KEY_DIR = "/run/kimi-k3-api-key"
"""Where the API-key Secret's key-check file is mounted (read-only; the Secret volume holds only that file)."""

KEY_FILE = "key-check.conf"
"""The key-check file's name, and its key in the API-key Secret."""

AUTH_LOCATION = "/_kimi_k3_auth"
"""The internal location ``auth_request`` asks (answered by nginx: 204 with the right key, else 401; never forwarded)."""

_TOKEN_MAP = (
    "    # The bearer token, split as vLLM splits it: scheme 'Bearer' in any case, one space, the token.",
    '    map $http_authorization $kimi_k3_bearer_token { "~^(?i:bearer) (?<token>.*)$" $token; default ""; }',
)


@dataclass(frozen=True, kw_only=True)
class EdgeLimits:
    """Timeouts and per-address limits of the API port (see the module docstring)."""

    header_timeout_s: int = 10
    """``client_header_timeout``: the whole request header within this (a client sends it in one packet)."""
    body_timeout_s: int = 20
    """``client_body_timeout``: the longest pause between two reads of a request body."""
    send_timeout_s: int = 60
    """``send_timeout``: the longest a client may leave its answer unread (streamed chunks included)."""
    keepalive_timeout_s: int = 30
    """``keepalive_timeout``: how long an idle keep-alive connection holds its slot (the OpenAI SDKs reuse within seconds)."""
    lingering_time_s: int = 10
    """``lingering_time``: the longest nginx discards the body of a refused request before closing."""
    unauthenticated_rate_per_s: int = 10
    """Requests a second one address may send without the key (``limit_req``); more gets 429."""
    unauthenticated_burst: int = 20
    """Requests without the key one address may send above the rate at once before the 429s start."""
    unauthenticated_requests_per_address: int = 16
    """Requests without the key one address may have open at once (``limit_conn``)."""

    def __post_init__(self) -> None:
        for name in ("header_timeout_s", "body_timeout_s", "send_timeout_s", "keepalive_timeout_s", "lingering_time_s"):
            _whole(name, getattr(self, name), 1, 3600)
        _whole("unauthenticated_rate_per_s", self.unauthenticated_rate_per_s, 1, 10_000)
        _whole("unauthenticated_burst", self.unauthenticated_burst, 0, 10_000)
        _whole("unauthenticated_requests_per_address", self.unauthenticated_requests_per_address, 1, 10_000)


class EdgeError(UserError):
    """An edge limit that cannot work; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        """``field`` names the refused setting; ``message`` is the whole error text."""
        self.field = field
        super().__init__(message)


def _whole(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise EdgeError(name, f"api proxy: {name} {value!r} is not accepted; expected a whole number from {low} to {high}")
    return value


def worst_case_bytes(workers: int, worker_connections: int) -> int:
    """The proxy's memory with every slot of every worker held by the costliest client (see the module docstring)."""
    return workers * (worker_connections * SLOT_BYTES + WORKER_BASE_BYTES) + MASTER_BYTES + ZONES * ZONE_BYTES


def memory_limit_mib(workers: int, worker_connections: int) -> int:
    """The container's memory limit (MiB): :data:`MEMORY_FACTOR` times the worst case, in 64 MiB steps, at least
    :data:`MIN_MEMORY_MIB`; raises :class:`EdgeError` for a worst case above :data:`MAX_WORST_CASE_BYTES`."""
    worst = worst_case_bytes(workers, worker_connections)
    if worst > MAX_WORST_CASE_BYTES:
        raise EdgeError(
            "worker_connections",
            f"api proxy: worker_connections {worker_connections} with {workers} worker(s) is not accepted; the worst case, "
            f"{math.ceil(worst / MIB)} MiB, is above {MAX_WORST_CASE_BYTES // MIB} MiB: serve more replicas instead",
        )
    return max(MIN_MEMORY_MIB, 64 * math.ceil(MEMORY_FACTOR * worst / (64 * MIB)))


def requests_per_address(workers: int, worker_connections: int) -> int:
    """Requests one address (keyed or not) may have open at once: a quarter of all slots' requests (a request holds two)."""
    return max(1, workers * worker_connections // 8)


def rlimit_nofile(worker_connections: int) -> int:
    """``worker_rlimit_nofile``: a descriptor per connection plus one per body buffered to a temporary file, and some.

    Containers may start with a soft limit of 1,024 open files; the worker raises its own up to the hard limit."""
    return 2 * worker_connections + 256


def key_digest(api_key: str) -> str:
    """The MD5 of the key, base64url without padding: what ``secure_link_md5 $kimi_k3_bearer_token`` is compared with."""
    return base64.urlsafe_b64encode(hashlib.md5(api_key.encode("utf-8"), usedforsecurity=False).digest()).decode().rstrip("=")


def key_check_file(api_key: str) -> str:
    """The content of the Secret's :data:`KEY_FILE`: one ``secure_link`` directive with the key's digest (not the key)."""
    if not isinstance(api_key, str) or not api_key or any(ch.isspace() for ch in api_key):
        raise EdgeError("api_key", "api proxy: the API key must be a non-empty string without whitespace (clients send it as 'Bearer <key>')")
    return f'secure_link "{key_digest(api_key)}";\n'


TRUSTED_FORWARDER_CIDRS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
"""Where the proxy accepts ``X-Forwarded-For`` from behind the routing tier: the private ranges a VPC (and its pods, secondary
CIDRs included) may use. Only the router pods reach the API port then (the replicas' NetworkPolicy admits them alone), so no
other client can set the header the proxy trusts."""


def real_ip_lines() -> list[str]:
    """The API ``server``'s realip directives behind the routing tier: ``$remote_addr`` becomes the last address of
    ``X-Forwarded-For`` (Envoy appends the address of the connection it accepted, the client's own through the NLB; whatever a
    client wrote into the header itself stands before it and is ignored: ``real_ip_recursive off``)."""
    return [
        "        # Behind the routing tier: the client's address is the last X-Forwarded-For entry, appended by the router.",
        *(f"        set_real_ip_from {cidr};" for cidr in TRUSTED_FORWARDER_CIDRS),
        "        real_ip_header X-Forwarded-For;",
        "        real_ip_recursive off;",
    ]


def http_lines(workers: int, worker_connections: int, limits: EdgeLimits, check_key: bool) -> list[str]:
    """The ``http``-level directives: timeouts, buffers, the limit zones (and the bearer-token map when the key is checked)."""
    count, size = LARGE_HEADER_BUFFERS
    zone = f"{ZONE_BYTES // MIB}m"
    lines = [
        "    # Bounded reads (proxy_edge.py): a slow client loses its slot, a timed-out one is reset.",
        f"    client_header_timeout {limits.header_timeout_s}s;",
        f"    client_body_timeout {limits.body_timeout_s}s;",
        f"    send_timeout {limits.send_timeout_s}s;",
        f"    keepalive_timeout {limits.keepalive_timeout_s}s;",
        f"    lingering_time {limits.lingering_time_s}s;",
        "    lingering_timeout 2s;",
        "    reset_timedout_connection on;",
        f"    client_header_buffer_size {HEADER_BUFFER // KIB}k;",
        f"    large_client_header_buffers {count} {size // KIB}k;",
        f"    client_body_buffer_size {BODY_BUFFER // KIB}k;",
        f"    proxy_buffer_size {UPSTREAM_BUFFER // KIB}k;",
        "",
        "    # Per-address limits (the client's own address: the NLB preserves it); 429 beyond them.",
    ]
    if check_key:
        lines += [
            *_TOKEN_MAP,
            '    map $secure_link $kimi_k3_unauthenticated { "1" ""; default $binary_remote_addr; }',
            f"    limit_req_zone $kimi_k3_unauthenticated zone=unauthenticated_rate:{zone} rate={limits.unauthenticated_rate_per_s}r/s;",
            f"    limit_conn_zone $kimi_k3_unauthenticated zone=unauthenticated_requests:{zone};",
        ]
    lines += [
        f"    limit_conn_zone $binary_remote_addr zone=requests_per_address:{zone};",
        "    limit_req_status 429;",
        "    limit_conn_status 429;",
        "    limit_req_log_level warn;",
        "    limit_conn_log_level warn;",
    ]
    return lines


def api_server_lines(workers: int, worker_connections: int, limits: EdgeLimits, check_key: bool) -> list[str]:
    """The API ``server``'s own directives: the per-address limits and, with the key, what its check needs."""
    lines = [f"        limit_conn requests_per_address {requests_per_address(workers, worker_connections)};"]
    if not check_key:
        return lines
    return [
        *lines,
        f"        limit_req zone=unauthenticated_rate burst={limits.unauthenticated_burst} nodelay;",
        f"        limit_conn unauthenticated_requests {limits.unauthenticated_requests_per_address};",
        "        # The key's digest comes from the API-key Secret (never a ConfigMap); the check itself is nginx's own.",
        f"        include {KEY_DIR}/{KEY_FILE};",
        '        secure_link_md5 "$kimi_k3_bearer_token";',
        f'        location = {AUTH_LOCATION} {{ internal; if ($secure_link != "1") {{ return 401; }} return 204; }}',
    ]


def key_guard(check_key: bool) -> list[str]:
    """What an allowlisted location adds to check the key in the access phase, before its body is read (nothing without a key)."""
    return [f"auth_request {AUTH_LOCATION};"] if check_key else []


__all__ = [
    "AUTH_LOCATION",
    "BODY_BUFFER",
    "HEADER_BUFFER",
    "KEY_DIR",
    "KEY_FILE",
    "LARGE_HEADER_BUFFERS",
    "SLOT_BYTES",
    "TRUSTED_FORWARDER_CIDRS",
    "EdgeError",
    "EdgeLimits",
    "api_server_lines",
    "http_lines",
    "key_check_file",
    "key_digest",
    "key_guard",
    "memory_limit_mib",
    "real_ip_lines",
    "requests_per_address",
    "rlimit_nofile",
    "worst_case_bytes",
]
