"""FastImagePull on the pinned AMI writes the engine image to the root volume: its throughput is provisioned (issue 33, point 5).

amazon-eks-ami v20251120's setup-local-disks bind-mounts kubelet, containerd and /var/log/pods onto the
RAID0, not SOCI's store (/var/lib/soci-snapshotter-grpc: mounted onto the instance store only from
awslabs/amazon-eks-ami PR #2548 on). With FastImagePull the image lands on the root gp3 at its 125 MiB/s
baseline unless throughput is provisioned; the offline engine refuses a launch template that would.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kimi_k3.capacity import node_group
from kimi_k3.errors import UserError
from kimi_k3.offline import image_store
from kimi_k3.offline.rules import ApplyTimeRuleError
from kimi_k3.stack import platform
from kimi_k3.weights import image_pull
from tests.review_runs import SERVING, run

RAID0_FAST = node_group.nodeadm_user_data((("application/node.eks.aws", image_pull.nodeadm_fast_image_pull()),))
RAID0_ONLY = node_group.nodeadm_user_data(())


def root(throughput=None) -> list[dict]:
    ebs = {"volumeSize": 200, "volumeType": "gp3", **({"throughput": throughput} if throughput else {})}
    return [{"deviceName": "/dev/xvda", "ebs": ebs}]


def test_the_pinned_ami_binds_kubelet_containerd_and_pod_logs_onto_the_raid_not_the_soci_store():
    assert image_store.raid_bound_dirs() == {"/var/lib/kubelet", "/var/lib/containerd", "/var/log/pods"}
    assert not image_store.soci_store_on_raid()


def test_a_release_that_binds_the_soci_store_needs_no_throughput():
    later = image_store.vendored(image_store.SETUP_LOCAL_DISKS) + '\n    BIND_MOUNTS+=("soci-snapshotter-grpc")\n'
    assert image_store.soci_store_on_raid(later)
    assert image_store.root_volume_problem({"userData": RAID0_FAST, "blockDeviceMappings": root()}, later) is None


def test_fast_image_pull_at_the_gp3_baseline_is_refused_with_the_time_it_costs():
    problem = image_store.root_volume_problem({"userData": RAID0_FAST, "blockDeviceMappings": root()})
    assert problem is not None
    assert "at 125 MiB/s that is ~295 s per node start; provision at least 615 MiB/s" in problem
    assert "/var/lib/soci-snapshotter-grpc on the root volume" in problem and "PR #2548" in problem


@pytest.mark.parametrize(("user_data", "throughput", "refused"), [
    (RAID0_FAST, 1000, False), (RAID0_FAST, 615, False), (RAID0_FAST, 600, True), (RAID0_ONLY, None, False),
])
def test_the_root_volume_must_write_the_image_within_a_minute(user_data, throughput, refused):
    assert (image_store.root_volume_problem({"userData": user_data, "blockDeviceMappings": root(throughput)}) is not None) is refused


def test_prod_with_fast_image_pull_provisions_the_root_volume():
    result = run("prod", SERVING, "active")
    ebs = result.one("aws:ec2/launchTemplate:LaunchTemplate", "kimi-k3-gpu-lt").plain_inputs["blockDeviceMappings"][0]["ebs"]
    assert (ebs["throughput"], ebs["iops"]) == (1000, 4000)
    assert image_store.image_write_seconds(ebs["throughput"]) < 40


def test_prod_without_the_provisioned_throughput_fails_the_plan(monkeypatch):
    """The planted bug: the root volume left at gp3's baseline under FastImagePull."""
    monkeypatch.setattr(platform, "FAST_IMAGE_PULL_ROOT_THROUGHPUT_MIBPS", None)
    monkeypatch.setattr(platform, "FAST_IMAGE_PULL_ROOT_IOPS", None)
    with pytest.raises(ApplyTimeRuleError, match=r"fast_image_pull_root_volume_carries_the_image|at 125 MiB/s that is ~295 s per node start"):
        run("prod", SERVING, "active")


NOW = datetime(2026, 11, 30, tzinfo=UTC)


@pytest.mark.parametrize(("changes", "message"), [
    ({"root_volume_throughput_mibps": 2000, "root_volume_iops": 8000}, "root_volume_throughput_mibps 2000 is not accepted; expected 125..1000 MiB/s"),
    ({"root_volume_throughput_mibps": 1000}, "1000 MiB/s needs at least 4000 IOPS"),
    ({"root_volume_throughput_mibps": 1000, "root_volume_iops": 20000}, "root_volume_iops 20000 is not accepted; expected 3000..16000"),
])
def test_root_volume_throughput_and_iops_are_checked_against_gp3(changes, message):
    args = node_group.CapacityBlockNodeGroupArgs(
        cluster_name="c", kubernetes_version="1.34", subnet_ids_by_az={"us-west-2a": "subnet-1"}, instance_type="p6-b300.48xlarge",
        now=NOW, reservation_id="cr-07e4c1d2b3a4f5e69", **changes,
    )
    with pytest.raises(UserError, match=message):
        node_group._validate("gpu", args)
