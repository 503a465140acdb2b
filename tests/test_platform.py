"""The whole stack as `pulumi up` would declare it: components wired together per environment."""

from __future__ import annotations

import json

import pytest

import kimi_k3
from kimi_k3 import offline
from kimi_k3.core.labels import GPU_TAINT_KEY
from tests.conftest import NOW, fixture_for
from tests.k8s_checks import checkov_scan, validate_manifest, write_manifests
from tests.refusals import assert_refused_before_declaring


def _component_types(result: offline.PlanResult) -> set[str]:
    return {r.type for r in result.resources if r.type.startswith("kimi-k3:index:")}


def test_public_api_exports_every_component():
    for name in kimi_k3.__all__:
        assert getattr(kimi_k3, name) is not None
    assert issubclass(kimi_k3.VllmServer, kimi_k3.Platform.__mro__[1])  # both are ComponentResources


def test_dev_stack_composes_the_single_node_path(dev_plan):
    assert _component_types(dev_plan) == {
        "kimi-k3:index:Platform", "kimi-k3:index:Network", "kimi-k3:index:Cluster", "kimi-k3:index:CapacityBlockNodeGroup",
        "kimi-k3:index:GpuNodePlugins", "kimi-k3:index:VllmServer", "kimi-k3:index:DeliveryCheck",
        "kimi-k3:index:TimeToServe",  # the dev stack's ECR pull-through cache and image pre-pull (docs/weights.md)
    }
    assert dev_plan.by_type("kubernetes:apps/v1:Deployment")
    assert not dev_plan.by_type("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")


def test_prod_stack_adds_the_load_balancer_controller_and_pod_identity_for_s3(prod_plan):
    types = _component_types(prod_plan)
    assert "kimi-k3:index:LoadBalancerController" in types
    service = next(m for m in prod_plan.kubernetes_objects() if m["kind"] == "Service" and m["metadata"]["name"] == "kimi-k3-serving")
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/8"]
    associations = {r.plain_inputs["serviceAccount"]: r.plain_inputs for r in prod_plan.by_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")}
    assert "aws-load-balancer-controller" in associations
    weights_policy = next(
        json.loads(r.plain_inputs["policy"]) for r in prod_plan.by_type("aws:iam/rolePolicy:RolePolicy") if "s3:GetObject" in r.plain_inputs.get("policy", "")
    )
    resources = {res for st in weights_policy["Statement"] for res in ([st["Resource"]] if isinstance(st["Resource"], str) else st["Resource"])}
    prefix = "acme-ml-weights-us-west-2/moonshotai/Kimi-K3/3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20/"
    assert f"arn:aws:s3:::{prefix}*" in resources and all("*" not in r.replace(f"{prefix}*", "") for r in resources)


def test_gpu_node_group_uses_only_the_blocks_subnet(prod_plan):
    block_az = prod_plan.reservation.availability_zone
    subnet = prod_plan.one("aws:ec2/subnet:Subnet", f"private-{block_az}")
    node_group = prod_plan.one("aws:eks/nodeGroup:NodeGroup", "gpu-ng")
    assert node_group.plain_inputs["subnetIds"] == [subnet.id]
    assert node_group.plain_inputs["capacityType"] == "CAPACITY_BLOCK"
    assert "instanceTypes" not in node_group.plain_inputs
    assert {t["key"] for t in node_group.plain_inputs["taints"]} == {GPU_TAINT_KEY}


def test_scheduled_block_scales_up_at_its_start(dev_plan):
    schedule = dev_plan.one("aws:autoscaling/schedule:Schedule")
    assert schedule.plain_inputs["startTime"] == dev_plan.reservation.start.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert schedule.plain_inputs["desiredCapacity"] == dev_plan.reservation.instance_count
    scaling = dev_plan.one("aws:eks/nodeGroup:NodeGroup", "gpu-ng").plain_inputs["scalingConfig"]
    assert scaling["desiredSize"] == 0 and scaling["maxSize"] == dev_plan.reservation.instance_count


def test_active_block_needs_no_schedule(prod_plan):
    assert prod_plan.reservation.state == "active"
    assert not prod_plan.by_type("aws:autoscaling/schedule:Schedule")
    assert prod_plan.one("aws:eks/nodeGroup:NodeGroup", "gpu-ng").plain_inputs["scalingConfig"]["desiredSize"] == 2


def test_prod_endpoint_is_private_and_dev_restricted(dev_plan, prod_plan):
    prod_cluster = prod_plan.one("eks:index:Cluster").plain_inputs
    dev_cluster = dev_plan.one("eks:index:Cluster").plain_inputs
    assert prod_cluster["endpointPublicAccess"] is False and prod_cluster["endpointPrivateAccess"] is True
    assert dev_cluster["endpointPublicAccess"] is True and dev_cluster["publicAccessCidrs"] == ["203.0.113.0/24"]


def test_stack_outputs_show_the_three_contracts(dev_plan, prod_plan):
    for plan in (dev_plan, prod_plan):
        outputs = plan.plain_outputs()
        assert outputs["servedModelName"] == "Kimi-K3" and outputs["port"] == 8000
        assert outputs["modelRevision"] == plan.settings.serving.contract.weights.revision
        assert outputs["image"] == plan.settings.serving.contract.image.image
        assert outputs["endpoint"].endswith(":8000/v1")
    assert prod_plan.plain_outputs()["imageDigest"].startswith("sha256:")
    assert dev_plan.plain_outputs()["imageDigest"] is None
    assert offline.contains_secret(dev_plan.outputs["kubeconfig"])


def test_api_key_reaches_vllm_only_through_a_secret(dev_plan):
    secret = dev_plan.one("kubernetes:core/v1:Secret", "serving-api-key")
    assert offline.contains_secret(secret.inputs)
    assert secret.plain_inputs["stringData"]["key"] == dev_plan.settings.serving.api_key.value
    deployment = next(m for m in dev_plan.kubernetes_objects() if m["kind"] == "Deployment")
    container = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm")
    assert "--api-key" not in container.get("args", []) + container.get("command", [])
    env = {e["name"]: e for e in container["env"]}
    assert env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == secret.plain_inputs["metadata"]["name"]


def test_multi_node_stack_uses_a_leader_worker_set_with_efa():
    overrides = {"kimi-k3:gpuInstanceType": "p5en.48xlarge", "kimi-k3:pipelineParallelSize": 2, "kimi-k3:efaEnabled": True}
    result = offline.run_stack(
        "dev", now=NOW, config_overrides=overrides, reservation=lambda s: fixture_for(s, instance_type="p5en.48xlarge", instance_count=4)
    )
    types = _component_types(result)
    assert {"kimi-k3:index:LwsController", "kimi-k3:index:VllmLeaderWorkerSet"} <= types and "kimi-k3:index:VllmServer" not in types
    lws = next(m for m in result.kubernetes_objects() if m["kind"] == "LeaderWorkerSet")
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2 and lws["spec"]["replicas"] == 2
    assert result.one("kubernetes:helm.sh/v3:Release", "efa-device-plugin")
    launch_template = result.one("aws:ec2/launchTemplate:LaunchTemplate", "gpu-lt").plain_inputs
    assert len(launch_template["networkInterfaces"]) > 1


@pytest.fixture(scope="module")
def stack_manifests(dev_plan, prod_plan, hyperpod_plan, tmp_path_factory):
    directory = tmp_path_factory.mktemp("stack-manifests")
    for plan in (dev_plan, prod_plan, hyperpod_plan):
        write_manifests(plan.kubernetes_objects(), directory / plan.stack)
    return directory


@pytest.mark.parametrize("stack", ["dev", "prod", "hyperpod"])
def test_every_stack_manifest_passes_strict_schema_validation(stack, dev_plan, prod_plan, hyperpod_plan):
    plan = {"dev": dev_plan, "prod": prod_plan, "hyperpod": hyperpod_plan}[stack]
    manifests = plan.kubernetes_objects()
    assert manifests
    for manifest in manifests:
        assert manifest["metadata"]["name"]
        validate_manifest(manifest, plan.settings.cluster.version)


def test_every_stack_manifest_passes_checkov_with_reasoned_skips(stack_manifests):
    report = checkov_scan(stack_manifests)
    assert report["failed"] == [], [(c["check_id"], c["resource"]) for c in report["failed"]]
    assert report["passed"] > 50
    for skipped in report["skipped"]:
        assert len(skipped.get("suppress_comment") or "") > 15, skipped["check_id"]


def test_gpu_and_system_nodes_share_the_node_security_group(dev_plan):
    """GPU pods resolve DNS through CoreDNS on the system nodes: both node groups carry the same node security group."""
    cluster_outputs = dev_plan.one("eks:index:Cluster").outputs
    gpu_lt = dev_plan.one("aws:ec2/launchTemplate:LaunchTemplate", "gpu-lt").plain_inputs
    system_lt = next(r for r in dev_plan.by_type("aws:ec2/launchTemplate:LaunchTemplate") if r.name != "kimi-k3-gpu-lt").plain_inputs
    node_sg = cluster_outputs["nodeSecurityGroupId"]
    assert node_sg in system_lt["vpcSecurityGroupIds"]
    assert node_sg in gpu_lt["vpcSecurityGroupIds"]


def test_more_azs_than_the_region_has_is_a_settings_error():
    from kimi_k3.errors import SettingsError
    from kimi_k3.stack import settings as stack_settings
    from kimi_k3.stack.platform import Platform

    values, secret_keys = stack_settings.read_stack_file("prod")
    values["kimi-k3:availabilityZoneCount"] = "4"
    s = stack_settings.from_values(values, secret_keys, stack="prod")  # 4 is valid in general...
    engine = offline.OfflineEngine(now=NOW, region=s.region, reservation=fixture_for(s), invoke_overrides={
        "aws:index/getAvailabilityZones:getAvailabilityZones": lambda args: {"id": "us-west-2", "names": ["us-west-2a", "us-west-2b", "us-west-2c"], "zoneIds": ["usw2-az1", "usw2-az2", "usw2-az3"]},
    })
    # ...but not in a 3-AZ region
    assert_refused_before_declaring(lambda: Platform("kimi-k3", s, now=NOW), "at most 3: the available AZs of us-west-2", engine=engine, error=SettingsError)


def test_existing_vpc_is_used_without_creating_one():
    overrides = {
        "kimi-k3:existingVpcId": "vpc-0a1b2c3d4e5f67890",
        "kimi-k3:existingPrivateSubnetIds": ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0bbbbbbbbbbbbbbb2"],
        "kimi-k3:existingPublicSubnetIds": ["subnet-0ccccccccccccccc3"],
    }
    result = offline.run_stack("dev", now=NOW, config_overrides=overrides, reservation=lambda s: fixture_for(s, availability_zone="us-east-1b"),
                               engine_options={"existing_subnet_azs": {"subnet-0aaaaaaaaaaaaaaa1": "us-east-1a", "subnet-0bbbbbbbbbbbbbbb2": "us-east-1b"}})
    assert not result.by_type("aws:ec2/vpc:Vpc") and not result.by_type("aws:ec2/subnet:Subnet")
    assert result.one("aws:eks/nodeGroup:NodeGroup", "gpu-ng").plain_inputs["subnetIds"] == ["subnet-0bbbbbbbbbbbbbbb2"]


def test_a_capacity_block_warning_is_printed_once():
    result = offline.run_stack("dev", now=NOW, reservation=lambda s: fixture_for(s, state="payment-pending"))
    pending = [w for w in result.warnings if "is payment-pending" in w]
    assert len(pending) == 1, result.warnings
