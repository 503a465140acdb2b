"""What the cluster's system node group accepts as its instance type: the one home of that rule (pure: no Pulumi).

The settings layer (``systemNodeInstanceType``) and :class:`kimi_k3.cluster.eks.Cluster` (``system_node_instance_type``)
both ask :func:`instance_type_problem`: the system nodes run the add-ons and controllers on CPU instances; GPU nodes come
from the Capacity Block.
"""

from __future__ import annotations

import re

from kimi_k3.core import catalog

COUNT = (2, 10)
"""Nodes in the system node group, ``(low, high)``: two or more spread the add-ons over two AZs."""
DISK_GIB = (20, 1000)
"""Root volume of each system node, GiB, ``(low, high)`` (gp3)."""

_INSTANCE_TYPE = re.compile(r"^([a-z]+)(\d+)([a-z0-9-]*)\.(\d*x?large|metal[-\w]*|medium|small|micro|nano)$")


def instance_type_problem(instance_type: str) -> str | None:
    """What is accepted instead of ``instance_type`` for the system nodes (not a CPU instance type); ``None``: accepted."""
    if not _INSTANCE_TYPE.fullmatch(instance_type) or instance_type in catalog.INSTANCE_TYPES or instance_type.startswith(("p", "g")):
        return "expected a CPU instance type such as m7i.xlarge (GPU nodes come from the Capacity Block)"
    return None


__all__ = ["COUNT", "DISK_GIB", "instance_type_problem"]
