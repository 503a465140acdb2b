"""The delivery alarm at the block's end, as the stacks plan it (issue 21, point 6).

EKS scales a Capacity Block node group to 0 forty minutes before the block ends (its
"Capacity Scaledown Before Reservation End" action, EKS user guide, capacity-blocks-mng;
``kimi_k3.capacity.scaling.EKS_SCALEDOWN_BEFORE_END``). The delivery alarm treats missing data as
breaching, so with its actions on through the ending and ended phases it paged at every
normal block end and stayed in ALARM afterwards. Now a one-time schedule switches the actions
off at the scale-down, and a run from then on declares them off. The runs: prod's first `up`
the day before its block, then later runs that read the previous run's state (the offline
timeline refuses a one-time schedule created after its time, and one moved by a re-run).

The alarm's name carries the cluster's (``kimi-k3-<stack>-…``): alarm names are unique per
account and region (CloudWatch PutMetricAlarm creates *or updates* the alarm of that name), so
dev and prod in one account no longer overwrite each other's alarm.
"""

from __future__ import annotations

import json
from datetime import timedelta
from functools import cache

from kimi_k3 import offline
from kimi_k3.offline.state import PreviousState
from kimi_k3.stack.platform import Platform
from tests.review_runs import BEFORE, BLOCK_START, run

ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
SCHEDULE = "aws:scheduler/schedule:Schedule"
END = BLOCK_START + timedelta(days=7)
SCALE_DOWN = END - timedelta(minutes=40)
SWITCH_OFF = "kimi-k3-delivery-check-disable-alarm-actions"


@cache
def first_up() -> offline.PlanResult:
    return run("prod", BEFORE, "scheduled")


@cache
def serving() -> offline.PlanResult:
    """A run while the block serves, after the first `up` (the switch-on fired)."""
    return run("prod", BLOCK_START + timedelta(days=3), "active", PreviousState.from_plan(first_up()))


def alarm_switches(result: offline.PlanResult) -> tuple[bool, dict[str, str]]:
    alarm = result.one(ALARM).inputs
    switches = {r.name: r.inputs["scheduleExpression"] for r in result.by_type(SCHEDULE) if "alarm-actions" in r.name}
    return alarm["actionsEnabled"], switches


def test_the_first_up_schedules_the_switch_off_at_the_eks_scale_down():
    enabled, switches = alarm_switches(first_up())
    assert not enabled
    assert switches == {"kimi-k3-delivery-check-enable-alarm-actions": "at(2026-12-01T11:50:00)", SWITCH_OFF: "at(2026-12-08T10:50:00)"}
    assert f"at({SCALE_DOWN:%Y-%m-%dT%H:%M:%S})" == switches[SWITCH_OFF]


def test_a_serving_run_keeps_the_switch_off_unchanged():
    enabled, switches = alarm_switches(serving())
    assert enabled and switches == {SWITCH_OFF: "at(2026-12-08T10:50:00)"}
    previous = PreviousState.from_plan(first_up())
    off = next(r for r in serving().by_type(SCHEDULE) if r.name == SWITCH_OFF)
    assert previous.inputs_of(off.inputs) == previous.resource(off.urn).inputs  # same inputs: no UpdateSchedule


def test_the_ending_phase_before_the_scale_down_keeps_the_alarm_on_until_its_switch_off():
    result = run("prod", END - timedelta(minutes=55), "active", PreviousState.from_plan(serving()))
    assert result.outputs["gpuScaling"]["phase"] == "ending"
    assert alarm_switches(result) == (True, {SWITCH_OFF: "at(2026-12-08T10:50:00)"})


def test_the_ending_phase_after_the_scale_down_declares_the_alarm_silent():
    result = run("prod", END - timedelta(minutes=30), "active", PreviousState.from_plan(serving()))
    assert result.outputs["gpuScaling"]["phase"] == "ending"
    assert alarm_switches(result) == (False, {})


def test_the_ended_phase_declares_the_alarm_silent():
    result = run("prod", END + timedelta(hours=3), "expired", PreviousState.from_plan(serving()))
    assert result.outputs["gpuScaling"]["phase"] == "ended"
    assert alarm_switches(result) == (False, {})


def test_the_scheduler_role_may_switch_the_alarm_off():
    policy = json.loads(first_up().one("aws:iam/rolePolicy:RolePolicy", "kimi-k3-delivery-check-scheduler-policy").inputs["policy"])
    alarm_statement = next(s for s in policy["Statement"] if "cloudwatch:DisableAlarmActions" in s["Action"])
    assert alarm_statement["Resource"].endswith(":alarm:kimi-k3-prod-delivery-check-gpu-instances-in-service")


def test_two_stacks_give_their_alarms_distinct_names(dev_plan, prod_plan):
    names = {plan.one(ALARM).inputs["name"] for plan in (dev_plan, prod_plan)}
    assert names == {"kimi-k3-dev-delivery-check-gpu-instances-in-service", "kimi-k3-prod-delivery-check-gpu-instances-in-service"}
    assert Platform.delivery_alarm_name("kimi-k3", "dev") != Platform.delivery_alarm_name("kimi-k3", "prod")
    for plan in (dev_plan, prod_plan):
        # the schedules are auto-named by Pulumi (the resource name plus a random suffix): no fixed name to collide
        assert all("name" not in r.inputs for r in plan.by_type(SCHEDULE))
        assert plan.outputs["deliveryCheckAlarm"] == plan.one(ALARM).inputs["name"]
