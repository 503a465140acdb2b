"""Capacity Block extensions with boto3: offerings, purchase, history, and what they change.

Rules (EC2 User Guide, "Extend Capacity Blocks", capacity-blocks-extend): a block can be
extended while it is ``active`` or ``scheduled``, from 56 days until 1 hour before its end;
extensions last 1-14 days in 1-day steps, then 7-day steps (the durations a block can be
bought for, :func:`kimi_k3.capacity.offerings.valid_duration_days`); the reservation keeps its
``cr-`` id and only its end moves; the extension's payment can stay ``payment-pending`` for
up to 12 hours and fails after that; an extension is never guaranteed (offerings may be
empty). Every rule is a pure function taking ``now``; AWS calls take the client and turn
failures into one-line :class:`~kimi_k3.errors.UserError` via
:func:`kimi_k3.capacity.aws.aws_errors`.

Unverified (no AWS account here): whether EKS moves its own scheduled action "Amazon EKS
Node Group Capacity Scaledown Before Reservation End" (end - 40 min) when the block is
extended. :func:`check_scaledown_action` reads the node group's ASG at run time and says
whether the action still matches the block's (new) end.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from kimi_k3.capacity.assessment import FAIL, OK, WARN, Finding
from kimi_k3.capacity.aws import aws_errors, validate_reservation_id
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.capacity.offerings import valid_duration_days
from kimi_k3.capacity.reserved import BoughtExtension, ZonedOffer, cheapest_first, offering_by_id, paged_records
from kimi_k3.capacity.scaling import EKS_SCALEDOWN_BEFORE_END
from kimi_k3.core.clock import utc
from kimi_k3.errors import UserError

EXTENDABLE_STATES = ("active", "scheduled")
"""Reservation states in which a block can be extended."""

EARLIEST_BEFORE_END = timedelta(days=56)
"""Extensions open this long before the block's end."""

LATEST_BEFORE_END = timedelta(hours=1)
"""Extensions close this long before the block's end."""

PAYMENT_PENDING_LIMIT = timedelta(hours=12)
"""An extension whose payment is not processed within this time fails."""

EKS_SCALEDOWN_ACTION = "Amazon EKS Node Group Capacity Scaledown Before Reservation End"
"""Name of the scheduled action EKS puts on a Capacity Block node group's ASG."""


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else utc(moment).strftime("%Y-%m-%d %H:%M UTC")


# --------------------------------------------------------------------------- rules (pure)


def validate_days(days: int) -> int:
    """Return ``days`` if it is an accepted extension length, else raise UserError naming ``--days``."""
    if days not in valid_duration_days():
        raise UserError(f"--days {days} is not accepted; extensions last 1-14 days, or 21-182 days in multiples of 7")
    return days


def validate_extension_offering_id(value: str) -> str:
    """Return ``value`` if it looks like an extension offering id (one token), else raise UserError."""
    if not value or any(c.isspace() for c in value) or not value.isascii() or len(value) > 64:
        raise UserError(f"{value!r} is not a Capacity Block extension offering id: copy it from `kimi-k3 capacity extend-offerings`")
    return value


def check_extendable(reservation: CapacityBlockFacts, now: datetime) -> None:
    """Raise UserError unless ``reservation`` can be extended at ``now`` (state, type, window)."""
    rid = reservation.reservation_id
    if reservation.reservation_type != "capacity-block":
        raise UserError(f"{rid} is a {reservation.reservation_type} reservation, not a Capacity Block: only Capacity Blocks can be extended")
    if reservation.state not in EXTENDABLE_STATES:
        raise UserError(f"{rid} is {reservation.state}; only active or scheduled Capacity Blocks can be extended")
    if reservation.end is None:
        raise UserError(f"{rid} has no end date; a Capacity Block always has one")
    end, now = utc(reservation.end), utc(now)
    if end - now > EARLIEST_BEFORE_END:
        raise UserError(
            f"{rid} ends {_when(end)}: extensions open 56 days before the end, on {_when(end - EARLIEST_BEFORE_END)}"
        )
    if end - now < LATEST_BEFORE_END:
        raise UserError(f"{rid} ends {_when(end)}: extensions close 1 hour before the end ({_when(end - LATEST_BEFORE_END)})")


# --------------------------------------------------------------------------- API shapes

_EXTENSION_KEYS = {
    "offering_id": "CapacityBlockExtensionOfferingId",
    "duration_hours": "CapacityBlockExtensionDurationHours",
}
"""API members of the fields an extension offering and a bought extension share, where they are not the name in CamelCase."""

_EXTENSION_WINDOW = {"start": "CapacityBlockExtensionStartDate", "end": "CapacityBlockExtensionEndDate"}
"""API members of an extension's window."""


@dataclass(frozen=True, kw_only=True)
class ExtensionOffering(ZonedOffer):
    """One extension that can be bought for a block (a ``CapacityBlockExtensionOfferings`` entry)."""

    instance_type: str
    """Instance type of the block (``InstanceType``)."""
    instance_count: int
    """Instances the extension covers (``InstanceCount``)."""
    extension_start: datetime
    """When the extension starts (the block's current end, ``CapacityBlockExtensionStartDate``)."""
    extension_end: datetime
    """The block's end once extended (``CapacityBlockExtensionEndDate``)."""

    API_KEYS: ClassVar[Mapping[str, str]] = {**_EXTENSION_KEYS, **{f"extension_{k}": v for k, v in _EXTENSION_WINDOW.items()}}


@dataclass(frozen=True, kw_only=True)
class Extension(BoughtExtension):
    """An extension bought for a block (a ``CapacityBlockExtensions`` entry, from a purchase or the history);
    its status is ``payment-pending``, ``payment-failed`` or ``payment-succeeded``."""

    reservation_id: str
    """The extended reservation (``CapacityReservationId``); it keeps its ``cr-`` id."""
    purchased: datetime | None
    """When it was bought (``CapacityBlockExtensionPurchaseDate``, UTC); None when not reported."""
    duration_hours: int
    """Length of the extension in hours (``CapacityBlockExtensionDurationHours``)."""

    API_KEYS: ClassVar[Mapping[str, str]] = {
        **_EXTENSION_KEYS, **_EXTENSION_WINDOW, "reservation_id": "CapacityReservationId", "purchased": "CapacityBlockExtensionPurchaseDate",
    }

    @classmethod
    def api_values(cls, item: Mapping[str, Any]) -> dict[str, Any]:
        """The offering id and the status (``unknown`` when not reported)."""
        return {**super().api_values(item), "status": item.get("CapacityBlockExtensionStatus", "unknown")}


# --------------------------------------------------------------------------- AWS calls


def find_extension_offerings(ec2: Any, reservation_id: str, days: int) -> tuple[ExtensionOffering, ...]:
    """Every extension offering of ``days`` for the block (all pages), cheapest first."""
    validate_reservation_id(reservation_id)
    validate_days(days)
    with aws_errors(ec2.meta.region_name):
        found = paged_records(ec2, "describe_capacity_block_extension_offerings", "CapacityBlockExtensionOfferings", ExtensionOffering.from_api,
                              CapacityReservationId=reservation_id, CapacityBlockExtensionDurationHours=days * 24)
    return cheapest_first(found, lambda o: o.extension_end)


def find_extension_offering(ec2: Any, reservation_id: str, days: int, offering_id: str) -> ExtensionOffering:
    """The offering ``offering_id`` among the current ones, or UserError when it is gone."""
    validate_extension_offering_id(offering_id)
    return offering_by_id(
        find_extension_offerings(ec2, reservation_id, days),
        offering_id,
        f"extension offering {offering_id} is not among the current {days}-day offerings for {reservation_id}: "
        f"extensions are not guaranteed and go first come, first served; run `kimi-k3 capacity extend-offerings` again",
    )


def purchase_extension(ec2: Any, reservation_id: str, offering_id: str) -> Extension:
    """Buy an extension (irreversible). The reservation keeps its id; its end moves once paid."""
    validate_reservation_id(reservation_id)
    validate_extension_offering_id(offering_id)
    with aws_errors(ec2.meta.region_name):
        response = ec2.purchase_capacity_block_extension(
            CapacityBlockExtensionOfferingId=offering_id, CapacityReservationId=reservation_id
        )
    items = response.get("CapacityBlockExtensions", [])
    if not items:
        raise UserError(f"AWS returned no extension for {reservation_id}: check `kimi-k3 capacity status {reservation_id}`")
    return Extension.from_api(items[0])


def extension_history(ec2: Any, reservation_id: str) -> tuple[Extension, ...]:
    """The block's extensions (all pages), most recently purchased first."""
    validate_reservation_id(reservation_id)
    with aws_errors(ec2.meta.region_name):
        found = paged_records(ec2, "describe_capacity_block_extension_history", "CapacityBlockExtensions", Extension.from_api,
                              CapacityReservationIds=[reservation_id])
    epoch = datetime.min.replace(tzinfo=UTC)
    return tuple(sorted(found, key=lambda e: (e.purchased or epoch, e.offering_id), reverse=True))


# --------------------------------------------------------------------------- status for preflight / status


def extension_status(history: Iterable[Extension], now: datetime) -> Finding | None:
    """One preflight/status line about the newest extension, or None when the block was never extended.

    ``payment-pending`` is a WARN (the end has not moved yet; EC2 gives up after 12 hours),
    ``payment-failed`` a FAIL (the block still ends at its old end), ``payment-succeeded``
    an OK naming the new end.
    """
    items = list(history)
    if not items:
        return None
    newest = max(items, key=lambda e: e.purchased or datetime.min.replace(tzinfo=UTC))
    days = f"{newest.duration_hours // 24}-day" if newest.duration_hours % 24 == 0 else f"{newest.duration_hours}-hour"
    if newest.status == "payment-pending":
        deadline = (newest.purchased + PAYMENT_PENDING_LIMIT) if newest.purchased else None
        left = ""
        if deadline is not None:
            remaining = deadline - utc(now)
            left = f" (fails if not paid by {_when(deadline)}, {max(remaining, timedelta(0)) // timedelta(minutes=1)} min from now)"
        return Finding(WARN, "extension", f"{days} extension to {_when(newest.end)} is payment-pending{left}; the block still ends at {_when(newest.start)}.")
    if newest.status == "payment-failed":
        return Finding(FAIL, "extension", f"{days} extension to {_when(newest.end)} failed (payment-failed); the block still ends at {_when(newest.start)}.")
    if newest.status == "payment-succeeded":
        return Finding(OK, "extension", f"extended by a {days} extension; the block now ends at {_when(newest.end)}.")
    return Finding(WARN, "extension", f"{days} extension to {_when(newest.end)} is {newest.status}.")


def read_extension_status(ec2: Any, reservation_id: str, now: datetime) -> Finding | None:
    """:func:`extension_status` of the block's history; a WARN line instead of an error when the history cannot be read."""
    try:
        history = extension_history(ec2, reservation_id)
    except UserError as err:
        return Finding(WARN, "extension", f"could not read the extension history: {err}")
    return extension_status(history, now)


# --------------------------------------------------------------------------- EKS scale-down action


def check_scaledown_action(autoscaling: Any, asg_name: str, block_end: datetime, now: datetime) -> Finding:
    """Is EKS's scale-down action on the node group's ASG still at ``block_end`` - 40 min?

    After an extension EKS is expected to move it (unverified); if it did not, the nodes
    are scaled to 0 at the old end although the block runs on. FAIL when the action runs
    before the new end - 40 min, WARN when it is missing while the block has not ended.
    """
    from botocore.exceptions import ClientError

    expected = utc(block_end) - EKS_SCALEDOWN_BEFORE_END
    region = autoscaling.meta.region_name
    actions: list[Mapping[str, Any]] = []
    with aws_errors(region):
        try:
            for page in autoscaling.get_paginator("describe_scheduled_actions").paginate(AutoScalingGroupName=asg_name):
                actions.extend(page.get("ScheduledUpdateGroupActions", []))
        except ClientError as exc:
            # translate_aws_error names the service ec2 for every denial; this call is Auto Scaling's.
            if exc.response.get("Error", {}).get("Code") in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation"):
                raise UserError(
                    f"AWS denied autoscaling:DescribeScheduledActions in {region}: grant that action to your IAM identity"
                ) from None
            raise
    scaledown = [a for a in actions if a.get("ScheduledActionName") == EKS_SCALEDOWN_ACTION]
    if not scaledown:
        if utc(now) >= expected:
            return Finding(OK, "scale-down", f"the EKS scale-down time ({_when(expected)}) has passed; no action left on {asg_name}.")
        return Finding(WARN, "scale-down", f"no '{EKS_SCALEDOWN_ACTION}' action on {asg_name}; expected at {_when(expected)}.")
    times = sorted(utc(when) for a in scaledown if (when := a.get("StartTime") or a.get("Time")))
    if not times:
        return Finding(WARN, "scale-down", f"the EKS scale-down action on {asg_name} has no start time.")
    first = times[0]
    if abs(first - expected) <= timedelta(minutes=1):
        return Finding(OK, "scale-down", f"EKS scales {asg_name} to 0 at {_when(first)} (block end - 40 min).")
    if first < expected:
        return Finding(
            FAIL,
            "scale-down",
            f"EKS scales {asg_name} to 0 at {_when(first)}, before the block's end - 40 min ({_when(expected)}): "
            "the action was not moved after the extension and the GPU nodes will stop early; "
            "after it runs, set the node group's desired size back to the reserved count.",
        )
    return Finding(WARN, "scale-down", f"EKS scales {asg_name} to 0 at {_when(first)}, after the block's end - 40 min ({_when(expected)}).")
