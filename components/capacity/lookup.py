"""The Capacity Block read through the AWS provider at preview time (a plain invoke: nothing declared).

``aws.ec2.get_capacity_block_reservation(id=…)`` returns the block's AZ, window, instance type,
count and state; :func:`lookup_capacity_block` maps it into the one record
(:class:`~components.capacity.facts.CapacityBlockFacts`). A block that cannot be read raises
:class:`CapacityBlockNotFound`, phrased neutrally: the caller adds which input names the id
(the platform its config key, the node group its ``reservation_id`` arg).
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.capacity.facts import CapacityBlockFacts
from components.errors import UserError


class CapacityBlockNotFound(UserError):
    """The reservation id is not a Capacity Block this account can read in the provider's region."""

    def __init__(self, reservation_id: str, detail: str) -> None:
        self.reservation_id = reservation_id
        self.detail = detail
        super().__init__(f"Capacity Block {reservation_id} could not be read in this account/region ({detail})")


def lookup_capacity_block(reservation_id: str, opts: pulumi.InvokeOptions | None = None) -> CapacityBlockFacts:
    """Read the reservation through the AWS provider; :class:`CapacityBlockNotFound` when AWS does not know it."""
    try:
        result = aws.ec2.get_capacity_block_reservation(id=reservation_id, opts=opts)
    except Exception as err:  # the provider reports "not found" as a generic invoke error
        raise CapacityBlockNotFound(reservation_id, str(err)) from None
    return CapacityBlockFacts.from_invoke(result)


__all__ = ["CapacityBlockNotFound", "lookup_capacity_block"]
