"""Serving: the three contracts (image, weights, API), the vLLM Deployment / LeaderWorkerSet components and the HyperPod rendering."""

from components.serving.contracts import (
    ApiContract,
    EngineProfile,
    ImageContract,
    ServingContract,
    WeightsContract,
    contract_summary,
)
from components.serving.hyperpod import HyperPodInferenceEndpoint, HyperPodInferenceEndpointArgs, render_inference_endpoint_config
from components.serving.lws import VllmLeaderWorkerSet, VllmLeaderWorkerSetArgs
from components.serving.vllm import EXPOSURES, VllmServer, VllmServerArgs

__all__ = [
    "ApiContract",
    "EngineProfile",
    "EXPOSURES",
    "HyperPodInferenceEndpoint",
    "HyperPodInferenceEndpointArgs",
    "ImageContract",
    "ServingContract",
    "VllmLeaderWorkerSet",
    "VllmLeaderWorkerSetArgs",
    "VllmServer",
    "VllmServerArgs",
    "WeightsContract",
    "contract_summary",
    "render_inference_endpoint_config",
]
