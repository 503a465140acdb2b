"""Finding and buying Capacity Blocks: durations, the offering search, the purchase.

A block is bought from an offering (``cb-`` + 17 hex) that starts at most 8 weeks ahead,
lasts 1-14 days in 1-day steps or up to 182 days in 7-day steps, and holds 1-64 instances
(EC2 User Guide, "Capacity Blocks for ML"; API reference, DescribeCapacityBlockOfferings).
A purchase cannot be undone. Every search is validated before AWS is called.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from kimi_k3.capacity.assessment import INSTANCE_PLATFORM
from kimi_k3.capacity.aws import aws_errors, validate_offering_id
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.capacity.reserved import PROJECT_TAG, CapacitySearch, ZonedOffer, cheapest_first, checked_start_after, offering_by_id, paged_records
from kimi_k3.core import catalog
from kimi_k3.core.clock import utc as _utc
from kimi_k3.core.formats import INSTANCE_TYPE
from kimi_k3.errors import UserError

MAX_START_AHEAD = timedelta(weeks=8)
"""Capacity Blocks can start at most this far ahead."""

MAX_INSTANCES = 64
"""Instances per Capacity Block."""


def valid_duration_days() -> tuple[int, ...]:
    """Durations AWS accepts, in days: 1..14, then multiples of 7 up to 182."""
    return tuple(range(1, 15)) + tuple(range(21, 183, 7))


def parse_when(text: str, flag: str) -> datetime:
    """Parse an ISO 8601 date or date-time (naive = UTC) given for ``flag``."""
    try:
        return _utc(datetime.fromisoformat(text))
    except ValueError:
        raise UserError(f"{flag} {text!r} is not an ISO 8601 date or time such as 2026-06-10 or 2026-06-10T11:30Z") from None


@dataclass(frozen=True)
class OfferingQuery(CapacitySearch):
    """A validated search for Capacity Block offerings (``describe_capacity_block_offerings``).

    AWS filters on the earliest start and the latest *end*; a ``start_before`` bound is sent
    as an end bound one day past start_before + duration (blocks may run slightly longer than
    asked) and enforced exactly by :func:`find_offerings`.
    """

    start_before: datetime | None = None
    """Latest start (UTC)."""

    REQUEST_KEYS: ClassVar[Mapping[str, str]] = {
        "instance_type": "InstanceType", "count": "InstanceCount", "duration_hours": "CapacityDurationHours",
        "start_after": "StartDateRange", "end_range": "EndDateRange",
    }

    def end_bound(self) -> Mapping[str, datetime | None]:
        """``EndDateRange``: one day past start_before + duration."""
        return {"end_range": self.start_before + timedelta(days=self.days + 1) if self.start_before is not None else None}


def build_offering_query(instance_type: str, count: int, days: int, now: datetime, start_after: datetime | None = None,
                         start_before: datetime | None = None) -> OfferingQuery:
    """Validate a search (duration, count, start window within 8 weeks) before calling AWS."""
    if not INSTANCE_TYPE.match(instance_type or ""):
        raise UserError(f"--instance-type {instance_type!r} is not an EC2 instance type such as p6-b300.48xlarge")
    if instance_type not in catalog.INSTANCE_TYPES:  # checked before asking AWS, as the stack's gpuInstanceType is
        near = difflib.get_close_matches(instance_type, list(catalog.INSTANCE_TYPES), n=1)
        hint = f"did you mean {near[0]}? " if near else ""
        raise UserError(
            f"--instance-type {instance_type!r} is not a type kimi-k3 can serve Kimi K3 on; {hint}accepted: {', '.join(catalog.INSTANCE_TYPES)} "
            "(kimi_k3.core.catalog.INSTANCE_TYPES)"
        )
    if days not in valid_duration_days():
        raise UserError(f"--days {days} is not accepted; Capacity Blocks last 1-14 days, or 21-182 days in multiples of 7")
    if not 1 <= count <= MAX_INSTANCES:
        raise UserError(f"--count {count} is not accepted; a Capacity Block holds 1 to {MAX_INSTANCES} instances")
    now = _utc(now)
    latest = now + MAX_START_AHEAD
    start_after = checked_start_after(start_after, now)
    if start_after is not None and start_after > latest:
        raise UserError(f"--start-after must be within 8 weeks (before {latest:%Y-%m-%d %H:%M} UTC)")
    if start_before is not None:
        start_before = _utc(start_before)
        if start_before <= now:
            raise UserError(f"--start-before {start_before:%Y-%m-%d %H:%M} UTC is not in the future")
        if start_before > latest:
            raise UserError(f"--start-before must be within 8 weeks (before {latest:%Y-%m-%d %H:%M} UTC)")
    if start_after is not None and start_before is not None and start_before <= start_after:
        raise UserError("--start-before must be later than --start-after")
    return OfferingQuery(instance_type, count, days, start_after, start_before)


@dataclass(frozen=True, kw_only=True)
class Offering(ZonedOffer):
    """One Capacity Block offering that can be bought (a ``CapacityBlockOfferings`` entry)."""

    instance_type: str
    """Instance type the block would reserve (``InstanceType``)."""
    instance_count: int
    """Instances the block would reserve (``InstanceCount``)."""
    start: datetime
    """Start of the block's window (``StartDate``, UTC)."""
    end: datetime
    """End of the block's window (``EndDate``, UTC)."""

    API_KEYS: ClassVar[Mapping[str, str]] = {
        "offering_id": "CapacityBlockOfferingId", "start": "StartDate", "end": "EndDate", "duration_hours": "CapacityBlockDurationHours",
    }


def find_offerings(ec2: Any, query: OfferingQuery) -> tuple[Offering, ...]:
    """All offerings matching ``query`` (every page), cheapest first, then earliest start."""
    with aws_errors(ec2.meta.region_name):
        found = paged_records(ec2, "describe_capacity_block_offerings", "CapacityBlockOfferings", Offering.from_api, **query.request())
    if query.start_before is not None:
        found = [o for o in found if o.start <= query.start_before]
    if query.start_after is not None:
        found = [o for o in found if o.start >= query.start_after]
    return cheapest_first(found, lambda o: o.start)


def find_offering(ec2: Any, query: OfferingQuery, offering_id: str) -> Offering:
    """The offering ``offering_id`` among those ``query`` returns, or UserError if it is gone."""
    validate_offering_id(offering_id)
    return offering_by_id(
        find_offerings(ec2, query),
        offering_id,
        f"offering {offering_id} is not among the current offerings for {query.count} x "
        f"{query.instance_type}, {query.days} days in {ec2.meta.region_name}: offerings go first come, "
        "first served; run `kimi-k3 capacity offerings` with the same flags again",
    )


def purchase_block(ec2: Any, offering_id: str) -> CapacityBlockFacts:
    """Buy the offering (irreversible), tagging the reservation Project=kimi-k3."""
    validate_offering_id(offering_id)
    with aws_errors(ec2.meta.region_name):
        response = ec2.purchase_capacity_block(
            CapacityBlockOfferingId=offering_id,
            InstancePlatform=INSTANCE_PLATFORM,
            TagSpecifications=[{"ResourceType": "capacity-reservation", "Tags": [dict(PROJECT_TAG)]}],
        )
    return CapacityBlockFacts.from_ec2(response["CapacityReservation"])


__all__ = [
    "MAX_INSTANCES",
    "MAX_START_AHEAD",
    "PROJECT_TAG",
    "Offering",
    "OfferingQuery",
    "build_offering_query",
    "find_offering",
    "find_offerings",
    "parse_when",
    "purchase_block",
    "valid_duration_days",
]
