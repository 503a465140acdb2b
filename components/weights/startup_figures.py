"""The figures the start-up estimate rests on: each cited, measured, or marked an estimate with its range.

Rules (issue 26, "calibrate the estimate"): a figure is a public measurement (repository, issue or
PR, file), one measured here or on the project's GPU machine (the command to rerun it is in the
source), or an ``estimate`` with the range it is known to lie in. Where cited measurements
disagree, the value is the middle of them (the median), never the best; an estimate's value is
the middle of its range unless the source says why not. Upstream threads read with this
session's search tools are marked *read*; two the issue cites but the stored copy did not hold are
marked *as cited* (not re-read). ``tools/bench_gpu_load.py`` is the GPU measurement, run twice on
the project's lent machine: one H200 (torch 2.11, safetensors 0.8.0, 16 vCPUs; 17.2 GB in four shards
of 8 MiB tensors, page cache warm, median of two runs, 2026-12) and one H100 80GB HBM3 (driver
580.159.04, torch 2.11, 16 vCPUs, gVisor; 34.4 GB in eight shards, median of two runs, 2026-12-07;
``tools/measurements/gpu-load-h100-2026-12-07.json``), each with its command in :data:`GPU_RUNS`.

The weights' size is the catalog's (``catalog.KIMI_K3``: 1,560.9 GB in 96 shards).
"""

from __future__ import annotations

from types import MappingProxyType

from kimi_k3.core.catalog import Figure

DATE = "2026-12"
"""When these figures were read, measured or estimated."""

GPU_BENCH = "measured: `python3 tools/bench_gpu_load.py --gib 16 --files 4 --repeat 2` on one H200 (torch 2.11, 16 vCPUs), 2026-12"
"""How the project's first GPU figures were measured (the H200 run)."""
GPU_BENCH_H100 = (
    "measured: `PYTHONPATH=$PWD/.bench/site python3 tools/bench_gpu_load.py --gib 32 --files 8 --repeat 2 --skip-graphs "
    "--cuda-checkpoint .bench/cuda-checkpoint --checkpoint-gib 4,32` on one H100 80GB HBM3 (driver 580.159.04, torch 2.11.0+cu130, "
    "16 vCPUs, gVisor), 2026-12-07; tools/measurements/gpu-load-h100-2026-12-07.json"
)
"""How the H100 run was measured (the command of tools/measurements/README.md)."""
H200 = "one H200 (torch 2.11, 16 vCPUs)"
"""The machine of :data:`GPU_BENCH`."""
H100 = "one H100 80GB HBM3 (driver 580.159.04, torch 2.11, gVisor)"
"""The machine of :data:`GPU_BENCH_H100`."""


def _fig(value: float, unit: str, source: str, *, low: float | None = None, high: float | None = None, estimate: bool = False) -> Figure:
    return Figure(value, unit, source, DATE, estimate=estimate, low=low, high=high)


def _median(*values: float) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


_H200_LOADS = MappingProxyType({
    "safetensors.torch.load_file to the GPU": 6.10,
    "safe_open + get_tensor + .to(cuda) per tensor (vLLM's default lazy loader)": 5.47,
    "pread into pinned buffers, 1 thread": 4.74,
    "pread into pinned buffers, 4 threads": 14.68,
    "pread into pinned buffers, 8 threads": 23.61,
    "pread into pinned buffers, 16 threads (fastsafetensors' default)": 29.22,
    "pread into pinned buffers, 32 threads": 23.81,
    "pinned host -> GPU copy": 55.38,
    "pageable host -> GPU copy": 5.84,
})
_H100_LOADS = MappingProxyType({
    "safetensors.torch.load_file to the GPU": 6.41,
    "safe_open + get_tensor + .to(cuda) per tensor (vLLM's default lazy loader)": 4.75,
    "pread into pinned buffers, 1 thread": 4.0,
    "pread into pinned buffers, 4 threads": 13.47,
    "pread into pinned buffers, 8 threads": 21.65,
    "pread into pinned buffers, 16 threads (fastsafetensors' default)": 29.61,
    "pread into pinned buffers, 32 threads": 23.17,
    "pread into pinned buffers, 16 threads, shards one after the other in manifest order (the pipelined loader)": 23.07,
    "fastsafetensors 0.5.0, nogds (anomalous under gVisor, not its rate: see FASTSAFETENSORS_ANOMALY)": 1.45,
    "instanttensor 0.2.2, buffered": 33.94,
    "pinned host -> GPU copy": 54.72,
    "pageable host -> GPU copy": 6.02,
})
MEASURED_ON_GPU = MappingProxyType({H200: _H200_LOADS, H100: _H100_LOADS})
"""GB/s page cache -> one GPU per mechanism, per machine (:data:`GPU_RUNS` has each run's command): why the profiles keep a
threaded pinned reader. The two runs agree within 15 % where both measured."""
GPU_RUNS = MappingProxyType({H200: GPU_BENCH, H100: GPU_BENCH_H100})
"""The command and machine of each :data:`MEASURED_ON_GPU` run."""
CUDA_CHECKPOINT_H100 = MappingProxyType({
    4: MappingProxyType({"checkpoint_s": 7.559, "restore_s": 2.425, "checkpoint_gb_per_s": 0.57, "restore_gb_per_s": 1.77}),
    32: MappingProxyType({"checkpoint_s": 22.721, "restore_s": 8.57, "checkpoint_gb_per_s": 1.51, "restore_gb_per_s": 4.01}),
})
"""cuda-checkpoint (NVIDIA/cuda-checkpoint @6ec728af) on a process holding 4 and 32 GiB of one H100 (:data:`GPU_BENCH_H100`): seconds
and GB/s of ``--action checkpoint`` (device memory out to host memory) and ``--action restore`` (back), bytes identical after the restore
(a digest of the buffer before and after). The device half of a snapshot restore only: CRIU, the host half, is not on that machine."""


def device_restore_s(gb: float) -> float:
    """Seconds cuda-checkpoint takes to restore ``gb`` of one GPU's state: the line through the two H100 points
    (:data:`CUDA_CHECKPOINT_H100`; a fixed ~1.5 s and ~4.9 GB/s beyond it)."""
    small, large = CUDA_CHECKPOINT_H100[4], CUDA_CHECKPOINT_H100[32]
    small_gb, large_gb = 4 * 2**30 / 1e9, 32 * 2**30 / 1e9
    per_gb = (large["restore_s"] - small["restore_s"]) / (large_gb - small_gb)
    return small["restore_s"] + (gb - small_gb) * per_gb


def device_checkpoint_s(gb: float) -> float:
    """Seconds cuda-checkpoint takes to checkpoint ``gb`` of one GPU's state out to host memory: the line through the two H100 points
    (:data:`CUDA_CHECKPOINT_H100`; a fixed ~5.4 s and ~2.0 GB/s beyond it). The device half of the first dump of a key."""
    small, large = CUDA_CHECKPOINT_H100[4], CUDA_CHECKPOINT_H100[32]
    small_gb, large_gb = 4 * 2**30 / 1e9, 32 * 2**30 / 1e9
    per_gb = (large["checkpoint_s"] - small["checkpoint_s"]) / (large_gb - small_gb)
    return small["checkpoint_s"] + (gb - small_gb) * per_gb


SEAL_WORKERS = 8
"""Threads hashing a snapshot's files when it is sealed (:func:`kimi_k3.weights.snapshot_pod.file_sums`; ``hashlib`` releases the GIL
while it hashes, and CRIU writes one pages image per process of the tree, nine of them for TP8)."""


SNAPSHOT_GPUS = 8
"""GPUs whose state one engine snapshot holds (TP8), each restored by its own worker process side by side."""


# --- page cache -> GPU loads of whole large checkpoints (GB/s, 1e9 bytes, every GPU of the node together) -----------
LOAD_RATES = MappingProxyType({
    "run-ai/runai-model-streamer#135 (as cited by issue 26): Kimi-K2.5, 620 GB in 35-45 s with the Run:ai streamer": 620 / 40,
    "foundation-model-stack/fastsafetensors#55 (as cited by issue 26): DeepSeek-R1, 640 GB in about 27 s": 640 / 27,
    "marin-community/marin#7136 (read): 124.96 GiB in 3.49 s with vLLM's default loader, EP8, page cache warm": 124.96 * 2**30 / 1e9 / 3.49,
})
"""Whole-checkpoint load rates measured upstream; the estimate takes their median."""

# --- CUDA graph capture of vLLM's default 51 sizes for a large MoE (seconds, ``Graph capturing finished in``) --------
GRAPH_CAPTURES = MappingProxyType({
    "vllm-project/vllm#50576 (read): DeepSeek-V4-Flash on SM8x GPUs of 47.4 GiB, 51 PIECEWISE sizes + FULL: 'Graph capturing finished in 22 secs'": 22.0,
    "run-ai/runai-model-streamer#67 (read): vLLM 0.9 log, 'Graph capturing finished in 37 secs'": 37.0,
})
"""Capture times of vLLM's default size list seen upstream; the estimate takes their median."""

DEFAULT_CAPTURE_SIZES = 51
"""vLLM 0.27.1's default capture list for a max batch >= 256: 1, 2, 4, 8..248 by 8, 256..512 by 16 (``VllmConfig._set_cudagraph_sizes``)."""

FIGURES: MappingProxyType[str, Figure] = MappingProxyType({
    # --- the node -------------------------------------------------------------------------------------------------
    "node_boot": _fig(
        4.5, "min",
        "estimate, no first-hand p5/p6 figure: EC2 launch of the block's instance, AL2023 NVIDIA AMI boot, nodeadm join, kubelet Ready and "
        "the NVIDIA device plugin advertising the GPUs. Proxies (read): awslabs/amazon-eks-ami#1099 (c5/c6a: 39 s to kubelet registration; "
        "'GPU instance types often take much longer to boot'), amazon-eks-ami PR #2733 (NVIDIA AMI start time: dracut on the driver's DKMS "
        "load, tested on p5), skypilot-org/skypilot#4091 (AWS GPU VM ready in 2 min 27 s, 1 min 41 s with a custom image), "
        "NVIDIA/k8s-device-plugin#291 (GPUs advertised ~90 s after the node came up); range 3-6 min (issue 26), middle 4.5",
        low=3.0, high=6.0, estimate=True,
    ),
    "pod_start": _fig(
        0.3, "min",
        "estimate: scheduling once the GPUs are advertised, the node-local volume bound (local-static-provisioner discovery), the "
        "~130 MB AWS CLI init image pulled, containers started; range 0.2-0.6",
        low=0.2, high=0.6, estimate=True,
    ),
    "restart_backoff": _fig(0.17, "min", "kubelet's first container restart back-off, 10 s (Kubernetes docs, pod lifecycle: 'exponential back-off delay (10s, 20s, 40s, …)')"),
    # --- weights onto the node --------------------------------------------------------------------------------------
    "s3_node_rate": _fig(
        13.0, "GB/s",
        "middle of its range (issue 34: no phase at an end of its range). Low end: run-ai/runai-model-streamer#31 (as cited by issue 26), "
        "about 10 GB/s from S3 on a p5 with the AWS CLI, the highest public single-process figure found; high end: the CRT target "
        "(aws-c-s3's 350 Gbps for p6-b300) x 0.6, bounded by 8 NVMe x 2 GB/s write (estimate). The sync runs 4 CRT processes over "
        "disjoint quarters of the manifest (kimi_k3.weights.node_sync.SYNC_STREAMS), which is what lets it pass the single-process "
        "figure; no multi-stream figure was found or measured, so the value stays the middle of the range",
        low=10.0, high=16.0,
    ),
    "hf_download": _fig(0.5, "GB/s", "estimate: Hugging Face CDN through a NAT gateway; range 0.25-1", low=0.25, high=1.0, estimate=True),
    "streamer_s3_rate": _fig(
        124.96 * 2**30 / 1e9 / 14.29, "GB/s",
        "marin-community/marin#7136 (read): vLLM's Run:ai streamer (distributed) loaded 124.96 GiB from CoreWeave object storage in 14.29 s "
        "(the store's cache 'likely warm'); the same thread: 'Do not use Run:ai when the model is already available locally'",
    ),
    "sha256sum_per_core": _fig(0.32, "GB/s", "measured: tools/bench_verify.py, coreutils sha256sum, one AMD EPYC core, page cache warm"),
    "openssl_per_core": _fig(1.34, "GB/s", "measured: tools/bench_verify.py, openssl dgst -sha256, one AMD EPYC core, page cache warm"),
    "image_pull_fast": _fig(
        _median(59.813, 67.272) / 60, "min",
        "aws-samples/karpenter-blueprints blueprints/soci-snapshotter/README.md (read, two revisions): a 10.78 GB vLLM image with SOCI "
        "parallel pull on AL2023 in 59.8 s and 67.3 s; middle of the two",
        low=59.813 / 60, high=67.272 / 60,
    ),
    "image_pull": _fig(
        _median(112.33, 138.049) / 60, "min",
        "aws-samples/karpenter-blueprints blueprints/soci-snapshotter/README.md (read, two revisions): the same image with containerd's "
        "default pull in 1 min 52.3 s and 2 min 18.0 s; middle of the two",
        low=112.33 / 60, high=138.049 / 60,
    ),
    "image_pull_nat_extra": _fig(3.0, "min", "estimate: Docker Hub across the NAT gateway instead of in-region ECR; range 1-5", low=1.0, high=5.0, estimate=True),
    # --- the engine -------------------------------------------------------------------------------------------------
    "engine_start": _fig(
        0.75, "min",
        "estimate: API server, engine core and 8 worker processes (imports, CUDA and NCCL init, model construction) before the weights load. "
        "Derived from ai-dynamo/modelexpress docs/BENCHMARKS.md (read): API ready in 1 min 44 s with weights (11 s) and kernel caches delivered, "
        "less a cache-hit compile (26.7 s, vllm-project/vllm#26511) and a 22 s graph capture (vllm#50576): ~44 s. High end: "
        "mitchross/talos-argocd-proxmox#1848 (read), 3 min of container/CUDA init and NCCL setup on a 2-GPU workstation",
        low=0.5, high=3.0, estimate=True,
    ),
    "weights_load": _fig(
        _median(*LOAD_RATES.values()), "GB/s",
        "median of whole-checkpoint loads measured upstream: " + "; ".join(f"{k} = {v:.1f} GB/s" for k, v in LOAD_RATES.items()),
        low=min(LOAD_RATES.values()), high=max(LOAD_RATES.values()),
    ),
    "pipelined_load_rate": _fig(
        _H100_LOADS["pread into pinned buffers, 16 threads, shards one after the other in manifest order (the pipelined loader)"], "GB/s",
        f"{GPU_BENCH_H100}: 16 threads reading into pinned buffers, the shards one after the other in manifest order (how the pipelined "
        "loader of kimi_k3.weights.pipelined_load reads), page cache -> one H100; taken as the node's rate like weights_load (the 8 ranks "
        "read side by side from one page cache; not measured node-wide). Range from the same run: the 8-thread reader (21.65) to 16 "
        "threads over every shard at once (29.61)",
        low=21.65, high=29.61,
    ),
    "compile_cold": _fig(
        _median(118.36, 160.29) / 60, "min",
        "vllm-project/vllm#26511 (read): DeepSeek-V3.2, 8 x B200, torch.compile cold start 118.36 s (PyTorch 2.8) and 160.29 s (2.9); middle of the two",
        low=118.36 / 60, high=160.29 / 60,
    ),
    "compile_warm": _fig(
        _median(26.7, 37.5) / 60, "min",
        "vllm-project/vllm#26511 (read): the same with the compile cache, 26.7 s (PyTorch 2.8) and 37.5 s (2.9); middle of the two. On vLLM 0.27.1 "
        "AOT compile is on (torch >= 2.10, vllm/envs.py use_aot_compile) and a hit skips Dynamo (vllm#24274): the low end is an AOT hit's "
        "'torch.compile took 14.85 s' (vllm#46389, read)",
        low=14.85 / 60, high=37.5 / 60,
    ),
    "kernel_jit_cold": _fig(
        2.15, "min",
        "estimate: first-use JIT of Triton (Kimi Delta Attention), FlashInfer, DeepGEMM and TileLang kernels and Triton autotuning, paid in "
        "the profile run when their caches are empty. Low end: vllm-project/vllm#39822 (read), 47 s of Mamba2 Triton autotuning moved into "
        "start-up on H100; high end: ai-dynamo/modelexpress docs/BENCHMARKS.md, kernel artifacts saving 5 min 16 s of a DeepSeek-V4-Pro cold "
        "start (7 min weights-only P2P vs 1 min 44 s) less torch.compile's 1.8 min, ~3.5 min (that run also autotuned FlashInfer, which the "
        "Kimi K3 profiles turn off); middle of 0.8-3.5",
        low=0.8, high=3.5, estimate=True,
    ),
    "profile_run": _fig(
        0.15, "min",
        "estimate: the profile run at max-num-batched-tokens, KV cache allocation and the CUDA graph memory estimate with warm kernel caches "
        "('Initial profiling/warmup run took 0.43 s' on a cache hit, noonghunna/club-3090 PR #594, read; a 1.56 TB model runs it on 8 GPUs); range 0.05-0.5",
        low=0.05, high=0.5, estimate=True,
    ),
    "memory_profiling": _fig(
        0.05, "min",
        "estimate: the memory snapshot and the CUDA graph memory estimate (two captures per graph mode, vllm/v1/worker/gpu_model_runner.py "
        "profile_cudagraph_memory) that a persisted startup plan skips (VLLM_ENABLE_STARTUP_PLAN, vllm/v1/worker/startup_plan.py); range 0.02-0.2",
        low=0.02, high=0.2, estimate=True,
    ),
    "cuda_graphs": _fig(
        _median(*GRAPH_CAPTURES.values()) / 60, "min",
        "median of upstream captures of vLLM's default 51 sizes: " + "; ".join(f"{k}" for k in GRAPH_CAPTURES)
        + f"; scales with the sizes captured ({GPU_BENCH}: a 93-layer, 3,720-kernel step captured for 51 sizes in 6.34 s and 16 sizes in 1.33 s)",
        low=min(GRAPH_CAPTURES.values()) / 60, high=max(GRAPH_CAPTURES.values()) / 60,
    ),
    "first_request": _fig(
        0.1, "min",
        "estimate: the warm-up completion once kernels are warmed at start-up (vllm-project/vllm#39822, #49903: first-request JIT and autotuning "
        "moved into start-up); range 0.05-0.5",
        low=0.05, high=0.5, estimate=True,
    ),
    "cache_restore": _fig(
        0.15, "min",
        "estimate: a 2-8 GB compile/JIT archive from in-region S3 with parallel ranged GETs, its sha256, and the untar (the restore logs the size "
        "and seconds: `kimi-k3 startup-report` reads them); range 0.05-0.5",
        low=0.05, high=0.5, estimate=True,
    ),
    # --- restore instead of rebuild (issue 34; docs/weights.md "Restore instead of rebuild") ------------------------
    "snapshot_state_gb": _fig(
        90.0, "GB",
        "estimate: what an engine snapshot holds once vLLM's sleep mode level 2 has released the weights and the KV cache "
        "(docs.vllm.ai/en/latest/features/sleep_mode/, read: level 2 'discards both model weights and KV cache'): per GPU the CUDA graph pool, "
        "NCCL buffers, workspaces and the allocator's cache (4-16 GB), plus the anonymous memory of 9 processes CRIU dumps "
        "(file-backed mappings are not dumped); 8 GPUs: 40-160 GB",
        low=40.0, high=160.0, estimate=True,
    ),
    "snapshot_restore_rate": _fig(
        _median(145 / 41, 31 / 12), "GB/s",
        "median of two CRIU + cuda-checkpoint restores: ai-dynamo snapshot (as cited by issue 34), a 145 GB engine restored in 41 s; "
        "llmux 0.7.6 LOG.md on docs.rs (read), a ~31 GB vLLM process restored from disk in ~12 s. The device half alone is measured: "
        "cuda-checkpoint's restore of a process holding 32 GiB of one H100, 8.57 s (4.01 GB/s; 4 GiB: 2.43 s, 1.77 GB/s), bytes identical "
        f"({GPU_BENCH_H100}); the estimate bounds the restore below by that half (the snapshot's GB over {SNAPSHOT_GPUS} GPUs restoring side by side, "
        "kimi_k3.weights.estimate._snapshot_phases), which it does not reach. "
        "CRIU's host half (the processes' pages read back from the NVMe) was not measured: CRIU is not on that machine",
        low=31 / 12, high=145 / 41,
    ),
    "snapshot_sleep": _fig(
        0.05, "min",
        "estimate: vLLM sleep(level=2) before a dump, the weights and KV cache discarded (freeing, nothing copied: 'It took … seconds to fall "
        "asleep', vllm/v1/executor/abstract.py, which `kimi-k3 startup-report` reads); range 0.02-0.2",
        low=0.02, high=0.2, estimate=True,
    ),
    "kv_wake": _fig(
        0.03, "min",
        "estimate: vLLM wake_up(tags=['kv_cache']) re-allocating the KV cache the snapshot released (allocation only, nothing copied; "
        "'It took … seconds to wake up', vllm/v1/executor/abstract.py); range 0.01-0.1",
        low=0.01, high=0.1, estimate=True,
    ),
    "peer_transfer_rate": _fig(
        _median(170.54 / 1.5, 681 / 15), "GB/s",
        "GPU-to-GPU from a serving peer over RDMA with NIXL (ModelExpress), node-wide: ai-dynamo/modelexpress @ v0.5.1 (the tag "
        "kimi_k3.weights.peer_transfer pins) docs/ARCHITECTURE.md and docs/DEPLOYMENT.md (read), DeepSeek-V3 681 GB across 8 GPUs in ~15 s; "
        "docs/POC_TRTLLM.md of the same repository's history (commit b7b39291, not in the tag; read), Llama-70B TP8 170.54 GB at ~1.5 s a rank; "
        "middle of the two. docs/BENCHMARKS.md @ v0.5.1 (read): DeepSeek-V4-Pro model loading 11 s P2P against 1 min 10 s from local storage, "
        "API ready in 1 min 44 s with kernel artifacts against 7 min with P2P weights only (8 x B200, ConnectX-7; the model's size is not "
        "given there, so no rate is taken from it)",
        low=681 / 15, high=170.54 / 1.5,
    ),
    "nat_data_processing": _fig(0.045, "USD/GB", "Amazon VPC pricing, NAT gateway data processing in us-east-1 (recalled, not re-read here; check the region's price)", estimate=True),
})
"""Phase figures not specific to an instance type (minutes unless the unit says otherwise)."""

FASTSAFETENSORS_ANOMALY = (
    "fastsafetensors 0.5.0 without GDS read 1.45 GB/s on the H100 run, a fifth of a single pinned thread (4.0) on the same machine: its nogds "
    "path reads through its own host buffers and threads, which gVisor's file and memory emulation slows (the run was inside gVisor); "
    "not its rate on a bare node and not cited as one (the upstream 23.7 GB/s of foundation-model-stack/fastsafetensors#55 stays in LOAD_RATES)"
)
"""Why the fastsafetensors figure of the H100 run is not used."""

__all__ = [
    "CUDA_CHECKPOINT_H100", "DATE", "DEFAULT_CAPTURE_SIZES", "FASTSAFETENSORS_ANOMALY", "FIGURES", "GPU_BENCH", "GPU_BENCH_H100", "GPU_RUNS",
    "GRAPH_CAPTURES", "H100", "H200", "LOAD_RATES", "MEASURED_ON_GPU", "SEAL_WORKERS", "SNAPSHOT_GPUS", "device_checkpoint_s", "device_restore_s",
]
