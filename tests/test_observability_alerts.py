"""The PrometheusRule: every alert fires on synthetic series and stays quiet otherwise (real promtool).

Each alert gets a ``promtool test rules`` case that fires and one or more that must stay
quiet; the rules are also linted with ``promtool check rules``, the PrometheusRule object
is validated against the CRD schema of prometheus-operator v0.93.0 and scanned by checkov.
promtool evaluates from t=0 (the unix epoch), so the test block starts at 01:00 on
1970-01-01: the window is an input, like the real block's.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import pytest

from kimi_k3.errors import UserError
from kimi_k3.observability import alerts, metrics
from tests import k8s_checks, promtool
from tests.conftest import DATA
from tests.fresh_process import output_of

UTC = UTC
START = datetime(1970, 1, 1, 1, 0, tzinfo=UTC)
END = START + timedelta(days=1)
BLOCK = alerts.BlockWindow(start=START, end=END, reserved_instances=2)
ARGS = alerts.AlertRulesArgs(block=BLOCK, weights_budget_s=1800, startup_budget_s=1800, labels={"release": "kube-prometheus-stack"})

VLLM = 'model_name="Kimi-K3", engine="0", namespace="kimi-serving", pod="kimi-0", job="kimi", instance="10.0.1.5:8000"'
VLLM_LABELS = {"namespace": "kimi-serving", "pod": "kimi-0"}
POD = 'namespace="kimi-serving", pod="kimi-0", uid="0c5a"'  # kube-state-metrics labels of the same pod
GPU = 'gpu="3", UUID="GPU-5e1f", Hostname="ip-10-0-1-5", modelName="NVIDIA B300"'
GPU_LABELS = {"gpu": "3", "UUID": "GPU-5e1f", "Hostname": "ip-10-0-1-5", "modelName": "NVIDIA B300"}
GPU_WHERE = "GPU 3 (GPU-5e1f) on ip-10-0-1-5"


def series(name: str, labels: str, values: str) -> dict:
    return {"series": f"{name}{{{labels}}}", "values": values}


POD_STARTED = series(metrics.KSM_POD_START, POD, "0x60")  # kimi-0 started at time 0


def case(series_list, *checks) -> dict:
    """One promtool test group: input series (1m apart) and (eval_time, alert, expected alerts) checks."""
    return {
        "interval": "1m",
        "input_series": list(series_list),
        "alert_rule_test": [{"eval_time": at, "alertname": name, "exp_alerts": expected} for at, name, expected in checks],
    }


def fired(severity: str, labels: dict, summary: str, description: str) -> list[dict]:
    return [{"exp_labels": {"severity": severity, **labels}, "exp_annotations": {"summary": summary, "description": description}}]


def run_cases(tmp_path, tests: list[dict], args: alerts.AlertRulesArgs = ARGS) -> None:
    proc = promtool.run_rule_tests(alerts.rules_file(args), tests, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def ttft_buckets(per_minute_slow: int, per_minute_fast: int, model: str = "Kimi-K3") -> list[dict]:
    labels = VLLM.replace('model_name="Kimi-K3"', f'model_name="{model}"')
    name = f"{metrics.VLLM_TTFT}_bucket"
    fast, total = per_minute_fast, per_minute_fast + per_minute_slow
    return [
        series(name, f'{labels}, le="1"', f"0+{fast}x40"),
        series(name, f'{labels}, le="10"', f"0+{fast}x40"),
        series(name, f'{labels}, le="20"', f"0+{total}x40"),
        series(name, f'{labels}, le="+Inf"', f"0+{total}x40"),
    ]


# --------------------------------------------------------------------------- lint, schema, scanner


def test_promtool_accepts_the_rules(tmp_path):
    proc = promtool.check_rules(alerts.rules_file(ARGS), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(alerts.alert_names(ARGS))} rules found" in proc.stdout


def test_every_alert_of_the_issue_is_rendered():
    assert alerts.alert_names(ARGS) == (
        "KimiK3TimeToFirstTokenHigh", "KimiK3RequestsQueued", "KimiK3KvCacheNearlyFull", "KimiK3Stalled",
        "KimiK3ReplicaNotReady", "KimiK3GpuXidError", "KimiK3GpuUncorrectableMemoryError",
        "KimiK3GpuThermalThrottling", "KimiK3GpuPowerThrottling", "KimiK3GpuNodesMissing",
        "KimiK3CapacityBlockEndingSoon", "KimiK3WeightsTransferOverBudget",
    )


def test_current_vllm_metric_names_only():
    text = json.dumps(alerts.rules_file(ARGS))
    for name in (metrics.VLLM_TTFT, metrics.VLLM_WAITING, metrics.VLLM_KV_USAGE, metrics.VLLM_GENERATION_TOKENS):
        assert name in text
    for deprecated in metrics.DEPRECATED_VLLM:
        assert deprecated not in text


def test_prometheus_rule_matches_the_crd_schema_and_selector_labels():
    manifest = alerts.prometheus_rule(ARGS)
    k8s_checks.validate_manifest(manifest, "1.34")
    assert manifest["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert manifest["metadata"]["namespace"] == "monitoring"
    broken = json.loads(json.dumps(manifest))
    broken["spec"]["groups"][0]["interval"] = "five minutes"
    with pytest.raises(jsonschema.ValidationError):
        k8s_checks.validate_manifest(broken, "1.34")


def test_crd_schema_is_the_vendored_prometheus_operator_one():
    schema = json.loads((DATA / "prometheusrule-v1.schema.json").read_text())
    rule = schema["properties"]["spec"]["properties"]["groups"]["items"]["properties"]["rules"]["items"]
    assert rule["required"] == ["expr"] and {"alert", "record", "for", "keep_firing_for"} <= set(rule["properties"])


def test_checkov_finds_nothing_to_fix(tmp_path):
    report = k8s_checks.checkov_scan(k8s_checks.write_manifests([alerts.prometheus_rule(ARGS)], tmp_path / "m"))
    assert report["failed"] == []


# --------------------------------------------------------------------------- serving


def test_ttft_p99_fires_when_requests_are_slow_and_not_when_fast(tmp_path):
    summary = "Kimi K3 p99 time to first token is above 10s"
    description = "p99 TTFT over 5m is 19.9s: requests queue; check vllm:num_requests_waiting and KV-cache usage."
    run_cases(tmp_path, [
        case(ttft_buckets(per_minute_slow=10, per_minute_fast=0),
             ("8m", "KimiK3TimeToFirstTokenHigh", []),  # high for 7 min only: within `for: 10m`
             ("20m", "KimiK3TimeToFirstTokenHigh", fired("warning", {}, summary, description))),
        case(ttft_buckets(per_minute_slow=0, per_minute_fast=30), ("20m", "KimiK3TimeToFirstTokenHigh", [])),
        case(ttft_buckets(per_minute_slow=10, per_minute_fast=0, model="other-model"), ("20m", "KimiK3TimeToFirstTokenHigh", [])),
    ])


def test_ttft_threshold_is_an_input(tmp_path):
    relaxed = replace(ARGS, thresholds=alerts.AlertThresholds(ttft_p99_s=30))
    run_cases(tmp_path, [case(ttft_buckets(per_minute_slow=10, per_minute_fast=0), ("20m", "KimiK3TimeToFirstTokenHigh", []))], relaxed)


def test_requests_queued_fires_on_a_sustained_queue_only(tmp_path):
    desc = "20 requests waiting on kimi-0: the running batch is full; add replicas or shed load."
    run_cases(tmp_path, [
        case([series(metrics.VLLM_WAITING, VLLM, "20x15")],
             ("3m", "KimiK3RequestsQueued", []),
             ("10m", "KimiK3RequestsQueued", fired("warning", VLLM_LABELS, "Kimi K3 replica kimi-0 has requests waiting", desc))),
        case([series(metrics.VLLM_WAITING, VLLM, "5x15")], ("10m", "KimiK3RequestsQueued", [])),
        case([series(metrics.VLLM_WAITING, VLLM, "20 20 20 0x12")], ("10m", "KimiK3RequestsQueued", [])),
    ])


def test_kv_cache_nearly_full(tmp_path):
    desc = "KV-cache usage on kimi-0 is 97%: vLLM preempts requests near 100 %."
    run_cases(tmp_path, [
        case([series(metrics.VLLM_KV_USAGE, VLLM, "0.97x20")],
             ("15m", "KimiK3KvCacheNearlyFull", fired("warning", VLLM_LABELS, "Kimi K3 replica kimi-0 KV cache nearly full", desc))),
        case([series(metrics.VLLM_KV_USAGE, VLLM, "0.90x20")], ("15m", "KimiK3KvCacheNearlyFull", [])),
    ])


def test_stall_fires_when_requests_wait_and_no_token_is_generated(tmp_path):
    desc = ("5 requests waiting or running on kimi-0 but no output token in 5m: the engine is wedged; "
            "restart the pod (its group, multi-node).")
    busy = [series(metrics.VLLM_WAITING, VLLM, "3x20"), series(metrics.VLLM_RUNNING, VLLM, "2x20")]
    run_cases(tmp_path, [
        case([*busy, series(metrics.VLLM_GENERATION_TOKENS, VLLM, "1000x20")],
             ("15m", "KimiK3Stalled", fired("critical", VLLM_LABELS, "Kimi K3 replica kimi-0 generates no tokens", desc))),
        # tokens flow: busy but healthy
        case([*busy, series(metrics.VLLM_GENERATION_TOKENS, VLLM, "1000+600x20")], ("15m", "KimiK3Stalled", [])),
        # idle: nothing waiting or running, no tokens
        case([series(metrics.VLLM_WAITING, VLLM, "0x20"), series(metrics.VLLM_RUNNING, VLLM, "0x20"),
              series(metrics.VLLM_GENERATION_TOKENS, VLLM, "1000x20")], ("15m", "KimiK3Stalled", [])),
    ])


def test_replica_not_ready_only_after_the_startup_budget(tmp_path):
    desc = ("kimi-0 is past its startup budget (1800s) and not ready: health checks fail; "
            "see kubectl describe pod and the vllm container log.")
    run_cases(tmp_path, [
        case([POD_STARTED, series(metrics.KSM_POD_READY, f'{POD}, condition="true"', "0x60")],
             ("25m", "KimiK3ReplicaNotReady", []),  # still within the startup budget
             ("40m", "KimiK3ReplicaNotReady", fired("critical", VLLM_LABELS, "Kimi K3 serving pod kimi-0 is not ready", desc))),
        case([POD_STARTED, series(metrics.KSM_POD_READY, f'{POD}, condition="true"', "1x60")], ("40m", "KimiK3ReplicaNotReady", [])),
        case([series(metrics.KSM_POD_START, POD.replace("kimi-serving", "other"), "0x60"),
              series(metrics.KSM_POD_READY, f'{POD.replace("kimi-serving", "other")}, condition="true"', "0x60")],
             ("40m", "KimiK3ReplicaNotReady", [])),
    ])


# --------------------------------------------------------------------------- GPU


def test_xid_error(tmp_path):
    desc = "Last XID is 79: check dmesg on the node; XIDs 48, 63, 64, 74, 79, 94, 95 need a node repair or replacement."
    run_cases(tmp_path, [
        case([series(metrics.DCGM_XID, GPU, "0 0 79 79 79")],
             ("1m", "KimiK3GpuXidError", []),
             ("3m", "KimiK3GpuXidError", fired("critical", GPU_LABELS, f"XID error on {GPU_WHERE}", desc))),
        case([series(metrics.DCGM_XID, GPU, "0x5")], ("3m", "KimiK3GpuXidError", [])),
    ])


def test_uncorrectable_memory_errors(tmp_path):
    desc = "Double-bit ECC errors, remapped rows or a failed row remap: the GPU needs a reset; replace the node if it repeats."
    summary = f"Uncorrectable memory error on {GPU_WHERE}"
    healthy = [series(metrics.DCGM_ECC_DBE, GPU, "0x10"), series(metrics.DCGM_ROW_REMAP_FAILURE, GPU, "0x10"),
               series(metrics.DCGM_UNCORRECTABLE_REMAPPED_ROWS, GPU, "0x10")]
    run_cases(tmp_path, [
        case([series(metrics.DCGM_ECC_DBE, GPU, "0 0 0 1 1 1 1 1 1 1")],
             ("5m", "KimiK3GpuUncorrectableMemoryError", fired("critical", GPU_LABELS, summary, desc))),
        case([series(metrics.DCGM_ROW_REMAP_FAILURE, GPU, "0 0 1 1 1 1")],
             ("4m", "KimiK3GpuUncorrectableMemoryError",
              fired("critical", GPU_LABELS, summary, desc))),
        case(healthy, ("8m", "KimiK3GpuUncorrectableMemoryError", [])),
    ])


@pytest.mark.parametrize(
    ("metric", "alert", "at", "throttled", "below", "severity", "summary", "desc"),
    [
        # 0.3 s of thermal throttling per second = 1.8e10 ns per minute; 0.05 s/s stays quiet
        (metrics.DCGM_THERMAL_VIOLATION, "KimiK3GpuThermalThrottling", "25m", "0+18000000000x40", "0+3000000000x40", "warning",
         f"Thermal throttling on {GPU_WHERE}", "Clocks held back for temperature 30% of the time: cooling or hardware problem."),
        # 0.6 s/s at the power cap fires; 0.3 s/s stays quiet
        (metrics.DCGM_POWER_VIOLATION, "KimiK3GpuPowerThrottling", "70m", "0+36000000000x100", "0+18000000000x100", "info",
         f"Power throttling on {GPU_WHERE}", "At the power cap 60% of the time over 30m: the board runs below its rated clocks."),
    ],
    ids=["thermal", "power"],
)
def test_throttling_fires_only_above_its_share_of_time(tmp_path, metric, alert, at, throttled, below, severity, summary, desc):
    run_cases(tmp_path, [
        case([series(metric, GPU, throttled)], (at, alert, fired(severity, GPU_LABELS, summary, desc))),
        case([series(metric, GPU, below)], (at, alert, [])),
    ])


# --------------------------------------------------------------------------- Capacity Block


def ready(node: str, values: str = "1x1600") -> dict:
    return series(metrics.KSM_NODE_CONDITION, f'node="{node}", condition="Ready", status="true"', values)


def gpus(node: str, count: int = 8) -> dict:
    return series(metrics.KSM_NODE_ALLOCATABLE, f'node="{node}", resource="nvidia_com_gpu", unit="integer"', f"{count}x1600")


NODES_SUMMARY = "Fewer Ready GPU nodes than the 2 reserved"


def nodes_desc(n: int) -> str:
    return (f"{n} of 2 reserved GPU nodes are Ready 20m after the block's start: "
            "check the node group's Auto Scaling activity and `kimi-k3 capacity status`.")


def test_gpu_nodes_missing_after_the_grace_period(tmp_path):
    system_node = [ready("sys-1"), series(metrics.KSM_NODE_ALLOCATABLE, 'node="sys-1", resource="cpu", unit="core"', "4x1600")]
    run_cases(tmp_path, [
        case([*system_node, ready("gpu-1"), gpus("gpu-1")],
             ("70m", "KimiK3GpuNodesMissing", []),  # block started 10 min ago: still within the grace period
             ("90m", "KimiK3GpuNodesMissing", fired("critical", {}, NODES_SUMMARY, nodes_desc(1))),
             ("24h30m", "KimiK3GpuNodesMissing", [])),  # past end - 40 min: EKS has scaled the group to 0
        case(system_node, ("90m", "KimiK3GpuNodesMissing", fired("critical", {}, NODES_SUMMARY, nodes_desc(0)))),
        case([*system_node, ready("gpu-1"), gpus("gpu-1"), ready("gpu-2", "0x1600"), gpus("gpu-2")],
             ("90m", "KimiK3GpuNodesMissing", fired("critical", {}, NODES_SUMMARY, nodes_desc(1)))),  # NotReady does not count
        case([*system_node, ready("gpu-1"), gpus("gpu-1"), ready("gpu-2"), gpus("gpu-2")], ("90m", "KimiK3GpuNodesMissing", [])),
    ])


def test_block_end_approaching(tmp_path):
    desc = ("The block ends in 1h 30m 0s; EKS scales the GPU nodes to 0 40 minutes before the end. "
            "Extend it (kimi-k3 capacity extend-offerings) or drain clients.")
    run_cases(tmp_path, [
        case([], ("22h50m", "KimiK3CapacityBlockEndingSoon", []),
             ("23h30m", "KimiK3CapacityBlockEndingSoon", fired("warning", {}, "The Capacity Block ends at 1970-01-02 01:00 UTC", desc)),
             ("25h10m", "KimiK3CapacityBlockEndingSoon", [])),
    ])


def test_an_extension_moves_every_end_keyed_alert(tmp_path):
    extended = replace(ARGS, block=replace(BLOCK, end=END + timedelta(days=1)))
    run_cases(tmp_path, [
        case([], ("23h30m", "KimiK3CapacityBlockEndingSoon", [])),
        case([ready("gpu-1", "1x1600"), gpus("gpu-1")],  # 24h30m: past the old end - 40 min, inside the extended block
             ("24h30m", "KimiK3GpuNodesMissing", fired("critical", {}, NODES_SUMMARY, nodes_desc(1)))),
    ], extended)


def test_weights_transfer_over_budget(tmp_path):
    desc = ("kimi-0 has been staging the weights for 40m 0s (budget 1800s): "
            "check the fetch-weights log for throughput and errors.")
    run_cases(tmp_path, [
        case([POD_STARTED, series(metrics.KSM_INIT_RUNNING, f'{POD}, container="fetch-weights"', "1x60")],
             ("20m", "KimiK3WeightsTransferOverBudget", []),
             ("40m", "KimiK3WeightsTransferOverBudget",
              fired("warning", VLLM_LABELS, "Weights staging of kimi-0 runs past its budget", desc))),
        case([POD_STARTED, series(metrics.KSM_INIT_RUNNING, f'{POD}, container="fetch-weights"', "0x60"),
              series(metrics.KSM_INIT_RUNNING, f'{POD}, container="verify-weights"', "1x60")],
             ("40m", "KimiK3WeightsTransferOverBudget",
              fired("warning", VLLM_LABELS, "Weights staging of kimi-0 runs past its budget", desc))),
        case([POD_STARTED, series(metrics.KSM_INIT_RUNNING, f'{POD}, container="fetch-weights"', "0x60"),
              series(metrics.KSM_INIT_RUNNING, f'{POD}, container="verify-weights"', "0x60")],
             ("40m", "KimiK3WeightsTransferOverBudget", [])),  # staging done: the engine is loading
    ])


# --------------------------------------------------------------------------- harness and inputs


def test_the_harness_fails_when_an_expected_alert_does_not_fire(tmp_path):
    proc = promtool.run_rule_tests(alerts.rules_file(ARGS), [
        case([series(metrics.DCGM_XID, GPU, "0x5")],
             ("3m", "KimiK3GpuXidError", fired("critical", GPU_LABELS, f"XID error on {GPU_WHERE}", "x"))),
    ], tmp_path)
    assert proc.returncode != 0 and "KimiK3GpuXidError" in proc.stdout + proc.stderr


def test_weights_init_container_names_match_the_serving_pods():
    from kimi_k3.serving import pod_kit

    source = Path(pod_kit.__file__).read_text()
    for name in alerts.WEIGHTS_INIT_CONTAINERS:
        assert f'name="{name}"' in source


@pytest.mark.parametrize("change,message", [
    (dict(block=alerts.BlockWindow(END, START, 2)), "is not after its start"),
    (dict(block=alerts.BlockWindow(START, END, 0)), "reserved_instances 0 is not accepted"),
    (dict(block=alerts.BlockWindow(START.replace(tzinfo=None), END, 2)), "has no timezone"),
    (dict(thresholds=alerts.AlertThresholds(kv_cache_usage=95)), "kv_cache_usage 95 is not accepted; expected a fraction"),
    (dict(serving_namespace="Kimi_Serving"), "serving_namespace 'Kimi_Serving' is not a valid Kubernetes namespace"),
    (dict(weights_init_containers=()), "weights_init_containers is empty"),
])
def test_bad_inputs_are_refused_with_one_line(change, message):
    with pytest.raises(UserError, match=message):
        alerts.prometheus_rule(replace(ARGS, **change))


def test_same_inputs_give_identical_output_in_another_process():
    """Two runs of a stack (two processes, other hash seeds) render the same PrometheusRule, byte for byte."""
    code = "import json; from kimi_k3.observability import alerts; from tests.test_observability_alerts import ARGS; print(json.dumps(alerts.prometheus_rule(ARGS)))"
    here = json.dumps(alerts.prometheus_rule(ARGS))
    assert output_of(code, hash_seed=1).strip() == here == output_of(code, hash_seed=2).strip()
