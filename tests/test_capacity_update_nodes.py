"""``kimi-k3 capacity update-nodes``: the GPU node group's version update during a block, as EKS accepts it
(drain and size 0, UpdateNodegroupVersion, scale back), resumable, refused where EKS or the block would refuse it.

EC2, EKS and Auto Scaling calls go through ``botocore.stub.Stubber`` against the real service models, in the
order given (a call out of order, or one more, fails the test); time is a fake monotonic clock the waits advance.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import botocore.session
import pytest
from botocore.stub import Stubber

from kimi_k3.capacity import aws as capacity_aws
from kimi_k3.capacity import node_update as nu
from kimi_k3.capacity import scale_up as scaling
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.cli import capacity_update_nodes as command
from kimi_k3.cli import main
from kimi_k3.errors import UserError
from kimi_k3.offline import create_times
from kimi_k3.serving.base import PDB_MAX_UNAVAILABLE
from kimi_k3.stack import time_to_serve
from kimi_k3.stack.settings import load_stack
from kimi_k3.weights import estimate

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
STACK = load_stack("prod")
RID = STACK.capacity.reservation_id
REGION = STACK.region
CLUSTER = "kimi-k3-prod"
GROUP = "kimi-k3-gpu-ng-5f3a"
ASG = "eks-kimi-k3-gpu-ng-5f3a-0ec9"
LT = "lt-0123456789abcdef0"
OLD, NEW = "1.34.2-20251120", "1.34.2-20251215"
_SESSION = botocore.session.get_session()

FIGURES = nu.DowntimeFigures(drain_s=2015, drain_rounds=2, update_s=120, node_start_min=9.2, node_case="warm", price_per_hour=112.3)
"""Figures for the pure tests: 2 x 2015 s + 120 s + 552 s = 4702 s, 79 whole minutes."""


def client(service):
    return _SESSION.create_client(service, region_name=REGION, aws_access_key_id="AKIAEXAMPLE", aws_secret_access_key="x")


def reservation(state="active", start=NOW - timedelta(days=1), days=7, total=2):
    return {
        "CapacityReservationId": RID, "State": state, "InstanceType": "p6-b300.48xlarge", "AvailabilityZone": f"{REGION}a",
        "ReservationType": "capacity-block", "TotalInstanceCount": total, "AvailableInstanceCount": 0,
        "StartDate": start, "EndDate": start + timedelta(days=days), "InstancePlatform": "Linux/UNIX",
    }


def nodegroup(desired=2, status="ACTIVE", release=OLD, version="1.34", lt_version="3", ami_type="AL2023_x86_64_NVIDIA", tags=None, template=True):
    group = {
        "nodegroupName": GROUP, "clusterName": CLUSTER, "status": status, "version": version, "releaseVersion": release, "amiType": ami_type,
        "scalingConfig": {"minSize": 0, "maxSize": 2, "desiredSize": desired},
        "resources": {"autoScalingGroups": [{"name": ASG}]},
        "tags": tags if tags is not None else {scaling.RESERVATION_TAG: RID},
    }
    if template:
        group["launchTemplate"] = {"id": LT, "name": "kimi-k3-gpu-lt", "version": lt_version}
    return group


def state(instances=None, in_progress=None, **changes):
    group = nodegroup(**changes)
    count = group["scalingConfig"]["desiredSize"] if instances is None else instances
    return nu.NodeGroupState.from_api(group, count, in_progress)


def block(**changes):
    return CapacityBlockFacts.from_ec2(reservation(**changes))


def asg(instances):
    return {"AutoScalingGroups": [{
        "AutoScalingGroupName": ASG, "MinSize": 0, "MaxSize": 2, "DesiredCapacity": 0, "DefaultCooldown": 300,
        "AvailabilityZones": [f"{REGION}a"], "HealthCheckType": "EC2", "CreatedTime": NOW - timedelta(days=2),
        "Instances": [{"InstanceId": f"i-0{n:016x}", "InstanceType": "p6-b300.48xlarge", "AvailabilityZone": f"{REGION}a",
                       "LifecycleState": "Terminating" if n else "InService", "HealthStatus": "Healthy", "ProtectedFromScaleIn": False}
                      for n in range(instances)],
    }]}


def update(update_id, status="InProgress", kind="VersionUpdate", errors=(), release=None):
    answer = {"id": update_id, "status": status, "type": kind, "createdAt": NOW}
    if release:
        answer["params"] = [{"type": "ReleaseVersion", "value": release}]
    if errors:
        answer["errors"] = [{"errorCode": "NodeCreationFailure", "errorMessage": e, "resourceIds": [GROUP]} for e in errors]
    return {"update": answer}


# --- the plan (pure) -----------------------------------------------------------------------


def test_a_serving_group_gets_drain_size_0_update_and_scale_back_with_its_downtime_and_cost():
    plan = nu.plan_node_update(state(), block(), NOW, nu.NodeVersions(release_version=NEW), FIGURES)
    assert plan.steps == (nu.SCALE_IN, nu.UPDATE, nu.SCALE_BACK)
    assert plan.downtime_min == 79 and plan.node_minutes == 158 and plan.cost_usd == pytest.approx(158 / 60 * 112.3)
    assert plan.serving_again_at == NOW + timedelta(minutes=79)
    assert plan.outage_min == 45  # from the second pod's stop: 2015 s + 120 s + 552 s


def test_a_plan_that_serves_again_after_the_scale_down_is_refused_and_one_that_fits_is_not():
    end = NOW - timedelta(days=1) + timedelta(days=7)
    last = end - timedelta(minutes=40) - timedelta(minutes=79)  # serving again exactly at the scale-down moment
    target = nu.NodeVersions(release_version=NEW)
    assert nu.plan_node_update(state(), block(), last, target, FIGURES).serving_again_at == end - timedelta(minutes=40)
    with pytest.raises(UserError) as caught:
        nu.plan_node_update(state(), block(), last + timedelta(minutes=1), target, FIGURES)
    message = str(caught.value)
    assert message.startswith("too late for a node update") and "~79 min (drain 2 x 2015 s" in message and "40 min before the block ends" in message


@pytest.mark.parametrize(("changes", "said"), [
    ({"state": "scheduled", "start": NOW + timedelta(hours=3)}, "is scheduled"),
    ({"state": "expired", "start": NOW - timedelta(days=8)}, "is expired"),
])
def test_a_block_that_is_not_active_is_refused(changes, said):
    with pytest.raises(UserError, match=said):
        nu.plan_node_update(state(), block(**changes), NOW, nu.NodeVersions(release_version=NEW), FIGURES)


@pytest.mark.parametrize("tags", [{}, {scaling.RESERVATION_TAG: "cr-0ffffffffffffffff"}])
def test_a_group_without_the_blocks_reservation_tag_is_refused(tags):
    with pytest.raises(UserError, match=f"is not the Capacity Block group of {RID}"):
        nu.plan_node_update(state(tags=tags), block(), NOW, nu.NodeVersions(release_version=NEW), FIGURES)


@pytest.mark.parametrize(("desired", "kind"), [(2, "ConfigUpdate"), (2, "VersionUpdate"), (0, "AssociateIdentityProviderConfig")])
def test_an_update_already_in_progress_that_is_not_this_flows_own_is_refused(desired, kind):
    running = nu.UpdateState("u-1", kind, "InProgress")
    with pytest.raises(UserError) as caught:
        nu.plan_node_update(state(desired=desired, status="UPDATING", in_progress=running), block(), NOW, nu.NodeVersions(release_version=NEW), FIGURES)
    assert "ResourceInUseException" in str(caught.value) and "u-1" in str(caught.value)


@pytest.mark.parametrize(("group", "target", "said"), [
    ({}, nu.NodeVersions(), "nothing to update to"),
    ({"template": False}, nu.NodeVersions(launch_template_version="4"), "was not created with a launch template"),
    ({"ami_type": "CUSTOM"}, nu.NodeVersions(release_version=NEW, launch_template_version="4"), "uses a custom AMI"),
    ({"ami_type": "CUSTOM"}, nu.NodeVersions(kubernetes_version="1.34"), "uses a custom AMI"),
    ({}, nu.NodeVersions(release_version="1.34.2-20251001"), "cannot roll a node group back to an earlier AMI version"),
    ({"version": "1.34"}, nu.NodeVersions(kubernetes_version="1.33"), "cannot roll a node group back to an earlier Kubernetes version"),
    ({}, nu.NodeVersions(release_version="1.35.0-20260101"), "is not for Kubernetes 1.34"),
    ({}, nu.NodeVersions(release_version="latest"), "expected an EKS AMI release version"),
])
def test_a_version_the_eks_api_would_refuse_is_refused_with_its_source(group, target, said):
    with pytest.raises(UserError) as caught:
        nu.plan_node_update(state(**group), block(), NOW, target, FIGURES)
    assert said in str(caught.value)
    if "roll" in said or "custom AMI" in said or "launch template" in said:
        assert nu.UPDATE_NODEGROUP_VERSION_SOURCE in str(caught.value)


def test_a_custom_ami_group_takes_a_launch_template_version_alone():
    plan = nu.plan_node_update(state(ami_type="CUSTOM"), block(), NOW, nu.NodeVersions(launch_template_version="4"), FIGURES)
    assert plan.steps == (nu.SCALE_IN, nu.UPDATE, nu.SCALE_BACK)


@pytest.mark.parametrize(("group", "steps", "resume"), [
    ({"desired": 0, "instances": 1}, (nu.SCALE_IN, nu.UPDATE, nu.SCALE_BACK), None),  # scaled to 0, a node still draining
    ({"desired": 0, "instances": 0}, (nu.UPDATE, nu.SCALE_BACK), None),  # at 0, not updated
    ({"desired": 0, "instances": 0, "status": "UPDATING", "in_progress": nu.UpdateState("u-7", "VersionUpdate", "InProgress")},
     (nu.UPDATE, nu.SCALE_BACK), "u-7"),  # the version update runs: wait for it
    ({"desired": 0, "instances": 0, "release": NEW}, (nu.SCALE_BACK,), None),  # updated, not scaled back
    ({"desired": 2, "release": NEW}, (), None),  # done
])
def test_a_rerun_resumes_where_the_group_stands(group, steps, resume):
    plan = nu.plan_node_update(state(**group), block(), NOW, nu.NodeVersions(release_version=NEW), FIGURES)
    assert plan.steps == steps and plan.resume_update == resume


def test_the_downtime_of_a_resumed_run_counts_only_the_steps_left():
    plan = nu.plan_node_update(state(desired=0, instances=0, release=NEW), block(), NOW, nu.NodeVersions(release_version=NEW), FIGURES)
    assert plan.downtime_min == math.ceil(9.2)


# --- the command, through the real models ----------------------------------------------------


class FakeTime:
    """A monotonic clock that moves only when the code under test sleeps."""

    def __init__(self):
        self.t = 0.0
        self.slept: list[float] = []

    def monotonic(self):
        return self.t

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.t += seconds


@pytest.fixture
def aws(monkeypatch):
    ec2, quotas, eks, autoscaling = client("ec2"), client("service-quotas"), client("eks"), client("autoscaling")
    stubs = {"ec2": Stubber(ec2), "eks": Stubber(eks), "asg": Stubber(autoscaling)}
    fake = FakeTime()
    monkeypatch.setattr(capacity_aws, "make_clients", lambda region: capacity_aws.Clients(ec2=ec2, quotas=quotas))
    monkeypatch.setattr(scaling, "make_eks_client", lambda region: eks)
    monkeypatch.setattr(nu, "make_autoscaling_client", lambda region: autoscaling)
    monkeypatch.setattr(command, "ticker", lambda: nu.Ticker(NOW, monotonic=fake.monotonic, sleep=fake.sleep))
    for stub in stubs.values():
        stub.activate()
    stubs["time"] = fake
    yield stubs
    for name in ("ec2", "eks", "asg"):
        stubs[name].assert_no_pending_responses()
        stubs[name].deactivate()


def _read(aws, group, instances, reservation_answer=None):
    """The reads every run starts with: the block, the tagged group, the group's state."""
    aws["ec2"].add_response("describe_capacity_reservations", {"CapacityReservations": [reservation_answer or reservation()]}, {"CapacityReservationIds": [RID]})
    aws["eks"].add_response("list_nodegroups", {"nodegroups": ["kimi-k3-system-ng", GROUP]}, {"clusterName": CLUSTER})
    system = {**nodegroup(), "nodegroupName": "kimi-k3-system-ng", "tags": {}}
    aws["eks"].add_response("describe_nodegroup", {"nodegroup": system}, {"clusterName": CLUSTER, "nodegroupName": "kimi-k3-system-ng"})
    aws["eks"].add_response("describe_nodegroup", {"nodegroup": group}, {"clusterName": CLUSTER, "nodegroupName": GROUP})
    _state(aws, group, instances)


def _state(aws, group, instances, running=None):
    aws["eks"].add_response("describe_nodegroup", {"nodegroup": group}, {"clusterName": CLUSTER, "nodegroupName": GROUP})
    if running is not None:
        aws["eks"].add_response("list_updates", {"updateIds": ["u-old", running["update"]["id"]]}, {"name": CLUSTER, "nodegroupName": GROUP})
        aws["eks"].add_response("describe_update", update("u-old", "Successful", "ConfigUpdate"), {"name": CLUSTER, "nodegroupName": GROUP, "updateId": "u-old"})
        aws["eks"].add_response("describe_update", running, {"name": CLUSTER, "nodegroupName": GROUP, "updateId": running["update"]["id"]})
    aws["asg"].add_response("describe_auto_scaling_groups", asg(instances), {"AutoScalingGroupNames": [ASG]})


def _describe_update(aws, update_id, answer):
    aws["eks"].add_response("describe_update", answer, {"name": CLUSTER, "nodegroupName": GROUP, "updateId": update_id})


def _scale_in(aws):
    config = {"minSize": 0, "maxSize": 2, "desiredSize": 0}
    aws["eks"].add_response("update_nodegroup_config", update("u-in", kind="ConfigUpdate"), {"clusterName": CLUSTER, "nodegroupName": GROUP, "scalingConfig": config})
    _describe_update(aws, "u-in", update("u-in", kind="ConfigUpdate"))
    _describe_update(aws, "u-in", update("u-in", "Successful", "ConfigUpdate"))
    aws["asg"].add_response("describe_auto_scaling_groups", asg(1), {"AutoScalingGroupNames": [ASG]})
    aws["asg"].add_response("describe_auto_scaling_groups", asg(0), {"AutoScalingGroupNames": [ASG]})


def _update(aws, status="Successful"):
    aws["eks"].add_response("update_nodegroup_version", update("u-ver"), {"clusterName": CLUSTER, "nodegroupName": GROUP, "releaseVersion": NEW})
    _describe_update(aws, "u-ver", update("u-ver"))
    _describe_update(aws, "u-ver", update("u-ver", status, errors=("Instances failed to join the kubernetes cluster",) if status == "Failed" else ()))


def _scale_back(aws):
    _state(aws, nodegroup(desired=0, release=NEW), 0)
    config = {"minSize": 0, "maxSize": 2, "desiredSize": 2}
    aws["eks"].add_response("update_nodegroup_config", update("u-back", kind="ConfigUpdate"), {"clusterName": CLUSTER, "nodegroupName": GROUP, "scalingConfig": config})


def test_a_fresh_run_drains_to_0_updates_then_scales_back_in_that_order(aws, capsys):
    _read(aws, nodegroup(desired=2), 2)
    _scale_in(aws)
    _update(aws)
    _scale_back(aws)
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW, "--yes"]) == 0
    out = capsys.readouterr().out
    assert "1. drain and size 0" in out and "2. update" in out and "3. scale back" in out
    assert "Serving downtime: ~" in out and "USD at 112.30 USD per instance-hour" in out and "before the scale-down at" in out
    assert "[scale back] asked EKS for 2 node(s) (update u-back)" in out
    assert aws["time"].slept == [nu.POLL_S] * 3  # one wait each on the config update, the instances and the version update


def test_the_printed_downtime_is_the_drain_the_update_at_0_and_the_stacks_node_start_estimate(aws, capsys):
    _read(aws, nodegroup(desired=2), 2)
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW, "--dry-run"]) == 0
    out = capsys.readouterr().out
    node_start = estimate.estimate_case(time_to_serve.startup_inputs(STACK), "warm").minutes  # prod keeps compile caches in S3
    drain = STACK.serving.front.drain.grace_s * STACK.serving.replicas  # the PodDisruptionBudget: one eviction at a time
    assert PDB_MAX_UNAVAILABLE == 1 and STACK.serving.replicas == 2
    expected = math.ceil((drain + create_times.NODE_GROUP_WITHOUT_JOIN_CHECK.duration.total_seconds()) / 60 + node_start)
    outage = math.ceil((STACK.serving.front.drain.grace_s + create_times.NODE_GROUP_WITHOUT_JOIN_CHECK.duration.total_seconds()) / 60 + node_start)
    assert (f"Serving downtime: ~{expected} min from the first pod's stop until the new nodes serve, no replica at all for the last ~{outage} min "
            f"(up to {2 * expected} GPU-node-minutes, ") in out
    assert f"{2 * expected / 60 * estimate.block_price(STACK.capacity.instance_type).value:,.0f} USD" in out
    assert "--dry-run: nothing sent." in out


def test_without_flags_the_versions_are_the_stacks_config(aws, capsys):
    _read(aws, nodegroup(desired=2, release="1.34.2-20251001"), 2)
    assert main(["capacity", "update-nodes", "prod", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert ("Versions wanted (from the stack's config: clusterVersion, gpuAmiReleaseVersion of Pulumi.prod.yaml): "
            f"version {STACK.cluster.version}, releaseVersion {STACK.capacity.ami_release_version}") in out


def test_without_yes_and_without_a_terminal_nothing_is_sent(aws, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    _read(aws, nodegroup(desired=2), 2)
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW]) == 1
    assert "Not started: stdin is not a terminal; pass --yes" in capsys.readouterr().out


def test_a_rerun_after_the_scale_in_resumes_at_the_update(aws, capsys):
    _read(aws, nodegroup(desired=0), 0)
    _update(aws)
    _scale_back(aws)
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW, "--yes"]) == 0
    assert "1. update: UpdateNodegroupVersion" in capsys.readouterr().out


def test_a_rerun_while_nodes_still_drain_waits_for_them_without_asking_again(aws, capsys):
    _read(aws, nodegroup(desired=0), 1)
    aws["asg"].add_response("describe_auto_scaling_groups", asg(0), {"AutoScalingGroupNames": [ASG]})
    _update(aws)
    _scale_back(aws)
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW, "--yes"]) == 0


def test_a_version_update_to_another_release_at_size_0_is_refused_not_waited_for():
    running = nu.UpdateState.from_api(update("u-9", release="1.34.2-20251201")["update"])
    with pytest.raises(UserError, match="update in progress \\(VersionUpdate u-9, desired size 0, to releaseVersion 1.34.2-20251201\\)"):
        nu.plan_node_update(state(desired=0, instances=0, status="UPDATING", in_progress=running), block(), NOW, nu.NodeVersions(release_version=NEW), FIGURES)


def test_a_rerun_during_the_version_update_waits_for_it_instead_of_starting_another(aws, capsys):
    running = update("u-ver", release=NEW)
    aws["ec2"].add_response("describe_capacity_reservations", {"CapacityReservations": [reservation()]}, {"CapacityReservationIds": [RID]})
    aws["eks"].add_response("list_nodegroups", {"nodegroups": [GROUP]}, {"clusterName": CLUSTER})
    aws["eks"].add_response("describe_nodegroup", {"nodegroup": nodegroup(desired=0, status="UPDATING")}, {"clusterName": CLUSTER, "nodegroupName": GROUP})
    _state(aws, nodegroup(desired=0, status="UPDATING"), 0, running)
    _describe_update(aws, "u-ver", update("u-ver", "Successful"))
    _scale_back(aws)
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW, "--yes"]) == 0
    assert "waiting for the running version update u-ver" in capsys.readouterr().out


def test_a_rerun_after_the_update_only_scales_back(aws, capsys):
    _read(aws, nodegroup(desired=0, release=NEW), 0)
    config = {"minSize": 0, "maxSize": 2, "desiredSize": 2}
    aws["eks"].add_response("describe_nodegroup", {"nodegroup": nodegroup(desired=0, release=NEW)}, {"clusterName": CLUSTER, "nodegroupName": GROUP})
    aws["asg"].add_response("describe_auto_scaling_groups", asg(0), {"AutoScalingGroupNames": [ASG]})
    aws["eks"].add_response("update_nodegroup_config", update("u-back", kind="ConfigUpdate"), {"clusterName": CLUSTER, "nodegroupName": GROUP, "scalingConfig": config})
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW, "--yes"]) == 0
    assert "1. scale back" in capsys.readouterr().out


def test_a_group_already_updated_and_scaled_back_needs_nothing(aws, capsys):
    _read(aws, nodegroup(desired=2, release=NEW), 2)
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW, "--yes"]) == 0
    assert "Nothing to do" in capsys.readouterr().out


def test_a_failed_version_update_is_not_scaled_back(aws, capsys):
    _read(aws, nodegroup(desired=2), 2)
    _scale_in(aws)
    _update(aws, status="Failed")
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW, "--yes"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "u-ver (VersionUpdate) of node group kimi-k3-gpu-ng-5f3a failed: NodeCreationFailure" in err and "rerun" in err


def test_a_group_that_does_not_read_at_the_target_after_the_update_is_not_scaled_back(aws, capsys):
    _read(aws, nodegroup(desired=0), 0)
    _update(aws)
    _state(aws, nodegroup(desired=0, release=OLD), 0)
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW, "--yes"]) == 2
    assert "not scaling back" in capsys.readouterr().err


def test_eks_refusing_with_resource_in_use_is_one_line_saying_to_rerun(aws, capsys):
    _read(aws, nodegroup(desired=0), 0)
    aws["eks"].add_client_error("update_nodegroup_version", "ResourceInUseException", "Nodegroup kimi-k3-gpu-ng-5f3a is currently being updated", 409,
                                expected_params={"clusterName": CLUSTER, "nodegroupName": GROUP, "releaseVersion": NEW})
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW, "--yes"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ResourceInUseException: Nodegroup kimi-k3-gpu-ng-5f3a is currently being updated" in err and "rerun" in err


def test_an_update_in_progress_at_the_reserved_size_is_refused_before_anything_is_sent(aws, capsys):
    aws["ec2"].add_response("describe_capacity_reservations", {"CapacityReservations": [reservation()]}, {"CapacityReservationIds": [RID]})
    aws["eks"].add_response("list_nodegroups", {"nodegroups": [GROUP]}, {"clusterName": CLUSTER})
    aws["eks"].add_response("describe_nodegroup", {"nodegroup": nodegroup(status="UPDATING")}, {"clusterName": CLUSTER, "nodegroupName": GROUP})
    _state(aws, nodegroup(status="UPDATING"), 2, update("u-other", kind="ConfigUpdate"))
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW, "--yes"]) == 2
    assert "has an update in progress (ConfigUpdate u-other" in capsys.readouterr().err


def test_too_late_in_the_block_is_refused_before_anything_is_sent(aws, capsys):
    late = reservation(start=NOW - timedelta(days=7) + timedelta(minutes=80))  # ends in 80 min: scale-down in 40
    _read(aws, nodegroup(desired=2), 2, reservation_answer=late)
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW, "--yes"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "too late for a node update" in err


def test_a_named_group_without_the_reservation_tag_is_refused(aws, capsys):
    aws["ec2"].add_response("describe_capacity_reservations", {"CapacityReservations": [reservation()]}, {"CapacityReservationIds": [RID]})
    _state(aws, nodegroup(tags={}), 2)
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW, "--nodegroup", GROUP, "--yes"]) == 2
    assert f"is not the Capacity Block group of {RID}: its {scaling.RESERVATION_TAG} tag is missing" in capsys.readouterr().err


def test_nodes_that_never_leave_stop_the_wait_at_its_deadline_and_a_rerun_resumes(aws, capsys):
    _read(aws, nodegroup(desired=0), 1)
    for _ in range(5):
        aws["asg"].add_response("describe_auto_scaling_groups", asg(1), {"AutoScalingGroupNames": [ASG]})
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW, "--yes", "--wait-minutes", "2"]) == 2
    err = capsys.readouterr().err
    assert "still has 1 instance(s)" in err and "rerun to keep waiting (it resumes)" in err
    assert aws["time"].slept == [nu.POLL_S] * 4  # reads at 0, 30, 60, 90 and 120 s: the next would pass the 2 minutes


def test_the_waits_end_at_the_scale_down_whatever_wait_minutes_says():
    eks, autoscaling = client("eks"), client("autoscaling")
    ending = block(start=NOW - timedelta(days=7) + timedelta(minutes=41))  # EKS scales the group to 0 a minute from NOW
    plan = nu.NodeUpdatePlan(state(desired=0, instances=0), ending, nu.NodeVersions(release_version=NEW), (nu.UPDATE, nu.SCALE_BACK),
                             FIGURES, NOW, resume_update="u-ver")
    fake = FakeTime()
    with Stubber(eks) as stub:
        for _ in range(3):
            stub.add_response("describe_update", update("u-ver"), {"name": CLUSTER, "nodegroupName": GROUP, "updateId": "u-ver"})
        with pytest.raises(UserError, match="still InProgress at 09:01 UTC"):
            nu.run_node_update(nu.Clients(eks, autoscaling), plan, nu.Ticker(NOW, fake.monotonic, fake.sleep), NOW + timedelta(hours=5), say=lambda _: None)
        stub.assert_no_pending_responses()
    assert fake.slept == [nu.POLL_S] * 2


@pytest.mark.parametrize(("answer", "code"), [("no\n", 1), ("", 1)])
def test_at_a_terminal_anything_but_yes_sends_nothing(aws, capsys, monkeypatch, answer, code):
    from tests.aws_stubs import FakeStdin

    monkeypatch.setattr("sys.stdin", FakeStdin(answer, tty=True))
    _read(aws, nodegroup(desired=2), 2)
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW]) == code
    out = capsys.readouterr().out
    assert "Type 'yes' to go ahead" in out and out.rstrip().endswith("Not started.")


def test_at_a_terminal_a_typed_yes_goes_ahead(aws, capsys, monkeypatch):
    from tests.aws_stubs import FakeStdin

    monkeypatch.setattr("sys.stdin", FakeStdin("yes\n", tty=True))
    _read(aws, nodegroup(desired=0, release=NEW), 0)
    _state(aws, nodegroup(desired=0, release=NEW), 0)
    aws["eks"].add_response("update_nodegroup_config", update("u-back", kind="ConfigUpdate"),
                            {"clusterName": CLUSTER, "nodegroupName": GROUP, "scalingConfig": {"minSize": 0, "maxSize": 2, "desiredSize": 2}})
    assert main(["capacity", "update-nodes", "prod", "--release-version", NEW]) == 0
