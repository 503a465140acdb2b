"""Issue 34 point 1, the node side: the snapshot agent DaemonSet (privileged, hostPID, the snapshot root from the host, no API access)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pytest

from kimi_k3 import offline
from kimi_k3.errors import ComponentInputError, UserError
from kimi_k3.weights import snapshot_agent as sa
from tests import k8s_checks
from tests.conftest import NOW

AGENT_IMAGE = "210987654321.dkr.ecr.us-west-2.amazonaws.com/criu-agent@sha256:" + "c" * 64


def render(args: sa.SnapshotAgentArgs) -> list[dict]:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        sa.SnapshotAgent("snap", args, opts=pulumi.ResourceOptions(provider=provider))

    return offline.OfflineEngine(now=NOW).run(program).kubernetes_objects()


@pytest.fixture(scope="module")
def objects():
    return render(sa.SnapshotAgentArgs(image=AGENT_IMAGE, instance_type="p6-b300.48xlarge", gpus=8))


def test_the_agent_passes_the_strict_schemas_and_checkov_with_reasoned_skips_only(objects, tmp_path):
    for manifest in objects:
        k8s_checks.validate_manifest(manifest, "1.34")
    report = k8s_checks.checkov_scan(k8s_checks.write_manifests(objects, tmp_path / "agent"))
    assert [(c["check_id"], c.get("resource")) for c in report["failed"]] == []
    assert sum(r["summary"]["skipped"] for r in report["raw"]) == len(sa.CHECKOV_SKIPS)  # each reasoned skip bites: none is dead


def test_the_agent_runs_privileged_with_host_pid_on_the_gpu_nodes_and_mounts_only_the_snapshot_root(objects):
    (ds,) = [o for o in objects if o["kind"] == "DaemonSet"]
    spec = ds["spec"]["template"]["spec"]
    assert spec["hostPID"] is True and spec["nodeSelector"]["node.kubernetes.io/instance-type"] == "p6-b300.48xlarge"
    (c,) = spec["containers"]
    assert c["securityContext"]["privileged"] is True and c["command"][-1] == "snapshot-agent"
    host = [v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v]
    assert host == [sa.HOST_SNAPSHOT_ROOT]
    assert {"name": "SNAPSHOT_GPUS", "value": "8"} in c["env"]
    (ns,) = [o for o in objects if o["kind"] == "Namespace"]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_the_agent_has_no_api_access(objects):
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["ConfigMap", "DaemonSet", "Namespace", "NetworkPolicy", "ServiceAccount"]  # no Role, no binding
    (account,) = [o for o in objects if o["kind"] == "ServiceAccount"]
    (ds,) = [o for o in objects if o["kind"] == "DaemonSet"]
    assert account["automountServiceAccountToken"] is False and ds["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_the_agents_args_are_checked_at_the_door():
    with pytest.raises(UserError, match=r"image 'criu:4.1' is not accepted; expected repo@sha256"):
        render(sa.SnapshotAgentArgs(image="criu:4.1", instance_type="p6-b300.48xlarge", gpus=8))
    with pytest.raises(UserError, match="gpus 0 is not accepted"):
        render(sa.SnapshotAgentArgs(image=AGENT_IMAGE, instance_type="p6-b300.48xlarge", gpus=0))
    with pytest.raises(ComponentInputError, match="gpus"):
        sa.SnapshotAgentArgs(image=AGENT_IMAGE, instance_type="p6-b300.48xlarge", gpus="8")  # type: ignore[arg-type]
