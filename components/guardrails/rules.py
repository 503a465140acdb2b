"""The rules of the ``kimi-k3-guardrails`` policy pack (one home: the pack and ``kimi-k3 plan`` use them).

Each rule encodes a fact that makes a Kimi K3 deployment fail late (EC2 or
Kubernetes refuses it half-way through ``pulumi up``) or leaves it open. Sources:
the EKS user guide "Create a managed node group with Capacity Blocks for ML"
(capacity-blocks-mng: launch template with the capacity-block market type, instance
type in the template only, ``CAPACITY_BLOCK`` capacity type), the EC2 user guide
"Capacity Blocks for ML" (no cluster placement group), the EKS API ``CreateCluster``
reference (public endpoint defaults to 0.0.0.0/0) and the Kubernetes documentation
"Schedule GPUs" (extended resources: requests must equal limits).

Importing this module starts nothing: ``policy/__main__.py`` builds the
``PolicyPack`` (which starts the analyzer's gRPC server) from :data:`ALL_POLICIES`;
:mod:`kimi_k3.guardrails.verdict` runs the same policies over an offline plan.

Enforcement levels: ``mandatory`` for what fails ``pulumi up`` late or opens the
cluster, ``advisory`` for hygiene. Any level can be changed per stack with
``--policy-pack-config`` (see ``policy/README.md`` and ``policy/config/``).

Properties arrive the way the engine sends them: camelCase wire names, numbers
as floats, Mapping/Sequence proxies that raise ``UnknownValueError`` when a value
is unknown during preview. Rules read values through :func:`_get`, which turns an
unknown into :data:`UNKNOWN`, and never report a violation on a value they
cannot see.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)
from pulumi_policy.proxy import UnknownValueError

PACK_NAME = "kimi-k3-guardrails"
"""Name of the policy pack (``PolicyPack(name=...)``)."""

PACK_ENFORCEMENT_LEVEL = EnforcementLevel.MANDATORY
"""The pack's level (``PolicyPack(enforcement_level=...)``), for a policy that sets none."""


class _Unknown:
    """A value the engine cannot know during preview (e.g. an id not created yet)."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()
"""What :func:`_get` returns for a value that is unknown during preview."""

# --- facts -------------------------------------------------------------------------

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
EKS_COMPONENT = "eks:index:Cluster"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
SERVICE = "kubernetes:core/v1:Service"

CAPACITY_BLOCK_CAPACITY_TYPE = "CAPACITY_BLOCK"
CAPACITY_BLOCK_MARKET_TYPE = "capacity-block"
NVIDIA_AL2023_AMI_TYPES = ("AL2023_x86_64_NVIDIA", "AL2023_ARM_64_NVIDIA")
"""EKS AMI types with the NVIDIA driver preinstalled on Amazon Linux 2023."""
CAPACITY_RESERVATION_ID = re.compile(r"cr-[0-9a-f]{17}")
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
"""All five EKS control-plane log types."""
GPU_RESOURCE = "nvidia.com/gpu"
DIGEST_IMAGE = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")

POD_TEMPLATE_PATHS: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "kubernetes:core/v1:Pod": (("spec",),),
    "kubernetes:apps/v1:Deployment": (("spec", "template", "spec"),),
    "kubernetes:apps/v1:StatefulSet": (("spec", "template", "spec"),),
    "kubernetes:apps/v1:DaemonSet": (("spec", "template", "spec"),),
    "kubernetes:apps/v1:ReplicaSet": (("spec", "template", "spec"),),
    "kubernetes:batch/v1:Job": (("spec", "template", "spec"),),
    "kubernetes:batch/v1:CronJob": (("spec", "jobTemplate", "spec", "template", "spec"),),
    "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet": (
        ("spec", "leaderWorkerTemplate", "leaderTemplate", "spec"),
        ("spec", "leaderWorkerTemplate", "workerTemplate", "spec"),
    ),
}
"""Where each workload kind keeps its pod spec(s)."""

DIGEST_PINNED_KINDS = (
    "kubernetes:apps/v1:Deployment",
    "kubernetes:apps/v1:StatefulSet",
    "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet",
)
"""Workloads whose images must be pinned by digest (the serving workloads)."""

DEFAULT_PRIVILEGED_NAMESPACES = ("kube-system", "gpu-plugins", "kimi-engine-snapshot")
"""Namespaces where hostNetwork/privileged pods are accepted by default: EKS add-ons,
the GPU node plugins (``kimi_k3.addons.gpu_plugins.DEFAULT_NAMESPACE``) and the engine snapshot
agent (``kimi_k3.weights.snapshot_agent.NAMESPACE``: CRIU runs privileged with hostPID, ``engineSnapshot``)."""

# --- reading properties ------------------------------------------------------------


def _get(value: Any, *path: str | int) -> Any:
    """``value[path0][path1]...``; ``None`` when absent, :data:`UNKNOWN` when unknown at preview."""
    for key in path:
        try:
            if isinstance(key, int):
                if isinstance(value, str) or not isinstance(value, Sequence) or key >= len(value):
                    return None
                value = value[key]
            else:
                if not isinstance(value, Mapping) or key not in list(iter(value)):
                    return None
                value = value[key]
        except UnknownValueError:
            return UNKNOWN
    return value


def _items(value: Any) -> list[Any]:
    """The elements of a list property (empty when absent or unknown)."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        return []
    out = []
    for index in range(len(value)):
        item = _get(value, index)
        if item is not None:
            out.append(item)
    return out


def _is_set(value: Any) -> bool:
    """True when a property is present and not empty (an unknown value counts: it will be set)."""
    if value is UNKNOWN:
        return True
    if value is None:
        return False
    if isinstance(value, str):
        return value != ""
    if isinstance(value, (Mapping, Sequence)):
        return len(value) > 0
    return True


def _truthy(value: Any) -> bool:
    """Booleans as the providers send them: ``True`` or the string ``"true"``."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _who(args: ResourceValidationArgs) -> str:
    return f"{args.resource_type} '{args.name}'"


def _is_world(cidr: Any) -> bool:
    """True for a CIDR that admits every address (0.0.0.0/0, ::/0)."""
    if not isinstance(cidr, str):
        return False
    try:
        return ipaddress.ip_network(cidr.strip(), strict=False).prefixlen == 0
    except ValueError:
        return False


@dataclass(frozen=True)
class PolicyConfigOption:
    """A per-stack option of one policy (``--policy-pack-config``): its key, type and default in one place."""

    key: str
    """Property name in the policy's config."""
    type: str
    """JSON schema type: ``boolean`` or ``array`` (of strings)."""
    default: Any
    """What the rule uses when the stack's policy config does not set the key."""
    description: str
    """What the option does, as the pack's config schema shows it."""

    def read(self, args: ResourceValidationArgs) -> Any:
        """The stack's value of the option, or its default."""
        value = (args.get_config() or {}).get(self.key)
        return self.default if value is None else value

    def schema(self) -> PolicyConfigSchema:
        """The policy's config schema: this option alone."""
        prop: dict[str, Any] = {"type": self.type}
        if self.type == "array":
            prop["items"] = {"type": "string"}
        prop["default"] = list(self.default) if isinstance(self.default, tuple) else self.default
        prop["description"] = self.description
        return PolicyConfigSchema(properties={self.key: prop})


@dataclass(frozen=True)
class _PropertyRule:
    """One property a validator checks: where it is, which values pass, what a refused value is told."""

    path: tuple[str, ...]
    """Where the property is in ``args.props`` (wire names)."""
    accepts: Callable[[Any], bool]
    """True for an acceptable value; never asked about an unknown one (a value the rule cannot see is not reported)."""
    violation: str
    """The message: ``{who}`` is the resource, ``{value!r}`` the value found."""


def _check_properties(args: ResourceValidationArgs, report_violation: ReportViolation, rules: Sequence[_PropertyRule]) -> None:
    """Report each rule whose property is known and not accepted, in order."""
    who = _who(args)
    for rule in rules:
        value = _get(args.props, *rule.path)
        if value is not UNKNOWN and not rule.accepts(value):
            report_violation(rule.violation.format(who=who, value=value), None)


# --- EC2 Capacity Block: node group and launch template ----------------------------

_CAPACITY_BLOCK_NODE_GROUP_RULES = (
    _PropertyRule(
        ("launchTemplate",),
        _is_set,
        "{who} is a CAPACITY_BLOCK node group without a launch template. "
        "Fix: set launch_template to a template with instance_market_options.market_type='capacity-block' "
        "and capacity_reservation_specification targeting the block's cr- id.",
    ),
    _PropertyRule(
        ("amiType",),
        lambda ami_type: ami_type in NVIDIA_AL2023_AMI_TYPES,
        "{who} has amiType {value!r}: GPU nodes need an AL2023 NVIDIA AMI (driver preinstalled). "
        f"Fix: set ami_type to one of {', '.join(NVIDIA_AL2023_AMI_TYPES)}.",
    ),
    _PropertyRule(
        ("scalingConfig", "maxSize"),
        lambda max_size: isinstance(max_size, (int, float)) and max_size > 0,
        "{who} has scalingConfig.maxSize {value!r}: the node group could never scale onto the Capacity Block. "
        "Fix: set max_size to the block's instance count (desired_size may stay 0 until the block starts).",
    ),
)
"""The CAPACITY_BLOCK node group's property rules after ``instanceTypes`` (which is refused even when unknown: set at all)."""

_CAPACITY_BLOCK_LAUNCH_TEMPLATE_RULES = (
    _PropertyRule(
        ("capacityReservationSpecification", "capacityReservationTarget", "capacityReservationId"),
        lambda reservation: isinstance(reservation, str) and CAPACITY_RESERVATION_ID.fullmatch(reservation) is not None,
        "{who} uses market type capacity-block but targets capacity reservation {value!r}. "
        "Fix: set capacity_reservation_specification.capacity_reservation_target.capacity_reservation_id "
        "to the block's id (cr- followed by 17 hex digits).",
    ),
    _PropertyRule(
        ("instanceType",),
        _is_set,
        "{who} uses market type capacity-block without an instanceType: the node group cannot name one. "
        "Fix: set instance_type on the launch template to the block's instance type.",
    ),
)
"""A capacity-block launch template's property rules before the placement group (refused even when unknown)."""


def validate_capacity_block_node_group(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A CAPACITY_BLOCK node group: launch template, no instanceTypes, NVIDIA AL2023 AMI, maxSize > 0."""
    if args.resource_type != NODE_GROUP or _get(args.props, "capacityType") != CAPACITY_BLOCK_CAPACITY_TYPE:
        return
    who = _who(args)
    instance_types = _get(args.props, "instanceTypes")
    if instance_types is UNKNOWN or _items(instance_types):
        report_violation(
            f"{who} is a CAPACITY_BLOCK node group but sets instanceTypes {list(_items(instance_types))}: EKS rejects it. "
            "Fix: remove instance_types from the node group; set instance_type in its launch template only.",
            None,
        )
    _check_properties(args, report_violation, _CAPACITY_BLOCK_NODE_GROUP_RULES)


def validate_capacity_block_launch_template(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A capacity-block launch template: targets a cr- id, sets the instance type, no placement group."""
    if args.resource_type != LAUNCH_TEMPLATE:
        return
    if _get(args.props, "instanceMarketOptions", "marketType") != CAPACITY_BLOCK_MARKET_TYPE:
        return
    _check_properties(args, report_violation, _CAPACITY_BLOCK_LAUNCH_TEMPLATE_RULES)
    who = _who(args)
    for field in ("groupName", "groupId"):
        group = _get(args.props, "placement", field)
        if _is_set(group):
            report_violation(
                f"{who} uses market type capacity-block and placement.{field} {group!r}: a placement group with a "
                "Capacity Block yields fewer nodes or capacity errors. Fix: remove the placement group from the template.",
                None,
            )


def validate_launch_template_imdsv2(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Every launch template requires IMDSv2 tokens and a hop limit of 1."""
    if args.resource_type != LAUNCH_TEMPLATE:
        return
    tokens = _get(args.props, "metadataOptions", "httpTokens")
    hops = _get(args.props, "metadataOptions", "httpPutResponseHopLimit")
    problems = []
    if tokens is not UNKNOWN and tokens != "required":
        problems.append(f"httpTokens is {tokens!r}")
    if hops is not UNKNOWN and hops != 1:
        problems.append(f"httpPutResponseHopLimit is {hops if hops is None else int(hops)!r}")
    if problems:
        report_violation(
            f"{_who(args)}: {' and '.join(problems)}; pods could read the node role's credentials from IMDS. "
            "Fix: metadata_options=LaunchTemplateMetadataOptionsArgs(http_endpoint='enabled', http_tokens='required', "
            "http_put_response_hop_limit=1) and give pods AWS access through EKS Pod Identity.",
            None,
        )


def validate_launch_template_ebs_encrypted(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Every EBS block device of a launch template is encrypted."""
    if args.resource_type != LAUNCH_TEMPLATE:
        return
    for mapping in _items(_get(args.props, "blockDeviceMappings")):
        ebs = _get(mapping, "ebs")
        if not _is_set(ebs) or ebs is UNKNOWN:
            continue  # instance-store (virtualName) or noDevice mappings have no EBS volume
        encrypted = _get(ebs, "encrypted")
        if encrypted is not UNKNOWN and not _truthy(encrypted):
            report_violation(
                f"{_who(args)}: EBS volume {_get(mapping, 'deviceName')!r} is not encrypted (encrypted={encrypted!r}). "
                "Fix: set ebs.encrypted='true' (and kms_key_id for a customer-managed key).",
                None,
            )


def validate_no_cluster_placement_group(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Cluster placement groups do not go with Capacity Blocks."""
    if args.resource_type != PLACEMENT_GROUP or _get(args.props, "strategy") != "cluster":
        return
    report_violation(
        f"{_who(args)} has strategy 'cluster': a Capacity Block is already placed by AWS, and a cluster placement group "
        "on its launch template yields fewer nodes or capacity errors. Fix: delete the placement group "
        "(use EFA within the block for cross-node traffic).",
        None,
    )


# --- EKS cluster -----------------------------------------------------------------


def _eks_endpoint(args: ResourceValidationArgs) -> tuple[Any, Any]:
    """(public access enabled, public access CIDRs) of either EKS cluster flavour."""
    if args.resource_type == EKS_COMPONENT:
        return _get(args.props, "endpointPublicAccess"), _get(args.props, "publicAccessCidrs")
    return _get(args.props, "vpcConfig", "endpointPublicAccess"), _get(args.props, "vpcConfig", "publicAccessCidrs")


def validate_eks_endpoint_not_world_open(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A public EKS API endpoint is restricted to named CIDRs, never 0.0.0.0/0."""
    if args.resource_type not in (EKS_COMPONENT, EKS_CLUSTER):
        return
    public, cidrs = _eks_endpoint(args)
    if public is UNKNOWN or cidrs is UNKNOWN:
        return
    if public is None:
        public = True  # both pulumi-eks and the EKS API default to a public endpoint
    if not _truthy(public):
        return
    listed = [c for c in _items(cidrs) if c is not UNKNOWN]
    world = [c for c in listed if _is_world(c)]
    if not _items(cidrs) or world:
        what = f"publicAccessCidrs includes {', '.join(world)}" if world else "publicAccessCidrs is empty (EKS then allows 0.0.0.0/0)"
        report_violation(
            f"{_who(args)} exposes a public API endpoint and {what}. "
            "Fix: set endpoint_public_access=False (reach the API through the VPC), or list your CIDRs in "
            "public_access_cidrs (kimi-k3:clusterPublicAccessCidrs).",
            None,
        )


def validate_eks_control_plane_logging(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """All five control-plane log types go to CloudWatch Logs."""
    if args.resource_type not in (EKS_COMPONENT, EKS_CLUSTER):
        return
    enabled = _get(args.props, "enabledClusterLogTypes")
    if enabled is UNKNOWN:
        return
    missing = [t for t in CONTROL_PLANE_LOG_TYPES if t not in _items(enabled)]
    if missing:
        report_violation(
            f"{_who(args)} does not send control-plane logs {', '.join(missing)}. "
            f"Fix: enabled_cluster_log_types={list(CONTROL_PLANE_LOG_TYPES)}.",
            None,
        )


def validate_eks_secrets_encryption(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Kubernetes Secrets are envelope-encrypted with a customer-managed KMS key."""
    if args.resource_type == EKS_COMPONENT:
        configured = _is_set(_get(args.props, "encryptionConfigKeyArn"))
    elif args.resource_type == EKS_CLUSTER:
        resources = _get(args.props, "encryptionConfig", "resources")
        configured = _is_set(_get(args.props, "encryptionConfig", "provider", "keyArn")) and (
            resources is UNKNOWN or "secrets" in _items(resources)
        )
    else:
        return
    if not configured:
        report_violation(
            f"{_who(args)} has no secrets encryption configuration (Secrets hold the API key and the Hugging Face token). "
            "Fix: create an aws.kms.Key with rotation and pass its ARN as encryption_config_key_arn "
            "(aws.eks.Cluster: encryption_config with resources=['secrets']).",
            None,
        )


# --- Kubernetes workloads ---------------------------------------------------------


def _namespace(args: ResourceValidationArgs) -> str:
    namespace = _get(args.props, "metadata", "namespace")
    return namespace if isinstance(namespace, str) and namespace else "default"


def _object_name(args: ResourceValidationArgs) -> str:
    name = _get(args.props, "metadata", "name")
    shown = name if isinstance(name, str) else args.name
    return f"{args.resource_type} '{_namespace(args)}/{shown}'"


def _pod_specs(args: ResourceValidationArgs) -> Iterator[tuple[str, Any]]:
    """(path, pod spec) for each pod template of a workload."""
    for path in POD_TEMPLATE_PATHS.get(args.resource_type, ()):
        spec = _get(args.props, *path)
        if isinstance(spec, Mapping):
            yield ".".join(path), spec


def _containers(pod_spec: Any) -> Iterator[tuple[str, Any]]:
    for field in ("initContainers", "containers"):
        for container in _items(_get(pod_spec, field)):
            yield f"{field}[{_get(container, 'name')}]", container


def validate_gpu_requests_equal_limits(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Containers asking for nvidia.com/gpu set it in limits, and requests (if set) equal limits."""
    for spec_path, spec in _pod_specs(args):
        for where, container in _containers(spec):
            request = _get(container, "resources", "requests", GPU_RESOURCE)
            limit = _get(container, "resources", "limits", GPU_RESOURCE)
            if (request is None and limit is None) or UNKNOWN in (request, limit):
                continue
            if limit is None or (request is not None and not _same_quantity(request, limit)):
                report_violation(
                    f"{_object_name(args)} {spec_path}.{where}: {GPU_RESOURCE} requests={request!r} limits={limit!r}; "
                    "Kubernetes rejects GPUs that are not requested and limited alike. "
                    f"Fix: set resources.limits['{GPU_RESOURCE}'] equal to resources.requests['{GPU_RESOURCE}'].",
                    None,
                )


def _same_quantity(a: Any, b: Any) -> bool:
    """Kubernetes quantities as sent: 8, 8.0 (the engine's numbers) and "8" are the same."""
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


REQUIRE_DIGEST = PolicyConfigOption(
    "requireDigestPinnedImages", "boolean", True,
    "Refuse images that are not pinned by digest. true for prod; set false per stack in "
    "policy/config/<environment>.json (the settings layer still warns about a floating tag).",
)


def validate_images_pinned_by_digest(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Serving workload images are pinned by digest (``repo@sha256:...``) when the stack requires it."""
    if args.resource_type not in DIGEST_PINNED_KINDS or not REQUIRE_DIGEST.read(args):
        return
    for spec_path, spec in _pod_specs(args):
        for where, container in _containers(spec):
            image = _get(container, "image")
            if image is UNKNOWN:
                continue
            if not (isinstance(image, str) and DIGEST_IMAGE.match(image)):
                report_violation(
                    f"{_object_name(args)} {spec_path}.{where}: image {image!r} is not pinned by digest; a tag can move "
                    "under a running deployment. Fix: use repo@sha256:<64 hex> (kimi-k3:servingImage), or set "
                    f"{REQUIRE_DIGEST.key}=false in this stack's policy config (policy/config/<environment>.json).",
                    None,
                )


ALLOWED_NAMESPACES = PolicyConfigOption(
    "allowedNamespaces", "array", DEFAULT_PRIVILEGED_NAMESPACES,
    "Namespaces where hostNetwork and privileged pods are accepted (GPU node plugins, EKS add-ons).",
)


def validate_no_host_network_or_privileged(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """No hostNetwork pods or privileged containers outside the allow-listed (GPU plugin) namespaces."""
    if args.resource_type not in POD_TEMPLATE_PATHS:
        return
    allowed = list(ALLOWED_NAMESPACES.read(args))
    if _namespace(args) in allowed:
        return
    fix = f"Fix: drop it, or run the workload in an allow-listed namespace ({ALLOWED_NAMESPACES.key}: {allowed})."
    for spec_path, spec in _pod_specs(args):
        if _truthy(_get(spec, "hostNetwork")):
            report_violation(f"{_object_name(args)} {spec_path}.hostNetwork is true: the pod shares the node's network and IMDS. {fix}", None)
        for where, container in _containers(spec):
            if _truthy(_get(container, "securityContext", "privileged")):
                report_violation(f"{_object_name(args)} {spec_path}.{where} is privileged: it owns the node. {fix}", None)


ALLOW_WORLD_LB = PolicyConfigOption(
    "allowWorldOpenLoadBalancers", "boolean", False,
    "Accept 0.0.0.0/0 (or ::/0) in loadBalancerSourceRanges, for an endpoint meant to be public.",
)


def validate_load_balancer_source_ranges(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """LoadBalancer Services list their client CIDRs, and 0.0.0.0/0 only when the config allows it."""
    if args.resource_type != SERVICE or _get(args.props, "spec", "type") != "LoadBalancer":
        return
    ranges = _get(args.props, "spec", "loadBalancerSourceRanges")
    if ranges is UNKNOWN:
        return
    listed = _items(ranges)
    if not listed:
        report_violation(
            f"{_object_name(args)} is a LoadBalancer without loadBalancerSourceRanges: anyone who can reach it can call "
            "the API. Fix: set spec.load_balancer_source_ranges (kimi-k3:servingAllowedCidrs).",
            None,
        )
        return
    world = [c for c in listed if _is_world(c)]
    if world and not ALLOW_WORLD_LB.read(args):
        report_violation(
            f"{_object_name(args)} admits {', '.join(world)} in loadBalancerSourceRanges. Fix: list the client CIDRs, "
            f"or set {ALLOW_WORLD_LB.key}=true in this stack's policy config if the endpoint is meant to be public.",
            None,
        )


# --- the policies ------------------------------------------------------------------

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY

capacity_block_node_group = ResourceValidationPolicy(
    name="capacity-block-node-group",
    description="A CAPACITY_BLOCK EKS node group uses a launch template, no instanceTypes, an AL2023 NVIDIA AMI and maxSize > 0.",
    validate=validate_capacity_block_node_group,
    enforcement_level=MANDATORY,
    severity=Severity.HIGH,
)

capacity_block_launch_template = ResourceValidationPolicy(
    name="capacity-block-launch-template",
    description="A capacity-block launch template targets a cr- reservation id, sets the instance type and has no placement group.",
    validate=validate_capacity_block_launch_template,
    enforcement_level=MANDATORY,
    severity=Severity.HIGH,
)

launch_template_imdsv2 = ResourceValidationPolicy(
    name="launch-template-imdsv2",
    description="Launch templates require IMDSv2 (httpTokens=required) with a hop limit of 1.",
    validate=validate_launch_template_imdsv2,
    enforcement_level=MANDATORY,
    severity=Severity.HIGH,
)

launch_template_ebs_encrypted = ResourceValidationPolicy(
    name="launch-template-ebs-encrypted",
    description="Launch template EBS volumes are encrypted.",
    validate=validate_launch_template_ebs_encrypted,
    enforcement_level=MANDATORY,
    severity=Severity.MEDIUM,
)

no_cluster_placement_group = ResourceValidationPolicy(
    name="no-cluster-placement-group",
    description="No cluster placement groups: they do not go with EC2 Capacity Blocks.",
    validate=validate_no_cluster_placement_group,
    # Advisory: the harmful case (a capacity-block launch template naming a placement
    # group) is refused by capacity-block-launch-template; a standalone group is a smell.
    enforcement_level=ADVISORY,
    severity=Severity.MEDIUM,
)

eks_endpoint_not_world_open = ResourceValidationPolicy(
    name="eks-endpoint-not-world-open",
    description="A public EKS API endpoint is restricted to listed CIDRs, never 0.0.0.0/0.",
    validate=validate_eks_endpoint_not_world_open,
    enforcement_level=MANDATORY,
    severity=Severity.CRITICAL,
)

eks_control_plane_logging = ResourceValidationPolicy(
    name="eks-control-plane-logging",
    description="EKS sends all five control-plane log types (api, audit, authenticator, controllerManager, scheduler).",
    validate=validate_eks_control_plane_logging,
    enforcement_level=ADVISORY,
    severity=Severity.MEDIUM,
)

eks_secrets_encryption = ResourceValidationPolicy(
    name="eks-secrets-encryption",
    description="EKS envelope-encrypts Kubernetes Secrets with a customer-managed KMS key.",
    validate=validate_eks_secrets_encryption,
    enforcement_level=ADVISORY,
    severity=Severity.HIGH,
)

k8s_gpu_requests_equal_limits = ResourceValidationPolicy(
    name="k8s-gpu-requests-equal-limits",
    description="Containers using nvidia.com/gpu set it in limits, and requests equal limits.",
    validate=validate_gpu_requests_equal_limits,
    enforcement_level=MANDATORY,
    severity=Severity.HIGH,
)

k8s_images_pinned_by_digest = ResourceValidationPolicy(
    name="k8s-images-pinned-by-digest",
    description="Deployment, StatefulSet and LeaderWorkerSet images are pinned by digest (repo@sha256:...).",
    validate=validate_images_pinned_by_digest,
    enforcement_level=MANDATORY,
    severity=Severity.HIGH,
    config_schema=REQUIRE_DIGEST.schema(),
)

k8s_no_host_network_or_privileged = ResourceValidationPolicy(
    name="k8s-no-host-network-or-privileged",
    description="No hostNetwork pods or privileged containers outside the GPU plugin namespaces.",
    validate=validate_no_host_network_or_privileged,
    enforcement_level=MANDATORY,
    severity=Severity.HIGH,
    config_schema=ALLOWED_NAMESPACES.schema(),
)

k8s_load_balancer_source_ranges = ResourceValidationPolicy(
    name="k8s-load-balancer-source-ranges",
    description="LoadBalancer Services set loadBalancerSourceRanges and do not admit 0.0.0.0/0 unless allowed.",
    validate=validate_load_balancer_source_ranges,
    enforcement_level=MANDATORY,
    severity=Severity.HIGH,
    config_schema=ALLOW_WORLD_LB.schema(),
)

ALL_POLICIES: list[ResourceValidationPolicy] = [
    capacity_block_node_group,
    capacity_block_launch_template,
    launch_template_imdsv2,
    launch_template_ebs_encrypted,
    no_cluster_placement_group,
    eks_endpoint_not_world_open,
    eks_control_plane_logging,
    eks_secrets_encryption,
    k8s_gpu_requests_equal_limits,
    k8s_images_pinned_by_digest,
    k8s_no_host_network_or_privileged,
    k8s_load_balancer_source_ranges,
]
"""Every policy of the pack, in the order they are reported."""
