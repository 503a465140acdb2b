"""Minutes from a Capacity Block's start to the first token, and what they cost, per start case.

Pure: inputs are settings-like facts (:class:`StartupInputs`), figures come from the catalog
or from :data:`FIGURES` here, each with its source or marked ``estimate`` (no measurement on
a real block yet). Four cases:

* ``cold`` — first block: new node, empty caches;
* ``warm`` — a later block: new node again, but the compile/JIT caches are in S3;
* ``pod re-created`` — same block, same node (rollout, eviction, delete);
* ``container restart`` — same pod; init containers do not run again, ``emptyDir`` survives.

Phases that run side by side (the image pre-pull next to the weight sync) count once, as the
longest of them. Costs are at the Capacity Block rate (catalog), not the on-demand rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kimi_k3.core import catalog
from kimi_k3.core.catalog import Figure
from kimi_k3.errors import UserError

_DATE = "2026-12"
FIGURES: dict[str, Figure] = {
    "node_boot": Figure(10, "min", "estimate: Capacity Block instance launch at the block start + AL2023 nodeadm join + device plugin; review range 8-15 min", _DATE, estimate=True),
    "image_pull": Figure(5, "min", "estimate: ~10 GB compressed vLLM image from in-region ECR with containerd defaults; review range 4-6 min", _DATE, estimate=True),
    "image_pull_fast": Figure(2.5, "min", "estimate: nodeadm FastImagePull (SOCI parallel pull and unpack); nodeadm doc/examples.md says only 'potentially decreasing image pull time'", _DATE, estimate=True),
    "image_pull_nat_extra": Figure(3, "min", "estimate: Docker Hub across the NAT gateway instead of in-region ECR", _DATE, estimate=True),
    "hf_download": Figure(0.5, "GB/s", "estimate: Hugging Face CDN through a NAT gateway; review modelled dev at ~75 min to first token", _DATE, estimate=True),
    "s3_efficiency": Figure(0.6, "x target", "estimate: share of the CRT target bandwidth reached on a long download", _DATE, estimate=True),
    "sha256sum_per_core": Figure(0.32, "GB/s", "measured: tools/bench_verify.py, coreutils sha256sum, one AMD EPYC core, page cache warm", _DATE),
    "openssl_per_core": Figure(1.34, "GB/s", "measured: tools/bench_verify.py, openssl dgst -sha256, one AMD EPYC core, page cache warm", _DATE),
    "largest_file_gb": Figure(10, "GB", "estimate: largest checkpoint shard (the verification tail after the last byte lands)", _DATE, estimate=True),
    "pod_start": Figure(0.5, "min", "estimate: scheduling, volume set-up and container starts", _DATE, estimate=True),
    "engine_start": Figure(1.5, "min", "estimate: Python imports, 8 workers, NCCL init, API server", _DATE, estimate=True),
    "weights_load": Figure(10, "GB/s", "estimate: fastsafetensors from local NVMe / page cache into 8 GPUs (vllm docs/models/extensions/fastsafetensor.md)", _DATE, estimate=True),
    "compile_cold": Figure(8, "min", "estimate: torch.compile + Triton/FlashInfer/DeepGEMM JIT with empty caches; review range 9-21 min for engine start plus cold compile", _DATE, estimate=True),
    "compile_warm": Figure(1.5, "min", "estimate: Dynamo tracing still runs, Inductor compilation is bypassed on a cache hit (vllm docs/design/torch_compile.md)", _DATE, estimate=True),
    "cuda_graphs": Figure(1.5, "min", "estimate: piecewise CUDA graph capture, done at every start (not cached)", _DATE, estimate=True),
    "cache_restore": Figure(0.2, "min", "estimate: a few GB of compile/JIT cache from in-region S3", _DATE, estimate=True),
    "first_request": Figure(1, "min", "review: the first request after start pays lazy initialisation, 30-60 s on large models", _DATE, estimate=True),
    "old_pod_drain": Figure(0.5, "min", "pre-stop sleep (30 s by default) before the old pod releases the node", _DATE),
    "nat_data_processing": Figure(0.045, "USD/GB", "Amazon VPC pricing, NAT gateway data processing in us-east-1 (recalled, not re-read here; check the region's price)", _DATE, estimate=True),
    "restart_backoff": Figure(0.2, "min", "kubelet's first restart back-off (10 s)", _DATE),
}
"""Phase figures not specific to an instance type (minutes unless the unit says otherwise)."""

CASES = ("cold", "warm", "pod re-created", "container restart")
END_BUFFER_MIN = 40
"""EKS scales a Capacity Block node group to 0 forty minutes before the block ends (EKS user guide, capacity-blocks-mng)."""


@dataclass(frozen=True)
class StartupInputs:
    """What the estimate depends on (from the stack settings and the catalog)."""

    instance_type: str = catalog.DEFAULT_GPU_INSTANCE_TYPE
    """GPU instance type; a key of ``catalog.STARTUP_FACTS`` (NVMe drives, S3 target bandwidth, Capacity Block price)."""
    nodes: int = 1
    """GPU nodes that start (replicas x nodes per replica); cost counts each."""
    weights_source: str = "s3"
    """``s3`` or ``huggingface``."""
    weights_staged: bool = True
    """The S3 prefix is complete (``kimi-k3 weights status``); otherwise the pods wait for the stager."""
    weights_bytes: float = catalog.KIMI_K3.weights_gb * 1e9
    """Size of the weights in bytes (1e9 per GB in the figures); the catalog's Kimi K3 size by default."""
    crt_target_bandwidth: bool = True
    """``default.s3.target_bandwidth`` set from the catalog; False = the CRT client's 10 Gb/s fallback."""
    verify: str = "overlapped"
    """``overlapped`` (hashing while the sync runs), ``sequential`` (after it), ``none``."""
    hasher: str = "openssl"
    """``openssl`` or ``sha256sum`` (the sync image's best hasher)."""
    verify_workers: int = 64
    """Hashing workers; the modelled hash rate is this many times one core's rate of :attr:`hasher`."""
    compile_cache: bool = True
    """Compile/JIT caches restored from S3 (warm blocks, re-created pods)."""
    node_local_weights: bool = True
    """Weights on a node-local volume that outlives the pod (re-created pods skip the sync)."""
    image_prepull: bool = True
    """Engine image pulled by a DaemonSet while the weights sync."""
    fast_image_pull: bool = True
    """nodeadm FastImagePull (SOCI parallel pull)."""
    image_in_region: bool = True
    """Image in ECR in the stack's region (or an ECR pull-through cache), not Docker Hub through NAT."""


@dataclass(frozen=True)
class Phase:
    """One step on the way to the first token."""

    name: str
    """What the step is, as printed (``node boot and join``)."""
    minutes: float
    """How long the step takes, in minutes."""
    source: str
    """Where the figure comes from: a :data:`FIGURES` source, or the formula with the sources of its inputs."""
    estimate: bool
    """True when the figure is not measured; :func:`format_phases` then marks it ``estimate``."""
    block: str = ""
    """Phases of one block run side by side in lanes; the block takes as long as its longest lane."""
    lane: str = ""
    """Lane within :attr:`block` (phases of one lane run one after the other)."""


@dataclass(frozen=True)
class CaseEstimate:
    """The phases of one case and their critical-path total."""

    case: str
    """One of :data:`CASES`."""
    phases: tuple[Phase, ...]
    """The steps in order; :attr:`minutes` adds them up, a block counting as its longest lane."""

    def _lane_minutes(self) -> dict[str, dict[str, float]]:
        """Minutes of each lane of each block (phases outside a block are in none)."""
        blocks: dict[str, dict[str, float]] = {}
        for p in self.phases:
            if p.block:
                lanes = blocks.setdefault(p.block, {})
                lanes[p.lane] = lanes.get(p.lane, 0.0) + p.minutes
        return blocks

    @property
    def minutes(self) -> float:
        """Critical path: phases outside a block add up; a block adds its longest lane."""
        total = sum(p.minutes for p in self.phases if not p.block)
        return total + sum(max(lanes.values()) for lanes in self._lane_minutes().values())

    def on_critical_path(self, phase: Phase) -> bool:
        """False for a phase in a block lane that is not the longest (it is hidden)."""
        if not phase.block:
            return True
        lanes = self._lane_minutes()[phase.block]
        return lanes[phase.lane] == max(lanes.values())

    def cost_usd(self, price_per_hour: float, nodes: int) -> float:
        """GPU time paid until the first token, at ``price_per_hour`` per node."""
        return self.minutes / 60 * price_per_hour * nodes


def _p(key: str, minutes: float | None = None, name: str | None = None) -> Phase:
    f = FIGURES[key]
    return Phase(name or key.replace("_", " "), f.value if minutes is None else minutes, f.source, f.estimate)


def _transfer_phases(x: StartupInputs) -> list[Phase]:
    """Weights onto the node (sync or download) and their verification."""
    size_gb = x.weights_bytes / 1e9
    facts = catalog.STARTUP_FACTS[x.instance_type]
    if x.weights_source == "huggingface":
        download = FIGURES["hf_download"]
        transfer = Phase("weights download (Hugging Face)", size_gb / download.value / 60, download.source, True)
    else:
        disk = facts.nvme_drives * facts.nvme_write_gbytes_per_s_per_drive.value
        if x.crt_target_bandwidth:
            net = facts.s3_target_gbps.value / 8 * FIGURES["s3_efficiency"].value
            src = f"min(CRT target {facts.s3_target_gbps.value:g} Gbps [{facts.s3_target_gbps.source}] x {FIGURES['s3_efficiency'].value} [estimate], {facts.nvme_drives} NVMe x {facts.nvme_write_gbytes_per_s_per_drive.value:g} GB/s [estimate])"
        else:
            net = catalog.CRT_FALLBACK_GBPS.value / 8
            src = f"CRT fallback {catalog.CRT_FALLBACK_GBPS.value:g} Gb/s [{catalog.CRT_FALLBACK_GBPS.source}]"
        rate = min(net, disk)
        transfer = Phase("weights sync (S3, CRT)", size_gb / rate / 60, src, x.crt_target_bandwidth)
    phases = [transfer]
    per_core = FIGURES[f"{x.hasher}_per_core"]
    hash_rate = per_core.value * x.verify_workers
    if x.verify == "sequential":
        phases.append(Phase("sha256 verify (after the sync)", size_gb / hash_rate / 60, f"{x.verify_workers} workers x {per_core.value} GB/s [{per_core.source}]", False))
    elif x.verify == "overlapped":
        behind = max(0.0, size_gb / hash_rate / 60 - transfer.minutes)
        tail = FIGURES["largest_file_gb"].value / per_core.value / 60
        phases.append(Phase("sha256 verify (overlapped; tail after the last file)", behind + tail, f"largest file / {per_core.value} GB/s per core [{per_core.source}; file size estimate]", True))
    elif x.verify != "none":
        raise UserError(f"estimate: verify {x.verify!r} is not accepted; accepted: overlapped, sequential, none")
    return phases


def _image_phase(x: StartupInputs) -> Phase:
    key = "image_pull_fast" if x.fast_image_pull else "image_pull"
    f = FIGURES[key]
    minutes = f.value + (0 if x.image_in_region else FIGURES["image_pull_nat_extra"].value)
    note = "" if x.image_in_region else " + Docker Hub through NAT [estimate]"
    if x.image_prepull:
        return Phase("engine image pull (DaemonSet, beside the sync)", minutes, f.source + note, True, block="node-prep", lane="image")
    return Phase("engine image pull (after the init containers)", minutes, f.source + note, True)


def _engine_phases(x: StartupInputs, compile_key: str) -> list[Phase]:
    load = FIGURES["weights_load"]
    return [
        _p("engine_start"),
        Phase("weights load into GPUs", x.weights_bytes / 1e9 / load.value / 60, load.source, load.estimate),
        _p(compile_key, name="compile " + ("(cold)" if compile_key == "compile_cold" else "(cache hit)")),
        _p("cuda_graphs", name="CUDA graph capture"),
        _p("first_request", name="first request (warm-up before Ready)"),
    ]


def _restored_engine_phases(x: StartupInputs, caches_in_s3: bool) -> list[Phase]:
    """The engine's phases in a new pod: a cache hit after restoring the caches from S3, else a cold compile."""
    if caches_in_s3:
        return [_p("cache_restore", name="compile cache restore"), *_engine_phases(x, "compile_warm")]
    return _engine_phases(x, "compile_cold")


def estimate_case(x: StartupInputs, case: str) -> CaseEstimate:
    """The phases of ``case`` (one of :data:`CASES`) for inputs ``x``."""
    if x.instance_type not in catalog.STARTUP_FACTS:
        raise UserError(f"estimate: no start-up figures for {x.instance_type!r}; known: {', '.join(catalog.STARTUP_FACTS)}")
    if x.weights_source not in ("s3", "huggingface"):
        raise UserError(f"estimate: weights_source {x.weights_source!r} is not accepted; accepted: s3, huggingface")
    if case not in CASES:
        raise UserError(f"estimate: case {case!r} is not accepted; accepted: {', '.join(CASES)}")
    phases: list[Phase] = []
    if case in ("cold", "warm"):
        phases.append(_p("node_boot", name="node boot and join"))
        phases.append(_p("pod_start", name="pod start"))
        transfer = _transfer_phases(x)
        if x.image_prepull:
            transfer = [replace(p, block="node-prep", lane="weights") for p in transfer]
        phases += transfer
        phases.append(_image_phase(x))
        phases += _restored_engine_phases(x, case == "warm" and x.compile_cache)
    elif case == "pod re-created":
        phases.append(_p("old_pod_drain", name="old pod drains"))
        phases.append(_p("pod_start", name="pod start"))
        if not x.node_local_weights:
            phases += _transfer_phases(x)
        phases += _restored_engine_phases(x, x.compile_cache)
    else:
        phases.append(_p("restart_backoff", name="restart back-off"))
        phases += _engine_phases(x, "compile_warm")  # HOME (emptyDir) keeps the caches across a container restart
    return CaseEstimate(case, tuple(phases))


def estimate_all(x: StartupInputs) -> dict[str, CaseEstimate]:
    """Every case, in :data:`CASES` order."""
    return {case: estimate_case(x, case) for case in CASES}


def block_price(instance_type: str) -> Figure | None:
    """Capacity Block price per instance-hour of ``instance_type`` (catalog), ``None`` when unknown."""
    facts = catalog.STARTUP_FACTS.get(instance_type)
    return facts.block_usd_per_hour if facts else None


def _mins(value: float) -> str:
    return f"{math.ceil(value)} min"


def format_estimates(x: StartupInputs, estimates: dict[str, CaseEstimate] | None = None) -> list[str]:
    """``time to first token: cold 28 min, ...`` and the cost per start at the block rate."""
    estimates = estimates or estimate_all(x)
    lines = ["time to first token: " + ", ".join(f"{case} {_mins(e.minutes)}" for case, e in estimates.items())]
    price = block_price(x.instance_type)
    if price is None:
        od = catalog.INSTANCE_TYPES[x.instance_type].on_demand_usd_per_hour
        lines.append(f"cost per start: unknown Capacity Block price for {x.instance_type} (the on-demand ${od:g}/h is not what a block costs)")
    else:
        nodes = f"{x.nodes} nodes" if x.nodes != 1 else "1 node"
        costs = ", ".join(f"{case} ${e.cost_usd(price.value, x.nodes):,.0f}" for case, e in estimates.items())
        lines.append(f"cost per start at ${price.value:g}/instance-h x {nodes} (block rate{', estimate' if price.estimate else ''}, {price.date}): {costs}")
    return lines


def format_phases(estimate: CaseEstimate) -> list[str]:
    """One line per phase: minutes, whether it is hidden behind a longer lane, and its source."""
    lines = [f"{estimate.case}: {estimate.minutes:.1f} min"]
    for p in estimate.phases:
        hidden = "" if estimate.on_critical_path(p) else " (hidden: runs beside a longer step)"
        lines.append(f"  {p.minutes:5.1f}  {p.name}{hidden}  [{'estimate: ' if p.estimate and not p.source.startswith('estimate') else ''}{p.source}]")
    return lines


ENGINE_PHASES = ("engine start", "weights load into GPUs", "compile (cold)", "compile (cache hit)", "CUDA graph capture")


def engine_minutes(estimate: CaseEstimate) -> float:
    """Minutes from the engine container's start to a healthy ``/health`` (what the startup probe and the ready timeout must cover)."""
    return sum(p.minutes for p in estimate.phases if p.name in ENGINE_PHASES)


def recommended_ready_timeout_s(x: StartupInputs, safety: float = 2.0, margin_s: int = 600) -> int:
    """``VLLM_ENGINE_READY_TIMEOUT_S`` for the slowest case (cold): estimate x ``safety`` + margin, in whole minutes."""
    worst = max(engine_minutes(e) for e in estimate_all(x).values())
    return int(math.ceil((worst * 60 * safety + margin_s) / 60) * 60)


def check_ready_timeout(configured_s: int, x: StartupInputs, margin_s: int = 600) -> str | None:
    """A warning when ``configured_s`` is shorter than the cold engine estimate + margin (vLLM would give up mid-compile)."""
    worst = max(engine_minutes(e) for e in estimate_all(x).values())
    floor = math.ceil(worst * 60 + margin_s)
    if configured_s < floor:
        return f"engine ready timeout {configured_s} s is shorter than the cold start estimate ({worst:.0f} min) + {margin_s // 60} min; set at least {floor} s (recommended {recommended_ready_timeout_s(x)} s)"
    return None


def startup_probe_failure_threshold(ready_timeout_s: int, period_s: int, margin_s: int = 600) -> int:
    """``failureThreshold`` so the startup probe outlasts the engine's ready timeout plus ``margin_s``."""
    return math.ceil((ready_timeout_s + margin_s) / period_s)


def block_window_warning(block_hours: float, x: StartupInputs, max_overhead: float = 0.1) -> str | None:
    """A warning when starting up plus the end-of-block scale-down eat more than ``max_overhead`` of the window."""
    cold = estimate_case(x, "cold").minutes
    window = block_hours * 60
    overhead = cold + END_BUFFER_MIN
    serving = window - overhead
    if serving <= 0:
        return f"a {block_hours:g} h block cannot serve: the cold start ({cold:.0f} min) and the scale-down {END_BUFFER_MIN} min before the end take all of it"
    if overhead > max_overhead * window:
        return f"a {block_hours:g} h block serves only {serving / 60:.1f} h: the cold start ({cold:.0f} min) and the scale-down {END_BUFFER_MIN} min before the end take {overhead / window:.0%} of it"
    return None


def mechanisms_needed(x: StartupInputs, targets: dict[str, float]) -> dict[str, list[str]]:
    """Per case over its target: the mechanisms that are off in ``x`` and would each bring it down, with the minutes saved."""
    toggles = {
        "crt_target_bandwidth": "CRT target bandwidth from the catalog",
        "compile_cache": "compile/JIT caches in S3",
        "node_local_weights": "node-local weights that outlive the pod",
        "image_prepull": "image pre-pull DaemonSet",
        "fast_image_pull": "nodeadm FastImagePull",
        "image_in_region": "image in region (ECR / pull-through cache)",
    }
    alternatives: list[tuple[dict[str, object], str]] = [({name: True}, label) for name, label in toggles.items() if not getattr(x, name)]
    if x.verify != "overlapped":
        alternatives.append(({"verify": "overlapped"}, "verification overlapping the sync"))
    out: dict[str, list[str]] = {}
    base = estimate_all(x)
    for case, target in targets.items():
        if base[case].minutes <= target:
            continue
        helps = []
        for changes, label in alternatives:
            saved = base[case].minutes - estimate_case(replace(x, **changes), case).minutes  # type: ignore[arg-type]  # fields of StartupInputs
            if saved > 0.05:
                helps.append(f"{label} (-{saved:.1f} min)")
        if x.weights_source == "huggingface":
            saved = base[case].minutes - estimate_case(replace(x, weights_source="s3"), case).minutes
            helps.append(f"weights staged in S3 (-{saved:.1f} min)")
        out[case] = helps or ["none left to turn on: the remaining minutes are node boot and the engine itself"]
    return out


TODAYS_MECHANISMS = dict(crt_target_bandwidth=False, verify="sequential", hasher="sha256sum", verify_workers=32, compile_cache=False, node_local_weights=False, image_prepull=False, fast_image_pull=False)
"""What the serving pod does before the mechanisms of docs/weights.md: CRT at its fallback, a
sequential ``sha256sum`` pass on 32 CPUs, no caches, emptyDir weights, image pulled after the
init containers."""


def image_in_region(image_repository: str, region: str) -> bool:
    """True when the image comes from ECR in ``region`` (a private registry or a pull-through cache)."""
    host = image_repository.split("/", 1)[0]
    return host.endswith(f".dkr.ecr.{region}.amazonaws.com")


def inputs_from_settings(settings, **mechanisms) -> StartupInputs:
    """:class:`StartupInputs` of a stack (``kimi_k3.stack.settings.StackSettings``); ``mechanisms`` override
    the switches (default: :data:`TODAYS_MECHANISMS`, the pod before these mechanisms;
    ``kimi_k3.stack.time_to_serve.startup_inputs`` passes the ones the stack declares)."""
    values = dict(
        instance_type=settings.capacity.instance_type,
        nodes=settings.nodes_required,
        weights_source=settings.serving.contract.weights.source,
        image_in_region=image_in_region(settings.serving.contract.image.reference.repository, settings.region),
        **TODAYS_MECHANISMS,
    )
    values.update(mechanisms)
    return StartupInputs(**values)


STAGED_PATH = dict(weights_source="s3", crt_target_bandwidth=True, verify="overlapped", hasher="openssl")
"""What staging the weights in S3 changes for a Hugging Face stack: the node-side sync of :mod:`.node_sync`."""


def startup_warnings(x: StartupInputs, ready_timeout_s: int, block_hours: float | None = None) -> list[tuple[str, str]]:
    """``(topic, warning)`` pairs: ``ready_timeout`` (:func:`check_ready_timeout`), ``block_window``
    (:func:`block_window_warning`) and ``huggingface`` (weights through the NAT: modelled time and NAT cost)."""
    out: list[tuple[str, str]] = []
    warning = check_ready_timeout(ready_timeout_s, x)
    if warning:
        out.append(("ready_timeout", warning))
    if block_hours is not None:
        window = block_window_warning(block_hours, x)
        if window:
            out.append(("block_window", window))
    if x.weights_source == "huggingface":
        cold = estimate_case(x, "cold").minutes
        staged = estimate_case(replace(x, **STAGED_PATH), "cold").minutes  # type: ignore[arg-type]  # fields of StartupInputs
        gb = x.weights_bytes / 1e9 * x.nodes
        nat = FIGURES["nat_data_processing"]
        out.append((
            "huggingface",
            f"weights come from Hugging Face through the NAT gateway: ~{cold:.0f} min to first token (staged in S3: ~{staged:.0f}), "
            f"and ~{gb:,.0f} GB of NAT data processing per start (~${gb * nat.value:,.0f} at ${nat.value}/GB, estimate); stage them with `kimi-k3 weights stage`",
        ))
    return out


def plan_lines(settings, block_hours: float | None = None, **mechanisms) -> list[str]:
    """The estimate line, the cost line and any warning (``warning: ...``) for a stack."""
    x = inputs_from_settings(settings, **mechanisms)
    lines = format_estimates(x)
    lines += [f"warning: {w}" for _, w in startup_warnings(x, settings.serving.contract.engine.ready_timeout_s, block_hours)]
    return lines
