"""Example values left in a stack, and S3 weights of another revision: the pure checks behind plan's warnings."""

from __future__ import annotations

import json

import pytest

from kimi_k3.stack.lint import example_value_warnings, revision_warnings, stack_warnings

REV = "3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20"


@pytest.mark.parametrize(
    ("value", "finding"),
    [
        ("192.0.2.0/24", "RFC 5737 TEST-NET-1"),
        ("198.51.100.7", "RFC 5737 TEST-NET-2"),
        (json.dumps(["10.0.0.0/8", "203.0.113.128/25"]), "'203.0.113.128/25' (a documentation address, RFC 5737 TEST-NET-3 203.0.113.0/24)"),
        ("2001:db8:1::/48", "RFC 3849"),
        ("arn:aws:iam::123456789012:role/admin", "AWS documentation's example account 123456789012"),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm@sha256:" + "0" * 64, "example account 123456789012"),
        ("oncall@example.com", "the example domain example.com, RFC 2606"),
        ("https://grafana.example.org/d/1", "the example domain grafana.example.org"),
        ("alerts@team.example", "the example domain team.example"),
    ],
)
def test_example_values_are_found(value, finding):
    warnings = example_value_warnings({"ns:key": value})
    assert len(warnings) == 1 and warnings[0].startswith("ns:key holds ") and finding in warnings[0]
    assert "replace it with your own" in warnings[0]


@pytest.mark.parametrize(
    "value",
    ["10.0.0.0/8", "203.0.114.0/24", "192.0.3.1", "arn:aws:iam::210987654321:role/admin", "1234567890123", "my-example-bucket",
     "an example stack", "ops@examples.com", "s3://example-weights/moonshotai/", "11:30", json.dumps(["us-east-1a"])],
)
def test_real_values_are_not_flagged(value):
    assert example_value_warnings({"ns:key": value}) == []


def test_secret_values_are_not_looked_at():
    assert example_value_warnings({"ns:token": "offline-placeholder-for-secret:ns:token"}, {"ns:token"}) == []
    assert example_value_warnings({"ns:url": "https://example.com"}, {"ns:url"}) == []


@pytest.mark.parametrize(
    ("uri", "warned"),
    [
        (f"s3://weights/moonshotai/Kimi-K3/{REV}/", False),
        ("s3://weights/moonshotai/Kimi-K3/latest/", False),  # names no revision: nothing to compare
        ("s3://weights/moonshotai/Kimi-K3/0123456789abcdef0123456789abcdef01234567/", True),
    ],
)
def test_the_weights_uri_must_not_name_another_revision(uri, warned):
    warnings = revision_warnings({"kimi-k3:weightsS3Uri": uri, "kimi-k3:modelRevision": REV})
    assert bool(warnings) is warned
    if warned:
        assert f"names revision 0123456789abcdef0123456789abcdef01234567, but kimi-k3:modelRevision is '{REV}'" in warnings[0]


def test_stack_warnings_is_both():
    values = {"kimi-k3:weightsS3Uri": "s3://b/0123456789abcdef0123456789abcdef01234567/", "kimi-k3:modelRevision": REV, "aws:x": "192.0.2.1"}
    assert len(stack_warnings(values)) == 2
