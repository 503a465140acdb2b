"""The ``--reservation-*`` flags of ``kimi-k3 plan``: the Capacity Block the offline engine answers with.

The offline engine cannot read AWS, so ``aws.ec2.get_capacity_block_reservation``
answers with a fixture (:class:`components.offline.ReservationFixture`). These flags
shape it; each is checked here and a bad value is one line naming the flag, the
value and what is accepted. The window is placed relative to the run's ``now``:

* ``scheduled`` (default), ``payment-pending``, ``payment-failed``, ``cancelled``:
  starts at the next 11:30 UTC at least 12 hours after ``now`` (blocks start and end
  at 11:30 UTC, EC2 user guide "Capacity Blocks for ML");
* ``active``: started at the last 11:30 UTC before ``now``, so ``now`` is inside it;
* ``expired``: ended at the last 11:30 UTC before ``now``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from components.capacity.offerings import MAX_INSTANCES
from components.errors import UserError
from components.formats import AVAILABILITY_ZONE
from components.offline import ReservationFixture, next_block_start

STATES = ("scheduled", "active", "payment-pending", "payment-failed", "expired", "cancelled")
"""States a rehearsed block can be in (``--reservation-state``)."""

BLOCK_DURATION = timedelta(days=7)
"""Length of a rehearsed block."""


def last_block_boundary(now: datetime) -> datetime:
    """The last 11:30 UTC strictly before ``now``."""
    boundary = now.replace(hour=11, minute=30, second=0, microsecond=0)
    return boundary if boundary < now else boundary - timedelta(days=1)


def rehearsed_start(start: datetime | None, now: datetime, *, ended: bool, running: bool, duration: timedelta) -> datetime:
    """Start of a rehearsed window: ``start`` when given; else ended at, started at, or starting after the 11:30 UTC boundaries."""
    if start is not None:
        return start
    if ended:
        return last_block_boundary(now) - duration
    if running:
        return last_block_boundary(now)
    return next_block_start(now)


def refuse_unended_start(flag: str, state: str, what: str, start: datetime | None, duration: timedelta, now: datetime) -> None:
    """UserError naming ``FLAG-start`` when a window rehearsed as ended (``FLAG-state STATE``) would not have ended by ``now``."""
    if start is not None and start + duration >= now:
        raise UserError(
            f"{flag}-start {start:%Y-%m-%dT%H:%M:%SZ} is not accepted with {flag}-state {state}: the {what} would end "
            f"at {start + duration:%Y-%m-%d %H:%M} UTC, not before now ({now:%Y-%m-%d %H:%M} UTC); "
            f"give a start more than {duration.days} days before now, or leave it out"
        )


@dataclass(frozen=True)
class Rehearsal:
    """How the rehearsed Capacity Block looks; ``None`` fields take the stack's defaults."""

    state: str = "scheduled"
    """``--reservation-state``: one of :data:`STATES`."""
    availability_zone: str | None = None
    """``--reservation-az``: an AZ of the stack's region (default: the stack's first AZ)."""
    instance_count: int | None = None
    """``--reservation-count``: instances in the block (default: what the stack needs)."""
    start: datetime | None = None
    """``--reservation-start`` (default: see the module docstring)."""

    def check(self, region: str, now: datetime) -> None:
        """Refuse a flag the real block could not have (a flag-naming :class:`UserError`)."""
        if self.state not in STATES:
            raise UserError(f"--reservation-state {self.state!r} is not accepted; accepted: {', '.join(STATES)}")
        az = self.availability_zone
        if az is not None:
            if not AVAILABILITY_ZONE.fullmatch(az):
                raise UserError(f"--reservation-az {az!r} is not accepted; expected an availability zone of {region} (the stack's aws:region), e.g. {region}a")
            if az[:-1] != region:
                raise UserError(
                    f"--reservation-az {az!r} is not accepted: it is an AZ of {az[:-1]}, but the stack's aws:region is {region}; "
                    f"a Capacity Block is in the stack's region, e.g. {region}a"
                )
        count = self.instance_count
        if count is not None and not 1 <= count <= MAX_INSTANCES:
            raise UserError(f"--reservation-count {count} is not accepted; a Capacity Block holds 1 to {MAX_INSTANCES} instances")
        if self.state == "expired":
            refuse_unended_start("--reservation", self.state, "block", self.start, BLOCK_DURATION, now)

    def window_start(self, now: datetime) -> datetime:
        """Start of the rehearsed block at ``now``."""
        return rehearsed_start(self.start, now, ended=self.state == "expired", running=self.state == "active", duration=BLOCK_DURATION)

    def fixture(self, *, reservation_id: str, instance_type: str, instance_count: int, availability_zone: str, now: datetime) -> ReservationFixture:
        """The offline answer for one reservation id; the other arguments are the stack's defaults."""
        return ReservationFixture(
            id=reservation_id,
            availability_zone=self.availability_zone or availability_zone,
            instance_type=instance_type,
            instance_count=self.instance_count or instance_count,
            state=self.state,
            start=self.window_start(now),
            duration=BLOCK_DURATION,
        )


__all__ = ["BLOCK_DURATION", "STATES", "Rehearsal", "last_block_boundary", "refuse_unended_start", "rehearsed_start"]
