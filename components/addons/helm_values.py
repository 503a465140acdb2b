"""Helm values handling shared by every chart the project installs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``override`` into ``base`` the way Helm merges values files.

    Maps merge key by key, recursively; anything else in ``override`` (scalars,
    lists, ``None``) replaces the base value. Neither input is modified.
    """
    merged: dict[str, Any] = {k: (deep_merge(v, {}) if isinstance(v, Mapping) else v) for k, v in base.items()}
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        elif isinstance(value, Mapping):
            merged[key] = deep_merge(value, {})
        else:
            merged[key] = value
    return merged
