"""The stack's alert rules as a Prometheus Operator ``PrometheusRule`` (pure renderer).

Three groups: serving (vLLM and the serving pods), GPU (DCGM exporter) and the Capacity
Block (its window, its nodes, the weights transfer). The block's start, end and reserved
count are inputs, never constants: after an extension (same reservation id, later end)
``pulumi up`` re-derives them from the reservation and re-renders the rules. Thresholds
are inputs with defaults; each default says why in :class:`AlertThresholds`.

Label assumptions: the rules are declared only when the Prometheus Operator is present,
and then the vLLM pods are scraped through a ServiceMonitor, whose targets carry
``namespace`` and ``pod`` (Prometheus Operator relabelling); vLLM series are selected by
``model_name`` (set by vLLM itself), kube-state-metrics series by ``namespace``.

kube-prometheus-stack only loads PrometheusRules whose labels match its rule selector
(``prometheus.prometheusSpec.ruleSelectorNilUsesHelmValues: true`` selects
``release: <release name>``; prometheus-community/helm-charts
``charts/kube-prometheus-stack/values.yaml``): pass that label in ``labels``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from kimi_k3.capacity.scaling import EKS_SCALEDOWN_BEFORE_END
from kimi_k3.core import catalog
from kimi_k3.core.formats import DNS_LABEL
from kimi_k3.errors import UserError
from kimi_k3.observability import metrics as m

WEIGHTS_INIT_CONTAINERS = ("fetch-weights", "verify-weights")
"""Init containers of the serving pods that stage and verify the weights (``components/serving/vllm.py``)."""

SEVERITIES = ("info", "warning", "critical")


@dataclass(frozen=True)
class BlockWindow:
    """The Capacity Block the GPU nodes run on, as the reservation reports it now."""

    start: datetime
    """Start of the block (UTC)."""
    end: datetime
    """End of the block (UTC); moves when the block is extended."""
    reserved_instances: int
    """Instances the block reserves (the node group scales to this many at the start)."""


TTFT_P99_SECONDS = (1, 600)
"""What :attr:`AlertThresholds.ttft_p99_s` accepts, seconds, ``(low, high)``: below 1 s pages on a chat burst's prefill, above
10 minutes no client is still waiting (``alertTtftP99Seconds`` reads the same range)."""


@dataclass(frozen=True)
class AlertThresholds:
    """Alert thresholds. Defaults are for one Kimi K3 replica per p6-b300 node (TP=8)."""

    ttft_p99_s: float = 10.0
    """p99 time to first token over 5 min. Chat traffic expects ~1-2 s; a 128k-token prompt's
    prefill alone takes a few seconds on 8 B300s, so 10 s means requests are queueing, not
    that prompts are long."""
    ttft_for: timedelta = timedelta(minutes=10)
    """How long the p99 must stay high (a single burst of long prompts should not page)."""
    requests_waiting: int = 8
    """Queued requests per replica. vLLM queues once the batch is full (max-num-seqs or KV
    cache); a steady queue of 8 adds several decode steps' worth of TTFT to every new request."""
    requests_waiting_for: timedelta = timedelta(minutes=5)
    """How long the queue must stay above the threshold (bursts drain within a minute)."""
    kv_cache_usage: float = 0.95
    """KV-cache usage fraction. Above ~0.95 vLLM starts preempting running requests (recompute),
    which multiplies latency; sustained, the replica is undersized for the traffic."""
    kv_cache_for: timedelta = timedelta(minutes=10)
    """How long usage must stay above the threshold."""
    stall_window: timedelta = timedelta(minutes=5)
    """No output token generated in this window while requests are queued or running: the
    engine is wedged (hung NCCL collective, dead worker). A 1M-token prefill on its own can
    take minutes, hence not shorter."""
    replica_not_ready_for: timedelta = timedelta(minutes=5)
    """A serving pod past its startup budget that stays unready this long (failed health checks)."""
    gpu_thermal_throttle_fraction: float = 0.10
    """Fraction of time a GPU's clocks were held back for temperature over 10 min. Any sustained
    thermal throttling in a data-centre chassis points at cooling or a failing GPU; 10 % filters
    momentary events."""
    gpu_power_throttle_fraction: float = 0.50
    """Fraction of time at the power cap over 30 min. Power capping is normal under full decode
    load in short bursts; capped half the time for 30 min means the board runs below spec."""
    gpu_nodes_grace: timedelta = timedelta(minutes=20)
    """Time after the block's start before missing GPU nodes alert: the scheduled scale-up,
    instance launch and node join take about 10 minutes."""
    block_end_warning: timedelta = timedelta(hours=2)
    """Warn this long before the block's end: enough to extend it (extensions are accepted up
    to 1 hour before the end) or to drain clients before EKS scales to 0 at end - 40 min."""


@dataclass(frozen=True)
class AlertRulesArgs:
    """Inputs of :func:`prometheus_rule`."""

    block: BlockWindow
    """The block's window and reserved count (re-derived from the reservation on every run)."""
    weights_budget_s: int = 7200
    """Seconds the weights staging may take from pod start (``VllmServingArgs.weights_staging_timeout_s``)."""
    startup_budget_s: int = 7200 + 4200
    """Seconds from pod start to Ready (weights staging + ``ServingContract.startup_budget_s()``):
    before that, an unready pod is still starting, not failing."""
    serving_namespace: str = "kimi-serving"
    """Namespace of the serving pods (``VllmServingArgs.namespace``)."""
    served_model_name: str = catalog.KIMI_K3.served_model_name
    """``--served-model-name``: the ``model_name`` label of every vLLM series."""
    weights_init_containers: tuple[str, ...] = WEIGHTS_INIT_CONTAINERS
    """Init containers whose running time counts against ``weights_budget_s``."""
    thresholds: AlertThresholds = field(default_factory=AlertThresholds)
    """Alert thresholds."""
    name: str = "kimi-k3-alerts"
    """Name of the PrometheusRule object."""
    namespace: str = "monitoring"
    """Namespace of the PrometheusRule (where the Prometheus Operator looks for rules)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels the Prometheus rule selector needs (e.g. ``release: kube-prometheus-stack``)."""


def duration(value: timedelta) -> str:
    """A Prometheus duration (``90m``, ``2h``, ``45s``) for a whole number of seconds."""
    seconds = int(value.total_seconds())
    if seconds <= 0 or seconds != value.total_seconds():
        raise UserError(f"duration {value} is not accepted; expected a positive whole number of seconds")
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def epoch(moment: datetime) -> int:
    """Unix seconds of a timezone-aware datetime."""
    if moment.tzinfo is None:
        raise UserError(f"{moment.isoformat()} has no timezone; pass UTC datetimes")
    return int(moment.astimezone(UTC).timestamp())


def validate(args: AlertRulesArgs) -> None:
    """Raise :class:`UserError` for inputs that cannot make working rules."""
    b, t = args.block, args.thresholds
    if epoch(b.end) <= epoch(b.start):
        raise UserError(f"block end {b.end.isoformat()} is not after its start {b.start.isoformat()}")
    if b.reserved_instances < 1:
        raise UserError(f"reserved_instances {b.reserved_instances} is not accepted; a block reserves at least 1 instance")
    for key in ("serving_namespace", "namespace"):
        value = getattr(args, key)
        if not DNS_LABEL.fullmatch(value or ""):
            raise UserError(f"{key} {value!r} is not a valid Kubernetes namespace name")
    if not 0 < t.kv_cache_usage <= 1:
        raise UserError(f"kv_cache_usage {t.kv_cache_usage} is not accepted; expected a fraction in (0, 1] (vLLM reports 1 = 100 %)")
    for key in ("gpu_thermal_throttle_fraction", "gpu_power_throttle_fraction"):
        if not 0 < getattr(t, key) <= 1:
            raise UserError(f"{key} {getattr(t, key)} is not accepted; expected a fraction of time in (0, 1]")
    if not (math.isfinite(t.ttft_p99_s) and TTFT_P99_SECONDS[0] <= t.ttft_p99_s <= TTFT_P99_SECONDS[1]):
        raise UserError("ttft_p99_s {!r} is not accepted; expected {} to {} seconds".format(t.ttft_p99_s, *TTFT_P99_SECONDS))
    if t.requests_waiting < 1:
        raise UserError(f"requests_waiting {t.requests_waiting!r} is not accepted; expected at least 1")
    if args.weights_budget_s <= 0 or args.startup_budget_s <= 0:
        raise UserError("weights_budget_s and startup_budget_s must be positive seconds")
    if not args.weights_init_containers:
        raise UserError("weights_init_containers is empty: the weights-transfer alert would watch nothing")


def _alert(name: str, expr: str, severity: str, summary: str, description: str, for_: timedelta | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_ is not None:
        rule["for"] = duration(for_)
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description}
    return rule


def serving_rules(args: AlertRulesArgs) -> list[dict[str, Any]]:
    """vLLM latency, queue, KV cache and stall alerts, and serving pods that stay unready."""
    t = args.thresholds
    model = f'{m.VLLM_MODEL_LABEL}="{args.served_model_name}"'
    ns = f'namespace="{args.serving_namespace}"'
    window = duration(t.stall_window)
    by_pod = "sum by (namespace, pod)"
    pod_age = f"(time() - max by (namespace, pod) ({m.KSM_POD_START}{{{ns}}}))"
    return [
        _alert(
            "KimiK3TimeToFirstTokenHigh",
            f"histogram_quantile(0.99, sum by (le) (rate({m.VLLM_TTFT}_bucket{{{model}}}[5m]))) > {t.ttft_p99_s:g}",
            "warning",
            "Kimi K3 p99 time to first token is above {t}s".replace("{t}", f"{t.ttft_p99_s:g}"),
            'p99 TTFT over 5m is {{ $value | printf "%.1f" }}s: requests queue; check vllm:num_requests_waiting and KV-cache usage.',
            t.ttft_for,
        ),
        _alert(
            "KimiK3RequestsQueued",
            f"{by_pod} ({m.VLLM_WAITING}{{{model}}}) > {t.requests_waiting}",
            "warning",
            "Kimi K3 replica {{ $labels.pod }} has requests waiting",
            "{{ $value }} requests waiting on {{ $labels.pod }}: the running batch is full; add replicas or shed load.",
            t.requests_waiting_for,
        ),
        _alert(
            "KimiK3KvCacheNearlyFull",
            f"max by (namespace, pod) ({m.VLLM_KV_USAGE}{{{model}}}) > {t.kv_cache_usage:g}",
            "warning",
            "Kimi K3 replica {{ $labels.pod }} KV cache nearly full",
            'KV-cache usage on {{ $labels.pod }} is {{ $value | humanizePercentage }}: vLLM preempts requests near 100 %.',
            t.kv_cache_for,
        ),
        _alert(
            "KimiK3Stalled",
            f"({by_pod} ({m.VLLM_WAITING}{{{model}}}) + {by_pod} ({m.VLLM_RUNNING}{{{model}}})) > 0"
            f" and on (namespace, pod) {by_pod} (rate({m.VLLM_GENERATION_TOKENS}{{{model}}}[{window}])) == 0",
            "critical",
            "Kimi K3 replica {{ $labels.pod }} generates no tokens",
            "{{ $value }} requests waiting or running on {{ $labels.pod }} but no output token in " + window + ": the engine is wedged; restart the pod (its group, multi-node).",
            t.stall_window,
        ),
        _alert(
            "KimiK3ReplicaNotReady",
            f"max by (namespace, pod) ({m.KSM_POD_READY}{{{ns}, condition=\"true\"}}) == 0"
            f" and on (namespace, pod) {pod_age} > {args.startup_budget_s}",
            "critical",
            "Kimi K3 serving pod {{ $labels.pod }} is not ready",
            f"{{{{ $labels.pod }}}} is past its startup budget ({args.startup_budget_s}s) and not ready: health checks fail; see kubectl describe pod and the vllm container log.",
            t.replica_not_ready_for,
        ),
    ]


def gpu_rules(args: AlertRulesArgs) -> list[dict[str, Any]]:
    """XID, uncorrectable memory errors and thermal/power throttling from the DCGM exporter."""
    t = args.thresholds
    where = "GPU {{ $labels.gpu }} ({{ $labels.UUID }}) on {{ $labels.Hostname }}{{ $labels.hostname }}"
    return [
        _alert(
            "KimiK3GpuXidError",
            f"{m.DCGM_XID} > 0",
            "critical",
            "XID error on " + where,
            "Last XID is {{ $value }}: check dmesg on the node; XIDs 48, 63, 64, 74, 79, 94, 95 need a node repair or replacement.",
        ),
        _alert(
            "KimiK3GpuUncorrectableMemoryError",
            f"increase({m.DCGM_ECC_DBE}[10m]) > 0 or {m.DCGM_ROW_REMAP_FAILURE} > 0"
            f" or increase({m.DCGM_UNCORRECTABLE_REMAPPED_ROWS}[10m]) > 0",
            "critical",
            "Uncorrectable memory error on " + where,
            "Double-bit ECC errors, remapped rows or a failed row remap: the GPU needs a reset; replace the node if it repeats.",
        ),
        _alert(
            "KimiK3GpuThermalThrottling",
            f"rate({m.DCGM_THERMAL_VIOLATION}[10m]) / 1e9 > {t.gpu_thermal_throttle_fraction:g}",
            "warning",
            "Thermal throttling on " + where,
            'Clocks held back for temperature {{ $value | humanizePercentage }} of the time: cooling or hardware problem.',
            timedelta(minutes=10),
        ),
        _alert(
            "KimiK3GpuPowerThrottling",
            f"rate({m.DCGM_POWER_VIOLATION}[30m]) / 1e9 > {t.gpu_power_throttle_fraction:g}",
            "info",
            "Power throttling on " + where,
            'At the power cap {{ $value | humanizePercentage }} of the time over 30m: the board runs below its rated clocks.',
            timedelta(minutes=30),
        ),
    ]


def block_rules(args: AlertRulesArgs) -> list[dict[str, Any]]:
    """Ready GPU nodes below the reserved count after the start, the end approaching, weights staging over budget."""
    b, t = args.block, args.thresholds
    start, end = epoch(b.start), epoch(b.end)
    check_from = start + int(t.gpu_nodes_grace.total_seconds())
    check_until = end - int(EKS_SCALEDOWN_BEFORE_END.total_seconds())
    ready_gpu_nodes = (
        f'count({m.KSM_NODE_CONDITION}{{condition="Ready", status="true"}} == 1'
        f' and on (node) {m.KSM_NODE_ALLOCATABLE}{{resource="{m.GPU_RESOURCE_LABEL_VALUE}"}} > 0) or vector(0)'
    )
    ns = f'namespace="{args.serving_namespace}"'
    containers = "|".join(args.weights_init_containers)
    warn_s = int(t.block_end_warning.total_seconds())
    end_utc = b.end.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return [
        _alert(
            "KimiK3GpuNodesMissing",
            f"({ready_gpu_nodes}) < {b.reserved_instances}"
            f" and on () vector(time()) > {check_from} and on () vector(time()) < {check_until}",
            "critical",
            f"Fewer Ready GPU nodes than the {b.reserved_instances} reserved",
            f"{{{{ $value }}}} of {b.reserved_instances} reserved GPU nodes are Ready {duration(t.gpu_nodes_grace)} after the block's start: "
            "check the node group's Auto Scaling activity and `kimi-k3 capacity status`.",
        ),
        _alert(
            "KimiK3CapacityBlockEndingSoon",
            f"(vector({end}) - time()) < {warn_s} > 0",
            "warning",
            f"The Capacity Block ends at {end_utc}",
            'The block ends in {{ $value | humanizeDuration }}; EKS scales the GPU nodes to 0 40 minutes before the end. Extend it (kimi-k3 capacity extend-offerings) or drain clients.',
        ),
        _alert(
            "KimiK3WeightsTransferOverBudget",
            f"(time() - max by (namespace, pod) ({m.KSM_POD_START}{{{ns}}})) > {args.weights_budget_s}"
            f' and on (namespace, pod) max by (namespace, pod) ({m.KSM_INIT_RUNNING}{{{ns}, container=~"{containers}"}}) == 1',
            "warning",
            "Weights staging of {{ $labels.pod }} runs past its budget",
            f"{{{{ $labels.pod }}}} has been staging the weights for {{{{ $value | humanizeDuration }}}} (budget {args.weights_budget_s}s): "
            "check the fetch-weights log for throughput and errors.",
        ),
    ]


def rule_groups(args: AlertRulesArgs) -> list[dict[str, Any]]:
    """The three rule groups (validated inputs), in the Prometheus rule-file format."""
    validate(args)
    return [
        {"name": "kimi-k3-serving", "rules": serving_rules(args)},
        {"name": "kimi-k3-gpu", "rules": gpu_rules(args)},
        {"name": "kimi-k3-capacity-block", "rules": block_rules(args)},
    ]


def rules_file(args: AlertRulesArgs) -> dict[str, Any]:
    """A Prometheus rule file (``promtool check rules`` input) with :func:`rule_groups`."""
    return {"groups": rule_groups(args)}


def prometheus_rule(args: AlertRulesArgs) -> dict[str, Any]:
    """The ``monitoring.coreos.com/v1`` ``PrometheusRule`` object holding :func:`rule_groups`."""
    groups = rule_groups(args)
    labels = {"app.kubernetes.io/part-of": "kimi-k3", **args.labels}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": args.name, "namespace": args.namespace, "labels": labels},
        "spec": {"groups": groups},
    }


def alert_names(args: AlertRulesArgs) -> tuple[str, ...]:
    """Names of every alert :func:`rule_groups` renders."""
    return tuple(rule["alert"] for group in rule_groups(args) for rule in group["rules"])
