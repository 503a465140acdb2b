"""A SageMaker HyperPod cluster orchestrated by an existing EKS cluster, on a training plan.

What the SageMaker developer guide requires for a HyperPod cluster created through
the API (``CreateCluster``; here the CloudFormation type ``AWS::SageMaker::Cluster``
through ``pulumi-aws-native``, since pulumi-aws has no HyperPod resource), declared in
this order:

1. **The HyperPod dependencies Helm chart** on the EKS cluster, before the cluster
   ("This Helm installation step is required ... If you set up the cluster directly
   using the APIs, use the provided Helm chart", sagemaker-hyperpod-eks-install-packages-
   using-helm-chart): ``aws/sagemaker-hyperpod-cli`` ``helm_chart/HyperPodHelmChart``,
   vendored at a pinned commit in ``components/data/charts`` (the chart is not published
   to a Helm repository), installed as release ``hyperpod-dependencies`` in
   ``kube-system`` as the guide does; it creates namespace ``aws-hyperpod``, which must
   not be renamed. Its remote sub-charts (NVIDIA device plugin 0.16.1, EFA device plugin
   0.5.20, cert-manager, by version in its ``Chart.yaml``) are fetched when the release
   is applied (``dependency_update``), as ``helm dependencies update`` does.
2. **The execution role** of the instance group: trust ``sagemaker.amazonaws.com``,
   the AWS managed policy ``AmazonSageMakerClusterInstanceRolePolicy`` the guide names
   for HyperPod instances, ``AmazonEKS_CNI_Policy``, and an inline policy with the
   EKS-specific additions (network interfaces for the VPC CNI, ECR pulls, EKS Pod
   Identity, alarms) and read access to this stack's lifecycle-script prefix only
   (AWS sample ``awsome-distributed-training``
   ``1.architectures/7.sagemaker-hyperpod-eks/cfn-templates/nested-stacks/sagemaker-iam-role-stack.yaml``).
3. **The lifecycle scripts** in a private bucket (:class:`~kimi_k3.weights.secure_bucket.SecureBucket`)
   whose name starts with ``sagemaker-`` (the prefix the managed policy's S3 statement
   allows): ``on_create.sh`` and the ``on_create_main.sh`` it runs, byte for byte from
   ``awsome-distributed-training`` ``LifecycleScripts/base-config`` (provenance in
   ``components/data/README.md``).
4. **The cluster** (``aws-native:sagemaker:Cluster``): ``Orchestrator.Eks.ClusterArn``,
   the VPC config with the one subnet of the training plan's AZ and the node security
   group, ``NodeRecovery: Automatic``, and one instance group of
   ``ml.p6-b300.48xlarge`` with ``TrainingPlanArn`` (the plan is the capacity source),
   ``OnStartDeepHealthChecks`` (``InstanceStress``, ``InstanceConnectivity``: every
   type the aws-native 1.84.0 schema offers), the lifecycle config and an extra EBS
   volume for containerd and the kubelet (``on_create_main.sh`` moves both to
   ``/opt/sagemaker``, the volume HyperPod mounts). ``NodeProvisioningMode: Continuous``: the
   cluster is created about a day before its training plan starts, and instances come only
   at the start (:func:`kimi_k3.hyperpod.rules.check_provisioning_mode` has the sources).
   ``MinInstanceCount`` is not set: aws-native 1.84.0's schema has no such property, and AWS
   announced it for Slurm clusters (What's New, 2026-05-27); one Kimi K3 replica per instance
   serves on its own, so no minimum is needed.
5. **EFA**, when the instance type has EFA interfaces (:mod:`kimi_k3.core.catalog`): a
   security group whose rules allow all traffic from and to itself, added to the cluster's
   VPC config ("Prepare an EFA-enabled security group": "allows all inbound and outbound
   traffic to and from the security group itself", EC2 user guide, efa-start; the HyperPod
   prerequisites page, sagemaker-hyperpod-prerequisites, points EFA instance groups to the
   same rule; the deep health checks' connectivity test runs over EFA).

The rules HyperPod enforces at create time live in :mod:`kimi_k3.hyperpod.rules`
and are checked here before anything is declared. ``pulumi_aws_native`` is imported
inside the constructor, so programs (and ``kimi-k3 plan``) that never declare a
HyperPod cluster never load it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import yaml

from kimi_k3.cluster.kubernetes_provider import require_kubernetes_provider
from kimi_k3.core import catalog
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.errors import Problems, UserError
from kimi_k3.hyperpod import rules as hyperpod_rules
from kimi_k3.hyperpod.training_plan_check import TrainingPlanFacts
from kimi_k3.weights.secure_bucket import SecureBucket, SecureBucketArgs

DATA = Path(__file__).resolve().parents[1] / "data"
"""Vendored upstream files (see ``components/data/README.md``)."""
CHART_DIR = DATA / "charts" / "HyperPodHelmChart"
"""The vendored HyperPod dependencies chart."""
LIFECYCLE_DIR = DATA / "hyperpod" / "lifecycle"
"""The vendored lifecycle scripts."""
LIFECYCLE_SCRIPTS = ("on_create.sh", "on_create_main.sh")
"""Files staged to S3: the entry point and the script it runs from the same directory."""
ON_CREATE = "on_create.sh"
"""``LifeCycleConfig.OnCreate``: the entry point HyperPod runs on every new node."""

DEPENDENCIES_RELEASE = "hyperpod-dependencies"
"""Release name the SageMaker guide uses for the dependencies chart."""
DEPENDENCIES_RELEASE_NAMESPACE = "kube-system"
"""Namespace of the release (the guide's ``helm install ... --namespace kube-system``)."""

INSTANCE_ROLE_MANAGED_POLICIES = ("AmazonSageMakerClusterInstanceRolePolicy", "AmazonEKS_CNI_Policy")
"""AWS managed policies of the execution role (SageMaker guide, IAM for HyperPod; AWS sample role stack)."""

DEEP_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity")
"""Deep health checks run when an instance starts (every value of the aws-native ``ClusterDeepHealthCheckType``)."""

DEFAULT_INSTANCE_TYPE = "ml.p6-b300.48xlarge"
"""HyperPod instance type that holds one Kimi K3 replica (8x B300)."""

_ARN = re.compile(r"^arn:(aws|aws-cn|aws-us-gov):eks:[a-z0-9-]+:\d{12}:cluster/[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")
_PREFIX = re.compile(r"^[a-z0-9][a-z0-9-]*(/[a-z0-9][a-z0-9-]*)*$")


def chart_path() -> str:
    """Path of the vendored chart given to Helm: relative to the working directory when inside it.

    Pulumi runs the program from the project directory, so a checkout and CI see the
    same relative path (no spurious diff of the release's ``chart`` between machines);
    an installed library falls back to the absolute path.
    """
    try:
        return os.path.relpath(CHART_DIR, Path.cwd()) if CHART_DIR.is_relative_to(Path.cwd()) else str(CHART_DIR)
    except ValueError:  # other drive (Windows)
        return str(CHART_DIR)


def chart_defaults() -> dict[str, Any]:
    """Default values of the vendored dependencies chart."""
    return yaml.safe_load((CHART_DIR / "values.yaml").read_text()) or {}


def regional_values(region: str) -> dict[str, Any]:
    """The chart's ``regional-values/values-<region>.yaml`` (image registries of the region), or ``{}``."""
    path = CHART_DIR / "regional-values" / f"values-{region}.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def _merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) else value
    return out


def dependencies_values(region: str) -> dict[str, Any]:
    """Values of the dependencies release: the chart's defaults, its regional values, the region pinned.

    Everything else stays at the chart's defaults (the guide installs it without
    overrides). The health-monitoring agent's region is set explicitly, as AWS's own
    Terraform module does, instead of letting the chart guess it from the cluster.
    """
    return _merge(regional_values(region), {"health-monitoring-agent": {"region": region}})


def lifecycle_script(name: str) -> str:
    """Text of a vendored lifecycle script."""
    return (LIFECYCLE_DIR / name).read_text(encoding="utf-8")


@checked_args
@dataclass(frozen=True, kw_only=True)
class HyperPodClusterArgs:
    """Inputs of :class:`HyperPodCluster`."""

    eks_cluster_arn: pulumi.Input[str]
    """ARN of the EKS cluster that orchestrates the HyperPod cluster (``Orchestrator.Eks.ClusterArn``)."""
    eks: hyperpod_rules.EksForHyperPod
    """Kubernetes version, authentication mode and VPC CNI version of that EKS cluster (checked against HyperPod's rules)."""
    region: str
    """AWS region of the clusters."""
    subnet_id: pulumi.Input[str]
    """Private subnet of the training plan's AZ: the instance group's nodes get their network interfaces there."""
    subnet_availability_zone: str
    """AZ of ``subnet_id`` (checked against the training plan's AZ)."""
    security_group_ids: Sequence[pulumi.Input[str]]
    """Security groups of the nodes (at least the EKS node security group, so pods and the control plane can talk)."""
    training_plan: TrainingPlanFacts
    """The training plan that backs the instance group (read at program start, checked by the caller)."""
    instance_type: str = DEFAULT_INSTANCE_TYPE
    """HyperPod instance type of the instance group."""
    instance_count: int = 1
    """Instances in the group (one Kimi K3 replica each); at most what the plan reserves in the AZ."""
    instance_group_name: str = "p6-b300"
    """Name of the instance group."""
    cluster_name: str | None = None
    """HyperPod cluster name; ``None`` uses the component's name."""
    lifecycle_prefix: str = "lifecycle/base-config"
    """Key prefix of the lifecycle scripts in the bucket."""
    ebs_volume_size_gib: int = 2048
    """Extra EBS volume per instance (``/opt/sagemaker``): containerd and the kubelet live there, so the
    engine image (~20 GB) and, with Hugging Face weights, the operator's ~1.6 TB download must fit."""
    threads_per_core: int | None = None
    """``ThreadsPerCore`` (1 or 2); ``None`` keeps the instance type's default."""
    node_recovery: str = "Automatic"
    """``NodeRecovery``: ``Automatic`` replaces or reboots faulty nodes; ``None`` only labels them."""
    deep_health_checks: Sequence[str] = DEEP_HEALTH_CHECKS
    """``OnStartDeepHealthChecks`` of the instance group."""
    node_provisioning_mode: str | None = hyperpod_rules.CONTINUOUS
    """``NodeProvisioningMode``: ``Continuous`` (instances provisioned asynchronously, when the plan starts); ``None``: the
    standard model, refused when the cluster is created more than 12 h before the plan starts (``now``)."""
    now: datetime | None = None
    """When the program runs (UTC), the create's earliest moment: checks the provisioning mode against the plan's start."""
    vpc_id: pulumi.Input[str] | None = None
    """VPC of ``subnet_id``: required for an EFA instance type (its self-referencing security group lives there)."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags on every AWS resource created here."""


def has_efa(instance_type: str) -> bool:
    """Whether the HyperPod instance type (``ml.`` + an EC2 type of the catalog) has EFA interfaces."""
    known = catalog.INSTANCE_TYPES.get(instance_type.removeprefix("ml."))
    return known is not None and known.efa_interfaces > 0


def efa_rules() -> list[dict[str, Any]]:
    """The EFA security group's rules: all traffic in from and out to the group itself (EC2 user guide, efa-start)."""
    return [
        {"direction": "ingress", "protocol": "-1", "from_port": 0, "to_port": 0, "self": True},
        {"direction": "egress", "protocol": "-1", "from_port": 0, "to_port": 0, "self": True},
    ]


def validate(name: str, args: HyperPodClusterArgs, opts: pulumi.ResourceOptions | None = None) -> str:
    """Check ``args`` and ``opts`` (HyperPod's create-time rules included); return the HyperPod cluster name.

    :raises ComponentInputError: every problem at once, in the args' own names.
    """
    problems = Problems("HyperPodCluster", name)
    reject = problems.reject
    require_kubernetes_provider(problems, opts)
    if isinstance(args.eks_cluster_arn, str) and not _ARN.match(args.eks_cluster_arn):
        reject("eks_cluster_arn", args.eks_cluster_arn, "an EKS cluster ARN such as arn:aws:eks:us-east-1:123456789012:cluster/kimi-k3")
    cluster_name = args.cluster_name or name
    try:
        hyperpod_rules.check_names(cluster_name, (args.instance_group_name,))
    except UserError as err:
        problems.adopt("cluster_name" if "cluster name" in str(err) else "instance_group_name", err)
    try:
        hyperpod_rules.check_eks_cluster(args.eks)
    except UserError as err:
        problems.adopt("eks", err)
    if isinstance(args.instance_count, bool) or not isinstance(args.instance_count, int) or args.instance_count < 1:
        reject("instance_count", args.instance_count, "a whole number of at least 1")
    if not args.security_group_ids:
        reject("security_group_ids", list(args.security_group_ids), "at least the EKS node security group")
    if not isinstance(args.lifecycle_prefix, str) or not _PREFIX.match(args.lifecycle_prefix):
        reject("lifecycle_prefix", args.lifecycle_prefix, "lowercase path segments without leading or trailing '/', e.g. lifecycle/base-config")
    if isinstance(args.ebs_volume_size_gib, bool) or not isinstance(args.ebs_volume_size_gib, int) or not hyperpod_rules.EBS_VOLUME_GIB[0] <= args.ebs_volume_size_gib <= hyperpod_rules.EBS_VOLUME_GIB[1]:
        reject("ebs_volume_size_gib", args.ebs_volume_size_gib, "{} to {} GiB (ClusterEbsVolumeSizeInGB)".format(*hyperpod_rules.EBS_VOLUME_GIB))
    if args.threads_per_core not in (None, 1, 2):
        reject("threads_per_core", args.threads_per_core, "1, 2 or None")
    if args.node_recovery not in ("Automatic", "None"):
        reject("node_recovery", args.node_recovery, "Automatic or None")
    unknown = [c for c in args.deep_health_checks if c not in DEEP_HEALTH_CHECKS]
    if unknown or len(set(args.deep_health_checks)) != len(tuple(args.deep_health_checks)):
        reject("deep_health_checks", list(args.deep_health_checks), f"distinct values among {', '.join(DEEP_HEALTH_CHECKS)}")
    if not args.subnet_availability_zone.startswith(args.region) or len(args.subnet_availability_zone) != len(args.region) + 1:
        reject("subnet_availability_zone", args.subnet_availability_zone, f"an AZ of {args.region}")
    if not isinstance(args.training_plan, TrainingPlanFacts):
        problems.add("training_plan", f"training_plan must be TrainingPlanFacts (read_training_plan), got {type(args.training_plan).__name__}")
        problems.raise_any()
    _plan_problems(problems, args)
    if args.node_provisioning_mode not in (None, hyperpod_rules.CONTINUOUS):
        reject("node_provisioning_mode", args.node_provisioning_mode, f"{hyperpod_rules.CONTINUOUS} or None (the standard model)")
    elif args.now is not None:
        if args.now.tzinfo is None:
            problems.add("now", "now has no timezone; pass a UTC datetime")
        else:
            try:
                hyperpod_rules.check_provisioning_mode(args.node_provisioning_mode, args.training_plan.start, args.now)
            except UserError as err:
                problems.adopt("node_provisioning_mode", err)
    if has_efa(args.instance_type) and args.vpc_id is None:
        problems.add("vpc_id", f"vpc_id is required: {args.instance_type} has EFA, whose security group (all traffic to and from itself) lives in the VPC")
    problems.raise_any()
    return cluster_name


def _plan_problems(problems: Problems, args: HyperPodClusterArgs) -> None:
    """What the training plan decides: the instance type, the subnet's AZ, the instance count."""
    plan = args.training_plan
    if args.instance_type != args.instance_type.strip() or not args.instance_type.startswith("ml."):
        problems.reject("instance_type", args.instance_type, "a HyperPod instance type with the ml. prefix, e.g. ml.p6-b300.48xlarge")
        return
    plan_azs = plan.availability_zones(args.instance_type)
    if not plan_azs:
        reserved_types = ", ".join(c.instance_type for c in plan.capacities) or "none"
        problems.reject("instance_type", args.instance_type, f"a type training plan {plan.name} reserves ({reserved_types})")
        return
    try:
        hyperpod_rules.check_instance_group_subnet(args.instance_group_name, args.subnet_availability_zone, plan_azs)
    except UserError as err:
        problems.adopt("subnet_availability_zone", err)
        return
    reserved = plan.instances_in(args.instance_type, args.subnet_availability_zone)
    if isinstance(args.instance_count, int) and args.instance_count > reserved:
        problems.reject("instance_count", args.instance_count, f"at most {reserved}, what training plan {plan.name} reserves in {args.subnet_availability_zone}")


def _trust_sagemaker() -> str:
    return json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
    )


def execution_role_policy(bucket: str, prefix: str, partition: str = "aws") -> str:
    """Inline policy of the instance group's execution role (beyond the managed policies).

    The statements of AWS's sample role for HyperPod on EKS (``sagemaker-iam-role-stack.yaml``),
    with the S3 read narrowed from the whole bucket to the lifecycle prefix.
    """
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "VpcCniAndNodeBootstrap",
                    "Effect": "Allow",
                    "Action": [
                        "ec2:AssignPrivateIpAddresses",
                        "ec2:CreateNetworkInterface",
                        "ec2:CreateNetworkInterfacePermission",
                        "ec2:DeleteNetworkInterface",
                        "ec2:DeleteNetworkInterfacePermission",
                        "ec2:DescribeNetworkInterfaces",
                        "ec2:DescribeVpcs",
                        "ec2:DescribeDhcpOptions",
                        "ec2:DescribeSubnets",
                        "ec2:DescribeSecurityGroups",
                        "ec2:DetachNetworkInterface",
                        "ec2:ModifyNetworkInterfaceAttribute",
                        "ec2:UnassignPrivateIpAddresses",
                        "ecr:BatchCheckLayerAvailability",
                        "ecr:BatchGetImage",
                        "ecr:GetAuthorizationToken",
                        "ecr:GetDownloadUrlForLayer",
                        "eks-auth:AssumeRoleForPodIdentity",
                        "cloudwatch:DescribeAlarms",
                    ],
                    "Resource": "*",
                },
                {"Sid": "TagNetworkInterfaces", "Effect": "Allow", "Action": "ec2:CreateTags", "Resource": f"arn:{partition}:ec2:*:*:network-interface/*"},
                {"Sid": "ListLifecycleScripts", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:{partition}:s3:::{bucket}",
                 "Condition": {"StringLike": {"s3:prefix": [f"{prefix}/*", prefix]}}},
                {"Sid": "ReadLifecycleScripts", "Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:{partition}:s3:::{bucket}/{prefix}/*"},
            ],
        }
    )


@checked_component
class HyperPodCluster(pulumi.ComponentResource):
    """The HyperPod cluster of a ``hyperpod`` stack: see the module docstring for what it declares.

    Providers come through ``opts`` only (:mod:`kimi_k3.cluster.kubernetes_provider`)::

        HyperPodCluster("kimi-k3-hyperpod", args, opts=pulumi.ResourceOptions(
            providers={"kubernetes": cluster.provider, "aws-native": aws_native.Provider("native", region=region)}))

    The Kubernetes provider (the orchestrating EKS cluster's, for the dependencies chart) is
    required: the ambient kubeconfig is refused. Without an ``aws-native`` provider the
    cluster uses the default one, which reads ``aws-native:region`` from the stack config.

    Attributes: :attr:`cluster` (``aws-native:sagemaker:Cluster``), :attr:`cluster_arn`,
    :attr:`cluster_name`, :attr:`execution_role`, :attr:`lifecycle_bucket`,
    :attr:`lifecycle_objects`, :attr:`dependencies` (the Helm release).
    """

    def __init__(self, name: str, args: HyperPodClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate ``args`` and ``opts`` (nothing is declared if they are wrong), then declare the pieces in order.

        :raises ComponentInputError: naming every bad arg, or the HyperPod rule it breaks.
        """
        cluster_name = validate(name, args, opts)
        import pulumi_aws_native as aws_native  # lazily: only stacks with a HyperPod cluster load the provider SDK

        super().__init__("kimi-k3:index:HyperPodCluster", name, None, opts)
        tags = {**dict(args.tags), "kimi-k3/hyperpod-cluster": cluster_name}
        partition = aws.get_partition(opts=pulumi.InvokeOptions(parent=self)).partition
        self._declare_dependencies(name, args)
        self._declare_lifecycle(name, args, cluster_name, tags)
        role_policies = self._declare_execution_role(name, args, cluster_name, tags, partition)
        security_group_ids = self._declare_efa(name, args, cluster_name, tags)
        self._declare_cluster(name, args, cluster_name, tags, security_group_ids, role_policies, aws_native)
        self.cluster_arn: pulumi.Output[str] = self.cluster.cluster_arn
        self.cluster_name: pulumi.Output[str] = self.cluster.cluster_arn.apply(lambda _: cluster_name)
        self.register_outputs(
            {
                "clusterArn": self.cluster_arn,
                "clusterName": self.cluster_name,
                "executionRoleArn": self.execution_role.arn,
                "lifecycleBucket": self.lifecycle_bucket.name,
                "trainingPlanArn": args.training_plan.arn,
            }
        )

    def _declare_dependencies(self, name: str, args: HyperPodClusterArgs) -> None:
        """1. The dependencies chart, before the cluster."""
        child = pulumi.ResourceOptions(parent=self)
        self.dependencies = k8s.helm.v3.Release(
            f"{name}-dependencies",
            k8s.helm.v3.ReleaseArgs(
                name=DEPENDENCIES_RELEASE,
                chart=chart_path(),
                namespace=DEPENDENCIES_RELEASE_NAMESPACE,
                dependency_update=True,
                values=dependencies_values(args.region),
                # As AWS's Terraform module does (wait = false): the GPU DaemonSets have no node to run on
                # until the HyperPod cluster, declared after this release, brings its instances.
                skip_await=True,
            ),
            opts=child,
        )

    def _declare_lifecycle(self, name: str, args: HyperPodClusterArgs, cluster_name: str, tags: dict[str, str]) -> None:
        """2. Lifecycle scripts, in a bucket the managed policy's "sagemaker-*" statement also covers."""
        child = pulumi.ResourceOptions(parent=self)
        self.lifecycle_bucket = SecureBucket(
            f"{name}-lifecycle",
            SecureBucketArgs(bucket_prefix=f"sagemaker-{cluster_name.lower()}"[:31].rstrip("-") + "-", tags=tags),
            opts=child,
        )
        prefix = args.lifecycle_prefix
        self.lifecycle_objects = [
            aws.s3.BucketObjectv2(
                f"{name}-{script.replace('_', '-').replace('.', '-')}",
                bucket=self.lifecycle_bucket.name,
                key=f"{prefix}/{script}",
                content=lifecycle_script(script),
                content_type="text/x-shellscript",
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=self.lifecycle_bucket.ready),
            )
            for script in LIFECYCLE_SCRIPTS
        ]

    def _declare_execution_role(
        self, name: str, args: HyperPodClusterArgs, cluster_name: str, tags: dict[str, str], partition: str
    ) -> list[pulumi.Resource]:
        """3. The execution role of the instance group; returns its policies (the cluster waits for them)."""
        child = pulumi.ResourceOptions(parent=self)
        prefix = args.lifecycle_prefix
        self.execution_role = aws.iam.Role(
            f"{name}-execution-role",
            assume_role_policy=_trust_sagemaker(),
            description=f"Execution role of the instances of HyperPod cluster {cluster_name}",
            tags=tags,
            opts=child,
        )
        role_policies: list[pulumi.Resource] = [
            aws.iam.RolePolicyAttachment(
                f"{name}-execution-{policy}", role=self.execution_role.name, policy_arn=f"arn:{partition}:iam::aws:policy/{policy}", opts=child
            )
            for policy in INSTANCE_ROLE_MANAGED_POLICIES
        ]
        role_policies.append(
            aws.iam.RolePolicy(
                f"{name}-execution-inline",
                role=self.execution_role.id,
                policy=self.lifecycle_bucket.name.apply(lambda bucket: execution_role_policy(bucket, prefix, partition)),
                opts=child,
            )
        )
        return role_policies

    def _declare_efa(self, name: str, args: HyperPodClusterArgs, cluster_name: str, tags: dict[str, str]) -> list[pulumi.Input[str]]:
        """4. EFA: a security group open to itself, beside the node security group; returns the cluster's security groups."""
        child = pulumi.ResourceOptions(parent=self)
        security_group_ids = list(args.security_group_ids)
        self.efa_security_group: aws.ec2.SecurityGroup | None = None
        if has_efa(args.instance_type):
            self.efa_security_group = aws.ec2.SecurityGroup(
                f"{name}-efa",
                vpc_id=args.vpc_id,
                description=f"EFA of HyperPod cluster {cluster_name}: all traffic to and from this group",
                tags={**tags, "Name": f"{cluster_name}-efa"},
                opts=child,
            )
            for rule in efa_rules():
                aws.ec2.SecurityGroupRule(
                    f"{name}-efa-{rule['direction']}",
                    type=rule["direction"], protocol=rule["protocol"], from_port=rule["from_port"], to_port=rule["to_port"],
                    self=rule["self"], security_group_id=self.efa_security_group.id,
                    description=f"EFA: all traffic {'from' if rule['direction'] == 'ingress' else 'to'} the group itself",
                    opts=child,
                )
            security_group_ids.append(self.efa_security_group.id)
        return security_group_ids

    def _declare_cluster(
        self, name: str, args: HyperPodClusterArgs, cluster_name: str, tags: dict[str, str], security_group_ids: list[pulumi.Input[str]],
        role_policies: list[pulumi.Resource], aws_native: Any,
    ) -> None:
        """5. The cluster, last: after the chart, the scripts, the role's policies and the EFA group."""
        prefix = args.lifecycle_prefix
        sm = aws_native.sagemaker
        group = sm.ClusterInstanceGroupArgs(
            instance_group_name=args.instance_group_name,
            instance_type=args.instance_type,
            instance_count=args.instance_count,
            execution_role=self.execution_role.arn,
            training_plan_arn=args.training_plan.arn,
            life_cycle_config=sm.ClusterLifeCycleConfigArgs(
                source_s3_uri=self.lifecycle_bucket.name.apply(lambda bucket: f"s3://{bucket}/{prefix}/"),
                on_create=ON_CREATE,
            ),
            on_start_deep_health_checks=[sm.ClusterDeepHealthCheckType(c) for c in args.deep_health_checks],
            instance_storage_configs=[
                sm.ClusterInstanceStorageConfigArgs(ebs_volume_config=sm.ClusterEbsVolumeConfigArgs(volume_size_in_gb=args.ebs_volume_size_gib))
            ],
            threads_per_core=args.threads_per_core,
        )
        self.cluster = sm.Cluster(
            f"{name}-cluster",
            sm.ClusterArgs(
                cluster_name=cluster_name,
                orchestrator=sm.ClusterOrchestratorArgs(eks=sm.ClusterOrchestratorEksConfigArgs(cluster_arn=args.eks_cluster_arn)),
                vpc_config=sm.ClusterVpcConfigArgs(security_group_ids=security_group_ids, subnets=[args.subnet_id]),
                node_recovery=sm.ClusterNodeRecovery(args.node_recovery),
                node_provisioning_mode=(
                    sm.ClusterNodeProvisioningMode(args.node_provisioning_mode) if args.node_provisioning_mode is not None else None
                ),
                instance_groups=[group],
                tags=[aws_native.TagArgs(key=k, value=v) for k, v in sorted(tags.items())],
            ),
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[self.dependencies, *self.lifecycle_objects, *role_policies, *([self.efa_security_group] if self.efa_security_group else [])]
            ),
        )


__all__ = [
    "CHART_DIR",
    "DEEP_HEALTH_CHECKS",
    "DEPENDENCIES_RELEASE",
    "INSTANCE_ROLE_MANAGED_POLICIES",
    "HyperPodCluster",
    "HyperPodClusterArgs",
    "chart_defaults",
    "dependencies_values",
    "efa_rules",
    "execution_role_policy",
    "has_efa",
    "lifecycle_script",
    "regional_values",
    "validate",
]
