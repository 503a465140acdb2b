"""The arguments every vLLM serving component takes, and the checks they share.

:class:`VllmServingArgs` is what :class:`~components.serving.vllm.VllmServer`
(a Deployment, one node per replica) and
:class:`~components.serving.lws.VllmLeaderWorkerSet` (a group of nodes per replica)
have in common; :func:`validate_serving_args` refuses what neither can deploy, before
anything is declared.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Mapping

import pulumi
import pulumi_kubernetes as k8s

from components import catalog
from components.errors import UserError
from components.formats import DNS_LABEL
from components.serving.contracts import EXPOSURES, ServingContract
from components.serving.pod_kit import AWS_CLI_IMAGE, pod_resources


@dataclass(frozen=True)
class VllmServingArgs:
    """Inputs shared by :class:`VllmServer` and :class:`~components.serving.lws.VllmLeaderWorkerSet`."""

    contract: ServingContract
    """Image, weights, API and engine profile (see :mod:`components.serving.contracts`)."""
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
    pre_stop_sleep_s: int = 30
    """Seconds the pod keeps serving after removal from endpoints, before SIGTERM (NLB deregistration)."""
    termination_grace_period_s: int = 300
    """Seconds between the start of termination and SIGKILL (pre-stop sleep + in-flight requests)."""
    init_image: str = AWS_CLI_IMAGE
    """Image of the S3 staging init container (needs ``aws``, ``sh``, ``sha256sum``, ``split``)."""
    await_rollout: bool = False
    """Make ``pulumi up`` wait for the pods to be ready (off: a block may start days later, loads take an hour)."""
    provider: k8s.Provider | None = None
    """Kubernetes provider of the children (else inherited through ``opts.providers``)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels on every Kubernetes object."""


def validate_serving_args(name: str, args: VllmServingArgs, what: str) -> None:
    """Checks shared by the serving components; raises :class:`UserError` prefixed with ``what``."""
    if not isinstance(args.contract, ServingContract):
        raise UserError(f"{what}: contract must be a ServingContract")
    if not DNS_LABEL.match(name) or len(name) > 40:
        raise UserError(f"{what}: name {name!r} is not accepted; expected a DNS label of at most 40 characters (it names the Kubernetes objects)")
    if not DNS_LABEL.match(args.namespace) or len(args.namespace) > 63:
        raise UserError(f"{what}: namespace {args.namespace!r} is not accepted; expected a DNS label")
    if args.instance_type not in catalog.INSTANCE_TYPES:
        raise UserError(f"{what}: instance_type {args.instance_type!r} is not accepted; known: {', '.join(catalog.INSTANCE_TYPES)}")
    instance = catalog.INSTANCE_TYPES[args.instance_type]
    args.contract.nodes_per_replica(instance.gpus)  # TP must fill whole nodes
    pod_resources(instance, args.shm_size_gib, args.reserved_cpu, args.reserved_memory_gib)
    if isinstance(args.replicas, bool) or not isinstance(args.replicas, int) or not 1 <= args.replicas <= 64:
        raise UserError(f"{what}: replicas {args.replicas!r} is not accepted; expected 1 to 64 (one per reserved GPU node)")
    if args.exposure not in EXPOSURES:
        raise UserError(f"{what}: exposure {args.exposure!r} is not accepted; accepted: {', '.join(EXPOSURES)}")
    if args.api_key is None and (args.require_api_key or args.exposure == "public"):
        why = "public exposure always needs one" if args.exposure == "public" else "set require_api_key=False to serve without one"
        raise UserError(f"{what}: api_key is required ({why}); pass it as a Pulumi secret")
    for cidr in args.allowed_cidrs:
        try:
            ipaddress.IPv4Network(cidr, strict=True)
        except ValueError as err:
            raise UserError(f"{what}: allowed_cidrs entry {cidr!r} is not accepted; expected an IPv4 CIDR ({err})") from None
    if args.exposure == "public" and not args.allowed_cidrs:
        raise UserError(f"{what}: allowed_cidrs is required for public exposure (the client CIDRs allowed through the NLB)")
    if args.exposure != "cluster" and args.vpc_cidr is None:
        raise UserError(f"{what}: vpc_cidr is required for {args.exposure} exposure (the NLB reaches the pods from the VPC)")
    if isinstance(args.vpc_cidr, str):
        try:
            ipaddress.IPv4Network(args.vpc_cidr, strict=True)
        except ValueError as err:
            raise UserError(f"{what}: vpc_cidr {args.vpc_cidr!r} is not accepted ({err})") from None
    for ns in (*args.client_namespaces, args.metrics_namespace):
        if not DNS_LABEL.match(ns):
            raise UserError(f"{what}: namespace name {ns!r} is not accepted; expected a DNS label")
    if args.contract.weights.source == "s3" and (args.cluster_name is None or args.aws_region is None):
        raise UserError(f"{what}: cluster_name and aws_region are required when the weights come from S3 (Pod Identity and the bucket's region)")
    if args.tls_certificate_arn is not None and not re.match(r"^arn:aws[\w-]*:acm:[\w-]+:\d{12}:certificate/[\w-]+$", args.tls_certificate_arn):
        raise UserError(f"{what}: tls_certificate_arn {args.tls_certificate_arn!r} is not an ACM certificate ARN")
    if args.pre_stop_sleep_s < 0 or args.termination_grace_period_s < args.pre_stop_sleep_s + 30:
        raise UserError(
            f"{what}: termination_grace_period_s={args.termination_grace_period_s} must exceed pre_stop_sleep_s={args.pre_stop_sleep_s} by at least 30 s so in-flight requests can finish"
        )
    if args.init_image and "@sha256:" not in args.init_image and ":" not in args.init_image.rsplit("/", 1)[-1]:
        raise UserError(f"{what}: init_image {args.init_image!r} must carry a tag or a digest")


__all__ = ["VllmServingArgs", "validate_serving_args"]
