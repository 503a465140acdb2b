"""Every member a record reads from an AWS answer exists in botocore's model of that answer.

The records are built by ``api_record`` from their field names (``availability_zone`` →
``AvailabilityZone``) and by a few explicit keys. A misspelt or renamed member would not fail:
``.get`` falls back to an empty default and the CLI would print blanks. Reading each record from a
mapping that knows only the model's members catches that, for every record and every answer it is
built from (botocore's own service models, the ones boto3 sends and parses with).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import botocore.session
import pytest

from kimi_k3.capacity import extensions as capacity_extensions
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.capacity.offerings import Offering
from kimi_k3.hyperpod import training_plans

SESSION = botocore.session.get_session()


def shape(service: str, name: str) -> Any:
    """A structure of ``service``'s model: an operation's output (``Op:Member`` for a list member's entries) or a named shape."""
    model = SESSION.get_service_model(service)
    if ":" in name:
        operation, member = name.split(":")
        found = model.operation_model(operation).output_shape.members[member]
        return found.member if found.type_name == "list" else found
    if name in model.operation_names:
        return model.operation_model(name).output_shape
    return model.shape_for(name)


SAMPLES = {"string": "x", "integer": 1, "long": 1, "float": 1.0, "double": 1.0, "boolean": True,
           "timestamp": datetime(2026, 12, 1, tzinfo=UTC), "list": [], "map": {}, "structure": {}}
MEMBER_SAMPLES = {"InstanceType": "p6-b300.48xlarge"}
"""Members whose record checks the value's shape at construction (CapacityBlockFacts refuses an instance type like 'x')."""


class ModelAnswer(Mapping[str, Any]):
    """An answer entry holding a sample value for every member of the given shapes, recording what is read."""

    def __init__(self, *shapes: Any) -> None:
        self.members = {name: member for s in shapes for name, member in s.members.items()}
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        if key not in self.members:
            raise KeyError(key)
        return MEMBER_SAMPLES.get(key, SAMPLES[self.members[key].type_name])

    def __iter__(self) -> Iterator[str]:
        return iter(self.members)

    def __len__(self) -> int:
        return len(self.members)


CASES = [
    (Offering.from_api, "ec2", ["DescribeCapacityBlockOfferings:CapacityBlockOfferings"]),
    (capacity_extensions.ExtensionOffering.from_api, "ec2", ["DescribeCapacityBlockExtensionOfferings:CapacityBlockExtensionOfferings"]),
    (capacity_extensions.Extension.from_api, "ec2", ["DescribeCapacityBlockExtensionHistory:CapacityBlockExtensions", "PurchaseCapacityBlockExtension:CapacityBlockExtensions"]),
    (CapacityBlockFacts.from_ec2, "ec2", ["DescribeCapacityReservations:CapacityReservations", "PurchaseCapacityBlock:CapacityReservation"]),
    (training_plans.ReservedCapacity.from_api, "sagemaker", ["ReservedCapacityOffering", "ReservedCapacitySummary"]),
    (training_plans.PlanOffering.from_api, "sagemaker", ["SearchTrainingPlanOfferings:TrainingPlanOfferings"]),
    (training_plans.TrainingPlan.from_api, "sagemaker", ["DescribeTrainingPlan", "ListTrainingPlans:TrainingPlanSummaries"]),
    (training_plans.ExtensionOffering.from_api, "sagemaker", ["SearchTrainingPlanOfferings:TrainingPlanExtensionOfferings"]),
    (training_plans.Extension.from_api, "sagemaker", ["DescribeTrainingPlanExtensionHistory:TrainingPlanExtensions", "ExtendTrainingPlan:TrainingPlanExtensions"]),
]


@pytest.mark.parametrize("build,service,shapes", CASES, ids=[c[0].__qualname__ for c in CASES])
def test_a_record_reads_only_members_its_answers_have(build, service, shapes):
    answer = ModelAnswer(*(shape(service, name) for name in shapes))
    build(answer)
    assert answer.read, "the record read nothing"
    assert sorted(answer.read - set(answer.members)) == [], f"not in botocore's {service} {' / '.join(shapes)}"


def test_a_misspelt_member_is_caught():
    """The check itself: a record reading ``AvailabilityZoneName`` from a CapacityBlockOffering fails it."""
    answer = ModelAnswer(shape("ec2", "DescribeCapacityBlockOfferings:CapacityBlockOfferings"))
    answer.get("AvailabilityZoneName")
    assert answer.read - set(answer.members) == {"AvailabilityZoneName"}
