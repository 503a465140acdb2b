"""Typed, validated stack settings: the only place that reads stack config.

Stack config (``kimi-k3:*`` keys and ``aws:region``) is turned into immutable
dataclasses and checked as a whole *before* any resource is declared. A mistake
raises :class:`~kimi_k3.errors.SettingsError` naming the key, the bad value and
what is accepted; under ``pulumi up`` that ends the run with that one line.

Three entry points, one validator:

* :func:`from_pulumi` – inside a Pulumi program (``__main__.py``);
* :func:`load_stack` – from ``stacks/Pulumi.<stack>.yaml`` (CLI, offline plan);
* :func:`from_values` – from a plain mapping (tests, other programs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import ipaddress
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kimi_k3.cluster.access import kubeconfig_role, roles_in_both
from kimi_k3.core import catalog
from kimi_k3.core.formats import (
    CAPACITY_BLOCK_OFFERING_ID,
    CAPACITY_RESERVATION_ID,
    CHART_VERSION,
    DNS_LABEL,
    EMAIL_LETTER_TLD,
    KMS_KEY_ARN,
    KNOWN_REGION,
    LABEL_KEY,
    LABEL_VALUE,
    LOG_RETENTION_DAYS,
    ROLE_ARN,
    SUBNET_ID,
    VPC_ID,
)
from kimi_k3.core.suggest import nearest
from kimi_k3.errors import SettingsError, UserError
from kimi_k3.hyperpod.routing import HyperPodRouting, HyperPodRoutingError
from kimi_k3.network.endpoints import endpoint_problems
from kimi_k3.network.subnets import NAT_MODES, subnet_layout
from kimi_k3.serving import engine_profiles
from kimi_k3.serving.contracts import EXPOSURES, ApiContract, ContractError, EngineProfile, ImageContract, ServingContract, WeightsContract
from kimi_k3.stack import seam
from kimi_k3.stack.config_keys import CONFIG_KEYS, PROJECT, ConfigKey

ENVIRONMENTS = ("dev", "staging", "prod")
SERVING_PLATFORMS = ("eks", "hyperpod")
"""Values of ``kimi-k3:servingPlatform``: the EKS path (Capacity Block node group, vLLM) or SageMaker HyperPod."""
SECRET_PLACEHOLDER_PREFIX = "offline-placeholder-for-secret:"
"""Stand-in for ``secure:`` values that cannot be decrypted offline."""

INSTANCE_TYPE_RE = re.compile(r"^([a-z]+)(\d+)([a-z0-9-]*)\.(\d*x?large|metal[-\w]*|medium|small|micro|nano)$")

NAMESPACES_PASSED_THROUGH = ("pulumi",)
"""Config namespaces of the Pulumi engine itself (e.g. ``pulumi:tags``), accepted as they are."""


@dataclass(frozen=True)
class Secret:
    """A secret config value. Its repr never shows the value.

    ``placeholder`` is true when the value could not be decrypted (offline plan):
    the value is then a clearly marked stand-in, still handled as a secret.
    """

    value: str = field(repr=False)
    """The secret's plain text, never shown in the repr; with ``placeholder``, the marked stand-in (:data:`SECRET_PLACEHOLDER_PREFIX`)."""
    placeholder: bool = False
    """True when a ``secure:`` value could not be decrypted (offline plan) and ``value`` is the stand-in."""

    def __repr__(self) -> str:
        return "Secret(placeholder)" if self.placeholder else "Secret(***)"


@dataclass(frozen=True)
class NetworkSettings:
    """VPC layout: CIDR, AZs, NAT mode, flow logs, or an existing VPC."""

    vpc_cidr: str
    """IPv4 CIDR of a VPC the stack creates (``vpcCidr``): RFC 1918, /16 to /20; the service CIDR must lie apart from it."""
    availability_zones: tuple[str, ...]
    """Explicit AZs; empty means derive them from the Capacity Block's AZ."""
    availability_zone_count: int
    """AZs to spread over when ``availability_zones`` is empty, 2 to 4 (``availabilityZoneCount``)."""
    nat_mode: str
    """``single`` (one NAT gateway shared by every AZ) or ``perAz`` (one per AZ) (``natGateways``, :data:`kimi_k3.network.subnets.NAT_MODES`)."""
    flow_log_retention_days: int
    """Retention of the VPC flow logs in CloudWatch Logs, days (``flowLogRetentionDays``, a CloudWatch retention value)."""
    private_subnet_prefix: int
    """Prefix of each private subnet the VPC CIDR holds for the AZ count (:func:`kimi_k3.network.subnets.subnet_layout`)."""
    public_subnet_prefix: int
    """Prefix of each public subnet."""
    existing_vpc_id: str | None
    """VPC to use instead of creating one (``existingVpcId``); ``None``: the stack creates the VPC."""
    existing_private_subnet_ids: tuple[str, ...]
    """Private subnet ids of the existing VPC, one per AZ (``existingPrivateSubnetIds``); empty without ``existing_vpc_id``."""
    existing_public_subnet_ids: tuple[str, ...]
    """Public (load balancer) subnet ids of the existing VPC (``existingPublicSubnetIds``); empty without ``existing_vpc_id``."""


@dataclass(frozen=True)
class ClusterSettings:
    """EKS control plane and system node group."""

    version: str
    """EKS Kubernetes version, ``major.minor`` (``clusterVersion``, one of :data:`kimi_k3.core.catalog.SUPPORTED_EKS_VERSIONS`)."""
    endpoint_public_access: bool
    """Expose the EKS API endpoint publicly, restricted to ``public_access_cidrs`` (``clusterEndpointPublicAccess``; false in prod)."""
    public_access_cidrs: tuple[str, ...]
    """CIDRs that may reach a public API endpoint (``clusterPublicAccessCidrs``); required when it is public, never ``0.0.0.0/0``."""
    admin_role_arns: tuple[str, ...]
    """IAM roles granted cluster-admin through EKS access entries, at least one (``clusterAdminRoleArns``)."""
    service_cidr: str
    """Kubernetes service CIDR (``clusterServiceCidr``): private, /12 to /24, not overlapping the VPC CIDR."""
    log_retention_days: int
    """Retention of the EKS control-plane logs in CloudWatch Logs, days (``clusterLogRetentionDays``)."""
    system_node_instance_type: str
    """CPU instance type of the system node group that runs the cluster add-ons (``systemNodeInstanceType``)."""
    system_node_count: int
    """Nodes in the system node group, 2 to 10 (``systemNodeCount``)."""


@dataclass(frozen=True)
class CapacitySettings:
    """The Capacity Block and the GPU node group bought with it."""

    reservation_id: str
    """Capacity Block reservation id, ``cr-`` and 17 hex digits (``capacityReservationId``); ``""`` (unset) only on a ``hyperpod`` stack."""
    instance_type: str
    """GPU instance type, a key of :data:`kimi_k3.core.catalog.INSTANCE_TYPES` (``gpuInstanceType``)."""
    ami_release_version: str | None
    """EKS AL2023 NVIDIA AMI release to pin, e.g. ``1.34.2-20251120`` (``gpuAmiReleaseVersion``); ``None``: the latest at creation."""
    root_volume_gib: int
    """Encrypted root volume of each GPU node, GiB, 100 to 2000 (``gpuRootVolumeGiB``)."""
    efa_enabled: bool
    """Attach EFA interfaces to the GPU nodes and install the EFA device plugin (``efaEnabled``); required when a replica spans nodes."""
    alert_email: str | None
    """E-mail subscribed to the Capacity Block alerts' SNS topic (``capacityAlertEmail``); ``None``: the topic only."""


@dataclass(frozen=True)
class GpuPluginSettings:
    """Versions and switches of the GPU node plugins."""

    nvidia_device_plugin_version: str
    """Helm chart version of nvidia-device-plugin, without a leading ``v`` (``nvidiaDevicePluginVersion``)."""
    efa_device_plugin_version: str
    """Helm chart version of aws-efa-k8s-device-plugin, 0.5.10 or newer, without a leading ``v`` (``efaDevicePluginVersion``)."""
    dcgm_exporter_enabled: bool
    """Install the NVIDIA DCGM exporter (GPU metrics) on the GPU nodes (``dcgmExporterEnabled``)."""
    dcgm_exporter_version: str
    """Helm chart version of dcgm-exporter, without a leading ``v`` (``dcgmExporterVersion``)."""


@dataclass(frozen=True)
class ServingFrontSettings:
    """How the API is fronted and how its pods stop: the proxy's extra routes and sizes, the drain, the NLB.

    Each field has the name of the serving components' arg it becomes (``VllmServerArgs``, ``LwsServerArgs``)."""

    extra_routes: tuple[str, ...] = ()
    """``METHOD /path`` routes the proxy forwards besides the OpenAI defaults (vetted by the proxy's rules)."""
    inline_media_bytes: int = 0
    """Body bytes allowed for inline media on top of the text bound."""
    max_generation_s: int = 1800
    """Longest silent wait for an answer (proxy read timeout, NLB idle floor)."""
    drain_s: int = 1800
    """Proxy graceful stop and vLLM ``--shutdown-timeout``."""
    pre_stop_sleep_s: int = 180
    """preStop sleep while the NLB deregisters the pod (behind an NLB at least ``drain.MIN_PRE_STOP_BEHIND_NLB_S``)."""
    termination_grace_period_s: int | None = None
    """``terminationGracePeriodSeconds``; ``None`` = the drain plan's minimum."""
    nlb_idle_timeout_s: int = 3600
    """The NLB TCP listener's idle timeout."""


@dataclass(frozen=True)
class ServingSettings:
    """The vLLM serving stack: the serving contract plus how many replicas and how they are reached."""

    contract: ServingContract
    """Image, weights, API and engine profile, built (and checked by the contract) from the serving keys."""
    replicas: int
    """0 means one replica per group of reserved nodes."""
    exposure: str
    """How clients reach the API: ``cluster``, ``internal`` or ``public`` (``exposure``, :data:`~kimi_k3.serving.contracts.EXPOSURES`)."""
    allowed_cidrs: tuple[str, ...]
    """Client CIDRs the load balancer admits (``servingAllowedCidrs``); required unless ``exposure`` is ``cluster``."""
    service_monitor_enabled: bool
    """Declare a Prometheus Operator ServiceMonitor instead of scrape annotations (``serviceMonitorEnabled``; on with ``prometheusOperatorEnabled``)."""
    api_key: Secret
    """API key clients send as a Bearer token (``apiKey``, a secret)."""
    hugging_face_token: Secret | None
    """Hugging Face token for gated downloads (``huggingFaceToken``, a secret); ``None``: anonymous."""
    front: ServingFrontSettings = field(default_factory=ServingFrontSettings)
    """The API proxy, the drain and the NLB (:func:`_validate_serving_front`)."""
    hyperpod_routing: HyperPodRouting = field(default_factory=HyperPodRouting)
    """The HyperPod operator's routing and KV-cache options (``HyperPodRouting``), for ``kimi-k3 hyperpod``."""


@dataclass(frozen=True)
class MonitoringSettings:
    """Alert rules, dashboard and the delivery check (the ``Monitoring and alerts`` keys)."""

    prometheus_operator: bool = False
    """Declare the PrometheusRule, the dashboard ConfigMap and the ServiceMonitors."""
    selector_labels: tuple[tuple[str, str], ...] = (("release", "kube-prometheus-stack"),)
    """Labels the operator's rule and ServiceMonitor selectors match, as (key, value) pairs."""
    namespace: str = "monitoring"
    """Namespace of the scraping Prometheus and of the PrometheusRule."""
    dashboard_namespace: str = "monitoring"
    """Namespace of the dashboard ConfigMap."""
    ttft_p99_s: int = 10
    """Threshold of the time-to-first-token alert, seconds."""
    delivery_check: bool = True
    """Declare the CloudWatch delivery check on the GPU node group's ASG."""


@dataclass(frozen=True)
class DeploymentSettings:
    """How the deployment reaches its cluster, who else may read it, and what the stack wires privately."""

    kubeconfig_role_arn: str | None
    """Role the Kubernetes provider assumes (``None``: the caller's own credentials; :mod:`kimi_k3.cluster.access`)."""
    viewer_role_arns: tuple[str, ...]
    """Roles with read-only cluster access (``AmazonEKSViewPolicy``)."""
    interface_endpoints: tuple[str, ...]
    """Interface endpoint services of a new VPC (:mod:`kimi_k3.network.endpoints`)."""
    weights_kms_key_arn: str | None
    """KMS key of an SSE-KMS weights bucket (``kms:Decrypt`` for the serving role)."""


@dataclass(frozen=True)
class TimeToServeSettings:
    """The time-to-serve mechanisms of docs/weights.md (the ``Time to serve`` keys); every one off by default."""

    staging_job: bool = False
    """Declare the in-region ``WeightsStagingJob`` (``weightsStagingJob``)."""
    bucket_name: str | None = None
    """Declare a ``WeightsBucket`` of that name (``weightsBucketName``)."""
    compile_cache_s3_uri: str | None = None
    """``s3://bucket/prefix/`` of the compile/JIT caches (``compileCacheS3Uri``); ``None``: off."""
    node_local_weights: bool = False
    """StatefulSet + node-local volume instead of the ``emptyDir`` (``nodeLocalWeights``)."""
    node_cleanup_image: str = "registry.k8s.io/sig-storage/local-volume-node-cleanup:v2.9.0"
    """Image of the node-cleanup controller (``nodeCleanupImage``)."""
    image_prepull: bool = False
    """The engine image pre-pull DaemonSet (``imagePrePull``)."""
    fast_image_pull: bool = False
    """nodeadm FastImagePull on the GPU nodes (``fastImagePull``)."""
    pull_through_secret_arn: str | None = None
    """Docker Hub credentials of the ECR pull-through cache rule (``dockerHubPullThroughSecretArn``); ``None``: no rule."""
    pull_through_upstream_image: str | None = None
    """The Docker Hub ``servingImage`` as configured, when the contract's image was rewritten to the pull-through cache."""
    verify_hasher: str = "auto"
    """Hasher of the node-side sha256 check (``weightsVerifyHasher``)."""


@dataclass(frozen=True)
class HyperPodSettings:
    """A ``hyperpod`` stack's SageMaker HyperPod cluster (``servingPlatform: hyperpod``)."""

    training_plan: str
    """The Flexible Training Plan backing the instance group: its ARN or name (``trainingPlanArn``)."""
    cluster_name: str
    """Name of the HyperPod cluster (``hyperpodClusterName``, default ``<project>-<stack>``)."""
    instance_type: str
    """HyperPod instance type of the instance group: ``ml.`` + ``gpuInstanceType``."""
    ebs_volume_gib: int
    """Extra EBS volume per instance (``hyperpodEbsVolumeGiB``)."""


@dataclass(frozen=True)
class StackSettings:
    """Everything one stack needs, validated as a whole."""

    project: str
    """Pulumi project name (``kimi-k3`` unless the caller names another)."""
    stack: str
    """Pulumi stack name (``dev`` …); with ``project`` it makes the default HyperPod cluster name."""
    environment: str
    """``dev``, ``staging`` or ``prod`` (``environment``); prod applies the strict rules (:attr:`production`)."""
    region: str
    """AWS region of the stack (``aws:region``)."""
    network: NetworkSettings
    """VPC layout or the existing VPC (the ``Network`` keys)."""
    cluster: ClusterSettings
    """EKS control plane and system node group (the ``Cluster`` keys)."""
    capacity: CapacitySettings
    """The Capacity Block and its GPU node group (the ``Capacity Block and GPU nodes`` keys)."""
    plugins: GpuPluginSettings
    """GPU node plugin versions and switches (the ``GPU plugins`` keys)."""
    serving: ServingSettings
    """The serving contract, replicas, exposure and secrets (the ``Serving`` keys)."""
    deployment: DeploymentSettings
    """Deployment access and private wiring (``kubeconfigRoleArn``, ``clusterViewerRoleArns``, ``interfaceEndpoints``, ``weightsKmsKeyArn``)."""
    warnings: tuple[str, ...] = ()
    """Non-fatal findings (e.g. a floating image tag outside prod), shown by the program."""
    monitoring: MonitoringSettings = field(default_factory=MonitoringSettings)
    """Alerts, dashboard and the delivery check."""
    serving_platform: str = "eks"
    """``eks`` or ``hyperpod`` (``servingPlatform``)."""
    hyperpod: HyperPodSettings | None = None
    """The HyperPod cluster of a ``hyperpod`` stack; ``None`` on the EKS path."""
    time_to_serve: TimeToServeSettings = field(default_factory=TimeToServeSettings)
    """Weights staging, node-local weights, compile caches and image pull (:func:`_validate_time_to_serve`)."""

    @property
    def instance(self) -> catalog.InstanceType:
        """Catalog facts of the GPU instance type."""
        return catalog.INSTANCE_TYPES[self.capacity.instance_type]

    @property
    def nodes_per_replica(self) -> int:
        """GPU nodes one replica spans (pipeline stages across nodes)."""
        return self.serving.contract.engine.pipeline_parallel_size

    @property
    def nodes_required(self) -> int:
        """GPU nodes the stack needs at minimum (configured replicas, or one replica)."""
        return max(1, self.serving.replicas) * self.nodes_per_replica

    def replicas_for(self, reserved_instances: int) -> int:
        """Serving replicas on a block of ``reserved_instances``: configured, or one per group of reserved nodes."""
        return self.serving.replicas or max(1, reserved_instances // self.nodes_per_replica)

    @property
    def production(self) -> bool:
        """True for the prod environment, which applies the strict rules."""
        return self.environment == "prod"


def cluster_name(base_name: str, stack: str) -> str:
    """The EKS cluster's name for a platform named ``base_name`` in ``stack`` (``kimi-k3-dev``).

    The one home of the naming rule: :class:`kimi_k3.stack.platform.Platform` names the
    cluster with it, and the CLI finds the cluster of a stack with it.
    """
    return f"{base_name}-{stack}"


# --- reading raw config -------------------------------------------------------


def from_pulumi() -> StackSettings:
    """Read and validate the running Pulumi program's config."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    values: dict[str, Any] = dict(runtime_config.get_config_env())
    values.update(runtime_config.CONFIG.get())
    secret_keys = set(runtime_config.get_config_secret_keys_env()) | {
        k for k in values if runtime_config.is_config_secret(k)
    }
    return from_values(values, secret_keys, project=pulumi.get_project(), stack=pulumi.get_stack())


def read_stack_file(stack: str, root: Path | None = None) -> tuple[dict[str, str], set[str]]:
    """A stack's config in Pulumi's wire form (``{"ns:key": "string"}``) and its secret keys.

    ``root`` is the Pulumi project's directory (default: the nearest ``Pulumi.yaml`` from
    the current directory up). The stack-file rules have one home,
    :func:`kimi_k3.stack.project.read_stack_config`: ``secure:`` values (and declared secrets
    the file does not hold, which CI sets) become marked placeholders, still secret.
    """
    from kimi_k3.stack import project

    config = project.read_stack_config(project.find_project(root, Path.cwd()), stack)
    return dict(config.values), set(config.secret_keys)


def load_stack(stack: str, root: Path | None = None) -> StackSettings:
    """Read and validate a stack of the Pulumi project at ``root`` (default: found from the current directory)."""
    from kimi_k3.stack import project

    return project.load_settings(project.find_project(root, Path.cwd()), stack)


def _to_wire(value: Any) -> str:
    """Render a YAML value the way the Pulumi CLI hands it to the program."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


# --- validation -----------------------------------------------------------------


class _Reader:
    """Typed access to raw config values, one key at a time."""

    def __init__(self, values: Mapping[str, Any], secret_keys: Iterable[str]) -> None:
        self.values = values
        self.secret_keys = set(secret_keys)

    def raw(self, key: ConfigKey) -> Any:
        return self.values.get(key.full_name)

    def get(self, name: str) -> Any:
        key = CONFIG_KEYS[name]
        raw = self.raw(key)
        if raw is None or (raw == "" and key.type == "string" and key.required):
            if key.required:
                how = "pulumi config set --secret" if key.secret else "pulumi config set"
                raise SettingsError(key.full_name, None, f"it is required: {key.description} Set it with `{how} {key.full_name} <value>`")
            return key.default if not isinstance(key.default, list) else tuple(key.default)
        return self._convert(key, raw)

    def _convert(self, key: ConfigKey, raw: Any) -> Any:
        if key.type == "string":
            return str(raw)
        if key.type == "integer":
            if isinstance(raw, bool):
                raise SettingsError(key.full_name, raw, "expected a whole number")
            if isinstance(raw, int):
                return raw
            if isinstance(raw, float) and raw.is_integer():
                return int(raw)
            try:
                return int(str(raw).strip())
            except ValueError:
                raise SettingsError(key.full_name, raw, "expected a whole number") from None
        if key.type == "boolean":
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("true", "false"):
                return text == "true"
            raise SettingsError(key.full_name, raw, "expected true or false")
        # array: the CLI passes structured values as JSON
        items = raw
        if isinstance(raw, str):
            try:
                items = json.loads(raw)
            except json.JSONDecodeError:
                raise SettingsError(key.full_name, raw, "expected a list of strings, e.g. [\"a\", \"b\"]") from None
        if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
            raise SettingsError(key.full_name, raw, "expected a list of strings, e.g. [\"a\", \"b\"]")
        return tuple(items)

    def secret(self, name: str) -> Secret | None:
        key = CONFIG_KEYS[name]
        value = self.get(name)
        if value in ("", None):
            return None
        if key.full_name not in self.secret_keys:
            raise SettingsError(key.full_name, "<plain text value>", f"it must be a secret: set it with `pulumi config set --secret {key.full_name} <value>`")
        return Secret(value, placeholder=str(value).startswith(SECRET_PLACEHOLDER_PREFIX))


def _key(name: str) -> str:
    return CONFIG_KEYS[name].full_name


def _one_of(name: str, value: Any, accepted: Iterable[Any]) -> Any:
    accepted = tuple(accepted)
    if value not in accepted:
        raise SettingsError(_key(name), value, f"accepted: {', '.join(map(str, accepted))}")
    return value


def _in_range(name: str, value: int | float, low: float, high: float) -> Any:
    if not low <= value <= high:
        raise SettingsError(_key(name), value, f"accepted: {low} to {high}")
    return value


def _network(name: str, value: str, *, private: bool = False) -> ipaddress.IPv4Network:
    try:
        net = ipaddress.IPv4Network(value, strict=True)
    except ValueError as err:
        raise SettingsError(_key(name), value, f"expected an IPv4 CIDR such as 10.42.0.0/16 ({err})") from None
    if private and not net.is_private:
        raise SettingsError(_key(name), value, "expected a private RFC 1918 range (10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16)")
    return net


def _cidr_list(name: str, values: tuple[str, ...], *, allow_world: bool) -> tuple[str, ...]:
    for value in values:
        net = _network(name, value)
        if net.prefixlen == 0 and not allow_world:
            raise SettingsError(_key(name), value, "0.0.0.0/0 opens the endpoint to the whole internet; list the CIDRs of your networks instead")
    return values


@functools.lru_cache(maxsize=1)
def aws_provider_keys() -> frozenset[str]:
    """The ``aws:`` config keys the installed AWS provider reads (``aws:region``, ``aws:profile`` …).

    Read from the provider SDK's own config module (``pulumi_aws/config/vars.py``: one
    ``__config__.get…('<key>')`` per setting), so the list follows the pinned provider.
    """
    spec = importlib.util.find_spec("pulumi_aws")
    if spec is None or not spec.submodule_search_locations:
        return frozenset({"region", "profile"})
    source = Path(next(iter(spec.submodule_search_locations)), "config", "vars.py").read_text()
    return frozenset(re.findall(r"__config__\.get\w*\('(\w+)'", source))


def _unknown_keys(values: Mapping[str, Any], secret_keys: Iterable[str]) -> None:
    """Refuse keys this stack does not read: no namespace, a foreign or misspelt namespace, a misspelt key.

    ``kimi-k3:`` keys are checked against the schema, ``aws:`` keys against the AWS
    provider's settings; ``pulumi:`` keys belong to the engine. The message suggests the
    nearest valid key.
    """
    ours = {k.name for k in CONFIG_KEYS.values()}
    aws_keys = aws_provider_keys()
    secrets = set(secret_keys)
    for key in sorted(values):
        shown = "***" if key in secrets or "secret" in key.lower() else values[key]
        namespace, sep, name = key.rpartition(":")
        if namespace in NAMESPACES_PASSED_THROUGH:
            continue
        if namespace == "aws":
            if name not in aws_keys:
                near = nearest(name, aws_keys)
                hint = f"did you mean aws:{near}?" if near else "see the AWS provider's configuration reference"
                raise SettingsError(key, shown, f"not a setting of the AWS provider; {hint}")
            continue
        if namespace == PROJECT and name in ours:
            continue
        near = nearest(name, ours)
        suggestion = f"did you mean {PROJECT}:{near}?" if near else f"known keys: {', '.join(sorted(ours))}"
        if not sep:
            raise SettingsError(key, shown, f"a key needs a namespace (Pulumi reads {PROJECT}:<key> and aws:<key>); {suggestion}")
        if namespace != PROJECT:
            raise SettingsError(key, shown, f"unknown namespace {namespace!r}: this stack reads {PROJECT}: and aws: keys; {suggestion}")
        raise SettingsError(key, shown, f"unknown key; {suggestion}")


def _region(values: Mapping[str, Any]) -> str:
    region = values.get("aws:region")
    if region in (None, ""):
        raise SettingsError("aws:region", None, "it is required: the AWS region of the stack, e.g. us-east-2 (pulumi config set aws:region us-east-2)")
    if not KNOWN_REGION.fullmatch(str(region)):
        raise SettingsError("aws:region", region, "expected an AWS region name such as us-east-1, us-west-2 or eu-north-1")
    return str(region)


def _instance_type(name: str, value: str) -> str:
    if value in catalog.INSTANCE_TYPES:
        return value
    known = ", ".join(catalog.INSTANCE_TYPES)
    match = INSTANCE_TYPE_RE.fullmatch(value)
    if match and match.group(1) in catalog.NON_GPU_FAMILIES:
        raise SettingsError(_key(name), value, f"not a GPU instance type; accepted: {known}")
    raise SettingsError(_key(name), value, f"unknown instance type; accepted: {known}")


def from_values(values: Mapping[str, Any], secret_keys: Iterable[str] = (), *, project: str = PROJECT, stack: str = "dev") -> StackSettings:
    """Validate raw config (``{"ns:key": value}``) into :class:`StackSettings`.

    Raises :class:`SettingsError` on the first mistake found.
    """
    _unknown_keys(values, secret_keys)
    r = _Reader(values, secret_keys)
    warnings: list[str] = []

    environment = _one_of("environment", r.get("environment"), ENVIRONMENTS)
    prod = environment == "prod"
    region = _region(values)

    serving_platform = _one_of("servingPlatform", r.get("servingPlatform"), SERVING_PLATFORMS)
    network = _validate_network(r, region)
    cluster = _validate_cluster(r, prod, network)
    capacity = _validate_capacity(r, prod, hyperpod=serving_platform == "hyperpod")
    plugins = _validate_plugins(r)
    serving = _validate_serving(r, prod, region, capacity, network, warnings)
    monitoring = _validate_monitoring(r)
    if monitoring.prometheus_operator:
        serving = dataclasses.replace(serving, service_monitor_enabled=True)
    deployment = _validate_deployment(r, region, network, cluster, serving)
    time_to_serve, serving = _validate_time_to_serve(r, prod, region, capacity, serving, warnings)
    hyperpod = _validate_hyperpod(r, serving_platform, region, cluster, capacity, serving, f"{project}-{stack}", warnings)

    return StackSettings(
        project=project,
        stack=stack,
        environment=environment,
        region=region,
        network=network,
        cluster=cluster,
        capacity=capacity,
        plugins=plugins,
        serving=serving,
        deployment=deployment,
        warnings=tuple(warnings),
        monitoring=monitoring,
        serving_platform=serving_platform,
        hyperpod=hyperpod,
        time_to_serve=time_to_serve,
    )


def _validate_network(r: _Reader, region: str) -> NetworkSettings:
    vpc = _network("vpcCidr", r.get("vpcCidr"), private=True)
    az_count = _in_range("availabilityZoneCount", r.get("availabilityZoneCount"), 2, 4)
    azs = r.get("availabilityZones")
    for az in azs:
        if not re.fullmatch(rf"{re.escape(region)}[a-z]", az):
            raise SettingsError(_key("availabilityZones"), az, f"expected AZ names of region {region}, e.g. {region}a")
    if len(set(azs)) != len(azs):
        raise SettingsError(_key("availabilityZones"), list(azs), "each AZ once")
    if azs and len(azs) < 2:
        raise SettingsError(_key("availabilityZones"), list(azs), "at least 2 AZs (EKS needs subnets in two AZs)")
    n_azs = len(azs) or az_count
    if vpc.prefixlen < 16 or vpc.prefixlen > 28:
        raise SettingsError(_key("vpcCidr"), str(vpc), "accepted: a prefix between /16 and /20 (AWS VPCs are /16 to /28)")
    try:
        private_prefix, public_prefix = subnet_layout(vpc.prefixlen, n_azs)
    except UserError as err:
        raise SettingsError(_key("vpcCidr"), str(vpc), str(err).replace(f"a /{vpc.prefixlen} VPC is too small", "too small")) from None
    if vpc.prefixlen > 20:
        raise SettingsError(_key("vpcCidr"), str(vpc), "accepted: a prefix between /16 and /20")
    existing_vpc = r.get("existingVpcId") or None
    private_ids = r.get("existingPrivateSubnetIds")
    public_ids = r.get("existingPublicSubnetIds")
    if existing_vpc:
        if not VPC_ID.fullmatch(existing_vpc):
            raise SettingsError(_key("existingVpcId"), existing_vpc, "expected a VPC id such as vpc-0a1b2c3d4e5f67890")
        if not private_ids:
            raise SettingsError(_key("existingPrivateSubnetIds"), [], "required with existingVpcId: the private subnet ids, one per AZ")
    elif private_ids or public_ids:
        raise SettingsError(_key("existingPrivateSubnetIds"), list(private_ids or public_ids), "only used together with existingVpcId")
    for name, ids in (("existingPrivateSubnetIds", private_ids), ("existingPublicSubnetIds", public_ids)):
        for subnet in ids:
            if not SUBNET_ID.fullmatch(subnet):
                raise SettingsError(_key(name), subnet, "expected subnet ids such as subnet-0a1b2c3d4e5f67890")
    return NetworkSettings(
        vpc_cidr=str(vpc),
        availability_zones=azs,
        availability_zone_count=az_count,
        nat_mode=_one_of("natGateways", r.get("natGateways"), NAT_MODES),
        flow_log_retention_days=_one_of("flowLogRetentionDays", r.get("flowLogRetentionDays"), LOG_RETENTION_DAYS),
        private_subnet_prefix=private_prefix,
        public_subnet_prefix=public_prefix,
        existing_vpc_id=existing_vpc,
        existing_private_subnet_ids=private_ids,
        existing_public_subnet_ids=public_ids,
    )


def _validate_cluster(r: _Reader, prod: bool, network: NetworkSettings) -> ClusterSettings:
    version = r.get("clusterVersion")
    if version not in catalog.SUPPORTED_EKS_VERSIONS:
        raise SettingsError(_key("clusterVersion"), version, f"accepted: {', '.join(catalog.SUPPORTED_EKS_VERSIONS)} (quote it in YAML: \"1.34\")")
    public = r.get("clusterEndpointPublicAccess")
    if public and prod:
        raise SettingsError(_key("clusterEndpointPublicAccess"), True, "must be false in prod: the API endpoint stays private (reach it through the VPC, a VPN or a bastion)")
    cidrs = _cidr_list("clusterPublicAccessCidrs", r.get("clusterPublicAccessCidrs"), allow_world=False)
    if public and not cidrs:
        raise SettingsError(_key("clusterPublicAccessCidrs"), [], "required when clusterEndpointPublicAccess is true: the CIDRs of your networks (never 0.0.0.0/0)")
    admins = r.get("clusterAdminRoleArns")
    if not admins:
        raise SettingsError(_key("clusterAdminRoleArns"), [], "at least one IAM role ARN such as arn:aws:iam::123456789012:role/platform-admin (the cluster creator is not made admin implicitly)")
    for arn in admins:
        if not ROLE_ARN.fullmatch(arn):
            raise SettingsError(_key("clusterAdminRoleArns"), arn, "expected IAM role ARNs such as arn:aws:iam::123456789012:role/platform-admin")
    service = _network("clusterServiceCidr", r.get("clusterServiceCidr"), private=True)
    if service.overlaps(ipaddress.IPv4Network(network.vpc_cidr)):
        raise SettingsError(_key("clusterServiceCidr"), str(service), f"must not overlap the VPC CIDR {network.vpc_cidr}")
    if not 12 <= service.prefixlen <= 24:
        raise SettingsError(_key("clusterServiceCidr"), str(service), "accepted: a prefix between /12 and /24 (EKS limits)")
    system_type = r.get("systemNodeInstanceType")
    if not INSTANCE_TYPE_RE.fullmatch(system_type) or system_type in catalog.INSTANCE_TYPES or system_type.startswith(("p", "g")):
        raise SettingsError(_key("systemNodeInstanceType"), system_type, "expected a CPU instance type such as m7i.xlarge (GPU nodes come from the Capacity Block)")
    return ClusterSettings(
        version=version,
        endpoint_public_access=public,
        public_access_cidrs=cidrs,
        admin_role_arns=r.get("clusterAdminRoleArns"),
        service_cidr=str(service),
        log_retention_days=_one_of("clusterLogRetentionDays", r.get("clusterLogRetentionDays"), LOG_RETENTION_DAYS),
        system_node_instance_type=system_type,
        system_node_count=_in_range("systemNodeCount", r.get("systemNodeCount"), 2, 10),
    )


def _validate_capacity(r: _Reader, prod: bool, *, hyperpod: bool = False) -> CapacitySettings:
    reservation = r.get("capacityReservationId")
    if not reservation and not hyperpod:
        key = CONFIG_KEYS["capacityReservationId"]
        raise SettingsError(key.full_name, None, f"it is required: {key.description} Set it with `pulumi config set {key.full_name} <value>`")
    if reservation and CAPACITY_BLOCK_OFFERING_ID.fullmatch(reservation):
        raise SettingsError(
            _key("capacityReservationId"), reservation,
            "that is a Capacity Block offering id (cb-...), not a reservation: buy it with "
            f"`kimi-k3 capacity purchase {reservation} --count N --days D`, which prints the reservation id (cr- followed by 17 hex digits) to set here",
        )
    if reservation and not CAPACITY_RESERVATION_ID.fullmatch(reservation):
        raise SettingsError(_key("capacityReservationId"), reservation, "expected 'cr-' followed by 17 lowercase hex digits, e.g. cr-0123456789abcdef0")
    ami = r.get("gpuAmiReleaseVersion") or None
    if ami and not re.fullmatch(r"\d+\.\d+\.\d+-\d{8}", ami):
        raise SettingsError(_key("gpuAmiReleaseVersion"), ami, "expected an EKS AMI release version such as 1.34.2-20251120")
    if prod and not ami and not hyperpod:
        raise SettingsError(_key("gpuAmiReleaseVersion"), None, "required in prod: pin the AL2023 NVIDIA AMI release so node replacements are reproducible")
    email = r.get("capacityAlertEmail") or None
    if email and not EMAIL_LETTER_TLD.fullmatch(email):
        raise SettingsError(_key("capacityAlertEmail"), email, "expected an e-mail address such as oncall@example.com")
    return CapacitySettings(
        reservation_id=reservation,
        instance_type=_instance_type("gpuInstanceType", r.get("gpuInstanceType")),
        ami_release_version=ami,
        root_volume_gib=_in_range("gpuRootVolumeGiB", r.get("gpuRootVolumeGiB"), 100, 2000),
        efa_enabled=r.get("efaEnabled"),
        alert_email=email,
    )


def _chart_version(name: str, value: str, minimum: tuple[int, ...] | None = None) -> str:
    match = CHART_VERSION.fullmatch(value)
    if not match:
        raise SettingsError(_key(name), value, "expected a chart version such as 0.20.0")
    if minimum and tuple(map(int, match.groups())) < minimum:
        raise SettingsError(_key(name), value, f"accepted: {'.'.join(map(str, minimum))} or newer (older versions misdetect NVLink devices on p6)")
    return value.lstrip("v")


def _validate_plugins(r: _Reader) -> GpuPluginSettings:
    return GpuPluginSettings(
        nvidia_device_plugin_version=_chart_version("nvidiaDevicePluginVersion", r.get("nvidiaDevicePluginVersion")),
        efa_device_plugin_version=_chart_version("efaDevicePluginVersion", r.get("efaDevicePluginVersion"), (0, 5, 10)),
        dcgm_exporter_enabled=r.get("dcgmExporterEnabled"),
        dcgm_exporter_version=_chart_version("dcgmExporterVersion", r.get("dcgmExporterVersion")),
    )


@contextlib.contextmanager
def _contract_key() -> Iterator[None]:
    """Turn a :class:`ContractError` into a :class:`SettingsError` naming the config key that set the field.

    The contract owns the rule and its wording; sibling fields it mentions
    (``engine.pipeline_parallel_size``) are renamed to their keys (``pipelineParallelSize``).
    """
    try:
        yield
    except ContractError as err:
        if seam.key_name("ServingContract", err.field) is None:
            raise
        raise seam.refused("ServingContract", err.field, err.value, seam.in_key_terms("ServingContract", err.accepted)) from None


def _engine_recipe(capacity: CapacitySettings, pipeline_parallel_size: Any) -> engine_profiles.EngineRecipe | None:
    """The recipe profile for the stack's GPU and layout; ``None`` when there is none (the contract then says why)."""
    nodes = pipeline_parallel_size if isinstance(pipeline_parallel_size, int) and pipeline_parallel_size >= 1 else 1
    try:
        return engine_profiles.recipe_for(catalog.INSTANCE_TYPES[capacity.instance_type], nodes)
    except UserError:
        return None


def _serving_env(r: _Reader) -> dict[str, str]:
    """``servingEnv`` items (``NAME=value``) as a mapping, in order; the contract refuses managed names."""
    env: dict[str, str] = {}
    for item in r.get("servingEnv"):
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SettingsError(_key("servingEnv"), item, "expected NAME=value items, e.g. NCCL_DEBUG=INFO")
        if name in env:
            raise SettingsError(_key("servingEnv"), item, f"{name} is set twice")
        env[name] = value
    return env


def _validate_serving(r: _Reader, prod: bool, region: str, capacity: CapacitySettings, network: NetworkSettings, warnings: list[str]) -> ServingSettings:
    raw_image = r.get("servingImage")
    raw_util = r.get("gpuMemoryUtilization")
    recipe = _engine_recipe(capacity, r.get("pipelineParallelSize"))
    defaults = engine_profiles.RECIPES[f"blackwell/{engine_profiles.SINGLE_NODE}"] if recipe is None else recipe
    try:
        gpu_util = defaults.gpu_memory_utilization if raw_util == "" else float(raw_util)
    except ValueError:
        raise SettingsError(_key("gpuMemoryUtilization"), raw_util, "expected a decimal between 0.50 and 0.98") from None
    kv_cache_dtype = r.get("kvCacheDtype") or defaults.kv_cache_dtype
    dcp = r.get("decodeContextParallel")
    if dcp and recipe is not None and not recipe.decode_context_parallel:
        raise SettingsError(
            _key("decodeContextParallel"), True,
            f"the recipe's decode context parallelism is for the single-node TP8 profile only ({engine_profiles.RECIPE_SOURCE}); "
            f"this stack runs {recipe.name}",
        )
    env = {**dict(defaults.env), **_serving_env(r)}
    media = r.get("mediaPolicy")
    instance = catalog.INSTANCE_TYPES[capacity.instance_type]
    with _contract_key():
        contract = ServingContract(
            image=ImageContract.parse(raw_image),
            weights=WeightsContract(
                model_id=r.get("modelId"),
                revision=r.get("modelRevision"),
                source=r.get("weightsSource"),
                s3_uri=r.get("weightsS3Uri") or None,
                sha256_manifest=r.get("weightsSha256Manifest") or None,
            ),
            api=ApiContract(media=media, media_domains=r.get("mediaAllowedDomains")),
            engine=EngineProfile(
                tensor_parallel_size=r.get("tensorParallelSize"),
                pipeline_parallel_size=r.get("pipelineParallelSize"),
                gpu_memory_utilization=gpu_util,
                max_model_len=r.get("maxModelLen") or defaults.max_model_len,
                kv_cache_dtype=kv_cache_dtype,
                extra_args=r.get("vllmExtraArgs"),
                ready_timeout_s=r.get("engineReadyTimeoutSeconds"),
                load_format=defaults.load_format,
                moe_backend=defaults.moe_backend,
                tuning_args=defaults.tuning_for(kv_cache_dtype, bool(dcp)),
                env=tuple(env.items()),
                decode_context_parallel=dcp,
                profile_name=defaults.name,
            ),
        )
        nodes = contract.fit(instance)
    if not contract.image.pinned:
        if prod:
            raise SettingsError(_key("servingImage"), raw_image, "prod requires an image pinned by digest: repo@sha256:<64 hex> (docker buildx imagetools inspect <image> prints it)")
        warnings.append(f"{_key('servingImage')}: {raw_image} is a floating tag; pin it by digest (repo@sha256:...) before prod")
    if nodes > 1 and not capacity.efa_enabled:
        raise SettingsError(_key("efaEnabled"), False, f"must be true when a replica spans {nodes} nodes (pipelineParallelSize={nodes}): cross-node traffic needs EFA")

    exposure = _one_of("exposure", r.get("exposure"), EXPOSURES)
    allowed = _cidr_list("servingAllowedCidrs", r.get("servingAllowedCidrs"), allow_world=not prod)
    if exposure != "cluster" and not allowed:
        raise SettingsError(_key("servingAllowedCidrs"), [], f"required when exposure is {exposure}: the client CIDRs allowed to call the API through the load balancer")
    if exposure == "public" and any(ipaddress.IPv4Network(c).prefixlen == 0 for c in allowed):
        warnings.append(f"{_key('servingAllowedCidrs')}: 0.0.0.0/0 exposes the API to the internet (API key required)")
    vpc = ipaddress.IPv4Network(network.vpc_cidr)
    for cidr in allowed if exposure != "cluster" and not network.existing_vpc_id else ():
        if ipaddress.IPv4Network(cidr).subnet_of(vpc):
            warnings.append(
                f"{_key('servingAllowedCidrs')}: {cidr} lies inside the VPC {vpc}: pods with addresses in it reach the API "
                "whatever their namespace; list client subnets that hold no nodes"
            )

    api_key = r.secret("apiKey")
    if api_key is None:
        raise SettingsError(_key("apiKey"), None, "required: set it with `pulumi config set --secret kimi-k3:apiKey <key>`")

    return ServingSettings(
        contract=contract,
        replicas=_in_range("replicas", r.get("replicas"), 0, 64),
        exposure=exposure,
        allowed_cidrs=allowed,
        service_monitor_enabled=r.get("serviceMonitorEnabled"),
        api_key=api_key,
        hugging_face_token=r.secret("huggingFaceToken"),
        front=_validate_serving_front(r, contract, exposure, warnings),
        hyperpod_routing=_validate_hyperpod_routing(r),
    )


def _validate_hyperpod_routing(r: _Reader) -> HyperPodRouting:
    """The HyperPod operator's routing keys, checked by ``HyperPodRouting`` (the CRD's enums); the key is named here."""
    values = {field: (r.get(key) or None) for field, key in seam.feeds("HyperPodRouting").items()}
    try:
        return HyperPodRouting(**values)
    except HyperPodRoutingError as err:
        raise seam.refused("HyperPodRouting", err.field, values[err.field], str(err).split("; ", 1)[1]) from None


def _validate_serving_front(r: _Reader, contract: ServingContract, exposure: str, warnings: list[str]) -> ServingFrontSettings:
    """The API proxy, drain and NLB keys, each checked by the rule that owns it (proxy, drain plan, NLB); the key is named here."""
    from kimi_k3.serving import api_proxy, drain, nlb

    routes = r.get("servingExtraRoutes")
    parsed = []
    for item in routes:
        try:
            route = api_proxy.ApiRoute.parse(item)
            api_proxy.check_extra_route(route)
        except UserError as err:
            raise SettingsError(_key("servingExtraRoutes"), item, str(err)) from None
        if route in parsed:
            raise SettingsError(_key("servingExtraRoutes"), item, "each route once")
        parsed.append(route)
    inline_mib = _in_range("mediaInlineMiB", r.get("mediaInlineMiB"), 0, 512)
    if inline_mib and contract.api.media == "text-only":
        raise SettingsError(_key("mediaInlineMiB"), inline_mib, "inline media needs mediaPolicy allowlist (text-only serving refuses media)")
    try:
        proxy = api_proxy.ApiProxyConfig(
            max_model_len=contract.engine.max_model_len,
            max_generation_s=r.get("servingMaxGenerationSeconds"),
            drain_s=r.get("servingDrainSeconds"),
            inline_media_bytes=inline_mib * 1024 * 1024,
            extra_routes=tuple(parsed),
        )
    except api_proxy.ProxyConfigError as err:
        key = seam.key_name("ApiProxyConfig", err.field) or "servingExtraRoutes"
        raise SettingsError(_key(key), r.get(key), str(err)) from None
    except UserError as err:  # the proxy's route rules (a route the defaults already allow)
        raise SettingsError(_key("servingExtraRoutes"), list(routes), str(err)) from None
    grace = r.get("servingTerminationGraceSeconds") or None
    try:
        plan = drain.DrainPlan(
            pre_stop_s=r.get("servingPreStopSeconds"), drain_s=proxy.drain_s, grace_period_s=grace, behind_nlb=exposure in nlb.EXPOSURE_SCHEMES,
        )
    except drain.DrainError as err:
        raise seam.refused("DrainPlan", err.field, err.value, err.accepted) from None
    idle = r.get("nlbIdleTimeoutSeconds")
    if exposure in nlb.EXPOSURE_SCHEMES:
        try:
            nlb.nlb_annotations(proxy, scheme=nlb.scheme_of(exposure), pre_stop_sleep_s=plan.pre_stop_s, idle_timeout_s=idle)
        except nlb.NlbError as err:
            key = seam.key_name("nlb_annotations", err.field) or "nlbIdleTimeoutSeconds"
            raise SettingsError(_key(key), r.get(key), str(err)) from None
    if plan.drain_s < proxy.max_generation_s:
        warnings.append(
            f"{_key('servingDrainSeconds')}: {plan.drain_s} s is shorter than servingMaxGenerationSeconds {proxy.max_generation_s} s: "
            "a rollout or a node drain cuts requests that run longer"
        )
    return ServingFrontSettings(
        extra_routes=tuple(str(route) for route in parsed),
        inline_media_bytes=proxy.inline_media_bytes,
        max_generation_s=proxy.max_generation_s,
        drain_s=plan.drain_s,
        pre_stop_sleep_s=plan.pre_stop_s,
        termination_grace_period_s=grace,
        nlb_idle_timeout_s=idle,
    )


def _validate_monitoring(r: _Reader) -> MonitoringSettings:
    """The ``Monitoring and alerts`` keys: selector labels, namespaces, the TTFT threshold, the switches."""
    # With the operator the ServiceMonitors are always declared: the alert rules read the vLLM
    # series a ServiceMonitor scrapes (the caller turns serving.service_monitor_enabled on).
    operator = r.get("prometheusOperatorEnabled")
    pairs: list[tuple[str, str]] = []
    for item in r.get("prometheusSelectorLabels"):
        key, sep, value = item.partition("=")
        if not sep or not LABEL_KEY.fullmatch(key) or not LABEL_VALUE.fullmatch(value):
            raise SettingsError(_key("prometheusSelectorLabels"), item, "expected key=value Kubernetes labels such as release=kube-prometheus-stack")
        if key in dict(pairs):
            raise SettingsError(_key("prometheusSelectorLabels"), item, f"each label key once ({key} is set twice)")
        pairs.append((key, value))
    namespaces = {}
    for name in ("monitoringNamespace", "grafanaDashboardNamespace"):
        value = r.get(name)
        if value and not DNS_LABEL.fullmatch(value):
            raise SettingsError(_key(name), value, "expected a Kubernetes namespace name (a DNS label: lowercase letters, digits and '-', at most 63)")
        namespaces[name] = value
    if not namespaces["monitoringNamespace"]:
        raise SettingsError(_key("monitoringNamespace"), "", "expected a Kubernetes namespace name such as monitoring")
    return MonitoringSettings(
        prometheus_operator=operator,
        selector_labels=tuple(pairs),
        namespace=namespaces["monitoringNamespace"],
        dashboard_namespace=namespaces["grafanaDashboardNamespace"] or namespaces["monitoringNamespace"],
        ttft_p99_s=_in_range("alertTtftP99Seconds", r.get("alertTtftP99Seconds"), 1, 600),
        delivery_check=r.get("deliveryCheckEnabled"),
    )


def _validate_deployment(r: _Reader, region: str, network: NetworkSettings, cluster: ClusterSettings, serving: ServingSettings) -> DeploymentSettings:
    """The deployment's cluster access and private wiring (the rules live in cluster_access and endpoint_services)."""
    raw_role = r.get("kubeconfigRoleArn")
    try:
        role = kubeconfig_role(raw_role, cluster.admin_role_arns)
    except ValueError as err:
        raise SettingsError(_key("kubeconfigRoleArn"), raw_role, f"accepted: {err}") from None
    viewers = r.get("clusterViewerRoleArns")
    for arn in viewers:
        if not ROLE_ARN.fullmatch(arn):
            raise SettingsError(_key("clusterViewerRoleArns"), arn, "expected IAM role ARNs such as arn:aws:iam::123456789012:role/ci-preview")
    if len(set(viewers)) != len(viewers):
        raise SettingsError(_key("clusterViewerRoleArns"), list(viewers), "each role once")
    both = roles_in_both(cluster.admin_role_arns, viewers)
    if both:
        raise SettingsError(
            _key("clusterViewerRoleArns"), both[0],
            f"a role in {_key('clusterAdminRoleArns')} cannot also be a viewer: EKS keeps one access entry per principal (it has admin already)",
        )
    endpoints = r.get("interfaceEndpoints")
    problems = endpoint_problems(endpoints)
    if problems:
        raise SettingsError(_key("interfaceEndpoints"), list(endpoints), f"{'; '.join(problems)}")
    if network.existing_vpc_id and tuple(endpoints) != tuple(CONFIG_KEYS["interfaceEndpoints"].default):
        raise SettingsError(_key("interfaceEndpoints"), list(endpoints), f"only used for a VPC the stack creates; with {_key('existingVpcId')} the endpoints are the VPC owner's")
    key_arn = r.get("weightsKmsKeyArn") or None
    if key_arn is not None:
        match = KMS_KEY_ARN.fullmatch(key_arn)
        if not match:
            raise SettingsError(_key("weightsKmsKeyArn"), key_arn, "expected a KMS key ARN such as arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab (not an alias)")
        if match.group(2) != region:
            raise SettingsError(_key("weightsKmsKeyArn"), key_arn, f"expected a key in the stack's region {region}: S3 encrypts a bucket's objects with a key of the bucket's region")
        if serving.contract.weights.source != "s3":
            raise SettingsError(_key("weightsKmsKeyArn"), key_arn, f"only used with {_key('weightsSource')} s3 (the weights come from {serving.contract.weights.source})")
    return DeploymentSettings(kubeconfig_role_arn=role, viewer_role_arns=viewers, interface_endpoints=endpoints, weights_kms_key_arn=key_arn)


EKS_ONLY_KEYS = (
    "capacityReservationId", "gpuAmiReleaseVersion", "gpuRootVolumeGiB", "efaEnabled", "capacityAlertEmail",
    "nvidiaDevicePluginVersion", "efaDevicePluginVersion", "dcgmExporterEnabled", "dcgmExporterVersion",
    "servingAllowedCidrs", "serviceMonitorEnabled",
    "servingExtraRoutes", "servingMaxGenerationSeconds", "servingDrainSeconds", "servingPreStopSeconds",
    "servingTerminationGraceSeconds", "nlbIdleTimeoutSeconds", "weightsKmsKeyArn",
    "prometheusOperatorEnabled", "deliveryCheckEnabled",
    "weightsStagingJob", "weightsBucketName", "compileCacheS3Uri", "nodeLocalWeights", "imagePrePull", "fastImagePull",
    "dockerHubPullThroughSecretArn", "weightsVerifyHasher", "nodeCleanupImage",
)
"""Keys only the EKS path reads (Capacity Block node group, GPU plugins, the API proxy and its drain, the NLB, the alerts): a ``hyperpod`` stack warns when one is set."""
HYPERPOD_ONLY_KEYS = ("trainingPlanArn", "hyperpodClusterName", "hyperpodEbsVolumeGiB")
"""Keys only a ``hyperpod`` stack reads: an ``eks`` stack warns when one is set."""

def _changed_keys(r: _Reader, names: Iterable[str]) -> list[str]:
    """The keys among ``names`` whose value is not their default (set in the stack file)."""
    changed = []
    for name in names:
        key = CONFIG_KEYS[name]
        default = tuple(key.default) if isinstance(key.default, list) else key.default
        if r.get(name) != default:
            changed.append(key.full_name)
    return changed


def _validate_hyperpod(
    r: _Reader,
    serving_platform: str,
    region: str,
    cluster: ClusterSettings,
    capacity: CapacitySettings,
    serving: ServingSettings,
    default_cluster_name: str,
    warnings: list[str],
) -> HyperPodSettings | None:
    """What HyperPod requires of a ``hyperpod`` stack (each rule's home is named; this layer names the key).

    The rules: :mod:`kimi_k3.hyperpod.rules` (Kubernetes versions, names), the training
    plan reference (:func:`kimi_k3.hyperpod.training_plans.validate_plan_ref`), the instance types
    a plan can reserve (botocore's SageMaker model) and what the Inference Operator can
    serve (:func:`kimi_k3.hyperpod.endpoint.render_inference_endpoint_config`).
    """
    if serving_platform != "hyperpod":
        stray = _changed_keys(r, HYPERPOD_ONLY_KEYS)
        if stray:
            warnings.append(f"{', '.join(stray)} {'apply' if len(stray) > 1 else 'applies'} only to servingPlatform hyperpod; this stack is eks and ignores {'them' if len(stray) > 1 else 'it'}")
        return None
    # Imported here: an EKS stack never loads the HyperPod modules.
    from kimi_k3.errors import ComponentInputError
    from kimi_k3.hyperpod import rules as hyperpod_rules
    from kimi_k3.hyperpod import training_plans
    from kimi_k3.hyperpod.endpoint import render_inference_endpoint_config

    plan = r.get("trainingPlanArn")
    if not plan:
        raise SettingsError(
            _key("trainingPlanArn"), None,
            "required when servingPlatform is hyperpod: the training plan (ARN or name) backing the instance group; "
            "buy one with `kimi-k3 hyperpod plans offerings` / `purchase`",
        )
    try:
        training_plans.validate_plan_ref(plan)
    except UserError:
        raise SettingsError(_key("trainingPlanArn"), plan, "expected a training plan ARN (arn:aws:sagemaker:<region>:<account>:training-plan/<name>) or name") from None
    if plan.startswith("arn:") and plan.split(":")[3] != region:
        raise SettingsError(_key("trainingPlanArn"), plan, f"a training plan of the stack's region {region} (aws:region): HyperPod uses plans of its own region only")
    try:
        hyperpod_rules.check_kubernetes_version(cluster.version)
    except UserError as err:
        raise SettingsError(_key("clusterVersion"), cluster.version, str(err)) from None
    cluster_name = r.get("hyperpodClusterName") or default_cluster_name
    try:
        hyperpod_rules.check_names(cluster_name, ())
    except UserError:
        where = "" if r.get("hyperpodClusterName") else f" (the default <project>-<stack>; set {_key('hyperpodClusterName')})"
        raise SettingsError(_key("hyperpodClusterName"), cluster_name, f"1-63 letters, digits and '-', starting and ending with a letter or digit{where}") from None
    instance_type = f"ml.{capacity.instance_type}"
    plannable = training_plans.supported_instance_types()
    if instance_type not in plannable:
        accepted = ", ".join(t[3:] for t in plannable if t[3:] in catalog.INSTANCE_TYPES)
        raise SettingsError(_key("gpuInstanceType"), capacity.instance_type, f"a type a training plan can reserve for HyperPod (ml.<type>): {accepted}")
    if serving.exposure != "cluster":
        raise SettingsError(
            _key("exposure"), serving.exposure,
            "a hyperpod stack is reached through the SageMaker endpoint and the load balancer the Inference Operator creates itself; "
            "exposure applies to servingPlatform eks only: leave it at cluster",
        )
    try:
        render_inference_endpoint_config(
            serving.contract, instance_type=instance_type, replicas=max(1, serving.replicas), api_key_secret="api-key", s3_region=region,
        )
    except ComponentInputError as err:
        problem = err.problems[0]
        name = seam.key_name("InferenceEndpoint", problem.path) or "servingPlatform"
        value = r.get(name)
        reason = seam.in_key_terms("ServingContract", problem.reason, optional_prefix="contract.")
        raise SettingsError(_key(name), list(value) if isinstance(value, tuple) else value, f"on servingPlatform hyperpod: {reason}") from None
    stray = _changed_keys(r, EKS_ONLY_KEYS)
    if stray:
        warnings.append(f"{', '.join(stray)} {'apply' if len(stray) > 1 else 'applies'} only to servingPlatform eks; this stack is hyperpod and ignores {'them' if len(stray) > 1 else 'it'}")
    if serving.contract.weights.sha256_manifest:
        warnings.append(
            f"{_key('weightsSha256Manifest')}: the HyperPod path does not verify the weights against it (the Inference Operator fetches "
            "the pinned revision itself); only the EKS path checks the manifest before serving"
        )
    return HyperPodSettings(
        training_plan=plan,
        cluster_name=cluster_name,
        instance_type=instance_type,
        ebs_volume_gib=_in_range("hyperpodEbsVolumeGiB", r.get("hyperpodEbsVolumeGiB"), 1, 16384),
    )


def _image_like(ref: str) -> bool:
    """``ref`` parses as an image reference with a tag or a digest (the serving contract's parser)."""
    try:
        ImageContract.parse(ref)
    except ContractError:
        return False
    return True


_SECRET_ARN = re.compile(r"^arn:aws[\w-]*:secretsmanager:([a-z0-9-]+):(\d{12}):secret:.+$")


def _validate_time_to_serve(
    r: _Reader, prod: bool, region: str, capacity: CapacitySettings, serving: ServingSettings, warnings: list[str]
) -> tuple[TimeToServeSettings, ServingSettings]:
    """The ``Time to serve`` keys. The rules live in ``kimi_k3.weights`` (staging Job, bucket, compile cache key,
    node sync, FastImagePull vs the AMI release, the pull-through cache rule); this layer names the key.

    Returns the settings and the serving settings, whose contract image is rewritten to the ECR pull-through
    cache when ``dockerHubPullThroughSecretArn`` is set.
    """
    from kimi_k3.weights import WeightsError, bucket, compile_cache, image_pull, node_sync, staging_job
    from kimi_k3.weights.estimate import image_in_region
    from kimi_k3.weights.s3store import S3Location

    contract = serving.contract
    weights = contract.weights
    hasher = _one_of("weightsVerifyHasher", r.get("weightsVerifyHasher"), node_sync.HASHERS)

    staging = r.get("weightsStagingJob")
    if staging:
        if weights.source != "s3" or weights.s3_uri is None:
            raise SettingsError(_key("weightsStagingJob"), True, f"needs {_key('weightsSource')} s3 and {_key('weightsS3Uri')}: the Job stages the revision into that prefix")
        try:
            staging_job.validate(staging_job.WeightsStagingJobArgs(
                image=contract.image.image, model_id=weights.model_id, revision=weights.revision, s3_uri=weights.s3_uri,
                cluster_name="validation", aws_region=region, allow_floating_tag=not prod,
            ))
        except UserError as err:
            raise SettingsError(_key("weightsStagingJob"), True, f"accepted only when the staging Job can run: {err}") from None

    bucket_name = r.get("weightsBucketName") or None
    cache_uri = r.get("compileCacheS3Uri") or None
    if cache_uri is not None:
        try:
            location = S3Location.parse(cache_uri)
        except WeightsError:
            raise SettingsError(_key("compileCacheS3Uri"), cache_uri, "expected s3://bucket/prefix/ with a trailing slash (the caches' role reads and writes only that prefix)") from None
        if not location.prefix:
            raise SettingsError(_key("compileCacheS3Uri"), cache_uri, "expected a non-empty prefix, s3://bucket/prefix/: the caches' role reads and writes only that prefix")
        if weights.source != "s3":
            raise SettingsError(_key("compileCacheS3Uri"), cache_uri, f"only with {_key('weightsSource')} s3: the serving pods' Pod Identity role (which reads and writes the caches) exists for S3 weights")
        if contract.engine.pipeline_parallel_size != 1:
            raise SettingsError(_key("compileCacheS3Uri"), cache_uri, f"single-node replicas only ({_key('pipelineParallelSize')} 1): each rank of a LeaderWorkerSet compiles its own cache")
        if weights.s3_uri and (cache_uri.startswith(weights.s3_uri) or weights.s3_uri.startswith(cache_uri)):
            raise SettingsError(_key("compileCacheS3Uri"), cache_uri, f"a prefix apart from {_key('weightsS3Uri')} {weights.s3_uri}: the serving pods write caches there, and must not write weights")
        try:
            compile_cache.cache_key(compile_cache.CacheKeyInputs(
                image=contract.image.image, model_revision=weights.revision, engine_args=(), engine_env={}, gpu="gpu", ami_release_version=capacity.ami_release_version,
            ))
        except WeightsError:
            raise SettingsError(
                _key("compileCacheS3Uri"), cache_uri,
                f"accepted only with {_key('servingImage')} pinned by digest (repo@sha256:<64 hex>): caches are keyed on the exact build, and a tag moves",
            ) from None
    if bucket_name is not None:
        try:
            bucket.validate(bucket.WeightsBucketArgs(bucket_name=bucket_name))
        except UserError as err:
            raise SettingsError(_key("weightsBucketName"), bucket_name, f"expected an S3 bucket name ({err})") from None
        buckets = [b for b in (weights.s3_bucket, S3Location.parse(cache_uri).bucket if cache_uri else None) if b]
        if bucket_name not in buckets:
            named = " or ".join(dict.fromkeys(buckets)) or f"none yet: set {_key('weightsS3Uri')} or {_key('compileCacheS3Uri')}"
            raise SettingsError(_key("weightsBucketName"), bucket_name, f"the bucket {_key('weightsS3Uri')} or {_key('compileCacheS3Uri')} names ({named})")

    node_local = r.get("nodeLocalWeights")
    if node_local:
        if weights.source != "s3":
            raise SettingsError(_key("nodeLocalWeights"), True, f"needs {_key('weightsSource')} s3: the node-side sync keeps its verified marker and one directory per revision on the node's volume")
        if contract.engine.pipeline_parallel_size != 1:
            raise SettingsError(_key("nodeLocalWeights"), True, f"single-node replicas only ({_key('pipelineParallelSize')} 1): the LeaderWorkerSet path keeps its weights in an emptyDir")

    cleanup_image = r.get("nodeCleanupImage")
    cleanup_ref = ImageContract.parse(cleanup_image) if _image_like(cleanup_image) else None
    if cleanup_ref is None:
        raise SettingsError(_key("nodeCleanupImage"), cleanup_image, "expected repo:tag or repo@sha256:<64 hex>")
    if node_local and prod and not cleanup_ref.pinned:
        raise SettingsError(_key("nodeCleanupImage"), cleanup_image, "prod requires an image pinned by digest: mirror it (e.g. into ECR) and use repo@sha256:<64 hex>")

    fast = r.get("fastImagePull")
    try:
        warnings.extend(f"{_key('gpuAmiReleaseVersion')}: {w}" for w in image_pull.check_fast_image_pull(capacity.ami_release_version, fast))
    except UserError as err:
        reason = re.sub(r"^FastImagePull is not accepted on AMI release \S+: ", "", str(err))  # the key and release are named here
        raise SettingsError(
            _key("fastImagePull"), True, f"with {_key('gpuAmiReleaseVersion')} {capacity.ami_release_version or '(unset)'}: {reason}",
        ) from None

    secret_arn = r.get("dockerHubPullThroughSecretArn") or None
    upstream = None
    if secret_arn is not None:
        try:
            image_pull.pull_through_cache_rule_args(secret_arn)
        except UserError as err:
            raise SettingsError(_key("dockerHubPullThroughSecretArn"), secret_arn, f"expected a Secrets Manager secret ARN ({err})") from None
        match = _SECRET_ARN.match(secret_arn)
        assert match is not None  # pull_through_cache_rule_args checked the shape
        if match.group(1) != region:
            raise SettingsError(_key("dockerHubPullThroughSecretArn"), secret_arn, f"a secret in the stack's region {region}: ECR reads the credentials of a pull-through cache rule in the rule's own region")
        try:
            rewritten = image_pull.through_cache(contract.image.image, match.group(2), region)
        except UserError:
            if not image_in_region(contract.image.reference.repository, region):
                warnings.append(
                    f"{_key('dockerHubPullThroughSecretArn')}: {_key('servingImage')} {contract.image.image} is neither a Docker Hub image nor in ECR in {region}, "
                    "so it is pulled as it is, from outside the region; the pull-through cache rule serves Docker Hub images only"
                )
        else:
            upstream = contract.image.image
            contract = dataclasses.replace(contract, image=ImageContract.parse(rewritten))
            serving = dataclasses.replace(serving, contract=contract)

    settings = TimeToServeSettings(
        staging_job=staging, bucket_name=bucket_name, compile_cache_s3_uri=cache_uri, node_local_weights=node_local, node_cleanup_image=cleanup_image,
        image_prepull=r.get("imagePrePull"), fast_image_pull=fast, pull_through_secret_arn=secret_arn,
        pull_through_upstream_image=upstream, verify_hasher=hasher,
    )
    return settings, serving
