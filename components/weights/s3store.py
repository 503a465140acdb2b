"""The S3 side: where a revision lives, what is there, and uploads S3 can check end to end.

Checksums (Amazon S3 User Guide, "Checking object integrity for data uploads in Amazon S3",
``AmazonS3/latest/userguide/checking-object-integrity-upload.html``): a multipart upload's
checksum is either *composite* (a checksum of the part checksums, depends on the part size)
or *full object* (a checksum of the whole content). CRC64NVME is full-object only; CRC32 and
CRC32C support both; SHA-1 and SHA-256 are composite only. So a sha256 of the whole file can
never be S3's own checksum for a multipart object.

Design: every file is uploaded as a multipart upload with ``ChecksumAlgorithm=CRC32``,
``ChecksumType=FULL_OBJECT`` — CRC32 because the standard library computes it (``zlib``) at
GB/s, whereas botocore needs awscrt for CRC64NVME and CRC32C. Each part carries its own
CRC32 (S3 rejects a part whose bytes do not match) and ``CompleteMultipartUpload`` carries
the whole file's CRC32 and size (``MpuObjectSize``), which S3 checks against the parts. The
sha256 that Hugging Face publishes goes into the object metadata (``x-amz-meta-sha256``) and
the manifest. An object is *completed only after* the streamed bytes matched that sha256, so
a completed object with our metadata is a verified one; a failed check aborts the upload.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import math
import re
import threading
import zlib
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kimi_k3.weights import WeightsError
from kimi_k3.weights.hub import git_blob_oid

S3_URI = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/((?:[^*?\s]+/)?)$")
"""``s3://bucket/prefix/`` (trailing slash, no wildcards) — the stack's ``weightsS3Uri`` form."""
MIN_PART = 8 << 20
"""Smallest part we send (S3's minimum is 5 MiB for all but the last part)."""
DEFAULT_PART = 64 << 20
MAX_PARTS = 10_000
"""S3's limit of parts per multipart upload."""
SHA256_META = "sha256"
GIT_OID_META = "git-oid"


def b64_crc32(value: int) -> str:
    """S3's wire form of a CRC32: base64 of the 4 big-endian bytes."""
    return base64.b64encode((value & 0xFFFFFFFF).to_bytes(4, "big")).decode()


@dataclass(frozen=True)
class S3Location:
    """A bucket and a key prefix (ending in ``/`` unless empty)."""

    bucket: str
    """Bucket name."""
    prefix: str
    """Key prefix the revision's files live under (``models/kimi/``); ``""``: the bucket's root."""

    @classmethod
    def parse(cls, uri: str) -> S3Location:
        """From ``s3://bucket/prefix/``; raises :class:`WeightsError` otherwise."""
        match = S3_URI.match(uri or "")
        if not match:
            raise WeightsError(f"S3 URI {uri!r} is not accepted; expected s3://bucket/prefix/ (trailing slash, no wildcards)")
        return cls(match.group(1), match.group(2))

    @property
    def uri(self) -> str:
        """Back to ``s3://bucket/prefix/``."""
        return f"s3://{self.bucket}/{self.prefix}"

    def key(self, path: str) -> str:
        """Object key of a file of the revision."""
        return f"{self.prefix}{path}"


@dataclass(frozen=True)
class ObjectState:
    """What S3 reports for one object (HeadObject with ``ChecksumMode=ENABLED``)."""

    key: str
    """Object key (the location's prefix and the file's path)."""
    size: int
    """Size in bytes (``ContentLength``)."""
    crc32: str | None
    """Base64 CRC32, when the object has one."""
    checksum_type: str | None
    """``FULL_OBJECT`` or ``COMPOSITE`` (``None`` when S3 reports none)."""
    metadata: dict[str, str]
    """User metadata (``x-amz-meta-*`` without the prefix)."""


def _client_error_code(err: Exception) -> str:
    return str(getattr(err, "response", {}).get("Error", {}).get("Code", ""))


def head(s3: Any, location: S3Location, path: str) -> ObjectState | None:
    """State of the object of ``path``; ``None`` when it does not exist."""
    key = location.key(path)
    try:
        resp = s3.head_object(Bucket=location.bucket, Key=key, ChecksumMode="ENABLED")
    except Exception as err:  # botocore.exceptions.ClientError, without importing botocore at module level
        if _client_error_code(err) in ("404", "NoSuchKey", "NotFound"):
            return None
        raise WeightsError(f"S3 HeadObject {location.bucket}/{key} failed: {err}") from None
    return ObjectState(
        key=key,
        size=int(resp["ContentLength"]),
        crc32=resp.get("ChecksumCRC32"),
        checksum_type=resp.get("ChecksumType"),
        metadata={k.lower(): v for k, v in (resp.get("Metadata") or {}).items()},
    )


def head_many(s3: Any, location: S3Location, paths: Iterable[str], workers: int = 16) -> dict[str, ObjectState | None]:
    """:func:`head` for many paths, in parallel."""
    paths = list(paths)
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(paths) or 1))) as pool:
        return dict(zip(paths, pool.map(lambda p: head(s3, location, p), paths), strict=False))


def read_text(s3: Any, location: S3Location, path: str) -> str | None:
    """Content of a small object (manifest), ``None`` when missing."""
    try:
        resp = s3.get_object(Bucket=location.bucket, Key=location.key(path))
    except Exception as err:
        if _client_error_code(err) in ("404", "NoSuchKey", "NotFound"):
            return None
        raise WeightsError(f"S3 GetObject {location.bucket}/{location.key(path)} failed: {err}") from None
    return resp["Body"].read().decode()


def write_text(s3: Any, location: S3Location, path: str, text: str) -> None:
    """Write a small object (manifest) with its CRC32, which S3 checks on arrival."""
    body = text.encode()
    s3.put_object(Bucket=location.bucket, Key=location.key(path), Body=body, ChecksumCRC32=b64_crc32(zlib.crc32(body)), ContentType="text/plain; charset=utf-8")


def abort_stale_uploads(s3: Any, location: S3Location) -> int:
    """Abort the unfinished multipart uploads under the prefix (left by an interrupted run); returns how many."""
    aborted = 0
    kwargs = {"Bucket": location.bucket, "Prefix": location.prefix}
    while True:
        resp = s3.list_multipart_uploads(**kwargs)
        for upload in resp.get("Uploads", []):
            s3.abort_multipart_upload(Bucket=location.bucket, Key=upload["Key"], UploadId=upload["UploadId"])
            aborted += 1
        if not resp.get("IsTruncated"):
            return aborted
        kwargs.update(KeyMarker=resp.get("NextKeyMarker", ""), UploadIdMarker=resp.get("NextUploadIdMarker", ""))


def part_size_for(size: int, preferred: int = DEFAULT_PART) -> int:
    """A part size that keeps ``size`` within :data:`MAX_PARTS` parts (whole MiB)."""
    need = math.ceil(max(size, 1) / MAX_PARTS)
    return max(MIN_PART, preferred, math.ceil(need / (1 << 20)) << 20)


class ChecksumMismatch(WeightsError):
    """The streamed bytes do not match the checksum the source published (the upload was aborted)."""


@dataclass(frozen=True)
class Uploaded:
    """Result of :func:`upload_verified`."""

    size: int
    """Bytes uploaded (equal to the size the source announced)."""
    sha256: str
    """Hex sha256 of the streamed bytes (equal to the published one when one was given)."""
    crc32: str
    """Base64 full-object CRC32 sent with ``CompleteMultipartUpload``, which S3 checked against the parts."""


def upload_verified(
    s3: Any,
    location: S3Location,
    path: str,
    chunks: Iterable[bytes],
    *,
    expected_size: int,
    expected_sha256: str | None = None,
    expected_git_oid: str | None = None,
    part_size: int = DEFAULT_PART,
    parts_in_flight: int = 4,
    on_bytes=None,
) -> Uploaded:
    """Stream ``chunks`` into a FULL_OBJECT CRC32 multipart upload of ``path``, completing it only if they verify.

    The sha256 (and, for files Hugging Face keeps in git, the git blob id) is computed while the
    bytes pass; a size or checksum mismatch aborts the upload and raises :class:`ChecksumMismatch`.
    Up to ``parts_in_flight`` parts upload while the next is read. ``on_bytes(n)`` reports progress.
    """
    key = location.key(path)
    part_size = part_size_for(expected_size, part_size)
    metadata = {GIT_OID_META: expected_git_oid} if expected_git_oid else {}
    if expected_sha256:
        metadata[SHA256_META] = expected_sha256
    mpu = s3.create_multipart_upload(Bucket=location.bucket, Key=key, ChecksumAlgorithm="CRC32", ChecksumType="FULL_OBJECT", Metadata=metadata)
    upload_id = mpu["UploadId"]
    sha256 = hashlib.sha256()
    blob = git_blob_oid(expected_size) if expected_git_oid else None
    crc = 0
    size = 0
    parts: list[Future] = []
    slots = threading.BoundedSemaphore(max(1, parts_in_flight))

    def send(number: int, body: bytes) -> dict:
        try:
            part_crc = b64_crc32(zlib.crc32(body))
            resp = s3.upload_part(Bucket=location.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body, ChecksumCRC32=part_crc)
            if on_bytes:
                on_bytes(len(body))
            return {"PartNumber": number, "ETag": resp["ETag"], "ChecksumCRC32": resp.get("ChecksumCRC32") or part_crc}
        finally:
            slots.release()

    pool = ThreadPoolExecutor(max_workers=max(1, parts_in_flight))
    try:
        buffer = bytearray()
        number = 0

        def flush(final: bool) -> None:
            nonlocal number, buffer
            while len(buffer) >= part_size or (final and (buffer or number == 0)):
                body = bytes(buffer[:part_size])
                del buffer[:part_size]
                number += 1
                slots.acquire()
                parts.append(pool.submit(send, number, body))
                if final and not buffer:
                    break

        for chunk in chunks:
            size += len(chunk)
            if size > expected_size:
                raise ChecksumMismatch(f"{path}: the source sent more than the {expected_size} bytes it announced")
            sha256.update(chunk)
            crc = zlib.crc32(chunk, crc)
            if blob is not None:
                blob.update(chunk)
            buffer += chunk
            flush(final=False)
        if size != expected_size:
            raise ChecksumMismatch(f"{path}: got {size} bytes, the source announced {expected_size}")
        digest = sha256.hexdigest()
        if expected_sha256 and digest != expected_sha256:
            raise ChecksumMismatch(f"{path}: sha256 {digest} does not match the published {expected_sha256}")
        if blob is not None and blob.hexdigest() != expected_git_oid:
            raise ChecksumMismatch(f"{path}: git blob id {blob.hexdigest()} does not match the published {expected_git_oid}")
        flush(final=True)
        completed = [f.result() for f in parts]
        full = b64_crc32(crc)
        s3.complete_multipart_upload(
            Bucket=location.bucket,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": completed},
            ChecksumCRC32=full,
            ChecksumType="FULL_OBJECT",
            MpuObjectSize=size,
        )
        return Uploaded(size=size, sha256=digest, crc32=full)
    except BaseException:
        for f in parts:
            f.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
        # The original error matters more; a stale upload is aborted on the next run.
        with contextlib.suppress(Exception):
            s3.abort_multipart_upload(Bucket=location.bucket, Key=key, UploadId=upload_id)
        raise
    finally:
        pool.shutdown(wait=True)


def object_sha256(s3: Any, location: S3Location, path: str, chunk_size: int = 8 << 20) -> tuple[str, int]:
    """Read an object back and hash it (``status --deep``): ``(sha256 hex, bytes)``."""
    resp = s3.get_object(Bucket=location.bucket, Key=location.key(path), ChecksumMode="ENABLED")
    digest = hashlib.sha256()
    size = 0
    body = resp["Body"]
    while True:
        chunk = body.read(chunk_size)
        if not chunk:
            return digest.hexdigest(), size
        digest.update(chunk)
        size += len(chunk)
