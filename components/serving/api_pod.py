"""The API side of a serving pod: the proxy sidecar, the engine behind it, its probes and its stop sequence.

:class:`~kimi_k3.serving.vllm.VllmServer` and the leader of
:class:`~kimi_k3.serving.lws.VllmLeaderWorkerSet` run two containers:

* ``api-proxy`` (:mod:`kimi_k3.serving.api_proxy`): nginx owns the pod's ports: the API
  (the Service's ``targetPort`` ``http``), the probe port (the NLB health check) and the
  metrics port (Prometheus from the monitoring namespace);
* ``vllm``: the engine, bound to ``127.0.0.1:8001`` (:func:`api_proxy.engine_bind_args`),
  so nothing outside the pod reaches vLLM's unprotected routes.

Probes. The kubelet probes the pod IP, never loopback, so the engine's own probes run
inside the engine container as ``exec`` probes against ``127.0.0.1``:

* startup: ``GET /health`` until the engine has loaded (the contract's start-up budget);
* liveness: ``GET /health``. vLLM 0.27.1 answers it from the API server without asking
  the engine core (``vllm/entrypoints/serve/instrumentator/health.py`` →
  ``AsyncLLM.check_health``, which only reads the ``errored`` flag), so a busy engine
  does not fail it; it turns 503 once the engine is dead, and vLLM declares a step dead
  after ``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS`` (300 s by default, 1800 s in the recipe's
  pipeline-parallel profile; the multiprocessing executor and the Ray V2 executor built
  on it wait that long for a step). The failure window is sized from that longest step
  plus :data:`LIVENESS_MARGIN_S`, so whatever answers ``/health`` (the Python API server,
  or the Rust frontend ``VLLM_USE_RUST_FRONTEND=1`` runs, whose health handler is compiled
  into the wheel and not readable here) can stall for as long as one step legitimately
  runs without a restart that would cost the node an hour of loading; a wedged engine
  is still restarted within that window after vLLM gives up on it;
* readiness: the served model is listed by ``GET /v1/models`` (with the API key), every
  15 s.

The proxy container has its own liveness (``/livez``, nginx itself) and readiness
(``/health`` through the proxy: the engine answers behind it).

Resources: the sidecar's CPU and memory come out of the engine container's share
(:func:`engine_share`), so the pod still fits the node and every container has
requests = limits (Guaranteed QoS).

A pod-template annotation carries the sha256 of the rendered ``nginx.conf``
(:data:`CONFIG_CHECKSUM_ANNOTATION`): nginx reads its config once, so a change must
roll the pods.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.serving import api_proxy, nlb, proxy_edge, router_edge
from kimi_k3.serving.api_proxy import ApiProxyConfig
from kimi_k3.serving.block_end import BlockEndPlan, block_end_plan
from kimi_k3.serving.drain import DrainPlan
from kimi_k3.serving.front import ServingFront

if TYPE_CHECKING:
    from kimi_k3.serving.args import VllmServingArgs

CONFIG_CHECKSUM_ANNOTATION = "kimi-k3.io/api-proxy-config-sha256"
"""Pod-template annotation holding :func:`api_proxy.config_checksum`."""

STARTUP_PERIOD_S = 10
"""Period of the engine's startup probe."""

LIVENESS_PERIOD_S = 30
"""Period of the engine's liveness probe."""

LIVENESS_TIMEOUT_S = 10
"""How long one liveness ``GET /health`` may take (a Python start plus a loopback request)."""

LIVENESS_MARGIN_S = 120
"""Seconds the liveness window adds to the engine's longest step: vLLM's own reaction to the step timeout
(failing the engine, the API server's watchdog noticing within 5 s) and a couple of missed probes."""

HEALTH_SCRIPT = """import sys, urllib.request
try:
    with urllib.request.urlopen("http://127.0.0.1:{port}{path}", timeout={timeout}) as resp:
        sys.exit(0 if resp.status == 200 else 1)
except Exception as err:
    print(err, file=sys.stderr)
    sys.exit(1)
"""
"""Exec probe: the engine's ``/health`` on loopback (the kubelet cannot reach 127.0.0.1 of the pod)."""


def front(args: VllmServingArgs) -> ServingFront:
    """The serving front of a component (:mod:`kimi_k3.serving.front`): its ``front``, or the defaults for its exposure."""
    return args.front if args.front is not None else ServingFront(behind_nlb=args.exposure in nlb.EXPOSURE_SCHEMES)


def proxy_config(args: VllmServingArgs) -> ApiProxyConfig:
    """The proxy config of a serving component: the one builder the ConfigMap, the pod and the tests use (the front's
    options, the contract's context length and port, a key check when there is a key, the routing tier when there is one)."""
    return front(args).proxy_config(
        max_model_len=args.contract.engine.max_model_len, api_port=args.contract.api.port,
        check_api_key=args.api_key is not None, behind_router=args.routing is not None,
    )


def nlb_annotations(args: VllmServingArgs, proxy: ApiProxyConfig, *, pre_stop_sleep_s: int | None = None, **options: Any) -> dict[str, str]:
    """The NLB annotations of a serving component's Service (:func:`kimi_k3.serving.nlb.nlb_annotations`), with the front's listener.

    ``pre_stop_sleep_s``: the preStop of the pods the Service selects (the router's with the routing tier); ``None``: the API pods'."""
    listener = front(args)
    return nlb.nlb_annotations(
        proxy, scheme=nlb.scheme_of(args.exposure), pre_stop_sleep_s=listener.drain.pre_stop_sleep_s if pre_stop_sleep_s is None else pre_stop_sleep_s,
        idle_timeout_s=listener.nlb_idle_timeout_s, tls_certificate_arn=listener.tls_certificate_arn, **options,
    )


def drain_plan(args: VllmServingArgs) -> DrainPlan:
    """The stop sequence of a serving component's API pods (:mod:`kimi_k3.serving.drain`), the front's."""
    return front(args).drain


def block_end(args: VllmServingArgs) -> BlockEndPlan | None:
    """The block-end drain of the component's pods in this run (:mod:`kimi_k3.serving.block_end`); ``None`` without a block."""
    return None if args.block_end is None else block_end_plan(drain_plan(args), args.block_end)


def declared_replicas(args: VllmServingArgs) -> int:
    """Replicas the workload declares: ``args.replicas``, or 0 once the run is past the block-end drain's stop time."""
    plan = block_end(args)
    return args.replicas if plan is None or plan.serving else 0


def config_map_name(name: str) -> str:
    """Name of the proxy's ConfigMap for the serving component ``name``."""
    return f"{name}-api-proxy"


def api_key_secret_name(name: str) -> str:
    """Name of the API-key Secret of the serving component ``name``: ``key`` (vLLM's ``VLLM_API_KEY``) and the proxy's
    key-check file (:data:`kimi_k3.serving.proxy_edge.KEY_FILE`, the key's MD5 digest) and the router's digest file
    (:data:`kimi_k3.serving.router_edge.KEY_DIGEST_FILE`, its SHA-256)."""
    return f"{name}-api-key"


def api_key_secret_data(api_key: pulumi.Input[str]) -> dict[str, pulumi.Output[str]]:
    """``stringData`` of the API-key Secret: the key for vLLM, its digest line for the proxy and its SHA-256 for the routing tier,
    all Pulumi secrets."""
    key = pulumi.Output.secret(api_key)
    return {"key": key, proxy_edge.KEY_FILE: key.apply(proxy_edge.key_check_file), router_edge.KEY_DIGEST_FILE: key.apply(router_edge.key_digest)}


def config_map(name: str, args: VllmServingArgs, labels: dict[str, str], opts: pulumi.ResourceOptions) -> k8s.core.v1.ConfigMap:
    """The ConfigMap holding the rendered ``nginx.conf`` (immutable: a change rolls the pods through the checksum)."""
    return k8s.core.v1.ConfigMap(
        config_map_name(name),
        metadata=k8s.meta.v1.ObjectMetaArgs(name=config_map_name(name), namespace=args.namespace, labels=labels),
        data=api_proxy.config_map_data(proxy_config(args)),
        opts=opts,
    )


def engine_share(cpu: int, memory_gib: int, config: ApiProxyConfig) -> tuple[int, str]:
    """The engine container's CPU and memory once the sidecar's are taken from the node's share."""
    proxy = api_proxy.container_resources(config)
    return cpu - int(proxy["cpu"]), f"{memory_gib * 1024 - int(proxy['memory'].removesuffix('Mi'))}Mi"


def _exec(script: str) -> k8s.core.v1.ExecActionArgs:
    return k8s.core.v1.ExecActionArgs(command=["python3", "-c", script])


def liveness_failure_threshold(longest_step_s: int) -> int:
    """Failures in a row before the kubelet restarts the engine: the window covers the longest step plus the margin."""
    return math.ceil((longest_step_s + LIVENESS_MARGIN_S) / LIVENESS_PERIOD_S)


def engine_probes(args: VllmServingArgs, readiness_script: str, extra_startup_s: int = 0) -> dict[str, k8s.core.v1.ProbeArgs]:
    """Startup, liveness and readiness of the engine container, all ``exec`` against loopback (see the module docstring)."""
    contract = args.contract
    config = proxy_config(args)
    health = HEALTH_SCRIPT.format(port=config.engine_port, path=contract.api.health_path, timeout=LIVENESS_TIMEOUT_S - 2)
    return {
        "startup_probe": k8s.core.v1.ProbeArgs(
            exec_=_exec(health),
            period_seconds=STARTUP_PERIOD_S,
            timeout_seconds=LIVENESS_TIMEOUT_S,
            failure_threshold=contract.probe_failure_threshold(STARTUP_PERIOD_S, margin_s=600 + extra_startup_s),
        ),
        "liveness_probe": k8s.core.v1.ProbeArgs(
            exec_=_exec(health),
            period_seconds=LIVENESS_PERIOD_S,
            timeout_seconds=LIVENESS_TIMEOUT_S,
            failure_threshold=liveness_failure_threshold(contract.execute_model_timeout_s),
        ),
        "readiness_probe": k8s.core.v1.ProbeArgs(
            exec_=_exec(readiness_script),
            period_seconds=15,
            timeout_seconds=10,
            failure_threshold=2,
            success_threshold=1,
        ),
    }


def engine_args(args: VllmServingArgs, model_path: str) -> list[str]:
    """``vllm serve`` arguments behind the proxy: bound to loopback, draining for ``drain_s`` on SIGTERM."""
    config = proxy_config(args)
    host, port = api_proxy.ENGINE_HOST, config.engine_port
    return args.contract.vllm_args(model_path, bind=(host, port), shutdown_timeout_s=front(args).drain_s)


def engine_lifecycle(args: VllmServingArgs) -> k8s.core.v1.LifecycleArgs:
    """The engine's ``preStop``: a few seconds longer than the proxy's (:data:`kimi_k3.serving.drain.ENGINE_LAG_S`)."""
    return k8s.core.v1.LifecycleArgs(pre_stop=k8s.core.v1.LifecycleHandlerArgs(sleep=k8s.core.v1.SleepActionArgs(seconds=drain_plan(args).engine_pre_stop_s)))


def sidecar(args: VllmServingArgs) -> k8s.core.v1.ContainerArgs:
    """The ``api-proxy`` container (its ``preStop`` is the drain plan's; it gets SIGQUIT after it)."""
    return api_proxy.proxy_container(proxy_config(args), pre_stop_sleep_s=drain_plan(args).pre_stop_sleep_s, image=args.proxy_image)


def volumes(name: str, args: VllmServingArgs) -> list[k8s.core.v1.VolumeArgs]:
    """The proxy's ConfigMap volume and its writable ``emptyDir``."""
    return api_proxy.proxy_volumes(proxy_config(args), config_map_name(name), api_key_secret_name(name) if args.api_key is not None else None)


def template_annotations(args: VllmServingArgs) -> dict[str, str]:
    """Pod-template annotations: the config checksum (a changed ``nginx.conf`` rolls the pods)."""
    return {CONFIG_CHECKSUM_ANNOTATION: api_proxy.config_checksum(proxy_config(args))}


def scrape_annotations(args: VllmServingArgs) -> dict[str, str]:
    """``prometheus.io/*`` annotations (the proxy's metrics port), unless a ServiceMonitor scrapes the pods."""
    if args.service_monitor:
        return {}
    config = proxy_config(args)
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(config.metrics_port), "prometheus.io/path": api_proxy.METRICS_PATH}


__all__ = [
    "CONFIG_CHECKSUM_ANNOTATION",
    "HEALTH_SCRIPT",
    "LIVENESS_MARGIN_S",
    "LIVENESS_PERIOD_S",
    "api_key_secret_data",
    "api_key_secret_name",
    "block_end",
    "config_map",
    "config_map_name",
    "declared_replicas",
    "drain_plan",
    "engine_args",
    "engine_lifecycle",
    "engine_probes",
    "engine_share",
    "front",
    "liveness_failure_threshold",
    "proxy_config",
    "scrape_annotations",
    "sidecar",
    "template_annotations",
    "volumes",
]
