"""The Kimi K3 Grafana dashboard (grafana-foundation-sdk builders) and its sidecar ConfigMap.

Panels: time to first token and inter-token latency (p50/p90/p99), output and prompt
tokens per second, queue (waiting / running requests), KV-cache usage, GPU utilisation,
HBM used and power (DCGM exporter), and for the Capacity Block the time left and Ready
GPU nodes against the reserved count. The block's end and reserved count are inputs,
like the alert rules' (they re-derive from the reservation after an extension).

Grafana's dashboard sidecar (kube-prometheus-stack 88.5.3 values, ``grafana.sidecar.dashboards``:
``label: grafana_dashboard``, ``labelValue: "1"``, ``searchNamespace: ALL``;
prometheus-community/helm-charts ``charts/kube-prometheus-stack/values.yaml``) loads every
ConfigMap with that label; each data key holding a ``.json`` is one dashboard.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from grafana_foundation_sdk.builders import common as common_builder
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import DataSourceRef

from kimi_k3.core import catalog
from kimi_k3.core.formats import DNS_LABEL
from kimi_k3.errors import UserError
from kimi_k3.observability import metrics as m
from kimi_k3.observability.alerts import epoch

SIDECAR_LABEL = {"grafana_dashboard": "1"}
"""Label the Grafana sidecar selects dashboards by (kube-prometheus-stack default)."""

DASHBOARD_UID = "kimi-k3-serving"
"""Stable uid, so a re-render updates the same dashboard in Grafana."""

DATASOURCE_VARIABLE = "datasource"
"""Dashboard variable choosing the Prometheus data source (every query uses it)."""


@dataclass(frozen=True)
class DashboardArgs:
    """Inputs of :func:`dashboard_json` / :func:`dashboard_configmap`."""

    block_end: datetime
    """End of the Capacity Block (UTC): the "time left" panel counts down to it."""
    reserved_instances: int
    """Instances the block reserves: the Ready GPU nodes panel compares against it."""
    served_model_name: str = catalog.KIMI_K3.served_model_name
    """``model_name`` label of the vLLM series."""
    title: str = "Kimi K3 on EKS"
    """Dashboard title."""
    name: str = "kimi-k3-dashboard"
    """Name of the ConfigMap."""
    namespace: str = "monitoring"
    """Namespace of the ConfigMap (any, with the chart's ``searchNamespace: ALL``)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels on the ConfigMap (the sidecar label is always set)."""


def _query(expr: str, legend: str, ref: str) -> prometheus.Dataquery:
    return (
        prometheus.Dataquery()
        .expr(expr)
        .legend_format(legend)
        .ref_id(ref)
        .datasource(DataSourceRef(type_val="prometheus", uid=f"${{{DATASOURCE_VARIABLE}}}"))
    )


def _series(title: str, unit: str, queries: list[tuple[str, str]], width: int = 8, description: str = "") -> timeseries.Panel:
    panel = timeseries.Panel().title(title).unit(unit).height(8).span(width)
    if description:
        panel = panel.description(description)
    for index, (expr, legend) in enumerate(queries):
        panel = panel.with_target(_query(expr, legend, chr(ord("A") + index)))
    return panel


def _stat(title: str, unit: str, expr: str, width: int = 6, description: str = "") -> stat.Panel:
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .height(5)
        .span(width)
        .graph_mode(common.BigValueGraphMode.NONE)
        .reduce_options(common_builder.ReduceDataOptions().calcs(["lastNotNull"]))
        .with_target(_query(expr, title, "A"))
    )


def _quantiles(histogram: str, model: str) -> list[tuple[str, str]]:
    return [
        (f"histogram_quantile({q}, sum by (le) (rate({histogram}_bucket{{{model}}}[$__rate_interval])))", f"p{int(q * 100)}")
        for q in (0.5, 0.9, 0.99)
    ]


def build_dashboard(args: DashboardArgs) -> Any:
    """The dashboard model (``grafana_foundation_sdk.models.dashboard.Dashboard``)."""
    if args.reserved_instances < 1:
        raise UserError(f"reserved_instances {args.reserved_instances} is not accepted; a block reserves at least 1 instance")
    model = f'{m.VLLM_MODEL_LABEL}="{args.served_model_name}"'
    gpu_legend = "{{Hostname}}{{hostname}} GPU {{gpu}}"
    ready_gpu_nodes = (
        f'count({m.KSM_NODE_CONDITION}{{condition="Ready", status="true"}} == 1'
        f' and on (node) {m.KSM_NODE_ALLOCATABLE}{{resource="{m.GPU_RESOURCE_LABEL_VALUE}"}} > 0) or vector(0)'
    )
    builder = (
        db.Dashboard(args.title)
        .uid(DASHBOARD_UID)
        .tags(["kimi-k3", "vllm", "capacity-block"])
        .refresh("30s")
        .time("now-6h", "now")
        .timezone("utc")
        .with_variable(db.DatasourceVariable(DATASOURCE_VARIABLE).label("Prometheus").type("prometheus"))
        .with_row(db.Row("Capacity Block"))
        .with_panel(_stat("Time left in the block", "dtdurations", f"vector({epoch(args.block_end)}) - time()",
                          description="Until the reservation's end; EKS scales the GPU nodes to 0 40 minutes before it."))
        .with_panel(_stat("Ready GPU nodes", "none", ready_gpu_nodes,
                          description=f"Nodes Ready with nvidia.com/gpu allocatable; the block reserves {args.reserved_instances}."))
        .with_panel(_stat("Reserved instances", "none", f"vector({args.reserved_instances})"))
        .with_panel(_stat("Requests running", "none", f"sum({m.VLLM_RUNNING}{{{model}}})"))
        .with_row(db.Row("Latency"))
        .with_panel(_series("Time to first token", "s", _quantiles(m.VLLM_TTFT, model), width=12))
        .with_panel(_series("Inter-token latency", "s", _quantiles(m.VLLM_ITL, model), width=12))
        .with_row(db.Row("Throughput and queue"))
        .with_panel(_series("Tokens per second", "short", [
            (f"sum(rate({m.VLLM_GENERATION_TOKENS}{{{model}}}[$__rate_interval]))", "output"),
            (f"sum(rate({m.VLLM_PROMPT_TOKENS}{{{model}}}[$__rate_interval]))", "prompt"),
        ]))
        .with_panel(_series("Queue", "short", [
            (f"sum by (pod) ({m.VLLM_WAITING}{{{model}}})", "{{pod}} waiting"),
            (f"sum by (pod) ({m.VLLM_RUNNING}{{{model}}})", "{{pod}} running"),
        ]))
        .with_panel(_series("KV-cache usage", "percentunit", [
            (f"max by (pod) ({m.VLLM_KV_USAGE}{{{model}}})", "{{pod}}"),
        ], description="vLLM preempts requests when the KV cache is full."))
        .with_row(db.Row("GPUs (DCGM exporter)"))
        .with_panel(_series("GPU utilisation", "percent", [(m.DCGM_GPU_UTIL, gpu_legend)]))
        .with_panel(_series("HBM used", "decmbytes", [(m.DCGM_FB_USED, gpu_legend)]))
        .with_panel(_series("Power draw", "watt", [(m.DCGM_POWER, gpu_legend)]))
    )
    model_out = builder.build()
    for number, panel in enumerate(model_out.panels or [], start=1):
        panel.id_val = number  # stable ids: links to a panel survive a re-render
    return model_out


def dashboard_json(args: DashboardArgs) -> str:
    """The dashboard as Grafana JSON (sorted keys: the same inputs give byte-identical output)."""
    return json.dumps(build_dashboard(args), cls=JSONEncoder, sort_keys=True, indent=2)


def panel_expressions(dashboard: Mapping[str, Any]) -> list[str]:
    """Every PromQL expression of a dashboard's panels (for checking that each one parses)."""
    return [target["expr"] for panel in dashboard.get("panels", []) for target in panel.get("targets", []) if "expr" in target]


def dashboard_configmap(args: DashboardArgs) -> dict[str, Any]:
    """The ConfigMap Grafana's sidecar loads the dashboard from."""
    if not DNS_LABEL.fullmatch(args.namespace or ""):
        raise UserError(f"dashboard namespace {args.namespace!r} is not a valid Kubernetes namespace name")
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": args.name,
            "namespace": args.namespace,
            "labels": {"app.kubernetes.io/part-of": "kimi-k3", **args.labels, **SIDECAR_LABEL},
        },
        "data": {"kimi-k3.json": dashboard_json(args)},
    }
