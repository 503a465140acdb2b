"""argparse pieces shared by the ``kimi-k3`` commands: ``type=`` converters and the STACK/--program pair.

argparse prefixes the message with the flag (``argument --requests: '0' must be at
least 1``) and exits 2; range rules that belong to a domain (Capacity Block counts,
training plan durations) stay with that domain and are checked after parsing.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path


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


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    """``STACK`` (the stack name) and ``--program DIR`` (where the Pulumi project is), as every stack command takes them."""
    parser.add_argument("stack", metavar="STACK", help="stack name, e.g. dev or prod: Pulumi.STACK.yaml in the project's stackConfigDir")
    parser.add_argument(
        "--program", type=Path, metavar="DIR",
        help="directory of the Pulumi project (its Pulumi.yaml); default: the nearest one from here up",
    )


__all__ = ["add_stack_arguments", "non_negative_int", "positive_float", "positive_int", "whole_number"]
