"""The stack declares its alerts, dashboard, DCGM counters and delivery check, keyed on the reservation (mock engine).

prod sets ``kimi-k3:prometheusOperatorEnabled``; dev does not. The PrometheusRule and the
ConfigMap of the prod plan also go through the stack-wide schema and checkov tests
(tests/test_platform.py); here: what they say, that promtool accepts the rules the stack
declares, and that an extended reservation re-derives them.
"""

from __future__ import annotations

import json
from datetime import timedelta

from kimi_k3 import offline
from kimi_k3.observability import alerts, dashboard
from kimi_k3.observability.dcgm_counters import ENABLED_BEYOND_DEFAULT
from kimi_k3.stack.settings import from_values
from tests import promtool
from tests.builders import stack_config
from tests.conftest import NOW, fixture_for

RELEASE = "kubernetes:helm.sh/v3:Release"
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
SCHEDULE = "aws:scheduler/schedule:Schedule"


def objects(plan: offline.PlanResult, kind: str) -> list[dict]:
    return [m for m in plan.kubernetes_objects() if m["kind"] == kind]


def rule_of(plan: offline.PlanResult) -> dict:
    (rule,) = objects(plan, "PrometheusRule")
    return rule


def alert(rule: dict, name: str) -> dict:
    return next(r for g in rule["spec"]["groups"] for r in g["rules"] if r["alert"] == name)


def dcgm_values(plan: offline.PlanResult) -> dict:
    return plan.one(RELEASE, "dcgm-exporter").plain_inputs["values"]


# --------------------------------------------------------------------------- alerts and dashboard


def test_prod_declares_the_rules_where_kube_prometheus_stack_loads_them(prod_plan):
    rule = rule_of(prod_plan)
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "monitoring"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    names = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert {"KimiK3TimeToFirstTokenHigh", "KimiK3GpuXidError", "KimiK3GpuNodesMissing", "KimiK3CapacityBlockEndingSoon", "KimiK3WeightsTransferOverBudget"} <= names
    assert prod_plan.one("kimi-k3:index:ServingMonitoring")
    assert prod_plan.plain_outputs()["alertRules"] == "kimi-k3-alerts"


def test_the_rules_carry_the_reservations_window_count_and_the_serving_budgets(prod_plan):
    rule = rule_of(prod_plan)
    block = prod_plan.reservation
    end = alerts.epoch(block.end)
    assert f"vector({end})" in alert(rule, "KimiK3CapacityBlockEndingSoon")["expr"]
    missing = alert(rule, "KimiK3GpuNodesMissing")["expr"]
    assert f"< {block.instance_count} and" in missing
    assert f"> {alerts.epoch(block.start) + 20 * 60}" in missing and f"< {end - 40 * 60}" in missing
    budget = 7200 + prod_plan.settings.serving.contract.startup_budget_s()
    assert f"> {budget}" in alert(rule, "KimiK3ReplicaNotReady")["expr"]
    assert 'namespace="kimi-serving"' in alert(rule, "KimiK3ReplicaNotReady")["expr"]
    assert "> 10" in alert(rule, "KimiK3TimeToFirstTokenHigh")["expr"]


def test_promtool_accepts_the_rules_the_stack_declares(prod_plan, tmp_path):
    proc = promtool.check_rules({"groups": rule_of(prod_plan)["spec"]["groups"]}, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_dashboard_configmap_is_for_grafanas_sidecar_and_counts_down_to_the_blocks_end(prod_plan):
    (cm,) = [m for m in objects(prod_plan, "ConfigMap") if m["metadata"]["name"] == "kimi-k3-dashboard"]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1" and cm["metadata"]["namespace"] == "monitoring"
    board = json.loads(cm["data"]["kimi-k3.json"])
    expressions = dashboard.panel_expressions(board)
    assert f"vector({alerts.epoch(prod_plan.reservation.end)}) - time()" in expressions
    assert f"vector({prod_plan.reservation.instance_count})" in expressions


def test_an_extended_block_re_derives_rules_and_dashboard_on_the_next_run(prod_plan):
    before = prod_plan.reservation
    extended = offline.run_stack(
        "prod", now=NOW, reservation=lambda s: fixture_for(s, availability_zone="us-west-2b", state="active", duration=before.duration + timedelta(days=7)),
    )
    new_end = alerts.epoch(before.end + timedelta(days=7))
    assert f"vector({new_end})" in alert(rule_of(extended), "KimiK3CapacityBlockEndingSoon")["expr"]
    assert f"< {new_end - 40 * 60}" in alert(rule_of(extended), "KimiK3GpuNodesMissing")["expr"]
    (cm,) = [m for m in objects(extended, "ConfigMap") if m["metadata"]["name"] == "kimi-k3-dashboard"]
    assert f"vector({new_end}) - time()" in dashboard.panel_expressions(json.loads(cm["data"]["kimi-k3.json"]))
    assert extended.plain_outputs()["capacityBlock"]["end"] == (before.end + timedelta(days=7)).isoformat()


def test_with_the_operator_vllm_and_dcgm_are_scraped_through_labelled_service_monitors(prod_plan):
    (monitor,) = objects(prod_plan, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["metadata"]["namespace"] == "kimi-serving"
    values = dcgm_values(prod_plan)
    assert values["serviceMonitor"]["enabled"] is True
    assert values["serviceMonitor"]["additionalLabels"] == {"release": "kube-prometheus-stack"}


def test_the_dcgm_exporter_exports_the_counters_the_gpu_alerts_read_in_every_stack(dev_plan, prod_plan):
    for plan in (dev_plan, prod_plan):
        counters = dcgm_values(plan)["customMetrics"]
        for field_name in ENABLED_BEYOND_DEFAULT:
            assert any(line.startswith(f"{field_name},") for line in counters.splitlines()), field_name


def test_without_the_operator_nothing_needs_its_crds(dev_plan):
    assert not objects(dev_plan, "PrometheusRule") and not objects(dev_plan, "ServiceMonitor")
    assert not [m for m in objects(dev_plan, "ConfigMap") if m["metadata"]["name"] == "kimi-k3-dashboard"]
    assert dcgm_values(dev_plan)["serviceMonitor"] == {"enabled": False}
    assert dev_plan.plain_outputs()["alertRules"] is None


def test_the_monitoring_keys_reach_the_objects():
    plan = offline.run_stack("dev", now=NOW, reservation=fixture_for, config_overrides={
        "kimi-k3:prometheusOperatorEnabled": True,
        "kimi-k3:prometheusSelectorLabels": ["release=prom", "team=ml"],
        "kimi-k3:monitoringNamespace": "observability",
        "kimi-k3:grafanaDashboardNamespace": "grafana",
        "kimi-k3:alertTtftP99Seconds": 30,
    })
    rule = rule_of(plan)
    assert rule["metadata"]["namespace"] == "observability"
    assert {"release": "prom", "team": "ml"}.items() <= rule["metadata"]["labels"].items()
    assert "> 30" in alert(rule, "KimiK3TimeToFirstTokenHigh")["expr"]
    (cm,) = [m for m in objects(plan, "ConfigMap") if m["metadata"]["name"] == "kimi-k3-dashboard"]
    assert cm["metadata"]["namespace"] == "grafana"
    # the serving pods admit scrapes from the monitoring namespace
    policies = [m for m in objects(plan, "NetworkPolicy") if m["metadata"]["namespace"] == "kimi-serving"]
    assert "observability" in json.dumps(policies)


def test_the_operator_turns_the_service_monitors_on_and_the_dashboard_namespace_follows_the_monitoring_one():
    s = from_values(stack_config(prometheusOperatorEnabled="true", serviceMonitorEnabled="false", monitoringNamespace="prom"), {"kimi-k3:apiKey"})
    assert s.serving.service_monitor_enabled is True
    assert s.monitoring.dashboard_namespace == "prom"


# --------------------------------------------------------------------------- the delivery check


def test_a_scheduled_block_gets_a_delivery_alarm_switched_on_20_minutes_after_its_start(dev_plan):
    block = dev_plan.reservation
    alarm = dev_plan.one(ALARM).plain_inputs
    asg = dev_plan.one("aws:eks/nodeGroup:NodeGroup", "gpu-ng").outputs["resources"][0]["autoscalingGroups"][0]["name"]
    topic = dev_plan.one("aws:sns/topic:Topic").outputs["arn"]
    assert alarm["dimensions"] == {"AutoScalingGroupName": asg}
    assert alarm["metricName"] == "GroupInServiceInstances" and alarm["comparisonOperator"] == "LessThanThreshold"
    assert alarm["threshold"] == block.instance_count and alarm["alarmActions"] == [topic]
    assert alarm["actionsEnabled"] is False
    switch = next(r.plain_inputs for r in dev_plan.by_type(SCHEDULE) if r.name.endswith("enable-alarm-actions"))
    assert switch["scheduleExpression"] == f"at({block.start + timedelta(minutes=20):%Y-%m-%dT%H:%M:%S})"
    assert dev_plan.plain_outputs()["deliveryCheckAlarm"] == alarm["name"]


def test_a_block_that_started_an_hour_ago_has_the_alarm_live_and_no_switch_on():
    plan = offline.run_stack("dev", now=NOW, reservation=lambda s: fixture_for(s, start=NOW - timedelta(hours=1), state="active"))
    assert plan.one(ALARM).plain_inputs["actionsEnabled"] is True
    # only the switch-off at EKS's scale-down before the block's end (issue 21, point 6)
    assert sorted(r.name for r in plan.by_type(SCHEDULE)) == ["kimi-k3-delivery-check-disable-alarm-actions", "kimi-k3-delivery-check-enable-group-metrics"]


def test_the_delivery_check_can_be_turned_off():
    plan = offline.run_stack("dev", now=NOW, reservation=fixture_for, config_overrides={"kimi-k3:deliveryCheckEnabled": False})
    assert not plan.by_type(ALARM) and not plan.by_type("kimi-k3:index:DeliveryCheck")
    assert plan.plain_outputs()["deliveryCheckAlarm"] is None
