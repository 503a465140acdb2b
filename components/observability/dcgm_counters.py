"""The DCGM exporter counter list the alerts need: the chart's default list plus ECC and throttling.

The ``dcgm-exporter`` chart 4.8.3 mounts a ConfigMap (``templates/metrics-configmap.yaml``)
over ``/etc/dcgm-exporter/default-counters.csv``; its default list exports XID errors,
remapped rows, power, temperature, utilisation and memory, but leaves the ECC counters
and the thermal/power *violation* (throttling) counters commented out. The chart's
``customMetrics`` value replaces the whole list ("Must be the complete list and is not
additive", chart values.yaml), so :data:`COUNTERS_FILE` is the chart's list with exactly
:data:`ENABLED_BEYOND_DEFAULT` uncommented (``tests/test_observability_dcgm.py`` checks
that against the vendored chart file).

Hook: ``DcgmExporterArgs(extra_values=dcgm_exporter_values())``.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

COUNTERS_FILE = "dcgm-exporter-counters.csv"
"""Package data file (``components/data``) with the complete counter list."""

ENABLED_BEYOND_DEFAULT = (
    "DCGM_FI_DEV_POWER_VIOLATION",
    "DCGM_FI_DEV_THERMAL_VIOLATION",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
)
"""Fields the chart's default list comments out and the alerts/dashboard need."""


def counters_csv() -> str:
    """The complete counter list (DCGM field, Prometheus type, help), as the exporter reads it."""
    return resources.files("kimi_k3").joinpath("data", COUNTERS_FILE).read_text()


def enabled_fields(csv_text: str) -> tuple[str, ...]:
    """The DCGM fields a counter list exports (lines that are not comments), in order."""
    fields = []
    for line in csv_text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            fields.append(line.split(",", 1)[0].strip())
    return tuple(fields)


def dcgm_exporter_values() -> dict[str, Any]:
    """Helm values for ``dcgm-exporter`` that install :func:`counters_csv` as the counter list."""
    return {"customMetrics": counters_csv()}
