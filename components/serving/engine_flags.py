"""Which ``vllm serve`` flags and environment variables the contract owns, and how to recognise a flag.

The one home of the rules "extra engine arguments may not repeat a flag the library
sets" and "extra environment variables may not set one the library sets". The engine
profile's tuning flags and environment (the recipe's, :mod:`kimi_k3.serving.engine_profiles`)
are not owned: an extra argument or variable of the same name replaces the profile's.
vLLM's parser (``vllm/engine/arg_utils.py``, ``EngineArgs.add_cli_args``;
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

ALIASES = MappingProxyType(
    {
        "-tp": "--tensor-parallel-size",
        "-pp": "--pipeline-parallel-size",
        "-dcp": "--decode-context-parallel-size",
        "-ac": "--attention-config",
        "-asc": "--api-server-count",
        "-dp": "--data-parallel-size",
        "-n": "--nnodes",
        "-r": "--node-rank",
    }
)
"""Short aliases of flags the library manages, the engine profiles tune, or a component reserves
(vLLM 0.27.1 ``EngineArgs.add_cli_args`` and ``make_arg_parser``; the full alias table is in
``tests/data/vllm-0.27.1-names.json``)."""

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
        "--shutdown-timeout": "the drain: how long vLLM lets in-flight requests finish after SIGTERM",
        "--language-model-only": "api.media (text-only skips the vision encoder and refuses media inputs)",
        "--allowed-media-domains": "api.media_domains",
        "--allowed-local-media-path": "never set: it lets requests read files of the server (vLLM ModelConfig: 'This is a security risk')",
        "--decode-context-parallel-size": "engine.decode_context_parallel",
        "--dcp-comm-backend": "engine.decode_context_parallel",
        "--cudagraph-capture-sizes": "engine.cudagraph_capture_sizes: vLLM's spacing up to the profile's --max-num-seqs (set that instead)",
        "--uds": "api.port: the proxy reaches vLLM over TCP on loopback",
        "--grpc": "api.port: the proxy speaks HTTP to vLLM",
        "--ssl-keyfile": "api.port: the proxy speaks plain HTTP to vLLM on loopback (TLS ends at the load balancer)",
        "--ssl-certfile": "api.port: the proxy speaks plain HTTP to vLLM on loopback (TLS ends at the load balancer)",
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


def flag_groups(args: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """``("--a", "1", "--b", "--c", "x")`` → ``[("--a", ("1",)), ("--b", ()), ("--c", ("x",))]`` (a value never starts with ``-``)."""
    groups: list[tuple[str, tuple[str, ...]]] = []
    for item in args:
        if flag_of(item) is not None:
            groups.append((item, ()))
        elif groups:
            flag, values = groups[-1]
            groups[-1] = (flag, (*values, item))
        else:
            raise ValueError(f"{item!r} is a value without a flag before it")
    return groups


def _named(item: str) -> str:
    """The flag an item names, with a ``--no-`` negation removed (``--no-disable-custom-all-reduce`` names ``--disable-custom-all-reduce``)."""
    flag = flag_of(item) or item
    return f"--{flag[5:]}" if flag.startswith("--no-") else flag


def override_tuning(tuning_args: tuple[str, ...], extra_args: tuple[str, ...]) -> tuple[str, ...]:
    """The profile's tuning flags without those ``extra_args`` name again (the extra argument then decides, once)."""
    named = {_named(item) for item in extra_args if flag_of(item) is not None}
    kept: list[str] = []
    for flag, values in flag_groups(tuning_args):
        if _named(flag) not in named:
            kept += [flag, *values]
    return tuple(kept)


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
"""What a POSIX shell (and Kubernetes' ``env[].name``) accepts as a variable name."""

MANAGED_ENV = MappingProxyType(
    {
        "VLLM_API_KEY": "the API key Secret (secretKeyRef)",
        "HF_TOKEN": "the Hugging Face token Secret (secretKeyRef)",
        "VLLM_ENGINE_READY_TIMEOUT_S": "engine.ready_timeout_s",
        "HF_HUB_OFFLINE": "always 1: the weights are staged before vLLM starts",
        "HF_HUB_CACHE": "weights.mount_path",
        "VLLM_MEDIA_URL_ALLOW_REDIRECTS": "api.media (an allowed domain may not redirect a media fetch elsewhere)",
        "VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION": "always 1 (the AWS deployment guide's reference environment)",
        "VLLM_ENABLE_STARTUP_PLAN": "always 1: the profiled KV-cache size is reused by a later start (docs/engine-profiles.md)",
        "FASTSAFETENSORS_ODIRECT": "engine.load_format: fastsafetensors reads through the page cache (0)",
        "VLLM_FORCE_AOT_LOAD": "set by the engine's start after a compile cache restore (docs/engine-profiles.md)",
        **dict.fromkeys(
            ("HOME", "USER", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "HF_HOME", "VLLM_CACHE_ROOT", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH",
             "DG_JIT_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE", "TRITON_CACHE_AUTOTUNING", "VLLM_NO_USAGE_STATS", "DO_NOT_TRACK"),
            "the pod's writable HOME and caches",
        ),
        **dict.fromkeys(("GROUP_GATE_PORT", "DIST_MASTER_PORT", "GROUP_JOIN_TIMEOUT_S", "VLLM_HOST_IP"), "the LeaderWorkerSet's group setup (the gate, the distributed store, the join timeout, the pod's address)"),
        **dict.fromkeys(("FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "FI_EFA_FORK_SAFE", "FI_EFA_USE_HUGE_PAGE", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"), "the LeaderWorkerSet's EFA setup (its nccl_env overrides it)"),
    }
)
"""Every environment variable the library sets in an engine container, with what sets it."""

MANAGED_ENV_PREFIXES = MappingProxyType({"LWS_": "the LeaderWorkerSet controller (LWS_LEADER_ADDRESS, LWS_GROUP_SIZE, LWS_WORKER_INDEX)"})
"""Prefixes of variables set by others in the pod."""


def extra_env_problem(env: tuple[tuple[str, str], ...]) -> str | None:
    """Why ``env`` (``(name, value)`` pairs) cannot be added to an engine container, or ``None``."""
    seen: set[str] = set()
    for pair in env:
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            return f"{pair!r} is not a (NAME, value) pair of strings"
        name, _ = pair
        if not ENV_NAME.fullmatch(name):
            return f"{name!r} is not a variable name (letters, digits and '_', not starting with a digit)"
        if name in seen:
            return f"{name} is set twice"
        seen.add(name)
        if name in MANAGED_ENV:
            return f"{name} is set by the contract ({MANAGED_ENV[name]}); accepted: any other variable"
        for prefix, owner in MANAGED_ENV_PREFIXES.items():
            if name.startswith(prefix):
                return f"{name}: {prefix}* variables are set by {owner}"
    return None


__all__ = [
    "ALIASES",
    "ENV_NAME",
    "MANAGED_ENV",
    "MANAGED_ENV_PREFIXES",
    "MANAGED_FLAGS",
    "extra_args_problem",
    "extra_env_problem",
    "flag_groups",
    "flag_of",
    "override_tuning",
]
