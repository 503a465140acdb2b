"""The preview-time training-plan check and HyperPod's create-time rules (pure functions)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import botocore.session
import pytest
from botocore.stub import Stubber

from kimi_k3.errors import UserError
from kimi_k3.hyperpod import rules as rules
from kimi_k3.hyperpod.training_plan_check import PlanCapacity, TrainingPlanFacts, check_training_plan, read_training_plan, rehearsal_facts

UTC = UTC
NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/kimi-k3-p6"
TYPE = "ml.p6-b300.48xlarge"
AZS = ("us-east-1a", "us-east-1b")
PLAN = rehearsal_facts(ARN, availability_zone="us-east-1a", instance_count=2, start=NOW + timedelta(days=1))


def check(facts: TrainingPlanFacts = PLAN, *, instance_type: str = TYPE, azs: tuple[str, ...] = AZS, need: int = 2, now: datetime = NOW) -> list[str]:
    return check_training_plan(facts, instance_type=instance_type, subnet_availability_zones=azs, instances_required=need, now=now)


def refused(**kwargs) -> str:
    with pytest.raises(UserError) as error:
        check(**kwargs)
    message = str(error.value)
    assert "\n" not in message
    return message


# --- what works ---------------------------------------------------------------


def test_a_scheduled_plan_in_a_covered_az_passes_with_a_start_warning():
    assert check() == ["training plan kimi-k3-p6 starts 2026-12-01 16:00 UTC; the instance group gets its nodes only then"]


def test_an_active_plan_passes_silently():
    active = replace(PLAN, state="Active", start=NOW - timedelta(days=1))
    assert check(active) == []


def test_a_pending_plan_passes_with_a_warning():
    warnings = check(replace(PLAN, state="Pending"))
    assert any("is Pending (payment in progress)" in w for w in warnings)


def test_a_plan_ending_soon_warns_about_the_first_boot():
    ending = replace(PLAN, state="Active", start=NOW - timedelta(days=7), end=NOW + timedelta(hours=1))
    assert check(ending) == ["training plan kimi-k3-p6 leaves 60 minutes of capacity; a cold first boot of Kimi K3 takes 60-75 minutes (`kimi-k3 hyperpod plans extend`)"]


def test_capacities_in_several_azs_count_only_where_the_subnets_are():
    split = replace(PLAN, capacities=(PlanCapacity(TYPE, 1, "us-east-1a"), PlanCapacity(TYPE, 1, "us-east-1c")))
    assert "reserves 1 x ml.p6-b300.48xlarge in us-east-1a but the stack needs 2" in refused(facts=split)
    check(split, need=1)


# --- what is refused ------------------------------------------------------------


@pytest.mark.parametrize("state,expected", [
    ("Expired", "training plan kimi-k3-p6 is expired (ended 2026-12-08 16:00 UTC)"),
    ("Failed", "training plan kimi-k3-p6 is Failed; a HyperPod instance group needs a Scheduled or Active plan"),
])
def test_unusable_states(state, expected):
    assert expected in refused(facts=replace(PLAN, state=state))


def test_a_plan_for_training_jobs():
    assert "is for training-job, not hyperpod-cluster" in refused(facts=replace(PLAN, target_resources=("training-job",)))


def test_another_instance_type():
    message = refused(instance_type="ml.p5en.48xlarge")
    assert "reserves ml.p6-b300.48xlarge, but the instance group is ml.p5en.48xlarge" in message


def test_an_az_the_subnets_do_not_cover():
    message = refused(azs=("us-east-1b", "us-east-1c"))
    assert "holds its ml.p6-b300.48xlarge capacity in us-east-1a, which the stack's subnets do not cover" in message
    assert "add us-east-1a to kimi-k3:availabilityZones" in message


def test_too_few_instances():
    assert "reserves 2 x ml.p6-b300.48xlarge in us-east-1a but the stack needs 3" in refused(need=3)


def test_a_plan_that_has_ended_even_if_aws_still_says_active():
    ended = replace(PLAN, state="Active", start=NOW - timedelta(days=8), end=NOW - timedelta(minutes=1))
    assert "ended at 2026-11-30 15:59 UTC" in refused(facts=ended)


# --- reading the plan --------------------------------------------------------------


def test_read_training_plan_through_boto3_matches_the_facts():
    client = botocore.session.get_session().create_client("sagemaker", region_name="us-east-1", aws_access_key_id="AKIAEXAMPLE", aws_secret_access_key="x")
    with Stubber(client) as stub:
        # The canned DescribeTrainingPlan answer is valid against the real model (Stubber checks it).
        stub.add_response("describe_training_plan", PLAN.describe_response(), {"TrainingPlanName": ARN})
        facts = read_training_plan(client, ARN)
    assert facts == PLAN
    assert facts.describe() == "kimi-k3-p6 (Scheduled): 2 x ml.p6-b300.48xlarge in us-east-1a, 2026-12-01 16:00 UTC -> 2026-12-08 16:00 UTC"


def test_a_missing_plan_at_preview_is_one_line():
    client = botocore.session.get_session().create_client("sagemaker", region_name="us-east-1", aws_access_key_id="AKIAEXAMPLE", aws_secret_access_key="x")
    with Stubber(client) as stub, pytest.raises(UserError) as error:
        stub.add_client_error("describe_training_plan", "ResourceNotFound", "Training plan kimi-k3-p6 not found", expected_params={"TrainingPlanName": ARN})
        read_training_plan(client, ARN)
    assert str(error.value).startswith("not found in us-east-1 (Training plan kimi-k3-p6 not found)")


# --- HyperPod's create-time rules ------------------------------------------------------


@pytest.mark.parametrize("version", rules.SUPPORTED_KUBERNETES_VERSIONS)
def test_supported_kubernetes_versions_pass(version):
    rules.check_kubernetes_version(version)


@pytest.mark.parametrize("version", ["1.27", "1.35", "1.34.1"])
def test_other_kubernetes_versions_are_refused(version):
    with pytest.raises(UserError, match=r"HyperPod does not support Kubernetes .* supported: 1\.28, .*1\.34 \(SageMaker developer guide"):
        rules.check_kubernetes_version(version)


def test_authentication_modes():
    for mode in ("API", "API_AND_CONFIG_MAP"):
        rules.check_authentication_mode(mode)
    with pytest.raises(UserError, match="API or API_AND_CONFIG_MAP, not 'CONFIG_MAP'"):
        rules.check_authentication_mode("CONFIG_MAP")


@pytest.mark.parametrize("version,ok", [("v1.18.3-eksbuild.1", True), ("v1.20.4-eksbuild.1", True), ("v1.18.2-eksbuild.3", False), ("v1.9.9-eksbuild.1", False)])
def test_vpc_cni_minimum(version, ok):
    if ok:
        rules.check_vpc_cni_version(version)
    else:
        with pytest.raises(UserError, match="requires the Amazon VPC CNI plugin 1.18.3 or later"):
            rules.check_vpc_cni_version(version)


def test_the_eks_cluster_of_this_project_meets_the_rules():
    """The Cluster component's choices (authentication mode API, the offline vpc-cni version) are ones HyperPod accepts."""
    from kimi_k3.offline.answers import ADDON_VERSIONS

    rules.check_eks_cluster(rules.EksForHyperPod("1.34", "API", ADDON_VERSIONS["vpc-cni"]))


def test_instance_group_subnet_must_be_in_the_plans_az():
    rules.check_instance_group_subnet("p6-b300", "us-east-1a", ("us-east-1a",))
    with pytest.raises(UserError, match="uses a subnet in us-east-1b, but its training plan's capacity is in us-east-1a"):
        rules.check_instance_group_subnet("p6-b300", "us-east-1b", ("us-east-1a",))


@pytest.mark.parametrize("cluster,groups,message", [
    ("kimi_k3", ("g",), "HyperPod cluster name 'kimi_k3' is not accepted"),
    ("k" * 64, ("g",), "is not accepted; 1-63 letters"),
    ("kimi-k3", ("-g",), "instance group name '-g' is not accepted"),
    ("kimi-k3", ("g", "g"), "are not unique"),
])
def test_names(cluster, groups, message):
    with pytest.raises(UserError, match=message):
        rules.check_names(cluster, groups)
