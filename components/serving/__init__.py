"""Serving: the three contracts (image, weights, API), the vLLM Deployment / LeaderWorkerSet components and the HyperPod rendering.

Attributes load lazily: the contracts are pure Python (the settings layer builds them),
the components pull in the Kubernetes provider only when used.
"""

from __future__ import annotations

from components.lazy_exports import lazy_exports

_EXPORTS = {
    "ApiContract": "components.serving.contracts",
    "ContractError": "components.serving.contracts",
    "EngineProfile": "components.serving.contracts",
    "EXPOSURES": "components.serving.contracts",
    "ImageContract": "components.serving.contracts",
    "ServingContract": "components.serving.contracts",
    "WeightsContract": "components.serving.contracts",
    "contract_summary": "components.serving.contracts",
    "HyperPodInferenceEndpoint": "components.serving.hyperpod",
    "HyperPodInferenceEndpointArgs": "components.serving.hyperpod",
    "render_inference_endpoint_config": "components.serving.hyperpod",
    "VllmLeaderWorkerSet": "components.serving.lws",
    "VllmLeaderWorkerSetArgs": "components.serving.lws",
    "VllmServer": "components.serving.vllm",
    "VllmServerArgs": "components.serving.vllm",
}

__getattr__, __dir__, __all__ = lazy_exports("components.serving", _EXPORTS)
