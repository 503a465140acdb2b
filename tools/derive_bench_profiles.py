"""Derive the `kimi-k3 bench` length profiles from the published traces.

Prints, for each trace, the request count, mean and median of the prompt and
output lengths, and the quantile table that ``components/bench/profiles.py``
holds (probabilities ``kimi_k3.bench.profiles.QUANTILE_PROBABILITIES``).

The traces are not in this repository; pass the files (paths as in their
repositories):

    python tools/derive_bench_profiles.py \\
        --azure-conv AzureLLMInferenceTrace_conv.csv \\
        --mooncake-conv conversation_trace.jsonl

- Azure/AzurePublicDataset, commit 790921015d50dd6aae7f7e47f39ba0e235ad6b08,
  data/AzureLLMInferenceTrace_conv.csv (columns ContextTokens, GeneratedTokens).
- kvcache-ai/Mooncake, commit 3cca71daccf2a7afb8fe3f0295358f70e3a69fdb,
  FAST25-release/traces/conversation_trace.jsonl (fields input_length, output_length).

Needs only the standard library and the project's main dependencies, not the bench extra.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kimi_k3.bench.profiles import AGENTIC_OUTPUT_SCALE, AGENTIC_PROMPT_SCALE, QUANTILE_PROBABILITIES  # noqa: E402


def quantile(sorted_values: list[int], p: float) -> int:
    """Linear-interpolated quantile (numpy's default), rounded to a whole token."""
    position = p * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    value = sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)
    return round(value)


def describe(name: str, prompts: list[int], outputs: list[int], scale: tuple[float, float] = (1.0, 1.0)) -> None:
    """Print one trace's summary and its quantile tables (optionally scaled)."""
    print(f"# {name}: {len(prompts)} requests")
    for label, values, factor in (("prompt", prompts, scale[0]), ("output", outputs, scale[1])):
        ordered = sorted(values)
        table = tuple((p, max(1, round(quantile(ordered, p) * factor))) for p in QUANTILE_PROBABILITIES)
        print(
            f"{label}: mean {statistics.fmean(values) * factor:.1f}, median {statistics.median(values) * factor:.0f}"
        )
        print(f"  {label}_quantiles = {table}")


def main() -> int:
    """Read the traces named on the command line and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--azure-conv", type=Path, required=True)
    parser.add_argument("--mooncake-conv", type=Path, required=True)
    args = parser.parse_args()
    with args.azure_conv.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    describe("Azure LLM inference trace 2023, conversation", [int(r["ContextTokens"]) for r in rows],
             [int(r["GeneratedTokens"]) for r in rows])
    records = [json.loads(line) for line in args.mooncake_conv.read_text().splitlines() if line.strip()]
    prompts = [int(r["input_length"]) for r in records]
    outputs = [int(r["output_length"]) for r in records]
    describe("Mooncake FAST'25 conversation trace", prompts, outputs)
    describe("agentic: Mooncake conversation shape scaled to the GitHub Copilot coding-agent means", prompts,
             outputs, (AGENTIC_PROMPT_SCALE, AGENTIC_OUTPUT_SCALE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
