"""Node-local weights pieces and the image pull pieces: rendered objects against the strict schemas,
the prune and bind-mount scripts run for real, the known-bad AMI release check."""

from __future__ import annotations

import os
import subprocess

import pulumi_kubernetes as k8s
import pytest

from kimi_k3 import offline
from kimi_k3.core import labels
from kimi_k3.errors import UserError
from kimi_k3.weights import image_pull as ip
from kimi_k3.weights import node_local as nl
from tests import k8s_checks
from tests.conftest import NOW

REV = "3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20"
IMAGE = "210987654321.dkr.ecr.us-west-2.amazonaws.com/vllm-openai@sha256:" + "9b" * 32


def render() -> offline.PlanResult:
    def program() -> None:
        k8s.storage.v1.StorageClass("sc", **nl.storage_class_args())
        pod_labels = {"app.kubernetes.io/name": "vllm-image-prepull"}
        k8s.apps.v1.DaemonSet("prepull", metadata=k8s.meta.v1.ObjectMetaArgs(name="vllm-image-prepull", namespace="kimi-serving", labels=pod_labels, annotations=ip.PREPULL_CHECKOV_SKIPS), spec=ip.prepull_daemonset_spec(IMAGE, pod_labels, "p6-b300.48xlarge"))
        # the serving namespace's default deny applies to the pre-pull pods too
        k8s.networking.v1.NetworkPolicy("deny", metadata=k8s.meta.v1.ObjectMetaArgs(name="default-deny", namespace="kimi-serving"), spec=k8s.networking.v1.NetworkPolicySpecArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs(), policy_types=["Ingress", "Egress"]))
        k8s.apps.v1.StatefulSet(
            "sts",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="kimi", namespace="kimi-serving"),
            spec=k8s.apps.v1.StatefulSetSpecArgs(
                service_name="kimi",
                replicas=2,
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"app": "kimi"}),
                persistent_volume_claim_retention_policy=nl.claim_retention_policy(),
                volume_claim_templates=[nl.weights_claim_template("kimi-local-weights", 1955)],
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels={"app": "kimi"}),
                    spec=k8s.core.v1.PodSpecArgs(security_context=nl.pod_security_context(), containers=[k8s.core.v1.ContainerArgs(name="vllm", image=IMAGE, volume_mounts=[k8s.core.v1.VolumeMountArgs(name="models", mount_path="/models/kimi-k3")])]),
                ),
            ),
        )

    return offline.OfflineEngine(now=NOW).run(program)


@pytest.fixture(scope="module")
def objects():
    return {o["kind"]: o for o in render().kubernetes_objects()}


def test_rendered_objects_pass_the_strict_schemas(objects):
    for manifest in objects.values():
        k8s_checks.validate_manifest(manifest, "1.34")


def test_the_weights_volume_is_local_bound_late_and_not_chowned_at_every_mount(objects):
    sc = objects["StorageClass"]
    assert (sc["provisioner"], sc["volumeBindingMode"], sc["reclaimPolicy"]) == ("kubernetes.io/no-provisioner", "WaitForFirstConsumer", "Delete")
    sts = objects["StatefulSet"]["spec"]
    assert sts["template"]["spec"]["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"
    assert sts["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Delete", "whenScaled": "Delete"}
    (claim,) = sts["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == "kimi-local-weights" and claim["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_the_provisioner_values_exist_in_the_pinned_chart():
    from kimi_k3.core import catalog
    from tests.chart_values import chart_defaults, unknown_keys, values_copy_version

    values = nl.provisioner_values(node_selector=dict(labels.GPU_NODE_SELECTOR), tolerations=[dict(labels.GPU_TOLERATION)])
    assert unknown_keys(values, chart_defaults("local-static-provisioner")) == []
    assert values_copy_version("local-static-provisioner") == catalog.LOCAL_STATIC_PROVISIONER_CHART[2]
    assert values["classes"][0]["hostDir"] == nl.DISCOVERY_DIR and values["setPVOwnerRef"] is True
    assert unknown_keys({"nodeCleanupController": {"enabled": True}}, chart_defaults("local-static-provisioner")) == ["nodeCleanupController"]  # not in chart 2.9.0


def test_the_node_cleanup_controller_opts_in_our_storage_class_only(tmp_path):
    def program() -> None:
        k8s.apps.v1.Deployment("cleanup", metadata=k8s.meta.v1.ObjectMetaArgs(name="local-volume-node-cleanup", namespace="kimi-storage", annotations=nl.NODE_CLEANUP_CHECKOV_SKIPS), spec=nl.node_cleanup_deployment_spec("local-volume-node-cleanup", image=nl.NODE_CLEANUP_IMAGE + "@sha256:" + "1" * 64, node_selector=dict(labels.SYSTEM_NODE_LABELS)))
        k8s.rbac.v1.ClusterRole("cleanup-role", metadata=k8s.meta.v1.ObjectMetaArgs(name="local-volume-node-cleanup"), rules=[k8s.rbac.v1.PolicyRuleArgs(**r) for r in nl.NODE_CLEANUP_RULES])
        k8s.networking.v1.NetworkPolicy("deny", metadata=k8s.meta.v1.ObjectMetaArgs(name="default-deny", namespace="kimi-storage"), spec=k8s.networking.v1.NetworkPolicySpecArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs(), policy_types=["Ingress"]))

    objs = offline.OfflineEngine(now=NOW).run(program).kubernetes_objects()
    for manifest in objs:
        k8s_checks.validate_manifest(manifest, "1.34")
    (deployment,) = [o for o in objs if o["kind"] == "Deployment"]
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    assert c["args"] == ["--storageclass-names=kimi-local-weights", "--pvc-deletion-delay=60s", "--stale-pv-discovery-interval=10s"]
    report = k8s_checks.checkov_scan(k8s_checks.write_manifests(objs, tmp_path / "cleanup"))
    assert [(f["check_id"], f.get("resource")) for f in report["failed"]] == []


def test_other_revisions_are_pruned_and_nothing_else_is_touched(tmp_path):
    other = "0" * 40
    for d in (REV, other, "lost+found", "notes"):
        (tmp_path / d).mkdir()
    (tmp_path / other / "model.safetensors").write_bytes(b"old")
    proc = subprocess.run(["sh", "-c", nl.PRUNE_SCRIPT], env={"PATH": os.environ["PATH"], "WEIGHTS_ROOT": str(tmp_path), "KEEP_REVISION": REV}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([REV, "lost+found", "notes"])
    assert nl.revision_dir("/models/kimi-k3", REV) == f"/models/kimi-k3/{REV}"
    with pytest.raises(UserError):
        nl.revision_dir("/models/kimi-k3", "main")


def test_the_boot_part_is_valid_bash_and_binds_the_raid_directory_at_the_discovery_path():
    script = nl.boot_part()
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert "What=/mnt/k8s-disks/0/kimi-weights\nWhere=/mnt/kimi-local/weights\nType=none\nOptions=bind\n" in script


def test_the_prepull_daemonset_runs_only_the_engine_image_on_gpu_nodes(objects):
    spec = objects["DaemonSet"]["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {**labels.GPU_NODE_SELECTOR, labels.INSTANCE_TYPE_LABEL: "p6-b300.48xlarge"}
    assert spec["tolerations"] == [dict(labels.GPU_TOLERATION)]
    assert {c["image"] for c in spec["initContainers"] + spec["containers"]} == {IMAGE}
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "10m", "memory": "16Mi"}


def test_checkov_passes_the_daemonset(objects, tmp_path):
    report = k8s_checks.checkov_scan(k8s_checks.write_manifests([objects["DaemonSet"], objects["NetworkPolicy"]], tmp_path / "prepull"))
    assert [(c["check_id"], c.get("resource")) for c in report["failed"]] == []
    assert sum(r["summary"]["skipped"] for r in report["raw"]) == 2  # the two reasoned skips, nothing else


@pytest.mark.parametrize("release, enabled, error", [
    ("1.34.2-20260505", True, "amazon-eks-ami#2712"),
    ("1.34.2-20250701", True, "from v20250813 on"),
    (None, True, "needs a pinned AMI release"),
    ("latest", True, "expected <kubernetes version>-<YYYYMMDD>"),
])
def test_fast_image_pull_is_refused_on_releases_where_it_breaks(release, enabled, error):
    with pytest.raises(UserError, match=error):
        ip.check_fast_image_pull(release, enabled)


def test_fast_image_pull_on_a_good_release_and_known_issues_as_warnings():
    assert ip.check_fast_image_pull("1.34.2-20251120", True) == []
    assert ip.check_fast_image_pull("1.34.2-20260505", False) == []  # the SOCI bug needs FastImagePull
    (warning,) = ip.check_fast_image_pull("1.35.0-20260520", False)
    assert "amazon-eks-ami#2729" in warning
    assert "FastImagePull: true" in ip.nodeadm_fast_image_pull()


def test_docker_hub_through_the_ecr_pull_through_cache():
    args = ip.pull_through_cache_rule_args("arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf")
    assert (args.upstream_registry_url, args.ecr_repository_prefix) == ("registry-1.docker.io", "docker-hub")
    with pytest.raises(UserError, match="named ecr-pullthroughcache/"):
        ip.pull_through_cache_rule_args("arn:aws:secretsmanager:us-east-1:123456789012:secret:dockerhub")
    assert ip.through_cache("vllm/vllm-openai:kimi-k3", "123456789012", "us-east-1") == "123456789012.dkr.ecr.us-east-1.amazonaws.com/docker-hub/vllm/vllm-openai:kimi-k3"
    assert ip.through_cache("nginx:1.27", "123456789012", "us-east-1").endswith("/docker-hub/library/nginx:1.27")
    assert ip.through_cache("docker.io/vllm/vllm-openai:kimi-k3", "123456789012", "us-east-1").endswith("/docker-hub/vllm/vllm-openai:kimi-k3")
    with pytest.raises(UserError, match="not a Docker Hub image"):
        ip.through_cache("public.ecr.aws/aws-cli/aws-cli:2", "123456789012", "us-east-1")
    policy = ip.pull_through_node_policy("123456789012", "us-east-1")
    assert policy["Statement"][0]["Resource"] == ["arn:aws:ecr:us-east-1:123456789012:repository/docker-hub/*"]
