"""Stack settings: every user mistake ends with one message naming key, value and what is accepted."""

from __future__ import annotations

import json

import pytest

from kimi_k3.errors import SettingsError
from kimi_k3.serving.contracts import parse_image_reference
from kimi_k3.stack import settings
from kimi_k3.stack.config_keys import CONFIG_KEYS
from tests.builders import DIGEST
from tests.builders import load_stack_settings as load
from tests.builders import stack_config as base
from tests.conftest import ROOT


def test_committed_stacks_load():
    dev, prod = settings.load_stack("dev"), settings.load_stack("prod")
    assert (dev.environment, prod.environment) == ("dev", "prod")
    assert dev.capacity.instance_type == prod.capacity.instance_type == "p6-b300.48xlarge"
    assert prod.serving.contract.image.pinned and not prod.cluster.endpoint_public_access
    assert prod.nodes_required == 2 and dev.nodes_required == 1


def test_settings_are_immutable():
    s = load()
    with pytest.raises(AttributeError):
        s.region = "eu-west-1"  # type: ignore[misc]


def test_secure_entries_become_marked_placeholders_and_stay_secret():
    values, secret_keys = settings.read_stack_file("dev")
    assert "kimi-k3:apiKey" in secret_keys
    assert values["kimi-k3:apiKey"].startswith(settings.SECRET_PLACEHOLDER_PREFIX)
    s = settings.load_stack("dev")
    assert s.serving.api_key.placeholder
    assert "offline" not in repr(s) and "placeholder-for" not in repr(s.serving)


def test_defaults_apply_for_unset_keys():
    # Unset engine keys take the engine profile's values (the recipe's Blackwell single-node profile on p6-b300).
    s = load(maxModelLen=None, kvCacheDtype=None)
    assert CONFIG_KEYS["maxModelLen"].default == 0 and CONFIG_KEYS["kvCacheDtype"].default == ""
    assert s.serving.contract.engine.max_model_len == 1_048_576
    assert s.serving.contract.engine.kv_cache_dtype == "fp8"
    assert s.serving.contract.engine.profile_name == "blackwell/single_node_tp"


def test_floating_tag_is_a_warning_outside_prod():
    s = load(servingImage="vllm/vllm-openai:kimi-k3")
    assert any("floating tag" in w for w in s.warnings)


def test_digest_pinned_image_parses():
    s = load(servingImage=f"123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-openai@{DIGEST}")
    assert s.serving.contract.image.pinned and s.serving.contract.image.digest == DIGEST and not s.warnings


BAD_VALUES = [
    # (changes, key named in the message, words of the accepted part)
    ({"kimi-k3:vpcCidrs": "10.0.0.0/16"}, "kimi-k3:vpcCidrs", "did you mean kimi-k3:vpcCidr"),
    ({"environment": "production"}, "kimi-k3:environment", "dev, prod"),
    ({"environment": None}, "kimi-k3:environment", "required"),
    ({"aws:region": None}, "aws:region", "required"),
    ({"aws:region": "us-east"}, "aws:region", "AWS region name"),
    ({"aws:region": "US-EAST-1"}, "aws:region", "AWS region name"),
    ({"capacityReservationId": "cr-123"}, "kimi-k3:capacityReservationId", "17 lowercase hex"),
    ({"capacityReservationId": "cr-0A1B2C3D4E5F60718"}, "kimi-k3:capacityReservationId", "17 lowercase hex"),
    ({"capacityReservationId": "cr-0a1b2c3d4e5f60718\n"}, "kimi-k3:capacityReservationId", "17 lowercase hex"),
    ({"modelRevision": "3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20\n"}, "kimi-k3:modelRevision", "40-hex commit SHA"),
    ({"capacityReservationId": None}, "kimi-k3:capacityReservationId", "required"),
    ({"gpuInstanceType": "m7i.48xlarge"}, "kimi-k3:gpuInstanceType", "not a GPU instance type"),
    ({"gpuInstanceType": "p9-z900.48xlarge"}, "kimi-k3:gpuInstanceType", "unknown instance type"),
    ({"vpcCidr": "10.42.0.0/33"}, "kimi-k3:vpcCidr", "IPv4 CIDR"),
    ({"vpcCidr": "10.42.0.1/16"}, "kimi-k3:vpcCidr", "IPv4 CIDR"),
    ({"vpcCidr": "8.8.0.0/16"}, "kimi-k3:vpcCidr", "private RFC 1918"),
    ({"vpcCidr": "10.42.0.0/22"}, "kimi-k3:vpcCidr", "too small for 2 AZs"),
    ({"vpcCidr": "10.42.0.0/21", "availabilityZoneCount": 3}, "kimi-k3:vpcCidr", "too small for 3 AZs"),
    ({"clusterServiceCidr": "10.42.128.0/20"}, "kimi-k3:clusterServiceCidr", "must not overlap"),
    ({"clusterPublicAccessCidrs": ["0.0.0.0/0"]}, "kimi-k3:clusterPublicAccessCidrs", "0.0.0.0/0"),
    ({"clusterPublicAccessCidrs": []}, "kimi-k3:clusterPublicAccessCidrs", "required when clusterEndpointPublicAccess"),
    ({"clusterPublicAccessCidrs": ["203.0.113.0/33"]}, "kimi-k3:clusterPublicAccessCidrs", "IPv4 CIDR"),
    ({"clusterAdminRoleArns": ["arn:aws:iam::12345:role/admin"]}, "kimi-k3:clusterAdminRoleArns", "IAM role ARNs"),
    ({"clusterAdminRoleArns": ["arn:aws:iam::123456789012:user/alice"]}, "kimi-k3:clusterAdminRoleArns", "IAM role ARNs"),
    ({"clusterAdminRoleArns": []}, "kimi-k3:clusterAdminRoleArns", "at least one IAM role ARN"),
    ({"clusterAdminRoleArns": None}, "kimi-k3:clusterAdminRoleArns", "required"),
    ({"clusterVersion": "1.3"}, "kimi-k3:clusterVersion", "1.33, 1.34, 1.35"),
    ({"availabilityZones": ["us-west-2a", "us-west-2b"]}, "kimi-k3:availabilityZones", "AZ names of region us-east-1"),
    ({"availabilityZones": ["us-east-1a"]}, "kimi-k3:availabilityZones", "at least 2 AZs"),
    ({"availabilityZoneCount": 7}, "kimi-k3:availabilityZoneCount", "2 to 4"),
    ({"availabilityZoneCount": "two"}, "kimi-k3:availabilityZoneCount", "whole number"),
    ({"efaEnabled": "yes"}, "kimi-k3:efaEnabled", "true or false"),
    ({"clusterAdminRoleArns": "arn:aws:iam::123456789012:role/admin"}, "kimi-k3:clusterAdminRoleArns", "list of strings"),
    ({"natGateways": "none"}, "kimi-k3:natGateways", "single, perAz"),
    ({"flowLogRetentionDays": 10}, "kimi-k3:flowLogRetentionDays", "accepted: 1, 3, 5"),
    ({"tensorParallelSize": 4}, "kimi-k3:tensorParallelSize", "must equal the GPUs of one p6-b300.48xlarge node (8)"),
    ({"gpuInstanceType": "p5en.48xlarge", "efaEnabled": True}, "kimi-k3:pipelineParallelSize", "at least 2 p5en.48xlarge nodes"),
    ({"gpuInstanceType": "p5en.48xlarge", "pipelineParallelSize": 2}, "kimi-k3:efaEnabled", "must be true when a replica spans 2 nodes"),
    ({"gpuMemoryUtilization": "high"}, "kimi-k3:gpuMemoryUtilization", "decimal between 0.50 and 0.98"),
    ({"gpuMemoryUtilization": "0.99"}, "kimi-k3:gpuMemoryUtilization", "0.5 to 0.98"),
    ({"maxModelLen": 2_000_000}, "kimi-k3:maxModelLen", "1024 to 1048576"),
    ({"kvCacheDtype": "int4"}, "kimi-k3:kvCacheDtype", "auto, fp8"),
    ({"vllmExtraArgs": ["--tensor-parallel-size=4"]}, "kimi-k3:vllmExtraArgs", "set by the contract (tensorParallelSize)"),
    ({"modelRevision": "main"}, "kimi-k3:modelRevision", "40-hex commit SHA"),
    ({"modelId": "Kimi-K3"}, "kimi-k3:modelId", "Hugging Face model id"),
    ({"weightsSource": "s3"}, "kimi-k3:weightsS3Uri", "required when weightsSource is s3"),
    ({"weightsSource": "s3", "weightsS3Uri": "s3://bucket/*"}, "kimi-k3:weightsS3Uri", "s3://bucket/prefix/"),
    ({"weightsSource": "s3", "weightsS3Uri": "s3://bucket/models*/"}, "kimi-k3:weightsS3Uri", "no wildcards"),
    ({"weightsS3Uri": "s3://bucket/prefix/"}, "kimi-k3:weightsS3Uri", "only used when weightsSource is s3"),
    ({"weightsSource": "gcs"}, "kimi-k3:weightsSource", "huggingface, s3"),
    ({"servingImage": "vllm/vllm-openai"}, "kimi-k3:servingImage", "repo@sha256"),
    ({"exposure": "public"}, "kimi-k3:servingAllowedCidrs", "required when exposure is public"),
    ({"exposure": "everywhere"}, "kimi-k3:exposure", "cluster, internal, public"),
    ({"engineReadyTimeoutSeconds": 60}, "kimi-k3:engineReadyTimeoutSeconds", "600 to 10800"),
    ({"efaDevicePluginVersion": "0.5.6"}, "kimi-k3:efaDevicePluginVersion", "0.5.10 or newer"),
    ({"nvidiaDevicePluginVersion": "latest"}, "kimi-k3:nvidiaDevicePluginVersion", "chart version"),
    ({"capacityAlertEmail": "oncall"}, "kimi-k3:capacityAlertEmail", "e-mail address"),
    ({"systemNodeInstanceType": "p5.48xlarge"}, "kimi-k3:systemNodeInstanceType", "CPU instance type"),
    ({"gpuAmiReleaseVersion": "latest"}, "kimi-k3:gpuAmiReleaseVersion", "AMI release version"),
    ({"existingPrivateSubnetIds": ["subnet-0a1b2c3d4e5f67890"]}, "kimi-k3:existingPrivateSubnetIds", "only used together with existingVpcId"),
    ({"existingVpcId": "vpc-1"}, "kimi-k3:existingVpcId", "VPC id"),
    ({"apiKey": None}, "kimi-k3:apiKey", "pulumi config set --secret"),
    # monitoring (components/observability)
    ({"prometheusSelectorLabels": '["release"]'}, "kimi-k3:prometheusSelectorLabels", "expected key=value Kubernetes labels"),
    ({"prometheusSelectorLabels": '["release=a", "release=b"]'}, "kimi-k3:prometheusSelectorLabels", "each label key once"),
    ({"prometheusSelectorLabels": '["bad key=x"]'}, "kimi-k3:prometheusSelectorLabels", "expected key=value"),
    ({"monitoringNamespace": "Monitoring"}, "kimi-k3:monitoringNamespace", "a Kubernetes namespace name"),
    ({"monitoringNamespace": ""}, "kimi-k3:monitoringNamespace", "a Kubernetes namespace name"),
    ({"grafanaDashboardNamespace": "grafana_ns"}, "kimi-k3:grafanaDashboardNamespace", "a Kubernetes namespace name"),
    ({"alertTtftP99Seconds": "0"}, "kimi-k3:alertTtftP99Seconds", "accepted: 1 to 600"),
]


@pytest.mark.parametrize(("changes", "key", "accepted"), BAD_VALUES, ids=[f"{k}-{i}" for i, (_, k, _) in enumerate(BAD_VALUES)])
def test_each_mistake_names_key_value_and_what_is_accepted(changes, key, accepted):
    with pytest.raises(SettingsError) as caught:
        load(**changes)
    message = str(caught.value)
    assert caught.value.key == key
    assert message.startswith(f"config {key}: ")
    assert accepted in message
    assert "\n" not in message


PROD_ONLY = [
    ({"servingImage": "vllm/vllm-openai:kimi-k3"}, "kimi-k3:servingImage", "pinned by digest"),
    ({"clusterEndpointPublicAccess": True, "clusterPublicAccessCidrs": ["203.0.113.0/24"]}, "kimi-k3:clusterEndpointPublicAccess", "must be false in prod"),
    ({"gpuAmiReleaseVersion": ""}, "kimi-k3:gpuAmiReleaseVersion", "required in prod"),
    ({"exposure": "public", "servingAllowedCidrs": ["0.0.0.0/0"]}, "kimi-k3:servingAllowedCidrs", "0.0.0.0/0"),
]


@pytest.mark.parametrize(("changes", "key", "accepted"), PROD_ONLY)
def test_prod_is_stricter_than_dev(changes, key, accepted):
    load("dev", **changes)  # accepted in dev (at most a warning)
    with pytest.raises(SettingsError) as caught:
        load("prod", **changes)
    assert caught.value.key == key and accepted in str(caught.value)


def test_secret_key_set_in_plain_text_is_refused():
    values = base(apiKey="plain-text-key")
    with pytest.raises(SettingsError, match="must be a secret"):
        settings.from_values(values, set())


def test_secret_value_never_appears_in_error_for_unknown_secret_like_key():
    values = base(**{"kimi-k3:apiSecretKey": "hunter2"})
    with pytest.raises(SettingsError) as caught:
        settings.from_values(values, {"kimi-k3:apiKey"})
    assert "hunter2" not in str(caught.value)


def test_yaml_values_are_read_like_the_pulumi_cli_passes_them(tmp_path):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "__main__.py").write_text((ROOT / "__main__.py").read_text())
    (stacks / "Pulumi.x.yaml").write_text(
        "config:\n  aws:region: us-east-1\n  kimi-k3:environment: dev\n  kimi-k3:efaEnabled: false\n"
        "  kimi-k3:availabilityZoneCount: 3\n  kimi-k3:clusterAdminRoleArns: [arn:aws:iam::123456789012:role/a]\n"
        "  kimi-k3:capacityReservationId: cr-0a1b2c3d4e5f60718\n"
        "  kimi-k3:modelRevision: 3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20\n"
        "  kimi-k3:apiKey:\n    secure: v1:ZGV2LXBsYWNlaG9sZGVy:cmVwbGFjZS13aXRoLXB1bHVtaS1jb25maWctc2V0LS1zZWNyZXQ=\n"
    )
    values, _secrets = settings.read_stack_file("x", tmp_path)
    assert values["kimi-k3:efaEnabled"] == "false"
    assert json.loads(values["kimi-k3:clusterAdminRoleArns"]) == ["arn:aws:iam::123456789012:role/a"]
    s = settings.load_stack("x", tmp_path)
    assert s.network.availability_zone_count == 3 and s.cluster.admin_role_arns == ("arn:aws:iam::123456789012:role/a",)


def test_missing_stack_file_names_known_stacks():
    with pytest.raises(SettingsError, match="known stacks: dev, hyperpod, prod"):
        settings.load_stack("staging")


def test_broken_yaml_is_one_clear_error(tmp_path):
    (tmp_path / "stacks").mkdir()
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "__main__.py").write_text((ROOT / "__main__.py").read_text())
    (tmp_path / "stacks" / "Pulumi.bad.yaml").write_text("config:\n  aws:region: [unclosed\n")
    with pytest.raises(SettingsError, match="not valid YAML"):
        settings.load_stack("bad", tmp_path)


@pytest.mark.parametrize(
    ("ref", "repository", "tag", "digest"),
    [
        ("vllm/vllm-openai:kimi-k3", "vllm/vllm-openai", "kimi-k3", None),
        (f"vllm/vllm-openai@{DIGEST}", "vllm/vllm-openai", None, DIGEST),
        (f"public.ecr.aws/x/vllm:v1@{DIGEST}", "public.ecr.aws/x/vllm", "v1", DIGEST),
        ("registry:5000/team/vllm:1.0", "registry:5000/team/vllm", "1.0", None),
    ],
)
def test_image_references(ref, repository, tag, digest):
    parsed = parse_image_reference(ref)
    assert (parsed.repository, parsed.tag, parsed.digest) == (repository, tag, digest)
    assert str(parsed) == ref


@pytest.mark.parametrize("ref", ["vllm/vllm-openai", "vllm/vllm-openai@sha256:abc", "VLLM/Upper:tag", ""])
def test_invalid_image_references(ref):
    assert parse_image_reference(ref) is None
