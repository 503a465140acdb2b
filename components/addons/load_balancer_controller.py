"""The AWS Load Balancer Controller, installed from its official Helm chart with its own Pod Identity role.

Needed when the API is exposed ``internal`` or ``public``: the controller turns the
serving Service (``loadBalancerClass: service.k8s.aws/nlb``) or an Ingress into an
NLB/ALB.

The Kubernetes provider (the cluster to install into) comes through the standard
resource options, so the component stays usable from any Pulumi program::

    LoadBalancerController(
        "lbc",
        LoadBalancerControllerArgs(cluster_name=cluster.name, region="us-east-1", vpc_id=vpc.id),
        opts=pulumi.ResourceOptions(providers={"kubernetes": k8s_provider}),
    )

Children inherit that provider from the component (``parent=self``); an AWS
provider passed the same way (``providers={"aws": ...}``) reaches the IAM role. Without a
Kubernetes provider the component refuses (:mod:`kimi_k3.cluster.kubernetes_provider`): it never
installs into the cluster the ambient kubeconfig points at.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.addons.helm_values import deep_merge
from kimi_k3.addons.releases import controller_release
from kimi_k3.cluster.kubernetes_provider import require_kubernetes_provider
from kimi_k3.cluster.pod_identity import PodIdentityRole, PodIdentityRoleArgs
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.core.catalog import AWS_LOAD_BALANCER_CONTROLLER_CHART
from kimi_k3.core.formats import CHART_VERSION, REGION, VPC_ID
from kimi_k3.core.labels import SYSTEM_NODE_LABELS
from kimi_k3.errors import Problems

CHART, REPOSITORY, DEFAULT_VERSION = AWS_LOAD_BALANCER_CONTROLLER_CHART.name, AWS_LOAD_BALANCER_CONTROLLER_CHART.repository, AWS_LOAD_BALANCER_CONTROLLER_CHART.version
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "aws-load-balancer-controller"
RELEASE_NAME = "aws-load-balancer-controller"
PRIORITY_CLASS = "system-cluster-critical"
IMAGE_REPOSITORY = "public.ecr.aws/eks/aws-load-balancer-controller"

IMAGE_TAGS: Mapping[str, str] = {"3.5.0": "v3.5.0"}
"""Controller image tag per chart version: the chart's own default ``image.tag`` (values.yaml of that version)."""

IAM_POLICY_FILE = "aws-load-balancer-controller-iam-policy.json"
"""The controller's official IAM policy, vendored unchanged (provenance in components/data/README.md)."""



def iam_policy_document() -> str:
    """The controller's official IAM policy document (JSON text), as vendored in ``components/data``."""
    # Next to the package (packaged as package-data), not importlib.resources: an editable
    # install can present `components` as a namespace package without a resource reader.
    return (Path(__file__).resolve().parents[1] / "data" / IAM_POLICY_FILE).read_text(encoding="utf-8")


@checked_args
@dataclass(frozen=True)
class LoadBalancerControllerArgs:
    """Where the controller runs and how it is pinned."""

    cluster_name: pulumi.Input[str]
    """EKS cluster name: the chart's ``clusterName`` (tags the load balancers it owns) and the Pod Identity association's cluster."""
    region: str
    """AWS region of the cluster (chart ``region``), so the controller never asks the instance metadata service."""
    vpc_id: pulumi.Input[str]
    """VPC of the cluster (chart ``vpcId``): nodes allow one IMDS hop only, so pods cannot discover it themselves."""
    version: str = DEFAULT_VERSION
    """Helm chart version of ``aws-load-balancer-controller`` (pinned; default from ``kimi_k3.core.catalog``)."""
    image_tag: str | None = None
    """Controller image tag; ``None`` takes the chart's default tag recorded in ``IMAGE_TAGS`` for ``version``."""
    replicas: int = 2
    """Controller pods (one leader, the rest standby so the admission webhooks stay answered)."""
    extra_values: Mapping[str, Any] = field(default_factory=dict)
    """Helm values deep-merged over the component's own (maps merge key by key, anything else replaces)."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags on the IAM role and association, and (chart ``defaultTags``) on every AWS resource the controller creates."""


def _validate(name: str, args: LoadBalancerControllerArgs, opts: pulumi.ResourceOptions | None) -> str:
    """Check the args and options before anything is declared (every problem at once); return the image tag to pin."""
    problems = Problems("LoadBalancerController", name)
    require_kubernetes_provider(problems, opts)
    if isinstance(args.cluster_name, str) and not args.cluster_name.strip():
        problems.reject("cluster_name", args.cluster_name, "pass the EKS cluster's name")
    if not isinstance(args.region, str) or not REGION.match(args.region):
        problems.reject("region", args.region, "expected an AWS region name such as 'us-east-1'")
    if isinstance(args.vpc_id, str) and not VPC_ID.match(args.vpc_id):
        problems.reject("vpc_id", args.vpc_id, "expected a VPC id such as 'vpc-0a1b2c3d4e5f60718'")
    if not CHART_VERSION.fullmatch(args.version) or args.version.startswith("v"):
        problems.reject("version", args.version, f"expected an exact chart version such as {DEFAULT_VERSION!r}")
    if isinstance(args.replicas, bool) or not isinstance(args.replicas, int) or args.replicas < 1:
        problems.reject("replicas", args.replicas, "expected a whole number of at least 1")
    if not isinstance(args.extra_values, Mapping):
        problems.reject("extra_values", args.extra_values, "must be a mapping of Helm values")
    else:
        account = args.extra_values.get("serviceAccount")
        if isinstance(account, Mapping) and (
            account.get("name", SERVICE_ACCOUNT) != SERVICE_ACCOUNT or account.get("create", True) is not True
        ):
            problems.reject(
                "extra_values.serviceAccount", dict(account),
                f"it may not change serviceAccount.name or serviceAccount.create: the IAM role is bound to {NAMESPACE}/{SERVICE_ACCOUNT}",
            )
    image_tag = args.image_tag
    if image_tag is not None:
        if not image_tag.strip() or image_tag == "latest":
            problems.reject("image_tag", image_tag, "expected a pinned tag such as 'v3.5.0'")
    elif args.version not in IMAGE_TAGS:
        problems.add(
            "image_tag",
            f"image_tag is required for chart version {args.version!r}: no image tag is recorded for it "
            f"(known: {', '.join(sorted(IMAGE_TAGS))}); pass the chart's default image.tag for that version",
        )
    problems.raise_any()
    return image_tag if image_tag is not None else IMAGE_TAGS[args.version]


def controller_values(args: LoadBalancerControllerArgs, image_tag: str) -> dict[str, Any]:
    """The Helm values the component sets, with ``args.extra_values`` merged over them."""
    values: dict[str, Any] = {
        "clusterName": args.cluster_name,
        "region": args.region,
        "vpcId": args.vpc_id,
        "replicaCount": args.replicas,
        "image": {"repository": IMAGE_REPOSITORY, "tag": image_tag},
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
        "nodeSelector": dict(SYSTEM_NODE_LABELS),
        "priorityClassName": PRIORITY_CLASS,
        # With the mutator webhook on, the controller stamps its loadBalancerClass on EVERY new
        # Service of type LoadBalancer in the cluster (and, failurePolicy Fail, blocks their creation
        # while it is down). We only want the Services that ask for it (loadBalancerClass
        # service.k8s.aws/nlb on the serving Service), so the webhook stays off.
        "enableServiceMutatorWebhook": False,
    }
    if args.tags:
        values["defaultTags"] = dict(args.tags)
    return deep_merge(values, args.extra_values)


@checked_component
class LoadBalancerController(pulumi.ComponentResource):
    """AWS Load Balancer Controller (Helm release in ``kube-system``) with an EKS Pod Identity IAM role.

    Pass the Kubernetes provider as ``opts=pulumi.ResourceOptions(providers={"kubernetes": provider})``.
    The release waits for the Pod Identity association, so the controller's first pods start with credentials.
    """

    identity: PodIdentityRole
    """IAM role with the official controller policy, bound to ``kube-system/aws-load-balancer-controller``."""
    release: k8s.helm.v3.Release
    """The Helm release of the chart."""
    role_arn: pulumi.Output[str]
    """ARN of the controller's IAM role."""
    values: dict[str, Any]
    """The Helm values passed to the release (may contain Outputs)."""

    def __init__(self, name: str, args: LoadBalancerControllerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate, then declare the Pod Identity role and the Helm release: ``name`` prefixes every child's name, ``args`` as on
        ``LoadBalancerControllerArgs``, ``opts`` the usual resource options (parent; providers, which must name the Kubernetes provider)."""
        image_tag = _validate(name, args, opts)
        super().__init__("kimi-k3:index:LoadBalancerController", name, None, opts)

        self.identity = PodIdentityRole(
            f"{name}-identity",
            PodIdentityRoleArgs(
                cluster_name=args.cluster_name,
                namespace=NAMESPACE,
                service_account=SERVICE_ACCOUNT,
                inline_policies={"controller": iam_policy_document()},
                tags=dict(args.tags),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.values = controller_values(args, image_tag)
        self.release = controller_release(
            f"{name}-release",
            release_name=RELEASE_NAME,
            chart=CHART,
            version=args.version,
            repository=REPOSITORY,
            namespace=NAMESPACE,
            values=self.values,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.identity.association]),
        )
        self.role_arn = self.identity.role_arn
        self.register_outputs(
            {"roleArn": self.role_arn, "releaseName": self.release.name, "namespace": NAMESPACE, "chartVersion": args.version}
        )


__all__ = [
    "IAM_POLICY_FILE",
    "IMAGE_TAGS",
    "LoadBalancerController",
    "LoadBalancerControllerArgs",
    "controller_values",
    "iam_policy_document",
]
