"""EFA nodes can talk to each other: with EFA, a security group admitting all traffic to and from itself sits on every interface.

EKS user guide, sec-group-reqs: "Outbound, All, Self (for EFA traffic)"; the pulumi-eks node
group has self ingress only, so the component adds a group of its own (as terraform-aws-eks
does with ``all_self_efa`` ingress and egress).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from kimi_k3 import offline
from kimi_k3.capacity.node_group import CapacityBlockNodeGroup, CapacityBlockNodeGroupArgs
from kimi_k3.errors import UserError
from tests.builders import B300, RID
from tests.conftest import NOW, fixture_for
from tests.resource_types import LAUNCH_TEMPLATE as LT
from tests.resource_types import SECURITY_GROUP as SG
from tests.resource_types import SG_EGRESS_RULE as EGRESS
from tests.resource_types import SG_INGRESS_RULE as INGRESS

NODE_SG = "sg-0123456789abcdef0"
VPC = "vpc-0123456789abcdef0"


def _run(efa: bool, **changes) -> offline.PlanResult:
    values = dict(
        cluster_name="c", kubernetes_version="1.34", subnet_ids_by_az={"us-east-1a": "subnet-0aaaaaaaaaaaaaaaa"}, instance_type=B300,
        reservation_id=RID, now=NOW, security_group_ids=[NODE_SG], vpc_id=VPC, efa_enabled=efa,
    )
    values.update(changes)
    fixture = offline.ReservationFixture(id=RID, availability_zone="us-east-1a", instance_count=2, start=NOW + timedelta(days=1))
    return offline.OfflineEngine(now=NOW, reservation=fixture).run(lambda: CapacityBlockNodeGroup("gpu", CapacityBlockNodeGroupArgs(**values)))


@pytest.fixture(scope="module")
def efa() -> offline.PlanResult:
    return _run(True)


def test_the_efa_group_allows_all_traffic_to_and_from_itself_both_ways(efa):
    group = efa.one(SG, "gpu-efa")
    assert group.plain_inputs["vpcId"] == VPC
    assert not group.plain_inputs.get("ingress") and not group.plain_inputs.get("egress")  # rules are resources of their own
    for rule_type in (INGRESS, EGRESS):
        (rule,) = efa.by_type(rule_type)
        inputs = rule.plain_inputs
        assert (inputs["securityGroupId"], inputs["referencedSecurityGroupId"], inputs["ipProtocol"]) == (group.id, group.id, "-1")
        assert "cidrIpv4" not in inputs and "fromPort" not in inputs  # all protocols and ports, from the group only


def test_every_interface_carries_the_node_group_and_the_efa_group(efa):
    group = efa.one(SG, "gpu-efa")
    interfaces = efa.one(LT).plain_inputs["networkInterfaces"]
    assert len([i for i in interfaces if i["interfaceType"] == "efa-only"]) == 16
    assert all(i["securityGroups"] == [NODE_SG, group.id] for i in interfaces)


def test_without_efa_there_is_no_efa_group():
    result = _run(False)
    assert not result.by_type(SG) and not result.by_type(INGRESS) and not result.by_type(EGRESS)


def test_efa_needs_the_vpc_of_its_group():
    with pytest.raises(UserError, match="efa_enabled needs vpc_id"):
        _run(True, vpc_id=None)


def test_the_stack_creates_the_efa_group_in_its_vpc():
    result = offline.run_stack("dev", now=NOW, reservation=fixture_for, config_overrides={"kimi-k3:efaEnabled": "true"})
    group = result.one(SG, "kimi-k3-gpu-efa")
    vpc = result.one("aws:ec2/vpc:Vpc")
    assert group.plain_inputs["vpcId"] == vpc.id
