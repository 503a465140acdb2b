"""Shared inputs of the weights tests: a small fake Kimi K3 revision and a moto S3 bucket for it."""

from __future__ import annotations

import hashlib
import random

import boto3
import pytest
from moto import mock_aws

from tests.fake_hub import FakeRepo

REPO = "moonshotai/Kimi-K3"
REV = "3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20"
BUCKET = "acme-ml-weights-us-west-2"
URI = f"s3://{BUCKET}/moonshotai/Kimi-K3/{REV}/"
PART = 8 << 20


def seeded_bytes(size: int, seed: str) -> bytes:
    """Bytes that look random but are the same on every run, so a failure reproduces."""
    return random.Random(seed).randbytes(size)


def corrupted(content: bytes) -> bytes:
    """The same content with its first byte flipped: always different, whatever that byte was."""
    return bytes([content[0] ^ 0xFF]) + content[1:]


def make_repo() -> FakeRepo:
    rng = hashlib.sha256(b"seed").digest()
    big = (rng * ((20 << 20) // len(rng) + 1))[: (20 << 20) + 123]  # 3 parts of 8 MiB
    files = {
        "config.json": b'{"model_type": "kimi_k3"}\n',
        "tokenizer_config.json": b'{"x": 1}\n',
        "model-00001-of-00002.safetensors": big,
        "model-00002-of-00002.safetensors": seeded_bytes(3 << 20, "model-00002"),
        "sub/modeling_kimi.py": b"print('remote code')\n",
    }
    return FakeRepo(REPO, REV, files, lfs={"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"})


@pytest.fixture()
def s3(monkeypatch):
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-west-2"}.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        client = boto3.client("s3", region_name="us-west-2")
        client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        yield client
