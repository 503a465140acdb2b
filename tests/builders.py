"""Builders shared by test modules: stack config values and serving contracts.

Test modules import from here (and from ``conftest``), never from each other.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.serving import nlb
from kimi_k3.serving.contracts import ApiContract, EngineProfile, ImageContract, ServingContract, WeightsContract
from kimi_k3.serving.front import ServingFront
from kimi_k3.stack import settings, wire

DIGEST = "sha256:" + "ab" * 32
"""A well-formed image digest."""
REVISION = "0123456789abcdef0123456789abcdef01234567"
"""A 40-hex model revision."""
IMAGE = "vllm/vllm-openai:kimi-k3@" + DIGEST
"""The engine image pinned by tag and digest."""
S3_URI = "s3://model-bucket/kimi-k3/0123456/"
"""A pre-staged weights prefix."""


RID = "cr-0a1b2c3d4e5f60718"
"""A Capacity Block reservation id."""
B300 = "p6-b300.48xlarge"
BLOCK_START = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
"""Start of the default block: the day after ``tests.conftest.NOW``, at the 11:30 UTC blocks start."""


def block_facts(**changes: Any) -> CapacityBlockFacts:
    """A scheduled 7-day block of 2 x p6-b300 in us-east-1a from :data:`BLOCK_START`, with changes."""
    values: dict[str, Any] = dict(
        reservation_id=RID, availability_zone="us-east-1a", instance_type=B300, instance_count=2,
        state="scheduled", start=BLOCK_START, end=BLOCK_START + timedelta(days=7),
    )
    values.update(changes)
    return CapacityBlockFacts(**values)


def stack_config(stack: str = "dev", **changes: Any) -> dict[str, str]:
    """The committed ``stack``'s config in wire form, with changes (short keys get ``kimi-k3:``; None deletes a key)."""
    values, _ = settings.read_stack_file(stack)
    for key, value in changes.items():
        full = key if ":" in key else f"kimi-k3:{key}"
        if value is None:
            values.pop(full, None)
        else:
            values[full] = value if isinstance(value, str) else wire.to_wire(value)
    return values


PROD_OVERRIDES = {
    "kimi-k3:environment": "prod",
    "kimi-k3:clusterEndpointPublicAccess": "false",
    "kimi-k3:clusterPublicAccessCidrs": "[]",
    # A private endpoint needs a path to the API (settings.cluster._require_api_path): a VPN range.
    "kimi-k3:clusterApiIngressCidrs": '["10.100.0.0/16"]',
    "kimi-k3:gpuAmiReleaseVersion": "1.34.2-20251120",
    "kimi-k3:servingImage": f"vllm/vllm-openai@{DIGEST}",
}
"""What turns the dev config into one the prod rules accept."""


def load_stack_settings(env: str = "dev", **changes: Any) -> settings.StackSettings:
    """Settings of the dev stack's config with ``changes`` (``env="prod"``: :data:`PROD_OVERRIDES`, then ``changes`` again)."""
    values = stack_config(**changes)
    if env == "prod":
        values.update(PROD_OVERRIDES)
        values.update({(k if ":" in k else f"kimi-k3:{k}"): (v if isinstance(v, str) else wire.to_wire(v)) for k, v in changes.items() if v is not None})
    return settings.from_values(values, {"kimi-k3:apiKey"}, stack=env)


def in_cluster(provider_name: str = "gpu-cluster", **options: Any) -> pulumi.ResourceOptions:
    """Component options that name a Kubernetes provider (declare it inside the program under test)."""
    provider = k8s.Provider(provider_name, kubeconfig="{}")
    return pulumi.ResourceOptions(providers={"kubernetes": provider}, **options)


def serving_contract(
    source: str = "huggingface",
    *,
    revision: str = REVISION,
    image: str = IMAGE,
    s3_uri: str = S3_URI,
    sha256_manifest: str | None = "SHA256SUMS",
    **engine: Any,
) -> ServingContract:
    """A serving contract with weights from ``source`` (``s3``: from ``s3_uri``) and ``engine`` profile fields."""
    weights = WeightsContract(
        revision=revision, source=source, s3_uri=s3_uri if source == "s3" else None, sha256_manifest=sha256_manifest
    )
    return ServingContract(ImageContract.parse(image), weights, ApiContract(), EngineProfile(**engine))


FRONT_FIELDS = frozenset(f.name for f in dataclasses.fields(ServingFront) if f.init and f.name != "behind_nlb")
"""The :class:`ServingFront` fields a test may pass among a serving component's args (:func:`with_front`)."""


def with_front(values: dict[str, Any]) -> dict[str, Any]:
    """Serving args with the front's fields among them (``drain_s=600``) gathered into one ``front=ServingFront(...)``,
    behind an NLB as ``exposure`` says; call it inside the program, so a refused field stops it before anything is declared."""
    front = {name: values.pop(name) for name in list(values) if name in FRONT_FIELDS}
    if front:
        values["front"] = ServingFront(**front, behind_nlb=values.get("exposure", "cluster") in nlb.EXPOSURE_SCHEMES)
    return values
