"""The ``Time to serve`` keys: weights staging, node-local weights, compile caches and image pull (the rules live in :mod:`kimi_k3.weights`).

A section of :mod:`kimi_k3.stack.settings` (the only reader of stack config).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from kimi_k3.core.s3 import S3Prefix
from kimi_k3.errors import SettingsError, UserError
from kimi_k3.serving.contracts import ContractError, ImageContract
from kimi_k3.stack import seam
from kimi_k3.stack.settings.capacity import CapacitySettings
from kimi_k3.stack.settings.reader import Reader, full_key, one_of
from kimi_k3.stack.settings.serving import ServingSettings


@dataclass(frozen=True)
class TimeToServeSettings:
    """The time-to-serve mechanisms of docs/weights.md (the ``Time to serve`` keys); every one off by default."""

    staging_job: bool = False
    """Declare the in-region ``WeightsStagingJob`` (``weightsStagingJob``)."""
    staging_image: str | None = None
    """Image of the staging Job (``weightsStagingImage``); ``None``: the serving image."""
    bucket_name: str | None = None
    """Declare a ``WeightsBucket`` of that name (``weightsBucketName``)."""
    compile_cache_s3_uri: S3Prefix | None = None
    """``s3://bucket/prefix/`` of the compile/JIT caches (``compileCacheS3Uri``), parsed once, here; ``None``: off."""
    node_local_weights: bool = False
    """StatefulSet + node-local volume instead of the ``emptyDir`` (``nodeLocalWeights``)."""
    sync_sidecar: bool = False
    """The node-side sync as a native sidecar, the engine loading each shard once verified (``weightsSyncSidecar``)."""
    pipelined_load: bool = False
    """The engine starts beside the sync sidecar and its loader reads each shard once verified (``pipelinedWeightsLoad``)."""
    engine_snapshot: bool = False
    """Restore instead of rebuild: the snapshot agent and the engine's restore-or-cold wrapper (``engineSnapshot``)."""
    peer_transfer: bool = False
    """A new pod's weights from a serving peer over EFA with ModelExpress (``peerWeightsTransfer``)."""
    snapshot_agent_image: str | None = None
    """Image of the snapshot agent (``engineSnapshotAgentImage``); set when ``engine_snapshot`` is."""
    node_cleanup_image: str = "registry.k8s.io/sig-storage/local-volume-node-cleanup:v2.9.0"
    """Image of the node-cleanup controller (``nodeCleanupImage``)."""
    image_prepull: bool = False
    """The engine image pre-pull DaemonSet (``imagePrePull``)."""
    fast_image_pull: bool = False
    """nodeadm FastImagePull on the GPU nodes (``fastImagePull``)."""
    pull_through_secret_arn: str | None = None
    """Docker Hub credentials of the ECR pull-through cache rule (``dockerHubPullThroughSecretArn``); ``None``: no rule."""
    pull_through_upstream_image: str | None = None
    """The Docker Hub ``servingImage`` as configured, when the contract's image was rewritten to the pull-through cache."""
    pull_through_prefix: str = "docker-hub"
    """ECR repository prefix of the pull-through cache rule (``ecrPullThroughPrefix``; default ``<project>-<stack>-docker-hub``)."""
    verify_hasher: str = "auto"
    """Hasher of the node-side sha256 check (``weightsVerifyHasher``)."""


def _pipelined_load(r: Reader, *, sidecar: bool, manifest: str | None) -> bool:
    """``pipelinedWeightsLoad``: needs the sync sidecar (the engine starts beside it) and a sha256 manifest (the per-shard markers)."""
    pipelined = bool(r.get("pipelinedWeightsLoad"))
    if pipelined and not sidecar:
        raise SettingsError(full_key("pipelinedWeightsLoad"), True, f"needs {full_key('weightsSyncSidecar')} true: the engine loads the shards the sync sidecar verifies beside it")
    if pipelined and not manifest:
        raise SettingsError(full_key("pipelinedWeightsLoad"), True, f"needs {full_key('weightsSha256Manifest')}: the loader waits for the sync's per-shard markers, named by the manifest's lines")
    return pipelined


def _engine_snapshot(r: Reader, *, instance_type: str, node_local: bool, image: str, pipeline_parallel_size: int, prod: bool) -> tuple[bool, str | None]:
    """``engineSnapshot`` and ``engineSnapshotAgentImage``: the restore's stack requirements (``engine_snapshot.stack_problems``)
    and the agent's image, required with the key and pinned by digest in prod."""
    snapshot = bool(r.get("engineSnapshot"))
    agent_image = r.get("engineSnapshotAgentImage") or None
    if not snapshot:
        return False, None
    from kimi_k3.weights import engine_snapshot  # the weights components (Pulumi SDKs) load when a stack is validated, not when settings are imported

    problems = engine_snapshot.stack_problems(
        instance_type=instance_type, node_local_weights=node_local, image=image, pipeline_parallel_size=pipeline_parallel_size, warmup=True,
    )
    if problems:
        raise SettingsError(full_key("engineSnapshot"), True, problems[0][1])
    if agent_image is None:
        raise SettingsError(full_key("engineSnapshotAgentImage"), "", f"required with {full_key('engineSnapshot')}: an image with CRIU 4.0+ and its CUDA plugin, cuda-checkpoint, nsenter and python3")
    if not _image_like(agent_image):
        raise SettingsError(full_key("engineSnapshotAgentImage"), agent_image, "expected repo:tag or repo@sha256:<64 hex>")
    if prod and "@sha256:" not in agent_image:
        raise SettingsError(full_key("engineSnapshotAgentImage"), agent_image, "prod requires an image pinned by digest (repo@sha256:<64 hex>): the agent runs privileged on the GPU nodes")
    return True, agent_image


def _peer_transfer(r: Reader, *, capacity: CapacitySettings, serving: ServingSettings, node_local: bool, sidecar: bool, pipelined: bool, snapshot: bool) -> bool:
    """``peerWeightsTransfer``: the peer path's stack requirements (``peer_transfer.stack_problems``), the first named with its key."""
    if not r.get("peerWeightsTransfer"):
        return False
    from kimi_k3.core import catalog  # the catalog's EFA interfaces of the GPU instance type
    from kimi_k3.weights import peer_transfer  # the weights components load when a stack is validated, not when settings are imported

    contract = serving.contract
    instance = catalog.INSTANCE_TYPES.get(capacity.instance_type)
    problems = peer_transfer.stack_problems(
        replicas=serving.replicas, pipeline_parallel_size=contract.engine.pipeline_parallel_size, node_local_weights=node_local, sync_sidecar=sidecar,
        image=contract.image.image, efa_enabled=bool(capacity.efa_enabled), efa_interfaces=instance.efa_interfaces if instance else 0, pipelined_load=pipelined,
        sha256_manifest=contract.weights.sha256_manifest, engine_snapshot=snapshot,
    )
    if problems:
        field, why = problems[0]
        raise SettingsError(full_key("peerWeightsTransfer"), True, f"{why} ({seam.config_key('peer_stack_problems', field)})")
    return True


def _image_like(ref: str) -> bool:
    """``ref`` parses as an image reference with a tag or a digest (the serving contract's parser)."""
    try:
        ImageContract.parse(ref)
    except ContractError:
        return False
    return True


_SECRET_ARN = re.compile(r"^arn:aws[\w-]*:secretsmanager:([a-z0-9-]+):(\d{12}):secret:.+$")


def validate_time_to_serve(
    r: Reader, prod: bool, region: str, capacity: CapacitySettings, serving: ServingSettings, warnings: list[str], *, default_prefix: str = "docker-hub",
    system_disk_gib: int = 50,
) -> tuple[TimeToServeSettings, ServingSettings]:
    """The ``Time to serve`` keys. The rules live in ``kimi_k3.weights`` (staging Job, bucket, compile cache key,
    node sync, FastImagePull vs the AMI release, the pull-through cache rule); this layer names the key.

    Returns the settings and the serving settings, whose contract image is rewritten to the ECR pull-through
    cache when ``dockerHubPullThroughSecretArn`` is set.
    """
    from kimi_k3.weights import node_sync  # the weights components (Pulumi SDKs) load when a stack is validated, not when settings are imported

    hasher = one_of("weightsVerifyHasher", r.get("weightsVerifyHasher"), node_sync.HASHERS)  # the rule's home: ServingStartup.verify_hasher
    staging, staging_image = _staging_job(r, prod, serving, system_disk_gib)
    cache = _compile_cache(r, capacity, serving)
    bucket_name = _bucket(r, serving, cache)
    node_local, sidecar, cleanup_image = _node_local(r, prod, serving)
    contract = serving.contract
    pipelined = _pipelined_load(r, sidecar=sidecar, manifest=contract.weights.sha256_manifest)
    snapshot, agent_image = _engine_snapshot(r, instance_type=capacity.instance_type, node_local=bool(node_local), image=contract.image.image,
                                             pipeline_parallel_size=contract.engine.pipeline_parallel_size, prod=prod)
    peer = _peer_transfer(r, capacity=capacity, serving=serving, node_local=bool(node_local), sidecar=bool(sidecar), pipelined=pipelined, snapshot=snapshot)
    if snapshot and sidecar and cache is not None and bucket_name != cache.bucket:
        warnings.append(
            f"{full_key('engineSnapshot')}: the snapshots' S3 copies under {cache.uri}engine-snapshots/ do not expire: {full_key('weightsBucketName')} "
            "does not declare the cache's bucket, so its lifecycle rule is not declared here; add an expiration rule on that prefix where the bucket is managed"
        )
    fast = _fast_image_pull(r, capacity, warnings)
    secret_arn, prefix, upstream, serving = _pull_through(r, region, serving, warnings, default_prefix)
    settings = TimeToServeSettings(
        staging_job=staging, staging_image=staging_image if staging else None, bucket_name=bucket_name, compile_cache_s3_uri=cache, node_local_weights=node_local, node_cleanup_image=cleanup_image,
        sync_sidecar=sidecar, pipelined_load=pipelined, engine_snapshot=snapshot, snapshot_agent_image=agent_image, peer_transfer=peer,
        image_prepull=r.get("imagePrePull"), fast_image_pull=fast, pull_through_secret_arn=secret_arn,
        pull_through_upstream_image=upstream, pull_through_prefix=prefix, verify_hasher=hasher,
    )
    return settings, serving


def _staging_job(r: Reader, prod: bool, serving: ServingSettings, system_disk_gib: int) -> tuple[bool, str | None]:
    """``weightsStagingJob`` and ``weightsStagingImage`` (rules: :mod:`kimi_k3.weights.staging_job`, :mod:`kimi_k3.weights.system_disk`)."""
    from kimi_k3.weights import staging_job, system_disk  # the weights components (Pulumi SDKs) load when a stack is validated

    contract = serving.contract
    weights = contract.weights
    staging = r.get("weightsStagingJob")
    staging_image = r.get("weightsStagingImage") or None
    if not staging:
        return staging, staging_image
    if weights.source != "s3" or weights.s3_uri is None:
        raise SettingsError(full_key("weightsStagingJob"), True, f"needs {full_key('weightsSource')} s3 and {full_key('weightsS3Uri')}: the Job stages the revision into that prefix")
    if staging_image is not None:
        if staging_job.image_problem(staging_image, allow_floating_tag=True):  # the rule's home: WeightsStagingJobArgs.image
            raise SettingsError(full_key("weightsStagingImage"), staging_image, "expected repo:tag or repo@sha256:<64 hex>")
        if prod and "@sha256:" not in staging_image:
            raise SettingsError(full_key("weightsStagingImage"), staging_image, "prod requires an image pinned by digest: build images/weights-staging, push it to ECR and use repo@sha256:<64 hex>")
    try:
        staging_job.check_inputs(revision=weights.revision, image=staging_image or contract.image.image, allow_floating_tag=not prod)
    except UserError as err:
        raise SettingsError(full_key("weightsStagingJob"), True, f"accepted only when the staging Job can run: {err}") from None
    verdict = system_disk.check(system_disk_gib, system_disk.STAGING_IMAGE if staging_image else system_disk.ENGINE_IMAGE)
    if not verdict.fits:
        fix = "" if staging_image else f", or set {full_key('weightsStagingImage')} to the small image (images/weights-staging)"
        raise SettingsError(
            full_key("systemNodeDiskGiB"), system_disk_gib,
            f"the staging Job ({full_key('weightsStagingJob')}) runs on the system nodes: {system_disk.refusal(verdict)}{fix}",
        )
    return staging, staging_image


def _compile_cache(r: Reader, capacity: CapacitySettings, serving: ServingSettings) -> S3Prefix | None:
    """``compileCacheS3Uri``, parsed once into the :class:`~kimi_k3.core.s3.S3Prefix` the layers below take (rules: the prefix's
    parser, worded by :func:`kimi_k3.weights.serving_pod.cache_uri_problem`; the key's digest pin)."""
    from kimi_k3.weights import WeightsError, compile_cache, serving_pod  # the weights components (Pulumi SDKs) load when a stack is validated

    contract = serving.contract
    weights = contract.weights
    cache_uri = r.get("compileCacheS3Uri") or None
    if cache_uri is None:
        return None
    try:
        cache = S3Prefix.parse(cache_uri)  # the URI's one parse: ServingStartup and the serving pods' role take this S3Prefix
    except ValueError:
        raise SettingsError(full_key("compileCacheS3Uri"), cache_uri, serving_pod.cache_uri_problem(cache_uri) or "") from None  # its wording's home: ServingStartup.compile_cache_s3_uri
    if weights.source != "s3":
        raise SettingsError(full_key("compileCacheS3Uri"), cache_uri, f"only with {full_key('weightsSource')} s3: the serving pods' Pod Identity role (which reads and writes the caches) exists for S3 weights")
    if contract.engine.pipeline_parallel_size != 1:
        raise SettingsError(full_key("compileCacheS3Uri"), cache_uri, f"single-node replicas only ({full_key('pipelineParallelSize')} 1): each rank of a LeaderWorkerSet compiles its own cache")
    if weights.s3_uri and (cache.uri.startswith(weights.s3_uri) or weights.s3_uri.startswith(cache.uri)):
        raise SettingsError(full_key("compileCacheS3Uri"), cache_uri, f"a prefix apart from {full_key('weightsS3Uri')} {weights.s3_uri}: the serving pods write caches there, and must not write weights")
    try:
        compile_cache.cache_key(compile_cache.CacheKeyInputs(
            image=contract.image.image, model_revision=weights.revision, engine_args=(), engine_env={}, gpu="gpu", ami_release_version=capacity.ami_release_version,
        ))
    except WeightsError:
        raise SettingsError(
            full_key("compileCacheS3Uri"), cache_uri,
            f"accepted only with {full_key('servingImage')} pinned by digest (repo@sha256:<64 hex>): caches are keyed on the exact build, and a tag moves",
        ) from None
    return cache


def _bucket(r: Reader, serving: ServingSettings, cache: S3Prefix | None) -> str | None:
    """``weightsBucketName`` (rule: :func:`kimi_k3.weights.bucket.validate`), which must be a bucket the stack names."""
    from kimi_k3.weights import bucket  # the weights components (Pulumi SDKs) load when a stack is validated

    bucket_name = r.get("weightsBucketName") or None
    if bucket_name is None:
        return None
    try:
        bucket.validate(bucket.WeightsBucketArgs(bucket_name=bucket_name))  # the rule's home: WeightsBucketArgs.bucket_name
    except UserError as err:
        raise SettingsError(full_key("weightsBucketName"), bucket_name, f"expected an S3 bucket name ({err})") from None
    buckets = [b for b in (serving.contract.weights.s3_bucket, cache.bucket if cache else None) if b]
    if bucket_name not in buckets:
        named = " or ".join(dict.fromkeys(buckets)) or f"none yet: set {full_key('weightsS3Uri')} or {full_key('compileCacheS3Uri')}"
        raise SettingsError(full_key("weightsBucketName"), bucket_name, f"the bucket {full_key('weightsS3Uri')} or {full_key('compileCacheS3Uri')} names ({named})")
    return bucket_name


def _node_local(r: Reader, prod: bool, serving: ServingSettings) -> tuple[bool, bool, str]:
    """``nodeLocalWeights``, ``weightsSyncSidecar`` and ``nodeCleanupImage`` (rule: :func:`kimi_k3.weights.node_local.cleanup_image_problem`;
    prod's digest pin is the stack's environment)."""
    from kimi_k3.weights import node_local as node_local_rules  # the weights components (Pulumi SDKs) load when a stack is validated

    contract = serving.contract
    single_node_s3 = contract.weights.source == "s3" and contract.engine.pipeline_parallel_size == 1
    node_local = r.get("nodeLocalWeights")
    if node_local:
        if contract.weights.source != "s3":
            raise SettingsError(full_key("nodeLocalWeights"), True, f"needs {full_key('weightsSource')} s3: the node-side sync keeps its verified marker and one directory per revision on the node's volume")
        if contract.engine.pipeline_parallel_size != 1:
            raise SettingsError(full_key("nodeLocalWeights"), True, f"single-node replicas only ({full_key('pipelineParallelSize')} 1): the LeaderWorkerSet path keeps its weights in an emptyDir")
    sidecar = r.get("weightsSyncSidecar")
    if sidecar and not single_node_s3:
        raise SettingsError(full_key("weightsSyncSidecar"), True, f"needs {full_key('weightsSource')} s3 and single-node replicas ({full_key('pipelineParallelSize')} 1): the sidecar is the node-side sync of one pod")
    cleanup_image = r.get("nodeCleanupImage")
    problem = node_local_rules.cleanup_image_problem(cleanup_image)  # the rule's home: TimeToServeArgs.node_cleanup_image
    if problem:
        raise SettingsError(full_key("nodeCleanupImage"), cleanup_image, problem)
    if node_local and prod and not ImageContract.parse(cleanup_image).pinned:
        raise SettingsError(full_key("nodeCleanupImage"), cleanup_image, "prod requires an image pinned by digest: mirror it (e.g. into ECR) and use repo@sha256:<64 hex>")
    return node_local, sidecar, cleanup_image


def _fast_image_pull(r: Reader, capacity: CapacitySettings, warnings: list[str]) -> bool:
    """``fastImagePull`` against ``gpuAmiReleaseVersion`` (rule: :func:`kimi_k3.weights.image_pull.check_fast_image_pull`)."""
    from kimi_k3.weights import image_pull  # the weights components (Pulumi SDKs) load when a stack is validated

    fast = r.get("fastImagePull")
    try:
        warnings.extend(f"{full_key('gpuAmiReleaseVersion')}: {w}" for w in image_pull.check_fast_image_pull(capacity.ami_release_version, fast))
    except UserError as err:
        reason = re.sub(r"^FastImagePull is not accepted on AMI release \S+: ", "", str(err))  # the key and release are named here
        raise SettingsError(
            full_key("fastImagePull"), True, f"with {full_key('gpuAmiReleaseVersion')} {capacity.ami_release_version or '(unset)'}: {reason}",
        ) from None
    return fast


def _pull_through(
    r: Reader, region: str, serving: ServingSettings, warnings: list[str], default_prefix: str,
) -> tuple[str | None, str, str | None, ServingSettings]:
    """``dockerHubPullThroughSecretArn`` and ``ecrPullThroughPrefix`` (rules: :mod:`kimi_k3.weights.image_pull`): the secret, the
    prefix, the Docker Hub image as configured when it was rewritten to the cache, and the serving settings (rewritten)."""
    from kimi_k3.weights import image_pull  # the weights components (Pulumi SDKs) load when a stack is validated
    from kimi_k3.weights.estimate import image_in_region  # the weights components (Pulumi SDKs) load when a stack is validated

    secret_arn = r.get("dockerHubPullThroughSecretArn") or None
    prefix = r.get("ecrPullThroughPrefix") or default_prefix
    if (secret_arn is not None or r.get("ecrPullThroughPrefix")) and not image_pull.valid_prefix(prefix):  # the rule's home: TimeToServeArgs.pull_through_prefix
        where = "" if r.get("ecrPullThroughPrefix") else f" (the default <project>-<stack>-docker-hub is too long here: set {full_key('ecrPullThroughPrefix')})"
        raise SettingsError(full_key("ecrPullThroughPrefix"), prefix, f"{image_pull.PREFIX_ACCEPTED}{where}")
    if secret_arn is None:
        return None, prefix, None, serving
    try:
        image_pull.pull_through_cache_rule_args(secret_arn, prefix)
    except UserError as err:
        raise SettingsError(full_key("dockerHubPullThroughSecretArn"), secret_arn, f"expected a Secrets Manager secret ARN ({err})") from None
    match = _SECRET_ARN.match(secret_arn)
    assert match is not None  # pull_through_cache_rule_args checked the shape
    if match.group(1) != region:
        raise SettingsError(full_key("dockerHubPullThroughSecretArn"), secret_arn, f"a secret in the stack's region {region} (aws:region): ECR reads the credentials of a pull-through cache rule in the rule's own region")
    contract = serving.contract
    try:
        rewritten = image_pull.through_cache(contract.image.image, match.group(2), region, prefix)
    except UserError:
        if not image_in_region(contract.image.reference.repository, region):
            warnings.append(
                f"{full_key('dockerHubPullThroughSecretArn')}: {full_key('servingImage')} {contract.image.image} is neither a Docker Hub image nor in ECR in {region}, "
                "so it is pulled as it is, from outside the region; the pull-through cache rule serves Docker Hub images only"
            )
        return secret_arn, prefix, None, serving
    contract = dataclasses.replace(contract, image=ImageContract.parse(rewritten))
    return secret_arn, prefix, serving.contract.image.image, dataclasses.replace(serving, contract=contract)
