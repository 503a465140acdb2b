"""The arguments every vLLM serving component takes (a leaf: the builders import it, it imports none of them).

:class:`VllmServingArgs` is what :class:`~kimi_k3.serving.vllm.VllmServer`
(a Deployment, one node per replica) and
:class:`~kimi_k3.serving.lws.VllmLeaderWorkerSet` (a group of nodes per replica)
have in common; :func:`kimi_k3.serving.validation.validate_serving_args` collects what
neither can deploy, before anything is declared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi

from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.core import catalog
from kimi_k3.serving.api_proxy import PROXY_IMAGE
from kimi_k3.serving.block_end import BlockEnd
from kimi_k3.serving.contracts import ServingContract
from kimi_k3.serving.front import ServingFront
from kimi_k3.serving.router import ConversationRouting
from kimi_k3.weights.serving_pod import ServingStartup

AWS_CLI_IMAGE = "public.ecr.aws/aws-cli/aws-cli:2.31.23@sha256:668ffb01408e03e1002b36886797c1a97b09f7d0f02fba3123f9fcd68a081dc5"
"""Image of the S3 staging init container (AWS CLI v2, Pod Identity capable).

Tag and digest as pinned together by a public project (not re-checked against the
registry offline): confirm with ``docker buildx imagetools inspect`` when bumping."""


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
    front: ServingFront | None = None
    """The API proxy's options, the stop sequence and the NLB listener (:class:`kimi_k3.serving.front.ServingFront`,
    validated when built); ``None``: its defaults for ``exposure``. The component trusts it; only ``behind_nlb`` must agree
    with ``exposure``."""
    proxy_image: str = PROXY_IMAGE
    """Image of the API proxy sidecar (nginx-unprivileged pinned by digest; mirror it into ECR for production)."""
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


__all__ = ["AWS_CLI_IMAGE", "VllmServingArgs"]
