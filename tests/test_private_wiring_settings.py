"""Settings the first real deployment needed: interface endpoints of the VPC, and the weights bucket's KMS key.

``kimi-k3:interfaceEndpoints`` (validated against the EKS user guide's private-cluster endpoint
list; default ECR, STS, EKS Auth, EC2) and ``kimi-k3:weightsKmsKeyArn`` (an SSE-KMS weights
bucket answers AccessDenied to a role without ``kms:Decrypt`` on its key).
"""

from __future__ import annotations

import json

import pytest

from kimi_k3 import offline
from kimi_k3.errors import SettingsError
from kimi_k3.network.endpoints import DEFAULT_INTERFACE_ENDPOINTS, INTERFACE_ENDPOINT_SERVICES
from tests.builders import S3_URI, load_stack_settings
from tests.conftest import NOW, fixture_for

KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
S3_WEIGHTS = {"weightsSource": "s3", "weightsS3Uri": S3_URI}
ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"


# --- interface endpoints ----------------------------------------------------------------------------


def test_the_default_endpoints_keep_pulls_credentials_and_ec2_calls_off_the_nat():
    assert load_stack_settings().deployment.interface_endpoints == DEFAULT_INTERFACE_ENDPOINTS == ("ecr.api", "ecr.dkr", "sts", "eks-auth", "ec2")
    assert set(DEFAULT_INTERFACE_ENDPOINTS) <= set(INTERFACE_ENDPOINT_SERVICES)


def test_the_stack_creates_exactly_the_configured_endpoints_with_private_dns():
    result = offline.run_stack("dev", now=NOW, reservation=fixture_for, config_overrides={"kimi-k3:interfaceEndpoints": ["ecr.api", "ecr.dkr", "eks-auth", "logs"]})
    interface = [r.plain_inputs for r in result.by_type(ENDPOINT) if r.plain_inputs["vpcEndpointType"] == "Interface"]
    assert sorted(e["serviceName"] for e in interface) == sorted(f"com.amazonaws.us-east-1.{s}" for s in ("ecr.api", "ecr.dkr", "eks-auth", "logs"))
    assert all(e["privateDnsEnabled"] is True for e in interface)
    gateway = [r.plain_inputs["serviceName"] for r in result.by_type(ENDPOINT) if r.plain_inputs["vpcEndpointType"] == "Gateway"]
    assert gateway == ["com.amazonaws.us-east-1.s3"]


@pytest.mark.parametrize(
    "services, reason",
    [
        (["ecr.api", "sqs"], "'sqs' is not one of ec2, ecr.api"),
        (["s3"], "s3 is already a gateway endpoint of the VPC"),
        (["ec2", "ec2"], "ec2 listed twice"),
    ],
)
def test_endpoints_outside_the_list_are_refused_with_the_reason(services, reason):
    with pytest.raises(SettingsError) as refused:
        load_stack_settings(interfaceEndpoints=services)
    assert str(refused.value).startswith("config kimi-k3:interfaceEndpoints:") and reason in str(refused.value)


def test_endpoints_are_the_owners_business_in_an_existing_vpc():
    existing = {"existingVpcId": "vpc-0a1b2c3d4e5f67890", "existingPrivateSubnetIds": ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"]}
    assert load_stack_settings(**existing).network.existing_vpc_id  # the default list is fine (nothing is created)
    with pytest.raises(SettingsError, match="only used for a VPC the stack creates"):
        load_stack_settings(interfaceEndpoints=["logs"], **existing)


# --- the weights bucket's KMS key -------------------------------------------------------------------


def test_the_serving_role_may_decrypt_with_the_buckets_key():
    overrides = {f"kimi-k3:{k}": v for k, v in {**S3_WEIGHTS, "weightsKmsKeyArn": KEY}.items()}
    result = offline.run_stack("dev", now=NOW, reservation=fixture_for, config_overrides=overrides)
    policy = json.loads(result.one("aws:iam/rolePolicy:RolePolicy", "kimi-k3-serving-weights-read-weights").plain_inputs["policy"])
    assert {"Sid": "DecryptWeights", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [KEY]} in policy["Statement"]


def test_without_a_key_the_role_has_no_kms_statement():
    overrides = {f"kimi-k3:{k}": v for k, v in S3_WEIGHTS.items()}
    result = offline.run_stack("dev", now=NOW, reservation=fixture_for, config_overrides=overrides)
    policy = json.loads(result.one("aws:iam/rolePolicy:RolePolicy", "kimi-k3-serving-weights-read-weights").plain_inputs["policy"])
    assert not [s for s in policy["Statement"] if any(a.startswith("kms:") for a in s["Action"])]


@pytest.mark.parametrize(
    "changes, reason",
    [
        ({**S3_WEIGHTS, "weightsKmsKeyArn": "arn:aws:kms:us-east-1:123456789012:alias/weights"}, "expected a KMS key ARN"),
        ({**S3_WEIGHTS, "weightsKmsKeyArn": KEY.replace("us-east-1", "eu-west-1")}, "expected a key in the stack's region us-east-1"),
        ({"weightsKmsKeyArn": KEY}, "only used with kimi-k3:weightsSource s3 (the weights come from huggingface)"),
    ],
)
def test_a_key_that_cannot_decrypt_the_weights_is_refused(changes, reason):
    with pytest.raises(SettingsError) as refused:
        load_stack_settings(**changes)
    assert str(refused.value).startswith("config kimi-k3:weightsKmsKeyArn:") and reason in str(refused.value)
