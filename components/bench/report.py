"""What ``kimi-k3 bench`` writes: bench.json, the printed table, bench.png, the cost figure.

Everything here is a pure function of a :class:`BenchRun` (the start time is
one of its fields, supplied by the caller), so the same run gives the same
bench.json byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from statistics import fmean, median

from kimi_k3.bench.aiperf_run import LevelResult, Percentiles
from kimi_k3.bench.profiles import RequestLength
from kimi_k3.core import catalog

SCHEMA = "kimi-k3-bench/1"
"""``schema`` of bench.json; bumped when a field changes meaning."""

_BLOCK_PRICE = catalog.STARTUP_FACTS[catalog.DEFAULT_GPU_INSTANCE_TYPE].block_usd_per_hour
assert _BLOCK_PRICE is not None  # the catalog knows the default instance type's block price

DEFAULT_PRICE_PER_INSTANCE_HOUR_USD: float = _BLOCK_PRICE.value
"""Capacity Block price of the default instance type, USD per instance-hour, used when --price-per-hour is not given.

One home: ``kimi_k3.core.catalog.STARTUP_FACTS[...].block_usd_per_hour`` (the start-up cost estimate
and the runbook's cost table read the same figure). Block prices are set by supply and demand at
purchase time and fixed after (EC2 user guide, capacity-blocks-pricing-billing); the upfront fee
of your own block (``UpfrontFee`` / duration hours / instance count) is the number to pass as
--price-per-hour.
"""

PRICE_SOURCE = f"{catalog.DEFAULT_GPU_INSTANCE_TYPE} Capacity Block, catalog figure ({_BLOCK_PRICE.date}): {_BLOCK_PRICE.source}"
"""Where the default price comes from, as bench.json records it."""


@dataclass(frozen=True)
class ProfileInfo:
    """Which request lengths were sent, for bench.json."""

    name: str
    """The profile name, or ``lengths-file`` when the lengths come from ``--lengths``."""
    summary: str
    """One line describing the lengths (for a file: how many, and the file's name)."""
    source: str
    """The trace a profile comes from (:attr:`Profile.source`), or the ``--lengths`` path."""


@dataclass(frozen=True)
class BenchRun:
    """One ``kimi-k3 bench`` run: its inputs and every level's result."""

    started_at: datetime
    """When the run started, supplied by the caller (the CLI reads the clock once); bench.json's ``started_at``."""
    endpoint: str
    """The endpoint's ``/v1`` base URL without ``user:password@`` (``kimi_k3.cli.bench.public_endpoint``)."""
    model: str
    """The served model name the requests asked for (``--model``)."""
    profile: ProfileInfo
    """Where the request lengths come from: a built-in profile or the ``--lengths`` file."""
    requested: tuple[RequestLength, ...]
    """The request lengths prepared, sent in this order by every level (AIPerf starts over when they run out)."""
    load: dict[str, float]
    """Amount of load per level: ``{"requests": N}`` or ``{"duration_s": S}`` (seconds)."""
    library: str
    """PyPI name of the load generator (``aiperf``)."""
    library_version: str
    """Its installed version, from the package metadata."""
    seed: int
    """The random seed of the length sampling and of AIPerf (``--seed``)."""
    price_per_instance_hour_usd: float
    """USD per instance-hour the cost figure uses (``--price-per-hour``; default :data:`DEFAULT_PRICE_PER_INSTANCE_HOUR_USD`)."""
    price_source: str
    """Where that price comes from: :data:`PRICE_SOURCE` for the default price, else ``--price-per-hour``."""
    instances: int
    """Instances behind the endpoint (``--instances``); the cost multiplies by it."""
    levels: tuple[LevelResult, ...]
    """One result per concurrency level, in the order run."""


def cost_per_million_output_tokens(output_tokens_per_s: float, price_per_instance_hour: float, instances: int) -> float | None:
    """USD per 1,000,000 output tokens when the instances sustain ``output_tokens_per_s``.

    ``price × instances / (tokens/s × 3600 s/h) × 10^6``; ``None`` when nothing was generated.
    """
    if output_tokens_per_s <= 0:
        return None
    return price_per_instance_hour * instances / (output_tokens_per_s * 3600.0) * 1_000_000


def _percentiles(value: Percentiles | None) -> dict[str, float] | None:
    if value is None:
        return None
    return {"p50": value.p50, "p90": value.p90, "p99": value.p99, "mean": value.mean}


def _length_stats(values: Sequence[int]) -> dict[str, float]:
    return {"mean": round(fmean(values), 1), "p50": median(values), "min": min(values), "max": max(values)}


def level_document(level: LevelResult, run: BenchRun) -> dict:
    """One load level's entry in bench.json (latencies in seconds)."""
    total = level.requests_ok + level.errors
    return {
        "concurrency": level.concurrency,
        "requests_ok": level.requests_ok,
        "errors": level.errors,
        "error_rate": round(level.errors / total, 4) if total else 0.0,
        "error_kinds": dict(sorted(level.error_kinds.items())),
        "duration_s": level.duration_s,
        "ttft_s": _percentiles(level.ttft),
        "itl_s": _percentiles(level.itl),
        "e2e_latency_s": _percentiles(level.e2e),
        "output_tokens_per_s": level.output_tokens_per_s,
        "requests_per_s": level.requests_per_s,
        "output_tokens": level.output_tokens,
        "served_prompt_tokens_mean": level.prompt_tokens_mean,
        "served_output_tokens_mean": level.output_tokens_mean,
        "cost_per_million_output_tokens_usd": cost_per_million_output_tokens(
            level.output_tokens_per_s, run.price_per_instance_hour_usd, run.instances
        ),
    }


def bench_document(run: BenchRun) -> dict:
    """The whole bench.json document. It holds no API key."""
    return {
        "schema": SCHEMA,
        "started_at": run.started_at.isoformat(),
        "endpoint": run.endpoint,
        "model": run.model,
        "profile": {"name": run.profile.name, "summary": run.profile.summary, "source": run.profile.source},
        "requested_lengths": {
            "requests": len(run.requested),
            "prompt_tokens": _length_stats([r.prompt_tokens for r in run.requested]),
            "output_tokens": _length_stats([r.output_tokens for r in run.requested]),
        },
        "load": {"mode": "closed-loop concurrency", **run.load},
        "library": {"name": run.library, "version": run.library_version},
        "seed": run.seed,
        "price": {
            "usd_per_instance_hour": run.price_per_instance_hour_usd,
            "instances": run.instances,
            "source": run.price_source,
        },
        "levels": [level_document(level, run) for level in run.levels],
    }


def write_json(run: BenchRun, path: Path) -> Path:
    """Write bench.json: 2-space indent, levels in the order run."""
    path.write_text(json.dumps(bench_document(run), indent=2) + "\n")
    return path


# -- the table -------------------------------------------------------------------------

TABLE_COLUMNS = (
    ("conc", 5), ("ok", 6), ("err", 5), ("ttft p50", 9), ("p90", 8), ("p99", 8), ("itl p50", 8), ("p99", 8),
    ("e2e p50", 8), ("p99", 8), ("out tok/s", 10), ("req/s", 7), ("$/M out", 9),
)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}ms"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def table_row(level: LevelResult, run: BenchRun) -> str:
    """One formatted row: concurrency, counts, latency percentiles, throughput, cost."""
    cost = cost_per_million_output_tokens(level.output_tokens_per_s, run.price_per_instance_hour_usd, run.instances)
    ttft, itl, e2e = level.ttft, level.itl, level.e2e
    cells = (
        str(level.concurrency), str(level.requests_ok), str(level.errors),
        _ms(ttft.p50 if ttft else None), _ms(ttft.p90 if ttft else None), _ms(ttft.p99 if ttft else None),
        _ms(itl.p50 if itl else None), _ms(itl.p99 if itl else None),
        _s(e2e.p50 if e2e else None), _s(e2e.p99 if e2e else None),
        f"{level.output_tokens_per_s:.1f}", f"{level.requests_per_s:.2f}",
        "-" if cost is None else f"${cost:,.2f}",
    )
    return " ".join(cell.rjust(width) for cell, (_, width) in zip(cells, TABLE_COLUMNS, strict=False))


def table_header() -> str:
    """The column titles of :func:`table_row`."""
    return " ".join(title.rjust(width) for title, width in TABLE_COLUMNS)


def format_table(run: BenchRun) -> str:
    """Header, one row per level, and a line saying what the cost column assumes."""
    lines = [table_header(), *(table_row(level, run) for level in run.levels)]
    lines.append(
        f"$/M out: USD per million output tokens at ${run.price_per_instance_hour_usd:g}/instance-hour"
        f" x {run.instances} instance(s), if the endpoint ran at that level's output tokens/s all the time"
    )
    return "\n".join(lines)


# -- the plot -------------------------------------------------------------------------


def write_plot(run: BenchRun, path: Path) -> Path:
    """bench.png: TTFT, ITL and end-to-end latency (p50 and p99) against output tokens/s.

    One point per load level, labelled with its concurrency; a saturating
    endpoint shows as throughput flattening while latency climbs.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    levels = [level for level in run.levels if level.ttft is not None]
    figure, axes = pyplot.subplots(1, 3, figsize=(15, 4.5), constrained_layout=True)
    throughput = [level.output_tokens_per_s for level in levels]
    for axis, title, attribute, scale, unit in (
        (axes[0], "time to first token", "ttft", 1000, "ms"),
        (axes[1], "inter-token latency", "itl", 1000, "ms"),
        (axes[2], "end-to-end latency", "e2e", 1, "s"),
    ):
        for quantile, style in (("p50", "o-"), ("p99", "s--")):
            values = [getattr(getattr(level, attribute), quantile) * scale for level in levels]
            axis.plot(throughput, values, style, label=quantile)
        for level, x in zip(levels, throughput, strict=False):
            axis.annotate(f"c={level.concurrency}", (x, getattr(level, attribute).p50 * scale),
                          textcoords="offset points", xytext=(4, 6), fontsize=8)
        axis.set_title(title)
        axis.set_xlabel("output tokens/s (all requests)")
        axis.set_ylabel(unit)
        axis.grid(True, alpha=0.3)
        axis.legend()
    figure.suptitle(f"{run.model} at {run.endpoint} — profile {run.profile.name} — {run.started_at.isoformat(timespec='minutes')}")
    figure.savefig(path, dpi=100, metadata={"Software": None})
    pyplot.close(figure)
    return path
