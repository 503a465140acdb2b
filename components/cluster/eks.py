"""The EKS control plane, a small CPU system node group and the managed add-ons.

Built on ``pulumi_eks.Cluster`` for the control plane (service role, security
groups, access entries, kubeconfig), with everything a GPU serving cluster relies
on declared here explicitly so it is visible in the plan and pinned:

- authentication through EKS access entries only (``authenticationMode=API``): no
  ``aws-auth`` ConfigMap, and the principal that runs ``pulumi up`` is not made
  cluster admin behind the scenes (see :func:`disable_creator_admin_bootstrap`);
  admins are the IAM roles listed in :attr:`ClusterArgs.admin_role_arns`, read-only
  viewers (``AmazonEKSViewPolicy``) those in :attr:`ClusterArgs.viewer_role_arns`; the
  Kubernetes provider reaches the cluster as :attr:`ClusterArgs.kubeconfig_role_arn`
  (pulumi-eks ``providerCredentialOpts``: the kubeconfig runs ``aws eks get-token --role-arn``, the flag
  spelt in full by :func:`spell_kubeconfig_flags`);
- a private API endpoint, public access off or limited to named CIDRs; the private endpoint admits on 443
  only the CIDRs and security groups named in :attr:`ClusterArgs.api_ingress_cidrs` and
  :attr:`ClusterArgs.api_ingress_security_groups` (rules on the cluster security group, see :data:`API_PORT`);
- Kubernetes Secrets envelope-encrypted with a KMS key (rotated) this component
  creates, unless one is passed in;
- all five control-plane log types, into a log group created here first so its
  retention is managed;
- no default node group; a managed on-demand CPU node group for add-ons and
  controllers (IMDSv2 only, hop limit 1, encrypted root volume);
- vpc-cni (prefix delegation), kube-proxy, eks-pod-identity-agent, coredns and
  eks-node-monitoring-agent as EKS managed add-ons, versions pinned or resolved at
  declaration time. This component owns them: ``pulumi_eks.Cluster`` is told not
  to create its own vpc-cni / coredns / kube-proxy, and EKS not to install the
  self-managed ones (``bootstrapSelfManagedAddons=false``).

Pods get AWS permissions through EKS Pod Identity only: :meth:`Cluster.grant`.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from kimi_k3.cluster import system_nodes, versions
from kimi_k3.cluster.access import roles_in_both
from kimi_k3.cluster.node_role import eks_node_role
from kimi_k3.cluster.pod_identity import PodIdentityRole, PodIdentityRoleArgs
from kimi_k3.core import labels
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.core.formats import EKS_ADDON_VERSION, LOG_RETENTION_DAYS, ROLE_ARN, SECURITY_GROUP_ID
from kimi_k3.core.suggest import did_you_mean
from kimi_k3.errors import Problems

CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
"""Every EKS control-plane log type; all are enabled."""

CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
"""EKS access policy granted, cluster-wide, to each admin role."""
CLUSTER_VIEW_POLICY = "AmazonEKSViewPolicy"
"""EKS access policy granted, cluster-wide, to each viewer role (read-only, no Secrets)."""

ADDONS_BEFORE_NODES = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
"""Add-ons nodes need to become Ready (DaemonSets): created before the system node group."""
ADDONS_AFTER_NODES = ("coredns", "eks-node-monitoring-agent")
"""Add-ons that need schedulable nodes to report healthy: created after the system node group."""
MANAGED_ADDONS = ADDONS_BEFORE_NODES + ADDONS_AFTER_NODES
"""Every EKS managed add-on this component declares."""

VPC_CNI_CONFIGURATION = {"env": {"ENABLE_PREFIX_DELEGATION": "true", "WARM_PREFIX_TARGET": "1"}, "enableNetworkPolicy": "true"}
"""vpc-cni settings: /28 prefixes per ENI slot, so pods are not limited by ENI IP counts; and
NetworkPolicy enforcement (off by default in the add-on), without which the serving stack's
default-deny policies would be accepted by the API server and silently not applied."""

API_PORT = 443
"""Port of the EKS API server endpoint. EKS user guide, 'Cluster API server endpoint': with public access off the API
is reachable only from the VPC or a connected network, and only where the cluster security group allows 443 from the
client; the ingress rules of :class:`Cluster` are that allowance."""

AUTHENTICATION_MODE = "API"
"""EKS authentication mode of the cluster: access entries only (no ``aws-auth`` ConfigMap)."""

_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")
_KMS_KEY_ARN = re.compile(r"^arn:(aws|aws-cn|aws-us-gov):kms:[a-z0-9-]+:\d{12}:key/[0-9a-zA-Z-]+$")


@checked_args
@dataclass(frozen=True)
class ClusterArgs:
    """What the EKS cluster looks like. Everything is explicit; nothing is read from stack config."""

    version: str
    """Kubernetes version of the control plane and the system nodes, e.g. ``"1.34"`` (pinned)."""
    vpc_id: pulumi.Input[str]
    """VPC the cluster lives in."""
    private_subnet_ids: Sequence[pulumi.Input[str]]
    """Private subnets (at least two, in different AZs): control-plane ENIs and the system nodes."""
    admin_role_arns: Sequence[str]
    """IAM roles granted cluster admin through access entries (at least one). The creator is not made
    admin implicitly: the Kubernetes provider reaches the cluster as ``kubeconfig_role_arn``, or with
    the caller's own credentials, which must then be one of these roles."""
    public_subnet_ids: Sequence[pulumi.Input[str]] = ()
    """Public subnets, passed to EKS alongside the private ones (for internet-facing load balancers)."""
    endpoint_public_access: bool = False
    """Whether the API endpoint is reachable from the internet (the private endpoint is always on)."""
    public_access_cidrs: Sequence[str] = ()
    """CIDRs allowed to reach the public endpoint; required when it is on; ``0.0.0.0/0`` is refused."""
    api_ingress_cidrs: Sequence[str] = ()
    """CIDRs admitted on 443 to the cluster security group (the private endpoint's ENIs): a VPN, a peered network."""
    api_ingress_security_groups: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Security groups admitted on 443 to the cluster security group, by a stable key (the id itself, or a name such
    as ``deploy-runner`` for a group the stack creates): one ingress rule each, named after the key."""
    cluster_name: str | None = None
    """EKS cluster name (max 100 characters); ``None`` uses the component's name."""
    service_cidr: str | None = None
    """Kubernetes Service IPv4 range (private, /12 to /24, outside the VPC); ``None`` lets EKS choose."""
    log_retention_days: int = 90
    """Retention of the control-plane log group ``/aws/eks/<cluster>/cluster``."""
    log_kms_key_arn: pulumi.Input[str] | None = None
    """KMS key encrypting the control-plane log group (its policy must allow CloudWatch Logs); ``None``: AWS-owned key."""
    system_node_instance_type: str = "m7i.xlarge"
    """Instance type of the on-demand system nodes."""
    system_node_count: int = 2
    """Number of system nodes, spread over the private subnets (at least two)."""
    system_node_disk_gib: int = 50
    """Root volume size of each system node (gp3, encrypted)."""
    encryption_config_key_arn: pulumi.Input[str] | None = None
    """KMS key for Secrets envelope encryption; ``None`` creates one (rotation on, with an alias)."""
    addon_versions: Mapping[str, str] | None = None
    """Pinned add-on versions by add-on name (e.g. ``{"vpc-cni": "v1.20.4-eksbuild.1"}``); add-ons not
    listed get the default version EKS recommends for ``version``, resolved when the program runs."""
    kubeconfig_role_arn: str | None = None
    """IAM role the kubeconfig (and :attr:`Cluster.provider`) assumes, one of ``admin_role_arns`` (the identity
    running Pulumi needs ``sts:AssumeRole`` on it); ``None`` uses the caller's credentials as they are."""
    viewer_role_arns: Sequence[str] = ()
    """IAM roles granted read-only access (``AmazonEKSViewPolicy``, cluster-wide), e.g. the CI preview role.
    None of them may also be an admin: EKS keeps one access entry per principal and cluster."""
    create_oidc_provider: bool = True
    """Create the IAM OIDC provider (IRSA) for tools that do not support Pod Identity yet."""
    deletion_protection: bool = False
    """EKS deletion protection on the cluster."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags on every AWS resource created here."""


def validate(name: str, args: ClusterArgs) -> str:
    """Check ``args``; return the EKS cluster name. Raises :class:`~kimi_k3.errors.ComponentInputError` naming every bad arg."""
    problems = Problems("Cluster", name)
    reject = problems.reject
    cluster_name = args.cluster_name or name
    if not _CLUSTER_NAME.match(cluster_name):
        reject("cluster_name", cluster_name, "1-100 letters, digits, '-' or '_', starting with a letter or digit")
    accepted_versions = versions.version_problem(args.version)
    if accepted_versions:
        reject("version", args.version, accepted_versions)
    if not args.admin_role_arns:
        reject("admin_role_arns", list(args.admin_role_arns), "at least one IAM role ARN (nobody else is admin)")
    for index, arn in enumerate(args.admin_role_arns):
        if not isinstance(arn, str) or not ROLE_ARN.match(arn):
            reject(f"admin_role_arns[{index}]", arn, "an IAM role ARN such as arn:aws:iam::123456789012:role/eks-admin")
    if len(set(args.admin_role_arns)) != len(args.admin_role_arns):
        reject("admin_role_arns", list(args.admin_role_arns), "each role once")
    if args.kubeconfig_role_arn is not None and args.kubeconfig_role_arn not in args.admin_role_arns:
        reject("kubeconfig_role_arn", args.kubeconfig_role_arn, "one of admin_role_arns")
    _validate_viewers(args, problems)
    if len(args.private_subnet_ids) < 2:
        reject("private_subnet_ids", list(args.private_subnet_ids), "at least two private subnets in different AZs")
    _validate_endpoint(args, problems)
    _validate_api_ingress(args, problems)
    if args.service_cidr is not None:
        _validate_service_cidr(args.service_cidr, problems)
    if args.log_retention_days not in LOG_RETENTION_DAYS:
        reject("log_retention_days", args.log_retention_days, f"one of {', '.join(map(str, LOG_RETENTION_DAYS))}{did_you_mean(args.log_retention_days, LOG_RETENTION_DAYS)}")
    system_type = system_nodes.instance_type_problem(args.system_node_instance_type)
    if system_type:
        reject("system_node_instance_type", args.system_node_instance_type, system_type)
    if isinstance(args.system_node_count, bool) or not isinstance(args.system_node_count, int) or not system_nodes.COUNT[0] <= args.system_node_count <= system_nodes.COUNT[1]:
        reject("system_node_count", args.system_node_count, "a whole number from {} to {} (two or more for multi-AZ)".format(*system_nodes.COUNT))
    if not system_nodes.DISK_GIB[0] <= args.system_node_disk_gib <= system_nodes.DISK_GIB[1]:
        reject("system_node_disk_gib", args.system_node_disk_gib, "{} to {} GiB".format(*system_nodes.DISK_GIB))
    if isinstance(args.encryption_config_key_arn, str) and not _KMS_KEY_ARN.match(args.encryption_config_key_arn):
        reject("encryption_config_key_arn", args.encryption_config_key_arn, "a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>)")
    if isinstance(args.log_kms_key_arn, str) and not _KMS_KEY_ARN.match(args.log_kms_key_arn):
        reject("log_kms_key_arn", args.log_kms_key_arn, "a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>)")
    for addon, version in (args.addon_versions or {}).items():
        if addon not in MANAGED_ADDONS:
            reject("addon_versions", addon, f"keys among {', '.join(MANAGED_ADDONS)}")
        elif not EKS_ADDON_VERSION.match(version):
            reject(f"addon_versions[{addon!r}]", version, "an EKS add-on version such as 'v1.20.4-eksbuild.1'")
    problems.raise_any()
    return cluster_name


def _validate_viewers(args: ClusterArgs, problems: Problems) -> None:
    both = roles_in_both(args.admin_role_arns, args.viewer_role_arns)
    for index, arn in enumerate(args.viewer_role_arns):
        if not isinstance(arn, str) or not ROLE_ARN.match(arn):
            problems.reject(f"viewer_role_arns[{index}]", arn, "an IAM role ARN such as arn:aws:iam::123456789012:role/ci-preview")
        elif arn in both:
            problems.reject(f"viewer_role_arns[{index}]", arn, "a role that is not also in admin_role_arns (EKS allows one access entry per principal)")
    if len(set(args.viewer_role_arns)) != len(args.viewer_role_arns):
        problems.reject("viewer_role_arns", list(args.viewer_role_arns), "each role once")


def _validate_endpoint(args: ClusterArgs, problems: Problems) -> None:
    if not args.endpoint_public_access:
        if args.public_access_cidrs:
            problems.reject("public_access_cidrs", list(args.public_access_cidrs), "empty while endpoint_public_access is false")
        return
    if not args.public_access_cidrs:
        problems.reject("public_access_cidrs", [], "at least one CIDR when endpoint_public_access is true (the endpoint is never open to all)")
    _check_bounded_cidrs(problems, "public_access_cidrs", args.public_access_cidrs, "203.0.113.0/24")


def _check_bounded_cidrs(problems: Problems, field: str, cidrs: Sequence[str], example: str) -> None:
    """Each entry of ``field`` a CIDR (strict), and none the whole internet."""
    for index, cidr in enumerate(cidrs):
        try:
            network = ipaddress.ip_network(cidr, strict=True)
        except (TypeError, ValueError):
            problems.reject(f"{field}[{index}]", cidr, f"a CIDR such as {example}")
            continue
        if network.prefixlen == 0:
            problems.reject(f"{field}[{index}]", cidr, "a bounded CIDR: the whole internet is refused")


_INGRESS_KEY = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def _validate_api_ingress(args: ClusterArgs, problems: Problems) -> None:
    _check_bounded_cidrs(problems, "api_ingress_cidrs", args.api_ingress_cidrs, "10.100.0.0/16")
    if len(set(args.api_ingress_cidrs)) != len(args.api_ingress_cidrs):
        problems.reject("api_ingress_cidrs", list(args.api_ingress_cidrs), "each CIDR once")
    for key, group in args.api_ingress_security_groups.items():
        if not isinstance(key, str) or not _INGRESS_KEY.match(key):
            problems.reject("api_ingress_security_groups", key, "keys of lowercase letters, digits and '-' (a security group id or a name)")
        elif isinstance(group, str) and not SECURITY_GROUP_ID.match(group):
            problems.reject(f"api_ingress_security_groups[{key!r}]", group, "a security group id such as sg-0a1b2c3d4e5f67890")


def _validate_service_cidr(cidr: str, problems: Problems) -> None:
    try:
        network = ipaddress.ip_network(cidr, strict=True)
    except (TypeError, ValueError):
        problems.reject("service_cidr", cidr, "an IPv4 CIDR such as 172.20.0.0/16")
        return
    private = [ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]
    if not isinstance(network, ipaddress.IPv4Network) or not 12 <= network.prefixlen <= 24 or not any(network.subnet_of(p) for p in private):
        problems.reject("service_cidr", cidr, "a private IPv4 range (10/8, 172.16/12, 192.168/16) between /12 and /24")


def disable_creator_admin_bootstrap(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """Resource transform: create the EKS cluster without implicit admin for its creator.

    pulumi-eks 4.4 hard-codes ``accessConfig.bootstrapClusterCreatorAdminPermissions=true``
    on its inner ``aws:eks/cluster:Cluster`` whenever ``authenticationMode`` is set, and
    exposes no argument to turn it off. A transform on the ``eks.Cluster`` component is
    applied by the engine to that child too, so this sets the flag to false. The flag is
    a create-time setting (pulumi-eks ignores later changes to it).
    """
    if args.type_ != "aws:eks/cluster:Cluster":
        return None
    access: dict[str, Any] = dict(args.props.get("accessConfig") or {})  # type: ignore[arg-type]  # a plain map at transform time
    access["bootstrapClusterCreatorAdminPermissions"] = False
    return pulumi.ResourceTransformResult(props={**args.props, "accessConfig": access}, opts=args.opts)


KUBECONFIG_FLAG_SPELLINGS = {"--role": "--role-arn"}
"""Flags pulumi-eks writes into the kubeconfig's ``aws eks get-token`` call, spelt in full.

pulumi-eks ``generateKubeconfig`` (nodejs/eks/cluster.ts) appends ``--role <arn>`` for
``providerCredentialOpts.roleArn``, but ``aws eks get-token`` defines ``--role-arn``
(aws-cli ``awscli/customizations/eks/get_token.py``, ``ARG_TABLE``); ``--role`` works only because
the CLI's argparse accepts an unambiguous prefix, which a later option could make ambiguous."""


def spell_kubeconfig_flags(kubeconfig_json: str) -> str:
    """The kubeconfig (JSON) with its exec arguments' abbreviated flags spelt in full (:data:`KUBECONFIG_FLAG_SPELLINGS`)."""
    config = json.loads(kubeconfig_json)
    for user in config.get("users") or []:
        exec_ = (user.get("user") or {}).get("exec") or {}
        if isinstance(exec_.get("args"), list):
            exec_["args"] = [KUBECONFIG_FLAG_SPELLINGS.get(arg, arg) for arg in exec_["args"]]
    return json.dumps(config)


def endpoint_of(kubeconfig_json: str) -> str:
    """The API server URL in a kubeconfig (JSON form)."""
    return json.loads(kubeconfig_json)["clusters"][0]["cluster"]["server"]


def _access_entry_key(role_arn: str, kind: str = "admin") -> str:
    account, role = role_arn.split(":")[4], role_arn.split(":role/", 1)[1]
    return f"{kind}-{account}-{role.replace('/', '-')}"


def _access_entry(role_arn: str, policy_arn: str, association: str, tags: Mapping[str, str]) -> eks.AccessEntryArgs:
    return eks.AccessEntryArgs(
        principal_arn=role_arn,
        type=eks.AccessEntryType.STANDARD,
        access_policies={
            association: eks.AccessPolicyAssociationArgs(
                policy_arn=policy_arn,
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
            )
        },
        tags=dict(tags),
    )


def access_entries(partition: str, args: ClusterArgs) -> dict[str, eks.AccessEntryArgs]:
    """The EKS access entries: cluster admin for each admin role, read-only view for each viewer role.

    Keyed by account and role name (not position), so reordering either list replaces nothing.
    """
    admin_policy = f"arn:{partition}:eks::aws:cluster-access-policy/{CLUSTER_ADMIN_POLICY}"
    view_policy = f"arn:{partition}:eks::aws:cluster-access-policy/{CLUSTER_VIEW_POLICY}"
    tags = dict(args.tags)
    return {
        **{_access_entry_key(arn): _access_entry(arn, admin_policy, "cluster-admin", tags) for arn in args.admin_role_arns},
        **{_access_entry_key(arn, "viewer"): _access_entry(arn, view_policy, "cluster-view", tags) for arn in args.viewer_role_arns},
    }


@checked_component
class Cluster(pulumi.ComponentResource):
    """An EKS cluster locked down for GPU serving: see the module docstring for what it holds.

    Kubernetes resources of other components take :attr:`provider`
    (``opts=pulumi.ResourceOptions(provider=cluster.provider)``); it becomes usable
    once the system nodes and CoreDNS are up.
    """

    cluster_name: pulumi.Output[str]
    """EKS cluster name; resolves once the cluster exists, so dependants wait for it."""
    endpoint: pulumi.Output[str]
    """API server URL."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig (JSON), a Pulumi secret."""
    provider: k8s.Provider
    """Kubernetes provider for this cluster (server-side apply)."""
    api_ingress_rules: list[aws.vpc.SecurityGroupIngressRule]
    """The 443 ingress rules on the cluster security group (``api_ingress_cidrs``, ``api_ingress_security_groups``)."""
    node_security_group_id: pulumi.Output[str]
    """Security group of the nodes (the system nodes carry it; GPU node groups should too)."""
    cluster_security_group_id: pulumi.Output[str]
    """Security group of the control plane."""
    oidc_provider_arn: pulumi.Output[str]
    """IAM OIDC provider ARN (empty when ``create_oidc_provider`` is false)."""
    oidc_issuer: pulumi.Output[str]
    """OIDC issuer without ``https://``."""
    system_node_group: aws.eks.NodeGroup
    """The managed CPU node group for add-ons and controllers."""
    node_role: aws.iam.Role
    """IAM role of the system nodes; another managed node group may reuse it (same policies)."""
    node_role_arn: pulumi.Output[str]
    """ARN of :attr:`node_role`."""
    encryption_key_arn: pulumi.Input[str]
    """KMS key encrypting Kubernetes Secrets."""
    log_group: aws.cloudwatch.LogGroup
    """The control-plane log group."""
    addons: dict[str, aws.eks.Addon]
    """Managed add-ons by name."""
    addon_versions: dict[str, str]
    """Add-on versions as declared (pinned or resolved), by name."""

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate ``args`` (nothing is declared if they are wrong), then declare the cluster.

        The order of declaration is the order of creation EKS needs: log group and Secrets key, the control plane, the
        API ingress rules, the add-ons nodes need, the system nodes, the add-ons that need nodes, the Kubernetes provider.

        :param name: component name; base of every child's name and, by default, the EKS cluster name.
        :param args: see :class:`ClusterArgs`.
        :param opts: options of the component itself.
        """
        cluster_name = validate(name, args)
        super().__init__("kimi-k3:index:Cluster", name, None, opts)
        self._name = name
        self._tags = dict(args.tags)
        partition = aws.get_partition(opts=pulumi.InvokeOptions(parent=self)).partition
        self.log_group = self._control_plane_log_group(cluster_name, args)
        self.encryption_key_arn = self._secrets_encryption_key(cluster_name, args)
        self.eks = self._control_plane(cluster_name, args, access_entries(partition, args))
        self._expose_control_plane(cluster_name, args)
        self.api_ingress_rules = self._api_ingress(cluster_name, args, self._tags)
        self.addon_versions = self._resolve_addon_versions(args)
        self.addons = {addon: self._addon(addon, self._tags) for addon in ADDONS_BEFORE_NODES}
        self.system_node_group = self._system_nodes(cluster_name, args, partition)
        for addon in ADDONS_AFTER_NODES:
            self.addons[addon] = self._addon(addon, self._tags, depends_on=[self.system_node_group])
        self.provider = self._kubernetes_provider()
        self.register_outputs(self._outputs())

    def _control_plane_log_group(self, cluster_name: str, args: ClusterArgs) -> aws.cloudwatch.LogGroup:
        """The log group EKS writes the control-plane logs to, owned here first so its retention is managed.

        (EKS would create ``/aws/eks/<cluster>/cluster`` itself, without retention.)
        """
        return aws.cloudwatch.LogGroup(
            f"{self._name}-control-plane-logs",
            name=f"/aws/eks/{cluster_name}/cluster",
            retention_in_days=args.log_retention_days,
            kms_key_id=args.log_kms_key_arn,
            tags=self._tags,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _secrets_encryption_key(self, cluster_name: str, args: ClusterArgs) -> pulumi.Input[str]:
        """The KMS key ARN encrypting Kubernetes Secrets: the one given, or a rotated key (with an alias) created here."""
        if args.encryption_config_key_arn is not None:
            return args.encryption_config_key_arn
        child = pulumi.ResourceOptions(parent=self)
        key = aws.kms.Key(
            f"{self._name}-secrets-key",
            description=f"Envelope encryption of Kubernetes Secrets in EKS cluster {cluster_name}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            tags=self._tags,
            opts=child,
        )
        aws.kms.Alias(f"{self._name}-secrets-key-alias", name=f"alias/eks/{cluster_name}-secrets", target_key_id=key.key_id, opts=child)
        return key.arn

    def _control_plane(self, cluster_name: str, args: ClusterArgs, entries: dict[str, eks.AccessEntryArgs]) -> eks.Cluster:
        """The ``pulumi_eks.Cluster``: private endpoint, access entries only, every log type, no add-on or node group of its own."""
        return eks.Cluster(
            f"{self._name}-eks",
            eks.ClusterArgs(
                name=cluster_name,
                version=args.version,
                vpc_id=args.vpc_id,
                private_subnet_ids=list(args.private_subnet_ids),
                public_subnet_ids=list(args.public_subnet_ids) or None,
                authentication_mode=eks.AuthenticationMode(AUTHENTICATION_MODE),
                access_entries=entries,
                endpoint_private_access=True,
                endpoint_public_access=args.endpoint_public_access,
                public_access_cidrs=list(args.public_access_cidrs) if args.endpoint_public_access else None,
                encryption_config_key_arn=self.encryption_key_arn,
                enabled_cluster_log_types=list(CONTROL_PLANE_LOG_TYPES),
                kubernetes_service_ip_address_range=args.service_cidr,
                skip_default_node_group=True,
                # The add-ons are declared by this component as aws.eks.Addon; neither pulumi-eks nor EKS installs its own.
                bootstrap_self_managed_addons=False,
                use_default_vpc_cni=True,
                coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
                kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(enabled=False),
                create_oidc_provider=args.create_oidc_provider,
                provider_credential_opts=eks.KubeconfigOptionsArgs(role_arn=args.kubeconfig_role_arn) if args.kubeconfig_role_arn else None,
                deletion_protection=args.deletion_protection,
                tags=self._tags,
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.log_group],
                transforms=[disable_creator_admin_bootstrap],
            ),
        )

    def _expose_control_plane(self, cluster_name: str, args: ClusterArgs) -> None:
        """Set the control plane's attributes (name, kubeconfig, endpoint, security groups, OIDC) from :attr:`eks`."""
        self.cluster_name = self.eks.oidc_issuer.apply(lambda _: cluster_name)
        versions.remember(self.cluster_name, args.version)  # a node group given this name checks its version against the cluster's
        self.kubeconfig = pulumi.Output.secret(self.eks.kubeconfig_json.apply(spell_kubeconfig_flags))
        self.endpoint = self.eks.kubeconfig_json.apply(endpoint_of)
        self.node_security_group_id = self.eks.node_security_group_id
        self.cluster_security_group_id = self.eks.cluster_security_group_id
        self.oidc_provider_arn = self.eks.oidc_provider_arn
        self.oidc_issuer = self.eks.oidc_issuer

    def _resolve_addon_versions(self, args: ClusterArgs) -> dict[str, str]:
        """Each managed add-on's version: pinned in ``addon_versions``, else the one EKS recommends for ``version``."""
        return {
            addon: (args.addon_versions or {}).get(addon)
            or aws.eks.get_addon_version(
                addon_name=addon, kubernetes_version=args.version, most_recent=False, opts=pulumi.InvokeOptions(parent=self)
            ).version
            for addon in MANAGED_ADDONS
        }

    def _system_nodes(self, cluster_name: str, args: ClusterArgs, partition: str) -> aws.eks.NodeGroup:
        """The on-demand CPU node group (and its node role) for add-ons and controllers, after the add-ons nodes need."""
        node_role = eks_node_role(
            self._name, partition=partition, description=f"EKS nodes of {cluster_name}", tags=self._tags, opts=pulumi.ResourceOptions(parent=self)
        )
        self.node_role = node_role.role
        self.node_role_arn = self.node_role.arn
        launch_template = self._system_launch_template(cluster_name, args)
        return aws.eks.NodeGroup(
            f"{self._name}-system",
            cluster_name=self.cluster_name,
            version=args.version,
            node_role_arn=self.node_role.arn,
            subnet_ids=list(args.private_subnet_ids),
            ami_type="AL2023_x86_64_STANDARD",
            capacity_type="ON_DEMAND",
            instance_types=[args.system_node_instance_type],
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                desired_size=args.system_node_count, min_size=args.system_node_count, max_size=args.system_node_count
            ),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(id=launch_template.id, version=launch_template.latest_version.apply(str)),
            node_repair_config=aws.eks.NodeGroupNodeRepairConfigArgs(enabled=True),
            labels=dict(labels.SYSTEM_NODE_LABELS),
            tags=self._tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*node_role.attachments, *self.addons.values()]),
        )

    def _system_launch_template(self, cluster_name: str, args: ClusterArgs) -> aws.ec2.LaunchTemplate:
        """The system nodes' launch template: IMDSv2 only with hop limit 1, an encrypted gp3 root volume, the node security group."""
        return aws.ec2.LaunchTemplate(
            f"{self._name}-system-nodes",
            description=f"System nodes of EKS cluster {cluster_name}",
            update_default_version=True,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",
                # Hop limit 1: pods (not on the host network) cannot reach the node role through IMDS.
                http_put_response_hop_limit=1,
                instance_metadata_tags="disabled",
            ),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name="/dev/xvda",
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=args.system_node_disk_gib, volume_type="gp3", encrypted="true", delete_on_termination="true"
                    ),
                )
            ],
            vpc_security_group_ids=[self.node_security_group_id],
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags={**self._tags, "Name": f"{cluster_name}-system"})
                for kind in ("instance", "volume", "network-interface")
            ],
            tags=self._tags,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _kubernetes_provider(self) -> k8s.Provider:
        """The Kubernetes provider (server-side apply), usable once nodes, DNS and the API ingress rules exist."""
        return k8s.Provider(
            f"{self._name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            # Workloads need nodes and DNS: anything using this provider waits for both.
            # ... and for the ingress rules that let the runner reach a private endpoint.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_node_group, self.addons["coredns"], *self.api_ingress_rules]),
        )

    def _outputs(self) -> dict[str, Any]:
        """The component's registered outputs, by their camelCase names."""
        return {
            "clusterName": self.cluster_name,
            "endpoint": self.endpoint,
            "kubeconfig": self.kubeconfig,
            "nodeSecurityGroupId": self.node_security_group_id,
            "clusterSecurityGroupId": self.cluster_security_group_id,
            "oidcProviderArn": self.oidc_provider_arn,
            "oidcIssuer": self.oidc_issuer,
            "nodeRoleArn": self.node_role_arn,
            "encryptionKeyArn": self.encryption_key_arn,
            "systemNodeGroupName": self.system_node_group.node_group_name,
            "addonVersions": self.addon_versions,
        }

    def _api_ingress(self, cluster_name: str, args: ClusterArgs, tags: Mapping[str, str]) -> list[aws.vpc.SecurityGroupIngressRule]:
        """One 443 ingress rule on the cluster security group per admitted CIDR and security group (:data:`API_PORT`)."""
        rules = []
        sources: list[tuple[str, dict[str, Any]]] = [
            (f"cidr-{cidr.replace('.', '-').replace('/', '-')}", {"cidr_ipv4": cidr}) for cidr in args.api_ingress_cidrs
        ]
        sources += [(f"sg-{key.removeprefix('sg-')}", {"referenced_security_group_id": group}) for key, group in args.api_ingress_security_groups.items()]
        for key, source in sources:
            rules.append(
                aws.vpc.SecurityGroupIngressRule(
                    f"{self._name}-api-ingress-{key}",
                    security_group_id=self.cluster_security_group_id,
                    ip_protocol="tcp",
                    from_port=API_PORT,
                    to_port=API_PORT,
                    description=f"EKS API of {cluster_name} (private endpoint)",
                    tags=dict(tags),
                    opts=pulumi.ResourceOptions(parent=self),
                    **source,
                )
            )
        return rules

    def _addon(self, addon: str, tags: Mapping[str, str], depends_on: Sequence[pulumi.Resource] = ()) -> aws.eks.Addon:
        configuration = {
            "vpc-cni": VPC_CNI_CONFIGURATION,
            "coredns": {"nodeSelector": dict(labels.SYSTEM_NODE_LABELS)},
            # The agent tolerates every taint, its bundled dcgm-server (GPU health) none: let it onto GPU nodes.
            "eks-node-monitoring-agent": {"dcgmAgent": {"tolerations": [dict(labels.GPU_TOLERATION)]}},
        }.get(addon)
        return aws.eks.Addon(
            f"{self._name}-{addon}",
            cluster_name=self.cluster_name,
            addon_name=addon,
            addon_version=self.addon_versions[addon],
            configuration_values=json.dumps(configuration) if configuration else None,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=dict(tags),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(depends_on)),
        )

    def grant(
        self,
        name: str,
        namespace: str,
        service_account: str,
        inline_policies: Mapping[str, pulumi.Input[str]] | None = None,
        managed_policy_arns: Sequence[pulumi.Input[str]] = (),
    ) -> PodIdentityRole:
        """Give one ServiceAccount of this cluster an IAM role through EKS Pod Identity.

        The role is a child of this component (``<cluster component>-<name>``). Calling this
        after the constructor has returned is fine: Pulumi accepts children registered after
        ``register_outputs``; what it forbids is creating resources inside an ``apply``,
        which this never does.

        :param name: short, stable name of the grant (e.g. ``"weights-reader"``).
        :param namespace: namespace of the ServiceAccount.
        :param service_account: name of the ServiceAccount (it need not exist yet).
        :param inline_policies: inline IAM policies (name -> JSON document).
        :param managed_policy_arns: managed policies to attach.
        """
        return PodIdentityRole(
            f"{self._name}-{name}",
            PodIdentityRoleArgs(
                cluster_name=self.cluster_name,
                namespace=namespace,
                service_account=service_account,
                inline_policies=dict(inline_policies or {}),
                managed_policy_arns=tuple(managed_policy_arns),
                tags=self._tags,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.addons["eks-pod-identity-agent"]]),
        )


__all__ = [
    "ADDONS_AFTER_NODES",
    "ADDONS_BEFORE_NODES",
    "API_PORT",
    "AUTHENTICATION_MODE",
    "CLUSTER_ADMIN_POLICY",
    "CLUSTER_VIEW_POLICY",
    "CONTROL_PLANE_LOG_TYPES",
    "KUBECONFIG_FLAG_SPELLINGS",
    "MANAGED_ADDONS",
    "Cluster",
    "ClusterArgs",
    "disable_creator_admin_bootstrap",
    "endpoint_of",
    "spell_kubeconfig_flags",
    "validate",
]
