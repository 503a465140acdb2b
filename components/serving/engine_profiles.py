"""The catalog's engine profiles: vLLM's Kimi K3 recipe, per GPU generation and layout.

Source: vllm-project/recipes ``models/moonshotai/Kimi-K3.yaml`` at commit
:data:`RECIPE_COMMIT` (copied unchanged into ``tests/data/vllm-recipes-Kimi-K3.yaml``;
``tests/test_engine_profiles.py`` recomputes every profile below from that file with the
recipe's own composition order: base args, features, strategy args, then the hardware
overrides, last flag wins). The recipe's ``min_vllm_version`` is 0.27.1; every flag and
variable here is checked against that release (``tests/data/vllm-0.27.1-names.json``).

Two layouts serve Kimi K3 on the instance types the catalog knows:

* ``single_node_tp`` (the recipe's default strategy): one node, TP=8. Blackwell
  (p6-b300; the B200's 1,440 GB cannot hold the 1.56 TB checkpoint and its KV cache, see
  :func:`kimi_k3.core.catalog.nodes_to_hold_model`);
* ``multi_node_tp_pp``: TP=8 within a node × PP across nodes. The recipe's
  2-node profile: Blackwell (p6-b200, or p6-b300 for throughput) and, with the recipe's
  Hopper overrides, p5en (8×H200).

What a profile holds: the defaults of the engine settings the stack exposes
(``gpuMemoryUtilization``, ``maxModelLen``, ``kvCacheDtype``), the fixed choices
(load format, MoE backend), the recipe's tuning flags (which ``vllmExtraArgs`` may
override), the recipe's environment (which ``servingEnv`` may override), and whether the
opt-in decode context parallelism applies. Deviations from the recipe are written in
:attr:`EngineRecipe.deviations`, with the reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import MappingProxyType

from kimi_k3.core import catalog
from kimi_k3.errors import UserError

RECIPE_REPOSITORY = "vllm-project/recipes"
RECIPE_PATH = "models/moonshotai/Kimi-K3.yaml"
RECIPE_COMMIT = "6f19519bb680e870356b72a06d2638d6efc6da70"
"""The recipe file's last change (2026-08-20, "Remove enforce eager in prefill of PD (#828)")."""
RECIPE_SOURCE = f"{RECIPE_REPOSITORY} {RECIPE_PATH} @ {RECIPE_COMMIT[:8]}"
"""How docs and messages cite the recipe."""
MIN_VLLM_VERSION = "0.27.1"
"""The recipe's ``model.min_vllm_version``: the release the flags and variables are checked against."""

GPU_GENERATIONS = MappingProxyType({"B300": "blackwell", "B200": "blackwell", "H200": "hopper"})
"""GPU model (``InstanceType.gpu``) → the recipe's hardware-override family."""

SINGLE_NODE = "single_node_tp"
MULTI_NODE_PP = "multi_node_tp_pp"

FP8_KV_ATTENTION_CONFIG = json.dumps({"use_prefill_query_quantization": True, "mla_prefill_backend": "flashinfer"}, separators=(",", ":"))
"""The ``--attention-config`` the recipe pairs with FP8 KV cache on Blackwell (its "FP8 KV" note and Blackwell override)."""

DCP_SIZE = 8
"""``--decode-context-parallel-size`` of the recipe's DCP feature (it must divide the tensor parallel size)."""
DCP_COMM_BACKEND = "a2a"
"""``--dcp-comm-backend`` of the recipe's DCP feature."""
DCP_TUNING_ARGS = (
    "--attention-backend", "TOKENSPEED_MLA",
    "--attention-config", json.dumps({"use_prefill_query_quantization": True, "mla_prefill_backend": "TRTLLM_RAGGED"}, separators=(",", ":")),
)
"""What the DCP feature pairs with it: the TOKENSPEED_MLA decode backend with TRTLLM_RAGGED MLA prefill under FP8 KV
(it replaces the Blackwell FP8-KV ``--attention-config``)."""


DEFAULT_MAX_NUM_SEQS = 1024
"""vLLM 0.27.1's ``--max-num-seqs`` for the OpenAI API server on a GPU of 70 GiB or more, A100 excepted
(``vllm/engine/arg_utils.py``, ``EngineArgs.get_batch_defaults``): the profile's maximum batch when the recipe sets none."""
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
"""vLLM 0.27.1's ``--max-num-batched-tokens`` there (same function): a batch never holds more tokens."""
VLLM_MAX_CAPTURE_SIZE = 512
"""vLLM 0.27.1 captures CUDA graphs for at most 512 tokens by default (``VllmConfig._set_cudagraph_sizes``)."""


def cudagraph_capture_sizes(max_num_seqs: int = DEFAULT_MAX_NUM_SEQS, max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS) -> tuple[int, ...]:
    """The CUDA graph sizes matched to a profile's maximum batch: vLLM 0.27.1's own spacing (1, 2, 4, then steps of 8 up to 256
    and of 16 above, ``VllmConfig._set_cudagraph_sizes``) up to the maximum batch itself, instead of its default bound of twice
    ``max_num_seqs`` (which pads no decode batch of this profile: a batch never holds more sequences than ``max_num_seqs``).

    Capped at :data:`VLLM_MAX_CAPTURE_SIZE` and ``max_num_batched_tokens``; the cap itself is captured, as vLLM appends
    ``max_num_batched_tokens``.
    """
    cap = min(max_num_seqs, VLLM_MAX_CAPTURE_SIZE, max_num_batched_tokens)
    sizes = {s for s in (1, 2, 4) if s <= cap} | set(range(8, min(cap + 1, 256), 8)) | set(range(256, cap + 1, 16)) | {cap}
    return tuple(sorted(sizes))


def flag_value(args: tuple[str, ...], flag: str) -> str | None:
    """The value after the last ``flag`` (or ``flag=value``) in ``args``; ``None`` when absent."""
    value = None
    for i, item in enumerate(args):
        if item == flag and i + 1 < len(args):
            value = args[i + 1]
        elif item.startswith(flag + "="):
            value = item.split("=", 1)[1]
    return value


@dataclass(frozen=True)
class EngineRecipe:
    """One engine profile of the recipe: GPU generation × layout."""

    name: str
    """``<generation>/<strategy>``, e.g. ``blackwell/single_node_tp``."""
    generation: str
    """``blackwell`` or ``hopper`` (:data:`GPU_GENERATIONS`)."""
    strategy: str
    """The recipe's strategy: :data:`SINGLE_NODE` or :data:`MULTI_NODE_PP`."""
    gpu_memory_utilization: float
    """Default ``--gpu-memory-utilization`` (``gpuMemoryUtilization``)."""
    max_model_len: int
    """Default ``--max-model-len`` (``maxModelLen``)."""
    kv_cache_dtype: str
    """Default ``--kv-cache-dtype`` (``kvCacheDtype``)."""
    load_format: str
    """``--load-format``."""
    moe_backend: str
    """``--moe-backend`` (``auto`` is vLLM's default, what the recipe leaves unset on Blackwell)."""
    tuning_args: tuple[str, ...]
    """The recipe's other flags for this profile, flag then value; ``vllmExtraArgs`` may override each."""
    env: tuple[tuple[str, str], ...]
    """The recipe's environment for this profile (``VLLM_ENGINE_READY_TIMEOUT_S`` excepted: ``engineReadyTimeoutSeconds``
    sets it, default 3600 as the recipe); ``servingEnv`` may override each."""
    fp8_kv_attention_config: bool
    """Emit :data:`FP8_KV_ATTENTION_CONFIG` when the KV cache is FP8 (the recipe's Blackwell pairing)."""
    decode_context_parallel: bool
    """Whether the recipe's decode context parallelism opt-in applies (``single_node_tp`` only)."""
    deviations: tuple[str, ...] = ()
    """Where this profile departs from the recipe's composition, and why."""

    def tuning_for(self, kv_cache_dtype: str, decode_context_parallel: bool = False) -> tuple[str, ...]:
        """The tuning flags for a KV cache dtype and the DCP opt-in (whose attention flags replace the FP8-KV pairing)."""
        if decode_context_parallel:
            return (*self.tuning_args, *DCP_TUNING_ARGS)
        if self.fp8_kv_attention_config and kv_cache_dtype.startswith("fp8"):
            return (*self.tuning_args, "--attention-config", FP8_KV_ATTENTION_CONFIG)
        return self.tuning_args


_BLACKWELL_ENV = (
    ("VLLM_ALLREDUCE_USE_FLASHINFER", "1"),
    ("VLLM_USE_V2_MODEL_RUNNER", "1"),
    ("VLLM_USE_RUST_FRONTEND", "1"),
)
_PP_ENV = (
    ("NCCL_CUMEM_ENABLE", "1"),
    # The recipe: "one long agentic request can hold a PP stage past vLLM's 300 s model-execution default".
    ("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "1800"),
)

def _blackwell(
    strategy: str, gpu_memory_utilization: float, *, tuning_args: tuple[str, ...], env: tuple[tuple[str, str], ...],
    decode_context_parallel: bool,
) -> EngineRecipe:
    """A Blackwell profile: what the recipe sets for every Blackwell layout (1M context, FP8 KV with its
    attention config, fastsafetensors, vLLM's own MoE backend) with the layout's own values."""
    return EngineRecipe(
        name=f"blackwell/{strategy}",
        generation="blackwell",
        strategy=strategy,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=1_048_576,
        kv_cache_dtype="fp8",
        load_format="fastsafetensors",
        moe_backend="auto",
        tuning_args=tuning_args,
        env=env,
        fp8_kv_attention_config=True,
        decode_context_parallel=decode_context_parallel,
    )


RECIPES = MappingProxyType(
    {
        r.name: r
        for r in (
            _blackwell(SINGLE_NODE, 0.95, tuning_args=(), env=_BLACKWELL_ENV, decode_context_parallel=True),
            # The strategy's 0.90: the flashinfer TRTLLM MXFP4 MoE kernel's workspace OOMs a B200 at 0.95.
            _blackwell(
                MULTI_NODE_PP, 0.90, tuning_args=("--max-num-batched-tokens", "8192"), env=(*_PP_ENV, *_BLACKWELL_ENV),
                decode_context_parallel=False,
            ),
            EngineRecipe(
                name=f"hopper/{MULTI_NODE_PP}",
                generation="hopper",
                strategy=MULTI_NODE_PP,
                gpu_memory_utilization=0.90,
                max_model_len=32_768,
                kv_cache_dtype="auto",
                load_format="auto",
                moe_backend="marlin",
                tuning_args=(
                    "--max-num-seqs", "5",
                    "--disable-custom-all-reduce",
                    "--max-num-batched-tokens", "4096",
                    "--attention-backend", "FLASHMLA",
                ),
                env=(
                    *_PP_ENV,
                    ("VLLM_USE_V2_MODEL_RUNNER", "1"),
                    ("VLLM_USE_RUST_FRONTEND", "1"),
                    ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
                ),
                fp8_kv_attention_config=False,
                decode_context_parallel=False,
                deviations=(
                    "--gpu-memory-utilization 0.90, not the recipe's 0.97: the multi_node_tp_pp strategy sets 0.90 but its "
                    "args emit before the Hopper override, whose 0.97 wins the recipe's last-flag-wins dedupe; 0.90 leaves "
                    "room for the TRTLLM MoE workspace the strategy's comment describes and for NCCL buffers across two nodes",
                    "--max-num-batched-tokens 4096: the Hopper override's value, which wins over the strategy's 8192 in the recipe's dedupe (kept)",
                    "--enable-prefix-caching and --moe-backend are set as on every profile (the AWS deployment guide's "
                    "reference flags); the Hopper override sets --moe-backend marlin and no prefix-caching flag",
                ),
            ),
        )
    }
)
"""Every profile, by name."""


def recipe_for(instance: catalog.InstanceType, nodes_per_replica: int) -> EngineRecipe:
    """The recipe profile of a replica of ``nodes_per_replica`` ``instance`` nodes.

    :raises UserError: when the recipe has no profile for that GPU and layout (e.g. one
        p5en node, which cannot hold the model).
    """
    generation = GPU_GENERATIONS.get(instance.gpu)
    strategy = SINGLE_NODE if nodes_per_replica == 1 else MULTI_NODE_PP
    recipe = RECIPES.get(f"{generation}/{strategy}")
    if recipe is None:
        known = ", ".join(RECIPES)
        raise UserError(f"engine profile: no recipe profile for {instance.gpu} ({instance.name}) with {nodes_per_replica} node(s) per replica; profiles: {known} ({RECIPE_SOURCE})")
    return recipe


__all__ = [
    "DCP_COMM_BACKEND",
    "DCP_SIZE",
    "DCP_TUNING_ARGS",
    "DEFAULT_MAX_NUM_BATCHED_TOKENS",
    "DEFAULT_MAX_NUM_SEQS",
    "FP8_KV_ATTENTION_CONFIG",
    "GPU_GENERATIONS",
    "MIN_VLLM_VERSION",
    "MULTI_NODE_PP",
    "RECIPES",
    "RECIPE_COMMIT",
    "RECIPE_SOURCE",
    "SINGLE_NODE",
    "VLLM_MAX_CAPTURE_SIZE",
    "EngineRecipe",
    "cudagraph_capture_sizes",
    "flag_value",
    "recipe_for",
]
