"""``WeightsStagingJob``: the in-cluster copy of the pinned revision into the stack's S3 prefix.

Runs before the block, on the **system nodes** (no GPU time), in AWS and in the stack's
region (the cluster's), as a Kubernetes Job:

* its own namespace (Pod Security ``restricted``), ServiceAccount and EKS Pod Identity role
  whose policy (:func:`staging_policy`) can write only the weights prefix;
* a ConfigMap carrying the project's stdlib + boto3 staging modules (:mod:`.pod_files`),
  run with ``python3 -m kimi_k3.weights.podmain stage`` in a digest-pinned image that has
  Python 3 and boto3 — by default the stack's own engine image (vLLM's image installs boto3,
  vllm-project/vllm ``docker/Dockerfile`` stage ``vllm-openai-base``), already pinned and, in
  prod, mirrored into ECR;
* NetworkPolicies: no ingress; egress to DNS, HTTPS (Hugging Face, S3) and the Pod Identity Agent.

The Job is resumable (``backoffLimit`` retries resume where the last attempt stopped) and its
name carries the revision, so a new revision is a new Job. ``pulumi up`` does not wait for it
(``pulumi.com/skipAwait``); ``kimi-k3 weights stage STACK --wait`` follows the prefix.

Kubernetes provider: through ``opts`` (``providers={"kubernetes": provider}``), as every
component (:mod:`kimi_k3.cluster.kubernetes_provider`); the AWS role uses the AWS provider the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.cluster.image_reference import image_reference_problem
from kimi_k3.cluster.kubernetes_provider import require_kubernetes_provider
from kimi_k3.cluster.pod_identity import PodIdentityRole, PodIdentityRoleArgs
from kimi_k3.cluster.pod_security import RUN_AS_USER, container_security_context
from kimi_k3.core import labels
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.core.formats import DNS_LABEL, GIT_REVISION
from kimi_k3.core.s3 import S3Prefix, as_prefix
from kimi_k3.errors import Problems, UserError
from kimi_k3.weights import pod_files
from kimi_k3.weights.manifest import DEFAULT_SHA256SUMS
from kimi_k3.weights.stage import STAGING_NAMESPACE, job_name

POD_IDENTITY_AGENT_CIDR = "169.254.170.23/32"
"""EKS Pod Identity Agent (link-local); the pod gets its credentials there."""


def staging_policy(bucket: str, prefix: str, partition: str = "aws", kms_key_arn: str | None = None) -> dict:
    """IAM policy that can write (and read back) objects under ``prefix`` only, and list only under it.

    ``ListBucketMultipartUploads`` (to abort an interrupted run's uploads) is granted on the bucket:
    it reveals upload keys and ids only; aborting needs ``s3:AbortMultipartUpload``, which is
    scoped to the prefix like every object action.
    """
    objects = f"arn:{partition}:s3:::{bucket}/{prefix}*"
    bucket_arn = f"arn:{partition}:s3:::{bucket}"
    statements: list[dict[str, Any]] = [
        {
            "Sid": "WriteWeightsPrefix",
            "Effect": "Allow",
            "Action": ["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
            "Resource": [objects],
        },
        {"Sid": "ListWeightsPrefix", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn], "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*"]}}},
        {"Sid": "FindUnfinishedUploads", "Effect": "Allow", "Action": ["s3:ListBucketMultipartUploads"], "Resource": [bucket_arn]},
    ]
    if kms_key_arn:
        statements.append({"Sid": "EncryptWeights", "Effect": "Allow", "Action": ["kms:GenerateDataKey", "kms:Decrypt"], "Resource": [kms_key_arn]})
    return {"Version": "2012-10-17", "Statement": statements}


@checked_args
@dataclass(frozen=True)
class WeightsStagingJobArgs:
    """Inputs of :class:`WeightsStagingJob`."""

    image: str
    """Image with Python 3 and boto3, pinned by digest (``repo@sha256:…``); the engine image by default in Platform."""
    model_id: str
    """Hugging Face model id."""
    revision: str
    """40-hex commit SHA to stage."""
    s3_uri: S3Prefix | str
    """Where to stage into (the stack's ``weightsS3Uri``): the :class:`~kimi_k3.core.s3.S3Prefix` the stack passes (parsed once, by the
    serving contract), or ``s3://bucket/prefix/`` from one's own program, parsed once here by the same parser; an ``S3Prefix`` once built."""
    cluster_name: pulumi.Input[str]
    """EKS cluster (Pod Identity association)."""
    aws_region: str
    """Region of the bucket and the cluster."""
    sha256_manifest: str = DEFAULT_SHA256SUMS
    """Name of the ``sha256sum`` manifest written at the prefix's root."""
    hugging_face_token: pulumi.Input[str] | None = None
    """Token for gated repositories (Pulumi secret); reaches the pod via ``secretKeyRef`` only."""
    hf_endpoint: str | None = None
    """Hugging Face endpoint (``HF_ENDPOINT``); default the public Hub."""
    aws_partition: str = "aws"
    """Partition of the S3 ARNs."""
    kms_key_arn: pulumi.Input[str] | None = None
    """KMS key of an SSE-KMS bucket."""
    namespace: str = STAGING_NAMESPACE
    """Namespace created for the Job."""
    workers: int = 4
    """Files copied at once (each holds up to four 64 MiB parts in memory)."""
    cpu: str = "2"
    """CPU request and limit (hashing and TLS: ~1 core per 300-500 MB/s)."""
    memory: str = "6Gi"
    """Memory request and limit."""
    active_deadline_s: int = 12 * 3600
    """Give up after this long (1.56 TB at ~100 MB/s from the Hub is ~4.5 h)."""
    backoff_limit: int = 4
    """Pod retries; each resumes where the previous one stopped."""
    allow_floating_tag: bool = False
    """Accept an image without a digest (dev only)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels on every object."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "s3_uri", as_prefix(self.s3_uri, owner="weights staging job", field="s3_uri", role="the role"))

    @property
    def location(self) -> S3Prefix:
        """:attr:`s3_uri` as parsed (the constructor made it an :class:`~kimi_k3.core.s3.S3Prefix`)."""
        assert isinstance(self.s3_uri, S3Prefix)
        return self.s3_uri


def image_problem(image: str, allow_floating_tag: bool) -> str | None:
    """What is wrong with ``image`` as the staging Job's image (``WeightsStagingJobArgs.image``, the settings'
    ``weightsStagingImage``), as the end of a sentence about it; ``None``: accepted. An image reference with a tag or a
    digest (the serving contract's parser), pinned by digest unless ``allow_floating_tag`` (outside prod)."""
    if image_reference_problem(image):
        return "is not accepted; expected repo:tag or repo@sha256:<64 hex>"
    if "@sha256:" not in image and not allow_floating_tag:
        return "is not pinned by digest; expected repo@sha256:<64 hex> (or allow_floating_tag=True outside prod)"
    return None


def check_inputs(*, revision: str, image: str, allow_floating_tag: bool) -> None:
    """The staging Job's rules on what it copies and with which image (the one home: :func:`validate` and the settings call it).
    The prefix is typed: :class:`WeightsStagingJobArgs` holds an :class:`~kimi_k3.core.s3.S3Prefix`, parsed once."""
    what = "weights staging job"
    if not GIT_REVISION.fullmatch(revision or ""):
        raise UserError(f"{what}: revision {revision!r} is not accepted; expected the 40-hex commit SHA")
    problem = image_problem(image, allow_floating_tag)
    if problem:
        raise UserError(f"{what}: image {image!r} {problem}")


def validate(args: WeightsStagingJobArgs) -> None:
    """Refuse what cannot work, before anything is declared (one line naming the field)."""
    what = "weights staging job"
    check_inputs(revision=args.revision, image=args.image, allow_floating_tag=args.allow_floating_tag)
    if not DNS_LABEL.match(args.namespace):
        raise UserError(f"{what}: namespace {args.namespace!r} is not a DNS label")
    if not 1 <= args.workers <= 64:
        raise UserError(f"{what}: workers {args.workers!r} is not accepted; expected 1 to 64")
    if args.hf_endpoint is not None and not re.match(r"^https://[^/\s]+", args.hf_endpoint):
        raise UserError(f"{what}: hf_endpoint {args.hf_endpoint!r} is not accepted; expected https://host")


def stage_container(args: WeightsStagingJobArgs, token_secret: str | None) -> k8s.core.v1.ContainerArgs:
    """The container that runs the stager (environment only; no secret in the spec)."""
    env = {
        **pod_files.POD_ENV,
        "HOME": "/tmp",
        "AWS_REGION": args.aws_region,
        "MODEL_ID": args.model_id,
        "MODEL_REVISION": args.revision,
        "WEIGHTS_S3_URI": args.location.uri,
        "SHA256_MANIFEST": args.sha256_manifest,
        "STAGE_WORKERS": str(args.workers),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    if args.hf_endpoint:
        env["HF_ENDPOINT"] = args.hf_endpoint
    env_vars = [k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in env.items()]
    if token_secret:
        env_vars.append(k8s.core.v1.EnvVarArgs(name="HF_TOKEN", value_from=k8s.core.v1.EnvVarSourceArgs(secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(name=token_secret, key="key"))))
    resources = {"cpu": args.cpu, "memory": args.memory, "ephemeral-storage": "2Gi"}
    return k8s.core.v1.ContainerArgs(
        name="stage",
        image=args.image,
        image_pull_policy="IfNotPresent" if "@sha256:" in args.image else "Always",
        command=["python3", "-m", "kimi_k3.weights.podmain", "stage"],
        env=env_vars,
        resources=k8s.core.v1.ResourceRequirementsArgs(requests=resources, limits=resources),
        security_context=container_security_context(),
        volume_mounts=[
            k8s.core.v1.VolumeMountArgs(name="code", mount_path=pod_files.MOUNT_PATH, read_only=True),
            k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp"),
        ],
    )


def job_spec(args: WeightsStagingJobArgs, service_account: str, config_map: str, token_secret: str | None, pod_labels: Mapping[str, str]) -> k8s.batch.v1.JobSpecArgs:
    """The Job: one pod at a time on the system nodes, retried (resuming) up to ``backoff_limit``."""
    return k8s.batch.v1.JobSpecArgs(
        backoff_limit=args.backoff_limit,
        active_deadline_seconds=args.active_deadline_s,
        ttl_seconds_after_finished=7 * 24 * 3600,
        completions=1,
        parallelism=1,  # one stager per prefix: a second one would abort the first one's uploads
        template=k8s.core.v1.PodTemplateSpecArgs(
            metadata=k8s.meta.v1.ObjectMetaArgs(labels=dict(pod_labels), annotations={"kimi-k3.io/code-sha256": pod_files.content_hash()}),
            spec=k8s.core.v1.PodSpecArgs(
                restart_policy="Never",
                service_account_name=service_account,
                automount_service_account_token=False,
                enable_service_links=False,
                node_selector=dict(labels.SYSTEM_NODE_LABELS),
                security_context=k8s.core.v1.PodSecurityContextArgs(
                    run_as_non_root=True, run_as_user=RUN_AS_USER, run_as_group=RUN_AS_USER, fs_group=RUN_AS_USER,
                    seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
                ),
                containers=[stage_container(args, token_secret)],
                volumes=[
                    pod_files.volume("code", config_map),
                    k8s.core.v1.VolumeArgs(name="tmp", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="2Gi")),
                ],
            ),
        ),
    )


@checked_component
class WeightsStagingJob(pulumi.ComponentResource):
    """Copy ``model_id@revision`` into ``s3_uri`` from the system nodes, with a role that writes only that prefix.

    Outputs: ``job_name``, ``namespace``, ``role_arn``.
    """

    def __init__(self, name: str, args: WeightsStagingJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Declare the Job and what it needs: ``name`` prefixes every child's name, ``args`` as on :class:`WeightsStagingJobArgs`,
        ``opts`` the usual resource options (a Kubernetes provider is required)."""
        validate(args)
        problems = Problems("WeightsStagingJob", name)
        require_kubernetes_provider(problems, opts)
        problems.raise_any()
        super().__init__("kimi-k3:index:WeightsStagingJob", name, None, opts)
        bucket, prefix = args.location.bucket, args.location.prefix
        common = {"app.kubernetes.io/part-of": "kimi-k3", "app.kubernetes.io/managed-by": "pulumi", "app.kubernetes.io/name": "weights-stage", **args.labels}
        ns = args.namespace
        k8s_opts = pulumi.ResourceOptions(parent=self)
        self.namespace_resource = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=ns, labels={**common, **{f"pod-security.kubernetes.io/{m}": "restricted" for m in ("enforce", "audit", "warn")}}),
            opts=k8s_opts,
        )
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace_resource])
        sa = "weights-stage"
        self.service_account = k8s.core.v1.ServiceAccount(f"{name}-service-account", metadata=k8s.meta.v1.ObjectMetaArgs(name=sa, namespace=ns, labels=common), automount_service_account_token=False, opts=in_ns)
        document = pulumi.Output.from_input(args.kms_key_arn).apply(lambda key: json.dumps(staging_policy(bucket, prefix, args.aws_partition, key)))
        self.role = PodIdentityRole(
            f"{name}-role",
            PodIdentityRoleArgs(cluster_name=args.cluster_name, namespace=ns, service_account=sa, inline_policies={"write-weights-prefix": document}, tags={"kimi-k3/component": "weights-stage"}),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.config_map = k8s.core.v1.ConfigMap(f"{name}-code", metadata=k8s.meta.v1.ObjectMetaArgs(name="weights-stage-code", namespace=ns, labels=common), data=pod_files.config_map_data(), opts=in_ns)
        token_secret = None
        if args.hugging_face_token is not None:
            token_secret = "weights-stage-hf-token"
            k8s.core.v1.Secret(token_secret, metadata=k8s.meta.v1.ObjectMetaArgs(name=token_secret, namespace=ns, labels=common), type="Opaque", string_data={"key": pulumi.Output.secret(args.hugging_face_token)}, opts=in_ns)
        np = k8s.networking.v1
        k8s.networking.v1.NetworkPolicy(
            f"{name}-egress",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="weights-stage", namespace=ns, labels=common),
            spec=np.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(),
                policy_types=["Ingress", "Egress"],
                egress=[
                    np.NetworkPolicyEgressRuleArgs(
                        to=[np.NetworkPolicyPeerArgs(namespace_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"kubernetes.io/metadata.name": "kube-system"}), pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"k8s-app": "kube-dns"}))],
                        ports=[np.NetworkPolicyPortArgs(port=53, protocol="UDP"), np.NetworkPolicyPortArgs(port=53, protocol="TCP")],
                    ),
                    np.NetworkPolicyEgressRuleArgs(to=[np.NetworkPolicyPeerArgs(ip_block=np.IPBlockArgs(cidr="0.0.0.0/0"))], ports=[np.NetworkPolicyPortArgs(port=443, protocol="TCP")]),
                    np.NetworkPolicyEgressRuleArgs(to=[np.NetworkPolicyPeerArgs(ip_block=np.IPBlockArgs(cidr=POD_IDENTITY_AGENT_CIDR))], ports=[np.NetworkPolicyPortArgs(port=80, protocol="TCP")]),
                ],
            ),
            opts=in_ns,
        )
        name_of_job = job_name(args.revision)
        skip = {
            "pulumi.com/skipAwait": "true",
            # the image has no USER/HEALTHCHECK of ours; a batch Job needs no probes
            "checkov.io/skip1": "CKV_K8S_8=a batch Job that exits when done has no liveness to probe",
            "checkov.io/skip2": "CKV_K8S_9=a batch Job serves nothing, so there is no readiness to probe",
            "checkov.io/skip3": "CKV_K8S_35=the Hugging Face token reaches the stager as HF_TOKEN from a secretKeyRef, as huggingface_hub reads it",
        }
        self.job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name_of_job, namespace=ns, labels=common, annotations=skip),
            spec=job_spec(args, sa, "weights-stage-code", token_secret, common),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.namespace_resource, self.config_map, self.role], delete_before_replace=True),
        )
        self.job_name = pulumi.Output.from_input(name_of_job)
        self.namespace = pulumi.Output.from_input(ns)
        self.role_arn = self.role.role_arn
        self.register_outputs({"jobName": self.job_name, "namespace": self.namespace, "roleArn": self.role_arn})
