"""The ``Monitoring and alerts`` keys: selector labels, namespaces, the TTFT threshold, the switches.

A section of :mod:`kimi_k3.stack.settings` (the only reader of stack config).
"""

from __future__ import annotations

from dataclasses import dataclass

from kimi_k3.core import catalog
from kimi_k3.core.formats import (
    DNS_LABEL,
    LABEL_KEY,
    LABEL_VALUE,
)
from kimi_k3.errors import SettingsError
from kimi_k3.observability import alerts
from kimi_k3.stack.settings.capacity import chart_version
from kimi_k3.stack.settings.reader import Reader, full_key, in_range


@dataclass(frozen=True)
class MonitoringSettings:
    """Alert rules, dashboard and the delivery check (the ``Monitoring and alerts`` keys)."""

    prometheus_operator: bool = False
    """Declare the PrometheusRule, the dashboard ConfigMap and the ServiceMonitors."""
    selector_labels: tuple[tuple[str, str], ...] = (("release", "kube-prometheus-stack"),)
    """Labels the operator's rule and ServiceMonitor selectors match, as (key, value) pairs."""
    namespace: str = "monitoring"
    """Namespace of the scraping Prometheus and of the PrometheusRule."""
    dashboard_namespace: str = "monitoring"
    """Namespace of the dashboard ConfigMap."""
    ttft_p99_s: int = 10
    """Threshold of the time-to-first-token alert, seconds."""
    delivery_check: bool = True
    """Declare the CloudWatch delivery check on the GPU node group's ASG."""
    install_operator: bool = True
    """With ``prometheus_operator``: install kube-prometheus-stack and declare ``namespace`` (``prometheusOperatorInstall``);
    false: the operator's CRDs pre-exist and are read (a preview fails on a missing one)."""
    operator_chart_version: str = catalog.KUBE_PROMETHEUS_STACK_CHART.version
    """kube-prometheus-stack chart version (``prometheusOperatorChartVersion``)."""


def validate_monitoring(r: Reader) -> MonitoringSettings:
    """The ``Monitoring and alerts`` keys: selector labels, namespaces, the TTFT threshold, the switches."""
    # With the operator the ServiceMonitors are always declared: the alert rules read the vLLM
    # series a ServiceMonitor scrapes (the caller turns serving.service_monitor_enabled on).
    operator = r.get("prometheusOperatorEnabled")
    pairs: list[tuple[str, str]] = []
    for item in r.get("prometheusSelectorLabels"):
        key, sep, value = item.partition("=")
        if not sep or not LABEL_KEY.fullmatch(key) or not LABEL_VALUE.fullmatch(value):
            raise SettingsError(full_key("prometheusSelectorLabels"), item, "expected key=value Kubernetes labels such as release=kube-prometheus-stack")
        if key in dict(pairs):
            raise SettingsError(full_key("prometheusSelectorLabels"), item, f"each label key once ({key} is set twice)")
        pairs.append((key, value))
    namespaces = {}
    for name in ("monitoringNamespace", "grafanaDashboardNamespace"):
        value = r.get(name)
        if value and not DNS_LABEL.fullmatch(value):
            raise SettingsError(full_key(name), value, "expected a Kubernetes namespace name (a DNS label: lowercase letters, digits and '-', at most 63)")
        namespaces[name] = value
    if not namespaces["monitoringNamespace"]:
        raise SettingsError(full_key("monitoringNamespace"), "", "expected a Kubernetes namespace name such as monitoring")
    return MonitoringSettings(
        prometheus_operator=operator,
        selector_labels=tuple(pairs),
        namespace=namespaces["monitoringNamespace"],
        dashboard_namespace=namespaces["grafanaDashboardNamespace"] or namespaces["monitoringNamespace"],
        ttft_p99_s=in_range("alertTtftP99Seconds", r.get("alertTtftP99Seconds"), *alerts.TTFT_P99_SECONDS),
        delivery_check=r.get("deliveryCheckEnabled"),
        install_operator=r.get("prometheusOperatorInstall"),
        operator_chart_version=chart_version("prometheusOperatorChartVersion", r.get("prometheusOperatorChartVersion")),
    )
