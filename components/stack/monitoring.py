"""How a stack's settings and its reservation become the monitoring components' args (pure).

:class:`~kimi_k3.stack.platform.Platform` calls these and declares the components:

* :func:`alerts_and_dashboard` -> :class:`~kimi_k3.observability.monitoring.ServingMonitoring`
  (only with ``kimi-k3:prometheusOperatorEnabled``): the block's window and reserved count
  come from the reservation as it is *now*, so an extension re-derives them on the next
  ``pulumi up``;
* :func:`delivery_check_args` -> :class:`~kimi_k3.capacity.delivery_check.DeliveryCheck`
  (``kimi-k3:deliveryCheckEnabled``, on by default);
* :func:`dcgm_extra_values` -> the DCGM exporter's counter list (ECC and throttling included,
  which the GPU alerts read) and, with the operator, the selector labels on its ServiceMonitor;
* :func:`serving_scrape_fields` -> where the serving pods are scraped from, and the labels on
  their ServiceMonitor.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pulumi

from kimi_k3.addons.helm_values import deep_merge
from kimi_k3.capacity.delivery_check import DeliveryCheckArgs
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.observability.alerts import AlertRulesArgs, AlertThresholds, BlockWindow
from kimi_k3.observability.dashboard import DashboardArgs
from kimi_k3.observability.dcgm_counters import dcgm_exporter_values
from kimi_k3.observability.monitoring import ServingMonitoringArgs
from kimi_k3.serving.args import VllmServingArgs
from kimi_k3.stack.settings import StackSettings


def block_window(reservation: CapacityBlockFacts) -> BlockWindow:
    """The block's window and reserved count as the reservation reports them now."""
    start, end = reservation.window()
    return BlockWindow(start=start, end=end, reserved_instances=reservation.instance_count)


def alerts_and_dashboard(settings: StackSettings, reservation: CapacityBlockFacts, serving: VllmServingArgs) -> ServingMonitoringArgs:
    """The PrometheusRule's and the dashboard's inputs for the stack, its block and its serving args."""
    mon = settings.monitoring
    labels = dict(mon.selector_labels)
    window = block_window(reservation)
    weights_budget = serving.weights_staging_timeout_s
    served = serving.contract.api.served_model_name
    alerts = AlertRulesArgs(
        block=window,
        weights_budget_s=weights_budget,
        startup_budget_s=weights_budget + serving.contract.startup_budget_s(),
        serving_namespace=serving.namespace,
        served_model_name=served,
        thresholds=AlertThresholds(ttft_p99_s=float(mon.ttft_p99_s)),
        namespace=mon.namespace,
        labels=labels,
    )
    dashboard = DashboardArgs(
        block_end=window.end,
        reserved_instances=window.reserved_instances,
        served_model_name=served,
        namespace=mon.dashboard_namespace,
    )
    return ServingMonitoringArgs(alerts=alerts, dashboard=dashboard)


def delivery_check_args(
    reservation: CapacityBlockFacts,
    *,
    asg_name: pulumi.Input[str],
    alert_topic_arn: pulumi.Input[str],
    now: datetime,
    tags: Mapping[str, str],
    pending_switch_on_at: datetime | None = None,
    pending_switch_off_at: datetime | None = None,
    pending_state_reset_at: datetime | None = None,
    alarm_name: str | None = None,
) -> DeliveryCheckArgs:
    """The delivery check of the block: reserved count and window from the reservation, the node group's ASG and topic;
    ``pending_switch_on_at`` / ``pending_switch_off_at`` / ``pending_state_reset_at`` the times of the schedules a previous run created (kept while they
    lie ahead); ``alarm_name`` the alarm's name, unique in the account and region."""
    start, end = reservation.window()
    return DeliveryCheckArgs(
        asg_name=asg_name,
        reserved_instances=reservation.instance_count,
        block_start=start,
        block_end=end,
        alert_topic_arn=alert_topic_arn,
        now=now,
        pending_switch_on_at=pending_switch_on_at,
        pending_switch_off_at=pending_switch_off_at,
        pending_state_reset_at=pending_state_reset_at,
        alarm_name=alarm_name,
        tags=dict(tags),
    )


def dcgm_extra_values(settings: StackSettings) -> dict[str, Any]:
    """DCGM exporter values: the full counter list, plus the selector labels on its ServiceMonitor with the operator."""
    values = dcgm_exporter_values()
    if settings.monitoring.prometheus_operator and settings.monitoring.selector_labels:
        values = deep_merge(values, {"serviceMonitor": {"additionalLabels": dict(settings.monitoring.selector_labels)}})
    return values


def serving_scrape_fields(settings: StackSettings) -> dict[str, Any]:
    """``VllmServingArgs`` fields: the namespace the scraping Prometheus runs in, the ServiceMonitor's labels."""
    fields: dict[str, Any] = {"metrics_namespace": settings.monitoring.namespace}
    if settings.monitoring.prometheus_operator:
        fields["service_monitor_labels"] = dict(settings.monitoring.selector_labels)
    return fields


__all__ = ["alerts_and_dashboard", "block_window", "dcgm_extra_values", "delivery_check_args", "serving_scrape_fields"]
