"""kimi-k3-aws: Pulumi components that deploy Kimi K3 on AWS.

Import the components into your own Pulumi program::

    from components import Network, NetworkArgs, Cluster, ClusterArgs, CapacityBlockNodeGroup, ...

Every component is a ``pulumi.ComponentResource`` (type ``kimi-k3:index:<Name>``)
taking a typed ``<Name>Args`` dataclass; none reads stack config. Attributes are
loaded lazily so that ``kimi-k3 capacity`` / ``verify`` do not import the Pulumi
providers.
"""

from __future__ import annotations

from components.lazy_exports import lazy_exports

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

__getattr__, __dir__, __all__ = lazy_exports("components", _EXPORTS)
