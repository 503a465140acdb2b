"""The delivery alarm pages when nothing is delivered (issue 33, point 1).

Created days early with missing data breaching and actions off, the alarm sits in ALARM; CloudWatch
acts only on state transitions (CloudWatch user guide, "Alarm actions"), so switching the actions on
at start + 20 min alone never pages. A one-time schedule sets the alarm to OK one minute after the
switch-on; the offline engine refuses a plan whose switched-on alarm nothing moves out of ALARM.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from functools import cache

import pytest

from kimi_k3 import offline
from kimi_k3.capacity import delivery_check
from kimi_k3.capacity.delivery_check import DeliveryCheck, DeliveryCheckArgs
from kimi_k3.offline.alarm_rules import switched_on_alarm_can_page
from kimi_k3.offline.rules import ApplyTimeRuleError
from kimi_k3.offline.state import PreviousState
from tests.resource_types import METRIC_ALARM as ALARM
from tests.resource_types import ROLE_POLICY as POLICY
from tests.resource_types import SCHEDULER_SCHEDULE as SCHEDULE
from tests.review_runs import BEFORE, BLOCK_START, run

START = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
END = START + timedelta(days=7)
RESET = "delivery-reset-alarm-state"


def component(now: datetime, plan_rules: bool = True, **changes) -> offline.PlanResult:
    values = dict(
        asg_name="eks-gpu-ng", reserved_instances=2, block_start=START, block_end=END, alert_topic_arn="arn:aws:sns:us-east-1:123456789012:t", now=now,
    )
    values.update(changes)
    return offline.OfflineEngine(now=now, plan_rules=plan_rules).run(lambda: DeliveryCheck("delivery", DeliveryCheckArgs(**values)))


def _at(result: offline.PlanResult, name: str) -> str:
    return result.one(SCHEDULE, name).plain_inputs["scheduleExpression"]


def test_a_schedule_sets_the_alarm_to_ok_one_minute_after_its_actions_are_switched_on():
    result = component(START - timedelta(days=2))
    reset = result.one(SCHEDULE, RESET).plain_inputs
    assert _at(result, "delivery-enable-alarm-actions") == "at(2026-12-01T11:50:00)"
    assert reset["scheduleExpression"] == "at(2026-12-01T11:51:00)" and reset["scheduleExpressionTimezone"] == "UTC"
    assert reset["target"]["arn"] == "arn:aws:scheduler:::aws-sdk:cloudwatch:setAlarmState"
    body = json.loads(reset["target"]["input"])
    assert (body["AlarmName"], body["StateValue"]) == (result.one(ALARM).plain_inputs["name"], "OK") and body["StateReason"]


def test_the_scheduler_role_may_set_the_alarms_state():
    policy = json.loads(component(START - timedelta(days=2)).one(POLICY).plain_inputs["policy"])
    allowed = [s for s in policy["Statement"] if "cloudwatch:SetAlarmState" in s["Action"]]
    assert [s["Resource"].rsplit(":alarm:", 1)[1] for s in allowed] == ["delivery-gpu-instances-in-service"]


def test_an_alarm_switched_on_with_no_state_reset_fails_the_plan(monkeypatch):
    """The planted bug 'alarm with no OK reset': the switch-on alone is refused, naming the CloudWatch rule."""
    real = delivery_check.alarm_schedule
    monkeypatch.setattr(delivery_check, "alarm_schedule", lambda args: dataclasses.replace(real(args), state_reset=None))
    with pytest.raises(ApplyTimeRuleError, match=r"alarm delivery-gpu-instances-in-service: .*never transitions, never pages.*the actions happen only on state transitions"):
        component(START - timedelta(days=2))


def test_a_state_reset_before_the_switch_on_fails_the_plan(monkeypatch):
    """Reset to OK first, then switched on: the alarm is back in ALARM before its actions are on."""
    monkeypatch.setattr(delivery_check, "state_reset_at", lambda on: on - timedelta(minutes=5))
    with pytest.raises(ApplyTimeRuleError, match="no one-time schedule sets its state to OK after that"):
        component(START - timedelta(days=2))


def test_a_state_reset_the_role_may_not_call_fails_the_plan(monkeypatch):
    real = delivery_check._scheduler_policy

    def without_set_state(*args: str) -> str:
        policy = json.loads(real(*args))
        for statement in policy["Statement"]:
            if isinstance(statement["Action"], list):
                statement["Action"] = [a for a in statement["Action"] if a != "cloudwatch:SetAlarmState"]
        return json.dumps(policy)

    monkeypatch.setattr(delivery_check, "_scheduler_policy", without_set_state)
    with pytest.raises(ApplyTimeRuleError, match="no role policy of the plan allows cloudwatch:SetAlarmState"):
        component(START - timedelta(days=2))


def test_a_silent_alarm_with_no_switch_on_is_not_refused():
    """From EKS's scale-down on the alarm is silent on purpose (no switch-on, nothing to page)."""
    result = component(END - timedelta(minutes=30))
    assert result.one(ALARM).plain_inputs["actionsEnabled"] is False
    assert switched_on_alarm_can_page(list(result.resources)) == []


@pytest.mark.parametrize(("now", "pending", "reset"), [
    (START + timedelta(minutes=20, seconds=30), START + timedelta(minutes=21), "at(2026-12-01T11:51:00)"),  # switched on, reset pending: kept
    (START + timedelta(hours=2), START + timedelta(minutes=21), None),  # the reset fired: no new one
    (START + timedelta(hours=2), None, None),  # a first up after start + grace: a new alarm starts INSUFFICIENT_DATA and transitions
])
def test_a_pending_state_reset_is_kept_after_the_switch_on(now, pending, reset):
    result = component(now, pending_state_reset_at=pending)
    assert result.one(ALARM).plain_inputs["actionsEnabled"] is True
    names = {r.name for r in result.by_type(SCHEDULE)}
    assert (_at(result, RESET) if RESET in names else None) == reset


@cache
def prod_first_up() -> offline.PlanResult:
    return run("prod", BEFORE, "scheduled")


def test_prods_first_up_plans_the_reset_and_a_rerun_reads_it_back():
    result = prod_first_up()
    reset = result.one(SCHEDULE, "kimi-k3-delivery-check-reset-alarm-state").plain_inputs
    assert reset["scheduleExpression"] == f"at({BLOCK_START + timedelta(minutes=21):%Y-%m-%dT%H:%M:%S})"
    rerun = run("prod", BLOCK_START + timedelta(minutes=20, seconds=20), "active", PreviousState.from_plan(result))
    kept = rerun.one(SCHEDULE, "kimi-k3-delivery-check-reset-alarm-state").plain_inputs
    assert kept["scheduleExpression"] == reset["scheduleExpression"] and kept["target"] == reset["target"]
