"""The Capacity Block's GPU nodes from their API objects (``v1.Node`` JSON): joined, Ready, GPUs allocatable (pure).

A node has *joined* once its kubelet registered it (it carries the node group's
``kimi-k3.io/node-pool=capacity-block`` label), is *Ready* when its ``Ready`` condition is
``True``, and can take the engine once the NVIDIA device plugin advertises
``nvidia.com/gpu`` in its allocatable resources. EKS node monitoring, where installed,
reports ``AcceleratedHardwareReady`` (EKS user guide, node-health); a ``False`` there is shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kimi_k3.core.clock import utc

GPU_RESOURCE = "nvidia.com/gpu"
HEALTH_CONDITIONS = ("AcceleratedHardwareReady", "KernelReady", "NetworkingReady", "StorageReady", "ContainerRuntimeReady")
"""Node conditions EKS's node monitoring agent sets (shown when ``False``)."""


@dataclass(frozen=True)
class NodeView:
    """One GPU node."""

    name: str
    """The node's ``metadata.name`` (``?`` when missing)."""
    ready: bool
    """True when its ``Ready`` condition's status is ``True``."""
    gpus_allocatable: int
    """``nvidia.com/gpu`` in ``status.allocatable``, the GPUs pods can request; 0 until the device plugin advertises them."""
    gpus_capacity: int
    """``nvidia.com/gpu`` in ``status.capacity``; 0 when not advertised."""
    created: datetime | None
    """When it registered (``metadata.creationTimestamp``)."""
    unhealthy: tuple[str, ...] = ()
    """Health conditions that are ``False`` (``AcceleratedHardwareReady: NVIDIA XID 79 …``)."""
    instance_id: str | None = None
    """EC2 instance id from ``spec.providerID`` (``aws:///us-east-1a/i-0abc…``)."""


@dataclass(frozen=True)
class NodesSummary:
    """The GPU nodes against the block's reserved count."""

    reserved: int
    """Instances the block reserves (EC2's instance count; the stack's required nodes when the block could not be read)."""
    nodes: tuple[NodeView, ...]
    """The GPU nodes registered with the cluster, sorted by name."""

    @property
    def joined(self) -> int:
        """Nodes registered with the cluster."""
        return len(self.nodes)

    @property
    def ready(self) -> int:
        """Nodes whose ``Ready`` condition is true."""
        return sum(1 for n in self.nodes if n.ready)

    @property
    def gpus_allocatable(self) -> int:
        """GPUs the device plugin advertises on Ready nodes."""
        return sum(n.gpus_allocatable for n in self.nodes if n.ready)


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def node_view(node: Mapping[str, Any]) -> NodeView:
    """One node's view."""
    meta, status = node.get("metadata", {}), node.get("status", {})
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ready = (conditions.get("Ready") or {}).get("status") == "True"
    unhealthy = tuple(
        f"{kind}: {' '.join(str(c.get('message') or c.get('reason') or '').split())[:120]}".rstrip(": ")
        for kind in HEALTH_CONDITIONS if (c := conditions.get(kind)) and c.get("status") == "False"
    )
    created = meta.get("creationTimestamp")
    provider = (node.get("spec") or {}).get("providerID") or ""
    return NodeView(
        name=meta.get("name", "?"),
        ready=ready,
        gpus_allocatable=_int((status.get("allocatable") or {}).get(GPU_RESOURCE)),
        gpus_capacity=_int((status.get("capacity") or {}).get(GPU_RESOURCE)),
        created=utc(datetime.fromisoformat(created.replace("Z", "+00:00"))) if created else None,
        unhealthy=unhealthy,
        instance_id=provider.rsplit("/", 1)[-1] if provider.startswith("aws://") else None,
    )


def summarize(nodes: Iterable[Mapping[str, Any]], reserved: int) -> NodesSummary:
    """The nodes, sorted by name, against ``reserved``."""
    return NodesSummary(reserved=reserved, nodes=tuple(sorted((node_view(n) for n in nodes), key=lambda n: n.name)))


__all__ = ["GPU_RESOURCE", "NodeView", "NodesSummary", "node_view", "summarize"]
