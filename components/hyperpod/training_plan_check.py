"""The stack's Flexible Training Plan, read at preview time and checked before use.

The HyperPod counterpart of :mod:`kimi_k3.capacity.assessment` (``assess``):
a training plan that has ended, is for training jobs instead of HyperPod clusters,
reserves another instance type, too few instances, or capacity in an AZ the stack's
subnets do not cover makes ``CreateCluster`` / ``UpdateCluster`` fail late (or the
instance group wait for nodes that never come). :func:`check_training_plan` turns
each case into one readable error before anything is declared.

How preview reads the plan. No Pulumi provider has a look-up for it: pulumi-aws
7.51.1 has no training-plan data source, and pulumi-aws-native 1.84.0 (generated
from the CloudFormation registry) has neither a ``TrainingPlan`` resource nor a
``get_training_plan`` function, so neither a provider invoke nor
``aws-native:index:ExtensionResource`` (which creates, never reads) can do it.
The program therefore calls ``DescribeTrainingPlan`` with boto3 once, at program
start (:func:`stack_training_plan`, which the ``hyperpod`` stack's platform calls;
:func:`read_training_plan` for a client of your own), and passes the resulting
:class:`TrainingPlanFacts` into the composition. Trade-offs, written down:

* it runs in ``pulumi preview`` and in CI like the Capacity Block look-up does, and
  fails the run with one line, before any resource is registered;
* boto3 does not see the AWS provider's configuration: the client is built for the
  stack's ``aws:region`` with boto3's own credential chain (``AWS_PROFILE``, the
  environment, the instance role); an ``aws:profile`` or ``aws:assumeRole`` in the
  stack config is not applied to it;
* the identity running preview needs ``sagemaker:DescribeTrainingPlan``;
* the answer is not stored in the Pulumi state (a later ``up`` reads it again);
* under the offline engine (``kimi-k3 plan``, tests) nothing calls AWS: the engine
  substitutes its own SageMaker client (:func:`answered_by`), which answers with facts
  built by :func:`rehearsal_facts` (the ``--training-plan-*`` flags) or a test.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from kimi_k3.errors import UserError
from kimi_k3.hyperpod.training_plans import HYPERPOD_TARGET, TrainingPlan, describe_plan, make_client

USABLE_STATES = ("Scheduled", "Active")
"""Plan states in which an instance group can be (or become) backed by the plan."""
PENDING_STATES = ("Pending",)
"""States that may still become usable (payment in progress): allowed with a warning."""
SHORT_WINDOW = timedelta(hours=3)
"""Usable time below which the check warns: a cold first boot of Kimi K3 takes 60-75 minutes."""


@dataclass(frozen=True)
class PlanCapacity:
    """One reserved capacity of the plan: instance type, count, AZ."""

    instance_type: str
    """HyperPod instance type (``ml.`` prefix)."""
    instance_count: int
    """Instances reserved."""
    availability_zone: str
    """AZ of the instances."""


@dataclass(frozen=True)
class TrainingPlanFacts:
    """What the stack needs to know about its training plan."""

    arn: str
    """``TrainingPlanArn``."""
    name: str
    """``TrainingPlanName``."""
    state: str
    """``Pending``, ``Scheduled``, ``Active``, ``Expired`` or ``Failed``."""
    start: datetime
    """Start of the plan (UTC)."""
    end: datetime
    """End of the plan (UTC)."""
    capacities: tuple[PlanCapacity, ...]
    """Reserved capacities (instance type, count, AZ)."""
    target_resources: tuple[str, ...] = (HYPERPOD_TARGET,)
    """What the plan can back."""

    @classmethod
    def from_plan(cls, plan: TrainingPlan) -> TrainingPlanFacts:
        """Facts from a described plan."""
        if plan.start is None or plan.end is None:
            raise UserError(f"training plan {plan.name} has no start or end time yet (status {plan.status}); wait until it is Scheduled")
        return cls(
            arn=plan.arn,
            name=plan.name,
            state=plan.status,
            start=plan.start,
            end=plan.end,
            capacities=tuple(PlanCapacity(c.instance_type, c.instance_count, c.availability_zone) for c in plan.capacities),
            target_resources=plan.target_resources,
        )

    def instances_in(self, instance_type: str, availability_zone: str | None = None) -> int:
        """Instances of ``instance_type`` reserved (in ``availability_zone`` if given)."""
        return sum(
            c.instance_count
            for c in self.capacities
            if c.instance_type == instance_type and (availability_zone is None or c.availability_zone == availability_zone)
        )

    def availability_zones(self, instance_type: str | None = None) -> tuple[str, ...]:
        """AZs of the capacities (of ``instance_type`` if given), each once."""
        return tuple(dict.fromkeys(c.availability_zone for c in self.capacities if instance_type is None or c.instance_type == instance_type))

    def describe(self) -> str:
        """One line for summaries: name, state, window, capacity."""
        fmt = "%Y-%m-%d %H:%M UTC"
        what = ", ".join(f"{c.instance_count} x {c.instance_type} in {c.availability_zone}" for c in self.capacities) or "no capacity"
        return f"{self.name} ({self.state}): {what}, {self.start.strftime(fmt)} -> {self.end.strftime(fmt)}"

    def describe_response(self) -> dict[str, Any]:
        """The ``DescribeTrainingPlan`` response these facts correspond to (for stubs and canned offline answers)."""
        hours = int((self.end - self.start).total_seconds() // 3600)
        region = self.arn.split(":")[3]
        zone_ids = {az: _zone_id(az) for az in self.availability_zones()}
        return {
            "TrainingPlanArn": self.arn,
            "TrainingPlanName": self.name,
            "Status": self.state,
            "DurationHours": hours,
            "DurationMinutes": 0,
            "StartTime": self.start,
            "EndTime": self.end,
            "UpfrontFee": "0",
            "CurrencyCode": "USD",
            "TotalInstanceCount": sum(c.instance_count for c in self.capacities),
            "AvailableInstanceCount": sum(c.instance_count for c in self.capacities),
            "InUseInstanceCount": 0,
            "TargetResources": list(self.target_resources),
            "ReservedCapacitySummaries": [
                {
                    "ReservedCapacityArn": f"arn:aws:sagemaker:{region}:{self.arn.split(':')[4]}:reserved-capacity/{self.name}-{i}",
                    "ReservedCapacityType": "Instance",
                    "InstanceType": c.instance_type,
                    "TotalInstanceCount": c.instance_count,
                    "Status": self.state,
                    "AvailabilityZone": c.availability_zone,
                    "AvailabilityZoneId": zone_ids[c.availability_zone],
                    "DurationHours": hours,
                    "DurationMinutes": 0,
                    "StartTime": self.start,
                    "EndTime": self.end,
                }
                for i, c in enumerate(self.capacities)
            ],
        }


_DIRECTIONS = {"north": "n", "south": "s", "east": "e", "west": "w", "central": "c", "northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw"}


def _zone_id(az: str) -> str:
    """A plausible AZ id for an AZ name (``us-east-1a`` -> ``use1-az1``), as the offline engine makes them."""
    region, letter = az[:-1], az[-1]
    parts = region.split("-")
    return f"{parts[0]}{_DIRECTIONS.get(parts[1], parts[1][0])}{parts[-1]}-az{ord(letter) - ord('a') + 1}"


def read_training_plan(sm: Any, name_or_arn: str) -> TrainingPlanFacts:
    """``DescribeTrainingPlan`` through a boto3 SageMaker client, as facts (see the module docstring)."""
    return TrainingPlanFacts.from_plan(describe_plan(sm, name_or_arn))


SageMakerClientFactory = Callable[[str], Any]
"""Makes the SageMaker client of a region (boto3's by default; the offline engine substitutes its own)."""

_CLIENT_FACTORY: ContextVar[SageMakerClientFactory | None] = ContextVar("kimi_k3_sagemaker_client_factory", default=None)


def stack_training_plan(name_or_arn: str, region: str) -> TrainingPlanFacts:
    """The stack's training plan, read once at program start in ``region`` (see the module docstring).

    Under ``pulumi preview``/``up`` this is boto3 (:func:`kimi_k3.hyperpod.training_plans.make_client`);
    inside :func:`answered_by` (the offline engine) the substituted client answers instead.
    """
    factory = _CLIENT_FACTORY.get() or make_client
    return read_training_plan(factory(region), name_or_arn)


@contextlib.contextmanager
def answered_by(factory: SageMakerClientFactory) -> Iterator[None]:
    """Run a block with :func:`stack_training_plan` reading through clients made by ``factory``."""
    token = _CLIENT_FACTORY.set(factory)
    try:
        yield
    finally:
        _CLIENT_FACTORY.reset(token)


def rehearsal_facts(
    arn: str,
    *,
    availability_zone: str,
    instance_type: str = "ml.p6-b300.48xlarge",
    instance_count: int = 1,
    state: str = "Scheduled",
    start: datetime,
    duration: timedelta = timedelta(days=7),
) -> TrainingPlanFacts:
    """Facts for an offline plan (the ``--training-plan-*`` rehearsal flags): one capacity, one AZ."""
    name = arn.rsplit("/", 1)[-1]
    return TrainingPlanFacts(
        arn=arn,
        name=name,
        state=state,
        start=start,
        end=start + duration,
        capacities=(PlanCapacity(instance_type, instance_count, availability_zone),),
    )


def check_training_plan(
    facts: TrainingPlanFacts,
    *,
    instance_type: str,
    subnet_availability_zones: tuple[str, ...],
    instances_required: int,
    now: datetime,
) -> list[str]:
    """Refuse a plan that cannot back the HyperPod instance group; return warnings for the rest.

    :param facts: the plan, from :func:`read_training_plan` (or a rehearsal).
    :param instance_type: the instance group's type (``ml.p6-b300.48xlarge``).
    :param subnet_availability_zones: AZs of the subnets the instance group may use.
    :param instances_required: instances the stack needs (replicas x nodes per replica).
    :param now: the current time (an input: no wall clock is read here).
    :raises UserError: one line naming the plan, what is wrong and what to do.
    """
    name = facts.name
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    warnings: list[str] = []
    if facts.state not in USABLE_STATES + PENDING_STATES:
        reason = f"expired (ended {facts.end:%Y-%m-%d %H:%M} UTC)" if facts.state == "Expired" else facts.state
        raise UserError(
            f"training plan {name} is {reason}; a HyperPod instance group needs a Scheduled or Active plan. "
            "Buy one (`kimi-k3 hyperpod plans offerings`) and set kimi-k3:trainingPlanArn"
        )
    if facts.state in PENDING_STATES:
        warnings.append(f"training plan {name} is {facts.state} (payment in progress); nodes can join only once it is Scheduled and then Active")
    if facts.target_resources and HYPERPOD_TARGET not in facts.target_resources:
        raise UserError(
            f"training plan {name} is for {', '.join(facts.target_resources)}, not {HYPERPOD_TARGET}; "
            "a plan backs only the resource type it was bought for: buy a plan for HyperPod clusters"
        )
    types = tuple(dict.fromkeys(c.instance_type for c in facts.capacities))
    if instance_type not in types:
        raise UserError(
            f"training plan {name} reserves {', '.join(types) or 'nothing'}, but the instance group is {instance_type}; "
            f"use a plan of {instance_type} or set kimi-k3:gpuInstanceType to match"
        )
    plan_azs = facts.availability_zones(instance_type)
    covered = [az for az in plan_azs if az in subnet_availability_zones]
    if not covered:
        raise UserError(
            f"training plan {name} holds its {instance_type} capacity in {', '.join(plan_azs)}, which the stack's subnets do not cover "
            f"(AZs: {', '.join(subnet_availability_zones) or 'none'}); add {plan_azs[0]} to kimi-k3:availabilityZones "
            "(the instance group must use a subnet of the plan's AZ)"
        )
    reserved = sum(facts.instances_in(instance_type, az) for az in covered)
    if reserved < instances_required:
        raise UserError(
            f"training plan {name} reserves {reserved} x {instance_type} in {', '.join(covered)} but the stack needs {instances_required} "
            "(kimi-k3:replicas, one node each); lower kimi-k3:replicas or extend/buy a larger plan"
        )
    if facts.end <= now:
        raise UserError(
            f"training plan {name} ended at {facts.end:%Y-%m-%d %H:%M} UTC; buy a new one (`kimi-k3 hyperpod plans offerings`) "
            "and set kimi-k3:trainingPlanArn"
        )
    if facts.start > now:
        warnings.append(f"training plan {name} starts {facts.start:%Y-%m-%d %H:%M} UTC; the instance group gets its nodes only then")
    usable_from = max(facts.start, now)
    if facts.end - usable_from < SHORT_WINDOW:
        warnings.append(
            f"training plan {name} leaves {int((facts.end - usable_from).total_seconds() // 60)} minutes of capacity; "
            "a cold first boot of Kimi K3 takes 60-75 minutes (`kimi-k3 hyperpod plans extend`)"
        )
    return warnings


def with_state(facts: TrainingPlanFacts, state: str) -> TrainingPlanFacts:
    """The same facts in another state (rehearsals)."""
    return replace(facts, state=state)


__all__ = [
    "PENDING_STATES",
    "USABLE_STATES",
    "PlanCapacity",
    "TrainingPlanFacts",
    "answered_by",
    "check_training_plan",
    "read_training_plan",
    "rehearsal_facts",
    "stack_training_plan",
    "with_state",
]
