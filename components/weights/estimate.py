"""Minutes from a Capacity Block's start to the first token, with their ranges and costs, per start case.

Pure: inputs are typed facts (:class:`StartupInputs`, built from a stack's settings by
``kimi_k3.stack.time_to_serve.startup_inputs``; this module never sees settings), figures come from the catalog or
from :data:`~kimi_k3.weights.startup_figures.FIGURES`, each cited, measured, or an ``estimate``
with its range. Four cases:

* ``cold`` — first block: new node, empty caches;
* ``warm`` — a later block: new node again, but the compile/JIT caches are in S3;
* ``pod re-created`` — same block, same node (rollout, eviction, delete); the clock starts when the
  old pod has released its GPUs, and the drain before that is printed beside it;
* ``container restart`` — same pod; init containers do not run again, ``emptyDir`` survives.

Phases that run side by side (the image pre-pull next to the weight sync) count once, as the
longest of them. Each phase carries a low and a high end; a case's range adds them the same way.
Costs are at the Capacity Block rate (catalog), not the on-demand rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kimi_k3.core import catalog
from kimi_k3.errors import UserError
from kimi_k3.weights.startup_figures import DEFAULT_CAPTURE_SIZES, FIGURES, GPU_BENCH_H100, SEAL_WORKERS, SNAPSHOT_GPUS, device_checkpoint_s, device_restore_s

CASES = ("cold", "warm", "pod re-created", "container restart")
CASE_MEANINGS = {
    "cold": "a new GPU node at a block's first start: node boot, image pull, weights fetched, the engine compiles from scratch",
    "warm": "a new node of a later block (or a replaced node) with the compile caches of an earlier start restored from S3 "
            "(compileCacheS3Uri; without them it is the cold case)",
    "pod re-created": "the node stays and the serving pod is replaced (rollout, eviction): the clock starts once the old pod has drained; "
                      "the weights stay on the node with nodeLocalWeights, else they are fetched again",
    "container restart": "the engine container restarts in the same pod (a crash, the liveness probe): back-off, then the engine "
                         "starts from the page cache and the pod's caches",
}
"""What each of :data:`CASES` is, as ``kimi-k3 plan`` and the README print it."""
COST_MEANING = (
    "the block's prepaid GPU time that passes before the first token (minutes x block rate x nodes), not an extra bill: "
    "a Capacity Block is paid up front for its whole window; the date is when the rate was read or estimated"
)
"""What the cost-per-start line means."""


def legend_lines() -> list[str]:
    """The definitions printed under the time-to-first-token and cost lines."""
    return [f"{case}: {CASE_MEANINGS[case]}" for case in CASES] + [f"cost per start: {COST_MEANING}"]
END_BUFFER_MIN = 40
"""EKS scales a Capacity Block node group to 0 forty minutes before the block ends (EKS user guide, capacity-blocks-mng)."""


@dataclass(frozen=True)
class StartupInputs:
    """What the estimate depends on: typed facts of a stack and its mechanisms (the stack layer builds them from settings)."""

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
    buffered_load: bool = True
    """The loader reads through the page cache (``FASTSAFETENSORS_ODIRECT=0``); False: it may read with O_DIRECT, from the NVMe every time."""
    sync_page_cache: bool = True
    """The sync container's memory holds the checkpoint, so the files it wrote are still in the page cache when the engine loads."""
    startup_plan: bool = True
    """vLLM persists the profiled KV-cache size (``VLLM_ENABLE_STARTUP_PLAN``) and a start that finds it skips memory profiling."""
    capture_sizes: int = DEFAULT_CAPTURE_SIZES
    """CUDA graph sizes captured (``--cudagraph-capture-sizes``); the figure is for vLLM's default 51."""
    sidecar_sync: bool = False
    """The sync runs as a native sidecar (an init container with ``restartPolicy: Always``): the compile-cache restore runs
    beside the transfer instead of after it (``weightsSyncSidecar``)."""
    pipelined_load: bool = False
    """With :attr:`sidecar_sync`: the engine starts beside the transfer and its loader reads each shard once the sync has
    verified it (the sync's per-shard markers, :data:`kimi_k3.weights.node_sync.SHARD_MARKERS`): the project's vLLM loader
    plugin :mod:`kimi_k3.weights.vllm_loader` (``pipelinedWeightsLoad``)."""
    engine_snapshot: bool = False
    """Restore instead of rebuild (:mod:`kimi_k3.weights.engine_snapshot`): a CRIU + cuda-checkpoint snapshot of the engine, weights
    and KV cache released, on the node's NVMe (container restart, re-created pod); needs :attr:`node_local_weights`."""
    engine_snapshot_s3: bool = False
    """The snapshot's copy in S3 (:mod:`kimi_k3.weights.snapshot_copy`) restores a new node of a later block (warm) and a node replaced
    beside a peer; with :attr:`engine_snapshot` and :attr:`sidecar_sync` (the sync sidecar copies it). Deployed by ``engineSnapshot``
    with ``weightsSyncSidecar`` and ``compileCacheS3Uri`` (``kimi_k3.stack.time_to_serve.engine_snapshot_s3``)."""
    dump_beside_peer: bool = False
    """One replica dumps a new key once another serves (:func:`kimi_k3.weights.engine_snapshot.dump_waits_for_peer`): the cold first Ready pays no dump."""
    peer_transfer: bool = False
    """A replaced node's pod takes the weights GPU to GPU from a serving replica over EFA with ModelExpress
    (:mod:`kimi_k3.weights.peer_transfer`, ``peerWeightsTransfer``); otherwise :func:`peer_replacement` is a warm start."""
    drain_s: tuple[int, int] = (35, 1835)
    """Seconds from a re-created pod's delete until its engine exits and releases the GPUs: (no request in flight, the longest drain)."""


@dataclass(frozen=True)
class Phase:
    """One step on the way to the first token."""

    name: str
    """What the step is, as printed (``node boot and join``)."""
    minutes: float
    """How long the step takes, in minutes (the central figure)."""
    source: str
    """Where the figure comes from: a :data:`FIGURES` source, or the formula with the sources of its inputs."""
    estimate: bool
    """True when the figure is not measured or cited; :func:`format_phases` then marks it ``estimate``."""
    block: str = ""
    """Phases of one block run side by side in lanes; the block takes as long as its longest lane."""
    lane: str = ""
    """Lane within :attr:`block` (phases of one lane run one after the other)."""
    low: float | None = None
    """Low end in minutes; ``None``: :attr:`minutes`."""
    high: float | None = None
    """High end in minutes; ``None``: :attr:`minutes`."""
    engine: bool = False
    """The step runs inside the engine container, before ``/health`` (what the startup probe and the ready timeout must cover)."""
    node: bool = False
    """The step ends when the node is Ready with its GPUs advertised (the rest of a case comes after the node)."""

    @property
    def lo(self) -> float:
        """:attr:`low`, or :attr:`minutes`."""
        return self.minutes if self.low is None else self.low

    @property
    def hi(self) -> float:
        """:attr:`high`, or :attr:`minutes`."""
        return self.minutes if self.high is None else self.high


@dataclass(frozen=True)
class CaseEstimate:
    """The phases of one case and their critical-path total."""

    case: str
    """One of :data:`CASES`."""
    phases: tuple[Phase, ...]
    """The steps in order; :attr:`minutes` adds them up, a block counting as its longest lane."""
    drain_s: tuple[int, int] | None = None
    """For ``pod re-created``: the drain before the clock starts (seconds, shortest and longest)."""

    def _lanes(self, value) -> dict[str, dict[str, float]]:
        blocks: dict[str, dict[str, float]] = {}
        for p in self.phases:
            if p.block:
                lanes = blocks.setdefault(p.block, {})
                lanes[p.lane] = lanes.get(p.lane, 0.0) + value(p)
        return blocks

    def _total(self, value) -> float:
        total = sum(value(p) for p in self.phases if not p.block)
        return total + sum(max(lanes.values()) for lanes in self._lanes(value).values())

    @property
    def minutes(self) -> float:
        """Critical path: phases outside a block add up; a block adds its longest lane."""
        return self._total(lambda p: p.minutes)

    @property
    def low(self) -> float:
        """The critical path with every phase at its low end."""
        return self._total(lambda p: p.lo)

    @property
    def high(self) -> float:
        """The critical path with every phase at its high end."""
        return self._total(lambda p: p.hi)

    @property
    def after_node_ready(self) -> float:
        """Minutes of the case after the node is Ready (everything but the node's own boot)."""
        return self.minutes - sum(p.minutes for p in self.phases if p.node)

    def on_critical_path(self, phase: Phase) -> bool:
        """False for a phase in a block lane that is not the longest (it is hidden)."""
        if not phase.block:
            return True
        lanes = self._lanes(lambda p: p.minutes)[phase.block]
        return lanes[phase.lane] == max(lanes.values())

    def cost_usd(self, price_per_hour: float, nodes: int) -> float:
        """GPU time paid until the first token, at ``price_per_hour`` per node."""
        return self.minutes / 60 * price_per_hour * nodes


def _p(key: str, name: str | None = None, *, scale: float = 1.0, **where) -> Phase:
    f = FIGURES[key]
    return Phase(name or key.replace("_", " "), f.value * scale, f.source, f.estimate, low=f.lo * scale, high=f.hi * scale, **where)


def _rate_phase(name: str, gb: float, rate, source: str, estimate: bool, **where) -> Phase:
    """Minutes to move ``gb`` at ``rate`` (a Figure in GB/s): the central, low and high ends (a high rate is the low end)."""
    return Phase(name, gb / rate.value / 60, source, estimate, low=gb / rate.hi / 60, high=gb / rate.lo / 60, **where)


def _transfer_phases(x: StartupInputs, extra_gb: float = 0.0) -> list[Phase]:
    """Weights onto the node (sync or download) and their verification; ``extra_gb`` more (an engine snapshot) share the sync."""
    size_gb = x.weights_bytes / 1e9 + extra_gb
    if x.weights_source == "huggingface":
        size_gb -= extra_gb  # the snapshot comes from S3 only
        download = FIGURES["hf_download"]
        transfer = _rate_phase("weights download (Hugging Face)", size_gb, download, download.source, True)
    elif x.crt_target_bandwidth:
        rate = FIGURES["s3_node_rate"]
        name = "weights and engine snapshot sync (S3, CRT)" if extra_gb else "weights sync (S3, CRT)"
        transfer = _rate_phase(name, size_gb, rate, rate.source, rate.estimate)
    else:
        fallback = catalog.CRT_FALLBACK_GBPS
        transfer = Phase("weights sync (S3, CRT fallback)", size_gb / (fallback.value / 8) / 60, f"CRT fallback {fallback.value:g} Gb/s [{fallback.source}]", False)
    phases = [transfer]
    per_core = FIGURES[f"{x.hasher}_per_core"]
    hash_rate = per_core.value * x.verify_workers
    if x.verify == "sequential":
        phases.append(Phase("sha256 verify (after the sync)", size_gb / hash_rate / 60, f"{x.verify_workers} workers x {per_core.value} GB/s [{per_core.source}]", False))
    elif x.verify == "overlapped":
        behind = max(0.0, size_gb / hash_rate / 60 - transfer.minutes)
        tail = catalog.KIMI_K3.largest_shard_gb / per_core.value / 60
        phases.append(Phase(
            "sha256 verify (overlapped; tail after the last file)", behind + tail,
            f"largest shard {catalog.KIMI_K3.largest_shard_gb} GB [{catalog.KIMI_K3_WEIGHTS_SOURCE}] / {per_core.value} GB/s per core [{per_core.source}]", False,
        ))
    elif x.verify != "none":
        raise UserError(f"estimate: verify {x.verify!r} is not accepted; accepted: overlapped, sequential, none")
    return phases


def _image_phase(x: StartupInputs) -> Phase:
    key = "image_pull_fast" if x.fast_image_pull else "image_pull"
    f = FIGURES[key]
    extra = FIGURES["image_pull_nat_extra"]
    add, add_lo, add_hi = (0.0, 0.0, 0.0) if x.image_in_region else (extra.value, extra.lo, extra.hi)
    note = "" if x.image_in_region else f" + Docker Hub through NAT [{extra.source}]"
    block, lane = ("node-prep", "image") if x.image_prepull else ("", "")
    name = "engine image pull (DaemonSet, beside the sync)" if x.image_prepull else "engine image pull (after the init containers)"
    return Phase(name, f.value + add, f.source + note, f.estimate or not x.image_in_region, block=block, lane=lane, low=f.lo + add_lo, high=f.hi + add_hi)


def _load_phase(x: StartupInputs, resident: bool) -> Phase:
    """The weights into the GPUs: the loader's measured rate, bounded by the NVMe when the files are not in the page cache."""
    size_gb = x.weights_bytes / 1e9
    load = FIGURES["weights_load"]
    if resident:
        return _rate_phase("weights load into GPUs (page cache)", size_gb, load, load.source, load.estimate, engine=True)
    facts = catalog.STARTUP_FACTS[x.instance_type]
    drive = facts.nvme_read_gbytes_per_s_per_drive
    nvme = replace(drive, value=drive.value * facts.nvme_drives, low=drive.lo * facts.nvme_drives, high=drive.hi * facts.nvme_drives)
    rate = replace(load, value=min(load.value, nvme.value), low=min(load.lo, nvme.lo), high=min(load.hi, nvme.hi))
    source = f"min(loader: {load.source}; NVMe read: {facts.nvme_drives} x {drive.value:g} GB/s [{drive.source}])"
    return _rate_phase("weights load into GPUs (from the NVMe)", size_gb, rate, source, True, engine=True)


def dump_phases(x: StartupInputs) -> list[Phase]:
    """The first dump of a key, in the warm-up sidecar before its warm-up request, so before the pod is Ready
    (:func:`kimi_k3.weights.snapshot_pod.snapshot_after_healthy`, then ``warm_up_and_mark``): sleep level 2, cuda-checkpoint moves
    each GPU's state to host memory (the GPUs side by side, the H100's measured checkpoint line), CRIU writes the tree's pages to
    the NVMe, ``SHA256SUMS`` hashed by :data:`~kimi_k3.weights.startup_figures.SEAL_WORKERS` threads, then the wake: the weights
    reloaded from the page cache and the KV cache re-allocated."""
    state = FIGURES["snapshot_state_gb"]
    rate = FIGURES["snapshot_restore_rate"]
    per_core = FIGURES["openssl_per_core"]  # hashlib is OpenSSL's sha256
    seal_rate = per_core.value * SEAL_WORKERS
    device = [device_checkpoint_s(gb / SNAPSHOT_GPUS) / 60 for gb in (state.value, state.lo, state.hi)]
    return [
        _p("snapshot_sleep", "engine snapshot dump: sleep level 2", engine=True),
        Phase("engine snapshot dump: cuda-checkpoint (GPUs side by side)", device[0],
              f"{state.value:g} GB over {SNAPSHOT_GPUS} GPUs at the H100's measured checkpoint line (device_checkpoint_s, CUDA_CHECKPOINT_H100) [{GPU_BENCH_H100}]", True, low=device[1], high=device[2], engine=True),
        Phase("engine snapshot dump: CRIU writes the pages to the NVMe", state.value / rate.value / 60,
              f"estimate: {state.value:g} GB at CRIU's restore rate, the same pages the other way [{rate.source}]", True,
              low=state.lo / rate.hi / 60, high=state.hi / rate.lo / 60, engine=True),
        Phase("engine snapshot dump: SHA256SUMS then KEY (seal)", state.value / seal_rate / 60,
              f"{state.value:g} GB / {SEAL_WORKERS} threads x {per_core.value} GB/s [{per_core.source}]", True,
              low=state.lo / seal_rate / 60, high=state.hi / seal_rate / 60, engine=True),
        replace(_reload_phase(x, True), name="engine snapshot dump: wake, weights reloaded (page cache)"),
        _p("kv_wake", "engine snapshot dump: wake, KV cache re-allocated", engine=True),
    ]


def dump_minutes(x: StartupInputs) -> float:
    """Minutes of the first dump of a key on the replica that dumps it (:func:`dump_phases`), ``0`` without :attr:`StartupInputs.engine_snapshot`."""
    return sum(p.minutes for p in dump_phases(x)) if x.engine_snapshot and x.node_local_weights else 0.0


def dump_before_first_ready(x: StartupInputs) -> bool:
    """A new key's first start dumps it before the service's first Ready: a snapshot without the election (:attr:`StartupInputs.dump_beside_peer`)."""
    return x.engine_snapshot and x.node_local_weights and not x.dump_beside_peer


def _engine_phases(x: StartupInputs, *, caches: bool, resident: bool, plan: bool, loaded: bool = False, dump: bool = False) -> list[Phase]:
    """The engine container from its start to the first token: ``caches`` = its compile/JIT caches are there (a hit);
    ``loaded``: the engine started and the weights loaded beside the sync (:func:`_pipelined_lanes`), so both are left out;
    ``dump``: the first dump of the key before the warm-up request (:func:`dump_phases`)."""
    graphs = x.capture_sizes / DEFAULT_CAPTURE_SIZES
    phases = [] if loaded else [_p("engine_start", engine=True), _load_phase(x, resident)]
    if caches:
        phases.append(_p("compile_warm", "compile (cache hit)", engine=True))
    else:
        phases += [_p("compile_cold", "compile (cold)", engine=True), _p("kernel_jit_cold", "kernel JIT and autotune (cold)", engine=True)]
    if not plan:
        phases.append(_p("memory_profiling", "memory profiling", engine=True))
    phases += [
        _p("profile_run", "profile run and KV cache", engine=True),
        _p("cuda_graphs", f"CUDA graph capture ({x.capture_sizes} sizes)", scale=graphs, engine=True),
        *(dump_phases(x) if dump else []),
        _p("first_request", "first request (warm-up before Ready)"),
    ]
    return phases


def _pipelined_load(x: StartupInputs) -> Phase:
    """Every shard into the GPUs as the sync verifies it, at the manifest-order reader's measured rate (``pipelined_load_rate``)."""
    rate = FIGURES["pipelined_load_rate"]
    return _rate_phase("weights load into GPUs (page cache), each shard once verified", x.weights_bytes / 1e9, rate, rate.source, rate.estimate,
                       block="node-prep", lane="engine", engine=True)


def _last_shard_load(x: StartupInputs) -> Phase:
    load = FIGURES["pipelined_load_rate"]
    gb = catalog.KIMI_K3.largest_shard_gb
    return _rate_phase("last shard into the GPUs (pipelined load)", gb, load, f"largest shard {gb} GB [{catalog.KIMI_K3_WEIGHTS_SOURCE}] at {load.source}", load.estimate,
                       block="node-prep", lane="weights", engine=True)


def _snapshot_phases(x: StartupInputs, *, block: str = "", lane: str = "") -> list[Phase]:
    """Verify the snapshot's files against its manifest, then CRIU + cuda-checkpoint restore them (weights and KV cache released)."""
    state = FIGURES["snapshot_state_gb"]
    rate = FIGURES["snapshot_restore_rate"]
    per_core = FIGURES[f"{x.hasher}_per_core"]
    hash_rate = per_core.value * x.verify_workers
    verify = Phase("engine snapshot sha256 verify", state.value / hash_rate / 60, f"{state.value:g} GB [{state.source}] / {x.verify_workers} workers x {per_core.value} GB/s [{per_core.source}]",
                   True, block=block, lane=lane, low=state.lo / hash_rate / 60, high=state.hi / hash_rate / 60, engine=True)
    # The whole restore cannot beat its device half, measured: cuda-checkpoint's restore of each GPU's share, the GPUs side by side.
    device = [device_restore_s(gb / SNAPSHOT_GPUS) / 60 for gb in (state.value, state.lo, state.hi)]
    whole = [max(gb / r / 60, floor) for gb, r, floor in zip((state.value, state.lo, state.hi), (rate.value, rate.hi, rate.lo), device, strict=True)]
    restore = Phase("engine snapshot restore (CRIU + cuda-checkpoint)", whole[0], f"{state.value:g} GB [{state.source}] at {rate.value:.2f} GB/s [{rate.source}]", True,
                    block=block, lane=lane, low=whole[1], high=whole[2], engine=True)
    return [verify, restore]


def _reload_phase(x: StartupInputs, resident: bool, **where) -> Phase:
    """The weights back into the restored engine (level 2 sleep released them): a load from the page cache at the loader's rate."""
    return replace(_load_phase(x, resident), name="weights reload into the restored engine (page cache)", **where)


def _restored_engine(x: StartupInputs, resident: bool) -> list[Phase]:
    return [*_snapshot_phases(x), _reload_phase(x, resident), _p("kv_wake", "KV cache re-allocated (wake_up)", engine=True), _p("first_request", "first request (warm-up before Ready)")]


def _sidecar_lanes(x: StartupInputs, *, caches: bool, restored: bool) -> list[Phase]:
    """The native-sidecar start, block ``node-prep``: the sync in lane ``weights``; in lane ``engine`` the image, then the
    snapshot's restore or (with :attr:`~StartupInputs.pipelined_load`) the engine's start, the compile-cache restore, and with
    the pipelined loader the load of every shard as it is verified. That load runs faster than the sync (weights_load >
    s3_node_rate), so the block ends at the later of the sync's tail plus the last shard's load and the engine's start plus a
    whole load."""
    engine = [replace(_image_phase(x), block="node-prep", lane="engine")]
    if restored:
        # The S3 copy lands beside the weights (the copier's streams and the sync's share the node's rate), then it is verified and
        # restored. With the pipelined loader the restored engine reloads each shard once verified (its reload_weights reads through
        # the profile's load format, the pipelined loader); without it, the reload waits for the whole weights marker (hold_restored).
        s3 = FIGURES["s3_node_rate"]
        shared = replace(s3, value=s3.value / 2, low=s3.lo / 2, high=s3.hi / 2)
        engine.append(_rate_phase("engine snapshot from S3 (its copy, sharing the node's rate with the weights)", FIGURES["snapshot_state_gb"].value, shared,
                                  f"half of {s3.source}", s3.estimate, block="node-prep", lane="engine"))
        engine += _snapshot_phases(x, block="node-prep", lane="engine")
    else:
        if x.pipelined_load:
            engine.append(_p("engine_start", block="node-prep", lane="engine", engine=True))
        if caches:
            engine.append(_p("cache_restore", "compile cache restore", block="node-prep", lane="engine"))
    if not x.pipelined_load:
        return engine
    return [*engine, _pipelined_load(x), _last_shard_load(x)]


def estimate_case(x: StartupInputs, case: str) -> CaseEstimate:
    """The phases of ``case`` (one of :data:`CASES`) for inputs ``x``."""
    if x.instance_type not in catalog.STARTUP_FACTS:
        raise UserError(f"estimate: no start-up figures for {x.instance_type!r}; known: {', '.join(catalog.STARTUP_FACTS)}")
    if x.weights_source not in ("s3", "huggingface"):
        raise UserError(f"estimate: weights_source {x.weights_source!r} is not accepted; accepted: s3, huggingface")
    if case not in CASES:
        raise UserError(f"estimate: case {case!r} is not accepted; accepted: {', '.join(CASES)}")
    phases: list[Phase] = []
    snapshot = x.engine_snapshot and x.node_local_weights
    if case in ("cold", "warm"):
        phases.append(_p("node_boot", "node boot, join and GPUs advertised", node=True))
        phases.append(_p("pod_start", "pod start"))
        hit = case == "warm" and x.compile_cache
        restored = case == "warm" and snapshot and x.engine_snapshot_s3 and x.sidecar_sync and x.weights_source == "s3"
        transfer = _transfer_phases(x, extra_gb=FIGURES["snapshot_state_gb"].value if restored and x.weights_source == "s3" else 0.0)
        if x.sidecar_sync and x.weights_source == "s3":
            phases += [replace(p, block="node-prep", lane="weights") for p in transfer]
            phases += _sidecar_lanes(x, caches=hit, restored=restored)
            if restored:
                if not x.pipelined_load:
                    phases.append(_reload_phase(x, True))
                phases += [_p("kv_wake", "KV cache re-allocated (wake_up)", engine=True), _p("first_request", "first request (warm-up before Ready)")]
            else:
                phases += _engine_phases(x, caches=hit, resident=True, plan=hit and x.startup_plan, loaded=x.pipelined_load, dump=dump_before_first_ready(x))
            return CaseEstimate(case, tuple(phases))
        if x.image_prepull:
            transfer = [replace(p, block="node-prep", lane="weights") for p in transfer]
        phases += transfer
        phases.append(_image_phase(x))
        if hit:
            phases.append(_p("cache_restore", "compile cache restore"))
        resident = x.buffered_load and x.sync_page_cache and x.weights_source == "s3"
        phases += _engine_phases(x, caches=hit, resident=resident, plan=hit and x.startup_plan, dump=dump_before_first_ready(x))
        return CaseEstimate(case, tuple(phases))
    if case == "pod re-created":
        phases.append(_p("pod_start", "pod start"))
        if not x.node_local_weights:
            phases += _transfer_phases(x)
        resident = x.buffered_load and (x.node_local_weights or x.sync_page_cache)
        if snapshot:
            phases += _restored_engine(x, resident)
            return CaseEstimate(case, tuple(phases), drain_s=x.drain_s)
        if x.compile_cache:
            phases.append(_p("cache_restore", "compile cache restore"))
        phases += _engine_phases(x, caches=x.compile_cache, resident=resident, plan=x.compile_cache and x.startup_plan)
        return CaseEstimate(case, tuple(phases), drain_s=x.drain_s)
    phases.append(_p("restart_backoff", "restart back-off"))
    if snapshot:
        phases += _restored_engine(x, x.buffered_load)
        return CaseEstimate(case, tuple(phases))
    # HOME (emptyDir) keeps the caches and the startup plan across a container restart; the page cache keeps the weights.
    phases += _engine_phases(x, caches=True, resident=x.buffered_load, plan=x.startup_plan)
    return CaseEstimate(case, tuple(phases))


def peer_replacement(x: StartupInputs) -> CaseEstimate:
    """A node replaced in a block while another replica serves: the weights GPU to GPU from that peer over EFA (NIXL,
    ModelExpress-style) instead of S3, the engine restored from the S3 copy of its snapshot (else started with the caches).
    Without :attr:`StartupInputs.peer_transfer` the replaced node's pod syncs from S3 like any new node: the ``warm`` case."""
    if not x.peer_transfer:
        return CaseEstimate("node replaced beside a serving peer", estimate_case(x, "warm").phases)
    restored = x.engine_snapshot and x.engine_snapshot_s3 and x.node_local_weights
    size_gb = x.weights_bytes / 1e9
    peer = FIGURES["peer_transfer_rate"]
    phases = [_p("node_boot", "node boot, join and GPUs advertised", node=True), _p("pod_start", "pod start")]
    engine = [replace(_image_phase(x), block="node-prep", lane="engine")]
    if restored:
        snapshot_gb = FIGURES["snapshot_state_gb"].value
        s3 = FIGURES["s3_node_rate"]
        engine.insert(0, _rate_phase("engine snapshot from S3", snapshot_gb, s3, s3.source, s3.estimate, block="node-prep", lane="snapshot"))
        engine += _snapshot_phases(x, block="node-prep", lane="engine")
    else:
        engine += [_p("engine_start", block="node-prep", lane="engine", engine=True), _p("cache_restore", "compile cache restore", block="node-prep", lane="engine")]
    phases += engine
    phases.append(_rate_phase("weights from a serving peer (NIXL over EFA)", size_gb, peer, peer.source, peer.estimate, engine=True))
    if restored:
        phases += [_p("kv_wake", "KV cache re-allocated (wake_up)", engine=True), _p("first_request", "first request (warm-up before Ready)")]
    else:
        phases += _engine_phases(x, caches=True, resident=True, plan=x.startup_plan, loaded=True)
    return CaseEstimate("node replaced beside a serving peer", tuple(phases))


def estimate_all(x: StartupInputs) -> dict[str, CaseEstimate]:
    """Every case, in :data:`CASES` order."""
    return {case: estimate_case(x, case) for case in CASES}


def block_price(instance_type: str) -> catalog.Figure | None:
    """Capacity Block price per instance-hour of ``instance_type`` (catalog), ``None`` when unknown."""
    facts = catalog.STARTUP_FACTS.get(instance_type)
    return facts.block_usd_per_hour if facts else None


def _minutes_text(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".") if value < 1 else f"{math.ceil(value)}"


def case_text(e: CaseEstimate) -> str:
    """``cold 15 min (9–23)``: the central figure rounded up, the range to whole minutes; the warm case adds its part after the
    node is Ready, a re-created pod the drain before its clock starts."""
    notes = []
    low, high = math.floor(e.low), math.ceil(e.high)
    if (low, high) != (math.ceil(e.minutes), math.ceil(e.minutes)):
        notes.append(f"{low}–{high}")
    if e.case == "warm":
        notes.append(f"{math.ceil(e.after_node_ready)} after the node is Ready")
    text = f"{e.case} {math.ceil(e.minutes)} min" + (f" ({'; '.join(notes)})" if notes else "")
    if e.drain_s is not None:
        text += f" after the old pod's drain of {_minutes_text(e.drain_s[0] / 60)}–{_minutes_text(e.drain_s[1] / 60)} min"
    return text


def format_estimates(x: StartupInputs, estimates: dict[str, CaseEstimate] | None = None) -> list[str]:
    """``time to first token: cold 15 min (11–21), ...`` and the cost per start at the block rate."""
    estimates = estimates or estimate_all(x)
    lines = ["time to first token: " + ", ".join(case_text(e) for e in estimates.values())]
    price = block_price(x.instance_type)
    if price is None:
        od = catalog.INSTANCE_TYPES[x.instance_type].on_demand_usd_per_hour
        lines.append(f"cost per start: unknown Capacity Block price for {x.instance_type} (the on-demand ${od:g}/h is not what a block costs)")
    else:
        nodes = f"{x.nodes} nodes" if x.nodes != 1 else "1 node"
        costs = ", ".join(f"{case} ${e.cost_usd(price.value, x.nodes):,.0f}" for case, e in estimates.items())
        lines.append(f"cost per start at ${price.value:g}/instance-h x {nodes} (block rate{', estimate' if price.estimate else ''}, {price.date}): {costs}")
    dump, where = dump_minutes(x), "the cold case" if x.engine_snapshot_s3 else "the cold and warm cases (no S3 copy: each new node dumps again)"
    if dump:
        lines.append(f"engine snapshot: the first start of a key dumps it before Ready, {dump:.1f} min of {where}; a restored start dumps nothing" if dump_before_first_ready(x)
                     else f"engine snapshot: a new key's first Ready pays no dump; the replica winning its claim dumps it once another serves: full capacity at +{dump:.1f} min")
    return lines


def format_phases(estimate: CaseEstimate) -> list[str]:
    """One line per phase: minutes and range, whether it is hidden behind a longer lane, and its source."""
    lines = [f"{estimate.case}: {estimate.minutes:.1f} min ({estimate.low:.1f}-{estimate.high:.1f})"]
    for p in estimate.phases:
        hidden = "" if estimate.on_critical_path(p) else " (hidden: runs beside a longer step)"
        spread = f" ({p.lo:.1f}-{p.hi:.1f})" if (p.lo, p.hi) != (p.minutes, p.minutes) else ""
        lines.append(f"  {p.minutes:5.1f}{spread}  {p.name}{hidden}  [{'estimate: ' if p.estimate and not p.source.startswith('estimate') else ''}{p.source}]")
    return lines


def engine_minutes(estimate: CaseEstimate, end: str = "central") -> float:
    """Minutes from the engine container's start to a healthy ``/health`` (what the startup probe and the ready timeout must cover);
    ``end`` ``high`` takes every phase at its high end."""
    return sum(p.hi if end == "high" else p.minutes for p in estimate.phases if p.engine)


def _worst_engine(x: StartupInputs, end: str = "central") -> float:
    return max(engine_minutes(e, end) for e in estimate_all(x).values())


def recommended_ready_timeout_s(x: StartupInputs, safety: float = 2.0, margin_s: int = 600) -> int:
    """``VLLM_ENGINE_READY_TIMEOUT_S`` for the slowest case (cold): the larger of its estimate x ``safety`` and its high end, + margin, in whole minutes."""
    worst = max(_worst_engine(x) * safety, _worst_engine(x, "high"))
    return int(math.ceil((worst * 60 + margin_s) / 60) * 60)


def check_ready_timeout(configured_s: int, x: StartupInputs, margin_s: int = 600) -> str | None:
    """A warning when ``configured_s`` is shorter than the cold engine's high end + margin (vLLM would give up mid-compile)."""
    worst = _worst_engine(x, "high")
    floor = math.ceil(worst * 60 + margin_s)
    if configured_s < floor:
        return f"engine ready timeout {configured_s} s is shorter than the cold start estimate's high end ({worst:.0f} min) + {margin_s // 60} min; set at least {floor} s (recommended {recommended_ready_timeout_s(x)} s)"
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


@dataclass(frozen=True)
class OverlapOption:
    """One way of getting the weights into the GPUs on a new node, modelled (issue 26: overlap loading with the weights' arrival)."""

    name: str
    """What the option is."""
    minutes: float
    """Minutes from the pod's start to the weights in the GPUs (sync, verification, engine start, load)."""
    restart_minutes: float
    """The same for a re-created pod or a restarted container on that node."""
    verified: bool
    """Every byte is checked against the staged manifest's sha256 before the engine reads it."""
    source: str
    """The figures it rests on."""


def overlap_options(x: StartupInputs) -> list[OverlapOption]:
    """The node copy then a page-cache load (what the stacks do) against streaming from S3 with vLLM's Run:ai loader.

    vLLM 0.27.1's loaders list every shard when the load starts (``DefaultModelLoader._prepare_weights``), so an engine that
    starts before the sync has finished cannot read the shards as they land: the overlap available is the streamer reading S3
    itself, with or without the node copy written beside it (they then share the node's S3 bandwidth)."""
    size_gb = x.weights_bytes / 1e9
    sync = sum(p.minutes for p in _transfer_phases(replace(x, weights_source="s3", crt_target_bandwidth=True, verify="overlapped")))
    start = FIGURES["engine_start"].value
    load = _load_phase(x, resident=True).minutes
    stream = FIGURES["streamer_s3_rate"]
    s3 = FIGURES["s3_node_rate"]
    alone = size_gb / stream.value / 60
    shared = size_gb / (min(stream.value, s3.value / 2)) / 60
    return [
        OverlapOption("node copy, verified, then a page-cache load (the stacks)", sync + start + load, start + load, True,
                      f"{s3.source}; {FIGURES['weights_load'].source}"),
        OverlapOption("Run:ai streamer from S3, no node copy", start + alone, start + alone, False, stream.source),
        OverlapOption("Run:ai streamer from S3 while the node copy is written", start + shared, start + load, False,
                      f"the node's S3 rate ({s3.value:g} GB/s) shared by two readers; {stream.source}"),
    ]


TOGGLES = {
    "crt_target_bandwidth": "CRT target bandwidth from the catalog",
    "compile_cache": "compile/JIT caches in S3",
    "node_local_weights": "node-local weights that outlive the pod",
    "image_prepull": "image pre-pull DaemonSet",
    "fast_image_pull": "nodeadm FastImagePull",
    "image_in_region": "image in region (ECR / pull-through cache)",
    "buffered_load": "weights read through the page cache (FASTSAFETENSORS_ODIRECT=0)",
    "sync_page_cache": "sync container memory that keeps the files in the page cache",
    "startup_plan": "vLLM's persisted startup plan (VLLM_ENABLE_STARTUP_PLAN)",
    "sidecar_sync": "the sync as a native sidecar (cache restore beside it)",
    "pipelined_load": "the engine started beside the sync, loading each shard once verified",
    "engine_snapshot": "an engine snapshot restored instead of rebuilt (CRIU + cuda-checkpoint)",
    "engine_snapshot_s3": "the engine snapshot's S3 copy restored on a new node",
}
"""The mechanisms :func:`mechanisms_needed` tries, by :class:`StartupInputs` field."""


def mechanisms_needed(x: StartupInputs, targets: dict[str, float]) -> dict[str, list[str]]:
    """Per case over its target: the mechanisms that are off in ``x`` and would each bring it down, with the minutes saved."""
    alternatives: list[tuple[dict[str, object], str]] = [({name: True}, label) for name, label in TOGGLES.items() if not getattr(x, name)]
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
        out[case] = helps or ["none left to turn on: the remaining minutes are node boot, the weights' transfer and the engine itself"]
    return out


TODAYS_MECHANISMS = dict(
    crt_target_bandwidth=False, verify="sequential", hasher="sha256sum", verify_workers=32, compile_cache=False, node_local_weights=False,
    image_prepull=False, fast_image_pull=False, buffered_load=False, sync_page_cache=False, startup_plan=False,
)
"""What the serving pod does before the mechanisms of docs/weights.md: CRT at its fallback, a
sequential ``sha256sum`` pass on 32 CPUs, no caches, emptyDir weights, image pulled after the
init containers, a loader that may bypass the page cache, no startup plan."""


def image_in_region(image_repository: str, region: str) -> bool:
    """True when the image comes from ECR in ``region`` (a private registry or a pull-through cache)."""
    host = image_repository.split("/", 1)[0]
    return host.endswith(f".dkr.ecr.{region}.amazonaws.com")


STAGED_PATH = dict(weights_source="s3", crt_target_bandwidth=True, verify="overlapped", hasher="openssl")
"""What staging the weights in S3 changes for a Hugging Face stack: the node-side sync of :mod:`.node_sync`."""


def startup_warnings(x: StartupInputs, ready_timeout_s: int, block_hours: float | None = None) -> list[tuple[str, str]]:
    """``(topic, warning)`` pairs, the topic named by the input it concerns: ``ready_timeout_s`` (:func:`check_ready_timeout`),
    ``block_hours`` (:func:`block_window_warning`) and ``weights_source`` (Hugging Face weights through the NAT: modelled time and NAT cost)."""
    out: list[tuple[str, str]] = []
    warning = check_ready_timeout(ready_timeout_s, x)
    if warning:
        out.append(("ready_timeout_s", warning))
    if block_hours is not None:
        window = block_window_warning(block_hours, x)
        if window:
            out.append(("block_hours", window))
    if x.weights_source == "huggingface":
        cold = estimate_case(x, "cold").minutes
        staged = estimate_case(replace(x, **STAGED_PATH), "cold").minutes  # type: ignore[arg-type]  # fields of StartupInputs
        gb = x.weights_bytes / 1e9 * x.nodes
        nat = FIGURES["nat_data_processing"]
        out.append((
            "weights_source",
            f"weights come from Hugging Face through the NAT gateway: ~{cold:.0f} min to first token (staged in S3: ~{staged:.0f}), "
            f"and ~{gb:,.0f} GB of NAT data processing per start (~${gb * nat.value:,.0f} at ${nat.value}/GB, estimate); stage them with `kimi-k3 weights stage`",
        ))
    return out
