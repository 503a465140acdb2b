"""Settings of a hyperpod stack (``kimi-k3:servingPlatform: hyperpod``): what HyperPod requires, one line per mistake, naming the key."""

from __future__ import annotations

import re

import pytest

from kimi_k3.errors import SettingsError
from kimi_k3.hyperpod import training_plans
from kimi_k3.stack import settings
from tests.builders import stack_config

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/kimi-k3-p6"


def hyperpod(**changes) -> settings.StackSettings:
    """The committed hyperpod stack's settings with changes (short keys get ``kimi-k3:``; None deletes a key)."""
    return settings.from_values(stack_config("hyperpod", **changes), {"kimi-k3:apiKey"}, stack="hyperpod")


def refused(**changes) -> SettingsError:
    with pytest.raises(SettingsError) as error:
        hyperpod(**changes)
    assert "\n" not in str(error.value)
    return error.value


def test_the_committed_hyperpod_stack_loads():
    s = hyperpod()
    assert s.serving_platform == "hyperpod" and s.hyperpod is not None
    assert s.hyperpod.training_plan == PLAN
    assert s.hyperpod.cluster_name == "kimi-k3-hyperpod"  # <project>-<stack>
    assert s.hyperpod.instance_type == "ml.p6-b300.48xlarge" and s.hyperpod.ebs_volume_gib == 2048
    assert s.capacity.reservation_id == "" and s.warnings == ()


def test_eks_is_the_default_platform_and_still_needs_its_capacity_block():
    dev = settings.load_stack("dev")
    assert dev.serving_platform == "eks" and dev.hyperpod is None
    error = refused(servingPlatform="eks")
    assert error.key == "kimi-k3:capacityReservationId" and "it is required" in str(error) and "Required when servingPlatform is eks" in str(error)


@pytest.mark.parametrize("changes,key,words", [
    ({"servingPlatform": "sagemaker"}, "kimi-k3:servingPlatform", "accepted: eks, hyperpod"),
    ({"trainingPlanArn": None}, "kimi-k3:trainingPlanArn", "required when servingPlatform is hyperpod"),
    ({"trainingPlanArn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/"}, "kimi-k3:trainingPlanArn", "expected a training plan ARN"),
    ({"trainingPlanArn": "arn:aws:sagemaker:us-west-2:123456789012:training-plan/kimi-k3-p6"}, "kimi-k3:trainingPlanArn",
     "a training plan of the stack's region us-east-1"),
    ({"clusterVersion": "1.35"}, "kimi-k3:clusterVersion", "HyperPod does not support Kubernetes '1.35' for its EKS cluster"),
    ({"hyperpodClusterName": "kimi_k3"}, "kimi-k3:hyperpodClusterName", "1-63 letters, digits and '-'"),
    ({"hyperpodEbsVolumeGiB": 0}, "kimi-k3:hyperpodEbsVolumeGiB", "accepted: 1 to 16384"),
    ({"hyperpodEbsVolumeGiB": 16385}, "kimi-k3:hyperpodEbsVolumeGiB", "accepted: 1 to 16384"),
    ({"exposure": "internal", "servingAllowedCidrs": ["10.0.0.0/8"]}, "kimi-k3:exposure", "exposure applies to servingPlatform eks only"),
    ({"pipelineParallelSize": 2, "efaEnabled": True}, "kimi-k3:pipelineParallelSize", "InferenceEndpointConfig has no multi-node field"),
])
def test_what_hyperpod_cannot_run_is_refused_naming_the_key(changes, key, words):
    error = refused(**changes)
    assert error.key == key and words in str(error), str(error)


def test_the_default_cluster_name_is_made_a_valid_hyperpod_name():
    """SageMaker takes letters, digits and '-': a stack named my_stack gets kimi-k3-my-stack and a hash (no two stacks meet)."""
    values, _ = settings.read_stack_file("hyperpod")
    found = settings.from_values(values, {"kimi-k3:apiKey"}, stack="my_stack").hyperpod
    assert found is not None and re.fullmatch(r"kimi-k3-my-stack-[0-9a-f]{8}", found.cluster_name)
    assert settings.from_values(values, {"kimi-k3:apiKey"}, stack="hyperpod").hyperpod.cluster_name == "kimi-k3-hyperpod"


def test_an_instance_type_no_training_plan_can_reserve_is_refused(monkeypatch):
    """botocore's ReservedCapacityInstanceType enum is the list; the catalog's types are all in it today."""
    monkeypatch.setattr(training_plans, "supported_instance_types", lambda: ("ml.p5en.48xlarge",))
    error = refused()
    assert error.key == "kimi-k3:gpuInstanceType" and "a type a training plan can reserve for HyperPod (ml.<type>): p5en.48xlarge" in str(error)


def test_a_plan_name_is_accepted_as_well_as_an_arn():
    assert hyperpod(trainingPlanArn="kimi-k3-p6").hyperpod.training_plan == "kimi-k3-p6"


def test_prod_hyperpod_needs_no_gpu_ami_pin():
    # A private prod endpoint needs a path to the API (issue 21.3): a VPN range here.
    s = hyperpod(environment="prod", clusterEndpointPublicAccess=False, clusterPublicAccessCidrs=[], clusterApiIngressCidrs=["10.100.0.0/16"])
    assert s.production and s.capacity.ami_release_version is None


def test_keys_of_the_other_platform_are_warned_about():
    s = hyperpod(capacityReservationId="cr-0a1b2c3d4e5f60718", dcgmExporterEnabled=False)
    assert "kimi-k3:capacityReservationId, kimi-k3:dcgmExporterEnabled apply only to servingPlatform eks; this stack is hyperpod and ignores them" in s.warnings
    values, secret_keys = settings.read_stack_file("dev")
    values["kimi-k3:trainingPlanArn"] = PLAN
    dev = settings.from_values(values, secret_keys)
    assert "kimi-k3:trainingPlanArn applies only to servingPlatform hyperpod; this stack is eks and ignores it" in dev.warnings


def test_a_checksum_manifest_is_warned_about_on_hyperpod():
    s = hyperpod(weightsSha256Manifest="SHA256SUMS")
    assert any("the HyperPod path does not verify the weights against it" in w for w in s.warnings)
