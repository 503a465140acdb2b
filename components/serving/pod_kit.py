"""The pod kit of the vLLM serving components: what every GPU pod of a replica is made of.

Volumes, the init containers that stage and verify the weights, the engine's
environment and resources, the API probes, the container security context, and the
pod spec that puts one pod on one whole Capacity Block GPU node. :class:`PodKit`
binds the inputs once (component name, serving args, the Secret behind each secret
environment variable) and hands out the pieces: :class:`~kimi_k3.serving.vllm.VllmServer`
and :class:`~kimi_k3.serving.lws.VllmLeaderWorkerSet` build their pods from it and
nothing else.

Where the weights live: an ``emptyDir``. On AL2023 nodes whose nodeadm
``localStorage`` strategy is ``RAID0``, ``setup-local-disks`` mounts the NVMe RAID0
at ``/mnt/k8s-disks/0`` and bind-mounts ``/var/lib/kubelet`` onto it, so every
``emptyDir`` lives on the instance-store NVMe. A ``hostPath`` on
``/mnt/k8s-disks/0`` would survive pod re-creation, but Pod Security forbids
``hostPath`` at every level but ``privileged``; Capacity Block nodes are new
instances for every block anyway, and ``aws s3 sync``/``snapshot_download`` skip
files already present when only the container restarts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.cluster.pod_security import RUN_AS_USER, container_security_context
from kimi_k3.core import catalog, labels
from kimi_k3.errors import UserError
from kimi_k3.serving import api_pod, peer_weights
from kimi_k3.serving.args import AWS_CLI_IMAGE, VllmServingArgs
from kimi_k3.serving.contracts import ServingContract
from kimi_k3.serving.scripts import HF_DOWNLOAD_SCRIPT, READINESS_SCRIPT, S3_SYNC_SCRIPT, VERIFY_SCRIPT
from kimi_k3.weights import compile_cache, engine_snapshot, node_local, node_sync, peer_transfer, pod_files, serving_pod
from kimi_k3.weights.startup_figures import FIGURES

HOME = "/home/vllm"
"""Writable HOME (emptyDir): vLLM, Triton, TorchInductor, FlashInfer, DeepGEMM and CUDA JIT caches."""

HOME_ENV = {
    "HOME": HOME,
    "USER": "vllm",  # getpass.getuser() (TorchInductor) needs it: UID 10001 has no passwd entry
    "XDG_CACHE_HOME": f"{HOME}/.cache",
    "XDG_CONFIG_HOME": f"{HOME}/.config",
    "HF_HOME": f"{HOME}/.cache/huggingface",
}
"""Writable locations for everything that caches under HOME (root filesystem is read-only)."""

SERVER_CACHE_ENV = {
    "VLLM_CACHE_ROOT": f"{HOME}/.cache/vllm",
    "TRITON_CACHE_DIR": f"{HOME}/.triton/cache",
    # Triton keeps autotuning results beside its kernels only with this (vLLM 0.27.1 sets it by default: vllm/env_override.py, vllm#37188).
    "TRITON_CACHE_AUTOTUNING": "1",
    "TORCHINDUCTOR_CACHE_DIR": f"{HOME}/.cache/torchinductor",
    "CUDA_CACHE_PATH": f"{HOME}/.nv/ComputeCache",
    # vLLM 0.27.1's own default (vllm/utils/deep_gemm.py), set so the compile cache names it.
    "DG_JIT_CACHE_DIR": f"{HOME}/.cache/vllm/deep_gemm",
    # FlashInfer's JIT workspace and cubins go to $FLASHINFER_WORKSPACE_BASE/.cache/flashinfer (flashinfer/jit/env.py).
    "FLASHINFER_WORKSPACE_BASE": HOME,
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
"""Cache locations and opt-outs of every container running vLLM code (the compile cache saves every directory they name)."""

CACHE_RESTORED_MARKER = f"{HOME}/.cache/kimi-k3-compile-cache-restored"
"""Written by the restore init container after a complete restore; the engine's start then forces vLLM's AOT load."""

SECRET_ENV = ("VLLM_API_KEY", "HF_TOKEN")
"""Environment variables the kit fills from Secrets (``secretKeyRef``), never from literals."""

PROBE_PERIOD_S = 10
"""Period of the startup probes."""


def node_share(instance: catalog.InstanceType, reserved_cpu: int, reserved_memory_gib: int | None) -> tuple[int, int, int]:
    """vCPUs and GiB of memory a node leaves to the server, and the memory reserved (default 5% of the node, at least 32 GiB)."""
    reserved_memory = reserved_memory_gib if reserved_memory_gib is not None else max(32, instance.memory_gib // 20)
    return instance.vcpus - reserved_cpu, instance.memory_gib - reserved_memory, reserved_memory


def pod_resources(instance: catalog.InstanceType, reserved_cpu: int, reserved_memory_gib: int | None) -> dict[str, str]:
    """CPU/memory/GPU of the server container: the node minus the system's share (sizes checked by the args' validation).

    Memory includes the ``/dev/shm`` volume (a Memory emptyDir is charged to the pod).
    """
    cpu, memory, _ = node_share(instance, reserved_cpu, reserved_memory_gib)
    return {"cpu": str(cpu), "memory": f"{memory}Gi", "nvidia.com/gpu": str(instance.gpus)}


def weights_limit_gb(contract: ServingContract) -> int:
    """Size limit (GB) of the NVMe weights volume: the checkpoint plus 15%."""
    return math.ceil(contract.weights.expected_size_gb * 1.15)


def plain_env(values: Mapping[str, pulumi.Input[str]]) -> list[k8s.core.v1.EnvVarArgs]:
    """Literal environment variables, in order."""
    return [k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in values.items()]


def secret_env(env_name: str, secret_name: str) -> k8s.core.v1.EnvVarArgs:
    """``env_name`` from key ``key`` of the Secret ``secret_name`` (the value never enters the spec)."""
    return k8s.core.v1.EnvVarArgs(
        name=env_name,
        value_from=k8s.core.v1.EnvVarSourceArgs(secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(name=secret_name, key="key")),
    )


def kit_env_names(contract: ServingContract) -> frozenset[str]:
    """Every environment variable the kit sets in a vLLM container (caches, the contract's env, the secrets)."""
    return frozenset({*HOME_ENV, *SERVER_CACHE_ENV, *contract.vllm_env(), *SECRET_ENV})


def startup_code_config_map(name: str) -> str:
    """Name of the ConfigMap holding the pod-side modules of the serving component ``name``."""
    return f"{name}-startup-code"


@dataclass(frozen=True)
class PodKit:
    """The pieces of a serving pod, for one component.

    Build it once the component knows the Secret behind each secret environment
    variable; every method returns SDK ``*Args`` ready for a pod template.
    """

    name: str
    """Name of the serving component (its ServiceAccount)."""
    args: VllmServingArgs
    """The component's serving arguments."""
    secret_names: Mapping[str, str]
    """Secret environment variable (``VLLM_API_KEY``, ``HF_TOKEN``) -> name of the Secret holding it."""

    @property
    def instance(self) -> catalog.InstanceType:
        """Catalog facts of the GPU instance type the pods run on."""
        return catalog.INSTANCE_TYPES[self.args.instance_type]

    @property
    def node_local_weights(self) -> bool:
        """The weights volume is a node-local claim of the StatefulSet (``args.startup``), not an ``emptyDir``."""
        return self.args.startup is not None and self.args.startup.node_local_storage_class is not None

    def volumes(self) -> list[k8s.core.v1.VolumeArgs]:
        """Weights, ``/dev/shm``, writable HOME and ``/tmp`` (all ``emptyDir``; see the module docstring).

        With node-local weights the ``models`` volume comes from the StatefulSet's claim template instead;
        with ``args.startup`` needing code, the pod-side modules' ConfigMap is added.
        """
        args = self.args
        models = [] if self.node_local_weights else [
            # On RAID0 nodes every emptyDir is on the instance-store NVMe (see the module docstring).
            k8s.core.v1.VolumeArgs(name="models", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit=f"{weights_limit_gb(args.contract)}G")),
        ]
        code = [serving_pod.code_volume(startup_code_config_map(self.name))] if args.startup is not None and args.startup.needs_code else []
        return [
            *models,
            *code,
            k8s.core.v1.VolumeArgs(name="shm", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(medium="Memory", size_limit=f"{args.shm_size_gib}Gi")),
            k8s.core.v1.VolumeArgs(name="home", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit=f"{args.cache_size_gib}Gi")),
            k8s.core.v1.VolumeArgs(name="tmp", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="64Gi")),
        ]

    def mounts(self, shm: bool = False) -> list[k8s.core.v1.VolumeMountArgs]:
        """Mounts of the weights, HOME and ``/tmp`` volumes (and ``/dev/shm`` for the engine containers).

        Node-local weights: only this revision's directory of the volume (``subPath``), so two revisions never mix.
        """
        mounts = {"models": self.args.contract.weights.mount_path, "home": HOME, "tmp": "/tmp"}
        if shm:
            mounts["shm"] = "/dev/shm"
        sub_path = self.args.contract.weights.revision if self.node_local_weights else None
        return [k8s.core.v1.VolumeMountArgs(name=v, mount_path=p, sub_path=sub_path if v == "models" else None) for v, p in mounts.items()]

    def security_context(self) -> k8s.core.v1.SecurityContextArgs:
        """The security context of every container (:func:`container_security_context`)."""
        return container_security_context()

    def init_containers(self) -> list[k8s.core.v1.ContainerArgs]:
        """Init containers that stage the weights on the node's NVMe (S3 sync or pinned HF download), then verify them."""
        args = self.args
        contract = args.contract
        weights = contract.weights
        mounts = self.mounts()
        init_resources = k8s.core.v1.ResourceRequirementsArgs(
            requests={"cpu": "32", "memory": "64Gi"}, limits={"cpu": "32", "memory": "64Gi"}
        )
        init_containers = []
        if args.startup is not None and weights.source == "s3":
            return self._startup_init_containers()
        # One staging container: the AWS CLI syncing the S3 prefix, or the engine image
        # downloading the pinned Hugging Face snapshot.
        if weights.source == "s3":
            # validate_serving_args and WeightsContract make sure both are set for S3 weights.
            assert args.aws_region is not None and weights.s3_uri is not None
            staging_image, staging_pull = args.init_image, "IfNotPresent"
            fetch_command = ["/bin/sh", "-c", S3_SYNC_SCRIPT]
            fetch_env = plain_env({**HOME_ENV, "AWS_REGION": args.aws_region, "WEIGHTS_S3_URI": weights.s3_uri, "WEIGHTS_DIR": weights.weights_dir})
        else:
            staging_image, staging_pull = contract.image.image, contract.image.pull_policy
            fetch_command = ["python3", "-c", HF_DOWNLOAD_SCRIPT]
            fetch_env = plain_env({**HOME_ENV, "HF_HUB_CACHE": weights.mount_path, "MODEL_ID": weights.model_id, "MODEL_REVISION": weights.revision, "HF_HUB_DISABLE_TELEMETRY": "1"})
            if "HF_TOKEN" in self.secret_names:
                fetch_env.append(secret_env("HF_TOKEN", self.secret_names["HF_TOKEN"]))
        init_containers.append(
            k8s.core.v1.ContainerArgs(
                name="fetch-weights",
                image=staging_image,
                image_pull_policy=staging_pull,
                command=fetch_command,
                env=fetch_env,
                resources=init_resources,
                security_context=container_security_context(),
                volume_mounts=mounts,
            )
        )
        if weights.sha256_manifest:
            init_containers.append(
                k8s.core.v1.ContainerArgs(
                    name="verify-weights",
                    image=staging_image,
                    image_pull_policy=staging_pull,
                    command=["/bin/sh", "-c", VERIFY_SCRIPT],
                    env=plain_env({"WEIGHTS_DIR": weights.weights_dir, "SHA256_MANIFEST": weights.sha256_manifest}),
                    resources=init_resources,
                    security_context=container_security_context(),
                    volume_mounts=mounts,
                )
            )
        return init_containers

    def _startup_init_containers(self) -> list[k8s.core.v1.ContainerArgs]:
        """``args.startup``: the node-side sync (verification overlapping it), then the compile-cache restore."""
        args = self.args
        startup = args.startup
        weights = args.contract.weights
        assert startup is not None and args.aws_region is not None and weights.s3_uri is not None  # checked by the caller and the args' validation
        cpus = serving_pod.SIDECAR_SYNC_CPUS if startup.sync_sidecar else node_sync.init_cpus(self.instance, args.reserved_cpu)
        node_local_weights = self.node_local_weights
        env = serving_pod.sync_env(
            startup=startup, weights_s3_uri=weights.s3_uri, mount_path=weights.mount_path, revision=weights.revision,
            sha256_manifest=weights.sha256_manifest or "SHA256SUMS", instance_type=self.instance.name, cpus=cpus, region=str(args.aws_region),
        )
        mounts = self.mounts()
        if node_local_weights:
            mounts = [k8s.core.v1.VolumeMountArgs(name="models", mount_path=serving_pod.WEIGHTS_ROOT), *(m for m in mounts if m.name != "models")]
        # The node's share of memory (what the pod's containers add up to, so the pod's request does not grow): the files the
        # sync writes and hashes stay in the page cache, charged to this container, instead of being reclaimed at 64 GiB.
        _, sync_memory_gib, _ = node_share(self.instance, args.reserved_cpu, args.reserved_memory_gib)
        if startup.sync_sidecar:  # a sidecar's requests add to the engine's: a fixed share, taken out of the engine's
            sync_memory_gib = serving_pod.sidecar_sync_memory_gib(weights_limit_gb(args.contract))
        resources = {"cpu": str(cpus), "memory": f"{sync_memory_gib}Gi"}
        containers = [
            k8s.core.v1.ContainerArgs(
                name="fetch-weights",
                image=args.init_image,
                image_pull_policy="IfNotPresent",
                command=["/bin/sh", "-c", serving_pod.sync_script(node_local_weights, sidecar=startup.sync_sidecar, snapshot_copy_on=startup.engine_snapshot_s3)],
                env=plain_env({**HOME_ENV, **env}),
                resources=k8s.core.v1.ResourceRequirementsArgs(requests=resources, limits=resources),
                security_context=container_security_context(),
                volume_mounts=mounts,
                **(serving_pod.sidecar_sync_fields() if startup.sync_sidecar else {}),
            )
        ]
        cache_uri = self.compile_cache_uri()
        if cache_uri is not None:
            containers.append(serving_pod.cache_restore_container(
                image=args.contract.image.image, pull_policy=args.contract.image.pull_policy, cache_uri=cache_uri, cache_dirs=self.cache_dirs(),
                region=str(args.aws_region), home_env={**HOME_ENV, "CACHE_RESTORED_MARKER": CACHE_RESTORED_MARKER},
                mounts=[m for m in self.mounts() if m.name in ("home", "tmp")], security_context=container_security_context(),
            ))
        return containers

    def cache_dirs(self) -> list[str]:
        """The compile/JIT cache directories the pod redirects (what the cache saves and restores)."""
        return compile_cache.cache_dirs_from_env({**HOME_ENV, **SERVER_CACHE_ENV})

    def compile_cache_uri(self) -> str | None:
        """``s3://…/<key>.tar`` of this pod's caches: keyed on image digest, revision, engine args and env, GPU, AMI release."""
        args = self.args
        if args.startup is None:
            return None
        contract = args.contract
        inputs = compile_cache.CacheKeyInputs(
            image=contract.image.image, model_revision=contract.weights.revision, engine_args=tuple(self.engine_args()),
            engine_env=self.vllm_env(), gpu=self.instance.gpu, ami_release_version=args.startup.ami_release_version,
        )
        return serving_pod.cache_object_uri(args.startup, inputs)

    @property
    def engine_snapshot(self) -> bool:
        """Restore instead of rebuild is on (``args.startup.engine_snapshot``)."""
        return self.args.startup is not None and self.args.startup.engine_snapshot

    @property
    def peer_transfer(self) -> bool:
        """A new pod takes its weights from a serving peer over EFA (``args.startup.peer_transfer``)."""
        return self.args.startup is not None and self.args.startup.peer_transfer

    @property
    def snapshot_election(self) -> bool:
        """Only one replica dumps a new key, once another serves (:func:`~kimi_k3.weights.engine_snapshot.dump_waits_for_peer`:
        the engine snapshot's S3 copy and two or more replicas); the pods then carry their peer key and a headless Service finds them."""
        startup = self.args.startup
        return startup is not None and startup.engine_snapshot and engine_snapshot.dump_waits_for_peer(s3_copy=startup.engine_snapshot_s3, replicas=self.args.replicas)

    def key_peers_host(self) -> str:
        """DNS name of the headless Service of the Ready replicas of this pod's key (:func:`kimi_k3.serving.peer_weights.key_peers_service`)."""
        return f"{peer_weights.key_peers_service_name(self.name)}.{self.args.namespace}.svc.cluster.local"

    def peer_service(self) -> str:
        """Name of the Service of the serving peers (ModelExpress's ``k8s-service`` backend dials it): ``{name}-peers``."""
        return f"{self.name}-peers"

    def peer_key(self) -> str:
        """The :data:`~kimi_k3.weights.peer_transfer.PEER_KEY_LABEL` of this pod: image, model revision, engine args and env."""
        contract = self.args.contract
        return peer_transfer.peer_key(image=contract.image.image, model_revision=contract.weights.revision, engine_args=self.engine_args(), engine_env=self.vllm_env())

    def efa_resources(self) -> dict[str, str]:
        """``vpc.amazonaws.com/efa``: every EFA interface of the node on the peer path (the pod owns the node), else nothing."""
        if not self.peer_transfer:
            return {}
        problem = peer_transfer.efa_request_problem(self.instance.efa_interfaces, self.instance.efa_interfaces, self.instance.name)
        if problem:
            raise UserError(f"serving: startup.peer_transfer: {problem}")
        return {peer_transfer.EFA_RESOURCE: str(self.instance.efa_interfaces)}

    @property
    def pipelined_load(self) -> bool:
        """vLLM starts beside the sync and loads each shard once verified (``args.startup.pipelined_load``, with the sync sidecar)."""
        startup = self.args.startup
        return startup is not None and startup.sync_sidecar and startup.pipelined_load

    def pipelined_manifest(self) -> str:
        """The manifest whose per-shard markers the pipelined loader waits for; refused when the contract names none."""
        manifest = self.args.contract.weights.sha256_manifest
        if manifest is None:
            raise UserError("serving: startup.pipelined_load needs contract.weights.sha256_manifest: the loader waits for the sync's per-shard markers, named by the manifest's lines")
        return manifest

    def pipelined_env(self) -> dict[str, str]:
        """The pipelined loader's environment (:func:`kimi_k3.weights.serving_pod.pipelined_env`), else nothing."""
        if not self.pipelined_load:
            return {}
        contract = self.args.contract
        return serving_pod.pipelined_env(self.pipelined_manifest(), contract.engine.load_format, contract.vllm_env())

    def engine_args(self) -> list[str]:
        """``vllm serve`` arguments (:func:`kimi_k3.serving.api_pod.engine_args`), with the pipelined loader's load format and
        sleep mode when the engine is snapshotted."""
        engine = api_pod.engine_args(self.args, self.args.contract.weights.mount_path)
        if self.pipelined_load:
            engine = serving_pod.pipelined_args(engine)
        if self.peer_transfer:
            engine = peer_transfer.with_load_format(engine)
        if not self.engine_snapshot:
            return engine
        return [*engine, *(f for f in (engine_snapshot.SLEEP_MODE_FLAG, *engine_snapshot.CHECKPOINTABLE_FLAGS) if f not in engine)]

    def vllm_env(self) -> dict[str, str]:
        """The contract's vLLM environment, with the dev mode that serves ``/sleep`` and ``/wake_up`` and no all-reduce the
        checkpoint cannot move (:data:`~kimi_k3.weights.engine_snapshot.CHECKPOINTABLE_ENV`) when the engine is snapshotted,
        and ModelExpress's on the peer path."""
        snapshot = {**engine_snapshot.DEV_MODE_ENV, **engine_snapshot.CHECKPOINTABLE_ENV} if self.engine_snapshot else {}
        mx = peer_transfer.engine_env(service=self.peer_service(), model_revision=self.args.contract.weights.revision) if self.peer_transfer else {}
        return {**self.args.contract.vllm_env(), **snapshot, **mx}

    def snapshot_env(self) -> dict[str, str]:
        """``SNAPSHOT_*`` of the engine container and the warm-up sidecar (the key's plan-time fields, the root, the engine's URL)."""
        contract = self.args.contract
        fields = serving_pod.snapshot_key_fields(image=contract.image.image, gpu=self.instance.gpu, gpus=self.instance.gpus, model_revision=contract.weights.revision,
                                                 engine_args=self.engine_args(), engine_env={**self.vllm_env(), **self.pipelined_env()})
        env = serving_pod.snapshot_env(fields, f"http://127.0.0.1:{api_pod.proxy_config(self.args).engine_port}",
                                       self.args.startup.engine_snapshot_s3_uri if self.args.startup is not None else None)
        if self.pipelined_load:  # the restored engine's reload reads through the pipelined loader, which waits for each shard itself
            return env
        return {**env, "WEIGHTS_MARKER": f"{contract.weights.mount_path.rstrip('/')}/{node_sync.WEIGHTS_MARKER}"}

    def peer_env(self, start: str) -> dict[str, str]:
        """The peer wrapper's environment (:func:`kimi_k3.weights.peer_transfer.peer_start`): the peer path's start (``start``
        once the engine's config files are verified) and the sync's whole-manifest marker; nothing when the peer path is off."""
        if not self.peer_transfer:
            return {}
        mount = self.args.contract.weights.mount_path
        manifest = self.args.contract.weights.sha256_manifest
        if manifest is None:
            raise UserError("serving: startup.peer_transfer needs contract.weights.sha256_manifest: the peer path starts the engine once the manifest's config files are verified")
        return {**pod_files.POD_ENV, peer_transfer.PEER_START_ENV: serving_pod.pipelined_engine_start(mount, manifest, start),
                peer_transfer.WEIGHTS_MARKER_ENV: f"{mount.rstrip('/')}/{node_sync.WEIGHTS_MARKER}", peer_transfer.KEY_ENV: self.peer_key()}

    def warmup_sidecar(self) -> k8s.core.v1.ContainerArgs | None:
        """The warm-up-then-save sidecar (``args.startup.warmup``), else ``None``."""
        args = self.args
        if args.startup is None or not args.startup.warmup:
            return None
        api = args.contract.api
        key = self.secret_names.get("VLLM_API_KEY")
        return serving_pod.warmup_container(
            image=args.contract.image.image, pull_policy=args.contract.image.pull_policy,
            engine_url=f"http://127.0.0.1:{api_pod.proxy_config(args).engine_port}", served_model_name=api.served_model_name,
            region=str(args.aws_region or ""), home_env=HOME_ENV, cache_uri=self.compile_cache_uri(), cache_dirs=self.cache_dirs(),
            api_key_env=secret_env("VLLM_API_KEY", key) if key else None,
            mounts=[m for m in self.mounts() if m.name in ("home", "tmp")] + ([serving_pod.snapshot_mount("models")] if self.engine_snapshot else []),
            security_context=container_security_context(), snapshot_env=self.snapshot_env() if self.engine_snapshot else None,
            snapshot_peers_host=self.key_peers_host() if self.snapshot_election else None,
            serving_host=f"{self.name}-metrics.{args.namespace}.svc.cluster.local" if self.snapshot_election else None,  # base's headless metrics Service
        )

    def engine_env(self, extra: Mapping[str, str] | None = None, *, with_api_key: bool = True) -> list[k8s.core.v1.EnvVarArgs]:
        """Environment of a container running vLLM code: writable caches, the contract's env, ``extra``, the API key (secretKeyRef)."""
        env = plain_env({**HOME_ENV, **SERVER_CACHE_ENV, **self.vllm_env(), **(extra or {})})
        if with_api_key and "VLLM_API_KEY" in self.secret_names:
            env.append(secret_env("VLLM_API_KEY", self.secret_names["VLLM_API_KEY"]))
        return env

    def engine_resources(self, extra: Mapping[str, str] | None = None, *, beside_proxy: bool = False) -> k8s.core.v1.ResourceRequirementsArgs:
        """Requests = limits (Guaranteed QoS) for the whole node's share, plus ``extra`` (e.g. EFA interfaces).

        :param beside_proxy: the pod also runs the API proxy sidecar: its CPU and memory come out of this share
            (:func:`kimi_k3.serving.api_pod.engine_share`), so the pod still fits the node.
        """
        args = self.args
        resources = {**pod_resources(self.instance, args.reserved_cpu, args.reserved_memory_gib), **(extra or {})}
        if beside_proxy:
            cpu, memory, _ = node_share(self.instance, args.reserved_cpu, args.reserved_memory_gib)
            engine_cpu, engine_memory = api_pod.engine_share(cpu, memory, api_pod.proxy_config(args))
            if args.startup is not None and args.startup.warmup:  # the warm-up sidecar's share comes out of the engine's too
                engine_cpu -= int(serving_pod.WARMUP_RESOURCES["cpu"])
                engine_memory = f"{int(engine_memory.removesuffix('Mi')) - int(serving_pod.WARMUP_RESOURCES['memory'].removesuffix('Gi')) * 1024}Mi"
            if args.startup is not None and args.startup.sync_sidecar:  # so is the sync sidecar's
                engine_cpu -= serving_pod.SIDECAR_SYNC_CPUS
                engine_memory = f"{int(engine_memory.removesuffix('Mi')) - serving_pod.sidecar_sync_memory_gib(weights_limit_gb(args.contract)) * 1024}Mi"
            resources.update(cpu=str(engine_cpu), memory=engine_memory)
        # Weights on a node-local volume are the claim's, not the pod's ephemeral storage.
        node_local = args.startup is not None and args.startup.node_local_storage_class is not None
        weights_gb = 0 if node_local else weights_limit_gb(args.contract)
        return k8s.core.v1.ResourceRequirementsArgs(
            requests={**resources, "ephemeral-storage": f"{weights_gb + args.cache_size_gib + 64}G"},
            limits=dict(resources),
        )

    def probes(self, extra_startup_s: int = 0) -> dict[str, k8s.core.v1.ProbeArgs]:
        """The engine's startup, liveness and readiness (``exec`` on loopback: :func:`kimi_k3.serving.api_pod.engine_probes`).

        :param extra_startup_s: time the container may spend before the engine even starts
            loading (a group leader waiting for its workers).
        """
        api = self.args.contract.api
        engine_port = api_pod.proxy_config(self.args).engine_port
        readiness = READINESS_SCRIPT.format(port=engine_port, path=api.models_path, name=api.served_model_name)
        if self.args.startup is not None and self.args.startup.warmup:
            readiness = serving_pod.readiness_guard(readiness)
        # Weight staging runs in the init containers, so the startup budget is the engine's load + warm-up only; beside a
        # sync sidecar the engine container waits for the weights too: the sync at the S3 rate's low end, plus 5 minutes.
        if self.args.startup is not None and self.args.startup.sync_sidecar:
            extra_startup_s += math.ceil(weights_limit_gb(self.args.contract) / FIGURES["s3_node_rate"].lo) + 300
        return api_pod.engine_probes(self.args, readiness, extra_startup_s)

    def api_container(self, **overrides: Any) -> k8s.core.v1.ContainerArgs:
        """The engine serving the OpenAI API behind the proxy (``vllm serve`` on loopback); ``overrides`` replace ContainerArgs fields."""
        args = self.args
        contract = args.contract
        # Exec form: `vllm` is the container's PID 1 and receives SIGTERM itself (the AOT wrapper execs it).
        command = ["/bin/sh", "-c", serving_pod.aot_load_wrapper(CACHE_RESTORED_MARKER), "vllm-serve"] if self.compile_cache_uri() else ["vllm", "serve"]
        peer_env: dict[str, str] = {}
        if args.startup is not None and args.startup.sync_sidecar:  # the weights are still arriving when this container starts
            start = command[2] if command[0] == "/bin/sh" else 'exec vllm serve "$@"'
            wait = serving_pod.pipelined_engine_start(contract.weights.mount_path, self.pipelined_manifest(), start) if self.pipelined_load \
                else serving_pod.wait_for_weights(contract.weights.mount_path, start)
            command = ["/bin/sh", "-c", wait, "vllm-serve"]
            peer_env = self.peer_env(start)
        mounts = self.mounts(shm=True)
        if self.pipelined_load or self.engine_snapshot or self.peer_transfer:  # the loader plugin, the restore and peer wrappers: pod modules
            mounts = [*mounts, serving_pod.code_mount()]
        if self.peer_transfer:  # the weights from a serving peer over EFA, else the command above (cold)
            command = serving_pod.peer_start_command(command)
        if self.engine_snapshot:  # restore the snapshot of this pod's key into this container, else the command above (cold)
            command = serving_pod.engine_start_command(command)
            mounts = [*mounts, serving_pod.snapshot_mount("models")]
        fields: dict[str, Any] = dict(
            name="vllm",
            image=contract.image.image,
            image_pull_policy=contract.image.pull_policy,
            command=command,
            args=self.engine_args(),
            env=self.engine_env({**self.pipelined_env(), **peer_env, **(self.snapshot_env() if self.engine_snapshot else {})}),
            resources=self.engine_resources(self.efa_resources(), beside_proxy=True),
            **self.probes(),
            lifecycle=api_pod.engine_lifecycle(args),
            security_context=container_security_context(),
            volume_mounts=mounts,
        )
        fields.update(overrides)
        return k8s.core.v1.ContainerArgs(**fields)

    def api_sidecar(self) -> k8s.core.v1.ContainerArgs:
        """The API proxy container next to the engine (:func:`kimi_k3.serving.api_pod.sidecar`)."""
        return api_pod.sidecar(self.args)

    def api_volumes(self) -> list[k8s.core.v1.VolumeArgs]:
        """The proxy's volumes (its ConfigMap and writable ``emptyDir``), for a pod that runs :meth:`api_sidecar`."""
        return api_pod.volumes(self.name, self.args)

    def pod_spec(
        self,
        init_containers: list[k8s.core.v1.ContainerArgs],
        containers: list[k8s.core.v1.ContainerArgs],
        extra_volumes: list[k8s.core.v1.VolumeArgs] | None = None,
    ) -> k8s.core.v1.PodSpecArgs:
        """A pod on one whole Capacity Block GPU node: placement, pod security context, ServiceAccount, volumes (plus ``extra_volumes``)."""
        toleration = labels.GPU_TOLERATION
        return k8s.core.v1.PodSpecArgs(
            service_account_name=self.name,
            automount_service_account_token=False,
            enable_service_links=False,
            termination_grace_period_seconds=api_pod.drain_plan(self.args).grace_s,
            node_selector={**labels.GPU_NODE_SELECTOR, labels.INSTANCE_TYPE_LABEL: self.instance.name},
            tolerations=[k8s.core.v1.TolerationArgs(key=toleration["key"], operator=toleration["operator"], effect=toleration["effect"])],
            security_context=node_local.pod_security_context(RUN_AS_USER) if self.node_local_weights else k8s.core.v1.PodSecurityContextArgs(
                run_as_non_root=True,
                run_as_user=RUN_AS_USER,
                run_as_group=RUN_AS_USER,
                fs_group=RUN_AS_USER,
                seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
            ),
            init_containers=init_containers,
            containers=containers,
            volumes=[*self.volumes(), *(extra_volumes or [])],
        )


__all__ = [
    "AWS_CLI_IMAGE",
    "CACHE_RESTORED_MARKER",
    "HOME",
    "PROBE_PERIOD_S",
    "RUN_AS_USER",
    "PodKit",
    "container_security_context",
    "kit_env_names",
    "node_share",
    "pod_resources",
    "weights_limit_gb",
]
