"""The SageMaker HyperPod Inference Operator on an API-created HyperPod cluster, as EKS add-ons.

How AWS documents it: the console's *Quick setup* installs the operator with the
cluster; for a cluster created otherwise, "Setting up your HyperPod clusters for model
deployment" (sagemaker-hyperpod-model-deployment-setup) installs it on the existing
cluster, and since Inference Operator 3.0 ("Amazon SageMaker HyperPod Inference release
notes", v3.0, 2026-02-23: "EKS add-on integration") that is the EKS add-on
``amazon-sagemaker-hyperpod-inference`` (the Helm sub-chart ``inference-operator`` of the
dependencies chart stays disabled: ``inferenceOperators.enabled: false``).

What the add-on needs, from AWS's Helm-to-add-on migration script at the pinned chart
commit (``aws/sagemaker-hyperpod-cli``
``helm_chart/HyperPodHelmChart/charts/inference-operator/migration/helm_to_addon.sh``,
commit 011ca927) and the chart's ``_validateRequiredValues.tpl``:

* its dependency add-ons first: ``cert-manager``, ``aws-mountpoint-s3-csi-driver`` (with
  an IRSA role for ``kube-system:s3-csi-driver-sa``) and ``metrics-server``;
* ``configurationValues``: ``executionRoleArn`` (a role whose **name starts with
  ``SageMakerHyperPodInference``**: the add-on's managed-policy restriction),
  ``tlsCertificateS3Bucket``, ``hyperpodClusterArn`` (so the add-on comes after the
  HyperPod cluster), the ALB controller's IRSA role and KEDA's IRSA role.

The roles trust the EKS cluster's IAM OIDC provider for exactly one ServiceAccount each
(AWS's sample trusts ``system:serviceaccount:*:*`` for the operator; narrowed here).
Their permissions: the operator's from AWS's Terraform sample
(``awsome-distributed-training`` ``.../modules/hyperpod_inference_operator/iam_roles.tf``)
plus the v3.0 tagging additions; the ALB controller's official policy (vendored in
``components/data``); KEDA's CloudWatch / Prometheus read; the S3 CSI driver's read of the
weights bucket only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from kimi_k3.addons.load_balancer_controller import iam_policy_document as alb_policy_document
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.core.formats import EKS_ADDON_VERSION
from kimi_k3.errors import UserError
from kimi_k3.weights.secure_bucket import SecureBucket, SecureBucketArgs

ADDON = "amazon-sagemaker-hyperpod-inference"
"""EKS add-on name of the HyperPod Inference Operator."""
OPERATOR_NAMESPACE = "hyperpod-inference-system"
"""Namespace the add-on runs the operator, its ALB controller and KEDA in."""
OPERATOR_SERVICE_ACCOUNT = "hyperpod-inference-operator-controller-manager"
"""ServiceAccount of the operator (chart ``config/rbac/service_account.yaml``: ``<namePrefix>-controller-manager``)."""
ALB_SERVICE_ACCOUNT = "aws-load-balancer-controller"
"""ServiceAccount of the add-on's ALB controller (in :data:`OPERATOR_NAMESPACE`)."""
KEDA_SERVICE_ACCOUNT = "keda-operator"
"""ServiceAccount of the add-on's KEDA operator (in :data:`OPERATOR_NAMESPACE`)."""
S3_CSI_SERVICE_ACCOUNT = ("kube-system", "s3-csi-driver-sa")
"""Namespace and ServiceAccount of the Mountpoint for Amazon S3 CSI driver add-on."""
EXECUTION_ROLE_PREFIX = "SageMakerHyperPodInference"
"""Required prefix of the operator's execution role name when it runs as an add-on."""

PINNED_ADDON_VERSIONS: Mapping[str, str] = {
    ADDON: "v1.0.0-eksbuild.1",
    "cert-manager": "v1.18.2-eksbuild.2",
    "aws-mountpoint-s3-csi-driver": "v1.14.1-eksbuild.1",
    "metrics-server": "v0.7.2-eksbuild.4",
}
"""Add-on versions AWS's migration script installs at the pinned chart commit: used when no Kubernetes version is given
(``kubernetes_version=None``); otherwise each unpinned add-on resolves to EKS's default version for the cluster's Kubernetes
version, as the EKS add-ons do (:class:`kimi_k3.cluster.eks.Cluster`: ``aws.eks.get_addon_version(most_recent=False)``,
DescribeAddonVersions' ``defaultVersion``): a fixed version may not exist for a newer Kubernetes version."""
DEFAULT_ADDON_VERSIONS = PINNED_ADDON_VERSIONS
"""The add-on names (and fallback versions) the operator declares (:data:`PINNED_ADDON_VERSIONS`)."""
DEPENDENCY_ADDONS = ("cert-manager", "aws-mountpoint-s3-csi-driver", "metrics-server")
"""Add-ons the inference add-on needs, created before it."""

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@checked_args
@dataclass(frozen=True, kw_only=True)
class HyperPodInferenceOperatorArgs:
    """Inputs of :class:`HyperPodInferenceOperator`."""

    eks_cluster_name: pulumi.Input[str]
    """EKS cluster that orchestrates the HyperPod cluster."""
    hyperpod_cluster_arn: pulumi.Input[str]
    """ARN of the HyperPod cluster (add-on ``hyperpodClusterArn``); the add-on waits for it."""
    oidc_provider_arn: pulumi.Input[str]
    """IAM OIDC provider of the EKS cluster (the add-on's roles are IRSA roles)."""
    oidc_issuer: pulumi.Input[str]
    """OIDC issuer without ``https://`` (``oidc.eks.<region>.amazonaws.com/id/<id>``)."""
    region: str
    """AWS region."""
    account_id: pulumi.Input[str]
    """AWS account id (scopes the operator's permissions to this account)."""
    weights_bucket: str | None = None
    """Bucket of S3 weights the operator mounts (read-only grant to the S3 CSI driver); ``None`` for Hugging Face."""
    weights_prefix: str = ""
    """Key prefix of the weights inside ``weights_bucket``."""
    addon_versions: Mapping[str, str] = field(default_factory=dict)
    """Pinned versions, by add-on name; the others are resolved for ``kubernetes_version``."""
    kubernetes_version: str | None = None
    """Kubernetes version of the EKS cluster: unpinned add-ons get EKS's default version for it
    (``aws.eks.get_addon_version``, as the cluster's own add-ons); ``None``: :data:`PINNED_ADDON_VERSIONS`."""
    execution_role_name: str | None = None
    """Name of the operator's execution role (IAM names are unique per account: make it unique per stack);
    ``None``: ``SageMakerHyperPodInference-<component name>``. Must start with ``SageMakerHyperPodInference``."""
    depends_on: tuple[pulumi.Resource, ...] = ()
    """Resources the add-ons must wait for (the HyperPod cluster)."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags on every AWS resource created here."""


def validate(name: str, args: HyperPodInferenceOperatorArgs) -> dict[str, str]:
    """Check ``args``; return the add-on versions to declare."""
    versions = {**DEFAULT_ADDON_VERSIONS, **dict(args.addon_versions)}
    for addon, version in args.addon_versions.items():
        if addon not in DEFAULT_ADDON_VERSIONS:
            raise UserError(f"HyperPodInferenceOperator {name!r}: addon_versions key {addon!r} is not accepted; keys among {', '.join(DEFAULT_ADDON_VERSIONS)}")
        if not isinstance(version, str) or not EKS_ADDON_VERSION.match(version):
            raise UserError(f"HyperPodInferenceOperator {name!r}: addon_versions[{addon!r}]={version!r} is not accepted; an EKS add-on version such as v1.0.0-eksbuild.1")
    role_name = args.execution_role_name or f"{EXECUTION_ROLE_PREFIX}-{name}"
    if not role_name.startswith(EXECUTION_ROLE_PREFIX) or len(role_name) > 64 or not re.fullmatch(r"[\w+=,.@-]+", role_name):
        raise UserError(
            f"HyperPodInferenceOperator {name!r}: execution_role_name={role_name!r} is not accepted; an IAM role name of at most 64 characters "
            f"starting with {EXECUTION_ROLE_PREFIX} (the add-on refuses other names)"
        )
    if args.weights_bucket is not None and not _BUCKET.match(args.weights_bucket):
        raise UserError(f"HyperPodInferenceOperator {name!r}: weights_bucket={args.weights_bucket!r} is not an S3 bucket name")
    if args.weights_prefix.startswith("/"):
        raise UserError(f"HyperPodInferenceOperator {name!r}: weights_prefix={args.weights_prefix!r} must not start with '/'")
    return versions


def irsa_trust(provider_arn: str, issuer: str, namespace: str, service_account: str, sagemaker: bool = False) -> str:
    """Trust policy for one ServiceAccount through the cluster's OIDC provider (and SageMaker, when asked)."""
    statements: list[dict[str, Any]] = [
        {
            "Effect": "Allow",
            "Principal": {"Federated": provider_arn},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {"StringEquals": {f"{issuer}:aud": "sts.amazonaws.com", f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}"}},
        }
    ]
    if sagemaker:
        statements.insert(0, {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"})
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


def operator_policy(region: str, account: str, tls_bucket: str, role_arn: str) -> str:
    """Permissions of the operator's execution role (AWS's Terraform sample, statement by statement, plus v3.0 tagging)."""
    here = {"aws:RequestedRegion": region}
    acct = f"arn:aws:sagemaker:{region}:{account}"
    sagemaker_arns = [f"{acct}:model/*", f"{acct}:endpoint/*", f"{acct}:endpoint-config/*", f"{acct}:cluster/*", f"{acct}:cluster-inference/*"]
    statements = [
        {"Sid": "TlsBucketAccess", "Effect": "Allow", "Action": ["s3:PutObject", "s3:DeleteObject", "s3:ListBucket", "s3:GetObject", "s3:PutObjectTagging"],
         "Resource": [f"arn:aws:s3:::{tls_bucket}", f"arn:aws:s3:::{tls_bucket}/*"], "Condition": {"StringEquals": {"aws:PrincipalAccount": account}}},
        {"Sid": "ECRAuthorization", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": "*"},
        {"Sid": "ECRRepositoryAccess", "Effect": "Allow", "Action": ["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:DescribeRepositories",
                                                                      "ecr:ListImages", "ecr:DescribeImages", "ecr:BatchGetImage"],
         "Resource": "*", "Condition": {"StringEquals": here}},
        {"Sid": "EC2DescribeAccess", "Effect": "Allow", "Action": ["ec2:DescribeAvailabilityZones", "ec2:DescribeRegions", "ec2:DescribeVpcs", "ec2:DescribeSubnets",
                                                                    "ec2:DescribeSecurityGroups", "ec2:DescribeRouteTables", "ec2:DescribeDhcpOptions",
                                                                    "ec2:DescribeInstances", "ec2:DescribeInstanceTypes", "ec2:DescribeVolumes",
                                                                    "ec2:DescribeVolumesModifications", "ec2:DescribeTags", "ec2:DescribeNetworkInterfaces"],
         "Resource": "*", "Condition": {"StringEquals": here}},
        {"Sid": "EKSClusterAccess", "Effect": "Allow", "Action": ["eks:DescribeAddon", "eks:DescribeAddonVersions", "eks:DescribeCluster", "eks:DescribeNodegroup",
                                                                   "eks:DescribePodIdentityAssociation", "eks:ListAddons", "eks:ListNodegroups",
                                                                   "eks:ListPodIdentityAssociations", "eks:ListTagsForResource", "eks:AccessKubernetesApi",
                                                                   "eks-auth:AssumeRoleForPodIdentity"],
         "Resource": f"arn:aws:eks:{region}:{account}:cluster/*", "Condition": {"StringEquals": {**here, "aws:ResourceAccount": account}}},
        {"Sid": "EKSAccessEntryPolicyAssociation", "Effect": "Allow", "Action": ["eks:AssociateAccessPolicy", "eks:DisassociateAccessPolicy"],
         "Resource": f"arn:aws:eks:{region}:{account}:access-entry/*",
         "Condition": {"StringEquals": {"eks:policyarn": "arn:aws:eks::aws:cluster-access-policy/AmazonSagemakerHyperpodInferenceMonitoringPolicy"}}},
        {"Sid": "ELBDescribeAccess", "Effect": "Allow", "Action": ["elasticloadbalancing:DescribeListeners", "elasticloadbalancing:DescribeLoadBalancers",
                                                                    "elasticloadbalancing:DescribeLoadBalancerAttributes", "elasticloadbalancing:DescribeRules",
                                                                    "elasticloadbalancing:DescribeTags", "elasticloadbalancing:DescribeTargetGroups",
                                                                    "elasticloadbalancing:DescribeTargetGroupAttributes", "elasticloadbalancing:DescribeTargetHealth"],
         "Resource": "*", "Condition": {"StringEquals": here}},
        {"Sid": "SageMakerRead", "Effect": "Allow", "Action": ["sagemaker:DescribeModel", "sagemaker:DescribeEndpointConfig", "sagemaker:DescribeEndpoint",
                                                               "sagemaker:DescribeCluster", "sagemaker:DescribeClusterInference", "sagemaker:UpdateClusterInference",
                                                               "sagemaker:ListModels", "sagemaker:ListTags"],
         "Resource": [f"{acct}:*/*", f"{acct}:*"], "Condition": {"StringEquals": here}},
        {"Sid": "SageMakerCreateTagged", "Effect": "Allow", "Action": ["sagemaker:CreateModel", "sagemaker:CreateEndpointConfig", "sagemaker:CreateEndpoint", "sagemaker:AddTags"],
         "Resource": sagemaker_arns, "Condition": {"StringEquals": {**here, "aws:RequestTag/CreatedBy": "HyperPodInference"}}},
        {"Sid": "SageMakerDeleteTagged", "Effect": "Allow", "Action": ["sagemaker:DeleteModel", "sagemaker:DeleteEndpointConfig", "sagemaker:DeleteEndpoint", "sagemaker:UpdateEndpoint"],
         "Resource": sagemaker_arns, "Condition": {"StringEquals": {**here, "aws:ResourceTag/CreatedBy": "HyperPodInference"}}},
        {"Sid": "ACMAccess", "Effect": "Allow", "Action": ["acm:ImportCertificate", "acm:DeleteCertificate", "acm:AddTagsToCertificate"],
         "Resource": f"arn:aws:acm:{region}:{account}:certificate/*"},
        {"Sid": "PassOwnRoleToSageMaker", "Effect": "Allow", "Action": ["iam:PassRole"], "Resource": role_arn,
         "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}},
        {"Sid": "CloudWatchMetrics", "Effect": "Allow", "Action": ["cloudwatch:PutMetricData"], "Resource": "*",
         "Condition": {"StringEquals": {**here, "cloudwatch:namespace": "HyperPodInference"}}},
        {"Sid": "CloudWatchLogs", "Effect": "Allow", "Action": ["logs:PutLogEvents", "logs:DescribeLogStreams", "logs:DescribeLogGroups", "logs:CreateLogStream", "logs:CreateLogGroup"],
         "Resource": [f"arn:aws:logs:{region}:{account}:log-group:*", f"arn:aws:logs:{region}:{account}:log-group:*:log-stream:*"]},
    ]
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


KEDA_POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ReadScalingMetrics",
                "Effect": "Allow",
                "Action": ["cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics", "cloudwatch:ListMetrics",
                           "aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata"],
                "Resource": "*",
            }
        ],
    }
)
"""KEDA's permissions: read the metrics autoscaling decides on (AWS's Terraform sample)."""


def weights_read_policy(bucket: str, prefix: str) -> str:
    """Read-only access of the S3 CSI driver to the weights prefix (Mountpoint needs ListBucket and GetObject)."""
    prefix = prefix.strip("/")
    objects = f"arn:aws:s3:::{bucket}/{prefix}/*" if prefix else f"arn:aws:s3:::{bucket}/*"
    statements: list[dict[str, Any]] = [
        {"Sid": "ListWeights", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}"},
        {"Sid": "ReadWeights", "Effect": "Allow", "Action": "s3:GetObject", "Resource": objects},
    ]
    if prefix:
        statements[0]["Condition"] = {"StringLike": {"s3:prefix": [f"{prefix}/*", prefix]}}
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


def addon_configuration(execution_role_arn: str, tls_bucket: str, hyperpod_cluster_arn: str, alb_role_arn: str, keda_role_arn: str) -> str:
    """``configurationValues`` of the inference add-on, in the shape of AWS's migration script."""
    return json.dumps(
        {
            "executionRoleArn": execution_role_arn,
            "tlsCertificateS3Bucket": tls_bucket,
            "hyperpodClusterArn": hyperpod_cluster_arn,
            "alb": {"enabled": True, "serviceAccount": {"create": True, "roleArn": alb_role_arn}},
            "keda": {"enabled": True, "auth": {"aws": {"irsa": {"enabled": True, "roleArn": keda_role_arn}}}},
        },
        sort_keys=True,
    )


@checked_component
class HyperPodInferenceOperator(pulumi.ComponentResource):
    """The Inference Operator add-on, its dependency add-ons, its roles and its TLS bucket.

    Attributes: :attr:`addon` (``aws.eks.Addon``), :attr:`dependency_addons`,
    :attr:`execution_role`, :attr:`tls_bucket`, :attr:`addon_versions`.
    Declare ``InferenceEndpointConfig`` objects with ``depends_on=[operator.addon]``.
    """

    def __init__(self, name: str, args: HyperPodInferenceOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate ``args`` and declare everything (nothing is declared when they are wrong)."""
        versions = validate(name, args)
        super().__init__("kimi-k3:index:HyperPodInferenceOperator", name, None, opts)
        if args.kubernetes_version is not None:
            versions = {
                addon: args.addon_versions.get(addon)
                or aws.eks.get_addon_version(
                    addon_name=addon, kubernetes_version=args.kubernetes_version, most_recent=False, opts=pulumi.InvokeOptions(parent=self)
                ).version
                for addon in versions
            }
        self.addon_versions = versions
        tags = dict(args.tags)
        child = pulumi.ResourceOptions(parent=self)

        self.tls_bucket = SecureBucket(f"{name}-tls", SecureBucketArgs(bucket_prefix="sagemaker-hyperpod-inference-tls-", tags=tags), opts=child)

        def role(key: str, namespace: str, service_account: str, sagemaker: bool = False, role_name: str | None = None) -> aws.iam.Role:
            trust = pulumi.Output.all(args.oidc_provider_arn, args.oidc_issuer).apply(
                lambda v: irsa_trust(v[0], v[1], namespace, service_account, sagemaker)
            )
            return aws.iam.Role(f"{name}-{key}", name=role_name, assume_role_policy=trust, description=f"IRSA role of {namespace}/{service_account}",
                                tags=tags, opts=child)

        # The add-on refuses an execution role whose name lacks the prefix; the name is set, not generated.
        self.execution_role = role("execution-role", OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT, sagemaker=True,
                                   role_name=args.execution_role_name or f"{EXECUTION_ROLE_PREFIX}-{name}")
        aws.iam.RolePolicy(
            f"{name}-execution-policy",
            role=self.execution_role.id,
            policy=pulumi.Output.all(args.account_id, self.tls_bucket.name, self.execution_role.arn).apply(
                lambda v: operator_policy(args.region, v[0], v[1], v[2])
            ),
            opts=child,
        )
        self.alb_role = role("alb-role", OPERATOR_NAMESPACE, ALB_SERVICE_ACCOUNT)
        aws.iam.RolePolicy(f"{name}-alb-policy", role=self.alb_role.id, policy=alb_policy_document(), opts=child)
        self.keda_role = role("keda-role", OPERATOR_NAMESPACE, KEDA_SERVICE_ACCOUNT, sagemaker=True)
        aws.iam.RolePolicy(f"{name}-keda-policy", role=self.keda_role.id, policy=KEDA_POLICY, opts=child)
        self.s3_csi_role = role("s3-csi-role", *S3_CSI_SERVICE_ACCOUNT)
        s3_grants: list[pulumi.Resource] = []
        if args.weights_bucket:
            s3_grants.append(
                aws.iam.RolePolicy(f"{name}-s3-csi-weights", role=self.s3_csi_role.id, policy=weights_read_policy(args.weights_bucket, args.weights_prefix), opts=child)
            )

        after_cluster = pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on))
        self.dependency_addons: dict[str, aws.eks.Addon] = {}
        for addon in DEPENDENCY_ADDONS:
            self.dependency_addons[addon] = aws.eks.Addon(
                f"{name}-{addon}",
                cluster_name=args.eks_cluster_name,
                addon_name=addon,
                addon_version=versions[addon],
                service_account_role_arn=self.s3_csi_role.arn if addon == "aws-mountpoint-s3-csi-driver" else None,
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, *s3_grants]) if addon == "aws-mountpoint-s3-csi-driver" else after_cluster,
            )
        configuration = pulumi.Output.all(
            self.execution_role.arn, self.tls_bucket.name, args.hyperpod_cluster_arn, self.alb_role.arn, self.keda_role.arn
        ).apply(lambda v: addon_configuration(*v))
        self.addon = aws.eks.Addon(
            f"{name}-operator",
            cluster_name=args.eks_cluster_name,
            addon_name=ADDON,
            addon_version=versions[ADDON],
            configuration_values=configuration,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, *self.dependency_addons.values(), *self.tls_bucket.ready]),
        )
        self.register_outputs({"addonVersion": versions[ADDON], "executionRoleArn": self.execution_role.arn, "tlsBucket": self.tls_bucket.name})


__all__ = [
    "ADDON",
    "DEFAULT_ADDON_VERSIONS",
    "DEPENDENCY_ADDONS",
    "EXECUTION_ROLE_PREFIX",
    "PINNED_ADDON_VERSIONS",
    "HyperPodInferenceOperator",
    "HyperPodInferenceOperatorArgs",
    "addon_configuration",
    "irsa_trust",
    "operator_policy",
    "weights_read_policy",
]
