"""Serving: the three contracts (image, weights, API) and the vLLM server component."""

from components.serving.contracts import (
    ApiContract,
    EngineProfile,
    ImageContract,
    ServingContract,
    WeightsContract,
    contract_summary,
)
from components.serving.vllm import EXPOSURES, VllmServer, VllmServerArgs

__all__ = [
    "ApiContract",
    "EngineProfile",
    "EXPOSURES",
    "ImageContract",
    "ServingContract",
    "VllmServer",
    "VllmServerArgs",
    "WeightsContract",
    "contract_summary",
]
