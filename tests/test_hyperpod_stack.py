"""The hyperpod stack (``stacks/Pulumi.hyperpod.yaml``): the whole SageMaker HyperPod path from one stack, planned offline.

What a user of ``kimi-k3:servingPlatform: hyperpod`` relies on: the HyperPod cluster on the
stack's EKS cluster with a p6-b300 instance group on the training plan in the plan's AZ,
the dependencies chart before it, the Inference Operator add-on after it, the
``InferenceEndpointConfig`` (valid against the CRD) after the operator, the API key only
through a Secret, the outputs; and the EKS path's pieces absent.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from kimi_k3 import cli, offline
from kimi_k3.errors import UserError
from kimi_k3.hyperpod.cluster import CHART_DIR
from kimi_k3.hyperpod.endpoint import render_inference_endpoint_config
from kimi_k3.hyperpod.inference_operator import ADDON
from kimi_k3.offline import hyperpod_checks
from kimi_k3.stack import settings
from tests.conftest import NOW, ROOT
from tests.k8s_checks import validate_manifest

CLUSTER = "aws-native:sagemaker:Cluster"
CR = "kubernetes:inference.sagemaker.aws.amazon.com/v1:InferenceEndpointConfig"
RELEASE = "kubernetes:helm.sh/v3:Release"


def by_urn(plan: offline.PlanResult) -> dict[str, offline.RecordedResource]:
    return {r.urn: r for r in plan.resources}


def the_operator(plan: offline.PlanResult) -> offline.RecordedResource:
    return next(r for r in plan.by_type("aws:eks/addon:Addon") if r.plain_inputs["addonName"] == ADDON)


def test_the_stack_is_a_hyperpod_stack_and_declares_none_of_the_eks_serving_path(hyperpod_plan):
    assert hyperpod_plan.settings.serving_platform == "hyperpod"
    components = {r.type for r in hyperpod_plan.resources if r.type.startswith("kimi-k3:index:")}
    assert components == {
        "kimi-k3:index:Platform", "kimi-k3:index:Network", "kimi-k3:index:Cluster", "kimi-k3:index:HyperPodCluster",
        "kimi-k3:index:SecureBucket", "kimi-k3:index:HyperPodInferenceOperator", "kimi-k3:index:HyperPodInferenceEndpoint",
    }
    # The training plan is the capacity, the chart brings the device plugins, the add-on its own ALB controller, the operator vLLM.
    assert [r.name for r in hyperpod_plan.by_type("aws:eks/nodeGroup:NodeGroup")] == ["kimi-k3-cluster-system"]
    assert not hyperpod_plan.by_type("aws:autoscaling/schedule:Schedule")
    assert not hyperpod_plan.by_type("kubernetes:apps/v1:Deployment")
    assert [r.name for r in hyperpod_plan.by_type(RELEASE)] == ["kimi-k3-hyperpod-dependencies"]
    assert hyperpod_plan.reservation is None and hyperpod_plan.training_plan is not None


def test_the_hyperpod_cluster_is_orchestrated_by_the_stacks_eks_cluster(hyperpod_plan):
    cluster = hyperpod_plan.one(CLUSTER).plain_inputs
    eks = hyperpod_plan.one("eks:index:Cluster").plain_inputs
    assert eks["authenticationMode"] == "API" and eks["version"] == "1.34"
    assert cluster["orchestrator"] == {"eks": {"clusterArn": f"arn:aws:eks:us-east-1:{offline.ACCOUNT_ID}:cluster/{eks['name']}"}}
    assert cluster["clusterName"] == "kimi-k3-hyperpod" and cluster["nodeRecovery"] == "Automatic"


def test_the_instance_group_is_p6_b300_on_the_training_plan_in_the_plans_private_subnet(hyperpod_plan):
    cluster = hyperpod_plan.one(CLUSTER)
    (group,) = cluster.plain_inputs["instanceGroups"]
    plan = hyperpod_plan.training_plan
    assert group["instanceType"] == "ml.p6-b300.48xlarge"
    assert group["trainingPlanArn"] == plan.arn == hyperpod_plan.settings.hyperpod.training_plan
    assert group["instanceCount"] == 1
    assert group["onStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert group["instanceStorageConfigs"] == [{"ebsVolumeConfig": {"volumeSizeInGb": 2048}}]
    (plan_az,) = plan.availability_zones()
    subnet = hyperpod_plan.one("aws:ec2/subnet:Subnet", f"private-{plan_az}")
    node_sg = hyperpod_plan.one("eks:index:Cluster").outputs["nodeSecurityGroupId"]
    efa = hyperpod_plan.one("aws:ec2/securityGroup:SecurityGroup", "kimi-k3-hyperpod-efa").id  # EFA's own group (issue 21, point 7)
    assert cluster.plain_inputs["vpcConfig"] == {"subnets": [subnet.id], "securityGroupIds": [node_sg, efa]}
    assert hyperpod_plan.outputs["availabilityZones"][0] == plan_az


def test_the_cluster_uses_the_stacks_aws_native_provider_for_its_region(hyperpod_plan):
    provider = hyperpod_plan.one("pulumi:providers:aws-native")
    assert provider.plain_inputs["region"] == "us-east-1"
    assert hyperpod_plan.one(CLUSTER).provider.startswith(provider.urn + "::")


def test_the_dependencies_chart_comes_first_through_the_clusters_kubernetes_provider(hyperpod_plan):
    release = hyperpod_plan.one(RELEASE)
    k8s_provider = hyperpod_plan.one("pulumi:providers:kubernetes", "kimi-k3-cluster-k8s")
    assert release.provider.startswith(k8s_provider.urn + "::")
    assert release.plain_inputs["chart"] == "components/data/charts/HyperPodHelmChart" and (ROOT / release.plain_inputs["chart"]) == CHART_DIR
    assert release.plain_inputs["namespace"] == "kube-system"
    assert release.urn in hyperpod_plan.one(CLUSTER).dependencies


def test_the_operator_add_on_names_the_hyperpod_cluster_and_comes_after_it(hyperpod_plan):
    operator = the_operator(hyperpod_plan)
    cluster = hyperpod_plan.one(CLUSTER)
    assert operator.plain_inputs["clusterName"] == hyperpod_plan.one("eks:index:Cluster").plain_inputs["name"]
    configuration = json.loads(operator.plain_inputs["configurationValues"])
    assert configuration["hyperpodClusterArn"] == cluster.outputs["clusterArn"] == hyperpod_plan.outputs["hyperpodClusterArn"]
    assert cluster.urn in operator.dependencies
    role = hyperpod_plan.one("aws:iam/role:Role", "inference-execution-role").plain_inputs["name"]
    assert role == "SageMakerHyperPodInference-kimi-k3-hyperpod" == configuration["executionRoleArn"].rsplit("/", 1)[-1]


def test_the_endpoint_object_is_the_contract_valid_against_the_crd_and_after_the_operator(hyperpod_plan):
    (manifest,) = [m for m in hyperpod_plan.kubernetes_objects() if m["kind"] == "InferenceEndpointConfig"]
    validate_manifest(manifest, "1.34")
    s = hyperpod_plan.settings
    expected = render_inference_endpoint_config(
        s.serving.contract, name="kimi-k3-serving", namespace="kimi-serving", instance_type="ml.p6-b300.48xlarge", replicas=1,
        api_key_secret="kimi-k3-serving-api-key", s3_region="us-east-1", endpoint_name="kimi-k3-hyperpod",
    )
    assert manifest == expected
    component = hyperpod_plan.parent_of(hyperpod_plan.one(CR))
    assert the_operator(hyperpod_plan).urn in component.dependencies
    assert manifest["spec"]["worker"]["image"] == s.serving.contract.image.image
    assert manifest["spec"]["modelSourceConfig"]["huggingFaceModel"]["commitSHA"] == s.serving.contract.weights.revision


def test_the_api_key_reaches_the_model_only_through_a_secret(hyperpod_plan):
    secret = hyperpod_plan.one("kubernetes:core/v1:Secret", "serving-api-key")
    assert offline.contains_secret(secret.inputs)
    assert secret.plain_inputs["stringData"] == {"key": hyperpod_plan.settings.serving.api_key.value}
    spec = hyperpod_plan.one(CR).plain_inputs["spec"]
    (key,) = [e for e in spec["worker"]["environmentVariables"] if e["name"] == "VLLM_API_KEY"]
    assert key == {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": secret.plain_inputs["metadata"]["name"], "key": "key"}}}
    assert secret.urn in hyperpod_plan.one(CR).dependencies
    holders = sorted(r.name for r in hyperpod_plan.resources if offline.contains_secret(r.inputs))
    assert holders == ["kimi-k3-cluster-k8s", "kimi-k3-serving-api-key"]


def test_outputs_give_the_endpoint_the_plan_and_the_contract(hyperpod_plan):
    outputs = hyperpod_plan.plain_outputs()
    assert outputs["endpoint"] == "https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/kimi-k3-hyperpod/invocations"
    assert outputs["sagemakerEndpointName"] == "kimi-k3-hyperpod" == hyperpod_plan.one(CR).plain_inputs["spec"]["endpointName"]
    assert outputs["trainingPlan"]["arn"] == hyperpod_plan.settings.hyperpod.training_plan
    assert outputs["trainingPlan"]["state"] == "Scheduled" and outputs["gpusTotal"] == 8
    for key in ("servedModelName", "image", "imageDigest", "modelRevision", "port"):
        assert key in outputs
    assert outputs["servedModelName"] == "Kimi-K3" and outputs["imageDigest"].startswith("sha256:")
    assert "capacityBlock" not in outputs and "gpuNodeGroup" not in outputs


def test_kimi_k3_hyperpod_renders_the_object_the_stack_declares(hyperpod_plan, capsys):
    """For users who apply the YAML themselves: the same object, less the SageMaker endpoint registration."""
    code = cli.main(["hyperpod", "hyperpod", "--name", "kimi-k3-serving", "--namespace", "kimi-serving", "--api-key-secret", "kimi-k3-serving-api-key"])
    assert code == 0
    rendered = yaml.safe_load(capsys.readouterr().out)
    declared = next(m for m in hyperpod_plan.kubernetes_objects() if m["kind"] == "InferenceEndpointConfig")
    assert {**rendered, "spec": {**rendered["spec"], "endpointName": "kimi-k3-hyperpod"}} == declared


def test_the_rule_refuses_a_hyperpod_cluster_on_a_public_subnet(hyperpod_plan):
    """A rule the mocks would not enforce: HyperPod clusters need private subnets (checked on the registration)."""
    cluster = hyperpod_plan.one(CLUSTER)
    public = hyperpod_plan.one("aws:ec2/subnet:Subnet", "public-us-east-1a")
    inputs = {**cluster.plain_inputs, "vpcConfig": {**cluster.plain_inputs["vpcConfig"], "subnets": [public.id]}}
    earlier = [r for r in hyperpod_plan.resources if r is not cluster]
    with pytest.raises(UserError, match=f"subnet {public.id} is public; HyperPod clusters need private subnets"):
        hyperpod_checks.check_registration(CLUSTER, inputs, earlier, {}, lambda arn: hyperpod_plan.training_plan)
    hyperpod_checks.check_registration(CLUSTER, cluster.plain_inputs, earlier, {}, lambda arn: hyperpod_plan.training_plan)


def test_the_rule_refuses_an_eks_cluster_hyperpod_does_not_support(hyperpod_plan):
    cluster = hyperpod_plan.one(CLUSTER)
    earlier = []
    for resource in hyperpod_plan.resources:
        if resource.type == "eks:index:Cluster":
            resource = offline.RecordedResource(**{**resource.__dict__, "inputs": {**resource.inputs, "authenticationMode": "CONFIG_MAP"}})
        if resource is not cluster:
            earlier.append(resource)
    with pytest.raises(UserError, match="CreateCluster kimi-k3-hyperpod would fail: HyperPod needs the EKS cluster's authentication mode"):
        hyperpod_checks.check_registration(CLUSTER, cluster.plain_inputs, earlier, {}, lambda arn: hyperpod_plan.training_plan)


# --- the plan command: rehearsals of the training plan -------------------------------------------


def _plan(tmp_path, *flags: str) -> int:
    return cli.main(["plan", "hyperpod", "--quiet", "--now", "2026-12-01T08:00:00Z", "--out", str(tmp_path / "out"), *flags])


def test_plan_hyperpod_summarises_the_training_plan(tmp_path, capsys):
    assert _plan(tmp_path) == 0
    out = capsys.readouterr().out
    assert "training plan     kimi-k3-p6 — Scheduled (offline fixture), AZ us-east-1a" in out
    assert "plan window       2026-12-02 11:30 UTC -> 2026-12-09 11:30 UTC" in out
    assert "HyperPod nodes    1 x ml.p6-b300.48xlarge (8 GPUs), cluster kimi-k3-hyperpod" in out
    assert "Policy pack kimi-k3-guardrails" in out and "passed" in out
    names = sorted(p.name for p in (tmp_path / "out" / "manifests").glob("*.yaml"))
    assert names == ["inferenceendpointconfig-kimi-serving-kimi-k3-serving.yaml", "namespace-kimi-serving.yaml", "secret-kimi-serving-kimi-k3-serving-api-key.yaml"]
    helm = (tmp_path / "out" / "helm" / "hyperpod-dependencies.values.yaml").read_text()
    # A local chart: the render command names the directory, no --version (there is none to ask for).
    assert "# Render them: helm template hyperpod-dependencies components/data/charts/HyperPodHelmChart --namespace kube-system -f" in helm


def test_the_plans_az_leads_the_network(tmp_path, capsys):
    assert _plan(tmp_path, "--training-plan-az", "us-east-1c") == 0
    outputs = json.loads((tmp_path / "out" / "outputs.json").read_text())
    assert outputs["availabilityZones"] == ["us-east-1c", "us-east-1a"] and outputs["trainingPlan"]["availabilityZone"] == "us-east-1c"


@pytest.mark.parametrize("flags,message", [
    (("--training-plan-state", "Expired"), "training plan kimi-k3-p6 is expired (ended 2026-11-30 11:30 UTC)"),
    (("--training-plan-state", "Failed"), "training plan kimi-k3-p6 is Failed; a HyperPod instance group needs a Scheduled or Active plan"),
    (("--training-plan-state", "Active", "--training-plan-start", "2026-11-20T11:30:00Z"), "training plan kimi-k3-p6 ended at 2026-11-27 11:30 UTC"),
    (("--training-plan-type", "ml.p5en.48xlarge"), "reserves ml.p5en.48xlarge, but the instance group is ml.p6-b300.48xlarge"),
    (("--training-plan-az", "us-west-2a"), "--training-plan-az 'us-west-2a' is not accepted; expected an availability zone of us-east-1"),
    (("--training-plan-count", "3"), "--training-plan-count 3 is not accepted; a training plan reserves 1, 2, 4, 8, 16, 32, 64 instances"),
    (("--training-plan-start", "soon"), "--training-plan-start 'soon' is not accepted; expected an ISO 8601 time"),
])
def test_a_plan_that_cannot_work_is_refused_before_anything_is_written(flags, message, tmp_path, capsys):
    assert _plan(tmp_path, *flags) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err
    assert not (tmp_path / "out").exists()


def test_too_few_instances_and_an_uncovered_az_are_refused():
    """What the stack needs that the plan does not hold: with the stack's own AZs and replica count."""
    def refused(overrides, **plan) -> str:
        base = dict(plan_arn="arn:aws:sagemaker:us-east-1:123456789012:training-plan/kimi-k3-p6", instance_type="ml.p6-b300.48xlarge",
                    instance_count=1, availability_zone="us-east-1a")
        from kimi_k3.offline.training_plan_rehearsal import TrainingPlanRehearsal

        facts = TrainingPlanRehearsal(**plan).facts(**base, now=NOW)
        with pytest.raises(UserError) as error:
            offline.run_stack("hyperpod", now=NOW, config_overrides=overrides, training_plan=facts)
        return str(error.value)

    assert "reserves 1 x ml.p6-b300.48xlarge in us-east-1a but the stack needs 2 (kimi-k3:replicas" in refused({"kimi-k3:replicas": 2})
    uncovered = refused({"kimi-k3:availabilityZones": ["us-east-1b", "us-east-1c"]})
    assert "holds its ml.p6-b300.48xlarge capacity in us-east-1a, which the stack's subnets do not cover" in uncovered


def test_replicas_zero_takes_every_instance_the_plan_holds_in_the_groups_az():
    from kimi_k3.offline.training_plan_rehearsal import TrainingPlanRehearsal

    facts = TrainingPlanRehearsal(instance_count=4).facts(
        plan_arn="arn:aws:sagemaker:us-east-1:123456789012:training-plan/kimi-k3-p6", instance_type="ml.p6-b300.48xlarge",
        instance_count=1, availability_zone="us-east-1a", now=NOW,
    )
    result = offline.run_stack("hyperpod", now=NOW, config_overrides={"kimi-k3:replicas": 0}, training_plan=facts)
    (group,) = result.one(CLUSTER).plain_inputs["instanceGroups"]
    assert group["instanceCount"] == 4 and result.one(CR).plain_inputs["spec"]["replicas"] == 4


def test_a_plan_aws_does_not_know_is_one_line_naming_the_key():
    facts = offline.default_training_plan(settings.load_stack("hyperpod"), NOW)
    with pytest.raises(UserError) as error:
        offline.run_stack("hyperpod", now=NOW, training_plan=dataclasses.replace(facts, arn=facts.arn + "-other", name="kimi-k3-p6-other"))
    message = str(error.value)
    assert message.startswith("kimi-k3:trainingPlanArn arn:aws:sagemaker:us-east-1:123456789012:training-plan/kimi-k3-p6: not found in us-east-1")


def test_two_plans_of_the_same_inputs_are_byte_identical(tmp_path, capsys):
    import hashlib

    digests = []
    for run in ("a", "b"):
        out = tmp_path / run
        assert cli.main(["plan", "hyperpod", "--quiet", "--now", "2026-12-01T08:00:00Z", "--out", str(out)]) == 0
        digests.append({p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.rglob("*")) if p.is_file()})
    assert digests[0] == digests[1]


def test_another_projects_program_reading_a_plan_gets_the_rehearsed_one(tmp_path):
    """Someone's own program (docs: "From your own Pulumi program") reads a plan at start: offline it gets one for any name."""
    from kimi_k3.stack import project
    from tests.user_project import write_project

    program = (
        "import pulumi\n"
        "from kimi_k3.hyperpod.training_plan_check import stack_training_plan\n"
        "plan = stack_training_plan('my-plan', 'us-east-1')\n"
        "pulumi.export('plan', {'arn': plan.arn, 'state': plan.state, 'azs': list(plan.availability_zones())})\n"
    )
    directory = write_project(tmp_path / "my-llm", pulumi_yaml="name: my-llm\nruntime: python\n", program=program,
                              stacks={"dev": "config:\n  aws:region: us-east-1\n"})
    result = offline.run_project(project.find_project(directory, directory), "dev", now=NOW)
    assert result.outputs["plan"] == {"arn": f"arn:aws:sagemaker:us-east-1:{offline.ACCOUNT_ID}:training-plan/my-plan", "state": "Scheduled", "azs": ["us-east-1a"]}


def test_the_operators_routing_and_kv_cache_keys_reach_the_stacks_endpoint():
    result = offline.run_stack("hyperpod", now=NOW, config_overrides={
        "kimi-k3:hyperpodRoutingStrategy": "prefixaware", "kimi-k3:hyperpodLoadBalancerAlgorithm": "round_robin", "kimi-k3:hyperpodKvCache": "l1",
    })
    spec = result.one(CR).plain_inputs["spec"]
    assert spec["intelligentRoutingSpec"] == {"enabled": True, "routingStrategy": "prefixaware"}
    assert spec["loadBalancer"]["routingAlgorithm"] == "round_robin"
    assert spec["kvCacheSpec"] == {"enableL1Cache": True, "enableL2Cache": False}
    validate_manifest(result.one(CR).plain_inputs, "1.34")


def test_the_api_proxy_drain_and_alert_keys_warn_on_a_hyperpod_stack():
    """The operator brings its own load balancer and pods: the EKS serving front's keys do nothing here, and the stack says so."""
    result = offline.run_stack("hyperpod", now=NOW, config_overrides={
        "kimi-k3:servingDrainSeconds": 600, "kimi-k3:prometheusOperatorEnabled": True, "kimi-k3:imagePrePull": True,
    })
    (warning,) = [w for w in result.settings.warnings if "only to servingPlatform eks" in w]
    assert all(key in warning for key in ("kimi-k3:servingDrainSeconds", "kimi-k3:prometheusOperatorEnabled", "kimi-k3:imagePrePull"))
    assert not result.by_type("kubernetes:apps/v1:DaemonSet")  # the pre-pull is the EKS path's
