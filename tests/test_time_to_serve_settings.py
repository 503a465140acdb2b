"""The ``Time to serve`` keys: each mistake is one line naming the key, the value and what is accepted;
the rules come from their homes in ``kimi_k3.weights`` (staging Job, bucket, cache key, FastImagePull
vs the AMI release, the ECR pull-through rule)."""

from __future__ import annotations

import pytest

from kimi_k3.core.s3 import S3Prefix
from kimi_k3.errors import SettingsError
from kimi_k3.stack import time_to_serve
from kimi_k3.stack.settings import load_stack
from kimi_k3.stack.time_to_serve import estimate_lines
from kimi_k3.weights import estimate
from tests.builders import DIGEST, load_stack_settings

S3 = {"weightsSource": "s3", "weightsS3Uri": "s3://acme-weights-us-east-1/kimi/3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20/", "dockerHubPullThroughSecretArn": None}
PINNED = {**S3, "servingImage": f"123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-openai@{DIGEST}"}
SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-Ab1Cd2"


@pytest.mark.parametrize("changes, key, words", [
    (dict(weightsStagingJob=True), "kimi-k3:weightsStagingJob", "needs kimi-k3:weightsSource s3"),
    (dict(PINNED, compileCacheS3Uri="s3://acme-weights-us-east-1/cache"), "kimi-k3:compileCacheS3Uri", "trailing slash"),
    (dict(PINNED, compileCacheS3Uri="s3://acme-weights-us-east-1/"), "kimi-k3:compileCacheS3Uri", "non-empty prefix"),
    (dict(PINNED, compileCacheS3Uri="s3://acme-weights-us-east-1/kimi/"), "kimi-k3:compileCacheS3Uri", "apart from kimi-k3:weightsS3Uri"),
    (dict(S3, compileCacheS3Uri="s3://acme-weights-us-east-1/cache/"), "kimi-k3:compileCacheS3Uri", "pinned by digest"),
    (dict(compileCacheS3Uri="s3://acme-weights-us-east-1/cache/"), "kimi-k3:compileCacheS3Uri", "only with kimi-k3:weightsSource s3"),
    (dict(PINNED, compileCacheS3Uri="s3://acme-weights-us-east-1/cache/", pipelineParallelSize=2, efaEnabled=True), "kimi-k3:compileCacheS3Uri", "single-node replicas only"),
    (dict(S3, nodeLocalWeights=True, pipelineParallelSize=2, efaEnabled=True), "kimi-k3:nodeLocalWeights", "single-node replicas only"),
    (dict(S3, weightsBucketName="other-bucket"), "kimi-k3:weightsBucketName", "acme-weights-us-east-1"),
    (dict(S3, weightsBucketName="Bad_Bucket"), "kimi-k3:weightsBucketName", "3-63 lower-case"),
    (dict(nodeLocalWeights=True), "kimi-k3:nodeLocalWeights", "needs kimi-k3:weightsSource s3"),
    (dict(fastImagePull=True), "kimi-k3:fastImagePull", "needs a pinned AMI release"),
    (dict(fastImagePull=True, gpuAmiReleaseVersion="1.34.4-20260505"), "kimi-k3:fastImagePull", "amazon-eks-ami#2712"),
    (dict(fastImagePull=True, gpuAmiReleaseVersion="1.33.0-20250701"), "kimi-k3:fastImagePull", "from v20250813 on"),
    (dict(dockerHubPullThroughSecretArn="arn:aws:secretsmanager:us-east-1:123456789012:secret:dockerhub"), "kimi-k3:dockerHubPullThroughSecretArn", "ecr-pullthroughcache/"),
    (dict(dockerHubPullThroughSecretArn=SECRET.replace("us-east-1", "eu-west-1")), "kimi-k3:dockerHubPullThroughSecretArn", "stack's region us-east-1"),
    (dict(weightsVerifyHasher="md5"), "kimi-k3:weightsVerifyHasher", "accepted: auto, openssl, sha256sum"),
    (dict(nodeCleanupImage="not a reference"), "kimi-k3:nodeCleanupImage", "repo:tag"),
])
def test_a_mistake_is_one_line_naming_the_key(changes, key, words):
    with pytest.raises(SettingsError) as caught:
        load_stack_settings(**changes)
    message = str(caught.value)
    assert "\n" not in message and key in message and words in message, message


def test_prod_refuses_a_node_cleanup_image_by_tag():
    with pytest.raises(SettingsError, match=r"kimi-k3:nodeCleanupImage: .*v2.9.0.* prod requires an image pinned by digest"):
        load_stack_settings("prod", **PINNED, nodeLocalWeights=True)


def test_the_staging_job_in_prod_needs_a_digest_and_dev_accepts_a_tag():
    # the engine image as the staging image needs a 52 GiB system disk (tests/test_weights_staging_image.py)
    dev = load_stack_settings(**S3, weightsStagingJob=True, systemNodeDiskGiB=52)
    assert dev.time_to_serve.staging_job
    assert load_stack_settings("prod", **PINNED, weightsStagingJob=True, systemNodeDiskGiB=52).time_to_serve.staging_job


def test_a_docker_hub_image_is_pulled_through_the_cache_in_region():
    s = load_stack_settings(dockerHubPullThroughSecretArn=SECRET)
    assert s.serving.contract.image.image == "123456789012.dkr.ecr.us-east-1.amazonaws.com/kimi-k3-dev-docker-hub/vllm/vllm-openai:kimi-k3"
    assert s.time_to_serve.pull_through_upstream_image == "vllm/vllm-openai:kimi-k3"
    assert s.time_to_serve.pull_through_prefix == "kimi-k3-dev-docker-hub"


def test_the_pull_through_prefix_is_a_setting_distinct_per_stack_by_default():
    """One rule per prefix in a registry (CreatePullThroughCacheRule: PullThroughCacheRuleAlreadyExistsException): the fixed
    docker-hub collided with an existing rule of that common name, and dev and prod in one account with each other."""
    assert load_stack_settings("prod", **PINNED).time_to_serve.pull_through_prefix == "kimi-k3-prod-docker-hub"
    adopted = load_stack_settings(dockerHubPullThroughSecretArn=SECRET, ecrPullThroughPrefix="docker-hub")
    assert adopted.time_to_serve.pull_through_prefix == "docker-hub"
    assert adopted.serving.contract.image.image == "123456789012.dkr.ecr.us-east-1.amazonaws.com/docker-hub/vllm/vllm-openai:kimi-k3"


@pytest.mark.parametrize("prefix", ["Docker-Hub", "d", "a" * 31, "-hub", "hub/"])
def test_a_prefix_ecr_refuses_is_one_line(prefix):
    with pytest.raises(SettingsError, match=r"^config kimi-k3:ecrPullThroughPrefix: .* is not accepted; 2-30 lower-case letters") as caught:
        load_stack_settings(dockerHubPullThroughSecretArn=SECRET, ecrPullThroughPrefix=prefix)
    assert "\n" not in str(caught.value)


def test_the_default_prefix_of_a_long_stack_name_is_shortened_to_ecrs_30():
    """A long stack name made the default <project>-<stack>-docker-hub longer than ECR's 30 and the stack refused its own
    default: now it is cut and hashed (kimi_k3.core.names.fit); an explicit prefix that is too long is still refused."""
    from kimi_k3.stack import settings

    values, secrets = settings.read_stack_file("dev")
    found = settings.from_values(values, secrets, stack="integration-a").time_to_serve.pull_through_prefix
    assert len(found) == 30 and found.startswith("kimi-k3-integration-a-") and found != "kimi-k3-integration-a-docker-hub"[:30]
    with pytest.raises(SettingsError, match=r"^config kimi-k3:ecrPullThroughPrefix: "):
        settings.from_values({**values, "kimi-k3:ecrPullThroughPrefix": "p" * 31}, secrets, stack="dev")


def test_an_image_from_elsewhere_is_left_alone_with_a_warning():
    s = load_stack_settings(dockerHubPullThroughSecretArn=SECRET, servingImage="ghcr.io/acme/vllm:kimi-k3")
    assert s.serving.contract.image.image == "ghcr.io/acme/vllm:kimi-k3"
    assert any(w.startswith("kimi-k3:dockerHubPullThroughSecretArn: kimi-k3:servingImage ghcr.io/acme/vllm:kimi-k3 is neither") for w in s.warnings)


def test_a_release_with_a_reported_node_problem_warns_naming_the_ami_key():
    s = load_stack_settings(gpuAmiReleaseVersion="1.34.4-20260520")
    assert any(w.startswith("kimi-k3:gpuAmiReleaseVersion: AMI release 1.34.4-20260520") and "#2729" in w for w in s.warnings)


def test_the_committed_stacks_turn_the_mechanisms_on():
    prod = load_stack("prod").time_to_serve
    assert prod.staging_job and prod.node_local_weights and prod.image_prepull and prod.fast_image_pull
    assert prod.compile_cache_s3_uri == S3Prefix("acme-ml-weights-us-west-2", "compile-cache/") and prod.bucket_name == "acme-ml-weights-us-west-2"
    dev = load_stack("dev").time_to_serve
    assert dev.image_prepull and dev.pull_through_secret_arn and not dev.node_local_weights  # Hugging Face direct: no node-side S3 sync


def test_a_ready_timeout_below_the_estimate_warns_naming_the_key():
    s = load_stack_settings("prod", **PINNED, engineReadyTimeoutSeconds=900)
    _, warnings = estimate_lines(s, block_hours=24)
    (warning,) = [w for w in warnings if "engineReadyTimeoutSeconds" in w]
    assert warning.startswith("kimi-k3:engineReadyTimeoutSeconds: engine ready timeout 900 s is shorter than the cold start estimate")
    _, fine = estimate_lines(load_stack("prod"), block_hours=24)
    assert not any("engineReadyTimeoutSeconds" in w for w in fine)  # 3600 s covers the cold engine phases + 10 min


def test_a_block_too_short_to_serve_is_a_warning():
    _, warnings = estimate_lines(load_stack("prod"), block_hours=0.5)
    assert any(w.startswith("kimi-k3:capacityReservationId: a 0.5 h block cannot serve") for w in warnings)
    _, week = estimate_lines(load_stack("prod"), block_hours=24 * 7)
    assert not any("capacityReservationId" in w for w in week)


def test_hugging_face_direct_warns_with_its_modelled_time_and_nat_cost():
    _, warnings = estimate_lines(load_stack("dev"), block_hours=24 * 7)
    (warning,) = [w for w in warnings if w.startswith("kimi-k3:weightsSource")]
    cold = estimate.estimate_case(time_to_serve.startup_inputs(load_stack("dev")), "cold").minutes
    assert f"~{cold:.0f} min to first token" in warning and "1,561 GB of NAT data processing" in warning and "kimi-k3 weights stage" in warning
