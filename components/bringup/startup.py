"""What a start really took, phase by phase, beside the estimate: the reads of ``kimi-k3 startup-report`` (pure).

Two kinds of evidence, each optional:

* the engine's own log (``kubectl logs POD -c vllm``, with or without ``--timestamps``, or a saved
  file): vLLM 0.27.1 prints the duration of most of its start-up steps — ``Loading weights took``,
  ``Model loading took … seconds`` (the load plus the weights' post-processing),
  ``torch.compile takes/took … in total``, ``Initial profiling/warmup run took``, ``Memory
  profiling takes``, ``Graph capturing finished in``, ``init engine (profile, create kv cache, warmup
  model) took`` (``vllm/model_executor/model_loader/default_loader.py``, ``vllm/v1/worker/gpu_model_runner.py``,
  ``vllm/compilation/monitor.py``, ``vllm/v1/engine/core.py``); in a log from its first line (``vLLM API
  server version``), the time to ``Starting to load model`` is the engine's start; this project's restore prints
  ``compile cache …: restored N files (B bytes) [S s]``;
* the cluster's objects (``kubectl get nodes,pods,events -o json``, or read with the Kubernetes
  client): a GPU node's registration and Ready times, a pod's scheduling, its init containers'
  start and finish (the weights' sync, the cache restore), the engine container's start, the pod's
  Ready time, and the kubelet's ``Pulled`` events (``Successfully pulled image … in 1m7.272s``).

:func:`report` lays the measured minutes beside the estimate's phases of one case
(:func:`kimi_k3.weights.estimate.estimate_case`), so the first real block calibrates the model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from kimi_k3.weights.estimate import CaseEstimate

SCHEMA = "kimi-k3-startup/1"
"""``schema`` of ``startup.json``; bumped when a field changes meaning."""


@dataclass(frozen=True)
class Measurement:
    """One duration read from a log line or from the cluster's objects."""

    what: str
    """The step, in this module's words (``weights load``, ``compile``…)."""
    seconds: float
    """How long it took."""
    evidence: str
    """The log line or the object fields it comes from."""


# (what, pattern with the seconds in group "s"); the first matching pattern of a line wins.
LOG_DURATIONS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (what, re.compile(pattern))
    for what, pattern in (
        ("model loading", r"Model loading took [\d.]+ GiB(?: memory)? and (?P<s>[\d.]+) seconds"),
        ("weights load", r"Loading weights took (?P<s>[\d.]+) seconds"),
        ("weights load", r"\[RunAI Streamer\] Overall time to stream .*?: (?P<s>[\d.]+)s"),
        ("prefetch into the page cache", r"Prefetching checkpoint files into page cache finished in (?P<s>[\d.]+)s"),
        ("compile", r"torch\.compile (?:takes|took) (?P<s>[\d.]+) s in total"),
        ("compile and profile run", r"torch\.compile and initial profiling/warmup run together took (?P<s>[\d.]+) s in total"),
        ("dynamo trace", r"Dynamo bytecode transform time: (?P<s>[\d.]+) s"),
        ("inductor compile", r"Compiling a graph for .* takes (?P<s>[\d.]+) s"),
        ("compiled graph load", r"Directly load the compiled graph\(s\) .* took (?P<s>[\d.]+) s"),
        ("profile run", r"Initial profiling/warmup run took (?P<s>[\d.]+) s"),
        ("memory profiling", r"Memory profiling takes (?P<s>[\d.]+) seconds"),
        ("CUDA graph capture", r"Graph capturing finished in (?P<s>\d+) secs"),
        ("engine init", r"init engine \(profile, create kv cache, warmup model\) took (?P<s>[\d.]+) (?:seconds|s)"),
        ("compile cache restore", r"compile cache \S+: restored \d+ files .*\[(?P<s>[\d.]+) s\]"),
        # the node sync's last line (kimi_k3.weights.node_sync, NODE_SYNC_SCRIPT): read from the fetch-weights container's log,
        # the only record of a native sidecar's sync (it keeps running, so its container status has no finishedAt)
        ("weights sync and verify", r"synced and verified \d+ files from \S+ in (?P<s>\d+) s"),
        # vLLM 0.27.1 sleep mode (vllm/v1/executor/abstract.py): "It took %.6f seconds to fall asleep." / "... to wake up ..."
        ("sleep", r"It took (?P<s>[\d.]+) seconds to fall asleep"),
        ("wake up", r"It took (?P<s>[\d.]+) seconds to wake up"),
        # the in-place reload after a level-2 wake-up (vllm/v1/worker/gpu_model_runner.py reload_weights, 0.27.1):
        # "Reloading and processing weights took %.2f seconds"
        ("weights reload", r"Reloading and processing weights took (?P<s>[\d.]+) seconds"),
        # the engine snapshot's restore (kimi_k3.weights.engine_snapshot: RESTORE_LOG, VERIFY_LOG)
        ("engine snapshot verify", r"engine snapshot \S+: verified \d+ files \([\d.]+ GB\) in (?P<s>[\d.]+) s"),
        ("engine snapshot restore", r"engine snapshot \S+: restored [\d.]+ GB in (?P<s>[\d.]+) s"),
        ("engine snapshot dump", r"engine snapshot \S+: dumped and sealed \d+ files \([\d.]+ GB\) in (?P<s>[\d.]+) s"),  # DUMP_LOG
        # the S3 copy (kimi_k3.weights.engine_snapshot FETCH_LOG, from the wrapper; snapshot_copy's copier line, from the sync sidecar)
        ("engine snapshot fetch", r"engine snapshot \S+: fetched the S3 copy in (?P<s>[\d.]+) s"),
        ("engine snapshot upload", r"engine snapshot copy \S+: upload: uploaded \d+ files and KEY last to \S+ in (?P<s>\d+) s"),
        # ModelExpress's receive from a serving peer (ai-dynamo/modelexpress modelexpress_client/python/modelexpress/
        # load_strategy/rdma_strategy.py @ v0.5.1, the tag kimi_k3.weights.peer_transfer.MX_TAG pins; tests/test_peer_transfer.py renders the
        # vendored file's own f-strings): "[Worker N] [TIMING] Total receive time: 11.02s"
        ("peer transfer", r"\[TIMING\] Total receive time: (?P<s>[\d.]+)s"),
        ("peer transfer (RDMA only)", r"\[TIMING\] RDMA transfer complete: \d+ tensors, [\d.]+ GB, (?P<s>[\d.]+)s"),
        # the pipelined loader (kimi_k3.weights.pipelined_load: WAIT_LOG): how long it waited for shards still in transfer
        ("pipelined load wait", r"pipelined load: waited (?P<s>[\d.]+) s for \d+ shards still in transfer"),
    )
)
"""Log lines that carry a duration, and the step each measures."""

_VLLM_TIME = re.compile(r"\b(?:INFO|WARNING|ERROR|DEBUG) (?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)\b")
_KUBE_TIME = re.compile(r"^(?P<t>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?P<f>\.\d+)?Z ")
_BANNER = re.compile(r"vLLM API server version|vLLM server version|non-default args|Automatically detected platform")
"""The first lines of ``vllm serve``: a log that has one starts at the engine's start (an excerpt without it times no start)."""
_API_UP = re.compile(r"Starting vLLM API server|Starting vLLM server on|Application startup complete")
"""The API server listening: vLLM <= 0.2x ``Starting vLLM API server``; 0.27.1 ``Starting vLLM server on %s``
(``vllm/entrypoints/openai/api_server.py``), whose banner is ``vLLM server version %s, serving model %s``
(``vllm/entrypoints/serve/utils/api_utils.py`` ``log_version_and_model``); uvicorn's ``Application startup complete``."""
_AOT_HIT = re.compile(r"Directly load AOT compilation from path|Directly load the compiled graph")
_KV_SUGGESTION = re.compile(r"--kv-cache-memory=(?P<b>-?\d+)` \([^)]*\) to fit into requested memory")
_PULLED = re.compile(r'Successfully pulled image "(?P<image>[^"]+)" in (?P<d>[\dhms.]+)')


def _line_time(line: str, year: int) -> datetime | None:
    kube = _KUBE_TIME.match(line)  # `kubectl logs --timestamps`: RFC 3339 with nanoseconds
    if kube:
        return datetime.fromisoformat(kube["t"] + (kube["f"] or "")[:7]).replace(tzinfo=UTC)
    m = _VLLM_TIME.search(line)
    if not m:
        return None
    return datetime(year, int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]), tzinfo=UTC)


@dataclass(frozen=True)
class EngineLog:
    """What an engine log says about its start."""

    measurements: tuple[Measurement, ...]
    """Each duration found (the slowest worker's, when every worker prints it)."""
    cache_hit: bool | None
    """True when vLLM loaded compiled artifacts from its cache, False when it compiled, ``None`` when the log does not say."""
    kv_cache_memory_bytes: int | None = None
    """vLLM's suggested ``--kv-cache-memory`` to fit the requested memory, when it printed one."""


def parse_engine_log(lines: Iterable[str], year: int = 2000) -> EngineLog:
    """Durations of an engine log (``year`` dates vLLM's own ``MM-DD hh:mm:ss`` stamps; spans need only be consistent)."""
    best: dict[str, Measurement] = {}
    first: datetime | None = None
    loading: tuple[datetime, str] | None = None
    api: tuple[datetime, str] | None = None
    compiled = aot = False
    suggestion: int | None = None
    for raw in lines:
        line = raw.rstrip("\n")
        when = _line_time(line, year)
        if when is not None and first is None and _BANNER.search(line):
            first = when
        if "Starting to load model" in line and when is not None and loading is None:
            loading = (when, line)
        if _API_UP.search(line) and when is not None and api is None:
            api = (when, line)
        if "Compiling a graph for" in line or "saved AOT compiled function" in line:
            compiled = True
        if _AOT_HIT.search(line):
            aot = True
        kv = _KV_SUGGESTION.search(line)
        if kv and int(kv["b"]) > 0:  # a negative value means the requested memory cannot hold any KV cache
            suggestion = max(suggestion or 0, int(kv["b"]))
        for what, pattern in LOG_DURATIONS:
            m = pattern.search(line)
            if m:
                seconds = float(m["s"])
                if what not in best or seconds > best[what].seconds:
                    best[what] = Measurement(what, seconds, line.strip()[:240])
                break
    if first is not None and loading is not None:
        best["engine start"] = Measurement("engine start", (loading[0] - first).total_seconds(), f"first log line to: {loading[1].strip()[:200]}")
    if first is not None and api is not None:
        best["engine total"] = Measurement("engine total", (api[0] - first).total_seconds(), f"first log line to: {api[1].strip()[:200]}")
    hit = True if aot and not compiled else False if compiled else None
    return EngineLog(tuple(best.values()), hit, suggestion)


# --- the cluster's objects ----------------------------------------------------------------------------------------


def _ts(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _condition(obj: Mapping[str, Any], kind: str) -> datetime | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return _ts(c.get("lastTransitionTime"))
    return None


def _span(what: str, start: datetime | None, end: datetime | None, evidence: str) -> list[Measurement]:
    if start is None or end is None or end < start:
        return []
    return [Measurement(what, (end - start).total_seconds(), evidence)]


def duration_seconds(text: str) -> float | None:
    """``1m7.272s`` / ``59.813s`` / ``1h2m3s`` (Go's duration, as the kubelet prints it) in seconds."""
    parts = re.findall(r"([\d.]+)(h|ms|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    scale = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(float(n) * scale[u] for n, u in parts)


def cluster_measurements(nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]], engine: str = "vllm") -> list[Measurement]:
    """Durations read from GPU nodes, serving pods and their events (the slowest of each step when there are several)."""
    found: list[Measurement] = []
    for node in nodes:
        name = (node.get("metadata") or {}).get("name", "?")
        found += _span("node registered to Ready", _ts((node.get("metadata") or {}).get("creationTimestamp")), _condition(node, "Ready"),
                       f"node {name}: creationTimestamp to condition Ready")
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        name = meta.get("name", "?")
        scheduled = _condition(pod, "PodScheduled")
        inits = status.get("initContainerStatuses") or []
        first_init = min((s for s in (_ts(((c.get("state") or {}).get("terminated") or {}).get("startedAt")) for c in inits) if s), default=None)
        found += _span("pod start", scheduled, first_init, f"pod {name}: PodScheduled to the first init container's start")
        for c in inits:
            term = (c.get("state") or {}).get("terminated") or {}
            what = {"fetch-weights": "weights sync and verify", "restore-compile-cache": "compile cache restore (container)", "verify-weights": "sha256 verify"}.get(c.get("name"), f"init {c.get('name')}")
            found += _span(what, _ts(term.get("startedAt")), _ts(term.get("finishedAt")), f"pod {name}: init container {c.get('name')} startedAt to finishedAt")
        for c in status.get("containerStatuses") or []:
            if c.get("name") != engine:
                continue
            started = _ts(((c.get("state") or {}).get("running") or {}).get("startedAt"))
            found += _span("engine container to Ready", started, _condition(pod, "Ready"), f"pod {name}: {engine} startedAt to condition Ready")
    for event in events:
        if event.get("reason") != "Pulled":
            continue
        m = _PULLED.search(event.get("message") or "")
        seconds = duration_seconds(m["d"]) if m else None
        if m and seconds is not None:
            found.append(Measurement("image pull", seconds, f"event Pulled: {m['image']} in {m['d']}"))
    slowest: dict[str, Measurement] = {}
    for item in found:
        if item.what not in slowest or item.seconds > slowest[item.what].seconds:
            slowest[item.what] = item
    return list(slowest.values())


def split_kinds(document: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """``(nodes, pods, events)`` of a Kubernetes object, a ``List`` (``kubectl get nodes,pods,events -o json``) or a plain list."""
    items = document.get("items") if isinstance(document, Mapping) and "items" in document else [document]
    nodes: list[Mapping[str, Any]] = []
    pods: list[Mapping[str, Any]] = []
    events: list[Mapping[str, Any]] = []
    for item in items or []:
        kind = item.get("kind")
        if kind == "Node":
            nodes.append(item)
        elif kind == "Pod":
            pods.append(item)
        elif kind == "Event" or (kind is None and "reason" in item and "involvedObject" in item):
            events.append(item)
    return nodes, pods, events


# --- beside the estimate --------------------------------------------------------------------------------------------

PHASE_EVIDENCE: Mapping[str, tuple[str, ...]] = {
    "node boot, join and GPUs advertised": ("node registered to Ready",),
    "pod start": ("pod start",),
    "weights sync (S3, CRT)": ("weights sync and verify",),
    "weights and engine snapshot sync (S3, CRT)": ("weights sync and verify",),
    "engine snapshot sha256 verify": ("engine snapshot verify",),
    "engine snapshot from S3 (its copy, sharing the node's rate with the weights)": ("engine snapshot fetch",),
    "engine snapshot from S3": ("engine snapshot fetch",),
    "engine snapshot restore (CRIU + cuda-checkpoint)": ("engine snapshot restore",),
    "weights reload into the restored engine (page cache)": ("weights reload",),
    "KV cache re-allocated (wake_up)": ("wake up",),
    "engine snapshot dump: sleep level 2": ("sleep",),  # the first dump of a key (estimate.dump_phases), before Ready
    "engine snapshot dump: wake, KV cache re-allocated": ("wake up",),
    "weights from a serving peer (NIXL over EFA)": ("peer transfer", "peer transfer (RDMA only)"),
    "weights load into GPUs (page cache), each shard once verified": ("model loading", "weights load"),
    "last shard into the GPUs (pipelined load)": ("pipelined load wait",),
    "weights download (Hugging Face)": ("weights sync and verify",),
    "engine image pull (DaemonSet, beside the sync)": ("image pull",),
    "engine image pull (after the init containers)": ("image pull",),
    "compile cache restore": ("compile cache restore", "compile cache restore (container)"),
    "engine start": ("engine start",),
    "weights load into GPUs (page cache)": ("model loading", "weights load"),
    "weights load into GPUs (from the NVMe)": ("model loading", "weights load"),
    "compile (cold)": ("compile", "compile and profile run"),
    "compile (cache hit)": ("compile", "compile and profile run"),
    "memory profiling": ("memory profiling",),
    "profile run and KV cache": ("profile run",),
}
"""For each estimate phase, the measurements that time it, best first."""


def _evidence_for(name: str) -> tuple[str, ...]:
    if name.startswith("CUDA graph capture"):
        return ("CUDA graph capture",)
    return PHASE_EVIDENCE.get(name, ())


@dataclass(frozen=True)
class PhaseRow:
    """One estimate phase with what was measured for it."""

    name: str
    """The estimate's phase name."""
    estimate_min: float
    """The estimate's central minutes."""
    low_min: float
    """The estimate's low end."""
    high_min: float
    """The estimate's high end."""
    measured_min: float | None
    """Minutes measured, ``None`` when no evidence times this phase."""
    evidence: str = ""
    """Where the measured figure comes from."""


@dataclass(frozen=True)
class StartupReport:
    """The measured start beside one case of the estimate."""

    case: str
    """The estimate's case compared against."""
    rows: tuple[PhaseRow, ...]
    """Every phase of the case, measured or not."""
    measurements: tuple[Measurement, ...]
    """Everything measured, also steps the estimate does not name (Dynamo, Inductor, the engine's init total)."""
    cache_hit: bool | None = None
    """From the engine log: did vLLM load its compiled artifacts from the cache."""
    kv_cache_memory_bytes: int | None = None
    """vLLM's suggested ``--kv-cache-memory``, when the log printed one."""
    sources: tuple[str, ...] = field(default_factory=tuple)
    """What was read (files, the cluster)."""

    def to_json(self) -> dict[str, Any]:
        """``startup.json``: the rows, every measurement, what was read."""
        return {
            "schema": SCHEMA, "case": self.case, "cache_hit": self.cache_hit, "kv_cache_memory_bytes": self.kv_cache_memory_bytes,
            "phases": [asdict(r) for r in self.rows], "measurements": [asdict(m) for m in self.measurements], "sources": list(self.sources),
        }


def report(estimate: CaseEstimate, measurements: Sequence[Measurement], *, cache_hit: bool | None = None,
           kv_cache_memory_bytes: int | None = None, sources: Sequence[str] = ()) -> StartupReport:
    """Lay ``measurements`` beside the phases of ``estimate``."""
    by_what = {m.what: m for m in measurements}
    rows = []
    for p in estimate.phases:
        found = next((by_what[w] for w in _evidence_for(p.name) if w in by_what), None)
        rows.append(PhaseRow(p.name, round(p.minutes, 2), round(p.lo, 2), round(p.hi, 2),
                             round(found.seconds / 60, 2) if found else None, found.evidence if found else ""))
    return StartupReport(estimate.case, tuple(rows), tuple(measurements), cache_hit, kv_cache_memory_bytes, tuple(sources))


def render(r: StartupReport) -> list[str]:
    """The report as lines: each phase's measured minutes beside the estimate, then the other measurements."""
    lines = [f"start-up phases against the estimate's {r.case} case (minutes; estimate with its range):"]
    width = max([len(row.name) for row in r.rows] + [10])
    for row in r.rows:
        measured = f"{row.measured_min:6.2f}" if row.measured_min is not None else "     -"
        lines.append(f"  {row.name:<{width}}  measured {measured}  estimate {row.estimate_min:5.2f} ({row.low_min:.2f}-{row.high_min:.2f})")
    named = {row.evidence for row in r.rows if row.evidence}
    others = [m for m in r.measurements if m.evidence not in named]
    if others:
        lines.append("also measured:")
        lines += [f"  {m.what:<{width}}  {m.seconds / 60:6.2f} min  ({m.evidence[:120]})" for m in others]
    if r.cache_hit is not None:
        lines.append(f"compile cache: {'hit (vLLM loaded its compiled artifacts)' if r.cache_hit else 'miss (vLLM compiled)'}")
    if r.kv_cache_memory_bytes:
        lines.append(f"vLLM suggests --kv-cache-memory={r.kv_cache_memory_bytes} for this GPU (its startup plan, VLLM_ENABLE_STARTUP_PLAN, reuses it)")
    if not r.measurements:
        lines.append("nothing measured: no duration line in the engine log and no timestamps in the objects read")
    return lines


__all__ = [
    "LOG_DURATIONS",
    "SCHEMA",
    "EngineLog",
    "Measurement",
    "PhaseRow",
    "StartupReport",
    "cluster_measurements",
    "duration_seconds",
    "parse_engine_log",
    "render",
    "report",
    "split_kinds",
]
