"""How far a prefix is from holding the pinned revision: files and bytes per category.

Pure summary of :func:`kimi_k3.weights.stage.survey`'s verdicts, plus an optional deep
check that reads every staged object back and compares its sha256 (``--deep``: catches
content that changed behind metadata that still looks right).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kimi_k3.weights.s3store import S3Location, object_sha256
from kimi_k3.weights.stage import MISMATCHED, MISSING, STAGED, FileVerdict


@dataclass(frozen=True)
class WeightsStatus:
    """Counts and bytes of a prefix against the revision."""

    uri: str
    """The prefix surveyed (``s3://bucket/prefix/``)."""
    model_id: str
    """Hugging Face model id the prefix should hold."""
    revision: str
    """40-hex commit SHA the prefix should hold."""
    verdicts: tuple[FileVerdict, ...]
    """One verdict per file of the revision, largest first."""
    manifest_present: bool
    """True when the manifest (written last) is there."""

    def files(self, state: str) -> list[FileVerdict]:
        """Verdicts in one state."""
        return [v for v in self.verdicts if v.state == state]

    def bytes(self, state: str) -> int:
        """Bytes of the files in one state."""
        return sum(v.file.size for v in self.files(state))

    @property
    def total_bytes(self) -> int:
        """Bytes of the whole revision."""
        return sum(v.file.size for v in self.verdicts)

    @property
    def complete(self) -> bool:
        """Every file staged and the manifest written."""
        return self.manifest_present and all(v.state == STAGED for v in self.verdicts)


def deep_check(s3: Any, location: S3Location, verdicts: Sequence[FileVerdict], manifest_sha256: dict[str, str], workers: int = 8) -> list[FileVerdict]:
    """Re-read every staged object and demote those whose sha256 differs (expensive: reads every byte)."""

    def check(v: FileVerdict) -> FileVerdict:
        expected = v.file.sha256 or manifest_sha256.get(v.file.path)
        if v.state != STAGED or expected is None:
            return v
        digest, size = object_sha256(s3, location, v.file.path)
        if digest != expected or size != v.file.size:
            return FileVerdict(v.file, MISMATCHED, f"content sha256 {digest} is not {expected}", v.crc32)
        return v

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(check, verdicts))


def _gb(n: int) -> str:
    return f"{n / 1e9:,.1f} GB"


def format_status(status: WeightsStatus, limit: int = 20) -> list[str]:
    """Lines for a person: one summary per category, then the first ``limit`` problems."""
    lines = [f"weights {status.model_id}@{status.revision[:12]} in {status.uri}"]
    for state in (STAGED, MISSING, MISMATCHED):
        lines.append(f"  {state:<10} {len(status.files(state)):>5} files  {_gb(status.bytes(state)):>12}")
    lines.append(f"  {'total':<10} {len(status.verdicts):>5} files  {_gb(status.total_bytes):>12}")
    lines.append("  manifest   " + ("written (prefix complete)" if status.complete else "present, but files are missing or mismatched" if status.manifest_present else "not written yet"))
    problems = [v for v in status.verdicts if v.state != STAGED]
    for v in problems[:limit]:
        lines.append(f"  {v.state}: {v.file.path}" + (f" ({v.reason})" if v.reason else ""))
    if len(problems) > limit:
        lines.append(f"  ... and {len(problems) - limit} more")
    return lines
