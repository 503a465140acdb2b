"""Delivery check: a CloudWatch alarm on the GPU node group's Auto Scaling group, outside the cluster.

The pain most reported with Capacity Blocks is a block that starts with nothing running.
This check does not depend on the cluster being healthy: CloudWatch watches the node
group's ASG metric ``GroupInServiceInstances`` (namespace ``AWS/AutoScaling``, dimension
``AutoScalingGroupName``) and alerts the block's SNS topic when fewer instances than
reserved are in service, from ``grace`` after the block's start.

Two things EKS does not do for us, both declared here with typed ``*Args``:

* Group metrics collection. The ASG is created and owned by the EKS managed node group;
  neither the EKS API nor pulumi-aws can turn its metrics collection on
  (aws/containers-roadmap#762; terraform-provider-aws#13793 — ``aws.autoscaling.Group``
  would take the group over from EKS). So an EventBridge Scheduler schedule calls
  ``autoscaling:EnableMetricsCollection`` on it every 10 minutes through the universal
  target ``arn:aws:scheduler:::aws-sdk:autoscaling:enableMetricsCollection`` (idempotent;
  it also re-enables collection should EKS recreate the group). No cluster, no Lambda.
* "From a short time after the block's start". CloudWatch metric math has no clock, so the
  alarm is declared with actions off while ``now`` is before ``start + grace`` and a
  one-time schedule at ``start + grace`` calls ``cloudwatch:EnableAlarmActions`` on it;
  once ``now`` is past that time the alarm is declared with actions on (the same inputs
  always give the same plan). The schedule is never created sooner than ``create_margin``
  after ``now``; that margin applies when it is created, not on a re-run: UpdateSchedule
  overwrites the schedule (EventBridge Scheduler API reference), so a pending switch-on
  time that lies ahead is kept (``pending_switch_on_at``, read by the caller from the
  stack's previous state; :func:`kimi_k3.capacity.scaling.keep_pending`).
* "And then it pages". Created days early with missing data breaching, the alarm sits in ALARM
  from its first evaluation, and switching its actions on is no state change: "the actions happen
  only on state transitions, and are not performed again if the condition persists for hours or
  days" (CloudWatch user guide, "Alarm actions",
  :data:`STATE_TRANSITION_SOURCE`). So a third one-time schedule, :data:`STATE_RESET_AFTER` after
  the switch-on (two schedules at one minute run in no set order), calls
  ``cloudwatch:SetAlarmState`` with ``OK`` (:func:`state_reset_at`): the next evaluation moves a
  still-breaching alarm OK → ALARM, a transition with actions on, and the topic is paged; a
  healthy group stays OK. A re-run between the switch-on and the reset keeps the pending reset
  (``pending_state_reset_at``).
* "Until the block's normal end". EKS scales the node group to 0 forty minutes before the
  block ends (its "Capacity Scaledown Before Reservation End" action, EKS user guide,
  capacity-blocks-mng; :data:`kimi_k3.capacity.scaling.EKS_SCALEDOWN_BEFORE_END`): with missing
  data breaching, the alarm would page at every normal block end and stay in ALARM after it.
  So a second one-time schedule calls ``cloudwatch:DisableAlarmActions`` at that moment
  (:func:`switch_off_at`), and from that moment on (the ending and ended phases) the alarm is
  declared with actions off and no schedule. The switch-off time depends only on the block's
  end, so a re-run declares the same schedule (no call); a first ``up`` too close to it to
  create the schedule in time (``create_margin``) declares the alarm silent instead: a late
  switch-off would page at the scale-down.

The alarm's name is given by the caller (:attr:`DeliveryCheckArgs.alarm_name`): CloudWatch alarm
names are unique per account and region (PutMetricAlarm overwrites an alarm of the same name),
so two stacks in one account must not share one (the platform puts the cluster name in it).

Missing data counts as breaching: no data from a started block means collection is off or
the group is gone, both worth an alert.

Hook for the SNS topic (``CapacityBlockNodeGroup``): its topic policy and KMS key policy
grant only EventBridge today; CloudWatch alarms need :func:`cloudwatch_topic_statement` and
:func:`cloudwatch_key_statement` added (an encrypted topic rejects CloudWatch otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pulumi
import pulumi_aws as aws

from kimi_k3.capacity.scaling import EKS_SCALEDOWN_BEFORE_END, SCALE_UP_MARGIN, keep_pending
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.core.clock import utc
from kimi_k3.errors import Problems

METRIC_NAMESPACE = "AWS/AutoScaling"
IN_SERVICE_METRIC = "GroupInServiceInstances"
COLLECTED_METRICS = ("GroupInServiceInstances", "GroupDesiredCapacity", "GroupPendingInstances")
"""Group metrics the schedule turns on (in service is the alarm's; the others explain it)."""
ENABLE_METRICS_TARGET = "arn:aws:scheduler:::aws-sdk:autoscaling:enableMetricsCollection"
ENABLE_ALARM_ACTIONS_TARGET = "arn:aws:scheduler:::aws-sdk:cloudwatch:enableAlarmActions"
DISABLE_ALARM_ACTIONS_TARGET = "arn:aws:scheduler:::aws-sdk:cloudwatch:disableAlarmActions"
ALARM_NAME_MAX = 255
"""CloudWatch PutMetricAlarm ``AlarmName``: 1 to 255 characters."""
SET_ALARM_STATE_TARGET = "arn:aws:scheduler:::aws-sdk:cloudwatch:setAlarmState"
STATE_RESET_AFTER = timedelta(minutes=1)
"""How long after the switch-on the alarm's state is set to OK (one-time schedules at the same minute run in no set order)."""
STATE_TRANSITION_SOURCE = (
    "CloudWatch user guide, Alarm actions (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-actions.html): "
    "'Except for Auto Scaling actions, the actions happen only on state transitions, and are not performed again if the condition "
    "persists for hours or days'; CloudWatch API reference, SetAlarmState: 'When the updated state differs from the previous value, "
    "the action configured for the appropriate state is invoked'"
)
"""Why an alarm whose actions are switched on while it is in ALARM must be moved out of ALARM to page."""
METRICS_SCHEDULE = "rate(10 minutes)"

HIGH_RESOLUTION_PERIODS_S = (10, 20, 30)
"""Alarm periods under a minute CloudWatch accepts (high-resolution alarms); otherwise a multiple of 60 (:data:`PERIOD_SOURCE`)."""
MAX_SUB_HOUR_EVALUATION_RANGE_S = 86_400
"""The most ``period_s x evaluation_periods`` for a period of less than an hour (a day)."""
MAX_EVALUATION_RANGE_S = 604_800
"""The most ``period_s x evaluation_periods`` for a period of an hour or more (seven days)."""
PERIOD_SOURCE = (
    "CloudWatch API Reference, PutMetricAlarm, Period: 'Valid values are 10, 20, 30, and any multiple of 60'; 'Period multiplied by "
    "EvaluationPeriods can't be more than 604,800 seconds. For alarms with a period of less than one hour (3,600 seconds), the total "
    "evaluation period can't be longer than one day (86,400 seconds)'"
)
"""Where the alarm period limits come from."""


@checked_args
@dataclass(frozen=True)
class DeliveryCheckArgs:
    """Inputs of :class:`DeliveryCheck`."""

    asg_name: pulumi.Input[str]
    """Name of the node group's Auto Scaling group (``CapacityBlockNodeGroup.asg_name``)."""
    reserved_instances: int
    """Instances the block reserves: fewer in service raises the alarm."""
    block_start: datetime
    """Start of the block (UTC), from the reservation."""
    block_end: datetime
    """End of the block (UTC), from the reservation: the alarm's actions are off from ``block_end - scale_down_before_end``."""
    alert_topic_arn: pulumi.Input[str]
    """SNS topic the alarm notifies (``CapacityBlockNodeGroup.alert_topic_arn``)."""
    now: datetime
    """The current time (UTC): decides whether the alarm's actions start on or are switched on later."""
    grace: timedelta = timedelta(minutes=20)
    """Time after the start before the check counts: scheduled scale-up, launch and boot take ~10 minutes."""
    period_s: int = 60
    """Metric period (group metrics are published every minute once collection is on)."""
    evaluation_periods: int = 5
    """Consecutive periods below the reserved count before the alarm (a replaced node does not page)."""
    create_margin: timedelta = SCALE_UP_MARGIN
    """How long after ``now`` the switch-on schedule is created at the latest (it comes after the GPU node group in a
    first ``pulumi up``; :data:`kimi_k3.capacity.scaling.SCALE_UP_MARGIN`): it never fires earlier than that."""
    pending_switch_on_at: datetime | None = None
    """When the switch-on schedule that exists already fires (a previous run's, read by the caller); a time still ahead is
    kept instead of being recomputed from ``now`` (:func:`kimi_k3.capacity.scaling.keep_pending`)."""
    pending_switch_off_at: datetime | None = None
    """When the switch-off schedule that exists already fires (a previous run's, read by the caller): one at
    :func:`switch_off_at` still ahead is kept even inside ``create_margin`` (it exists; a re-run makes no call)."""
    pending_state_reset_at: datetime | None = None
    """When the state-reset schedule that exists already fires (a previous run's, read by the caller): one still ahead
    is kept after the switch-on (the alarm may still sit in ALARM with its actions just switched on)."""
    scale_down_before_end: timedelta = EKS_SCALEDOWN_BEFORE_END
    """How long before the block's end EKS scales the node group to 0 (:data:`kimi_k3.capacity.scaling.EKS_SCALEDOWN_BEFORE_END`)."""
    alarm_name: str | None = None
    """Name of the CloudWatch alarm, unique in the account and region (include the stack or cluster name);
    ``None``: :func:`alarm_name` of the component's name."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags on every resource."""


def alarm_name(name: str) -> str:
    """Name of the delivery alarm of the :class:`DeliveryCheck` named ``name``."""
    return f"{name}-gpu-instances-in-service"


def alarm_name_of(name: str, args: DeliveryCheckArgs) -> str:
    """The alarm's name: ``args.alarm_name``, else :func:`alarm_name` of the component's ``name``."""
    return args.alarm_name or alarm_name(name)


def checks_from(args: DeliveryCheckArgs) -> datetime:
    """When the check starts counting: the block's start plus the grace time."""
    return args.block_start.astimezone(UTC) + args.grace


def switch_on_at(args: DeliveryCheckArgs) -> datetime:
    """When the one-time schedule switches the alarm's actions on: :func:`checks_from`, but never before the schedule
    exists (a one-time schedule whose time has passed at create is refused, or never fires: the alarm would stay silent);
    a pending switch-on that lies ahead keeps its time (``pending_switch_on_at``)."""
    fresh = max(checks_from(args), args.now.astimezone(UTC) + args.create_margin)
    return keep_pending(args.pending_switch_on_at, fresh, args.now, not_before=checks_from(args))


def state_reset_at(switch_on: datetime) -> datetime:
    """When the one-time schedule sets the alarm's state to OK: :data:`STATE_RESET_AFTER` after the switch-on at ``switch_on``."""
    return utc(switch_on) + STATE_RESET_AFTER


def switch_off_at(args: DeliveryCheckArgs) -> datetime:
    """When the alarm's actions go off: EKS's scale-down before the block's end (``block_end - scale_down_before_end``)."""
    return utc(args.block_end) - args.scale_down_before_end


@dataclass(frozen=True)
class AlarmSchedule:
    """Whether the alarm's actions are on in this run, and the one-time schedules that switch them on and off later."""

    actions_enabled: bool
    """The alarm's ``actionsEnabled`` as declared in this run."""
    switch_on: datetime | None
    """When the switch-on schedule fires; ``None``: no switch-on schedule."""
    switch_off: datetime | None
    """When the switch-off schedule fires; ``None``: no switch-off schedule."""
    state_reset: datetime | None
    """When the schedule setting the alarm's state to OK fires (after the switch-on, :func:`state_reset_at`); ``None``: none."""
    reason: str
    """One line: why the alarm is on or off now."""


def alarm_schedule(args: DeliveryCheckArgs) -> AlarmSchedule:
    """The alarm's actions in a run at ``args.now`` and its switch-on / switch-off schedules (see the module docstring).

    - from :func:`switch_off_at` on (EKS's scale-down, the ending and ended phases): off, no schedule;
    - a switch-off that cannot be created in time (no pending one and ``now + create_margin`` past it): off, no schedule;
    - before :func:`checks_from`: off, switched on at :func:`switch_on_at` (unless that is after the switch-off), off at
      :func:`switch_off_at`;
    - between the two: on, switched off at :func:`switch_off_at`; a pending state reset still ahead is kept.

    With a switch-on comes a state reset to OK at :func:`state_reset_at` (see the module docstring): without it the alarm,
    in ALARM since before the start, never transitions and never pages.
    """
    now, off = utc(args.now), switch_off_at(args)
    if now >= off:
        return AlarmSchedule(False, None, None, None, f"off from EKS's scale-down at {off:%Y-%m-%d %H:%M} UTC (the block's end - "
                             f"{int(args.scale_down_before_end.total_seconds() // 60)} min)")
    pending = args.pending_switch_off_at
    kept = pending is not None and utc(pending) == off
    if not kept and now + args.create_margin >= off:
        return AlarmSchedule(False, None, None, None, f"off: too close to EKS's scale-down at {off:%Y-%m-%d %H:%M} UTC to schedule "
                             "the switch-off in time")
    if now >= checks_from(args):
        reset = args.pending_state_reset_at
        kept_reset = utc(reset) if reset is not None and now < utc(reset) < off else None
        return AlarmSchedule(True, None, off, kept_reset, f"on until {off:%Y-%m-%d %H:%M} UTC")
    on = switch_on_at(args)
    if state_reset_at(on) >= off:
        return AlarmSchedule(False, None, None, None, f"off: the switch-on at {on:%Y-%m-%d %H:%M} UTC would come after EKS's "
                             f"scale-down at {off:%Y-%m-%d %H:%M} UTC")
    return AlarmSchedule(False, on, off, state_reset_at(on), f"on from {on:%Y-%m-%d %H:%M} to {off:%Y-%m-%d %H:%M} UTC")


def state_reset_input(alarm: str) -> dict[str, str]:
    """The SetAlarmState request of the state-reset schedule (CloudWatch API reference, SetAlarmState)."""
    return {
        "AlarmName": alarm, "StateValue": "OK",
        "StateReason": "kimi-k3: actions switched on at the block's start + grace; the next evaluation pages if instances are missing",
    }


def scheduler_at(moment: datetime) -> str:
    """An EventBridge Scheduler one-time expression, ``at(2026-12-01T11:50:00)`` (UTC)."""
    return f"at({moment.astimezone(UTC):%Y-%m-%dT%H:%M:%S})"


def parse_scheduler_at(expression: str) -> datetime | None:
    """The moment of an ``at(2026-12-01T11:50:00)`` expression (UTC); ``None`` for any other expression."""
    try:
        return datetime.strptime(expression, "at(%Y-%m-%dT%H:%M:%S)").replace(tzinfo=UTC)
    except (TypeError, ValueError):
        return None


def validate(args: DeliveryCheckArgs, name: str = "delivery-check") -> None:
    """Raise :class:`~kimi_k3.errors.ComponentInputError` with every input that cannot make a working check."""
    problems = Problems("DeliveryCheck", name)
    for key in ("block_start", "block_end", "now"):
        if getattr(args, key).tzinfo is None:
            problems.add(key, f"{key} has no timezone; pass UTC datetimes")
    if args.reserved_instances < 1:
        problems.reject("reserved_instances", args.reserved_instances, "a block reserves at least 1 instance")
    if args.period_s not in HIGH_RESOLUTION_PERIODS_S and (args.period_s < 60 or args.period_s % 60):
        problems.reject("period_s", args.period_s, "CloudWatch takes 10, 20, 30 or a multiple of 60 seconds")
    if args.evaluation_periods < 1:
        problems.reject("evaluation_periods", args.evaluation_periods, "expected at least 1")
    else:
        most = MAX_EVALUATION_RANGE_S if args.period_s >= 3600 else MAX_SUB_HOUR_EVALUATION_RANGE_S
        if args.period_s * args.evaluation_periods > most:
            problems.reject(
                "evaluation_periods", args.evaluation_periods,
                f"period_s x evaluation_periods ({args.period_s * args.evaluation_periods} s) is above CloudWatch's {most} s for a period of "
                f"{'an hour or more' if args.period_s >= 3600 else 'less than an hour'} ({PERIOD_SOURCE})",
            )
    if args.grace < timedelta(0):
        problems.reject("grace", args.grace, "expected a duration that is not negative")
    if args.block_start.tzinfo is not None and args.block_end.tzinfo is not None and args.block_end <= args.block_start:
        problems.reject("block_end", args.block_end.isoformat(), "expected a time after block_start")
    if args.alarm_name is not None and not 1 <= len(args.alarm_name) <= ALARM_NAME_MAX:
        problems.reject("alarm_name", args.alarm_name, f"1 to {ALARM_NAME_MAX} characters (CloudWatch PutMetricAlarm)")
    problems.raise_any()


TOPIC_KEY_ACTIONS = ["kms:GenerateDataKey*", "kms:Decrypt"]
"""What a service needs of an encrypted topic's KMS key to publish to it (SNS developer guide, sns-key-management)."""


def service_statement(sid: str, service: str, action: str | list[str], resource: str, condition: dict[str, Any]) -> dict[str, Any]:
    """A resource-policy statement allowing the AWS service principal ``service`` ``action`` on ``resource`` under ``condition``."""
    return {
        "Sid": sid,
        "Effect": "Allow",
        "Principal": {"Service": service},
        "Action": action,
        "Resource": resource,
        "Condition": condition,
    }


def cloudwatch_topic_statement(topic_arn: str, account_id: str) -> dict[str, Any]:
    """Topic-policy statement letting this account's CloudWatch alarms publish to ``topic_arn``."""
    return service_statement(
        "CloudWatchAlarms", "cloudwatch.amazonaws.com", "sns:Publish", topic_arn, {"StringEquals": {"aws:SourceAccount": account_id}}
    )


def cloudwatch_key_statement(account_id: str) -> dict[str, Any]:
    """Key-policy statement letting CloudWatch use the topic's KMS key to publish."""
    return service_statement(
        "CloudWatchPublishesToTopic", "cloudwatch.amazonaws.com", TOPIC_KEY_ACTIONS, "*", {"StringEquals": {"aws:SourceAccount": account_id}}
    )


def _scheduler_policy(partition: str, region: str, account: str, asg_name: str, alarm: str) -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "EnableGroupMetrics",
                "Effect": "Allow",
                "Action": "autoscaling:EnableMetricsCollection",
                "Resource": f"arn:{partition}:autoscaling:{region}:{account}:autoScalingGroup:*:autoScalingGroupName/{asg_name}",
            },
            {
                "Sid": "SwitchAlarmActions",
                "Effect": "Allow",
                "Action": ["cloudwatch:EnableAlarmActions", "cloudwatch:DisableAlarmActions", "cloudwatch:SetAlarmState"],
                "Resource": f"arn:{partition}:cloudwatch:{region}:{account}:alarm:{alarm}",
            },
        ],
    })


@checked_component
class DeliveryCheck(pulumi.ComponentResource):
    """Alarm when fewer GPU instances than reserved are in service after the block's start.

    Attributes: ``alarm`` (``aws.cloudwatch.MetricAlarm``), ``metrics_schedule`` (enables group
    metrics), ``enable_actions_schedule`` (``None`` once the check is already live),
    ``disable_actions_schedule`` (``None`` from EKS's scale-down on), ``reset_state_schedule`` (sets the alarm to OK after
    the switch-on; ``None`` when none is pending), ``role``, ``schedule``
    (the :class:`AlarmSchedule` of this run).
    """

    def __init__(self, name: str, args: DeliveryCheckArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate ``args``, then declare the scheduler role, the schedules and the alarm."""
        validate(args, name)
        super().__init__("kimi-k3:index:DeliveryCheck", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOutputOptions(parent=self)
        plan = self.schedule = alarm_schedule(args)
        alarm = alarm_name_of(name, args)
        tags = dict(args.tags)

        identity = aws.get_caller_identity_output(opts=invoke)
        region = aws.get_region_output(opts=invoke)
        partition = aws.get_partition_output(opts=invoke).partition

        self.role = aws.iam.Role(
            f"{name}-scheduler-role",
            assume_role_policy=identity.account_id.apply(lambda account: json.dumps({
                "Version": "2012-10-17",
                "Statement": [{
                    "Effect": "Allow",
                    "Principal": {"Service": "scheduler.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                    "Condition": {"StringEquals": {"aws:SourceAccount": account}},
                }],
            })),
            description="EventBridge Scheduler: enable the GPU node group's ASG metrics, switch the delivery alarm's actions on and off",
            tags=tags,
            opts=child,
        )
        policy = aws.iam.RolePolicy(
            f"{name}-scheduler-policy",
            role=self.role.id,
            policy=pulumi.Output.all(partition, region.region, identity.account_id, args.asg_name).apply(
                lambda v: _scheduler_policy(v[0], v[1], v[2], v[3], alarm)
            ),
            opts=child,
        )
        after_policy = pulumi.ResourceOptions(parent=self, depends_on=[policy])

        self.metrics_schedule = aws.scheduler.Schedule(
            f"{name}-enable-group-metrics",
            description="Turn on group metrics collection of the EKS-managed GPU node group ASG (idempotent)",
            schedule_expression=METRICS_SCHEDULE,
            flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
            target=aws.scheduler.ScheduleTargetArgs(
                arn=ENABLE_METRICS_TARGET,
                role_arn=self.role.arn,
                input=pulumi.Output.from_input(args.asg_name).apply(lambda asg: json.dumps(
                    {"AutoScalingGroupName": asg, "Granularity": "1Minute", "Metrics": list(COLLECTED_METRICS)}
                )),
            ),
            opts=after_policy,
        )

        self.alarm = aws.cloudwatch.MetricAlarm(
            f"{name}-in-service",
            name=alarm,
            alarm_description=(
                f"Fewer than {args.reserved_instances} GPU instances in service {int(args.grace.total_seconds() // 60)} min "
                f"after the Capacity Block started ({args.block_start.astimezone(UTC):%Y-%m-%d %H:%M} UTC)"
            ),
            namespace=METRIC_NAMESPACE,
            metric_name=IN_SERVICE_METRIC,
            dimensions={"AutoScalingGroupName": args.asg_name},
            statistic="Maximum",
            period=args.period_s,
            evaluation_periods=args.evaluation_periods,
            datapoints_to_alarm=args.evaluation_periods,
            threshold=float(args.reserved_instances),
            comparison_operator="LessThanThreshold",
            treat_missing_data="breaching",
            actions_enabled=plan.actions_enabled,
            alarm_actions=[args.alert_topic_arn],
            ok_actions=[args.alert_topic_arn],
            tags=tags,
            opts=child,
        )

        def one_time_switch(
            suffix: str, description: str, at: datetime, target_arn: str, body: Mapping[str, Any] | None = None,
        ) -> aws.scheduler.Schedule:
            return aws.scheduler.Schedule(
                f"{name}-{suffix}",
                description=description,
                schedule_expression=scheduler_at(at),
                schedule_expression_timezone="UTC",
                flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
                target=aws.scheduler.ScheduleTargetArgs(arn=target_arn, role_arn=self.role.arn, input=json.dumps(body or {"AlarmNames": [alarm]})),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[policy, self.alarm]),
            )

        self.enable_actions_schedule = None
        if plan.switch_on is not None:
            self.enable_actions_schedule = one_time_switch(
                "enable-alarm-actions", f"Switch on the delivery alarm {alarm} at the block's start + grace", plan.switch_on, ENABLE_ALARM_ACTIONS_TARGET,
            )
        self.reset_state_schedule = None
        if plan.state_reset is not None:
            self.reset_state_schedule = one_time_switch(
                "reset-alarm-state", f"Set the delivery alarm {alarm} to OK after its actions are on, so that a missing delivery "
                "transitions it to ALARM and pages", plan.state_reset, SET_ALARM_STATE_TARGET, state_reset_input(alarm),
            )
        self.disable_actions_schedule = None
        if plan.switch_off is not None:
            minutes = int(args.scale_down_before_end.total_seconds() // 60)
            self.disable_actions_schedule = one_time_switch(
                "disable-alarm-actions", f"Switch off the delivery alarm {alarm} at EKS's scale-down, the block's end - {minutes} min",
                plan.switch_off, DISABLE_ALARM_ACTIONS_TARGET,
            )

        self.register_outputs({"alarmName": self.alarm.name, "alarmArn": self.alarm.arn, "checksFrom": checks_from(args).isoformat()})
