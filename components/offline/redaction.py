"""Secrets in what the offline engine records and writes: unwrap them for checks, mask them for output."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
from pulumi.runtime import rpc

SECRET_MARK = "[secret]"
"""How secret values appear in anything the offline engine writes."""



def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig


def reveal(value: Any) -> Any:
    """Unwrap Pulumi secret markers recursively (for tests that check secret wiring)."""
    if _is_secret(value):
        return reveal(value["value"])
    if isinstance(value, dict):
        return {k: reveal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [reveal(v) for v in value]
    return value


def redact(value: Any) -> Any:
    """Replace secret values by :data:`SECRET_MARK`, recursively; JSON-safe output.

    Resource references (inputs that are whole resources, e.g. a Role passed as ``role``)
    become ``{"resource": "<type token>", "name": "<name>"}``.
    """
    if isinstance(value, pulumi.Resource):
        return {"resource": value.pulumi_resource_type, "name": value.pulumi_resource_name}
    if _is_secret(value):
        return _mask(reveal(value))
    if isinstance(value, dict):
        if rpc._special_sig_key in value:  # resource reference or asset: keep it readable
            return {k: redact(v) for k, v in value.items() if k != rpc._special_sig_key}
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)  # the mock wire turns every number into a float
    return value


def _map_leaves(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """``value`` with the same dicts and lists, every other value replaced by ``leaf(value)``."""
    if isinstance(value, dict):
        return {k: _map_leaves(v, leaf) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_leaves(v, leaf) for v in value]
    return leaf(value)


def _mask(value: Any) -> Any:
    """Keep the shape of a secret value (so manifests stay valid) but hide every leaf."""
    return _map_leaves(value, lambda _leaf: SECRET_MARK)


def contains_secret(value: Any) -> bool:
    """True when a secret marker occurs anywhere in ``value``."""
    if _is_secret(value):
        return True
    if isinstance(value, dict):
        return any(contains_secret(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(contains_secret(v) for v in value)
    return False


def redact_numbers(value: Any) -> Any:
    """Turn whole floats (the mock wire's numbers) back into ints, recursively."""
    return _map_leaves(value, lambda leaf: int(leaf) if isinstance(leaf, float) and leaf.is_integer() else leaf)
