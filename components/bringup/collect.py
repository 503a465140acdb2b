"""One snapshot of a stack's bring-up: the AWS reads (boto3) and the cluster reads, together.

AWS: the reservation (``DescribeCapacityReservations``), its extension history
(``DescribeCapacityBlockExtensionHistory``) and, once the block is active or was extended,
EKS's scale-down action on the GPU node group's ASG (``eks:ListNodegroups`` /
``DescribeNodegroup`` to find the group tagged with the reservation, then
``autoscaling:DescribeScheduledActions``). Cluster: the GPU nodes, the serving pods, and
the log tail of each pod's current container. A part that cannot be read becomes one line
in :attr:`~kimi_k3.bringup.report.BringUp.errors`; the rest is still shown.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from kimi_k3.bringup.kube import KubeReader
from kimi_k3.bringup.nodes import summarize
from kimi_k3.bringup.pods import classify, log_wanted
from kimi_k3.bringup.report import BringUp
from kimi_k3.capacity.assessment import OK, WARN, Finding
from kimi_k3.capacity.extensions import check_scaledown_action, read_extension_status
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.capacity.scale_up import find_block_node_group
from kimi_k3.capacity.status import describe_reservation
from kimi_k3.core import labels
from kimi_k3.errors import UserError
from kimi_k3.serving.args import VllmServingArgs
from kimi_k3.stack.settings import StackSettings, cluster_name

SERVING_NAMESPACE = VllmServingArgs.namespace
"""Namespace the stack's serving pods run in (the serving components' default; Platform keeps it)."""

SERVING_SELECTOR = {labels.MODEL_LABEL: labels.MODEL}
"""Labels every serving pod carries (Deployment and LeaderWorkerSet alike)."""

LOG_TAIL_LINES = 40
"""Lines of a container's log read per poll (progress lines come every 15 s among other output)."""


@dataclass(frozen=True)
class AwsClients:
    """The boto3 clients ``kimi-k3 status`` uses, for one region."""

    ec2: Any
    """boto3 EC2 client: the reservation and its extension history."""
    eks: Any
    """boto3 EKS client: finds the GPU node group tagged with the reservation."""
    autoscaling: Any
    """boto3 Auto Scaling client: the scheduled scale-down action on the node group's ASG."""


def make_aws_clients(region: str) -> AwsClients:
    """EC2, EKS and Auto Scaling clients for ``region`` (the one place that makes them; tests replace it)."""
    import boto3
    from botocore.config import Config

    from kimi_k3.capacity.aws import aws_errors  # boto3 and botocore load only when a command reads AWS

    config = Config(retries={"max_attempts": 4, "mode": "standard"}, connect_timeout=10, read_timeout=30, user_agent_extra="kimi-k3-aws")
    with aws_errors(region):
        session = boto3.session.Session(region_name=region)
        return AwsClients(*(session.client(name, config=config) for name in ("ec2", "eks", "autoscaling")))


class Watcher:
    """Takes snapshots of one stack's bring-up (remembers the node group's ASG between polls)."""

    def __init__(self, settings: StackSettings, aws: AwsClients | None, kube: KubeReader | None, namespace: str = SERVING_NAMESPACE) -> None:
        """``aws`` / ``kube`` ``None``: that side is not read (its part shows an error line)."""
        self.settings = settings
        self.aws = aws
        self.kube = kube
        self.namespace = namespace
        self._asg: str | None = None

    def snapshot(self, now: datetime) -> BringUp:
        """What the block, the nodes and the pods look like at ``now``."""
        s = self.settings
        errors: list[str] = []
        block = extension = scaledown = None
        if self.aws is not None:
            try:
                block = describe_reservation(self.aws.ec2, s.capacity.reservation_id)
            except UserError as err:
                errors.append(f"Capacity Block: {err}")
            if block is not None:
                extension = read_extension_status(self.aws.ec2, block.reservation_id, now)
                if block.active or (extension is not None and extension.level == OK):
                    scaledown = self._scaledown(block, now)
        else:
            errors.append("Capacity Block: AWS not read")
        reserved = block.instance_count if block else s.nodes_required
        report = BringUp(
            stack=s.stack, now=now, reservation_id=s.capacity.reservation_id, block=block,
            replicas_expected=s.replicas_for(reserved), namespace=self.namespace, extension=extension, scaledown=scaledown,
        )
        if self.kube is None:
            return replace(report, errors=(*errors, "cluster: no kubeconfig"))
        try:
            nodes = summarize(self.kube.nodes(labels.GPU_NODE_SELECTOR), reserved)
            pods = []
            for pod in sorted(self.kube.pods(self.namespace, SERVING_SELECTOR), key=lambda p: p["metadata"]["name"]):
                wanted = log_wanted(pod)
                tail = self.kube.log_tail(self.namespace, pod["metadata"]["name"], wanted[0], LOG_TAIL_LINES, previous=wanted[1]) if wanted else []
                pods.append(classify(pod, tail, now=now))
        except UserError as err:
            return replace(report, errors=(*errors, f"cluster: {err}"))
        return replace(report, nodes=nodes, pods=tuple(pods), errors=tuple(errors))

    def _scaledown(self, block: CapacityBlockFacts, now: datetime) -> Finding:
        """EKS's scale-down action against the block's end; a WARN line when it cannot be checked."""
        assert self.aws is not None and block.end is not None
        try:
            if self._asg is None:
                group = find_block_node_group(self.aws.eks, cluster_name(self.settings.project, self.settings.stack), block.reservation_id)
                if not group.autoscaling_groups:
                    return Finding(WARN, "scale-down", f"node group {group.name} has no Auto Scaling group yet")
                self._asg = group.autoscaling_groups[0]
            return check_scaledown_action(self.aws.autoscaling, self._asg, block.end, now)
        except UserError as err:
            return Finding(WARN, "scale-down", f"not checked: {err}")


__all__ = ["LOG_TAIL_LINES", "SERVING_NAMESPACE", "SERVING_SELECTOR", "AwsClients", "Watcher", "make_aws_clients"]
