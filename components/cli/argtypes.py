"""argparse ``type=`` converters shared by the ``kimi-k3`` commands.

argparse prefixes the message with the flag (``argument --requests: '0' must be at
least 1``) and exits 2; range rules that belong to a domain (Capacity Block counts,
training plan durations) stay with that domain and are checked after parsing.
"""

from __future__ import annotations

import argparse
import math


def whole_number(text: str) -> int:
    """Any whole number (range checks are the caller's)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def non_negative_int(text: str) -> int:
    """A whole number >= 0."""
    value = whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (seconds, prices)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number greater than 0")
    return value


__all__ = ["non_negative_int", "positive_float", "positive_int", "whole_number"]
