"""Time is an input: the key paths work whatever day the suite runs on.

Each test moves the wall clock (``time_machine``) to today + 8 hours, + 9 days and
+ 75 days, then runs what a user runs without pinning anything: ``kimi-k3 plan`` for
dev and prod (the CLI reads the clock once and the offline fixture is placed relative
to it), the scale-up planning and the Capacity Block checks with that moment as
``now``. The whole suite also runs under ``pytest --travel 8h|9d|75d`` (``make test``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from kimi_k3.capacity.assessment import BlockNeeds, assess, verdict
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.capacity.node_group import scaling_plan
from kimi_k3.cli import main
from kimi_k3.core import clock
from kimi_k3.stack import settings
from kimi_k3.stack import terms as stack_terms
from tests.conftest import travel_offset

pytestmark = pytest.mark.clock

OFFSETS = ("8h", "9d", "75d")
RID = "cr-0a1b2c3d4e5f60718"
B300 = "p6-b300.48xlarge"


@pytest.fixture(params=OFFSETS)
def travelled(request):
    """The wall clock moved by one of :data:`OFFSETS` from the real now; yields the moment."""
    destination = datetime.now(UTC) + travel_offset(request.param)
    with time_machine.travel(destination, tick=False):
        yield clock.program_now()


def _facts(now: datetime, *, state: str, start: timedelta, days: int = 7) -> CapacityBlockFacts:
    begin = now + start
    return CapacityBlockFacts(RID, "us-east-1a", B300, 2, state, begin, begin + timedelta(days=days))


def test_the_clock_really_moved(travelled):
    assert abs(clock.program_now() - travelled) < timedelta(seconds=1)
    assert travelled > datetime.now(UTC) - timedelta(seconds=1)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_plan_of_each_stack_schedules_the_scale_up_after_now(stack, travelled, tmp_path, capsys):
    assert main(["plan", stack, "--quiet", "--out", str(tmp_path)]) == 0
    outputs = json.loads((tmp_path / "outputs.json").read_text())
    start = datetime.fromisoformat(outputs["capacityBlock"]["start"])
    assert start - travelled >= timedelta(hours=12) and (start.hour, start.minute) == (11, 30)
    resources = json.loads((tmp_path / "resources.json").read_text())
    schedules = [r for r in resources if r["type"] == "aws:autoscaling/schedule:Schedule"]
    assert len(schedules) == 1
    scheduled = datetime.fromisoformat(schedules[0]["inputs"]["startTime"].replace("Z", "+00:00"))
    assert scheduled == start and scheduled > travelled
    assert f"now {travelled:%Y-%m-%d}" in capsys.readouterr().out


def test_plan_of_an_active_block_asks_for_every_node_now(travelled, tmp_path):
    started = (travelled - timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert main(["plan", "prod", "--quiet", "--out", str(tmp_path), "--reservation-state", "active", "--reservation-start", started]) == 0
    resources = json.loads((tmp_path / "resources.json").read_text())
    assert not [r for r in resources if r["type"] == "aws:autoscaling/schedule:Schedule"]
    node_group = next(r for r in resources if r["type"] == "aws:eks/nodeGroup:NodeGroup" and r["name"].endswith("gpu-ng"))
    assert node_group["inputs"]["scalingConfig"]["desiredSize"] == settings.load_stack("prod").nodes_required


def test_scale_up_planning_follows_now(travelled):
    scheduled = scaling_plan(_facts(travelled, state="scheduled", start=timedelta(days=2)), travelled)
    assert scheduled.desired_size == 0 and scheduled.scale_at == travelled + timedelta(days=2)
    active = scaling_plan(_facts(travelled, state="active", start=-timedelta(days=1)), travelled)
    assert active.desired_size == 2 and active.scale_at is None


def test_block_checks_follow_now(travelled):
    needs = BlockNeeds(instance_type=B300, availability_zones=("us-east-1a", "us-east-1b"), nodes_required=2)

    def check(block: CapacityBlockFacts) -> tuple[str, ...]:
        return verdict(assess(block, needs, travelled, stack_terms.CAPACITY_BLOCK))

    assert check(_facts(travelled, state="scheduled", start=timedelta(days=1))) == ()
    (ended,) = check(_facts(travelled, state="active", start=-timedelta(days=8)))
    assert "ended at" in ended and "kept at 0 nodes" in ended
