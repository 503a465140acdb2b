"""WeightsBucket under the offline engine: every secure default is declared on the bucket."""

from __future__ import annotations

import json

import pulumi
import pytest

from kimi_k3 import offline
from kimi_k3.errors import UserError
from kimi_k3.weights.bucket import WeightsBucket, WeightsBucketArgs
from kimi_k3.weights.secure_bucket import tls_only_policy
from tests.conftest import NOW


def render(**changes) -> offline.PlanResult:
    def program() -> None:
        b = WeightsBucket("weights", WeightsBucketArgs(**{"bucket_name": "acme-ml-weights-us-west-2", **changes}))
        pulumi.export("bucket", b.bucket_name)

    return offline.OfflineEngine(now=NOW).run(program)


def by_type(plan, token):
    return [r for r in plan.resources if r.type == token]


def test_public_access_blocked_encrypted_versioned_tls_only_and_unfinished_uploads_aborted():
    plan = render()
    (pab,) = by_type(plan, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert all(pab.inputs[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    (enc,) = by_type(plan, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    assert enc.inputs["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "AES256"
    (ver,) = by_type(plan, "aws:s3/bucketVersioning:BucketVersioning")
    assert ver.inputs["versioningConfiguration"]["status"] == "Enabled"
    (life,) = by_type(plan, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
    assert life.inputs["rules"][0]["abortIncompleteMultipartUpload"]["daysAfterInitiation"] == 7
    (own,) = by_type(plan, "aws:s3/bucketOwnershipControls:BucketOwnershipControls")
    assert own.inputs["rule"]["objectOwnership"] == "BucketOwnerEnforced"
    (pol,) = by_type(plan, "aws:s3/bucketPolicy:BucketPolicy")
    statement = json.loads(pol.inputs["policy"])["Statement"][0]
    assert statement["Effect"] == "Deny" and statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    (bucket,) = by_type(plan, "aws:s3/bucket:Bucket")
    assert bucket.inputs["forceDestroy"] is False


def test_a_kms_key_switches_to_sse_kms_with_a_bucket_key():
    plan = render(kms_key_arn="arn:aws:kms:us-west-2:210987654321:key/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0")
    (enc,) = by_type(plan, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    rule = enc.inputs["rules"][0]
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms" and rule["bucketKeyEnabled"] is True


def test_bad_names_are_refused():
    with pytest.raises(UserError, match="bucket_name 'Acme_Weights'"):
        render(bucket_name="Acme_Weights")


def test_the_tls_policy_covers_bucket_and_objects():
    doc = json.loads(tls_only_policy("arn:aws:s3:::b"))
    assert doc["Statement"][0]["Resource"] == ["arn:aws:s3:::b", "arn:aws:s3:::b/*"]
