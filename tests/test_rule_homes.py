"""One rule home (issue 32, point 1): what the settings layer refuses about a component's input, the component refuses too.

Every key a settings rule refuses (found by walking ``components/stack/settings/``: each ``full_key``/``in_range``/
``one_of``/``ipv4_network``/``cidr_list``/``chart_version``/``secret`` call naming a key) has a row here: the bad value
in a stack (refused, naming the key) and the same bad value given to the component directly (refused before anything
is declared, naming the component's own arg). A key that feeds no public component's arg is listed in
:data:`NOT_A_COMPONENT_INPUT` with why (every other key has a row: no key is left unwalked); a key whose component does
not refuse the value yet is in :data:`NOT_YET_IN_THE_COMPONENT`, and its row must still fail (strict), so the list only
shrinks.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pulumi
import pytest

from kimi_k3 import (
    CapacityBlockNodeGroup,
    CapacityBlockNodeGroupArgs,
    Cluster,
    ClusterArgs,
    DcgmExporterArgs,
    DeployRunner,
    DeployRunnerArgs,
    EfaDevicePluginArgs,
    ExistingNetworkArgs,
    GpuNodePlugins,
    GpuNodePluginsArgs,
    Network,
    NetworkArgs,
    NvidiaDevicePluginArgs,
    PrometheusOperator,
    PrometheusOperatorArgs,
    ServingFront,
    ServingMonitoring,
    ServingMonitoringArgs,
    TimeToServe,
    TimeToServeArgs,
    VllmServer,
    VllmServerArgs,
    WeightsBucket,
    WeightsBucketArgs,
    WeightsStagingJob,
    WeightsStagingJobArgs,
    lookup_capacity_block,
    offline,
)
from kimi_k3.errors import SettingsError, UserError
from kimi_k3.hyperpod.cluster import HyperPodCluster, HyperPodClusterArgs
from kimi_k3.hyperpod.rules import EksForHyperPod
from kimi_k3.observability.alerts import AlertRulesArgs, AlertThresholds, BlockWindow
from kimi_k3.observability.dashboard import DashboardArgs
from kimi_k3.stack import seam, settings
from kimi_k3.weights.serving_pod import ServingStartup
from tests.builders import BLOCK_START, DIGEST, REVISION, block_facts, in_cluster, serving_contract, stack_config
from tests.conftest import NOW, ROOT
from tests.hyperpod_builders import EKS_ARN, NODE_SG, PLAN, REGION, SUBNET, providers

SETTINGS = ROOT / "components" / "stack" / "settings"
_RULE_CALLS = {"full_key", "in_range", "one_of", "ipv4_network", "cidr_list", "chart_version", "secret"}
"""The settings' rule helpers (:mod:`kimi_k3.stack.settings.reader`) and ``full_key``, which every ``SettingsError`` names its key with."""
SUBNETS = {"us-east-1a": "subnet-0a1b2c3d4e5f67890", "us-east-1b": "subnet-1a1b2c3d4e5f67890"}
ADMIN = "arn:aws:iam::111122223333:role/platform-admin"


def settings_rule_keys() -> set[str]:
    """Every config key a settings rule refuses (the key named by a rule helper's first argument)."""
    keys = set()
    for path in SETTINGS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name in _RULE_CALLS:
                    keys.add(node.args[0].value)
    # the settings build the serving front once and name a refused field's key through the seam (stack/settings/serving.py)
    keys |= {feed.key for feed in seam.SEAM if feed.input == "ServingFront"}
    return keys


# --- the components, valid, with one change ------------------------------------------------------


def network(**changes: Any) -> Callable[[], object]:
    return lambda: Network("net", NetworkArgs(**{"cluster_name": "c", "vpc_cidr": "10.50.0.0/16", "availability_zones": ("us-east-1a", "us-east-1b"), **changes}))


def existing_network(**changes: Any) -> Callable[[], object]:
    base = {"vpc_id": "vpc-0a1b2c3d4e5f67890", "private_subnet_ids_by_az": SUBNETS}
    return lambda: Network.from_existing("net", ExistingNetworkArgs(**{**base, **changes}))


def cluster(**changes: Any) -> Callable[[], object]:
    base = {"version": "1.34", "vpc_id": "vpc-0a1b2c3d4e5f67890", "private_subnet_ids": list(SUBNETS.values()), "admin_role_arns": [ADMIN]}
    return lambda: Cluster("c", ClusterArgs(**{**base, **changes}))


def node_group(**changes: Any) -> Callable[[], object]:
    base = {"cluster_name": "c", "kubernetes_version": "1.34", "subnet_ids_by_az": SUBNETS, "instance_type": "p6-b300.48xlarge", "now": NOW, "reservation": block_facts()}
    return lambda: CapacityBlockNodeGroup("gpu", CapacityBlockNodeGroupArgs(**{**base, **changes}))


def plugins(**changes: Any) -> Callable[[], object]:
    return lambda: GpuNodePlugins("gpu-plugins", GpuNodePluginsArgs(**changes), opts=in_cluster())


def server(**changes: Any) -> Callable[[], object]:
    base = {"contract": serving_contract(), "api_key": pulumi.Output.secret("k"), "replicas": 1}
    return lambda: VllmServer("kimi-k3", VllmServerArgs(**{**base, **changes}), opts=in_cluster())


def looked_up(reservation_id: str) -> Callable[[], object]:
    return lambda: lookup_capacity_block(reservation_id)


def deploy_runner(**changes: Any) -> Callable[[], object]:
    base = {
        "project_name": "kimi-k3-dev-deploy", "stack": "dev", "vpc_id": "vpc-0a1b2c3d4e5f67890", "subnet_ids": list(SUBNETS.values()), "deploy_role_arn": ADMIN,
        "secret_arn": RUNNER_SECRET, "source_url": "https://github.com/acme/kimi-k3-aws.git",
    }
    return lambda: DeployRunner("runner", DeployRunnerArgs(**{**base, **changes}))


def monitoring(thresholds: AlertThresholds | None = None, **alert_changes: Any) -> Callable[[], object]:
    def build() -> object:
        block = BlockWindow(start=BLOCK_START, end=BLOCK_START + timedelta(days=7), reserved_instances=1)
        alerts = AlertRulesArgs(block=block, thresholds=thresholds or AlertThresholds(), **alert_changes)
        args = ServingMonitoringArgs(alerts=alerts, dashboard=DashboardArgs(block_end=block.end, reserved_instances=1))
        return ServingMonitoring("monitoring", args, opts=in_cluster())
    return build


def prometheus_operator(**changes: Any) -> Callable[[], object]:
    return lambda: PrometheusOperator("prometheus-operator", PrometheusOperatorArgs(**changes), opts=in_cluster())


def startup(**changes: Any) -> Callable[[], object]:
    """The serving pod's start (``VllmServerArgs.startup``) with ``changes``, on S3 weights and a digest-pinned image (the startup's
    own rules, not its combinations, refuse)."""
    return lambda: server(startup=ServingStartup(**changes), contract=serving_contract("s3"), cluster_name="c", aws_region="us-east-1")()  # S3 weights, an image pinned by digest: the startup's own rules


def time_to_serve(**changes: Any) -> Callable[[], object]:
    base = {"region": "us-east-1", "cluster_name": "c", "engine_image": f"vllm/vllm-openai@{DIGEST}", "instance_type": "p6-b300.48xlarge", "model_id": "moonshotai/Kimi-K3",
            "revision": REVISION}
    return lambda: TimeToServe("time-to-serve", TimeToServeArgs(**{**base, **changes}), opts=in_cluster())


def weights_bucket(**changes: Any) -> Callable[[], object]:
    return lambda: WeightsBucket("weights", WeightsBucketArgs(**{"bucket_name": "kimi-weights", **changes}))


def staging_job(**changes: Any) -> Callable[[], object]:
    base = {"image": f"vllm/vllm-openai@{DIGEST}", "model_id": "moonshotai/Kimi-K3", "revision": REVISION, "s3_uri": "s3://kimi-weights/kimi-k3/", "cluster_name": "c",
            "aws_region": "us-east-1", "allow_floating_tag": True}
    return lambda: WeightsStagingJob("stage", WeightsStagingJobArgs(**{**base, **changes}), opts=in_cluster())


def hyperpod_cluster(**changes: Any) -> Callable[[], object]:
    base = {"eks_cluster_arn": EKS_ARN, "eks": EksForHyperPod("1.34", "API", "v1.20.4-eksbuild.1"), "region": REGION, "subnet_id": SUBNET,
            "subnet_availability_zone": "us-east-1a", "security_group_ids": (NODE_SG,), "vpc_id": "vpc-0123456789abcdef0", "training_plan": PLAN,
            "cluster_name": "kimi-k3-hyperpod"}
    return lambda: HyperPodCluster("kimi-hp", HyperPodClusterArgs(**{**base, **changes}), opts=providers())


RUNNER_SECRET = "arn:aws:secretsmanager:us-east-1:111122223333:secret:kimi-k3/dev/deploy-AbCdEf"
RUNNER = {"deployRunner": "codebuild", "deployRunnerRoleArn": "arn:aws:iam::123456789012:role/platform-admin", "deployRunnerSecretArn": RUNNER_SECRET}
"""The stack keys a deploy runner needs besides its source (the dev stack's admin role)."""
S3_WEIGHTS = {"weightsSource": "s3", "weightsS3Uri": "s3://kimi-weights/kimi-k3/", "servingImage": f"vllm/vllm-openai@{DIGEST}"}
"""The stack keys of S3 weights (and a digest-pinned image), which the staging Job and the compile cache need."""


@dataclasses.dataclass(frozen=True)
class Row:
    """A settings rule and the same bad value given to the component."""

    key: str
    """The config key (short name)."""
    value: Any
    """The bad value in the stack."""
    direct: Callable[[], Callable[[], object]]
    """Builds the direct call with the same bad value (a thunk, so the args are built inside the engine)."""
    arg: str
    """The component's arg the refusal names."""
    stack: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Other keys the stack needs for the rule to apply."""
    stack_file: str = "dev"
    """The committed stack the bad value is put into."""


ROWS = (
    # Network
    Row("vpcCidr", "8.8.0.0/16", lambda: network(vpc_cidr="8.8.0.0/16"), "vpc_cidr"),
    Row("vpcCidr", "10.42.0.0/26", lambda: network(vpc_cidr="10.42.0.0/26"), "vpc_cidr"),
    Row("vpcCidr", "10.42.0.1/16", lambda: network(vpc_cidr="10.42.0.1/16"), "vpc_cidr"),
    Row("availabilityZones", ["us-east-1a", "us-east-1a"], lambda: network(availability_zones=("us-east-1a", "us-east-1a")), "availability_zones"),
    Row("availabilityZones", ["us-east-1a"], lambda: network(availability_zones=("us-east-1a",)), "availability_zones"),
    Row("availabilityZones", ["us-west-2a", "us-west-2b"], lambda: network(availability_zones=("us-west-2a", "us-west-2b")), "availability_zones"),
    Row("natGateways", "perAZ", lambda: network(nat_mode="perAZ"), "nat_mode"),
    Row("flowLogRetentionDays", 45, lambda: network(flow_log_retention_days=45), "flow_log_retention_days"),
    Row("interfaceEndpoints", ["ecr.apii"], lambda: network(interface_endpoint_services=("ecr.apii",)), "interface_endpoint_services"),
    Row("existingVpcId", "vpc-123", lambda: existing_network(vpc_id="vpc-123"), "vpc_id", {"existingPrivateSubnetIds": list(SUBNETS.values())}),
    Row("existingPrivateSubnetIds", ["subnet-1"], lambda: existing_network(private_subnet_ids_by_az={"us-east-1a": "subnet-1"}), "private_subnet_ids_by_az",
        {"existingVpcId": "vpc-0a1b2c3d4e5f67890"}),
    # Cluster
    Row("clusterVersion", "1.29", lambda: cluster(version="1.29"), "version"),
    Row("clusterEndpointPublicAccess", True, lambda: cluster(endpoint_public_access=True), "public_access_cidrs", {"clusterPublicAccessCidrs": []}),
    Row("clusterPublicAccessCidrs", ["0.0.0.0/0"], lambda: cluster(endpoint_public_access=True, public_access_cidrs=["0.0.0.0/0"]), "public_access_cidrs"),
    Row("clusterAdminRoleArns", [], lambda: cluster(admin_role_arns=[]), "admin_role_arns"),
    Row("clusterAdminRoleArns", ["arn:aws:iam::111122223333:user/alice"], lambda: cluster(admin_role_arns=["arn:aws:iam::111122223333:user/alice"]), "admin_role_arns"),
    Row("clusterServiceCidr", "8.8.0.0/16", lambda: cluster(service_cidr="8.8.0.0/16"), "service_cidr"),
    Row("clusterServiceCidr", "172.16.0.0/11", lambda: cluster(service_cidr="172.16.0.0/11"), "service_cidr"),
    Row("clusterApiIngressCidrs", ["0.0.0.0/0"], lambda: cluster(api_ingress_cidrs=["0.0.0.0/0"]), "api_ingress_cidrs"),
    Row("clusterApiIngressCidrs", ["10.100.0.0/16", "10.100.0.0/16"], lambda: cluster(api_ingress_cidrs=["10.100.0.0/16", "10.100.0.0/16"]), "api_ingress_cidrs"),
    Row("clusterApiIngressSecurityGroupIds", ["sg-1"], lambda: cluster(api_ingress_security_groups={"sg-1": "sg-1"}), "api_ingress_security_groups"),
    Row("clusterLogRetentionDays", 45, lambda: cluster(log_retention_days=45), "log_retention_days"),
    Row("systemNodeInstanceType", "p5.48xlarge", lambda: cluster(system_node_instance_type="p5.48xlarge"), "system_node_instance_type"),
    Row("systemNodeInstanceType", "m7i", lambda: cluster(system_node_instance_type="m7i"), "system_node_instance_type"),
    Row("systemNodeCount", 1, lambda: cluster(system_node_count=1), "system_node_count"),
    Row("systemNodeCount", 11, lambda: cluster(system_node_count=11), "system_node_count"),
    Row("systemNodeDiskGiB", 10, lambda: cluster(system_node_disk_gib=10), "system_node_disk_gib"),
    Row("kubeconfigRoleArn", "arn:aws:iam::111122223333:role/other", lambda: cluster(kubeconfig_role_arn="arn:aws:iam::111122223333:role/other"), "kubeconfig_role_arn"),
    Row("clusterViewerRoleArns", ["arn:aws:iam::123456789012:role/platform-admin"],
        lambda: cluster(viewer_role_arns=[ADMIN]), "viewer_role_arns"),
    Row("clusterViewerRoleArns", ["arn:aws:iam::111122223333:user/v"], lambda: cluster(viewer_role_arns=["arn:aws:iam::111122223333:user/v"]), "viewer_role_arns"),
    # the Capacity Block and its node group
    Row("capacityReservationId", "cb-0a1b2c3d4e5f60718", lambda: looked_up("cb-0a1b2c3d4e5f60718"), "reservation_id"),
    Row("capacityReservationId", "cr-12345", lambda: node_group(reservation=None, reservation_id="cr-12345"), "reservation_id"),
    Row("gpuInstanceType", "m7i.48xlarge", lambda: node_group(instance_type="m7i.48xlarge"), "instance_type"),
    Row("gpuInstanceType", "p5.48xlarge", lambda: node_group(instance_type="p5.48xlarge"), "instance_type"),
    Row("gpuAmiReleaseVersion", "1.34.2", lambda: node_group(ami_release_version="1.34.2"), "ami_release_version"),
    Row("gpuRootVolumeGiB", 50, lambda: node_group(root_volume_gib=50), "root_volume_gib"),
    Row("gpuRootVolumeGiB", 2001, lambda: node_group(root_volume_gib=2001), "root_volume_gib"),
    Row("capacityAlertEmail", "nobody", lambda: node_group(alert_email="nobody"), "alert_email"),
    Row("capacityAlertEmail", "oncall@example.c0m", lambda: node_group(alert_email="oncall@example.c0m"), "alert_email"),
    # the GPU plugins
    Row("nvidiaDevicePluginVersion", "latest", lambda: plugins(nvidia=NvidiaDevicePluginArgs(version="latest")), "nvidia.version"),
    Row("efaDevicePluginVersion", "0.5.9", lambda: plugins(efa=EfaDevicePluginArgs(enabled=True, version="0.5.9")), "efa.version"),
    Row("dcgmExporterVersion", "latest", lambda: plugins(dcgm=DcgmExporterArgs(version="latest")), "dcgm.version"),
    # serving
    Row("replicas", 65, lambda: server(replicas=65), "replicas"),
    Row("exposure", "publc", lambda: server(exposure="publc"), "exposure"),
    Row("servingAllowedCidrs", [], lambda: server(exposure="internal", allowed_cidrs=(), vpc_cidr="10.42.0.0/16"), "allowed_cidrs", {"exposure": "internal"}),
    Row("apiKey", "plain", lambda: server(api_key="plain"), "api_key"),
    Row("huggingFaceToken", "hf_plain", lambda: server(hugging_face_token="hf_plain"), "hugging_face_token"),
    Row("weightsVerifyHasher", "md5", lambda: startup(verify_hasher="md5"), "verify_hasher"),
    # the serving front (VllmServingArgs.front): its constructor is the rule, the settings name the key through the seam
    Row("mediaInlineMiB", 600, lambda: lambda: ServingFront(inline_media_bytes=600 * 2**20), "inline_media_bytes"),
    Row("servingMaxGenerationSeconds", 0, lambda: lambda: ServingFront(max_generation_s=0), "max_generation_s"),
    Row("servingPreStopSeconds", -1, lambda: lambda: ServingFront(pre_stop_sleep_s=-1), "pre_stop_sleep_s"),
    Row("servingTerminationGraceSeconds", 5, lambda: lambda: ServingFront(termination_grace_period_s=5), "termination_grace_period_s"),
    Row("servingDrainSeconds", 100000, lambda: lambda: ServingFront(drain_s=100000), "drain_s"),
    Row("nlbIdleTimeoutSeconds", 10000, lambda: lambda: ServingFront(nlb_idle_timeout_s=10000, behind_nlb=True), "idle_timeout_s", stack_file="prod"),
    Row("pipelinedWeightsLoad", True, lambda: startup(pipelined_load=True), "pipelined_load"),  # dev: no sync sidecar
    Row("engineSnapshot", True, lambda: startup(engine_snapshot=True, warmup=True), "engine_snapshot"),  # dev: no node-local weights
    Row("peerWeightsTransfer", True, lambda: startup(peer_transfer=True), "peer_transfer"),  # dev: no node-local weights
    Row("compileCacheS3Uri", "s3://kimi-weights/cache", lambda: startup(compile_cache_s3_uri="s3://kimi-weights/cache"), "compile_cache_s3_uri", S3_WEIGHTS),
    Row("compileCacheS3Uri", "s3://kimi-weights/", lambda: startup(compile_cache_s3_uri="s3://kimi-weights/"), "compile_cache_s3_uri", S3_WEIGHTS),
    # the deploy runner
    Row("deployRunnerSourceUrl", "git@github.com:acme/kimi-k3-aws.git", lambda: deploy_runner(source_url="git@github.com:acme/kimi-k3-aws.git"), "source_url", RUNNER),
    Row("deployRunnerSourceUrl", "http://github.com/acme/kimi-k3-aws.git", lambda: deploy_runner(source_url="http://github.com/acme/kimi-k3-aws.git"), "source_url", RUNNER),
    # monitoring
    Row("monitoringNamespace", "Monitoring", lambda: monitoring(namespace="Monitoring"), "namespace"),
    Row("alertTtftP99Seconds", 601, lambda: monitoring(AlertThresholds(ttft_p99_s=601)), "ttft_p99_s"),
    Row("alertTtftP99Seconds", 0, lambda: monitoring(AlertThresholds(ttft_p99_s=0)), "ttft_p99_s"),
    Row("prometheusOperatorChartVersion", "latest", lambda: prometheus_operator(version="latest"), "version"),
    # time to serve
    Row("ecrPullThroughPrefix", "Docker_Hub", lambda: time_to_serve(pull_through_secret_arn=PULL_THROUGH_SECRET, pull_through_prefix="Docker_Hub"), "pull_through_prefix"),
    Row("ecrPullThroughPrefix", "d", lambda: time_to_serve(pull_through_secret_arn=PULL_THROUGH_SECRET, pull_through_prefix="d"), "pull_through_prefix"),
    Row("nodeCleanupImage", "local volume cleanup", lambda: time_to_serve(node_local_weights=True, node_cleanup_image="local volume cleanup"), "node_cleanup_image"),
    Row("weightsBucketName", "Kimi_Weights", lambda: weights_bucket(bucket_name="Kimi_Weights"), "bucket_name"),
    Row("weightsStagingImage", "weights staging", lambda: staging_job(image="weights staging"), "image", {"weightsStagingJob": True, **S3_WEIGHTS}),
    # the HyperPod path
    Row("hyperpodEbsVolumeGiB", 0, lambda: hyperpod_cluster(ebs_volume_size_gib=0), "ebs_volume_size_gib", stack_file="hyperpod"),
    Row("hyperpodEbsVolumeGiB", 16385, lambda: hyperpod_cluster(ebs_volume_size_gib=16385), "ebs_volume_size_gib", stack_file="hyperpod"),
)
"""A settings rule per row, with the direct call that must refuse the same bad value."""

NOT_YET_IN_THE_COMPONENT: dict[tuple[str, Any], str] = {
}
"""Rows whose component does not refuse the value yet: ``(key, value)`` -> why. Each must still fail (strict)."""

NOT_A_COMPONENT_INPUT = {
    "environment": "the stack's class (dev/prod): which rules the settings apply; no component takes it",
    "servingPlatform": "which composition the stack runs (eks/hyperpod); no component takes it",
    "availabilityZoneCount": "how many AZs the settings derive from the block's AZ; the component takes the AZs themselves",
    "efaEnabled": "a stack-wide combination (a replica spanning nodes needs EFA on the node group the server runs on): two components",
    "deployRunner": "the deploy runner's kind: the composition declares DeployRunner or not",
    "deployRunnerRoleArn": "checked against clusterAdminRoleArns: a rule between two components (Cluster, DeployRunner)",
    "deployRunnerSecretArn": "its region against aws:region: the stack's region, which DeployRunnerArgs does not take",
    "weightsKmsKeyArn": "its region against aws:region and its use with weightsSource s3: stack-wide combinations",
    "trainingPlanArn": "the HyperPod path's training plan: its rules live in kimi_k3.hyperpod (training_plans.validate_plan_ref)",
    "hyperpodClusterName": "the HyperPod path: its rule lives in kimi_k3.hyperpod.rules.check_names",
    "gpuMemoryUtilization": "a ServingContract field (the contract owns the rule; settings parse the decimal)",
    "decodeContextParallel": "a ServingContract field refused against the stack's engine recipe",
    "pipelineParallelSize": "a ServingContract field (the contract owns the rule)",
    "servingImage": "a ServingContract field (ImageContract owns the rule; prod's digest pin is the stack's environment)",
    "weightsS3Uri": "a ServingContract field (WeightsContract owns the rule; prod's pinned prefix is the stack's environment)",
    "weightsSha256Manifest": "a ServingContract field, refused on the HyperPod path only",
    "servingEnv": "a ServingContract field (EngineProfile.env owns the managed-name rule; settings refuse credentials in plain text)",
    "servingExtraRoutes": "the API proxy's rule (check_extra_route) names the arg through the seam",
    "routerImage": "the routing tier's rule (ConversationRouting) names the arg through the seam",
    "routerPreStopSeconds": "the routing tier's stop sequence (DrainPlan) names the arg through the seam",
    "prometheusSelectorLabels": "parsed from key=value strings by the settings; the components take a mapping",
    "dockerHubPullThroughSecretArn": "its region against aws:region: a stack-wide combination (weights.image_pull)",
    "fastImagePull": "against gpuAmiReleaseVersion: weights.image_pull.check_fast_image_pull owns the rule",
    "nodeLocalWeights": "against weightsSource and the GPU type: a stack-wide combination",
    "weightsSource": "a ServingContract field (WeightsContract owns the rule)",
    "weightsStagingJob": "against weightsSource: a stack-wide combination",
    "weightsSyncSidecar": "against weightsSource and pipelineParallelSize: a stack-wide combination (ServingStartup.sync_sidecar is a switch)",
    "engineSnapshotAgentImage": "required with engineSnapshot and pinned by digest in prod: the stack's environment (SnapshotAgentArgs refuses a tag without allow_floating_tag)",
}
"""Keys a settings rule refuses that feed no public component arg of the EKS path's core (or whose rule is owned elsewhere), and why."""


PULL_THROUGH_SECRET = "arn:aws:secretsmanager:us-east-1:111122223333:secret:ecr-pullthroughcache/docker-hub-Ab1Cd2"
"""A Docker Hub credentials secret of the pull-through rule (the prefix is checked only with a rule)."""


def test_every_key_a_settings_rule_refuses_has_a_row_or_a_reason():
    covered = {row.key for row in ROWS} | set(NOT_A_COMPONENT_INPUT)
    assert sorted(settings_rule_keys() - covered) == []
    assert not {row.key for row in ROWS} & set(NOT_A_COMPONENT_INPUT)
    assert sorted(({row.key for row in ROWS} | set(NOT_A_COMPONENT_INPUT)) - settings_rule_keys()) == []  # the walk sees every key listed here


def _ids(row: Row) -> str:
    return f"{row.key}={row.value!r}"


@pytest.mark.parametrize("row", ROWS, ids=_ids)
def test_the_stack_refuses_the_value_naming_the_key(row):
    config = stack_config(row.stack_file, **{row.key: row.value, **row.stack})
    secrets = {"kimi-k3:apiKey"} - ({"kimi-k3:apiKey"} if row.key == "apiKey" else set())
    with pytest.raises(SettingsError) as caught:
        settings.from_values(config, secrets, stack=row.stack_file)
    assert caught.value.key == f"kimi-k3:{row.key}" or (row.key == "clusterEndpointPublicAccess" and caught.value.key == "kimi-k3:clusterPublicAccessCidrs"), str(caught.value)


@pytest.mark.parametrize("row", ROWS, ids=_ids)
def test_the_component_called_directly_refuses_the_same_value_naming_its_arg(row, request):
    if (row.key, _frozen(row.value)) in NOT_YET_IN_THE_COMPONENT:
        request.applymarker(pytest.mark.xfail(strict=True, reason=NOT_YET_IN_THE_COMPONENT[(row.key, _frozen(row.value))]))
    engine = offline.OfflineEngine(now=NOW)
    with pytest.raises(UserError) as caught:
        engine.run(lambda: row.direct()())
    assert [r.type for r in engine.resources if not r.type.startswith("pulumi:providers:")] == []  # refused before declaring anything (the providers are the caller's)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    assert f"{row.arg} " in message or f"{row.arg}[" in message or f"{row.arg}:" in message, message


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
