"""The Capacity Block as the stack sees it: read through the provider, assessed in the stack's terms."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kimi_k3 import offline
from kimi_k3.capacity.assessment import BlockNeeds, assess, verdict
from kimi_k3.capacity.facts import CapacityBlockFacts, parse_aws_time
from kimi_k3.capacity.lookup import CapacityBlockNotFound, lookup_capacity_block
from kimi_k3.errors import UserError
from kimi_k3.stack import terms as stack_terms
from tests.builders import B300, RID, block_facts
from tests.conftest import NOW, fixture_for

UTC = UTC
START = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)


def facts(**changes) -> CapacityBlockFacts:
    return block_facts(**changes)


def check(block: CapacityBlockFacts, **kwargs) -> tuple[str, ...]:
    """What the platform does with a block: raise on failures (stack terms), return the warnings."""
    options = dict(instance_type=B300, availability_zones=("us-east-1a", "us-east-1b"), nodes_required=1)
    options.update(kwargs)
    now = options.pop("now", NOW)
    return verdict(assess(block, BlockNeeds(**options), now, stack_terms.CAPACITY_BLOCK))


@pytest.mark.parametrize("state", ["scheduled", "active"])
def test_usable_block_passes_without_warnings(state):
    assert check(facts(state=state)) == ()


@pytest.mark.parametrize("state", ["payment-pending", "delayed"])
def test_pending_block_passes_with_a_warning(state):
    (warning,) = check(facts(state=state))
    assert f"{RID} is {state}" in warning


def test_expired_block_warns_with_its_end_and_what_to_do_but_keeps_the_stack_updatable():
    (message,) = check(facts(state="expired", start=NOW - timedelta(days=8), end=NOW - timedelta(days=1)))
    assert f"{RID} is expired (ended 2026-11-29 16:00 UTC)" in message
    assert "GPU node group kept at 0 nodes" in message
    assert "kimi-k3 capacity offerings" in message and "kimi-k3:capacityReservationId" in message


@pytest.mark.parametrize("state", ["payment-failed", "cancelled", "failed", "unsupported"])
def test_unusable_states_are_refused(state):
    with pytest.raises(UserError, match=f"{RID} is {state}; a node group needs a scheduled or active block"):
        check(facts(state=state))


def test_other_instance_type_is_refused_naming_both_types():
    with pytest.raises(UserError) as err:
        check(facts(instance_type="p5en.48xlarge"))
    assert "reserves p5en.48xlarge, but kimi-k3:gpuInstanceType is p6-b300.48xlarge" in str(err.value)


def test_block_in_an_az_the_network_does_not_cover_is_refused():
    with pytest.raises(UserError) as err:
        check(facts(availability_zone="us-east-1d"))
    message = str(err.value)
    assert "is in us-east-1d, which the network does not cover (AZs: us-east-1a, us-east-1b)" in message
    assert "instance types do not exist" in message  # explains the misleading EKS error it prevents


def test_az_not_checked_when_unknown():
    assert check(facts(availability_zone="us-east-1d"), availability_zones=None) == ()


def test_too_few_instances_is_refused():
    with pytest.raises(UserError, match=r"reserves 2 instance\(s\) but the stack needs 3"):
        check(facts(), nodes_required=3)


def test_block_whose_end_has_passed_counts_as_ended_even_if_state_lags():
    (message,) = check(facts(state="active", start=NOW - timedelta(days=7), end=datetime(2026, 11, 30, 11, 30, tzinfo=UTC)))
    assert f"{RID} ended at 2026-11-30 11:30 UTC" in message and "kept at 0 nodes" in message


def test_parse_aws_time_is_utc():
    assert parse_aws_time("2026-12-01T11:30:00Z") == START
    assert parse_aws_time("2026-12-01T11:30:00") == START


def test_lookup_reads_the_block_through_the_provider():
    fixture = offline.ReservationFixture(id=RID, availability_zone="us-east-1c", instance_count=4, state="active", start=START)
    engine = offline.OfflineEngine(now=NOW, reservation=fixture)
    found: list[CapacityBlockFacts] = []
    engine.run(lambda: found.append(lookup_capacity_block(RID)))
    (block,) = found
    core = (block.reservation_id, block.availability_zone, block.instance_type, block.instance_count, block.state, block.start, block.end)
    assert core == (RID, "us-east-1c", B300, 4, "active", START, START + timedelta(days=7))
    # what only the boto3 path used to carry comes through the invoke too
    assert (block.reservation_type, block.instance_platform, block.available_instances) == ("capacity-block", "Linux/UNIX", 4)
    assert block.availability_zone_id and block.capacity_block_id
    assert [t for t, _ in engine.invokes] == ["aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation"]


def test_lookup_of_an_unknown_id_is_neutral_and_the_platform_says_what_to_check():
    engine = offline.OfflineEngine(now=NOW, reservation=None)
    with pytest.raises(CapacityBlockNotFound) as err:
        engine.run(lambda: lookup_capacity_block(RID))
    assert f"Capacity Block {RID} was not found" in str(err.value) and "kimi-k3:" not in str(err.value)
    with pytest.raises(UserError) as err:
        offline.run_stack("dev", now=NOW, reservation=lambda s: fixture_for(s, id="cr-0ffffffffffffffff"))
    message = str(err.value)
    assert f"Capacity Block {RID} was not found in us-east-1" in message  # the dev stack's block
    assert "kimi-k3:capacityReservationId" in message and "kimi-k3 capacity status" in message
