"""The three serving contracts (image, weights, API) plus the engine profile.

Plain, validated, frozen dataclasses with no Pulumi in them: the serving
components render Kubernetes objects from a :class:`ServingContract`, and the
composition (``platform.py``) builds one from the stack settings. A contract that
cannot work raises :class:`~kimi_k3.errors.UserError` when it is built, before
any resource is declared.

How the model reaches vLLM (``--model``):

* ``source="s3"``: an init container copies the exact S3 prefix onto the node's
  NVMe and vLLM loads the stable local path ``mount_path`` (``/models/kimi-k3``);
  nothing talks to Hugging Face (``HF_HUB_OFFLINE=1``).
* ``source="huggingface"``: an init container downloads the pinned revision into
  the Hugging Face cache at ``mount_path`` (``HF_HUB_CACHE``), and vLLM is started
  with the model id, ``--revision <sha>`` and ``--download-dir <mount_path>`` in
  offline mode, so it resolves exactly that snapshot and never fetches another one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from kimi_k3.cluster.image_reference import IMAGE_RE  # the one grammar of an image reference (its home: kimi_k3.cluster.image_reference)
from kimi_k3.core import catalog
from kimi_k3.core.args_check import checked_args, checked_function
from kimi_k3.core.formats import ABSOLUTE_PATH, GIT_REVISION
from kimi_k3.core.s3 import S3_PREFIX_URI, S3Prefix
from kimi_k3.errors import UserError
from kimi_k3.serving.engine_flags import extra_args_problem, extra_env_problem, override_tuning
from kimi_k3.serving.engine_profiles import (
    DCP_COMM_BACKEND,
    DCP_SIZE,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    cudagraph_capture_sizes,
    flag_value,
)

WEIGHTS_SOURCES = ("huggingface", "s3")
"""Where the weights come from."""
EXPOSURES = ("cluster", "internal", "public")
"""How clients reach the API: ``cluster`` (ClusterIP: port-forward / in-cluster clients), ``internal``
(internal NLB), ``public`` (internet-facing NLB restricted to listed CIDRs)."""
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
"""``--kv-cache-dtype`` choices of vLLM (``EngineArgs.add_cli_args``)."""
MEDIA_POLICIES = ("text-only", "allowlist")
"""What requests may carry besides text: ``text-only`` (``--language-model-only``: the vision encoder is
skipped and media inputs are refused) or ``allowlist`` (images and video, fetched only from
:attr:`ApiContract.media_domains`, or inline ``data:`` URLs)."""
HOSTNAME_RE = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
"""A fully qualified host name (lower case). vLLM compares a media URL's host with the list exactly
(``vllm/multimodal/media/connector.py``, ``_assert_url_in_allowed_media_domains``): no wildcards, no ports."""

MODEL_ID_RE = re.compile(r"^[\w.-]+/[\w.-]+$")
"""A Hugging Face model id, ``org/name``."""
S3_URI_RE = S3_PREFIX_URI
"""``s3://bucket/prefix/``: a trailing slash and no wildcard, so IAM can be scoped to exactly the prefix (:mod:`kimi_k3.core.s3`, the one regex)."""

_NAME_RE = re.compile(r"^[\w.:-]+$")


class ContractError(UserError):
    """A contract field that cannot work: which field, the bad value and what is accepted.

    ``field`` is the dotted path inside :class:`ServingContract` (``image``,
    ``weights.revision``, ``engine.extra_args`` …), so the settings layer can name the
    config key that set it.
    """

    def __init__(self, what: str, field: str, value: object, accepted: str, *, message: str | None = None) -> None:
        """``what`` names the check that failed (``image contract`` …) and opens the message, ``field`` is the dotted field path, ``value``
        the refused value, ``accepted`` what is accepted; ``message`` replaces the whole composed text."""
        self.field = field
        self.value = value
        self.accepted = accepted
        super().__init__(message or f"{what}: {field.rsplit('.', 1)[-1]} {value!r} is not accepted; {accepted}")


@dataclass(frozen=True)
class ImageReference:
    """A container image reference split into repository, tag and digest."""

    repository: str
    """Repository path, led by its registry host (and port) when it names one, e.g. ``vllm/vllm-openai`` or an ECR repository URI."""
    tag: str | None
    """Tag after the ``:``; ``None`` when only a digest is given."""
    digest: str | None
    """``sha256:`` and 64 hex digits after the ``@``; ``None`` for a floating tag."""

    @property
    def pinned(self) -> bool:
        """True when the image is pinned by digest (``repo@sha256:…``)."""
        return self.digest is not None

    def __str__(self) -> str:
        ref = self.repository
        if self.tag:
            ref += f":{self.tag}"
        if self.digest:
            ref += f"@{self.digest}"
        return ref


def parse_image_reference(ref: str) -> ImageReference | None:
    """Parse ``repo[:tag][@sha256:…]``; ``None`` when it is not a reference with a tag or a digest."""
    match = IMAGE_RE.fullmatch(ref) if isinstance(ref, str) else None
    if not match or not (match["tag"] or match["digest"]):
        return None
    return ImageReference(match["repository"], match["tag"], match["digest"])


# --- image ----------------------------------------------------------------------


@checked_args
@dataclass(frozen=True)
class ImageContract:
    """The engine image. Pinned by digest in prod (enforced by the settings)."""

    reference: ImageReference
    """Parsed image reference (see :func:`parse_image_reference`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.reference, ImageReference) or not (self.reference.tag or self.reference.digest):
            raise ContractError("image contract", "image", self.reference, "expected an image reference with a tag or a digest")

    @classmethod
    def parse(cls, ref: str) -> ImageContract:
        """Build the contract from ``repo[:tag][@sha256:…]``; raises :class:`ContractError` if malformed."""
        parsed = parse_image_reference(ref)
        if parsed is None:
            raise ContractError("image contract", "image", ref, "expected repo@sha256:<64 hex> (or repo:tag outside prod)")
        return cls(parsed)

    @property
    def image(self) -> str:
        """The reference as written in the pod spec."""
        return str(self.reference)

    @property
    def digest(self) -> str | None:
        """``sha256:…`` when pinned by digest, else ``None``."""
        return self.reference.digest

    @property
    def pinned(self) -> bool:
        """True when pinned by digest."""
        return self.reference.pinned

    @property
    def pull_policy(self) -> str:
        """``IfNotPresent`` for a digest (immutable), ``Always`` for a floating tag."""
        return "IfNotPresent" if self.pinned else "Always"


# --- weights --------------------------------------------------------------------


@checked_args
@dataclass(frozen=True, kw_only=True)
class WeightsContract:
    """Which model weights, at which exact revision, from where, mounted where."""

    model_id: str = catalog.KIMI_K3.model_id
    """Hugging Face model id."""
    revision: str
    """40-hex commit SHA of the model repository (a branch name moves; refused)."""
    source: str = "huggingface"
    """``huggingface`` (download the pinned revision) or ``s3`` (copy a pre-staged prefix)."""
    s3_uri: str | None = None
    """``s3://bucket/prefix/`` holding the files of that revision; only with ``source="s3"``."""
    mount_path: str = catalog.MODEL_MOUNT_PATH
    """Stable directory of the weights inside the server container."""
    expected_size_gb: int = int(catalog.KIMI_K3.weights_gb)
    """Size of the checkpoint on disk in GB; sizes the NVMe cache volume."""
    sha256_manifest: str | None = None
    """``sha256sum`` manifest (path relative to the weights directory) checked after staging."""

    def __post_init__(self) -> None:
        if not isinstance(self.model_id, str) or not MODEL_ID_RE.fullmatch(self.model_id):
            raise ContractError("weights contract", "weights.model_id", self.model_id, "expected a Hugging Face model id org/name such as moonshotai/Kimi-K3")
        if not isinstance(self.revision, str) or not GIT_REVISION.fullmatch(self.revision):
            raise ContractError("weights contract", "weights.revision", self.revision, f"expected the 40-hex commit SHA of {self.model_id} (a branch such as 'main' moves)")
        if self.source not in WEIGHTS_SOURCES:
            raise ContractError("weights contract", "weights.source", self.source, f"accepted: {', '.join(WEIGHTS_SOURCES)}")
        if self.source == "s3":
            # '*' is legal in an S3 key but would widen the IAM resource scoped to the prefix (S3Prefix refuses it).
            try:
                location: S3Prefix | None = S3Prefix.parse(self.s3_uri)
            except ValueError:
                raise ContractError("weights contract", "weights.s3_uri", self.s3_uri, "required when weights.source is s3: s3://bucket/prefix/ in the stack's region (trailing slash, no wildcards)") from None
        elif self.s3_uri is not None:
            raise ContractError("weights contract", "weights.s3_uri", self.s3_uri, "it is only used when weights.source is s3")
        else:
            location = None
        object.__setattr__(self, "_location", location)  # the URI's one parse: every layer below takes this S3Prefix (not a field: plans and keys see s3_uri only)
        if not ABSOLUTE_PATH.match(self.mount_path or "") or self.mount_path.rstrip("/") == "" or ".." in self.mount_path.split("/"):
            raise ContractError("weights contract", "weights.mount_path", self.mount_path, "expected an absolute directory such as /models/kimi-k3")
        if isinstance(self.expected_size_gb, bool) or not isinstance(self.expected_size_gb, int) or not 1 <= self.expected_size_gb <= 20_000:
            raise ContractError("weights contract", "weights.expected_size_gb", self.expected_size_gb, "expected a whole number of GB between 1 and 20000")
        manifest = self.sha256_manifest
        if manifest is not None and (not manifest or manifest.startswith("/") or ".." in manifest.split("/") or not re.fullmatch(r"[\w./-]+", manifest)):
            raise ContractError("weights contract", "weights.sha256_manifest", manifest, "expected a path relative to the weights directory, e.g. SHA256SUMS")

    @property
    def s3_location(self) -> S3Prefix | None:
        """:attr:`s3_uri` as the typed :class:`~kimi_k3.core.s3.S3Prefix` every layer passes on (``None`` for Hugging Face),
        parsed once, when the contract was built."""
        location: S3Prefix | None = self.__dict__["_location"]
        return location

    @property
    def s3_bucket(self) -> str | None:
        """Bucket of :attr:`s3_uri` (``None`` for Hugging Face)."""
        location = self.s3_location
        return location.bucket if location else None

    @property
    def s3_prefix(self) -> str | None:
        """Key prefix of :attr:`s3_uri`, with its trailing slash (``None`` for Hugging Face)."""
        location = self.s3_location
        return location.prefix if location else None

    @property
    def hf_snapshot_dir(self) -> str:
        """Where the Hugging Face cache under :attr:`mount_path` keeps this revision's files."""
        org, name = self.model_id.split("/", 1)
        return f"{self.mount_path}/models--{org}--{name}/snapshots/{self.revision}"

    @property
    def weights_dir(self) -> str:
        """Directory holding the checkpoint files once staged (the manifest is relative to it)."""
        return self.mount_path if self.source == "s3" else self.hf_snapshot_dir


# --- API ------------------------------------------------------------------------


@checked_args
@dataclass(frozen=True)
class ApiContract:
    """What clients and probes rely on: OpenAI-compatible paths, port, model name, parsers."""

    port: int = catalog.API_PORT
    """Container port of the OpenAI-compatible server (also serves health and metrics)."""
    served_model_name: str = catalog.KIMI_K3.served_model_name
    """The ``model`` clients send; stable across engine and weight changes."""
    health_path: str = "/health"
    """Liveness/startup path (vLLM answers 200 once the engine is up; not behind the API key)."""
    models_path: str = "/v1/models"
    """Model list path (behind the API key); used by the readiness probe."""
    metrics_path: str = "/metrics"
    """Prometheus metrics path (not behind the API key)."""
    tool_call_parser: str | None = "kimi_k3"
    """vLLM tool-call parser; ``None`` turns tool calling off."""
    reasoning_parser: str | None = "kimi_k3"
    """vLLM reasoning parser; ``None`` turns reasoning output off."""
    media: str = "text-only"
    """One of :data:`MEDIA_POLICIES`. Kimi K3 is multimodal and vLLM fetches any media URL a request names
    unless told otherwise; the safe default serves text only."""
    media_domains: tuple[str, ...] = ()
    """With ``media="allowlist"``: the only hosts vLLM may fetch media from (``--allowed-media-domains``)."""

    def __post_init__(self) -> None:
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 1024 <= self.port <= 65535:
            raise ContractError("api contract", "api.port", self.port, "expected 1024-65535 (the server runs as non-root)")
        if not isinstance(self.served_model_name, str) or not _NAME_RE.match(self.served_model_name):
            raise ContractError("api contract", "api.served_model_name", self.served_model_name, "expected letters, digits, '.', '_', ':' or '-'")
        for field_name in ("health_path", "models_path", "metrics_path"):
            value = getattr(self, field_name)
            if not isinstance(value, str) or not ABSOLUTE_PATH.match(value):
                raise ContractError("api contract", f"api.{field_name}", value, "expected an absolute URL path such as /health")
        for field_name in ("tool_call_parser", "reasoning_parser"):
            value = getattr(self, field_name)
            if value is not None and (not isinstance(value, str) or not re.fullmatch(r"[\w-]+", value)):
                raise ContractError("api contract", f"api.{field_name}", value, "expected a vLLM parser name such as kimi_k3, or None")
        if self.media not in MEDIA_POLICIES:
            raise ContractError("api contract", "api.media", self.media, f"accepted: {', '.join(MEDIA_POLICIES)}")
        domains = self.media_domains
        if isinstance(domains, str) or not isinstance(domains, tuple):
            raise ContractError("api contract", "api.media_domains", domains, "expected a tuple of host names")
        for domain in domains:
            if not isinstance(domain, str) or not HOSTNAME_RE.fullmatch(domain):
                raise ContractError(
                    "api contract", "api.media_domains", domain,
                    "expected a host name such as images.example.com (lower case; no scheme, port, path or wildcard: vLLM compares the host exactly)",
                )
        if len(set(domains)) != len(domains):
            raise ContractError("api contract", "api.media_domains", list(domains), "each host once")
        if self.media == "allowlist" and not domains:
            raise ContractError(
                "api contract", "api.media_domains", [],
                "at least one host when api.media is allowlist: with an empty list vLLM fetches media from any host",
            )
        if self.media == "text-only" and domains:
            raise ContractError("api contract", "api.media_domains", list(domains), "they are only used when api.media is allowlist")


# --- engine ---------------------------------------------------------------------


@checked_args
@dataclass(frozen=True)
class EngineProfile:
    """vLLM engine sizing and behaviour for one replica."""

    tensor_parallel_size: int = 8
    """GPUs one pipeline stage shards the model over (all GPUs of a node)."""
    pipeline_parallel_size: int = 1
    """Pipeline stages, one per node when a replica spans nodes."""
    gpu_memory_utilization: float = 0.95
    """Fraction of GPU memory vLLM may use (weights + KV cache)."""
    max_model_len: int = 262_144
    """Longest context (prompt + output) in tokens."""
    kv_cache_dtype: str = "fp8"
    """KV cache data type."""
    extra_args: tuple[str, ...] = ()
    """Further vLLM flags, appended last (may not repeat a flag the contract sets)."""
    ready_timeout_s: int = catalog.ENGINE_READY_TIMEOUT_S
    """Seconds vLLM waits for the engine to load and warm up (``VLLM_ENGINE_READY_TIMEOUT_S``)."""
    load_format: str = "fastsafetensors"
    """Weight loader."""
    moe_backend: str = "auto"
    """MoE kernel backend."""
    tuning_args: tuple[str, ...] = ()
    """The engine profile's other flags (the recipe's, :mod:`kimi_k3.serving.engine_profiles`), flag then value;
    an ``extra_args`` item naming the same flag replaces the profile's."""
    env: tuple[tuple[str, str], ...] = ()
    """Further environment variables of the engine (the profile's, then the stack's), ``(NAME, value)``;
    the ones the contract sets are refused."""
    decode_context_parallel: bool = False
    """The recipe's decode context parallelism (``--decode-context-parallel-size 8 --dcp-comm-backend a2a``):
    single-node TP=8 with FP8 KV cache only."""
    profile_name: str = "custom"
    """Which engine profile these values come from (``blackwell/single_node_tp`` …), for summaries."""

    def __post_init__(self) -> None:
        for field_name, (low, high) in (
            ("tensor_parallel_size", (1, 64)),
            ("pipeline_parallel_size", catalog.PIPELINE_PARALLEL_RANGE),
            ("max_model_len", catalog.MAX_MODEL_LEN_RANGE),
            ("ready_timeout_s", catalog.ENGINE_READY_TIMEOUT_RANGE),
        ):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ContractError("engine profile", f"engine.{field_name}", value, f"accepted: {low} to {high}")
        util, (low_util, high_util) = self.gpu_memory_utilization, catalog.GPU_MEMORY_UTILIZATION_RANGE
        if isinstance(util, bool) or not isinstance(util, (int, float)) or not low_util <= util <= high_util:
            raise ContractError("engine profile", "engine.gpu_memory_utilization", util, f"accepted: {low_util} to {high_util}")
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise ContractError("engine profile", "engine.kv_cache_dtype", self.kv_cache_dtype, f"accepted: {', '.join(KV_CACHE_DTYPES)}")
        for field_name in ("load_format", "moe_backend"):
            value = getattr(self, field_name)
            if not isinstance(value, str) or not re.fullmatch(r"[\w-]+", value):
                raise ContractError("engine profile", f"engine.{field_name}", value, "expected a vLLM choice such as auto")
        if isinstance(self.extra_args, str) or not all(isinstance(a, str) and a for a in self.extra_args):
            raise ContractError("engine profile", "engine.extra_args", self.extra_args, "expected a tuple of non-empty strings")
        problem = extra_args_problem(tuple(self.extra_args))
        if problem:
            raise ContractError("engine profile", "engine.extra_args", list(self.extra_args), problem)
        if isinstance(self.tuning_args, str) or not all(isinstance(a, str) and a for a in self.tuning_args):
            raise ContractError("engine profile", "engine.tuning_args", self.tuning_args, "expected a tuple of non-empty strings")
        problem = extra_args_problem(tuple(self.tuning_args))
        if problem or (self.tuning_args and not self.tuning_args[0].startswith("-")):
            raise ContractError("engine profile", "engine.tuning_args", list(self.tuning_args), problem or "the first item must be a flag")
        problem = extra_env_problem(tuple(self.env)) if isinstance(self.env, tuple) else "expected a tuple of (NAME, value) pairs"
        if problem:
            raise ContractError("engine profile", "engine.env", [f"{p[0]}={p[1]}" if isinstance(p, tuple) and len(p) == 2 else p for p in self.env], problem)
        if not isinstance(self.decode_context_parallel, bool):
            raise ContractError("engine profile", "engine.decode_context_parallel", self.decode_context_parallel, "expected true or false")
        for item in self._all_args():
            # vLLM 0.27.1 EngineArgs.create_engine_config: "cudagraph_capture_sizes and compilation_config.cudagraph_capture_sizes are mutually exclusive"
            if item.startswith("{") and "cudagraph_capture_sizes" in item:
                raise ContractError(
                    "engine profile", "engine.extra_args", list(self.extra_args),
                    "--compilation-config may not set cudagraph_capture_sizes: the contract passes --cudagraph-capture-sizes matched to the "
                    "profile's --max-num-seqs, and vLLM refuses both (set --max-num-seqs instead)",
                )
        for flag in ("--max-num-seqs", "--max-num-batched-tokens"):
            value = flag_value(self._all_args(), flag)
            if value is not None and (not value.isdigit() or int(value) < 1):
                raise ContractError("engine profile", "engine.extra_args", value, f"{flag} takes a whole number of at least 1")
        if self.decode_context_parallel:
            # vllm-project/recipes Kimi-K3.yaml, decode_context_parallelism: "scoped to single_node_tp", the DCP size
            # (8) "must divide the tensor-parallel size", and it "pairs ... under FP8 KV".
            if self.pipeline_parallel_size != 1 or self.tensor_parallel_size % 8:
                raise ContractError(
                    "engine profile", "engine.decode_context_parallel", True,
                    f"decode context parallelism needs the single-node TP=8 layout (the recipe scopes it to single_node_tp; its size 8 must divide "
                    f"the tensor parallel size); this profile has TP={self.tensor_parallel_size} x PP={self.pipeline_parallel_size}",
                )
            if not self.kv_cache_dtype.startswith("fp8"):
                raise ContractError(
                    "engine profile", "engine.decode_context_parallel", True,
                    f"the recipe pairs decode context parallelism with FP8 KV cache (TOKENSPEED_MLA decode); engine.kv_cache_dtype is {self.kv_cache_dtype}",
                )


    def _all_args(self) -> tuple[str, ...]:
        """The profile's tuning flags then the extra ones (the later value of a flag wins)."""
        return (*self.tuning_args, *self.extra_args)

    @property
    def max_num_seqs(self) -> int:
        """The profile's maximum batch: ``--max-num-seqs`` of the tuning or extra flags, else vLLM 0.27.1's default."""
        value = flag_value(self._all_args(), "--max-num-seqs")
        return int(value) if value else DEFAULT_MAX_NUM_SEQS

    @property
    def cudagraph_capture_sizes(self) -> tuple[int, ...]:
        """``--cudagraph-capture-sizes``: vLLM's spacing up to the profile's maximum batch (:func:`~kimi_k3.serving.engine_profiles.cudagraph_capture_sizes`)."""
        tokens = flag_value(self._all_args(), "--max-num-batched-tokens")
        return cudagraph_capture_sizes(self.max_num_seqs, int(tokens) if tokens else DEFAULT_MAX_NUM_BATCHED_TOKENS)


# --- the whole contract ---------------------------------------------------------


def _fmt(value: float) -> str:
    return f"{value:g}"


@checked_args
@dataclass(frozen=True)
class ServingContract:
    """Image + weights + API + engine: everything needed to start the server."""

    image: ImageContract
    """Engine image."""
    weights: WeightsContract
    """Model weights and where they appear in the container."""
    api: ApiContract = ApiContract()
    """What clients and probes rely on."""
    engine: EngineProfile = EngineProfile()
    """Engine sizing."""

    def __post_init__(self) -> None:
        for name, kind in (("image", ImageContract), ("weights", WeightsContract), ("api", ApiContract), ("engine", EngineProfile)):
            if not isinstance(getattr(self, name), kind):
                raise ContractError("serving contract", name, type(getattr(self, name)).__name__, f"{name} must be a {kind.__name__}",
                                    message=f"serving contract: {name} must be a {kind.__name__}, got {type(getattr(self, name)).__name__}")

    def nodes_per_replica(self, gpus_per_node: int) -> int:
        """Nodes one replica spans; raises :class:`ContractError` when TP × PP does not fill whole nodes."""
        tp, pp = self.engine.tensor_parallel_size, self.engine.pipeline_parallel_size
        if tp != gpus_per_node:
            raise ContractError(
                "serving contract", "engine.tensor_parallel_size", tp,
                f"it must equal the {gpus_per_node} GPUs of one node; scale across nodes with pipeline_parallel_size",
                message=(
                    f"serving contract: tensor_parallel_size={tp} must equal the {gpus_per_node} GPUs of one node "
                    f"(each pod requests a whole node; TP x PP = {tp * pp} must equal {gpus_per_node} GPUs per pod x {pp} node(s))"
                ),
            )
        return pp

    def fit(self, instance: catalog.InstanceType) -> int:
        """Nodes of ``instance`` one replica spans, after checking they hold the model.

        TP must fill a node and the PP stages must hold the weights plus KV cache
        (:func:`kimi_k3.core.catalog.nodes_to_hold_model`).
        """
        tp = self.engine.tensor_parallel_size
        if tp != instance.gpus:
            raise ContractError(
                "serving contract", "engine.tensor_parallel_size", tp,
                f"must equal the GPUs of one {instance.name} node ({instance.gpus}); scale across nodes with engine.pipeline_parallel_size",
            )
        nodes = self.nodes_per_replica(instance.gpus)
        needed = catalog.nodes_to_hold_model(instance)
        if nodes < needed:
            model = catalog.KIMI_K3
            raise ContractError(
                "serving contract", "engine.pipeline_parallel_size", nodes,
                f"one replica needs at least {needed} {instance.name} nodes ({instance.gpu_memory_gb:.0f} GB of GPU memory each, "
                f"the model needs ~{model.weights_gb + model.min_kv_cache_gb:.0f} GB): set it to {needed} "
                f"(TP={instance.gpus} x PP={needed} = {instance.gpus * needed} GPUs)",
            )
        return nodes

    def gpus_per_pod(self, gpus_per_node: int) -> int:
        """GPUs each pod requests (a whole node), after checking TP × PP == GPUs per pod × nodes."""
        self.nodes_per_replica(gpus_per_node)
        return gpus_per_node

    def vllm_args(
        self,
        model_path: str | None = None,
        *,
        bind: tuple[str, int] | None = None,
        shutdown_timeout_s: int | None = None,
    ) -> list[str]:
        """Arguments of ``vllm serve`` (after the command), the AWS deployment guide's reference flags included, extra args last.

        :param model_path: where the weights volume is mounted in the container
            (defaults to ``weights.mount_path``).
        :param bind: ``(host, port)`` vLLM listens on; default ``("0.0.0.0", api.port)``. Behind the
            API proxy: loopback (:func:`kimi_k3.serving.api_proxy.engine_bind_args`).
        :param shutdown_timeout_s: ``--shutdown-timeout``: seconds vLLM lets in-flight requests finish
            after SIGTERM (vLLM's default, 0, aborts them); ``None`` leaves vLLM's default.
        """
        mount = model_path or self.weights.mount_path
        e, a, w = self.engine, self.api, self.weights
        args = ["--model", mount if w.source == "s3" else w.model_id]
        if w.source == "huggingface":
            # Same snapshot for weights, tokenizer and remote code; found in the pre-filled cache.
            args += ["--revision", w.revision, "--tokenizer-revision", w.revision, "--code-revision", w.revision, "--download-dir", mount]
        args += [
            "--trust-remote-code",
            "--load-format", e.load_format,
            "--enable-prefix-caching",
        ]
        if a.tool_call_parser:
            args += ["--enable-auto-tool-choice", "--tool-call-parser", a.tool_call_parser]
        if a.reasoning_parser:
            args += ["--reasoning-parser", a.reasoning_parser]
        args += [
            "--served-model-name", a.served_model_name,
            "--moe-backend", e.moe_backend,
            "--tensor-parallel-size", str(e.tensor_parallel_size),
        ]
        if e.pipeline_parallel_size > 1:
            args += ["--pipeline-parallel-size", str(e.pipeline_parallel_size)]
        host, port = bind if bind is not None else ("0.0.0.0", a.port)
        args += [
            "--no-enable-flashinfer-autotune",
            "--gpu-memory-utilization", _fmt(e.gpu_memory_utilization),
            "--max-model-len", str(e.max_model_len),
            "--kv-cache-dtype", e.kv_cache_dtype,
        ]
        if e.decode_context_parallel:
            args += ["--decode-context-parallel-size", str(DCP_SIZE), "--dcp-comm-backend", DCP_COMM_BACKEND]
        if a.media == "text-only":
            args += ["--language-model-only"]
        else:
            args += ["--allowed-media-domains", *a.media_domains]
        args += ["--cudagraph-capture-sizes", *(str(n) for n in e.cudagraph_capture_sizes)]
        args += override_tuning(tuple(e.tuning_args), tuple(e.extra_args))
        args += ["--host", host, "--port", str(port)]
        if shutdown_timeout_s is not None:
            args += ["--shutdown-timeout", str(shutdown_timeout_s)]
        return args + list(e.extra_args)

    def vllm_env(self) -> dict[str, str]:
        """Environment of the server container that the contract decides (no secrets)."""
        env = {
            "VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION": "1",
            "VLLM_ENGINE_READY_TIMEOUT_S": str(self.engine.ready_timeout_s),
            "HF_HUB_OFFLINE": "1",
            # vLLM 0.27.1 vllm/v1/worker/startup_plan.py: the profiled KV-cache size is kept under VLLM_CACHE_ROOT (which the
            # compile cache carries) and a later start with the same fingerprint and enough free memory skips memory profiling.
            "VLLM_ENABLE_STARTUP_PLAN": "1",
        }
        if self.engine.load_format == "fastsafetensors":
            # fastsafetensors >= 0.4 reads with O_DIRECT on local filesystems (fastsafetensors/common.py is_odirect_enabled),
            # bypassing the page cache the node sync filled; buffered reads let a load, a restart and a re-created pod hit it.
            env["FASTSAFETENSORS_ODIRECT"] = "0"
        if self.weights.source == "huggingface":
            env["HF_HUB_CACHE"] = self.weights.mount_path
        if self.api.media == "allowlist":
            # vLLM follows redirects of media URLs by default (VLLM_MEDIA_URL_ALLOW_REDIRECTS=1 in vllm/envs.py):
            # an allowed host could send the fetch anywhere.
            env["VLLM_MEDIA_URL_ALLOW_REDIRECTS"] = "0"
        env.update(dict(self.engine.env))
        return env

    @property
    def execute_model_timeout_s(self) -> int:
        """Longest one engine step may take before vLLM declares the engine dead: ``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS``
        (vLLM 0.27.1 ``vllm/envs.py``: default 300; the multiprocessing executor and the Ray V2 executor built on it
        wait that long for a step's result, then fail the engine)."""
        value = dict(self.engine.env).get("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "300")
        return int(value) if value.isdigit() else 300

    def startup_budget_s(self, margin_s: int = 600) -> int:
        """Seconds a pod may take from container start to a healthy ``/health``.

        The engine's ready timeout plus ``margin_s`` for Python imports and the API
        server start. Weight staging runs in an init container and is not counted.
        """
        return self.engine.ready_timeout_s + margin_s

    def probe_failure_threshold(self, period_s: int, margin_s: int = 600) -> int:
        """``failureThreshold`` so that ``failureThreshold × period_s ≥`` :meth:`startup_budget_s`."""
        return math.ceil(self.startup_budget_s(margin_s) / period_s)


@checked_function
def contract_summary(contract: ServingContract) -> dict[str, Any]:
    """Plain facts of a contract for stack outputs (no secrets)."""
    return {
        "image": contract.image.image,
        "imageDigest": contract.image.digest,
        "modelId": contract.weights.model_id,
        "modelRevision": contract.weights.revision,
        "weightsSource": contract.weights.source,
        "servedModelName": contract.api.served_model_name,
        "port": contract.api.port,
    }
