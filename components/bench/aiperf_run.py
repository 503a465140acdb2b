"""Run NVIDIA AIPerf for one load level and read back what it measured.

Each load level is one ``python -m aiperf profile --config aiperf.yaml`` run in
its own artifact directory: a closed loop of ``concurrency`` streamed chat
completions, for ``requests`` requests or ``duration_s`` seconds, with prompt
and output lengths from a Mooncake-format JSONL file (``input_length``,
``output_length``), which AIPerf replays in order, starting over when it runs out.

The API key never reaches a command line or a file: the YAML says
``api_key: ${OPENAI_API_KEY}`` (AIPerf substitutes environment variables in
its config) and the key is put in the child's environment only. AIPerf itself
redacts the key in everything it writes (``<redacted>``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import yaml

from kimi_k3.bench.profiles import RequestLength
from kimi_k3.errors import UserError

LIBRARY = "aiperf"
"""The PyPI distribution that generates the load."""

SUMMARY_FILE = "profile_export_aiperf.json"
RECORDS_FILE = "profile_export.jsonl"
LOG_FILE = "aiperf.log"

# AIPerf's knobs that bench fixes, with why:
REQUEST_EXTRA = {"ignore_eos": True}
"""vLLM's ``ignore_eos``: generate the full ``max_completion_tokens`` so outputs follow the profile."""


def library_version() -> str:
    """The installed AIPerf version; a UserError naming the extra when it is missing."""
    try:
        return metadata.version(LIBRARY)
    except metadata.PackageNotFoundError:
        raise UserError(
            "kimi-k3 bench needs the load generator: pip install 'kimi-k3-aws[bench]' (AIPerf 0.13.0)"
        ) from None


@dataclass(frozen=True)
class Percentiles:
    """p50/p90/p99 (and mean) of one latency metric, in seconds."""

    p50: float
    """Median in seconds (the AIPerf metric's ``p50``, converted from its ``unit``)."""
    p90: float
    """90th percentile in seconds (the metric's ``p90``)."""
    p99: float
    """99th percentile in seconds (the metric's ``p99``)."""
    mean: float
    """Arithmetic mean in seconds (the metric's ``avg``)."""


@dataclass(frozen=True)
class LevelResult:
    """What one load level measured (AIPerf's summary, converted to seconds)."""

    concurrency: int
    """Requests AIPerf kept in flight at this level (the phase's ``concurrency``)."""
    requests_ok: int
    """Requests that completed without error (AIPerf's ``request_count``); 0 when every request failed."""
    errors: int
    """Requests that failed (HTTP error, timeout, broken stream): the counts of AIPerf's ``error_summary`` added up."""
    error_kinds: dict[str, int]
    """Failed requests by status code and error type, e.g. ``{"500 Internal Server Error": 3}``; empty when none failed."""
    duration_s: float
    """Wall time of the measured phase in seconds (``benchmark_duration``; first start to last end of the records when all failed)."""
    ttft: Percentiles | None
    """Time to first content or reasoning token (``time_to_first_token``); ``None`` when AIPerf reported none (every request failed)."""
    itl: Percentiles | None
    """Inter-token latency, the mean gap between tokens within a request (``inter_token_latency``); ``None`` when not reported."""
    e2e: Percentiles | None
    """End-to-end request latency (``request_latency``); ``None`` when not reported."""
    output_tokens_per_s: float
    """Output tokens of successful requests per second of the level (``output_token_throughput``); 0 when nothing was generated."""
    requests_per_s: float
    """Successful requests per second of the level (``request_throughput``); 0 when none succeeded."""
    output_tokens: int
    """Output tokens of all successful requests, as the server's ``usage`` counted them (``total_output_tokens``)."""
    prompt_tokens_mean: float | None
    """Mean prompt tokens per request as the server counted them (``usage_prompt_tokens``); ``None`` when not reported."""
    output_tokens_mean: float | None
    """Mean output tokens per request as the server counted them (``output_sequence_length``); ``None`` when not reported."""


def aiperf_base_url(endpoint_v1: str) -> str:
    """AIPerf appends ``/v1/chat/completions`` itself: ``http://h:8000/v1`` → ``http://h:8000``."""
    parts = urlsplit(endpoint_v1)
    path = parts.path[: -len("/v1")] if parts.path.endswith("/v1") else parts.path
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def write_lengths(path: Path, lengths: Sequence[RequestLength]) -> Path:
    """The requests as Mooncake-trace JSONL (``input_length``, ``output_length``), no timestamps."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(json.dumps({"input_length": r.prompt_tokens, "output_length": r.output_tokens}) + "\n" for r in lengths)
    )
    return path


def aiperf_config(
    *,
    endpoint_v1: str,
    model: str,
    lengths_file: Path,
    tokenizer_dir: Path,
    artifact_dir: Path,
    concurrency: int,
    requests: int | None,
    duration_s: float | None,
    timeout_s: float,
    seed: int,
    workers: int | None = None,
) -> dict:
    """AIPerf's YAML config (schema 2.0) for one level; holds no secret.

    ``workers`` caps AIPerf's worker processes (``None``: AIPerf sizes them to
    the machine and the concurrency); one worker drives many requests at once,
    and fewer processes start faster.
    """
    if (requests is None) == (duration_s is None):
        raise ValueError("give exactly one of requests or duration_s")
    phase: dict = {"type": "concurrency", "concurrency": concurrency}
    if requests is not None:
        phase["requests"] = requests
    else:
        phase["duration"] = duration_s
        # in-flight requests at the deadline may finish and count, for at most one timeout
        phase["grace_period"] = timeout_s
    runtime: dict = {"ui": "none"}
    if workers is not None:
        runtime.update(workers=workers, record_processors=workers)
    return {
        "schemaVersion": "2.0",
        "randomSeed": seed,
        "benchmark": {
            "model": model,
            "endpoint": {
                "url": aiperf_base_url(endpoint_v1),
                "type": "chat",
                "streaming": True,
                "api_key": "${OPENAI_API_KEY}",
                "use_server_token_count": True,
                "timeout": timeout_s,
                "extra": dict(REQUEST_EXTRA),
            },
            "dataset": {
                "type": "file",
                "path": str(lengths_file),
                "format": "mooncake_trace",
                "sampling": "sequential",
            },
            "phases": phase,
            "tokenizer": {"name": str(tokenizer_dir)},
            "artifacts": {"dir": str(artifact_dir)},
            "gpu_telemetry": {"enabled": False},
            "server_metrics": {"enabled": False},
            "runtime": runtime,
        },
    }


def _child_env(api_key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIPERF_", "HF_", "OPENAI_"))}
    env["OPENAI_API_KEY"] = api_key
    # nothing may be fetched from a hub at run time; the tokenizer is a local directory
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _records_so_far(artifact_dir: Path) -> int:
    try:
        with (artifact_dir / RECORDS_FILE).open("rb") as handle:
            return sum(1 for _ in handle)
    except OSError:
        return 0


def run_level(
    *,
    config: dict,
    api_key: str,
    artifact_dir: Path,
    concurrency: int,
    on_progress: Callable[[int, float], None] | None = None,
    poll_s: float = 0.5,
    deadline_s: float | None = None,
) -> LevelResult:
    """Run AIPerf with ``config`` and parse its summary.

    ``on_progress(requests_recorded, elapsed_s)`` is called while it runs.
    A run that does not end in ``deadline_s`` seconds is stopped. AIPerf's own
    console output goes to ``artifact_dir/aiperf.log``; a failed run raises a
    :class:`UserError` quoting that log's last error line.
    """
    artifact_dir.mkdir(parents=True, exist_ok=True)
    config_file = artifact_dir / "aiperf.yaml"
    config_file.write_text(yaml.safe_dump(config, sort_keys=False))
    log_path = artifact_dir / LOG_FILE
    command = [sys.executable, "-m", LIBRARY, "profile", "--config", str(config_file)]
    start = time.monotonic()
    with log_path.open("wb") as log:
        child = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_child_env(api_key),
            cwd=artifact_dir,
        )
        try:
            while child.poll() is None:
                elapsed = time.monotonic() - start
                if deadline_s is not None and elapsed > deadline_s:
                    child.terminate()
                    child.wait(timeout=30)
                    raise UserError(f"AIPerf did not finish concurrency {concurrency} within {deadline_s:.0f}s; see {log_path}")
                if on_progress is not None:
                    on_progress(_records_so_far(artifact_dir), elapsed)
                time.sleep(poll_s)
        except BaseException:
            if child.poll() is None:
                child.terminate()
                child.wait(timeout=30)
            raise
    summary_path = artifact_dir / SUMMARY_FILE
    if child.returncode == 0 and summary_path.exists():
        return parse_summary(json.loads(summary_path.read_text()), concurrency)
    # AIPerf exits 1 without a summary when every request failed; its per-request records
    # still say how many and why, and an overloaded level is a result, not a crash
    failed = failed_level(artifact_dir, concurrency)
    if failed is not None:
        return failed
    raise UserError(
        f"AIPerf failed at concurrency {concurrency} (exit {child.returncode}): {_last_error(log_path)}; see {log_path}"
    )


def _error_kind(error: dict) -> str:
    """``"500 Internal Server Error"``: AIPerf's status code and its type (or message)."""
    kind = " ".join(str(p) for p in (error.get("code"), error.get("type") or error.get("message")) if p)
    return kind or "unknown"


def failed_level(artifact_dir: Path, concurrency: int) -> LevelResult | None:
    """The level from AIPerf's per-request records when all of them are errors; ``None`` otherwise."""
    try:
        records = [json.loads(line) for line in (artifact_dir / RECORDS_FILE).read_text().splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError):
        return None
    if not records or not all(isinstance(r.get("error"), dict) for r in records):
        return None
    kinds: dict[str, int] = {}
    for record in records:
        kind = _error_kind(record["error"])
        kinds[kind] = kinds.get(kind, 0) + 1
    starts = [r["metadata"]["request_start_ns"] for r in records if "request_start_ns" in r.get("metadata", {})]
    ends = [r["metadata"]["request_end_ns"] for r in records if "request_end_ns" in r.get("metadata", {})]
    duration = (max(ends) - min(starts)) / 1e9 if starts and ends else 0.0
    return LevelResult(
        concurrency=concurrency, requests_ok=0, errors=len(records), error_kinds=kinds, duration_s=duration,
        ttft=None, itl=None, e2e=None, output_tokens_per_s=0.0, requests_per_s=0.0, output_tokens=0,
        prompt_tokens_mean=None, output_tokens_mean=None,
    )


def _last_error(log_path: Path) -> str:
    """The most telling line of AIPerf's console output, for a one-line message."""
    lines = [line.strip(" │╭╮╰╯─") for line in log_path.read_text(errors="replace").splitlines()]
    for marker in ("Reason:", "ERROR", "Error:"):
        hits = [line for line in lines if marker in line]
        if hits:
            return " ".join(hits[-1].split())[:300]
    tail = [line for line in lines if line.strip()]
    return " ".join(tail[-1].split())[:300] if tail else "no output"


def _metric(summary: dict, key: str) -> dict | None:
    value = summary.get(key)
    return value if isinstance(value, dict) else None


def _seconds(summary: dict, key: str) -> Percentiles | None:
    metric = _metric(summary, key)
    if metric is None or metric.get("p50") is None:
        return None
    scale = {"ms": 1e-3, "ns": 1e-9, "us": 1e-6, "s": 1.0, "sec": 1.0}[metric.get("unit", "ms")]
    return Percentiles(
        p50=metric["p50"] * scale, p90=metric["p90"] * scale, p99=metric["p99"] * scale, mean=metric["avg"] * scale
    )


def _avg(summary: dict, key: str) -> float | None:
    metric = _metric(summary, key)
    return None if metric is None or metric.get("avg") is None else float(metric["avg"])


def parse_summary(summary: dict, concurrency: int) -> LevelResult:
    """A :class:`LevelResult` from AIPerf's ``profile_export_aiperf.json``."""
    error_kinds: dict[str, int] = {}
    for entry in summary.get("error_summary") or []:
        kind = _error_kind(entry.get("error_details") or {})
        error_kinds[kind] = error_kinds.get(kind, 0) + int(entry.get("count", 0))
    ok = int(_avg(summary, "request_count") or 0)
    return LevelResult(
        concurrency=concurrency,
        requests_ok=ok,
        errors=sum(error_kinds.values()),
        error_kinds=error_kinds,
        duration_s=_avg(summary, "benchmark_duration") or 0.0,
        ttft=_seconds(summary, "time_to_first_token"),
        itl=_seconds(summary, "inter_token_latency"),
        e2e=_seconds(summary, "request_latency"),
        output_tokens_per_s=_avg(summary, "output_token_throughput") or 0.0,
        requests_per_s=_avg(summary, "request_throughput") or 0.0,
        output_tokens=int(_avg(summary, "total_output_tokens") or 0),
        prompt_tokens_mean=_avg(summary, "usage_prompt_tokens"),
        output_tokens_mean=_avg(summary, "output_sequence_length"),
    )
