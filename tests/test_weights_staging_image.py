"""The weights staging Job fits the system nodes (issue 21, point 4).

The Job runs on the system nodes. With the ~36 GB-at-pull engine image on their 50 GiB root volume
it passed the kubelet's image-GC and eviction point (85 % used: KubeletConfiguration v1beta1
defaults imageGCHighThresholdPercent 85, evictionHard imagefs.available 15% / nodefs.available 10%,
the kubelet config reference). The arithmetic is :mod:`kimi_k3.weights.system_disk`; the settings
refuse a staging image too big for ``systemNodeDiskGiB`` in one line, and prod runs the small
image of ``images/weights-staging`` (pinned by digest).
"""

from __future__ import annotations

import re

import pytest

from kimi_k3.errors import SettingsError
from kimi_k3.weights import system_disk
from tests.builders import DIGEST, load_stack_settings
from tests.conftest import ROOT

S3 = {"weightsSource": "s3", "weightsS3Uri": "s3://acme-weights-us-east-1/kimi/3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20/", "dockerHubPullThroughSecretArn": None}
SMALL = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/kimi-k3-weights-staging@{DIGEST}"


def test_the_kubelet_thresholds_are_the_upstream_defaults():
    assert (system_disk.IMAGE_GC_HIGH_THRESHOLD_PERCENT, system_disk.IMAGEFS_AVAILABLE_PERCENT, system_disk.NODEFS_AVAILABLE_PERCENT) == (85, 15, 10)
    assert system_disk.LIMIT_PERCENT == 85
    assert "imageGCHighThresholdPercent 85" in system_disk.KUBELET_SOURCE and "types.go" in system_disk.KUBELET_SOURCE


def test_the_engine_image_on_the_default_system_disk_passes_the_gc_and_eviction_point():
    verdict = system_disk.check(50, system_disk.ENGINE_IMAGE)
    assert (verdict.peak_gib, round(verdict.percent)) == (44.0, 88) and not verdict.fits
    assert verdict.minimum_disk_gib == 52 and system_disk.check(52, system_disk.ENGINE_IMAGE).fits
    assert not system_disk.check(51, system_disk.ENGINE_IMAGE).fits


def test_the_small_staging_image_fits_the_smallest_system_disk():
    verdict = system_disk.check(20, system_disk.STAGING_IMAGE)
    assert verdict.fits and verdict.percent < 45


def test_todays_prod_settings_fail_offline_in_one_line():
    with pytest.raises(SettingsError) as caught:
        load_stack_settings("prod", **S3, weightsStagingJob=True)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("config kimi-k3:systemNodeDiskGiB: 50 is not accepted; the staging Job (kimi-k3:weightsStagingJob) runs on the system nodes")
    assert "= 44 GiB, 88% of 50 GiB, above the 85%" in message and "52 GiB or more fits it" in message
    assert "kimi-k3:weightsStagingImage" in message


def test_a_bigger_system_disk_or_the_small_image_fits():
    assert load_stack_settings("prod", **S3, weightsStagingJob=True, systemNodeDiskGiB=52).cluster.system_node_disk_gib == 52
    settings = load_stack_settings("prod", **S3, weightsStagingJob=True, weightsStagingImage=SMALL)
    assert settings.time_to_serve.staging_image == SMALL and settings.cluster.system_node_disk_gib == 50


def test_prod_requires_the_staging_image_pinned_by_digest_and_dev_takes_a_tag():
    with pytest.raises(SettingsError, match=r"^config kimi-k3:weightsStagingImage: .* prod requires an image pinned by digest"):
        load_stack_settings("prod", **S3, weightsStagingJob=True, weightsStagingImage="acme/kimi-k3-weights-staging:1")
    assert load_stack_settings(**S3, weightsStagingJob=True, weightsStagingImage="acme/kimi-k3-weights-staging:1").time_to_serve.staging_image


def test_the_prod_stack_stages_with_the_small_image(prod_plan):
    job = next(r for r in prod_plan.by_type("kubernetes:batch/v1:Job") if "stage" in r.name).inputs
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert "/kimi-k3-weights-staging@sha256:" in container["image"]


def test_the_system_disk_setting_reaches_the_launch_template(dev_plan):
    templates = [r.inputs for r in dev_plan.by_type("aws:ec2/launchTemplate:LaunchTemplate") if "system" in r.name]
    sizes = {m["ebs"]["volumeSize"] for t in templates for m in t.get("blockDeviceMappings", [])}
    assert sizes == {50}


def test_the_dockerfile_installs_the_boto3_the_project_pins():
    dockerfile = (ROOT / "images" / "weights-staging" / "Dockerfile").read_text()
    pinned = re.search(r'"boto3==([\d.]+)"', (ROOT / "pyproject.toml").read_text())
    assert pinned is not None and f"boto3=={pinned.group(1)}" in dockerfile
    assert "USER 10001:10001" in dockerfile and re.search(r"^ARG BASE=python:3\.12-slim", dockerfile, re.M)
