"""A private S3 bucket with secure defaults, for the HyperPod path's own small buckets.

Used for the lifecycle scripts HyperPod runs on each node and for the TLS
certificates the HyperPod Inference Operator writes. Secure defaults, each a
separate resource so it is visible in the plan:

* every public-access block on (``BucketPublicAccessBlock``);
* object ownership ``BucketOwnerEnforced`` (ACLs disabled);
* default encryption SSE-S3 (AES256) or SSE-KMS with a given key, bucket keys on;
* versioning on (a replaced lifecycle script can be recovered);
* a bucket policy that denies every request not sent over TLS
  (``aws:SecureTransport`` false), as the S3 security best practices recommend.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.errors import UserError

_PREFIX = re.compile(r"^[a-z0-9][a-z0-9.-]{0,36}$")


@checked_args
@dataclass(frozen=True, kw_only=True)
class SecureBucketArgs:
    """Inputs of :class:`SecureBucket`."""

    bucket_prefix: str
    """Prefix of the generated bucket name (lowercase, at most 37 characters; S3 adds a unique suffix)."""
    kms_key_arn: pulumi.Input[str] | None = None
    """KMS key for SSE-KMS; ``None``: SSE-S3 (AES256)."""
    force_destroy: bool = True
    """Empty the bucket on ``pulumi destroy`` (it holds only what the stack put there)."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags on the bucket."""


def tls_only_policy(bucket_arn: str) -> str:
    """Bucket policy denying every S3 action on the bucket and its objects without TLS."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "DenyInsecureTransport",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [bucket_arn, f"{bucket_arn}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            ],
        }
    )


@checked_component
class SecureBucket(pulumi.ComponentResource):
    """A private, encrypted, versioned, TLS-only S3 bucket.

    Attributes: :attr:`bucket` (the ``aws.s3.Bucket``), :attr:`name` and :attr:`arn`
    (outputs), :attr:`ready` (resources to depend on before writing to it).
    """

    def __init__(self, name: str, args: SecureBucketArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate and declare the bucket and its settings.

        :raises UserError: for a prefix S3 would refuse.
        """
        if not isinstance(args.bucket_prefix, str) or not _PREFIX.match(args.bucket_prefix) or ".." in args.bucket_prefix:
            raise UserError(f"SecureBucket {name!r}: bucket_prefix {args.bucket_prefix!r} is not accepted; 1-37 lowercase letters, digits, '.' or '-'")
        super().__init__("kimi-k3:index:SecureBucket", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        self.bucket = aws.s3.Bucket(f"{name}-bucket", bucket_prefix=args.bucket_prefix, force_destroy=args.force_destroy, tags=tags, opts=child)
        block = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access-block",
            bucket=self.bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        ownership = aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=self.bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        sse = aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
            sse_algorithm="aws:kms" if args.kms_key_arn is not None else "AES256",
            kms_master_key_id=args.kms_key_arn,
        )
        encryption = aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption",
            bucket=self.bucket.id,
            rules=[aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(apply_server_side_encryption_by_default=sse, bucket_key_enabled=True)],
            opts=child,
        )
        versioning = aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=self.bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=child,
        )
        policy = aws.s3.BucketPolicy(
            f"{name}-tls-only",
            bucket=self.bucket.id,
            policy=self.bucket.arn.apply(tls_only_policy),
            # S3 refuses a policy change while the public-access block is being written.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[block]),
        )
        self.name: pulumi.Output[str] = self.bucket.bucket
        self.arn: pulumi.Output[str] = self.bucket.arn
        self.ready: list[pulumi.Resource] = [block, ownership, encryption, versioning, policy]
        self.register_outputs({"bucket": self.name, "arn": self.arn})


__all__ = ["SecureBucket", "SecureBucketArgs", "tls_only_policy"]
