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
ASG = "eks-gpu-ng-2f6b0c8e-0d3a-5c3e-9a43-0d8f3b3f4a11"
TOPIC = "arn:aws:sns:us-east-1:123456789012:gpu-alerts"


def run(now: datetime, **changes) -> offline.PlanResult:
    values = dict(asg_name=ASG, reserved_instances=2, block_start=START, alert_topic_arn=TOPIC, now=now)
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
    assert [r.name for r in result.by_type(SCHEDULE)] == ["delivery-enable-group-metrics"]


def test_group_metrics_collection_is_enabled_on_the_eks_managed_asg(before_start):
    schedule = before_start.one(SCHEDULE, "delivery-enable-group-metrics").plain_inputs
    assert schedule["scheduleExpression"] == "rate(10 minutes)"
    assert schedule["target"]["arn"] == "arn:aws:scheduler:::aws-sdk:autoscaling:enableMetricsCollection"
    body = json.loads(schedule["target"]["input"])
    assert body["AutoScalingGroupName"] == ASG and body["Granularity"] == "1Minute"
    assert "GroupInServiceInstances" in body["Metrics"]


def test_scheduler_role_can_do_exactly_its_two_calls(before_start):
    policy = json.loads(before_start.one(POLICY).plain_inputs["policy"])
    actions = {s["Action"]: s["Resource"] for s in policy["Statement"]}
    assert set(actions) == {"autoscaling:EnableMetricsCollection", "cloudwatch:EnableAlarmActions"}
    assert actions["autoscaling:EnableMetricsCollection"].endswith(f":autoScalingGroup:*:autoScalingGroupName/{ASG}")
    assert actions["cloudwatch:EnableAlarmActions"].endswith(":alarm:delivery-gpu-instances-in-service")


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
