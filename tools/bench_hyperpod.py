"""What pulumi-aws-native costs the hyperpod stack: plan time against dev's, the SDK's own load time, its size on disk.

    .venv/bin/python tools/bench_hyperpod.py [--runs 5]

* ``kimi-k3 plan dev|hyperpod --quiet`` end to end (median wall and CPU time, files written);
* the SDK's own share: ``import pulumi_aws_native`` and first use of ``sagemaker.Cluster``
  and ``Provider`` (what the hyperpod stack loads and dev never does), measured after the
  SDKs both stacks load (pulumi, pulumi-aws, pulumi-eks, pulumi-kubernetes);
* the installed package (``pulumi_aws_native`` and its dist-info), bytes on disk.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOW = "2026-12-01T08:00:00Z"
SHARED = "import pulumi, pulumi_aws, pulumi_eks, pulumi_kubernetes"
NATIVE = (
    "import time\n" + SHARED + "\nstart = time.perf_counter()\n"
    "import pulumi_aws_native as n\nn.sagemaker.Cluster; n.sagemaker.ClusterInstanceGroupArgs; n.Provider\n"
    "print(time.perf_counter() - start)"
)


def median_seconds(command: list[str], runs: int) -> tuple[float, float]:
    """Median wall time and median CPU time (user + system) of ``command`` over ``runs`` runs (output discarded).

    CPU time is the steadier figure on a shared machine: other processes lengthen the wall time, not it.
    """
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def native_load_seconds(runs: int) -> float:
    """Median in-process time of loading pulumi-aws-native's pieces the stack uses, after the shared SDKs."""
    samples = [float(subprocess.run([sys.executable, "-c", NATIVE], check=True, capture_output=True, text=True).stdout) for _ in range(runs)]
    return statistics.median(samples)


def installed_bytes(distribution: str) -> int:
    """Bytes on disk of an installed distribution's files."""
    files = importlib.metadata.distribution(distribution).files or []
    return sum(Path(f.locate()).stat().st_size for f in files if Path(f.locate()).is_file())


def main() -> None:
    """Print the median wall time of the offline plan of the dev and hyperpod stacks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory() as out:
        plans = {
            stack: median_seconds([python, "-m", "kimi_k3.cli", "plan", stack, "--quiet", "--now", NOW, "--out", f"{out}/{stack}"], args.runs)
            for stack in ("dev", "hyperpod")
        }
    native = native_load_seconds(args.runs)
    version = importlib.metadata.version("pulumi-aws-native")
    size = installed_bytes("pulumi-aws-native")
    (dev_wall, dev_cpu), (hp_wall, hp_cpu) = plans["dev"], plans["hyperpod"]
    print(f"kimi-k3 plan dev          {dev_wall:6.2f} s wall  {dev_cpu:6.2f} s CPU")
    print(f"kimi-k3 plan hyperpod     {hp_wall:6.2f} s wall  {hp_cpu:6.2f} s CPU  ({hp_cpu - dev_cpu:+.2f} s CPU against dev)")
    print(f"pulumi-aws-native {version} load + first use: {native:.2f} s (part of the hyperpod plan only)")
    print(f"pulumi-aws-native {version} installed: {size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
