"""Scale a stack's Capacity Block node group up to the reserved count, now (boto3, EKS API).

The operator's lever behind ``kimi-k3 capacity scale-up STACK``: when a block is active
and the GPU node group sits below the reserved count (a ``pulumi up`` that failed before
its scheduled action was created, a scheduled action that fired while the block was
still ``scheduled``), this asks EKS for the nodes at once
(``UpdateNodegroupConfig``, EKS API reference), instead of waiting for the next
``pulumi up``.

Rules it keeps (EKS user guide, capacity-blocks-mng): instances launch into a block only
while it is ``active``; EKS scales the group to 0 forty minutes before the block ends,
so a scale-up after that moment would be undone (and EC2 terminates the instances from
thirty minutes before the end). Only the desired size (and the maximum, when it is
lower) changes: the minimum stays as it is, so EKS's own scale-down can still reach 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kimi_k3.capacity.aws import aws_errors
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.capacity.scaling import EKS_SCALEDOWN_BEFORE_END
from kimi_k3.core import clock
from kimi_k3.errors import UserError

RESERVATION_TAG = "kimi-k3.io/capacity-reservation"
"""Tag the Capacity Block node group carries with its reservation id (set by CapacityBlockNodeGroup)."""


@dataclass(frozen=True)
class NodeGroupSize:
    """The scaling config of one EKS managed node group."""

    cluster: str
    """Name of the EKS cluster (``clusterName``)."""
    name: str
    """Name of the node group (``nodegroupName``)."""
    min_size: int
    """Minimum size (``scalingConfig.minSize``); 0 when not reported."""
    max_size: int
    """Maximum size (``scalingConfig.maxSize``); 0 when not reported."""
    desired_size: int
    """Desired size (``scalingConfig.desiredSize``); 0 when not reported."""
    status: str
    """Node group status (``status``: ``ACTIVE``, ``UPDATING``, ``DEGRADED`` …); ``UNKNOWN`` when not reported."""
    autoscaling_groups: tuple[str, ...] = ()
    """Names of the Auto Scaling groups EKS made for the node group (``resources.autoScalingGroups``)."""

    @classmethod
    def from_api(cls, nodegroup: dict[str, Any]) -> NodeGroupSize:
        """Build from ``DescribeNodegroup``'s ``nodegroup``."""
        scaling = nodegroup.get("scalingConfig", {})
        return cls(
            cluster=nodegroup["clusterName"],
            name=nodegroup["nodegroupName"],
            min_size=int(scaling.get("minSize", 0)),
            max_size=int(scaling.get("maxSize", 0)),
            desired_size=int(scaling.get("desiredSize", 0)),
            status=nodegroup.get("status", "UNKNOWN"),
            autoscaling_groups=tuple(g["name"] for g in (nodegroup.get("resources") or {}).get("autoScalingGroups") or [] if g.get("name")),
        )


@dataclass(frozen=True)
class ScaleUp:
    """What a scale-up would change: the scaling config to send, or why nothing is needed."""

    node_group: NodeGroupSize
    """The Capacity Block node group as EKS reports it now."""
    target: int
    """Nodes wanted: the ``--count`` asked for, else the block's reserved count."""
    scaling_config: dict[str, int] | None
    """``UpdateNodegroupConfig``'s ``scalingConfig``; ``None`` when the group is already there."""

    @property
    def needed(self) -> bool:
        """True when the group is below the target."""
        return self.scaling_config is not None


def find_block_node_group(eks: Any, cluster: str, reservation_id: str) -> NodeGroupSize:
    """The cluster's node group tagged with ``reservation_id`` (the stack's GPU nodes)."""
    found = []
    with aws_errors(eks.meta.region_name):
        for page in eks.get_paginator("list_nodegroups").paginate(clusterName=cluster):
            for name in page.get("nodegroups", []):
                nodegroup = eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]
                if nodegroup.get("tags", {}).get(RESERVATION_TAG) == reservation_id:
                    found.append(NodeGroupSize.from_api(nodegroup))
    if not found:
        raise UserError(
            f"cluster {cluster} has no node group tagged {RESERVATION_TAG}={reservation_id}: "
            "run `pulumi up` for the stack first (it declares the GPU node group), or pass --cluster"
        )
    if len(found) > 1:
        raise UserError(f"cluster {cluster} has {len(found)} node groups tagged {RESERVATION_TAG}={reservation_id}: {', '.join(g.name for g in found)}")
    return found[0]


def plan_scale_up(group: NodeGroupSize, block: CapacityBlockFacts, now: datetime, count: int | None = None) -> ScaleUp:
    """Check the block can take the nodes now and compute the scaling config (pure).

    :param count: nodes wanted; default the block's reserved count.
    """
    now = clock.utc(now)
    reserved = block.total_instances
    target = reserved if count is None else count
    if not 1 <= target <= reserved:
        raise UserError(f"--count {target} is not accepted; the block reserves {reserved} instance(s): 1 to {reserved}")
    if block.state != "active":
        starts = f" (starts {block.start:%Y-%m-%d %H:%M} UTC)" if block.start else ""
        raise UserError(f"Capacity Block {block.reservation_id} is {block.state}{starts}; instances launch into a block only while it is active")
    if block.end is not None and now >= block.end - EKS_SCALEDOWN_BEFORE_END:
        raise UserError(
            f"Capacity Block {block.reservation_id} ends at {block.end:%Y-%m-%d %H:%M} UTC: EKS scales the node group to 0 "
            f"from {block.end - EKS_SCALEDOWN_BEFORE_END:%H:%M} UTC, so a scale-up now would be undone"
        )
    if group.desired_size >= target:
        return ScaleUp(group, target, None)
    config = {"minSize": group.min_size, "maxSize": max(group.max_size, target), "desiredSize": target}
    return ScaleUp(group, target, config)


def apply_scale_up(eks: Any, plan: ScaleUp) -> str | None:
    """Send the scaling config (``UpdateNodegroupConfig``); the update id, or ``None`` when nothing was needed."""
    if not plan.needed:
        return None
    group = plan.node_group
    with aws_errors(eks.meta.region_name):
        response = eks.update_nodegroup_config(clusterName=group.cluster, nodegroupName=group.name, scalingConfig=plan.scaling_config)
    return str(response["update"]["id"])


def make_eks_client(region: str) -> Any:
    """An EKS client for ``region`` (the one place that makes one; tests replace it)."""
    import boto3
    from botocore.config import Config

    with aws_errors(region):
        return boto3.session.Session(region_name=region).client(
            "eks", config=Config(retries={"max_attempts": 4, "mode": "standard"}, user_agent_extra="kimi-k3-aws")
        )


__all__ = ["NodeGroupSize", "ScaleUp", "apply_scale_up", "find_block_node_group", "make_eks_client", "plan_scale_up"]
