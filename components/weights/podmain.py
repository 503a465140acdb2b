"""Entry point of the pod-side code: ``python3 -m kimi_k3.weights.podmain ACTION``.

Runs inside the staging Job and the serving pod's cache containers, from the files of a
ConfigMap (``PYTHONPATH`` points at its mount); standard library + boto3 only. Every input
comes from the environment the pod spec sets:

* ``stage``: ``MODEL_ID``, ``MODEL_REVISION``, ``WEIGHTS_S3_URI``, ``SHA256_MANIFEST``,
  ``AWS_REGION``, optional ``HF_ENDPOINT``, ``HF_TOKEN``, ``STAGE_WORKERS``;
* ``cache-restore`` / ``cache-save``: ``CACHE_S3_URI`` (the object of this key),
  ``CACHE_DIRS`` (colon-separated directories), ``AWS_REGION``; the restore writes
  ``CACHE_RESTORED_MARKER`` (optional) after a complete restore;
* ``warmup-then-save``: as ``cache-save`` plus ``VLLM_URL``, ``SERVED_MODEL_NAME``,
  ``WARMUP_MARKER`` and ``VLLM_API_KEY`` — the sidecar that sends the warm-up request once
  the engine answers, marks the pod ready-to-serve, saves the caches, then watches the engine
  and warms it up again after a container restart.

* ``engine-start CMD…`` (the engine container with ``SNAPSHOT_ROOT``, ``SNAPSHOT_KEY_FIELDS``, ``VLLM_URL``, optional
  ``WEIGHTS_MARKER`` and ``SNAPSHOT_S3_URI``, the S3 copy fetched by the sync sidecar when the node has none): restore
  the engine snapshot of this pod's key (:mod:`.snapshot_pod`) and stay as its placeholder, else ``exec CMD`` (cold);
  ``warmup-then-save`` with ``SNAPSHOT_ROOT`` snapshots the engine after its first healthy start, before the warm-up
  (with ``SNAPSHOT_PEERS_HOST`` and ``POD_IP``: only the replica that wins the key's claim, once another replica is Ready);
* ``peer-start CMD…`` (the engine container with ``peerWeightsTransfer``: ``MX_K8S_SERVICE_PATTERN``, ``PEER_START_SCRIPT``,
  ``WEIGHTS_MARKER``): the weights from a serving peer over EFA with ModelExpress, else ``exec CMD`` (:mod:`.peer_transfer`);
* ``snapshot-agent`` (the agent DaemonSet, ``SNAPSHOT_ROOT``, ``SNAPSHOT_GPUS``): answer the pods' dump/restore requests.

Exit status: 0 done, 1 failed (the message is on stderr). ``cache-*`` and the sidecar never
fail the pod: a cache problem costs start-up time, not serving.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def _env(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None or value == "":
        raise SystemExit(f"podmain: environment variable {name} is required")
    return value


def _s3():
    import boto3
    from botocore.config import Config

    return boto3.session.Session(region_name=_env("AWS_REGION")).client(
        "s3", config=Config(retries={"max_attempts": 10, "mode": "adaptive"}, max_pool_connections=128)
    )


def _stage() -> int:
    from kimi_k3.weights import WeightsError  # the pod's entry point: each subcommand loads only its own modules
    from kimi_k3.weights.hub import DEFAULT_ENDPOINT, HubClient  # the pod's entry point: each subcommand loads only its own modules
    from kimi_k3.weights.s3store import S3Location  # the pod's entry point: each subcommand loads only its own modules
    from kimi_k3.weights.stage import stage  # the pod's entry point: each subcommand loads only its own modules

    done = [0, time.monotonic()]

    def on_bytes(n: int) -> None:
        done[0] += n
        now = time.monotonic()
        if now - done[1] >= 30:
            done[1] = now
            print(f"progress: {done[0] / 1e9:,.1f} GB copied", flush=True)

    try:
        stage(
            HubClient(os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT, token=os.environ.get("HF_TOKEN") or None),
            _s3(),
            S3Location.parse(_env("WEIGHTS_S3_URI")),
            _env("MODEL_ID"),
            _env("MODEL_REVISION"),
            sha256sums_name=_env("SHA256_MANIFEST", "SHA256SUMS"),
            workers=int(_env("STAGE_WORKERS", "8")),
            on_bytes=on_bytes,
            log=lambda line: print(line, flush=True),
        )
    except WeightsError as err:
        print(f"stage failed: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


def _cache(action: str) -> int:
    from kimi_k3.weights import compile_cache  # the pod's entry point: each subcommand loads only its own modules

    dirs = [d for d in _env("CACHE_DIRS").split(":") if d]
    uri = _env("CACHE_S3_URI")
    if action == "cache-restore":
        compile_cache.restore_or_log(_s3(), uri, dirs, os.environ.get("CACHE_RESTORED_MARKER") or None)
    else:
        compile_cache.save_or_log(_s3(), uri, dirs)
    return 0


def _snapshot_key(log):
    from kimi_k3.weights import snapshot_pod  # the pod's entry point: each subcommand loads only its own modules

    try:
        return snapshot_pod.pod_key(_env("SNAPSHOT_KEY_FIELDS"), snapshot_pod.node_driver_version(), kernel_release=os.uname().release,
                                    gpu_bus_ids=snapshot_pod.node_gpu_bus_ids())
    except (ValueError, TypeError, KeyError) as err:  # a driver nvidia-smi does not report, a malformed key: no snapshot, a cold start
        log(f"engine snapshot: no key for this pod ({err}): cold start")
        return None


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _copies(root):
    """The sync sidecar's snapshot copier when the S3 copy is on (``SNAPSHOT_S3_URI``), else ``None``."""
    from kimi_k3.weights import snapshot_pod  # the pod's entry point: each subcommand loads only its own modules

    uri = os.environ.get("SNAPSHOT_S3_URI")
    return snapshot_pod.CopyChannel(root, uri) if uri else None


def _engine_start(command: list[str]) -> int:
    from pathlib import Path  # the pod's entry point: each subcommand loads only its own modules

    from kimi_k3.weights import snapshot_agent_loop, snapshot_pod  # the pod's entry point: each subcommand loads only its own modules

    token = os.environ.get("HOSTNAME") or os.uname().nodename
    os.environ[snapshot_agent_loop.TOKEN_ENV] = token  # marks this placeholder and the engine it execs for the agent
    root = Path(_env("SNAPSHOT_ROOT"))
    key = _snapshot_key(_log)
    if key is not None and snapshot_pod.restore_or_cold(snapshot_pod.AgentChannel(root), root, key, _log, token, _copies(root)):
        stopped = []
        signal.signal(signal.SIGTERM, lambda *_: stopped.append(True))
        marker = os.environ.get("WEIGHTS_MARKER")
        return snapshot_pod.hold_restored(snapshot_pod.Engine(_env("VLLM_URL")), snapshot_pod.snapshot_dir(root, key), _log, stop=lambda: bool(stopped),
                                          weights_marker=Path(marker) if marker else None)
    os.execvp(command[0], command)
    return 1  # pragma: no cover  (execvp does not return)


def _peer_start(command: list[str]) -> int:
    from kimi_k3.weights import peer_transfer  # the pod's entry point: each subcommand loads only its own modules

    return peer_transfer.peer_start(command, os.environ, log=_log)


def _snapshot_after_healthy() -> None:
    from pathlib import Path  # the pod's entry point: each subcommand loads only its own modules

    from kimi_k3.weights import engine_snapshot, snapshot_pod  # the pod's entry point: each subcommand loads only its own modules

    root = Path(_env("SNAPSHOT_ROOT"))
    key = _snapshot_key(_log)
    if key is not None:
        host = os.environ.get(engine_snapshot.PEERS_HOST_ENV)  # set by the plan only with two or more replicas and the S3 copy
        peers = snapshot_pod.Peers(host, os.environ.get(engine_snapshot.POD_IP_ENV, ""), serving_host=os.environ.get(engine_snapshot.SERVING_HOST_ENV) or None) if host else None
        snapshot_pod.snapshot_after_healthy(snapshot_pod.Engine(_env("VLLM_URL")), snapshot_pod.AgentChannel(root), root, key, _log, os.environ.get("HOSTNAME") or os.uname().nodename,
                                            copies=_copies(root), peers=peers)


def _snapshot_agent() -> int:
    from pathlib import Path  # the pod's entry point: each subcommand loads only its own modules

    from kimi_k3.weights import snapshot_agent_loop  # the pod's entry point: each subcommand loads only its own modules

    snapshot_agent_loop.serve_forever(Path(_env("SNAPSHOT_ROOT")), int(_env("SNAPSHOT_GPUS")))
    return 0


def _warmup_then_save() -> int:
    from kimi_k3.weights import compile_cache, warmup  # the pod's entry point: each subcommand loads only its own modules

    if os.environ.get("SNAPSHOT_ROOT"):
        _snapshot_after_healthy()

    warmup.warm_up_and_mark(
        _env("VLLM_URL"), _env("SERVED_MODEL_NAME"), _env("WARMUP_MARKER"), api_key=os.environ.get("VLLM_API_KEY") or None
    )
    if os.environ.get("CACHE_S3_URI"):
        compile_cache.save_or_log(_s3(), _env("CACHE_S3_URI"), [d for d in _env("CACHE_DIRS").split(":") if d])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    warmup.rewarm_after_restarts(_env("VLLM_URL"), _env("SERVED_MODEL_NAME"), _env("WARMUP_MARKER"), api_key=os.environ.get("VLLM_API_KEY") or None)
    return 0


ACTIONS = {"stage": _stage, "cache-restore": lambda: _cache("cache-restore"), "cache-save": lambda: _cache("cache-save"), "warmup-then-save": _warmup_then_save,
           "snapshot-agent": _snapshot_agent}


def main(argv: list[str] | None = None) -> int:
    """Run one action; see the module docstring."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) > 1 and argv[0] == "engine-start":
        return _engine_start(argv[1:])
    if len(argv) > 1 and argv[0] == "peer-start":
        return _peer_start(argv[1:])
    if len(argv) != 1 or argv[0] not in ACTIONS:
        print(f"usage: python3 -m kimi_k3.weights.podmain {{{'|'.join(ACTIONS)}}} | engine-start CMD... | peer-start CMD...", file=sys.stderr)
        return 2
    return ACTIONS[argv[0]]()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
