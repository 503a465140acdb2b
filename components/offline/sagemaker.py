"""The SageMaker client the offline engine hands a program that reads its training plan with boto3.

A ``hyperpod`` stack calls ``DescribeTrainingPlan`` once at program start
(:func:`kimi_k3.hyperpod.training_plan_check.stack_training_plan`). Offline nothing reaches AWS:
:class:`OfflineSageMaker` answers that one call with the run's training plan, in the
response shape of botocore's SageMaker model
(:meth:`~kimi_k3.hyperpod.training_plan_check.TrainingPlanFacts.describe_response`, checked
against the model with ``botocore.stub.Stubber`` in the tests), and a plan it does not
know with the error AWS gives (``ResourceNotFound``), so the program's own error
translation runs as it would against AWS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kimi_k3.hyperpod.training_plan_check import TrainingPlanFacts


@dataclass
class TrainingPlanAnswers:
    """The training plans one offline run knows: a fixed one, or one made for whatever ARN or name is asked."""

    plan: TrainingPlanFacts | None = None
    """The run's plan (answers its ARN and its name)."""
    plan_for: Callable[[str], TrainingPlanFacts] | None = None
    """Makes the plan for any reference asked (someone's own program, whose plan is not known beforehand)."""
    read: dict[str, TrainingPlanFacts] = field(default_factory=dict)
    """Plans asked for so far, by ARN."""

    def describe(self, ref: str) -> TrainingPlanFacts | None:
        """The plan ``ref`` (ARN or name) names, or ``None``."""
        if self.plan_for is not None and (self.plan is None or ref not in (self.plan.arn, self.plan.name)):
            self.plan = self.plan_for(ref)
        if self.plan is None or ref not in (self.plan.arn, self.plan.name):
            return None
        self.read[self.plan.arn] = self.plan
        return self.plan


class _Meta:
    def __init__(self, region: str) -> None:
        self.region_name = region


class OfflineSageMaker:
    """A stand-in for ``boto3.client("sagemaker")`` that answers ``describe_training_plan`` only."""

    def __init__(self, answers: TrainingPlanAnswers, region: str) -> None:
        """Answer from the run's ``answers``, as a client of ``region`` (its ``meta.region_name``)."""
        self.answers = answers
        self.meta = _Meta(region)

    def describe_training_plan(self, *, TrainingPlanName: str) -> dict[str, Any]:  # noqa: N803 - boto3's parameter name
        """``DescribeTrainingPlan``: the plan's description, or botocore's ``ResourceNotFound`` error."""
        facts = self.answers.describe(TrainingPlanName)
        if facts is None:
            from botocore.exceptions import ClientError

            raise ClientError(
                {"Error": {"Code": "ResourceNotFound", "Message": f"Training plan {TrainingPlanName} not found."}}, "DescribeTrainingPlan"
            )
        return facts.describe_response()


__all__ = ["OfflineSageMaker", "TrainingPlanAnswers"]
