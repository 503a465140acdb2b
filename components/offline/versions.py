"""A launch template's versions as EC2 answers them on a later ``up``: a new version per change.

The AWS provider updates a launch template with ``CreateLaunchTemplateVersion`` (terraform-provider-aws
``internal/service/ec2/ec2_launch_template.go``: every update of the template's data creates a new
version; ``latest_version`` is computed from it), so EC2 numbers the versions 1, 2, 3 … and the
template's ``latestVersion`` moves by one on each change. The Capacity Block node group names
``launchTemplate.version`` from it (:mod:`kimi_k3.capacity.node_group`), so on a re-run the version
itself shows the nodes' roll (EKS ``UpdateNodegroupVersion``). A first ``up`` answers version 1
(:func:`kimi_k3.offline.answers.computed_outputs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kimi_k3.offline.state import PreviousState

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
VERSION_OUTPUTS = ("latestVersion", "defaultVersion")


def _version(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and value >= 1 else 1


def launch_template_versions(previous: PreviousState | None, type_: str, name: str, inputs: Mapping[str, Any]) -> dict[str, int]:
    """``latestVersion`` / ``defaultVersion`` of the launch template ``name`` in a run after ``previous``: the previous
    ones with the same inputs, a ``latestVersion`` one higher with changed inputs (the default version stays, as the
    provider leaves it without ``update_default_version``); empty for another type or a template new in this run."""
    if previous is None or type_ != LAUNCH_TEMPLATE:
        return {}
    before = [r for r in previous.resources.values() if r.type == LAUNCH_TEMPLATE and r.name == name]
    if len(before) != 1:
        return {}
    old = before[0]
    latest, default = _version(old.outputs.get("latestVersion")), _version(old.outputs.get("defaultVersion"))
    if previous.inputs_of(inputs) != old.inputs:
        latest += 1
    return {"latestVersion": latest, "defaultVersion": default}


__all__ = ["LAUNCH_TEMPLATE", "launch_template_versions"]
