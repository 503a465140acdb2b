"""The arguments every vLLM serving component takes, and the checks they share.

:class:`VllmServingArgs` is what :class:`~kimi_k3.serving.vllm.VllmServer`
(a Deployment, one node per replica) and
:class:`~kimi_k3.serving.lws.VllmLeaderWorkerSet` (a group of nodes per replica)
have in common; :func:`validate_serving_args` collects what neither can deploy, before
anything is declared.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import pulumi

from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.core import catalog
from kimi_k3.core.formats import DNS_LABEL
from kimi_k3.errors import Problems, UserError
from kimi_k3.serving import api_pod, nlb
from kimi_k3.serving.api_proxy import PROXY_IMAGE, ApiRoute, ProxyConfigError, check_extra_route
from kimi_k3.serving.block_end import BlockEnd
from kimi_k3.serving.contracts import EXPOSURES, ContractError, ServingContract
from kimi_k3.serving.drain import DEFAULT_PRE_STOP_S, DrainError
from kimi_k3.serving.pod_kit import AWS_CLI_IMAGE, node_share
from kimi_k3.serving.router import ConversationRouting
from kimi_k3.weights.serving_pod import ServingStartup


@dataclass(frozen=True)
class VllmServingArgs:
    """Inputs shared by :class:`VllmServer` and :class:`~kimi_k3.serving.lws.VllmLeaderWorkerSet`."""

    contract: ServingContract
    """Image, weights, API and engine profile (see :mod:`kimi_k3.serving.contracts`)."""
    api_key: pulumi.Input[str] | None = None
    """API key clients send as ``Authorization: Bearer``; a Pulumi secret. Required unless ``require_api_key`` is false."""
    require_api_key: bool = True
    """Refuse to deploy without an API key (always true for ``public`` exposure)."""
    hugging_face_token: pulumi.Input[str] | None = None
    """Hugging Face token (Pulumi secret) for gated repositories; only used by the download init container."""
    cluster_name: pulumi.Input[str] | None = None
    """EKS cluster name; required when the weights come from S3 (Pod Identity association)."""
    aws_region: pulumi.Input[str] | None = None
    """Region of the weights bucket (same as the cluster); required when the weights come from S3."""
    aws_partition: str = "aws"
    """AWS partition used in the S3 ARNs of the weights policy."""
    weights_kms_key_arn: pulumi.Input[str] | None = None
    """KMS key of an SSE-KMS weights bucket (adds ``kms:Decrypt`` on that key only)."""
    namespace: str = "kimi-serving"
    """Namespace created for the server."""
    instance_type: str = catalog.DEFAULT_GPU_INSTANCE_TYPE
    """GPU instance type of the Capacity Block nodes (sizes CPU, memory and GPUs)."""
    replicas: int = 1
    """Model replicas: one pod each for :class:`VllmServer`, one group of ``nodes_per_replica`` pods each for a LeaderWorkerSet."""
    exposure: str = "cluster"
    """One of :data:`EXPOSURES`."""
    allowed_cidrs: tuple[str, ...] = ()
    """Client CIDRs allowed through the NLB (``loadBalancerSourceRanges`` and NetworkPolicy). Required for ``public``."""
    vpc_cidr: pulumi.Input[str] | None = None
    """VPC CIDR (NLB nodes reach the pods from it); required for NLB exposures."""
    client_namespaces: tuple[str, ...] = ()
    """Namespaces whose pods may call the API in-cluster; empty means every namespace."""
    metrics_namespace: str = "monitoring"
    """Namespace of the Prometheus that scrapes ``/metrics``."""
    service_monitor: bool = False
    """Render a ServiceMonitor (Prometheus Operator CRDs must be installed); else ``prometheus.io/*`` pod annotations."""
    service_monitor_labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels on the ServiceMonitor (e.g. ``release: kube-prometheus-stack``)."""
    tls_certificate_arn: str | None = None
    """ACM certificate: the NLB listener then terminates TLS (https endpoint)."""
    shm_size_gib: int = 64
    """Size of the ``/dev/shm`` memory volume (counted in the memory limit)."""
    reserved_cpu: int = 8
    """vCPUs left to the kubelet, system daemons and DaemonSets on each GPU node."""
    reserved_memory_gib: int | None = None
    """Host memory left to the system; default 5% of the node (at least 32 GiB)."""
    cache_size_gib: int = 200
    """Size limit of the writable HOME (compile and JIT caches)."""
    weights_staging_timeout_s: int = 7200
    """Time allowed to copy and verify the weights (Deployment progress deadline; how long a group leader waits for its workers)."""
    pre_stop_sleep_s: int = DEFAULT_PRE_STOP_S
    """Seconds the API proxy keeps serving after the pod leaves the endpoints, before its graceful stop: the NLB keeps
    sending new connections for about two minutes (behind an NLB at least :data:`kimi_k3.serving.drain.MIN_PRE_STOP_BEHIND_NLB_S`);
    the engine's preStop is a few seconds longer (:mod:`kimi_k3.serving.drain`)."""
    drain_s: int = 1800
    """Seconds in-flight requests may take to finish once the pod stops: the proxy's graceful-stop bound and
    vLLM's ``--shutdown-timeout`` (vLLM's default, 0, aborts them). Cover the longest generation clients run."""
    termination_grace_period_s: int | None = None
    """``terminationGracePeriodSeconds``; ``None`` = the least that covers preStop + drain + margin
    (:attr:`kimi_k3.serving.drain.DrainPlan.minimum_grace_s`); a smaller value is refused."""
    max_generation_s: int = 1800
    """Longest a request may stay silent (a non-streamed answer sends nothing until it is done): the proxy's
    upstream read timeout and the floor of the NLB's idle timeout."""
    extra_routes: tuple[str, ...] = ()
    """Routes the API proxy forwards besides the OpenAI defaults, ``"METHOD /exact/path"`` (vetted by
    :func:`kimi_k3.serving.api_proxy.check_extra_route`)."""
    inline_media_bytes: int = 0
    """Request-body bytes allowed on top of the text bound for inline (base64) media; 0 with text-only serving."""
    nlb_idle_timeout_s: int | None = None
    """Idle timeout of the NLB's TCP listener (``None``: :data:`kimi_k3.serving.nlb.DEFAULT_IDLE_TIMEOUT_S`)."""
    proxy_image: str = PROXY_IMAGE
    """Image of the API proxy sidecar (nginx-unprivileged pinned by digest; mirror it into ECR for production)."""
    proxy_cpu: int = 1
    """Whole CPUs of the proxy sidecar (taken from the engine's share of the node)."""
    init_image: str = AWS_CLI_IMAGE
    """Image of the S3 staging init container (needs ``aws``, ``sh``, ``sha256sum``, ``split``)."""
    startup: ServingStartup | None = None
    """Time-to-serve wiring (:class:`kimi_k3.weights.serving_pod.ServingStartup`): node-side sync at line rate,
    node-local weights (a StatefulSet), compile-cache restore and the warm-up-then-save sidecar. ``None``: the plain pod."""
    block_end: BlockEnd | None = None
    """The Capacity Block's end and the run's ``now``: every replica stops taking new work and drains before EKS scales the
    nodes to 0 (:mod:`kimi_k3.serving.block_end`; past the stop time the workload is declared with no replicas). ``None``: no
    block-end step."""
    routing: ConversationRouting | None = None
    """The routing tier in front of the replicas (:mod:`kimi_k3.serving.router`): Envoy pods that keep each conversation on
    its replica; needs two or more replicas. ``None``: the Service reaches the replicas directly."""
    await_rollout: bool = False
    """Make ``pulumi up`` wait for the pods to be ready (off: a block may start days later, loads take an hour)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels on every Kubernetes object."""
    reservation: CapacityBlockFacts | None = None
    """The Capacity Block the replicas run on (``lookup_capacity_block``); when given, ``replicas`` times the nodes
    of one replica must fit its instance count and ``instance_type`` must be its type. ``None``: not checked."""


def validate_serving_args(name: str, args: VllmServingArgs, problems: Problems) -> int | None:
    """Add to ``problems`` what no serving component can deploy; return the nodes one replica spans (``None`` if unknown)."""
    if not isinstance(args.contract, ServingContract):
        problems.reject("contract", type(args.contract).__name__, "expected a ServingContract")
        return None
    if not DNS_LABEL.match(name) or len(name) > 40:
        problems.reject("name", name, "expected a DNS label of at most 40 characters (it names the Kubernetes objects)")
    if not DNS_LABEL.match(args.namespace) or len(args.namespace) > 63:
        problems.reject("namespace", args.namespace, "expected a DNS label")
    nodes: int | None = None
    if args.instance_type not in catalog.INSTANCE_TYPES:
        problems.reject("instance_type", args.instance_type, f"known: {', '.join(catalog.INSTANCE_TYPES)}")
    else:
        instance = catalog.INSTANCE_TYPES[args.instance_type]
        try:
            nodes = args.contract.nodes_per_replica(instance.gpus)  # TP must fill whole nodes
        except ContractError as err:
            problems.adopt(f"contract.{err.field}", err)
        cpu, memory, reserved_memory = node_share(instance, args.reserved_cpu, args.reserved_memory_gib)
        if cpu < 8 or memory < 64:
            problems.add(
                "reserved_cpu",
                f"reserved_cpu {args.reserved_cpu} and reserved_memory_gib {reserved_memory} are not accepted; "
                f"they leave {cpu} vCPU / {memory} GiB of a {instance.name} to the server: reserve less",
            )
        elif args.shm_size_gib * 4 > memory:
            problems.reject("shm_size_gib", args.shm_size_gib, f"at most a quarter of the {memory} GiB memory limit")
    if isinstance(args.replicas, bool) or not isinstance(args.replicas, int) or not 1 <= args.replicas <= 64:
        problems.reject("replicas", args.replicas, "expected 1 to 64 (one per reserved GPU node)")
    elif args.reservation is not None:
        block = args.reservation
        per_replica = nodes or 1
        if block.instance_type and block.instance_type != args.instance_type:
            problems.reject("instance_type", args.instance_type, f"the Capacity Block {block.reservation_id} reserves {block.instance_type}")
        elif args.replicas * per_replica > block.instance_count:
            fits = block.instance_count // per_replica
            problems.reject(
                "replicas", args.replicas,
                f"at most {fits}: the Capacity Block {block.reservation_id} reserves {block.instance_count} {block.instance_type or 'GPU'} "
                f"node{'s' if block.instance_count != 1 else ''} and one replica spans {per_replica}",
            )
    if args.exposure not in EXPOSURES:
        problems.reject("exposure", args.exposure, f"accepted: {', '.join(EXPOSURES)}")
    if args.api_key is None and (args.require_api_key or args.exposure == "public"):
        why = "public exposure always needs one" if args.exposure == "public" else "set require_api_key=False to serve without one"
        problems.add("api_key", f"api_key is required ({why}); pass it as a Pulumi secret")
    for index, cidr in enumerate(args.allowed_cidrs):
        try:
            ipaddress.IPv4Network(cidr, strict=True)
        except ValueError as err:
            problems.add(f"allowed_cidrs[{index}]", f"allowed_cidrs entry {cidr!r} is not accepted; expected an IPv4 CIDR ({err})")
    if args.exposure in ("internal", "public") and not args.allowed_cidrs:
        problems.add("allowed_cidrs", f"allowed_cidrs is required for {args.exposure} exposure (the client CIDRs allowed through the NLB; the pods' NetworkPolicy admits exactly them)")
    if args.exposure in EXPOSURES and args.exposure != "cluster" and args.vpc_cidr is None:
        problems.add("vpc_cidr", f"vpc_cidr is required for {args.exposure} exposure (the NLB reaches the pods from the VPC)")
    if isinstance(args.vpc_cidr, str):
        try:
            ipaddress.IPv4Network(args.vpc_cidr, strict=True)
        except ValueError as err:
            problems.reject("vpc_cidr", args.vpc_cidr, f"expected an IPv4 CIDR ({err})")
    for path, ns in (*((f"client_namespaces[{i}]", n) for i, n in enumerate(args.client_namespaces)), ("metrics_namespace", args.metrics_namespace)):
        if not DNS_LABEL.match(ns):
            problems.reject(path, ns, "expected a DNS label")
    if args.contract.weights.source == "s3" and (args.cluster_name is None or args.aws_region is None):
        problems.add("cluster_name", "cluster_name and aws_region are required when the weights come from S3 (Pod Identity and the bucket's region)")
    if args.tls_certificate_arn is not None and not re.match(r"^arn:aws[\w-]*:acm:[\w-]+:\d{12}:certificate/[\w-]+$", args.tls_certificate_arn):
        problems.reject("tls_certificate_arn", args.tls_certificate_arn, "expected an ACM certificate ARN")
    _front_problems(args, problems)
    _routing_problems(args, problems)
    _startup_problems(args, problems)
    if args.block_end is not None and not (
        isinstance(args.block_end, BlockEnd) and all(isinstance(t, datetime) and t.tzinfo is not None for t in (args.block_end.ends_at, args.block_end.now))
    ):
        problems.reject("block_end", args.block_end, "expected a BlockEnd of two timezone-aware datetimes (the block's end, the run's now)")
    if args.init_image and "@sha256:" not in args.init_image and ":" not in args.init_image.rsplit("/", 1)[-1]:
        problems.reject("init_image", args.init_image, "expected an image with a tag or a digest")
    return nodes


def _routing_problems(args: VllmServingArgs, problems: Problems) -> None:
    """What the routing tier cannot do with these args."""
    routing = args.routing
    if routing is None:
        return
    if not isinstance(routing, ConversationRouting):
        problems.reject("routing", routing, "expected a ConversationRouting or None")
        return
    if isinstance(args.replicas, int) and args.replicas < 2:
        problems.reject("routing", "ConversationRouting", f"a routing tier needs two or more replicas (replicas is {args.replicas}); leave routing None")
    try:
        routing.drain_plan(args.drain_s, args.exposure in nlb.EXPOSURE_SCHEMES)
    except DrainError as err:
        problems.reject(f"routing.{err.field}", err.value, err.accepted)


def _startup_problems(args: VllmServingArgs, problems: Problems) -> None:
    """What the time-to-serve wiring cannot do with these args."""
    startup = args.startup
    if startup is None:
        return
    if startup.node_local_storage_class is not None and args.contract.weights.source != "s3":
        problems.reject("startup.node_local_storage_class", startup.node_local_storage_class, "only with S3 weights (the node-side sync keeps one verified directory per revision)")
    if startup.compile_cache_s3_uri is not None:
        if not args.contract.image.pinned:
            problems.reject("startup.compile_cache_s3_uri", startup.compile_cache_s3_uri, "only with an image pinned by digest (caches are keyed on the exact build)")
        if args.contract.weights.source != "s3":
            problems.reject("startup.compile_cache_s3_uri", startup.compile_cache_s3_uri, "only with S3 weights (the pod's Pod Identity role exists for them)")


def _front_problems(args: VllmServingArgs, problems: Problems) -> None:
    """What the API proxy, the stop sequence or the NLB would refuse, in the args' own names (their rules, their words)."""
    try:
        api_pod.drain_plan(args)
    except DrainError as err:
        problems.reject(err.field, err.value, err.accepted)  # the drain plan names its fields as these args do
        return
    routes = [args.extra_routes] if isinstance(args.extra_routes, str) else list(args.extra_routes)
    for index, route in enumerate(routes):
        try:
            check_extra_route(ApiRoute.parse(route))
        except UserError as err:
            problems.adopt(f"extra_routes[{index}]", err)
            return
    try:
        proxy = api_pod.proxy_config(args)
    except ProxyConfigError as err:
        problems.adopt(api_pod.PROXY_ARGS.get(err.field, err.field), err)
        return
    except UserError as err:  # the proxy's route rules (a repeated route)
        problems.adopt("extra_routes", err)
        return
    if args.exposure in nlb.EXPOSURE_SCHEMES:
        try:
            api_pod.nlb_annotations(args, proxy)
        except nlb.NlbError as err:
            problems.adopt(api_pod.NLB_ARGS.get(err.field, err.field if hasattr(args, err.field) else "exposure"), err)


__all__ = ["VllmServingArgs", "validate_serving_args"]
