"""Scale-up at the block's start heals itself, whatever the timing.

Scheduled block, a block starting during `up`, a block already active with the group at 0,
a re-run after a failed `up`: each plan ends with the reserved count, either through the
one-off scheduled action (future start, desired capacity only) or through the desired size
this run sets itself (no `ignore_changes`, so a group left at 0 is raised). Rehearsed with
`kimi-k3 plan --now --reservation-state --reservation-start`, as an operator would.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from kimi_k3 import offline
from kimi_k3.capacity.assessment import BEFORE, ENDED, ENDING, SERVING
from kimi_k3.capacity.node_group import CapacityBlockNodeGroup, CapacityBlockNodeGroupArgs
from kimi_k3.capacity.scaling import SCALE_UP_MARGIN, scaling_plan
from kimi_k3.cli import main
from tests.builders import B300, RID, block_facts
from tests.conftest import NOW

SCHEDULE = "aws:autoscaling/schedule:Schedule"
NG = "aws:eks/nodeGroup:NodeGroup"
SUBNETS = {"us-east-1a": "subnet-0aaaaaaaaaaaaaaaa", "us-east-1b": "subnet-0bbbbbbbbbbbbbbbb"}
AT = "%Y-%m-%dT%H:%M:%SZ"


# --- the sizing decision, per phase ------------------------------------------------------------------


def test_a_block_far_ahead_is_scaled_at_its_start_by_the_action_alone():
    plan = scaling_plan(_window(NOW + timedelta(days=1)), NOW)
    assert (plan.phase, plan.desired_size, plan.scale_at, plan.scale_to) == (BEFORE, 0, NOW + timedelta(days=1), 2)
    assert plan.ignore_changes == ["scalingConfig.desiredSize"]  # the action owns the desired size


def test_a_block_starting_within_the_margin_is_scaled_at_now_plus_margin():
    plan = scaling_plan(_window(NOW + timedelta(minutes=5)), NOW)
    assert plan.scale_at == NOW + SCALE_UP_MARGIN and plan.desired_size == 0


@pytest.mark.parametrize("state,started", [("active", timedelta(hours=-2)), ("scheduled", timedelta(minutes=-3))])
def test_a_running_block_gets_its_count_from_this_run_with_drift_protection_off(state, started):
    """Active, or past its start while EC2 still says scheduled: the run sets the count itself."""
    plan = scaling_plan(_window(NOW + started, state=state), NOW)
    assert (plan.phase, plan.desired_size, plan.scale_at, plan.ignore_changes) == (SERVING, 2, None, [])


def _window(start, **changes):
    return block_facts(start=start, end=start + timedelta(days=7), **changes)


def test_in_the_last_hour_a_new_group_starts_at_zero_and_eks_owns_the_scale_down():
    plan = scaling_plan(_window(NOW - timedelta(days=7) + timedelta(minutes=50), state="active"), NOW)
    assert (plan.phase, plan.desired_size, plan.scale_at, plan.ignore_changes) == (ENDING, 0, None, ["scalingConfig.desiredSize"])


@pytest.mark.parametrize("state", ["expired", "active"])
def test_after_the_block_the_group_is_kept_at_zero_explicitly(state):
    plan = scaling_plan(_window(NOW - timedelta(days=8), state=state), NOW)
    assert (plan.phase, plan.desired_size, plan.min_size, plan.ignore_changes) == (ENDED, 0, 0, [])


@pytest.mark.parametrize("start", [timedelta(days=1), timedelta(minutes=5), timedelta(hours=-1), timedelta(days=-8)])
def test_min_stays_zero_and_max_is_the_reserved_count_in_every_phase(start):
    plan = scaling_plan(_window(NOW + start, instance_count=4, state="active" if start < timedelta(0) else "scheduled"), NOW)
    assert (plan.min_size, plan.max_size) == (0, 4)


# --- the component, per timing ----------------------------------------------------------------------


def _component(fixture: offline.ReservationFixture) -> offline.PlanResult:
    args = CapacityBlockNodeGroupArgs(
        cluster_name="kimi-k3-dev", kubernetes_version="1.34", subnet_ids_by_az=SUBNETS, instance_type=B300, reservation_id=RID, now=NOW,
    )
    return offline.OfflineEngine(now=NOW, reservation=fixture).run(lambda: CapacityBlockNodeGroup("gpu", args))


def _fixture(**changes) -> offline.ReservationFixture:
    return offline.ReservationFixture(**{"id": RID, "availability_zone": "us-east-1a", "instance_count": 2, **changes})


def test_an_action_sets_only_the_desired_capacity_at_a_future_moment():
    result = _component(_fixture(start=NOW + timedelta(minutes=5)))
    action = result.one(SCHEDULE).plain_inputs
    assert (action["minSize"], action["maxSize"], action["desiredCapacity"]) == (-1, -1, 2)
    assert action["startTime"] == (NOW + SCALE_UP_MARGIN).strftime(AT)
    assert "recurrence" not in action and "endTime" not in action


def test_an_active_block_declares_the_count_without_ignore_changes_and_no_action():
    result = _component(_fixture(state="active", start=NOW - timedelta(hours=3)))
    group = result.one(NG, "gpu-ng")
    assert group.plain_inputs["scalingConfig"] == {"minSize": 0, "maxSize": 2, "desiredSize": 2}
    assert group.ignore_changes == []
    assert not result.by_type(SCHEDULE)


def test_an_ended_block_keeps_the_group_at_zero_and_says_so():
    result = _component(_fixture(state="expired", start=NOW - timedelta(days=8)))
    assert result.one(NG, "gpu-ng").plain_inputs["scalingConfig"]["desiredSize"] == 0
    assert any("kept at 0 nodes" in w for w in result.warnings)


# --- rehearsals through `kimi-k3 plan` -------------------------------------------------------------------


def _rehearse(tmp_path: Path, *flags: str, now=NOW) -> tuple[dict, list[dict]]:
    """Run `kimi-k3 plan dev` with the rehearsal flags; its outputs.json and resources.json."""
    out = tmp_path / "plan"
    assert main(["plan", "dev", "--quiet", "--out", str(out), "--now", now.strftime(AT), *flags]) == 0
    outputs = json.loads((out / "outputs.json").read_text())
    resources = json.loads((out / "resources.json").read_text())
    return outputs, resources


def _ends_with_the_reserved_count(outputs: dict, resources: list[dict], now) -> str:
    """How the plan reaches the reserved count: 'action at <time>' (in the future) or 'this run'."""
    count = outputs["capacityBlock"]["instanceCount"]
    (group,) = [r for r in resources if r["type"] == NG and r["name"].endswith("gpu-ng")]
    actions = [r for r in resources if r["type"] == SCHEDULE]
    if actions:
        (action,) = actions
        assert action["inputs"]["desiredCapacity"] == count and action["inputs"]["startTime"] > now.strftime(AT)
        assert (action["inputs"]["minSize"], action["inputs"]["maxSize"]) == (-1, -1)
        return f"action at {action['inputs']['startTime']}"
    assert group["inputs"]["scalingConfig"]["desiredSize"] == count
    return "this run"


def test_rehearsal_scheduled_block(tmp_path, capsys):
    outputs, resources = _rehearse(tmp_path)
    assert _ends_with_the_reserved_count(outputs, resources, NOW) == "action at 2026-12-01T11:30:00Z"
    (group,) = [r for r in resources if r["type"] == NG and r["name"].endswith("gpu-ng")]
    assert group["ignoreChanges"] == ["scalingConfig.desiredSize"]  # later runs leave the action's work alone
    assert "GPU scale-up      0 now -> 1 at 2026-12-01 11:30 UTC" in capsys.readouterr().out


def test_rehearsal_block_starting_in_five_minutes(tmp_path, capsys):
    start = NOW + timedelta(minutes=5)
    outputs, resources = _rehearse(tmp_path, "--reservation-start", start.strftime(AT))
    assert _ends_with_the_reserved_count(outputs, resources, NOW) == f"action at {(NOW + SCALE_UP_MARGIN).strftime(AT)}"
    assert outputs["gpuScaling"]["scaleUpAt"] == (NOW + SCALE_UP_MARGIN).isoformat()


def test_rehearsal_block_active_with_the_group_at_zero(tmp_path, capsys):
    """Active: this run declares the count with ignore_changes off, so a group at 0 in the state is raised."""
    outputs, resources = _rehearse(tmp_path, "--reservation-state", "active")
    assert _ends_with_the_reserved_count(outputs, resources, NOW) == "this run"
    (group,) = [r for r in resources if r["type"] == NG and r["name"].endswith("gpu-ng")]
    assert "ignoreChanges" not in group  # the desired size is this run's to set
    assert "this run sets the desired size to the reserved count (1)" in capsys.readouterr().out


def test_rehearsal_rerun_after_a_failed_up(tmp_path, capsys):
    """A first `up` at NOW for a block starting at NOW+5m failed before creating its action; the re-run
    40 minutes later finds the block started (EC2 may still say scheduled) and sets the count itself."""
    start = NOW + timedelta(minutes=5)
    rerun = NOW + timedelta(minutes=40)
    outputs, resources = _rehearse(tmp_path, "--reservation-start", start.strftime(AT), now=rerun)
    assert _ends_with_the_reserved_count(outputs, resources, rerun) == "this run"
    assert outputs["gpuScaling"]["phase"] == "serving"
    assert "started at 2026-11-30 16:05 UTC but is still scheduled" in capsys.readouterr().out
