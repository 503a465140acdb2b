"""argparse pieces shared by the ``kimi-k3`` commands: ``type=`` converters, the STACK/--program pair and the endpoint flags.

argparse prefixes the message with the flag (``argument --requests: '0' must be at
least 1``) and exits 2; range rules that belong to a domain (Capacity Block counts,
training plan durations) stay with that domain and are checked after parsing.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path

from kimi_k3.core import catalog
from kimi_k3.errors import UserError


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


_STACK_FILE = re.compile(r"(?:^|.*/)Pulumi\.(?P<stack>[^/]+)\.ya?ml$")


def stack_name(value: str) -> str:
    """``STACK`` as given, unless it is a stack file's path (``stacks/Pulumi.dev.yaml``): then one line naming the stack."""
    match = _STACK_FILE.fullmatch(value)
    if match:
        raise UserError(
            f"STACK {value!r} is a stack file's path: pass the stack name `{match['stack']}` "
            "(its file is found as Pulumi finds it: in the stackConfigDir of the project's Pulumi.yaml)"
        )
    return value


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    """``STACK`` (the stack name) and ``--program DIR`` (where the Pulumi project is), as every stack command takes them."""
    parser.add_argument("stack", metavar="STACK", type=stack_name, help="stack name, e.g. dev or prod: Pulumi.STACK.yaml in the project's stackConfigDir")
    parser.add_argument(
        "--program", type=Path, metavar="DIR",
        help="directory of the Pulumi project (its Pulumi.yaml); default: the nearest one from here up",
    )


API_KEY_ENV = "KIMI_K3_API_KEY"
"""Environment variable the endpoint commands read the API key from when --api-key is not given."""

def add_endpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """``--endpoint``, ``--api-key`` and ``--model`` (default: the catalog's served model name), as every command that talks to a running endpoint takes them."""
    parser.add_argument("--endpoint", required=True, help="base URL, e.g. http://127.0.0.1:8000 or http://127.0.0.1:8000/v1")
    parser.add_argument(
        "--api-key",
        default=None,
        help=f"API key the server was started with (default: ${API_KEY_ENV}; prefer the "
        "environment variable, a flag shows up in the process list)",
    )
    parser.add_argument("--model", default=catalog.KIMI_K3.served_model_name, help="served model name (default: %(default)s)")


def api_key(args: argparse.Namespace) -> str:
    """The key from ``--api-key``, else from ``$KIMI_K3_API_KEY``; empty when neither is set."""
    return args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV, "")


__all__ = ["API_KEY_ENV", "add_endpoint_arguments", "add_stack_arguments", "api_key", "non_negative_int", "positive_float", "positive_int", "whole_number"]
