"""The reference manifest of the AWS deployment guide for Kimi K3 (HyperPod path), as the tests compare against it.

Its vLLM arguments and environment (``InferenceEndpointConfig`` ``worker.args`` and
``worker.environmentVariables``), copied verbatim, and a reader for such command lines.
"""

from __future__ import annotations

SEED_ARGS = [
    "--model", "moonshotai/Kimi-K3",
    "--trust-remote-code",
    "--load-format", "fastsafetensors",
    "--enable-prefix-caching",
    "--enable-auto-tool-choice",
    "--tool-call-parser", "kimi_k3",
    "--reasoning-parser", "kimi_k3",
    "--served-model-name", "Kimi-K3",
    "--moe-backend", "auto",
    "--tensor-parallel-size", "8",
    "--no-enable-flashinfer-autotune",
]
SEED_ENV = {"VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION": "1"}


LIST_FLAGS = ("--cudagraph-capture-sizes", "--allowed-media-domains")
"""``vllm serve`` flags that take several values (``nargs="+"``): :func:`flag_values` joins them with spaces."""


def flag_values(args: list[str]) -> dict[str, str | None]:
    """``--flag value`` / ``--switch`` pairs of a command line (asserting no flag repeats); a list flag's values joined by spaces."""
    result: dict[str, str | None] = {}
    i = 0
    while i < len(args):
        flag = args[i]
        assert flag.startswith("--"), f"stray value {flag!r} in {args}"
        assert flag not in result, f"{flag} repeated"
        values = []
        while i + 1 < len(args) and not args[i + 1].startswith("--") and (not values or flag in LIST_FLAGS):
            values.append(args[i + 1])
            i += 1
        result[flag] = " ".join(values) if values else None
        i += 1
    return result
