"""How long AWS (and the cluster) take to create each kind of resource: the offline engine's clock for a first ``pulumi up``.

The offline engine never waits; it models *when* each resource would exist in a first
``pulumi up`` that starts at the run's ``now`` (:mod:`kimi_k3.offline.timeline`), so that
rules AWS applies against the wall clock at creation time (an Auto Scaling scheduled action
must start in the future, :mod:`kimi_k3.offline.rules`) can be checked here.

Each figure says where it comes from; most are estimates (marked so), chosen on the slow
side of what a healthy account shows, since the rules they feed must hold on a slow day too.
Resource types not listed take :data:`DEFAULT` (one API call).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class CreateTime:
    """How long creating one resource takes, and where the figure comes from."""

    duration: timedelta
    """From the create call until the resource is usable by what depends on it."""
    source: str
    """The figure's source (a page, an issue) or ``estimate: …`` with the reasoning."""


DEFAULT = CreateTime(timedelta(seconds=5), "estimate: a single create API call that returns at once")
"""Any resource type not listed below (IAM roles and policies, security groups, log groups, route tables …)."""

NO_TIME = CreateTime(timedelta(0), "a Pulumi provider or component: no cloud call of its own")

EKS_CONTROL_PLANE = CreateTime(
    timedelta(minutes=15),
    "aws/containers-roadmap#1227: 'EKS cluster control plane provisioning time currently averages 15 minutes' "
    "(the EKS API reference, CreateCluster, says 'several minutes')",
)
NODE_GROUP_WITH_NODES = CreateTime(
    timedelta(minutes=5),
    "estimate: EKS waits for the nodes to join and turn Ready before the node group is ACTIVE (EC2 boot, nodeadm, kubelet)",
)
NODE_GROUP_WITHOUT_JOIN_CHECK = CreateTime(
    timedelta(minutes=2),
    "estimate: the Auto Scaling group and launch template version only; EKS does not wait for nodes at desired 0, nor "
    "for Capacity Block nodes (EKS user guide, capacity-blocks-mng: 'don't perform any validations that instances "
    "launched actually join')",
)

CREATE_TIMES: Mapping[str, CreateTime] = MappingProxyType(
    {
        "eks:index:Cluster": EKS_CONTROL_PLANE,
        "aws:eks/cluster:Cluster": EKS_CONTROL_PLANE,
        "aws:eks/addon:Addon": CreateTime(
            timedelta(minutes=2), "estimate: EKS reports an add-on ACTIVE once its pods run (CoreDNS needs a Ready node)"
        ),
        "aws:eks/podIdentityAssociation:PodIdentityAssociation": CreateTime(timedelta(seconds=10), "estimate: one EKS API call"),
        "aws:ec2/natGateway:NatGateway": CreateTime(
            timedelta(minutes=2), "estimate: a NAT gateway is 'pending' for a minute or two before 'available'"
        ),
        "aws:ec2/vpcEndpoint:VpcEndpoint": CreateTime(
            timedelta(minutes=2), "estimate: an interface endpoint is 'pending' until its network interfaces exist"
        ),
        "aws:kms/key:Key": CreateTime(timedelta(seconds=10), "estimate: one KMS API call"),
        "kubernetes:helm.sh/v3:Release": CreateTime(
            timedelta(minutes=2), "estimate: helm install, waiting for the release's workloads to be ready"
        ),
    }
)
"""Create times by Pulumi type token (see the module docstring)."""


def create_time(type_: str, inputs: Mapping[str, Any]) -> CreateTime:
    """How long creating a resource of ``type_`` with ``inputs`` takes (:data:`CREATE_TIMES`, else :data:`DEFAULT`)."""
    if type_.startswith("pulumi:providers:"):
        return NO_TIME
    if type_ == "aws:eks/nodeGroup:NodeGroup":
        scaling = inputs.get("scalingConfig") or {}
        if inputs.get("capacityType") == "CAPACITY_BLOCK" or not scaling.get("desiredSize"):
            return NODE_GROUP_WITHOUT_JOIN_CHECK
        return NODE_GROUP_WITH_NODES
    return CREATE_TIMES.get(type_, DEFAULT)


__all__ = ["CREATE_TIMES", "DEFAULT", "EKS_CONTROL_PLANE", "NODE_GROUP_WITHOUT_JOIN_CHECK", "NODE_GROUP_WITH_NODES", "CreateTime", "create_time"]
