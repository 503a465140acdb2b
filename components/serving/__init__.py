"""Serving: the three contracts (image, weights, API), the vLLM Deployment / LeaderWorkerSet components and the HyperPod rendering.

Attributes load lazily: the contracts are pure Python (the settings layer builds them),
the components pull in the Kubernetes provider only when used.
"""

from __future__ import annotations

import importlib
from typing import Any

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

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'components.serving' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return __all__
