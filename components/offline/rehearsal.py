"""The ``--reservation-*`` flags of ``kimi-k3 plan``: the Capacity Block the offline engine answers with.

The offline engine cannot read AWS, so ``aws.ec2.get_capacity_block_reservation``
answers with a fixture (:class:`kimi_k3.offline.ReservationFixture`). These flags
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
from typing import ClassVar

from kimi_k3.capacity.offerings import MAX_INSTANCES
from kimi_k3.core.formats import AVAILABILITY_ZONE
from kimi_k3.errors import UserError
from kimi_k3.offline import ReservationFixture, next_block_start

STATES = ("scheduled", "active", "payment-pending", "payment-failed", "expired", "cancelled")
"""States a rehearsed block can be in (``--reservation-state``)."""

BLOCK_DURATION = timedelta(days=7)
"""Length of a rehearsed block."""


def last_block_boundary(now: datetime) -> datetime:
    """The last 11:30 UTC strictly before ``now``."""
    boundary = now.replace(hour=11, minute=30, second=0, microsecond=0)
    return boundary if boundary < now else boundary - timedelta(days=1)


@dataclass(frozen=True)
class RehearsedWindow:
    """The flags of any rehearsed reserved window (a Capacity Block, a training plan): ``FLAG-state``, ``FLAG-az``,
    ``FLAG-count`` and ``FLAG-start``, and where its window lies at ``now``. ``None`` fields take the stack's defaults.

    A subclass names its flags, states and length in the class variables and sets the default state.
    """

    FLAG: ClassVar[str]
    """Prefix of the flags, e.g. ``--reservation``."""
    WHAT: ClassVar[str]
    """What the window is called in messages (``block``, ``plan``)."""
    STATES: ClassVar[tuple[str, ...]]
    """States the window can be rehearsed in (``FLAG-state``)."""
    ENDED_STATES: ClassVar[tuple[str, ...]]
    """States whose window ended at the last 11:30 UTC before ``now``."""
    RUNNING_STATE: ClassVar[str]
    """The state whose window started at the last 11:30 UTC before ``now``."""
    DURATION: ClassVar[timedelta]
    """Length of the rehearsed window."""

    state: str
    """``FLAG-state``: one of :attr:`STATES`."""
    availability_zone: str | None = None
    """``FLAG-az``: an AZ of the stack's region, where the capacity is (default: the stack's first AZ)."""
    instance_count: int | None = None
    """``FLAG-count``: instances reserved (default: what the stack needs)."""
    start: datetime | None = None
    """``FLAG-start`` (default: ended at, started at, or starting after the 11:30 UTC boundaries; see :meth:`window_start`)."""

    def refuse_unknown_state(self) -> None:
        """UserError naming ``FLAG-state`` when the state is not one of :attr:`STATES`."""
        if self.state not in self.STATES:
            raise UserError(f"{self.FLAG}-state {self.state!r} is not accepted; accepted: {', '.join(self.STATES)}")

    def refuse_unended_start(self, now: datetime) -> None:
        """UserError naming ``FLAG-start`` when a window rehearsed as ended would not have ended by ``now``."""
        start, duration = self.start, self.DURATION
        if self.state in self.ENDED_STATES and start is not None and start + duration >= now:
            raise UserError(
                f"{self.FLAG}-start {start:%Y-%m-%dT%H:%M:%SZ} is not accepted with {self.FLAG}-state {self.state}: the {self.WHAT} would end "
                f"at {start + duration:%Y-%m-%d %H:%M} UTC, not before now ({now:%Y-%m-%d %H:%M} UTC); "
                f"give a start more than {duration.days} days before now, or leave it out"
            )

    def window_start(self, now: datetime) -> datetime:
        """Start of the rehearsed window at ``now``: ``start`` when given; else ended at, started at, or starting after the 11:30 UTC boundaries."""
        if self.start is not None:
            return self.start
        if self.state in self.ENDED_STATES:
            return last_block_boundary(now) - self.DURATION
        if self.state == self.RUNNING_STATE:
            return last_block_boundary(now)
        return next_block_start(now)


@dataclass(frozen=True)
class Rehearsal(RehearsedWindow):
    """How the rehearsed Capacity Block looks (the ``--reservation-*`` flags)."""

    FLAG = "--reservation"
    WHAT = "block"
    STATES = STATES
    ENDED_STATES = ("expired",)
    RUNNING_STATE = "active"
    DURATION = BLOCK_DURATION

    state: str = "scheduled"
    """``--reservation-state``: one of :data:`STATES`."""

    def check(self, region: str, now: datetime) -> None:
        """Refuse a flag the real block could not have (a flag-naming :class:`UserError`)."""
        self.refuse_unknown_state()
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
        self.refuse_unended_start(now)

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


__all__ = ["BLOCK_DURATION", "STATES", "Rehearsal", "RehearsedWindow", "last_block_boundary"]
