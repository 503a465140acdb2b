"""Shared inputs of the HyperPod component tests: a training plan, its subnets, the offline engine that knows them.

Test modules import from here, never from each other.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3 import offline
from kimi_k3.hyperpod.training_plan_check import rehearsal_facts

NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
REGION = "us-east-1"
EKS_ARN = "arn:aws:eks:us-east-1:123456789012:cluster/kimi-k3-hyperpod"
SUBNET = "subnet-0aaa0000000000001"
SUBNET_AZS = {SUBNET: "us-east-1a", "subnet-0bbb0000000000002": "us-east-1b"}
NODE_SG = "sg-0123456789abcdef0"
PLAN_ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/kimi-k3-p6"
PLAN = rehearsal_facts(PLAN_ARN, availability_zone="us-east-1a", instance_count=2, start=NOW + timedelta(days=1))
"""Two ml.p6-b300.48xlarge in us-east-1a, scheduled to start a day after :data:`NOW`."""
ISSUER = "oidc.eks.us-east-1.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF"


def engine(**options) -> offline.OfflineEngine:
    """The offline engine knowing :data:`PLAN` and where the subnets are (as AWS would)."""
    return offline.OfflineEngine(now=NOW, region=REGION, training_plan=PLAN, existing_subnet_azs=SUBNET_AZS, **options)


def providers(kubeconfig: pulumi.Input[str] = "{}") -> pulumi.ResourceOptions:
    """Both providers of a HyperPod cluster through opts (providers are resources: call this inside the program)."""
    import pulumi_aws_native as aws_native

    return pulumi.ResourceOptions(providers={
        "kubernetes": k8s.Provider("eks-k8s", kubeconfig=kubeconfig),
        "aws-native": aws_native.Provider("native", region=REGION),
    })
