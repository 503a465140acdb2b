"""The weights of a new pod from a serving peer, GPU to GPU over EFA, with NVIDIA Dynamo ModelExpress (``peerWeightsTransfer``).

What runs is ModelExpress's own vLLM plugin (ai-dynamo/modelexpress @ v0.5.1, :data:`MX_TAG`): vLLM loads with
``--load-format modelexpress`` (``VLLM_PLUGINS=modelexpress``), whose load chain (``modelexpress_client/python/modelexpress/
load_strategy/__init__.py`` ``LoadStrategyChain.run``) tries ``RdmaStrategy`` (NIXL from a READY source of the same
``mx_source_id``), then the model streamer, GDS and the default loader (the model directory on disk), and publishes the
loaded weights as a source for the next pod (``publish_source_if_supported``). So every serving pod is a source: the
first replica loads its node-local weights and serves them to the pods that follow.

Discovery is ModelExpress's ``k8s-service`` metadata backend (docs/K8S_SERVICE_BACKEND.md: "no server, no Redis, no CRDs",
for "stable-weight inference"): one Service of the serving pods with one named port per rank, ``MX_WORKER_GRPC_PORT +
rank`` (examples/k8s_service_sources/sources-tp2-single-pod.yaml, the multi-GPU-per-pod shape), whose endpoints are the
*ready* pods. The Service selects :data:`PEER_KEY_LABEL` too, so a pod of another image, model revision, engine args or
env is never a peer; ModelExpress checks its own identity on top (``mx_source_id``: model, dtype, quantization, TP,
revision = ``MX_MODEL_REVISION``, ModelExpress version; a different one answers ``FAILED_PRECONDITION``).

The engine container starts through ``podmain peer-start`` (:func:`peer_start`):

* no peer answers on the Service (:func:`find_peer`), or an earlier start of this pod took the peer path
  (:data:`ATTEMPT_MARKER` in the pod's ``/tmp``): the **cold path**, exactly the container's normal command (wait for the
  sync's whole-manifest marker, then vLLM, whose ModelExpress chain finds no source and loads the node's disk);
* a peer answers: the **peer path**, vLLM started once its config files are verified (:data:`PEER_START_ENV`), the sync
  sidecar still filling the node's disk beside it. The wrapper watches the engine's log: ModelExpress falls through to its
  disk loader when the transfer fails (``Strategy rdma failed, trying next`` …, :data:`FALLBACK_PATTERNS`), and a disk
  load before the sync has finished would read a partial checkpoint (vLLM's ``DefaultModelLoader`` runs its strict
  "Following weights were not initialized from checkpoint" check for non-quantized models only, ``default_loader.py``
  in recent releases, *read in a secondary source*, not re-read at 0.27.1; Kimi K3 is MXFP4), so the wrapper stops the
  engine and takes the cold path,
  naming the reason in the log (:data:`COLD_LOG`). Once the node's weights are complete the fall-through is harmless and
  is only logged.

What ModelExpress verifies of the received bytes (``nixl_transfer.py`` ``receive_from_source``): every tensor's name,
size in bytes and dtype against the target's own (``ManifestMismatchError``), and the identity above. **The content is
not verified**: NIXL moves GPU memory, which the weights' ``SHA256SUMS`` does not cover, and ModelExpress 0.5.1 computes
no digest of it (its ``TransferFingerprint`` is defined in ``transfer_safety.py`` and used by no strategy). A flipped bit
on the wire that RDMA's own CRCs miss would be served. The warm-up request before Ready is the only end-to-end check.

Standard library only: this module runs in the engine container (:data:`kimi_k3.weights.POD_MODULES`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

MX_TAG = "v0.5.1"
"""The ModelExpress release this module follows (ai-dynamo/modelexpress tag, commit eb5011575dcf56327578634f93a2ec2f7b5416fd)."""
LOAD_FORMAT = "modelexpress"
"""``--load-format`` of ModelExpress's vLLM loader (examples/p2p_transfer_k8s/client/vllm/aws_efa/vllm-aws-efa.yaml)."""
PLUGIN = "modelexpress"
"""``VLLM_PLUGINS``: vLLM 0.27.1 then loads only the general plugins it names (``vllm/plugins/__init__.py``), so the project's
``kimi_k3_pipelined`` loader does not load beside it: :func:`stack_problems` refuses the two together."""
WORKER_GRPC_PORT = 6555
"""``MX_WORKER_GRPC_PORT``: rank ``r``'s WorkerGrpcServer listens on this + ``r`` (``envs.py``; K8S_SERVICE_BACKEND.md)."""
METADATA_PORT = 5555
"""``MX_METADATA_PORT``: rank ``r``'s NIXL listen thread, this + ``r`` (``load_strategy/base.py``), dialled pod to pod."""
PEER_KEY_LABEL = "kimi-k3.io/peer-key"
"""Pod label the peers Service selects: :func:`peer_key` of what must match for the bytes to be the same weights."""
ATTEMPT_MARKER = "/tmp/.kimi-k3-peer-attempted"
"""Written when a start takes the peer path; on the pod's ``/tmp`` volume, so a container restart takes the cold path."""
ATTEMPT_MARKER_ENV = "PEER_ATTEMPT_MARKER"
"""Overrides :data:`ATTEMPT_MARKER`'s path (tests)."""
PEER_START_ENV = "PEER_START_SCRIPT"
"""The peer path's ``/bin/sh -c`` script (wait for the engine's config files, then ``exec vllm serve "$@"``)."""
KEY_ENV = "PEER_KEY"
"""This pod's :data:`PEER_KEY_LABEL` value, named in the cold path's log line."""
SERVICE_ENV = "MX_K8S_SERVICE_PATTERN"
"""The peers Service's name, which ModelExpress's client dials (``metadata/k8s_service_client.py``) and so does :func:`find_peer`."""
WEIGHTS_MARKER_ENV = "WEIGHTS_MARKER"
"""The sync's whole-manifest marker: present, the node's weights are complete and a disk fall-through is safe."""
EFA_RESOURCE = "vpc.amazonaws.com/efa"
"""Extended resource of the AWS EFA device plugin (aws-efa-k8s-device-plugin)."""

EFA_ENV: Mapping[str, str] = {
    # examples/p2p_transfer_k8s/client/vllm/aws_efa/vllm-aws-efa.yaml @ v0.5.1: the libfabric NIXL plugin ("the default UCX can
    # silently fall back to TCP on EFA"), libfabric on the EFA provider, GPUDirect RDMA, no shared-memory transport.
    "MX_NIXL_BACKEND": "LIBFABRIC",
    "FI_PROVIDER": "efa",
    "FI_EFA_USE_DEVICE_RDMA": "1",
    "FI_EFA_ENABLE_SHM_TRANSFER": "0",
    # vLLM forks its workers (kimi_k3.serving.lws.EFA_ENV, aws-samples/awsome-distributed-training's EFA cheatsheet).
    "FI_EFA_FORK_SAFE": "1",
    "FI_EFA_USE_HUGE_PAGE": "0",
}
"""libfabric's EFA settings of the engine container on the peer path."""

SNAPSHOT_CONFLICT = ("not with the engine snapshot: on the peer path this wrapper stays the parent of vLLM, so the snapshot agent's "
                     "dump (the tree rooted at the first process carrying the pod's token) would take the wrapper and its pipe too, "
                     "a restore no test here has run: choose one")
"""Why the peer path and ``engineSnapshot`` are refused together (:mod:`kimi_k3.weights.snapshot_agent_loop` ``find_pids``)."""

COLD_LOG = "peer transfer: {reason}: cold path (the node's weights, synced from S3)"
"""The wrapper's line when it takes the cold path (``kimi-k3 startup-report`` reads it)."""
PEER_LOG = "peer transfer: a serving peer answers at {address}: loading its weights over EFA with ModelExpress (--load-format modelexpress)"
"""The wrapper's line when it takes the peer path."""
FALLBACK_LOG = "peer transfer: ModelExpress fell through to the disk ({why}): the node's weights are complete, the engine loads them"
"""The engine fell through after the node's weights were complete: logged, the load goes on."""

FALLBACK_PATTERNS = (
    # load_strategy/__init__.py @ v0.5.1, LoadStrategyChain.run: f"[Worker {ctx.global_rank}] Strategy {strategy.name} failed, trying next: {e}"
    re.compile(r"Strategy rdma failed, trying next: (?P<why>.*)"),
    # same function: f"[Worker {ctx.global_rank}] Strategy {strategy.name} raised unexpected error, trying next: {e}"
    re.compile(r"Strategy rdma raised unexpected error, trying next: (?P<why>.*)"),
    # same function: f"Eligible loaders: {[s.name for s in eligible]}" without 'rdma' (no NIXL, no RDMA backend, no source configured)
    re.compile(r"Eligible loaders: \[(?P<why>(?:(?!'rdma')[^\]])*)\]"),
)
"""ModelExpress log lines that mean this start will not get the weights from the peer (format strings of the pinned tag)."""


def peer_key(*, image: str, model_revision: str, engine_args: Sequence[str], engine_env: Mapping[str, str]) -> str:
    """The :data:`PEER_KEY_LABEL` value: 20 hex digits of the sha256 of what makes two engines' loaded tensors the same bytes
    (the image's digest, the model revision, the engine's args and env). ModelExpress's ``mx_source_id`` leaves the image and
    the engine's args out (``metadata/publish.py`` ``build_source_identity``)."""
    fields = {"image": image, "model_revision": model_revision, "engine_args": list(engine_args), "engine_env": sorted([k, v] for k, v in engine_env.items())}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:20]


def engine_env(*, service: str, model_revision: str) -> dict[str, str]:
    """ModelExpress's environment of the engine container (K8S_SERVICE_BACKEND.md, examples/k8s_service_sources, the AWS EFA example)."""
    return {
        "VLLM_PLUGINS": PLUGIN,
        "MX_METADATA_BACKEND": "k8s-service",
        SERVICE_ENV: service,
        "MX_P2P_METADATA": "1",
        "MX_METADATA_PORT": str(METADATA_PORT),
        "MX_WORKER_GRPC_PORT": str(WORKER_GRPC_PORT),
        # the identity's revision (metadata/publish.py _resolve_model_revision): a local model directory has no HF revision
        "MX_MODEL_REVISION": model_revision,
        # docs/BENCHMARKS.md @ v0.5.1: pool registration 1.14 s against 8.16 s per tensor for DeepSeek-V4-Pro TP8
        "MX_POOL_REG": "1",
        # modelexpress/__init__.py: its loggers join vLLM's handlers at this level; peer_start reads its INFO lines
        "MODEL_EXPRESS_LOG_LEVEL": "INFO",
        **EFA_ENV,
    }


def with_load_format(engine_args: Sequence[str]) -> list[str]:
    """``engine_args`` with ``--load-format`` set to :data:`LOAD_FORMAT` (one occurrence, either spelling replaced)."""
    out: list[str] = []
    skip = False
    for arg in engine_args:
        if skip:
            skip = False
            continue
        if arg == "--load-format":
            skip = True
            continue
        if arg.startswith("--load-format="):
            continue
        out.append(arg)
    return [*out, "--load-format", LOAD_FORMAT]


def efa_request_problem(count: int, efa_interfaces: int, instance_type: str) -> str | None:
    """Why ``count`` ``vpc.amazonaws.com/efa`` cannot be requested on ``instance_type`` (``None``: it can). The device plugin
    advertises one per EFA interface of the node, so a larger request never schedules (the AWS EFA example's README: "requesting
    more than 4 EFA NICs per pod prevents scheduling" on a 4-EFA p6e-gb200)."""
    if efa_interfaces <= 0:
        return f"{instance_type} has no EFA interface: the peer transfer runs over EFA"
    if not 1 <= count <= efa_interfaces:
        return f"{count} EFA interfaces requested; {instance_type} has {efa_interfaces}: expected 1..{efa_interfaces}"
    return None


POD_SECURITY_CAPABILITIES = {"restricted": ("NET_BIND_SERVICE",),
                             "baseline": ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                                          "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")}
"""Capabilities a container may add under each Pod Security level (kubernetes.io/docs/concepts/security/pod-security-standards:
baseline "Capabilities", restricted "Capabilities (v1.22+)"); ``privileged`` allows any."""


def capability_problem(added: Iterable[str], level: str) -> str | None:
    """Why a container adding ``added`` capabilities is refused in a namespace enforcing Pod Security ``level`` (``None``: admitted).
    The upstream EFA manifest adds ``IPC_LOCK`` "so libfabric can pin pages": no level but ``privileged`` admits it."""
    allowed = POD_SECURITY_CAPABILITIES.get(level)
    if allowed is None:
        return None
    refused = [c for c in added if c.removeprefix("CAP_") not in allowed]
    return f"capabilities {', '.join(refused)} are refused by Pod Security {level!r} (allowed: {', '.join(allowed)})" if refused else None


def stack_problems(*, replicas: int, pipeline_parallel_size: int, node_local_weights: bool, sync_sidecar: bool, image: str,
                   efa_enabled: bool, efa_interfaces: int, pipelined_load: bool, sha256_manifest: str | None, engine_snapshot: bool) -> list[tuple[str, str]]:
    """``(input, why)`` for each reason a stack cannot take a new pod's weights from a serving peer (empty: it can)."""
    problems = []
    if pipeline_parallel_size != 1:
        problems.append(("pipeline_parallel_size", "single-node replicas only: ModelExpress's k8s-service sources are one pod holding every TP rank"))
    if replicas == 1:  # 0: one replica per reserved node, resolved at deploy time
        problems.append(("replicas", "needs 2 or more replicas (1): a replaced node's pod takes the weights from another serving replica"))
    if not node_local_weights:
        problems.append(("node_local_weights", "needs node-local weights: the first replica loads them from the node's disk and serves them to the next"))
    if not sync_sidecar:
        problems.append(("sync_sidecar", "needs the sync as a sidecar: the engine starts before the node's copy is complete, which it still needs for a cold fall-back"))
    if not sha256_manifest:
        problems.append(("sha256_manifest", "needs a sha256 manifest: the peer path starts the engine once the manifest's config files are verified"))
    if "@sha256:" not in image:
        problems.append(("image", f"needs the engine image pinned by digest ({image!r}), built with the ModelExpress client {MX_TAG} and NIXL's libfabric plugin "
                                  "(examples/p2p_transfer_k8s/client/vllm/aws_efa/Dockerfile): both ends must run the same build"))
    if not efa_enabled:
        problems.append(("efa_enabled", "needs EFA on the GPU nodes (interfaces, their self-referencing security group, the EFA device plugin)"))
    elif efa_interfaces <= 0:
        problems.append(("efa_interfaces", "the GPU instance type has no EFA interface"))
    if pipelined_load:
        problems.append(("pipelined_load", "both set vLLM's --load-format, and VLLM_PLUGINS=modelexpress stops the kimi_k3_pipelined plugin from loading "
                                           "(vllm/plugins/__init__.py: only the plugins VLLM_PLUGINS names load): choose one"))
    if engine_snapshot:
        problems.append(("engine_snapshot", SNAPSHOT_CONFLICT))
    return problems


def find_peer(service: str, port: int, *, timeout_s: float = 3.0, connect: Callable[..., socket.socket] = socket.create_connection) -> tuple[str | None, str]:
    """``(address, why)``: ``service:port`` accepts a connection (a ready peer serves rank 0's WorkerGrpcServer), else ``None`` and why.
    A ClusterIP Service without ready endpoints refuses connections (kube-proxy's reject rule)."""
    address = f"{service}:{port}"
    try:
        connect((service, port), timeout_s).close()
    except OSError as error:
        return None, f"no serving peer answers at {address} ({error.__class__.__name__}: {error})"
    return address, ""


def fallback_reason(line: str) -> str | None:
    """What a ModelExpress log line says about the RDMA path failing, else ``None``."""
    for pattern in FALLBACK_PATTERNS:
        match = pattern.search(line)
        if match:
            return match.group(0)
    return None


def _write(line: str) -> None:
    sys.stdout.write(line)
    sys.stdout.flush()


def _stop(child: subprocess.Popen[str], grace_s: float) -> None:
    """SIGTERM the engine's process group, SIGKILL after ``grace_s``."""
    try:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    except ProcessLookupError:
        pass


def supervise_peer_start(argv: Sequence[str], *, weights_marker: str, log: Callable[[str], None], out: Callable[[str], None], grace_s: float = 30.0) -> int | None:
    """Run the peer path's engine (``argv``), passing its log through; ``None`` when the wrapper stopped it to take the cold path,
    else the engine's exit status. SIGTERM/SIGINT go to the engine's process group (the pod's stop sequence)."""
    child = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    def forward(sig: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    assert child.stdout is not None
    watching = True
    for line in child.stdout:
        out(line)
        why = fallback_reason(line) if watching else None
        if why is None:
            continue
        watching = False
        if os.path.exists(weights_marker):
            log(FALLBACK_LOG.format(why=why))
            continue
        _stop(child, grace_s)
        log(COLD_LOG.format(reason=f"the transfer failed before the node's weights were complete ({why}); the engine was stopped before it read a partial checkpoint"))
        return None
    return child.wait()


def peer_start(cold: Sequence[str], env: Mapping[str, str], *, log: Callable[[str], None], execvp: Callable[[str, list[str]], None] = os.execvp,
               connect: Callable[..., socket.socket] = socket.create_connection, out: Callable[[str], None] = _write) -> int:
    """``podmain peer-start CMD… -- vllm-serve ARGS…``: the peer path or the cold path (module docstring). ``cold`` is the container's
    normal command, ``/bin/sh -c SCRIPT vllm-serve ARGS…``; the peer path runs ``/bin/sh -c $PEER_START_SCRIPT vllm-serve ARGS…``."""
    if "vllm-serve" not in cold:
        raise SystemExit("peer-start: the command must be /bin/sh -c SCRIPT vllm-serve ARGS...")
    engine_args = list(cold[cold.index("vllm-serve") + 1:])
    marker = env.get(ATTEMPT_MARKER_ENV, ATTEMPT_MARKER)
    reason = ""
    if os.path.exists(marker):
        reason = "an earlier start of this pod took the peer path"
    else:
        address, reason = find_peer(env[SERVICE_ENV], int(env.get("MX_WORKER_GRPC_PORT", WORKER_GRPC_PORT)), connect=connect)
        if address is None and env.get(KEY_ENV):  # the Service selects this key only: a pod of another image or revision is no peer
            reason = reason.replace("no serving peer", f"no serving peer of this image, revision and engine ({PEER_KEY_LABEL}={env[KEY_ENV]})", 1)
        if address is not None:
            with open(marker, "w") as fh:
                fh.write(f"{time.monotonic()}\n")
            log(PEER_LOG.format(address=address))
            status = supervise_peer_start(["/bin/sh", "-c", env[PEER_START_ENV], "vllm-serve", *engine_args], weights_marker=env[WEIGHTS_MARKER_ENV], log=log, out=out)
            if status is not None:
                return status
            reason = ""
    if reason:
        log(COLD_LOG.format(reason=reason))
    execvp(cold[0], list(cold))
    return 0  # not reached: exec replaces the process (a test's execvp returns)


__all__ = [
    "ATTEMPT_MARKER",
    "ATTEMPT_MARKER_ENV",
    "COLD_LOG",
    "EFA_ENV",
    "EFA_RESOURCE",
    "FALLBACK_LOG",
    "FALLBACK_PATTERNS",
    "KEY_ENV",
    "LOAD_FORMAT",
    "METADATA_PORT",
    "MX_TAG",
    "PEER_KEY_LABEL",
    "PEER_LOG",
    "PEER_START_ENV",
    "PLUGIN",
    "POD_SECURITY_CAPABILITIES",
    "SERVICE_ENV",
    "SNAPSHOT_CONFLICT",
    "WEIGHTS_MARKER_ENV",
    "WORKER_GRPC_PORT",
    "capability_problem",
    "efa_request_problem",
    "engine_env",
    "fallback_reason",
    "find_peer",
    "peer_key",
    "peer_start",
    "stack_problems",
    "supervise_peer_start",
    "with_load_format",
]
