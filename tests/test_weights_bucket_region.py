"""The preflight reads the weights bucket's region: a bucket in another region than the stack warns with its cost.

Issue 24, point 4: the region of a bucket cannot be known offline, so ``kimi-k3 capacity preflight`` (which
already talks to AWS) reads it with ``GetBucketLocation``, checked here with ``botocore.stub.Stubber``.
"""

from __future__ import annotations

import pytest
from botocore.stub import Stubber

from kimi_k3.capacity import preflight
from kimi_k3.core import catalog
from tests.aws_stubs import client

BUCKET = "kimi-k3-weights-prod"


@pytest.mark.parametrize(("constraint", "region"), [(None, "us-east-1"), ("", "us-east-1"), ("EU", "eu-west-1"), ("us-west-2", "us-west-2")])
def test_the_location_constraint_names_the_region(constraint, region):
    assert preflight.bucket_region(constraint) == region


def _read(answer=None, error=None):
    s3 = client("s3")
    with Stubber(s3) as stub:
        if error:
            stub.add_client_error("get_bucket_location", service_error_code=error, service_message="no", expected_params={"Bucket": BUCKET})
        else:
            stub.add_response("get_bucket_location", answer, {"Bucket": BUCKET})
        found = preflight.read_bucket_region(s3, BUCKET)
        stub.assert_no_pending_responses()
    return found


def test_a_bucket_in_the_stacks_region_is_ok():
    bucket_at, why = _read({"LocationConstraint": "us-west-2"})
    finding = preflight.weights_bucket_check(BUCKET, bucket_at, "us-west-2", catalog.KIMI_K3.weights_gb, 2, why)
    assert finding.level == preflight.OK and "no cross-region transfer" in finding.message


def test_a_bucket_in_another_region_warns_with_the_cost_per_start():
    bucket_at, why = _read({})  # no constraint: us-east-1
    finding = preflight.weights_bucket_check(BUCKET, bucket_at, "us-west-2", catalog.KIMI_K3.weights_gb, 2, why)
    expected = round(catalog.KIMI_K3.weights_gb * 2 * preflight.CROSS_REGION_USD_PER_GB)
    assert finding.level == preflight.WARN
    assert f"s3://{BUCKET} is in us-east-1, not the stack's us-west-2" in finding.message
    assert f"about ${expected:,} per start of 2 nodes" in finding.message and "\n" not in finding.message


def test_an_unreadable_bucket_is_a_warning_not_a_failure():
    bucket_at, why = _read(error="AccessDenied")
    finding = preflight.weights_bucket_check(BUCKET, bucket_at, "us-west-2", 1560.9, 2, why)
    assert bucket_at is None and finding.level == preflight.WARN and "AccessDenied" in finding.message


def test_the_preflight_reads_the_bucket_of_an_s3_sourced_stack_only():
    from kimi_k3.cli.capacity import _weights_bucket
    from kimi_k3.stack import settings

    prod = settings.load_stack("prod")
    assert _weights_bucket(prod) == prod.serving.contract.weights.s3_location.bucket
    assert _weights_bucket(settings.load_stack("dev")) is None  # Hugging Face: no bucket to read
