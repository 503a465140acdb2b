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
  capabilities), with stdout/stderr handed to that UID as runc does for a container.

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

from kimi_k3.serving import api_proxy

CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_libc = ctypes.CDLL(None, use_errno=True)

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

# Inside `unshare --mount`: mount the config, make / read-only, give nginx an empty /tmp,
# hand it the stdio pipes (runc's fixStdioPermissions), drop to the container's UID.
_SANDBOX_SCRIPT = f"""set -eu
mount --bind "$CONF_DIR" {api_proxy.CONFIG_DIR}
mount -o remount,bind,ro {api_proxy.CONFIG_DIR}
mount -o remount,bind,ro /
mount -t tmpfs -o mode=1777,size=256m tmpfs {api_proxy.RUNTIME_DIR}
chown "$UID_GID" /proc/self/fd/1 /proc/self/fd/2
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

    def __init__(self, conf_text: str, workdir: Path, uid: int = api_proxy.PROXY_RUN_AS_USER) -> None:
        self.conf_dir = workdir / "nginx-conf"
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / api_proxy.CONFIG_FILE).write_text(conf_text)
        self.conf_dir.chmod(0o755)
        self.log_path = workdir / "nginx.log"
        self.uid = uid
        self.process: subprocess.Popen | None = None

    def _command(self, *nginx_args: str) -> list[str]:
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", _SANDBOX_SCRIPT, "sandbox", NGINX, *nginx_args]

    def _env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "CONF_DIR": str(self.conf_dir), "UID_GID": f"{self.uid}:{self.uid}"}

    def check(self) -> subprocess.CompletedProcess:
        """``nginx -t`` on the config, in the same sandbox (same paths, same UID)."""
        return subprocess.run(
            self._command("-t", "-e", "stderr", "-c", f"{api_proxy.CONFIG_DIR}/{api_proxy.CONFIG_FILE}"),
            env=self._env(), capture_output=True, text=True, timeout=30,
        )

    def start(self, wait_ports: tuple[int, ...] = ()) -> Nginx:
        """Start nginx in the foreground (``daemon off``) and wait until ``wait_ports`` accept connections."""
        log = self.log_path.open("wb")
        # The container's command, as api_proxy.proxy_container renders it.
        self.process = subprocess.Popen(
            self._command("-e", "stderr", "-c", f"{api_proxy.CONFIG_DIR}/{api_proxy.CONFIG_FILE}"),
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
        """Send a signal to the nginx master (SIGQUIT: graceful stop; SIGTERM: fast stop)."""
        assert self.process is not None
        self.process.send_signal(signum)

    def wait(self, timeout: float) -> int:
        """Wait for the master to exit; returns its exit code."""
        assert self.process is not None
        return self.process.wait(timeout=timeout)

    def stop(self) -> None:
        """Fast stop, then kill the whole process group (master and workers) if it lingers."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # our own session: the master and its workers
        self.process.wait(timeout=5)

    def __enter__(self) -> Nginx:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
