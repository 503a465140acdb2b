"""The one seam from settings to components: which config key feeds which component argument.

Components take typed args and phrase their errors in their own names (``drain_s``,
``weights.s3_uri``, ``instance_type``); the stack's user sets config keys
(``servingDrainSeconds``). :data:`SEAM` is the one table between the two: each row says that
a key feeds one field (or parameter) of one component input. The settings read it forwards
(the key feeds that arg) and backwards (a component that refuses that arg is reported under
that key), so no other module translates names by hand. Every key is checked against
:data:`kimi_k3.stack.config_keys.CONFIG_KEYS` at import, and ``tests/test_seam.py`` checks every
``(input, path)`` against the component's own fields and defaults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kimi_k3.core.suggest import nearest
from kimi_k3.errors import SettingsError
from kimi_k3.stack.config_keys import CONFIG_KEYS, PROJECT


@dataclass(frozen=True)
class Feed:
    """One row of the seam: config key ``key`` feeds ``path`` of the component input ``input``."""

    key: str
    """The config key's name (``servingDrainSeconds``), a key of :data:`~kimi_k3.stack.config_keys.CONFIG_KEYS`."""
    input: str
    """The component input it feeds: a key of :data:`INPUTS` (an args class, or a rule function's parameters)."""
    path: str
    """The field or parameter path in that input, as the component names it in its errors (``drain_s``, ``weights.s3_uri``)."""
    default_differs: str = ""
    """Empty: the input's own default for ``path`` (when it has one) equals the key's default. Otherwise why it may differ
    (a unit, or a value the settings always resolve before passing it on)."""


INPUTS = {
    "ServingContract": "kimi_k3.serving.contracts:ServingContract",
    "VllmServingArgs": "kimi_k3.serving.args:VllmServingArgs",
    "ServingFront": "kimi_k3.serving.front:ServingFront",
    "ConversationRouting": "kimi_k3.serving.router:ConversationRouting",
    "HyperPodRouting": "kimi_k3.hyperpod.routing:HyperPodRouting",
    "InferenceEndpoint": "kimi_k3.hyperpod.endpoint:render_inference_endpoint_config",  # the paths check_servable reports
    "startup_warnings": "kimi_k3.weights.estimate:startup_warnings",
    "StartupInputs": "kimi_k3.weights.estimate:StartupInputs",
    "CapacityTerms": "kimi_k3.capacity.assessment:Terms",
    "peer_stack_problems": "kimi_k3.weights.peer_transfer:stack_problems",  # the inputs peerWeightsTransfer's refusal names
}
"""Each component input the seam names, and where it lives (``module:attribute``)."""

_UNSET = "empty is None: unset"
_RECIPE = "empty (0) is the engine recipe's value for the GPU and layout (kimi_k3.serving.engine_profiles)"

_CONTRACT: tuple[tuple[str, ...], ...] = (
    ("servingImage", "image"),
    ("modelId", "weights.model_id"),
    ("modelRevision", "weights.revision"),
    ("weightsSource", "weights.source"),
    ("weightsS3Uri", "weights.s3_uri", _UNSET),
    ("weightsSha256Manifest", "weights.sha256_manifest", _UNSET),
    ("tensorParallelSize", "engine.tensor_parallel_size"),
    ("pipelineParallelSize", "engine.pipeline_parallel_size"),
    ("gpuMemoryUtilization", "engine.gpu_memory_utilization", _RECIPE),
    ("maxModelLen", "engine.max_model_len", _RECIPE),
    ("kvCacheDtype", "engine.kv_cache_dtype", _RECIPE),
    ("vllmExtraArgs", "engine.extra_args"),
    ("engineReadyTimeoutSeconds", "engine.ready_timeout_s"),
    ("servingEnv", "engine.env"),
    ("decodeContextParallel", "engine.decode_context_parallel"),
    ("mediaPolicy", "api.media"),
    ("mediaAllowedDomains", "api.media_domains"),
)
"""The serving contract's fields and their keys (the contract owns the rules; its fields feed every serving component)."""

SEAM: tuple[Feed, ...] = (
    *(Feed(row[0], "ServingContract", *row[1:]) for row in _CONTRACT),
    # the serving components (EKS)
    Feed("gpuInstanceType", "VllmServingArgs", "instance_type"),
    Feed("replicas", "VllmServingArgs", "replicas", "0 means one per group of reserved nodes: the platform resolves it (StackSettings.replicas_for)"),
    Feed("exposure", "VllmServingArgs", "exposure"),
    Feed("servingAllowedCidrs", "VllmServingArgs", "allowed_cidrs"),
    Feed("serviceMonitorEnabled", "VllmServingArgs", "service_monitor"),
    Feed("apiKey", "VllmServingArgs", "api_key", "a required secret: no default"),
    Feed("huggingFaceToken", "VllmServingArgs", "hugging_face_token", "an optional secret: empty is None"),
    Feed("weightsKmsKeyArn", "VllmServingArgs", "weights_kms_key_arn", "empty is None"),
    Feed("monitoringNamespace", "VllmServingArgs", "metrics_namespace"),
    Feed("conversationRouting", "VllmServingArgs", "routing", "true is a ConversationRouting of the router keys (with two or more replicas), false None"),
    # the serving front (VllmServingArgs.front, one value: the API proxy's options, the stop sequence, the NLB listener)
    Feed("servingExtraRoutes", "ServingFront", "extra_routes"),
    Feed("mediaInlineMiB", "ServingFront", "inline_media_bytes", "MiB in config, bytes in the front"),
    Feed("servingMaxGenerationSeconds", "ServingFront", "max_generation_s"),
    Feed("servingDrainSeconds", "ServingFront", "drain_s"),
    Feed("servingPreStopSeconds", "ServingFront", "pre_stop_sleep_s"),
    Feed("servingTerminationGraceSeconds", "ServingFront", "termination_grace_period_s", "0 is None: the drain plan's minimum"),
    Feed("nlbIdleTimeoutSeconds", "ServingFront", "nlb_idle_timeout_s", "None is the NLB module's default, the key's default"),
    # the routing tier (its stop sequence is the DrainPlan's rule with the router's preStop and servingDrainSeconds)
    Feed("routerSessionHeader", "ConversationRouting", "session_header"),
    Feed("routerReplicas", "ConversationRouting", "router_replicas"),
    Feed("routerPreStopSeconds", "ConversationRouting", "pre_stop_sleep_s"),
    Feed("routerImage", "ConversationRouting", "image"),
    # the HyperPod operator and endpoint
    Feed("hyperpodRoutingStrategy", "HyperPodRouting", "routing_strategy", "empty is None: the operator's default"),
    Feed("hyperpodLoadBalancerAlgorithm", "HyperPodRouting", "load_balancer_algorithm", "empty is None: the operator's default"),
    Feed("hyperpodKvCache", "HyperPodRouting", "kv_cache", "empty is None: the operator's default"),
    Feed("hyperpodL2CacheBackend", "HyperPodRouting", "l2_cache_backend", "empty is None: the operator's default"),
    Feed("hyperpodL2CacheUrl", "HyperPodRouting", "l2_cache_url", "empty is None: the operator's default"),
    Feed("gpuInstanceType", "InferenceEndpoint", "instance_type", "ml. + the key"),
    Feed("replicas", "InferenceEndpoint", "replicas", "0 means one: the settings pass at least 1"),
    *(Feed(row[0], "InferenceEndpoint", f"contract.{row[1]}", *row[2:]) for row in _CONTRACT),
    # the time-to-serve estimate's warnings (their topic is the input they concern)
    Feed("engineReadyTimeoutSeconds", "startup_warnings", "ready_timeout_s"),
    Feed("capacityReservationId", "startup_warnings", "block_hours", "the block's remaining hours, read from the reservation"),
    Feed("weightsSource", "StartupInputs", "weights_source", "the stack always passes it"),
    # what peerWeightsTransfer needs (kimi_k3.weights.peer_transfer.stack_problems): its refusal names the key behind the input
    Feed("pipelineParallelSize", "peer_stack_problems", "pipeline_parallel_size"),
    Feed("replicas", "peer_stack_problems", "replicas"),
    Feed("nodeLocalWeights", "peer_stack_problems", "node_local_weights"),
    Feed("weightsSyncSidecar", "peer_stack_problems", "sync_sidecar"),
    Feed("weightsSha256Manifest", "peer_stack_problems", "sha256_manifest"),
    Feed("servingImage", "peer_stack_problems", "image"),
    Feed("efaEnabled", "peer_stack_problems", "efa_enabled"),
    Feed("gpuInstanceType", "peer_stack_problems", "efa_interfaces", "the catalog's EFA interfaces of the instance type"),
    Feed("pipelinedWeightsLoad", "peer_stack_problems", "pipelined_load"),
    Feed("engineSnapshot", "peer_stack_problems", "engine_snapshot"),
    # the Capacity Block assessment's findings
    Feed("capacityReservationId", "CapacityTerms", "reservation"),
    Feed("gpuInstanceType", "CapacityTerms", "instance_type"),
    Feed("availabilityZones", "CapacityTerms", "availability_zones"),
    Feed("replicas", "CapacityTerms", "nodes"),
)
"""Every setting and the component argument it feeds; read backwards, every argument a component may refuse and its key."""

_BY_PATH = {(feed.input, feed.path): feed.key for feed in SEAM}

for _feed in SEAM:
    if _feed.key not in CONFIG_KEYS:
        raise KeyError(f"seam: {_feed.key} is not a key of kimi_k3.stack.config_keys")
    if _feed.input not in INPUTS:
        raise KeyError(f"seam: {_feed.input} is not an input of kimi_k3.stack.seam.INPUTS")


def full_key(name: str) -> str:
    """The full config key ``kimi-k3:<name>`` of a key the schema defines."""
    if name not in CONFIG_KEYS:
        raise KeyError(f"{name} is not a key of kimi_k3.stack.config_keys")
    return f"{PROJECT}:{name}"


def key_name(input: str, path: str) -> str | None:
    """The key that feeds ``path`` of ``input`` (an index such as ``[1]`` is dropped); ``None`` when no key does."""
    return _BY_PATH.get((input, re.sub(r"\[\d+\]$", "", path)))


def config_key(input: str, path: str) -> str:
    """The full config key that feeds ``path`` of ``input``; a ``KeyError`` names a path the seam lacks."""
    name = key_name(input, path)
    if name is None:
        raise KeyError(f"seam: no config key feeds {input}.{path}")
    return full_key(name)


def feeds(input: str) -> dict[str, str]:
    """``{path: key name}`` of every row of ``input``, in the table's order."""
    return {feed.path: feed.key for feed in SEAM if feed.input == input}


def in_key_terms(input: str, text: str, *, optional_prefix: str = "") -> str:
    """``text`` with every path of ``input`` it names (``engine.pipeline_parallel_size``, optionally led by
    ``optional_prefix``) renamed to its key (``pipelineParallelSize``): a rule's message in the user's words."""
    prefix = rf"(?:{re.escape(optional_prefix)})?" if optional_prefix else ""
    for path, name in sorted(feeds(input).items(), key=lambda item: -len(item[0])):
        text = re.sub(rf"\b{prefix}{re.escape(path)}\b", name, text)
    return text


_ACCEPTED_NAMES = re.compile(r"^accepted: ([\w.-]+(?:, [\w.-]+)+)$")


def refused(input: str, path: str, value: object, accepted: str) -> SettingsError:
    """The :class:`SettingsError` of a component refusing ``path`` of ``input``: named by the key that fed it.

    Where the rule lists the accepted names (``accepted: huggingface, s3``), the nearest one to a misspelt value is
    suggested, as every enum-like key does (``did you mean s3?``)."""
    names = _ACCEPTED_NAMES.match(accepted)
    near = nearest(value, names[1].split(", ")) if names and isinstance(value, str) else None
    if near:
        accepted = f"{accepted}; did you mean {near}?"
    return SettingsError(config_key(input, path), list(value) if isinstance(value, tuple) else value, accepted)


__all__ = ["INPUTS", "SEAM", "Feed", "config_key", "feeds", "full_key", "in_key_terms", "key_name", "refused"]
