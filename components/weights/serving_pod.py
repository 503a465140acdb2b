"""The serving pod's time-to-serve pieces: node-side sync, compile-cache restore, warm-up-then-save sidecar.

:class:`ServingStartup` is what a serving component is told (``VllmServingArgs.startup``);
``None`` there keeps the pod as it was (AWS CLI sync + a ``sha256sum`` pass, ``emptyDir``). The
builders here return SDK ``*Args`` the pod kit (:mod:`kimi_k3.serving.pod_kit`) puts into the
pod:

* :func:`sync_container`: :data:`~kimi_k3.weights.node_sync.NODE_SYNC_SCRIPT` (CRT client at
  the catalog's target bandwidth, verification overlapping the transfer, a verified marker),
  with the node-local volume's root mounted and :data:`~kimi_k3.weights.node_local.PRUNE_SCRIPT`
  first, so each revision lives in its own directory (the engine mounts only that one, as a
  ``subPath``);
* :func:`cache_restore_container`: ``podmain cache-restore`` before the engine;
* :func:`warmup_container`: ``podmain warmup-then-save`` beside the engine; it writes
  :data:`WARMUP_MARKER`, which the readiness probe requires (:func:`readiness_guard`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi_kubernetes as k8s

from kimi_k3.core.args_check import checked_args
from kimi_k3.core.s3 import S3Prefix, as_prefix
from kimi_k3.core.suggest import did_you_mean
from kimi_k3.errors import UserError
from kimi_k3.weights import (
    WeightsError,
    compile_cache,
    engine_snapshot,
    node_local,
    node_sync,
    peer_transfer,
    pod_files,
    snapshot_agent,
    snapshot_copy,
    vllm_loader,
)
from kimi_k3.weights.s3store import S3Location

WEIGHTS_ROOT = "/weights"
"""Where the sync container mounts the node-local volume's root (one directory per revision under it)."""
WARMUP_MARKER = "/tmp/.kimi-k3-warmed-up"
"""Written by the warm-up sidecar after the first completion; on the pod's ``/tmp`` ``emptyDir``, shared with the engine."""
CODE_VOLUME = "kimi-k3-code"
"""Name of the ConfigMap volume holding the pod-side modules (:mod:`kimi_k3.weights.pod_files`)."""
WARMUP_RESOURCES = {"cpu": "1", "memory": "4Gi"}
"""Requests = limits of the warm-up sidecar (it tars a few GB of caches once); taken from the engine's share."""
RESTORE_RESOURCES = {"cpu": "4", "memory": "8Gi"}
"""Requests = limits of the cache restore init container (an init container's request does not add to the pod's)."""


def cache_uri_problem(uri: object) -> str | None:
    """What is accepted instead of ``uri`` as the caches' prefix (``ServingStartup.compile_cache_s3_uri``, the settings'
    ``compileCacheS3Uri``); ``None``: accepted, which is when :meth:`kimi_k3.core.s3.S3Prefix.parse` parses it (the weights
    prefix's rule: the caches' role reads and writes only that prefix, so it is a non-empty one of S3's safe characters).

    The wording says which part is wrong: the shape, an empty prefix, or a character the pods' reader
    (:class:`~kimi_k3.weights.s3store.S3Location`) would take but the role's prefix must not hold (``$``: an IAM policy
    variable such as ``${aws:username}``, substituted in the policy's ``Resource`` (IAM User Guide, "IAM policy elements:
    Variables and tags"); ``+ , : ; @ &``: characters the S3 User Guide, "Naming Amazon S3 objects", says may need
    special handling)."""
    try:
        S3Prefix.parse(uri)
        return None
    except ValueError:
        pass
    try:
        location = S3Location.parse(uri) if isinstance(uri, str) else None
    except WeightsError:
        location = None
    if location is None:
        return "expected s3://bucket/prefix/ with a trailing slash (the caches' role reads and writes only that prefix)"
    if not location.prefix:
        return "expected a non-empty prefix, s3://bucket/prefix/: the caches' role reads and writes only that prefix"
    return (
        "expected s3://bucket/prefix/ whose prefix holds letters, digits and ! - _ . ' ( ) = / only (the caches' role reads and writes "
        "only that prefix, and $ would be read as an IAM policy variable)"
    )



@checked_args
@dataclass(frozen=True)
class ServingStartup:
    """How a serving pod starts (docs/weights.md). Every field has its rule's home in ``kimi_k3.weights``."""

    verify_hasher: str = "auto"
    """``VERIFY_HASHER`` of the node sync (:data:`kimi_k3.weights.node_sync.HASHERS`)."""
    node_local_storage_class: str | None = None
    """StorageClass of node-local weight volumes: the workload becomes a StatefulSet claiming one; ``None``: ``emptyDir``."""
    compile_cache_s3_uri: S3Prefix | str | None = None
    """Where the compile/JIT caches live (``compileCacheS3Uri``): the :class:`~kimi_k3.core.s3.S3Prefix` the stack passes (parsed once,
    by the settings), or ``s3://bucket/prefix/`` from one's own program, parsed once here (:func:`cache_uri_problem` words a
    refusal); an ``S3Prefix`` once built (:attr:`cache_prefix`). ``None``: no restore, no save."""
    ami_release_version: str | None = None
    """AMI release of the GPU nodes (the driver: part of the cache key)."""
    warmup: bool = True
    """Run the warm-up sidecar and make readiness wait for its marker."""
    sync_sidecar: bool = False
    """Run the sync as a native sidecar (:func:`sidecar_sync_fields`): the compile-cache restore runs beside it, the engine
    waits for the verified marker (:func:`wait_for_weights`) instead of for the init container."""
    engine_snapshot: bool = False
    """Restore instead of rebuild (:mod:`kimi_k3.weights.snapshot_pod`): the engine container starts through ``podmain
    engine-start`` (restore the snapshot of its key, else cold), vLLM gets ``--enable-sleep-mode`` and ``VLLM_SERVER_DEV_MODE=1``,
    the warm-up sidecar takes the snapshot after the first healthy start. Needs node-local weights and the warm-up sidecar,
    and the snapshot agent on the nodes (:class:`kimi_k3.weights.snapshot_agent.SnapshotAgent`)."""

    engine_snapshot_s3: bool = False
    """The snapshot's S3 copy (:mod:`kimi_k3.weights.snapshot_copy`): sealed snapshots are copied to
    ``<compile_cache_s3_uri>engine-snapshots/<key digest>/`` and a new node without one fetches it, both by the sync sidecar (the
    pod's AWS CLI container with the bucket role). Needs :attr:`engine_snapshot`, :attr:`sync_sidecar` and :attr:`compile_cache_s3_uri`."""

    pipelined_load: bool = False
    """With :attr:`sync_sidecar`: the engine starts once its config files are verified and loads with the pipelined loader
    (``--load-format`` :data:`kimi_k3.weights.vllm_loader.LOAD_FORMAT`), each shard once verified (:func:`pipelined_engine_start`)."""
    peer_transfer: bool = False
    """Take a new pod's weights from a serving peer over EFA with ModelExpress (:mod:`kimi_k3.weights.peer_transfer`): the engine
    container starts through ``podmain peer-start`` and vLLM loads with ``--load-format modelexpress``. Needs node-local weights and
    the sync sidecar (the cold fall-back), and excludes :attr:`pipelined_load` (both set the load format)."""

    def __post_init__(self) -> None:
        if self.pipelined_load and not self.sync_sidecar:
            raise UserError("serving startup: pipelined_load needs sync_sidecar: the loader reads the shards the sync sidecar verifies beside it")
        if self.verify_hasher not in node_sync.HASHERS:
            raise UserError(f"serving startup: verify_hasher {self.verify_hasher!r} is not accepted; accepted: {', '.join(node_sync.HASHERS)}{did_you_mean(self.verify_hasher, node_sync.HASHERS)}")
        if self.compile_cache_s3_uri is not None:  # the URI's one parse (a str from one's own program), refused in this field's words
            object.__setattr__(self, "compile_cache_s3_uri", as_prefix(self.compile_cache_s3_uri, owner="serving startup", field="compile_cache_s3_uri", expected=cache_uri_problem))
        if self.compile_cache_s3_uri is not None and not self.warmup:
            raise UserError("serving startup: compile_cache_s3_uri needs warmup: the sidecar saves the caches once the replica is warmed up")
        if self.engine_snapshot and (self.node_local_storage_class is None or not self.warmup):
            raise UserError("serving startup: engine_snapshot needs node_local_storage_class and warmup: the snapshot lives on the node's volume and the warm-up sidecar takes it")
        if self.peer_transfer and (self.node_local_storage_class is None or not self.sync_sidecar):
            raise UserError("serving startup: peer_transfer needs node_local_storage_class and sync_sidecar: the first replica serves its node's weights, and a new pod's engine starts beside the sync it falls back to")
        if self.peer_transfer and self.engine_snapshot:
            raise UserError(f"serving startup: peer_transfer and engine_snapshot are not accepted together; {peer_transfer.SNAPSHOT_CONFLICT}")
        if self.peer_transfer and self.pipelined_load:
            raise UserError("serving startup: peer_transfer and pipelined_load both set vLLM's --load-format (VLLM_PLUGINS=modelexpress stops the kimi_k3_pipelined plugin from loading); accepted: one of them")
        if self.engine_snapshot_s3 and not (self.engine_snapshot and self.sync_sidecar and self.compile_cache_s3_uri is not None):
            raise UserError("serving startup: engine_snapshot_s3 needs engine_snapshot, sync_sidecar and compile_cache_s3_uri: the sync sidecar copies "
                            "the snapshot to and from the compile-cache prefix, with the role that reads and writes it")

    @property
    def cache_prefix(self) -> S3Prefix | None:
        """:attr:`compile_cache_s3_uri` as the :class:`~kimi_k3.core.s3.S3Prefix` it is once built (``None``: no caches)."""
        prefix = self.compile_cache_s3_uri
        assert not isinstance(prefix, str)  # parsed in __post_init__
        return prefix

    @property
    def engine_snapshot_s3_uri(self) -> str | None:
        """``s3://…/<cache prefix>engine-snapshots/`` of the snapshots' copies with :attr:`engine_snapshot_s3`, else ``None``."""
        prefix = self.cache_prefix
        if not self.engine_snapshot_s3 or prefix is None:
            return None
        return engine_snapshot.s3_copy_uri(prefix.uri)

    @property
    def needs_code(self) -> bool:
        """The pod runs the project's pod-side modules (a ConfigMap volume)."""
        return self.warmup or self.compile_cache_s3_uri is not None or self.pipelined_load or self.engine_snapshot or self.peer_transfer


def cache_object_uri(startup: ServingStartup, inputs: compile_cache.CacheKeyInputs) -> str | None:
    """``s3://…/<key>.tar`` of this pod's caches, or ``None`` without a cache prefix."""
    prefix = startup.cache_prefix
    if prefix is None:
        return None
    return prefix.object_uri(f"{compile_cache.cache_key(inputs)}.tar")  # what compile_cache.cache_object_uri builds, without a second parse


def _env(values: Mapping[str, str]) -> list[k8s.core.v1.EnvVarArgs]:
    return [k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in values.items()]


def sync_script(node_local_weights: bool, sidecar: bool = False, snapshot_copy_on: bool = False) -> str:
    """The sync container's shell: prune other revisions first when the volume outlives the pod; as a sidecar, stay up once done;
    ``snapshot_copy_on`` (a sidecar only): the engine snapshot's S3 copier beside the sync (:mod:`kimi_k3.weights.snapshot_copy`)."""
    script = node_local.PRUNE_SCRIPT + node_sync.NODE_SYNC_SCRIPT if node_local_weights else node_sync.NODE_SYNC_SCRIPT
    if not sidecar:
        return script
    wrapped = node_sync.sidecar_script(script)
    return snapshot_copy.copier_script(wrapped) if snapshot_copy_on else wrapped


def sync_env(*, startup: ServingStartup, weights_s3_uri: str, mount_path: str, revision: str, sha256_manifest: str, instance_type: str, cpus: int, region: str) -> dict[str, str]:
    """Environment of the sync container (``node_sync_env`` plus the region and, node-local, the prune inputs)."""
    node_local_weights = startup.node_local_storage_class is not None
    weights_dir = node_local.revision_dir(WEIGHTS_ROOT, revision) if node_local_weights else mount_path
    env = {"AWS_REGION": region, **node_sync.node_sync_env(
        weights_s3_uri=weights_s3_uri, weights_dir=weights_dir, sha256_manifest=sha256_manifest, instance_type=instance_type, cpus=cpus, hasher=startup.verify_hasher,
        streams=node_sync.SYNC_STREAMS,
    )}
    if node_local_weights:
        env.update(WEIGHTS_ROOT=WEIGHTS_ROOT, KEEP_REVISION=revision)
    if startup.sync_sidecar:
        env.update(SYNC_DECIDED=SYNC_DECIDED, SHARD_MARKERS=node_sync.SHARD_MARKERS)
    cache = startup.cache_prefix
    if startup.engine_snapshot_s3 and cache is not None:
        env.update(snapshot_copy.copier_env(cache.uri))
    return env


SIDECAR_SYNC_CPUS = 32
"""CPUs of the sync as a native sidecar: its requests add to the engine's for the pod's whole life (Kubernetes docs, "Sidecar
Containers", resource sharing), so it takes 32 of the node's, not all of them; 16 hashing workers at openssl's 1.34 GB/s a
core (tools/bench_verify.py) outrun the S3 rate."""


def sidecar_sync_memory_gib(weights_gb: float) -> int:
    """Memory of the sync sidecar: the weights it writes stay in the page cache charged to it (within its limit), plus 64 GiB."""
    return math.ceil(weights_gb * 1e9 / 2**30) + 64


SYNC_DECIDED = "/tmp/.kimi-k3-sync-decided"
"""Written by the sync once it has checked (and, if stale, removed) the verified marker: the sidecar's startup probe, so the
containers after it never see a marker of other weights (kubelet starts them once a sidecar's startup probe succeeds)."""


def sidecar_sync_fields() -> dict:
    """The fields that make the sync container a native sidecar: ``restartPolicy: Always`` (Kubernetes docs, "Sidecar Containers",
    stable in 1.33, the project's oldest EKS version) and a startup probe on :data:`SYNC_DECIDED`."""
    return dict(
        restart_policy="Always",
        startup_probe=k8s.core.v1.ProbeArgs(
            exec_=k8s.core.v1.ExecActionArgs(command=["test", "-f", SYNC_DECIDED]), period_seconds=1, failure_threshold=600, timeout_seconds=1,
        ),
    )


def wait_for_weights(weights_dir: str, then: str) -> str:
    """The engine's start beside a sync sidecar: wait for the sync's whole-manifest marker, then ``then`` (an ``exec``).

    vLLM 0.27.1 lists the shards when its load starts (``DefaultModelLoader._prepare_weights``): started before the last shard
    is verified it would load a subset, so the engine waits here unless it loads with the pipelined loader
    (:attr:`ServingStartup.pipelined_load`, :func:`pipelined_engine_start`)."""
    marker = f"{weights_dir.rstrip('/')}/{node_sync.WEIGHTS_MARKER}"
    return f'until [ -f "{marker}" ]; do sleep 1; done; echo "weights verified ({marker}): starting the engine" >&2; {then}'


def pipelined_engine_start(weights_dir: str, manifest: str, then: str) -> str:
    """The engine's start beside a sync sidecar with the pipelined loader: wait only until the files vLLM reads at start-up
    are verified (:func:`kimi_k3.weights.pipelined_load.engine_files_ready`), then ``then`` (an ``exec``); the loader waits for each
    shard itself."""
    ready = f'python3 -m kimi_k3.weights.pipelined_load engine-files-ready "{weights_dir}" "{manifest}"'
    return (f"until {ready}; do sleep 1; done; "
            f'echo "engine files verified ({weights_dir}): starting the engine, the shards load as the sync verifies them" >&2; {then}')


def pipelined_env(manifest: str, inner_load_format: str, engine_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of the engine with the pipelined loader: the pod modules (and the plugin's ``*.dist-info``) on ``PYTHONPATH``,
    the profile's own load format read per group, the manifest's name. ``engine_env`` (the contract's): a ``VLLM_PLUGINS`` that
    leaves the plugin out is refused, since vLLM 0.27.1 then loads only the plugins it names (``vllm/envs.py``: a comma-separated
    list; ``vllm/plugins/__init__.py`` ``load_plugins_by_group``) and ``--load-format kimi_k3_pipelined`` fails at start."""
    vllm_loader.group_size(inner_load_format, 1)  # refuses a format the loader cannot read with
    plugins = (engine_env or {}).get("VLLM_PLUGINS")
    if plugins is not None and vllm_loader.ENTRY_POINT not in plugins.split(","):
        raise UserError(f"serving startup: VLLM_PLUGINS {plugins!r} leaves out {vllm_loader.ENTRY_POINT!r}, which pipelined_load needs; accepted: unset, or a list naming it")
    return {"PYTHONPATH": pod_files.MOUNT_PATH, vllm_loader.INNER_FORMAT_ENV: inner_load_format, vllm_loader.MANIFEST_ENV: manifest}


def pipelined_args(engine_args: Sequence[str]) -> list[str]:
    """``engine_args`` with ``--load-format`` set to the pipelined loader's."""
    args = list(engine_args)
    at = args.index("--load-format")
    args[at + 1] = vllm_loader.LOAD_FORMAT
    return args


def code_mount() -> k8s.core.v1.VolumeMountArgs:
    """The pod-side modules, read-only at :data:`kimi_k3.weights.pod_files.MOUNT_PATH`."""
    return k8s.core.v1.VolumeMountArgs(name=CODE_VOLUME, mount_path=pod_files.MOUNT_PATH, read_only=True)


def code_volume(config_map_name: str) -> k8s.core.v1.VolumeArgs:
    """The ConfigMap volume of the pod-side modules."""
    return pod_files.volume(CODE_VOLUME, config_map_name)


def _python_container(name: str, action: str, *, image: str, pull_policy: str, env: Mapping[str, str], extra_env: Sequence[k8s.core.v1.EnvVarArgs], resources: Mapping[str, str],
                      mounts: Sequence[k8s.core.v1.VolumeMountArgs], security_context: k8s.core.v1.SecurityContextArgs) -> k8s.core.v1.ContainerArgs:
    return k8s.core.v1.ContainerArgs(
        name=name,
        image=image,
        image_pull_policy=pull_policy,
        command=["python3", "-m", "kimi_k3.weights.podmain", action],
        env=[*_env({**pod_files.POD_ENV, **env}), *extra_env],
        resources=k8s.core.v1.ResourceRequirementsArgs(requests=dict(resources), limits=dict(resources)),
        security_context=security_context,
        volume_mounts=[*mounts, code_mount()],
    )


def cache_restore_container(*, image: str, pull_policy: str, cache_uri: str, cache_dirs: Sequence[str], region: str, home_env: Mapping[str, str],
                            mounts: Sequence[k8s.core.v1.VolumeMountArgs], security_context: k8s.core.v1.SecurityContextArgs) -> k8s.core.v1.ContainerArgs:
    """Init container restoring the caches of this key before the engine starts (a miss or an error: logged, the engine compiles)."""
    env = {**home_env, "AWS_REGION": region, "CACHE_S3_URI": cache_uri, "CACHE_DIRS": ":".join(cache_dirs)}
    return _python_container("restore-compile-cache", "cache-restore", image=image, pull_policy=pull_policy, env=env, extra_env=(), resources=RESTORE_RESOURCES, mounts=mounts, security_context=security_context)


def warmup_container(*, image: str, pull_policy: str, engine_url: str, served_model_name: str, region: str, home_env: Mapping[str, str], cache_uri: str | None, cache_dirs: Sequence[str],
                     api_key_env: k8s.core.v1.EnvVarArgs | None, mounts: Sequence[k8s.core.v1.VolumeMountArgs], security_context: k8s.core.v1.SecurityContextArgs,
                     snapshot_env: Mapping[str, str] | None = None, snapshot_peers_host: str | None = None,
                     serving_host: str | None = None) -> k8s.core.v1.ContainerArgs:
    """The sidecar: wait for ``/health``, (``snapshot_env``: snapshot the engine once per key,) send the warm-up completion, write
    :data:`WARMUP_MARKER`, save the caches, then unmark and re-warm after each engine restart. ``snapshot_peers_host``: the headless
    Service of the Ready replicas of this pod's key; a new key is then dumped only by the replica that wins its claim, once another
    serves (:func:`kimi_k3.weights.snapshot_pod.elect_dump`), with the pod's own IP from the downward API to leave out;
    ``serving_host``: the headless Service of every Ready serving pod (a rollout's pods of the old key)."""
    env = {**home_env, **(snapshot_env or {}), "AWS_REGION": region, "VLLM_URL": engine_url, "SERVED_MODEL_NAME": served_model_name, "WARMUP_MARKER": WARMUP_MARKER}
    if cache_uri is not None:
        env.update(CACHE_S3_URI=cache_uri, CACHE_DIRS=":".join(cache_dirs))
    extra_env = [api_key_env] if api_key_env else []
    if snapshot_peers_host is not None:
        env[engine_snapshot.PEERS_HOST_ENV] = snapshot_peers_host
        if serving_host is not None:
            env[engine_snapshot.SERVING_HOST_ENV] = serving_host
        extra_env.append(k8s.core.v1.EnvVarArgs(name=engine_snapshot.POD_IP_ENV, value_from=k8s.core.v1.EnvVarSourceArgs(
            field_ref=k8s.core.v1.ObjectFieldSelectorArgs(field_path="status.podIP"))))
    return _python_container(
        "warmup", "warmup-then-save", image=image, pull_policy=pull_policy, env=env, extra_env=extra_env,
        resources=WARMUP_RESOURCES, mounts=mounts, security_context=security_context,
    )


def aot_load_wrapper(marker: str) -> str:
    """The engine's start when a compile cache is configured: after a complete restore (``marker``), force vLLM's AOT load.

    vLLM 0.27.1 (``vllm/envs.py``, ``VLLM_FORCE_AOT_LOAD``): "Failure to load will result in a hard error"; without it a failed
    load silently compiles again, minutes of paid GPU time. The marker is consumed, so a start after a failed forced load (the
    container restarts) compiles as usual instead of failing again. ``exec`` keeps ``vllm`` PID 1 (it receives SIGTERM itself).
    """
    return (
        f'if [ -f "{marker}" ]; then rm -f "{marker}"; export VLLM_FORCE_AOT_LOAD=1; '
        'echo "compile cache restored: VLLM_FORCE_AOT_LOAD=1" >&2; fi; exec vllm serve "$@"'
    )


def engine_start_command(cold: Sequence[str]) -> list[str]:
    """The engine container's command with an engine snapshot: ``podmain engine-start`` restores, else execs ``cold`` (the args follow)."""
    return ["python3", "-m", "kimi_k3.weights.podmain", "engine-start", *cold]


def peer_start_command(cold: Sequence[str]) -> list[str]:
    """The engine container's command with a peer transfer: ``podmain peer-start`` takes the peer path, else execs ``cold`` (the args follow)."""
    return ["python3", "-m", "kimi_k3.weights.podmain", "peer-start", *cold]


def snapshot_key_fields(*, image: str, gpu: str, gpus: int, model_revision: str, engine_args: Sequence[str], engine_env: Mapping[str, str]) -> str:
    """``SNAPSHOT_KEY_FIELDS``: the :class:`~kimi_k3.weights.engine_snapshot.SnapshotKey` fields the plan knows (the pod adds the node's driver)."""
    return json.dumps({"image": image, "gpu": gpu, "gpus": gpus, "model_revision": model_revision, "engine_args": list(engine_args),
                       "engine_env": sorted([k, v] for k, v in engine_env.items())}, sort_keys=True)


def snapshot_env(key_fields: str, engine_url: str, s3_uri: str | None = None) -> dict[str, str]:
    """Environment of the engine container and the warm-up sidecar with an engine snapshot (plus :data:`POD_ENV` for the code);
    ``s3_uri``: the copies' prefix (:attr:`ServingStartup.engine_snapshot_s3_uri`), which turns on the fetch and the upload."""
    env = {**pod_files.POD_ENV, "SNAPSHOT_ROOT": snapshot_agent.MOUNT_PATH, "SNAPSHOT_KEY_FIELDS": key_fields, "VLLM_URL": engine_url}
    return {**env, "SNAPSHOT_S3_URI": s3_uri} if s3_uri else env


def snapshot_mount(volume: str) -> k8s.core.v1.VolumeMountArgs:
    """The snapshot root: the node-local weights volume's :data:`~kimi_k3.weights.snapshot_agent.SNAPSHOT_SUBPATH`, where the agent mounts it from the host."""
    return k8s.core.v1.VolumeMountArgs(name=volume, mount_path=snapshot_agent.MOUNT_PATH, sub_path=snapshot_agent.SNAPSHOT_SUBPATH)


def readiness_guard(script: str) -> str:
    """``script`` (a Python readiness check) preceded by a check of the warm-up marker: no client before the warm-up request."""
    return f"import os, sys\nif not os.path.exists({WARMUP_MARKER!r}):\n    sys.exit(1)\n{script}"


WARMUP_CHECKOV_SKIPS = (
    "CKV_K8S_8=the warm-up sidecar only polls the engine after its request and the cache save; the engine's probes cover the pod",
    "CKV_K8S_9=the warm-up sidecar receives no traffic; the pod's readiness is the engine's, which waits for the sidecar's marker",
)
"""Reasons for the checkov skips the sidecar needs (no probes on an idle helper container)."""


__all__ = [
    "CODE_VOLUME",
    "SIDECAR_SYNC_CPUS",
    "SYNC_DECIDED",
    "WARMUP_CHECKOV_SKIPS",
    "WARMUP_MARKER",
    "WEIGHTS_ROOT",
    "ServingStartup",
    "aot_load_wrapper",
    "cache_object_uri",
    "cache_restore_container",
    "code_volume",
    "engine_start_command",
    "peer_start_command",
    "pipelined_args",
    "pipelined_engine_start",
    "pipelined_env",
    "readiness_guard",
    "sidecar_sync_fields",
    "sidecar_sync_memory_gib",
    "snapshot_env",
    "snapshot_key_fields",
    "snapshot_mount",
    "sync_env",
    "sync_script",
    "wait_for_weights",
    "warmup_container",
]
