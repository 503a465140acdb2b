"""What a Capacity Block's node group accepts of its inputs: the one home of these rules (pure: no Pulumi).

The settings layer (``capacityReservationId``, ``gpuInstanceType``, ``gpuAmiReleaseVersion``),
:func:`kimi_k3.capacity.lookup.lookup_capacity_block` and :class:`kimi_k3.capacity.node_group.CapacityBlockNodeGroup`
ask these functions; each returns what is accepted instead of a value (``None``: accepted), and the caller names its
own input (a config key, a parameter, an arg).
"""

from __future__ import annotations

import re

from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.core import catalog
from kimi_k3.core.formats import CAPACITY_BLOCK_OFFERING_ID, CAPACITY_RESERVATION_ID

ROOT_VOLUME_GIB = (100, 2000)
"""Encrypted gp3 root volume of each GPU node, GiB, ``(low, high)``: images and weights live on the NVMe RAID0, not here."""

_FAMILY = re.compile(r"^([a-z]+)(\d+)([a-z0-9-]*)\.(\d*x?large|metal[-\w]*|medium|small|micro|nano)$")
_AMI_RELEASE = re.compile(r"\d+\.\d+\.\d+-\d{8}")


def reservation_id_problem(reservation_id: str) -> str | None:
    """What a Capacity Block reservation id looks like, when ``reservation_id`` is not one (an offering id is named as such)."""
    if CAPACITY_BLOCK_OFFERING_ID.fullmatch(reservation_id):
        return (
            "that is a Capacity Block offering id (cb-...), not a reservation: buy it with "
            f"`kimi-k3 capacity purchase {reservation_id} --count N --days D`, which prints the reservation id (cr- followed by 17 hex digits)"
        )
    if not CAPACITY_RESERVATION_ID.fullmatch(reservation_id):
        return "expected 'cr-' followed by 17 lowercase hex digits, e.g. cr-0123456789abcdef0"
    return None


def gpu_instance_type_problem(instance_type: str) -> str | None:
    """The GPU instance types a node group accepts, when ``instance_type`` is not one of them."""
    if instance_type in catalog.INSTANCE_TYPES:
        return None
    known = ", ".join(catalog.INSTANCE_TYPES)
    match = _FAMILY.fullmatch(instance_type)
    if match and match.group(1) in catalog.NON_GPU_FAMILIES:
        return f"not a GPU instance type; accepted: {known}"
    return f"unknown instance type; accepted: {known}"


def ami_release_problem(release: str, kubernetes_version: str | None = None) -> str | None:
    """What an EKS AMI release version looks like (``1.34.2-20251120``), for ``kubernetes_version`` when given."""
    if not _AMI_RELEASE.fullmatch(release):
        return "expected an EKS AMI release version such as 1.34.2-20251120"
    if kubernetes_version is not None and not release.startswith(f"{kubernetes_version}."):
        return f"AMI release {release} is not for Kubernetes {kubernetes_version}: pin a {kubernetes_version}.x-YYYYMMDD release or leave it unset"
    return None


def block_type_problem(block: CapacityBlockFacts, instance_type: str) -> str | None:
    """Why a node group of ``instance_type`` cannot run on ``block`` (another instance type); ``None``: it can."""
    if block.instance_type == instance_type:
        return None
    return (
        f"the Capacity Block {block.reservation_id} reserves {block.instance_type}: EC2 launches only that type into it; "
        f"pass instance_type=block.instance_type ({block.instance_type!r}) or use a block of {instance_type}"
    )


def block_count_problem(block: CapacityBlockFacts, nodes_required: int) -> str | None:
    """Why ``nodes_required`` nodes do not fit ``block``; ``None``: they do."""
    if nodes_required <= block.instance_count:
        return None
    return f"at most {block.instance_count}: the Capacity Block {block.reservation_id} reserves {block.instance_count} {block.instance_type} nodes"


__all__ = ["ROOT_VOLUME_GIB", "ami_release_problem", "block_count_problem", "block_type_problem", "gpu_instance_type_problem", "reservation_id_problem"]
