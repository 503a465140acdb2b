"""vLLM model loader ``kimi_k3_pipelined``: the weights read in manifest order, each shard once the sync has verified it.

vLLM 0.27.1 ``vllm/model_executor/model_loader/__init__.py`` (the wheel's file, sha256 ``139a92f9…``, the one
``tests/data/vllm-0.27.1-names.json`` records) has ``register_model_loader(load_format)``: a decorator that adds a
``BaseModelLoader`` subclass to the load formats ``get_model_loader`` resolves, and ``LoadConfig.load_format`` is
``str | LoadFormats`` (``vllm/config/load.py``), so ``--load-format kimi_k3_pipelined`` passes once the class is
registered. vLLM registers it in every process that loads (API server, engine core, each worker) by calling the
``vllm.general_plugins`` entry points (``vllm/plugins/__init__.py`` ``load_general_plugins``; all of them while
``VLLM_PLUGINS`` is unset, which the contract leaves so): :func:`register` is that entry point. The pod finds it without
a pip install: :mod:`kimi_k3.weights.pod_files` ships a ``*.dist-info`` directory with its ``entry_points.txt`` next to
the package on ``PYTHONPATH``, which ``importlib.metadata`` reads like any installed distribution.

The loader is vLLM's ``DefaultModelLoader`` with one method replaced, ``get_all_weights`` (what ``load_weights`` hands to
``model.load_weights``): instead of the shards ``_prepare_weights`` globs when the load starts, it takes them from
:func:`kimi_k3.weights.pipelined_load.verified_groups` and reads each group with vLLM's own iterator of the engine
profile's format (:data:`INNER_FORMAT_ENV`: ``fastsafetensors``, ``instanttensor`` or ``safetensors``/``auto``), so the
reader is the one the profile chose; only the order and the waiting are ours. ``fastsafetensors`` spreads a call's files
over the tensor-parallel ranks, so its groups hold one shard per rank and are the same on every rank.

Imports vLLM and torch only inside :func:`register` (the engine image has them; the stack's own tests do not).
"""

from __future__ import annotations

import os
import time

from kimi_k3.weights import WeightsError
from kimi_k3.weights.pipelined_load import verified_groups

LOAD_FORMAT = "kimi_k3_pipelined"
"""``--load-format`` of this loader (vLLM lowercases the flag's value: ``LoadConfig._lowercase_load_format``)."""
ENTRY_POINT = "kimi_k3_pipelined_load"
"""Name of the ``vllm.general_plugins`` entry point (what ``VLLM_PLUGINS`` would list)."""
INNER_FORMAT_ENV = "KIMI_K3_INNER_LOAD_FORMAT"
"""The engine profile's own load format, whose vLLM iterator reads each group (the loader's extra config allows no key of ours:
``DefaultModelLoader.__init__`` refuses keys other than ``enable_multithread_load``, ``num_threads``, ``enable_weights_track``)."""
MANIFEST_ENV = "KIMI_K3_WEIGHTS_MANIFEST"
"""The sha256 manifest's file name in the weights directory (the contract's ``weights.sha256_manifest``)."""
TIMEOUT_ENV = "KIMI_K3_PIPELINED_TIMEOUT_S"
"""Longest wait for one shard's marker, seconds (default 3600)."""
INNER_FORMATS = ("auto", "safetensors", "fastsafetensors", "instanttensor")
"""Inner formats this loader reads with (vLLM 0.27.1 ``weight_utils``: ``safetensors_weights_iterator``,
``fastsafetensors_weights_iterator``, ``instanttensor_weights_iterator``)."""


def group_size(inner_format: str, world_size: int) -> int:
    """Shards per group: one per rank for a collective reader (fastsafetensors), else one (each rank reads every shard)."""
    if inner_format not in INNER_FORMATS:
        raise WeightsError(f"pipelined load: {INNER_FORMAT_ENV} {inner_format!r} is not accepted; accepted: {', '.join(INNER_FORMATS)}")
    return max(1, world_size) if inner_format == "fastsafetensors" else 1


def register() -> None:
    """The ``vllm.general_plugins`` entry point: register :data:`LOAD_FORMAT` (idempotent; vLLM may call it more than once)."""
    import torch
    from vllm.model_executor.model_loader import default_loader, register_model_loader, weight_utils

    class PipelinedModelLoader(default_loader.DefaultModelLoader):
        """vLLM's default loader reading each shard once the node sync has verified it (:mod:`kimi_k3.weights.vllm_loader`)."""

        def download_model(self, model_config) -> None:
            """Nothing to download: the node sync writes the weights."""

        def get_all_weights(self, model_config, model):
            """``(name, tensor)`` of every shard in manifest order, each group read once verified."""
            inner = os.environ.get(INNER_FORMAT_ENV, "safetensors")
            world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
            size = group_size(inner, world)
            tqdm = self.load_config.use_tqdm_on_load
            if self.counter_before_loading_weights == 0.0:  # type: ignore[has-type]  # DefaultModelLoader's field (vLLM not installed here)
                self.counter_before_loading_weights = time.perf_counter()
            groups = verified_groups(model_config.model, size, os.environ.get(MANIFEST_ENV, "SHA256SUMS"), timeout_s=float(os.environ.get(TIMEOUT_ENV, "3600")))
            for group in groups:
                if inner == "fastsafetensors":
                    yield from weight_utils.fastsafetensors_weights_iterator(group, tqdm)
                elif inner == "instanttensor":
                    yield from weight_utils.instanttensor_weights_iterator(group, tqdm)
                else:
                    yield from weight_utils.safetensors_weights_iterator(
                        group, tqdm, self.load_config.safetensors_load_strategy, local_expert_ids=self.local_expert_ids,
                    )

    register_model_loader(LOAD_FORMAT)(PipelinedModelLoader)


def entry_points_txt() -> str:
    """``entry_points.txt`` of the shipped ``*.dist-info``: :func:`register` under ``vllm.general_plugins``."""
    return f"[vllm.general_plugins]\n{ENTRY_POINT} = kimi_k3.weights.vllm_loader:register\n"


DIST_INFO = "kimi_k3_pipelined_load-1.0.dist-info"
"""The distribution directory shipped beside the package (``importlib.metadata`` finds ``*.dist-info`` on ``sys.path``)."""
METADATA = "Metadata-Version: 2.1\nName: kimi-k3-pipelined-load\nVersion: 1.0\nSummary: kimi-k3-aws's pipelined vLLM loader (kimi_k3.weights.vllm_loader)\n"
"""``METADATA`` of :data:`DIST_INFO` (name and version are what ``importlib.metadata`` requires)."""


__all__ = [
    "DIST_INFO", "ENTRY_POINT", "INNER_FORMATS", "INNER_FORMAT_ENV", "LOAD_FORMAT", "MANIFEST_ENV", "METADATA", "TIMEOUT_ENV",
    "entry_points_txt", "group_size", "register",
]
