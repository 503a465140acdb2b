"""``kimi-k3 capacity preflight``: the go/no-go list for a stack's Capacity Block before it starts.

The list is the assessment ``pulumi up`` applies (:func:`kimi_k3.capacity.assessment.assess`,
in the stack's config keys) plus what only boto3 can read: free instances of an active block,
the block's interconnect and instance health (``DescribeCapacityBlockStatus``) and the EC2
On-Demand vCPU quota (Service Quotas), which is only ever a warning since the AWS documentation
does not say whether Capacity Block instances count against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kimi_k3.capacity.assessment import ARGS_TERMS, FAIL, OK, WARN, BlockNeeds, Finding, Terms, assess
from kimi_k3.capacity.aws import translate_aws_error
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.capacity.status import BlockStatus, block_statuses
from kimi_k3.core.formats import CAPACITY_RESERVATION_ID

CROSS_REGION_USD_PER_GB = 0.02
"""S3 data transfer to another AWS region, USD per GB (Amazon S3 pricing, "Data Transfer OUT to other AWS Regions",
the US regions' rate; an estimate, 2026-12): what a node pays to sync the weights from a bucket in another region."""

VCPU_QUOTAS: Mapping[str, tuple[str, str]] = {
    "p": ("L-417A185B", "Running On-Demand P instances"),
}
"""Instance family letter -> (EC2 service-quota code, quota name) for vCPU quotas."""


@dataclass(frozen=True)
class QuotaReading:
    """An EC2 vCPU quota value, or why it could not be read."""

    code: str | None
    """Service Quotas code (``L-417A185B``); None when no quota is known for the instance family."""
    name: str | None
    """Quota name (``Running On-Demand P instances``); None when no quota is known for the instance family."""
    value: float | None
    """The quota in vCPUs (``Quota.Value`` of ``GetServiceQuota``); None when it could not be read."""
    error: str | None = None
    """Why the quota could not be read (one line); None when it was."""


def read_vcpu_quota(quotas: Any, instance_type: str) -> QuotaReading:
    """Read the On-Demand vCPU quota that covers ``instance_type``'s family; never raises for AWS errors."""
    from botocore.exceptions import BotoCoreError, ClientError

    family = instance_type[:1]
    if family not in VCPU_QUOTAS:
        return QuotaReading(None, None, None, f"no vCPU quota code known for the {instance_type} family")
    code, name = VCPU_QUOTAS[family]
    try:
        value = quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]
    except (BotoCoreError, ClientError) as exc:
        return QuotaReading(code, name, None, str(translate_aws_error(exc)))
    return QuotaReading(code, name, float(value))


@dataclass(frozen=True)
class PreflightReport:
    """The go/no-go list for a stack's Capacity Block."""

    reservation_id: str
    """The stack's ``kimi-k3:capacityReservationId`` as checked; empty when the stack sets none."""
    checks: tuple[Finding, ...]
    """The go/no-go lines in order; any FAIL means no-go, WARN lines do not block."""

    @property
    def go(self) -> bool:
        """True when no check failed (warnings do not block)."""
        return all(c.level != FAIL for c in self.checks)

    def count(self, level: str) -> int:
        """How many checks have ``level``."""
        return sum(1 for c in self.checks if c.level == level)


def evaluate_preflight(
    reservation: CapacityBlockFacts,
    *,
    instance_type: str,
    region: str,
    nodes_required: int,
    now: datetime,
    quota: QuotaReading | None = None,
    vcpus_per_node: int | None = None,
    block: BlockStatus | None = None,
    availability_zones: tuple[str, ...] | None = None,
    terms: Terms = ARGS_TERMS,
) -> tuple[Finding, ...]:
    """The assessment `pulumi up` applies (:func:`kimi_k3.capacity.assessment.assess`), plus what only
    boto3 can read: free instances, block health, the vCPU quota (pure, no AWS calls)."""
    r = reservation
    needs = BlockNeeds(instance_type=instance_type, nodes_required=nodes_required, availability_zones=availability_zones, region=region)
    checks = list(assess(r, needs, now, terms))
    add = lambda level, name, msg: checks.append(Finding(level, name, msg))  # noqa: E731

    if r.state == "active" and r.available_instances < nodes_required:
        add(WARN, "free instances", f"{r.available_instances} of {r.instance_count} instances are free now ({r.in_use} in use); nodes already in the node group count as in use.")
    az = f"{r.availability_zone} ({r.availability_zone_id})" if r.availability_zone_id else r.availability_zone
    add(OK, "node group subnets", f"the node group must use subnets in {az} only (a subnet in another AZ fails with a misleading 'instance types do not exist' error).")

    if block is not None:
        if block.interconnect_status == "impaired":
            add(WARN, "interconnect", f"AWS reports the accelerator interconnect of {block.capacity_block_id} as impaired.")
        if block.unavailable > 0:
            add(WARN, "capacity health", f"{block.unavailable} of {block.total} instances of {block.capacity_block_id} are unavailable after a status check failure.")

    checks.append(_quota_check(quota, nodes_required, vcpus_per_node))
    return tuple(checks)


_QUOTA_CAVEAT = "the AWS documentation we searched does not say whether Capacity Block instances count against it"


def _quota_check(quota: QuotaReading | None, nodes: int, vcpus: int | None) -> Finding:
    """The vCPU quota line; only a WARN at worst, since its relevance to blocks is unconfirmed."""
    if quota is None or quota.value is None:
        why = quota.error if quota is not None else "not read"
        return Finding(WARN, "vCPU quota", f"could not read the On-Demand vCPU quota ({why}); check it in the Service Quotas console.")
    label = f"{quota.code} ({quota.name})"
    if vcpus is None:
        return Finding(WARN, "vCPU quota", f"{label} is {quota.value:g} vCPUs but the instance type's vCPU count is unknown, so it was not compared.")
    need = nodes * vcpus
    if quota.value >= need:
        return Finding(OK, "vCPU quota", f"{label} is {quota.value:g} vCPUs, enough for {nodes} x {vcpus} = {need} ({_QUOTA_CAVEAT}).")
    return Finding(WARN, "vCPU quota", f"{label} is {quota.value:g} vCPUs, below {nodes} x {vcpus} = {need}; {_QUOTA_CAVEAT}, so request an increase if launches fail with VcpuLimitExceeded.")


def bucket_region(location_constraint: str | None) -> str:
    """The region of a bucket from ``GetBucketLocation``'s ``LocationConstraint`` (S3 API reference: empty for
    us-east-1; the legacy ``EU`` for eu-west-1)."""
    if not location_constraint:
        return "us-east-1"
    return "eu-west-1" if location_constraint == "EU" else location_constraint


def weights_bucket_check(bucket: str, bucket_at: str | None, region: str, weights_gb: float, nodes: int, error: str | None = None) -> Finding:
    """The weights bucket's region against the stack's: a WARN with the transfer's cost when they differ (pure)."""
    if bucket_at is None:
        return Finding(WARN, "weights bucket", f"could not read the region of s3://{bucket} ({error or 'not read'}); the sync is slower and billed when it is not {region}.")
    if bucket_at == region:
        return Finding(OK, "weights bucket", f"s3://{bucket} is in {region}, the stack's region: no cross-region transfer.")
    cost = weights_gb * nodes * CROSS_REGION_USD_PER_GB
    return Finding(
        WARN, "weights bucket",
        f"s3://{bucket} is in {bucket_at}, not the stack's {region}: every node sync pulls {weights_gb:,.0f} GB across regions, "
        f"about ${cost:,.0f} per start of {nodes} node{'s' if nodes != 1 else ''} at ${CROSS_REGION_USD_PER_GB}/GB (S3 pricing, estimate), and slower; "
        f"stage the weights in a bucket in {region} (kimi-k3 weights stage)",
    )


def read_bucket_region(s3: Any, bucket: str) -> tuple[str | None, str | None]:
    """``(region, None)`` of ``bucket`` from ``GetBucketLocation``, or ``(None, why)`` when it cannot be read."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        answer = s3.get_bucket_location(Bucket=bucket)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        return None, f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
    except BotoCoreError as exc:
        return None, str(exc)
    return bucket_region(answer.get("LocationConstraint")), None


def run_preflight(
    ec2: Any,
    quotas: Any,
    *,
    reservation_id: str,
    instance_type: str,
    region: str,
    nodes_required: int,
    now: datetime,
    vcpus_per_node: int | None = None,
    availability_zones: tuple[str, ...] | None = None,
    terms: Terms = ARGS_TERMS,
    s3: Any = None,
    weights_bucket: str | None = None,
    weights_gb: float = 0.0,
) -> PreflightReport:
    """Read the reservation, its block status and the vCPU quota, and evaluate the go/no-go list.

    With ``s3`` and ``weights_bucket`` (an S3-sourced stack) it also reads the bucket's region: a bucket in
    another region is a WARN with the transfer's cost (``weights_gb`` per node).

    A missing or malformed reservation id is a FAIL line, not an exception; other
    AWS errors (credentials, permissions, network) raise UserError. ``terms`` name what the caller's user set
    (the stack's config keys for ``kimi-k3 capacity preflight``).
    """
    from botocore.exceptions import BotoCoreError, ClientError

    if not reservation_id:
        return PreflightReport("", (Finding(FAIL, "reservation", f"the stack sets no {terms.reservation}."),))
    if not CAPACITY_RESERVATION_ID.match(reservation_id):
        return PreflightReport(reservation_id, (Finding(FAIL, "reservation", f"{reservation_id!r} is not a reservation id (cr- followed by 17 hex digits)."),))
    try:
        items = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])["CapacityReservations"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "InvalidCapacityReservationId.NotFound":
            raise translate_aws_error(exc, region) from None
        items = []
    except BotoCoreError as exc:  # credentials, region, endpoint
        raise translate_aws_error(exc, region) from None
    if not items:
        return PreflightReport(reservation_id, (Finding(FAIL, "reservation", f"{reservation_id} does not exist in {region} for this account."),))
    reservation = CapacityBlockFacts.from_ec2(items[0])
    block = None
    if reservation.capacity_block_id:
        block = block_statuses(ec2, [reservation.capacity_block_id]).get(reservation.capacity_block_id)
    checks = evaluate_preflight(
        reservation,
        instance_type=instance_type,
        region=region,
        nodes_required=nodes_required,
        now=now,
        quota=read_vcpu_quota(quotas, instance_type),
        vcpus_per_node=vcpus_per_node,
        block=block,
        availability_zones=availability_zones,
        terms=terms,
    )
    if s3 is not None and weights_bucket:
        bucket_at, why = read_bucket_region(s3, weights_bucket)
        checks = (*checks, weights_bucket_check(weights_bucket, bucket_at, region, weights_gb, nodes_required, why))
    return PreflightReport(reservation_id, checks)


__all__ = [
    "CROSS_REGION_USD_PER_GB",
    "VCPU_QUOTAS",
    "PreflightReport",
    "QuotaReading",
    "bucket_region",
    "evaluate_preflight",
    "read_bucket_region",
    "read_vcpu_quota",
    "run_preflight",
    "weights_bucket_check",
]
