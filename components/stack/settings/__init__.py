"""Typed, validated stack settings: the only place that reads stack config.

Stack config (``kimi-k3:*`` keys and ``aws:region``) is turned into immutable
dataclasses and checked as a whole *before* any resource is declared. A mistake
raises :class:`~kimi_k3.errors.SettingsError` naming the key, the bad value and
what is accepted; under ``pulumi up`` that ends the run with that one line.

Three entry points, one validator:

* :func:`from_pulumi` – inside a Pulumi program (``__main__.py``);
* :func:`load_stack` – from ``stacks/Pulumi.<stack>.yaml`` (CLI, offline plan);
* :func:`from_values` – from a plain mapping (tests, other programs).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kimi_k3.core import catalog
from kimi_k3.core.formats import KNOWN_REGION
from kimi_k3.core.names import fit
from kimi_k3.core.suggest import nearest
from kimi_k3.errors import SettingsError, UserError
from kimi_k3.stack import no_effect, project, region_facts
from kimi_k3.stack.config_keys import CONFIG_KEYS, PROJECT
from kimi_k3.stack.settings.capacity import CapacitySettings, GpuPluginSettings, validate_capacity, validate_plugins
from kimi_k3.stack.settings.cluster import ClusterSettings, DeploymentSettings, validate_cluster, validate_deployment
from kimi_k3.stack.settings.hyperpod import EKS_ONLY_KEYS, HYPERPOD_ONLY_KEYS, HyperPodSettings, validate_hyperpod
from kimi_k3.stack.settings.network import NetworkSettings, validate_network
from kimi_k3.stack.settings.observability import MonitoringSettings, validate_monitoring
from kimi_k3.stack.settings.reader import INSTANCE_TYPE_RE, SECRET_PLACEHOLDER_PREFIX, Reader, Secret, changed_keys, full_key, one_of
from kimi_k3.stack.settings.serving import ServingSettings, validate_serving
from kimi_k3.stack.settings.weights import TimeToServeSettings, validate_time_to_serve

ENVIRONMENTS = ("dev", "prod")
"""Values of ``kimi-k3:environment``: each has its policy config (``policy/config/<environment>.json``) and its rules
(prod the strict ones). There is no ``staging`` class: a staging stack is ``dev`` (its own ``policy/config/<stack>.json``
may raise the rules) or ``prod``."""
SERVING_PLATFORMS = ("eks", "hyperpod")
"""Values of ``kimi-k3:servingPlatform``: the EKS path (Capacity Block node group, vLLM) or SageMaker HyperPod."""

NAMESPACES_PASSED_THROUGH = ("pulumi",)
"""Config namespaces of the Pulumi engine itself (e.g. ``pulumi:tags``), accepted as they are."""


@dataclass(frozen=True)
class StackSettings:
    """Everything one stack needs, validated as a whole."""

    project: str
    """Pulumi project name (``kimi-k3`` unless the caller names another)."""
    stack: str
    """Pulumi stack name (``dev`` …); with ``project`` it makes the default HyperPod cluster name."""
    environment: str
    """``dev``, ``staging`` or ``prod`` (``environment``); prod applies the strict rules (:attr:`production`)."""
    region: str
    """AWS region of the stack (``aws:region``)."""
    network: NetworkSettings
    """VPC layout or the existing VPC (the ``Network`` keys)."""
    cluster: ClusterSettings
    """EKS control plane and system node group (the ``Cluster`` keys)."""
    capacity: CapacitySettings
    """The Capacity Block and its GPU node group (the ``Capacity Block and GPU nodes`` keys)."""
    plugins: GpuPluginSettings
    """GPU node plugin versions and switches (the ``GPU plugins`` keys)."""
    serving: ServingSettings
    """The serving contract, replicas, exposure and secrets (the ``Serving`` keys)."""
    deployment: DeploymentSettings
    """Deployment access and private wiring (``kubeconfigRoleArn``, ``clusterViewerRoleArns``, ``interfaceEndpoints``, ``weightsKmsKeyArn``)."""
    warnings: tuple[str, ...] = ()
    """Non-fatal findings (e.g. a floating image tag outside prod), shown by the program."""
    monitoring: MonitoringSettings = field(default_factory=MonitoringSettings)
    """Alerts, dashboard and the delivery check."""
    serving_platform: str = "eks"
    """``eks`` or ``hyperpod`` (``servingPlatform``)."""
    hyperpod: HyperPodSettings | None = None
    """The HyperPod cluster of a ``hyperpod`` stack; ``None`` on the EKS path."""
    time_to_serve: TimeToServeSettings = field(default_factory=TimeToServeSettings)
    """Weights staging, node-local weights, compile caches and image pull (:func:`validate_time_to_serve`)."""

    @property
    def instance(self) -> catalog.InstanceType:
        """Catalog facts of the GPU instance type."""
        return catalog.INSTANCE_TYPES[self.capacity.instance_type]

    @property
    def nodes_per_replica(self) -> int:
        """GPU nodes one replica spans (pipeline stages across nodes)."""
        return self.serving.contract.engine.pipeline_parallel_size

    @property
    def nodes_required(self) -> int:
        """GPU nodes the stack needs at minimum (configured replicas, or one replica)."""
        return max(1, self.serving.replicas) * self.nodes_per_replica

    def replicas_for(self, reserved_instances: int) -> int:
        """Serving replicas on a block of ``reserved_instances``: configured, or one per group of reserved nodes."""
        return self.serving.replicas or max(1, reserved_instances // self.nodes_per_replica)

    @property
    def production(self) -> bool:
        """True for the prod environment, which applies the strict rules."""
        return self.environment == "prod"


STACK_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
"""The stack names a kimi-k3 stack accepts: Pulumi's ("alphanumeric characters, hyphens, underscores, or periods", at most
100; Pulumi docs, Stacks). Every name derived from one fits its own limit (:func:`derived_names`, :func:`kimi_k3.core.names.fit`)."""
STACK_NAME_ACCEPTED = "1-100 letters, digits, '-', '_' or '.' (Pulumi's stack names)"
EKS_CLUSTER_NAME_MAX = 100
"""EKS CreateCluster ``name``: 1-100 letters, digits, '-' and '_', starting with a letter or digit."""
ECR_PREFIX_MAX = 30
"""ECR CreatePullThroughCacheRule ``ecrRepositoryPrefix``: 2-30 characters, lower case."""
SAGEMAKER_NAME_MAX = 63
"""SageMaker CreateCluster ``ClusterName``: 1-63 letters, digits and '-'."""


def check_stack_name(stack: str) -> None:
    """Refuse a stack name outside :data:`STACK_NAME` (one line naming it and what is accepted)."""
    if not STACK_NAME.match(stack):
        raise UserError(f"stack name {stack!r} is not accepted; expected {STACK_NAME_ACCEPTED}")


def cluster_name(base_name: str, stack: str) -> str:
    """The EKS cluster's name for a platform named ``base_name`` in ``stack`` (``kimi-k3-dev``), within EKS's 100
    characters and its letters, digits, '-' and '_' (:func:`kimi_k3.core.names.fit`).

    The one home of the naming rule: :class:`kimi_k3.stack.platform.Platform` names the
    cluster with it, and the CLI finds the cluster of a stack with it.
    """
    return fit(f"{base_name}-{stack}", EKS_CLUSTER_NAME_MAX)


def pull_through_prefix(project: str, stack: str) -> str:
    """The default ``ecrPullThroughPrefix``: ``<project>-<stack>-docker-hub``, lower case, within ECR's 30 characters."""
    return fit(f"{project}-{stack}-docker-hub", ECR_PREFIX_MAX, lower=True, separators="-_.")


def hyperpod_cluster_name(project: str, stack: str) -> str:
    """The default ``hyperpodClusterName``: ``<project>-<stack>`` within SageMaker's 63 letters, digits and '-'."""
    return fit(f"{project}-{stack}", SAGEMAKER_NAME_MAX, separators="-")


def from_pulumi() -> StackSettings:
    """Read and validate the running Pulumi program's config."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    values: dict[str, Any] = dict(runtime_config.get_config_env())
    values.update(runtime_config.CONFIG.get())
    secret_keys = set(runtime_config.get_config_secret_keys_env()) | {
        k for k in values if runtime_config.is_config_secret(k)
    }
    return from_values(values, secret_keys, project=pulumi.get_project(), stack=pulumi.get_stack())


def read_stack_file(stack: str, root: Path | None = None) -> tuple[dict[str, str], set[str]]:
    """A stack's config in Pulumi's wire form (``{"ns:key": "string"}``) and its secret keys.

    ``root`` is the Pulumi project's directory (default: the nearest ``Pulumi.yaml`` from
    the current directory up). The stack-file rules have one home,
    :func:`kimi_k3.stack.project.read_stack_config`: ``secure:`` values (and declared secrets
    the file does not hold, which CI sets) become marked placeholders, still secret.
    """
    config = project.read_stack_config(project.find_project(root, Path.cwd()), stack)
    return dict(config.values), set(config.secret_keys)


def load_settings(found: project.Project, stack: str) -> StackSettings:
    """A stack of the Pulumi project ``found`` as validated kimi-k3 settings (``hyperpod``, ``capacity preflight``, ``status``)."""
    config = project.read_stack_config(found, stack)
    if not any(key.startswith(f"{PROJECT}:") for key in config.stack_values):
        raise UserError(
            f"stack {config.stack} ({config.path}) sets no {PROJECT}:* keys: this command reads a kimi-k3 stack "
            f"(the settings of kimi_k3.stack.settings), which project {found.name!r} does not use"
        )
    settings = from_values(config.values, config.secret_keys, project=PROJECT, stack=config.stack)
    project.check_declarations(found, config)
    return settings


def load_stack(stack: str, root: Path | None = None) -> StackSettings:
    """Read and validate a stack of the Pulumi project at ``root`` (default: found from the current directory)."""
    return load_settings(project.find_project(root, Path.cwd()), stack)


@functools.lru_cache(maxsize=1)
def aws_provider_keys() -> frozenset[str]:
    """The ``aws:`` config keys the installed AWS provider reads (``aws:region``, ``aws:profile`` …).

    Read from the provider SDK's own config module (``pulumi_aws/config/vars.py``: one
    ``__config__.get…('<key>')`` per setting), so the list follows the pinned provider.
    """
    spec = importlib.util.find_spec("pulumi_aws")
    if spec is None or not spec.submodule_search_locations:
        return frozenset({"region", "profile"})
    source = Path(next(iter(spec.submodule_search_locations)), "config", "vars.py").read_text()
    return frozenset(re.findall(r"__config__\.get\w*\('(\w+)'", source))


def _unknown_keys(values: Mapping[str, Any], secret_keys: Iterable[str]) -> None:
    """Refuse keys this stack does not read: no namespace, a foreign or misspelt namespace, a misspelt key.

    ``kimi-k3:`` keys are checked against the schema, ``aws:`` keys against the AWS
    provider's settings; ``pulumi:`` keys belong to the engine. The message suggests the
    nearest valid key.
    """
    ours = {k.name for k in CONFIG_KEYS.values()}
    aws_keys = aws_provider_keys()
    secrets = set(secret_keys)
    for key in sorted(values):
        shown = "***" if key in secrets or "secret" in key.lower() else values[key]
        namespace, sep, name = key.rpartition(":")
        if namespace in NAMESPACES_PASSED_THROUGH:
            continue
        if namespace == "aws":
            if name not in aws_keys:
                near = nearest(name, aws_keys)
                hint = f"did you mean aws:{near}?" if near else "see the AWS provider's configuration reference"
                raise SettingsError(key, shown, f"not a setting of the AWS provider; {hint}")
            continue
        if namespace == PROJECT and name in ours:
            continue
        near = nearest(name, ours)
        suggestion = f"did you mean {PROJECT}:{near}?" if near else f"known keys: {', '.join(sorted(ours))}"
        if not sep:
            raise SettingsError(key, shown, f"a key needs a namespace (Pulumi reads {PROJECT}:<key> and aws:<key>); {suggestion}")
        if namespace != PROJECT:
            raise SettingsError(key, shown, f"unknown namespace {namespace!r}: this stack reads {PROJECT}: and aws: keys; {suggestion}")
        raise SettingsError(key, shown, f"unknown key; {suggestion}")


def _environment(value: str) -> str:
    if value == "staging":
        raise SettingsError(
            full_key("environment"), value,
            f"accepted: {', '.join(ENVIRONMENTS)}; a staging stack is dev (its own policy/config/<stack>.json may raise the rules) "
            "or prod (the strict rules): there is no staging policy config, and the policy pack would judge it by its prod defaults",
        )
    return str(one_of("environment", value, ENVIRONMENTS))


def region_of(values: Mapping[str, Any]) -> str:
    """``aws:region`` of a stack's config, checked: required, a region name, one the region facts know; else refused naming ``aws:region``."""
    region = values.get("aws:region")
    if region in (None, ""):
        raise SettingsError("aws:region", None, "it is required: the AWS region of the stack, e.g. us-east-2 (pulumi config set aws:region us-east-2)")
    if not KNOWN_REGION.fullmatch(str(region)):
        near = region_facts.nearest_region(str(region))
        raise SettingsError("aws:region", region, f"expected an AWS region name such as us-east-1, us-west-2 or eu-north-1{f'; did you mean {near}?' if near else ''}")
    problem = region_facts.unknown_region(str(region))
    if problem:
        raise SettingsError("aws:region", region, problem)
    return str(region)


def from_values(values: Mapping[str, Any], secret_keys: Iterable[str] = (), *, project: str = PROJECT, stack: str = "dev") -> StackSettings:
    """Validate raw config (``{"ns:key": value}``) into :class:`StackSettings`.

    Raises :class:`SettingsError` on the first mistake found.
    """
    check_stack_name(stack)
    _unknown_keys(values, secret_keys)
    r = Reader(values, secret_keys)
    warnings: list[str] = []

    environment = _environment(r.get("environment"))
    prod = environment == "prod"
    region = region_of(values)

    serving_platform = one_of("servingPlatform", r.get("servingPlatform"), SERVING_PLATFORMS)
    network = validate_network(r, region)
    cluster = validate_cluster(r, prod, network)
    capacity = validate_capacity(r, prod, hyperpod=serving_platform == "hyperpod")
    plugins = validate_plugins(r)
    serving = validate_serving(r, prod, region, capacity, network, warnings)
    monitoring = validate_monitoring(r)
    if monitoring.prometheus_operator:
        serving = dataclasses.replace(serving, service_monitor_enabled=True)
    deployment = validate_deployment(r, region, network, cluster, serving, prod)
    time_to_serve, serving = validate_time_to_serve(r, prod, region, capacity, serving, warnings, default_prefix=pull_through_prefix(project, stack),
        system_disk_gib=cluster.system_node_disk_gib,
    )
    hyperpod = validate_hyperpod(r, serving_platform, region, cluster, capacity, serving, hyperpod_cluster_name(project, stack), warnings)
    warnings.extend(no_effect.no_effect_warnings(r.get, lambda names: changed_keys(r, names)))
    warnings.extend(region_facts.region_warnings(region, capacity.instance_type))
    unpinned = region_facts.unpinned_weights(serving.contract.weights.s3_uri, serving.contract.weights.revision)
    if unpinned and prod:
        raise SettingsError(full_key("weightsS3Uri"), serving.contract.weights.s3_uri, f"prod requires a pinned prefix: {unpinned}")
    if unpinned:
        warnings.append(f"{full_key('weightsS3Uri')}: {unpinned} (refused in prod)")

    return StackSettings(
        project=project,
        stack=stack,
        environment=environment,
        region=region,
        network=network,
        cluster=cluster,
        capacity=capacity,
        plugins=plugins,
        serving=serving,
        deployment=deployment,
        warnings=tuple(warnings),
        monitoring=monitoring,
        serving_platform=serving_platform,
        hyperpod=hyperpod,
        time_to_serve=time_to_serve,
    )


__all__ = [
    "ECR_PREFIX_MAX",
    "EKS_CLUSTER_NAME_MAX",
    "EKS_ONLY_KEYS",
    "ENVIRONMENTS",
    "HYPERPOD_ONLY_KEYS",
    "INSTANCE_TYPE_RE",
    "NAMESPACES_PASSED_THROUGH",
    "SAGEMAKER_NAME_MAX",
    "SECRET_PLACEHOLDER_PREFIX",
    "SERVING_PLATFORMS",
    "STACK_NAME",
    "STACK_NAME_ACCEPTED",
    "CapacitySettings",
    "ClusterSettings",
    "DeploymentSettings",
    "GpuPluginSettings",
    "HyperPodSettings",
    "MonitoringSettings",
    "NetworkSettings",
    "Secret",
    "ServingSettings",
    "SettingsError",
    "StackSettings",
    "TimeToServeSettings",
    "aws_provider_keys",
    "check_stack_name",
    "cluster_name",
    "from_pulumi",
    "from_values",
    "hyperpod_cluster_name",
    "load_settings",
    "load_stack",
    "pull_through_prefix",
    "read_stack_file",
    "region_of",
]
