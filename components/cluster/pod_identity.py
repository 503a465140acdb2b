"""EKS Pod Identity: give one Kubernetes ServiceAccount an IAM role, nothing more."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.core.formats import DNS_LABEL
from kimi_k3.errors import Problems

POD_IDENTITY_TRUST_POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
            }
        ],
    }
)
"""Trust policy EKS Pod Identity requires on every role it hands to pods."""

SERVICE_ACCOUNT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
"""A ServiceAccount name: an RFC 1123 DNS subdomain (Kubernetes object names)."""


@checked_args
@dataclass(frozen=True)
class PodIdentityRoleArgs:
    """Which ServiceAccount gets which permissions."""

    cluster_name: pulumi.Input[str]
    """EKS cluster the ServiceAccount lives in."""
    namespace: str
    """Namespace of the ServiceAccount."""
    service_account: str
    """Name of the ServiceAccount (it need not exist yet)."""
    inline_policies: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Inline IAM policies (name -> JSON document), scoped to exactly what the pod needs."""
    managed_policy_arns: Sequence[pulumi.Input[str]] = ()
    """AWS managed policies to attach (e.g. for a controller whose docs require one)."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags on the role."""


@checked_component
class PodIdentityRole(pulumi.ComponentResource):
    """An IAM role assumable only through EKS Pod Identity, bound to one ServiceAccount."""

    role: aws.iam.Role
    association: aws.eks.PodIdentityAssociation

    def __init__(self, name: str, args: PodIdentityRoleArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Check the args (an association to a namespace that cannot exist binds nobody), then declare role and association."""
        _validate(name, args)
        super().__init__("kimi-k3:index:PodIdentityRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=POD_IDENTITY_TRUST_POLICY,
            description=f"EKS Pod Identity role of {args.namespace}/{args.service_account}",
            tags=dict(args.tags),
            opts=child,
        )
        for policy_name, document in args.inline_policies.items():
            aws.iam.RolePolicy(f"{name}-{policy_name}", role=self.role.id, policy=document, opts=child)
        for index, arn in enumerate(args.managed_policy_arns):
            aws.iam.RolePolicyAttachment(f"{name}-managed-{index}", role=self.role.name, policy_arn=arn, opts=child)
        self.association = aws.eks.PodIdentityAssociation(
            f"{name}-association",
            cluster_name=args.cluster_name,
            namespace=args.namespace,
            service_account=args.service_account,
            role_arn=self.role.arn,
            tags=dict(args.tags),
            opts=child,
        )
        self.role_arn = self.role.arn
        self.register_outputs({"roleArn": self.role.arn, "associationId": self.association.association_id})


def _validate(name: str, args: PodIdentityRoleArgs) -> None:
    """Raise :class:`~kimi_k3.errors.ComponentInputError` with every problem of ``args``."""
    problems = Problems("PodIdentityRole", name)
    if isinstance(args.cluster_name, str) and not args.cluster_name.strip():
        problems.reject("cluster_name", args.cluster_name, "pass the EKS cluster's name")
    if not isinstance(args.namespace, str) or not DNS_LABEL.match(args.namespace):
        problems.reject("namespace", args.namespace, "expected a Kubernetes namespace name (a DNS label such as kube-system)")
    if not isinstance(args.service_account, str) or not SERVICE_ACCOUNT_NAME.match(args.service_account):
        problems.reject("service_account", args.service_account, "expected a ServiceAccount name (a lowercase DNS subdomain)")
    problems.raise_any()
