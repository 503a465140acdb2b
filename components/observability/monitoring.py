"""The alert rules and the dashboard declared in the cluster: one component over the two pure renderers.

:class:`ServingMonitoring` declares the ``PrometheusRule`` of :func:`.alerts.prometheus_rule`
(as a ``k8s.apiextensions.CustomResource``: the Prometheus Operator's CRD, not a built-in
kind) and the Grafana dashboard ConfigMap of :func:`.dashboard.dashboard_configmap`. The
block's window and reserved count are inputs (``BlockWindow`` / ``DashboardArgs``): the
stack passes what the reservation says now, so after ``kimi-k3 capacity extend`` the next
``pulumi up`` re-renders the rules and the time-left panel for the new end.

The Kubernetes provider comes through ``opts`` (``providers={"kubernetes": provider}``);
the cluster must run the Prometheus Operator (its CRDs), else the apply fails on the
PrometheusRule.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.cluster.kubernetes_provider import require_kubernetes_provider
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.errors import Problems, UserError
from kimi_k3.observability.alerts import AlertRulesArgs, prometheus_rule
from kimi_k3.observability.dashboard import DashboardArgs, dashboard_configmap


@checked_args
@dataclass(frozen=True)
class ServingMonitoringArgs:
    """Inputs of :class:`ServingMonitoring`."""

    alerts: AlertRulesArgs
    """The alert rules' inputs (block window, budgets, thresholds, namespace, selector labels)."""
    dashboard: DashboardArgs
    """The dashboard's inputs (block end, reserved count, namespace)."""


@checked_component
class ServingMonitoring(pulumi.ComponentResource):
    """A ``PrometheusRule`` with the stack's alerts and the Grafana dashboard ConfigMap.

    Attributes: ``prometheus_rule`` (``CustomResource``), ``dashboard`` (``ConfigMap``),
    ``rule_name`` and ``dashboard_name`` (object names).
    """

    def __init__(self, name: str, args: ServingMonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Render both objects (refusing inputs that cannot make working rules), then declare them."""
        problems = Problems("ServingMonitoring", name)
        require_kubernetes_provider(problems, opts)
        rule = configmap = None
        try:
            rule = prometheus_rule(args.alerts)
        except UserError as err:
            problems.add("alerts", str(err))
        try:
            configmap = dashboard_configmap(args.dashboard)
        except UserError as err:
            problems.add("dashboard", str(err))
        problems.raise_any()
        assert rule is not None and configmap is not None  # no problem: both rendered
        super().__init__("kimi-k3:index:ServingMonitoring", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        meta = rule["metadata"]
        self.rule_name: str = meta["name"]
        self.prometheus_rule = k8s.apiextensions.CustomResource(
            f"{name}-alert-rules",
            api_version=rule["apiVersion"],
            kind=rule["kind"],
            metadata=k8s.meta.v1.ObjectMetaArgs(name=meta["name"], namespace=meta["namespace"], labels=meta["labels"]),
            spec=rule["spec"],
            opts=child,
        )
        cm_meta = configmap["metadata"]
        self.dashboard_name: str = cm_meta["name"]
        self.dashboard = k8s.core.v1.ConfigMap(
            f"{name}-dashboard",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=cm_meta["name"], namespace=cm_meta["namespace"], labels=cm_meta["labels"]),
            data=configmap["data"],
            opts=child,
        )
        self.register_outputs({"prometheusRule": self.rule_name, "dashboardConfigMap": self.dashboard_name})


__all__ = ["ServingMonitoring", "ServingMonitoringArgs"]
