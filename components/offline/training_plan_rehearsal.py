"""The ``--training-plan-*`` flags of ``kimi-k3 plan``: the training plan the offline engine answers with.

The HyperPod counterpart of :mod:`kimi_k3.offline.rehearsal` (the ``--reservation-*`` flags).
A ``hyperpod`` stack reads its Flexible Training Plan with boto3 at program start
(:func:`kimi_k3.hyperpod.training_plan_check.stack_training_plan`); offline, the engine's
stand-in SageMaker client answers ``DescribeTrainingPlan`` with the facts these flags
shape, so ``kimi-k3 plan hyperpod`` rehearses every refusal of the preview-time check
(wrong AZ, wrong instance type, too few instances, a plan that ended, a failed one).
Each flag is checked here; a bad value is one line naming the flag, the value and what is
accepted. The window is placed relative to the run's ``now`` as the rehearsed Capacity
Block's is (``Scheduled``/``Pending``: starts at the next 11:30 UTC at least 12 hours
ahead; ``Active``: started at the last 11:30 UTC; ``Expired``/``Failed``: ended then).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from kimi_k3.core.formats import AVAILABILITY_ZONE
from kimi_k3.errors import UserError
from kimi_k3.hyperpod.training_plan_check import TrainingPlanFacts, rehearsal_facts
from kimi_k3.hyperpod.training_plans import PLAN_INSTANCE_COUNTS
from kimi_k3.offline.rehearsal import RehearsedWindow

STATES = ("Scheduled", "Active", "Pending", "Expired", "Failed")
"""``DescribeTrainingPlan`` states a rehearsed plan can be in (``--training-plan-state``)."""

PLAN_DURATION = timedelta(days=7)
"""Length of a rehearsed plan."""

ENDED_STATES = ("Expired", "Failed")
"""States whose rehearsed plan ended at the last 11:30 UTC before ``now``."""


@dataclass(frozen=True)
class TrainingPlanRehearsal(RehearsedWindow):
    """How the rehearsed training plan looks (the ``--training-plan-*`` flags)."""

    FLAG = "--training-plan"
    WHAT = "plan"
    STATES = STATES
    ENDED_STATES = ENDED_STATES
    RUNNING_STATE = "Active"
    DURATION = PLAN_DURATION

    state: str = "Scheduled"
    """``--training-plan-state``: one of :data:`STATES`."""
    instance_type: str | None = None
    """``--training-plan-type``: the HyperPod instance type reserved (default: the stack's, ``ml.`` + gpuInstanceType)."""

    def check(self, region: str, now: datetime) -> None:
        """Refuse a flag the real plan could not have (a flag-naming :class:`UserError`)."""
        self.refuse_unknown_state()
        az = self.availability_zone
        if az is not None and (not AVAILABILITY_ZONE.fullmatch(az) or az[:-1] != region):
            raise UserError(
                f"--training-plan-az {az!r} is not accepted; expected an availability zone of {region} (the stack's aws:region, "
                f"where its training plan is), e.g. {region}a"
            )
        count = self.instance_count
        if count is not None and count not in PLAN_INSTANCE_COUNTS:
            raise UserError(f"--training-plan-count {count} is not accepted; a training plan reserves {', '.join(map(str, PLAN_INSTANCE_COUNTS))} instances")
        kind = self.instance_type
        if kind is not None and (not kind.startswith("ml.") or kind != kind.strip()):
            raise UserError(f"--training-plan-type {kind!r} is not accepted; expected a HyperPod instance type such as ml.p6-b300.48xlarge")
        self.refuse_unended_start(now)

    def facts(self, *, plan_arn: str, instance_type: str, instance_count: int, availability_zone: str, now: datetime) -> TrainingPlanFacts:
        """The offline answer for the stack's plan; the other arguments are the stack's defaults."""
        return rehearsal_facts(
            plan_arn,
            availability_zone=self.availability_zone or availability_zone,
            instance_type=self.instance_type or instance_type,
            instance_count=self.instance_count or instance_count,
            state=self.state,
            start=self.window_start(now),
            duration=PLAN_DURATION,
        )


__all__ = ["PLAN_DURATION", "STATES", "TrainingPlanRehearsal"]
