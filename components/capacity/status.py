"""What the account's Capacity Blocks look like now: one by id, all of a region, and their health.

Reads ``DescribeCapacityReservations`` (every page; the API documents no reservation-type
filter, so only ``capacity-block`` entries are kept) into the one record
(:class:`~kimi_k3.capacity.facts.CapacityBlockFacts`) and, where the installed botocore model
has it, ``DescribeCapacityBlockStatus`` (interconnect and instance health) as an optional
enrichment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kimi_k3.capacity.aws import aws_errors, validate_reservation_id
from kimi_k3.capacity.facts import CapacityBlockFacts, ended_from_record
from kimi_k3.errors import UserError


@dataclass(frozen=True)
class BlockStatus:
    """Health of a Capacity Block from ``describe_capacity_block_status``."""

    capacity_block_id: str
    """Id of the Capacity Block (``CapacityBlockId``), the ``capacity_block_id`` of its reservation."""
    interconnect_status: str
    """Accelerator interconnect health (``InterconnectStatus``): ``ok``, ``impaired``, ``insufficient-data``; ``unknown`` when not reported."""
    total: int
    """Capacity of the block, available plus unavailable (``TotalCapacity``); 0 when not reported."""
    available: int
    """Capacity that can still be launched into the block (``TotalAvailableCapacity``); 0 when not reported."""
    unavailable: int
    """Capacity unusable after a system status check failure (``TotalUnavailableCapacity``); 0 when not reported."""


@dataclass(frozen=True)
class ReservationView:
    """A reservation plus its block status when AWS exposes one."""

    reservation: CapacityBlockFacts
    """The reservation as ``DescribeCapacityReservations`` reports it."""
    block: BlockStatus | None = None
    """Health of its block; None when the reservation names no block or the status could not be read."""


def describe_reservation(ec2: Any, reservation_id: str, recorded: CapacityBlockFacts | None = None, now: datetime | None = None) -> CapacityBlockFacts:
    """One reservation by id; UserError when it does not exist in this region.

    ``recorded`` (the block as a stack recorded it) and ``now``: a reservation EC2 no longer returns (an empty list or
    ``InvalidCapacityReservationId.NotFound``) whose recorded end has passed is that record, state ``expired``
    (:func:`kimi_k3.capacity.lookup.ended_from_record`), not an error.
    """
    from botocore.exceptions import ClientError

    validate_reservation_id(reservation_id)
    region = ec2.meta.region_name
    with aws_errors(region):
        try:
            items = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])["CapacityReservations"]
        except ClientError as exc:
            if recorded is None or exc.response.get("Error", {}).get("Code") != "InvalidCapacityReservationId.NotFound":
                raise
            items = []
    if not items:
        ended = ended_from_record(reservation_id, recorded, now) if now is not None else None
        if ended is not None:
            return ended
        raise UserError(f"capacity reservation {reservation_id} not found in {region}: check the id, the region and the account")
    return CapacityBlockFacts.from_ec2(items[0])


def list_capacity_blocks(ec2: Any) -> tuple[CapacityBlockFacts, ...]:
    """Every Capacity Block reservation of the account in the client's region, by start date.

    DescribeCapacityReservations documents no reservation-type filter, so all
    reservations are read (every page) and those of type ``capacity-block`` kept.
    """
    found: list[CapacityBlockFacts] = []
    with aws_errors(ec2.meta.region_name):
        for page in ec2.get_paginator("describe_capacity_reservations").paginate():
            found.extend(
                CapacityBlockFacts.from_ec2(r)
                for r in page.get("CapacityReservations", [])
                if r.get("ReservationType") == "capacity-block"
            )
    epoch = datetime.min.replace(tzinfo=UTC)
    return tuple(sorted(found, key=lambda r: (r.start or epoch, r.reservation_id)))


def supports_block_status(ec2: Any) -> bool:
    """Whether the installed botocore model has DescribeCapacityBlockStatus."""
    return "DescribeCapacityBlockStatus" in ec2.meta.service_model.operation_names


def block_statuses(ec2: Any, block_ids: Sequence[str]) -> dict[str, BlockStatus]:
    """Block health by Capacity Block id, or ``{}`` when the call is unavailable.

    This is an optional enrichment: if the botocore model lacks the operation, or
    AWS refuses it (permissions, block too old), the status is simply left out.
    """
    from botocore.exceptions import ClientError

    ids = sorted({b for b in block_ids if b})
    if not ids or not supports_block_status(ec2):
        return {}
    result: dict[str, BlockStatus] = {}
    try:
        for page in ec2.get_paginator("describe_capacity_block_status").paginate(CapacityBlockIds=ids):
            for s in page.get("CapacityBlockStatuses", []):
                result[s["CapacityBlockId"]] = BlockStatus(
                    capacity_block_id=s["CapacityBlockId"],
                    interconnect_status=s.get("InterconnectStatus", "unknown"),
                    total=int(s.get("TotalCapacity", 0)),
                    available=int(s.get("TotalAvailableCapacity", 0)),
                    unavailable=int(s.get("TotalUnavailableCapacity", 0)),
                )
    except ClientError:
        return {}
    return result


def reservation_status(ec2: Any, reservation_id: str | None = None) -> tuple[ReservationView, ...]:
    """Status of one reservation, or of all Capacity Block reservations in the region."""
    if reservation_id is not None:
        reservations: tuple[CapacityBlockFacts, ...] = (describe_reservation(ec2, reservation_id),)
    else:
        reservations = list_capacity_blocks(ec2)
    blocks = block_statuses(ec2, [r.capacity_block_id for r in reservations if r.capacity_block_id])
    return tuple(ReservationView(r, blocks.get(r.capacity_block_id or "")) for r in reservations)


__all__ = [
    "BlockStatus",
    "ReservationView",
    "block_statuses",
    "describe_reservation",
    "list_capacity_blocks",
    "reservation_status",
    "supports_block_status",
]
