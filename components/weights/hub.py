"""The Hugging Face side: list a pinned revision's files with their checksums, stream one file.

Two documented Hub endpoints, called with the standard library (the same code runs in the
staging Job, whose image need not carry ``huggingface_hub``):

* ``GET {endpoint}/api/models/{repo}/tree/{revision}?recursive=true`` — the listing
  ``huggingface_hub.HfApi.list_repo_tree`` pages through (``Link: <…>; rel="next"``). Each
  file has ``size`` and ``oid`` (its git blob id); a file stored with LFS also has
  ``lfs.oid``, the **sha256 of the content** (huggingface_hub maps it to
  ``BlobLfsInfo.sha256``, huggingface/huggingface_hub ``src/huggingface_hub/hf_api.py``);
* ``GET {endpoint}/{repo}/resolve/{revision}/{path}`` — the file itself (what ``hf_hub_url``
  builds, ``file_download.py``); LFS files redirect to a CDN with a signed URL.

The token goes only to the Hub's own host: :class:`_SameHostAuthRedirect` drops the
``Authorization`` header when a redirect leaves it (urllib would forward it).
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from kimi_k3.weights import WeightsError
from kimi_k3.weights.manifest import check_repo_path

DEFAULT_ENDPOINT = "https://huggingface.co"
"""Public Hub; ``HF_ENDPOINT`` (as huggingface_hub reads it) points elsewhere."""
USER_AGENT = "kimi-k3-aws-weights-stager/1"
_SHA40 = re.compile(r"^[0-9a-f]{40}$")
_SHA64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class HubFile:
    """One file of a model repository at a pinned revision."""

    path: str
    """Path in the repository."""
    size: int
    """Size in bytes of the content (for LFS files, of the object, not of the pointer)."""
    git_oid: str
    """Git blob id (sha1 of ``blob <size>\\0<content>`` for non-LFS files)."""
    sha256: str | None = None
    """sha256 of the content Hugging Face publishes for LFS files (``lfs.oid``); ``None`` otherwise."""


def git_blob_oid(size: int) -> hashlib._Hash:
    """A sha1 primed with git's blob header; feed it the content to get the blob id."""
    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(f"blob {size}\0".encode())
    return digest


class _SameHostAuthRedirect(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but never send the Hub token to another host (the CDN URL is signed)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc:
            new.remove_header("Authorization")
        return new


def _next_link(header: str | None) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header, if any."""
    for part in (header or "").split(","):
        if 'rel="next"' in part:
            return part.split(";", 1)[0].strip().strip("<>")
    return None


class HubClient:
    """Read-only access to one Hugging Face endpoint."""

    def __init__(self, endpoint: str = DEFAULT_ENDPOINT, token: str | None = None, timeout_s: float = 60.0) -> None:
        """Client of one endpoint: ``endpoint`` the Hub's base URL (as ``HF_ENDPOINT``), ``token`` a bearer token never sent to another host
        (redirects drop it), ``timeout_s`` each request's socket timeout in seconds."""
        if not re.match(r"^https?://[^/\s]+", endpoint or ""):
            raise WeightsError(f"Hugging Face endpoint {endpoint!r} is not accepted; expected https://host (as in HF_ENDPOINT)")
        self.endpoint = endpoint.rstrip("/")
        self.timeout_s = timeout_s
        self._token = token
        self._opener = urllib.request.build_opener(_SameHostAuthRedirect())

    def _request(self, url: str) -> urllib.request.Request:
        headers = {"User-Agent": USER_AGENT}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        return urllib.request.Request(url, headers=headers)

    def _open(self, url: str):
        try:
            return self._opener.open(self._request(url), timeout=self.timeout_s)
        except urllib.error.HTTPError as err:
            hint = " (gated or private: set the Hugging Face token)" if err.code in (401, 403) else ""
            raise WeightsError(f"Hugging Face answered {err.code} for {url}{hint}") from None
        except (urllib.error.URLError, OSError) as err:
            raise WeightsError(f"Hugging Face is not reachable at {url}: {err}") from None

    def list_files(self, repo_id: str, revision: str) -> list[HubFile]:
        """Every file of ``repo_id`` at the commit ``revision`` (following the listing's pages)."""
        if not _SHA40.match(revision or ""):
            raise WeightsError(f"revision {revision!r} is not accepted; expected the 40-hex commit SHA (a branch moves)")
        quoted_repo = urllib.parse.quote(repo_id, safe="/")
        url: str | None = f"{self.endpoint}/api/models/{quoted_repo}/tree/{revision}?recursive=true&expand=false"
        files: list[HubFile] = []
        seen: set[str] = set()
        while url:
            if url in seen:
                raise WeightsError(f"Hugging Face listing of {repo_id} loops at {url}")
            seen.add(url)
            with self._open(url) as resp:
                try:
                    page = json.load(resp)
                except ValueError as err:
                    raise WeightsError(f"Hugging Face listing of {repo_id}@{revision} is not JSON: {err}") from None
                url = _next_link(resp.headers.get("Link"))
            if not isinstance(page, list):
                raise WeightsError(f"Hugging Face listing of {repo_id}@{revision} is not a list of entries")
            for item in page:
                if item.get("type") != "file":
                    continue
                files.append(_hub_file(item))
        if not files:
            raise WeightsError(f"{repo_id}@{revision} lists no files")
        return files

    def resolve_url(self, repo_id: str, revision: str, path: str) -> str:
        """The download URL of one file at the pinned revision."""
        quoted = "/".join(urllib.parse.quote(p) for p in check_repo_path(path).split("/"))
        return f"{self.endpoint}/{urllib.parse.quote(repo_id, safe='/')}/resolve/{revision}/{quoted}"

    def open_file(self, repo_id: str, revision: str, path: str) -> BinaryIO:
        """A readable response for one file (close it when done)."""
        return self._open(self.resolve_url(repo_id, revision, path))


def _hub_file(item: dict) -> HubFile:
    """A :class:`HubFile` from one tree entry; refuses entries without a usable checksum."""
    path = check_repo_path(item.get("path", ""))
    lfs = item.get("lfs") or None
    oid = str(item.get("oid", ""))
    if not _SHA40.match(oid):
        raise WeightsError(f"Hugging Face gave {path} no git blob id (oid {oid!r})")
    if lfs is not None:
        sha256 = str(lfs.get("oid", "")).removeprefix("sha256:")
        if not _SHA64.match(sha256):
            raise WeightsError(f"Hugging Face gave the LFS file {path} no sha256 (lfs.oid {lfs.get('oid')!r})")
        return HubFile(path=path, size=int(lfs.get("size", item.get("size"))), git_oid=oid, sha256=sha256)
    return HubFile(path=path, size=int(item["size"]), git_oid=oid)


def iter_chunks(stream: BinaryIO, chunk_size: int = 8 << 20) -> Iterator[bytes]:
    """Read ``stream`` in chunks until EOF."""
    while True:
        chunk = stream.read(chunk_size)
        if not chunk:
            return
        yield chunk
