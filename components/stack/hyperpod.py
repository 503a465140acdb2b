"""The ``hyperpod`` stack (``kimi-k3:servingPlatform: hyperpod``): what :class:`~kimi_k3.stack.platform.Platform` declares after the network and EKS.

The SageMaker HyperPod path of the AWS deployment guide for Kimi K3, as code. Before
anything is declared, :func:`resolve_hyperpod_stack` reads the stack's Flexible Training
Plan (boto3 ``DescribeTrainingPlan`` at program start:
:func:`~kimi_k3.hyperpod.training_plan_check.stack_training_plan`), puts the plan's AZ first
among the network's AZs (as the EKS path does with the Capacity Block's) and refuses a
plan that cannot back the instance group
(:func:`~kimi_k3.hyperpod.training_plan_check.check_training_plan`: ended or failed, bought for
training jobs, another instance type, too few instances in the AZs the subnets cover).

Then, on the stack's own VPC and EKS cluster (the orchestrator), :class:`HyperPodServing`
declares, in this order (each step waits for the one before):

1. :class:`~kimi_k3.hyperpod.cluster.HyperPodCluster`: the dependencies Helm chart, the
   lifecycle scripts, the execution role and the ``aws-native:sagemaker:Cluster`` with its
   ``ml.<gpuInstanceType>`` instance group on the training plan, in the plan's AZ's private
   subnet, with the EKS node security group;
2. :class:`~kimi_k3.hyperpod.inference_operator.HyperPodInferenceOperator`: the Inference Operator
   EKS add-on (its configuration names the HyperPod cluster's ARN);
3. :class:`~kimi_k3.hyperpod.endpoint.HyperPodInferenceEndpoint`: the
   ``InferenceEndpointConfig`` rendered from the stack's serving contract, with the API key
   (and Hugging Face token) Secrets from the stack's Pulumi secrets, in its own namespace.

Not declared (the EKS path's pieces HyperPod brings itself): the Capacity Block node group
(the training plan is the capacity), the GPU node plugins (the dependencies chart installs
the NVIDIA and EFA device plugins), the load balancer controller (the add-on runs its own)
and the vLLM workload (the operator runs it).

``pulumi_aws_native`` is imported here only (and by :mod:`kimi_k3.hyperpod.cluster`),
so EKS stacks never load it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_aws as aws

from kimi_k3.cluster.eks import AUTHENTICATION_MODE
from kimi_k3.errors import UserError
from kimi_k3.hyperpod.cluster import HyperPodCluster, HyperPodClusterArgs
from kimi_k3.hyperpod.endpoint import HyperPodInferenceEndpoint, HyperPodInferenceEndpointArgs
from kimi_k3.hyperpod.inference_operator import EXECUTION_ROLE_PREFIX, HyperPodInferenceOperator, HyperPodInferenceOperatorArgs
from kimi_k3.hyperpod.rules import EksForHyperPod
from kimi_k3.hyperpod.training_plan_check import TrainingPlanFacts, check_training_plan, stack_training_plan
from kimi_k3.serving.contracts import ServingContract, contract_summary
from kimi_k3.stack.foundation import availability_zones, existing_private_subnets, secret_input
from kimi_k3.stack.settings import HyperPodSettings, StackSettings

if TYPE_CHECKING:
    from kimi_k3.cluster.eks import Cluster
    from kimi_k3.network.vpc import Network

SERVING_NAMESPACE = "kimi-serving"
"""Namespace of the ``InferenceEndpointConfig`` and its Secrets (the EKS path's serving namespace)."""


@dataclass(frozen=True)
class ResolvedHyperPodStack:
    """What a ``hyperpod`` stack resolves to before anything is declared."""

    plan: TrainingPlanFacts
    """The training plan, as ``DescribeTrainingPlan`` described it."""
    availability_zones: tuple[str, ...]
    """AZs of the network, the plan's first."""
    instance_group_az: str
    """AZ of the instance group's subnet: the plan's AZ the network covers with the most instances."""
    warnings: tuple[str, ...]
    """Findings of the plan check that do not stop the stack (a plan that starts later, a short window)."""
    existing_private_subnets_by_az: dict[str, str]
    """With an existing VPC: its private subnet of each AZ."""
    contract: ServingContract
    """The serving contract (image, weights, API, engine)."""
    replicas: int
    """Model pods, one instance each: configured, or every instance the plan reserves in the group's AZ."""
    now: datetime | None = None
    """The moment the program runs (the HyperPod cluster's provisioning mode is checked against the plan's start)."""


def _hyperpod(settings: StackSettings) -> HyperPodSettings:
    if settings.hyperpod is None:
        raise UserError(f"stack {settings.stack} is not a hyperpod stack (kimi-k3:servingPlatform is {settings.serving_platform})")
    return settings.hyperpod


def resolve_hyperpod_stack(settings: StackSettings, now: datetime) -> ResolvedHyperPodStack:
    """Read the training plan, derive the AZs and check the plan against the stack at ``now``.

    :raises UserError: in the stack's config keys, for a plan that cannot be read or cannot back the stack.
    """
    hp = _hyperpod(settings)
    try:
        plan = stack_training_plan(hp.training_plan, settings.region)
    except UserError as err:
        raise UserError(f"kimi-k3:trainingPlanArn {hp.training_plan}: {err}") from None
    plan_azs = plan.availability_zones(hp.instance_type) or plan.availability_zones()
    if not plan_azs:
        raise UserError(f"training plan {plan.name} reserves no capacity yet (state {plan.state}); kimi-k3:trainingPlanArn needs a plan with reserved instances")
    existing = existing_private_subnets(settings)
    azs = tuple(existing) if existing else availability_zones(settings, plan_azs[0], capacity="Training plan")
    warnings = check_training_plan(
        plan, instance_type=hp.instance_type, subnet_availability_zones=azs, instances_required=settings.nodes_required, now=now
    )
    covered = [az for az in plan.availability_zones(hp.instance_type) if az in azs]
    group_az = max(covered, key=lambda az: plan.instances_in(hp.instance_type, az))
    replicas = settings.serving.replicas or plan.instances_in(hp.instance_type, group_az)
    return ResolvedHyperPodStack(
        plan=plan,
        availability_zones=azs,
        instance_group_az=group_az,
        warnings=tuple(warnings),
        existing_private_subnets_by_az=existing,
        contract=settings.serving.contract,
        replicas=replicas,
        now=now,
    )


def execution_role_name(cluster_name: str) -> str:
    """Name of the Inference Operator's execution role: the add-on's required prefix and the HyperPod cluster name (unique per account and region)."""
    return f"{EXECUTION_ROLE_PREFIX}-{cluster_name}"[:64].rstrip("-")


def sagemaker_invocation_url(region: str, endpoint_name: str) -> str:
    """The SageMaker Runtime ``InvokeEndpoint`` URL of an endpoint (IAM SigV4 authenticated; API reference, runtime InvokeEndpoint)."""
    return f"https://runtime.sagemaker.{region}.amazonaws.com/endpoints/{endpoint_name}/invocations"


class HyperPodServing:
    """The HyperPod pieces of a ``hyperpod`` stack, declared under its :class:`~kimi_k3.stack.platform.Platform` (see the module docstring).

    Attributes: :attr:`native_provider` (``pulumi_aws_native.Provider`` for the stack's region),
    :attr:`hyperpod_cluster`, :attr:`operator`, :attr:`endpoint`, :attr:`eks_cluster_arn`.
    """

    def __init__(self, platform: pulumi.Resource, network: Network, cluster: Cluster, name: str, settings: StackSettings,
                 resolved: ResolvedHyperPodStack, tags: dict[str, str]) -> None:
        """Declare the HyperPod cluster, the Inference Operator and the endpoint, children of ``platform``.

        :param platform: the stack's platform (:class:`~kimi_k3.stack.platform.Platform`), the parent of every piece.
        :param network: the stack's network, declared by the platform.
        :param cluster: the stack's EKS cluster, declared by the platform.
        :param name: base name of the stack's resources.
        :param settings: the validated ``hyperpod`` stack settings.
        :param resolved: the training plan and AZs (:func:`resolve_hyperpod_stack`).
        :param tags: tags on every AWS resource.
        """
        import pulumi_aws_native as aws_native  # lazily: only hyperpod stacks load the provider SDK

        hp = _hyperpod(settings)
        self.network, self.cluster = network, cluster
        self.settings = settings
        self.resolved = resolved
        under_platform = pulumi.InvokeOptions(parent=platform)
        partition = aws.get_partition(opts=under_platform).partition
        account = aws.get_caller_identity(opts=under_platform).account_id
        region = settings.region
        # The Cluster component has no ARN output (pulumi-eks's inner cluster is not reachable under
        # mocks); the ARN is the documented format, resolved once the EKS cluster exists.
        self.eks_cluster_arn: pulumi.Output[str] = cluster.cluster_name.apply(lambda n: f"arn:{partition}:eks:{region}:{account}:cluster/{n}")
        self.native_provider = aws_native.Provider(f"{name}-aws-native", region=region, opts=pulumi.ResourceOptions(parent=platform))

        self.hyperpod_cluster = HyperPodCluster(
            f"{name}-hyperpod",
            HyperPodClusterArgs(
                eks_cluster_arn=self.eks_cluster_arn,
                eks=EksForHyperPod(settings.cluster.version, AUTHENTICATION_MODE, cluster.addon_versions.get("vpc-cni")),
                region=region,
                subnet_id=network.private_subnet_ids_by_az[resolved.instance_group_az],
                subnet_availability_zone=resolved.instance_group_az,
                # The EKS node security group, as the system nodes: the control plane reaches the kubelets,
                # the HyperPod nodes reach CoreDNS on the system nodes.
                security_group_ids=[cluster.node_security_group_id],
                training_plan=resolved.plan,
                instance_type=hp.instance_type,
                instance_count=resolved.replicas,
                cluster_name=hp.cluster_name,
                ebs_volume_size_gib=hp.ebs_volume_gib,
                now=resolved.now,
                vpc_id=network.vpc_id,
                tags=tags,
            ),
            opts=pulumi.ResourceOptions(
                parent=platform, providers={"kubernetes": cluster.provider, "aws-native": self.native_provider}, depends_on=[cluster]
            ),
        )

        weights = resolved.contract.weights
        self.operator = HyperPodInferenceOperator(
            f"{name}-inference",
            HyperPodInferenceOperatorArgs(
                eks_cluster_name=cluster.cluster_name,
                hyperpod_cluster_arn=self.hyperpod_cluster.cluster_arn,
                oidc_provider_arn=cluster.oidc_provider_arn,
                oidc_issuer=cluster.oidc_issuer,
                region=region,
                account_id=account,
                weights_bucket=weights.s3_bucket if weights.source == "s3" else None,
                weights_prefix=(weights.s3_prefix or "") if weights.source == "s3" else "",
                execution_role_name=execution_role_name(hp.cluster_name),
                kubernetes_version=settings.cluster.version,
                depends_on=(self.hyperpod_cluster,),
                tags=tags,
            ),
            opts=pulumi.ResourceOptions(parent=platform),
        )

        serving = settings.serving
        self.endpoint = HyperPodInferenceEndpoint(
            f"{name}-serving",
            HyperPodInferenceEndpointArgs(
                contract=resolved.contract,
                namespace=SERVING_NAMESPACE,
                instance_type=hp.instance_type,
                replicas=resolved.replicas,
                api_key=secret_input(serving.api_key),
                hugging_face_token=secret_input(serving.hugging_face_token),
                s3_region=region,
                endpoint_name=hp.cluster_name,
                routing=serving.hyperpod_routing,
                create_namespace=True,
            ),
            # The CRD comes with the operator: the object waits for the add-on.
            opts=pulumi.ResourceOptions(parent=platform, providers={"kubernetes": cluster.provider}, depends_on=[self.operator]),
        )

    def stack_outputs(self) -> dict[str, Any]:
        """The stack outputs of a ``hyperpod`` stack: the endpoint and the contract as on the EKS path, the plan instead of the block."""
        s, resolved, plan = self.settings, self.resolved, self.resolved.plan
        hp = _hyperpod(s)
        return {
            "region": s.region,
            "vpcId": self.network.vpc_id,
            "environment": s.environment,
            "servingPlatform": s.serving_platform,
            "availabilityZones": list(resolved.availability_zones),
            "trainingPlan": {
                "arn": plan.arn,
                "name": plan.name,
                "state": plan.state,
                "availabilityZone": resolved.instance_group_az,
                "instanceType": hp.instance_type,
                "instanceCount": plan.instances_in(hp.instance_type, resolved.instance_group_az),
                "start": plan.start.isoformat(),
                "end": plan.end.isoformat(),
            },
            "gpuNodes": resolved.replicas,
            "gpusTotal": resolved.replicas * s.instance.gpus,
            "replicas": resolved.replicas,
            "clusterName": self.cluster.cluster_name,
            "clusterEndpoint": self.cluster.endpoint,
            "kubeconfig": self.cluster.kubeconfig,
            "hyperpodClusterName": hp.cluster_name,
            "hyperpodClusterArn": self.hyperpod_cluster.cluster_arn,
            "inferenceOperatorAddon": self.operator.addon.addon_name,
            "sagemakerEndpointName": hp.cluster_name,
            "endpoint": sagemaker_invocation_url(s.region, hp.cluster_name),
            "servingNamespace": self.endpoint.namespace,
            "inferenceEndpointConfig": self.endpoint.object_name,
            **contract_summary(resolved.contract),
        }


__all__ = ["SERVING_NAMESPACE", "HyperPodServing", "ResolvedHyperPodStack", "execution_role_name", "resolve_hyperpod_stack", "sagemaker_invocation_url"]
