"""A block EC2 no longer returns, after its end: the stack stays updatable, with one line (issue 21, point 7).

After a Capacity Block ends, DescribeCapacityReservations returns it as ``expired`` for a while,
then not at all: an empty ``CapacityReservations`` list (or ``InvalidCapacityReservationId.NotFound``;
the provider's data source says "couldn't find resource"). The program used to stop there with
"not found", so the stack could not be updated any more (``pulumi destroy`` and ``refresh`` do not
run the program by default, Pulumi docs "Running your program on refresh and destroy"; with
``--run-program`` they do). Now a block that is no longer found and whose end, as the previous
``up`` recorded it (the ``capacityBlock`` stack output, on the root stack resource that
``readStackResourceOutputs`` returns), has passed is taken as ended; never recorded, or recorded
with an end ahead, stays an error.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import cache

import pytest
from botocore.stub import Stubber

from kimi_k3.capacity import status
from kimi_k3.capacity.facts import CapacityBlockFacts, ended_from_record
from kimi_k3.errors import UserError
from kimi_k3.offline.state import PreviousState
from kimi_k3.stack import previous_run
from tests.aws_stubs import client
from tests.review_runs import BLOCK_START, run

LOOKUP = "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation"
END = BLOCK_START + timedelta(days=7)
RID = "cr-07e4c1d2b3a4f5e69"
GONE = {LOOKUP: lambda args: ({}, [("id", f"reading EC2 Capacity Block Reservation ({args.get('id')}): couldn't find resource")])}
"""The provider's answer once DescribeCapacityReservations returns nothing for the id (the data source's empty-result error)."""

def recorded(end: datetime = END) -> CapacityBlockFacts:
    return CapacityBlockFacts(RID, "us-east-1a", "p6-b300.48xlarge", 2, "active", BLOCK_START, end)

# --- the boto3 path (`kimi-k3 capacity` / `kimi-k3 status`), answers checked against the EC2 model --------------------------------

def test_an_empty_describe_capacity_reservations_past_the_recorded_end_is_an_ended_block():
    ec2 = client("ec2")
    with Stubber(ec2) as stub:
        stub.add_response("describe_capacity_reservations", {"CapacityReservations": []}, {"CapacityReservationIds": [RID]})
        block = status.describe_reservation(ec2, RID, recorded=recorded(), now=END + timedelta(days=2))
        stub.assert_no_pending_responses()
    assert (block.reservation_id, block.state, block.end, block.available_instances) == (RID, "expired", END, 0)

def test_not_found_past_the_recorded_end_is_an_ended_block_too():
    ec2 = client("ec2")
    with Stubber(ec2) as stub:
        stub.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound", "The reservation ID does not exist")
        assert status.describe_reservation(ec2, RID, recorded=recorded(), now=END + timedelta(days=2)).state == "expired"

@pytest.mark.parametrize("record", [None, recorded(END + timedelta(days=30))], ids=["never-recorded", "end-ahead"])
def test_a_missing_block_without_a_past_recorded_end_stays_an_error(record):
    ec2 = client("ec2")
    with Stubber(ec2) as stub:
        stub.add_response("describe_capacity_reservations", {"CapacityReservations": []}, {"CapacityReservationIds": [RID]})
        with pytest.raises(UserError, match=f"capacity reservation {RID} not found in us-east-1"):
            status.describe_reservation(ec2, RID, recorded=record, now=END + timedelta(days=2))

def test_a_record_of_another_block_does_not_count():
    assert ended_from_record("cr-0aaaaaaaaaaaaaaaa", recorded(), END + timedelta(days=1)) is None
    assert ended_from_record(RID, recorded(), END - timedelta(minutes=1)) is None
    assert ended_from_record(RID, recorded(), END) is not None

# --- the program path (the stack's `up` after the block), under the offline engine --------------------------------------------------

@cache
def serving() -> PreviousState:
    return PreviousState.from_plan(run("prod", BLOCK_START + timedelta(days=2), "active"))

def test_the_previous_up_recorded_the_block_on_the_root_stack_resource():
    resources = serving().stack_resource_outputs()
    roots = [urn for urn, entry in resources.items() if entry["type"] == "pulumi:pulumi:Stack"]
    assert roots == ["urn:pulumi:prod::kimi-k3::pulumi:pulumi:Stack::kimi-k3-prod"]
    block = previous_run.recorded_block(resources, RID)
    assert block is not None and (block.start, block.end, block.instance_count) == (BLOCK_START, END, 2)
    assert previous_run.recorded_block(resources, "cr-0aaaaaaaaaaaaaaaa") is None

def test_an_up_after_ec2_forgot_the_block_plans_the_ended_stack_with_one_line():
    result = run("prod", END + timedelta(days=3), "expired", serving(), engine_options={"invoke_overrides": GONE})
    assert result.outputs["gpuScaling"]["phase"] == "ended" and result.outputs["gpuScaling"]["desiredNow"] == 0
    assert result.outputs["capacityBlock"]["state"] == "expired"
    lines = [w for w in result.warnings if "no longer returned by EC2" in w]
    assert lines == [
        f"Capacity Block {RID} is no longer returned by EC2 and its recorded end (2026-12-08 11:30 UTC) has passed: treated as "
        "ended (GPU node group kept at 0); set kimi-k3:capacityReservationId to a new block, or `pulumi destroy`"
    ]

def test_without_a_record_the_missing_block_is_still_refused_in_one_line():
    with pytest.raises(UserError, match=f"Capacity Block {RID} was not found") as err:
        run("prod", END + timedelta(days=3), "expired", engine_options={"invoke_overrides": GONE})
    assert "\n" not in str(err.value)

def test_before_the_recorded_end_a_missing_block_is_an_error():
    """A block that vanishes while it should serve is a wrong account or region, not an ended block."""
    with pytest.raises(UserError, match="was not found"):
        run("prod", BLOCK_START + timedelta(days=3), "active", serving(), engine_options={"invoke_overrides": GONE})

