"""The IAM role of EKS managed nodes: one builder for the system nodes and the Capacity Block GPU nodes.

A trust policy for ``ec2.amazonaws.com`` and the AWS managed policies EKS documents for
managed nodes with the VPC CNI (EKS User Guide, "Amazon EKS node IAM role":
``AmazonEKSWorkerNodePolicy``, ``AmazonEC2ContainerRegistryPullOnly``, ``AmazonEKS_CNI_Policy``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly", "AmazonEKS_CNI_Policy")
"""AWS managed policies of the node role (the minimum for a managed node group with vpc-cni)."""


def service_trust_policy(service: str) -> str:
    """A trust policy letting AWS service ``service`` (``ec2.amazonaws.com``) assume the role and tag its session."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": ["sts:AssumeRole", "sts:TagSession"]}],
        }
    )


@dataclass(frozen=True)
class NodeRole:
    """A node role and its policy attachments."""

    role: aws.iam.Role
    """The role (``{name}-node-role``)."""
    attachments: tuple[aws.iam.RolePolicyAttachment, ...]
    """One attachment per :data:`NODE_POLICIES` entry (``{name}-node-{policy}``)."""

    @property
    def arn_when_attached(self) -> pulumi.Output[str]:
        """The role's ARN, known only once every policy is attached: nodes need them from their first boot."""
        return pulumi.Output.all(self.role.arn, *[a.id for a in self.attachments]).apply(lambda values: values[0])


def eks_node_role(
    name: str, *, partition: pulumi.Input[str], description: str, tags: Mapping[str, str], opts: pulumi.ResourceOptions
) -> NodeRole:
    """Declare the node role ``{name}-node-role`` with :data:`NODE_POLICIES` attached (``opts``: the caller's child options)."""
    role = aws.iam.Role(
        f"{name}-node-role",
        assume_role_policy=service_trust_policy("ec2.amazonaws.com"),
        description=description,
        tags=dict(tags),
        opts=opts,
    )
    attachments = tuple(
        aws.iam.RolePolicyAttachment(
            f"{name}-node-{policy}",
            role=role.name,
            policy_arn=pulumi.Output.concat("arn:", partition, f":iam::aws:policy/{policy}"),
            opts=opts,
        )
        for policy in NODE_POLICIES
    )
    return NodeRole(role, attachments)


__all__ = ["NODE_POLICIES", "NodeRole", "eks_node_role", "service_trust_policy"]
