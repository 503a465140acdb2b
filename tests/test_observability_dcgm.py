"""The DCGM counter list shipped to dcgm-exporter: the chart's default list plus ECC and throttling."""

from __future__ import annotations

import re

from kimi_k3.observability import dcgm_counters, metrics
from tests.conftest import DATA

CHART_TEMPLATE = DATA / "dcgm-exporter-4.8.3.metrics-configmap.yaml"


def chart_default_list() -> str:
    """The counter list chart 4.8.3 mounts when customMetrics is unset (its template's else branch)."""
    template = CHART_TEMPLATE.read_text()
    body = template.split("{{- else }}\n  metrics: |\n", 1)[1].split("{{- end }}", 1)[0]
    return "\n".join(line[6:] if line.startswith("      ") else line for line in body.splitlines()) + "\n"


def test_every_field_the_alerts_and_dashboard_read_is_exported():
    enabled = set(dcgm_counters.enabled_fields(dcgm_counters.counters_csv()))
    assert set(metrics.DCGM_METRICS) <= enabled


def test_the_list_is_the_charts_default_with_exactly_the_extra_fields_uncommented():
    ours, default = dcgm_counters.counters_csv().splitlines(), chart_default_list().splitlines()
    assert len(ours) == len(default)
    changed = [(o, d) for o, d in zip(ours, default, strict=False) if o != d]
    assert sorted(o.split(",")[0] for o, _ in changed) == sorted(dcgm_counters.ENABLED_BEYOND_DEFAULT)
    assert all(d == "# " + o for o, d in changed)  # the chart's own line, comment marker removed


def test_the_default_list_lacks_ecc_and_throttling_hence_the_custom_list():
    default = set(dcgm_counters.enabled_fields(chart_default_list()))
    assert metrics.DCGM_XID in default and metrics.DCGM_ROW_REMAP_FAILURE in default
    assert not default & set(dcgm_counters.ENABLED_BEYOND_DEFAULT)


def test_helm_values_replace_the_whole_list():
    values = dcgm_counters.dcgm_exporter_values()
    assert list(values) == ["customMetrics"]
    assert re.search(r"^DCGM_FI_DEV_THERMAL_VIOLATION,\s+counter,", values["customMetrics"], re.M)
    # customMetrics is a key of the chart's values (commented example in values.yaml 4.8.3)
    assert "# customMetrics: |" in (DATA / "dcgm-exporter.values.yaml").read_text()
