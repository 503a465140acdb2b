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

Rerun (the figures in the estimate's sources came from this command on one H200)::

    python3 tools/bench_gpu_load.py --gib 16 --files 4 --repeat 2

Standard library + torch + safetensors (what the GPU machine has); prints one JSON document (the
load figures first, on their own line). The recorded run opened the shard once per 32 MiB chunk in
the threaded reader (one ``open`` per read, fixed since: one descriptor per shard and thread); at
that chunk size it does not move the rates.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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


VLLM_DEFAULT_SIZES = [1, 2, 4, *range(8, 256, 8), *range(256, 513, 16)]
"""vLLM 0.27.1's default capture list for max_num_seqs >= 256 (``VllmConfig._set_cudagraph_sizes``): 51 sizes."""


def main() -> None:
    """Run both measurements and print them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=16)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    result = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cpus": os.cpu_count(), "load": load(args.gib, args.files, args.repeat)}
    print(json.dumps(result), flush=True)  # the load figures first, in case the graph part fails
    result["graphs"] = [graphs(93, k, VLLM_DEFAULT_SIZES) for k in (10, 40)]
    result["graphs_16_sizes"] = graphs(93, 40, [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 320, 384, 512])
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
