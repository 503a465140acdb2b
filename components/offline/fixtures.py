"""What the offline engine answers for the Capacity Block (a reservation) or a hyperpod stack's training plan, placed relative to the run's ``now``."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from kimi_k3.stack import settings as stack_settings
from kimi_k3.stack.config_keys import PROJECT

if TYPE_CHECKING:
    from kimi_k3.hyperpod.training_plan_check import TrainingPlanFacts

ACCOUNT_ID = "123456789012"
"""AWS account id the offline engine answers with (AWS documentation's example account)."""



def next_block_start(now: datetime) -> datetime:
    """The next 11:30 UTC at least a day ahead: when Capacity Blocks start and end."""
    start = (now + timedelta(days=1)).replace(hour=11, minute=30, second=0, microsecond=0)
    return start if start > now + timedelta(hours=12) else start + timedelta(days=1)


@dataclass(frozen=True, kw_only=True)
class ReservationFixture:
    """What ``aws.ec2.get_capacity_block_reservation`` answers offline.

    Vary it in tests to rehearse scheduled / active / expired blocks or another AZ. The
    window is always explicit (``start``): build it relative to the run's ``now``
    (:func:`default_reservation` does), never from the wall clock.
    """

    id: str
    """Reservation id (``cr-`` + 17 hex digits); the look-up of any other id fails as ``InvalidCapacityReservationId.NotFound``."""
    availability_zone: str
    """The block's AZ (``us-east-1a``); its AZ id is derived from it (:func:`zone_id`)."""
    start: datetime
    """Start of the block (UTC), placed relative to the run's ``now``."""
    instance_type: str = "p6-b300.48xlarge"
    """Instance type the block reserves."""
    instance_count: int = 1
    """Instances reserved; all of them available while ``scheduled`` or ``active``, none otherwise."""
    state: str = "scheduled"
    """EC2 reservation state answered (``scheduled``, ``active``, ``expired`` …)."""
    duration: timedelta = timedelta(days=7)
    """Length of the block; the end is ``start`` plus this."""

    @property
    def end(self) -> datetime:
        """End of the block (same time of day as the start)."""
        return self.start + self.duration

    def invoke_result(self, region: str) -> dict:
        """The invoke's result in the provider's wire (camelCase) form."""
        fmt = "%Y-%m-%dT%H:%M:%SZ"
        available = self.instance_count if self.state in ("active", "scheduled") else 0
        return {
            "id": self.id,
            "arn": f"arn:aws:ec2:{region}:{ACCOUNT_ID}:capacity-reservation/{self.id}",
            "availabilityZone": self.availability_zone,
            "availabilityZoneId": zone_id(self.availability_zone),
            "availableInstanceCount": available,
            "capacityBlockId": "cb-" + stable_hex(self.id, 17),
            "createdDate": (self.start - timedelta(days=3)).strftime(fmt),
            "ebsOptimized": True,
            "endDate": self.end.strftime(fmt),
            "endDateType": "limited",
            "instanceCount": self.instance_count,
            "instancePlatform": "Linux/UNIX",
            "instanceType": self.instance_type,
            "outpostArn": "",
            "ownerId": ACCOUNT_ID,
            "placementGroupArn": "",
            "region": region,
            "reservationType": "capacity-block",
            "startDate": self.start.strftime(fmt),
            "state": self.state,
            "tags": {"Project": PROJECT},
            "tenancy": "default",
        }


def stable_hex(seed: str, length: int) -> str:
    """``length`` hex digits derived from ``seed`` (stable ids: the same inputs give the same answers)."""
    return hashlib.sha256(seed.encode()).hexdigest()[:length]


_REGION_CODES = {"north": "n", "south": "s", "east": "e", "west": "w", "central": "c", "northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw"}


def zone_id(az: str) -> str:
    """The AZ id AWS pairs with an AZ name (``us-east-1a`` → ``use1-az1``), in AWS's format."""
    region, letter = az[:-1], az[-1]
    geo, direction, number = region.split("-")[0], region.split("-")[1], region.split("-")[-1]
    return f"{geo}{_REGION_CODES.get(direction, direction[0])}{number}-az{ord(letter) - ord('a') + 1}"


def default_reservation(settings: stack_settings.StackSettings, now: datetime) -> ReservationFixture:
    """A plausible reservation for a stack at ``now``: its id and type, first AZ of its region,
    scheduled to start at the next 11:30 UTC at least 12 hours after ``now``."""
    return ReservationFixture(
        id=settings.capacity.reservation_id,
        availability_zone=(settings.network.availability_zones or (f"{settings.region}a",))[0],
        instance_type=settings.capacity.instance_type,
        instance_count=settings.nodes_required,
        state="scheduled",
        start=next_block_start(now),
    )


def training_plan_arn(name_or_arn: str, region: str) -> str:
    """The ARN a training plan reference names in the offline account (a name gets this account's ARN)."""
    if name_or_arn.startswith("arn:"):
        return name_or_arn
    return f"arn:aws:sagemaker:{region}:{ACCOUNT_ID}:training-plan/{name_or_arn}"


def default_training_plan(settings: stack_settings.StackSettings, now: datetime) -> TrainingPlanFacts:
    """A plausible training plan for a ``hyperpod`` stack at ``now``: its ARN and instance type, as many
    instances as the stack needs, in its first AZ (or the region's first), scheduled to start at the next
    11:30 UTC at least 12 hours after ``now`` (like :func:`default_reservation`)."""
    from kimi_k3.hyperpod.training_plan_check import rehearsal_facts  # only hyperpod stacks read a training plan (SageMaker)

    assert settings.hyperpod is not None, "a training plan only backs a hyperpod stack"
    return rehearsal_facts(
        training_plan_arn(settings.hyperpod.training_plan, settings.region),
        availability_zone=(settings.network.availability_zones or (f"{settings.region}a",))[0],
        instance_type=settings.hyperpod.instance_type,
        instance_count=settings.nodes_required,
        start=next_block_start(now),
    )
