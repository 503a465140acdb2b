"""DeliveryCheck under the offline engine: the ASG alarm, its metric collection and its switch-on time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from kimi_k3 import offline
from kimi_k3.capacity import delivery_check
from kimi_k3.capacity.delivery_check import DeliveryCheck, DeliveryCheckArgs, cloudwatch_key_statement, cloudwatch_topic_statement
from kimi_k3.capacity.scaling import SCALE_UP_MARGIN
from kimi_k3.cli import main
from kimi_k3.errors import UserError
from tests.resource_types import METRIC_ALARM as ALARM
from tests.resource_types import ROLE_POLICY as POLICY
from tests.resource_types import SCHEDULER_SCHEDULE as SCHEDULE

START = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
END = START + timedelta(days=7)
ASG = "eks-gpu-ng-2f6b0c8e-0d3a-5c3e-9a43-0d8f3b3f4a11"
TOPIC = "arn:aws:sns:us-east-1:123456789012:gpu-alerts"


def run(now: datetime, **changes) -> offline.PlanResult:
    values = dict(asg_name=ASG, reserved_instances=2, block_start=START, block_end=END, alert_topic_arn=TOPIC, now=now)
    values.update(changes)
    return offline.OfflineEngine(now=now).run(lambda: DeliveryCheck("delivery", DeliveryCheckArgs(**values)))


@pytest.fixture(scope="module")
def before_start() -> offline.PlanResult:
    return run(START - timedelta(days=1))


def test_alarm_on_in_service_instances_of_the_node_group_asg(before_start):
    alarm = before_start.one(ALARM).plain_inputs
    assert (alarm["namespace"], alarm["metricName"]) == ("AWS/AutoScaling", "GroupInServiceInstances")
    assert alarm["dimensions"] == {"AutoScalingGroupName": ASG}
    assert (alarm["comparisonOperator"], alarm["threshold"]) == ("LessThanThreshold", 2.0)
    assert (alarm["statistic"], alarm["period"], alarm["evaluationPeriods"], alarm["datapointsToAlarm"]) == ("Maximum", 60, 5, 5)
    assert alarm["treatMissingData"] == "breaching"
    assert alarm["alarmActions"] == [TOPIC] and alarm["okActions"] == [TOPIC]


def test_before_start_plus_grace_the_alarm_is_silent_and_a_schedule_switches_it_on(before_start):
    alarm = before_start.one(ALARM).plain_inputs
    assert alarm["actionsEnabled"] is False
    switch = before_start.one(SCHEDULE, "delivery-enable-alarm-actions").plain_inputs
    assert switch["scheduleExpression"] == "at(2026-12-01T11:50:00)" and switch["scheduleExpressionTimezone"] == "UTC"
    assert switch["target"]["arn"] == "arn:aws:scheduler:::aws-sdk:cloudwatch:enableAlarmActions"
    assert json.loads(switch["target"]["input"]) == {"AlarmNames": [alarm["name"]]}


def test_after_start_plus_grace_the_alarm_is_live_and_needs_no_switch():
    result = run(START + timedelta(minutes=20))
    assert result.one(ALARM).plain_inputs["actionsEnabled"] is True
    assert sorted(r.name for r in result.by_type(SCHEDULE)) == ["delivery-disable-alarm-actions", "delivery-enable-group-metrics"]


def test_group_metrics_collection_is_enabled_on_the_eks_managed_asg(before_start):
    schedule = before_start.one(SCHEDULE, "delivery-enable-group-metrics").plain_inputs
    assert schedule["scheduleExpression"] == "rate(10 minutes)"
    assert schedule["target"]["arn"] == "arn:aws:scheduler:::aws-sdk:autoscaling:enableMetricsCollection"
    body = json.loads(schedule["target"]["input"])
    assert body["AutoScalingGroupName"] == ASG and body["Granularity"] == "1Minute"
    assert "GroupInServiceInstances" in body["Metrics"]


def test_scheduler_role_can_do_exactly_its_calls(before_start):
    policy = json.loads(before_start.one(POLICY).plain_inputs["policy"])
    actions = {a: s["Resource"] for s in policy["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert set(actions) == {
        "autoscaling:EnableMetricsCollection", "cloudwatch:EnableAlarmActions", "cloudwatch:DisableAlarmActions", "cloudwatch:SetAlarmState",
    }
    assert actions["cloudwatch:SetAlarmState"] == actions["cloudwatch:EnableAlarmActions"]
    assert actions["autoscaling:EnableMetricsCollection"].endswith(f":autoScalingGroup:*:autoScalingGroupName/{ASG}")
    assert actions["cloudwatch:EnableAlarmActions"].endswith(":alarm:delivery-gpu-instances-in-service")
    assert actions["cloudwatch:DisableAlarmActions"] == actions["cloudwatch:EnableAlarmActions"]


def test_same_inputs_same_plan():
    now = START - timedelta(hours=3)
    first, second = run(now), run(now)
    def plan(result):
        return sorted((r.name, json.dumps(r.plain_inputs, sort_keys=True)) for r in result.resources)

    assert plan(first) == plan(second)


@pytest.mark.parametrize("change,message", [
    (dict(reserved_instances=0), "reserved_instances 0 is not accepted"),
    (dict(period_s=45), "period_s 45 is not accepted"),
    (dict(block_start=START.replace(tzinfo=None)), "block_start has no timezone"),
    (dict(block_end=START), "block_end .2026-12-01T11:30:00.00:00. is not accepted; expected a time after block_start"),
    (dict(alarm_name=""), "alarm_name .. is not accepted"),
])
def test_bad_args(change, message):
    with pytest.raises(UserError, match=message):
        run(START, **change)


def test_policy_statements_for_the_encrypted_topic():
    topic = cloudwatch_topic_statement(TOPIC, "123456789012")
    key = cloudwatch_key_statement("123456789012")
    assert topic["Principal"] == key["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert topic["Action"] == "sns:Publish" and topic["Resource"] == TOPIC
    assert set(key["Action"]) == {"kms:GenerateDataKey*", "kms:Decrypt"}


def test_a_block_starting_during_up_gets_its_switch_when_the_schedule_exists():
    """The switch is created ~26 minutes into a first `up` (after the GPU node group): never scheduled before that."""
    now = START - timedelta(minutes=5)
    switch = run(now).one(SCHEDULE, "delivery-enable-alarm-actions").plain_inputs
    assert switch["scheduleExpression"] == f"at({now + SCALE_UP_MARGIN:%Y-%m-%dT%H:%M:%S})"  # not start + 20 min


def test_the_stack_rehearsal_of_a_block_starting_in_five_minutes_passes_the_one_time_schedule_rule(tmp_path, monkeypatch, capsys):
    """Without the margin the offline engine refuses the switch (``rules.one_time_schedule_fires_after_creation``)."""
    flags = ["plan", "dev", "--quiet", "--now", "2026-12-01T08:00:00Z", "--reservation-start", "2026-12-01T08:05:00Z"]
    assert main([*flags, "--out", str(tmp_path / "a")]) == 0
    monkeypatch.setattr(delivery_check, "switch_on_at", delivery_check.checks_from)
    capsys.readouterr()
    assert main([*flags, "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "'kimi-k3-delivery-check-enable-alarm-actions': scheduleExpression at(2026-12-01T08:25:00) (UTC) has passed when the schedule is created" in err


# --- the block's end: no page at EKS's scale-down (issue 21, point 6) -------------------------------------------------------------

SCALE_DOWN = END - timedelta(minutes=40)
"""EKS's "Capacity Scaledown Before Reservation End" (EKS user guide, capacity-blocks-mng): the node group goes to 0."""


def _switches(result: offline.PlanResult) -> dict[str, str]:
    return {r.name: r.plain_inputs["scheduleExpression"] for r in result.by_type(SCHEDULE) if "alarm-actions" in r.name}


def test_a_one_time_schedule_switches_the_actions_off_at_the_eks_scale_down(before_start):
    off = before_start.one(SCHEDULE, "delivery-disable-alarm-actions").plain_inputs
    assert off["scheduleExpression"] == f"at({SCALE_DOWN:%Y-%m-%dT%H:%M:%S})" == "at(2026-12-08T10:50:00)"
    assert off["target"]["arn"] == "arn:aws:scheduler:::aws-sdk:cloudwatch:disableAlarmActions"
    assert json.loads(off["target"]["input"]) == {"AlarmNames": ["delivery-gpu-instances-in-service"]}
    assert off["flexibleTimeWindow"] == {"mode": "OFF"} and off["scheduleExpressionTimezone"] == "UTC"


@pytest.mark.parametrize(("now", "enabled", "switches"), [
    (START - timedelta(days=1), False, {"delivery-enable-alarm-actions": "at(2026-12-01T11:50:00)", "delivery-disable-alarm-actions": "at(2026-12-08T10:50:00)"}),
    (START + timedelta(days=1), True, {"delivery-disable-alarm-actions": "at(2026-12-08T10:50:00)"}),  # serving
    (END - timedelta(minutes=55), False, {}),  # ending, first run inside the margin: a switch-off would come too late
    (SCALE_DOWN, False, {}),  # ending: EKS scales the group to 0 now
    (END - timedelta(minutes=10), False, {}),  # ending, the group is at 0
    (END + timedelta(hours=2), False, {}),  # ended: missing data (breaching) pages no one
])
def test_the_alarm_is_silent_from_the_scale_down_on(now, enabled, switches):
    result = run(now)
    assert result.one(ALARM).plain_inputs["actionsEnabled"] is enabled
    assert _switches(result) == switches


def test_a_switch_off_that_exists_is_kept_inside_the_margin():
    """A re-run at end - 55 min after a serving run: the schedule exists (same inputs, no call), the alarm stays on."""
    result = run(END - timedelta(minutes=55), pending_switch_off_at=SCALE_DOWN)
    assert result.one(ALARM).plain_inputs["actionsEnabled"] is True
    assert _switches(result) == {"delivery-disable-alarm-actions": "at(2026-12-08T10:50:00)"}


def test_a_first_up_too_late_for_the_switch_on_before_the_scale_down_stays_silent():
    result = run(START - timedelta(hours=1), block_end=START + timedelta(minutes=50))
    assert result.one(ALARM).plain_inputs["actionsEnabled"] is False and _switches(result) == {}


def test_an_explicit_alarm_name_is_used_everywhere():
    result = run(START - timedelta(days=1), alarm_name="kimi-k3-prod-delivery-check-gpu-instances-in-service")
    name = result.one(ALARM).plain_inputs["name"]
    assert name == "kimi-k3-prod-delivery-check-gpu-instances-in-service"
    for schedule in ("delivery-enable-alarm-actions", "delivery-disable-alarm-actions"):
        assert json.loads(result.one(SCHEDULE, schedule).plain_inputs["target"]["input"]) == {"AlarmNames": [name]}
    policy = json.loads(result.one(POLICY).plain_inputs["policy"])
    assert any(s["Resource"].endswith(f":alarm:{name}") for s in policy["Statement"])
