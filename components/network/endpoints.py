"""VPC interface endpoints a stack may create, by service short name (pure: settings and the Network share it).

The accepted names are the regional services of the EKS user guide's table of endpoints
for clusters with limited internet access (private-clusters, "Pod requirements"), plus
``autoscaling`` (named on the same page for the Cluster Autoscaler). ``s3`` is not one: the
VPC already has the S3 *gateway* endpoint (free, and where terabytes of weights go).

An interface endpoint bills an hourly charge per AZ and $0.01 per GB processed (AWS
PrivateLink pricing); traffic it carries no longer crosses a NAT gateway, whose data
processing is billed per GB too, and keeps working when the NAT of another AZ does not.
"""

from __future__ import annotations

from collections.abc import Sequence

INTERFACE_ENDPOINT_SERVICES = (
    "ec2", "ecr.api", "ecr.dkr", "elasticloadbalancing", "xray", "ssm", "logs", "sts", "eks-auth", "eks", "autoscaling",
)
"""Services a stack may reach through interface endpoints (see the module docstring)."""

DEFAULT_INTERFACE_ENDPOINTS = ("ecr.api", "ecr.dkr", "sts", "eks-auth", "ec2")
"""The default set: image pulls (``ecr.api``, ``ecr.dkr``), credentials (``sts`` for IRSA, ``eks-auth`` for every
Pod Identity credential the serving and weights pods fetch) and ``ec2`` (the EKS-optimized AMI sets the node name
through EC2, and vpc-cni allocates every ENI and prefix through it: "If you use the EKS Optimized AMI, you should
enable the ec2 endpoint", private-clusters). ``logs`` is worth its hourly charge once something ships logs to
CloudWatch Logs from the nodes (a Fluent Bit or CloudWatch agent), so it is opt-in."""


def endpoint_problems(services: Sequence[str]) -> list[str]:
    """Why a list of services cannot be used (empty when it can): unknown names, ``s3``, duplicates."""
    problems = []
    for service in services:
        if service == "s3":
            problems.append("s3 is already a gateway endpoint of the VPC (free); an interface endpoint for it is not created")
        elif service not in INTERFACE_ENDPOINT_SERVICES:
            problems.append(f"{service!r} is not one of {', '.join(INTERFACE_ENDPOINT_SERVICES)}")
    duplicates = sorted({s for s in services if list(services).count(s) > 1})
    if duplicates:
        problems.append(f"{', '.join(duplicates)} listed twice")
    return problems


__all__ = ["DEFAULT_INTERFACE_ENDPOINTS", "INTERFACE_ENDPOINT_SERVICES", "endpoint_problems"]
