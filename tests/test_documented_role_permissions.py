"""Roles checked against the permissions AWS documents for them, vendored in components/data/ (issue 33, point 4).

- The deploy runner (CodeBuild in the VPC): AWS CodeBuild user guide, "Allow CodeBuild access to AWS services
  required to create a VPC network interface" (awsdocs/aws-codebuild-user-guide).
- The VPC flow logs role: Amazon VPC user guide, "IAM role for publishing flow logs to CloudWatch Logs"
  ("must include at least the following permissions"; awsdocs/amazon-vpc-user-guide).
- The EKS node role: EKS user guide, "Amazon EKS node IAM role" (awsdocs/amazon-eks-user-guide).
"""

from __future__ import annotations

import copy
import hashlib
import json
from importlib import resources

import pytest

from kimi_k3.cluster import deploy_runner, node_role
from kimi_k3.core.documented_policies import (
    CODEBUILD_VPC_POLICY,
    EKS_NODE_ROLE_PAGE,
    FLOW_LOGS_POLICY,
    documented_policy,
    required_node_policies,
    uncovered,
)
from tests.test_network import _run as network_run

VENDORED = {
    CODEBUILD_VPC_POLICY: "d333cbe8223909b75ab78754bec53a9a02996b56cfd2797744196c25955bd898",
    FLOW_LOGS_POLICY: "26ca8110ce599ff9810eab7b112613e28a8487d8cfd8cc46744f7f5abb3aa8c2",
    EKS_NODE_ROLE_PAGE: "0c734e3fa7f148ef1a2fb113c619c624d259507337b4c8c595b90f8f040cded9",
}
"""sha256 of each vendored file, as components/data/README.md records it."""


@pytest.mark.parametrize("name", sorted(VENDORED))
def test_the_vendored_documents_are_the_recorded_bytes(name):
    data = resources.files("kimi_k3").joinpath("data", name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == VENDORED[name]
    assert name in (resources.files("kimi_k3").joinpath("data", "README.md").read_text())


def runner_policy() -> dict:
    return deploy_runner.role_policy(
        log_group_arn="arn:aws:logs:us-west-2:210987654321:log-group:/aws/codebuild/kimi-k3-prod-deploy",
        subnet_arns=["arn:aws:ec2:us-west-2:210987654321:subnet/subnet-0a", "arn:aws:ec2:us-west-2:210987654321:subnet/subnet-0b"],
        network_interface_arn="arn:aws:ec2:us-west-2:210987654321:network-interface/*",
        secret_arn="arn:aws:secretsmanager:us-west-2:210987654321:secret:kimi-k3/prod/deploy-AbCdEf",
        deploy_role_arn="arn:aws:iam::210987654321:role/github-actions-deploy",
    )


def test_the_deploy_runner_role_grants_what_codebuild_documents_for_a_vpc_build():
    assert uncovered(documented_policy(CODEBUILD_VPC_POLICY), runner_policy()) == []


def _without(policy: dict, action: str) -> dict:
    changed = copy.deepcopy(policy)
    for statement in changed["Statement"]:
        if isinstance(statement["Action"], list) and action in statement["Action"]:
            statement["Action"].remove(action)
        elif statement["Action"] == action:
            statement["Action"] = []
    return changed


@pytest.mark.parametrize("action", [a for s in documented_policy(CODEBUILD_VPC_POLICY)["Statement"] for a in s["Action"]])
def test_every_documented_vpc_action_dropped_from_the_runner_role_is_found(action):
    """The planted bug 'drop ec2:DeleteNetworkInterface' (and each of its siblings)."""
    assert uncovered(documented_policy(CODEBUILD_VPC_POLICY), _without(runner_policy(), action)) == [f"{action} is not granted"]


def test_the_runner_role_keeps_the_documented_conditions_on_the_interface_permission():
    policy = runner_policy()
    statement = next(s for s in policy["Statement"] if s["Action"] == "ec2:CreateNetworkInterfacePermission")
    statement["Condition"]["StringEquals"]["ec2:AuthorizedService"] = "ec2.amazonaws.com"
    del statement["Condition"]["ArnEquals"]
    assert uncovered(documented_policy(CODEBUILD_VPC_POLICY), policy) == [
        "ec2:CreateNetworkInterfacePermission: condition StringEquals ec2:AuthorizedService is not codebuild.amazonaws.com",
        "ec2:CreateNetworkInterfacePermission: condition ArnEquals ec2:Subnet is missing",
    ]


FLOW_LOGS_SCOPED = dict.fromkeys(("logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"), "scoped to the stack's own log group (created by the stack with its retention)")


def _flow_logs_policy(per_az) -> dict:
    result, _ = per_az
    return json.loads(result.one("aws:iam/rolePolicy:RolePolicy").plain_inputs["policy"])


@pytest.fixture(scope="module")
def per_az():
    return network_run(nat_mode="perAz")


def test_the_flow_logs_role_grants_the_vpc_guides_least_permissions(per_az):
    assert uncovered(documented_policy(FLOW_LOGS_POLICY), _flow_logs_policy(per_az), narrowed=FLOW_LOGS_SCOPED) == []


@pytest.mark.parametrize("action", documented_policy(FLOW_LOGS_POLICY)["Statement"][0]["Action"])
def test_every_documented_flow_logs_action_dropped_is_found(per_az, action):
    policy = _without(_flow_logs_policy(per_az), action)
    assert uncovered(documented_policy(FLOW_LOGS_POLICY), policy, narrowed=FLOW_LOGS_SCOPED) == [f"{action} is not granted"]


def test_the_eks_node_role_attaches_every_policy_the_guide_requires():
    required = required_node_policies()
    assert required == ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")
    assert set(required) <= set(node_role.NODE_POLICIES)


def test_a_node_role_without_a_required_policy_is_found():
    page = "* Permissions ... link:aws-managed-policy/latest/reference/AmazonX.html[AmazonX]\n* (Optional) link:aws-managed-policy/latest/reference/AmazonY.html[Y]\n"
    assert required_node_policies(page) == ("AmazonX",)
