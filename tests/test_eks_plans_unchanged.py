"""The EKS stacks plan exactly as recorded: adding the HyperPod path added or changed nothing on them.

``tests/data/eks-plan-digests.json`` was recorded from the plans of ``main`` at 89b5dcc
(the last commit before the hyperpod stack was merged), ``kimi-k3 plan dev|prod --now 2026-12-01T08:00:00Z``;
each resource's inputs by URN and every plan file (``tools/eks_plan_digests.py``). Re-recorded
once since, when the pod code hash stopped counting docstrings (``pod_files.content_hash``): that
changed the startup and staging ConfigMaps (documented fields) and the hash annotation of the
serving workload and the staging Job, nothing else. Re-recorded for issue 33: the delivery check's
state-reset schedule and its role's cloudwatch:SetAlarmState, the deploy runner's ArnEquals on
ec2:Subnet, the flow-logs role's documented permissions, prod's GPU root volume throughput/IOPS
with FastImagePull. A failure
names each resource added, removed or changed. Re-record with
``.venv/bin/python tools/eks_plan_digests.py`` only when an EKS-path change is intended.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

_SPEC = importlib.util.spec_from_file_location("eks_plan_digests", ROOT / "tools" / "eks_plan_digests.py")
assert _SPEC is not None and _SPEC.loader is not None
eks_plan_digests = importlib.util.module_from_spec(_SPEC)  # a tool script, not a package
_SPEC.loader.exec_module(eks_plan_digests)

RECORDED = json.loads(eks_plan_digests.DIGESTS_FILE.read_text())


@pytest.mark.parametrize("stack", eks_plan_digests.STACKS)
def test_the_eks_stack_plans_exactly_as_recorded(stack, tmp_path):
    fresh = eks_plan_digests.plan_stack(stack, tmp_path / stack)
    assert eks_plan_digests.differences(RECORDED["stacks"][stack], fresh) == []
    assert RECORDED["now"] == eks_plan_digests.NOW


def test_a_changed_resource_is_named():
    """The comparison itself can fail: a resource with other inputs, one more, one fewer."""
    recorded = RECORDED["stacks"]["dev"]
    urns = sorted(recorded["resources"])
    changed = {**recorded, "resources": {**{u: recorded["resources"][u] for u in urns[1:]}, urns[2]: "0" * 64, "urn:new": "1" * 64}}
    assert eks_plan_digests.differences(recorded, changed) == ["resource added: urn:new", f"resource removed: {urns[0]}", f"resource changed: {urns[2]}"]


# The properties the digests protect, each named (the digests catch any change; these say which property broke):
# - the same inputs give byte-identical plans: tests/test_plan_determinism.py (two processes, other hash seeds);
# - a documentation-only change restarts no GPU pod: tests/test_change_review.py
#   (test_a_documentation_only_change_to_the_program_restarts_nothing);
# - the HyperPod path adds nothing to an EKS stack: the two tests below.


@pytest.mark.parametrize("stack", ["dev_plan", "prod_plan"])
def test_eks_stacks_declare_nothing_of_the_hyperpod_path(stack, request):
    """No SageMaker or aws-native resource, no HyperPod component, no training-plan read in an EKS stack's plan."""
    plan = request.getfixturevalue(stack)
    types = {r.type for r in plan.resources}
    assert not {t for t in types if t.startswith(("aws-native:", "aws:sagemaker/")) or "HyperPod" in t or "hyperpod" in t.lower()}
    assert plan.training_plan is None


def test_eks_stacks_never_load_the_hyperpod_modules():
    """Planning an EKS stack imports neither pulumi-aws-native nor the HyperPod composition (their cost is the hyperpod stack's only)."""
    code = (
        "import sys, datetime\n"
        "from kimi_k3 import offline\n"
        "offline.run_stack('prod', now=datetime.datetime(2026, 12, 1, 8, tzinfo=datetime.UTC))\n"
        "print(sorted(m for m in ('pulumi_aws_native', 'kimi_k3.stack.hyperpod', 'kimi_k3.hyperpod.cluster', 'kimi_k3.hyperpod.endpoint') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
