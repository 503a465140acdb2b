"""Secrets in what the offline engine records and writes: unwrap them for checks, mask them for output."""

from __future__ import annotations

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


def _mask(value: Any) -> Any:
    """Keep the shape of a secret value (so manifests stay valid) but hide every leaf."""
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return SECRET_MARK


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
    if isinstance(value, dict):
        return {k: redact_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_numbers(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
