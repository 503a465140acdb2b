"""One Capacity Block record, one assessment: `pulumi up`, the node group alone and preflight agree.

The same block, read once through the Pulumi invoke (offline engine) and once through boto3
(the API shape Stubber checks elsewhere), is refused by the platform and by preflight with the
same sentence, and by ``CapacityBlockNodeGroup`` used alone with a sentence in its own args.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from kimi_k3 import offline
from kimi_k3.capacity import preflight
from kimi_k3.capacity.assessment import FAIL, WARN, BlockNeeds, assess
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.capacity.node_group import CapacityBlockNodeGroup, CapacityBlockNodeGroupArgs
from kimi_k3.errors import ComponentInputError, UserError
from kimi_k3.stack import terms as stack_terms
from tests.builders import B300, RID, block_facts
from tests.capacity_builders import api_reservation
from tests.conftest import NOW, fixture_for

TOMORROW = offline.next_block_start(NOW)
CASES = {
    # state: a block AWS could not create; preflight used to call it GO
    "unsupported": dict(state="unsupported", start=TOMORROW),
    # state: a purchase that never went through
    "payment failed": dict(state="payment-failed", start=TOMORROW),
    "another instance type": dict(state="scheduled", start=TOMORROW, instance_type="p5en.48xlarge"),
}


def _api_item(case: dict) -> dict:
    """The same block as DescribeCapacityReservations answers it."""
    item = api_reservation(RID, state=case["state"], itype=case.get("instance_type", B300), total=1, available=1, start=case["start"])
    return item


@pytest.mark.parametrize("case", sorted(CASES))
def test_pulumi_up_and_preflight_refuse_the_same_block_with_the_same_sentence(case):
    values = CASES[case]
    with pytest.raises(UserError) as refused:
        offline.run_stack("dev", now=NOW, reservation=lambda s: fixture_for(s, availability_zone="us-east-1a", instance_count=1, **values))
    checks = preflight.evaluate_preflight(
        CapacityBlockFacts.from_ec2(_api_item(values)), instance_type=B300, region="us-east-1", nodes_required=1, now=NOW,
        quota=preflight.QuotaReading("L-417A185B", "Running On-Demand P instances", 384.0), vcpus_per_node=192,
        terms=stack_terms.CAPACITY_BLOCK,  # what `kimi-k3 capacity preflight` passes for a stack
    )
    (failed,) = [c for c in checks if c.level == FAIL]
    assert str(refused.value) == failed.message


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_node_group_alone_refuses_it_in_its_own_args(case):
    values = CASES[case]
    fixture = offline.ReservationFixture(id=RID, availability_zone="us-east-1a", instance_count=1, **values)
    args = CapacityBlockNodeGroupArgs(
        cluster_name="kimi-k3-dev", kubernetes_version="1.34", subnet_ids_by_az={"us-east-1a": "subnet-0aaaaaaaaaaaaaaaa"},
        instance_type=B300, now=NOW, reservation_id=RID,
    )
    engine = offline.OfflineEngine(now=NOW, reservation=fixture)
    with pytest.raises(ComponentInputError) as refused:
        engine.run(lambda: CapacityBlockNodeGroup("gpu", args))
    assert "kimi-k3:" not in str(refused.value)
    assert [e["property_path"] for e in refused.value.errors] == [{"another instance type": "instance_type"}.get(case, "reservation_id")]
    assert engine.resources == []


def test_one_record_from_both_apis():
    fixture = offline.ReservationFixture(id=RID, availability_zone="us-east-1a", instance_count=2, start=TOMORROW)
    engine = offline.OfflineEngine(now=NOW, reservation=fixture)
    found: list[CapacityBlockFacts] = []

    def program() -> None:
        from kimi_k3.capacity.lookup import lookup_capacity_block

        found.append(lookup_capacity_block(RID))

    engine.run(program)
    (from_invoke,) = found
    from_boto3 = CapacityBlockFacts.from_ec2(api_reservation(RID, start=TOMORROW))
    core = ("reservation_id", "availability_zone", "instance_type", "instance_count", "state", "start", "end", "instance_platform", "reservation_type")
    assert {k: getattr(from_invoke, k) for k in core} == {k: getattr(from_boto3, k) for k in core}


def test_a_started_block_that_lags_in_scheduled_warns_once():
    result = offline.run_stack("dev", now=NOW, reservation=lambda s: fixture_for(s, start=NOW - timedelta(minutes=5)))
    started = [w for w in result.warnings if "is still scheduled" in w]
    assert len(started) == 1, result.warnings
    node_group = result.one("aws:eks/nodeGroup:NodeGroup", "gpu-ng").plain_inputs
    assert node_group["scalingConfig"]["desiredSize"] == node_group["scalingConfig"]["maxSize"]


def test_findings_name_what_the_caller_touched():
    block = block_facts(instance_type="p5en.48xlarge", instance_count=1)
    needs = BlockNeeds(instance_type=B300, nodes_required=2, availability_zones=("us-east-1b",))
    stack = {f.code: f.message for f in assess(block, needs, NOW, stack_terms.CAPACITY_BLOCK) if f.level == FAIL}
    alone = {f.code: f.message for f in assess(block, needs, NOW) if f.level == FAIL}
    assert set(stack) == set(alone) == {"instance type", "availability zone", "instance count"}
    assert "set kimi-k3:gpuInstanceType to p5en.48xlarge" in stack["instance type"]
    assert "pass instance_type='p5en.48xlarge'" in alone["instance type"]
    assert "add us-east-1a to kimi-k3:availabilityZones" in stack["availability zone"]
    assert "add us-east-1a to subnet_ids_by_az" in alone["availability zone"]
    assert "lower kimi-k3:replicas" in stack["instance count"] and "but nodes_required is 2; lower nodes_required" in alone["instance count"]


def test_a_pending_block_is_a_warning_everywhere():
    block = block_facts(state="payment-pending")
    (warning,) = [f for f in assess(block, BlockNeeds(instance_type=B300), NOW) if f.level != "OK"]
    assert warning.level == WARN and warning.code == "state"


