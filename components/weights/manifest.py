"""The checksum manifest of one staged model revision.

Written by the stager *after* every file of the revision is in S3 and verified, so its
presence means "this prefix is complete". Two files at the root of the prefix:

* ``SHA256SUMS`` (name configurable): ``sha256sum --check`` format, **largest file first**,
  so a verifier that takes lines in order balances its workers (longest job first);
* :data:`MANIFEST_NAME`: JSON with, per file, the size, the sha256 (Hugging Face's LFS
  ``oid`` or computed while streaming), the git blob id and the S3 full-object CRC32.

Plain data, standard library only (it runs inside the staging Job too).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from kimi_k3.weights import WeightsError

MANIFEST_NAME = ".kimi-k3-weights.json"
"""JSON manifest at the root of the prefix; written last of all."""
DEFAULT_SHA256SUMS = "SHA256SUMS"
"""Default name of the ``sha256sum`` manifest (the stack key ``weightsSha256Manifest``)."""
SCHEMA = "kimi-k3/weights-manifest/v1"

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_GIT_OID = re.compile(r"^[0-9a-f]{40}$")
_PATH = re.compile(r"^[\w.+-]+(/[\w.+-]+)*$")


def check_repo_path(path: str) -> str:
    """``path`` if it is a safe relative file path (no ``..``, no leading ``/``, no odd characters)."""
    if not isinstance(path, str) or not _PATH.match(path) or any(part in (".", "..") for part in path.split("/")):
        raise WeightsError(f"repository path {path!r} is not accepted; expected a relative path of letters, digits, '.', '_', '+', '-'")
    return path


@dataclass(frozen=True)
class ManifestEntry:
    """One file of the staged revision."""

    path: str
    """Path relative to the prefix (and to the weights directory on the node)."""
    size: int
    """Size in bytes."""
    sha256: str
    """Lower-case hex sha256 of the content."""
    git_oid: str | None = None
    """Git blob id Hugging Face reports (``oid``); the check for files not stored with LFS."""
    crc32: str | None = None
    """Base64 full-object CRC32 S3 stores for the object (``ChecksumCRC32``)."""

    def __post_init__(self) -> None:
        check_repo_path(self.path)
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0:
            raise WeightsError(f"manifest entry {self.path}: size {self.size!r} is not a byte count")
        if not isinstance(self.sha256, str) or not _SHA256.match(self.sha256):
            raise WeightsError(f"manifest entry {self.path}: sha256 {self.sha256!r} is not 64 lower-case hex digits")
        if self.git_oid is not None and not _GIT_OID.match(self.git_oid):
            raise WeightsError(f"manifest entry {self.path}: git oid {self.git_oid!r} is not 40 hex digits")


@dataclass(frozen=True)
class Manifest:
    """Every file of one model revision as staged in S3."""

    model_id: str
    """Hugging Face model id."""
    revision: str
    """Commit SHA the files come from."""
    entries: tuple[ManifestEntry, ...] = field(default_factory=tuple)
    """The files, in :func:`largest_first` order."""

    def __post_init__(self) -> None:
        paths = [e.path for e in self.entries]
        if len(set(paths)) != len(paths):
            raise WeightsError(f"manifest of {self.model_id}@{self.revision}: duplicate paths")
        object.__setattr__(self, "entries", tuple(largest_first(self.entries)))

    @property
    def total_bytes(self) -> int:
        """Sum of the file sizes."""
        return sum(e.size for e in self.entries)

    def by_path(self) -> dict[str, ManifestEntry]:
        """Entries keyed by path."""
        return {e.path: e for e in self.entries}

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, stable order): the same manifest gives the same bytes."""
        return json.dumps(
            {
                "schema": SCHEMA,
                "model_id": self.model_id,
                "revision": self.revision,
                "checksum": {"algorithm": "CRC32", "type": "FULL_OBJECT"},
                "total_bytes": self.total_bytes,
                "files": [
                    {k: v for k, v in (("path", e.path), ("size", e.size), ("sha256", e.sha256), ("git_oid", e.git_oid), ("crc32", e.crc32)) if v is not None}
                    for e in self.entries
                ],
            },
            indent=1,
            sort_keys=True,
        ) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> Manifest:
        """Parse :meth:`to_json` output; raises :class:`WeightsError` on anything else."""
        try:
            data = json.loads(text)
            if data.get("schema") != SCHEMA:
                raise WeightsError(f"weights manifest: schema {data.get('schema')!r} is not {SCHEMA!r}")
            entries = tuple(
                ManifestEntry(path=f["path"], size=f["size"], sha256=f["sha256"], git_oid=f.get("git_oid"), crc32=f.get("crc32"))
                for f in data["files"]
            )
            return cls(model_id=data["model_id"], revision=data["revision"], entries=entries)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise WeightsError(f"weights manifest is not readable: {err}") from None

    def sha256sums(self) -> str:
        """``sha256sum --check`` input, largest file first (two spaces: text mode, as sha256sum writes it)."""
        return "".join(f"{e.sha256}  {e.path}\n" for e in self.entries)


def largest_first(entries) -> list:
    """Entries sorted by size (largest first), then path: the order a greedy verifier should take them."""
    return sorted(entries, key=lambda e: (-e.size, e.path))


def parse_sha256sums(text: str) -> list[tuple[str, str]]:
    """``(sha256, path)`` pairs of a ``sha256sum`` file (text or binary mode); raises on a bad line."""
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        match = re.fullmatch(r"([0-9a-fA-F]{64}) [ *](.+)", line)
        if not match:
            raise WeightsError(f"sha256 manifest line {number} is not '<sha256>  <path>': {line[:80]!r}")
        pairs.append((match.group(1).lower(), check_repo_path(match.group(2))))
    return pairs
