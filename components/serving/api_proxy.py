"""The allowlisting reverse proxy in front of vLLM: nginx as a sidecar in the server pod.

Why a proxy at all: vLLM's ``--api-key`` guards only the ``/v1``, ``/v2`` and
``/inference`` prefixes. ``/invocations`` runs the same inference without a key,
and ``/pause``, ``/update_weights``, ``/abort_requests``, ``/tokenize``, ``/load``,
``/metrics``... answer anyone who reaches the port. vLLM's own advice is a reverse
proxy that "explicitly allowlists only the endpoints you want to expose"
(vllm-project/vllm ``docs/usage/security.md``, "API Key Authentication
Limitations", commit 00b005cf). So vLLM binds to loopback and this proxy owns the
pod's ports:

* API port (:data:`kimi_k3.core.catalog.API_PORT`, 8000): exactly the allowlisted
  ``METHOD path`` pairs (:data:`DEFAULT_ROUTES` plus vetted extras); everything
  else, a wrong method on an allowed path included, gets a JSON 404 and never
  reaches vLLM. nginx checks the bearer key before it reads a body (a missing or
  wrong key gets the proxy's JSON 401); the ``Authorization`` header is passed
  through untouched and vLLM checks it again.
* probe port (:data:`PROBE_PORT`): ``GET /health`` forwarded to vLLM's
  ``/health`` (kubelet probes and the NLB health check reach the pod IP, not
  loopback) and ``GET /livez`` answered by nginx itself (the proxy's liveness).

What a client without the key can cost (the key checked before any body is read,
per-address limits, timeouts, memory sized for the worst case) is
:mod:`kimi_k3.serving.proxy_edge`; the JSON bodies of the errors nginx answers itself
are :mod:`kimi_k3.serving.proxy_errors`.
* metrics port (:data:`METRICS_PORT`): ``GET /metrics`` forwarded, nothing else;
  the NetworkPolicy admits only the monitoring namespace there.

Why nginx (Debian's 1.22 runs in the tests; the image pins a 1.30 stable build):

* server-sent events: ``proxy_buffering off`` forwards each chunk as it arrives;
  ``X-Accel-*`` headers from upstream are ignored so nothing can turn buffering on;
* body limits: ``client_max_body_size`` answers 413 for a too-large
  ``Content-Length`` *and* for a chunked body once it crosses the limit. haproxy
  2.6 can only check a declared ``Content-Length`` or a body buffered in full
  within ``tune.bufsize``, so a chunked upload would slip past it;
* exact routes: ``location =`` matches the normalised path (percent-decoding,
  ``..`` and ``//`` resolved first), and ``proxy_pass`` with a fixed URI sends vLLM
  exactly the allowlisted path whatever spelling the client used;
* graceful drain: SIGQUIT closes the listeners and lets in-flight requests
  finish, bounded by ``worker_shutdown_timeout``; the container's PID 1
  (:data:`STOP_WRAPPER`) turns whatever stop signal the kubelet sends into SIGQUIT;
* non-root, read-only root: every path nginx writes (pid, five temp dirs) is under
  :data:`RUNTIME_DIR`, an ``emptyDir``; logs go to stdout/stderr.

Everything here is pure: a frozen, validated :class:`ApiProxyConfig`, the config
text (:func:`render_nginx_conf`), the ConfigMap data, the container, its volumes
and the NetworkPolicy ingress rules. The pod spec calls them; nothing is declared.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import pulumi_kubernetes as k8s

from kimi_k3.cluster.pod_security import container_security_context
from kimi_k3.core import catalog
from kimi_k3.core.formats import DNS_LABEL
from kimi_k3.errors import UserError
from kimi_k3.serving import proxy_edge, proxy_errors
from kimi_k3.serving.proxy_edge import EdgeError, EdgeLimits

PROXY_IMAGE = "docker.io/nginxinc/nginx-unprivileged:1.30.1@sha256:6f5c8f8836fce1eba7daa6b4f0dbfe7aa742be47e1b15386a67be7a3dbd06086"
"""nginx 1.30.1 (stable branch), the unprivileged build of nginxinc/docker-nginx-unprivileged.

Tag and digest as pinned together by two public projects (not re-checked against the
registry offline): rubasace/my-resume ``Dockerfile`` at commit ab0e78c (Renovate:
"Update nginxinc/nginx-unprivileged Docker tag to v1.30.1") and mwalbeck/docker-cyberchef
``Dockerfile`` (``1.30.1-trixie``, the same digest). The repository's Dockerfiles set
``STOPSIGNAL SIGQUIT`` (graceful stop) and ``USER 101``, and chown ``/etc/nginx`` to
group 0 so any UID can run it. Confirm with ``docker buildx imagetools inspect`` (and
``.Image.config.StopSignal``) when bumping; mirror it into ECR for production pulls."""

PROXY_RUN_AS_USER = 10001
"""UID of the proxy container: the pod's UID (``vllm.RUN_AS_USER``), not the image's 101.

The image needs no write access to its own files (the config is a ConfigMap, every
written path is :data:`RUNTIME_DIR`), so any non-root UID runs it; 10001 keeps one UID
per pod and above 10000 (checkov CKV_K8S_40: a UID that maps to no host user)."""

ENGINE_HOST = "127.0.0.1"
"""Where vLLM listens: loopback only, reachable from the proxy in the same pod and nowhere else."""

ENGINE_PORT = 8001
"""vLLM's port on loopback (``vllm serve --host 127.0.0.1 --port 8001``)."""

PROBE_PORT = 8081
"""Port of the probe server: ``GET /health`` (forwarded) and ``GET /livez`` (nginx itself)."""

METRICS_PORT = 9090
"""Port of the metrics server: ``GET /metrics`` forwarded, nothing else."""

CONFIG_DIR = "/etc/nginx"
"""Where the ConfigMap is mounted (hides the image's own ``/etc/nginx``; the rendered file includes nothing)."""

CONFIG_FILE = "nginx.conf"
"""Key of the ConfigMap and file name under :data:`CONFIG_DIR`."""

RUNTIME_DIR = "/tmp"
"""The one writable directory (an ``emptyDir``): pid file, request-body and proxy temp files."""

BODY_BYTES_PER_TOKEN = 16
"""Request-body bytes allowed per token of ``max_model_len`` (text only).

A token of English or code is about 4 bytes of UTF-8; CJK text is about 1.5
characters of 3 bytes per token, and an OpenAI client that JSON-escapes non-ASCII
(``json.dumps`` default) writes each such character as 6 bytes (``\\uXXXX``), about 9
bytes per token; long whitespace/indent tokens of code add a few more. 16 is that
worst realistic case (~9-12) with headroom for the JSON envelope (roles, tool
schemas). A body larger than this cannot hold a prompt that fits the context, so it
is refused before it costs memory. Inline base64 media is not bounded by tokens (an
image of a few thousand tokens can be megabytes) and is allowed separately:
:attr:`ApiProxyConfig.inline_media_bytes`."""

READ_TIMEOUT_MARGIN_S = 60
"""Seconds the upstream read timeout adds to :attr:`ApiProxyConfig.max_generation_s`."""

LIVEZ_PATH = "/livez"
"""Probe-port path nginx answers itself (the proxy container's liveness; never forwarded)."""

HEALTH_PATH = "/health"
"""vLLM's health path, forwarded on the probe port only."""

METRICS_PATH = "/metrics"
"""vLLM's Prometheus path, forwarded on the metrics port only."""

API_KEY_PREFIXES = ("/v1/", "/v2/", "/inference/")
"""The only prefixes vLLM's ``--api-key`` guards (docs/usage/security.md); an extra route must sit under one."""

VLLM_UNPROTECTED_PATHS = (
    "/invocations",
    "/generative_scoring",
    "/pooling",
    "/classify",
    "/score",
    "/rerank",
    "/pause",
    "/resume",
    "/is_paused",
    "/scale_elastic_ep",
    "/is_scaling_elastic_ep",
    "/init_weight_transfer_engine",
    "/update_weights",
    "/get_world_size",
    "/abort_requests",
    "/tokenize",
    "/detokenize",
    "/health",
    "/ping",
    "/version",
    "/load",
    "/tokenizer_info",
    "/server_info",
    "/reset_prefix_cache",
    "/reset_mm_cache",
    "/reset_encoder_cache",
    "/sleep",
    "/wake_up",
    "/is_sleeping",
    "/collective_rpc",
    "/start_profile",
    "/stop_profile",
    "/metrics",
)
"""Paths vLLM serves without the API key: the "Unprotected Endpoints" of docs/usage/security.md
(vllm-project/vllm commit 00b005cf), plus ``/metrics`` (Prometheus, mounted without auth)."""

REFUSED_KEYED_PATHS = (
    "/inference/v1/generate",
    "/v1/load_lora_adapter",
    "/v1/unload_lora_adapter",
)
"""Keyed paths an extra route may not open either: ``/inference/v1/generate`` is named among
the authentication bypasses in security.md's "Security Implications"; the LoRA endpoints "can
alter model behavior"."""

ROUTE_METHODS = ("GET", "POST")
"""Methods an allowlisted route may have (vLLM's OpenAI routes use only these)."""

_PATH_RE = re.compile(r"^(/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+$")
_NOT_FOUND = proxy_errors.error_return(404)
_NOT_FOUND_ELSEWHERE = ("        location / {", f"            {_NOT_FOUND}", "        }")
"""The last location of every server block: whatever no other location allows is a 404 that never reaches vLLM."""


@dataclass(frozen=True, order=True)
class ApiRoute:
    """One allowlisted ``METHOD /exact/path`` on the API port."""

    method: str
    """``GET`` or ``POST`` (:data:`ROUTE_METHODS`)."""
    path: str
    """Exact absolute path (no prefix matching, no parameters, no ``.``/``..`` segments, no trailing slash)."""

    def __post_init__(self) -> None:
        if self.method not in ROUTE_METHODS:
            raise UserError(f"api proxy: route method {self.method!r} is not accepted; accepted: {', '.join(ROUTE_METHODS)}")
        path = self.path
        if not isinstance(path, str) or not _PATH_RE.fullmatch(path) or any(seg in (".", "..") for seg in path.split("/")):
            raise UserError(
                f"api proxy: route path {path!r} is not accepted; expected an exact path such as /v1/embeddings "
                "(letters, digits, '._~-' segments; no parameters, no '..', no trailing slash)"
            )

    @classmethod
    def parse(cls, text: str) -> ApiRoute:
        """``"POST /v1/embeddings"`` → ``ApiRoute("POST", "/v1/embeddings")``; raises :class:`UserError` if malformed."""
        parts = text.split() if isinstance(text, str) else []
        if len(parts) != 2:
            raise UserError(f"api proxy: route {text!r} is not accepted; expected 'METHOD /path', e.g. 'POST /v1/embeddings'")
        return cls(parts[0].upper(), parts[1])

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


DEFAULT_ROUTES = (
    ApiRoute("POST", "/v1/chat/completions"),
    ApiRoute("POST", "/v1/completions"),
    ApiRoute("GET", "/v1/models"),
)
"""The OpenAI routes every client needs; always allowed."""


def check_extra_route(route: ApiRoute) -> None:
    """Refuse a route that would open what the proxy exists to close; raises :class:`UserError`."""
    if route.path in VLLM_UNPROTECTED_PATHS:
        raise UserError(
            f"api proxy: extra route {route} is not accepted; {route.path} is on vLLM's unprotected list "
            "(docs/usage/security.md, 'API Key Authentication Limitations'): it answers without the API key"
        )
    if route.path in REFUSED_KEYED_PATHS:
        raise UserError(f"api proxy: extra route {route} is not accepted; {route.path} bypasses the key or changes the model (docs/usage/security.md)")
    if not route.path.startswith(API_KEY_PREFIXES):
        raise UserError(
            f"api proxy: extra route {route} is not accepted; vLLM's --api-key guards only {', '.join(p.rstrip('/') for p in API_KEY_PREFIXES)}, "
            "so a route elsewhere would be served without the key"
        )


class ProxyConfigError(UserError):
    """A proxy setting its rules refuse; ``field`` is the :class:`ApiProxyConfig` field (or ``pre_stop_sleep_s``, ``image``)."""

    def __init__(self, field: str, message: str) -> None:
        """``field`` names the refused setting (see the class); ``message`` is the whole error text."""
        self.field = field
        super().__init__(message)


def _whole(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ProxyConfigError(name, f"api proxy: {name} {value!r} is not accepted; expected a whole number from {low} to {high}")
    return value


@dataclass(frozen=True, kw_only=True)
class ApiProxyConfig:
    """Everything the proxy's nginx.conf depends on (validated when built)."""

    max_model_len: int
    """Longest context in tokens (the engine's ``--max-model-len``); sizes the body limit."""
    max_generation_s: int = 1800
    """Longest generation in seconds (a non-streamed answer sends nothing until it is done);
    the upstream read timeout is this plus :data:`READ_TIMEOUT_MARGIN_S` (``servingMaxGenerationSeconds``' default)."""
    drain_s: int = 1800
    """Seconds in-flight requests may take to finish after the graceful stop (``worker_shutdown_timeout``); the drain
    window of the stop sequence (:class:`kimi_k3.serving.drain.DrainPlan` ``drain_s``, ``servingDrainSeconds``' default)."""
    inline_media_bytes: int = 0
    """Body bytes allowed on top of the text bound for base64 media (``data:`` URLs); 0 = text only."""
    extra_routes: tuple[ApiRoute, ...] = ()
    """Routes allowed besides :data:`DEFAULT_ROUTES` (each vetted by :func:`check_extra_route`)."""
    api_port: int = catalog.API_PORT
    """The Service's port, owned by the proxy."""
    engine_port: int = ENGINE_PORT
    """vLLM's loopback port."""
    probe_port: int = PROBE_PORT
    """Probe server port (kubelet probes, NLB health check)."""
    metrics_port: int = METRICS_PORT
    """Metrics server port (Prometheus from the monitoring namespace)."""
    cpu: int = 1
    """Whole CPUs of the container (requests = limits); one nginx worker per CPU."""
    worker_connections: int = 2048
    """Connection slots per worker; a proxied request holds two (client and upstream). Sizes the memory limit
    (:func:`kimi_k3.serving.proxy_edge.memory_limit_mib`)."""
    check_api_key: bool = True
    """nginx checks the bearer key before it reads a body (the digest from the API-key Secret, mounted at
    :data:`kimi_k3.serving.proxy_edge.KEY_DIR`); off only for a server without a key."""
    limits: EdgeLimits = field(default_factory=EdgeLimits)
    """Timeouts and per-address limits of the API port (:class:`kimi_k3.serving.proxy_edge.EdgeLimits`)."""
    behind_router: bool = False
    """The routing tier sends every request (:mod:`kimi_k3.serving.router`): the per-address limits key on the client address the
    router appended to ``X-Forwarded-For`` (:func:`kimi_k3.serving.proxy_edge.real_ip_lines`), not on the router's own."""

    def __post_init__(self) -> None:
        if not isinstance(self.behind_router, bool):
            raise ProxyConfigError("behind_router", f"api proxy: behind_router {self.behind_router!r} is not accepted; expected true or false")
        if not isinstance(self.check_api_key, bool):
            raise ProxyConfigError("check_api_key", f"api proxy: check_api_key {self.check_api_key!r} is not accepted; expected true or false")
        if not isinstance(self.limits, EdgeLimits):
            raise ProxyConfigError("limits", f"api proxy: limits {self.limits!r} is not accepted; expected an EdgeLimits")
        _whole("max_model_len", self.max_model_len, 1024, 1_048_576)
        _whole("max_generation_s", self.max_generation_s, 60, 86_400)
        _whole("drain_s", self.drain_s, 1, 3600)
        _whole("inline_media_bytes", self.inline_media_bytes, 0, 512 * 1024 * 1024)
        _whole("cpu", self.cpu, 1, 8)
        _whole("worker_connections", self.worker_connections, 256, 65_536)
        try:
            proxy_edge.memory_limit_mib(self.cpu, self.worker_connections)
        except EdgeError as err:
            raise ProxyConfigError(err.field, str(err)) from None
        ports = {}
        for name in ("api_port", "engine_port", "probe_port", "metrics_port"):
            ports[name] = _whole(name, getattr(self, name), 1024, 65_535)
        if len(set(ports.values())) != len(ports):
            raise UserError(f"api proxy: ports must differ; got {', '.join(f'{k}={v}' for k, v in ports.items())}")
        if isinstance(self.extra_routes, (str, ApiRoute)) or not all(isinstance(r, ApiRoute) for r in self.extra_routes):
            raise UserError(f"api proxy: extra_routes {self.extra_routes!r} is not accepted; expected a tuple of ApiRoute")
        seen = set(DEFAULT_ROUTES)
        for route in self.extra_routes:
            if route in seen:
                raise UserError(f"api proxy: extra route {route} is not accepted; it is already allowed")
            check_extra_route(route)
            seen.add(route)

    @property
    def routes(self) -> tuple[ApiRoute, ...]:
        """Every allowed route: the defaults, then the extras."""
        return DEFAULT_ROUTES + tuple(self.extra_routes)

    @property
    def max_body_bytes(self) -> int:
        """``client_max_body_size``: ``max_model_len × BODY_BYTES_PER_TOKEN + inline_media_bytes``."""
        return self.max_model_len * BODY_BYTES_PER_TOKEN + self.inline_media_bytes

    @property
    def upstream_read_timeout_s(self) -> int:
        """``proxy_read_timeout`` of the API routes: longer than the longest generation."""
        return self.max_generation_s + READ_TIMEOUT_MARGIN_S


# --- the config file ------------------------------------------------------------


def _method_guard(methods: list[str]) -> str:
    if len(methods) == 1:
        return f"if ($request_method != {methods[0]}) {{ {_NOT_FOUND} }}"
    return f"if ($request_method !~ ^({'|'.join(methods)})$) {{ {_NOT_FOUND} }}"


def render_nginx_conf(config: ApiProxyConfig) -> str:
    """The proxy's complete ``nginx.conf`` (loads no module; includes one file only: the key's digest from the
    API-key Secret, when the key is checked, :mod:`kimi_k3.serving.proxy_edge`).

    Deterministic: the same config gives the same bytes (the ConfigMap, and
    :func:`config_checksum`, depend on nothing else).
    """
    upstream = f"http://{ENGINE_HOST}:{config.engine_port}"
    methods_by_path: dict[str, list[str]] = {}
    for route in config.routes:
        methods_by_path.setdefault(route.path, []).append(route.method)
    api_locations = []
    for path, methods in methods_by_path.items():
        api_locations += [
            f"        location = {path} {{",
            f"            {_method_guard(sorted(methods))}",
            *(f"            {line}" for line in proxy_edge.key_guard(config.check_api_key)),
            # A fixed URI: vLLM receives exactly the allowlisted path (query string kept).
            f"            proxy_pass {upstream}{path};",
            "        }",
        ]
    lines = [
        "# nginx.conf of the kimi-k3 API proxy, rendered by components/serving/api_proxy.py; do not edit.",
        "# Allowlist in front of vLLM (vLLM's --api-key guards only /v1, /v2, /inference:",
        "# vllm-project/vllm docs/usage/security.md, 'API Key Authentication Limitations').",
        "daemon off;",
        f"worker_processes {config.cpu};",
        f"pid {RUNTIME_DIR}/nginx.pid;",
        "error_log stderr notice;",
        f"worker_rlimit_nofile {proxy_edge.rlimit_nofile(config.worker_connections)};",
        "# Graceful stop (SIGQUIT): listeners close at once, in-flight requests get this long.",
        f"worker_shutdown_timeout {config.drain_s}s;",
        "",
        "events {",
        f"    worker_connections {config.worker_connections};",
        "}",
        "",
        "http {",
        "    server_tokens off;",
        "    default_type application/json;",
        "    charset off;",
        "    log_format api escape=json '{\"time\":\"$time_iso8601\",\"remote\":\"$remote_addr\",\"port\":\"$server_port\",'",
        "        '\"request\":\"$request\",\"status\":$status,\"bytes_sent\":$bytes_sent,\"request_length\":$request_length,'",
        "        '\"request_time\":$request_time,\"upstream_time\":\"$upstream_response_time\",\"upstream_status\":\"$upstream_status\"}';",
        "    access_log /dev/stdout api;",
        "",
        "    # Read-only root filesystem: every path nginx writes is in the emptyDir.",
        f"    client_body_temp_path {RUNTIME_DIR}/client_body;",
        f"    proxy_temp_path {RUNTIME_DIR}/proxy;",
        f"    fastcgi_temp_path {RUNTIME_DIR}/fastcgi;",
        f"    uwsgi_temp_path {RUNTIME_DIR}/uwsgi;",
        f"    scgi_temp_path {RUNTIME_DIR}/scgi;",
        "",
        "    # Clients.",
        f"    client_max_body_size {config.max_body_bytes};",
        *proxy_edge.http_lines(config.cpu, config.worker_connections, config.limits, config.check_api_key),
        "",
        "    # Upstream: vLLM on loopback, one connection per request (no keepalive race with",
        "    # uvicorn's short keep-alive), never retried (a generation is not idempotent).",
        "    proxy_http_version 1.1;",
        "    proxy_connect_timeout 5s;",
        "    proxy_send_timeout 60s;",
        f"    proxy_read_timeout {config.upstream_read_timeout_s}s;",
        "    proxy_next_upstream off;",
        "    proxy_redirect off;",
        "    # Server-sent events: forward every chunk as it arrives; upstream cannot re-enable buffering.",
        "    proxy_buffering off;",
        "    proxy_ignore_headers X-Accel-Redirect X-Accel-Expires X-Accel-Limit-Rate X-Accel-Buffering X-Accel-Charset;",
        "    # The client's own headers (Authorization included) pass through untouched.",
        "    proxy_set_header Host $host;",
        "    proxy_set_header X-Forwarded-For $remote_addr;",
        "",
        "    # API: the allowlist; anything else is a 404 that never reaches vLLM.",
        "    server {",
        f"        listen {config.api_port} default_server;",
        *(proxy_edge.real_ip_lines() if config.behind_router else []),
        *proxy_edge.api_server_lines(config.cpu, config.worker_connections, config.limits, config.check_api_key),
        "        # Errors nginx answers itself: JSON in vLLM's error shape (proxy_errors.py).",
        *proxy_errors.error_page_lines(),
        *api_locations,
        *_NOT_FOUND_ELSEWHERE,
        "    }",
        "",
        "    # Probes (kubelet, NLB health check): vLLM's /health and the proxy's own liveness.",
        "    server {",
        f"        listen {config.probe_port};",
        "        access_log off;",
        *proxy_errors.error_page_lines(),
        f"        location = {HEALTH_PATH} {{",
        f"            {_method_guard(['GET'])}",
        "            proxy_read_timeout 30s;",
        f"            proxy_pass {upstream}{HEALTH_PATH};",
        "        }",
        f"        location = {LIVEZ_PATH} {{",
        f"            {_method_guard(['GET'])}",
        "            return 200 '{\"status\":\"ok\"}';",
        "        }",
        *_NOT_FOUND_ELSEWHERE,
        "    }",
        "",
        "    # Metrics (Prometheus from the monitoring namespace): GET /metrics only.",
        "    server {",
        f"        listen {config.metrics_port};",
        "        access_log off;",
        *proxy_errors.error_page_lines(),
        f"        location = {METRICS_PATH} {{",
        f"            {_method_guard(['GET'])}",
        "            proxy_read_timeout 30s;",
        f"            proxy_pass {upstream}{METRICS_PATH};",
        "        }",
        *_NOT_FOUND_ELSEWHERE,
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def config_map_data(config: ApiProxyConfig) -> dict[str, str]:
    """``data`` of the proxy's ConfigMap: one key, :data:`CONFIG_FILE`."""
    return {CONFIG_FILE: render_nginx_conf(config)}


def config_checksum(config: ApiProxyConfig) -> str:
    """sha256 of the rendered config: put it in a pod-template annotation so a config change rolls the pods
    (nginx reads its config once; a ConfigMap update alone would not reach it)."""
    return hashlib.sha256(render_nginx_conf(config).encode()).hexdigest()


# --- the pod pieces ---------------------------------------------------------------

CONTAINER_NAME = "api-proxy"
"""Name of the sidecar container."""

CONFIG_VOLUME = "api-proxy-config"
"""Volume holding the ConfigMap."""

TMP_VOLUME = "api-proxy-tmp"
"""The proxy's writable ``emptyDir`` (:data:`RUNTIME_DIR`)."""

KEY_VOLUME = "api-proxy-key"
"""The API-key Secret's key-check file (:data:`kimi_k3.serving.proxy_edge.KEY_FILE`), mounted at
:data:`kimi_k3.serving.proxy_edge.KEY_DIR`."""

WAIT_FOR_CHILD = """status=0
while :; do
  wait "$pid"; status=$?
  kill -0 "$pid" 2>/dev/null || break
done
exit "$status"
"""
"""How a stop wrapper waits: through every trapped signal until its child ``$pid`` has exited, then with its status."""

STOP_WRAPPER = """set -u
"$@" &
pid=$!
trap 'kill -QUIT "$pid" 2>/dev/null' TERM QUIT INT
""" + WAIT_FOR_CHILD
"""The container's PID 1: runs nginx and turns the kubelet's stop signal, whichever it is, into nginx's graceful SIGQUIT.

nginx stops gracefully only on SIGQUIT (SIGTERM is its fast stop, which cuts every stream).
The kubelet sends the container's stop signal: the image's ``STOPSIGNAL`` (SIGQUIT in
nginxinc/docker-nginx-unprivileged's Dockerfiles), else SIGTERM. That cannot be checked
offline for a mirrored image, and the pod field that would set it, ``lifecycle.stopSignal``,
is alpha behind the ``ContainerStopSignals`` feature gate in Kubernetes 1.33 and 1.34
(kubernetes/enhancements KEP-4960), which EKS does not enable. This wrapper makes the stop
graceful whatever the image says. ``wait`` returns early when a trapped signal arrives, so it
waits again until nginx has really exited, and exits with nginx's status."""

PORT_NAMES = {"api": "http", "probe": "probe", "metrics": "metrics"}
"""Container port names: ``http`` stays the Service's ``targetPort``; ``metrics`` is what the ServiceMonitor selects."""


def engine_bind_args(config: ApiProxyConfig) -> list[str]:
    """``vllm serve`` arguments that put vLLM behind the proxy (replace ``--host 0.0.0.0 --port 8000``)."""
    return ["--host", ENGINE_HOST, "--port", str(config.engine_port)]


def engine_url(config: ApiProxyConfig, path: str = HEALTH_PATH) -> str:
    """vLLM's own address for a path, e.g. for exec probes inside the engine container (loopback)."""
    return f"http://{ENGINE_HOST}:{config.engine_port}{path}"


def tmp_size_limit(config: ApiProxyConfig) -> str:
    """``sizeLimit`` of :data:`TMP_VOLUME`: room for 64 request bodies at the limit being buffered at once, at least 256 MiB."""
    mib = max(256, -(-config.max_body_bytes * 64 // (1024 * 1024)))
    return f"{mib}Mi"


def proxy_volumes(config: ApiProxyConfig, config_map_name: str, key_secret_name: str | None = None) -> list[k8s.core.v1.VolumeArgs]:
    """The ConfigMap volume (read-only files), the writable ``emptyDir`` and, when the key is checked, the key-check
    file of the API-key Secret ``key_secret_name``; add them to the pod's volumes."""
    if not isinstance(config_map_name, str) or not DNS_LABEL.match(config_map_name):
        raise UserError(f"api proxy: config_map_name {config_map_name!r} is not accepted; expected a DNS label")
    volumes = [
        k8s.core.v1.VolumeArgs(
            name=CONFIG_VOLUME,
            config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name=config_map_name, default_mode=0o444),
        ),
        k8s.core.v1.VolumeArgs(name=TMP_VOLUME, empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit=tmp_size_limit(config))),
    ]
    if config.check_api_key:
        if not isinstance(key_secret_name, str) or not DNS_LABEL.match(key_secret_name):
            raise UserError(f"api proxy: key_secret_name {key_secret_name!r} is not accepted; the key check needs the API-key Secret's name (a DNS label)")
        volumes.append(k8s.core.v1.VolumeArgs(
            name=KEY_VOLUME,
            secret=k8s.core.v1.SecretVolumeSourceArgs(
                secret_name=key_secret_name, default_mode=0o440,
                items=[k8s.core.v1.KeyToPathArgs(key=proxy_edge.KEY_FILE, path=proxy_edge.KEY_FILE)],
            ),
        ))
    return volumes


def container_resources(config: ApiProxyConfig) -> dict[str, str]:
    """CPU and memory of the sidecar (requests = limits): ``cpu`` whole CPUs, twice the worst case in memory
    (:func:`kimi_k3.serving.proxy_edge.memory_limit_mib`)."""
    return {"cpu": str(config.cpu), "memory": f"{proxy_edge.memory_limit_mib(config.cpu, config.worker_connections)}Mi"}


def proxy_command() -> list[str]:
    """The container's command: :data:`STOP_WRAPPER` running nginx on the rendered config (not the image's entrypoint scripts,
    which rewrite ``/etc/nginx``, read-only here)."""
    return ["/bin/sh", "-c", STOP_WRAPPER, "api-proxy", "nginx", "-e", "stderr", "-c", f"{CONFIG_DIR}/{CONFIG_FILE}"]


def proxy_container(config: ApiProxyConfig, *, pre_stop_sleep_s: int, image: str = PROXY_IMAGE) -> k8s.core.v1.ContainerArgs:
    """The sidecar: nginx with the rendered config, non-root, read-only root, every capability dropped.

    Stop sequence: the ``preStop`` sleep keeps the proxy serving while the NLB
    deregisters the pod (:mod:`kimi_k3.serving.drain`); then the kubelet sends the stop
    signal, :data:`STOP_WRAPPER` hands nginx SIGQUIT whatever that signal is, nginx closes
    its listeners and in-flight streams finish within ``drain_s``. The pod's grace
    period must cover ``pre_stop_sleep_s + drain_s``.

    Resources are requests = limits, so a Guaranteed engine container keeps its pod Guaranteed.

    :param pre_stop_sleep_s: seconds to keep serving after the pod is removed from endpoints.
    :param image: the nginx image (default :data:`PROXY_IMAGE`; use an ECR mirror of it in production).
    """
    _whole("pre_stop_sleep_s", pre_stop_sleep_s, 0, 3600)
    if not isinstance(image, str) or ("@sha256:" not in image and ":" not in image.rsplit("/", 1)[-1]):
        raise UserError(f"api proxy: image {image!r} must carry a tag or a digest")
    resources = container_resources(config)
    probe_port = config.probe_port
    return k8s.core.v1.ContainerArgs(
        name=CONTAINER_NAME,
        image=image,
        image_pull_policy="IfNotPresent",
        command=proxy_command(),
        ports=[
            k8s.core.v1.ContainerPortArgs(name=PORT_NAMES["api"], container_port=config.api_port, protocol="TCP"),
            k8s.core.v1.ContainerPortArgs(name=PORT_NAMES["probe"], container_port=probe_port, protocol="TCP"),
            k8s.core.v1.ContainerPortArgs(name=PORT_NAMES["metrics"], container_port=config.metrics_port, protocol="TCP"),
        ],
        resources=k8s.core.v1.ResourceRequirementsArgs(
            requests={**resources, "ephemeral-storage": tmp_size_limit(config)},
            limits={**resources, "ephemeral-storage": tmp_size_limit(config)},
        ),
        # Ready = vLLM answers /health through the proxy; alive = nginx itself answers.
        readiness_probe=k8s.core.v1.ProbeArgs(
            http_get=k8s.core.v1.HTTPGetActionArgs(path=HEALTH_PATH, port=PORT_NAMES["probe"]),
            period_seconds=10, timeout_seconds=5, failure_threshold=3, success_threshold=1,
        ),
        liveness_probe=k8s.core.v1.ProbeArgs(
            http_get=k8s.core.v1.HTTPGetActionArgs(path=LIVEZ_PATH, port=PORT_NAMES["probe"]),
            period_seconds=10, timeout_seconds=5, failure_threshold=6,
        ),
        lifecycle=k8s.core.v1.LifecycleArgs(pre_stop=k8s.core.v1.LifecycleHandlerArgs(sleep=k8s.core.v1.SleepActionArgs(seconds=pre_stop_sleep_s))),
        security_context=container_security_context(PROXY_RUN_AS_USER),
        volume_mounts=[
            k8s.core.v1.VolumeMountArgs(name=CONFIG_VOLUME, mount_path=CONFIG_DIR, read_only=True),
            k8s.core.v1.VolumeMountArgs(name=TMP_VOLUME, mount_path=RUNTIME_DIR),
            *([k8s.core.v1.VolumeMountArgs(name=KEY_VOLUME, mount_path=proxy_edge.KEY_DIR, read_only=True)] if config.check_api_key else []),
        ],
    )


def ingress_rules(
    config: ApiProxyConfig,
    *,
    api_peers: list[k8s.networking.v1.NetworkPolicyPeerArgs],
    metrics_namespace: str,
    health_check_peers: list[k8s.networking.v1.NetworkPolicyPeerArgs] | None = None,
) -> list[k8s.networking.v1.NetworkPolicyIngressRuleArgs]:
    """Ingress of the server pods, port by port: API to its clients, metrics to the monitoring namespace only.

    The probe port needs no rule for the kubelet: the AWS VPC CNI network policy agent
    always admits traffic from the node's own IP ("This ensures kubelet liveness/readiness
    probes are never blocked", aws/aws-network-policy-agent
    ``pkg/fwruleprocessor/fw_rule_processor.go``, commit c8619c05). Pass
    ``health_check_peers`` (the NLB's subnets or the VPC CIDR) when an NLB health-checks it.
    The engine's port is on loopback and needs nothing.
    """
    if not DNS_LABEL.match(metrics_namespace or ""):
        raise UserError(f"api proxy: metrics_namespace {metrics_namespace!r} is not accepted; expected a DNS label")
    if not api_peers:
        raise UserError("api proxy: api_peers is empty; name who may call the API (an empty 'from' would admit everyone)")
    np = k8s.networking.v1
    rules = [
        np.NetworkPolicyIngressRuleArgs(from_=list(api_peers), ports=[np.NetworkPolicyPortArgs(port=config.api_port, protocol="TCP")]),
        np.NetworkPolicyIngressRuleArgs(
            from_=[np.NetworkPolicyPeerArgs(namespace_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"kubernetes.io/metadata.name": metrics_namespace}))],
            ports=[np.NetworkPolicyPortArgs(port=config.metrics_port, protocol="TCP")],
        ),
    ]
    if health_check_peers:
        rules.append(np.NetworkPolicyIngressRuleArgs(from_=list(health_check_peers), ports=[np.NetworkPolicyPortArgs(port=config.probe_port, protocol="TCP")]))
    return rules
