"""The GPU node group repairs itself, rebooting (instance store and weights kept) before it replaces.

Checked against the EKS API model in botocore (the repair actions EKS accepts), the EKS node
monitoring agent's own reason list (tests/data/eks-node-monitoring-agent-v1.7.0.reasons.yaml)
and the EKS user guide's XID table (tests/data/eks-node-health-xid-codes.adoc).
"""

from __future__ import annotations

import re
from datetime import timedelta

import botocore.session
import pytest
import yaml

from kimi_k3 import offline
from kimi_k3.capacity.node_group import CapacityBlockNodeGroup, CapacityBlockNodeGroupArgs
from kimi_k3.capacity.node_repair import ACCELERATED_HARDWARE, REBOOT_FIRST, REPAIR_WAIT_MINUTES
from tests.builders import B300, RID
from tests.conftest import DATA, NOW

NG = "aws:eks/nodeGroup:NodeGroup"


@pytest.fixture(scope="module")
def repair() -> dict:
    fixture = offline.ReservationFixture(id=RID, availability_zone="us-east-1a", instance_count=2, start=NOW + timedelta(days=1))
    args = CapacityBlockNodeGroupArgs(
        cluster_name="c", kubernetes_version="1.34", subnet_ids_by_az={"us-east-1a": "subnet-0aaaaaaaaaaaaaaaa"},
        instance_type=B300, reservation_id=RID, now=NOW,
    )
    result = offline.OfflineEngine(now=NOW, reservation=fixture).run(lambda: CapacityBlockNodeGroup("gpu", args))
    return result.one(NG).plain_inputs["nodeRepairConfig"]


def _eks_shape(name: str) -> dict:
    model = botocore.session.get_session().get_service_model("eks")
    return model.shape_for(name)


def _xid_table() -> dict[int, str]:
    """XID code -> default repair action, from the EKS user guide's table."""
    text = (DATA / "eks-node-health-xid-codes.adoc").read_text()
    return {int(code): action for code, action in re.findall(r"^\|(\d+)\n\|[^\n]+\n\|(Reboot|Replace)$", text, re.M)}


def test_repair_is_on_one_node_at_a_time(repair):
    assert repair["enabled"] is True  # EKS: "Node auto repair is disabled by default"
    assert repair["maxParallelNodesRepairedCount"] == 1


def test_every_override_reboots_an_accelerated_hardware_reason_after_the_eks_default_wait(repair):
    overrides = repair["nodeRepairConfigOverrides"]
    assert {o["nodeUnhealthyReason"] for o in overrides} == set(REBOOT_FIRST)
    for override in overrides:
        assert override["nodeMonitoringCondition"] == ACCELERATED_HARDWARE
        assert override["repairAction"] == "Reboot"
        assert override["minRepairWaitTimeMins"] == REPAIR_WAIT_MINUTES == 10


def test_the_actions_and_fields_are_the_eks_apis(repair):
    assert "Reboot" in _eks_shape("RepairAction").enum
    override_members = set(_eks_shape("NodeRepairConfigOverrides").members)
    assert {"nodeMonitoringCondition", "nodeUnhealthyReason", "minRepairWaitTimeMins", "repairAction"} <= override_members
    assert "maxParallelNodesRepairedCount" in _eks_shape("NodeRepairConfig").members


def test_every_overridden_reason_is_one_the_node_monitoring_agent_reports():
    reasons = yaml.safe_load((DATA / "eks-node-monitoring-agent-v1.7.0.reasons.yaml").read_text())[ACCELERATED_HARDWARE]
    templates = {entry["Template"] for entry in reasons.values()}
    for reason in REBOOT_FIRST:
        xid = re.fullmatch(r"NvidiaXID(\d+)Error", reason)
        assert (xid and "NvidiaXID%dError" in templates) or reason in templates, reason


def test_only_reasons_eks_would_replace_are_overridden_and_a_gpu_off_the_bus_is_still_replaced():
    table = _xid_table()
    assert table[79] == "Replace" and "NvidiaXID79Error" not in REBOOT_FIRST  # needs a power cycle, not a reboot
    for reason in REBOOT_FIRST:
        xid = re.fullmatch(r"NvidiaXID(\d+)Error", reason)
        if xid:
            assert table[int(xid[1])] == "Replace", f"{reason}: EKS already reboots for it, the override changes nothing"
