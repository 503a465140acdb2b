"""A Capacity Block that cannot be read says why: not found, credentials, access, region or throttling — one line each.

The AWS provider reports every failure of ``getCapacityBlockReservation`` as a failed invoke;
its text carries the AWS error code (aws-sdk-go-v2: ``api error <Code>: <message>``) or the
provider's own wording. The messages below are shaped like those (EC2 API error codes page).
"""

from __future__ import annotations

import pytest

from kimi_k3 import offline
from kimi_k3.capacity.lookup import (
    CREDENTIALS,
    DENIED,
    NOT_FOUND,
    OTHER,
    REGION,
    THROTTLED,
    CapacityBlockNotFound,
    CapacityBlockUnreadable,
    classify,
    lookup_capacity_block,
)
from kimi_k3.errors import UserError
from tests.builders import RID
from tests.conftest import NOW, fixture_for

TOKEN = "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation"
SDK = "operation error EC2: DescribeCapacityReservations, https response error StatusCode: {status}, RequestID: 4b1f7c2e-0000-0000-0000-000000000000, api error {code}: {message}"

FAILURES = {
    NOT_FOUND: SDK.format(status=400, code="InvalidCapacityReservationId.NotFound", message=f"The capacity reservation ID '{RID}' does not exist"),
    CREDENTIALS: "unable to validate AWS credentials. Details: No valid credential sources found. Please see https://www.pulumi.com/registry/packages/aws/installation-configuration/",
    DENIED: SDK.format(status=403, code="UnauthorizedOperation", message="You are not authorized to perform this operation."),
    REGION: "invalid AWS Region: us-esat-1",
    THROTTLED: SDK.format(status=503, code="RequestLimitExceeded", message="Request limit exceeded."),
    OTHER: SDK.format(status=500, code="InternalError", message="An internal error has occurred."),
}

EXPECTED = {
    NOT_FOUND: f"Capacity Block {RID} was not found in us-east-1 for this account",
    CREDENTIALS: f"the AWS provider has no valid credentials to read Capacity Block {RID}",
    DENIED: f"AWS denied reading Capacity Block {RID} in us-east-1",
    REGION: f"the AWS provider cannot reach EC2 in us-east-1 to read Capacity Block {RID}",
    THROTTLED: f"EC2 throttled the look-up of Capacity Block {RID} in us-east-1",
    OTHER: f"Capacity Block {RID} could not be read in us-east-1",
}
ADVICE = {
    NOT_FOUND: "",
    CREDENTIALS: "`aws sso login`",
    DENIED: "allow ec2:DescribeCapacityReservations",
    REGION: "check aws:region",
    THROTTLED: "retry in a minute",
    OTHER: "",
}


def _failing(detail: str):
    return {TOKEN: lambda args: ({}, [("id", detail)])}


@pytest.mark.parametrize("kind", sorted(FAILURES))
def test_each_failure_is_one_line_of_its_own_kind(kind):
    engine = offline.OfflineEngine(now=NOW, invoke_overrides=_failing(FAILURES[kind]))
    with pytest.raises(CapacityBlockUnreadable) as failed:
        engine.run(lambda: lookup_capacity_block(RID, region="us-east-1"))
    message = str(failed.value)
    assert failed.value.kind == kind and "\n" not in message
    assert message.startswith(EXPECTED[kind]) and ADVICE[kind] in message
    assert isinstance(failed.value, CapacityBlockNotFound) == (kind == NOT_FOUND)


@pytest.mark.parametrize(
    "detail, kind",
    [
        ("reading EC2 Capacity Block Reservation (cr-0a1b2c3d4e5f60718): couldn't find resource", NOT_FOUND),
        ("api error ExpiredToken: The security token included in the request is expired", CREDENTIALS),
        ("api error AuthFailure: AWS was not able to validate the provided access credentials", CREDENTIALS),
        ("failed to get shared config profile, kimi", CREDENTIALS),
        ("api error AccessDenied: User is not authorized to perform: ec2:DescribeCapacityReservations", DENIED),
        ('dial tcp: lookup ec2.us-esat-1.amazonaws.com: no such host', REGION),
        ("api error Throttling: Rate exceeded", THROTTLED),
    ],
)
def test_classify_reads_the_aws_code_or_the_providers_words(detail, kind):
    assert classify(detail) == kind


def test_only_a_block_that_is_not_found_gets_the_stacks_what_to_check_hint():
    with pytest.raises(UserError) as not_found:
        offline.run_stack("dev", now=NOW, reservation=lambda s: fixture_for(s, id="cr-0ffffffffffffffff"))
    assert "Check kimi-k3:capacityReservationId and aws:region" in str(not_found.value)
    options = {"invoke_overrides": _failing(FAILURES[DENIED])}
    with pytest.raises(UserError) as denied:
        offline.run_stack("dev", now=NOW, reservation=fixture_for, engine_options=options)
    assert str(denied.value).startswith(f"AWS denied reading Capacity Block {RID} in us-east-1") and "capacityReservationId" not in str(denied.value)
