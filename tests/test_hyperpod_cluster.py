"""kimi_k3.HyperPodCluster under the offline engine: resources, inputs, order, secure defaults, bad input.

The offline engine answers ``aws-native:sagemaker:Cluster`` like ``DescribeCluster`` and runs
HyperPod's create-time rules on the registration (``components/offline/hyperpod_checks.py``);
``aws:s3/bucket:Bucket`` answers with a name made from ``bucketPrefix``. The providers come
through ``opts`` (``providers={"kubernetes": ..., "aws-native": ...}``), never as args.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pulumi
import pytest
import yaml

from kimi_k3 import offline
from kimi_k3.errors import ComponentInputError, UserError
from kimi_k3.hyperpod import cluster as hc
from kimi_k3.hyperpod import rules as hyperpod_rules
from kimi_k3.hyperpod.cluster import HyperPodCluster, HyperPodClusterArgs
from kimi_k3.hyperpod.rules import EksForHyperPod
from kimi_k3.hyperpod.training_plan_check import PlanCapacity
from tests.chart_values import unknown_keys
from tests.conftest import ROOT
from tests.hyperpod_builders import EKS_ARN, NODE_SG, PLAN, REGION, SUBNET, SUBNET_AZS, engine, providers

CLUSTER_TYPE = "aws-native:sagemaker:Cluster"
RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"


def args(**changes) -> dict:
    base = dict(
        eks_cluster_arn=EKS_ARN,
        eks=EksForHyperPod("1.34", "API", "v1.20.4-eksbuild.1"),
        region=REGION,
        subnet_id=SUBNET,
        subnet_availability_zone="us-east-1a",
        security_group_ids=(NODE_SG,),
        vpc_id="vpc-0123456789abcdef0",
        training_plan=PLAN,
        instance_count=2,
        cluster_name="kimi-k3-hyperpod",
        tags={"Project": "kimi-k3"},
    )
    base.update(changes)
    return base


def build(**changes) -> offline.PlanResult:
    def program() -> None:
        cluster = HyperPodCluster("kimi-hp", HyperPodClusterArgs(**args(**changes)), opts=providers())
        pulumi.export("clusterArn", cluster.cluster_arn)
        pulumi.export("clusterName", cluster.cluster_name)

    return engine().run(program)


@pytest.fixture(scope="module")
def plan() -> offline.PlanResult:
    return build()


def inputs(result: offline.PlanResult, type_: str, name: str | None = None) -> dict:
    return result.one(type_, name).plain_inputs


def by_urn(result: offline.PlanResult) -> dict[str, offline.RecordedResource]:
    return {r.urn: r for r in result.resources}


# --- the cluster ---------------------------------------------------------------


def test_the_cluster_is_orchestrated_by_the_eks_cluster_with_automatic_recovery(plan):
    cluster = inputs(plan, CLUSTER_TYPE)
    assert cluster["clusterName"] == "kimi-k3-hyperpod"
    assert cluster["orchestrator"] == {"eks": {"clusterArn": EKS_ARN}}
    assert cluster["nodeRecovery"] == "Automatic"
    efa = plan.one("aws:ec2/securityGroup:SecurityGroup", "kimi-hp-efa").id  # p6-b300 has EFA (issue 21, point 7)
    assert cluster["vpcConfig"] == {"subnets": [SUBNET], "securityGroupIds": [NODE_SG, efa]}
    assert {"key": "Project", "value": "kimi-k3"} in cluster["tags"]
    assert plan.outputs["clusterArn"].startswith("arn:aws:sagemaker:us-east-1:123456789012:cluster/")
    assert plan.outputs["clusterName"] == "kimi-k3-hyperpod"


def test_the_instance_group_is_p6_b300_on_the_training_plan_with_deep_health_checks(plan):
    (group,) = inputs(plan, CLUSTER_TYPE)["instanceGroups"]
    role = plan.one("aws:iam/role:Role", "kimi-hp-execution-role")
    bucket = plan.one("aws:s3/bucket:Bucket").outputs["bucket"]
    assert group["instanceGroupName"] == "p6-b300"
    assert group["instanceType"] == "ml.p6-b300.48xlarge"
    assert group["instanceCount"] == 2
    assert group["trainingPlanArn"] == PLAN.arn
    assert group["executionRole"] == role.outputs["arn"]
    assert group["onStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert group["lifeCycleConfig"] == {"sourceS3Uri": f"s3://{bucket}/lifecycle/base-config/", "onCreate": "on_create.sh"}
    assert group["instanceStorageConfigs"] == [{"ebsVolumeConfig": {"volumeSizeInGb": 2048}}]
    assert "threadsPerCore" not in group


def test_every_deep_health_check_the_provider_offers_is_on():
    import pulumi_aws_native.sagemaker as sm

    assert set(hc.DEEP_HEALTH_CHECKS) == {c.value for c in sm.ClusterDeepHealthCheckType}


def test_the_cluster_comes_after_the_dependencies_chart_the_scripts_and_the_role_policies(plan):
    cluster = plan.one(CLUSTER_TYPE)
    names = {by_urn(plan)[u].name for u in cluster.dependencies if u in by_urn(plan)}
    assert {"kimi-hp-dependencies", "kimi-hp-on-create-sh", "kimi-hp-on-create-main-sh", "kimi-hp-execution-inline",
            "kimi-hp-execution-AmazonSageMakerClusterInstanceRolePolicy", "kimi-hp-execution-AmazonEKS_CNI_Policy"} <= names
    order = [r.name for r in plan.resources]
    assert order.index("kimi-hp-dependencies") < order.index("kimi-hp-cluster")


# --- the dependencies chart -------------------------------------------------------


def test_the_dependencies_chart_is_the_vendored_one_in_kube_system(plan):
    release = plan.one(RELEASE_TYPE)
    values = release.plain_inputs
    assert values["name"] == "hyperpod-dependencies"
    assert values["namespace"] == "kube-system"
    assert values["dependencyUpdate"] is True
    assert Path(values["chart"]).resolve() == hc.CHART_DIR
    assert values["chart"] == "components/data/charts/HyperPodHelmChart"  # relative to the project directory: the same on every machine
    assert values["skipAwait"] is True


def test_the_chart_creates_the_aws_hyperpod_namespace_under_that_name():
    assert hc.chart_defaults()["namespace"] == {"create": True, "name": hyperpod_rules.DEPENDENCIES_NAMESPACE}
    template = (hc.CHART_DIR / "charts/deep-health-check/templates/aws-hyperpod-namespace.yaml").read_text()
    assert "aws-hyperpod" in template


def test_the_values_we_set_exist_in_the_chart_and_its_sub_charts(plan):
    values = plan.one(RELEASE_TYPE).plain_inputs["values"]
    defaults = hc.chart_defaults()
    for sub in ("health-monitoring-agent", "gpu-operator"):
        defaults[sub] = {**yaml.safe_load((hc.CHART_DIR / "charts" / sub / "values.yaml").read_text()), **defaults.get(sub, {})}
    assert values["health-monitoring-agent"] == {"region": REGION}
    assert unknown_keys({"health-monitoring-agent": values["health-monitoring-agent"]}, defaults) == []
    # The regional values (image registries of the region) are passed on unchanged.
    regional = yaml.safe_load((hc.CHART_DIR / "regional-values/values-us-east-1.yaml").read_text())
    assert values["gpu-operator"] == regional["gpu-operator"]
    # Everything else stays at the chart's defaults: the inference operator sub-chart stays off (the add-on installs it).
    assert "inferenceOperators" not in values and defaults["inferenceOperators"] == {"enabled": False}


def test_a_region_without_regional_values_gets_only_the_region():
    assert hc.dependencies_values("mx-central-1") == {"health-monitoring-agent": {"region": "mx-central-1"}}


def helm_wrote(path: str) -> bool:
    """Files Helm adds to the chart directory when the release is applied (see components/data/charts/.gitignore)."""
    if path == "Chart.lock" or path.startswith("tmpcharts"):
        return True
    return path.startswith("charts/") and path.count("/") == 1 and path.endswith(".tgz") and path != "charts/health-monitoring-agent-0.1.0.tgz"


def test_the_vendored_chart_is_byte_for_byte_the_recorded_one():
    files = sorted(f for f in (p.relative_to(hc.CHART_DIR).as_posix() for p in hc.CHART_DIR.rglob("*") if p.is_file()) if not helm_wrote(f))
    lines = [f"{hashlib.sha256((hc.CHART_DIR / f).read_bytes()).hexdigest()}  {f}\n" for f in files]
    digest = hashlib.sha256("".join(lines).encode()).hexdigest()
    readme = (ROOT / "components/data/README.md").read_text()
    assert digest in readme, f"tree digest changed: {digest} (update components/data/README.md if the chart was replaced on purpose)"
    assert len(lines) == 145
    assert not (hc.CHART_DIR / "charts/inference-operator/migration").exists()
    chart = yaml.safe_load((hc.CHART_DIR / "Chart.yaml").read_text())
    assert {d["name"]: d["version"] for d in chart["dependencies"]}["hyperpod-inference-operator"] == "2.2.2"


# --- lifecycle scripts ---------------------------------------------------------------


def test_the_lifecycle_scripts_are_staged_byte_for_byte(plan):
    bucket = plan.one("aws:s3/bucket:Bucket").outputs["bucket"]
    readme = (ROOT / "components/data/README.md").read_text()
    for script in hc.LIFECYCLE_SCRIPTS:
        obj = inputs(plan, "aws:s3/bucketObjectv2:BucketObjectv2", f"kimi-hp-{script.replace('_', '-').replace('.', '-')}")
        local = (hc.LIFECYCLE_DIR / script).read_bytes()
        assert obj["content"].encode() == local
        assert obj["key"] == f"lifecycle/base-config/{script}" and obj["bucket"] == bucket
        assert hashlib.sha256(local).hexdigest() in readme  # the recorded upstream digest
    assert "bash ./on_create_main.sh" in (hc.LIFECYCLE_DIR / "on_create.sh").read_text()


def test_the_lifecycle_bucket_is_private_encrypted_versioned_and_tls_only(plan):
    bucket = plan.one("aws:s3/bucket:Bucket")
    name = bucket.outputs["bucket"]
    assert name.startswith("sagemaker-kimi-k3-hyperpod-")  # the managed policy's S3 statement allows sagemaker-* buckets
    block = inputs(plan, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert all(block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    assert inputs(plan, "aws:s3/bucketOwnershipControls:BucketOwnershipControls")["rule"] == {"objectOwnership": "BucketOwnerEnforced"}
    rule = inputs(plan, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")["rules"][0]
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "AES256" and rule["bucketKeyEnabled"] is True
    assert inputs(plan, "aws:s3/bucketVersioning:BucketVersioning")["versioningConfiguration"] == {"status": "Enabled"}
    (statement,) = json.loads(inputs(plan, "aws:s3/bucketPolicy:BucketPolicy")["policy"])["Statement"]
    assert statement["Effect"] == "Deny" and statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert statement["Resource"] == [f"arn:aws:s3:::{name}", f"arn:aws:s3:::{name}/*"]


# --- the execution role ------------------------------------------------------------


def test_the_execution_role_is_for_sagemaker_with_the_documented_managed_policy(plan):
    trust = json.loads(inputs(plan, "aws:iam/role:Role", "kimi-hp-execution-role")["assumeRolePolicy"])
    assert trust["Statement"] == [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]
    attached = {r.plain_inputs["policyArn"] for r in plan.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")}
    assert attached == {"arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy", "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"}


def test_the_inline_policy_reads_only_the_lifecycle_prefix(plan):
    bucket = plan.one("aws:s3/bucket:Bucket").outputs["bucket"]
    statements = {s["Sid"]: s for s in json.loads(inputs(plan, "aws:iam/rolePolicy:RolePolicy", "kimi-hp-execution-inline")["policy"])["Statement"]}
    assert statements["ReadLifecycleScripts"]["Action"] == "s3:GetObject"
    assert statements["ReadLifecycleScripts"]["Resource"] == f"arn:aws:s3:::{bucket}/lifecycle/base-config/*"
    assert statements["ListLifecycleScripts"]["Condition"] == {"StringLike": {"s3:prefix": ["lifecycle/base-config/*", "lifecycle/base-config"]}}
    assert "eks-auth:AssumeRoleForPodIdentity" in statements["VpcCniAndNodeBootstrap"]["Action"]
    every_action = [a for s in statements.values() for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])]
    assert not [a for a in every_action if a.endswith(":*") or a == "*"]
    assert not [a for a in every_action if a.startswith("s3:") and a not in ("s3:GetObject", "s3:ListBucket")]


def test_nothing_secret_reaches_aws_resources(plan):
    for resource in plan.resources:
        if resource.type.startswith("pulumi:providers:"):
            continue
        assert not offline.contains_secret(resource.inputs), resource.name
        text = json.dumps(offline.redact(resource.inputs))
        assert "aws_secret_access_key" not in text.lower() and "BEGIN" not in text


# --- refusals ------------------------------------------------------------------------


def refused(opts=providers, **changes) -> tuple[str, offline.OfflineEngine]:
    run = engine()

    def program() -> None:
        HyperPodCluster("kimi-hp", HyperPodClusterArgs(**args(**changes)), opts=opts())

    with pytest.raises(ComponentInputError) as error:
        run.run(program)
    message = str(error.value)
    assert "\n" not in message
    assert not [r for r in run.resources if not r.type.startswith("pulumi:providers:")], "nothing is declared when args are refused"
    return message, run


@pytest.mark.parametrize("changes,message", [
    ({"subnet_availability_zone": "us-east-1b"}, "uses a subnet in us-east-1b, but its training plan's capacity is in us-east-1a"),
    ({"instance_count": 3}, "instance_count 3 is not accepted; at most 2, what training plan kimi-k3-p6 reserves in us-east-1a"),
    ({"instance_type": "ml.p5en.48xlarge"}, "a type training plan kimi-k3-p6 reserves (ml.p6-b300.48xlarge)"),
    ({"instance_type": "p6-b300.48xlarge"}, "with the ml. prefix"),
    ({"eks": EksForHyperPod("1.35", "API")}, "HyperPod does not support Kubernetes '1.35'"),
    ({"eks": EksForHyperPod("1.34", "CONFIG_MAP")}, "API or API_AND_CONFIG_MAP, not 'CONFIG_MAP'"),
    ({"eks": EksForHyperPod("1.34", "API", "v1.18.0-eksbuild.1")}, "Amazon VPC CNI plugin 1.18.3 or later"),
    ({"eks_cluster_arn": "kimi-k3"}, "eks_cluster_arn 'kimi-k3' is not accepted; an EKS cluster ARN"),
    ({"cluster_name": "kimi_k3"}, "HyperPod cluster name 'kimi_k3' is not accepted"),
    ({"security_group_ids": ()}, "at least the EKS node security group"),
    ({"ebs_volume_size_gib": 20000}, "1 to 16384 GiB"),
    ({"deep_health_checks": ("InstanceStress", "Burn")}, "distinct values among InstanceStress, InstanceConnectivity"),
    ({"node_recovery": "Manual"}, "Automatic or None"),
    ({"lifecycle_prefix": "/lifecycle/"}, "lowercase path segments"),
    ({"training_plan": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/x"}, "training_plan 'arn:aws:sagemaker:us-east-1:123456789012:training-plan/x' (str) is not accepted; expected a TrainingPlanFacts"),
])
def test_bad_args_are_refused_before_anything_is_declared(changes, message):
    text, _ = refused(**changes)
    assert message in text


def test_every_problem_is_reported_at_once_with_its_property_path():
    text, _ = refused(instance_count=0, node_recovery="Manual")
    assert "has 2 problems" in text and "instance_count 0 is not accepted" in text and "node_recovery 'Manual'" in text


def test_the_ambient_kubeconfig_is_refused():
    """No Kubernetes provider in opts: the dependencies chart would go to whatever cluster ~/.kube/config points at."""
    import pulumi_aws_native as aws_native

    text, _ = refused(opts=lambda: pulumi.ResourceOptions(providers={"aws-native": aws_native.Provider("native", region=REGION)}))
    assert "opts.providers has no Kubernetes provider" in text


def test_children_use_the_providers_given_in_opts(plan):
    k8s_provider = plan.one("pulumi:providers:kubernetes", "eks-k8s")
    native = plan.one("pulumi:providers:aws-native", "native")
    assert plan.one(RELEASE_TYPE).provider.startswith(k8s_provider.urn + "::")
    assert plan.one(CLUSTER_TYPE).provider.startswith(native.urn + "::")


def test_a_plan_split_across_azs_uses_the_subnets_az_only():
    split = replace(PLAN, capacities=(PlanCapacity("ml.p6-b300.48xlarge", 1, "us-east-1a"), PlanCapacity("ml.p6-b300.48xlarge", 3, "us-east-1b")))
    assert "at most 1, what training plan kimi-k3-p6 reserves in us-east-1a" in refused(training_plan=split)[0]


def declared_around_the_component(with_chart: bool = True, **cluster_inputs) -> str:
    """Declare ``aws-native:sagemaker:Cluster`` directly (no component checks): what the offline engine's rules refuse."""
    import pulumi_aws_native as aws_native

    sm = aws_native.sagemaker

    def program() -> None:
        opts = providers()
        after: list[pulumi.Resource] = []
        if with_chart:  # a correct cluster first: it installs the dependencies chart the rule looks for
            after.append(HyperPodCluster("kimi-hp", HyperPodClusterArgs(**args()), opts=opts))
        values = dict(
            cluster_name="raw", orchestrator=sm.ClusterOrchestratorArgs(eks=sm.ClusterOrchestratorEksConfigArgs(cluster_arn=EKS_ARN)),
            vpc_config=sm.ClusterVpcConfigArgs(security_group_ids=[NODE_SG], subnets=["subnet-0bbb0000000000002"]),
            instance_groups=[sm.ClusterInstanceGroupArgs(instance_group_name="g", instance_type="ml.p6-b300.48xlarge", instance_count=1,
                                                         execution_role="arn:aws:iam::123456789012:role/x", training_plan_arn=PLAN.arn)],
        )
        values.update(cluster_inputs)
        sm.Cluster("raw", sm.ClusterArgs(**values), opts=pulumi.ResourceOptions(provider=opts.providers["aws-native"], depends_on=after))

    with pytest.raises(UserError) as error:
        engine().run(program)
    return str(error.value)


def test_the_offline_engine_refuses_a_cluster_declared_around_the_component():
    """What CreateCluster refuses and the mocks would accept: the instance group's subnet outside the plan's AZ, an unknown plan."""
    assert "CreateCluster raw would fail: instance group 'g' uses a subnet in us-east-1b" in declared_around_the_component()
    import pulumi_aws_native as aws_native

    sm = aws_native.sagemaker
    unknown = declared_around_the_component(instance_groups=[sm.ClusterInstanceGroupArgs(
        instance_group_name="g", instance_type="ml.p6-b300.48xlarge", instance_count=1, execution_role="arn:aws:iam::123456789012:role/x",
        training_plan_arn="arn:aws:sagemaker:us-east-1:123456789012:training-plan/other")])
    assert "names training plan arn:aws:sagemaker:us-east-1:123456789012:training-plan/other, which does not exist" in unknown
    no_chart = declared_around_the_component(with_chart=False, vpc_config=sm.ClusterVpcConfigArgs(security_group_ids=[NODE_SG], subnets=[SUBNET]))
    assert "install the HyperPodHelmChart Helm chart on EKS cluster kimi-k3-hyperpod before a cluster created through the API" in no_chart


def test_the_offline_rules_as_functions():
    registration = {"clusterName": "x", "orchestrator": {"eks": {"clusterArn": EKS_ARN}}, "vpcConfig": {"subnets": ["subnet-0bbb0000000000002"]},
                    "instanceGroups": [{"instanceGroupName": "g", "trainingPlanArn": PLAN.arn}]}
    with pytest.raises(UserError, match="uses a subnet in us-east-1b"):
        hyperpod_rules.check_cluster_registration(registration, SUBNET_AZS, {PLAN.arn: PLAN.availability_zones()})
    with pytest.raises(UserError, match="orchestrator.eks.clusterArn"):
        hyperpod_rules.check_cluster_registration({**registration, "orchestrator": {}}, SUBNET_AZS, {})
