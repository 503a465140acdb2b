"""The plan rule that a CloudWatch alarm declared silent and switched on later can still page.

CloudWatch invokes an alarm's actions only on a state transition (CloudWatch user guide, "Alarm
actions": "the actions happen only on state transitions, and are not performed again if the
condition persists for hours or days";
:data:`kimi_k3.capacity.delivery_check.STATE_TRANSITION_SOURCE`). An alarm created with its
actions off and missing data breaching sits in ALARM from its first evaluation; an
``EnableAlarmActions`` call later changes no state, so the alarm never pages for the condition it
was already in — for the delivery check, a block that starts with nothing running.

:func:`switched_on_alarm_can_page` refuses such a plan: every alarm declared with actions off that
a one-time EventBridge Scheduler schedule switches on must also have a one-time schedule that
moves it out of ALARM after the switch-on (``cloudwatch:SetAlarmState`` to ``OK``, strictly after
the switch-on's minute and before any switch-off), and some role policy of the plan must allow
``cloudwatch:SetAlarmState`` on that alarm (the scheduler calls it with its role).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from kimi_k3.capacity.delivery_check import (
    DISABLE_ALARM_ACTIONS_TARGET,
    ENABLE_ALARM_ACTIONS_TARGET,
    SET_ALARM_STATE_TARGET,
    STATE_TRANSITION_SOURCE,
    parse_scheduler_at,
)
from kimi_k3.offline.timeline import Registration

METRIC_ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
SCHEDULER_SCHEDULE = "aws:scheduler/schedule:Schedule"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


def _body(raw: Any) -> dict[str, Any]:
    try:
        body = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _schedules(registrations: Sequence[Registration], target_arn: str, alarm: str) -> list[datetime]:
    """When the one-time schedules calling ``target_arn`` on ``alarm`` fire."""
    times = []
    for r in registrations:
        target = r.inputs.get("target") if r.type == SCHEDULER_SCHEDULE else None
        if not isinstance(target, dict) or target.get("arn") != target_arn:
            continue
        body = _body(target.get("input"))
        if target_arn == SET_ALARM_STATE_TARGET:
            if body.get("AlarmName") != alarm or body.get("StateValue") != "OK":
                continue
        elif alarm not in (body.get("AlarmNames") or []):
            continue
        expression = r.inputs.get("scheduleExpression")
        moment = parse_scheduler_at(expression) if isinstance(expression, str) else None
        if moment is not None:
            times.append(moment)
    return times


def _statements(policy: Any) -> Iterator[dict[str, Any]]:
    statements = _body(policy).get("Statement") or []
    yield from (s for s in ([statements] if isinstance(statements, dict) else statements) if isinstance(s, dict))


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [v for v in (value or []) if isinstance(v, str)]


def allows_set_alarm_state(registrations: Sequence[Registration], alarm: str) -> bool:
    """Whether a role policy of the plan allows ``cloudwatch:SetAlarmState`` on the alarm named ``alarm``."""
    for r in registrations:
        if r.type != ROLE_POLICY:
            continue
        for s in _statements(r.inputs.get("policy")):
            actions = {a.lower() for a in _listed(s.get("Action"))}
            resources = _listed(s.get("Resource"))
            if s.get("Effect") == "Allow" and actions & {"cloudwatch:setalarmstate", "cloudwatch:*", "*"} and any(
                res == "*" or res.endswith(f":alarm:{alarm}") for res in resources
            ):
                return True
    return False


def switched_on_alarm_can_page(registrations: Sequence[Registration]) -> list[tuple[Registration, str]]:
    """Refuse an alarm declared with actions off, switched on by a one-time schedule, that nothing moves out of ALARM after."""
    refused = []
    for alarm in registrations:
        if alarm.type != METRIC_ALARM or alarm.inputs.get("actionsEnabled") is not False or not alarm.inputs.get("alarmActions"):
            continue
        name = alarm.inputs.get("name")
        if not isinstance(name, str):
            continue
        switch_ons = _schedules(registrations, ENABLE_ALARM_ACTIONS_TARGET, name)
        if not switch_ons:
            continue
        on = min(switch_ons)
        off = min(_schedules(registrations, DISABLE_ALARM_ACTIONS_TARGET, name), default=None)
        resets = [t for t in _schedules(registrations, SET_ALARM_STATE_TARGET, name) if t > on and (off is None or t < off)]
        problems = []
        if not resets:
            problems.append(
                f"its actions are switched on at {on:%Y-%m-%d %H:%M} UTC while it may sit in ALARM (created with actions off"
                f"{', missing data breaching' if alarm.inputs.get('treatMissingData') == 'breaching' else ''}), and no one-time "
                "schedule sets its state to OK after that (cloudwatch:SetAlarmState"
                f"{f', before the switch-off at {off:%Y-%m-%d %H:%M} UTC' if off else ''}): it never transitions, never pages"
            )
        elif not allows_set_alarm_state(registrations, name):
            problems.append("its state-reset schedule's calls are refused: no role policy of the plan allows cloudwatch:SetAlarmState on it")
        if problems:
            refused.append((alarm, f"alarm {name}: {'; '.join(problems)} ({STATE_TRANSITION_SOURCE})"))
    return refused


__all__ = ["allows_set_alarm_state", "switched_on_alarm_can_page"]
