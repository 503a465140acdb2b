"""What a stack's previous ``pulumi up`` left behind that this run must keep: the pending one-off schedules.

Two schedules are computed from the run's ``now`` when they are created: the Capacity Block
node group's scale-up action (``max(start, now + 45 min)``, :mod:`kimi_k3.capacity.scaling`)
and the delivery check's switch-on (``max(start + grace, now + 45 min)``,
:mod:`kimi_k3.capacity.delivery_check`). Both APIs overwrite on update
(PutScheduledUpdateGroupAction, EventBridge Scheduler UpdateSchedule), so a re-run that
recomputed them would move a pending schedule later. This module reads the ones that exist,
once, at program start, so the components can keep a time that still lies ahead.

How it reads them, in a real ``pulumi up`` or ``pulumi preview``: the builtin provider's
``pulumi:pulumi:readStackResourceOutputs`` invoke on the stack itself (pulumi/pulumi
``pkg/resource/deploy/builtins.go``: ``readStackResourceOutputs`` calls the backend's
``GetStackResourceOutputs``, which returns every resource of the stack's latest snapshot with
its type and outputs; the Node.js SDK's ``listResourceOutputs`` is built on it). The
snapshot at program start is the previous update's (with ``--refresh``, the refreshed one), so:

* first ``up`` of a stack: no resources, nothing is kept, the schedules get fresh times;
* a second ``up`` before the scale-up fires: the action's ``startTime`` is read and kept,
  the Schedule's inputs are unchanged and Pulumi makes no call at all;
* a run after it fired: the time has passed, nothing is kept (the block serves by then and
  the run declares no scale-up action; Auto Scaling deleted the fired one-off action);
* the read fails (a backend without the builtin, an old DIY backend that cannot take an
  ``organization/project/stack`` name): one warning, and the run computes fresh times as
  before this module existed.

Under the offline engine the same invoke is answered from the previous plan's ``state.json``
(``kimi-k3 plan STACK --previous DIR``; :mod:`kimi_k3.offline.state`), or with no resources.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pulumi

from kimi_k3.capacity.delivery_check import (
    DISABLE_ALARM_ACTIONS_TARGET,
    ENABLE_ALARM_ACTIONS_TARGET,
    SET_ALARM_STATE_TARGET,
    parse_scheduler_at,
)
from kimi_k3.capacity.facts import CapacityBlockFacts, parse_aws_time
from kimi_k3.capacity.node_group import scale_up_action_name

READ_STACK_RESOURCE_OUTPUTS = "pulumi:pulumi:readStackResourceOutputs"
"""The builtin invoke that reads a stack's resources (type and outputs by URN) from its latest snapshot."""
AUTOSCALING_SCHEDULE = "aws:autoscaling/schedule:Schedule"
ROOT_STACK = "pulumi:pulumi:Stack"
"""The stack's root resource: its outputs are the stack's exports (the backend returns it with the others)."""
SCHEDULER_SCHEDULE = "aws:scheduler/schedule:Schedule"


@dataclass(frozen=True)
class PendingSchedules:
    """The one-off schedules of a stack that exist already, as its previous update left them."""

    scale_up_at: datetime | None = None
    """``startTime`` of the block's scale-up action (``kimi-k3-<reservation>-start``), if it exists."""
    switch_on_at: datetime | None = None
    """When the delivery alarm's switch-on schedule fires, if it exists."""
    switch_off_at: datetime | None = None
    """When the delivery alarm's switch-off schedule (at EKS's scale-down before the block's end) fires, if it exists."""
    state_reset_at: datetime | None = None
    """When the delivery alarm's state-reset schedule (SetAlarmState OK right after the switch-on) fires, if it exists."""


def stack_reference_name() -> str:
    """``organization/project/stack`` of the running stack (the name the backend reads a stack by)."""
    return f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"


def read_stack_resources() -> Mapping[str, Any]:
    """Every resource of the running stack's latest snapshot, ``{urn: {"type", "outputs"}}``; empty when it cannot be read (a warning says why)."""
    name = stack_reference_name()
    try:
        result = pulumi.runtime.invoke(READ_STACK_RESOURCE_OUTPUTS, {"stackName": name})
    except Exception as err:  # any failure of the read leaves the run as it was before: fresh schedule times
        pulumi.log.warn(
            f"could not read stack {name}'s previous state ({' '.join(str(err).split())[:200]}): a pending scale-up or "
            "delivery-check switch-on is recomputed from now and may move later"
        )
        return {}
    return dict((result.value or {}).get("outputs") or {})


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def _switch_of(outputs: Mapping[str, Any], alarm: str, target_arn: str) -> datetime | None:
    target = outputs.get("target") or {}
    if target.get("arn") != target_arn:
        return None
    try:
        names = json.loads(target.get("input") or "{}").get("AlarmNames")
    except (TypeError, ValueError, AttributeError):
        return None
    if names != [alarm] and not (target_arn == SET_ALARM_STATE_TARGET and _alarm_of_set_state(target.get("input")) == alarm):
        return None
    expression = outputs.get("scheduleExpression")
    return parse_scheduler_at(expression) if isinstance(expression, str) else None


def _alarm_of_set_state(body: Any) -> str | None:
    """The ``AlarmName`` of a SetAlarmState request body (its one alarm; the switches name theirs in ``AlarmNames``)."""
    try:
        name = json.loads(body or "{}").get("AlarmName")
    except (TypeError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) else None


def pending_schedules(resources: Mapping[str, Any], *, reservation_id: str, alarm: str | None) -> PendingSchedules:
    """The block's scale-up action and the delivery alarm's switch-on schedule among ``resources`` (:func:`read_stack_resources`)."""
    action = scale_up_action_name(reservation_id)
    scale_up = switch_on = switch_off = state_reset = None
    for entry in resources.values():
        kind, outputs = entry.get("type"), entry.get("outputs") or {}
        if kind == AUTOSCALING_SCHEDULE and outputs.get("scheduledActionName") == action:
            scale_up = _when(outputs.get("startTime")) or scale_up
        elif kind == SCHEDULER_SCHEDULE and alarm is not None:
            switch_on = _switch_of(outputs, alarm, ENABLE_ALARM_ACTIONS_TARGET) or switch_on
            switch_off = _switch_of(outputs, alarm, DISABLE_ALARM_ACTIONS_TARGET) or switch_off
            state_reset = _switch_of(outputs, alarm, SET_ALARM_STATE_TARGET) or state_reset
    return PendingSchedules(scale_up_at=scale_up, switch_on_at=switch_on, switch_off_at=switch_off, state_reset_at=state_reset)


def recorded_block(resources: Mapping[str, Any], reservation_id: str) -> CapacityBlockFacts | None:
    """The Capacity Block ``reservation_id`` as the previous ``up`` recorded it in its ``capacityBlock`` stack output (the
    root stack resource among ``resources``); ``None`` when not recorded or recorded for another block."""
    for entry in resources.values():
        if entry.get("type") != ROOT_STACK:
            continue
        block = (entry.get("outputs") or {}).get("capacityBlock")
        if not isinstance(block, Mapping) or block.get("id") != reservation_id:
            return None
        try:
            return CapacityBlockFacts(
                reservation_id=reservation_id, availability_zone=str(block.get("availabilityZone") or ""),
                instance_type=str(block.get("instanceType") or ""), instance_count=int(block.get("instanceCount") or 0),
                state=str(block.get("state") or "unknown"), start=parse_aws_time(str(block["start"])), end=parse_aws_time(str(block["end"])),
            )
        except (KeyError, TypeError, ValueError):
            return None
    return None


__all__ = ["READ_STACK_RESOURCE_OUTPUTS", "ROOT_STACK", "PendingSchedules", "pending_schedules", "read_stack_resources", "recorded_block", "stack_reference_name"]
