"""The change review's node and weights checks in every phase of the block (issue 33, points 2 and 3).

Four changes a pull request makes to prod while its block serves, each planned as a second ``up``
against the serving plan: the GPU nodes' user data, two launch-template fields (``fastImagePull`` off,
the GPU root volume) and the node-local weights volumes (the StatefulSet's claim template). Each is
then judged in every phase of the block — before, serving, ending (the last hour: EKS scales the
group to 0 forty minutes before the end, the nodes still serve until then), ended — and one change
is rehearsed for real in the ending phase.

- A launch-template change is a new launch template version: the offline engine answers
  ``latestVersion`` one higher (a new version per change, as EC2's CreateLaunchTemplateVersion
  does), the node group's ``launchTemplate.version`` moves 1 -> 2, and the review names the launch
  template field behind it.
- Upgrading the Capacity Block node group in place while the block serves is refused, with
  ``--allow-disruption`` too: "When upgrading managed node groups with Capacity Blocks, make sure
  that the desired size of the node group is set to 0" (EKS user guide, capacity-blocks-mng).
- Replacing the weights volumes while the block serves is refused unless ``--allow-disruption``.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from functools import cache

import pytest

from kimi_k3 import offline
from kimi_k3.capacity import node_group
from kimi_k3.capacity.assessment import BEFORE, ENDED, ENDING, SERVING
from kimi_k3.offline.diff import render_path
from kimi_k3.offline.review import Review, review
from kimi_k3.offline.state import PreviousState
from kimi_k3.weights import node_local
from tests.review_runs import BLOCK_START, prod_serving, run
from tests.review_runs import SERVING as SERVING_AT

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
PHASES = (BEFORE, SERVING, ENDING, ENDED)
EKS_RULE = "EKS upgrades such a group only at desired size 0"
UPGRADE_QUOTE = "When upgrading managed node groups with Capacity Blocks, make sure that the desired size of the node group is set to 0"


def _user_data(monkeypatch: pytest.MonkeyPatch) -> offline.PlanResult:
    monkeypatch.setattr(node_group, "USER_DATA_BOUNDARY", "KIMI-K3-NODEADM-2")
    return run("prod", SERVING_AT, "active", prod_serving())


def _fast_image_pull(monkeypatch: pytest.MonkeyPatch) -> offline.PlanResult:
    return run("prod", SERVING_AT, "active", prod_serving(), config_overrides={"kimi-k3:fastImagePull": False})  # prod has it on


def _root_volume(monkeypatch: pytest.MonkeyPatch) -> offline.PlanResult:
    return run("prod", SERVING_AT, "active", prod_serving(), config_overrides={"kimi-k3:gpuRootVolumeGiB": 300})


def _weights_volume(monkeypatch: pytest.MonkeyPatch) -> offline.PlanResult:
    template = node_local.weights_claim_template
    monkeypatch.setattr(node_local, "weights_claim_template", lambda storage_class, size_gb=0, name="models": template(storage_class, 2400, name))
    return run("prod", SERVING_AT, "active", prod_serving())


NODE_CHANGES = {"user data": (_user_data, "userData"), "fastImagePull": (_fast_image_pull, "userData"), "root volume": (_root_volume, "blockDeviceMappings[0].ebs.volumeSize")}
"""Launch-template changes: how to make each, and the launch template field the review must name."""

_reviews: dict[str, Review] = {}


def reviewed(change: str, monkeypatch: pytest.MonkeyPatch) -> Review:
    """The review of ``change`` planned while the block serves (each change planned once per test process)."""
    if change not in _reviews:
        make = NODE_CHANGES[change][0] if change in NODE_CHANGES else _weights_volume
        with monkeypatch.context() as patched:
            _reviews[change] = review(prod_serving(), make(patched))
    return _reviews[change]


def launch_template_reason(text: str) -> str:
    """The launch template fields the review names behind a new version (``launch template new version (a, b)``)."""
    _, found, rest = text.partition("launch template new version (")
    assert found, text
    return rest.split(")")[0]


def in_phase(found: Review, phase: str, allow_disruption: bool = False) -> Review:
    return dataclasses.replace(found, block=dataclasses.replace(found.block, phase=phase), allow_disruption=allow_disruption)


@pytest.mark.parametrize("change", sorted(NODE_CHANGES))
def test_a_launch_template_change_is_a_new_version_that_rolls_the_gpu_nodes(change, monkeypatch):
    found = reviewed(change, monkeypatch)
    template = next(c for c in found.changes if c.type == LAUNCH_TEMPLATE and c.display_name == "kimi-k3-gpu-lt")
    group = next(c for c in found.changes if c.type == NODE_GROUP and c.display_name == "kimi-k3-gpu-ng")
    field = NODE_CHANGES[change][1]
    assert template.action == "update" and field in [render_path(p) for p in template.paths]
    assert (group.value(("launchTemplate", "version"), before=True), group.value(("launchTemplate", "version"))) == ("1", "2")
    nodes = [d for d in found.disruptions if d.kind == "nodes"]
    assert len(nodes) == 1 and nodes[0].upgrade and nodes[0].count == 2 and nodes[0].order == "one at a time"
    assert field in launch_template_reason(nodes[0].why)


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("change", sorted(NODE_CHANGES))
def test_a_gpu_node_upgrade_is_refused_while_the_block_serves_even_with_allow_disruption(change, phase, monkeypatch):
    found = reviewed(change, monkeypatch)
    for allow in (False, True):
        refused = in_phase(found, phase, allow).refused
        if phase in (SERVING, ENDING):
            assert refused is not None and "--allow-disruption or not" in refused and EKS_RULE in refused and UPGRADE_QUOTE in refused
            assert "`kimi-k3 capacity update-nodes STACK`" in refused  # the way to do it during the block
            assert NODE_CHANGES[change][1] in launch_template_reason(refused)
        else:
            assert refused is None


@pytest.mark.parametrize("phase", PHASES)
def test_a_weights_volume_change_is_refused_while_the_block_serves_unless_allowed(phase, monkeypatch):
    found = reviewed("weights volume", monkeypatch)
    assert [d.kind for d in found.disruptions] == ["weights"] and not any(d.upgrade for d in found.disruptions)
    refused = in_phase(found, phase).refused
    if phase in (SERVING, ENDING):
        assert refused is not None and "kubernetes:apps/v1:StatefulSet kimi-k3-serving" in refused and "replaces the weights volumes" in refused
        assert in_phase(found, phase, allow_disruption=True).refused is None
    else:
        assert refused is None


def test_an_ami_release_change_is_refused_while_the_block_serves_even_with_allow_disruption():
    previous = prod_serving()
    result = run("prod", SERVING_AT, "active", previous, config_overrides={"kimi-k3:gpuAmiReleaseVersion": "1.34.2-20251215"})
    for allow in (False, True):
        refused = review(previous, result, allow_disruption=allow).refused
        assert refused is not None and "releaseVersion 1.34.2-20251120 -> 1.34.2-20251215" in refused and EKS_RULE in refused


ENDING_AT = BLOCK_START + timedelta(days=7, minutes=-50)
"""Fifty minutes before the block's end: ten minutes before EKS's scale-down, the nodes still serve."""


@cache
def prod_ending() -> PreviousState:
    return PreviousState.from_plan(run("prod", ENDING_AT - timedelta(minutes=5), "active"), "build/plan/prod")


def test_in_the_ending_phase_a_root_volume_change_is_refused_as_while_serving():
    result = run("prod", ENDING_AT, "active", prod_ending(), config_overrides={"kimi-k3:gpuRootVolumeGiB": 300})
    found = review(prod_ending(), result, allow_disruption=True)
    assert found.block.phase == ENDING and found.block.serving
    assert found.refused is not None and EKS_RULE in found.refused and "blockDeviceMappings[0].ebs.volumeSize" in found.refused


def test_a_rerun_with_no_launch_template_change_keeps_its_version():
    result = run("prod", SERVING_AT, "active", prod_serving())
    template = result.one(LAUNCH_TEMPLATE, "kimi-k3-gpu-lt")
    assert template.outputs["latestVersion"] == 1
    assert result.one(NODE_GROUP, "kimi-k3-gpu-ng").plain_inputs["launchTemplate"]["version"] == "1"
