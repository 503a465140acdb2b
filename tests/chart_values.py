"""Check the values we pass to a Helm chart against the chart's own default values.

Every key path we set must exist in the chart's ``values.yaml`` (copies with their
provenance in ``tests/data``), so a typo such as ``toleration:`` fails a test
instead of being silently ignored by Helm.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from tests.conftest import DATA


def chart_defaults(name: str) -> dict[str, Any]:
    """The default values of a chart from ``tests/data/<name>.values.yaml``."""
    return yaml.safe_load((DATA / f"{name}.values.yaml").read_text()) or {}


def unknown_keys(values: Mapping[str, Any], defaults: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Key paths of ``values`` that the chart's defaults do not have.

    A map whose default is empty (``{}``, e.g. ``nodeSelector``, ``resources``,
    ``affinity``) or ``None`` accepts any sub-keys; lists and scalars are leaves.
    """
    problems: list[str] = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if key not in defaults:
            problems.append(path)
            continue
        default = defaults[key]
        if isinstance(value, Mapping) and isinstance(default, Mapping) and default:
            problems.extend(unknown_keys(value, default, f"{path}."))
    return problems


def values_copy_version(name: str) -> str:
    """The chart version a values copy was taken from, as recorded in tests/data/README.md."""
    for line in (DATA / "README.md").read_text().splitlines():
        if f"`{name}.values.yaml`" in line:
            for word in line.replace("`", " ").replace(",", " ").split():
                stripped = word.lstrip("v").rstrip(";.)")
                if stripped[:1].isdigit() and stripped.count(".") == 2:
                    return stripped
    raise LookupError(f"tests/data/README.md records no chart version for {name}.values.yaml")


__all__ = ["chart_defaults", "unknown_keys", "values_copy_version"]
