"""``PrometheusOperator``: kube-prometheus-stack from its official Helm chart, pinned, with its namespace.

What ``kimi-k3:prometheusOperatorEnabled`` declares (alert rules as a ``PrometheusRule``, ServiceMonitors for vLLM
and the DCGM exporter) are objects of the Prometheus Operator's CRDs (``monitoring.coreos.com``): the API server
rejects them until those CRDs exist. This component installs them: the namespace, then the chart
``prometheus-community/kube-prometheus-stack`` (:data:`~kimi_k3.core.catalog.KUBE_PROMETHEUS_STACK_CHART`) as a
``kubernetes:helm.sh/v3:Release``, which installs the CRDs of its ``crds`` sub-chart first (Helm installs a chart's
``crds/`` before its templates) and then the operator, Prometheus, Alertmanager and Grafana on the system nodes.
Make every object of those kinds depend on :attr:`PrometheusOperator.release`.

The release is named ``kube-prometheus-stack``: the chart's Prometheus selects rules and ServiceMonitors labelled
``release=<release name>`` (``ruleSelectorNilUsesHelmValues``/``serviceMonitorSelectorNilUsesHelmValues``, true by
default), which is ``kimi-k3:prometheusSelectorLabels``'s default. Its Grafana's dashboard sidecar loads ConfigMaps
labelled ``grafana_dashboard=1`` in its namespace (the chart's ``grafana.sidecar.dashboards``).

On EKS the control plane is managed: kube-controller-manager, kube-scheduler and etcd cannot be scraped, and
kube-proxy serves its metrics on 127.0.0.1; their ServiceMonitors and rules are off (else their ``TargetDown``
alerts fire for ever). The node exporter (hostNetwork, hostPID) is off too: GPU health comes from the DCGM
exporter and the EKS node monitoring agent, and the namespace stays at Pod Security ``baseline``.

Helm installs CRDs from ``crds/`` only on first install; a chart upgrade that changes them needs them applied by
hand (the chart's README, "Upgrading Chart"), as for any Helm-managed CRD.

Kubernetes provider: through ``opts`` (``providers={"kubernetes": provider}``); refused without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi

from kimi_k3.addons.helm_values import deep_merge
from kimi_k3.addons.releases import check_release_args, controller_namespace, controller_release, register_release_outputs
from kimi_k3.cluster.kubernetes_provider import require_kubernetes_provider
from kimi_k3.core import catalog, labels
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.errors import Problems

CHART, REPOSITORY, DEFAULT_VERSION = (
    catalog.KUBE_PROMETHEUS_STACK_CHART.name, catalog.KUBE_PROMETHEUS_STACK_CHART.repository, catalog.KUBE_PROMETHEUS_STACK_CHART.version,
)
RELEASE_NAME = "kube-prometheus-stack"
"""Helm release name: the ``release`` label the chart's Prometheus selects rules and ServiceMonitors by."""
DEFAULT_NAMESPACE = "monitoring"
CRD_GROUP = "monitoring.coreos.com"
"""API group of the operator's CRDs."""
EKS_UNSCRAPEABLE = ("kubeControllerManager", "kubeScheduler", "kubeEtcd", "kubeProxy")
"""Chart components that scrape what EKS does not expose (managed control plane; kube-proxy on 127.0.0.1)."""



@checked_args
@dataclass(frozen=True)
class PrometheusOperatorArgs:
    """Inputs of :class:`PrometheusOperator` (the cluster comes from ``opts``)."""

    version: str = DEFAULT_VERSION
    """kube-prometheus-stack chart version (``88.3.0``)."""
    namespace: str = DEFAULT_NAMESPACE
    """Namespace of the release, declared by the component (the stack's ``monitoringNamespace``)."""
    node_selector: Mapping[str, str] = field(default_factory=lambda: dict(labels.SYSTEM_NODE_LABELS))
    """Where the operator, Prometheus, Alertmanager, Grafana and kube-state-metrics run: the CPU system nodes."""
    extra_values: Mapping[str, Any] = field(default_factory=dict)
    """Helm values deep-merged over ours (yours win; lists are replaced, not appended)."""


def operator_values(args: PrometheusOperatorArgs) -> dict[str, Any]:
    """Helm values of the release (every key exists in the chart's ``values.yaml`` or its sub-charts')."""
    nodes = dict(args.node_selector)
    ours: dict[str, Any] = {
        "crds": {"enabled": True},
        "nodeExporter": {"enabled": False},
        "defaultRules": {"rules": {"nodeExporterAlerting": False, "nodeExporterRecording": False, "node": False}},
        **{component: {"enabled": False} for component in EKS_UNSCRAPEABLE},
        "prometheusOperator": {"nodeSelector": nodes, "admissionWebhooks": {"patch": {"nodeSelector": nodes}}},
        "prometheus": {"prometheusSpec": {"nodeSelector": nodes}},
        "alertmanager": {"alertmanagerSpec": {"nodeSelector": nodes}},
        "grafana": {"nodeSelector": nodes},
        "kube-state-metrics": {"nodeSelector": nodes},
    }
    return deep_merge(ours, dict(args.extra_values))


def validate(args: PrometheusOperatorArgs, name: str = "prometheus-operator", opts: pulumi.ResourceOptions | None = None) -> None:
    """Raise :class:`~kimi_k3.errors.ComponentInputError` for arguments (or options) that cannot produce a working install."""
    problems = Problems("PrometheusOperator", name)
    require_kubernetes_provider(problems, opts)
    check_release_args(problems, args.version, args.namespace, args.extra_values, DEFAULT_VERSION)
    if not args.node_selector:
        problems.add("node_selector", "node_selector is empty: Prometheus and Grafana would land on GPU nodes too")
    problems.raise_any()


@checked_component
class PrometheusOperator(pulumi.ComponentResource):
    """The namespace and the kube-prometheus-stack release (CRDs, operator, Prometheus, Alertmanager, Grafana).

    Attributes: ``namespace_resource``, ``release`` (make objects of the operator's kinds depend on it), ``values``.
    """

    namespace: pulumi.Output[str]
    """The release's namespace."""
    release_name: pulumi.Output[str]
    """The Helm release name (``kube-prometheus-stack``)."""
    chart_version: pulumi.Output[str]
    """The chart version installed."""

    def __init__(self, name: str, args: PrometheusOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate, then declare the namespace and the Helm release: ``name`` prefixes every child's name, ``args`` as on
        ``PrometheusOperatorArgs``, ``opts`` the usual resource options (providers must name the Kubernetes provider)."""
        validate(args, name, opts)
        super().__init__("kimi-k3:index:PrometheusOperator", name, None, opts)
        self.values = operator_values(args)
        self.namespace_resource = controller_namespace(f"{name}-namespace", args.namespace, pulumi.ResourceOptions(parent=self))
        self.release = controller_release(
            f"{name}-release",
            release_name=RELEASE_NAME,
            chart=CHART,
            repository=REPOSITORY,
            version=args.version,
            namespace=args.namespace,
            values=self.values,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.namespace_resource]),
        )
        register_release_outputs(self, self.release, args.namespace, args.version)


__all__ = ["CRD_GROUP", "EKS_UNSCRAPEABLE", "RELEASE_NAME", "PrometheusOperator", "PrometheusOperatorArgs", "operator_values", "validate"]
