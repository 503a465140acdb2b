"""Copy a pinned Hugging Face revision into an S3 prefix, once, resumably, verified.

:func:`classify` decides, per file, whether the prefix already holds it (``staged``), lacks
it (``missing``) or holds something else (``mismatched``, with the reason); :func:`stage`
fetches the missing and mismatched files largest first, verifies each against the checksum
Hugging Face publishes while streaming it into S3 (see :mod:`.s3store`), retries a corrupt
download, and writes the manifests last — only when every file is staged.

A file counts as staged when its object has the file's size, a FULL_OBJECT CRC32, our
metadata naming the published sha256 (or git blob id), and — once a manifest exists — the
CRC32 the manifest recorded. An object overwritten by anything else fails one of these.
"""

from __future__ import annotations

import http.client
import sys
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from kimi_k3.weights import WeightsError
from kimi_k3.weights.hub import HubClient, HubFile, iter_chunks
from kimi_k3.weights.manifest import DEFAULT_SHA256SUMS, MANIFEST_NAME, Manifest, ManifestEntry, largest_first
from kimi_k3.weights.s3store import (
    GIT_OID_META,
    SHA256_META,
    ChecksumMismatch,
    ObjectState,
    S3Location,
    abort_stale_uploads,
    head_many,
    object_sha256,
    read_text,
    upload_verified,
    write_text,
)

STAGED, MISSING, MISMATCHED = "staged", "missing", "mismatched"

STAGING_NAMESPACE = "kimi-weights"
"""Namespace of the in-cluster staging Job (:mod:`kimi_k3.weights.staging_job`)."""


def job_name(revision: str) -> str:
    """``weights-stage-<revision 12>``: a new revision is a new Job (a Job's pod template is immutable)."""
    return f"weights-stage-{revision[:12]}"


@dataclass(frozen=True)
class FileVerdict:
    """Where one file of the revision stands in the prefix."""

    file: HubFile
    """The file as Hugging Face lists it at the revision."""
    state: str
    """:data:`STAGED`, :data:`MISSING` or :data:`MISMATCHED`."""
    reason: str = ""
    """Why it is mismatched."""
    crc32: str | None = None
    """S3's CRC32 of the staged object."""


def verdict(file: HubFile, obj: ObjectState | None, recorded: ManifestEntry | None) -> FileVerdict:
    """Classify one file from its object's state and the manifest's record (pure)."""
    if obj is None:
        return FileVerdict(file, MISSING)
    problems = []
    if obj.size != file.size:
        problems.append(f"size {obj.size} instead of {file.size}")
    if obj.checksum_type != "FULL_OBJECT" or not obj.crc32:
        problems.append("no full-object CRC32 in S3")
    if file.sha256 is not None and obj.metadata.get(SHA256_META) != file.sha256:
        problems.append("sha256 metadata does not name the published sha256")
    if file.sha256 is None and obj.metadata.get(GIT_OID_META) != file.git_oid:
        problems.append("git-oid metadata does not name the published blob id")
    if recorded is not None:
        if recorded.crc32 and obj.crc32 and recorded.crc32 != obj.crc32:
            problems.append(f"CRC32 {obj.crc32} differs from the manifest's {recorded.crc32}")
        if file.sha256 is not None and recorded.sha256 != file.sha256:
            problems.append("the manifest records another sha256")
    if problems:
        return FileVerdict(file, MISMATCHED, "; ".join(problems), obj.crc32)
    return FileVerdict(file, STAGED, crc32=obj.crc32)


def classify(files: Iterable[HubFile], objects: Mapping[str, ObjectState | None], manifest: Manifest | None) -> list[FileVerdict]:
    """:func:`verdict` for every file, largest first (pure)."""
    recorded = manifest.by_path() if manifest is not None else {}
    return [verdict(f, objects.get(f.path), recorded.get(f.path)) for f in largest_first(files)]


def reserved_names(sha256sums_name: str) -> set[str]:
    """Paths the stager writes itself; a repository file with such a path is refused."""
    return {MANIFEST_NAME, sha256sums_name}


def read_manifest(s3: Any, location: S3Location) -> Manifest | None:
    """The prefix's manifest, or ``None`` (absent, or unreadable — then nothing is trusted from it)."""
    text = read_text(s3, location, MANIFEST_NAME)
    if text is None:
        return None
    try:
        return Manifest.from_json(text)
    except WeightsError:
        return None


def survey(hub: HubClient, s3: Any, location: S3Location, model_id: str, revision: str, sha256sums_name: str = DEFAULT_SHA256SUMS, workers: int = 16) -> tuple[list[FileVerdict], Manifest | None]:
    """List the revision on Hugging Face, look at the prefix, classify every file."""
    files = hub.list_files(model_id, revision)
    clash = reserved_names(sha256sums_name) & {f.path for f in files}
    if clash:
        raise WeightsError(f"{model_id}@{revision} has files named like the stager's own manifests: {', '.join(sorted(clash))}; pick another weightsSha256Manifest")
    manifest = read_manifest(s3, location)
    if manifest is not None and (manifest.model_id, manifest.revision) != (model_id, revision):
        raise WeightsError(
            f"{location.uri} holds {manifest.model_id}@{manifest.revision}, not {model_id}@{revision}; stage each revision into its own prefix"
        )
    objects = head_many(s3, location, [f.path for f in files], workers=workers)
    return classify(files, objects, manifest), manifest


def survey_manifest(s3: Any, location: S3Location, model_id: str, revision: str, workers: int = 16) -> tuple[list[FileVerdict], Manifest] | None:
    """The prefix against its own manifest, from S3 alone (no Hugging Face): ``None`` without a manifest of that revision.

    A file is staged when its object exists with the manifest's size and CRC32 (the manifest
    is written only after every file was verified against its published checksum).
    """
    manifest = read_manifest(s3, location)
    if manifest is None or (manifest.model_id, manifest.revision) != (model_id, revision):
        return None
    objects = head_many(s3, location, [e.path for e in manifest.entries], workers=workers)
    verdicts = []
    for entry in sorted(manifest.entries, key=lambda e: (-e.size, e.path)):
        file = HubFile(entry.path, entry.size, entry.git_oid or "", entry.sha256)
        obj = objects.get(entry.path)
        if obj is None:
            verdicts.append(FileVerdict(file, MISSING))
        elif obj.size != entry.size:
            verdicts.append(FileVerdict(file, MISMATCHED, f"size {obj.size} instead of the manifest's {entry.size}", obj.crc32))
        elif entry.crc32 and obj.crc32 != entry.crc32:
            verdicts.append(FileVerdict(file, MISMATCHED, f"CRC32 {obj.crc32} differs from the manifest's {entry.crc32}", obj.crc32))
        else:
            verdicts.append(FileVerdict(file, STAGED, crc32=obj.crc32))
    return verdicts, manifest


@dataclass
class StageReport:
    """What one :func:`stage` run did."""

    skipped: list[str] = field(default_factory=list)
    """Files already staged."""
    fetched: list[str] = field(default_factory=list)
    """Files copied (missing or mismatched before)."""
    retried: list[str] = field(default_factory=list)
    """Files whose first download failed its checksum and was fetched again."""
    bytes_fetched: int = 0
    """Bytes of the files copied in this run (retried downloads counted once)."""
    aborted_uploads: int = 0
    """Unfinished multipart uploads of an earlier run, aborted."""
    manifest: Manifest | None = None
    """The manifest written at the end; ``None`` until the run completes."""


def _fetch_one(hub: HubClient, s3: Any, location: S3Location, model_id: str, revision: str, file: HubFile, attempts: int, part_size: int, on_bytes, log) -> tuple[str, int, bool]:
    """Copy one file, retrying a checksum failure; returns ``(crc32, bytes, retried)``."""
    last: Exception | None = None
    for attempt in range(1, attempts + 1):
        sent = 0

        def count(n: int) -> None:
            nonlocal sent
            sent += n
            if on_bytes:
                on_bytes(n)

        stream = hub.open_file(model_id, revision, file.path)
        try:
            result = upload_verified(
                s3, location, file.path, iter_chunks(stream),
                expected_size=file.size, expected_sha256=file.sha256,
                expected_git_oid=None if file.sha256 else file.git_oid,
                part_size=part_size, on_bytes=count,
            )
            return result.crc32, result.size, attempt > 1
        except (ChecksumMismatch, OSError, http.client.HTTPException) as err:  # corrupt, or the download broke off
            last = err
            if on_bytes and sent:
                on_bytes(-sent)  # those bytes do not count; the file starts over
            kind = "checksum failure" if isinstance(err, ChecksumMismatch) else f"download interrupted ({type(err).__name__})"
            log(f"{file.path}: {kind}, fetching again ({attempt}/{attempts}): {err}")
        finally:
            stream.close()
    raise WeightsError(f"{file.path}: still failing after {attempts} downloads: {last}")


def stage(
    hub: HubClient,
    s3: Any,
    location: S3Location,
    model_id: str,
    revision: str,
    *,
    sha256sums_name: str = DEFAULT_SHA256SUMS,
    workers: int = 8,
    attempts: int = 3,
    part_size: int = 64 << 20,
    on_bytes: Callable[[int], None] | None = None,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> StageReport:
    """Make ``location`` hold exactly the verified files of ``model_id@revision``, then write the manifests.

    Resumable: staged files are skipped; unfinished multipart uploads of an earlier run are
    aborted (run one stager per prefix at a time). Raises :class:`WeightsError` when a file
    cannot be staged; the manifests are then not written, so the prefix never looks complete.
    """
    verdicts, _ = survey(hub, s3, location, model_id, revision, sha256sums_name)
    report = StageReport(aborted_uploads=abort_stale_uploads(s3, location))
    crcs: dict[str, str] = {}
    todo = []
    for v in verdicts:
        if v.state == STAGED:
            report.skipped.append(v.file.path)
            crcs[v.file.path] = v.crc32 or ""
        else:
            if v.state == MISMATCHED:
                log(f"{v.file.path}: re-fetching ({v.reason})")
            todo.append(v.file)
    log(f"{location.uri}: {len(report.skipped)} files staged, {len(todo)} to copy ({sum(f.size for f in todo)} bytes)")
    failures: list[str] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(_fetch_one, hub, s3, location, model_id, revision, f, attempts, part_size, on_bytes, log): f for f in todo}
        for future in as_completed(futures):
            file = futures[future]
            try:
                crc, size, retried = future.result()
            except WeightsError as err:
                failures.append(str(err))
                continue
            except Exception as err:  # an S3 refusal (botocore ClientError) fails this file, not the whole run
                failures.append(f"{file.path}: {type(err).__name__}: {err}")
                continue
            crcs[file.path] = crc
            report.fetched.append(file.path)
            report.bytes_fetched += size
            if retried:
                report.retried.append(file.path)
            log(f"{file.path}: staged ({size} bytes)")
    if failures:
        raise WeightsError(f"{len(failures)} file(s) could not be staged; the manifest was not written: " + " | ".join(sorted(failures)))
    entries = []
    sha_of_git_files = _git_file_sha256(s3, location, [v.file for v in verdicts if v.file.sha256 is None])
    for v in verdicts:
        f = v.file
        entries.append(ManifestEntry(path=f.path, size=f.size, sha256=f.sha256 or sha_of_git_files[f.path], git_oid=f.git_oid, crc32=crcs[f.path] or None))
    manifest = Manifest(model_id=model_id, revision=revision, entries=tuple(entries))
    write_text(s3, location, sha256sums_name, manifest.sha256sums())
    write_text(s3, location, MANIFEST_NAME, manifest.to_json())
    report.manifest = manifest
    report.fetched.sort()
    report.retried.sort()
    log(f"{location.uri}: complete, {len(entries)} files, {manifest.total_bytes} bytes; wrote {sha256sums_name} and {MANIFEST_NAME}")
    return report


def _git_file_sha256(s3: Any, location: S3Location, files: list[HubFile]) -> dict[str, str]:
    """sha256 of the small files Hugging Face keeps in git (no published sha256): read back from S3."""
    out = {}
    for f in files:
        digest, size = object_sha256(s3, location, f.path)
        if size != f.size:
            raise WeightsError(f"{f.path}: S3 returned {size} bytes, expected {f.size}")
        out[f.path] = digest
    return out
