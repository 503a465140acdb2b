"""The conversation router's Envoy configuration: rendered here, shipped in a ConfigMap, run by the tests as rendered.

With two or more replicas the NLB spreads connections without regard for the KV cache: a turn of
a multi-turn conversation finds its prefix cached on its replica about 1/N of the time, and every
miss pays a full prefill of everything the conversation re-sends. The routing tier
(:mod:`kimi_k3.serving.router`) puts Envoy between the NLB and the replicas' API proxies and sends
every turn of a conversation to the same replica (docs/routing.md has the measurements that chose it):

* **affinity**: a request that carries the session header (:attr:`RouterConfig.session_header`,
  ``x-session-id`` by default) goes to the ``affinity`` cluster: Maglev consistent hashing on that
  header (``envoy.load_balancing_policies.maglev``), so a conversation stays on its replica while
  that replica is in the set, and only the sessions of a replica that leaves move;
* **bounded load**: ``hash_balance_factor`` (:attr:`RouterConfig.balance_factor`, 125 by default):
  a replica whose active requests exceed 1.25 times the mean gets no more hashed requests until it
  is back under; they go to the next replica of the table (Envoy's "consistent hashing with bounded
  loads");
* **fallback**: a request without the header goes to the ``spread`` cluster, least-request over the
  same replicas (power of two choices). Envoy hashes only headers, cookies, the source address or
  query parameters, never the body, so a client that sends no session key cannot be kept on its
  prefix by the router; hashing the source address instead would pin every conversation of one
  client host (or of everything behind one NAT) to one replica;
* **membership**: both clusters are ``STRICT_DNS`` on the replicas' headless Service, which lists
  only ready pods (``publishNotReadyAddresses`` off): a replica that turns not-ready or starts to
  drain leaves the DNS answer at once, the router re-resolves every :attr:`RouterConfig.dns_refresh_s`,
  and the replica gets no new session; active health checks (``GET /health`` on the proxy's probe
  port) and outlier detection (consecutive 5xx) take a failing replica out between two look-ups;
* **the allowlist**: only the proxy's allowlisted ``METHOD /exact/path`` routes are forwarded, after
  path normalisation; anything else, the engine's own routes included, gets a JSON 404 from the router
  itself. The pod proxies behind it keep the API key check and their own allowlist;
* **streams**: no buffering filter is configured, so server-sent events pass chunk by chunk; the
  route has no total timeout, only an idle timeout of :attr:`RouterConfig.max_generation_s` plus a
  margin (as the proxy's ``proxy_read_timeout``); a request is retried only when it never reached a
  replica (connect failure, refused stream), on another replica;
* **the front door** (:mod:`kimi_k3.serving.router_edge`): the API key is checked here first, after the headers and before
  any body byte (a JSON 401 and the connection closed without it); per-address rate limits for the whole tier; HTTP/1.1 only,
  32 KiB buffers, short header and idle timeouts, a global connection bound and the overload manager's fixed-heap monitor,
  all sized by the arithmetic there, which also sizes the router pod's memory;
* **failure**: active health checks every second on each replica's ``GET /health`` (the proxy forwards it to the engine, so
  it reports the engine's readiness): a non-200 answer takes a replica out at once, no answer twice (about 2 s); two gateway
  errors in a row eject it at once (outlier detection); with no healthy replica the router answers a JSON 503 itself (``healthy_panic_threshold`` 0:
  Envoy's default would send to unhealthy replicas when most are unhealthy);
* **errors** the router answers itself (no replica, 404, timeouts, overload) are JSON in vLLM's
  error shape, like the proxy's (:mod:`kimi_k3.serving.proxy_errors`);
* **the client's address**: ``use_remote_address`` appends the address Envoy sees (the client's own:
  the NLB preserves it) to ``X-Forwarded-For``; the pod proxies take the last address of that header
  from the router (:func:`kimi_k3.serving.proxy_edge.real_ip_lines`), so their per-address limits
  still count per client;
* the response header :data:`REPLICA_HEADER` names the replica that answered (its pod address), so
  ``kimi-k3 bench --conversations`` can report each replica's share.

Everything here is pure: :class:`RouterConfig` (validated) and :func:`render_envoy_config`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from kimi_k3.core import catalog
from kimi_k3.core.formats import DNS_LABEL
from kimi_k3.errors import UserError
from kimi_k3.serving import proxy_errors, router_edge
from kimi_k3.serving.api_proxy import DEFAULT_ROUTES, HEALTH_PATH, PROBE_PORT, ApiRoute
from kimi_k3.serving.proxy_edge import EdgeLimits

DEFAULT_SESSION_HEADER = "x-session-id"
"""The header a client names its conversation with (``routerSessionHeader``)."""

DEFAULT_BALANCE_FACTOR = 125
"""``hash_balance_factor``: no replica takes more than 1.25 times the mean of active requests."""

REPLICA_HEADER = "x-kimi-k3-replica"
"""Response header naming the replica that answered (``%UPSTREAM_HOST%``, the pod's address and port)."""

ADMIN_PORT = 9901
"""Envoy's admin interface, on loopback only (the stop wrapper drains through it; nothing outside the pod reaches it)."""

ADMIN_HOST = "127.0.0.1"
"""Where the admin interface listens."""

CONFIG_FILE = "envoy.yaml"
"""Key of the ConfigMap and file name under the config mount."""

IDLE_MARGIN_S = 60
"""Seconds the route's idle timeout adds to ``max_generation_s`` (as the proxy's read timeout does)."""

HEADER_NAME = r"^[a-z0-9][a-z0-9-]{0,62}$"
"""Session header names accepted: lowercase HTTP token characters (Envoy matches header names lowercased)."""

_RESERVED_HEADERS = ("authorization", "host", "content-length", "content-type", "transfer-encoding", "connection", "x-forwarded-for", REPLICA_HEADER,
                     router_edge.KEYED_HEADER)

AFFINITY_CLUSTER = "affinity"
"""The Maglev cluster: requests with the session header."""

SPREAD_CLUSTER = "spread"
"""The least-request cluster: requests without it (and ``GET /v1/models``)."""

PROBE_MAX_CONNECTIONS = 64
"""Connections the probe port accepts at once (the NLB's checks from each zone and the kubelet's)."""

MAX_TRACKED_ADDRESSES = 65_536
"""Client addresses the per-address rate limit tracks at once (least recently used out; a few hundred bytes each)."""

_JSON_ERRORS = (400, 401, 404, 408, 413, 429, 431, 500, 502, 503, 504)
_ROUTER_MESSAGES = {
    404: "Not Found",
    408: "The request was not sent in time",
    500: "The router failed to handle the request",
    502: "No replica could be reached; retry",
    503: "No replica is available (starting, draining or stopped); retry",
    504: "The replica did not answer in time",
}


RETRY_ABANDONED_MESSAGE = "The replica failed before answering and the request body is too large for the router to retry it; retry"
"""The router's 503 when a replica fails while a body above the retry buffer (32 KiB) is still arriving (Envoy's own 507)."""


class RouterConfigError(UserError):
    """A router setting that cannot work; ``field`` names the :class:`RouterConfig` field."""

    def __init__(self, field: str, message: str) -> None:
        """``field`` names the refused setting; ``message`` is the whole error text."""
        self.field = field
        super().__init__(message)


def _whole(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RouterConfigError(name, f"router: {name} {value!r} is not accepted; expected a whole number from {low} to {high}")
    return value


@dataclass(frozen=True, kw_only=True)
class RouterConfig:
    """Everything the router's ``envoy.yaml`` depends on (validated when built)."""

    replicas_host: str
    """DNS name of the replicas' headless Service (``<name>-replicas.<namespace>.svc.cluster.local``)."""
    replicas_port: int = catalog.API_PORT
    """The replicas' API port: their proxy's ``http`` port."""
    replicas_probe_port: int = PROBE_PORT
    """The replicas' probe port: the active health check's ``GET /health``."""
    listen_port: int = catalog.API_PORT
    """The router's API port (the Service's ``targetPort``)."""
    health_port: int = PROBE_PORT
    """The router's own probe port: ``GET /health`` answered by Envoy (the NLB's and the kubelet's checks)."""
    admin_port: int = ADMIN_PORT
    """Envoy's admin port, on loopback."""
    session_header: str = DEFAULT_SESSION_HEADER
    """Header whose value keeps a conversation on its replica (``routerSessionHeader``)."""
    balance_factor: int = DEFAULT_BALANCE_FACTOR
    """``hash_balance_factor`` in percent (100 to 1000): a replica above this share of the mean active requests is skipped."""
    routes: tuple[ApiRoute, ...] = DEFAULT_ROUTES
    """The allowlisted routes the router forwards (the proxy's: :data:`DEFAULT_ROUTES` plus the vetted extras)."""
    max_generation_s: int = 1800
    """Longest a request may stay silent; the route's idle timeout is this plus :data:`IDLE_MARGIN_S`."""
    drain_s: int = 1800
    """Seconds in-flight streams may take once the router stops (the stop wrapper's bound; the listeners drain meanwhile)."""
    dns_refresh_s: int = 2
    """How often the replicas' DNS name is re-resolved (a replica that left the headless Service gets no new session after this)."""
    health_check_interval_s: int = 1
    """Active health check period (``GET /health`` on each replica's probe port); two failures take a replica out."""
    max_connections: int = router_edge.DEFAULT_MAX_CONNECTIONS
    """Downstream connections the router accepts at once (Envoy's overload manager); more are closed at accept. Sizes the heap
    bound and the pod's memory (:func:`kimi_k3.serving.router_edge.memory_limit_mib`)."""
    key_digest_path: str | None = None
    """The mounted file with the API key's SHA-256 (:data:`kimi_k3.serving.router_edge.KEY_DIGEST_FILE`); ``None``: no key is
    checked (a stack without an API key)."""
    limits: EdgeLimits = field(default_factory=EdgeLimits)
    """The per-address limits the tier holds once (the proxy's: :attr:`~kimi_k3.serving.proxy_edge.EdgeLimits.unauthenticated_rate_per_s`
    and its burst), split over the router pods."""
    router_replicas: int = 2
    """Router pods sharing the tier's per-address budget (each holds its own bucket)."""

    def __post_init__(self) -> None:
        host = self.replicas_host
        if not isinstance(host, str) or not host or not all(DNS_LABEL.match(part) for part in host.split(".")):
            raise RouterConfigError("replicas_host", f"router: replicas_host {host!r} is not accepted; expected a DNS name such as kimi-replicas.kimi-serving.svc.cluster.local")
        ports = {name: _whole(name, getattr(self, name), 1, 65_535) for name in ("replicas_port", "replicas_probe_port", "listen_port", "health_port", "admin_port")}
        if len({ports["listen_port"], ports["health_port"], ports["admin_port"]}) != 3:
            raise RouterConfigError("listen_port", f"router: listen_port, health_port and admin_port must differ; got {ports}")
        header = self.session_header

        if not isinstance(header, str) or not re.fullmatch(HEADER_NAME, header) or header in _RESERVED_HEADERS or header.startswith((":", "x-envoy-")):
            raise RouterConfigError(
                "session_header",
                f"router: session_header {header!r} is not accepted; expected a lowercase header name (letters, digits, '-'), "
                f"not one of {', '.join(_RESERVED_HEADERS)} nor x-envoy-*",
            )
        _whole("balance_factor", self.balance_factor, 100, 1000)
        if not self.routes or not all(isinstance(r, ApiRoute) for r in self.routes):
            raise RouterConfigError("routes", f"router: routes {self.routes!r} is not accepted; expected the proxy's allowlisted ApiRoutes")
        _whole("max_generation_s", self.max_generation_s, 60, 86_400)
        _whole("drain_s", self.drain_s, 1, 3600)
        _whole("dns_refresh_s", self.dns_refresh_s, 1, 60)
        _whole("health_check_interval_s", self.health_check_interval_s, 1, 60)
        _whole("max_connections", self.max_connections, 64, 65_536)
        _whole("router_replicas", self.router_replicas, 1, 10)
        if not isinstance(self.limits, EdgeLimits):
            raise RouterConfigError("limits", f"router: limits {self.limits!r} is not accepted; expected the proxy's EdgeLimits")
        path = self.key_digest_path
        if path is not None and (not isinstance(path, str) or not re.fullmatch(r"/[A-Za-z0-9._/-]+", path)):
            raise RouterConfigError("key_digest_path", f"router: key_digest_path {path!r} is not accepted; expected an absolute path (letters, digits, . _ - /)")


def _duration(seconds: float) -> str:
    return f"{seconds:g}s"


def _error_type(status: int) -> str:
    try:
        return proxy_errors.error_of(status).type
    except KeyError:
        return "RouterError"


def _local_reply_config() -> dict:
    """JSON bodies in vLLM's error shape for every reply Envoy makes itself (``%LOCAL_REPLY_BODY%`` keeps Envoy's detail out)."""
    # Envoy's 507 ("exceeded request buffer limit while retrying upstream"): the replica failed while the body was still
    # arriving and more of it came than Envoy keeps for a retry (router_edge.BUFFER_LIMIT). To the client it is a 503: retry.
    mappers: list[dict] = [{
        "filter": {"status_code_filter": {"comparison": {"op": "EQ", "value": {"default_value": 507, "runtime_key": "kimi_k3.json_error.507"}}}},
        "status_code": 503,
        "body_format_override": {
            "json_format": {"error": {"message": RETRY_ABANDONED_MESSAGE, "type": _error_type(503), "param": None, "code": 503}},
            "content_type": "application/json",
        },
    }]
    for status in _JSON_ERRORS:
        message = _ROUTER_MESSAGES.get(status) or proxy_errors.error_of(status).message
        mappers.append({
            "filter": {"status_code_filter": {"comparison": {"op": "EQ", "value": {"default_value": status, "runtime_key": f"kimi_k3.json_error.{status}"}}}},
            "body_format_override": {
                "json_format": {"error": {"message": message, "type": _error_type(status), "param": None, "code": "%RESPONSE_CODE%"}},
                "content_type": "application/json",
            },
        })
    return {
        "mappers": mappers,
        "body_format": {
            "json_format": {"error": {"message": "The router could not handle the request", "type": "RouterError", "param": None, "code": "%RESPONSE_CODE%"}},
            "content_type": "application/json",
        },
    }


def _cluster(config: RouterConfig, name: str, policy: dict) -> dict:
    """One ``STRICT_DNS`` cluster over the replicas' headless Service, with health checks and outlier detection."""
    return {
        "name": name,
        # STRICT_DNS: every address of the name is a replica (Envoy's DNS cluster extension; the Cluster's own DNS fields are deprecated).
        "cluster_type": {"name": "envoy.cluster.dns", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.clusters.dns.v3.DnsCluster",
            "dns_refresh_rate": _duration(config.dns_refresh_s),
            "dns_failure_refresh_rate": {"base_interval": "1s", "max_interval": _duration(max(2, config.dns_refresh_s))},
            "respect_dns_ttl": False,
            "dns_lookup_family": "V4_ONLY",
            # glibc's getaddrinfo, as every other process of the pod resolves (resolv.conf, nsswitch, /etc/hosts read on each
            # look-up); Envoy's default c-ares resolver keeps the hosts file it read first.
            "typed_dns_resolver_config": {"name": "envoy.network.dns_resolver.getaddrinfo", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.network.dns_resolver.getaddrinfo.v3.GetAddrInfoDnsResolverConfig"}},
        }},
        "connect_timeout": "5s",
        # A replica that left the headless Service (not ready, or draining) goes at once; Envoy's default keeps a removed host
        # that still passes its health check, and a draining replica still answers /health during its preStop.
        "ignore_health_on_host_removal": True,
        "per_connection_buffer_limit_bytes": router_edge.BUFFER_LIMIT,
        "load_balancing_policy": {"policies": [{"typed_extension_config": policy}]},
        # With no healthy replica, none gets the request: the router's JSON 503 (Envoy's default, 50 %, would then send to
        # every replica, and the client would get the proxy's 502 of an engine that is down).
        "common_lb_config": {"healthy_panic_threshold": {"value": 0}},
        "circuit_breakers": {"thresholds": [{"max_connections": config.max_connections, "max_pending_requests": config.max_connections, "max_requests": config.max_connections, "max_retries": 16}]},
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{
                "endpoint": {
                    "address": {"socket_address": {"address": config.replicas_host, "port_value": config.replicas_port}},
                    "health_check_config": {"port_value": config.replicas_probe_port},
                },
            }]}],
        },
        # The proxy's GET /health is the engine's (it forwards it): a replica whose engine is not ready fails it too. A non-200
        # answer takes a replica out at once (Envoy's health checking overview: a non-expected status fails a host at once); no
        # answer twice, a second apart: a dead replica leaves within about 2 s.
        "health_checks": [{
            "timeout": _duration(config.health_check_interval_s),
            "interval": _duration(config.health_check_interval_s),
            "unhealthy_threshold": 2,
            "healthy_threshold": 1,
            "no_traffic_interval": _duration(config.health_check_interval_s),
            "http_health_check": {"path": HEALTH_PATH},
        }],
        # Two gateway errors in a row (502/503/504, connect failures and resets included) eject a replica at once, between checks.
        "outlier_detection": {"consecutive_5xx": 5, "consecutive_gateway_failure": 2, "enforcing_consecutive_gateway_failure": 100,
                              "interval": "1s", "base_ejection_time": "10s", "max_ejection_percent": 50},
        # The proxy answers HTTP/1.1 (nginx); one connection per request is not needed: keep-alive pools are per host.
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "common_http_protocol_options": {"idle_timeout": "20s"},
                "explicit_http_config": {"http_protocol_options": {}},
            },
        },
    }


def _routes(config: RouterConfig) -> list[dict]:
    """Each allowlisted route twice (with the session header: ``affinity``; without: ``spread``), then the JSON 404."""
    idle = _duration(config.max_generation_s + IDLE_MARGIN_S)
    retry = {
        # Only failures before any response byte are retried, and only a body Envoy still holds whole (router_edge.BUFFER_LIMIT).
        "retry_on": "connect-failure,refused-stream,reset-before-request,reset",
        "num_retries": 2,
        "retry_host_predicate": [{"name": "envoy.retry_host_predicates.previous_hosts", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"}}],
        "host_selection_retry_max_attempts": 5,
    }
    entries = []
    for route in config.routes:
        method = {"name": ":method", "string_match": {"exact": route.method}}
        session = {"name": config.session_header, "present_match": True}
        action = {"timeout": "0s", "idle_timeout": idle, "retry_policy": retry}
        if route.method == "POST":
            entries.append({
                "name": f"{route} (session)",
                "match": {"path": route.path, "headers": [method, session]},
                "route": {**action, "cluster": AFFINITY_CLUSTER, "hash_policy": [{"header": {"header_name": config.session_header}, "terminal": True}]},
            })
        entries.append({"name": str(route), "match": {"path": route.path, "headers": [method]}, "route": {**action, "cluster": SPREAD_CLUSTER}})
    entries.append({"name": "not allowlisted", "match": {"prefix": "/"}, "direct_response": {"status": 404}})
    return entries


def _http_connection_manager(config: RouterConfig) -> dict:
    return {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "api",
        # HTTP/1.1 only: a cleartext HTTP/2 preface is a protocol error, no stream multiplexing onto one slot (router_edge).
        "codec_type": "HTTP1",
        # The client's address (the NLB preserves it) is appended to X-Forwarded-For; the pod proxies read the last one.
        "use_remote_address": True,
        "xff_num_trusted_hops": 0,
        "normalize_path": True,
        "merge_slashes": True,
        "path_with_escaped_slashes_action": "REJECT_REQUEST",
        "server_header_transformation": "PASS_THROUGH",
        "request_headers_timeout": _duration(router_edge.REQUEST_HEADERS_TIMEOUT_S),
        "max_request_headers_kb": router_edge.MAX_REQUEST_HEADERS_KIB,
        "stream_idle_timeout": _duration(config.max_generation_s + IDLE_MARGIN_S),
        "request_timeout": "0s",
        "drain_timeout": "5s",
        # A connection the router closes itself (an unkeyed request, a protocol error) holds its slot and its read buffer
        # until the peer closes or this passes (Envoy's default: 1 s): an attacker that never closes would hold them all.
        "delayed_close_timeout": _duration(router_edge.DELAYED_CLOSE_S),
        "common_http_protocol_options": {"idle_timeout": _duration(router_edge.IDLE_TIMEOUT_S), "headers_with_underscores_action": "REJECT_REQUEST"},
        "access_log": [{
            "name": "envoy.access_loggers.stdout",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog",
                "log_format": {"json_format": {
                    "time": "%START_TIME%", "remote": "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%", "request": "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
                    "status": "%RESPONSE_CODE%", "flags": "%RESPONSE_FLAGS%", "replica": "%UPSTREAM_HOST%", "cluster": "%UPSTREAM_CLUSTER%",
                    "ttfb_ms": "%RESPONSE_DURATION%", "duration_ms": "%DURATION%",
                }},
            },
        }],
        "local_reply_config": _local_reply_config(),
        "route_config": {
            "name": "api",
            "response_headers_to_add": [{"header": {"key": REPLICA_HEADER, "value": "%UPSTREAM_HOST%"}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}],
            "request_headers_to_remove": [router_edge.KEYED_HEADER],
            "virtual_hosts": [{"name": "api", "domains": ["*"], "routes": _routes(config)}],
        },
        "http_filters": [
            *router_edge.key_filters(config.key_digest_path, router_edge.per_pod_share(config.limits.unauthenticated_rate_per_s, config.router_replicas),
                                     router_edge.per_pod_share(config.limits.unauthenticated_burst, config.router_replicas), MAX_TRACKED_ADDRESSES),
            {"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}},
        ],
    }


def _health_listener(config: RouterConfig) -> dict:
    """The router's own probe port: ``GET /health`` answered by Envoy (up = it routes), anything else a JSON 404."""
    hcm = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "probe",
        "local_reply_config": _local_reply_config(),
        "route_config": {"name": "probe", "virtual_hosts": [{"name": "probe", "domains": ["*"], "routes": [
            {"match": {"path": HEALTH_PATH, "headers": [{"name": ":method", "string_match": {"exact": "GET"}}]},
             "direct_response": {"status": 200, "body": {"inline_string": '{"status":"ok"}'}}},
            {"match": {"prefix": "/"}, "direct_response": {"status": 404}},
        ]}]},
        "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
    }
    # Outside the global connection bound, with its own: a flood on the API port does not fail the NLB's and kubelet's checks.
    return _listener("probe", config.health_port, hcm, own_limit=PROBE_MAX_CONNECTIONS)


def _listener(name: str, port: int, hcm: dict, own_limit: int | None = None) -> dict:
    filters = [{"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]
    if own_limit is not None:
        filters.insert(0, {"name": "envoy.filters.network.connection_limit", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.connection_limit.v3.ConnectionLimit",
            "stat_prefix": name, "max_connections": own_limit}})
    return {
        "name": name,
        "address": {"socket_address": {"address": "0.0.0.0", "port_value": port}},
        "per_connection_buffer_limit_bytes": router_edge.BUFFER_LIMIT,
        **({"ignore_global_conn_limit": True} if own_limit is not None else {}),
        "filter_chains": [{"filters": filters}],
    }


def envoy_config(config: RouterConfig) -> dict:
    """The bootstrap as a mapping (see the module docstring)."""
    maglev = {
        "name": "envoy.load_balancing_policies.maglev",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.load_balancing_policies.maglev.v3.Maglev",
            "consistent_hashing_lb_config": {"hash_balance_factor": config.balance_factor},
        },
    }
    least_request = {
        "name": "envoy.load_balancing_policies.least_request",
        "typed_config": {"@type": "type.googleapis.com/envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest", "choice_count": 2},
    }
    return {
        "admin": {"address": {"socket_address": {"address": ADMIN_HOST, "port_value": config.admin_port}}},
        "static_resources": {
            "listeners": [_listener("api", config.listen_port, _http_connection_manager(config)), _health_listener(config)],
            "clusters": [_cluster(config, AFFINITY_CLUSTER, maglev), _cluster(config, SPREAD_CLUSTER, least_request)],
        },
        "overload_manager": router_edge.overload_manager(config.max_connections),
        "layered_runtime": {"layers": [{"name": "static", "static_layer": {}}]},
    }


def render_envoy_config(config: RouterConfig) -> str:
    """``envoy.yaml``: the bootstrap as JSON (a YAML subset Envoy reads as is), one key order, byte-stable."""
    header = "# envoy.yaml of the kimi-k3 conversation router, rendered by components/serving/router_config.py; do not edit.\n"
    return header + json.dumps(envoy_config(config), indent=1, sort_keys=False) + "\n"


def config_checksum(config: RouterConfig) -> str:
    """sha256 of the rendered config (a pod-template annotation: Envoy reads its bootstrap once, so a change must roll the pods)."""
    return hashlib.sha256(render_envoy_config(config).encode()).hexdigest()


__all__ = [
    "ADMIN_PORT",
    "AFFINITY_CLUSTER",
    "CONFIG_FILE",
    "DEFAULT_BALANCE_FACTOR",
    "DEFAULT_SESSION_HEADER",
    "REPLICA_HEADER",
    "SPREAD_CLUSTER",
    "RouterConfig",
    "RouterConfigError",
    "config_checksum",
    "envoy_config",
    "render_envoy_config",
]
