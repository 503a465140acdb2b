"""The ``Serving`` keys: the serving contract (its rules in :mod:`kimi_k3.serving.contracts`), replicas, exposure,
secrets, and the API proxy, drain and NLB keys (each checked by the rule that owns it, named back through :mod:`kimi_k3.stack.seam`).

A section of :mod:`kimi_k3.stack.settings` (the only reader of stack config).
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kimi_k3.core import catalog
from kimi_k3.errors import SettingsError, UserError
from kimi_k3.hyperpod.routing import HyperPodRouting, HyperPodRoutingError
from kimi_k3.serving import engine_profiles
from kimi_k3.serving.contracts import EXPOSURES, ApiContract, ContractError, EngineProfile, ImageContract, ServingContract, WeightsContract
from kimi_k3.stack import seam
from kimi_k3.stack.settings.capacity import CapacitySettings
from kimi_k3.stack.settings.network import NetworkSettings
from kimi_k3.stack.settings.reader import Reader, Secret, cidr_list, full_key, in_range, one_of

if TYPE_CHECKING:
    from kimi_k3.serving.front import ServingFront
    from kimi_k3.serving.router import ConversationRouting


def _default_front() -> ServingFront:
    """The serving front's defaults (no NLB)."""
    from kimi_k3.serving.front import ServingFront  # the serving components (Pulumi SDKs) load when a stack is validated, not when settings are imported

    return ServingFront()


@dataclass(frozen=True)
class ServingSettings:
    """The vLLM serving stack: the serving contract plus how many replicas and how they are reached."""

    contract: ServingContract
    """Image, weights, API and engine profile, built (and checked by the contract) from the serving keys."""
    replicas: int
    """0 means one replica per group of reserved nodes."""
    exposure: str
    """How clients reach the API: ``cluster``, ``internal`` or ``public`` (``exposure``, :data:`~kimi_k3.serving.contracts.EXPOSURES`)."""
    allowed_cidrs: tuple[str, ...]
    """Client CIDRs the load balancer admits (``servingAllowedCidrs``); required unless ``exposure`` is ``cluster``."""
    service_monitor_enabled: bool
    """Declare a Prometheus Operator ServiceMonitor instead of scrape annotations (``serviceMonitorEnabled``; on with ``prometheusOperatorEnabled``)."""
    api_key: Secret
    """API key clients send as a Bearer token (``apiKey``, a secret)."""
    hugging_face_token: Secret | None
    """Hugging Face token for gated downloads (``huggingFaceToken``, a secret); ``None``: anonymous."""
    front: ServingFront = field(default_factory=_default_front)
    """The API proxy, the drain and the NLB listener, one value the serving components take as it is (:func:`_validate_serving_front`)."""
    hyperpod_routing: HyperPodRouting = field(default_factory=HyperPodRouting)
    """The HyperPod operator's routing and KV-cache options (``HyperPodRouting``), for ``kimi-k3 hyperpod``."""
    routing: ConversationRouting | None = None
    """The routing tier (``conversationRouting`` and the ``router*`` keys); ``None`` when off. The composition declares it only
    with two or more replicas (:meth:`routing_for`)."""

    def routing_for(self, replicas: int) -> ConversationRouting | None:
        """The routing tier for ``replicas`` resolved replicas: none for one replica (nothing to route between)."""
        return self.routing if replicas >= 2 else None


@contextlib.contextmanager
def _contract_key() -> Iterator[None]:
    """Turn a :class:`ContractError` into a :class:`SettingsError` naming the config key that set the field.

    The contract owns the rule and its wording; sibling fields it mentions
    (``engine.pipeline_parallel_size``) are renamed to their keys (``pipelineParallelSize``).
    """
    try:
        yield
    except ContractError as err:
        if seam.key_name("ServingContract", err.field) is None:
            raise
        value, hidden = _masked(list(err.value) if isinstance(err.value, tuple) else err.value)  # an engine arg or env entry may hold a credential: never shown
        accepted = seam.in_key_terms("ServingContract", err.accepted)
        for secret in sorted(hidden, key=len, reverse=True):
            accepted = accepted.replace(secret, "***")
        raise seam.refused("ServingContract", err.field, value, accepted) from None


def _engine_recipe(capacity: CapacitySettings, pipeline_parallel_size: Any) -> engine_profiles.EngineRecipe | None:
    """The recipe profile for the stack's GPU and layout; ``None`` when there is none (the contract then says why)."""
    nodes = pipeline_parallel_size if isinstance(pipeline_parallel_size, int) and pipeline_parallel_size >= 1 else 1
    try:
        return engine_profiles.recipe_for(catalog.INSTANCE_TYPES[capacity.instance_type], nodes)
    except UserError:
        return None


def _serving_env(r: Reader) -> dict[str, str]:
    """``servingEnv`` items (``NAME=value``) as a mapping, in order; the contract refuses managed names."""
    env: dict[str, str] = {}
    for item in r.get("servingEnv"):
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SettingsError(full_key("servingEnv"), item, "expected NAME=value items, e.g. NCCL_DEBUG=INFO")
        if CREDENTIAL_ENV.search(name):
            raise SettingsError(
                full_key("servingEnv"), f"{name}=***",
                f"{name} looks like a credential, and servingEnv is written in plain text into the Deployment (and the plan's manifests): "
                f"{_credential_setting(name)}",
            )
        if name in env:
            raise SettingsError(full_key("servingEnv"), f"{name}=***", f"{name} is set twice")
        env[name] = value
    return env


CREDENTIAL_ENV = re.compile(r"(^|_)(TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIALS?|ACCESS_KEY_ID)(_|$)")
"""Environment variable names that hold a credential (``HF_TOKEN``, ``*_API_KEY``, ``AWS_SECRET_ACCESS_KEY`` ...)."""
_SECRET_FLAG = re.compile(r"^--?[\w-]*(token|key|secret|password)[\w-]*", re.IGNORECASE)


def _credential_setting(name: str) -> str:
    """The dedicated setting for a credential someone put into ``servingEnv``."""
    if name.startswith("AWS_"):
        return "the serving pods get AWS credentials from EKS Pod Identity (the stack's serving role), never keys: remove it"
    if "HF" in name or "HUGGING" in name:
        return f"set the token with `pulumi config set --secret {full_key('huggingFaceToken')} <token>` (a Kubernetes Secret) and remove it"
    if "API_KEY" in name:
        return f"the engine's key is {full_key('apiKey')} (`pulumi config set --secret {full_key('apiKey')} <key>`, a Kubernetes Secret): remove it"
    return "keep it in a Kubernetes Secret of your own; servingEnv holds no secrets"


def _masked(items: Any) -> tuple[Any, list[str]]:
    """``items`` (env ``NAME=value`` or engine args) with credential values replaced by ``***``, and the values masked."""
    if not isinstance(items, (list, tuple)):
        return items, []
    shown, hidden = [], []
    after_flag = False
    for item in map(str, items):
        name, sep, value = item.partition("=")
        if after_flag and item:
            hidden.append(item)
            item = "***"
        elif sep and value and (CREDENTIAL_ENV.search(name) or _SECRET_FLAG.match(name)):
            hidden.append(value)
            item = f"{name}=***"
        after_flag = bool(_SECRET_FLAG.fullmatch(item.split("=")[0])) and "=" not in item and item.startswith("-")
        shown.append(item)
    return shown, hidden



def validate_serving(r: Reader, prod: bool, region: str, capacity: CapacitySettings, network: NetworkSettings, warnings: list[str]) -> ServingSettings:
    """The serving keys (contract, exposure, replicas, routing, the serving front), validated against the capacity and network."""
    raw_image = r.get("servingImage")
    raw_util = r.get("gpuMemoryUtilization")
    recipe = _engine_recipe(capacity, r.get("pipelineParallelSize"))
    defaults = engine_profiles.RECIPES[f"blackwell/{engine_profiles.SINGLE_NODE}"] if recipe is None else recipe
    try:
        gpu_util = defaults.gpu_memory_utilization if raw_util == "" else float(raw_util)
    except ValueError:
        raise SettingsError(full_key("gpuMemoryUtilization"), raw_util, "expected a decimal between 0.50 and 0.98") from None
    kv_cache_dtype = r.get("kvCacheDtype") or defaults.kv_cache_dtype
    dcp = r.get("decodeContextParallel")
    if dcp and recipe is not None and not recipe.decode_context_parallel:
        raise SettingsError(
            full_key("decodeContextParallel"), True,
            f"the recipe's decode context parallelism is for the single-node TP8 profile only ({engine_profiles.RECIPE_SOURCE}); "
            f"this stack runs {recipe.name}",
        )
    env = {**dict(defaults.env), **_serving_env(r)}
    media = r.get("mediaPolicy")
    instance = catalog.INSTANCE_TYPES[capacity.instance_type]
    with _contract_key():
        contract = ServingContract(
            image=ImageContract.parse(raw_image),
            weights=WeightsContract(
                model_id=r.get("modelId"),
                revision=r.get("modelRevision"),
                source=r.get("weightsSource"),
                s3_uri=r.get("weightsS3Uri") or None,
                sha256_manifest=r.get("weightsSha256Manifest") or None,
            ),
            api=ApiContract(media=media, media_domains=r.get("mediaAllowedDomains")),
            engine=EngineProfile(
                tensor_parallel_size=r.get("tensorParallelSize"),
                pipeline_parallel_size=r.get("pipelineParallelSize"),
                gpu_memory_utilization=gpu_util,
                max_model_len=r.get("maxModelLen") or defaults.max_model_len,
                kv_cache_dtype=kv_cache_dtype,
                extra_args=r.get("vllmExtraArgs"),
                ready_timeout_s=r.get("engineReadyTimeoutSeconds"),
                load_format=defaults.load_format,
                moe_backend=defaults.moe_backend,
                tuning_args=defaults.tuning_for(kv_cache_dtype, bool(dcp)),
                env=tuple(env.items()),
                decode_context_parallel=dcp,
                profile_name=defaults.name,
            ),
        )
        nodes = contract.fit(instance)
    if not contract.image.pinned:
        if prod:
            raise SettingsError(full_key("servingImage"), raw_image, "prod requires an image pinned by digest: repo@sha256:<64 hex> (docker buildx imagetools inspect <image> prints it)")
        warnings.append(f"{full_key('servingImage')}: {raw_image} is a floating tag; pin it by digest (repo@sha256:...) before prod")
    if nodes > 1 and not capacity.efa_enabled:
        raise SettingsError(full_key("efaEnabled"), False, f"must be true when a replica spans {nodes} nodes (pipelineParallelSize={nodes}): cross-node traffic needs EFA")

    exposure = one_of("exposure", r.get("exposure"), EXPOSURES)
    allowed = cidr_list("servingAllowedCidrs", r.get("servingAllowedCidrs"), allow_world=not prod)
    if exposure != "cluster" and not allowed:
        raise SettingsError(full_key("servingAllowedCidrs"), [], f"required when exposure is {exposure}: the client CIDRs allowed to call the API through the load balancer")
    if exposure == "public" and any(ipaddress.IPv4Network(c).prefixlen == 0 for c in allowed):
        warnings.append(f"{full_key('servingAllowedCidrs')}: 0.0.0.0/0 exposes the API to the internet (API key required)")
    vpc = ipaddress.IPv4Network(network.vpc_cidr)
    for cidr in allowed if exposure != "cluster" and not network.existing_vpc_id else ():
        if ipaddress.IPv4Network(cidr).subnet_of(vpc):
            warnings.append(
                f"{full_key('servingAllowedCidrs')}: {cidr} lies inside the VPC {vpc}: pods with addresses in it reach the API "
                "whatever their namespace; list client subnets that hold no nodes"
            )

    api_key = r.secret("apiKey")
    if api_key is None:
        raise SettingsError(full_key("apiKey"), None, "required: set it with `pulumi config set --secret kimi-k3:apiKey <key>`")

    replicas = in_range("replicas", r.get("replicas"), 0, 64)
    if replicas == 0 and prod:  # prod pins what it pays for: say what 0 does (the project's default, unset, reads 0 too)
        warnings.append(
            f"{full_key('replicas')}: 0 means one replica per group of {nodes} reserved node{'s' if nodes > 1 else ''}: the Capacity Block's "
            "instance count decides how many replicas serve (the plan shows it); set 1 to 64 to pin the count"
        )

    return ServingSettings(
        contract=contract,
        replicas=replicas,
        exposure=exposure,
        allowed_cidrs=allowed,
        service_monitor_enabled=r.get("serviceMonitorEnabled"),
        api_key=api_key,
        hugging_face_token=r.secret("huggingFaceToken"),
        front=_validate_serving_front(r, contract, exposure, warnings),
        hyperpod_routing=_validate_hyperpod_routing(r),
        routing=_validate_routing(r, prod, exposure),
    )


def _validate_hyperpod_routing(r: Reader) -> HyperPodRouting:
    """The HyperPod operator's routing keys, checked by ``HyperPodRouting`` (the CRD's enums); the key is named here."""
    values = {field: (r.get(key) or None) for field, key in seam.feeds("HyperPodRouting").items()}
    try:
        return HyperPodRouting(**values)
    except HyperPodRoutingError as err:
        raise seam.refused("HyperPodRouting", err.field, values[err.field], str(err).split("; ", 1)[1]) from None


def _validate_routing(r: Reader, prod: bool, exposure: str) -> ConversationRouting | None:
    """The routing tier's keys, checked by :class:`ConversationRouting` and the stop sequence's rule (:class:`DrainPlan`); the keys
    are named back through the seam."""
    from kimi_k3.serving import drain, nlb  # the serving components (Pulumi SDKs) load when a stack is validated, not when settings are imported
    from kimi_k3.serving.router import ConversationRouting, RoutingError  # the router module declares Kubernetes objects: loaded when used

    if not r.get("conversationRouting"):
        return None
    values = {field: r.get(key) for field, key in seam.feeds("ConversationRouting").items()}
    image = values["image"]
    try:
        reference = ImageContract.parse(image)
    except ContractError:
        raise SettingsError(full_key("routerImage"), image, "expected repo:tag or repo@sha256:<64 hex>") from None
    if prod and not reference.pinned:
        raise SettingsError(full_key("routerImage"), image, "prod requires an image pinned by digest: repo@sha256:<64 hex> (mirror envoyproxy/envoy into ECR)")
    try:
        routing = ConversationRouting(**values)
    except RoutingError as err:
        key = seam.key_name("ConversationRouting", err.field) or "routerSessionHeader"
        raise SettingsError(full_key(key), r.get(key), str(err).split("; ", 1)[-1]) from None
    try:
        routing.drain_plan(r.get("servingDrainSeconds"), exposure in nlb.EXPOSURE_SCHEMES)
    except drain.DrainError as err:
        raise SettingsError(full_key(seam.key_name("ConversationRouting", err.field) or "servingDrainSeconds"), err.value, err.accepted) from None
    if exposure in nlb.EXPOSURE_SCHEMES and r.get("replicas") != 1:
        # with the tier (two or more replicas, or 0: one per group of reserved nodes) the router pods are the NLB's targets,
        # so the target group's deregistration delay is the router's preStop + the drain, not the serving pods' (serving/base.py)
        delay = drain.deregistration_delay_s(routing.pre_stop_sleep_s, r.get("servingDrainSeconds"))
        low, high = nlb.DEREGISTRATION_DELAY_RANGE
        if not low <= delay <= high:
            raise SettingsError(
                full_key("routerPreStopSeconds"), routing.pre_stop_sleep_s,
                f"with the routing tier behind an NLB, routerPreStopSeconds + servingDrainSeconds ({delay} s) is the router pods' deregistration delay; "
                f"the target group takes {low}-{high} s",
            )
    return routing


def _validate_serving_front(r: Reader, contract: ServingContract, exposure: str, warnings: list[str]) -> ServingFront:
    """The API proxy, drain and NLB keys, built into the one :class:`ServingFront` (its constructor runs each rule); the key
    of the field it refuses is named here, through the seam."""
    from kimi_k3.serving import nlb  # the serving components (Pulumi SDKs) load when a stack is validated, not when settings are imported
    from kimi_k3.serving.front import FrontError, ServingFront  # the serving components (Pulumi SDKs) load when a stack is validated

    inline_mib = in_range("mediaInlineMiB", r.get("mediaInlineMiB"), 0, 512)
    if inline_mib and contract.api.media == "text-only":
        raise SettingsError(full_key("mediaInlineMiB"), inline_mib, "inline media needs mediaPolicy allowlist (text-only serving refuses media)")
    try:
        front = ServingFront(
            extra_routes=tuple(r.get("servingExtraRoutes")),
            inline_media_bytes=inline_mib * 1024 * 1024,
            max_generation_s=r.get("servingMaxGenerationSeconds"),
            drain_s=r.get("servingDrainSeconds"),
            pre_stop_sleep_s=r.get("servingPreStopSeconds"),
            termination_grace_period_s=r.get("servingTerminationGraceSeconds") or None,
            behind_nlb=exposure in nlb.EXPOSURE_SCHEMES,
            nlb_idle_timeout_s=r.get("nlbIdleTimeoutSeconds"),
        )
    except FrontError as err:
        if seam.key_name("ServingFront", err.field) is None:  # a field no key sets (the settings never set it)
            raise
        raise seam.refused("ServingFront", err.field, err.value, err.accepted) from None
    if front.drain_s < front.max_generation_s:
        warnings.append(
            f"{full_key('servingDrainSeconds')}: {front.drain_s} s is shorter than servingMaxGenerationSeconds {front.max_generation_s} s: "
            "a rollout or a node drain cuts requests that run longer"
        )
    return front
