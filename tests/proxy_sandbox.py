"""Run the real nginx with the exact rendered config, on the pod's fixed ports, without clashing.

The pod's ports are fixed (API 8000, vLLM on 127.0.0.1:8001, probe 8081, metrics
9090) and so are the paths the config names (``/etc/nginx/nginx.conf``, ``/tmp``).
Two xdist workers, or anything else on the machine, may hold those ports. Rather
than render a variant with other ports (then the bytes under test would not be the
bytes the stack ships), every test gets its own sandbox:

* a private network namespace for the *calling thread* (``unshare(CLONE_NEWNET)``;
  network namespaces are per thread): the fake vLLM, nginx (forked from this
  thread) and the test's client sockets all live on that namespace's loopback, so
  port 8000 is free in every test, and it is restored with ``setns`` afterwards;
* a private mount namespace for nginx only (util-linux ``unshare --mount``): the
  rendered file bind-mounted read-only at ``/etc/nginx``, the root filesystem
  remounted read-only and a fresh tmpfs on ``/tmp`` — the pod's
  ``readOnlyRootFilesystem`` with its ``emptyDir``;
* nginx runs as the container's UID (``setpriv``: no new privileges, no
  capabilities), with stdout/stderr handed to that UID as runc does for a container,
  under the container's own command (:func:`kimi_k3.serving.api_proxy.proxy_command`:
  the stop-signal wrapper as PID 1 of the sandbox, nginx its child);
* the API-key Secret's key-check file, when given, mounted read-only where the pod
  mounts it (:data:`kimi_k3.serving.proxy_edge.KEY_DIR`, under a private ``/run``);
* optionally a memory cgroup (its ``cgroup.procs``), joined before nginx starts, so
  the master and its workers are charged to it as to the container's limit.

Needs root (CAP_SYS_ADMIN for the namespaces); CI and this project's machines run
tests as root. Only loopback addresses inside the private namespace are used.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from kimi_k3.serving import api_proxy, proxy_edge

CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_libc = ctypes.CDLL(None, use_errno=True)

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

# Inside `unshare --mount`: mount the config, make / read-only, give nginx an empty /tmp,
# hand it the stdio pipes (runc's fixStdioPermissions), drop to the container's UID.
_SANDBOX_SCRIPT = f"""set -eu
mount --bind "$CONF_DIR" {api_proxy.CONFIG_DIR}
mount -o remount,bind,ro {api_proxy.CONFIG_DIR}
if [ -n "$KEY_SRC" ]; then
  mount -t tmpfs -o mode=755,size=1m tmpfs /run
  mkdir -p {proxy_edge.KEY_DIR}
  mount --bind "$KEY_SRC" {proxy_edge.KEY_DIR}
  mount -o remount,bind,ro {proxy_edge.KEY_DIR}
fi
mount -o remount,bind,ro /
mount -t tmpfs -o mode=1777,size=256m tmpfs {api_proxy.RUNTIME_DIR}
chown "$UID_GID" /proc/self/fd/1 /proc/self/fd/2
[ -z "$CGROUP_PROCS" ] || echo $$ > "$CGROUP_PROCS"
exec setpriv --reuid="${{UID_GID%:*}}" --regid="${{UID_GID#*:}}" --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all "$@"
"""


def require_sandbox() -> None:
    """Skip unless the namespaces can be made (root); fail if nginx is missing (``make system-packages`` installs it)."""
    if os.geteuid() != 0:
        pytest.skip("the real-proxy tests need root for private network/mount namespaces (CI runs as root)")
    if not Path(NGINX).exists():
        raise AssertionError("nginx is not installed: run `make system-packages` (tools/debian-packages.txt)")
    if not Path(api_proxy.CONFIG_DIR).is_dir():
        raise AssertionError(f"{api_proxy.CONFIG_DIR} is missing (it comes with Debian's nginx package); the sandbox mounts the config there")


class PrivateNetwork:
    """Context manager: the calling thread enters a new network namespace with loopback up; restored on exit."""

    def __enter__(self) -> PrivateNetwork:
        self._original = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        if _libc.unshare(CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            os.close(self._original)
            raise OSError(err, f"unshare(CLONE_NEWNET): {os.strerror(err)}")
        with socket.socket() as sock:
            flags = struct.unpack("16sH", fcntl.ioctl(sock, _SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0))[:18])[1]
            fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | _IFF_UP))
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if _libc.setns(self._original, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns back to the original network namespace: {os.strerror(err)}")
        finally:
            os.close(self._original)


class Nginx:
    """The real nginx binary running one rendered config in the sandbox (see the module docstring)."""

    def __init__(self, conf_text: str, workdir: Path, uid: int = api_proxy.PROXY_RUN_AS_USER, key_check: str | None = None, cgroup_procs: Path | None = None) -> None:
        """``key_check``: the content of the Secret's key-check file (``None``: no key mount); ``cgroup_procs``: a cgroup to join."""
        self.conf_dir = workdir / "nginx-conf"
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / api_proxy.CONFIG_FILE).write_text(conf_text)
        self.conf_dir.chmod(0o755)
        self.key_dir: Path | None = None
        if key_check is not None:
            self.key_dir = workdir / "api-key"
            self.key_dir.mkdir(parents=True, exist_ok=True)
            (self.key_dir / proxy_edge.KEY_FILE).write_text(key_check)
            (self.key_dir / proxy_edge.KEY_FILE).chmod(0o444)
            self.key_dir.chmod(0o755)
        self.cgroup_procs = cgroup_procs
        self.log_path = workdir / "nginx.log"
        self.uid = uid
        self.process: subprocess.Popen | None = None

    def _command(self, *command: str) -> list[str]:
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", _SANDBOX_SCRIPT, "sandbox", *command]

    def _env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "CONF_DIR": str(self.conf_dir), "UID_GID": f"{self.uid}:{self.uid}",
            "KEY_SRC": str(self.key_dir or ""), "CGROUP_PROCS": str(self.cgroup_procs or ""),
        }

    def check(self) -> subprocess.CompletedProcess:
        """``nginx -t`` on the config, in the same sandbox (same paths, same UID, the key file if given)."""
        return subprocess.run(
            self._command(NGINX, "-t", "-e", "stderr", "-c", f"{api_proxy.CONFIG_DIR}/{api_proxy.CONFIG_FILE}"),
            env=self._env(), capture_output=True, text=True, timeout=30,
        )

    def start(self, wait_ports: tuple[int, ...] = ()) -> Nginx:
        """Start the container's command (nginx in the foreground under its stop wrapper) and wait until ``wait_ports`` accept connections."""
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            self._command(*api_proxy.proxy_command()),
            env=self._env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 10
        for port in wait_ports:
            while True:
                if self.process.poll() is not None:
                    raise AssertionError(f"nginx exited with {self.process.returncode}: {self.logs()}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise AssertionError(f"nginx did not listen on {port}: {self.logs()}") from None
                    time.sleep(0.005)
        return self

    def logs(self) -> str:
        """Everything nginx wrote to stdout/stderr (access log lines and errors)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def signal(self, signum: int) -> None:
        """Send a signal to the container's PID 1, the stop wrapper: what the kubelet does (any stop signal: nginx's graceful stop)."""
        assert self.process is not None
        self.process.send_signal(signum)

    def master_pid(self) -> int:
        """The nginx master: the wrapper's one child."""
        assert self.process is not None
        (pid,) = children_of(self.process.pid)
        return pid

    def worker_pids(self) -> list[int]:
        """The nginx workers: the master's children."""
        return children_of(self.master_pid())

    def wait(self, timeout: float) -> int:
        """Wait for the master to exit; returns its exit code."""
        assert self.process is not None
        return self.process.wait(timeout=timeout)

    def stop(self) -> None:
        """nginx's fast stop (SIGTERM to the master itself, not the wrapper), then kill the whole process group if it lingers."""
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ValueError, ProcessLookupError):
                os.kill(self.master_pid(), signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # our own session: the master and its workers
        self.process.wait(timeout=5)

    def __enter__(self) -> Nginx:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from ``/proc/*/stat``)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return sorted(found)


class MemoryCgroup:
    """A memory cgroup with a limit, for nginx to join (the container's memory limit, as the kubelet sets it).

    cgroup v2 (``memory.max``, ``memory.peak``, ``memory.events``) where ``/sys/fs/cgroup`` is the
    unified hierarchy with the memory controller, else cgroup v1 (``memory.limit_in_bytes``,
    ``memory.max_usage_in_bytes``, ``memory.oom_control``); ``None`` from :meth:`create` when
    neither can be written here. On cgroup v2 kernel socket buffers are charged too, as in the
    pod on EKS's AL2023 nodes; cgroup v1 charges user and kernel memory but not socket buffers.
    """

    def __init__(self, path: Path, version: int) -> None:
        self.path = path
        self.version = version

    @classmethod
    def create(cls, name: str, limit_bytes: int) -> MemoryCgroup | None:
        """Make the cgroup ``name`` with ``limit_bytes``; ``None`` when this machine allows no memory cgroup."""
        root_v2 = Path("/sys/fs/cgroup")
        if "memory" in _read(root_v2 / "cgroup.controllers").split() and "memory" in _read(root_v2 / "cgroup.subtree_control").split():
            candidate, version, limit_file = root_v2 / name, 2, "memory.max"
        elif (Path("/sys/fs/cgroup/memory") / "memory.limit_in_bytes").exists():
            candidate, version, limit_file = Path("/sys/fs/cgroup/memory") / name, 1, "memory.limit_in_bytes"
        else:
            return None
        try:
            candidate.mkdir()
            (candidate / limit_file).write_text(str(limit_bytes))
        except OSError:
            with contextlib.suppress(OSError):
                candidate.rmdir()
            return None
        return cls(candidate, version)

    @property
    def procs(self) -> Path:
        """The ``cgroup.procs`` file a process writes its pid to, to join."""
        return self.path / "cgroup.procs"

    def peak_bytes(self) -> int:
        """The most memory the cgroup has been charged since it was made."""
        return int(_read(self.path / ("memory.peak" if self.version == 2 else "memory.max_usage_in_bytes")))

    def oom_kills(self) -> int:
        """Processes the kernel's OOM killer killed in the cgroup."""
        text = _read(self.path / ("memory.events" if self.version == 2 else "memory.oom_control"))
        counts = dict(line.split() for line in text.splitlines() if line.strip())
        return int(counts.get("oom_kill", 0))

    def remove(self) -> None:
        """Remove the cgroup (its processes must be gone)."""
        with contextlib.suppress(OSError):
            self.path.rmdir()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def peak_rss_bytes(pid: int) -> int:
    """A process's peak resident set (``VmHWM``), in bytes."""
    for line in _read(Path(f"/proc/{pid}/status")).splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0
