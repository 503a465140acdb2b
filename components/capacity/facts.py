"""The one record of a Capacity Block, whichever API read it.

A Capacity Block is a targeted Capacity Reservation (``cr-`` + 17 hex) of reservation type
``capacity-block``: one instance type, one AZ, a fixed window (EC2 User Guide,
"Capacity Blocks for ML"). The Pulumi path (``aws.ec2.get_capacity_block_reservation``, at
preview time) and the boto3 path (``DescribeCapacityReservations``, the ``kimi-k3 capacity``
commands) both map into :class:`CapacityBlockFacts` (:meth:`CapacityBlockFacts.from_invoke`,
:meth:`CapacityBlockFacts.from_ec2`), so one assessment
(:func:`kimi_k3.capacity.assessment.assess`) judges both the same way. Pure Python.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kimi_k3.core import catalog
from kimi_k3.core.args_check import checked_args
from kimi_k3.core.clock import naive_problem, utc
from kimi_k3.core.suggest import nearest
from kimi_k3.errors import ComponentInputError, Problem, UserError


def parse_aws_time(value: str) -> datetime:
    """Parse the RFC 3339 timestamps the provider returns (``2026-12-01T11:30:00Z``) as UTC."""
    return utc(datetime.fromisoformat(value.replace("Z", "+00:00")))


_INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\d[a-z0-9-]*\.(\d*x?large|metal[-\w]*|medium|small|micro|nano)$")
"""An EC2 instance type's shape (``p6-b300.48xlarge``, ``m7i.xlarge``): family with its generation, a dot, a size."""


@checked_args
@dataclass(frozen=True)
class CapacityBlockFacts:
    """What the library knows about one Capacity Block reservation."""

    reservation_id: str
    """``cr-`` + 17 hex digits."""
    availability_zone: str
    """The one AZ of the block (``us-east-1a``)."""
    instance_type: str
    """The instance type it reserves (``p6-b300.48xlarge``)."""
    instance_count: int
    """Instances reserved (``TotalInstanceCount``)."""
    state: str
    """``scheduled``, ``active``, ``expired``, ``payment-pending`` … (EC2 ``CapacityReservationState``)."""
    start: datetime | None
    """Start of the window (UTC); a Capacity Block always has one."""
    end: datetime | None
    """End of the window (UTC); a Capacity Block always has one."""
    availability_zone_id: str = ""
    """AZ id (``use1-az4``), the same physical zone in every account."""
    instance_platform: str = ""
    """``Linux/UNIX`` for a block EKS AL2023 nodes can use; empty when not reported."""
    reservation_type: str = "capacity-block"
    """``capacity-block`` (anything else is an On-Demand Capacity Reservation)."""
    available_instances: int = 0
    """Instances of the block not running now (``AvailableInstanceCount``)."""
    capacity_block_id: str | None = None
    """Id of the block behind the reservation (``describe_capacity_block_status``), when reported."""
    tags: tuple[tuple[str, str], ...] = ()
    """Tags of the reservation, as (key, value) pairs."""

    def __post_init__(self) -> None:
        """Refuse, as the record is built, what no EC2 answer holds (the field types are checked before, at the door):
        a window in naive local time, a count below 0, a string that is not an instance type."""
        problems = []
        for field in ("start", "end"):
            moment = getattr(self, field)
            naive = naive_problem(field, moment) if moment is not None else None
            if naive:
                problems.append(Problem(field, naive))
        for field in ("instance_count", "available_instances"):
            if getattr(self, field) < 0:
                problems.append(Problem(field, f"{field} {getattr(self, field)} is not accepted; expected 0 or more instances"))
        if not _INSTANCE_TYPE.fullmatch(self.instance_type) and self.instance_type:
            near = nearest(self.instance_type, catalog.INSTANCE_TYPES)
            hint = f"; did you mean {near}?" if near else ""
            problems.append(Problem("instance_type", f"instance_type {self.instance_type!r} is not accepted; expected an EC2 instance type such as p6-b300.48xlarge{hint}"))
        if problems:
            raise ComponentInputError("CapacityBlockFacts", None, problems)

    @classmethod
    def from_ec2(cls, item: Mapping[str, Any]) -> CapacityBlockFacts:
        """From one boto3 ``CapacityReservations`` entry (or a purchase's ``CapacityReservation``)."""
        start, end = item.get("StartDate"), item.get("EndDate")
        return cls(
            reservation_id=item["CapacityReservationId"],
            availability_zone=item.get("AvailabilityZone", ""),
            instance_type=item.get("InstanceType", ""),
            instance_count=int(item.get("TotalInstanceCount", 0)),
            state=item.get("State", "unknown"),
            start=utc(start) if start else None,
            end=utc(end) if end else None,
            availability_zone_id=item.get("AvailabilityZoneId", ""),
            instance_platform=item.get("InstancePlatform", ""),
            reservation_type=item.get("ReservationType", "default"),
            available_instances=int(item.get("AvailableInstanceCount", 0)),
            capacity_block_id=item.get("CapacityBlockId"),
            tags=tuple((t["Key"], t.get("Value", "")) for t in item.get("Tags", [])),
        )

    @classmethod
    def from_invoke(cls, result: Any) -> CapacityBlockFacts:
        """From the result of ``aws.ec2.get_capacity_block_reservation`` (pulumi-aws 7.51)."""
        return cls(
            reservation_id=result.id,
            availability_zone=result.availability_zone,
            instance_type=result.instance_type,
            instance_count=int(result.instance_count),
            state=result.state,
            start=parse_aws_time(result.start_date) if result.start_date else None,
            end=parse_aws_time(result.end_date) if result.end_date else None,
            availability_zone_id=result.availability_zone_id or "",
            instance_platform=result.instance_platform or "",
            reservation_type=result.reservation_type or "capacity-block",
            available_instances=int(result.available_instance_count or 0),
            capacity_block_id=result.capacity_block_id or None,
            tags=tuple(sorted((result.tags or {}).items())),
        )

    @property
    def active(self) -> bool:
        """True while the block's instances can run."""
        return self.state == "active"

    @property
    def total_instances(self) -> int:
        """The instances reserved, by boto3's name (``TotalInstanceCount``): the same as :attr:`instance_count`."""
        return self.instance_count

    @property
    def in_use(self) -> int:
        """Instances running in the reservation (reserved minus available)."""
        return self.instance_count - self.available_instances

    def window(self) -> tuple[datetime, datetime]:
        """``(start, end)``; :class:`UserError` for a reservation without both (which no Capacity Block is)."""
        if self.start is None or self.end is None:
            raise UserError(f"{self.reservation_id} has no start or end date, which a Capacity Block always has")
        return self.start, self.end

    def time_to_start(self, now: datetime) -> timedelta | None:
        """Time until the window opens (negative once it has started)."""
        return None if self.start is None else self.start - utc(now)

    def time_to_end(self, now: datetime) -> timedelta | None:
        """Time until the window closes (negative once it has ended)."""
        return None if self.end is None else self.end - utc(now)


GONE_STATE = "expired"
"""The state a block no longer returned by EC2 is given once its recorded end has passed (EC2 ``CapacityReservationState``)."""


def ended_from_record(reservation_id: str, recorded: CapacityBlockFacts | None, now: datetime) -> CapacityBlockFacts | None:
    """The block as recorded, state :data:`GONE_STATE`, when EC2 no longer returns ``reservation_id`` and the record's end has
    passed at ``now``; ``None`` when there is no such record (the look-up failure stays an error)."""
    if recorded is None or recorded.reservation_id != reservation_id or recorded.end is None or utc(recorded.end) > utc(now):
        return None
    return dataclasses.replace(recorded, state=GONE_STATE, available_instances=0)


def gone_line(block: CapacityBlockFacts) -> str:
    """The one line that says a block is treated as ended because EC2 no longer returns it."""
    end = f"{utc(block.end):%Y-%m-%d %H:%M} UTC" if block.end else "?"
    return (
        f"Capacity Block {block.reservation_id} is no longer returned by EC2 and its recorded end ({end}) has passed: treated "
        "as ended (GPU node group kept at 0)"
    )


__all__ = ["GONE_STATE", "CapacityBlockFacts", "ended_from_record", "gone_line", "parse_aws_time"]
