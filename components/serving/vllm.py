"""``VllmServer``: Kimi K3 on vLLM, one pod per Capacity Block GPU node.

What it declares (all in one namespace, ``kimi-serving`` by default):

* Namespace with Pod Security ``restricted`` (enforce, audit, warn): the pod runs
  as non-root with every capability dropped, ``RuntimeDefault`` seccomp and only
  ``emptyDir``/``secret`` volumes, so the strictest level fits it;
* ServiceAccount without an API token, plus an EKS Pod Identity role that can read
  exactly the weights prefix when the weights come from S3;
* Secrets for the API key (and the Hugging Face token), handed to containers with
  ``secretKeyRef`` only;
* Deployment (``Recreate``: the Capacity Block has no spare GPU node for a surge):
  init containers stage and verify the weights on the node's NVMe, then
  ``vllm serve`` starts with the contract's arguments;
* Service (ClusterIP, or an NLB through the AWS Load Balancer Controller),
  NetworkPolicies (default deny + what the server needs), a PodDisruptionBudget
  and Prometheus scraping (ServiceMonitor or pod annotations).

Where the weights live: an ``emptyDir``. On AL2023 nodes whose nodeadm
``localStorage`` strategy is ``RAID0``, ``setup-local-disks`` mounts the NVMe RAID0
at ``/mnt/k8s-disks/0`` and bind-mounts ``/var/lib/kubelet`` onto it, so every
``emptyDir`` lives on the instance-store NVMe. A ``hostPath`` on
``/mnt/k8s-disks/0`` would survive pod re-creation, but Pod Security forbids
``hostPath`` at every level but ``privileged``; Capacity Block nodes are new
instances for every block anyway, and ``aws s3 sync``/``snapshot_download`` skip
files already present when only the container restarts.

Shared with :class:`~components.serving.lws.VllmLeaderWorkerSet` (multi-node
replicas): the arguments (:class:`VllmServingArgs`), everything around the workload
(:class:`VllmServingBase`) and the pod pieces (volumes, weights init containers,
engine env, resources, probes, security contexts).

Kubernetes provider: pass it as :attr:`VllmServingArgs.provider`, or give the
component ``opts=pulumi.ResourceOptions(providers=[k8s_provider])`` so the
Kubernetes children inherit it. AWS children (the Pod Identity role) use the
component's AWS provider (default or inherited).
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import pulumi
import pulumi_kubernetes as k8s

from components import catalog, labels
from components.errors import UserError
from components.formats import DNS_LABEL
from components.pod_identity import PodIdentityRole, PodIdentityRoleArgs
from components.serving.contracts import EXPOSURES, ServingContract


AWS_CLI_IMAGE = "public.ecr.aws/aws-cli/aws-cli:2.31.23@sha256:668ffb01408e03e1002b36886797c1a97b09f7d0f02fba3123f9fcd68a081dc5"
"""Image of the S3 staging init container (AWS CLI v2, Pod Identity capable).

Tag and digest as pinned together by a public project (not re-checked against the
registry offline): confirm with ``docker buildx imagetools inspect`` when bumping."""

POD_IDENTITY_AGENT_CIDR = "169.254.170.23/32"
"""Link-local address of the EKS Pod Identity Agent (credentials for the S3 init container)."""

RUN_AS_USER = 10001
"""Non-root UID of every container (above 10000 so it maps to no host user)."""

HOME = "/home/vllm"
"""Writable HOME (emptyDir): vLLM, Triton, TorchInductor, FlashInfer, DeepGEMM and CUDA JIT caches."""

APP_NAME = "vllm"


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


@dataclass(frozen=True)
class VllmServerArgs(VllmServingArgs):
    """Inputs of :class:`VllmServer` (single-node replicas; see :class:`VllmServingArgs` for every field)."""


def pod_resources(instance: catalog.InstanceType, shm_size_gib: int, reserved_cpu: int, reserved_memory_gib: int | None) -> dict[str, str]:
    """CPU/memory/GPU of the server container: the node minus the system's share.

    Memory includes the ``/dev/shm`` volume (a Memory emptyDir is charged to the pod).
    """
    reserve_mem = reserved_memory_gib if reserved_memory_gib is not None else max(32, instance.memory_gib // 20)
    cpu = instance.vcpus - reserved_cpu
    memory = instance.memory_gib - reserve_mem
    if cpu < 8 or memory < 64:
        raise UserError(f"vllm server: reserving {reserved_cpu} vCPU / {reserve_mem} GiB leaves {cpu} vCPU / {memory} GiB on {instance.name}; reserve less")
    if shm_size_gib * 4 > memory:
        raise UserError(f"vllm server: shm_size_gib={shm_size_gib} is more than a quarter of the {memory} GiB memory limit; lower it")
    return {"cpu": str(cpu), "memory": f"{memory}Gi", "nvidia.com/gpu": str(instance.gpus)}


def weights_policy(bucket: str, prefix: str, partition: str = "aws", kms_key_arn: str | None = None) -> dict:
    """IAM policy reading exactly one S3 prefix (objects and their listing), nothing else."""
    statements: list[dict[str, Any]] = [
        {"Sid": "ReadWeightObjects", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"arn:{partition}:s3:::{bucket}/{prefix}*"]},
        {
            "Sid": "ListWeightPrefix",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [f"arn:{partition}:s3:::{bucket}"],
            "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*"]}},
        },
    ]
    if kms_key_arn:
        statements.append({"Sid": "DecryptWeights", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [kms_key_arn]})
    return {"Version": "2012-10-17", "Statement": statements}


# Shell run by the verify init container: parallel `sha256sum --check` over the manifest.
VERIFY_SCRIPT = """set -eu
cd "$WEIGHTS_DIR"
test -s "$SHA256_MANIFEST" || { echo "sha256 manifest $SHA256_MANIFEST missing in $WEIGHTS_DIR" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/sha256.XXXXXX")
lines=$(wc -l < "$SHA256_MANIFEST")
parts=$(nproc); [ "$parts" -gt 32 ] && parts=32; [ "$parts" -gt "$lines" ] && parts=$lines; [ "$parts" -ge 1 ] || parts=1
split -n "l/$parts" "$SHA256_MANIFEST" "$work/part."
pids=""
for part in "$work"/part.*; do
  [ -s "$part" ] || continue
  sha256sum --check --quiet --strict "$part" & pids="$pids $!"
done
failed=0
for pid in $pids; do wait "$pid" || failed=1; done
rm -rf "$work"
[ "$failed" -eq 0 ] || { echo "weights do not match $SHA256_MANIFEST" >&2; exit 1; }
echo "weights verified against $SHA256_MANIFEST ($lines files)"
"""

S3_SYNC_SCRIPT = """set -eu
aws configure set default.s3.preferred_transfer_client crt
aws s3 sync "$WEIGHTS_S3_URI" "$WEIGHTS_DIR" --no-progress --only-show-errors
echo "synced $WEIGHTS_S3_URI to $WEIGHTS_DIR: $(du -sh "$WEIGHTS_DIR" | cut -f1)"
"""

HF_DOWNLOAD_SCRIPT = """import os
from huggingface_hub import snapshot_download
path = snapshot_download(repo_id=os.environ["MODEL_ID"], revision=os.environ["MODEL_REVISION"], cache_dir=os.environ["HF_HUB_CACHE"], max_workers=16)
print("downloaded", os.environ["MODEL_ID"], "at", os.environ["MODEL_REVISION"], "to", path, flush=True)
"""

# Readiness: the model is listed by the OpenAI API (the key is read from the environment, never from the spec).
READINESS_SCRIPT = """import json, os, sys, urllib.request
req = urllib.request.Request("http://127.0.0.1:{port}{path}", headers={{"Authorization": "Bearer " + os.environ.get("VLLM_API_KEY", "")}})
with urllib.request.urlopen(req, timeout=8) as resp:
    ids = [m.get("id") for m in json.load(resp).get("data", [])]
sys.exit(0 if {name!r} in ids else 1)
"""


class VllmServingBase(pulumi.ComponentResource):
    """What every vLLM serving component declares around its workload.

    Namespace, ServiceAccount, Pod Identity role, Secrets (:meth:`_declare_foundation`),
    then Service, NetworkPolicies, PodDisruptionBudget, ServiceMonitor and the outputs
    (:meth:`_declare_frontend`). Subclasses declare the workload in between.

    Outputs: ``endpoint_url`` (``…/v1``), ``served_model_name``, ``image``,
    ``model_revision``, ``namespace``, ``service_name``.
    """

    endpoint_url: pulumi.Output[str]
    served_model_name: pulumi.Output[str]
    image: pulumi.Output[str]
    model_revision: pulumi.Output[str]
    namespace: pulumi.Output[str]
    service_name: pulumi.Output[str]

    def _declare_foundation(self, name: str, args: VllmServingArgs, common: Mapping[str, str], selector: Mapping[str, str]) -> tuple[dict[str, str], pulumi.ResourceOptions]:
        """Namespace, ServiceAccount, weights role and Secrets; returns the env→Secret names and the in-namespace options."""
        contract = args.contract
        ns = args.namespace
        ns_labels = {
            **common,
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/audit": "restricted",
            "pod-security.kubernetes.io/warn": "restricted",
        }
        if args.exposure != "cluster":
            # The controller adds a readiness gate: a pod gets traffic only once the NLB target is healthy.
            ns_labels["elbv2.k8s.aws/pod-readiness-gate-inject"] = "enabled"
        self.namespace_resource = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=ns, labels=ns_labels),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
        )
        in_ns = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[self.namespace_resource])

        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-service-account",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=ns, labels={**common, **selector}),
            automount_service_account_token=False,
            opts=in_ns,
        )

        self.weights_role: PodIdentityRole | None = None
        if contract.weights.source == "s3":
            bucket, prefix = contract.weights.s3_bucket, contract.weights.s3_prefix
            document = pulumi.Output.from_input(args.weights_kms_key_arn).apply(
                lambda key, bucket=bucket, prefix=prefix: json.dumps(weights_policy(bucket, prefix, args.aws_partition, key))
            )
            self.weights_role = PodIdentityRole(
                f"{name}-weights",
                PodIdentityRoleArgs(
                    cluster_name=args.cluster_name,
                    namespace=ns,
                    service_account=name,
                    inline_policies={"read-weights": document},
                    tags={"kimi-k3/component": "vllm-server"},
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )

        def opaque_secret(secret_name: str, value: pulumi.Input[str]) -> k8s.core.v1.Secret:
            """An Opaque Secret ``secret_name`` holding ``value`` under ``key``."""
            return k8s.core.v1.Secret(
                secret_name,
                metadata=k8s.meta.v1.ObjectMetaArgs(name=secret_name, namespace=ns, labels={**common, **selector}),
                type="Opaque",
                string_data={"key": pulumi.Output.secret(value)},
                opts=in_ns,
            )

        secret_names: dict[str, str] = {}
        self.api_key_secret = None
        if args.api_key is not None:
            secret_names["VLLM_API_KEY"] = f"{name}-api-key"
            self.api_key_secret = opaque_secret(f"{name}-api-key", args.api_key)
        self.hf_token_secret = None
        if args.hugging_face_token is not None and contract.weights.source == "huggingface":
            secret_names["HF_TOKEN"] = f"{name}-hf-token"
            self.hf_token_secret = opaque_secret(f"{name}-hf-token", args.hugging_face_token)
        return secret_names, in_ns

    def _declare_frontend(
        self,
        name: str,
        args: VllmServingArgs,
        common: Mapping[str, str],
        selector: Mapping[str, str],
        api_selector: Mapping[str, str],
        in_ns: pulumi.ResourceOptions,
    ) -> None:
        """Service (to the ``api_selector`` pods), NetworkPolicies, PDB (over every ``selector`` pod), ServiceMonitor, outputs."""
        contract = args.contract
        ns = args.namespace
        nlb = args.exposure != "cluster"
        port_name = "http"
        service_annotations: dict[str, str] = {}
        service_type = "ClusterIP"
        source_ranges: Any = None
        if nlb:
            service_type = "LoadBalancer"
            lb = "service.beta.kubernetes.io/aws-load-balancer-"
            service_annotations = {
                f"{lb}type": "external",
                f"{lb}nlb-target-type": "ip",
                f"{lb}scheme": "internal" if args.exposure == "internal" else "internet-facing",
                f"{lb}healthcheck-protocol": "HTTP",
                f"{lb}healthcheck-path": contract.api.health_path,
                f"{lb}healthcheck-port": "traffic-port",
                f"{lb}target-group-attributes": f"deregistration_delay.timeout_seconds={args.pre_stop_sleep_s}",
            }
            if args.tls_certificate_arn:
                service_annotations[f"{lb}ssl-cert"] = args.tls_certificate_arn
                service_annotations[f"{lb}ssl-ports"] = port_name
            source_ranges = list(args.allowed_cidrs) if args.allowed_cidrs else pulumi.Output.from_input(args.vpc_cidr).apply(lambda c: [c])
        self.service = k8s.core.v1.Service(
            f"{name}-service",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=ns, labels={**common, **selector}, annotations=service_annotations or None),
            spec=k8s.core.v1.ServiceSpecArgs(
                type=service_type,
                selector=dict(api_selector),
                ports=[k8s.core.v1.ServicePortArgs(name=port_name, port=contract.api.port, target_port=port_name, protocol="TCP")],
                load_balancer_source_ranges=source_ranges,
            ),
            opts=in_ns,
        )

        self.network_policies = network_policies(name, args, common, api_selector, in_ns)

        self.pod_disruption_budget = k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=ns, labels={**common, **selector}),
            # One pod at a time may go: a drain of a one-replica server proceeds (no blocked node rotation).
            spec=k8s.policy.v1.PodDisruptionBudgetSpecArgs(max_unavailable=1, selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(selector))),
            opts=in_ns,
        )

        self.service_monitor = None
        if args.service_monitor:
            self.service_monitor = k8s.apiextensions.CustomResource(
                f"{name}-service-monitor",
                api_version="monitoring.coreos.com/v1",
                kind="ServiceMonitor",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=ns, labels={**common, **selector, **args.service_monitor_labels}),
                spec={
                    "selector": {"matchLabels": dict(selector)},
                    "namespaceSelector": {"matchNames": [ns]},
                    "endpoints": [{"port": port_name, "path": contract.api.metrics_path, "interval": "30s", "scheme": "http"}],
                },
                opts=in_ns,
            )

        scheme = "https" if args.tls_certificate_arn else "http"
        port = contract.api.port
        if nlb:
            self.endpoint_url = self.service.status.apply(lambda status: _nlb_url(status, scheme, port))
        else:
            self.endpoint_url = pulumi.Output.from_input(f"http://{name}.{ns}.svc.cluster.local:{port}/v1")
        self.served_model_name = pulumi.Output.from_input(contract.api.served_model_name)
        self.image = pulumi.Output.from_input(contract.image.image)
        self.model_revision = pulumi.Output.from_input(contract.weights.revision)
        self.namespace = self.namespace_resource.metadata.apply(lambda m: m.name if hasattr(m, "name") else m["name"])
        self.service_name = self.service.metadata.apply(lambda m: m.name if hasattr(m, "name") else m["name"])

    def _register(self) -> None:
        """Register the outputs (once, last)."""
        self.register_outputs(
            {
                "endpointUrl": self.endpoint_url,
                "servedModelName": self.served_model_name,
                "image": self.image,
                "modelRevision": self.model_revision,
                "namespace": self.namespace,
                "serviceName": self.service_name,
            }
        )


def common_labels(args: VllmServingArgs) -> dict[str, str]:
    """Labels on every Kubernetes object of a serving component."""
    return {"app.kubernetes.io/part-of": "kimi-k3", "app.kubernetes.io/managed-by": "pulumi", **args.labels}


def app_selector(name: str) -> dict[str, str]:
    """Labels selecting every pod of the serving component called ``name``."""
    return {"app.kubernetes.io/name": APP_NAME, "app.kubernetes.io/instance": name}


def scrape_annotations(args: VllmServingArgs) -> dict[str, str]:
    """``prometheus.io/*`` annotations of the API pods, unless a ServiceMonitor scrapes them."""
    if args.service_monitor:
        return {}
    api = args.contract.api
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(api.port), "prometheus.io/path": api.metrics_path}


SECRET_ENV_SKIP = "CKV_K8S_35=vLLM reads its API key only from VLLM_API_KEY or --api-key; the env var comes from a secretKeyRef so the key is in neither the args nor the spec"
"""checkov skip (with its reason) for the API key handed over as an environment variable."""

FLOATING_TAG_SKIP = "CKV_K8S_43=the image is pinned by tag, which settings allow outside prod only (with a warning); prod requires a digest"
"""checkov skip (with its reason) for a tag-pinned image in a non-production stack."""


def checkov_skips(args: VllmServingArgs, *reasons: str) -> dict[str, str]:
    """``checkov.io/skipN`` annotations: the given reasons, plus the floating-tag one when the image has no digest."""
    if not args.contract.image.pinned:
        reasons = (*reasons, FLOATING_TAG_SKIP)
    return {f"checkov.io/skip{i}": reason for i, reason in enumerate(reasons, start=1)}


class VllmServer(VllmServingBase):
    """Kimi K3 behind vLLM's OpenAI-compatible API on the Capacity Block GPU nodes, one pod per replica.

    For a contract whose replica spans several nodes use
    :class:`~components.serving.lws.VllmLeaderWorkerSet`.

    Outputs: ``endpoint_url`` (``…/v1``), ``served_model_name``, ``image``,
    ``model_revision``, ``namespace``, ``service_name``.
    """

    def __init__(self, name: str, args: VllmServerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        _validate(name, args)
        super().__init__("kimi-k3:index:VllmServer", name, None, opts)
        self.args = args
        instance = catalog.INSTANCE_TYPES[args.instance_type]
        common = common_labels(args)
        selector = app_selector(name)
        pod_labels = {**common, **selector, "app.kubernetes.io/component": "server", labels.MODEL_LABEL: labels.MODEL}

        secret_names, in_ns = self._declare_foundation(name, args, common, selector)

        pod_annotations = scrape_annotations(args)
        deployment_annotations = checkov_skips(args, SECRET_ENV_SKIP)
        if not args.await_rollout:
            deployment_annotations["pulumi.com/skipAwait"] = "true"
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=args.namespace, labels=pod_labels, annotations=deployment_annotations),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=args.replicas,
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
                # No spare GPU node in a Capacity Block: the old pod must go before the new one can schedule.
                strategy=k8s.apps.v1.DeploymentStrategyArgs(type="Recreate"),
                revision_history_limit=5,
                progress_deadline_seconds=args.weights_staging_timeout_s + args.contract.startup_budget_s(),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=pod_labels, annotations=pod_annotations or None),
                    spec=_pod_spec(name, args, instance, secret_names),
                ),
            ),
            opts=in_ns,
        )

        self._declare_frontend(name, args, common, selector, selector, in_ns)
        self._register()


def _namespaces(names: tuple[str, ...]) -> k8s.meta.v1.LabelSelectorArgs:
    """Selector of the named namespaces; every namespace when ``names`` is empty."""
    if not names:
        return k8s.meta.v1.LabelSelectorArgs()
    return k8s.meta.v1.LabelSelectorArgs(
        match_expressions=[k8s.meta.v1.LabelSelectorRequirementArgs(key="kubernetes.io/metadata.name", operator="In", values=list(names))]
    )


def egress_rules(args: VllmServingArgs) -> list[k8s.networking.v1.NetworkPolicyEgressRuleArgs]:
    """What a serving pod may reach: cluster DNS, HTTPS (S3 / Hugging Face), the Pod Identity Agent (S3 weights)."""
    np = k8s.networking.v1
    egress = [
        np.NetworkPolicyEgressRuleArgs(
            to=[np.NetworkPolicyPeerArgs(
                namespace_selector=_namespaces(("kube-system",)),
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"k8s-app": "kube-dns"}),
            )],
            ports=[np.NetworkPolicyPortArgs(port=53, protocol="UDP"), np.NetworkPolicyPortArgs(port=53, protocol="TCP")],
        ),
        # S3 / Hugging Face over HTTPS (their addresses are not stable enough to list).
        np.NetworkPolicyEgressRuleArgs(to=[np.NetworkPolicyPeerArgs(ip_block=np.IPBlockArgs(cidr="0.0.0.0/0"))], ports=[np.NetworkPolicyPortArgs(port=443, protocol="TCP")]),
    ]
    if args.contract.weights.source == "s3":
        egress.append(
            np.NetworkPolicyEgressRuleArgs(to=[np.NetworkPolicyPeerArgs(ip_block=np.IPBlockArgs(cidr=POD_IDENTITY_AGENT_CIDR))], ports=[np.NetworkPolicyPortArgs(port=80, protocol="TCP")])
        )
    return egress


def network_policies(name: str, args: VllmServingArgs, common: Mapping[str, str], api_selector: Mapping[str, str], opts: pulumi.ResourceOptions) -> list[k8s.networking.v1.NetworkPolicy]:
    """Default deny for the namespace, plus ``{name}-server``: API and metrics in, :func:`egress_rules` out, for the API pods."""
    ns, port = args.namespace, args.contract.api.port
    np = k8s.networking.v1
    deny = np.NetworkPolicy(
        f"{name}-default-deny",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{name}-default-deny", namespace=ns, labels=dict(common)),
        spec=np.NetworkPolicySpecArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs(), policy_types=["Ingress", "Egress"]),
        opts=opts,
    )
    api_port = [np.NetworkPolicyPortArgs(port=port, protocol="TCP")]
    sources = [np.NetworkPolicyPeerArgs(namespace_selector=_namespaces(args.client_namespaces))]
    if args.exposure != "cluster":
        # NLB nodes (ip targets) connect from VPC addresses; with client IP preservation, from the clients.
        sources.append(np.NetworkPolicyPeerArgs(ip_block=np.IPBlockArgs(cidr=args.vpc_cidr)))
        sources += [np.NetworkPolicyPeerArgs(ip_block=np.IPBlockArgs(cidr=c)) for c in args.allowed_cidrs]
    ingress = [
        np.NetworkPolicyIngressRuleArgs(from_=sources, ports=api_port),
        np.NetworkPolicyIngressRuleArgs(from_=[np.NetworkPolicyPeerArgs(namespace_selector=_namespaces((args.metrics_namespace,)))], ports=api_port),
    ]
    server = np.NetworkPolicy(
        f"{name}-server",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{name}-server", namespace=ns, labels=dict(common)),
        spec=np.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(api_selector)),
            policy_types=["Ingress", "Egress"],
            ingress=ingress,
            egress=egress_rules(args),
        ),
        opts=opts,
    )
    return [deny, server]


def _nlb_url(status: Any, scheme: str, port: int) -> str | None:
    """``scheme://<nlb hostname>:port/v1`` from a Service status, ``None`` until the NLB exists."""
    def get(obj: Any, key: str, attr: str) -> Any:
        if obj is None:
            return None
        if hasattr(obj, attr):  # typed SDK output (a dict subclass keyed by wire names)
            return getattr(obj, attr)
        return obj.get(key) if isinstance(obj, dict) else None

    ingress = get(get(status, "loadBalancer", "load_balancer"), "ingress", "ingress") or []
    host = get(ingress[0], "hostname", "hostname") if ingress else None
    return f"{scheme}://{host}:{port}/v1" if host else None


def _validate(name: str, args: VllmServerArgs) -> None:
    validate_serving_args(name, args, "vllm server")
    instance = catalog.INSTANCE_TYPES[args.instance_type]
    nodes = args.contract.nodes_per_replica(instance.gpus)
    if nodes != 1:
        raise UserError(
            f"vllm server: pipeline_parallel_size={args.contract.engine.pipeline_parallel_size} spans {nodes} nodes; "
            "a Deployment runs one pod per node: use VllmLeaderWorkerSet (components.serving.lws) for multi-node replicas"
        )


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


def container_security_context() -> k8s.core.v1.SecurityContextArgs:
    """Every container: non-root UID, no privilege escalation, every capability dropped, read-only root, RuntimeDefault seccomp."""
    return k8s.core.v1.SecurityContextArgs(
        run_as_non_root=True,
        run_as_user=RUN_AS_USER,
        run_as_group=RUN_AS_USER,
        allow_privilege_escalation=False,
        privileged=False,
        read_only_root_filesystem=True,
        capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
    )


def plain_env(values: Mapping[str, str]) -> list[k8s.core.v1.EnvVarArgs]:
    """Literal environment variables, in order."""
    return [k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in values.items()]


def secret_env(env_name: str, secret_name: str) -> k8s.core.v1.EnvVarArgs:
    """``env_name`` from key ``key`` of the Secret ``secret_name`` (the value never enters the spec)."""
    return k8s.core.v1.EnvVarArgs(
        name=env_name,
        value_from=k8s.core.v1.EnvVarSourceArgs(secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(name=secret_name, key="key")),
    )


HOME_ENV = {
    "HOME": HOME,
    "USER": "vllm",  # getpass.getuser() (TorchInductor) needs it: UID 10001 has no passwd entry
    "XDG_CACHE_HOME": f"{HOME}/.cache",
    "XDG_CONFIG_HOME": f"{HOME}/.config",
    "HF_HOME": f"{HOME}/.cache/huggingface",
}
"""Writable locations for everything that caches under HOME (root filesystem is read-only)."""

SERVER_CACHE_ENV = {
    "VLLM_CACHE_ROOT": f"{HOME}/.cache/vllm",
    "TRITON_CACHE_DIR": f"{HOME}/.triton/cache",
    "TORCHINDUCTOR_CACHE_DIR": f"{HOME}/.cache/torchinductor",
    "CUDA_CACHE_PATH": f"{HOME}/.nv/ComputeCache",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


def weights_limit_gb(contract: ServingContract) -> int:
    """Size limit (GB) of the NVMe weights volume: the checkpoint plus 15%."""
    return math.ceil(contract.weights.expected_size_gb * 1.15)


def pod_volumes(args: VllmServingArgs) -> list[k8s.core.v1.VolumeArgs]:
    """Weights, ``/dev/shm``, writable HOME and ``/tmp`` (all ``emptyDir``; see the module docstring)."""
    return [
        # On RAID0 nodes every emptyDir is on the instance-store NVMe (see the module docstring).
        k8s.core.v1.VolumeArgs(name="models", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit=f"{weights_limit_gb(args.contract)}G")),
        k8s.core.v1.VolumeArgs(name="shm", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(medium="Memory", size_limit=f"{args.shm_size_gib}Gi")),
        k8s.core.v1.VolumeArgs(name="home", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit=f"{args.cache_size_gib}Gi")),
        k8s.core.v1.VolumeArgs(name="tmp", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="64Gi")),
    ]


def volume_mounts(contract: ServingContract, shm: bool = False) -> list[k8s.core.v1.VolumeMountArgs]:
    """Mounts of the weights, HOME and ``/tmp`` volumes (and ``/dev/shm`` for the engine containers)."""
    mounts = {"models": contract.weights.mount_path, "home": HOME, "tmp": "/tmp"}
    if shm:
        mounts["shm"] = "/dev/shm"
    return [k8s.core.v1.VolumeMountArgs(name=v, mount_path=p) for v, p in mounts.items()]


def weights_init_containers(args: VllmServingArgs, secret_names: Mapping[str, str]) -> list[k8s.core.v1.ContainerArgs]:
    """Init containers that stage the weights on the node's NVMe (S3 sync or pinned HF download), then verify them."""
    contract = args.contract
    weights = contract.weights
    mounts = volume_mounts(contract)
    init_resources = k8s.core.v1.ResourceRequirementsArgs(
        requests={"cpu": "32", "memory": "64Gi"}, limits={"cpu": "32", "memory": "64Gi"}
    )
    init_containers = []
    # One staging container: the AWS CLI syncing the S3 prefix, or the engine image
    # downloading the pinned Hugging Face snapshot.
    if weights.source == "s3":
        staging_image, staging_pull = args.init_image, "IfNotPresent"
        fetch_command = ["/bin/sh", "-c", S3_SYNC_SCRIPT]
        fetch_env = plain_env({**HOME_ENV, "AWS_REGION": args.aws_region, "WEIGHTS_S3_URI": weights.s3_uri, "WEIGHTS_DIR": weights.weights_dir})
    else:
        staging_image, staging_pull = contract.image.image, contract.image.pull_policy
        fetch_command = ["python3", "-c", HF_DOWNLOAD_SCRIPT]
        fetch_env = plain_env({**HOME_ENV, "HF_HUB_CACHE": weights.mount_path, "MODEL_ID": weights.model_id, "MODEL_REVISION": weights.revision, "HF_HUB_DISABLE_TELEMETRY": "1"})
        if "HF_TOKEN" in secret_names:
            fetch_env.append(secret_env("HF_TOKEN", secret_names["HF_TOKEN"]))
    init_containers.append(
        k8s.core.v1.ContainerArgs(
            name="fetch-weights",
            image=staging_image,
            image_pull_policy=staging_pull,
            command=fetch_command,
            env=fetch_env,
            resources=init_resources,
            security_context=container_security_context(),
            volume_mounts=mounts,
        )
    )
    if weights.sha256_manifest:
        init_containers.append(
            k8s.core.v1.ContainerArgs(
                name="verify-weights",
                image=staging_image,
                image_pull_policy=staging_pull,
                command=["/bin/sh", "-c", VERIFY_SCRIPT],
                env=plain_env({"WEIGHTS_DIR": weights.weights_dir, "SHA256_MANIFEST": weights.sha256_manifest}),
                resources=init_resources,
                security_context=container_security_context(),
                volume_mounts=mounts,
            )
        )
    return init_containers


def engine_env(contract: ServingContract, extra: Mapping[str, str] | None = None, secret_names: Mapping[str, str] | None = None, with_api_key: bool = True) -> list[k8s.core.v1.EnvVarArgs]:
    """Environment of a container running vLLM code: writable caches, the contract's env, ``extra``, the API key (secretKeyRef)."""
    env = plain_env({**HOME_ENV, **SERVER_CACHE_ENV, **contract.vllm_env(), **(extra or {})})
    if with_api_key and secret_names and "VLLM_API_KEY" in secret_names:
        env.append(secret_env("VLLM_API_KEY", secret_names["VLLM_API_KEY"]))
    return env


def engine_resources(args: VllmServingArgs, instance: catalog.InstanceType, extra: Mapping[str, str] | None = None) -> k8s.core.v1.ResourceRequirementsArgs:
    """Requests = limits (Guaranteed QoS) for the whole node's share, plus ``extra`` (e.g. EFA interfaces)."""
    resources = {**pod_resources(instance, args.shm_size_gib, args.reserved_cpu, args.reserved_memory_gib), **(extra or {})}
    return k8s.core.v1.ResourceRequirementsArgs(
        requests={**resources, "ephemeral-storage": f"{weights_limit_gb(args.contract) + args.cache_size_gib + 64}G"},
        limits=dict(resources),
    )


PROBE_PERIOD_S = 10
"""Period of the startup probes."""


def api_probes(contract: ServingContract, extra_startup_s: int = 0) -> dict[str, k8s.core.v1.ProbeArgs]:
    """Startup/liveness on ``/health``, readiness = the model is listed; startup sized from the contract's budget.

    :param extra_startup_s: time the container may spend before the engine even starts
        loading (a group leader waiting for its workers).
    """
    api = contract.api
    readiness = READINESS_SCRIPT.format(port=api.port, path=api.models_path, name=api.served_model_name)
    return {
        # Weight staging runs in the init containers, so this budget is the engine's load + warm-up only.
        "startup_probe": k8s.core.v1.ProbeArgs(
            http_get=k8s.core.v1.HTTPGetActionArgs(path=api.health_path, port="http"),
            period_seconds=PROBE_PERIOD_S,
            timeout_seconds=5,
            failure_threshold=contract.probe_failure_threshold(PROBE_PERIOD_S, margin_s=600 + extra_startup_s),
        ),
        "liveness_probe": k8s.core.v1.ProbeArgs(
            http_get=k8s.core.v1.HTTPGetActionArgs(path=api.health_path, port="http"),
            period_seconds=15,
            timeout_seconds=10,
            failure_threshold=4,
        ),
        "readiness_probe": k8s.core.v1.ProbeArgs(
            exec_=k8s.core.v1.ExecActionArgs(command=["python3", "-c", readiness]),
            period_seconds=15,
            timeout_seconds=10,
            failure_threshold=2,
            success_threshold=1,
        ),
    }


def api_container(serving: VllmServingArgs, instance: catalog.InstanceType, secret_names: Mapping[str, str], **overrides: Any) -> k8s.core.v1.ContainerArgs:
    """The container serving the OpenAI API (``vllm serve`` with the contract's arguments); ``overrides`` replace ContainerArgs fields."""
    args = serving
    contract = args.contract
    fields: dict[str, Any] = dict(
        name="vllm",
        image=contract.image.image,
        image_pull_policy=contract.image.pull_policy,
        # Exec form: `vllm` is the container's PID 1 and receives SIGTERM itself.
        command=["vllm", "serve"],
        args=contract.vllm_args(contract.weights.mount_path),
        env=engine_env(contract, secret_names=secret_names),
        ports=[k8s.core.v1.ContainerPortArgs(name="http", container_port=contract.api.port, protocol="TCP")],
        resources=engine_resources(args, instance),
        **api_probes(contract),
        lifecycle=k8s.core.v1.LifecycleArgs(pre_stop=k8s.core.v1.LifecycleHandlerArgs(sleep=k8s.core.v1.SleepActionArgs(seconds=args.pre_stop_sleep_s))),
        security_context=container_security_context(),
        volume_mounts=volume_mounts(contract, shm=True),
    )
    fields.update(overrides)
    return k8s.core.v1.ContainerArgs(**fields)


def gpu_pod_spec(
    name: str,
    args: VllmServingArgs,
    instance: catalog.InstanceType,
    init_containers: list[k8s.core.v1.ContainerArgs],
    containers: list[k8s.core.v1.ContainerArgs],
) -> k8s.core.v1.PodSpecArgs:
    """A pod on one whole Capacity Block GPU node: placement, pod security context, ServiceAccount, volumes."""
    return k8s.core.v1.PodSpecArgs(
        service_account_name=name,
        automount_service_account_token=False,
        enable_service_links=False,
        termination_grace_period_seconds=args.termination_grace_period_s,
        node_selector={**labels.GPU_NODE_SELECTOR, labels.INSTANCE_TYPE_LABEL: instance.name},
        tolerations=[k8s.core.v1.TolerationArgs(**labels.GPU_TOLERATION)],
        security_context=k8s.core.v1.PodSecurityContextArgs(
            run_as_non_root=True,
            run_as_user=RUN_AS_USER,
            run_as_group=RUN_AS_USER,
            fs_group=RUN_AS_USER,
            seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
        ),
        init_containers=init_containers,
        containers=containers,
        volumes=pod_volumes(args),
    )


def _pod_spec(name: str, args: VllmServerArgs, instance: catalog.InstanceType, secret_names: Mapping[str, str]) -> k8s.core.v1.PodSpecArgs:
    return gpu_pod_spec(name, args, instance, weights_init_containers(args, secret_names), [api_container(args, instance, secret_names)])
