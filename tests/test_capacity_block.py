"""Tests for kimi_k3.capacity.node_group: the Capacity Block node group under the offline engine."""

from __future__ import annotations

import base64
import email
import json
from datetime import UTC, datetime, timedelta

import pytest
import yaml

from kimi_k3 import offline
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.capacity.node_group import EVENT_DETAIL_TYPES, INSTANCE_TYPE_NODE_LABEL, CapacityBlockNodeGroup, CapacityBlockNodeGroupArgs
from kimi_k3.core import labels
from kimi_k3.errors import UserError
from tests.refusals import assert_refused_before_declaring

UTC = UTC
NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
START = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
RID = "cr-0a1b2c3d4e5f60718"
B300 = "p6-b300.48xlarge"
SUBNETS = {"us-east-1a": "subnet-0aaaaaaaaaaaaaaaa", "us-east-1b": "subnet-0bbbbbbbbbbbbbbbb"}
VPC = "vpc-0123456789abcdef0"

LT = "aws:ec2/launchTemplate:LaunchTemplate"
NG = "aws:eks/nodeGroup:NodeGroup"
SCHEDULE = "aws:autoscaling/schedule:Schedule"


def fixture(**changes) -> offline.ReservationFixture:
    values = dict(id=RID, availability_zone="us-east-1b", instance_count=2, state="scheduled", start=START)
    values.update(changes)
    return offline.ReservationFixture(**values)


def args(**changes) -> CapacityBlockNodeGroupArgs:
    values = dict(
        cluster_name="kimi-k3-dev", kubernetes_version="1.34", subnet_ids_by_az=SUBNETS, instance_type=B300,
        reservation_id=RID, security_group_ids=["sg-0123456789abcdef0"], vpc_id=VPC, now=NOW,
    )
    values.update(changes)
    return CapacityBlockNodeGroupArgs(**values)


def run(reservation: offline.ReservationFixture | None = None, **changes) -> offline.PlanResult:
    engine = offline.OfflineEngine(now=NOW, reservation=reservation or fixture())
    return engine.run(lambda: CapacityBlockNodeGroup("gpu", args(**changes)))


@pytest.fixture(scope="module")
def scheduled() -> offline.PlanResult:
    return run()


# --- launch template ---------------------------------------------------------------


def test_launch_template_buys_from_the_block_and_carries_the_instance_type(scheduled):
    lt = scheduled.one(LT).plain_inputs
    assert lt["instanceType"] == B300
    assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt["capacityReservationSpecification"] == {"capacityReservationTarget": {"capacityReservationId": RID}}


def test_launch_template_requires_imdsv2_with_one_hop(scheduled):
    meta = scheduled.one(LT).plain_inputs["metadataOptions"]
    assert meta["httpTokens"] == "required" and meta["httpPutResponseHopLimit"] == 1 and meta["httpEndpoint"] == "enabled"


def test_root_volume_is_encrypted_gp3_sized_by_arg(scheduled):
    (root,) = scheduled.one(LT).plain_inputs["blockDeviceMappings"]
    assert root["deviceName"] == "/dev/xvda"
    assert root["ebs"] == {"volumeSize": 200, "volumeType": "gp3", "encrypted": "true", "deleteOnTermination": "true"}
    bigger = run(root_volume_gib=500).one(LT).plain_inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"]
    assert bigger == 500


def test_user_data_is_only_a_raid0_nodeconfig_part(scheduled):
    raw = base64.b64decode(scheduled.one(LT).plain_inputs["userData"]).decode()
    message = email.message_from_string(raw)
    assert message.is_multipart()
    parts = message.get_payload()
    assert [p.get_content_type() for p in parts] == ["application/node.eks.aws"]
    node_config = yaml.safe_load(parts[0].get_payload())
    # Only our part: EKS merges the cluster details (no custom AMI), so no spec.cluster here.
    assert node_config == {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"instance": {"localStorage": {"strategy": "RAID0"}}},
    }


def test_no_placement_group_anywhere(scheduled):
    assert not [r for r in scheduled.resources if "placementGroup" in r.type]
    assert "placement" not in scheduled.one(LT).plain_inputs


def test_tags_reach_instances_and_volumes():
    result = run(tags={"Project": "kimi-k3"})
    specs = {s["resourceType"]: s["tags"] for s in result.one(LT).plain_inputs["tagSpecifications"]}
    assert {"instance", "volume"} <= set(specs)
    assert specs["instance"] == {"Project": "kimi-k3", "kimi-k3.io/capacity-reservation": RID}


def test_without_efa_there_are_no_interfaces_and_groups_sit_on_the_template(scheduled):
    lt = scheduled.one(LT).plain_inputs
    assert "networkInterfaces" not in lt
    assert lt["vpcSecurityGroupIds"] == ["sg-0123456789abcdef0"]


def test_efa_on_p6_b300_exposes_16_efa_only_interfaces_behind_an_ena_primary():
    result = run(efa_enabled=True)
    lt = result.one(LT).plain_inputs
    interfaces = lt["networkInterfaces"]
    primary, *efas = interfaces
    assert (primary["networkCardIndex"], primary["deviceIndex"], primary["interfaceType"]) == (0, 0, "interface")
    assert [(i["networkCardIndex"], i["deviceIndex"], i["interfaceType"]) for i in efas] == [
        (card, 0, "efa-only") for card in range(1, 17)
    ]
    efa_group = result.one("aws:ec2/securityGroup:SecurityGroup", "gpu-efa").id
    assert all(i["securityGroups"] == ["sg-0123456789abcdef0", efa_group] for i in interfaces)
    assert "vpcSecurityGroupIds" not in lt  # not allowed next to network interfaces


def test_efa_on_p5en_puts_an_efa_only_interface_on_card_0_too():
    result = run(reservation=fixture(instance_type="p5en.48xlarge"), instance_type="p5en.48xlarge", efa_enabled=True)
    interfaces = result.one(LT).plain_inputs["networkInterfaces"]
    cards = [(i["networkCardIndex"], i["deviceIndex"], i["interfaceType"]) for i in interfaces]
    assert cards[:2] == [(0, 0, "interface"), (0, 1, "efa-only")]
    assert len([c for c in cards if c[2] == "efa-only"]) == 16


def test_efa_needs_security_groups():
    with pytest.raises(UserError, match="efa_enabled needs security_group_ids"):
        run(efa_enabled=True, security_group_ids=[])


# --- node group --------------------------------------------------------------------


def test_node_group_is_a_capacity_block_group_on_the_nvidia_ami(scheduled):
    ng = scheduled.one(NG).plain_inputs
    assert ng["capacityType"] == "CAPACITY_BLOCK"
    assert ng["amiType"] == "AL2023_x86_64_NVIDIA"
    assert ng["version"] == "1.34"
    assert ng["launchTemplate"] == {"id": scheduled.one(LT).id, "version": "1"}


def test_instance_type_and_disk_size_only_in_the_launch_template(scheduled):
    ng = scheduled.one(NG).plain_inputs
    assert "instanceTypes" not in ng and "diskSize" not in ng


def test_only_the_subnet_of_the_blocks_az(scheduled):
    assert scheduled.one(NG).plain_inputs["subnetIds"] == [SUBNETS["us-east-1b"]]


def test_gpu_labels_and_taint(scheduled):
    ng = scheduled.one(NG).plain_inputs
    assert ng["labels"] == {**labels.GPU_NODE_LABELS, INSTANCE_TYPE_NODE_LABEL: B300}
    assert ng["taints"] == [{"key": labels.GPU_TAINT_KEY, "value": labels.GPU_TAINT_VALUE, "effect": "NO_SCHEDULE"}]


def test_updates_replace_one_node_at_a_time_terminating_first(scheduled):
    assert scheduled.one(NG).plain_inputs["updateConfig"] == {"maxUnavailable": 1, "updateStrategy": "MINIMAL"}


def test_release_version_is_pinnable():
    assert run(ami_release_version="1.34.2-20251120").one(NG).plain_inputs["releaseVersion"] == "1.34.2-20251120"
    assert "releaseVersion" not in run().one(NG).plain_inputs


def test_release_for_another_kubernetes_version_is_refused():
    with pytest.raises(UserError, match="AMI release 1.33.5-20251120 is not for Kubernetes 1.34"):
        run(ami_release_version="1.33.5-20251120")


def test_desired_size_drift_is_ignored_while_the_scheduled_action_owns_it():
    result = run()
    assert result.one("aws:eks/nodeGroup:NodeGroup", "gpu-ng").ignore_changes == ["scalingConfig.desiredSize"]


def test_own_node_role_with_the_three_node_policies(scheduled):
    role = scheduled.one("aws:iam/role:Role", "gpu-node-role")
    trust = json.loads(role.plain_inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    policies = sorted(a.plain_inputs["policyArn"] for a in scheduled.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment"))
    assert policies == [
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    ]
    assert scheduled.one(NG).plain_inputs["nodeRoleArn"] == role.outputs["arn"]


def test_given_node_role_is_used_and_none_created():
    arn = "arn:aws:iam::123456789012:role/existing-gpu-nodes"
    result = run(node_role_arn=arn)
    assert not result.by_type("aws:iam/role:Role")
    assert result.one(NG).plain_inputs["nodeRoleArn"] == arn


# --- scaling across the block's life ----------------------------------------------


def test_scheduled_block_starts_at_zero_and_scales_at_its_start(scheduled):
    scaling = scheduled.one(NG).plain_inputs["scalingConfig"]
    assert scaling == {"minSize": 0, "maxSize": 2, "desiredSize": 0}
    action = scheduled.one(SCHEDULE).plain_inputs
    assert action["startTime"] == "2026-12-01T11:30:00Z"
    # Only the desired capacity: -1 leaves min and max alone, so EKS's own scale-down to 0 still works.
    assert (action["minSize"], action["maxSize"], action["desiredCapacity"]) == (-1, -1, 2)
    assert "recurrence" not in action
    asg = scheduled.one(NG).outputs["resources"][0]["autoscalingGroups"][0]["name"]
    assert action["autoscalingGroupName"] == asg


def test_active_block_runs_the_reserved_count_without_an_action():
    result = run(reservation=fixture(state="active", start=NOW - timedelta(days=1)))
    assert result.one(NG).plain_inputs["scalingConfig"] == {"minSize": 0, "maxSize": 2, "desiredSize": 2}
    assert not result.by_type(SCHEDULE)


def test_block_past_its_start_but_not_yet_active_asks_for_nodes_now_and_warns():
    result = run(reservation=fixture(start=NOW - timedelta(minutes=5)))
    assert result.one(NG).plain_inputs["scalingConfig"]["desiredSize"] == 2
    assert not result.by_type(SCHEDULE)
    assert any("is still scheduled" in w for w in result.warnings)


@pytest.mark.parametrize("count,required", [(1, 1), (4, 2), (8, 8)])
def test_max_is_the_reserved_count(count, required):
    scaling = run(reservation=fixture(instance_count=count), nodes_required=required).one(NG).plain_inputs["scalingConfig"]
    assert scaling["maxSize"] == count


# --- alerts ------------------------------------------------------------------------


def test_event_rule_matches_this_blocks_delivery_and_expiration_events(scheduled):
    pattern = json.loads(scheduled.one("aws:cloudwatch/eventRule:EventRule").plain_inputs["eventPattern"])
    assert pattern == {
        "source": ["aws.ec2"],
        "detail-type": list(EVENT_DETAIL_TYPES),
        "resources": [f"arn:aws:ec2:us-east-1:{offline.ACCOUNT_ID}:capacity-reservation/{RID}"],
    }
    assert {"Capacity Block Reservation Expiration Warning", "Capacity Block Expiration Warning",
            "Capacity Block Reservation Delivered", "Capacity Block Delivered"} == set(EVENT_DETAIL_TYPES)


def test_topic_is_kms_encrypted_and_only_this_rule_and_this_accounts_alarms_may_publish(scheduled):
    topic = scheduled.one("aws:sns/topic:Topic")
    key = scheduled.one("aws:kms/key:Key")
    assert topic.plain_inputs["kmsMasterKeyId"] == key.outputs["arn"]
    assert key.plain_inputs["enableKeyRotation"] is True
    key_policy = json.loads(key.plain_inputs["policy"])
    events = [s for s in key_policy["Statement"] if s["Principal"] == {"Service": "events.amazonaws.com"}]
    assert events and set(events[0]["Action"]) == {"kms:GenerateDataKey*", "kms:Decrypt"}

    policy = json.loads(scheduled.one("aws:sns/topicPolicy:TopicPolicy").plain_inputs["policy"])
    statement, alarms = policy["Statement"]
    assert alarms["Principal"] == {"Service": "cloudwatch.amazonaws.com"} and alarms["Action"] == "sns:Publish"
    assert alarms["Resource"] == topic.outputs["arn"] and alarms["Condition"] == {"StringEquals": {"aws:SourceAccount": offline.ACCOUNT_ID}}
    cloudwatch = [s for s in key_policy["Statement"] if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}]
    assert cloudwatch and set(cloudwatch[0]["Action"]) == {"kms:GenerateDataKey*", "kms:Decrypt"}
    rule = scheduled.one("aws:cloudwatch/eventRule:EventRule")
    assert statement["Principal"] == {"Service": "events.amazonaws.com"} and statement["Action"] == "sns:Publish"
    assert statement["Resource"] == topic.outputs["arn"]
    assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": rule.outputs["arn"]}}
    target = scheduled.one("aws:cloudwatch/eventTarget:EventTarget").plain_inputs
    assert target["arn"] == topic.outputs["arn"] and target["rule"] == rule.outputs["name"]


def test_email_subscription_only_when_asked(scheduled):
    assert not scheduled.by_type("aws:sns/topicSubscription:TopicSubscription")
    sub = run(alert_email="oncall@example.com").one("aws:sns/topicSubscription:TopicSubscription").plain_inputs
    assert (sub["protocol"], sub["endpoint"]) == ("email", "oncall@example.com")


# --- outputs, structure ------------------------------------------------------------


def test_outputs_describe_the_block_and_its_resources():
    captured = []
    engine = offline.OfflineEngine(now=NOW, reservation=fixture())
    engine.run(lambda: captured.append(CapacityBlockNodeGroup("gpu", args())))
    (group,) = captured
    assert group.availability_zone == "us-east-1b"
    assert group.start == "2026-12-01T11:30:00+00:00" and group.end == "2026-12-08T11:30:00+00:00"
    assert (group.instance_count, group.state) == (2, "scheduled")
    for name in ("node_group_name", "asg_name", "alert_topic_arn", "launch_template_id"):
        assert getattr(group, name) is not None


def test_every_child_is_parented_to_the_component(scheduled):
    component = scheduled.one("kimi-k3:index:CapacityBlockNodeGroup")
    others = [r for r in scheduled.resources if r is not component]
    assert others and all(r.parent_urn == component.urn for r in others)
    assert all(r.name.startswith("gpu-") for r in others)


def test_looked_up_facts_can_be_passed_instead_of_an_id():
    facts = CapacityBlockFacts(RID, "us-east-1a", B300, 3, "active", NOW - timedelta(days=1), NOW + timedelta(days=6))
    engine = offline.OfflineEngine(now=NOW, reservation=None)
    result = engine.run(lambda: CapacityBlockNodeGroup("gpu", args(reservation=facts, reservation_id=None)))
    assert not [t for t, _ in engine.invokes if "CapacityBlock" in t]
    assert result.one(NG).plain_inputs["subnetIds"] == [SUBNETS["us-east-1a"]]
    assert result.one(NG).plain_inputs["scalingConfig"]["desiredSize"] == 3


# --- refusals: clear message, nothing declared -------------------------------------


@pytest.mark.parametrize(
    "reservation,changes,message",
    [
        (fixture(state="payment-failed"), {}, f"{RID} is payment-failed"),
        (fixture(instance_type="p5en.48xlarge"), {}, "reserves p5en.48xlarge, but instance_type is p6-b300.48xlarge"),
        (fixture(availability_zone="us-east-1d"), {}, "is in us-east-1d, which the network does not cover"),
        (fixture(instance_count=1), {"nodes_required": 2}, r"reserves 1 instance\(s\) but nodes_required is 2"),
        (fixture(id="cr-0ffffffffffffffff"), {}, f"Capacity Block {RID} was not found"),
    ],
    ids=["payment-failed", "other-type", "other-az", "too-few", "unknown-id"],
)
def test_unusable_block_stops_the_run_before_anything_is_declared(reservation, changes, message):
    engine = offline.OfflineEngine(now=NOW, reservation=reservation)
    assert_refused_before_declaring(lambda: CapacityBlockNodeGroup("gpu", args(**changes)), message, engine=engine)


def test_exactly_one_of_reservation_or_id():
    with pytest.raises(UserError, match="exactly one of reservation"):
        run(reservation_id=None)
