"""HyperPod's create-time rules (CreateCluster of a HyperPod cluster on EKS), checked by the offline engine on each registration.

The offline engine calls :func:`check_registration` before answering a resource; a
declaration AWS would refuse fails the run with one line naming the rule and its source,
as ``pulumi up`` would fail (later, and after creating everything before it).

``aws-native:sagemaker:Cluster`` (``CreateCluster`` of a HyperPod cluster on EKS), with
the rules of :mod:`kimi_k3.hyperpod.rules` and their sources:

* the orchestrating EKS cluster (found among the registered ``eks:index:Cluster``
  resources by the name in ``orchestrator.eks.clusterArn``) has a Kubernetes version and
  an authentication mode HyperPod supports, and a ``vpc-cni`` add-on of at least 1.18.3;
* the HyperPod dependencies chart was installed before (a Helm release of
  ``HyperPodHelmChart`` registered first);
* every subnet of the cluster is private, no route to an internet gateway
  (``sagemaker-hyperpod-eks-prerequisites``: the subnet type must be private for HyperPod clusters);
* an instance group on a training plan names a plan that exists and uses only subnets of
  the plan's AZ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kimi_k3.errors import UserError
from kimi_k3.hyperpod import rules as hyperpod_rules

if TYPE_CHECKING:
    from kimi_k3.hyperpod.training_plan_check import TrainingPlanFacts
    from kimi_k3.offline.record import RecordedResource

HYPERPOD_CLUSTER = "aws-native:sagemaker:Cluster"
"""Type token of a SageMaker HyperPod cluster (pulumi-aws-native)."""
DEPENDENCIES_CHART = "HyperPodHelmChart"
"""Directory name of the HyperPod dependencies chart (aws/sagemaker-hyperpod-cli ``helm_chart/HyperPodHelmChart``)."""
CHECKED_TYPES = frozenset({HYPERPOD_CLUSTER})
"""Resource types :func:`check_registration` has rules for."""
_PREREQUISITES = "SageMaker developer guide, sagemaker-hyperpod-eks-prerequisites"
_HELM = "SageMaker developer guide, sagemaker-hyperpod-eks-install-packages-using-helm-chart"


def check_registration(
    type_: str,
    inputs: Mapping[str, Any],
    registered: Iterable[RecordedResource],
    existing_subnet_azs: Mapping[str, str],
    training_plan: Callable[[str], TrainingPlanFacts | None],
) -> None:
    """Refuse a registration the real system would refuse (nothing for types without rules).

    :param type_: type token of the resource being registered.
    :param inputs: its inputs (camelCase, resolved).
    :param registered: the resources registered before it.
    :param existing_subnet_azs: AZs of subnets of an existing VPC (by id).
    :param training_plan: the training plan of an ARN as the run's SageMaker answers it (``None``: no such plan).
    :raises UserError: one line naming the rule and its source.
    """
    if type_ == HYPERPOD_CLUSTER:
        _check_hyperpod_cluster(inputs, list(registered), existing_subnet_azs, training_plan)


def _check_hyperpod_cluster(
    inputs: Mapping[str, Any],
    registered: list[RecordedResource],
    existing_subnet_azs: Mapping[str, str],
    training_plan: Callable[[str], TrainingPlanFacts | None],
) -> None:
    name = inputs.get("clusterName", "?")
    eks_arn = str(((inputs.get("orchestrator") or {}).get("eks") or {}).get("clusterArn") or "")
    eks_name = eks_arn.rsplit("/", 1)[-1]
    eks = next((r for r in registered if r.type == "eks:index:Cluster" and r.plain_inputs.get("name") == eks_name), None)
    if eks is not None:
        eks_inputs = eks.plain_inputs
        cni = next(
            (r.plain_inputs.get("addonVersion") for r in registered
             if r.type == "aws:eks/addon:Addon" and r.plain_inputs.get("addonName") == "vpc-cni" and r.plain_inputs.get("clusterName") == eks_name),
            None,
        )
        try:
            hyperpod_rules.check_eks_cluster(
                hyperpod_rules.EksForHyperPod(str(eks_inputs.get("version")), str(eks_inputs.get("authenticationMode") or "CONFIG_MAP"), cni)
            )
        except UserError as err:
            raise UserError(f"CreateCluster {name} would fail: {err}") from None
    releases = [r for r in registered if r.type == "kubernetes:helm.sh/v3:Release" and str(r.plain_inputs.get("chart", "")).rstrip("/").endswith(DEPENDENCIES_CHART)]
    if not releases:
        raise UserError(
            f"CreateCluster {name} would leave a cluster without the HyperPod dependencies: install the {DEPENDENCIES_CHART} Helm chart "
            f"on EKS cluster {eks_name or '?'} before a cluster created through the API ({_HELM})"
        )
    subnets = _subnets(registered, existing_subnet_azs)
    public = [s for s in (inputs.get("vpcConfig") or {}).get("subnets") or [] if subnets.get(s, ("", False))[1]]
    for group in inputs.get("instanceGroups") or []:
        public += [s for s in (group.get("overrideVpcConfig") or {}).get("subnets") or [] if subnets.get(s, ("", False))[1]]
    if public:
        raise UserError(f"CreateCluster {name} would fail: subnet {public[0]} is public; HyperPod clusters need private subnets ({_PREREQUISITES})")
    plans: dict[str, tuple[str, ...]] = {}
    for group in inputs.get("instanceGroups") or []:
        arn = group.get("trainingPlanArn")
        if not arn:
            continue
        facts = training_plan(arn)
        if facts is None:
            raise UserError(
                f"CreateCluster {name} would fail: instance group {group.get('instanceGroupName')!r} names training plan {arn}, "
                "which does not exist in this account and region (DescribeTrainingPlan: ResourceNotFound)"
            )
        plans[arn] = facts.availability_zones()
    try:
        hyperpod_rules.check_cluster_registration(inputs, {s: az for s, (az, _) in subnets.items()}, plans)
    except UserError as err:
        raise UserError(f"CreateCluster {name} would fail: {err}") from None


def _subnets(registered: list[RecordedResource], existing_subnet_azs: Mapping[str, str]) -> dict[str, tuple[str, bool]]:
    """Every subnet the program knows: its AZ and whether it is public.

    Public = its route table (``aws:ec2/routeTableAssociation``) sends ``0.0.0.0/0`` to an
    internet gateway (``igw-``), the EC2 definition of a public subnet. A subnet whose
    association is not registered yet counts as private (the rule never refuses wrongly).
    Subnets of an existing VPC are the stack's private subnets.
    """
    to_igw = {
        r.plain_inputs.get("routeTableId") for r in registered
        if r.type == "aws:ec2/route:Route" and r.plain_inputs.get("destinationCidrBlock") == "0.0.0.0/0"
        and str(r.plain_inputs.get("gatewayId") or "").startswith("igw-")
    }
    public = {
        r.plain_inputs.get("subnetId") for r in registered
        if r.type == "aws:ec2/routeTableAssociation:RouteTableAssociation" and r.plain_inputs.get("routeTableId") in to_igw
    }
    known = {subnet: (az, False) for subnet, az in existing_subnet_azs.items()}
    for resource in registered:
        if resource.type == "aws:ec2/subnet:Subnet" and resource.id:
            known[resource.id] = (str(resource.plain_inputs.get("availabilityZone", "")), resource.id in public)
    return known


__all__ = ["CHECKED_TYPES", "HYPERPOD_CLUSTER", "check_registration"]
