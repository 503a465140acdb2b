"""Which ``vllm serve`` flags the contract owns, and how to recognise one in an argument.

The one home of the rule "extra engine arguments may not repeat a flag the library
sets". vLLM's parser (``vllm/engine/arg_utils.py``, ``EngineArgs.add_cli_args``;
``FlexibleArgumentParser`` in ``vllm/utils``) accepts the same flag several ways, and
each must be recognised or a duplicate slips through and only breaks the engine after
the weights are on the node:

* short aliases: ``-tp`` is ``--tensor-parallel-size``, ``-pp`` is ``--pipeline-parallel-size``;
* underscores: ``--tensor_parallel_size`` is normalised to dashes;
* ``--flag=value``;
* the negation of a boolean flag: ``--no-enable-prefix-caching``.

An item holding a flag *and* its value separated by a space (``"--tensor-parallel-size 4"``)
reaches vLLM as one unknown argument; it is refused with the fix (two items, or ``=``).
"""

from __future__ import annotations

import re
from types import MappingProxyType

ALIASES = MappingProxyType({"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size"})
"""Short aliases of flags the library manages (vLLM ``EngineArgs.add_cli_args``, parallel group)."""

MANAGED_FLAGS = MappingProxyType(
    {
        "--model": "weights.source",
        "--revision": "weights.revision",
        "--tokenizer-revision": "weights.revision",
        "--code-revision": "weights.revision",
        "--download-dir": "weights.mount_path",
        "--load-format": "engine.load_format",
        "--served-model-name": "api.served_model_name",
        "--host": "api.port",
        "--port": "api.port",
        "--api-key": "the API key Secret (VLLM_API_KEY): on the command line the key would sit in the pod spec",
        "--tool-call-parser": "api.tool_call_parser",
        "--enable-auto-tool-choice": "api.tool_call_parser",
        "--reasoning-parser": "api.reasoning_parser",
        "--tensor-parallel-size": "engine.tensor_parallel_size",
        "--pipeline-parallel-size": "engine.pipeline_parallel_size",
        "--gpu-memory-utilization": "engine.gpu_memory_utilization",
        "--max-model-len": "engine.max_model_len",
        "--kv-cache-dtype": "engine.kv_cache_dtype",
        "--moe-backend": "engine.moe_backend",
        "--trust-remote-code": "always on: Kimi K3's model code needs it",
        "--enable-prefix-caching": "always on",
        "--enable-flashinfer-autotune": "always off: autotuning adds minutes to every start",
    }
)
"""Every flag the serving contract sets, with the contract field that sets it (or why it is fixed)."""

_FLAG = re.compile(r"^(-{1,2})([A-Za-z][\w-]*)")


def flag_of(item: str) -> str | None:
    """The canonical long flag an argument item names (``None`` for a value item).

    ``-tp`` → ``--tensor-parallel-size``; ``--max_model_len=4096`` → ``--max-model-len``;
    ``--no-enable-prefix-caching`` → ``--enable-prefix-caching``.
    """
    match = _FLAG.match(item)
    if not match:
        return None
    dashes, name = match.groups()
    flag = f"{dashes}{name}"
    if flag in ALIASES:
        return ALIASES[flag]
    if dashes == "-":
        return flag
    flag = "--" + name.replace("_", "-")
    if flag.startswith("--no-") and f"--{flag[5:]}" in MANAGED_FLAGS:
        return f"--{flag[5:]}"
    return flag


def extra_args_problem(extra_args: tuple[str, ...]) -> str | None:
    """Why ``extra_args`` cannot be appended to the contract's arguments, or ``None``.

    Refuses an item that names a managed flag (in any spelling) and an item that joins
    a flag and its value with whitespace.
    """
    for item in extra_args:
        flag = flag_of(item)
        if flag is None:
            continue
        head = item.split("=", 1)[0]
        written = head.split()[0]
        if flag in MANAGED_FLAGS:
            spelled = "" if written == flag else f" ({written} is {flag})"
            return f"{item!r}: {flag}{spelled} is set by the contract ({MANAGED_FLAGS[flag]}); accepted: any other vLLM flag"
        if any(ch.isspace() for ch in head):
            return f"{item!r} holds a flag and its value in one item; write them as two items ({written!r}, {head.split(None, 1)[1]!r}) or as {written}=VALUE"
    return None


__all__ = ["ALIASES", "MANAGED_FLAGS", "extra_args_problem", "flag_of"]
