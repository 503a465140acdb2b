"""The offline engine refuses, with the rule's source, what AWS refuses only during `pulumi up`.

Rules (components/offline/rules.py) on the modelled first `up` (components/offline/timeline.py):
an Auto Scaling scheduled action that does not start after its creation, a scheduled action
whose unset min/max the provider would send as 0, a CAPACITY_BLOCK node group updating with
the default (surge) strategy.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pulumi
import pulumi_aws as aws
import pytest

from kimi_k3 import offline
from kimi_k3.capacity.node_group import CapacityBlockNodeGroup, CapacityBlockNodeGroupArgs
from kimi_k3.capacity.scaling import SCALE_UP_MARGIN
from kimi_k3.cluster.eks import Cluster, ClusterArgs
from kimi_k3.offline.create_times import EKS_CONTROL_PLANE, create_time
from kimi_k3.offline.rules import ApplyTimeRuleError, ApplyTimeRules
from tests.builders import B300, RID
from tests.conftest import NOW, fixture_for

SCHEDULE = "aws:autoscaling/schedule:Schedule"
NG = "aws:eks/nodeGroup:NodeGroup"
ADMIN = "arn:aws:iam::123456789012:role/platform-admin"
SUBNETS = {"us-east-1a": "subnet-0aaaaaaaaaaaaaaaa", "us-east-1b": "subnet-0bbbbbbbbbbbbbbbb"}


def _schedule(name: str, start: str, depends_on: list[pulumi.Resource] | None = None, parent: pulumi.Resource | None = None) -> aws.autoscaling.Schedule:
    return aws.autoscaling.Schedule(
        name, scheduled_action_name=name, autoscaling_group_name="asg", start_time=start, min_size=-1, max_size=-1, desired_capacity=2,
        opts=pulumi.ResourceOptions(depends_on=depends_on or [], parent=parent),
    )


def _run(program) -> offline.OfflineEngine:
    engine = offline.OfflineEngine(now=NOW)
    engine.run(program)
    return engine


# --- a scheduled action must start in the future when it is created ----------------------------------


def test_an_action_in_the_past_is_refused_with_the_autoscaling_rule_and_its_source():
    past = (NOW - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    with pytest.raises(ApplyTimeRuleError) as refused:
        _run(lambda: _schedule("scale", past))
    message = str(refused.value)
    assert f"aws:autoscaling/schedule:Schedule 'scale': startTime {past} is not in the future" in message
    assert "PutScheduledUpdateGroupAction: 'If you try to schedule your action in the past" in message


def test_an_action_created_after_a_slow_dependency_is_judged_at_its_creation_not_at_program_start():
    """Ten minutes ahead of program start, but created after an EKS control plane (15 minutes): refused."""
    ahead = (NOW + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def program() -> None:
        cluster = aws.eks.Cluster("cp", role_arn="arn:aws:iam::123456789012:role/eks", vpc_config={"subnet_ids": ["subnet-0aaaaaaaaaaaaaaaa"]})
        _schedule("scale", ahead, depends_on=[cluster])

    with pytest.raises(ApplyTimeRuleError) as refused:
        _run(program)
    assert "its create call comes at 2026-11-30T16:15:00Z (15 minutes later" in str(refused.value)
    # the same action with no dependency is created at once, 10 minutes before it starts: accepted
    _run(lambda: _schedule("scale", ahead))


def test_a_component_dependency_holds_back_the_components_children_too():
    """depends_on given to a component: its children wait for it (the engine answers the component's registration then)."""
    ahead = (NOW + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")

    class Box(pulumi.ComponentResource):
        def __init__(self, name: str, opts: pulumi.ResourceOptions) -> None:
            super().__init__("test:index:Box", name, None, opts)
            _schedule(f"{name}-scale", ahead, parent=self)
            self.register_outputs({})

    def program() -> None:
        cluster = aws.eks.Cluster("cp", role_arn="arn:aws:iam::123456789012:role/eks", vpc_config={"subnet_ids": ["subnet-0aaaaaaaaaaaaaaaa"]})
        Box("box", pulumi.ResourceOptions(depends_on=[cluster]))

    with pytest.raises(ApplyTimeRuleError, match="box-scale"):
        _run(program)


def test_the_real_stack_creates_its_action_within_the_margin():
    """The dev stack's first `up`: the scale-up action is created 26 minutes in, inside the 45-minute margin."""
    result = offline.run_stack("dev", now=NOW, reservation=fixture_for)
    rules = ApplyTimeRules(NOW)  # the same timeline the engine's rules saw, rebuilt from the recorded registrations
    for record in result.resources:
        rules.on_registration(record, record.name)
    moment = rules.timeline.moment(result.one(SCHEDULE).urn)
    assert moment is not None and rules.violations == []
    created_after = moment.starts - NOW
    assert timedelta(minutes=20) <= created_after <= timedelta(minutes=30)  # the 20-30 minutes the issue saw
    assert created_after + timedelta(minutes=15) <= SCALE_UP_MARGIN  # headroom for a slow control plane
    assert create_time("eks:index:Cluster", {}) == EKS_CONTROL_PLANE


# --- the action sets only what it names --------------------------------------------------------------


@pytest.mark.parametrize("unset", ["min_size", "max_size"])
def test_an_action_that_leaves_a_size_unset_is_refused(unset):
    ahead = (NOW + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def program() -> None:
        values = {"min_size": -1, "max_size": -1, "desired_capacity": 2}
        values.pop(unset)
        aws.autoscaling.Schedule("scale", scheduled_action_name="scale", autoscaling_group_name="asg", start_time=ahead, **values)

    with pytest.raises(ApplyTimeRuleError) as refused:
        _run(program)
    camel = {"min_size": "minSize", "max_size": "maxSize"}[unset]
    assert f"{camel} unset: the AWS provider then sends 0" in str(refused.value) and "Set to -1 if you don't want to change" in str(refused.value)


# --- a Capacity Block node group updates without surge ---------------------------------------------


def _node_group(update_config: aws.eks.NodeGroupUpdateConfigArgs, capacity_type: str = "CAPACITY_BLOCK") -> None:
    aws.eks.NodeGroup(
        "gpu", cluster_name="c", node_role_arn="arn:aws:iam::123456789012:role/n", subnet_ids=["subnet-0aaaaaaaaaaaaaaaa"],
        capacity_type=capacity_type, scaling_config={"min_size": 0, "max_size": 1, "desired_size": 0}, update_config=update_config,
    )


@pytest.mark.parametrize("strategy", [None, "DEFAULT"])
def test_a_capacity_block_group_without_minimal_is_refused_with_the_eks_source(strategy):
    with pytest.raises(ApplyTimeRuleError) as refused:
        _run(lambda: _node_group(aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1, update_strategy=strategy)))
    message = str(refused.value)
    assert "aws:eks/nodeGroup:NodeGroup 'gpu': capacityType CAPACITY_BLOCK with updateConfig.updateStrategy DEFAULT" in message
    assert "EKS API reference, NodegroupUpdateConfig" in message and "managed-node-update-behavior" in message


def test_minimal_passes_and_on_demand_groups_are_not_concerned():
    """Both groups are declared (the run ends with them) and the rule, asked directly of each registration, refuses neither."""
    minimal = offline.OfflineEngine(now=NOW).run(lambda: _node_group(aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1, update_strategy="MINIMAL")))
    on_demand = offline.OfflineEngine(now=NOW).run(lambda: _node_group(aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1), capacity_type="ON_DEMAND"))
    groups = [minimal.one("aws:eks/nodeGroup:NodeGroup"), on_demand.one("aws:eks/nodeGroup:NodeGroup")]
    assert [(g.plain_inputs["capacityType"], g.plain_inputs["updateConfig"].get("updateStrategy")) for g in groups] == [
        ("CAPACITY_BLOCK", "MINIMAL"), ("ON_DEMAND", None),
    ]
    for group in groups:
        rules = ApplyTimeRules(NOW)
        rules.on_registration(group, group.name)
        assert rules.violations == []
    # the same registration with its strategy dropped is refused: the rule looks at the strategy, not at nothing
    dropped = dataclasses.replace(groups[0], inputs={**groups[0].inputs, "updateConfig": {"maxUnavailable": 1}})
    rules = ApplyTimeRules(NOW)
    rules.on_registration(dropped, dropped.name)
    assert [v.rule for v in rules.violations] == ["capacity_block_updates_without_surge"]


def test_the_capacity_block_component_obeys_every_rule_and_the_rules_name_every_violation():
    fixture = offline.ReservationFixture(id=RID, availability_zone="us-east-1a", instance_count=2, start=NOW + timedelta(minutes=5))
    args = CapacityBlockNodeGroupArgs(
        cluster_name="c", kubernetes_version="1.34", subnet_ids_by_az=SUBNETS, instance_type=B300, reservation_id=RID, now=NOW,
    )
    engine = offline.OfflineEngine(now=NOW, reservation=fixture)
    result = engine.run(lambda: CapacityBlockNodeGroup("gpu", args))
    assert result.one(SCHEDULE).plain_inputs["startTime"] == "2026-11-30T16:45:00Z"  # now + margin, not the start
    assert engine.rules is not None and engine.rules.violations == []


def _cluster_and_gpu_nodes(margin: timedelta) -> None:
    cluster = Cluster("c", ClusterArgs(version="1.34", vpc_id="vpc-0123456789abcdef0", private_subnet_ids=list(SUBNETS.values()), admin_role_arns=[ADMIN]))
    args = CapacityBlockNodeGroupArgs(
        cluster_name=cluster.cluster_name, kubernetes_version="1.34", subnet_ids_by_az=SUBNETS, instance_type=B300,
        reservation_id=RID, now=NOW, scale_up_margin=margin,
    )
    CapacityBlockNodeGroup("gpu", args, opts=pulumi.ResourceOptions(depends_on=[cluster]))


def test_a_margin_shorter_than_the_chain_fails_the_plan_like_autoscaling_would():
    """A block starting in 5 minutes: with no margin the action would start before a first `up` creates it."""
    fixture = offline.ReservationFixture(id=RID, availability_zone="us-east-1a", instance_count=2, start=NOW + timedelta(minutes=5))
    with pytest.raises(ApplyTimeRuleError, match=r"startTime 2026-11-30T16:05:00Z is not in the future .* its create call comes at 2026-11-30T16:2"):
        offline.OfflineEngine(now=NOW, reservation=fixture).run(lambda: _cluster_and_gpu_nodes(timedelta(0)))
    result = offline.OfflineEngine(now=NOW, reservation=fixture).run(lambda: _cluster_and_gpu_nodes(SCALE_UP_MARGIN))
    assert result.one(SCHEDULE).plain_inputs["startTime"] == "2026-11-30T16:45:00Z"


# --- an EventBridge Scheduler one-time schedule must fire after it is created --------------------------


def _one_time(name: str, at: datetime, depends_on: list[pulumi.Resource] | None = None) -> aws.scheduler.Schedule:
    return aws.scheduler.Schedule(
        name, schedule_expression=f"at({at:%Y-%m-%dT%H:%M:%S})", schedule_expression_timezone="UTC",
        flexible_time_window={"mode": "OFF"}, target={"arn": "arn:aws:scheduler:::aws-sdk:cloudwatch:enableAlarmActions", "role_arn": "arn:aws:iam::123456789012:role/s"},
        opts=pulumi.ResourceOptions(depends_on=depends_on or []),
    )


def test_a_one_time_schedule_whose_time_passes_before_it_is_created_is_refused_with_its_source():
    def program() -> None:
        cluster = aws.eks.Cluster("cp", role_arn="arn:aws:iam::123456789012:role/eks", vpc_config={"subnet_ids": ["subnet-0aaaaaaaaaaaaaaaa"]})
        _one_time("switch", NOW + timedelta(minutes=10), depends_on=[cluster])

    with pytest.raises(ApplyTimeRuleError) as refused:
        _run(program)
    message = str(refused.value)
    assert "aws:scheduler/schedule:Schedule 'switch': scheduleExpression at(2026-11-30T16:10:00) (UTC) has passed when the schedule is created" in message
    assert "EventBridge Scheduler user guide, schedule-types" in message
    _run(lambda: _one_time("switch", NOW + timedelta(minutes=10)))  # created at once: fires after
    _run(lambda: aws.scheduler.Schedule("rate", schedule_expression="rate(10 minutes)", flexible_time_window={"mode": "OFF"},
                                        target={"arn": "arn:aws:scheduler:::aws-sdk:autoscaling:enableMetricsCollection", "role_arn": "arn:aws:iam::123456789012:role/s"}))
