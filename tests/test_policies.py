"""The kimi-k3-guardrails policy pack: each rule on good and bad resources, and on the stacks.

Resources come from the offline engine (the program really declares them with the
SDKs' typed Args); each policy's ``validate`` gets ``ResourceValidationArgs`` built
the way the analyzer builds them (:func:`kimi_k3.guardrails.verdict.policy_args`:
``deserialize_properties`` + the unknown-checking proxy over the registered inputs,
camelCase wire names, numbers as floats). ``PolicyPack`` itself is never constructed
here (it would start a gRPC server).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from typing import Any

import jsonschema
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s
import pytest
import yaml
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy
from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE, UNKNOWN_STRING_VALUE

from kimi_k3 import offline
from kimi_k3.guardrails import rules as g
from kimi_k3.guardrails.verdict import PolicyCheck, policy_args, resolve_policy_config, run_policy
from tests.conftest import NOW, ROOT

POLICY_DIR = ROOT / "policy"
CR_ID = "cr-0a1b2c3d4e5f60718"
DIGEST_IMAGE = "vllm/vllm-openai@sha256:" + "9b" * 32
TAG_IMAGE = "vllm/vllm-openai:kimi-k3"
ROLE = "arn:aws:iam::123456789012:role/node"
KMS = "arn:aws:kms:us-east-1:123456789012:key/0b5f9d4e-1111-2222-3333-444455556666"
SUBNETS = ["subnet-0aaa", "subnet-0bbb"]
ALL_LOGS = list(g.CONTROL_PLANE_LOG_TYPES)


# --- harness -------------------------------------------------------------------------


def violations(policy: ResourceValidationPolicy, resource: offline.RecordedResource, config: Mapping[str, Any] | None = None) -> list[str]:
    """Messages ``policy`` reports for one recorded resource."""
    return run_policy(policy, policy_args(resource.type, resource.inputs, resource.name, config, resource.urn))


def _lt(name: str, **changes: Any) -> aws.ec2.LaunchTemplate:
    """A capacity-block launch template as the library builds it; ``changes`` override its args."""
    values: dict[str, Any] = dict(
        instance_type="p6-b300.48xlarge",
        instance_market_options=aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block"),
        capacity_reservation_specification=aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=CR_ID
            )
        ),
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1),
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/xvda",
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(volume_size=200, volume_type="gp3", encrypted="true"),
            ),
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(device_name="/dev/sdb", virtual_name="ephemeral0"),
        ],
    )
    values.update(changes)
    return aws.ec2.LaunchTemplate(name, **values)


def _node_group(name: str, lt: aws.ec2.LaunchTemplate | None, **changes: Any) -> aws.eks.NodeGroup:
    values: dict[str, Any] = dict(
        cluster_name="kimi-k3",
        node_role_arn=ROLE,
        subnet_ids=SUBNETS[:1],
        capacity_type="CAPACITY_BLOCK",
        ami_type="AL2023_x86_64_NVIDIA",
        scaling_config=aws.eks.NodeGroupScalingConfigArgs(min_size=0, max_size=2, desired_size=0),
        launch_template=aws.eks.NodeGroupLaunchTemplateArgs(id=lt.id, version=lt.latest_version.apply(str)) if lt else None,
    )
    values.update(changes)
    return aws.eks.NodeGroup(name, **values)


def _pod_spec(image: str = DIGEST_IMAGE, gpus: tuple[Any, Any] | None = (8, 8), host_network: bool | None = None, privileged: bool | None = None) -> k8s.core.v1.PodSpecArgs:
    requests, limits = gpus or (None, None)
    resources = k8s.core.v1.ResourceRequirementsArgs(
        requests={"cpu": "16", **({"nvidia.com/gpu": str(requests)} if requests is not None else {})},
        limits={**({"nvidia.com/gpu": str(limits)} if limits is not None else {})},
    )
    return k8s.core.v1.PodSpecArgs(
        host_network=host_network,
        containers=[
            k8s.core.v1.ContainerArgs(
                name="vllm",
                image=image,
                resources=resources,
                security_context=k8s.core.v1.SecurityContextArgs(privileged=privileged) if privileged is not None else None,
            )
        ],
    )


def _deployment(name: str, namespace: str = "serving", **pod: Any) -> k8s.apps.v1.Deployment:
    labels = {"app": name}
    return k8s.apps.v1.Deployment(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=namespace),
        spec=k8s.apps.v1.DeploymentSpecArgs(
            selector=k8s.meta.v1.LabelSelectorArgs(match_labels=labels),
            template=k8s.core.v1.PodTemplateSpecArgs(metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels), spec=_pod_spec(**pod)),
        ),
    )


def _lws(name: str, worker_image: str) -> k8s.apiextensions.CustomResource:
    def template(image: str) -> dict:
        return {"metadata": {"labels": {"app": name}}, "spec": _pod_spec(image=image)}

    return k8s.apiextensions.CustomResource(
        name,
        api_version="leaderworkerset.x-k8s.io/v1",
        kind="LeaderWorkerSet",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace="serving"),
        spec={
            "replicas": 1,
            "leaderWorkerTemplate": {"size": 2, "leaderTemplate": template(DIGEST_IMAGE), "workerTemplate": template(worker_image)},
        },
    )


def _service(name: str, ranges: list[str] | None) -> k8s.core.v1.Service:
    return k8s.core.v1.Service(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace="serving"),
        spec=k8s.core.v1.ServiceSpecArgs(
            type="LoadBalancer",
            selector={"app": "vllm"},
            ports=[k8s.core.v1.ServicePortArgs(name="http", port=8000, target_port=8000)],
            load_balancer_source_ranges=ranges,
        ),
    )


def _eks(name: str, **changes: Any) -> eks.Cluster:
    """A ``pulumi_eks`` cluster named ``name`` in the test VPC's private subnets; ``changes`` add to its args."""
    return eks.Cluster(name, eks.ClusterArgs(name=name, vpc_id="vpc-0abc", private_subnet_ids=SUBNETS, **changes))


def _aws_eks(name: str, *, public: bool, cidrs: list[str] | None, logs: list[str], key: str | None) -> aws.eks.Cluster:
    return aws.eks.Cluster(
        name,
        role_arn=ROLE,
        vpc_config=aws.eks.ClusterVpcConfigArgs(subnet_ids=SUBNETS, endpoint_private_access=True, endpoint_public_access=public, public_access_cidrs=cidrs),
        enabled_cluster_log_types=logs,
        encryption_config=aws.eks.ClusterEncryptionConfigArgs(provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=key), resources=["secrets"]) if key else None,
    )


def _declare() -> None:
    """Good ('ok-') and bad ('bad-') resources for every rule, declared through the typed SDKs."""
    ok_lt = _lt("ok-lt")
    _node_group("ok-ng", ok_lt)
    _node_group("bad-ng-instance-types", ok_lt, instance_types=["p6-b300.48xlarge"])
    _node_group("bad-ng-no-launch-template", None)
    _node_group("bad-ng-ami", ok_lt, ami_type="AL2_x86_64_GPU")
    _node_group("bad-ng-max-size", ok_lt, scaling_config=aws.eks.NodeGroupScalingConfigArgs(min_size=0, max_size=0, desired_size=0))
    _node_group("ok-ng-on-demand", None, capacity_type="ON_DEMAND", instance_types=["m7i.xlarge"], ami_type="AL2023_x86_64_STANDARD")
    _lt(
        "bad-lt-reservation",
        capacity_reservation_specification=aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(capacity_reservation_id="cr-123")
        ),
    )
    _lt("bad-lt-placement", placement=aws.ec2.LaunchTemplatePlacementArgs(group_name="kimi-k3-cluster-pg"))
    _lt("bad-lt-no-instance-type", instance_type=None)
    _lt("bad-lt-imds", metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(http_tokens="optional", http_put_response_hop_limit=2))
    _lt("bad-lt-no-metadata-options", metadata_options=None)
    _lt(
        "bad-lt-ebs",
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(device_name="/dev/xvda", ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(volume_size=200, encrypted="false"))
        ],
    )
    aws.ec2.PlacementGroup("ok-pg", strategy="spread")
    aws.ec2.PlacementGroup("bad-pg", strategy="cluster")

    hardened = dict(enabled_cluster_log_types=ALL_LOGS, encryption_config_key_arn=KMS, skip_default_node_group=True)
    _eks("ok-eks", endpoint_private_access=True, endpoint_public_access=False, **hardened)
    _eks("ok-eks-public-restricted", endpoint_public_access=True, public_access_cidrs=["203.0.113.0/24"], **hardened)
    _eks("bad-eks-world", endpoint_public_access=True, public_access_cidrs=["0.0.0.0/0"], enabled_cluster_log_types=["api", "audit"])
    _eks("bad-eks-defaults")
    _aws_eks("ok-aws-eks", public=True, cidrs=["203.0.113.0/24"], logs=ALL_LOGS, key=KMS)
    _aws_eks("bad-aws-eks", public=True, cidrs=["10.0.0.0/8", "0.0.0.0/0"], logs=["api"], key=None)

    _deployment("ok-deploy")
    _deployment("bad-deploy-gpu-mismatch", gpus=(8, 4))
    _deployment("bad-deploy-gpu-request-only", gpus=(8, None))
    _deployment("ok-deploy-gpu-limit-only", gpus=(None, 8))
    _deployment("bad-deploy-tag", image=TAG_IMAGE)
    _deployment("bad-deploy-host-network", namespace="default", host_network=True)
    _deployment("bad-deploy-privileged", privileged=True)
    plugin_labels = {"app": "plugin"}
    k8s.apps.v1.DaemonSet(
        "ok-plugin-daemonset",
        metadata=k8s.meta.v1.ObjectMetaArgs(name="ok-plugin-daemonset", namespace="gpu-plugins"),
        spec=k8s.apps.v1.DaemonSetSpecArgs(
            selector=k8s.meta.v1.LabelSelectorArgs(match_labels=plugin_labels),
            template=k8s.core.v1.PodTemplateSpecArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(labels=plugin_labels),
                spec=_pod_spec(image="nvcr.io/nvidia/k8s-device-plugin:v0.20.0", gpus=None, host_network=True, privileged=True),
            ),
        ),
    )
    k8s.apps.v1.StatefulSet(
        "bad-sts-tag",
        metadata=k8s.meta.v1.ObjectMetaArgs(name="bad-sts-tag", namespace="serving"),
        spec=k8s.apps.v1.StatefulSetSpecArgs(
            service_name="x",
            selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"app": "x"}),
            template=k8s.core.v1.PodTemplateSpecArgs(metadata=k8s.meta.v1.ObjectMetaArgs(labels={"app": "x"}), spec=_pod_spec(image="busybox:1.37")),
        ),
    )
    _lws("ok-lws", DIGEST_IMAGE)
    _lws("bad-lws-tag", TAG_IMAGE)
    _service("ok-svc", ["10.0.0.0/8"])
    _service("bad-svc-no-ranges", None)
    _service("bad-svc-world", ["10.0.0.0/8", "0.0.0.0/0"])
    k8s.core.v1.Service(
        "ok-svc-cluster-ip",
        metadata=k8s.meta.v1.ObjectMetaArgs(name="ok-svc-cluster-ip", namespace="serving"),
        spec=k8s.core.v1.ServiceSpecArgs(selector={"app": "vllm"}, ports=[k8s.core.v1.ServicePortArgs(port=8000)]),
    )


@pytest.fixture(scope="module")
def declared() -> offline.PlanResult:
    """Everything :func:`_declare` registered, captured by the offline engine."""
    reservation = offline.ReservationFixture(id=CR_ID, availability_zone="us-east-1a", instance_count=2, start=NOW)
    # Deliberately broken resources for the policy pack: the engine's apply-time rules would stop them first.
    return offline.OfflineEngine(now=NOW, region="us-east-1", reservation=reservation, apply_time_rules=False).run(_declare)


def _resource(plan: offline.PlanResult, name: str) -> offline.RecordedResource:
    found = [r for r in plan.resources if r.name == name]
    assert len(found) == 1, name
    return found[0]


# --- every rule: a good case and a bad case ------------------------------------------

CASES = [
    # (policy, good resources, bad resource, what the message must say)
    (g.capacity_block_node_group, ["ok-ng", "ok-ng-on-demand"], "bad-ng-instance-types", "remove instance_types"),
    (g.capacity_block_node_group, ["ok-ng"], "bad-ng-no-launch-template", "without a launch template"),
    (g.capacity_block_node_group, ["ok-ng"], "bad-ng-ami", "AL2023_x86_64_NVIDIA"),
    (g.capacity_block_node_group, ["ok-ng"], "bad-ng-max-size", "scalingConfig.maxSize 0"),
    (g.capacity_block_launch_template, ["ok-lt", "bad-lt-imds"], "bad-lt-reservation", "'cr-123'"),
    (g.capacity_block_launch_template, ["ok-lt"], "bad-lt-placement", "placement.groupName 'kimi-k3-cluster-pg'"),
    (g.capacity_block_launch_template, ["ok-lt"], "bad-lt-no-instance-type", "set instance_type on the launch template"),
    (g.launch_template_imdsv2, ["ok-lt"], "bad-lt-imds", "httpTokens is 'optional' and httpPutResponseHopLimit is 2"),
    (g.launch_template_imdsv2, ["ok-lt"], "bad-lt-no-metadata-options", "httpTokens is None"),
    (g.launch_template_ebs_encrypted, ["ok-lt"], "bad-lt-ebs", "EBS volume '/dev/xvda' is not encrypted"),
    (g.no_cluster_placement_group, ["ok-pg"], "bad-pg", "strategy 'cluster'"),
    (g.eks_endpoint_not_world_open, ["ok-eks", "ok-eks-public-restricted"], "bad-eks-world", "publicAccessCidrs includes 0.0.0.0/0"),
    (g.eks_endpoint_not_world_open, ["ok-eks"], "bad-eks-defaults", "publicAccessCidrs is empty"),
    (g.eks_endpoint_not_world_open, ["ok-aws-eks"], "bad-aws-eks", "publicAccessCidrs includes 0.0.0.0/0"),
    (g.eks_control_plane_logging, ["ok-eks", "ok-aws-eks"], "bad-eks-world", "authenticator, controllerManager, scheduler"),
    (g.eks_control_plane_logging, ["ok-aws-eks"], "bad-aws-eks", "audit, authenticator"),
    (g.eks_secrets_encryption, ["ok-eks", "ok-aws-eks"], "bad-eks-defaults", "encryption_config_key_arn"),
    (g.eks_secrets_encryption, ["ok-aws-eks"], "bad-aws-eks", "no secrets encryption"),
    (g.k8s_gpu_requests_equal_limits, ["ok-deploy", "ok-deploy-gpu-limit-only", "ok-lws"], "bad-deploy-gpu-mismatch", "requests='8' limits='4'"),
    (g.k8s_gpu_requests_equal_limits, ["ok-deploy"], "bad-deploy-gpu-request-only", "limits=None"),
    (g.k8s_images_pinned_by_digest, ["ok-deploy", "ok-lws", "ok-plugin-daemonset"], "bad-deploy-tag", f"image '{TAG_IMAGE}' is not pinned"),
    (g.k8s_images_pinned_by_digest, ["ok-lws"], "bad-lws-tag", "leaderWorkerTemplate.workerTemplate.spec.containers[vllm]"),
    (g.k8s_images_pinned_by_digest, ["ok-deploy"], "bad-sts-tag", "'serving/bad-sts-tag'"),
    (g.k8s_no_host_network_or_privileged, ["ok-deploy", "ok-plugin-daemonset"], "bad-deploy-host-network", "'default/bad-deploy-host-network' spec.template.spec.hostNetwork"),
    (g.k8s_no_host_network_or_privileged, ["ok-deploy"], "bad-deploy-privileged", "containers[vllm] is privileged"),
    (g.k8s_load_balancer_source_ranges, ["ok-svc", "ok-svc-cluster-ip"], "bad-svc-no-ranges", "without loadBalancerSourceRanges"),
    (g.k8s_load_balancer_source_ranges, ["ok-svc"], "bad-svc-world", "admits 0.0.0.0/0"),
]


@pytest.mark.parametrize(("policy", "good", "bad", "expected"), CASES, ids=[f"{c[0].name}:{c[2]}" for c in CASES])
def test_rule_passes_good_and_reports_bad(declared, policy, good, bad, expected):
    for name in good:
        assert violations(policy, _resource(declared, name)) == [], name
    found = violations(policy, _resource(declared, bad))
    assert len(found) == 1, found
    assert expected in found[0]
    assert f"'{bad}'" in found[0] or f"/{bad}'" in found[0]  # names the resource
    assert "Fix:" in found[0]  # and says how to fix it


def test_every_policy_has_a_case_and_metadata():
    covered = {c[0].name for c in CASES}
    assert covered == {p.name for p in g.ALL_POLICIES}
    assert len({p.name for p in g.ALL_POLICIES}) == len(g.ALL_POLICIES)
    for policy in g.ALL_POLICIES:
        assert re.fullmatch(r"[a-z0-9-]+", policy.name) and policy.description and policy.enforcement_level is not None
    mandatory = {p.name for p in g.ALL_POLICIES if p.enforcement_level == EnforcementLevel.MANDATORY}
    # what fails `pulumi up` late or opens the cluster is mandatory
    assert {"capacity-block-node-group", "capacity-block-launch-template", "launch-template-imdsv2", "eks-endpoint-not-world-open", "k8s-gpu-requests-equal-limits", "k8s-load-balancer-source-ranges"} <= mandatory
    assert {"no-cluster-placement-group", "eks-control-plane-logging"}.isdisjoint(mandatory)


def test_a_bad_node_group_reports_every_problem(declared):
    resource = _resource(declared, "bad-ng-max-size")
    props = dict(offline.reveal(resource.inputs), instanceTypes=["p6-b300.48xlarge"], amiType="AL2023_x86_64_STANDARD")
    props.pop("launchTemplate")
    found: list[str] = []
    g.capacity_block_node_group.validate(policy_args(g.NODE_GROUP, props, "ng"), lambda m, urn=None: found.append(m))
    assert len(found) == 4


# --- config -------------------------------------------------------------------------


def test_digest_rule_is_on_by_default_and_off_by_config(declared):
    tagged = _resource(declared, "bad-deploy-tag")
    assert violations(g.k8s_images_pinned_by_digest, tagged, config={}) != []
    assert violations(g.k8s_images_pinned_by_digest, tagged, config={"requireDigestPinnedImages": True}) != []
    assert violations(g.k8s_images_pinned_by_digest, tagged, config={"requireDigestPinnedImages": False}) == []


def test_privileged_namespaces_are_configurable(declared):
    host_network = _resource(declared, "bad-deploy-host-network")
    plugin = _resource(declared, "ok-plugin-daemonset")
    assert violations(g.k8s_no_host_network_or_privileged, host_network, config={"allowedNamespaces": ["default"]}) == []
    found = violations(g.k8s_no_host_network_or_privileged, plugin, config={"allowedNamespaces": ["kube-system"]})
    assert len(found) == 2 and "allowedNamespaces: ['kube-system']" in found[0]


def test_world_open_load_balancer_only_when_allowed(declared):
    world = _resource(declared, "bad-svc-world")
    assert violations(g.k8s_load_balancer_source_ranges, world, config={"allowWorldOpenLoadBalancers": True}) == []
    # an empty list stays refused even then: it is an accident, not a decision
    assert violations(g.k8s_load_balancer_source_ranges, _resource(declared, "bad-svc-no-ranges"), config={"allowWorldOpenLoadBalancers": True}) != []


# --- preview: unknown values -----------------------------------------------------------


def test_unknown_values_during_preview_are_not_violations(declared):
    """During preview ids of resources not yet created are unknown; rules must not misreport them."""
    ng = offline.reveal(_resource(declared, "ok-ng").inputs)
    ng["launchTemplate"] = {"id": UNKNOWN_STRING_VALUE, "version": UNKNOWN_STRING_VALUE}
    ng["scalingConfig"]["maxSize"] = UNKNOWN_NUMBER_VALUE
    lt = offline.reveal(_resource(declared, "ok-lt").inputs)
    lt["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] = UNKNOWN_STRING_VALUE
    lt["instanceType"] = UNKNOWN_STRING_VALUE
    for policy, type_, props in ((g.capacity_block_node_group, g.NODE_GROUP, ng), (g.capacity_block_launch_template, g.LAUNCH_TEMPLATE, lt)):
        found: list[str] = []
        policy.validate(policy_args(type_, props), lambda m, urn=None, found=found: found.append(m))
        assert found == [], policy.name


# --- the pack's files ------------------------------------------------------------------


def _stack_policy_config(stack: str) -> dict[str, Any]:
    return json.loads((POLICY_DIR / "config" / f"{stack}.json").read_text())


def effective(document: Mapping[str, Any], policy: ResourceValidationPolicy) -> tuple[EnforcementLevel, dict[str, Any]]:
    """Enforcement level and config of one policy under a ``--policy-pack-config`` document, as the engine resolves them."""
    setting = resolve_policy_config(document, "test")[0][policy.name]
    return setting.level, dict(setting.properties)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_policy_config_files_are_valid(stack):
    document = _stack_policy_config(stack)
    by_name = {p.name: p for p in g.ALL_POLICIES}
    levels = [e.value for e in EnforcementLevel]
    for key, entry in document.items():
        assert key == "all" or key in by_name, key
        if isinstance(entry, str):
            assert entry in levels
            continue
        policy = by_name[key]
        schema = {
            "type": "object",
            "properties": {"enforcementLevel": {"enum": levels}, **(policy.config_schema.properties if policy.config_schema else {})},
            "additionalProperties": False,
        }
        jsonschema.validate(entry, schema)
    assert effective(document, g.k8s_images_pinned_by_digest)[1]["requireDigestPinnedImages"] is (stack == "prod")


def test_pack_files():
    manifest = yaml.safe_load((POLICY_DIR / "PulumiPolicy.yaml").read_text())
    assert manifest["runtime"] == {"name": "python", "options": {"virtualenv": "../.venv"}}
    assert (POLICY_DIR / manifest["runtime"]["options"]["virtualenv"]).resolve() == (ROOT / ".venv").resolve()
    main = (POLICY_DIR / "__main__.py").read_text()
    assert "PolicyPack(name=PACK_NAME" in main and "policies: list[Policy] = list(ALL_POLICIES)" in main
    assert g.PACK_NAME == "kimi-k3-guardrails"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = {line.split("==")[0]: line for line in pyproject["project"]["dependencies"] + pyproject["project"]["optional-dependencies"]["test"]}
    for line in (POLICY_DIR / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert pins[line.split("==")[0]] == line.strip()


# --- the stacks --------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stacks_have_no_mandatory_violations(stack, request):
    """Every policy over every resource of the stack's offline plan, with the stack's policy config."""
    plan: offline.PlanResult = request.getfixturevalue(f"{stack}_plan")
    verdict = PolicyCheck.from_file(POLICY_DIR / "config" / f"{stack}.json").verdict(plan.resources)
    assert verdict.mandatory == () and verdict.passed


def test_main_builds_the_pack_from_all_policies(monkeypatch):
    """The CLI runs policy/ as a program (runpy on the directory); it builds the pack from the package's rules."""
    import runpy
    import sys

    import pulumi_policy

    built: dict[str, Any] = {}
    monkeypatch.setattr(pulumi_policy, "PolicyPack", lambda **kwargs: built.update(kwargs))  # the real one serves forever
    monkeypatch.setattr(sys, "path", list(sys.path))
    runpy.run_path(str(POLICY_DIR), run_name="__main__")
    assert built["name"] == "kimi-k3-guardrails"
    assert [p.name for p in built["policies"]] == [p.name for p in g.ALL_POLICIES]
    assert built["enforcement_level"] == EnforcementLevel.MANDATORY
