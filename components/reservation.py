"""The Capacity Block reservation, looked up at preview time and checked before use.

A Capacity Block that is expired, unpaid, of another instance type or in an AZ the
network does not cover makes EKS fail late with misleading errors ("instance types
do not exist"). :func:`lookup_capacity_block` reads the reservation through the
AWS provider (``aws.ec2.get_capacity_block_reservation``) and :func:`check_capacity_block`
turns each of those cases into one readable error before anything is declared.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import pulumi
import pulumi_aws as aws

from components.errors import UserError

USABLE_STATES = ("scheduled", "active")
"""States in which a node group can be (or become) backed by the block."""
PENDING_STATES = ("payment-pending", "pending", "assessing", "delayed")
"""States that may still turn usable: allowed with a warning."""


@dataclass(frozen=True)
class CapacityBlockFacts:
    """What the library needs to know about one Capacity Block reservation."""

    reservation_id: str
    availability_zone: str
    instance_type: str
    instance_count: int
    state: str
    start: datetime
    end: datetime

    @property
    def active(self) -> bool:
        """True while the block's instances can run."""
        return self.state == "active"

    def describe(self) -> str:
        """One line for summaries: id, state, window, AZ and count."""
        fmt = "%Y-%m-%d %H:%M UTC"
        return (
            f"{self.reservation_id} ({self.state}): {self.instance_count} x {self.instance_type} in {self.availability_zone}, "
            f"{self.start.strftime(fmt)} -> {self.end.strftime(fmt)}"
        )


def parse_aws_time(value: str) -> datetime:
    """Parse the RFC 3339 timestamps the provider returns (``2026-12-01T11:30:00Z``)."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def lookup_capacity_block(reservation_id: str, opts: pulumi.InvokeOptions | None = None) -> CapacityBlockFacts:
    """Read the reservation through the AWS provider (a plain invoke: no resource declared).

    Raises :class:`UserError` when AWS does not know the id.
    """
    try:
        result = aws.ec2.get_capacity_block_reservation(id=reservation_id, opts=opts)
    except Exception as err:  # the provider reports "not found" as a generic invoke error
        raise UserError(
            f"Capacity Block {reservation_id} could not be read in this account/region ({err}). "
            "Check kimi-k3:capacityReservationId and aws:region, or list your blocks with `kimi-k3 capacity status`."
        ) from None
    return CapacityBlockFacts(
        reservation_id=result.id,
        availability_zone=result.availability_zone,
        instance_type=result.instance_type,
        instance_count=int(result.instance_count),
        state=result.state,
        start=parse_aws_time(result.start_date),
        end=parse_aws_time(result.end_date),
    )


def check_capacity_block(
    facts: CapacityBlockFacts,
    *,
    instance_type: str,
    availability_zones: tuple[str, ...] | None = None,
    nodes_required: int = 1,
    now: datetime,
) -> list[str]:
    """Refuse a block that cannot back the node group; return warnings for the rest.

    ``availability_zones`` are the AZs the network covers (``None``: not checked);
    ``now`` is the caller's moment (the program's start; nothing here reads the clock).
    """
    rid = facts.reservation_id
    warnings: list[str] = []
    if facts.state not in USABLE_STATES + PENDING_STATES:
        reason = f"expired (ended {facts.end:%Y-%m-%d %H:%M} UTC)" if facts.state == "expired" else facts.state
        raise UserError(
            f"Capacity Block {rid} is {reason}; a node group needs a scheduled or active block. "
            "Buy a new one (`kimi-k3 capacity offerings`) and set kimi-k3:capacityReservationId."
        )
    if facts.state in PENDING_STATES:
        warnings.append(f"Capacity Block {rid} is {facts.state}; nodes can join only once it is scheduled and then active")
    if facts.instance_type != instance_type:
        raise UserError(
            f"Capacity Block {rid} reserves {facts.instance_type}, but kimi-k3:gpuInstanceType is {instance_type}; "
            f"set kimi-k3:gpuInstanceType to {facts.instance_type} or use a block of {instance_type}"
        )
    if availability_zones is not None and facts.availability_zone not in availability_zones:
        raise UserError(
            f"Capacity Block {rid} is in {facts.availability_zone}, which the network does not cover "
            f"(AZs: {', '.join(availability_zones)}); add {facts.availability_zone} to kimi-k3:availabilityZones "
            "(EKS would otherwise fail with 'instance types do not exist')"
        )
    if facts.instance_count < nodes_required:
        raise UserError(
            f"Capacity Block {rid} reserves {facts.instance_count} instance(s) but the stack needs {nodes_required} "
            "(kimi-k3:replicas x kimi-k3:pipelineParallelSize); lower kimi-k3:replicas or buy a larger block"
        )
    if facts.end <= now:
        raise UserError(
            f"Capacity Block {rid} ended at {facts.end:%Y-%m-%d %H:%M} UTC; "
            "buy a new one (`kimi-k3 capacity offerings`) and set kimi-k3:capacityReservationId"
        )
    return warnings
