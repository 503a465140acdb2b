"""How the stack's config names what the components call their inputs: the composition's half of a message.

A component phrases its errors in its own args (``instance_type``, ``reservation_id``); the
platform and the ``kimi-k3`` commands that work on a stack phrase the same findings in the
config keys the user sets. Every key named here exists in :data:`kimi_k3.stack.config_keys.CONFIG_KEYS`
(checked at import), so renaming a key cannot leave a message pointing at a stale one.
"""

from __future__ import annotations

from kimi_k3.capacity.assessment import Terms
from kimi_k3.stack.config_keys import CONFIG_KEYS, PROJECT


def key(name: str) -> str:
    """The full config key ``kimi-k3:<name>`` of a key the schema defines."""
    if name not in CONFIG_KEYS:
        raise KeyError(f"{name} is not a key of kimi_k3.stack.config_keys")
    return f"{PROJECT}:{name}"


CAPACITY_BLOCK = Terms(
    reservation=key("capacityReservationId"),
    instance_type=key("gpuInstanceType"),
    availability_zones=key("availabilityZones"),
    nodes=key("replicas"),
    nodes_needed=f"the stack needs {{n}} ({key('replicas')} x {key('pipelineParallelSize')})",
    assign="set {name} to {value}",
    new_block=f"buy a new one (`kimi-k3 capacity offerings`) and set {key('capacityReservationId')}",
)
"""Capacity Block findings in the stack's terms (``Platform``, ``kimi-k3 capacity preflight``)."""

BLOCK_NOT_FOUND_HINT = (
    f"Check {key('capacityReservationId')} and aws:region, or list your blocks with `kimi-k3 capacity status`."
)
"""What to check when the stack's Capacity Block cannot be read."""


__all__ = ["BLOCK_NOT_FOUND_HINT", "CAPACITY_BLOCK", "key"]
