#!/usr/bin/env python3
"""Page cache -> GPU load throughput per loader mechanism, and CUDA graph capture cost, on one GPU.

What the start-up estimate (``components/weights/estimate.py``) needs from a GPU machine:

* ``load``: safetensors shards written to local disk (in the page cache afterwards, as the node
  sync leaves them), then read into GPU memory by each mechanism a vLLM 0.27.1 loader uses:
  ``safetensors.torch.load_file`` to the GPU, ``safe_open`` + ``get_tensor`` + ``.to(cuda)`` per
  tensor (vLLM's default lazy loader), and a multi-threaded reader that ``pread``s into pinned
  host buffers and copies them to the GPU (what fastsafetensors' ``nogds`` path does, 16 threads
  by default in its ``ParallelLoader``); plus the raw pinned and pageable host-to-device rates;
* ``graphs``: a decode-like step of many small kernels captured as CUDA graphs for a list of
  batch sizes (each size warmed up once, as vLLM's ``cudagraph_num_of_warmups=1``), so the cost
  of capturing one graph per kernel can scale to the sizes a profile captures.

* ``checkpoint`` (issue 34): a child process holding ``--checkpoint-gib`` of GPU memory is locked,
  checkpointed (device memory copied into host memory by the driver), restored and unlocked by
  NVIDIA's ``cuda-checkpoint`` utility (github.com/NVIDIA/cuda-checkpoint, ``bin/x86_64_Linux``;
  driver >= 570 for the separate lock/checkpoint/restore/unlock actions), each action timed, the
  GPU bytes checksummed before and after: the device half of a CRIU + cuda-checkpoint snapshot.
  CRIU itself (the host half: the process image to the NVMe) is not installed there and is not timed.

Rerun (the first command gave the H200 figures; the second ran on one H100 80GB HBM3, driver 580.159.04, torch 2.11, gVisor,
2026-12-07, its JSON in tools/measurements/gpu-load-h100-2026-12-07.json; both in components/weights/startup_figures.py)::

    python3 tools/bench_gpu_load.py --gib 16 --files 4 --repeat 2
    PYTHONPATH=$PWD/.bench/site python3 tools/bench_gpu_load.py --gib 32 --files 8 --repeat 2 --skip-graphs \
        --cuda-checkpoint .bench/cuda-checkpoint --checkpoint-gib 4,32 --out $OUT/bench.json

The second adds the manifest-order reader (one shard after the other, as a loader that reads each
shard once the sync has verified it), fastsafetensors and instanttensor where their wheels are
installed (``PYTHONPATH``), and the checkpoint rates. Its fastsafetensors figure (1.45 GB/s, a fifth of one pinned thread) is
an artefact of that machine's gVisor sandbox, not the library's rate (``startup_figures.FASTSAFETENSORS_ANOMALY``).

Standard library + torch + safetensors (what the GPU machine has); prints one JSON document (the
load figures first, on their own line). The recorded run opened the shard once per 32 MiB chunk in
the threaded reader (one ``open`` per read, fixed since: one descriptor per shard and thread); at
that chunk size it does not move the rates.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

TENSOR_MIB = 8
"""Size of each tensor in the shards: Kimi K3's MXFP4 expert blocks are a few MiB each."""


def _write_shards(folder: str, files: int, gib: float) -> list[str]:
    per_file = int(gib * 2**30 / files)
    count = max(1, per_file // (TENSOR_MIB * 2**20))
    paths = []
    for i in range(files):
        data = torch.randint(0, 255, (count, TENSOR_MIB * 2**20), dtype=torch.uint8, device="cuda")
        path = os.path.join(folder, f"model-{i:05d}.safetensors")
        save_file({f"t{i}.{j}": data[j].cpu() for j in range(count)}, path)  # one storage per tensor: safetensors refuses shared ones
        del data
        paths.append(path)
    for path in paths:  # read once: the shards are in the page cache from here on
        with open(path, "rb") as fh:
            while fh.read(64 << 20):
                pass
    return paths


def _rate(fn, nbytes: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        torch.cuda.empty_cache()
    return round(nbytes / statistics.median(times) / 1e9, 2)


def _load_file(paths: list[str]) -> None:
    for path in paths:
        tensors = load_file(path, device="cuda:0")
        del tensors


def _safe_open(paths: list[str]) -> None:
    kept = []
    for path in paths:
        with safe_open(path, framework="pt", device="cpu") as f:
            kept += [f.get_tensor(name).to("cuda:0") for name in f.keys()]  # noqa: SIM118
    del kept


def _threaded(paths: list[str], threads: int, chunk: int = 32 << 20) -> None:
    jobs = [(p, off, min(chunk, os.path.getsize(p) - off)) for p in paths for off in range(0, os.path.getsize(p), chunk)]
    total = sum(n for _, _, n in jobs)
    out = torch.empty(total, dtype=torch.uint8, device="cuda:0")
    starts, pos = [], 0
    for _, _, n in jobs:
        starts.append(pos)
        pos += n
    lock = threading.Lock()
    queue = list(range(len(jobs)))

    def work() -> None:
        buf = torch.empty(chunk, dtype=torch.uint8).pin_memory()
        view = memoryview(buf.numpy())
        stream = torch.cuda.Stream()
        fds: dict[str, int] = {}
        while True:
            with lock:
                if not queue:
                    break
                k = queue.pop()
            path, off, n = jobs[k]
            if path not in fds:
                fds[path] = os.open(path, os.O_RDONLY)
            fd = fds[path]
            got = 0
            while got < n:
                got += os.preadv(fd, [view[got:n]], off + got)
            with torch.cuda.stream(stream):
                out[starts[k]:starts[k] + n].copy_(buf[:n], non_blocking=True)
            stream.synchronize()
        for fd in fds.values():
            os.close(fd)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


def _manifest_order(paths: list[str], threads: int) -> None:
    """Shards one after the other, in manifest order, each read by ``threads`` pinned readers (a loader that starts a shard
    once the sync has verified it: the rate it keeps against reading every shard at once)."""
    for path in paths:
        _threaded([path], threads)


def _fastsafetensors(paths: list[str]) -> None:
    from fastsafetensors import fastsafe_open  # optional: only where its wheel is installed

    with fastsafe_open(paths, framework="pt", device="cuda:0", nogds=True) as f:  # nogds: its threaded pinned reader, no GPUDirect
        kept = [f.get_tensor(name) for name in f.keys()]  # noqa: SIM118
    del kept


def _instanttensor(paths: list[str]) -> None:
    os.environ.setdefault("INSTANTTENSOR_BACKEND", "BUFFERED")  # the page cache holds the shards: buffered reads, as the profiles load
    from instanttensor import safe_open as it_open  # optional: only where its wheel is installed

    kept = []
    with it_open(paths, framework="pt", device=0) as f:
        kept = [t for _, t in f.tensors()]
    del kept


def _optional(name: str, fn, nbytes: int, repeat: int):
    try:
        return _rate(fn, nbytes, repeat)
    except Exception as error:  # a missing or failing optional loader is a reading, not a crash
        return f"unavailable: {type(error).__name__}: {str(error)[:200]}"


def _h2d(nbytes: int, pinned: bool, repeat: int) -> float:
    host = torch.ones(nbytes, dtype=torch.uint8)  # touched: no page faults inside the timed copies
    host = host.pin_memory() if pinned else host
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda:0")
    return _rate(lambda: dev.copy_(host, non_blocking=pinned), nbytes, repeat)


def load(gib: float, files: int, repeat: int) -> dict:
    """Rates (GB/s, 1e9 bytes) of each mechanism from the page cache to the GPU."""
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:
        paths = _write_shards(folder, files, gib)
        nbytes = sum(os.path.getsize(p) for p in paths)
        out = {"bytes": nbytes, "safetensors_load_file": _rate(lambda: _load_file(paths), nbytes, repeat),
               "safe_open_get_tensor_to_cuda": _rate(lambda: _safe_open(paths), nbytes, repeat)}
        for threads in (1, 4, 8, 16, 32):
            out[f"pinned_reader_{threads}_threads"] = _rate(lambda t=threads: _threaded(paths, t), nbytes, repeat)
        out["manifest_order_16_threads"] = _rate(lambda: _manifest_order(paths, 16), nbytes, repeat)
        out["fastsafetensors_nogds"] = _optional("fastsafetensors", lambda: _fastsafetensors(paths), nbytes, repeat)
        out["instanttensor_buffered"] = _optional("instanttensor", lambda: _instanttensor(paths), nbytes, repeat)
    out["h2d_pinned"] = _h2d(4 << 30, True, repeat)
    out["h2d_pageable"] = _h2d(4 << 30, False, repeat)
    return out


def graphs(layers: int, kernels_per_layer: int, sizes: list[int]) -> dict:
    """Seconds to warm up and capture one CUDA graph per batch size of a ``layers`` x ``kernels_per_layer`` step."""
    hidden = 1024
    weights = [torch.randn(hidden, hidden, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    inputs = torch.randn(max(sizes), hidden, device="cuda", dtype=torch.bfloat16)

    def step(x: torch.Tensor) -> torch.Tensor:
        for i in range(layers):
            for k in range(kernels_per_layer // 2):
                x = torch.nn.functional.silu(x @ weights[(i + k) % 4])  # two kernels: a matmul and an activation
        return x

    pool = torch.cuda.graph_pool_handle()
    kept = []  # graphs sharing a pool must outlive the next capture (as vLLM keeps them)
    per_size = []
    start_all = time.perf_counter()
    for size in sorted(sizes, reverse=True):  # vLLM captures the largest size first
        x = inputs[:size]
        start = time.perf_counter()
        step(x)  # the warm-up run before capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            step(x)
        torch.cuda.synchronize()
        kept.append(graph)
        per_size.append(round(time.perf_counter() - start, 4))
    total = time.perf_counter() - start_all
    return {"layers": layers, "kernels": layers * (kernels_per_layer // 2) * 2, "sizes": len(sizes), "total_s": round(total, 2),
            "first_s": per_size[0], "median_s": statistics.median(per_size[1:] or per_size)}


_HOLDER = """
import sys, torch
x = torch.empty(int(sys.argv[1]), dtype=torch.uint8, device="cuda")
x.random_(0, 256)
def digest():
    return int(x.view(torch.int32).to(torch.int64).sum().item()) if x.numel() < 2**33 else int(sum(c.view(torch.int32).to(torch.int64).sum().item() for c in x.split(2**32)))
print("ready", digest(), flush=True)
sys.stdin.readline()
print("after", digest(), flush=True)
"""


def _gpu_used_mib() -> int | None:
    try:
        return int(subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"], capture_output=True, text=True, check=True).stdout.split()[0])
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return None


def checkpoint(tool: str, gib: float) -> dict:
    """Seconds of each ``cuda-checkpoint`` action on a process holding ``gib`` GiB of GPU memory, and the GB/s of checkpoint and restore."""
    nbytes = int(gib * 2**30)
    child = subprocess.Popen([sys.executable, "-c", _HOLDER, str(nbytes)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    out: dict = {"gib": gib, "bytes": nbytes}
    try:
        assert child.stdout is not None and child.stdin is not None
        ready = child.stdout.readline().split()
        out["digest_before"] = int(ready[1])
        out["gpu_mib_running"] = _gpu_used_mib()
        for action in ("lock", "checkpoint", "restore", "unlock"):
            start = time.perf_counter()
            done = subprocess.run([tool, "--action", action, "--pid", str(child.pid)], capture_output=True, text=True)
            out[f"{action}_s"] = round(time.perf_counter() - start, 3)
            if done.returncode:
                out[f"{action}_error"] = (done.stdout + done.stderr).strip()[:300]
                return out
            if action == "checkpoint":
                out["gpu_mib_checkpointed"] = _gpu_used_mib()
                with open(f"/proc/{child.pid}/status") as fh:
                    out["rss_kib_checkpointed"] = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS"))
        child.stdin.write("\n")
        child.stdin.flush()
        out["digest_after"] = int(child.stdout.readline().split()[1])
        out["same_bytes"] = out["digest_after"] == out["digest_before"]
        out["checkpoint_gb_per_s"] = round(nbytes / out["checkpoint_s"] / 1e9, 2)
        out["restore_gb_per_s"] = round(nbytes / out["restore_s"] / 1e9, 2)
        return out
    finally:
        child.kill()
        child.wait()


def _driver() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


VLLM_DEFAULT_SIZES = [1, 2, 4, *range(8, 256, 8), *range(256, 513, 16)]
"""vLLM 0.27.1's default capture list for max_num_seqs >= 256 (``VllmConfig._set_cudagraph_sizes``): 51 sizes."""


def main() -> None:
    """Run both measurements and print them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=16)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--skip-graphs", action="store_true", help="leave the CUDA graph capture out")
    parser.add_argument("--cuda-checkpoint", default=shutil.which("cuda-checkpoint"), help="the cuda-checkpoint binary (default: on PATH)")
    parser.add_argument("--checkpoint-gib", default="", help="comma-separated GiB held by the checkpointed process (empty: no checkpoint run)")
    parser.add_argument("--out", default="", help="also write the JSON document here")
    args = parser.parse_args()
    result = {"gpu": torch.cuda.get_device_name(0), "driver": _driver(), "torch": torch.__version__, "cpus": os.cpu_count(),
              "criu": shutil.which("criu"), "load": load(args.gib, args.files, args.repeat)}

    def emit(indent: int | None = None) -> None:
        text = json.dumps(result, indent=indent)
        print(text, flush=True)
        if args.out:
            with open(args.out, "w") as fh:
                fh.write(text + "\n")

    emit()  # the load figures first, in case a later part fails
    if args.checkpoint_gib:
        if not args.cuda_checkpoint:
            result["checkpoint"] = "unavailable: no cuda-checkpoint binary"
        else:
            result["checkpoint"] = [checkpoint(args.cuda_checkpoint, float(g)) for g in args.checkpoint_gib.split(",")]
        emit()
    if not args.skip_graphs:
        result["graphs"] = [graphs(93, k, VLLM_DEFAULT_SIZES) for k in (10, 40)]
        result["graphs_16_sizes"] = graphs(93, 40, [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 320, 384, 512])
    emit(indent=1)


if __name__ == "__main__":
    main()
