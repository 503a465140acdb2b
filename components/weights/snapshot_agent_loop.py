"""The snapshot agent's loop on the node (pod side, standard library only): CRIU dumps and restores the engine asked for.

Runs in the privileged, ``hostPID`` agent DaemonSet (:mod:`kimi_k3.weights.snapshot_agent`) whose image
carries CRIU >= 4.0 with its CUDA plugin and NVIDIA's ``cuda-checkpoint`` (the plugin calls it: the
cuda-checkpoint README, "integration with CRIU 4.0 or higher"). It answers the requests the pods write
(:class:`kimi_k3.weights.snapshot_pod.AgentChannel`) under the snapshot root it mounts from the host:

* ``dump``: the process tree whose root carries ``KIMI_K3_SNAPSHOT_TOKEN=<token>`` in its environment
  (the engine the wrapper exec'd), ``criu dump --leave-running`` into ``<root>/<directory>``;
* ``restore``: ``criu restore --restore-detached`` from ``<root>/<directory>``, entered into the
  namespaces of the placeholder process that carries the token (``nsenter -t PID``).

Before either, the node is checked against :func:`kimi_k3.weights.engine_snapshot.requirement_problems`
(driver, CRIU version, architecture): a miss is an ``ok: false`` answer, and the pod starts cold.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from kimi_k3.weights import engine_snapshot, snapshot_pod

TOKEN_ENV = "KIMI_K3_SNAPSHOT_TOKEN"
"""Environment variable that marks the engine's process tree (dump) and the placeholder (restore) for the agent."""
CRIU_DUMP_FLAGS = ("--shell-job", "--leave-running", "--tcp-established", "--ext-unix-sk", "--file-locks", "--link-remap")
"""``criu dump`` flags: keep the engine running (it is woken after), its loopback sockets and unix sockets kept (criu.org, "CLI")."""
CRIU_RESTORE_FLAGS = ("--shell-job", "--restore-detached", "--tcp-established", "--ext-unix-sk", "--file-locks")
"""``criu restore`` flags (detached: the restored tree outlives the agent's call)."""
_CRIU_VERSION = re.compile(r"Version:\s*(\d+)\.(\d+)")

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` and capture its output (the agent's only way to call CRIU, nsenter and nvidia-smi)."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=1800, check=False)


def criu_version(runner: Runner = run) -> tuple[int, int] | None:
    """``criu --version`` as ``(major, minor)``; ``None`` when CRIU is missing or unreadable."""
    try:
        out = runner(["criu", "--version"])
    except OSError:
        return None
    match = _CRIU_VERSION.search(out.stdout or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def find_pids(token: str, proc: Path = Path("/proc")) -> list[int]:
    """Host PIDs whose environment carries ``KIMI_K3_SNAPSHOT_TOKEN=<token>`` and whose parent does not: the trees' roots."""
    needle = f"{TOKEN_ENV}={token}".encode()
    marked = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if needle in env:
            marked[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return sorted(pid for pid, parent in marked.items() if parent not in marked)


def dump_argv(pid: int, images_dir: Path) -> list[str]:
    """``criu dump`` of the tree rooted at ``pid`` into ``images_dir``."""
    return ["criu", "dump", "--tree", str(pid), "--images-dir", str(images_dir), *CRIU_DUMP_FLAGS]


def restore_argv(placeholder_pid: int, images_dir: Path) -> list[str]:
    """``criu restore`` from ``images_dir``, run in the placeholder's mount, network, IPC, UTS and PID namespaces."""
    return ["nsenter", "--target", str(placeholder_pid), "--mount", "--net", "--ipc", "--uts", "--pid", "--",
            "criu", "restore", "--images-dir", str(images_dir), *CRIU_RESTORE_FLAGS]


def handle(request: dict, root: Path, *, driver_version: str, gpus: int, runner: Runner = run, proc: Path = Path("/proc"), arch: str | None = None) -> dict:
    """The answer to one request (``ok`` and, when not, ``error``: the first requirement missed or CRIU's last line)."""
    problems = engine_snapshot.requirement_problems(driver_version, gpus, criu_version(runner), arch or platform.machine())
    if problems:
        return {"ok": False, "error": problems[0]}
    directory = root / str(request.get("directory", ""))
    if not request.get("directory") or directory.resolve().parent != root.resolve():
        return {"ok": False, "error": f"directory {request.get('directory')!r} is not one snapshot under the root"}
    pids = find_pids(str(request.get("token", "")), proc)
    if len(pids) != 1:
        return {"ok": False, "error": f"{len(pids)} processes carry the token {request.get('token')!r}, expected 1"}
    action = request.get("action")
    if action == "dump":
        argv = dump_argv(pids[0], directory)
    elif action == "restore":
        argv = restore_argv(pids[0], directory)
    else:
        return {"ok": False, "error": f"action {action!r} is not dump or restore"}
    result = runner(argv)
    if result.returncode != 0:
        last = (result.stderr or result.stdout or "").strip().splitlines()
        return {"ok": False, "error": f"criu {action} exited {result.returncode}: {last[-1] if last else 'no output'}"}
    if action == "dump":
        give_to_owner(directory)
    return {"ok": True}


def give_to_owner(directory: Path) -> None:
    """Hand CRIU's image files (written as root, mode 0600) to the owner of ``directory`` (the pod's user), who seals them."""
    owner = directory.stat()
    for path in directory.rglob("*"):
        os.chown(path, owner.st_uid, owner.st_gid)


def prepare_root(root: Path) -> None:
    """The snapshot root and the request/result directories writable by the serving pods' user (sticky, as ``/tmp``)."""
    for path in (root, root / snapshot_pod.AGENT_DIR, root / snapshot_pod.AGENT_DIR / snapshot_pod.REQUESTS, root / snapshot_pod.AGENT_DIR / snapshot_pod.RESULTS):
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o1777)


def serve_once(root: Path, **kwargs) -> int:
    """Answer every pending request under ``root`` (``kwargs`` as :func:`handle`); the number answered."""
    requests, results = root / snapshot_pod.AGENT_DIR / snapshot_pod.REQUESTS, root / snapshot_pod.AGENT_DIR / snapshot_pod.RESULTS
    if not requests.is_dir():
        return 0
    results.mkdir(parents=True, exist_ok=True)
    answered = 0
    for path in sorted(requests.glob("*.json")):
        try:
            request = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            request = {}
        answer = handle(request, root, **kwargs) if request else {"ok": False, "error": f"request {path.name} is not JSON"}
        print(f"snapshot agent: {request.get('action')} {request.get('directory')}: {'ok' if answer['ok'] else answer['error']}", flush=True)
        tmp = results / f".{path.name}.tmp"
        tmp.write_text(json.dumps(answer, sort_keys=True))
        os.replace(tmp, results / path.name)
        path.unlink(missing_ok=True)
        answered += 1
    return answered


def serve_forever(root: Path, gpus: int, poll_s: float = 0.5) -> None:
    """The agent's main loop (the node's driver read once, by nvidia-smi through the host's PID namespace)."""
    driver = snapshot_pod.node_driver_version()
    prepare_root(root)
    while True:
        serve_once(root, driver_version=driver, gpus=gpus)
        time.sleep(poll_s)


__all__ = [
    "CRIU_DUMP_FLAGS",
    "CRIU_RESTORE_FLAGS",
    "TOKEN_ENV",
    "criu_version",
    "dump_argv",
    "find_pids",
    "give_to_owner",
    "handle",
    "prepare_root",
    "restore_argv",
    "run",
    "serve_forever",
    "serve_once",
]
