"""How the stack's config names what the components call their inputs: the composition's half of a message.

A component phrases its errors in its own args (``instance_type``, ``reservation_id``); the
platform and the ``kimi-k3`` commands that work on a stack phrase the same findings in the
config keys the user sets, read from the seam (:data:`kimi_k3.stack.seam.SEAM`: the assessment's
inputs and the keys that feed them), so renaming a key cannot leave a message pointing at a stale one.
"""

from __future__ import annotations

from kimi_k3.capacity.assessment import Terms
from kimi_k3.stack import seam
from kimi_k3.stack.seam import full_key as key

CAPACITY_BLOCK = Terms(
    reservation=seam.config_key("CapacityTerms", "reservation"),
    instance_type=seam.config_key("CapacityTerms", "instance_type"),
    availability_zones=seam.config_key("CapacityTerms", "availability_zones"),
    nodes=seam.config_key("CapacityTerms", "nodes"),
    nodes_needed=f"the stack needs {{n}} ({seam.config_key('CapacityTerms', 'nodes')} x {key('pipelineParallelSize')})",
    assign="set {name} to {value}",
    new_block=f"buy a new one (`kimi-k3 capacity offerings`) and set {seam.config_key('CapacityTerms', 'reservation')}",
)
"""Capacity Block findings in the stack's terms (``Platform``, ``kimi-k3 capacity preflight``)."""

BLOCK_NOT_FOUND_HINT = (
    f"Check {key('capacityReservationId')} and aws:region, or list your blocks with `kimi-k3 capacity status`."
)
"""What to check when the stack's Capacity Block cannot be read."""


__all__ = ["BLOCK_NOT_FOUND_HINT", "CAPACITY_BLOCK", "key"]
