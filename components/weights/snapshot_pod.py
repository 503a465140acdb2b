"""The engine's side of restore instead of rebuild (pod side, standard library only; docs/weights.md).

Two halves, both run from the pod-side modules' ConfigMap (:mod:`kimi_k3.weights.pod_files`):

* :func:`snapshot_after_healthy`, in the warm-up sidecar before its warm-up request: once vLLM answers
  ``/health``, ``POST /sleep?level=2`` (vLLM's dev endpoint, served only with
  ``VLLM_SERVER_DEV_MODE=1``: :data:`~kimi_k3.weights.engine_snapshot.DEV_MODE_ENV`; level 2 releases the weights and
  the KV cache, docs.vllm.ai features/sleep_mode), ``POST /collective_rpc`` ``checkpoint_prepare`` (the ranks release
  the communicator memory a checkpoint cannot move), ask the snapshot agent for a dump (:class:`AgentChannel`), write
  ``SHA256SUMS`` then ``KEY`` last (:func:`seal`), then ``checkpoint_restore`` and the wake-up whatever happened;
* :func:`restore_or_cold`, the engine container's start: the recorded key against this pod's
  (:func:`~kimi_k3.weights.engine_snapshot.restore_decision`, naming the first field that differs), every
  file's sha256 against ``SHA256SUMS``, then the agent's restore into this container; anything short of
  all of it is a cold start (``exec vllm serve``).

Every step logs one line of :mod:`kimi_k3.weights.engine_snapshot` (``VERIFY_LOG``, ``RESTORE_LOG``,
``DUMP_LOG``, ``COLD_LOG``), the lines ``kimi-k3 startup-report`` reads.

The agent protocol is files on the snapshot volume (the node-local NVMe, which the privileged agent
mounts from the host): a request ``.agent/requests/<id>.json`` written atomically, answered by
``.agent/results/<id>.json`` (``{"ok": true}`` or ``{"ok": false, "error": ...}``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kimi_k3.weights import engine_snapshot

AGENT_DIR = ".agent"
"""Directory of the agent's requests and results under the snapshot root."""
REQUESTS = "requests"
"""Requests from the pods (``<id>.json``), under :data:`AGENT_DIR`."""
RESULTS = "results"
"""The agent's answers (``<id>.json``), under :data:`AGENT_DIR`."""
SLEEP_LEVEL = 2
"""vLLM sleep level before a dump: "Level 2 sleep will discard both the model weights and the KV cache" (docs.vllm.ai features/sleep_mode)."""
_CHUNK = 8 << 20


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


SEAL_WORKERS = 8
"""Threads hashing a snapshot's files (``hashlib`` releases the GIL while it hashes; CRIU writes one pages image per process)."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def file_sums(directory: Path, workers: int = SEAL_WORKERS) -> dict[str, str]:
    """``name -> sha256`` of every file of a snapshot (relative names; the manifest, the key and temporary files left out), ``workers`` at once."""
    names = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        name = path.relative_to(directory).as_posix()
        if name in (engine_snapshot.SNAPSHOT_MANIFEST, engine_snapshot.KEY_FILE, engine_snapshot.S3_CLAIM) or path.name.startswith("."):
            continue
        names[name] = path
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return dict(zip(names, pool.map(_sha256, names.values()), strict=True))


def _size(directory: Path, names: list[str]) -> int:
    return sum((directory / n).stat().st_size for n in names)


def seal(directory: Path, key: engine_snapshot.SnapshotKey) -> tuple[int, int]:
    """Write ``SHA256SUMS`` of every file, then ``KEY`` last (each atomically): ``(files, bytes)``. A snapshot without ``KEY`` is incomplete."""
    (directory / engine_snapshot.KEY_FILE).unlink(missing_ok=True)
    sums = file_sums(directory)
    _atomic_write(directory / engine_snapshot.SNAPSHOT_MANIFEST, "".join(f"{digest}  {name}\n" for name, digest in sums.items()))
    _atomic_write(directory / engine_snapshot.KEY_FILE, key.to_json())
    return len(sums), _size(directory, list(sums))


@dataclass(frozen=True)
class Verdict:
    """What :func:`check` found: restore or not, why, and what was verified."""

    restore: bool
    """Every field of the key and every file's sha256 match."""
    reason: str
    """The decision in words (the first field or file that differs)."""
    files: int = 0
    """Files verified."""
    bytes: int = 0
    """Bytes verified."""


def check(directory: Path, current: engine_snapshot.SnapshotKey) -> Verdict:
    """The snapshot in ``directory`` against this pod's key, then every file against ``SHA256SUMS``."""
    key_path = directory / engine_snapshot.KEY_FILE
    recorded = key_path.read_text() if key_path.is_file() else None
    ok, reason = engine_snapshot.restore_decision(recorded, current)
    if not ok:
        return Verdict(False, reason)
    manifest = directory / engine_snapshot.SNAPSHOT_MANIFEST
    if not manifest.is_file():
        return Verdict(False, f"{engine_snapshot.SNAPSHOT_MANIFEST} missing: cold start")
    actual = file_sums(directory)
    problems = engine_snapshot.manifest_problems(manifest.read_text(), actual)
    if problems:
        return Verdict(False, f"snapshot file {problems[0]}: cold start")
    return Verdict(True, reason, len(actual), _size(directory, list(actual)))


class AgentChannel:
    """Requests to the snapshot agent as files on the shared snapshot volume (see the module docstring)."""

    def __init__(self, root: Path, timeout_s: float = 900.0, poll_s: float = 0.2) -> None:
        """``root``: the snapshot root both sides mount; ``timeout_s``: how long to wait for an answer; ``poll_s``: how often to look."""
        self.root, self.timeout_s, self.poll_s = root, timeout_s, poll_s

    def ask(self, action: str, **fields: str | int) -> dict:
        """Write a request for ``action`` (``dump`` or ``restore``) with ``fields``; the agent's answer, or ``ok: false`` on a timeout."""
        requests, results = self.root / AGENT_DIR / REQUESTS, self.root / AGENT_DIR / RESULTS
        requests.mkdir(parents=True, exist_ok=True)
        results.mkdir(parents=True, exist_ok=True)
        ident = f"{action}-{os.getpid()}-{time.monotonic_ns()}"  # unique per process, no wall clock
        _atomic_write(requests / f"{ident}.json", json.dumps({"id": ident, "action": action, **fields}, sort_keys=True))
        answer = results / f"{ident}.json"
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if answer.is_file():
                try:
                    return json.loads(answer.read_text())
                except json.JSONDecodeError:  # a writer that does not replace atomically: read again until the deadline
                    pass
            time.sleep(self.poll_s)
        (requests / f"{ident}.json").unlink(missing_ok=True)
        return {"ok": False, "error": f"the snapshot agent did not answer {action} in {self.timeout_s:.0f} s"}


class CopyChannel:
    """Requests to the sync sidecar's snapshot copier (:mod:`kimi_k3.weights.snapshot_copy`): files under ``<root>/.s3/``."""

    QUEUE = ".s3"

    def __init__(self, root: Path, uri: str, timeout_s: float = 900.0, poll_s: float = 0.2) -> None:
        """``root``: the snapshot root; ``uri``: the copies' S3 prefix (for the log); ``timeout_s``: how long a fetch may take; ``poll_s``: how often to look."""
        self.root, self.uri, self.timeout_s, self.poll_s = root, uri, timeout_s, poll_s

    def _request(self, action: str, digest: str) -> Path:
        queue = self.root / self.QUEUE
        queue.mkdir(parents=True, exist_ok=True)
        request = queue / f"{action}.{digest}"
        for old in (request.with_name(request.name + ".ok"), request.with_name(request.name + ".fail")):
            old.unlink(missing_ok=True)
        _atomic_write(request, digest + "\n")
        return request

    def upload(self, digest: str) -> None:
        """Ask for the sealed snapshot ``digest`` to be copied to S3 (not waited for: serving never waits on it)."""
        self._request("upload", digest)

    def _answer(self, request: Path, timeout_s: float) -> tuple[bool, str] | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for verdict in ("ok", "fail"):
                answer = request.with_name(f"{request.name}.{verdict}")
                if answer.is_file():
                    return verdict == "ok", answer.read_text().strip()
            time.sleep(self.poll_s)
        request.unlink(missing_ok=True)
        return None

    def fetch(self, digest: str) -> tuple[bool, str]:
        """Ask for the S3 copy of ``digest`` on this node and wait for the answer: ``(landed, the copier's line)``."""
        answer = self._answer(self._request("fetch", digest), self.timeout_s)
        if answer is None:
            return False, f"the sync sidecar did not fetch the S3 copy in {self.timeout_s:.0f} s (is weightsSyncSidecar's copier running?)"
        return answer

    def claim(self, digest: str, timeout_s: float = 120.0) -> tuple[str, str]:
        """Ask the copier to take the key's ``CLAIM`` in S3 (``If-None-Match: *``) and wait: ``(outcome, the copier's line)``, the
        outcome one of :data:`~kimi_k3.weights.engine_snapshot.CLAIM_WON`, ``CLAIM_HELD``, ``CLAIM_COPIED``, ``CLAIM_ERROR``."""
        answer = self._answer(self._request("claim", digest), timeout_s)
        if answer is None:
            return engine_snapshot.CLAIM_ERROR, f"the sync sidecar did not answer the claim in {timeout_s:.0f} s (is weightsSyncSidecar's copier running?)"
        line = answer[1]
        for outcome in (engine_snapshot.CLAIM_WON, engine_snapshot.CLAIM_HELD, engine_snapshot.CLAIM_COPIED):
            if line.startswith(outcome):
                return outcome, line
        return engine_snapshot.CLAIM_ERROR, line

    def release(self, digest: str) -> None:
        """Ask the copier to delete a ``CLAIM`` this node won and gives up (no dump): not waited for."""
        self._request("release", digest)


class Engine:
    """vLLM's HTTP endpoints on loopback: ``/health``, and the dev endpoints ``/sleep`` and ``/wake_up`` (``VLLM_SERVER_DEV_MODE=1``)."""

    def __init__(self, url: str, timeout_s: float = 600.0) -> None:
        """``url``: ``http://127.0.0.1:<engine port>``; ``timeout_s``: per request (a level-2 sleep of a TP8 engine takes seconds)."""
        self.url, self.timeout_s = url.rstrip("/"), timeout_s

    def _call(self, method: str, path: str, body: dict | None = None) -> int:
        data = json.dumps(body).encode() if body is not None else b"" if method == "POST" else None
        request = urllib.request.Request(self.url + path, method=method, data=data, headers={"Content-Type": "application/json"} if body is not None else {})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.status
        except urllib.error.HTTPError as err:
            return err.code
        except (urllib.error.URLError, OSError):
            return 0

    def healthy(self) -> bool:
        """``GET /health`` answers 200."""
        return self._call("GET", "/health") == 200

    def wait_healthy(self, timeout_s: float, poll_s: float = 2.0) -> bool:
        """Poll ``/health`` until 200 or ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.healthy():
                return True
            time.sleep(poll_s)
        return False

    def sleep(self, level: int = SLEEP_LEVEL) -> bool:
        """``POST /sleep?level=N``; True on 200."""
        return self._call("POST", f"/sleep?level={level}") == 200

    def wake_up(self) -> bool:
        """Wake a level-2 sleeper with its weights read again: ``POST /wake_up?tags=weights`` (the weights' memory back),
        ``POST /collective_rpc`` ``{"method": "reload_weights"}`` (the weights loaded in place, from the node's page cache),
        ``POST /wake_up?tags=kv_cache`` (the KV cache re-allocated). Level 2 discards the weights' content (docs.vllm.ai
        features/sleep_mode), so a plain ``/wake_up`` would serve garbage. True when every call answered 200."""
        steps = (("/wake_up?tags=weights", None), ("/collective_rpc", {"method": "reload_weights"}), ("/wake_up?tags=kv_cache", None))
        return all(self._call("POST", path, body) == 200 for path, body in steps)

    def checkpoint_prepare(self) -> bool:
        """``POST /collective_rpc`` ``{"method": "checkpoint_prepare"}``: every rank releases the communicator memory a process
        checkpoint cannot move (FlashInfer all-reduce and all2all workspaces, vLLM 0.27.1); True on 200."""
        return self._call("POST", "/collective_rpc", {"method": engine_snapshot.CHECKPOINT_RPCS[0]}) == 200

    def checkpoint_restore(self) -> bool:
        """``POST /collective_rpc`` ``{"method": "checkpoint_restore"}``: the ranks rebuild what :meth:`checkpoint_prepare`
        released (after a dump that left the engine running, or in a restored engine); True on 200."""
        return self._call("POST", "/collective_rpc", {"method": engine_snapshot.CHECKPOINT_RPCS[1]}) == 200


def ready_peers(host: str, own_ip: str, resolver: Callable[..., list] = socket.getaddrinfo) -> list[str]:
    """The addresses ``host`` resolves to, less ``own_ip``: with a headless Service (``clusterIP: None``, ``publishNotReadyAddresses``
    false) the A records are its Ready endpoints only (Kubernetes docs, "DNS for Services and Pods": a headless Service's name
    "resolves to the set of IPs of all of the Ready Pods selected by the Service"). No answer (NXDOMAIN while none is Ready) is ``[]``."""
    try:
        answers = resolver(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):  # socket.gaierror is an OSError
        return []
    return sorted({str(sockaddr[0]) for *_, sockaddr in answers} - {own_ip})


@dataclass(frozen=True)
class Peers:
    """The other Ready replicas of this pod's key, by DNS (the pod has no Kubernetes API access)."""

    host: str
    """The headless Service's DNS name (:data:`~kimi_k3.weights.engine_snapshot.PEERS_HOST_ENV`)."""
    own_ip: str
    """This pod's IP (:data:`~kimi_k3.weights.engine_snapshot.POD_IP_ENV`), never its own peer."""
    wait_s: float = engine_snapshot.PEER_READY_WAIT_S
    """How long the claim's winner waits for a Ready peer (:data:`~kimi_k3.weights.engine_snapshot.PEER_READY_WAIT_S`)."""
    poll_s: float = 5.0
    """How often it resolves the name again (CoreDNS answers a headless Service with a 5 s TTL)."""
    resolver: Callable[..., list] = socket.getaddrinfo
    """``socket.getaddrinfo`` or a stand-in (tests)."""
    serving_host: str | None = None
    """The headless Service of every Ready serving pod, of any key (:data:`~kimi_k3.weights.engine_snapshot.SERVING_HOST_ENV`)."""
    other_key_polls: int = 3
    """Polls in a row that must see a Ready pod of another key (and none of this key) before it counts as a rollout: the two
    Services' endpoints of one pod may land a moment apart, so a peer of this key just turning Ready is not mistaken for one."""

    def wait_ready(self) -> tuple[list[str], list[str]]:
        """``(Ready peers of this key, [])`` as soon as there is one; ``([], Ready pods of another key)`` once they have been
        seen :attr:`other_key_polls` polls in a row (a rollout); ``([], [])`` once :attr:`wait_s` has passed without either."""
        deadline = time.monotonic() + self.wait_s
        seen_other = 0
        while True:
            found = ready_peers(self.host, self.own_ip, self.resolver)
            if found:
                return found, []
            other = ready_peers(self.serving_host, self.own_ip, self.resolver) if self.serving_host else []
            seen_other = seen_other + 1 if other else 0
            if seen_other >= self.other_key_polls:
                return [], other
            if time.monotonic() >= deadline:
                return [], []
            time.sleep(self.poll_s)


def elect_dump(copies: CopyChannel, peers: Peers, key: engine_snapshot.SnapshotKey, log: Callable[[str], None]) -> bool:
    """Whether this replica dumps the new ``key`` now: it wins the key's ``CLAIM`` (the copier's conditional put) and another
    replica of the key is Ready within :attr:`Peers.wait_s`, so the service serves while this one sleeps, dumps and wakes. The
    loser, a key already in S3, or a failed claim: no dump, Ready at once. No Ready peer in time: no dump, the claim released."""
    short = key.digest()[:12]
    outcome, line = copies.claim(key.digest())
    if outcome != engine_snapshot.CLAIM_WON:
        why = {engine_snapshot.CLAIM_HELD: "another replica won the claim and dumps it", engine_snapshot.CLAIM_COPIED: "its S3 copy exists (the next start fetches it)"}
        log(engine_snapshot.ELECTION_LOG.format(key=short, verdict=f"no dump, Ready now: {why.get(outcome, 'the claim failed')} ({line})"))
        return False
    log(engine_snapshot.ELECTION_LOG.format(key=short, verdict=f"won the claim ({line}); waiting up to {peers.wait_s:g} s for another replica of this key to be Ready ({peers.host})"))
    start = time.monotonic()
    found, other_key = peers.wait_ready()
    if other_key:
        copies.release(key.digest())
        log(engine_snapshot.ELECTION_LOG.format(key=short, verdict=f"{', '.join(other_key)} of another key serve, none of this key (a rollout waits for this replica): "
                                                "Ready without a dump, claim released (the next replica of this key dumps it beside this one)"))
        return False
    if not found:
        copies.release(key.digest())
        log(engine_snapshot.ELECTION_LOG.format(key=short, verdict=f"no other replica of this key Ready in {peers.wait_s:g} s: Ready without a dump, claim released (the next start tries again)"))
        return False
    log(engine_snapshot.ELECTION_LOG.format(key=short, verdict=f"{', '.join(found)} Ready after {time.monotonic() - start:.0f} s: dumping before this replica's Ready"))
    return True


def snapshot_dir(root: Path, key: engine_snapshot.SnapshotKey) -> Path:
    """Where a key's snapshot lives: ``<root>/<key digest>``."""
    return root / key.digest()


def _upload(copies: CopyChannel | None, key: engine_snapshot.SnapshotKey, log: Callable[[str], None]) -> None:
    if copies is not None:
        copies.upload(key.digest())
        log(engine_snapshot.UPLOAD_LOG.format(key=key.digest()[:12], uri=f"{copies.uri}{key.digest()}/"))


def snapshot_after_healthy(engine: Engine, agent: AgentChannel, root: Path, key: engine_snapshot.SnapshotKey, log: Callable[[str], None], token: str,
                           *, health_timeout_s: float = 3600.0, copies: CopyChannel | None = None, peers: Peers | None = None) -> bool:
    """Snapshot a healthy engine once per key: sleep level 2, ``checkpoint_prepare``, the agent's dump, ``SHA256SUMS`` then
    ``KEY``, ``checkpoint_restore`` and wake up (always). True: sealed.

    ``token`` is the value of ``KIMI_K3_SNAPSHOT_TOKEN`` in the engine's environment, by which the agent finds its process tree;
    ``copies``: once sealed (or found sealed), the sync sidecar copies it to S3 (the copier skips a key already there);
    ``peers`` (with ``copies``; two or more replicas, :func:`~kimi_k3.weights.engine_snapshot.dump_waits_for_peer`): a new key is
    dumped only by the replica that wins its claim, once another replica serves (:func:`elect_dump`); without, before this Ready.
    """
    directory = snapshot_dir(root, key)
    short = key.digest()[:12]
    if not engine.wait_healthy(health_timeout_s):
        log(engine_snapshot.COLD_LOG.format(key=short, reason="the engine never answered /health: no snapshot"))
        return False
    # Looked at once the engine answers: a restored engine answers only after its wrapper has fetched (the S3 copy), verified and
    # restored the snapshot, so a sidecar that looked at its start would dump the key again. The wrapper verified every file.
    key_path = directory / engine_snapshot.KEY_FILE
    if key_path.is_file() and engine_snapshot.restore_decision(key_path.read_text(), key)[0]:
        log(f"engine snapshot {short}: a sealed snapshot of this key is on the node: no dump")
        _upload(copies, key, log)
        return True
    if copies is not None and peers is not None:
        if not elect_dump(copies, peers, key, log):
            return False
        if not _dump(engine, agent, directory, key, log, token, copies):
            copies.release(key.digest())  # a dump that failed gives the claim back: the next start of the key tries again
            return False
        return True
    return _dump(engine, agent, directory, key, log, token, copies)


def _dump(engine: Engine, agent: AgentChannel, directory: Path, key: engine_snapshot.SnapshotKey, log: Callable[[str], None], token: str,
          copies: CopyChannel | None) -> bool:
    short = key.digest()[:12]
    start = time.monotonic()
    if not engine.sleep():
        log(engine_snapshot.COLD_LOG.format(key=short, reason=f"POST /sleep?level={SLEEP_LEVEL} refused (needs --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1): no snapshot"))
        return False
    prepared = False
    try:
        shutil.rmtree(directory, ignore_errors=True)  # no file of an earlier dump or of a refused S3 copy is sealed with this one
        directory.mkdir(parents=True, exist_ok=True)
        prepared = engine.checkpoint_prepare()
        if not prepared:
            log(engine_snapshot.COLD_LOG.format(key=short, reason="POST /collective_rpc checkpoint_prepare refused: no snapshot"))
            return False
        answer = agent.ask("dump", key=key.digest(), directory=key.digest(), token=token)
        if not answer.get("ok"):
            log(engine_snapshot.COLD_LOG.format(key=short, reason=f"dump failed: {answer.get('error', 'no reason given')}: no snapshot"))
            return False
        files, size = seal(directory, key)
        log(engine_snapshot.DUMP_LOG.format(key=short, files=files, gb=size / 1e9, seconds=time.monotonic() - start))
        _upload(copies, key, log)
        return True
    finally:
        if prepared and not engine.checkpoint_restore():
            log(f"engine snapshot {short}: checkpoint_restore FAILED after the dump")
        woke = engine.wake_up()
        log(f"engine snapshot {short}: wake_up {'done' if woke else 'FAILED'}")


def _fetch(copies: CopyChannel, key: engine_snapshot.SnapshotKey, log: Callable[[str], None]) -> str | None:
    """The S3 copy of ``key`` fetched onto this node by the sync sidecar; ``None`` when it landed, else why not."""
    start = time.monotonic()
    landed, line = copies.fetch(key.digest())
    if not landed:
        return f"no snapshot on this node, and the S3 copy was not fetched: {line}: cold start"
    log(engine_snapshot.FETCH_LOG.format(key=key.digest()[:12], seconds=time.monotonic() - start) + f" ({line})")
    return None


def restore_or_cold(agent: AgentChannel, root: Path, key: engine_snapshot.SnapshotKey, log: Callable[[str], None], token: str,
                    copies: CopyChannel | None = None) -> bool:
    """True when the agent restored the snapshot of ``key`` into this container (``token``: ``KIMI_K3_SNAPSHOT_TOKEN`` of this placeholder); False: cold start.

    ``copies``: with no snapshot of ``key`` on the node (no ``KEY``), its S3 copy is fetched first (:class:`CopyChannel`)."""
    directory = snapshot_dir(root, key)
    short = key.digest()[:12]
    start = time.monotonic()
    verdict = check(directory, key)
    if not verdict.restore and copies is not None and not (directory / engine_snapshot.KEY_FILE).is_file():
        missed = _fetch(copies, key, log)
        start = time.monotonic()
        verdict = check(directory, key) if missed is None else Verdict(False, missed)
        if missed is None and not verdict.restore:
            (directory / engine_snapshot.KEY_FILE).unlink(missing_ok=True)  # never trusted again: the next start fetches again or starts cold
            verdict = Verdict(False, f"the S3 copy, fetched: {verdict.reason}")
    if not verdict.restore:
        log(engine_snapshot.COLD_LOG.format(key=short, reason=verdict.reason))
        return False
    log(engine_snapshot.VERIFY_LOG.format(key=short, files=verdict.files, gb=verdict.bytes / 1e9, seconds=time.monotonic() - start))
    start = time.monotonic()
    answer = agent.ask("restore", key=key.digest(), directory=key.digest(), token=token)
    if not answer.get("ok"):
        log(engine_snapshot.COLD_LOG.format(key=short, reason=f"restore failed: {answer.get('error', 'no reason given')}"))
        return False
    log(engine_snapshot.RESTORE_LOG.format(key=short, gb=verdict.bytes / 1e9, seconds=time.monotonic() - start))
    return True


def hold_restored(engine: Engine, directory: Path, log: Callable[[str], None], *, start_timeout_s: float = 600.0, unhealthy_s: float = 60.0,
                  poll_s: float = 5.0, stop: Callable[[], bool] = lambda: False, weights_marker: Path | None = None) -> int:
    """The placeholder's life after a restore: (``weights_marker``: wait for the sync's verified marker,) wake the restored
    engine's communicators (:meth:`Engine.checkpoint_restore`: it was dumped prepared) and the engine with its weights reloaded
    (:meth:`Engine.wake_up`: it was dumped asleep), wait for ``/health``, then watch it;
    ``stop()`` (SIGTERM) ends it with 0.

    A restored engine that never answers, or stops answering for ``unhealthy_s``, loses its ``KEY`` (the next start is
    cold, not the same bad restore again) and the container exits 1, so the kubelet restarts it.
    """
    if weights_marker is not None:
        while not weights_marker.exists():  # the reload reads the weights: the sync must have verified them
            if stop():
                return 0
            time.sleep(poll_s)
    if not engine.checkpoint_restore() or not engine.wake_up():
        (directory / engine_snapshot.KEY_FILE).unlink(missing_ok=True)
        log(f"engine snapshot {directory.name[:12]}: the restored engine refused checkpoint_restore/wake_up/reload_weights: KEY removed, the next start is cold")
        return 1
    if not engine.wait_healthy(start_timeout_s, poll_s=min(poll_s, 2.0)):
        (directory / engine_snapshot.KEY_FILE).unlink(missing_ok=True)
        log(f"engine snapshot {directory.name[:12]}: the restored engine never answered /health: KEY removed, the next start is cold")
        return 1
    log(f"engine snapshot {directory.name[:12]}: the restored engine answers /health")
    down_since: float | None = None
    while not stop():
        if engine.healthy():
            down_since = None
        elif down_since is None:
            down_since = time.monotonic()
        elif time.monotonic() - down_since > unhealthy_s:
            (directory / engine_snapshot.KEY_FILE).unlink(missing_ok=True)
            log(f"engine snapshot {directory.name[:12]}: the restored engine stopped answering /health: KEY removed, the next start is cold")
            return 1
        time.sleep(poll_s)
    return 0


def node_driver_version() -> str:
    """The node's NVIDIA driver (``nvidia-smi --query-gpu=driver_version --format=csv,noheader``, first GPU); ``""`` when unreadable."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.splitlines()[0].strip() if out.strip() else ""


def node_gpu_bus_ids() -> tuple[str, ...]:
    """The node's GPUs' PCI bus IDs in index order (``nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader``); ``()`` when unreadable."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader"], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(line.strip() for line in out.splitlines() if line.strip())


def pod_key(plan_fields_json: str, driver_version: str, *, kernel_release: str = "", gpu_bus_ids: tuple[str, ...] = ()) -> engine_snapshot.SnapshotKey:
    """This pod's key: the fields the plan knows (``SNAPSHOT_KEY_FIELDS``: image, GPU, args, env…) plus the node's driver, kernel
    (``os.uname().release``: the host's) and GPU bus IDs (:func:`node_gpu_bus_ids`)."""
    fields = json.loads(plan_fields_json)
    fields.update(driver_version=driver_version, kernel_release=kernel_release, gpu_bus_ids=list(gpu_bus_ids))
    return engine_snapshot.key_from_json(json.dumps(fields))


__all__ = [
    "AGENT_DIR",
    "REQUESTS",
    "RESULTS",
    "SEAL_WORKERS",
    "SLEEP_LEVEL",
    "AgentChannel",
    "CopyChannel",
    "Engine",
    "Peers",
    "Verdict",
    "check",
    "elect_dump",
    "file_sums",
    "hold_restored",
    "node_driver_version",
    "node_gpu_bus_ids",
    "pod_key",
    "ready_peers",
    "restore_or_cold",
    "seal",
    "snapshot_after_healthy",
    "snapshot_dir",
]
