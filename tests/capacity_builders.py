"""EC2 Capacity Block API shapes (as botocore's EC2 model defines them), shared by the capacity tests.

The ``api_*`` builders return what ``describe_*`` / ``purchase_*`` answer; Stubber checks
them against the installed botocore model. Test modules import from here, never from
each other.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

UTC = UTC
NOW = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
"""The moment of the capacity command tests (offerings, purchase, status, preflight)."""
REGION = "us-east-1"
RID = "cr-0a1b2c3d4e5f60718"
BLOCK_ID = "cb-0f9e8d7c6b5a40312"
OFF_A = "cb-0a1b2c3d4e5f67890"
OFF_B = "cb-0f1e2d3c4b5a69788"
OFF_C = "cb-0123456789abcdef0"
START = datetime(2026, 6, 10, 11, 30, tzinfo=UTC)
"""Start of the default block: 9 days, 3 hours and 30 minutes after :data:`NOW`."""

EXT_NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
"""The moment of the extension tests: inside the default extension window of :data:`EXT_END`."""
EXT_START = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
EXT_END = datetime(2026, 12, 8, 11, 30, tzinfo=UTC)
OFFER = "cbe-0123456789abcdef0"
"""An extension offering id."""

SEARCH = {"InstanceType": "p6-b300.48xlarge", "InstanceCount": 2, "CapacityDurationHours": 168}
"""The offering search ``--count 2 --days 7`` sends."""
PURCHASE = {
    "CapacityBlockOfferingId": OFF_A,
    "InstancePlatform": "Linux/UNIX",
    "TagSpecifications": [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "Project", "Value": "kimi-k3"}]}],
}
"""The purchase of :data:`OFF_A`."""


def api_offering(oid: str, az: str, start: datetime, fee: str, *, days: int = 7, count: int = 2) -> dict[str, Any]:
    """One ``CapacityBlockOfferings`` entry for p6-b300."""
    return {
        "CapacityBlockOfferingId": oid,
        "InstanceType": "p6-b300.48xlarge",
        "AvailabilityZone": az,
        "InstanceCount": count,
        "StartDate": start,
        "EndDate": start + timedelta(days=days),
        "CapacityBlockDurationHours": days * 24,
        "UpfrontFee": fee,
        "CurrencyCode": "USD",
        "Tenancy": "default",
    }


def api_reservation(
    rid: str = RID,
    *,
    state: str = "scheduled",
    itype: str = "p6-b300.48xlarge",
    az: str = "us-east-1a",
    total: int = 2,
    available: int = 2,
    start: datetime = START,
    days: int = 7,
    rtype: str = "capacity-block",
    platform: str = "Linux/UNIX",
    block: str | None = BLOCK_ID,
) -> dict[str, Any]:
    """One ``CapacityReservations`` entry (or a purchase's ``CapacityReservation``)."""
    item: dict[str, Any] = {
        "CapacityReservationId": rid,
        "OwnerId": "123456789012",
        "CapacityReservationArn": f"arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{rid}",
        "AvailabilityZoneId": "use1-az4",
        "InstanceType": itype,
        "InstancePlatform": platform,
        "AvailabilityZone": az,
        "Tenancy": "default",
        "TotalInstanceCount": total,
        "AvailableInstanceCount": available,
        "EbsOptimized": True,
        "EphemeralStorage": False,
        "State": state,
        "StartDate": start,
        "EndDate": start + timedelta(days=days),
        "EndDateType": "limited",
        "InstanceMatchCriteria": "targeted",
        "CreateDate": datetime(2026, 5, 28, 9, 12, tzinfo=UTC),
        "Tags": [{"Key": "Project", "Value": "kimi-k3"}],
        "ReservationType": rtype,
    }
    if block:
        item["CapacityBlockId"] = block
    return item


def api_extension_offering(oid: str = OFFER, days: int = 7, fee: str = "1572480.00") -> dict[str, Any]:
    """One ``CapacityBlockExtensionOfferings`` entry extending the block that ends at :data:`EXT_END`."""
    return {
        "CapacityBlockExtensionOfferingId": oid, "InstanceType": "p6-b300.48xlarge", "InstanceCount": 2,
        "AvailabilityZone": "us-east-1a", "AvailabilityZoneId": "use1-az4", "StartDate": EXT_START,
        "CapacityBlockExtensionStartDate": EXT_END, "CapacityBlockExtensionEndDate": EXT_END + timedelta(days=days),
        "CapacityBlockExtensionDurationHours": days * 24, "UpfrontFee": fee, "CurrencyCode": "USD", "Tenancy": "default",
    }


def api_extension(
    status: str = "payment-pending", purchased: datetime = EXT_NOW - timedelta(hours=2), days: int = 7, oid: str = OFFER
) -> dict[str, Any]:
    """One ``CapacityBlockExtensions`` entry (a purchase or the history) of the block ending at :data:`EXT_END`."""
    return {
        "CapacityReservationId": RID, "InstanceType": "p6-b300.48xlarge", "InstanceCount": 2,
        "AvailabilityZone": "us-east-1a", "AvailabilityZoneId": "use1-az4", "CapacityBlockExtensionOfferingId": oid,
        "CapacityBlockExtensionDurationHours": days * 24, "CapacityBlockExtensionStatus": status,
        "CapacityBlockExtensionPurchaseDate": purchased, "CapacityBlockExtensionStartDate": EXT_END,
        "CapacityBlockExtensionEndDate": EXT_END + timedelta(days=days), "UpfrontFee": "1572480.00", "CurrencyCode": "USD",
    }
