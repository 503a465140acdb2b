"""How a stack's settings become the time-to-serve mechanisms (docs/weights.md).

:class:`kimi_k3.stack.platform.Platform` calls:

* :func:`user_data_parts` — MIME parts of the GPU launch template: the node-local weights' boot part
  (``nodeLocalWeights``) and the nodeadm ``FastImagePull`` NodeConfig;
* :func:`serving_startup` — the serving pod's :class:`~kimi_k3.weights.serving_pod.ServingStartup`;
* :func:`args_from_settings` — the args of :class:`~kimi_k3.weights.time_to_serve.TimeToServe`.

:func:`startup_inputs` maps the stack to the estimate's :class:`~kimi_k3.weights.estimate.StartupInputs`
with the mechanisms the stack actually declares (the only place settings become the estimate's typed inputs: the
estimate never sees settings); :func:`estimate_lines` is what ``kimi-k3 plan`` prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pulumi

from kimi_k3.stack import seam
from kimi_k3.stack.settings import StackSettings
from kimi_k3.weights import engine_snapshot, estimate, image_pull, node_local, node_sync
from kimi_k3.weights.serving_pod import SIDECAR_SYNC_CPUS, ServingStartup
from kimi_k3.weights.time_to_serve import STORAGE_CLASS, TimeToServeArgs


def hasher_of(verify_hasher: str) -> str:
    """The estimate's hasher for ``weightsVerifyHasher`` (``auto`` takes openssl, which the sync prefers when the image has it)."""
    return "sha256sum" if verify_hasher == "sha256sum" else "openssl"


def engine_snapshot_s3(settings: StackSettings) -> bool:
    """The engine snapshot's S3 copy is deployed: ``engineSnapshot`` with the sync sidecar (``weightsSyncSidecar``, the pod's AWS CLI
    container that copies it) and ``compileCacheS3Uri`` (the prefix the pods' role reads and writes). No key of its own: the copy is
    the snapshot's, in the bucket and under the role the caches already have (docs/weights.md)."""
    t = settings.time_to_serve
    return t.engine_snapshot and t.sync_sidecar and t.compile_cache_s3_uri is not None


def stack_facts(settings: StackSettings) -> estimate.StartupInputs:
    """The estimate's inputs that are facts of the stack, not mechanisms (instance type, GPU nodes that start, weights
    source, whether the image is in the stack's region); every mechanism at its default."""
    contract = settings.serving.contract
    return estimate.StartupInputs(
        instance_type=settings.capacity.instance_type,
        nodes=settings.nodes_required,
        weights_source=contract.weights.source,
        image_in_region=estimate.image_in_region(contract.image.reference.repository, settings.region),
    )


def baseline_inputs(settings: StackSettings) -> estimate.StartupInputs:
    """The estimate's inputs of this stack with the pod as it was before the mechanisms (:data:`kimi_k3.weights.estimate.TODAYS_MECHANISMS`)."""
    return dataclasses.replace(stack_facts(settings), **estimate.TODAYS_MECHANISMS)  # type: ignore[arg-type]  # fields of StartupInputs


def startup_inputs(settings: StackSettings) -> estimate.StartupInputs:
    """The estimate's inputs with the mechanisms this stack declares.

    S3 weights use the node-side sync (CRT target bandwidth from the catalog, verification overlapping
    the transfer, half the init container's CPUs hashing, the node's memory keeping the files in the
    page cache); Hugging Face weights keep the snapshot download. Every engine reads through the page
    cache (``FASTSAFETENSORS_ODIRECT=0``, or vLLM's mmap loader), keeps vLLM's startup plan in its
    cache root and captures the CUDA graph sizes of its profile's maximum batch. The drain is the
    serving front's: a re-created pod's clock starts when the old engine has exited.
    """
    t = settings.time_to_serve
    contract = settings.serving.contract
    weights = contract.weights
    s3 = weights.source == "s3"
    verify = ("overlapped" if s3 else "sequential") if weights.sha256_manifest else "none"
    sync_cpus = SIDECAR_SYNC_CPUS if t.sync_sidecar else node_sync.init_cpus(settings.instance, 8)
    workers = node_sync.verify_workers(sync_cpus) if s3 else 32
    drain = settings.serving.front.drain  # the serving front's stop sequence, as the pods get it
    return dataclasses.replace(
        stack_facts(settings),
        crt_target_bandwidth=s3,
        verify=verify,
        hasher=hasher_of(t.verify_hasher) if s3 else "sha256sum",
        verify_workers=workers,
        compile_cache=t.compile_cache_s3_uri is not None,
        node_local_weights=t.node_local_weights,
        image_prepull=t.image_prepull,
        fast_image_pull=t.fast_image_pull,
        buffered_load=True,
        sync_page_cache=s3,
        startup_plan="VLLM_ENABLE_STARTUP_PLAN" in contract.vllm_env(),
        capture_sizes=len(contract.engine.cudagraph_capture_sizes),
        sidecar_sync=t.sync_sidecar,
        pipelined_load=t.pipelined_load,
        engine_snapshot=t.engine_snapshot,
        peer_transfer=t.peer_transfer,
        engine_snapshot_s3=engine_snapshot_s3(settings),
        dump_beside_peer=t.engine_snapshot and engine_snapshot.dump_waits_for_peer(s3_copy=engine_snapshot_s3(settings), replicas=max(1, settings.serving.replicas)),
        drain_s=(drain.engine_pre_stop_s, min(drain.engine_pre_stop_s + drain.drain_s, drain.grace_s)),
    )


def estimate_lines(settings: StackSettings, block_hours: float | None) -> tuple[list[str], list[str]]:
    """``(lines, warnings)``: the time-to-first-token and cost lines, and the warnings (ready timeout, block window,
    Hugging Face direct), each led by the config key it concerns."""
    x = startup_inputs(settings)
    warnings = estimate.startup_warnings(x, settings.serving.contract.engine.ready_timeout_s, block_hours)
    return estimate.format_estimates(x), [f"{_warning_key(topic)}: {text}" for topic, text in warnings]


def _warning_key(topic: str) -> str:
    """The config key an estimate warning concerns: its topic is an input of ``startup_warnings`` or a field of ``StartupInputs``."""
    return seam.config_key("startup_warnings", topic) if seam.key_name("startup_warnings", topic) else seam.config_key("StartupInputs", topic)


def user_data_parts(settings: StackSettings) -> tuple[tuple[str, str], ...]:
    """Extra MIME parts of the GPU nodes' user data."""
    t = settings.time_to_serve
    parts: list[tuple[str, str]] = []
    if t.fast_image_pull:
        parts.append(("application/node.eks.aws", image_pull.nodeadm_fast_image_pull()))
    if t.node_local_weights:
        parts.append(("text/x-shellscript", node_local.boot_part()))
    return tuple(parts)


def serving_startup(settings: StackSettings, *, multi_node: bool) -> ServingStartup:
    """The serving pod's wiring. A LeaderWorkerSet gets the node-side sync only (no sidecar: its leader pod is built apart)."""
    t = settings.time_to_serve
    if multi_node:
        return ServingStartup(verify_hasher=t.verify_hasher, warmup=False, ami_release_version=settings.capacity.ami_release_version)
    return ServingStartup(
        verify_hasher=t.verify_hasher,
        node_local_storage_class=STORAGE_CLASS if t.node_local_weights else None,
        compile_cache_s3_uri=t.compile_cache_s3_uri,
        ami_release_version=settings.capacity.ami_release_version,
        warmup=True,
        sync_sidecar=t.sync_sidecar,
        pipelined_load=t.pipelined_load,
        engine_snapshot=t.engine_snapshot,
        peer_transfer=t.peer_transfer,
        engine_snapshot_s3=engine_snapshot_s3(settings),
    )


def args_from_settings(settings: StackSettings, *, cluster_name: pulumi.Input[str], node_role_name: pulumi.Input[str] | None, hugging_face_token: pulumi.Input[str] | None,
                       tags: Mapping[str, str] | None = None) -> TimeToServeArgs:
    """The component's args for a stack."""
    t = settings.time_to_serve
    contract = settings.serving.contract
    return TimeToServeArgs(
        region=settings.region, cluster_name=cluster_name, engine_image=contract.image.image, staging_image=t.staging_image, instance_type=settings.capacity.instance_type,
        model_id=contract.weights.model_id, revision=contract.weights.revision, weights_s3_uri=contract.weights.s3_location, sha256_manifest=contract.weights.sha256_manifest,
        bucket_name=t.bucket_name, kms_key_arn=settings.deployment.weights_kms_key_arn, staging_job=t.staging_job, allow_floating_tag=not settings.production,
        hugging_face_token=hugging_face_token, node_local_weights=t.node_local_weights, node_cleanup_image=t.node_cleanup_image, image_prepull=t.image_prepull,
        pull_through_secret_arn=t.pull_through_secret_arn, pull_through_prefix=t.pull_through_prefix, node_role_name=node_role_name, tags=dict(tags or {}),
        snapshot_agent_image=t.snapshot_agent_image, gpus=settings.instance.gpus,
        engine_snapshot_s3_uri=engine_snapshot.s3_copy_uri(t.compile_cache_s3_uri.uri) if engine_snapshot_s3(settings) and t.compile_cache_s3_uri else None,
    )


__all__ = [
    "args_from_settings",
    "engine_snapshot_s3",
    "estimate_lines",
    "serving_startup",
    "startup_inputs",
    "user_data_parts",
]
