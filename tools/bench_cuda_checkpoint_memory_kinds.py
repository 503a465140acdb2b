"""Which kinds of GPU memory ``cuda-checkpoint`` moves: plain, virtual-memory-managed, and CUDA IPC (on the lent GPU machine).

Usage (one GPU, ``cuda-checkpoint`` from github.com/NVIDIA/cuda-checkpoint @6ec728af ``bin/x86_64_Linux``)::

    python3 tools/bench_cuda_checkpoint_memory_kinds.py --cuda-checkpoint .bench/cuda-checkpoint --mib 1024 --out $OUT/kinds.json

A snapshotted vLLM engine holds three kinds of GPU memory, and the README of cuda-checkpoint says of the
driver's support (section "Functionality"): "does not support UVM or IPC memory". This runs each kind in
its own process, then ``lock``, ``checkpoint``, ``restore``, ``unlock`` on it, and compares a checksum of the
bytes before and after:

* ``plain``: ``torch.empty(device="cuda")`` with the caching allocator's default (``cudaMalloc``);
* ``vmm``: the same with ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``, whose segments are
  ``cuMemCreate`` + ``cuMemMap`` (the virtual-memory API vLLM's sleep-mode ``CuMemAllocator`` uses for the
  weights and the KV cache);
* ``ipc``: a tensor exported by one process and opened by another through CUDA IPC
  (``torch.multiprocessing``), the way vLLM's custom all-reduce shares its buffers between ranks; both the
  importer and the exporter are checkpointed, each alone;
* ``cuda_graph_replayed_after_restore``: a process that captured a CUDA graph (two matmuls) replays it after
  the restore; ``same_bytes`` is true only when both its memory and the graph's output are unchanged.

The orchestrating process never touches CUDA. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time

_HOLDER = r"""
import sys, torch
n = int(sys.argv[1])
x = torch.empty(n, dtype=torch.uint8, device="cuda")
x.copy_(torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda"))
torch.cuda.synchronize()
print("ready", int(x.to(torch.int64).sum()), torch.cuda.memory_stats().get("segment.all.current", 0), flush=True)
sys.stdin.readline()
print("digest", int(x.to(torch.int64).sum()), flush=True)
"""

_GRAPH = r"""
import sys, torch
n = int(sys.argv[1])
x = torch.empty(n, dtype=torch.uint8, device="cuda")
x.copy_(torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda"))
a = torch.randn(1024, 1024, device="cuda"); b = torch.randn(1024, 1024, device="cuda")
s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        out = (a @ b).relu_() @ b
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    out = (a @ b).relu_() @ b
g.replay(); torch.cuda.synchronize()
before = out.clone()
print("ready", int(x.to(torch.int64).sum()), flush=True)
sys.stdin.readline()
out.zero_(); g.replay(); torch.cuda.synchronize()
same = bool(torch.equal(out, before))
print("digest", int(x.to(torch.int64).sum()) if same else -1, flush=True)
"""

_IPC = r"""
import sys, torch, torch.multiprocessing as mp

def importer(q, back, go):
    x = q.get()                       # opens the exporter's memory through CUDA IPC
    back.put(("pid", __import__("os").getpid()))
    go.wait()
    back.put(("digest", int(x.to(torch.int64).sum())))
    go2 = q.get()

if __name__ == "__main__":
    mp.set_start_method("spawn")
    n = int(sys.argv[1])
    x = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    q, back, go = mp.Queue(), mp.Queue(), mp.Event()
    p = mp.Process(target=importer, args=(q, back, go)); p.start()
    q.put(x)
    _, child = back.get()
    print("ready", int(x.to(torch.int64).sum()), child, flush=True)
    sys.stdin.readline()
    go.set()
    _, digest = back.get()
    print("digest", digest, flush=True)
    q.put(None); p.join(timeout=30)
"""


ACTION_TIMEOUT_S = 45
"""A cuda-checkpoint action that has not answered by then is recorded as hung (``lock`` waits for the process's CUDA work)."""
READY_TIMEOUT_S = 90
"""How long a holder may take to allocate and print ``ready``."""


def _readline(stream, timeout_s: float) -> list[str]:
    """One line of a child's stdout, split; ``[]`` when none comes in ``timeout_s``."""
    import select

    ready, _, _ = select.select([stream], [], [], timeout_s)
    return stream.readline().split() if ready else []


def _cycle(tool: str, pid: int) -> dict:
    out: dict = {"pid": pid}
    for action in ("lock", "checkpoint", "restore", "unlock"):
        start = time.perf_counter()
        try:
            done = subprocess.run([tool, "--action", action, "--pid", str(pid)], capture_output=True, text=True, timeout=ACTION_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            out[f"{action}_error"] = f"no answer in {ACTION_TIMEOUT_S} s"
            return out
        out[f"{action}_s"] = round(time.perf_counter() - start, 3)
        if done.returncode:
            out[f"{action}_error"] = (done.stdout + done.stderr).strip()[:300] or f"exit {done.returncode}"
            if action != "lock":  # leave the process as it can be: try to give it its GPU back
                for undo in ("restore", "unlock"):
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        subprocess.run([tool, "--action", undo, "--pid", str(pid)], capture_output=True, timeout=ACTION_TIMEOUT_S)
            return out
    out["moved"] = True
    return out


def holder(tool: str, nbytes: int, env: dict[str, str], program: str = _HOLDER) -> dict:
    """One process holding ``nbytes`` with the allocator ``env`` selects, checkpointed and restored (``program``:
    :data:`_GRAPH` also replays a captured CUDA graph after the restore and compares its output)."""
    child = subprocess.Popen([sys.executable, "-c", program, str(nbytes)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, **env})
    try:
        assert child.stdout is not None and child.stdin is not None
        ready = _readline(child.stdout, READY_TIMEOUT_S)
        if not ready:
            return {"error": f"no ready line in {READY_TIMEOUT_S} s"}
        out = {"env": env, **_cycle(tool, child.pid)}
        child.stdin.write("\n")
        child.stdin.flush()
        after = _readline(child.stdout, ACTION_TIMEOUT_S)
        out["same_bytes"] = bool(after) and after[1] == ready[1]
        return out
    finally:
        child.kill()
        child.wait()


def ipc(tool: str, nbytes: int, which: str) -> dict:
    """Exporter + importer sharing ``nbytes`` over CUDA IPC; ``which`` ("importer" or "exporter") is checkpointed alone."""
    child = subprocess.Popen([sys.executable, "-c", _IPC, str(nbytes)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdin is not None
        ready = _readline(child.stdout, READY_TIMEOUT_S)
        if not ready:
            return {"error": f"no ready line in {READY_TIMEOUT_S} s"}
        pid = int(ready[2]) if which == "importer" else child.pid
        out = {"checkpointed": which, **_cycle(tool, pid)}
        child.stdin.write("\n")
        child.stdin.flush()
        after = _readline(child.stdout, ACTION_TIMEOUT_S)
        out["same_bytes_seen_by_importer"] = bool(after) and after[1] == ready[1]
        return out
    finally:
        child.kill()
        child.wait()


def main() -> None:
    """Run each kind and print the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda-checkpoint", required=True)
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--out")
    args = parser.parse_args()
    nbytes = args.mib * 2**20
    driver = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    result: dict = {"gpu_and_driver": driver, "mib": args.mib}
    kinds = {
        "plain": lambda: holder(args.cuda_checkpoint, nbytes, {}),
        "vmm": lambda: holder(args.cuda_checkpoint, nbytes, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
        "cuda_graph_replayed_after_restore": lambda: holder(args.cuda_checkpoint, nbytes, {}, _GRAPH),
        "ipc_importer": lambda: ipc(args.cuda_checkpoint, nbytes, "importer"),
        "ipc_exporter": lambda: ipc(args.cuda_checkpoint, nbytes, "exporter"),
    }
    for name, run in kinds.items():
        result[name] = run()
        print(name, json.dumps(result[name]), file=sys.stderr, flush=True)
        if args.out:  # what was measured comes back even if a later kind hangs the machine
            with open(args.out, "w") as fh:
                fh.write(json.dumps(result, indent=1) + "\n")
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
