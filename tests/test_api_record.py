"""``api_record``: how every Capacity Block and training plan answer entry becomes its record."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from kimi_k3.capacity.reserved import api_record


@dataclass(frozen=True)
class Sample:
    """A record with one field of every kind the readers know."""

    availability_zone: str
    instance_count: int
    upfront_fee: Decimal
    currency: str
    start: datetime
    end: datetime | None
    target_resources: tuple[str, ...]
    status: str = "unknown"


WHEN = datetime(2026, 6, 10, 13, 30, tzinfo=timezone(timedelta(hours=2)))


def test_fields_are_read_by_camel_case_name_and_annotation():
    item = {"AvailabilityZone": "us-east-1a", "InstanceCount": "2", "UpfrontFee": "3418560.00", "CurrencyCode": "USD",
            "StartDate": WHEN, "EndTime": WHEN + timedelta(days=7), "TargetResources": ["hyperpod-cluster"], "Status": "active"}
    record = api_record(Sample, item, {"start": "StartDate", "end": "EndTime"})
    assert record == Sample("us-east-1a", 2, Decimal("3418560.00"), "USD", datetime(2026, 6, 10, 11, 30, tzinfo=UTC),
                            datetime(2026, 6, 17, 11, 30, tzinfo=UTC), ("hyperpod-cluster",), "active")
    assert record.start.tzinfo is UTC


def test_missing_members_fall_back_and_given_values_win():
    record = api_record(Sample, {"Start": WHEN}, instance_count=5)
    assert (record.availability_zone, record.instance_count, record.upfront_fee, record.currency) == ("", 5, Decimal("0"), "")
    assert (record.end, record.target_resources, record.status) == (None, (), "unknown")


def test_a_required_time_must_be_there():
    with pytest.raises(KeyError, match="Start"):
        api_record(Sample, {})


def test_a_field_of_an_unknown_kind_needs_its_value():
    @dataclass(frozen=True)
    class Odd:
        """A record with a field no reader knows."""

        ratio: float

    with pytest.raises(TypeError, match=r"Odd.ratio: no API reader"):
        api_record(Odd, {"Ratio": 0.5})
    assert api_record(Odd, {}, ratio=0.5) == Odd(0.5)
