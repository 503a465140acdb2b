"""``kimi-k3 capacity scale-up``: the operator's lever when an active block has too few GPU nodes.

EKS and EC2 calls go through ``botocore.stub.Stubber`` against the real service models.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import botocore.session
import pytest
from botocore.stub import Stubber

from kimi_k3.capacity import aws as capacity_aws
from kimi_k3.capacity import scale_up as scaling
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.cli import capacity_clock as capacity_cli
from kimi_k3.cli import main
from kimi_k3.errors import UserError
from kimi_k3.stack.settings import load_stack

UTC = UTC
NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
STACK = load_stack("dev")
RID = STACK.capacity.reservation_id
REGION = STACK.region
CLUSTER = "kimi-k3-dev"
_SESSION = botocore.session.get_session()


def client(service):
    return _SESSION.create_client(service, region_name=REGION, aws_access_key_id="AKIAEXAMPLE", aws_secret_access_key="x")


def reservation(state="active", start=NOW - timedelta(days=1), days=7, total=2):
    return {
        "CapacityReservationId": RID, "State": state, "InstanceType": "p6-b300.48xlarge", "AvailabilityZone": f"{REGION}a",
        "ReservationType": "capacity-block", "TotalInstanceCount": total, "AvailableInstanceCount": total,
        "StartDate": start, "EndDate": start + timedelta(days=days), "InstancePlatform": "Linux/UNIX",
    }


def nodegroup(name, desired=0, tags=None, min_size=0, max_size=2):
    return {
        "nodegroupName": name, "clusterName": CLUSTER, "status": "ACTIVE",
        "scalingConfig": {"minSize": min_size, "maxSize": max_size, "desiredSize": desired},
        "tags": tags if tags is not None else {scaling.RESERVATION_TAG: RID},
    }


def block(**changes):
    return CapacityBlockFacts.from_ec2(reservation(**changes))


def group(desired=0, **changes):
    return scaling.NodeGroupSize.from_api(nodegroup("kimi-k3-gpu-ng-1", desired=desired, **changes))


# --- the rule -----------------------------------------------------------------------------


def test_an_active_block_below_its_count_is_scaled_to_the_reserved_count():
    plan = scaling.plan_scale_up(group(desired=0), block(), NOW)
    assert plan.needed and plan.scaling_config == {"minSize": 0, "maxSize": 2, "desiredSize": 2}


def test_only_desired_and_a_too_low_max_change_so_eks_can_still_scale_to_zero():
    plan = scaling.plan_scale_up(group(desired=1, max_size=1), block(total=3), NOW)
    assert plan.scaling_config == {"minSize": 0, "maxSize": 3, "desiredSize": 3}


def test_a_group_already_at_the_count_needs_nothing():
    assert not scaling.plan_scale_up(group(desired=2), block(), NOW).needed


@pytest.mark.parametrize(
    ("reservation_changes", "now", "message"),
    [
        ({"state": "scheduled", "start": NOW + timedelta(hours=3)}, NOW, "is scheduled (starts"),
        ({"state": "expired", "start": NOW - timedelta(days=8)}, NOW, "is expired"),
        ({"start": NOW - timedelta(days=7) + timedelta(minutes=30)}, NOW, "a scale-up now would be undone"),
    ],
)
def test_a_block_that_cannot_take_nodes_now_is_refused(reservation_changes, now, message):
    with pytest.raises(UserError) as caught:
        scaling.plan_scale_up(group(), block(**reservation_changes), now)
    assert message in str(caught.value)


@pytest.mark.parametrize("count", [0, 3])
def test_a_count_outside_the_block_is_refused(count):
    with pytest.raises(UserError, match=f"--count {count} is not accepted; the block reserves 2"):
        scaling.plan_scale_up(group(), block(), NOW, count)


# --- EKS through the real model --------------------------------------------------------------


@pytest.fixture
def aws(monkeypatch):
    ec2, quotas, eks = client("ec2"), client("service-quotas"), client("eks")
    stubs = {"ec2": Stubber(ec2), "eks": Stubber(eks)}
    monkeypatch.setattr(capacity_aws, "make_clients", lambda region: capacity_aws.Clients(ec2=ec2, quotas=quotas))
    monkeypatch.setattr(scaling, "make_eks_client", lambda region: eks)
    monkeypatch.setattr(capacity_cli, "utcnow", lambda: NOW)
    for stub in stubs.values():
        stub.activate()
    yield stubs
    for stub in stubs.values():
        stub.assert_no_pending_responses()
        stub.deactivate()


def _find(stubs, groups):
    stubs["eks"].add_response("list_nodegroups", {"nodegroups": [g["nodegroupName"] for g in groups]}, {"clusterName": CLUSTER})
    for g in groups:
        stubs["eks"].add_response("describe_nodegroup", {"nodegroup": g}, {"clusterName": CLUSTER, "nodegroupName": g["nodegroupName"]})


def test_scale_up_finds_the_tagged_group_and_updates_it(aws, capsys):
    aws["ec2"].add_response("describe_capacity_reservations", {"CapacityReservations": [reservation()]}, {"CapacityReservationIds": [RID]})
    _find(aws, [nodegroup("kimi-k3-system-ng", tags={}), nodegroup("kimi-k3-gpu-ng-5f3a", desired=0)])
    aws["eks"].add_response(
        "update_nodegroup_config",
        {"update": {"id": "0e1f2a3b-update", "status": "InProgress", "type": "ConfigUpdate"}},
        {"clusterName": CLUSTER, "nodegroupName": "kimi-k3-gpu-ng-5f3a", "scalingConfig": {"minSize": 0, "maxSize": 2, "desiredSize": 2}},
    )
    assert main(["capacity", "scale-up", "dev"]) == 0
    out = capsys.readouterr().out
    assert "kimi-k3-gpu-ng-5f3a of kimi-k3-dev: 0 desired" in out and "update 0e1f2a3b-update" in out


def test_dry_run_sends_nothing(aws, capsys):
    aws["ec2"].add_response("describe_capacity_reservations", {"CapacityReservations": [reservation()]}, {"CapacityReservationIds": [RID]})
    _find(aws, [nodegroup("kimi-k3-gpu-ng-5f3a", desired=1)])
    assert main(["capacity", "scale-up", "dev", "--dry-run"]) == 0
    assert "Would set desired size 1 -> 2" in capsys.readouterr().out


def test_a_cluster_without_the_gpu_group_says_to_run_up_first(aws, capsys):
    aws["ec2"].add_response("describe_capacity_reservations", {"CapacityReservations": [reservation()]}, {"CapacityReservationIds": [RID]})
    _find(aws, [nodegroup("kimi-k3-system-ng", tags={})])
    assert main(["capacity", "scale-up", "dev"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"tagged {scaling.RESERVATION_TAG}={RID}" in err and "pulumi up" in err


def test_the_cli_default_cluster_is_the_one_the_platform_names():
    from kimi_k3 import offline
    from tests.conftest import NOW as PLAN_NOW
    from tests.conftest import fixture_for

    result = offline.run_stack("dev", now=PLAN_NOW, reservation=fixture_for)
    assert result.outputs["clusterName"] == CLUSTER
    node_group = result.one("aws:eks/nodeGroup:NodeGroup", "gpu-ng").plain_inputs
    assert node_group["tags"][scaling.RESERVATION_TAG] == RID
