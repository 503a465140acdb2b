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
    with pytest.raises(ComponentInputError, match="gpus"):
        sa.SnapshotAgentArgs(image=AGENT_IMAGE, instance_type="p6-b300.48xlarge", gpus="8")  # type: ignore[arg-type]


# --- the settings key: engineSnapshot turns both halves on, refused unless the requirements hold -----------------------

PINNED = "210987654321.dkr.ecr.us-west-2.amazonaws.com/vllm-openai@sha256:" + "9b" * 32
ON = dict(engineSnapshot=True, engineSnapshotAgentImage=AGENT_IMAGE, nodeLocalWeights=True, weightsSource="s3", weightsS3Uri="s3://acme-ml-weights-us-west-2/moonshotai/Kimi-K3/3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20/",
          nodeCleanupImage="210987654321.dkr.ecr.us-west-2.amazonaws.com/local-volume-node-cleanup@sha256:" + "4c" * 32)
"""The dev config with S3 weights on the node's NVMe and the snapshot on (prod overrides pin the serving image)."""


def test_the_committed_prod_stack_restores_instead_of_rebuilding_and_dev_does_not():
    from kimi_k3.stack import project, time_to_serve
    from kimi_k3.stack.settings import load_settings
    from tests.conftest import ROOT

    prod = load_settings(project.find_project(None, ROOT), "prod")
    dev = load_settings(project.find_project(None, ROOT), "dev")
    assert prod.time_to_serve.engine_snapshot and not dev.time_to_serve.engine_snapshot
    assert time_to_serve.startup_inputs(prod).engine_snapshot is True and time_to_serve.startup_inputs(dev).engine_snapshot is False
    assert time_to_serve.serving_startup(prod, multi_node=False).engine_snapshot is True
    assert time_to_serve.args_from_settings(prod, cluster_name="c", node_role_name=None, hugging_face_token=None).snapshot_agent_image == prod.time_to_serve.snapshot_agent_image


@pytest.mark.parametrize("env, changes, message", [
    ("prod", dict(nodeLocalWeights=False), r"kimi-k3:engineSnapshot: True is not accepted; needs node-local weights: the snapshot lives beside them"),
    ("dev", dict(servingImage="vllm/vllm-openai:v0.27.1"), r"kimi-k3:engineSnapshot: True is not accepted; needs the engine image pinned by digest"),
    ("prod", dict(engineSnapshotAgentImage=""), r"kimi-k3:engineSnapshotAgentImage: '' is not accepted; required with kimi-k3:engineSnapshot"),
    ("prod", dict(engineSnapshotAgentImage="criu-agent:4.1"), r"kimi-k3:engineSnapshotAgentImage: 'criu-agent:4.1' is not accepted; prod requires an image pinned by digest"),
])
def test_the_key_is_refused_unless_the_requirements_hold(env, changes, message):
    from kimi_k3.errors import SettingsError
    from tests.builders import load_stack_settings

    with pytest.raises(SettingsError, match=message):
        load_stack_settings(env, **{**ON, **changes})


def test_the_engine_gets_sleep_mode_dev_mode_and_the_wrapper_only_with_the_key():
    from kimi_k3.weights import engine_snapshot
    from tests.builders import load_stack_settings

    assert load_stack_settings("prod", **ON).time_to_serve.engine_snapshot  # accepted with every requirement
    assert engine_snapshot.stack_problems(instance_type="p6e-gb200.36xlarge", node_local_weights=True, image=PINNED, pipeline_parallel_size=1, warmup=True) == [
        ("instance_type", "instance type p6e-gb200.36xlarge is not a known x86-64 instance (p5en.48xlarge, p6-b200.48xlarge, p6-b300.48xlarge): cuda-checkpoint is built for x86_64 only")]


def _engine_container(plan) -> dict:
    pods = [o for o in plan.kubernetes_objects() if o.get("kind") in ("Deployment", "LeaderWorkerSet", "StatefulSet")]
    for obj in pods:
        spec = obj["spec"].get("template") or obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
        for container in spec["spec"]["containers"]:
            if "vllm" in " ".join(container.get("command", []) + container.get("args", [])):
                return container
    raise AssertionError("no engine container in the plan")


def test_a_snapshotted_engine_has_no_gpu_memory_the_checkpoint_cannot_move(prod_plan, dev_plan):
    """cuda-checkpoint moves no CUDA IPC memory and vLLM 0.27.1's checkpoint hooks release only FlashInfer's all-reduce:
    prod's engine (engineSnapshot on) runs without the custom and symmetric-memory all-reduce, dev's keeps vLLM's defaults."""
    from kimi_k3.weights import engine_snapshot

    prod, dev = _engine_container(prod_plan), _engine_container(dev_plan)
    words = lambda c: " ".join(c.get("command", []) + c.get("args", []))  # noqa: E731
    env = lambda c: {e["name"]: e.get("value") for e in c.get("env", [])}  # noqa: E731
    for flag in (engine_snapshot.SLEEP_MODE_FLAG, *engine_snapshot.CHECKPOINTABLE_FLAGS):
        assert flag in words(prod) and flag not in words(dev)
    assert env(prod)["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "0" and "VLLM_ALLREDUCE_USE_SYMM_MEM" not in env(dev)
    assert env(prod)["VLLM_ALLREDUCE_USE_FLASHINFER"] == "1"  # the all-reduce checkpoint_prepare does release
