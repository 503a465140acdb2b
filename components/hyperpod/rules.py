"""Rules SageMaker HyperPod enforces when a cluster is created, as pure checks.

The mock engine would accept any of these; the real ``CreateCluster`` (or the nodes
joining afterwards) does not. Each rule has its source. The settings layer calls
them and names the config key; the offline engine calls them on the declared
``aws-native:sagemaker:Cluster`` so ``kimi-k3 plan`` refuses what AWS would.

Sources (Amazon SageMaker AI developer guide):

* "Getting started with Amazon EKS support in SageMaker HyperPod"
  (``sagemaker-hyperpod-eks-prerequisites``): supported Kubernetes versions, the EKS
  authentication modes ``API`` and ``API_AND_CONFIG_MAP``, the Amazon VPC CNI plugin
  1.18.3 or later as the only supported CNI.
* "Installing packages on the Amazon EKS cluster using Helm"
  (``sagemaker-hyperpod-eks-install-packages-using-helm-chart``): the dependencies chart
  must be installed before a cluster created through the API; namespace ``aws-hyperpod``
  cannot be renamed.
* API reference ``ClusterInstanceGroupSpecification.TrainingPlanArn`` and the
  training-plan guide (``reserve-capacity-with-training-plans``): an instance group on a
  training plan runs in the plan's Availability Zone, so its subnet must be in that AZ.
* API reference ``CreateCluster`` / ``ClusterInstanceGroupSpecification``: instance group
  names (``ClusterInstanceGroupName``) and cluster names (``ClusterName``) patterns, and
  ``InstanceCount`` >= 0.
* A cluster created before its training plan starts (:func:`check_provisioning_mode`): a plan
  is ``Scheduled`` until its start, and "when the plan start date arrives, it becomes Active
  ... Instance groups are provisioned" (API reference, CreateTrainingPlan). In the standard
  provisioning model a create that cannot provision every instance fails ("if any instance
  group could not be fully provisioned, the entire cluster creation or update operation failed
  and rolled back", continuous provisioning guide, sagemaker-hyperpod-scaling-slurm; the EKS
  page, sagemaker-hyperpod-scaling-eks, "Records the target instance count ... Automatically
  retries failed launches" with ``NodeProvisioningMode: Continuous``). And the CloudFormation
  handler behind ``aws-native:sagemaker:Cluster`` gives a create 720 minutes
  (``AWS::SageMaker::Cluster`` schema, ``handlers.create.timeoutInMinutes``, vendored by
  pulumi-aws-native ``aws-cloudformation-schema/aws-sagemaker-cluster.json``). So a cluster
  created more than 12 hours before its plan starts needs ``Continuous``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kimi_k3.core.formats import EKS_ADDON_VERSION
from kimi_k3.errors import UserError

SUPPORTED_KUBERNETES_VERSIONS: tuple[str, ...] = ("1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34")
"""Kubernetes versions of the EKS cluster HyperPod supports (sagemaker-hyperpod-eks-prerequisites, newest
revision seen: it lists 1.28 through 1.34; older revisions stop at 1.32 or 1.33)."""

SUPPORTED_AUTHENTICATION_MODES: tuple[str, ...] = ("API", "API_AND_CONFIG_MAP")
"""EKS authentication modes HyperPod supports (``CONFIG_MAP`` alone is refused)."""

MIN_VPC_CNI_VERSION: tuple[int, int, int] = (1, 18, 3)
"""Oldest Amazon VPC CNI plugin version HyperPod supports."""

DEPENDENCIES_NAMESPACE = "aws-hyperpod"
"""Namespace the dependencies chart creates; HyperPod looks for it by this name."""

SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
"""The SageMaker model's pattern of ``ClusterName``, ``ClusterInstanceGroupName`` and ``EndpointName`` (each at most 63 characters)."""

SAGEMAKER_NAME_ACCEPTED = "1-63 letters, digits and '-', starting and ending with a letter or digit"
"""What :func:`is_sagemaker_name` accepts, as messages say it."""



@dataclass(frozen=True)
class EksForHyperPod:
    """What HyperPod requires of the EKS cluster it is attached to."""

    kubernetes_version: str
    """The EKS cluster's Kubernetes minor version, e.g. ``1.34``."""
    authentication_mode: str
    """The EKS cluster's ``accessConfig.authenticationMode``."""
    vpc_cni_version: str | None = None
    """Version of the ``vpc-cni`` add-on (``v1.20.4-eksbuild.1``); ``None``: not known yet."""


def is_sagemaker_name(value: object) -> bool:
    """A cluster, instance group or endpoint name as the SageMaker API accepts it (pattern and length)."""
    return isinstance(value, str) and len(value) <= 63 and SAGEMAKER_NAME.match(value) is not None


def check_kubernetes_version(version: str) -> None:
    """Refuse a Kubernetes version HyperPod does not support."""
    if version not in SUPPORTED_KUBERNETES_VERSIONS:
        raise UserError(
            f"HyperPod does not support Kubernetes {version!r} for its EKS cluster; supported: "
            f"{', '.join(SUPPORTED_KUBERNETES_VERSIONS)} (SageMaker developer guide, sagemaker-hyperpod-eks-prerequisites)"
        )


def check_authentication_mode(mode: str) -> None:
    """Refuse an EKS authentication mode HyperPod does not support."""
    if mode not in SUPPORTED_AUTHENTICATION_MODES:
        raise UserError(
            f"HyperPod needs the EKS cluster's authentication mode to be {' or '.join(SUPPORTED_AUTHENTICATION_MODES)}, not {mode!r} "
            "(SageMaker developer guide, sagemaker-hyperpod-eks-prerequisites)"
        )


def check_vpc_cni_version(version: str) -> None:
    """Refuse a ``vpc-cni`` add-on older than the one HyperPod requires."""
    match = EKS_ADDON_VERSION.match(version or "")
    if not match:
        raise UserError(f"vpc-cni version {version!r} is not an EKS add-on version such as v1.20.4-eksbuild.1")
    found = tuple(int(part) for part in match.groups()[:3])
    if found < MIN_VPC_CNI_VERSION:
        raise UserError(
            f"HyperPod requires the Amazon VPC CNI plugin {'.'.join(map(str, MIN_VPC_CNI_VERSION))} or later; the cluster has {version} "
            "(SageMaker developer guide, sagemaker-hyperpod-eks-prerequisites)"
        )


def check_eks_cluster(eks: EksForHyperPod) -> None:
    """All the EKS-side rules at once."""
    check_kubernetes_version(eks.kubernetes_version)
    check_authentication_mode(eks.authentication_mode)
    if eks.vpc_cni_version is not None:
        check_vpc_cni_version(eks.vpc_cni_version)


def check_instance_group_subnet(group: str, subnet_availability_zone: str, plan_availability_zones: tuple[str, ...]) -> None:
    """An instance group on a training plan must use a subnet in the plan's AZ.

    :param group: instance group name (for the message).
    :param subnet_availability_zone: AZ of the subnet the group is given.
    :param plan_availability_zones: AZs the training plan reserved its capacity in.
    """
    if subnet_availability_zone not in plan_availability_zones:
        raise UserError(
            f"instance group {group!r} uses a subnet in {subnet_availability_zone}, but its training plan's capacity is in "
            f"{', '.join(plan_availability_zones)}; HyperPod places the group's instances in the plan's AZ, so its subnet must be there"
        )


def check_names(cluster_name: str, instance_group_names: tuple[str, ...]) -> None:
    """Cluster and instance group names as the SageMaker API accepts them, group names unique."""
    if not is_sagemaker_name(cluster_name):
        raise UserError(f"HyperPod cluster name {cluster_name!r} is not accepted; {SAGEMAKER_NAME_ACCEPTED}")
    for group in instance_group_names:
        if not is_sagemaker_name(group):
            raise UserError(f"instance group name {group!r} is not accepted; {SAGEMAKER_NAME_ACCEPTED}")
    if len(set(instance_group_names)) != len(instance_group_names):
        raise UserError(f"instance group names {list(instance_group_names)} are not unique")


EBS_VOLUME_GIB = (1, 16384)
"""Extra EBS volume per instance, GiB, ``(low, high)``: CreateCluster's ``ClusterEbsVolumeConfig.VolumeSizeInGB`` range."""
CONTINUOUS = "Continuous"
"""``NodeProvisioningMode`` of continuous provisioning (CreateCluster; aws-native ``ClusterNodeProvisioningMode``)."""
CREATE_HANDLER_TIMEOUT = timedelta(minutes=720)
"""How long the ``AWS::SageMaker::Cluster`` create handler waits (its schema's ``handlers.create.timeoutInMinutes``)."""
PROVISIONING_SOURCE = (
    "CreateTrainingPlan API reference: instance groups are provisioned when the plan becomes Active at its start; "
    "sagemaker-hyperpod-scaling-eks: NodeProvisioningMode Continuous provisions asynchronously; AWS::SageMaker::Cluster "
    "schema: handlers.create.timeoutInMinutes 720"
)


def check_provisioning_mode(mode: str | None, plan_start: datetime, created_at: datetime) -> None:
    """Refuse the standard provisioning model for a cluster created more than :data:`CREATE_HANDLER_TIMEOUT` before its
    training plan starts: its instances cannot come before the start, and the create fails at the handler's timeout."""
    if mode == CONTINUOUS or plan_start - created_at <= CREATE_HANDLER_TIMEOUT:
        return
    hours = (plan_start - created_at).total_seconds() / 3600
    raise UserError(
        f"NodeProvisioningMode {mode or '(standard)'} on a cluster created {hours:.0f} h before its training plan starts "
        f"({plan_start:%Y-%m-%d %H:%M} UTC): no instance can be provisioned before the start and the create fails after "
        f"{int(CREATE_HANDLER_TIMEOUT.total_seconds() // 3600)} h; use {CONTINUOUS} ({PROVISIONING_SOURCE})"
    )


def check_cluster_registration(inputs: Mapping[str, Any], subnet_availability_zones: Mapping[str, str],
                               plan_availability_zones: Mapping[str, tuple[str, ...]]) -> None:
    """The rules above on a declared ``aws-native:sagemaker:Cluster`` (its registered inputs, camelCase).

    For the offline engine's resource handler, so a plan fails where ``CreateCluster`` would:
    an EKS orchestrator is set, names are valid, and every instance group on a training
    plan uses only subnets (its ``overrideVpcConfig`` or the cluster's ``vpcConfig``) of the
    plan's AZ.

    :param inputs: the registered inputs.
    :param subnet_availability_zones: AZ of each subnet id the stack knows.
    :param plan_availability_zones: AZs of each training plan ARN the stack read.
    """
    if not ((inputs.get("orchestrator") or {}).get("eks") or {}).get("clusterArn"):
        raise UserError("a HyperPod cluster on EKS needs orchestrator.eks.clusterArn (CreateCluster: Orchestrator.Eks.ClusterArn)")
    groups = list(inputs.get("instanceGroups") or [])
    check_names(inputs.get("clusterName", ""), tuple(g.get("instanceGroupName", "") for g in groups))
    cluster_subnets = list((inputs.get("vpcConfig") or {}).get("subnets") or [])
    for group in groups:
        plan = group.get("trainingPlanArn")
        if not plan:
            continue
        if plan not in plan_availability_zones:
            raise UserError(f"instance group {group.get('instanceGroupName')!r} uses training plan {plan}, which the stack did not read")
        subnets = list((group.get("overrideVpcConfig") or {}).get("subnets") or cluster_subnets)
        if not subnets:
            raise UserError(f"instance group {group.get('instanceGroupName')!r} has no subnet (vpcConfig.subnets or overrideVpcConfig.subnets)")
        for subnet in subnets:
            if subnet in subnet_availability_zones:
                check_instance_group_subnet(group.get("instanceGroupName", ""), subnet_availability_zones[subnet], plan_availability_zones[plan])


__all__ = [
    "CONTINUOUS",
    "CREATE_HANDLER_TIMEOUT",
    "DEPENDENCIES_NAMESPACE",
    "EBS_VOLUME_GIB",
    "MIN_VPC_CNI_VERSION",
    "PROVISIONING_SOURCE",
    "SAGEMAKER_NAME",
    "SAGEMAKER_NAME_ACCEPTED",
    "SUPPORTED_AUTHENTICATION_MODES",
    "SUPPORTED_KUBERNETES_VERSIONS",
    "EksForHyperPod",
    "check_authentication_mode",
    "check_cluster_registration",
    "check_eks_cluster",
    "check_instance_group_subnet",
    "check_kubernetes_version",
    "check_names",
    "check_provisioning_mode",
    "check_vpc_cni_version",
    "is_sagemaker_name",
]
