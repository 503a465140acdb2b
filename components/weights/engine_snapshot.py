"""Restore instead of rebuild: a CRIU + cuda-checkpoint snapshot of the serving engine (issue 34, docs/weights.md).

After the first healthy start of a key, the engine is put to vLLM's sleep mode level 2 (weights and
KV cache released: docs.vllm.ai features/sleep_mode, "Level 2 sleep will discard both the model
weights and the KV cache"), its CUDA state is checkpointed by NVIDIA's ``cuda-checkpoint``
(github.com/NVIDIA/cuda-checkpoint README: device memory copied to host memory, "all of CUDA's GPU
resources are released") and the process tree dumped by CRIU onto the node-local NVMe, then
woken. What the snapshot keeps is what a start rebuilds: compiled kernels, CUDA graphs, the
allocator's layout, NCCL communicators; what it leaves out is 1.56 TB of weights, which the
restored engine reloads from the page cache (restoring them from the image instead would read
~1.6 TB at a CRIU restore's ~3 GB/s: :data:`~kimi_k3.weights.startup_figures.FIGURES`
``snapshot_restore_rate``).

Mechanism chosen for vLLM 0.27.1, TP8 on B300: Dynamo Snapshot's (docs.nvidia.com/dynamo,
"Snapshotting GPU Workers", read): CRIU and ``cuda-checkpoint`` driven by a privileged agent
DaemonSet with the host's PID namespace, the engine container a placeholder the agent restores
into. What it needs (:data:`REQUIREMENTS`), each checked before a restore, any miss a cold start:

* NVIDIA driver 580 or newer, 590 or newer for multi-GPU snapshots (Dynamo's prerequisites);
* CRIU 4.0 or newer with its CUDA plugin (cuda-checkpoint README, "integration with CRIU 4.0 or
  higher, providing process tree support", driver 570 features);
* the agent privileged with ``hostPID`` (Dynamo: "The snapshot-agent DaemonSet runs in privileged
  mode to perform CRIU operations");
* x86-64 nodes (Dynamo's prerequisites; cuda-checkpoint ships ``bin/x86_64_Linux`` only).

A snapshot is only as good as its key: :class:`SnapshotKey` is the image digest, the driver
version, the GPU model and count, the model revision, the engine's arguments and environment
(the profile), and the node's kernel and GPU PCI bus IDs, what another node must share for the
snapshot's S3 copy to restore there (:mod:`kimi_k3.weights.snapshot_copy`). The dump writes ``SHA256SUMS`` of every file, then ``KEY`` last (atomically): the
restore side checks the key field by field (:func:`restore_decision`, naming the first field that
differs), then every file's sha256 against the manifest, as the weights are verified; anything
short of all of it is a cold start, never a partial restore.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields

try:
    from kimi_k3.errors import UserError
except ModuleNotFoundError:  # in a pod (kimi_k3.weights.pod_files ships no kimi_k3.errors: it imports Pulumi); the pod reports a bad key as a cold start
    UserError = ValueError  # type: ignore[misc, assignment]

KEY_VERSION = "v2"
"""Bump when the snapshot layout or the key's fields change (v2: the node's kernel and GPU PCI bus IDs, for the S3 copy)."""
MIN_DRIVER_SINGLE_GPU = 580
"""Dynamo Snapshot's minimum driver branch (docs.nvidia.com/dynamo, Snapshotting GPU Workers, prerequisites)."""
MIN_DRIVER_MULTI_GPU = 590
"""The same page: "590.xx or newer if testing multi-GPU snapshots" (a TP8 engine is one)."""
MIN_CRIU = (4, 0)
"""cuda-checkpoint README (driver 570 features): CRIU 4.0 or higher for process trees (vLLM's API server, engine core, 8 workers)."""
REQUIREMENTS = (
    f"NVIDIA driver >= {MIN_DRIVER_SINGLE_GPU} (>= {MIN_DRIVER_MULTI_GPU} for multi-GPU snapshots), read by nvidia-smi on the node",
    f"CRIU >= {MIN_CRIU[0]}.{MIN_CRIU[1]} with its CUDA plugin and the cuda-checkpoint utility in the agent image",
    "the snapshot agent privileged, with hostPID, the node-local NVMe mounted (CRIU dumps and restores the engine's process tree)",
    "x86-64 nodes (cuda-checkpoint is built for x86_64 Linux)",
    "vLLM started with --enable-sleep-mode (level 2 releases the weights and the KV cache before the checkpoint)",
    "no GPU memory the checkpoint cannot move: vLLM's custom all-reduce and symmetric-memory all-reduce off "
    "(--disable-custom-all-reduce, VLLM_ALLREDUCE_USE_SYMM_MEM=0); FlashInfer's all-reduce and all2all are released by "
    "vLLM's checkpoint_prepare before the dump and rebuilt by checkpoint_restore after it",
)
"""What a restore needs, as ``kimi-k3 plan`` and docs/weights.md print it."""
SLEEP_MODE_FLAG = "--enable-sleep-mode"
"""The ``vllm serve`` flag sleep mode needs (docs.vllm.ai features/sleep_mode); ``engineSnapshot`` adds it to the engine's args."""
DEV_MODE_ENV = {"VLLM_SERVER_DEV_MODE": "1"}
"""vLLM serves ``POST /sleep?level=N``, ``POST /wake_up?tags=…`` and ``POST /collective_rpc`` only in dev mode: in the
0.27.1 wheel they are routes of ``vllm/entrypoints/serve/dev/sleep/api_router.py`` and ``dev/rpc/api_router.py``, which
``vllm/entrypoints/openai/api_server.py`` registers only ``if envs.VLLM_SERVER_DEV_MODE`` (``register_vllm_dev_api_routers``;
recorded by tools/vllm_cli_names.py in tests/data/vllm-0.27.1-names.json, ``dev_endpoints``). They are unprotected by
``--api-key`` (docs/usage/security.md), and the API proxy's allowlist never forwards them
(kimi_k3.serving.api_proxy.VLLM_UNPROTECTED_PATHS): only the pod's loopback reaches them."""
CHECKPOINTABLE_FLAGS = ("--disable-custom-all-reduce",)
"""``vllm serve`` flags a snapshotted engine gets so that no GPU memory the checkpoint cannot move exists: vLLM's custom
all-reduce shares its buffers between the ranks as CUDA IPC memory, and cuda-checkpoint "does not support UVM or IPC memory"
(NVIDIA/cuda-checkpoint README @6ec728af, "Functionality"); vLLM 0.27.1's own checkpoint hooks release only FlashInfer's
all-reduce and all2all ("Only FlashInfer all-reduce and FlashInfer all2all are supported for now",
``vllm/distributed/device_communicators/cuda_communicator.py`` ``checkpoint_prepare``). FlashInfer's all-reduce is tried
first anyway (``CudaCommunicator.all_reduce``: quick reduce, FlashInfer, AITER, custom, then NCCL), so what the custom
all-reduce took goes to NCCL."""
CHECKPOINTABLE_ENV = {"VLLM_ALLREDUCE_USE_SYMM_MEM": "0"}
"""The environment a snapshotted engine gets for the same reason: torch symmetric-memory all-reduce (on by default,
``vllm/envs.py``) maps peer GPUs' memory, which neither checkpoint hook releases."""
CHECKPOINT_RPCS = ("checkpoint_prepare", "checkpoint_restore")
"""The worker methods (``vllm/v1/worker/gpu_worker.py`` ``Worker``, 0.27.1) called through ``POST /collective_rpc`` around a
dump (prepare before it, restore after it, the engine asleep) and after a restore (restore, before the wake-up)."""
INSTANCE_ARCH = {"p6-b300.48xlarge": "x86_64", "p6-b200.48xlarge": "x86_64", "p5en.48xlarge": "x86_64"}
"""CPU architecture of the catalog's GPU instances (aws.amazon.com/ec2/instance-types/p6 and /p5: Intel Xeon hosts); the Grace-based
P6e-GB200 would be aarch64, which cuda-checkpoint does not ship for."""
SNAPSHOT_MANIFEST = "SHA256SUMS"
"""sha256sum-format manifest of every file of a snapshot, written by the dump before :data:`KEY_FILE`."""
KEY_FILE = "KEY"
"""The snapshot's key (JSON of :class:`SnapshotKey`), written last: a snapshot without it is incomplete."""
VERIFY_LOG = "engine snapshot {key}: verified {files} files ({gb:.1f} GB) in {seconds:.1f} s"
"""The restore's verification line (``kimi-k3 startup-report`` reads it: kimi_k3.bringup.startup)."""
RESTORE_LOG = "engine snapshot {key}: restored {gb:.1f} GB in {seconds:.1f} s"
"""The restore's line once CRIU and cuda-checkpoint are done (read by ``kimi-k3 startup-report``)."""
DUMP_LOG = "engine snapshot {key}: dumped and sealed {files} files ({gb:.1f} GB) in {seconds:.1f} s"
"""The dump's line after ``SHA256SUMS`` and ``KEY`` are written (read by ``kimi-k3 startup-report``)."""
COLD_LOG = "engine snapshot {key}: cold start: {reason}"
"""The wrapper's line when it does not restore (the reason names the field or the file)."""
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_DRIVER = re.compile(r"^(\d{3})\.\d+(?:\.\d+)?$")


@dataclass(frozen=True)
class SnapshotKey:
    """Everything whose change makes a restored engine wrong: any field that differs means a cold start."""

    image: str
    """Engine image pinned by digest (vLLM, PyTorch, CUDA runtime, NCCL): the restored process runs this image's code."""
    driver_version: str
    """NVIDIA driver on the node (``nvidia-smi --query-gpu=driver_version``): cuda-checkpoint restores into the same driver only."""
    gpu: str
    """GPU model (``B300``): kernels and CUDA graphs are built for it."""
    gpus: int
    """GPUs the engine holds (the tensor-parallel size): one CUDA context per worker."""
    model_revision: str
    """The weights' revision the reload reads (their layout in GPU memory is the snapshot's)."""
    engine_args: tuple[str, ...]
    """``vllm serve`` arguments (the profile): memory layout, capture sizes, parallelism."""
    engine_env: tuple[tuple[str, str], ...] = ()
    """The engine's environment that changes compiled code or memory (sorted name/value pairs)."""
    kernel_release: str = ""
    """The node's kernel (``uname -r``; a container shares the host's): CRIU restores a process tree onto the kernel whose
    interfaces it dumped (criu.org "What cannot be checkpointed": kernel features are checked on restore), and the S3 copy
    restores on another node, whose kernel the AMI release fixes."""
    gpu_bus_ids: tuple[str, ...] = ()
    """The node's GPUs' PCI bus IDs in index order (``nvidia-smi --query-gpu=pci.bus_id``): a restored process keeps the dump
    side's bus IDs (``cuDeviceGetPCIBusId``), and NCCL resolves its devices by bus ID (``nvmlDeviceGetHandleByPciBusId``), which
    fails on a node whose GPUs sit at other addresses (NVIDIA/cuda-checkpoint#48). The same layout restores index onto index,
    cuda-checkpoint's default without ``--device-map`` (NVIDIA/cuda-checkpoint#46, #54)."""

    def __post_init__(self) -> None:
        if not _DIGEST.search(self.image):
            raise UserError(f"engine snapshot: image {self.image!r} must be pinned by digest (repo@sha256:<64 hex>): a tag moves and the snapshot would restore other code")
        if not _DRIVER.match(self.driver_version):
            raise UserError(f"engine snapshot: driver_version {self.driver_version!r} is not a driver version; expected e.g. 590.48.01")
        if self.gpus < 1:
            raise UserError(f"engine snapshot: gpus {self.gpus} must be at least 1")

    def to_json(self) -> str:
        """The key as written to :data:`KEY_FILE` (sorted, with :data:`KEY_VERSION`)."""
        return json.dumps({"version": KEY_VERSION, **asdict(self)}, sort_keys=True)

    def digest(self) -> str:
        """Hex sha256 of :meth:`to_json`: the snapshot's directory name on the node and its object name in S3."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()


S3_COPY_PREFIX = "engine-snapshots/"
"""Where the snapshots' S3 copies live under the compile-cache prefix (``<compileCacheS3Uri>engine-snapshots/<key digest>/``):
the pods' role already reads and writes only that prefix (:func:`kimi_k3.weights.compile_cache.compile_cache_policy`), and the
cache archives are ``<prefix><key>.tar`` objects beside it, never under it."""
S3_COPY_EXPIRY_DAYS = 14
"""Days after which S3 expires a copy's objects (a lifecycle rule on :data:`S3_COPY_PREFIX`, ``WeightsBucket``): a key outlives
a new image, driver or AMI release rarely longer, and a block two weeks later restores from its own first start instead."""
S3_CLAIM = "CLAIM"
"""The object an uploader writes first with ``If-None-Match: *`` (S3 conditional writes: "Add preconditions to S3 operations
with conditional requests", Amazon S3 user guide; a second writer gets 412 Precondition Failed): two replicas that dumped the
same key never interleave their files in one copy. With two or more replicas it is also the dump's election
(:func:`dump_waits_for_peer`): taken before the dump, so only one replica dumps a new key. Never replaced: the copy expires as a
whole; a claim won and given up without a dump is deleted (the copier's ``snap_release``), so the next start tries again."""
CLAIM_WON = "claimed:"
"""First word of the copier's answer to a claim: this node holds the key's :data:`S3_CLAIM` (written now, or by an earlier start on
this node): it dumps."""
CLAIM_HELD = "held:"
"""First word of the copier's answer to a claim: S3 answered 412 Precondition Failed, another replica holds it: no dump here."""
CLAIM_COPIED = "copied:"
"""First word of the copier's answer to a claim: the key's ``KEY`` is already in S3: nothing to dump (the next start fetches it)."""
CLAIM_ERROR = "error:"
"""First word of the copier's answer when the claim's put failed otherwise: no election can be held, so no dump."""
PEERS_HOST_ENV = "SNAPSHOT_PEERS_HOST"
"""The warm-up sidecar's env: the headless Service's name that resolves to the Ready serving pods of this pod's peer key
(:func:`kimi_k3.weights.snapshot_pod.ready_peers`); set only when :func:`dump_waits_for_peer`."""
SERVING_HOST_ENV = "SNAPSHOT_SERVING_HOST"
"""The warm-up sidecar's env beside :data:`PEERS_HOST_ENV`: the headless Service of every Ready serving pod, of any key. A Ready pod
of another key while none of this key is Ready is a rollout (the StatefulSet replaces one pod at a time and waits for this one):
the winner goes Ready without a dump and releases the claim, and the next pod of the key, beside this one, dumps."""
POD_IP_ENV = "POD_IP"
"""The warm-up sidecar's own pod IP (the downward API's ``status.podIP``), left out of :data:`PEERS_HOST_ENV`'s answers."""
PEER_READY_WAIT_S = 900
"""How long the claim's winner waits for another replica of its key to be Ready before it dumps. The replicas of a stack start
together (one node group, one scheduled scale-up) and the loser goes Ready as soon as its warm-up request is answered, so the wait
is the spread between two nodes' cold starts: the first Ready's cold case lies in 8.8–19.9 min (prod's estimate, docs/weights.md),
11.1 min apart at most, rounded up to 15 for a node that joins late. Past it the winner goes Ready without a dump and releases the claim (the next start of the key tries again)."""


def dump_waits_for_peer(*, s3_copy: bool, replicas: int) -> bool:
    """Whether only one replica dumps a new key, and only once another replica of it serves (the claim's election): with the S3 copy
    (the claim is its ``CLAIM``) and two or more replicas. One replica (or no copy) dumps before its own Ready, as before."""
    return s3_copy and replicas >= 2
FETCH_LOG = "engine snapshot {key}: fetched the S3 copy in {seconds:.1f} s"
"""The wrapper's line when the S3 copy of its key has landed on a new node (then verified as a local snapshot: :data:`VERIFY_LOG`)."""
ELECTION_LOG = "engine snapshot {key}: dump election: {verdict}"
"""The warm-up sidecar's line at each step of the dump's election (:func:`kimi_k3.weights.snapshot_pod.elect_dump`)."""
UPLOAD_LOG = "engine snapshot {key}: asked the sync sidecar to copy it to S3 ({uri})"
"""The warm-up sidecar's line after a seal when the S3 copy is on (the copy's own line is the sync sidecar's)."""


def s3_copy_uri(compile_cache_s3_uri: str) -> str:
    """``s3://bucket/<cache prefix>engine-snapshots/``: the prefix of every snapshot's S3 copy (one ``<key digest>/`` under it)."""
    return f"{compile_cache_s3_uri.rstrip('/')}/{S3_COPY_PREFIX}"


def requirement_problems(driver_version: str, gpus: int, criu_version: tuple[int, int] | None, arch: str = "x86_64") -> list[str]:
    """Why a snapshot cannot be taken or restored on this node (empty: it can); read on the node by the agent, each a cold start."""
    problems = []
    match = _DRIVER.match(driver_version)
    floor = MIN_DRIVER_MULTI_GPU if gpus > 1 else MIN_DRIVER_SINGLE_GPU
    if match is None or int(match.group(1)) < floor:
        problems.append(f"driver {driver_version} is older than {floor} (Dynamo Snapshot's floor for {'multi-GPU' if gpus > 1 else 'single-GPU'} snapshots)")
    if criu_version is None or criu_version < MIN_CRIU:
        problems.append(f"CRIU {'missing' if criu_version is None else '.'.join(map(str, criu_version))}: {MIN_CRIU[0]}.{MIN_CRIU[1]} or newer is needed for a process tree")
    if arch != "x86_64":
        problems.append(f"architecture {arch}: cuda-checkpoint is built for x86_64 only")
    return problems


def stack_problems(*, instance_type: str, node_local_weights: bool, image: str, pipeline_parallel_size: int, warmup: bool) -> list[tuple[str, str]]:
    """``(input, why)`` for each reason a stack cannot turn the engine snapshot on (empty: it can), the input named as this
    function's argument. The node's driver and CRIU are checked on the node by the agent (:func:`requirement_problems`): the
    repository records no driver version of the pinned AMI release."""
    problems = []
    if not node_local_weights:
        problems.append(("node_local_weights", "needs node-local weights: the snapshot lives beside them on the node's NVMe and the restored engine reloads them from the page cache"))
    if INSTANCE_ARCH.get(instance_type) != "x86_64":
        problems.append(("instance_type", f"instance type {instance_type} is not a known x86-64 instance ({', '.join(sorted(INSTANCE_ARCH))}): cuda-checkpoint is built for x86_64 only"))
    if not _DIGEST.search(image):
        problems.append(("image", f"needs the engine image pinned by digest ({image!r}): a snapshot restores the code of exactly one build"))
    if pipeline_parallel_size != 1:
        problems.append(("pipeline_parallel_size", "single-node replicas only: a snapshot holds one node's process tree"))
    if not warmup:
        problems.append(("warmup", "needs the warm-up sidecar: it takes the snapshot after the engine's first healthy start"))
    return problems


def restore_decision(recorded_key_json: str | None, current: SnapshotKey) -> tuple[bool, str]:
    """``(restore, reason)``: restore only when the recorded key equals ``current`` in every field; else the first field that differs."""
    if recorded_key_json is None:
        return False, f"no snapshot ({KEY_FILE} missing): cold start"
    try:
        recorded = json.loads(recorded_key_json)
    except json.JSONDecodeError:
        return False, f"{KEY_FILE} is not JSON: cold start"
    if recorded.get("version") != KEY_VERSION:
        return False, f"snapshot layout {recorded.get('version')!r}, this engine writes {KEY_VERSION!r}: cold start"
    now = json.loads(current.to_json())
    for f in fields(SnapshotKey):
        if recorded.get(f.name) != now[f.name]:
            return False, f"snapshot {f.name} {recorded.get(f.name)!r} differs from this pod's {now[f.name]!r}: cold start"
    return True, f"snapshot {current.digest()[:12]} matches: restore"


def manifest_problems(manifest_text: str, actual: Mapping[str, str]) -> list[str]:
    """Files of a snapshot that do not match its manifest (``sha256  name`` lines) against ``actual`` (name -> sha256 read now)."""
    problems = []
    listed = {}
    for line in manifest_text.splitlines():
        if not line.strip():
            continue
        digest, _, name = line.partition(" ")
        listed[name.lstrip(" *")] = digest
    if not listed:
        problems.append(f"{SNAPSHOT_MANIFEST} lists no file")
    for name, digest in listed.items():
        got = actual.get(name)
        if got is None:
            problems.append(f"{name} is missing")
        elif got != digest:
            problems.append(f"{name}: sha256 {got}, manifest {digest}")
    return problems


def snapshot_env(key: SnapshotKey, snapshot_root: str, s3_uri: str | None) -> dict[str, str]:
    """Environment of the engine container's snapshot wrapper: the key's digest and JSON, where snapshots live, the S3 copy."""
    env = {"SNAPSHOT_KEY": key.digest(), "SNAPSHOT_KEY_JSON": key.to_json(), "SNAPSHOT_ROOT": snapshot_root}
    if s3_uri is not None:
        env["SNAPSHOT_S3_URI"] = s3_uri
    return env


def key_from_json(text: str) -> SnapshotKey:
    """The :class:`SnapshotKey` of :meth:`SnapshotKey.to_json`'s text (lists back to tuples, the version dropped)."""
    data = json.loads(text)
    data.pop("version", None)
    data["engine_args"] = tuple(data.get("engine_args", ()))
    data["engine_env"] = tuple(tuple(pair) for pair in data.get("engine_env", ()))
    data["gpu_bus_ids"] = tuple(data.get("gpu_bus_ids", ()))
    return SnapshotKey(**data)


def key_from_pod(*, image: str, driver_version: str, gpu: str, gpus: int, model_revision: str, engine_args: Sequence[str], engine_env: Mapping[str, str],
                 kernel_release: str = "", gpu_bus_ids: Sequence[str] = ()) -> SnapshotKey:
    """The :class:`SnapshotKey` of a serving pod (the env sorted, so the same pod gives the same key)."""
    return SnapshotKey(image=image, driver_version=driver_version, gpu=gpu, gpus=gpus, model_revision=model_revision,
                       engine_args=tuple(engine_args), engine_env=tuple(sorted(engine_env.items())), kernel_release=kernel_release, gpu_bus_ids=tuple(gpu_bus_ids))


__all__ = [
    "CLAIM_COPIED",
    "CLAIM_ERROR",
    "CLAIM_HELD",
    "CLAIM_WON",
    "COLD_LOG",
    "DEV_MODE_ENV",
    "DUMP_LOG",
    "ELECTION_LOG",
    "FETCH_LOG",
    "INSTANCE_ARCH",
    "KEY_FILE",
    "KEY_VERSION",
    "MIN_CRIU",
    "MIN_DRIVER_MULTI_GPU",
    "MIN_DRIVER_SINGLE_GPU",
    "PEERS_HOST_ENV",
    "PEER_READY_WAIT_S",
    "POD_IP_ENV",
    "REQUIREMENTS",
    "RESTORE_LOG",
    "S3_CLAIM",
    "S3_COPY_EXPIRY_DAYS",
    "S3_COPY_PREFIX",
    "SERVING_HOST_ENV",
    "SLEEP_MODE_FLAG",
    "SNAPSHOT_MANIFEST",
    "UPLOAD_LOG",
    "VERIFY_LOG",
    "SnapshotKey",
    "dump_waits_for_peer",
    "key_from_json",
    "key_from_pod",
    "manifest_problems",
    "requirement_problems",
    "restore_decision",
    "s3_copy_uri",
    "snapshot_env",
    "stack_problems",
]
