"""Serving on EKS: the three contracts (image, weights, API), the engine profiles, the vLLM Deployment / LeaderWorkerSet
components with their API proxy, drain and NLB (`kimi-k3 verify`'s checks live in :mod:`kimi_k3.bringup.verify`; the HyperPod rendering of the same
contract is :mod:`kimi_k3.hyperpod.endpoint`).

Attributes load lazily: the contracts are pure Python (the settings layer builds them),
the components pull in the Kubernetes provider only when used.
"""

from __future__ import annotations

from kimi_k3.core.lazy_exports import lazy_exports

_EXPORTS = {
    "ApiContract": "kimi_k3.serving.contracts",
    "ContractError": "kimi_k3.serving.contracts",
    "EngineProfile": "kimi_k3.serving.contracts",
    "EXPOSURES": "kimi_k3.serving.contracts",
    "ImageContract": "kimi_k3.serving.contracts",
    "ServingContract": "kimi_k3.serving.contracts",
    "WeightsContract": "kimi_k3.serving.contracts",
    "contract_summary": "kimi_k3.serving.contracts",
    "VllmLeaderWorkerSet": "kimi_k3.serving.lws",
    "VllmLeaderWorkerSetArgs": "kimi_k3.serving.lws",
    "VllmServer": "kimi_k3.serving.vllm",
    "VllmServerArgs": "kimi_k3.serving.vllm",
    "ServingFront": "kimi_k3.serving.front",
}

__getattr__, __dir__, __all__ = lazy_exports("kimi_k3.serving", _EXPORTS)
