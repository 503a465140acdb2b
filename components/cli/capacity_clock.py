"""What every ``kimi-k3 capacity`` command (and ``kimi-k3 status``) shares: the command's "now" and the stack key of its block.

A leaf below :mod:`kimi_k3.cli.capacity` and its subcommands (:mod:`kimi_k3.cli.capacity_extend`,
:mod:`kimi_k3.cli.capacity_scale_up`), so that the parent registers them and they read the same
clock without importing each other.
"""

from __future__ import annotations

from datetime import datetime

from kimi_k3.core import clock

CONFIG_KEY = "kimi-k3:capacityReservationId"
"""The stack config key naming the Capacity Block a command works on."""


def utcnow() -> datetime:
    """The command's "now" (:func:`kimi_k3.core.clock.program_now`, read once per command; tests replace this to pin it)."""
    return clock.program_now()


__all__ = ["CONFIG_KEY", "utcnow"]
