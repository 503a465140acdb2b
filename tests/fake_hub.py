"""A real HTTP server on loopback that answers like the Hugging Face Hub for one tiny repository.

Implements the two endpoints the stager uses (see components/weights/hub.py): the paged tree
listing ``/api/models/{repo}/tree/{revision}`` (``Link: rel="next"``) and
``/{repo}/resolve/{revision}/{path}``, which for LFS files redirects to a "CDN" path served
under another host name (``localhost`` vs ``127.0.0.1``), as the Hub redirects to its CDN.
Tests can corrupt the next N downloads of a file and read which headers each request carried.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit


def git_oid(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass
class FakeRepo:
    repo_id: str
    revision: str
    files: dict[str, bytes]
    lfs: set[str]
    page_size: int = 2
    corrupt: dict[str, int] = field(default_factory=dict)
    """path -> how many of the next downloads serve a flipped byte."""
    truncate: dict[str, int] = field(default_factory=dict)
    """path -> how many of the next downloads break off halfway (full Content-Length, then the connection closes)."""
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(host, path, Authorization header) of every request."""
    downloads: dict[str, int] = field(default_factory=dict)

    def tree(self) -> list[dict]:
        entries = []
        for path, content in sorted(self.files.items()):
            entry = {"type": "file", "path": path, "size": len(content), "oid": git_oid(content)}
            if path in self.lfs:
                pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{hashlib.sha256(content).hexdigest()}\nsize {len(content)}\n".encode()
                entry = {"type": "file", "path": path, "size": len(content), "oid": git_oid(pointer), "lfs": {"oid": hashlib.sha256(content).hexdigest(), "size": len(content), "pointerSize": len(pointer)}}
            entries.append(entry)
        entries.insert(1, {"type": "directory", "path": "sub", "oid": "0" * 40, "size": 0})
        return entries


class FakeHub:
    """Start with ``with FakeHub(repo) as hub: hub.endpoint``."""

    def __init__(self, repo: FakeRepo) -> None:
        self.repo = repo
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                repo = outer.repo
                url = urlsplit(self.path)
                repo.requests.append((self.headers.get("Host", ""), url.path, self.headers.get("Authorization")))
                tree_prefix = f"/api/models/{repo.repo_id}/tree/{repo.revision}"
                resolve_prefix = f"/{repo.repo_id}/resolve/{repo.revision}/"
                if url.path == tree_prefix:
                    entries = repo.tree()
                    start = int(parse_qs(url.query).get("cursor", ["0"])[0])
                    page = entries[start : start + repo.page_size]
                    headers = {}
                    if start + repo.page_size < len(entries):
                        headers["Link"] = f'<{outer.endpoint}{tree_prefix}?recursive=true&cursor={start + repo.page_size}>; rel="next"'
                    return self._send(200, json.dumps(page).encode(), headers)
                if url.path.startswith(resolve_prefix):
                    path = unquote(url.path[len(resolve_prefix):])
                    if path not in repo.files:
                        return self._send(404, b"not found")
                    if path in repo.lfs:  # the Hub sends LFS files from its CDN
                        return self._send(302, b"", {"Location": f"{outer.cdn}/cdn/{path}"})
                    return self._serve(path)
                if url.path.startswith("/cdn/"):
                    return self._serve(unquote(url.path[len("/cdn/"):]))
                return self._send(404, b"no such endpoint")

            def _serve(self, path: str):
                repo = outer.repo
                repo.downloads[path] = repo.downloads.get(path, 0) + 1
                content = repo.files[path]
                if repo.truncate.get(path, 0) > 0:
                    repo.truncate[path] -= 1
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(content)))
                    self.end_headers()
                    self.wfile.write(content[: len(content) // 2])
                    self.close_connection = True
                    return None
                if repo.corrupt.get(path, 0) > 0:
                    repo.corrupt[path] -= 1
                    content = bytes([content[0] ^ 0xFF]) + content[1:]
                return self._send(200, content, {"Content-Type": "application/octet-stream"})

            def _send(self, code: int, body: bytes, headers: dict | None = None):
                self.send_response(code)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        port = self.server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{port}"
        self.cdn = f"http://localhost:{port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
