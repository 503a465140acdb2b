"""kimi-k3-aws: Pulumi components that deploy Kimi K3 on AWS.

Import the components into your own Pulumi program::

    from components import Network, NetworkArgs, Cluster, ClusterArgs, CapacityBlockNodeGroup, ...

Every component is a ``pulumi.ComponentResource`` (type ``kimi-k3:index:<Name>``)
taking a typed ``<Name>Args`` dataclass; none reads stack config. Attributes are
loaded lazily so that ``kimi-k3 capacity`` / ``verify`` do not import the Pulumi
providers.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Network": "components.network",
    "NetworkArgs": "components.network",
    "Cluster": "components.cluster",
    "ClusterArgs": "components.cluster",
    "CapacityBlockNodeGroup": "components.capacity_block",
    "CapacityBlockNodeGroupArgs": "components.capacity_block",
    "CapacityBlockFacts": "components.capacity.facts",
    "lookup_capacity_block": "components.capacity.lookup",
    "BlockNeeds": "components.capacity.assessment",
    "assess": "components.capacity.assessment",
    "verdict": "components.capacity.assessment",
    "GpuNodePlugins": "components.gpu_plugins",
    "GpuNodePluginsArgs": "components.gpu_plugins",
    "NvidiaDevicePluginArgs": "components.gpu_plugins",
    "EfaDevicePluginArgs": "components.gpu_plugins",
    "DcgmExporterArgs": "components.gpu_plugins",
    "LoadBalancerController": "components.load_balancer_controller",
    "LoadBalancerControllerArgs": "components.load_balancer_controller",
    "LwsController": "components.lws_controller",
    "LwsControllerArgs": "components.lws_controller",
    "PodIdentityRole": "components.pod_identity",
    "PodIdentityRoleArgs": "components.pod_identity",
    "VllmServer": "components.serving.vllm",
    "VllmServerArgs": "components.serving.vllm",
    "VllmLeaderWorkerSet": "components.serving.lws",
    "VllmLeaderWorkerSetArgs": "components.serving.lws",
    "HyperPodInferenceEndpoint": "components.serving.hyperpod",
    "HyperPodInferenceEndpointArgs": "components.serving.hyperpod",
    "render_inference_endpoint_config": "components.serving.hyperpod",
    "ServingContract": "components.serving.contracts",
    "ImageContract": "components.serving.contracts",
    "WeightsContract": "components.serving.contracts",
    "ApiContract": "components.serving.contracts",
    "EngineProfile": "components.serving.contracts",
    "DeliveryCheck": "components.delivery_check",
    "DeliveryCheckArgs": "components.delivery_check",
    "ServingMonitoring": "components.observability.monitoring",
    "ServingMonitoringArgs": "components.observability.monitoring",
    "Platform": "components.platform",
    "StackSettings": "components.settings",
    "UserError": "components.errors",
    "SettingsError": "components.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'components' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return __all__
