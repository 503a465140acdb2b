"""kimi-k3-aws: Pulumi components that deploy Kimi K3 on AWS.

Import the components into your own Pulumi program::

    from kimi_k3 import Network, NetworkArgs, Cluster, ClusterArgs, CapacityBlockNodeGroup, ...

Every component is a ``pulumi.ComponentResource`` (type ``kimi-k3:index:<Name>``)
taking a typed ``<Name>Args`` dataclass; none reads stack config. This module exports
each public component with its args class, the types those args take (the serving
contracts, the Capacity Block record and its look-up and check) and the errors a
component raises; nothing else. Attributes are loaded lazily so that ``kimi-k3
capacity`` / ``verify`` do not import the Pulumi providers.

The package's source folder is ``components/`` and its import name is ``kimi_k3``
(docs/architecture.md says why): importing it under the folder's name would load a
second copy of every module, whose errors the first copy's handlers do not catch, so
that is refused.
"""

from __future__ import annotations

if __name__ != "kimi_k3":
    raise ImportError(f"the kimi-k3-aws library is imported as kimi_k3, not {__name__} (components/ is only its source folder; see docs/architecture.md)")

from kimi_k3.core.lazy_exports import lazy_exports

_EXPORTS = {
    "Network": "kimi_k3.network.vpc",
    "NetworkArgs": "kimi_k3.network.vpc",
    "ExistingNetworkArgs": "kimi_k3.network.vpc",
    "Cluster": "kimi_k3.cluster.eks",
    "ClusterArgs": "kimi_k3.cluster.eks",
    "CapacityBlockNodeGroup": "kimi_k3.capacity.node_group",
    "CapacityBlockNodeGroupArgs": "kimi_k3.capacity.node_group",
    "CapacityBlockFacts": "kimi_k3.capacity.facts",
    "lookup_capacity_block": "kimi_k3.capacity.lookup",
    "BlockNeeds": "kimi_k3.capacity.assessment",
    "assess": "kimi_k3.capacity.assessment",
    "verdict": "kimi_k3.capacity.assessment",
    "GpuNodePlugins": "kimi_k3.addons.gpu_plugins",
    "GpuNodePluginsArgs": "kimi_k3.addons.gpu_plugins",
    "NvidiaDevicePluginArgs": "kimi_k3.addons.gpu_plugins",
    "EfaDevicePluginArgs": "kimi_k3.addons.gpu_plugins",
    "DcgmExporterArgs": "kimi_k3.addons.gpu_plugins",
    "LoadBalancerController": "kimi_k3.addons.load_balancer_controller",
    "LoadBalancerControllerArgs": "kimi_k3.addons.load_balancer_controller",
    "LwsController": "kimi_k3.addons.lws_controller",
    "LwsControllerArgs": "kimi_k3.addons.lws_controller",
    "PrometheusOperator": "kimi_k3.addons.prometheus_operator",
    "PrometheusOperatorArgs": "kimi_k3.addons.prometheus_operator",
    "DeployRunner": "kimi_k3.cluster.deploy_runner",
    "DeployRunnerArgs": "kimi_k3.cluster.deploy_runner",
    "PodIdentityRole": "kimi_k3.cluster.pod_identity",
    "PodIdentityRoleArgs": "kimi_k3.cluster.pod_identity",
    "VllmServer": "kimi_k3.serving.vllm",
    "VllmServerArgs": "kimi_k3.serving.vllm",
    "ServingFront": "kimi_k3.serving.front",
    "VllmLeaderWorkerSet": "kimi_k3.serving.lws",
    "VllmLeaderWorkerSetArgs": "kimi_k3.serving.lws",
    "HyperPodInferenceEndpoint": "kimi_k3.hyperpod.endpoint",
    "HyperPodInferenceEndpointArgs": "kimi_k3.hyperpod.endpoint",
    "render_inference_endpoint_config": "kimi_k3.hyperpod.endpoint",
    "ServingContract": "kimi_k3.serving.contracts",
    "ImageContract": "kimi_k3.serving.contracts",
    "WeightsContract": "kimi_k3.serving.contracts",
    "ApiContract": "kimi_k3.serving.contracts",
    "EngineProfile": "kimi_k3.serving.contracts",
    "HyperPodCluster": "kimi_k3.hyperpod.cluster",
    "HyperPodClusterArgs": "kimi_k3.hyperpod.cluster",
    "HyperPodInferenceOperator": "kimi_k3.hyperpod.inference_operator",
    "HyperPodInferenceOperatorArgs": "kimi_k3.hyperpod.inference_operator",
    "TimeToServe": "kimi_k3.weights.time_to_serve",
    "TimeToServeArgs": "kimi_k3.weights.time_to_serve",
    "SnapshotAgent": "kimi_k3.weights.snapshot_agent",
    "SnapshotAgentArgs": "kimi_k3.weights.snapshot_agent",
    "WeightsBucket": "kimi_k3.weights.bucket",
    "WeightsBucketArgs": "kimi_k3.weights.bucket",
    "WeightsStagingJob": "kimi_k3.weights.staging_job",
    "WeightsStagingJobArgs": "kimi_k3.weights.staging_job",
    "SecureBucket": "kimi_k3.weights.secure_bucket",
    "SecureBucketArgs": "kimi_k3.weights.secure_bucket",
    "DeliveryCheck": "kimi_k3.capacity.delivery_check",
    "DeliveryCheckArgs": "kimi_k3.capacity.delivery_check",
    "ServingMonitoring": "kimi_k3.observability.monitoring",
    "ServingMonitoringArgs": "kimi_k3.observability.monitoring",
    "Platform": "kimi_k3.stack.platform",
    "StackSettings": "kimi_k3.stack.settings",
    "UserError": "kimi_k3.errors",
    "SettingsError": "kimi_k3.errors",
}

__getattr__, __dir__, __all__ = lazy_exports("kimi_k3", _EXPORTS)
