"""Record what the EKS stacks' offline plans declare, to prove a change leaves them alone.

    .venv/bin/python tools/eks_plan_digests.py            # write tests/data/eks-plan-digests.json
    .venv/bin/python tools/eks_plan_digests.py --check    # compare, list what differs (exit 1)

For each EKS stack (dev, prod) it runs ``kimi-k3 plan STACK --now 2026-12-01T08:00:00Z``
(the default rehearsal flags) and records the sha256 of every resource's inputs by URN and
of every file of the plan (``resources.json``, ``outputs.json``, ``manifests/``, ``helm/``). ``tests/test_eks_plans_unchanged.py`` compares a fresh plan with the
record and names every resource added, removed or changed. Re-record on purpose only,
when a change to the EKS path is intended.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DIGESTS_FILE = ROOT / "tests" / "data" / "eks-plan-digests.json"
"""Where the record lives."""
NOW = "2026-12-01T08:00:00Z"
"""The ``--now`` of the recorded plans (a fixed moment: the plans are byte-identical for the same inputs)."""
STACKS = ("dev", "prod")
"""The EKS stacks."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def plan_digests(directory: Path) -> dict[str, Any]:
    """Digests of one written plan: ``resources`` (URN -> sha256 of type and inputs) and ``files`` (path -> sha256)."""
    resources = json.loads((directory / "resources.json").read_text())
    return {
        "resources": {r["urn"]: _sha256(json.dumps({"type": r["type"], "parent": r["parent"], "inputs": r["inputs"]}, sort_keys=True).encode()) for r in resources},
        # policy.json names the policy config by its absolute path (machine-dependent): the verdict is not what this records.
        "files": {p.relative_to(directory).as_posix(): _sha256(p.read_bytes()) for p in sorted(directory.rglob("*")) if p.is_file() and p.name != "policy.json"},
    }


def plan_stack(stack: str, out: Path) -> dict[str, Any]:
    """Run ``kimi-k3 plan STACK`` at :data:`NOW` into ``out`` (a separate process, as a user runs it) and digest it."""
    subprocess.run(
        [sys.executable, "-m", "kimi_k3.cli", "plan", stack, "--quiet", "--now", NOW, "--out", str(out)],
        check=True, cwd=ROOT, stdout=subprocess.DEVNULL,
    )
    return plan_digests(out)


def differences(recorded: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    """What differs between two digests of one stack, resource by resource, then file by file."""
    lines = []
    for kind in ("resources", "files"):
        before, after = recorded[kind], fresh[kind]
        lines += [f"{kind[:-1]} added: {key}" for key in sorted(set(after) - set(before))]
        lines += [f"{kind[:-1]} removed: {key}" for key in sorted(set(before) - set(after))]
        lines += [f"{kind[:-1]} changed: {key}" for key in sorted(set(before) & set(after)) if before[key] != after[key]]
    return lines


def main() -> int:
    """Write the plan digests of the EKS stacks, or with ``--check`` compare them with the record (1 on a difference)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the record instead of writing it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fresh = {stack: plan_stack(stack, Path(tmp) / stack) for stack in STACKS}
    if not args.check:
        DIGESTS_FILE.write_text(json.dumps({"now": NOW, "stacks": fresh}, indent=1, sort_keys=True) + "\n")
        print(f"wrote {DIGESTS_FILE}")
        return 0
    recorded = json.loads(DIGESTS_FILE.read_text())["stacks"]
    found = [f"{stack}: {line}" for stack in STACKS for line in differences(recorded[stack], fresh[stack])]
    print("\n".join(found) or "the EKS stacks plan exactly as recorded")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
