"""Median wall time of `kimi-k3 plan` against the import floors it cannot beat.

    .venv/bin/python tools/bench_plan.py [--runs 7] [--stack dev]

* import floor: ``import pulumi, pulumi_aws, pulumi_eks, pulumi_kubernetes`` (the
  provider SDKs load their submodules lazily, so this is a lower bound);
* used-SDK floor: the same plus first use of every SDK module the stack declares
  resources from (``aws.ec2``, ``aws.eks``, ``k8s.core.v1``, ``k8s.helm.v3`` ...);
* plan: ``kimi-k3 plan STACK --quiet`` end to end, files written.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMPORT_FLOOR = "import pulumi, pulumi_aws, pulumi_eks, pulumi_kubernetes"
USED_SDK_FLOOR = IMPORT_FLOOR + (
    "\nimport pulumi_aws as a, pulumi_kubernetes as k"
    "\na.ec2.Vpc; a.eks.NodeGroup; a.iam.Role; a.cloudwatch.LogGroup; a.sns.Topic; a.kms.Key; a.autoscaling.Schedule"
    "\npulumi_eks.Cluster"
    "\nk.core.v1.Namespace; k.apps.v1.Deployment; k.helm.v3.Release; k.networking.v1.NetworkPolicy"
    "\nk.policy.v1.PodDisruptionBudget; k.apiextensions.CustomResource"
)


def median_seconds(command: list[str], runs: int) -> float:
    """Median wall time of ``command`` over ``runs`` runs (output discarded)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    """Print the median wall time of the import floors and of ``kimi-k3 plan`` for ``--stack``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--stack", default="dev")
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory() as out:
        results = {
            "import floor": median_seconds([python, "-c", IMPORT_FLOOR], args.runs),
            "used-SDK floor": median_seconds([python, "-c", USED_SDK_FLOOR], args.runs),
            f"kimi-k3 plan {args.stack}": median_seconds([python, "-m", "kimi_k3.cli", "plan", args.stack, "--quiet", "--out", out], args.runs),
        }
    floor = results["import floor"]
    for name, seconds in results.items():
        print(f"{name:<20} {seconds:6.2f} s  ({seconds / floor:4.1f}x import floor)")


if __name__ == "__main__":
    main()
