"""``WeightsBucket``: an S3 bucket for staged weights (and compile caches) with secure defaults.

Public access blocked (all four switches), bucket-owner-enforced ownership (no ACLs), default
encryption (SSE-S3, or SSE-KMS with a bucket key when a key is given), a bucket policy that
denies any request not made over TLS (``aws:SecureTransport``), versioning, and a lifecycle
that aborts multipart uploads left unfinished after ``abort_incomplete_days`` (an interrupted
stager's parts cost storage until then) and expires noncurrent versions. Never destroyed by
accident: ``protect`` is on unless the caller turns it off.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.errors import UserError
from kimi_k3.weights.secure_bucket import tls_only_policy

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@checked_args
@dataclass(frozen=True)
class WeightsBucketArgs:
    """Inputs of :class:`WeightsBucket`."""

    bucket_name: str
    """Globally unique bucket name (in the stack's region)."""
    kms_key_arn: pulumi.Input[str] | None = None
    """KMS key for SSE-KMS (bucket key on); ``None`` = SSE-S3."""
    abort_incomplete_days: int = 7
    """Days after which unfinished multipart uploads are aborted."""
    noncurrent_version_days: int = 30
    """Days a replaced or deleted object version is kept."""
    expiring_prefixes: Mapping[str, int] = field(default_factory=dict)
    """Key prefixes (``a/b/``) whose objects S3 expires that many days after their creation, one lifecycle rule each (the engine
    snapshots' S3 copies: :data:`kimi_k3.weights.engine_snapshot.S3_COPY_EXPIRY_DAYS`). A bucket has one lifecycle configuration,
    which ``PutBucketLifecycleConfiguration`` replaces whole (Amazon S3 API reference), so every rule lives in this one resource."""
    protect: bool = True
    """Refuse to delete the bucket from Pulumi (1.56 TB takes hours to stage again)."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags on the bucket."""


def validate(args: WeightsBucketArgs) -> None:
    """Refuse a bucket S3 would refuse (name rules) or a lifecycle out of bounds, as one line naming the field."""
    if not _BUCKET.match(args.bucket_name or "") or ".." in args.bucket_name:
        raise UserError(f"weights bucket: bucket_name {args.bucket_name!r} is not accepted; expected 3-63 lower-case letters, digits, '.' or '-'")
    if not 1 <= args.abort_incomplete_days <= 365 or not 1 <= args.noncurrent_version_days <= 3650:
        raise UserError("weights bucket: abort_incomplete_days must be 1-365 and noncurrent_version_days 1-3650")
    for prefix, days in args.expiring_prefixes.items():
        if not prefix.endswith("/") or prefix.startswith("/") or not 1 <= days <= 3650:
            raise UserError(f"weights bucket: expiring_prefixes {prefix!r}: {days!r} is not accepted; expected a key prefix ending with '/' and 1-3650 days")


@checked_component
class WeightsBucket(pulumi.ComponentResource):
    """The bucket the weights and compile caches live in. Outputs: ``bucket_name``, ``bucket_arn``."""

    def __init__(self, name: str, args: WeightsBucketArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Declare the bucket: ``name`` prefixes every child's name, ``args`` as on :class:`WeightsBucketArgs`, ``opts`` the usual resource options."""
        validate(args)
        super().__init__("kimi-k3:index:WeightsBucket", name, None, opts)
        self.bucket = aws.s3.Bucket(f"{name}-bucket", bucket=args.bucket_name, force_destroy=False, tags={"kimi-k3/component": "weights", **args.tags}, opts=pulumi.ResourceOptions(parent=self, protect=args.protect))
        after = pulumi.ResourceOptions(parent=self, depends_on=[self.bucket])
        self.public_access = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access", bucket=self.bucket.id, block_public_acls=True, block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=True, opts=after
        )
        aws.s3.BucketOwnershipControls(f"{name}-ownership", bucket=self.bucket.id, rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"), opts=after)
        by_default = (
            aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(sse_algorithm="aws:kms", kms_master_key_id=args.kms_key_arn)
            if args.kms_key_arn is not None
            else aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(sse_algorithm="AES256")
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption", bucket=self.bucket.id,
            rules=[aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(apply_server_side_encryption_by_default=by_default, bucket_key_enabled=args.kms_key_arn is not None)],
            opts=after,
        )
        versioning = aws.s3.BucketVersioning(f"{name}-versioning", bucket=self.bucket.id, versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"), opts=after)
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle",
            bucket=self.bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="abort-incomplete-uploads-expire-old-versions",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(days_after_initiation=args.abort_incomplete_days),
                    noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(noncurrent_days=args.noncurrent_version_days),
                ),
                *(aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id=f"expire-{prefix.strip('/').replace('/', '-')}"[:255],
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=prefix),
                    expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(days=days),
                ) for prefix, days in sorted(args.expiring_prefixes.items())),
            ],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]),
        )
        aws.s3.BucketPolicy(f"{name}-tls-only", bucket=self.bucket.id, policy=self.bucket.arn.apply(tls_only_policy), opts=pulumi.ResourceOptions(parent=self, depends_on=[self.public_access]))
        self.bucket_name = self.bucket.bucket
        self.bucket_arn = self.bucket.arn
        self.register_outputs({"bucketName": self.bucket_name, "bucketArn": self.bucket_arn})
