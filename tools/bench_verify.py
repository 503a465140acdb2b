#!/usr/bin/env python3
"""Throughput of the node's weight verification against sha256sum and openssl on the same files.

Generates N files of M MiB (default 8 x 256 MiB = 2 GiB) in a temporary directory, then times:

* ``sha256sum`` and ``openssl dgst -sha256`` over all files in one process (one core);
* Python ``hashlib.sha256`` (one thread, 8 MiB reads), for reference;
* each tool in one process per core over a static split (what this machine's cores give);
* the node sync script (components/weights/node_sync.py) doing only its verification (a fake
  ``aws`` that transfers nothing, so every file is "already on disk"), with as many workers as
  this machine has cores, once with openssl and once with sha256sum.

Files were just written, so they are in the page cache, as the weights are on the node right
after the sync; each run is repeated and the median kept. Then it scales the per-core rates to
1.7 TB on a 192-vCPU node. Rerun: ``python tools/bench_verify.py [--files 8 --mib 256 --repeat 3]``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kimi_k3.core import catalog
from kimi_k3.weights.manifest import Manifest, ManifestEntry
from kimi_k3.weights.node_sync import NODE_SYNC_SCRIPT, verify_workers

FAKE_AWS = "#!/bin/sh\ncase \"$1 $2\" in \"s3 cp\") cp \"$FAKE_MANIFEST\" \"$4\" ;; esac\nexit 0\n"


def timed(fn, repeat: int) -> float:
    """Median seconds of ``repeat`` calls of ``fn``."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> int:
    """Write ``--files`` files of ``--mib`` MiB and print the time each hasher takes to check them; 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to write the files (default: a temporary directory under $TMPDIR)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-verify-", dir=args.dir))
    try:
        data = work / "models"
        data.mkdir()
        entries = []
        block = os.urandom(1 << 20)
        for i in range(args.files):
            path = data / f"model-{i:05d}.safetensors"
            digest = hashlib.sha256()
            with open(path, "wb") as fh:
                for j in range(args.mib):
                    chunk = block[j % 997 :] + block[: j % 997]  # not one repeated MiB
                    fh.write(chunk)
                    digest.update(chunk)
            entries.append(ManifestEntry(path.name, args.mib << 20, digest.hexdigest()))
        manifest = work / "SHA256SUMS"
        manifest.write_text(Manifest("bench/x", "0" * 40, tuple(entries)).sha256sums())
        total = args.files * (args.mib << 20)
        files = [str(data / e.path) for e in entries]
        cores = os.cpu_count() or 1

        def hashlib_all():
            for f in files:
                h = hashlib.sha256()
                with open(f, "rb") as fh:
                    for chunk in iter(lambda: fh.read(8 << 20), b""):
                        h.update(chunk)

        bindir = work / "bin"
        bindir.mkdir()
        (bindir / "aws").write_text(FAKE_AWS)
        (bindir / "aws").chmod(0o755)

        def script(hasher: str):
            env = {
                "PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_MANIFEST": str(manifest), "TMPDIR": str(work),
                "WEIGHTS_S3_URI": "s3://bench/x/", "WEIGHTS_DIR": str(data), "SHA256_MANIFEST": "SHA256SUMS",
                "TARGET_BANDWIDTH": "1", "VERIFY_WORKERS": str(cores), "VERIFY_HASHER": hasher, "VERIFY_POLL_S": "0.05",
            }
            (data / ".kimi-k3-verified").unlink(missing_ok=True)
            subprocess.run(["sh", "-c", NODE_SYNC_SCRIPT], env=env, check=True, capture_output=True)

        def tool(*cmd):
            return lambda: subprocess.run([*cmd, *files], check=True, capture_output=True)

        def tool_split(*cmd):
            """The same tool in one process per core over a static split: what this machine's cores give at best."""
            def run():
                procs = [subprocess.Popen([*cmd, *files[i::cores]], stdout=subprocess.DEVNULL) for i in range(cores)]
                assert all(p.wait() == 0 for p in procs)
            return run

        hashlib_all()  # warm the page cache
        rows = [
            ("sha256sum (coreutils), 1 process", 1, timed(tool("sha256sum"), args.repeat)),
            ("openssl dgst -sha256, 1 process", 1, timed(tool("openssl", "dgst", "-sha256"), args.repeat)),
            ("python hashlib.sha256, 1 thread", 1, timed(hashlib_all, args.repeat)),
            (f"openssl, {cores} processes, static split", cores, timed(tool_split("openssl", "dgst", "-sha256"), args.repeat)),
            (f"sha256sum, {cores} processes, static split", cores, timed(tool_split("sha256sum"), args.repeat)),
            (f"node verify, openssl, {cores} workers", cores, timed(lambda: script("openssl"), args.repeat)),
            (f"node verify, sha256sum, {cores} workers", cores, timed(lambda: script("sha256sum"), args.repeat)),
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"{args.files} files x {args.mib} MiB = {total / 2**30:.1f} GiB, page cache warm, {cores} cores, median of {args.repeat}")
    print(f"{'what':<40} {'seconds':>8} {'GB/s':>7} {'GB/s/core':>10}")
    per_core = {}
    for name, used, seconds in rows:
        rate = total / seconds / 1e9
        per_core[name] = rate / min(used, cores)
        print(f"{name:<40} {seconds:>8.2f} {rate:>7.2f} {rate / min(used, cores):>10.2f}")
    size = catalog.KIMI_K3.weights_gb * 1e9
    node = catalog.INSTANCE_TYPES["p6-b300.48xlarge"]
    workers = verify_workers(node.vcpus - 8)
    facts = catalog.STARTUP_FACTS[node.name]
    disk = facts.nvme_drives * facts.nvme_write_gbytes_per_s_per_drive.value
    print(f"\n{catalog.KIMI_K3.weights_gb / 1000:.1f} TB on {node.name} ({node.vcpus} vCPU; the sync container gets {node.vcpus - 8}, {workers} hash workers):")
    for name in ("sha256sum (coreutils), 1 process", "openssl dgst -sha256, 1 process"):
        rate = per_core[name] * workers
        print(f"  {name.split(',')[0]:<22} {per_core[name]:.2f} GB/s/core x {workers} = {rate:.0f} GB/s -> {size / rate / 1e9 / 60:.1f} min of hashing"
              f" ({'faster' if rate > disk else 'slower'} than the {disk:.0f} GB/s the sync writes (estimate), so {'hidden behind the transfer' if rate > disk else 'it becomes the bottleneck'})")
    print("  a serial sha256sum over the whole checkpoint would take", f"{size / (per_core['sha256sum (coreutils), 1 process'] * 1e9) / 60:.0f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
