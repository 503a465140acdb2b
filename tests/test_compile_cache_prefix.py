"""``compileCacheS3Uri`` travels as the typed :class:`~kimi_k3.core.s3.S3Prefix` (as ``weightsS3Uri`` does): parsed once by the
settings, carried by ``ServingStartup``, read by the serving pods' role and the cache object's URI without a second parse.
One's own program may pass the string: ``ServingStartup`` converts it once (``core/s3.as_prefix``), refusing it in its field's words.
The refusals of bad URIs are the lines they were before the change (pinned here)."""

from __future__ import annotations

import json
import re

import pulumi
import pytest

from kimi_k3 import offline
from kimi_k3.core.s3 import S3Prefix
from kimi_k3.errors import SettingsError, UserError
from kimi_k3.serving.vllm import VllmServer, VllmServerArgs
from kimi_k3.stack import time_to_serve
from kimi_k3.stack.settings import load_stack
from kimi_k3.weights import compile_cache, s3store, serving_pod
from tests.builders import DIGEST, in_cluster, load_stack_settings, serving_contract
from tests.conftest import NOW

S3 = {"weightsSource": "s3", "weightsS3Uri": "s3://acme-weights-us-east-1/kimi/3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20/", "dockerHubPullThroughSecretArn": None}
PINNED = {**S3, "servingImage": f"123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-openai@{DIGEST}"}
SHAPE = "expected s3://bucket/prefix/ with a trailing slash (the caches' role reads and writes only that prefix)"
EMPTY = "expected a non-empty prefix, s3://bucket/prefix/: the caches' role reads and writes only that prefix"
SAFE = ("expected s3://bucket/prefix/ whose prefix holds letters, digits and ! - _ . ' ( ) = / only (the caches' role reads and writes "
        "only that prefix, and $ would be read as an IAM policy variable)")


def test_the_stack_parses_the_prefix_once_and_hands_that_value_down():
    settings = load_stack("prod")
    prefix = settings.time_to_serve.compile_cache_s3_uri
    assert prefix == S3Prefix("acme-ml-weights-us-west-2", "compile-cache/")
    assert time_to_serve.serving_startup(settings, multi_node=False).compile_cache_s3_uri is prefix  # the same object: not re-parsed


def test_ones_own_program_may_pass_the_string_converted_once():
    given = serving_pod.ServingStartup(compile_cache_s3_uri="s3://b-b/cache/")
    assert given.compile_cache_s3_uri == given.cache_prefix == S3Prefix("b-b", "cache/")
    typed = S3Prefix("b-b", "cache/")
    assert serving_pod.ServingStartup(compile_cache_s3_uri=typed).cache_prefix is typed
    assert serving_pod.ServingStartup().cache_prefix is None


# Each bad value's line before the change (measured at 111b4f9: the stack's and ServingStartup's), byte for byte.
BAD = [
    ("s3://acme-weights-us-east-1/cache", SHAPE),
    ("s3://acme-weights-us-east-1/", EMPTY),
    ("s3://Acme_Weights/cache/", SHAPE),
    ("https://acme-weights-us-east-1/cache/", SHAPE),
    ("s3://acme-weights-us-east-1/ca*che/", SHAPE),
    ("acme-weights-us-east-1/cache/", SHAPE),
    ("s3://ab/cache/", SHAPE),
    ("s3://acme-weights-us-east-1/cache dir/", SHAPE),
    ("s3://acme-weights-us-east-1/ca?che/", SHAPE),
]


@pytest.mark.parametrize(("uri", "expected"), BAD)
def test_a_bad_uri_keeps_its_line_in_the_stack_and_in_ones_own_program(uri, expected):
    with pytest.raises(SettingsError) as stack:
        load_stack_settings(**PINNED, compileCacheS3Uri=uri)
    assert str(stack.value) == f"config kimi-k3:compileCacheS3Uri: {uri!r} is not accepted; {expected}"
    with pytest.raises(UserError) as own:
        serving_pod.ServingStartup(compile_cache_s3_uri=uri)
    assert str(own.value) == f"serving startup: compile_cache_s3_uri {uri!r} is not accepted; {expected}"


@pytest.mark.parametrize("uri", ["s3://acme-weights-us-east-1/${aws:username}/", "s3://acme-weights-us-east-1/ca+che/", "s3://acme-weights-us-east-1/a,b/"])
def test_a_prefix_the_role_must_not_hold_is_refused_as_the_weights_prefix_is(uri):
    """The pods' reader takes these, the prefix rule (the weights prefix's) does not: ``$`` is an IAM policy variable in the role's
    ``Resource`` (``${aws:username}`` is substituted, so the role would reach another prefix, or none)."""
    assert s3store.S3Location.parse(uri).prefix  # what the cache rule used to be
    with pytest.raises(SettingsError) as stack:
        load_stack_settings(**PINNED, compileCacheS3Uri=uri)
    assert str(stack.value) == f"config kimi-k3:compileCacheS3Uri: {uri!r} is not accepted; {SAFE}"
    with pytest.raises(UserError, match=r"^serving startup: compile_cache_s3_uri .* whose prefix holds letters, digits"):
        serving_pod.ServingStartup(compile_cache_s3_uri=uri)


def test_the_serving_pods_role_and_the_cache_object_read_the_prefix_without_parsing_it_again(monkeypatch):
    contract = serving_contract("s3", image=f"vllm/vllm-openai@{DIGEST}")
    startup = serving_pod.ServingStartup(compile_cache_s3_uri=S3Prefix("kimi-cache", "k3/"))

    def refused(cls, uri):
        raise AssertionError(f"parsed again: {uri!r}")

    monkeypatch.setattr(s3store.S3Location, "parse", classmethod(refused))
    monkeypatch.setattr(S3Prefix, "parse", classmethod(refused))
    engine = offline.OfflineEngine(now=NOW)
    engine.run(lambda: VllmServer("srv", VllmServerArgs(contract=contract, api_key=pulumi.Output.secret("k"), cluster_name="c", aws_region="us-east-1", startup=startup),
                                  opts=in_cluster()))
    policies = [r.inputs for r in engine.resources if r.type == "aws:iam/rolePolicy:RolePolicy" and "compile-cache" in r.name]
    assert len(policies) == 1
    statements = json.loads(policies[0]["policy"])["Statement"]
    assert statements[0]["Resource"] == ["arn:aws:s3:::kimi-cache/k3/*"]
    inputs = compile_cache.CacheKeyInputs(image=contract.image.image, model_revision=contract.weights.revision, engine_args=(), engine_env={}, gpu="b300", ami_release_version=None)
    key = compile_cache.cache_key(inputs)
    assert serving_pod.cache_object_uri(startup, inputs) == f"s3://kimi-cache/k3/{key}.tar"
    monkeypatch.undo()
    assert serving_pod.cache_object_uri(startup, inputs) == compile_cache.cache_object_uri("s3://kimi-cache/k3/", key)  # the pod module's own build


@pytest.mark.parametrize(("bucket", "prefix"), [("kimi-cache", ""), ("kimi-cache", "*"), ("kimi-cache", "k3"), ("Kimi Cache", "k3/")])
def test_a_hand_built_prefix_the_parser_would_refuse_is_refused_where_it_is_built(bucket, prefix):
    """An ``S3Prefix`` handed to the args is taken as it is (not parsed again): built by hand with an empty prefix or ``*`` it would
    scope the caches' (or the staging Job's) role to the whole bucket, so it is refused where it is built."""
    with pytest.raises(UserError, match=rf"^S3Prefix: bucket {re.escape(repr(bucket))} with prefix {re.escape(repr(prefix))} is not accepted; expected an S3 bucket name and a non-empty key prefix"):
        S3Prefix(bucket, prefix)
    assert S3Prefix.parse("s3://kimi-cache/k3/") == S3Prefix("kimi-cache", "k3/")
