"""Which property changes replace a resource instead of updating it, per resource type, with the sources.

The change review (:mod:`kimi_k3.offline.diff`) decides create / update / replace / delete
per resource from this table, as the real providers would:

* **Kubernetes** (pulumi-kubernetes 4.x, ``provider/pkg/provider/diff.go``): every object is
  replaced when ``metadata.name`` or ``metadata.namespace`` changes
  (``metadataForceNewProperties``), and per kind when a field of its ``forceNew`` table
  changes; a *named* object is deleted before its replacement is created
  (``provider.go``, ``deleteBeforeReplace``: named, not auto-named, same name and namespace).
  The table mirrors what the API server forbids to update: a StatefulSet's spec except
  ``replicas``, ``ordinals``, ``template``, ``updateStrategy``,
  ``persistentVolumeClaimRetentionPolicy`` and ``minReadySeconds`` (kubernetes/kubernetes
  ``pkg/apis/apps/validation/validation.go``, ``ValidateStatefulSetUpdate``), a Job's
  ``template``, ``completions`` and ``selector`` (``pkg/apis/batch/validation``,
  ``ValidateJobSpecUpdate``), a Service's ``clusterIP``, selectors. ConfigMap and Secret data
  replace too: the stack's Kubernetes provider does not set ``enableConfigMapMutable`` or
  ``enableSecretMutable`` (:mod:`kimi_k3.cluster.eks`), and diff.go then adds ``.data``
  (and ``.binaryData``, ``.stringData``, ``.type``) to the replacing fields. Where the API
  server forbids more than the provider replaces on (a PVC's spec beyond its resources),
  the extra fields are :attr:`TypeRules.refused_on`: Pulumi sends an update and it fails.
* **AWS** (pulumi-aws 7.x bridges terraform-provider-aws): an argument whose schema says
  ``ForceNew`` (plugin framework: ``RequiresReplace``) replaces the resource. Each entry names
  the file its list was read from.

A type that is not in the table has **no encoded rules**: the review says "not known" for
its changes rather than guess (:func:`rules_for` returns ``None``). A Kubernetes custom
resource gets the provider's metadata rule only; whether its CRD accepts an update of the
rest is the CRD's own validation, not known here (:attr:`TypeRules.beyond_known`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

PULUMI_KUBERNETES = "pulumi-kubernetes provider/pkg/provider/diff.go (forceNew table, commit 94977969d641)"
K8S_APPS_VALIDATION = (
    "kubernetes/kubernetes pkg/apis/apps/validation/validation.go ValidateStatefulSetUpdate (commit 2dd1588c4907): "
    "'updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', "
    "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden'"
)
K8S_BATCH_VALIDATION = "kubernetes/kubernetes pkg/apis/batch/validation/validation.go ValidateJobSpecUpdate: ValidateImmutableField on completions, selector, template"
K8S_PVC_VALIDATION = (
    "kubernetes/kubernetes pkg/apis/core/validation ValidatePersistentVolumeClaimUpdate: 'spec is immutable after creation "
    "except resources.requests and volumeAttributesClassName for bound claims'"
)
K8S_DEPLOYMENT_SELECTOR = "Kubernetes docs, Deployments, Label selector updates: 'In API version apps/v1, a Deployment's label selector is immutable after it gets created'"
PULUMI_HELM = "pulumi-kubernetes provider/pkg/provider/helm_release.go Diff: forceNewFields '.name', '.namespace' (every other change is a helm upgrade)"
TF_AWS = "terraform-provider-aws"

METADATA = ("metadata.name", "metadata.namespace")
"""What replaces every Kubernetes object (diff.go ``metadataForceNewProperties``)."""
SELECTOR = ("spec.selector",)


@dataclass(frozen=True)
class TypeRules:
    """The replacement rules of one resource type."""

    type: str
    """Pulumi type token."""
    replace_on: tuple[str, ...]
    """Property paths (Pulumi input names, dotted; a path covers everything below it) whose change replaces the resource."""
    source: str
    """Where the list comes from."""
    refused_on: tuple[str, ...] = ()
    """Paths Pulumi sends as an update that the API refuses (the apply fails); ``except_paths`` below them are updatable."""
    except_paths: tuple[str, ...] = ()
    """Paths under :attr:`refused_on` that may change."""
    update: str = ""
    """How an update is applied when it matters (a new launch template version, an overwritten schedule)."""
    delete_before_replace: bool = False
    """True when a replacement deletes the old resource first (a named Kubernetes object): the gap is a full outage."""
    beyond_known: bool = True
    """False when only :attr:`replace_on` is known and an update of anything else may still be refused (a custom resource)."""


Path = tuple[str | int, ...]
"""A property path: keys and list indices (``("spec", "template", "spec", "containers", 1, "image")``)."""


def keys(path: Path) -> tuple[str, ...]:
    """The path's keys, list indices dropped."""
    return tuple(part for part in path if isinstance(part, str))


def covers(prefix: str, path: Path) -> bool:
    """True when ``path`` is the dotted ``prefix`` or below it (list indices ignored)."""
    want = tuple(prefix.split("."))
    return keys(path)[: len(want)] == want


def _k8s(type_: str, fields: Iterable[str] = (), source: str = PULUMI_KUBERNETES, **extra) -> TypeRules:
    return TypeRules(type_, (*METADATA, *fields), source, delete_before_replace=True, **extra)


def _aws(type_: str, fields: Iterable[str], file: str, **extra) -> TypeRules:
    return TypeRules(type_, tuple(fields), f"{TF_AWS} {file} (ForceNew)", **extra)


_TABLE: tuple[TypeRules, ...] = (
    # --- Kubernetes (pulumi-kubernetes forceNew + the API server's update validation) ---------------
    _k8s(
        "kubernetes:apps/v1:StatefulSet",
        ("spec.podManagementPolicy", "spec.revisionHistoryLimit", *SELECTOR, "spec.serviceName", "spec.volumeClaimTemplates"),
        f"{PULUMI_KUBERNETES} statefulSet; {K8S_APPS_VALIDATION}",
    ),
    _k8s("kubernetes:apps/v1:Deployment", SELECTOR, f"{PULUMI_KUBERNETES} deployment; {K8S_DEPLOYMENT_SELECTOR}"),
    _k8s("kubernetes:apps/v1:DaemonSet", SELECTOR, f"{PULUMI_KUBERNETES} daemonset"),
    _k8s("kubernetes:batch/v1:Job", ("spec.completions", "spec.parallelism", *SELECTOR, "spec.template"), f"{PULUMI_KUBERNETES} job; {K8S_BATCH_VALIDATION}"),
    _k8s("kubernetes:core/v1:Service", ("spec.clusterIP",), f"{PULUMI_KUBERNETES} core/v1 Service"),
    _k8s(
        "kubernetes:core/v1:PersistentVolumeClaim", ("spec.accessModes", "spec.selector", "spec.storageClassName", "spec.volumeName"),
        f"{PULUMI_KUBERNETES} core/v1 PersistentVolumeClaim; {K8S_PVC_VALIDATION}",
        refused_on=("spec",), except_paths=("spec.resources", "spec.volumeAttributesClassName"),
    ),
    _k8s(
        "kubernetes:core/v1:ConfigMap", ("data", "binaryData"),
        f"{PULUMI_KUBERNETES} forceNewProperties: '.binaryData', '.data' while enableConfigMapMutable is unset (the stack's provider leaves it unset)",
    ),
    _k8s(
        "kubernetes:core/v1:Secret", ("type", "stringData", "data"),
        f"{PULUMI_KUBERNETES} forceNewProperties: '.type', '.stringData', '.data' while enableSecretMutable is unset",
    ),
    _k8s("kubernetes:storage.k8s.io/v1:StorageClass", ("parameters", "provisioner"), f"{PULUMI_KUBERNETES} storage.k8s.io/v1 StorageClass"),
    _k8s("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", ("roleRef",), f"{PULUMI_KUBERNETES} roleBinding"),
    _k8s("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", ("roleRef",), f"{PULUMI_KUBERNETES} roleBinding"),
    # Kinds with no entry of their own in the forceNew table: only the metadata rule (policy/v1 PDBs included:
    # only v1beta1's '.spec' is listed).
    _k8s("kubernetes:policy/v1:PodDisruptionBudget", (), f"{PULUMI_KUBERNETES}: policy/v1 has no entry (v1beta1 replaced on '.spec')"),
    _k8s("kubernetes:core/v1:Namespace", (), f"{PULUMI_KUBERNETES}: no entry beyond metadata"),
    _k8s("kubernetes:core/v1:ServiceAccount", (), f"{PULUMI_KUBERNETES}: no entry beyond metadata"),
    _k8s("kubernetes:networking.k8s.io/v1:NetworkPolicy", (), f"{PULUMI_KUBERNETES}: no entry beyond metadata"),
    _k8s("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", (), f"{PULUMI_KUBERNETES}: no entry beyond metadata"),
    _k8s("kubernetes:rbac.authorization.k8s.io/v1:Role", (), f"{PULUMI_KUBERNETES}: no entry beyond metadata"),
    _k8s("kubernetes:batch/v1:CronJob", (), f"{PULUMI_KUBERNETES}: no entry beyond metadata (ValidateCronJobUpdate forbids no spec field)"),
    TypeRules("kubernetes:helm.sh/v3:Release", ("name", "namespace"), PULUMI_HELM, update="helm upgrade of the chart's objects"),
    # --- AWS (terraform-provider-aws ForceNew / RequiresReplace) ------------------------------------
    _aws(
        "aws:eks/nodeGroup:NodeGroup",
        ("amiType", "capacityType", "clusterName", "diskSize", "instanceTypes", "launchTemplate.id", "launchTemplate.name", "nodeGroupName",
         "nodeGroupNamePrefix", "nodeRoleArn", "remoteAccess", "subnetIds"),
        "internal/service/eks/node_group.go@012e0a32f068",
        update="launchTemplate.version, releaseVersion and version go through UpdateNodegroupVersion: every node is replaced (updateConfig); "
        "scaling, labels, taints, updateConfig through UpdateNodegroupConfig (no node replaced)",
    ),
    _aws(
        "aws:ec2/launchTemplate:LaunchTemplate", ("name", "namePrefix"), "internal/service/ec2/ec2_launch_template.go",
        update="CreateLaunchTemplateVersion: a new version; running instances keep theirs until their node group moves to it",
    ),
    _aws(
        "aws:autoscaling/schedule:Schedule", ("autoscalingGroupName", "scheduledActionName"), "internal/service/autoscaling/schedule.go@1049654fb081",
        update="PutScheduledUpdateGroupAction (the create call): the pending action is overwritten",
    ),
    _aws(
        "aws:scheduler/schedule:Schedule", ("groupName", "name", "namePrefix"), "internal/service/scheduler/schedule.go@02f524b9e9cc",
        update="UpdateSchedule overrides the existing schedule",
    ),
    _aws("aws:eks/addon:Addon", ("addonName", "clusterName"), "internal/service/eks/addon.go@00a35305dc1b"),
    _aws(
        "aws:eks/podIdentityAssociation:PodIdentityAssociation", ("clusterName", "namespace", "serviceAccount"),
        "internal/service/eks/pod_identity_association.go@00a35305dc1b (RequiresReplace)",
    ),
    _aws("aws:iam/role:Role", ("name", "namePrefix", "path"), "internal/service/iam/role.go"),
    _aws("aws:iam/rolePolicy:RolePolicy", ("name", "namePrefix", "role"), "internal/service/iam/role_policy.go", update="PutRolePolicy (the create call)"),
    _aws("aws:iam/rolePolicyAttachment:RolePolicyAttachment", ("policyArn", "role"), "internal/service/iam/role_policy_attachment.go (no Update: every argument ForceNew)"),
    _aws("aws:ec2/securityGroup:SecurityGroup", ("description", "name", "namePrefix", "vpcId"), "internal/service/ec2/vpc_security_group.go"),
    _aws(
        "aws:ec2/securityGroupRule:SecurityGroupRule",
        ("cidrBlocks", "fromPort", "ipv6CidrBlocks", "prefixListIds", "protocol", "securityGroupId", "self", "sourceSecurityGroupId", "toPort", "type"),
        "internal/service/ec2/vpc_security_group_rule.go (every argument ForceNew but description)",
    ),
    _aws(
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", ("securityGroupId",),
        "internal/service/ec2/vpc_security_group_ingress_rule.go (security_group_id RequiresReplace; ModifyPlan also replaces "
        "when the source changes kind, e.g. cidr_ipv4 to referenced_security_group_id; the rest updates with ModifySecurityGroupRules)",
    ),
    _aws(
        "aws:ec2/subnet:Subnet", ("availabilityZone", "availabilityZoneId", "cidrBlock", "ipv6Native", "outpostArn", "vpcId"),
        "internal/service/ec2/vpc_subnet.go",
    ),
)

RULES: Mapping[str, TypeRules] = MappingProxyType({rules.type: rules for rules in _TABLE})
"""The encoded rules by type token."""

CUSTOM_RESOURCE_SOURCE = (
    f"{PULUMI_KUBERNETES}: metadataForceNewProperties applies to every kind; the rest of a custom resource is the CRD's own "
    "validation (x-kubernetes-validations), not known here"
)


def _builtin_kubernetes_group(type_: str) -> bool:
    group_version = type_[len("kubernetes:"):].rsplit(":", 1)[0]
    group = group_version.split("/")[0]
    return group in ("core", "apps", "batch", "policy") or group.endswith(".k8s.io")


def rules_for(type_: str) -> TypeRules | None:
    """The rules of ``type_``; a Kubernetes custom resource gets the metadata rule only; ``None``: not known."""
    found = RULES.get(type_)
    if found is not None:
        return found
    if type_.startswith("kubernetes:") and not type_.startswith("kubernetes:helm.sh/") and not _builtin_kubernetes_group(type_):
        return TypeRules(type_, METADATA, CUSTOM_RESOURCE_SOURCE, delete_before_replace=True, beyond_known=False)
    return None


def replacing(rules: TypeRules, changed: Iterable[Path]) -> list[Path]:
    """The changed paths that replace the resource under ``rules``."""
    return [path for path in changed if any(covers(prefix, path) for prefix in rules.replace_on)]


def refused(rules: TypeRules, changed: Iterable[Path]) -> list[Path]:
    """The changed paths Pulumi would send as an update that the API refuses."""
    return [
        path for path in changed
        if any(covers(prefix, path) for prefix in rules.refused_on) and not any(covers(ok, path) for ok in rules.except_paths)
        and not any(covers(prefix, path) for prefix in rules.replace_on)
    ]


__all__ = ["CUSTOM_RESOURCE_SOURCE", "METADATA", "RULES", "Path", "TypeRules", "covers", "keys", "refused", "replacing", "rules_for"]
