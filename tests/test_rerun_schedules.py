"""A re-run of `up` keeps a scale-up (and the delivery check's switch-on) that is already scheduled (issue 21, point 2).

Two runs of prod: the first `up` the day before the block, the second at 11:20 for the block
at 11:30 (a key rotation). The second sees the first's state (the engine answers the
program's ``readStackResourceOutputs`` from it) and keeps 11:30 / 11:50; with the keeping
switched off (today's code) the offline engine refuses the run: PutScheduledUpdateGroupAction
and UpdateSchedule overwrite, so the update would move both later.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache

import pytest

from kimi_k3 import offline
from kimi_k3.capacity import delivery_check, scaling
from kimi_k3.offline.rules import SCHEDULE_OVERWRITE_SOURCE, SCHEDULER_OVERWRITE_SOURCE, ApplyTimeRuleError
from kimi_k3.offline.state import PreviousState
from kimi_k3.stack import previous_run
from tests.review_runs import BEFORE, BLOCK_START, KEY_ROTATION, run

SCALE_UP = "aws:autoscaling/schedule:Schedule"
SWITCH_ON = "kimi-k3-delivery-check-enable-alarm-actions"


@cache
def first_up() -> PreviousState:
    """Prod's first `up`, the day before its block (the scale-up at the block's start, the switch-on 20 minutes later)."""
    return PreviousState.from_plan(run("prod", BEFORE, "scheduled"))


def schedules(result: offline.PlanResult) -> tuple[str, str]:
    switch_on = [r for r in result.by_type("aws:scheduler/schedule:Schedule") if r.name == SWITCH_ON]
    return result.one(SCALE_UP).inputs["startTime"], switch_on[0].inputs["scheduleExpression"]


def test_the_first_up_schedules_the_scale_up_at_the_start_and_the_switch_on_20_minutes_later():
    scale_up = next(r for r in first_up().resources.values() if r.type == SCALE_UP)
    switch_on = next(r for r in first_up().resources.values() if r.name == SWITCH_ON)
    assert (scale_up.inputs["startTime"], switch_on.inputs["scheduleExpression"]) == ("2026-12-01T11:30:00Z", "at(2026-12-01T11:50:00)")


def test_a_second_up_at_1120_keeps_the_pending_times_and_sends_no_update():
    result = run("prod", KEY_ROTATION, "scheduled", first_up())
    assert schedules(result) == ("2026-12-01T11:30:00Z", "at(2026-12-01T11:50:00)")
    # unchanged inputs: Pulumi makes no call for either
    for resource in (result.one(SCALE_UP), *(r for r in result.by_type("aws:scheduler/schedule:Schedule") if r.name == SWITCH_ON)):
        assert first_up().inputs_of(resource.inputs) == first_up().resource(resource.urn).inputs
    assert result.outputs["gpuScaling"]["scaleUpAt"] == BLOCK_START.isoformat()


def test_without_a_previous_state_the_same_moment_plans_a_first_up():
    # what the recomputation gives: max(11:30, 11:20 + 45 min) = 12:05; right for a first up, wrong for a re-run
    assert schedules(run("prod", KEY_ROTATION, "scheduled")) == ("2026-12-01T12:05:00Z", "at(2026-12-01T12:05:00)")


def test_todays_recomputation_fails_the_two_run_rehearsal_with_the_overwrite_rules(monkeypatch):
    def recompute(pending, fresh, now, not_before):
        return fresh

    monkeypatch.setattr(scaling, "keep_pending", recompute)
    monkeypatch.setattr(delivery_check, "keep_pending", recompute)
    with pytest.raises(ApplyTimeRuleError) as err:
        run("prod", KEY_ROTATION, "scheduled", first_up())
    refused = {v.rule: v.message for v in err.value.violations}
    assert set(refused) == {"pending_scale_up_not_moved_later", "pending_switch_on_not_moved_later"}
    assert refused["pending_scale_up_not_moved_later"].startswith("startTime moves from 2026-12-01T11:30:00Z (pending")
    assert "35 minutes of 2 reserved nodes idle" in refused["pending_scale_up_not_moved_later"]
    assert SCHEDULE_OVERWRITE_SOURCE in refused["pending_scale_up_not_moved_later"]
    assert "15 minutes later" in refused["pending_switch_on_not_moved_later"] and SCHEDULER_OVERWRITE_SOURCE in refused["pending_switch_on_not_moved_later"]


def test_a_run_after_the_action_fired_plans_the_serving_block_without_one():
    result = run("prod", BLOCK_START + timedelta(hours=1), "active", first_up())
    assert not result.by_type(SCALE_UP) and result.outputs["gpuScaling"]["phase"] == "serving"


# --- the rule itself --------------------------------------------------------------------


NOW = datetime(2026, 12, 1, 11, 20, tzinfo=UTC)


@pytest.mark.parametrize(
    ("pending", "fresh", "kept"),
    [
        (BLOCK_START, BLOCK_START + timedelta(minutes=35), BLOCK_START),  # pending and ahead: kept
        (None, BLOCK_START + timedelta(minutes=35), BLOCK_START + timedelta(minutes=35)),  # none yet: a first up
        (NOW - timedelta(minutes=1), BLOCK_START + timedelta(minutes=35), BLOCK_START + timedelta(minutes=35)),  # fired already
        (BLOCK_START - timedelta(days=1), BLOCK_START + timedelta(minutes=35), BLOCK_START + timedelta(minutes=35)),  # before the block: not this block's
    ],
)
def test_keep_pending(pending, fresh, kept):
    assert scaling.keep_pending(pending, fresh, NOW, not_before=BLOCK_START - timedelta(hours=1)) == kept


def test_the_program_reads_the_pending_schedules_from_the_stack_resources():
    resources = first_up().stack_resource_outputs()
    found = previous_run.pending_schedules(resources, reservation_id="cr-07e4c1d2b3a4f5e69", alarm=delivery_check.alarm_name("kimi-k3-prod-delivery-check"))
    assert found == previous_run.PendingSchedules(
        scale_up_at=BLOCK_START, switch_on_at=BLOCK_START + timedelta(minutes=20), switch_off_at=BLOCK_START + timedelta(days=7, minutes=-40),
        state_reset_at=BLOCK_START + timedelta(minutes=21),
    )
    assert previous_run.pending_schedules(resources, reservation_id="cr-0aaaaaaaaaaaaaaaa", alarm=None) == previous_run.PendingSchedules()


def test_an_unreadable_previous_state_warns_and_plans_fresh_times():
    failing = {previous_run.READ_STACK_RESOURCE_OUTPUTS: lambda args: ({}, [("stackName", "no backend client is available")])}
    result = run("prod", KEY_ROTATION, "scheduled", engine_options={"invoke_overrides": failing})
    assert schedules(result) == ("2026-12-01T12:05:00Z", "at(2026-12-01T12:05:00)")
    assert any("could not read stack organization/kimi-k3/prod's previous state" in w for w in result.warnings)
