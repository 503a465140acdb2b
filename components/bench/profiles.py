"""Request-length profiles for ``kimi-k3 bench``: published traces, and the user's own samples.

A profile is a pair of length distributions (prompt tokens, output tokens),
each an empirical quantile function: a table of (probability, tokens) points
taken from a published trace, sampled by inverse transform with linear
interpolation between the points. Prompt and output lengths are drawn
independently: in the traces below their log-lengths correlate weakly
(Pearson r = 0.09 for the Azure conversation trace, 0.05 for Mooncake's), so
pairing them would change little. ``tools/derive_bench_profiles.py``
recomputes every table from the trace files.

Randomness is an input: :func:`sample_lengths` takes the seed; the same seed
gives the same requests.
"""

from __future__ import annotations

import csv
import json
import random
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

from kimi_k3.errors import UserError

QUANTILE_PROBABILITIES = (0.0, 0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 1.0)
"""The probabilities at which each profile's quantile table is given."""

CONTEXT_LIMIT = 262_144
"""Prompt + output tokens a sampled request may need: the stack's default vLLM
``--max-model-len`` (config key ``maxModelLen``). Longer draws are cut to fit."""

COPILOT_AGENT_MEAN_PROMPT = 631.4e9 / 9_310_255
"""GitHub Copilot coding-agent traces 2026 (Azure/AzurePublicDataset,
GitHubCopilotCodingAgentDataset2026.md, "Dataset Statistics"): 631.4B prompt
tokens over 9,310,255 LLM calls = 67,818 prompt tokens per call."""

COPILOT_AGENT_MEAN_OUTPUT = 4.91e9 / 9_310_255
"""Same table: 4.91B completion tokens over 9,310,255 LLM calls = 527 tokens per call."""

MOONCAKE_CONVERSATION_MEAN_PROMPT = 12_035.1
"""Mean ``input_length`` of kvcache-ai/Mooncake FAST25-release/traces/conversation_trace.jsonl
(12,031 requests; the release README's table says 12,035)."""

MOONCAKE_CONVERSATION_MEAN_OUTPUT = 342.6
"""Mean ``output_length`` of the same trace (README: 343)."""

AGENTIC_PROMPT_SCALE = COPILOT_AGENT_MEAN_PROMPT / MOONCAKE_CONVERSATION_MEAN_PROMPT
"""The agentic profile's prompts: the Mooncake conversation shape scaled to the Copilot mean."""

AGENTIC_OUTPUT_SCALE = COPILOT_AGENT_MEAN_OUTPUT / MOONCAKE_CONVERSATION_MEAN_OUTPUT
"""The agentic profile's outputs: the Mooncake conversation shape scaled to the Copilot mean."""


@dataclass(frozen=True)
class QuantileTable:
    """An empirical length distribution given by its quantiles."""

    points: tuple[tuple[float, int], ...]
    """``(probability, tokens)`` pairs, probabilities rising from 0.0 to 1.0, tokens >= 1 and not falling; :meth:`at` interpolates between them."""

    def __post_init__(self) -> None:
        probabilities = [p for p, _ in self.points]
        tokens = [t for _, t in self.points]
        if probabilities[0] != 0.0 or probabilities[-1] != 1.0 or probabilities != sorted(set(probabilities)):
            raise ValueError(f"quantile probabilities must rise from 0 to 1: {probabilities}")
        if tokens != sorted(tokens) or tokens[0] < 1:
            raise ValueError(f"quantile token counts must be >= 1 and not fall: {tokens}")

    def at(self, u: float) -> int:
        """The length at cumulative probability ``u`` (0 <= u <= 1), rounded to a whole token."""
        probabilities = [p for p, _ in self.points]
        i = min(bisect_right(probabilities, u), len(self.points) - 1)
        (p0, t0), (p1, t1) = self.points[i - 1], self.points[i]
        return max(1, round(t0 + (t1 - t0) * (u - p0) / (p1 - p0)))

    @property
    def median(self) -> int:
        """The 50th percentile."""
        return self.at(0.5)


@dataclass(frozen=True)
class Profile:
    """A named request-length distribution with its provenance."""

    name: str
    """The ``--profile`` value and key in :data:`PROFILES` (``chat``, ``long-context``, ``agentic``)."""
    summary: str
    """One line for ``--help`` and bench.json's ``profile.summary``."""
    source: str
    """Where the numbers come from: dataset, repository at a commit, file, figures."""
    prompt: QuantileTable
    """Distribution of prompt lengths, in tokens."""
    output: QuantileTable
    """Distribution of output lengths, in tokens (drawn independently of the prompt's)."""


@dataclass(frozen=True)
class RequestLength:
    """One request's size."""

    prompt_tokens: int
    """Tokens in the prompt; AIPerf builds a prompt this long (the Mooncake trace's ``input_length``)."""
    output_tokens: int
    """Tokens to generate, sent as ``max_completion_tokens`` with ``ignore_eos`` (the Mooncake trace's ``output_length``)."""


def _scaled(points: tuple[tuple[float, int], ...], factor: float) -> tuple[tuple[float, int], ...]:
    return tuple((p, max(1, round(t * factor))) for p, t in points)


# Quantile tables printed by tools/derive_bench_profiles.py (see its docstring for the files).
_AZURE_CONV_PROMPT = (
    (0.0, 2), (0.01, 29), (0.05, 181), (0.10, 207), (0.25, 396), (0.50, 1020),
    (0.75, 1189), (0.90, 2734), (0.95, 4083), (0.99, 4142), (1.0, 14050),
)
_AZURE_CONV_OUTPUT = (
    (0.0, 7), (0.01, 16), (0.05, 41), (0.10, 54), (0.25, 85), (0.50, 129),
    (0.75, 395), (0.90, 424), (0.95, 451), (0.99, 601), (1.0, 1000),
)
_MOONCAKE_CONV_PROMPT = (
    (0.0, 891), (0.01, 894), (0.05, 901), (0.10, 964), (0.25, 2306), (0.50, 6909),
    (0.75, 15367), (0.90, 27367), (0.95, 39550), (0.99, 85400), (1.0, 126195),
)
_MOONCAKE_CONV_OUTPUT = (
    (0.0, 1), (0.01, 3), (0.05, 10), (0.10, 24), (0.25, 156), (0.50, 350),
    (0.75, 472), (0.90, 597), (0.95, 698), (0.99, 1119), (1.0, 2000),
)

PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (
        Profile(
            name="chat",
            summary="interactive chat: median 1,020 prompt / 129 output tokens",
            source=(
                "Azure LLM inference trace 2023, conversation service (Patel et al., 'Splitwise', ISCA 2024): "
                "Azure/AzurePublicDataset@790921015d50dd6aae7f7e47f39ba0e235ad6b08 "
                "data/AzureLLMInferenceTrace_conv.csv, 19,366 requests, ContextTokens and GeneratedTokens "
                "quantiles (mean 1,155 / 211)"
            ),
            prompt=QuantileTable(_AZURE_CONV_PROMPT),
            output=QuantileTable(_AZURE_CONV_OUTPUT),
        ),
        Profile(
            name="long-context",
            summary="Kimi's own long-context chat: median 6,909 prompt / 350 output tokens",
            source=(
                "Mooncake FAST'25 conversation trace, one hour of Kimi (Moonshot AI) production requests "
                "(Qin et al., 'Mooncake', FAST 2025): kvcache-ai/Mooncake@3cca71daccf2a7afb8fe3f0295358f70e3a69fdb "
                "FAST25-release/traces/conversation_trace.jsonl, 12,031 requests, input_length and "
                "output_length quantiles (mean 12,035 / 343)"
            ),
            prompt=QuantileTable(_MOONCAKE_CONV_PROMPT),
            output=QuantileTable(_MOONCAKE_CONV_OUTPUT),
        ),
        Profile(
            name="agentic",
            summary="coding agent, long context: mean 67,818 prompt / 527 output tokens per call",
            source=(
                "means from the GitHub Copilot coding-agent traces 2026 (Liu et al., arXiv:2608.00101; "
                "Azure/AzurePublicDataset GitHubCopilotCodingAgentDataset2026.md: 631.4B prompt and 4.91B "
                "completion tokens over 9,310,255 LLM calls); per-call lengths are only in release archives, "
                "so the shape is the Mooncake conversation trace's quantiles scaled by "
                f"{COPILOT_AGENT_MEAN_PROMPT:,.0f}/{MOONCAKE_CONVERSATION_MEAN_PROMPT:,.0f} (prompt) and "
                f"{COPILOT_AGENT_MEAN_OUTPUT:,.0f}/{MOONCAKE_CONVERSATION_MEAN_OUTPUT:,.0f} (output), "
                f"each request cut to the {CONTEXT_LIMIT:,}-token context"
            ),
            prompt=QuantileTable(_scaled(_MOONCAKE_CONV_PROMPT, AGENTIC_PROMPT_SCALE)),
            output=QuantileTable(_scaled(_MOONCAKE_CONV_OUTPUT, AGENTIC_OUTPUT_SCALE)),
        ),
    )
}
"""The built-in ``--profile`` values."""

DEFAULT_PROFILE = "chat"


def get_profile(name: str) -> Profile:
    """The profile called ``name``; a :class:`UserError` naming the choices otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise UserError(f"--profile {name!r} is not accepted; choose one of: {', '.join(PROFILES)}") from None


def sample_lengths(profile: Profile, count: int, seed: int) -> tuple[RequestLength, ...]:
    """``count`` request lengths drawn from ``profile`` with ``random.Random(seed)``.

    Output is drawn first; a prompt that would not leave room for it in
    :data:`CONTEXT_LIMIT` tokens is cut to fit.
    """
    rng = random.Random(seed)
    lengths = []
    for _ in range(count):
        output = min(profile.output.at(rng.random()), CONTEXT_LIMIT // 2)
        prompt = min(profile.prompt.at(rng.random()), CONTEXT_LIMIT - output)
        lengths.append(RequestLength(prompt, output))
    return tuple(lengths)


# -- the user's own samples (--lengths FILE) -------------------------------------------

LENGTH_FIELDS = ("prompt_tokens", "output_tokens")


def _length_value(path: Path, where: str, field: str, raw: object) -> int:
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        raise UserError(f"--lengths {path}: {where}: {field} {raw!r} is not a whole number of tokens (>= 1)")
    try:
        value = int(raw)
    except ValueError:
        raise UserError(f"--lengths {path}: {where}: {field} {raw!r} is not a whole number of tokens (>= 1)") from None
    if value < 1:
        raise UserError(f"--lengths {path}: {where}: {field} {value} is not a whole number of tokens (>= 1)")
    if value > CONTEXT_LIMIT:
        raise UserError(f"--lengths {path}: {where}: {field} {value} exceeds the {CONTEXT_LIMIT}-token context")
    return value


def _from_mapping(path: Path, where: str, row: object) -> RequestLength:
    if not isinstance(row, dict):
        raise UserError(f"--lengths {path}: {where}: expected an object with {' and '.join(LENGTH_FIELDS)}")
    missing = [f for f in LENGTH_FIELDS if row.get(f) in (None, "")]
    if missing:
        raise UserError(f"--lengths {path}: {where}: missing {', '.join(missing)} (need {', '.join(LENGTH_FIELDS)})")
    prompt, output = (_length_value(path, where, f, row[f]) for f in LENGTH_FIELDS)
    return RequestLength(prompt, output)


def load_lengths(path: Path) -> tuple[RequestLength, ...]:
    """Read the user's request lengths from a CSV or JSONL file.

    CSV (``.csv``): a header row naming ``prompt_tokens`` and ``output_tokens``
    (other columns are ignored), one request per row. JSONL (any other
    suffix, e.g. ``.jsonl``): one JSON object per line with the same two keys.
    Blank lines are skipped. Every value must be a whole number >= 1; the
    first bad row stops the run with a :class:`UserError` naming the file,
    the line and the value.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"--lengths {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"--lengths {path}: cannot be read as UTF-8 text ({err.__class__.__name__})") from None
    lengths: list[RequestLength] = []
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        header = reader.fieldnames or []
        if not set(LENGTH_FIELDS) <= set(header):
            raise UserError(
                f"--lengths {path}: the CSV header must name {' and '.join(LENGTH_FIELDS)}; it has {', '.join(header) or 'nothing'}"
            )
        for row in reader:
            if not any((v or "").strip() for v in row.values() if isinstance(v, str)):
                continue
            lengths.append(_from_mapping(path, f"line {reader.line_num}", {k: (row[k] or "").strip() for k in LENGTH_FIELDS}))
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise UserError(f"--lengths {path}: line {number}: not JSON ({err.msg}); one object per line, e.g. "
                                '{"prompt_tokens": 1000, "output_tokens": 200}') from None
            lengths.append(_from_mapping(path, f"line {number}", row))
    if not lengths:
        raise UserError(f"--lengths {path}: no requests (need rows with {' and '.join(LENGTH_FIELDS)})")
    return tuple(lengths)


def within_token_budget(
    lengths: tuple[RequestLength, ...], budget: int, minimum: int
) -> tuple[RequestLength, ...]:
    """The leading requests whose prompts add up to at most ``budget`` tokens (never fewer than ``minimum``)."""
    total = 0
    for count, request in enumerate(lengths):
        total += request.prompt_tokens
        if total > budget and count >= minimum:
            return lengths[:count]
    return lengths


def cycle_lengths(lengths: tuple[RequestLength, ...], count: int) -> tuple[RequestLength, ...]:
    """``count`` requests taken from ``lengths`` in order, starting over when they run out."""
    return tuple(lengths[i % len(lengths)] for i in range(count))
