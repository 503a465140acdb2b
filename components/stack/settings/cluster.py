"""The ``Cluster`` keys and the deployment's access and private wiring (the rules live in :mod:`kimi_k3.cluster.access` and :mod:`kimi_k3.network.endpoints`).

A section of :mod:`kimi_k3.stack.settings` (the only reader of stack config).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from kimi_k3.cluster import deploy_source, system_nodes, versions
from kimi_k3.cluster.access import kubeconfig_role, roles_in_both
from kimi_k3.core.formats import (
    KMS_KEY_ARN,
    LOG_RETENTION_DAYS,
    ROLE_ARN,
    SECRET_ARN,
    SECURITY_GROUP_ID,
)
from kimi_k3.errors import SettingsError
from kimi_k3.network.endpoints import endpoint_problems
from kimi_k3.stack.config_keys import CONFIG_KEYS
from kimi_k3.stack.settings.network import NetworkSettings
from kimi_k3.stack.settings.reader import Reader, cidr_list, full_key, in_range, ipv4_network, one_of
from kimi_k3.stack.settings.serving import ServingSettings


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
    system_node_disk_gib: int = 50
    """Root volume of each system node, GiB (``systemNodeDiskGiB``)."""
    api_ingress_cidrs: tuple[str, ...] = ()
    """CIDRs admitted on 443 to the cluster security group (``clusterApiIngressCidrs``)."""
    api_ingress_security_group_ids: tuple[str, ...] = ()
    """Security groups admitted on 443 to the cluster security group (``clusterApiIngressSecurityGroupIds``)."""


DEPLOY_RUNNERS = ("", "codebuild")
"""Values of ``kimi-k3:deployRunner``: none, or an AWS CodeBuild project in the stack's VPC."""


@dataclass(frozen=True)
class DeployRunnerSettings:
    """The in-VPC deploy runner (``deployRunner: codebuild``, docs/first-deploy.md)."""

    kind: str
    """``codebuild``."""
    deploy_role_arn: str
    """Role the build assumes to run ``pulumi up`` (``deployRunnerRoleArn``, one of ``clusterAdminRoleArns``)."""
    secret_arn: str
    """Secret with ``PULUMI_ACCESS_TOKEN`` and ``KIMI_K3_API_KEY`` (``deployRunnerSecretArn``)."""
    source_url: str
    """HTTPS URL of the repository the build checks out (``deployRunnerSourceUrl``)."""


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
    runner: DeployRunnerSettings | None = None
    """The in-VPC deploy runner (``deployRunner``); ``None``: none."""


def validate_cluster(r: Reader, prod: bool, network: NetworkSettings) -> ClusterSettings:
    """The EKS cluster keys (version, endpoint access, service CIDR, system nodes), validated."""
    version = r.get("clusterVersion")
    problem = versions.version_problem(version)  # the rule's home: the cluster's (ClusterArgs.version)
    if problem:
        raise SettingsError(full_key("clusterVersion"), version, f"{problem}; quote it in YAML: \"1.34\"")
    public = r.get("clusterEndpointPublicAccess")
    if public and prod:
        raise SettingsError(full_key("clusterEndpointPublicAccess"), True, "must be false in prod: the API endpoint stays private (reach it through the VPC, a VPN or a bastion)")
    cidrs = cidr_list("clusterPublicAccessCidrs", r.get("clusterPublicAccessCidrs"), allow_world=False)
    if public and not cidrs:
        raise SettingsError(full_key("clusterPublicAccessCidrs"), [], "required when clusterEndpointPublicAccess is true: the CIDRs of your networks (never 0.0.0.0/0)")
    admins = r.get("clusterAdminRoleArns")
    if not admins:
        raise SettingsError(full_key("clusterAdminRoleArns"), [], "at least one IAM role ARN such as arn:aws:iam::123456789012:role/platform-admin (the cluster creator is not made admin implicitly)")
    for arn in admins:
        if not ROLE_ARN.fullmatch(arn):
            raise SettingsError(full_key("clusterAdminRoleArns"), arn, "expected IAM role ARNs such as arn:aws:iam::123456789012:role/platform-admin")
    service = ipv4_network("clusterServiceCidr", r.get("clusterServiceCidr"), private=True)
    if service.overlaps(ipaddress.IPv4Network(network.vpc_cidr)):
        if r.get("clusterServiceCidr") == CONFIG_KEYS["clusterServiceCidr"].default:  # name the key the user set
            raise SettingsError(full_key("vpcCidr"), network.vpc_cidr, f"must not overlap the Kubernetes service CIDR {service} ({full_key('clusterServiceCidr')}'s default): choose another VPC range, or set {full_key('clusterServiceCidr')}")
        raise SettingsError(full_key("clusterServiceCidr"), str(service), f"must not overlap the VPC CIDR {network.vpc_cidr} ({full_key('vpcCidr')})")
    if not 12 <= service.prefixlen <= 24:
        raise SettingsError(full_key("clusterServiceCidr"), str(service), "accepted: a prefix between /12 and /24 (EKS limits)")
    ingress_cidrs = cidr_list("clusterApiIngressCidrs", r.get("clusterApiIngressCidrs"), allow_world=False)
    ingress_groups = r.get("clusterApiIngressSecurityGroupIds")
    for group in ingress_groups:
        if not SECURITY_GROUP_ID.fullmatch(group):
            raise SettingsError(full_key("clusterApiIngressSecurityGroupIds"), group, "expected security group ids such as sg-0a1b2c3d4e5f67890")
    for name, values in (("clusterApiIngressCidrs", ingress_cidrs), ("clusterApiIngressSecurityGroupIds", ingress_groups)):
        if len(set(values)) != len(values):
            raise SettingsError(full_key(name), list(values), "each entry once")
    system_type = r.get("systemNodeInstanceType")
    system_type_problem = system_nodes.instance_type_problem(system_type)  # the rule's home: the cluster's (system_node_instance_type)
    if system_type_problem:
        raise SettingsError(full_key("systemNodeInstanceType"), system_type, system_type_problem)
    return ClusterSettings(
        version=version,
        endpoint_public_access=public,
        public_access_cidrs=cidrs,
        admin_role_arns=r.get("clusterAdminRoleArns"),
        service_cidr=str(service),
        log_retention_days=one_of("clusterLogRetentionDays", r.get("clusterLogRetentionDays"), LOG_RETENTION_DAYS),
        system_node_instance_type=system_type,
        system_node_count=in_range("systemNodeCount", r.get("systemNodeCount"), *system_nodes.COUNT),
        system_node_disk_gib=in_range("systemNodeDiskGiB", r.get("systemNodeDiskGiB"), *system_nodes.DISK_GIB),
        api_ingress_cidrs=ingress_cidrs,
        api_ingress_security_group_ids=ingress_groups,
    )


def validate_deployment(r: Reader, region: str, network: NetworkSettings, cluster: ClusterSettings, serving: ServingSettings, prod: bool = False) -> DeploymentSettings:
    """The deployment's cluster access and private wiring (the rules live in cluster_access and endpoint_services)."""
    raw_role = r.get("kubeconfigRoleArn")
    try:
        role = kubeconfig_role(raw_role, cluster.admin_role_arns)
    except ValueError as err:
        raise SettingsError(full_key("kubeconfigRoleArn"), raw_role, f"accepted: {err}") from None
    viewers = r.get("clusterViewerRoleArns")
    for arn in viewers:
        if not ROLE_ARN.fullmatch(arn):
            raise SettingsError(full_key("clusterViewerRoleArns"), arn, "expected IAM role ARNs such as arn:aws:iam::123456789012:role/ci-preview")
    if len(set(viewers)) != len(viewers):
        raise SettingsError(full_key("clusterViewerRoleArns"), list(viewers), "each role once")
    both = roles_in_both(cluster.admin_role_arns, viewers)
    if both:
        raise SettingsError(
            full_key("clusterViewerRoleArns"), both[0],
            f"a role in {full_key('clusterAdminRoleArns')} cannot also be a viewer: EKS keeps one access entry per principal (it has admin already)",
        )
    endpoints = r.get("interfaceEndpoints")
    problems = endpoint_problems(endpoints)
    if problems:
        raise SettingsError(full_key("interfaceEndpoints"), list(endpoints), f"{'; '.join(problems)}")
    if network.existing_vpc_id and tuple(endpoints) != tuple(CONFIG_KEYS["interfaceEndpoints"].default):
        raise SettingsError(full_key("interfaceEndpoints"), list(endpoints), f"only used for a VPC the stack creates; with {full_key('existingVpcId')} the endpoints are the VPC owner's")
    key_arn = r.get("weightsKmsKeyArn") or None
    if key_arn is not None:
        match = KMS_KEY_ARN.fullmatch(key_arn)
        if not match:
            raise SettingsError(full_key("weightsKmsKeyArn"), key_arn, "expected a KMS key ARN such as arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab (not an alias)")
        if match.group(2) != region:
            raise SettingsError(full_key("weightsKmsKeyArn"), key_arn, f"expected a key in the stack's region {region}: S3 encrypts a bucket's objects with a key of the bucket's region")
        if serving.contract.weights.source != "s3":
            raise SettingsError(full_key("weightsKmsKeyArn"), key_arn, f"only used with {full_key('weightsSource')} s3 (the weights come from {serving.contract.weights.source})")
    runner = _validate_deploy_runner(r, region, cluster)
    if prod:
        _require_api_path(cluster, runner)
    return DeploymentSettings(kubeconfig_role_arn=role, viewer_role_arns=viewers, interface_endpoints=endpoints, weights_kms_key_arn=key_arn, runner=runner)


PRIVATE_ENDPOINT_SOURCE = (
    "EKS user guide, 'Cluster API server endpoint': with public access off, the API server is reachable only from "
    "within the cluster's VPC or a connected network, and the cluster security group must allow ingress on port 443 from it"
)
"""Why a private-only endpoint needs a declared path to the API (:func:`_require_api_path`)."""


def _require_api_path(cluster: ClusterSettings, runner: DeployRunnerSettings | None) -> None:
    """A private-only endpoint must admit something on 443: otherwise nothing can reach the API, the first ``up`` included.

    Checked here for prod (whose endpoint is always private); the offline plan checks every stack the same way on what
    it declares (:func:`kimi_k3.offline.rules.private_endpoint_admits_a_client`)."""
    if cluster.endpoint_public_access or cluster.api_ingress_cidrs or cluster.api_ingress_security_group_ids or runner is not None:
        return
    raise SettingsError(
        full_key("clusterEndpointPublicAccess"), False,
        f"a private-only endpoint needs a path for the deploy runner and kubectl: set {full_key('deployRunner')} codebuild "
        f"(docs/first-deploy.md), {full_key('clusterApiIngressCidrs')} or {full_key('clusterApiIngressSecurityGroupIds')} "
        f"({PRIVATE_ENDPOINT_SOURCE})",
    )


def _validate_deploy_runner(r: Reader, region: str, cluster: ClusterSettings) -> DeployRunnerSettings | None:
    """``deployRunner`` and its three keys (each only with it)."""
    kind = one_of("deployRunner", r.get("deployRunner"), DEPLOY_RUNNERS)
    names = ("deployRunnerRoleArn", "deployRunnerSecretArn", "deployRunnerSourceUrl")
    if not kind:
        for name in names:
            if r.get(name):
                raise SettingsError(full_key(name), r.get(name), f"only used with {full_key('deployRunner')} codebuild")
        return None
    role, secret, source = (r.get(name) for name in names)
    if role not in cluster.admin_role_arns:
        raise SettingsError(full_key("deployRunnerRoleArn"), role or "", f"one of {full_key('clusterAdminRoleArns')} ({', '.join(cluster.admin_role_arns)}): the build runs `pulumi up` as it")
    match = SECRET_ARN.fullmatch(secret or "")
    if not match:
        raise SettingsError(full_key("deployRunnerSecretArn"), secret or "", "required with deployRunner: a Secrets Manager secret ARN such as arn:aws:secretsmanager:us-west-2:123456789012:secret:kimi-k3/prod/deploy-AbCdEf")
    if match.group(2) != region:
        raise SettingsError(full_key("deployRunnerSecretArn"), secret, f"expected a secret in the stack's region {region} (CodeBuild reads secrets of its own region)")
    source_problem = deploy_source.source_url_problem(source or "")  # the rule's home: the runner's (DeployRunnerArgs.source_url)
    if source_problem:
        raise SettingsError(full_key("deployRunnerSourceUrl"), source or "", f"required with deployRunner: {source_problem}")
    return DeployRunnerSettings(kind=kind, deploy_role_arn=role, secret_arn=secret, source_url=source)

