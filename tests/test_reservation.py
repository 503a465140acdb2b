"""Tests for components.reservation: reading a Capacity Block and refusing one that cannot work."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from components import offline
from components.errors import UserError
from components.reservation import CapacityBlockFacts, check_capacity_block, lookup_capacity_block, parse_aws_time

UTC = timezone.utc
NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
START = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
RID = "cr-0a1b2c3d4e5f60718"
B300 = "p6-b300.48xlarge"


def facts(**changes) -> CapacityBlockFacts:
    values = dict(
        reservation_id=RID, availability_zone="us-east-1a", instance_type=B300, instance_count=2,
        state="scheduled", start=START, end=START + timedelta(days=7),
    )
    values.update(changes)
    return CapacityBlockFacts(**values)


def check(block: CapacityBlockFacts, **kwargs) -> list[str]:
    options = dict(instance_type=B300, availability_zones=("us-east-1a", "us-east-1b"), nodes_required=1, now=NOW)
    options.update(kwargs)
    return check_capacity_block(block, **options)


@pytest.mark.parametrize("state", ["scheduled", "active"])
def test_usable_block_passes_without_warnings(state):
    assert check(facts(state=state)) == []


@pytest.mark.parametrize("state", ["payment-pending", "delayed"])
def test_pending_block_passes_with_a_warning(state):
    (warning,) = check(facts(state=state))
    assert f"{RID} is {state}" in warning


def test_expired_block_is_refused_with_its_end_and_what_to_do():
    with pytest.raises(UserError) as err:
        check(facts(state="expired", start=NOW - timedelta(days=8), end=NOW - timedelta(days=1)))
    message = str(err.value)
    assert f"{RID} is expired (ended 2026-11-29 16:00 UTC)" in message
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
    assert check(facts(availability_zone="us-east-1d"), availability_zones=None) == []


def test_too_few_instances_is_refused():
    with pytest.raises(UserError, match=r"reserves 2 instance\(s\) but the stack needs 3"):
        check(facts(), nodes_required=3)


def test_block_whose_end_has_passed_is_refused_even_if_state_lags():
    with pytest.raises(UserError, match=f"{RID} ended at 2026-11-30 11:30 UTC"):
        check(facts(state="active", start=NOW - timedelta(days=7), end=datetime(2026, 11, 30, 11, 30, tzinfo=UTC)))


def test_parse_aws_time_is_utc():
    assert parse_aws_time("2026-12-01T11:30:00Z") == START
    assert parse_aws_time("2026-12-01T11:30:00") == START


def test_lookup_reads_the_block_through_the_provider():
    fixture = offline.ReservationFixture(id=RID, availability_zone="us-east-1c", instance_count=4, state="active", start=START)
    engine = offline.OfflineEngine(now=NOW, reservation=fixture)
    found: list[CapacityBlockFacts] = []
    engine.run(lambda: found.append(lookup_capacity_block(RID)))
    assert found == [facts(availability_zone="us-east-1c", instance_count=4, state="active")]
    assert [t for t, _ in engine.invokes] == ["aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation"]


def test_lookup_of_an_unknown_id_says_what_to_check():
    engine = offline.OfflineEngine(now=NOW, reservation=None)
    with pytest.raises(UserError) as err:
        engine.run(lambda: lookup_capacity_block(RID))
    message = str(err.value)
    assert f"Capacity Block {RID} could not be read" in message
    assert "kimi-k3:capacityReservationId" in message and "kimi-k3 capacity status" in message
