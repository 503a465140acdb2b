"""SageMaker training plan API shapes (as botocore's SageMaker model defines them), shared by the training plan tests.

The builders return what ``search_training_plan_offerings`` / ``describe_training_plan`` answer;
Stubber checks them against the installed botocore model. The times are those of
:mod:`tests.capacity_builders` (the same command-test moment and block start).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.capacity_builders import NOW, START

NAME = "kimi-k3-p6-june"
ARN = f"arn:aws:sagemaker:us-east-1:123456789012:training-plan/{NAME}"
OFF_A = "tpo-0a1b2c3d4e5f67890"
OFF_B = "tpo-0f1e2d3c4b5a69788"
EXT = "tpeo-7f3e2c1b0a9d8e7f6"
SEARCH = {"InstanceType": "ml.p6-b300.48xlarge", "InstanceCount": 2, "DurationHours": 168, "TargetResources": ["hyperpod-cluster"]}
"""The search ``--count 2 --days 7`` sends."""
CREATE = {"TrainingPlanName": NAME, "TrainingPlanOfferingId": OFF_A, "Tags": [{"Key": "Project", "Value": "kimi-k3"}]}
"""The purchase of :data:`OFF_A` as the plan :data:`NAME`."""


def capacity(az: str = "us-east-1a", start: Any = START, count: int = 2, status: str | None = None, summary: bool = False) -> dict[str, Any]:
    """One ``ReservedCapacityOffering`` (or, with ``summary``, a plan's ``ReservedCapacitySummary``)."""
    item = {"InstanceType": "ml.p6-b300.48xlarge", "AvailabilityZone": az, "DurationHours": 168, "StartTime": start, "EndTime": start + timedelta(days=7)}
    if summary:
        item.update({"ReservedCapacityArn": f"arn:aws:sagemaker:us-east-1:123456789012:reserved-capacity/{NAME}-0",
                     "ReservedCapacityType": "Instance", "TotalInstanceCount": count, "Status": status or "Scheduled", "AvailabilityZoneId": "use1-az4"})
    else:
        item.update({"ReservedCapacityType": "Instance", "InstanceCount": count})
    return item


def offering(oid: str, az: str, start: Any, fee: str, targets: tuple[str, ...] = ("hyperpod-cluster",)) -> dict[str, Any]:
    """One ``TrainingPlanOfferings`` entry: 2 instances for 7 days from ``start``."""
    return {"TrainingPlanOfferingId": oid, "TargetResources": list(targets), "RequestedStartTimeAfter": NOW, "DurationHours": 168,
            "DurationMinutes": 0, "UpfrontFee": fee, "CurrencyCode": "USD", "ReservedCapacityOfferings": [capacity(az, start)]}


def plan(status: str = "Scheduled", start: Any = START, targets: tuple[str, ...] = ("hyperpod-cluster",), az: str = "us-east-1a") -> dict[str, Any]:
    """A ``DescribeTrainingPlan`` answer for :data:`ARN`."""
    return {"TrainingPlanArn": ARN, "TrainingPlanName": NAME, "Status": status, "DurationHours": 168, "DurationMinutes": 0,
            "StartTime": start, "EndTime": start + timedelta(days=7), "UpfrontFee": "1573056.00", "CurrencyCode": "USD",
            "TotalInstanceCount": 2, "AvailableInstanceCount": 2, "InUseInstanceCount": 0, "UnhealthyInstanceCount": 0,
            "TargetResources": list(targets), "ReservedCapacitySummaries": [capacity(az, start, summary=True, status=status)]}
