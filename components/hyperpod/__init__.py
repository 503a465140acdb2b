"""The SageMaker HyperPod path: the cluster on a training plan, the Inference Operator, the endpoint, its routing.

- :mod:`~kimi_k3.hyperpod.cluster`: a HyperPod cluster orchestrated by the stack's EKS cluster;
- :mod:`~kimi_k3.hyperpod.inference_operator`: the Inference Operator as EKS add-ons;
- :mod:`~kimi_k3.hyperpod.endpoint`: the serving contract rendered as an ``InferenceEndpointConfig``;
- :mod:`~kimi_k3.hyperpod.routing`: the operator's routing and KV-cache settings;
- :mod:`~kimi_k3.hyperpod.rules`: what SageMaker enforces when a cluster is created (pure);
- :mod:`~kimi_k3.hyperpod.training_plans`, :mod:`~kimi_k3.hyperpod.training_plan_check`: Flexible Training Plans
  with boto3, and the stack's plan read and checked at preview.

Nothing is imported by this package's ``__init__`` eagerly: only hyperpod stacks load ``pulumi-aws-native``.
"""

from __future__ import annotations

from kimi_k3.core.lazy_exports import lazy_exports

_EXPORTS = {
    "HyperPodCluster": "kimi_k3.hyperpod.cluster",
    "HyperPodClusterArgs": "kimi_k3.hyperpod.cluster",
    "HyperPodInferenceOperator": "kimi_k3.hyperpod.inference_operator",
    "HyperPodInferenceOperatorArgs": "kimi_k3.hyperpod.inference_operator",
    "HyperPodInferenceEndpoint": "kimi_k3.hyperpod.endpoint",
    "HyperPodInferenceEndpointArgs": "kimi_k3.hyperpod.endpoint",
    "render_inference_endpoint_config": "kimi_k3.hyperpod.endpoint",
}

__getattr__, __dir__, __all__ = lazy_exports("kimi_k3.hyperpod", _EXPORTS)
