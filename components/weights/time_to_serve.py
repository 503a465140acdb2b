"""The stack-level time-to-serve resources: :class:`TimeToServe` and its args (docs/weights.md).

It declares what the serving pods do not: ``WeightsBucket``, ``WeightsStagingJob``, the node-local
StorageClass with the local-static-provisioner and its node-cleanup controller, the image pre-pull
DaemonSet and the ECR pull-through cache rule (with the node role's policy). The stack builds its
args from the settings (:func:`kimi_k3.stack.time_to_serve.args_from_settings`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from kimi_k3.addons.gpu_plugins import PRIVILEGED_NAMESPACE_LABELS
from kimi_k3.cluster.kubernetes_provider import require_kubernetes_provider
from kimi_k3.core import catalog, labels
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.core.s3 import S3Prefix, as_prefix
from kimi_k3.errors import Problems
from kimi_k3.weights import engine_snapshot, image_pull, node_local
from kimi_k3.weights.bucket import WeightsBucket, WeightsBucketArgs
from kimi_k3.weights.image_pull import FLOATING_TAG_SKIP
from kimi_k3.weights.s3store import S3Location
from kimi_k3.weights.snapshot_agent import SnapshotAgent, SnapshotAgentArgs
from kimi_k3.weights.staging_job import WeightsStagingJob, WeightsStagingJobArgs

STORAGE_CLASS = "kimi-local-weights"
"""StorageClass of the node-local weight volumes."""


LOCAL_STORAGE_NAMESPACE = "kimi-local-storage"
"""Namespace of the local-static-provisioner (privileged: it mounts the discovery directory) and the node-cleanup controller."""


PREPULL_NAME = "engine-image-prepull"
"""Name of the pre-pull DaemonSet."""


PREPULL_NAMESPACE = "kimi-image-prepull"
"""Namespace of the pre-pull DaemonSet (Pod Security ``restricted``; apart from the serving namespace so it is declared before the server)."""


PULL_THROUGH_PREFIX = "docker-hub"
"""ECR repository prefix of the Docker Hub pull-through cache (``image_pull.through_cache`` rewrites to it)."""


NODE_CLEANUP_IMAGE_SKIP = (
    "CKV_K8S_43=the node-cleanup controller's release image is pinned by tag outside prod (kimi-k3:nodeCleanupImage); "
    "prod requires a digest (its digest cannot be resolved offline: mirror it and pin it)"
)


def prepull_annotations(image: str) -> dict[str, str]:
    """The pre-pull DaemonSet's annotations: no await (its pods come with the block's nodes), the reasoned checkov skips,
    and the floating-tag one for a tag-pinned image (settings allow it outside prod only)."""
    annotations = {"pulumi.com/skipAwait": "true", **image_pull.PREPULL_CHECKOV_SKIPS}
    if "@sha256:" not in image:
        annotations[f"checkov.io/skip{len(image_pull.PREPULL_CHECKOV_SKIPS) + 1}"] = FLOATING_TAG_SKIP
    return annotations


@checked_args
@dataclass(frozen=True)
class TimeToServeArgs:
    """Inputs of :class:`TimeToServe` (from the stack settings, by :func:`args_from_settings`)."""

    region: str
    """Stack region (bucket, staging Job, pull-through rule)."""
    cluster_name: pulumi.Input[str]
    """EKS cluster (Pod Identity association of the staging Job)."""
    engine_image: str
    """The serving image as the pods pull it (digest-pinned in prod; rewritten to the pull-through cache when one is set)."""
    instance_type: str
    """GPU instance type (the pre-pull DaemonSet's node selector)."""
    model_id: str
    """Hugging Face model id the staging Job copies (``modelId``); read only when ``staging_job`` is on."""
    revision: str
    """40-hex commit SHA the staging Job copies (``modelRevision``); its first 12 characters name the Job, so a new revision is a new Job."""
    weights_s3_uri: S3Prefix | str | None = None
    """Where the staging Job writes and its role may write (``weightsS3Uri``): the :class:`~kimi_k3.core.s3.S3Prefix` the stack passes (the
    serving contract's, parsed once), or ``s3://bucket/prefix/`` from one's own program, parsed once here by the same parser and handed to
    the Job as that ``S3Prefix``; required with ``staging_job``, unused otherwise."""
    sha256_manifest: str | None = None
    """Name of the ``sha256sum`` manifest the staging Job writes at the prefix's root (``weightsSha256Manifest``); ``None`` or ``""``: ``SHA256SUMS``."""
    bucket_name: str | None = None
    """Declare a ``WeightsBucket`` of that name."""
    kms_key_arn: str | None = None
    """KMS key of the weights: the declared bucket uses SSE-KMS with it (bucket key on), the staging Job's role may use it; ``None``: SSE-S3."""
    staging_job: bool = False
    """Declare the ``WeightsStagingJob`` copying ``model_id@revision`` into ``weights_s3_uri`` (after the bucket, when one is declared)."""
    allow_floating_tag: bool = False
    """The staging Job may run a tag-pinned image (outside prod)."""
    staging_image: str | None = None
    """Image of the staging Job (Python 3 and boto3; :mod:`kimi_k3.weights.system_disk` says why a small one); ``None``: ``engine_image``."""
    hugging_face_token: pulumi.Input[str] | None = None
    """Hugging Face token for gated repositories (a Pulumi secret), stored in a Secret for the staging Job only; ``None``: anonymous download, no Secret."""
    node_local_weights: bool = False
    """Declare the ``kimi-local-weights`` StorageClass, the local-static-provisioner on the GPU nodes and the node-cleanup controller."""
    node_cleanup_image: str = node_local.NODE_CLEANUP_IMAGE
    """Image of the node-cleanup controller (pinned by digest in prod)."""
    image_prepull: bool = False
    """Declare the pre-pull DaemonSet pulling ``engine_image`` on the GPU nodes of ``instance_type`` (namespace ``kimi-image-prepull``)."""
    pull_through_secret_arn: str | None = None
    """Docker Hub credentials (``ecr-pullthroughcache/`` secret ARN) of the ECR pull-through rule; ``None``: no rule, no node policy."""
    pull_through_prefix: str = PULL_THROUGH_PREFIX
    """ECR repository prefix of the pull-through rule (one rule per prefix in a registry: unique per stack sharing an account)."""
    node_role_name: pulumi.Input[str] | None = None
    """Name of the GPU nodes' IAM role (gets the pull-through policy)."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags on the ``WeightsBucket``; the other resources declared here get none of them."""
    snapshot_agent_image: str | None = None
    """Declare the engine snapshot agent (:class:`~kimi_k3.weights.snapshot_agent.SnapshotAgent`) with this image on the GPU nodes of
    ``instance_type``; ``None``: no agent (the serving pods' ``ServingStartup.engine_snapshot`` needs one)."""
    gpus: int = 8
    """GPUs of an engine (the agent's driver floor: multi-GPU from 2); read only with ``snapshot_agent_image``."""
    engine_snapshot_s3_uri: str | None = None
    """``s3://bucket/prefix/`` of the engine snapshots' S3 copies (:mod:`kimi_k3.weights.snapshot_copy`): when ``bucket_name`` is that
    bucket, its lifecycle expires them after :data:`~kimi_k3.weights.engine_snapshot.S3_COPY_EXPIRY_DAYS`; ``None``: no copies."""

    def __post_init__(self) -> None:
        if self.weights_s3_uri is not None:
            object.__setattr__(self, "weights_s3_uri", as_prefix(self.weights_s3_uri, owner="time to serve", field="weights_s3_uri", role="the staging Job's role"))


def check_args(problems: Problems, args: TimeToServeArgs) -> None:
    """Add to ``problems`` what :class:`TimeToServe` cannot declare with ``args`` (its parts' own rules: the staging Job's prefix,
    the node-cleanup image, the pull-through rule's prefix), before anything is declared."""
    if args.staging_job and args.weights_s3_uri is None:
        problems.add("weights_s3_uri", "weights_s3_uri is required for the staging Job (a declared bucket_name does not say which prefix to write)")
    cleanup_problem = node_local.cleanup_image_problem(args.node_cleanup_image)
    if cleanup_problem:
        problems.reject("node_cleanup_image", args.node_cleanup_image, cleanup_problem)
    if args.pull_through_secret_arn and not image_pull.valid_prefix(args.pull_through_prefix):
        problems.reject("pull_through_prefix", args.pull_through_prefix, image_pull.PREFIX_ACCEPTED)


def snapshot_copy_expiry(args: TimeToServeArgs) -> dict[str, int]:
    """``{prefix: days}`` of the snapshot copies when the declared bucket holds them (its lifecycle's rule), else ``{}``."""
    if args.engine_snapshot_s3_uri is None or not args.bucket_name:
        return {}
    location = S3Location.parse(args.engine_snapshot_s3_uri)
    return {location.prefix: engine_snapshot.S3_COPY_EXPIRY_DAYS} if location.bucket == args.bucket_name else {}


def declares_anything(args: TimeToServeArgs) -> bool:
    """Whether :class:`TimeToServe` would declare a resource."""
    return bool(args.bucket_name or args.staging_job or args.node_local_weights or args.image_prepull or args.pull_through_secret_arn or args.snapshot_agent_image)


@checked_component
class TimeToServe(pulumi.ComponentResource):
    """The stack-level time-to-serve resources (see the module docstring). Kubernetes provider through ``opts``.

    Attributes: ``bucket``, ``staging_job``, ``storage_class``, ``provisioner``, ``node_cleanup``,
    ``snapshot_agent``, ``prepull``, ``pull_through_rule`` (each ``None`` when off).
    """

    def __init__(self, name: str, args: TimeToServeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Declare the time-to-serve resources ``args`` turns on: ``name`` prefixes every child's name, ``args`` as on :class:`TimeToServeArgs`,
        ``opts`` the usual resource options (a Kubernetes provider is required)."""
        problems = Problems("TimeToServe", name)
        require_kubernetes_provider(problems, opts)
        check_args(problems, args)
        problems.raise_any()
        super().__init__("kimi-k3:index:TimeToServe", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.bucket: WeightsBucket | None = None
        if args.bucket_name:
            self.bucket = WeightsBucket(f"{name}-bucket", WeightsBucketArgs(bucket_name=args.bucket_name, kms_key_arn=args.kms_key_arn, tags=dict(args.tags),
                                                                            expiring_prefixes=snapshot_copy_expiry(args)), opts=child)
        self.staging_job: WeightsStagingJob | None = None
        if args.staging_job:
            assert args.weights_s3_uri is not None  # refused above
            self.staging_job = WeightsStagingJob(
                f"{name}-stage",
                WeightsStagingJobArgs(
                    image=args.staging_image or args.engine_image, model_id=args.model_id, revision=args.revision, s3_uri=args.weights_s3_uri,
                    cluster_name=args.cluster_name,
                    aws_region=args.region, sha256_manifest=args.sha256_manifest or "SHA256SUMS", hugging_face_token=args.hugging_face_token,
                    kms_key_arn=args.kms_key_arn, allow_floating_tag=args.allow_floating_tag,
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.bucket] if self.bucket else None),
            )
        self.storage_class: k8s.storage.v1.StorageClass | None = None
        self.provisioner: k8s.helm.v3.Release | None = None
        self.node_cleanup: k8s.apps.v1.Deployment | None = None
        if args.node_local_weights:
            self._node_local_storage(name, args.node_cleanup_image)
        self.snapshot_agent: SnapshotAgent | None = None
        if args.snapshot_agent_image:
            self.snapshot_agent = SnapshotAgent(
                f"{name}-snapshot-agent",
                SnapshotAgentArgs(image=args.snapshot_agent_image, instance_type=args.instance_type, gpus=args.gpus, allow_floating_tag=args.allow_floating_tag), opts=child,
            )
        self.prepull: k8s.apps.v1.DaemonSet | None = None
        if args.image_prepull:
            pod_labels = {"app.kubernetes.io/name": PREPULL_NAME, "app.kubernetes.io/part-of": "kimi-k3"}
            restricted = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}
            prepull_ns = k8s.core.v1.Namespace(
                f"{name}-prepull-namespace", metadata=k8s.meta.v1.ObjectMetaArgs(name=PREPULL_NAMESPACE, labels={"app.kubernetes.io/part-of": "kimi-k3", **restricted}), opts=child,
            )
            self.prepull = k8s.apps.v1.DaemonSet(
                f"{name}-prepull",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=PREPULL_NAME, namespace=PREPULL_NAMESPACE, labels=pod_labels, annotations=prepull_annotations(args.engine_image)),
                spec=image_pull.prepull_daemonset_spec(args.engine_image, pod_labels, args.instance_type),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[prepull_ns]),
            )
        self.pull_through_rule: aws.ecr.PullThroughCacheRule | None = None
        if args.pull_through_secret_arn:
            self._pull_through(name, args)
        self.register_outputs({})

    def _node_local_storage(self, name: str, cleanup_image: str) -> None:
        """StorageClass, the local-static-provisioner (Helm chart) on the GPU nodes, the node-cleanup controller on the system nodes."""
        child = pulumi.ResourceOptions(parent=self)
        storage_class = k8s.storage.v1.StorageClass(f"{name}-storage-class", **node_local.storage_class_args(STORAGE_CLASS), opts=child)
        self.storage_class = storage_class
        namespace = k8s.core.v1.Namespace(
            f"{name}-local-storage-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=LOCAL_STORAGE_NAMESPACE, labels={"app.kubernetes.io/part-of": "kimi-k3", **PRIVILEGED_NAMESPACE_LABELS}),
            opts=child,
        )
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[namespace])
        chart = catalog.LOCAL_STATIC_PROVISIONER_CHART
        toleration = dict(labels.GPU_TOLERATION)
        self.provisioner = k8s.helm.v3.Release(
            f"{name}-local-static-provisioner",
            k8s.helm.v3.ReleaseArgs(
                name=chart.name, chart=chart.name, version=chart.version, repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository),
                namespace=LOCAL_STORAGE_NAMESPACE, create_namespace=False,
                values=node_local.provisioner_values(STORAGE_CLASS, node_selector=dict(labels.GPU_NODE_SELECTOR), tolerations=[toleration]),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace, storage_class]),
        )
        sa = "local-volume-node-cleanup"
        common = {"app.kubernetes.io/part-of": "kimi-k3", "app.kubernetes.io/name": sa}
        account = k8s.core.v1.ServiceAccount(f"{name}-node-cleanup-sa", metadata=k8s.meta.v1.ObjectMetaArgs(name=sa, namespace=LOCAL_STORAGE_NAMESPACE, labels=common), opts=in_ns)
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-node-cleanup-role",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=sa, labels=common),
            rules=[k8s.rbac.v1.PolicyRuleArgs(**rule) for rule in node_local.NODE_CLEANUP_RULES],
            opts=child,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-node-cleanup-binding",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=sa, labels=common),
            role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=sa),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=sa, namespace=LOCAL_STORAGE_NAMESPACE)],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role, account]),
        )
        skips = {**node_local.NODE_CLEANUP_CHECKOV_SKIPS, **({} if "@sha256:" in cleanup_image else {"checkov.io/skip2": NODE_CLEANUP_IMAGE_SKIP})}
        self.node_cleanup = k8s.apps.v1.Deployment(
            f"{name}-node-cleanup",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=sa, namespace=LOCAL_STORAGE_NAMESPACE, labels=common, annotations=skips),
            spec=node_local.node_cleanup_deployment_spec(sa, image=cleanup_image, storage_class=STORAGE_CLASS, node_selector=dict(labels.SYSTEM_NODE_LABELS)),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace, account]),
        )

    def _pull_through(self, name: str, args: TimeToServeArgs) -> None:
        """The ECR pull-through cache rule for Docker Hub, and what the node role needs to pull through it."""
        assert args.pull_through_secret_arn is not None
        child = pulumi.ResourceOptions(parent=self)
        self.pull_through_rule = aws.ecr.PullThroughCacheRule(f"{name}-docker-hub-cache", image_pull.pull_through_cache_rule_args(args.pull_through_secret_arn, args.pull_through_prefix), opts=child)
        if args.node_role_name is None:
            return
        account = args.pull_through_secret_arn.split(":")[4]
        partition = args.pull_through_secret_arn.split(":")[1]
        aws.iam.RolePolicy(
            f"{name}-node-pull-through",
            role=args.node_role_name,
            policy=json.dumps(image_pull.pull_through_node_policy(account, args.region, args.pull_through_prefix, partition)),
            opts=child,
        )


__all__ = [
    "LOCAL_STORAGE_NAMESPACE",
    "PREPULL_NAME",
    "PREPULL_NAMESPACE",
    "PULL_THROUGH_PREFIX",
    "STORAGE_CLASS",
    "TimeToServe",
    "TimeToServeArgs",
    "check_args",
    "declares_anything",
    "prepull_annotations",
    "snapshot_copy_expiry",
]
