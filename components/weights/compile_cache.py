"""vLLM's torch.compile and AOT artifacts and the Triton / Inductor / CUDA / FlashInfer / DeepGEMM JIT caches, kept in S3 across blocks.

vLLM's design doc (vllm-project/vllm ``docs/design/torch_compile.md``, "Compilation Cache")
says the whole ``~/.cache/vllm/torch_compile_cache`` directory can be copied to another
machine "to save a great amount of compilation time"; vLLM's own hash covers its configs,
PyTorch's configs and the model's code. We add an outer key over everything else that
invalidates a compiled kernel: the image digest (vLLM, PyTorch, Triton, CUDA runtime), the
model revision, the engine arguments and environment, the GPU, and the AMI release (the
driver) — :func:`cache_key`. One object per key: ``<prefix><key>.tar``.

* restore (init container, before the engine starts): on a hit, download with parallel ranged
  GETs, check the sha256 recorded at save time, unpack into the cache directories and write a
  marker (the engine's start then forces vLLM's AOT load, ``VLLM_FORCE_AOT_LOAD``); on a miss or
  any error, log and go on — the engine then compiles, as it would without a cache;
* save (sidecar, once the replica is ready and warmed up): tar the directories, upload as
  a FULL_OBJECT CRC32 multipart upload with the tar's sha256 in the metadata. A failed save
  is logged, never raised: serving never waits on it. Two replicas saving the same key both
  write a valid archive; the last one wins.

A plain tar (no compression): in-region S3 at tens of Gb/s makes compression cost more time
than it saves, and ``tarfile`` is in the standard library. Extraction uses the ``data``
filter plus a check that every member lands inside one of the cache directories.

Standard library + boto3 only (runs in the engine image).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kimi_k3.weights import WeightsError
from kimi_k3.weights.s3store import SHA256_META, S3Location, head, upload_verified

KEY_VERSION = "v2"
"""Bump when the archive layout or the key's inputs change (v2: FlashInfer's and DeepGEMM's directories as vLLM 0.27.1 sets them)."""
RESTORE_CHUNK = 64 << 20
"""Part size of the parallel ranged GETs of a restore."""
RESTORE_CONCURRENCY = 16
"""Ranged GETs of a restore at once (in-region S3 serves each at ~100 MB/s: 16 reach ~1.5 GB/s)."""
_DIGEST = re.compile(r"@(sha256:[0-9a-f]{64})$")


@dataclass(frozen=True)
class CacheKeyInputs:
    """Everything whose change makes a saved compile/JIT cache wrong or useless."""

    image: str
    """Engine image, pinned by digest (``repo@sha256:…``): fixes vLLM, PyTorch, Triton, FlashInfer and the CUDA runtime."""
    model_revision: str
    """Model commit SHA (weights shapes and the remote code vLLM traces)."""
    engine_args: tuple[str, ...]
    """``vllm serve`` arguments (TP/PP, max model len, KV cache dtype, compilation config...)."""
    engine_env: Mapping[str, str]
    """Environment the contract sets for the engine (feature flags change kernels); no secrets."""
    gpu: str
    """GPU model, e.g. ``B300`` (kernels are compiled per architecture)."""
    ami_release_version: str | None
    """EKS AMI release of the GPU nodes (fixes the NVIDIA driver); ``None`` when not pinned."""
    vllm_version: str | None = None
    """vLLM version, when known (informational: the digest already fixes it)."""
    extra: Mapping[str, str] = field(default_factory=dict)
    """Anything else the caller wants in the key."""


def cache_key(inputs: CacheKeyInputs) -> str:
    """A stable key for ``inputs``: ``v1-<gpu>-<revision 12>-<sha256 of the canonical inputs, 24 hex>``.

    Raises :class:`WeightsError` for an image without a digest: a tag moves, and a cache
    restored into another build would be silently stale.
    """
    if not _DIGEST.search(inputs.image or ""):
        raise WeightsError(f"compile cache: image {inputs.image!r} is not pinned by digest (repo@sha256:<64 hex>); caches are keyed on the exact build")
    canonical = json.dumps({**asdict(inputs), "engine_args": list(inputs.engine_args), "engine_env": dict(sorted(inputs.engine_env.items())), "extra": dict(sorted(inputs.extra.items())), "key_version": KEY_VERSION}, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:24]
    gpu = re.sub(r"[^a-z0-9]+", "", inputs.gpu.lower()) or "gpu"
    return f"{KEY_VERSION}-{gpu}-{inputs.model_revision[:12]}-{digest}"


def cache_object_uri(prefix_uri: str, key: str) -> str:
    """``s3://bucket/prefix/<key>.tar`` for a cache prefix ``s3://bucket/prefix/``."""
    location = S3Location.parse(prefix_uri)
    return f"s3://{location.bucket}/{location.prefix}{key}.tar"


CACHE_DIR_VARIABLES = (
    ("VLLM_CACHE_ROOT", "vLLM: torch_compile_cache (Inductor artifacts, torch_aot_compile), deep_gemm, flashinfer_autotune_cache, startup_plan"),
    ("TORCHINDUCTOR_CACHE_DIR", "PyTorch Inductor FX graph and kernel cache"),
    ("TRITON_CACHE_DIR", "Triton kernels and, with TRITON_CACHE_AUTOTUNING=1 (vLLM's default, vllm/env_override.py), autotuning results"),
    ("CUDA_CACHE_PATH", "CUDA driver JIT cache (PTX compiled for the GPU)"),
    ("DG_JIT_CACHE_DIR", "DeepGEMM JIT kernels (vLLM 0.27.1 vllm/utils/deep_gemm.py defaults it to $VLLM_CACHE_ROOT/deep_gemm)"),
    ("VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR", "FlashInfer autotuning results (default under $VLLM_CACHE_ROOT/flashinfer_autotune_cache)"),
)
"""Variables naming a cache directory, and what each holds."""


def cache_dirs_from_env(env: Mapping[str, str]) -> list[str]:
    """The cache directories a pod's environment points at, in a stable order, nested ones dropped.

    :data:`CACHE_DIR_VARIABLES`, plus FlashInfer's JIT workspace and downloaded cubins,
    ``${FLASHINFER_WORKSPACE_BASE:-$HOME}/.cache/flashinfer`` (flashinfer-python 0.6.16.post3, the
    release vLLM 0.27.1 pins: ``flashinfer/jit/env.py`` ``FLASHINFER_CACHE_DIR``).
    """
    dirs = [env[k] for k, _ in CACHE_DIR_VARIABLES if env.get(k)]
    base = env.get("FLASHINFER_WORKSPACE_BASE") or env.get("HOME")
    if base:
        dirs.append(f"{base.rstrip('/')}/.cache/flashinfer")
    out: list[str] = []
    for d in dirs:
        if not d.startswith("/") or ".." in d.split("/"):
            raise WeightsError(f"compile cache: directory {d!r} is not an absolute path")
        d = d.rstrip("/")
        if d not in out:
            out.append(d)
    return [d for d in out if not any(d != o and d.startswith(o + "/") for o in out)]


def compile_cache_policy(bucket: str, prefix: str, partition: str = "aws", kms_key_arn: str | None = None) -> dict:
    """IAM policy reading and writing only the cache prefix (and listing only under it, so a miss is a 404, not a 403)."""
    objects = f"arn:{partition}:s3:::{bucket}/{prefix}*"
    statements: list[dict[str, Any]] = [
        {"Sid": "ReadWriteCacheObjects", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"], "Resource": [objects]},
        {"Sid": "ListCachePrefix", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [f"arn:{partition}:s3:::{bucket}"], "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*"]}}},
    ]
    if kms_key_arn:
        statements.append({"Sid": "CacheKms", "Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": [kms_key_arn]})
    return {"Version": "2012-10-17", "Statement": statements}


def _members(dirs: Sequence[str]) -> Iterable[str]:
    for d in dirs:
        for root, subdirs, files in os.walk(d):
            subdirs.sort()
            for name in sorted(files):
                path = os.path.join(root, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    yield path


def _reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def build_archive(dirs: Sequence[str], out_path: str) -> tuple[int, int]:
    """Tar the regular files under ``dirs`` (paths relative to ``/``); returns ``(files, bytes)``."""
    files = size = 0
    with tarfile.open(out_path, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in _members(dirs):
            tar.add(path, arcname=path.lstrip("/"), recursive=False, filter=_reset)
            files += 1
            size += os.path.getsize(path)
    return files, size


def _inside(path: str, dirs: Sequence[str]) -> bool:
    absolute = os.path.normpath("/" + path)
    return any(absolute == d or absolute.startswith(d + "/") for d in dirs)


def extract_archive(archive: str, dirs: Sequence[str]) -> int:
    """Unpack ``archive`` under ``/``, refusing any member outside ``dirs``; returns the files written."""
    count = 0
    with tarfile.open(archive, "r") as tar:
        members = tar.getmembers()
        for m in members:
            if not _inside(m.name, dirs) or not (m.isfile() or m.isdir()):
                raise WeightsError(f"compile cache: archive member {m.name!r} is outside the cache directories; not restored")
        tar.extractall("/", members=members, filter="data")
        count = sum(1 for m in members if m.isfile())
    return count


def save(s3: Any, object_uri: str, dirs: Sequence[str], tmp_dir: str | None = None) -> str:
    """Upload the caches under their key unless that key is already saved; returns what happened."""
    location, name = _split(object_uri)
    if head(s3, location, name) is not None:
        return f"compile cache {object_uri}: already saved, nothing to do"
    with tempfile.TemporaryDirectory(dir=tmp_dir) as work:
        archive = os.path.join(work, "cache.tar")
        files, size = build_archive(dirs, archive)
        if files == 0:
            return f"compile cache {object_uri}: the cache directories are empty, nothing saved"
        digest = hashlib.sha256()
        with open(archive, "rb") as fh:
            for chunk in iter(lambda: fh.read(8 << 20), b""):
                digest.update(chunk)
        total = os.path.getsize(archive)
        with open(archive, "rb") as fh:
            upload_verified(s3, location, name, iter(lambda: fh.read(8 << 20), b""), expected_size=total, expected_sha256=digest.hexdigest())
    return f"compile cache {object_uri}: saved {files} files ({size} bytes)"


def _download(s3: Any, location: S3Location, name: str, path: str) -> None:
    """The object to ``path`` with :data:`RESTORE_CONCURRENCY` ranged GETs at once (boto3's transfer manager)."""
    from boto3.s3.transfer import TransferConfig  # boto3 loads only where a cache is restored (the pod's image has it)

    config = TransferConfig(multipart_threshold=RESTORE_CHUNK, multipart_chunksize=RESTORE_CHUNK, max_concurrency=RESTORE_CONCURRENCY)
    s3.download_file(location.bucket, location.key(name), path, Config=config)


def restore(s3: Any, object_uri: str, dirs: Sequence[str], tmp_dir: str | None = None, marker: str | None = None) -> str:
    """Unpack the saved caches of this key into ``dirs`` (a miss changes nothing); returns what happened.

    :param marker: a file written after a complete restore (its content: the object), read by the engine's start
        to force vLLM's AOT load; removed first, so a miss or a failure leaves none.
    """
    if marker:
        with contextlib.suppress(FileNotFoundError):
            os.remove(marker)
    location, name = _split(object_uri)
    state = head(s3, location, name)
    if state is None:
        return f"compile cache {object_uri}: miss (first start with this key); the engine compiles and the sidecar saves"
    expected = state.metadata.get(SHA256_META)
    with tempfile.TemporaryDirectory(dir=tmp_dir) as work:
        archive = os.path.join(work, "cache.tar")
        _download(s3, location, name, archive)
        digest = hashlib.sha256()
        with open(archive, "rb") as fh:
            for chunk in iter(lambda: fh.read(8 << 20), b""):
                digest.update(chunk)
        if digest.hexdigest() != expected:
            raise WeightsError(f"compile cache {object_uri}: sha256 {digest.hexdigest()} is not the {expected} recorded at save; not restored")
        size = os.path.getsize(archive)
        for d in dirs:
            os.makedirs(d, exist_ok=True)
        files = extract_archive(archive, dirs)
    if marker:
        os.makedirs(os.path.dirname(marker) or ".", exist_ok=True)
        with open(marker, "w") as fh:
            fh.write(object_uri + "\n")
    return f"compile cache {object_uri}: restored {files} files ({size} bytes)"


def _split(object_uri: str) -> tuple[S3Location, str]:
    match = re.match(r"^s3://([^/]+)/(.*/)?([^/]+\.tar)$", object_uri or "")
    if not match:
        raise WeightsError(f"compile cache: {object_uri!r} is not s3://bucket/prefix/<key>.tar")
    return S3Location(match.group(1), match.group(2) or ""), match.group(3)


def _timed(what, *args) -> None:
    start = time.monotonic()
    try:
        message = what(*args)
    except Exception as err:  # never fail the pod over a cache
        message = f"compile cache: {what.__name__} failed, going on without it: {err}"
    print(f"{message} [{time.monotonic() - start:.1f} s]", file=sys.stderr, flush=True)


def restore_or_log(s3: Any, object_uri: str, dirs: Sequence[str], marker: str | None = None) -> None:
    """:func:`restore`, logging instead of raising."""
    _timed(restore, s3, object_uri, dirs, None, marker)


def save_or_log(s3: Any, object_uri: str, dirs: Sequence[str]) -> None:
    """:func:`save`, logging instead of raising."""
    _timed(save, s3, object_uri, dirs)
