"""EC2 Capacity Block operations with boto3: find, buy, inspect, preflight.

Pure logic for the ``kimi-k3 capacity`` commands. Every function takes the boto3
client(s) it needs and, where time matters, a timezone-aware ``now``; results are
small frozen dataclasses and nothing here prints. AWS failures (no credentials,
access denied, unknown ids, unreachable endpoints) become one-line
:class:`components.errors.UserError` messages via :func:`aws_errors`.

Capacity Block facts this relies on (see ``/work/shared/DESIGN.md``): a block is a
targeted Capacity Reservation (``cr-`` + 17 hex) of ReservationType
``capacity-block`` in one AZ, bought from an offering (``cb-`` + 17 hex) that
starts at most 8 weeks ahead, lasts 1-14 days in 1-day steps or up to 182 days in
7-day steps, and holds 1-64 instances. A purchase cannot be undone.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from typing import Any, Iterator, Mapping, Sequence

from components import stack_terms
from components.capacity.assessment import FAIL, INSTANCE_PLATFORM, OK, WARN, BlockNeeds, Finding, Terms, assess
from components.capacity.facts import CapacityBlockFacts
from components.errors import UserError
from components.formats import CAPACITY_BLOCK_OFFERING_ID, CAPACITY_RESERVATION_ID, REGION

PROJECT_TAG = {"Key": "Project", "Value": "kimi-k3"}
"""Tag put on every Capacity Block reservation bought through this tool."""

MAX_START_AHEAD = timedelta(weeks=8)
"""Capacity Blocks can start at most this far ahead."""

MAX_INSTANCES = 64
"""Instances per Capacity Block."""

VCPU_QUOTAS: Mapping[str, tuple[str, str]] = {
    "p": ("L-417A185B", "Running On-Demand P instances"),
}
"""Instance family letter -> (EC2 service-quota code, quota name) for vCPU quotas."""

_DENIED = {
    "UnauthorizedOperation",
    "AccessDenied",
    "AccessDeniedException",
    "UnauthorizedAccess",
}
_BAD_CREDENTIALS = {
    "AuthFailure",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "ExpiredTokenException",
    "RequestExpired",
    "UnrecognizedClientException",
}

# --------------------------------------------------------------------------- errors


def _one_line(text: str, limit: int = 200) -> str:
    """Collapse whitespace and cut long AWS messages (encoded auth blobs) to one short line."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def translate_aws_error(exc: BaseException, region: str | None = None) -> UserError:
    """Turn a botocore exception into a one-line :class:`UserError` an operator can act on."""
    from botocore import exceptions as bex

    where = f" in {region}" if region else ""
    if isinstance(exc, (bex.NoCredentialsError, bex.PartialCredentialsError)):
        return UserError(
            "no AWS credentials found: set AWS_PROFILE (after `aws sso login`) "
            "or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, then retry"
        )
    if isinstance(exc, bex.NoRegionError):
        return UserError("no AWS region configured: pass --region or set AWS_REGION")
    if isinstance(exc, bex.InvalidRegionError):
        return UserError(f"{_one_line(str(exc))}: pass a region such as us-east-1")
    if isinstance(exc, (bex.EndpointConnectionError, bex.ConnectTimeoutError, bex.ReadTimeoutError)):
        return UserError(f"cannot reach AWS{where}: {_one_line(str(exc))}; check the region and the network")
    if isinstance(exc, bex.ClientError):
        err = exc.response.get("Error", {})
        code = err.get("Code", "Unknown")
        message = _one_line(err.get("Message", ""))
        op = getattr(exc, "operation_name", "") or "the request"
        if code in _DENIED:
            service = "servicequotas" if code == "AccessDeniedException" else "ec2"
            return UserError(
                f"AWS denied {service}:{op}{where} ({code}): grant that action to your IAM identity"
            )
        if code in _BAD_CREDENTIALS:
            return UserError(f"AWS rejected the credentials ({code}): {message}; refresh them and retry")
        if code == "InvalidCapacityReservationId.NotFound":
            return UserError(
                f"capacity reservation not found{where} ({message}): check the id, the region and the account"
            )
        if code == "InvalidCapacityReservationId.Malformed":
            return UserError(f"malformed capacity reservation id ({message}): expected cr- followed by 17 hex digits")
        return UserError(f"AWS error {code} from {op}{where}: {message}")
    return UserError(f"AWS call failed{where}: {_one_line(str(exc))}")


@contextlib.contextmanager
def aws_errors(region: str | None = None) -> Iterator[None]:
    """Context manager: re-raise any botocore error as a one-line :class:`UserError`."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except (BotoCoreError, ClientError) as exc:
        raise translate_aws_error(exc, region) from None


# --------------------------------------------------------------------------- clients


@dataclass(frozen=True)
class Clients:
    """The boto3 clients the capacity commands use, for one region."""

    ec2: Any
    quotas: Any

    @property
    def region(self) -> str:
        """Region the EC2 client talks to."""
        return self.ec2.meta.region_name


def make_clients(region: str | None) -> Clients:
    """Create the EC2 and Service Quotas clients (the one place that does; tests replace it)."""
    if region is not None:
        validate_region(region)
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"max_attempts": 4, "mode": "standard"},
        connect_timeout=10,
        read_timeout=60,
        user_agent_extra="kimi-k3-aws",
    )
    with aws_errors(region):
        session = boto3.session.Session(region_name=region)
        return Clients(
            ec2=session.client("ec2", config=config),
            quotas=session.client("service-quotas", config=config),
        )


# --------------------------------------------------------------------------- validation


def validate_region(region: str) -> str:
    """Return ``region`` if it looks like an AWS region name, else raise UserError."""
    if not REGION.match(region or ""):
        raise UserError(f"--region {region!r} is not an AWS region name such as us-east-1")
    return region


def validate_reservation_id(value: str) -> str:
    """Return ``value`` if it is a Capacity Reservation id (``cr-`` + 17 hex), else raise UserError."""
    if not CAPACITY_RESERVATION_ID.match(value or ""):
        raise UserError(f"{value!r} is not a capacity reservation id: expected cr- followed by 17 hex digits")
    return value


def validate_offering_id(value: str) -> str:
    """Return ``value`` if it is a Capacity Block offering id (``cb-`` + 17 hex), else raise UserError."""
    if not CAPACITY_BLOCK_OFFERING_ID.match(value or ""):
        raise UserError(f"{value!r} is not a Capacity Block offering id: expected cb- followed by 17 hex digits")
    return value


def valid_duration_days() -> tuple[int, ...]:
    """Durations AWS accepts, in days: 1..14, then multiples of 7 up to 182."""
    return tuple(range(1, 15)) + tuple(range(21, 183, 7))


def _utc(value: datetime) -> datetime:
    """Make a datetime timezone-aware in UTC (naive values are taken as UTC)."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def parse_when(text: str, flag: str) -> datetime:
    """Parse an ISO 8601 date or date-time (naive = UTC) given for ``flag``."""
    try:
        return _utc(datetime.fromisoformat(text))
    except ValueError:
        raise UserError(f"{flag} {text!r} is not an ISO 8601 date or time such as 2026-06-10 or 2026-06-10T11:30Z") from None


@dataclass(frozen=True)
class OfferingQuery:
    """A validated search for Capacity Block offerings."""

    instance_type: str
    count: int
    days: int
    start_after: datetime | None = None
    start_before: datetime | None = None

    @property
    def duration_hours(self) -> int:
        """The duration as ``CapacityDurationHours``."""
        return self.days * 24

    def request(self) -> dict[str, Any]:
        """Parameters for ``describe_capacity_block_offerings``.

        AWS filters on the earliest start and the latest *end*; a ``start_before``
        bound is sent as an end bound one day past start_before + duration (blocks
        may run slightly longer than asked) and enforced exactly by :func:`find_offerings`.
        """
        params: dict[str, Any] = {
            "InstanceType": self.instance_type,
            "InstanceCount": self.count,
            "CapacityDurationHours": self.duration_hours,
        }
        if self.start_after is not None:
            params["StartDateRange"] = self.start_after
        if self.start_before is not None:
            params["EndDateRange"] = self.start_before + timedelta(days=self.days + 1)
        return params


def build_offering_query(
    instance_type: str,
    count: int,
    days: int,
    now: datetime,
    start_after: datetime | None = None,
    start_before: datetime | None = None,
) -> OfferingQuery:
    """Validate a search (duration, count, start window within 8 weeks) before calling AWS."""
    if not re.match(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$", instance_type or ""):
        raise UserError(f"--instance-type {instance_type!r} is not an EC2 instance type such as p6-b300.48xlarge")
    if days not in valid_duration_days():
        raise UserError(f"--days {days} is not accepted; Capacity Blocks last 1-14 days, or 21-182 days in multiples of 7")
    if not 1 <= count <= MAX_INSTANCES:
        raise UserError(f"--count {count} is not accepted; a Capacity Block holds 1 to {MAX_INSTANCES} instances")
    now = _utc(now)
    latest = now + MAX_START_AHEAD
    if start_after is not None:
        start_after = _utc(start_after)
        if start_after < now:
            raise UserError(f"--start-after {start_after:%Y-%m-%d %H:%M} UTC is in the past; omit it to search from now")
        if start_after > latest:
            raise UserError(f"--start-after must be within 8 weeks (before {latest:%Y-%m-%d %H:%M} UTC)")
    if start_before is not None:
        start_before = _utc(start_before)
        if start_before <= now:
            raise UserError(f"--start-before {start_before:%Y-%m-%d %H:%M} UTC is not in the future")
        if start_before > latest:
            raise UserError(f"--start-before must be within 8 weeks (before {latest:%Y-%m-%d %H:%M} UTC)")
    if start_after is not None and start_before is not None and start_before <= start_after:
        raise UserError("--start-before must be later than --start-after")
    return OfferingQuery(instance_type, count, days, start_after, start_before)


# --------------------------------------------------------------------------- offerings


@dataclass(frozen=True)
class Offering:
    """One Capacity Block offering that can be bought."""

    offering_id: str
    instance_type: str
    availability_zone: str
    instance_count: int
    start: datetime
    end: datetime
    duration_hours: int
    upfront_fee: Decimal
    currency: str

    @classmethod
    def from_api(cls, item: Mapping[str, Any]) -> "Offering":
        """Build from one ``CapacityBlockOfferings`` entry."""
        try:
            fee = Decimal(item.get("UpfrontFee", "0"))
        except InvalidOperation:
            fee = Decimal("NaN")
        return cls(
            offering_id=item["CapacityBlockOfferingId"],
            instance_type=item.get("InstanceType", ""),
            availability_zone=item.get("AvailabilityZone", ""),
            instance_count=int(item.get("InstanceCount", 0)),
            start=_utc(item["StartDate"]),
            end=_utc(item["EndDate"]),
            duration_hours=int(item.get("CapacityBlockDurationHours", 0)),
            upfront_fee=fee,
            currency=item.get("CurrencyCode", ""),
        )


def find_offerings(ec2: Any, query: OfferingQuery) -> tuple[Offering, ...]:
    """All offerings matching ``query`` (every page), cheapest first, then earliest start."""
    found: list[Offering] = []
    with aws_errors(ec2.meta.region_name):
        for page in ec2.get_paginator("describe_capacity_block_offerings").paginate(**query.request()):
            found.extend(Offering.from_api(o) for o in page.get("CapacityBlockOfferings", []))
    if query.start_before is not None:
        found = [o for o in found if o.start <= query.start_before]
    if query.start_after is not None:
        found = [o for o in found if o.start >= query.start_after]
    return tuple(sorted(found, key=lambda o: (o.upfront_fee, o.start, o.offering_id)))


def find_offering(ec2: Any, query: OfferingQuery, offering_id: str) -> Offering:
    """The offering ``offering_id`` among those ``query`` returns, or UserError if it is gone."""
    validate_offering_id(offering_id)
    for offering in find_offerings(ec2, query):
        if offering.offering_id == offering_id:
            return offering
    raise UserError(
        f"offering {offering_id} is not among the current offerings for {query.count} x "
        f"{query.instance_type}, {query.days} days in {ec2.meta.region_name}: offerings go first come, "
        "first served; run `kimi-k3 capacity offerings` with the same flags again"
    )


# --------------------------------------------------------------------------- reservations


Reservation = CapacityBlockFacts
"""A Capacity Reservation as the capacity commands read it: the one record (:mod:`components.capacity.facts`)."""


@dataclass(frozen=True)
class BlockStatus:
    """Health of a Capacity Block from ``describe_capacity_block_status``."""

    capacity_block_id: str
    interconnect_status: str
    total: int
    available: int
    unavailable: int


@dataclass(frozen=True)
class ReservationView:
    """A reservation plus its block status when AWS exposes one."""

    reservation: Reservation
    block: BlockStatus | None = None


def purchase_block(ec2: Any, offering_id: str) -> Reservation:
    """Buy the offering (irreversible), tagging the reservation Project=kimi-k3."""
    validate_offering_id(offering_id)
    with aws_errors(ec2.meta.region_name):
        response = ec2.purchase_capacity_block(
            CapacityBlockOfferingId=offering_id,
            InstancePlatform=INSTANCE_PLATFORM,
            TagSpecifications=[{"ResourceType": "capacity-reservation", "Tags": [dict(PROJECT_TAG)]}],
        )
    return CapacityBlockFacts.from_ec2(response["CapacityReservation"])


def describe_reservation(ec2: Any, reservation_id: str) -> Reservation:
    """One reservation by id; UserError when it does not exist in this region."""
    validate_reservation_id(reservation_id)
    region = ec2.meta.region_name
    with aws_errors(region):
        items = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])["CapacityReservations"]
    if not items:
        raise UserError(f"capacity reservation {reservation_id} not found in {region}: check the id, the region and the account")
    return CapacityBlockFacts.from_ec2(items[0])


def list_capacity_blocks(ec2: Any) -> tuple[Reservation, ...]:
    """Every Capacity Block reservation of the account in the client's region, by start date.

    DescribeCapacityReservations documents no reservation-type filter, so all
    reservations are read (every page) and those of type ``capacity-block`` kept.
    """
    found: list[Reservation] = []
    with aws_errors(ec2.meta.region_name):
        for page in ec2.get_paginator("describe_capacity_reservations").paginate():
            found.extend(
                CapacityBlockFacts.from_ec2(r)
                for r in page.get("CapacityReservations", [])
                if r.get("ReservationType") == "capacity-block"
            )
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    return tuple(sorted(found, key=lambda r: (r.start or epoch, r.reservation_id)))


def supports_block_status(ec2: Any) -> bool:
    """Whether the installed botocore model has DescribeCapacityBlockStatus."""
    return "DescribeCapacityBlockStatus" in ec2.meta.service_model.operation_names


def block_statuses(ec2: Any, block_ids: Sequence[str]) -> dict[str, BlockStatus]:
    """Block health by Capacity Block id, or ``{}`` when the call is unavailable.

    This is an optional enrichment: if the botocore model lacks the operation, or
    AWS refuses it (permissions, block too old), the status is simply left out.
    """
    from botocore.exceptions import ClientError

    ids = sorted({b for b in block_ids if b})
    if not ids or not supports_block_status(ec2):
        return {}
    result: dict[str, BlockStatus] = {}
    try:
        for page in ec2.get_paginator("describe_capacity_block_status").paginate(CapacityBlockIds=ids):
            for s in page.get("CapacityBlockStatuses", []):
                result[s["CapacityBlockId"]] = BlockStatus(
                    capacity_block_id=s["CapacityBlockId"],
                    interconnect_status=s.get("InterconnectStatus", "unknown"),
                    total=int(s.get("TotalCapacity", 0)),
                    available=int(s.get("TotalAvailableCapacity", 0)),
                    unavailable=int(s.get("TotalUnavailableCapacity", 0)),
                )
    except ClientError:
        return {}
    return result


def reservation_status(ec2: Any, reservation_id: str | None = None) -> tuple[ReservationView, ...]:
    """Status of one reservation, or of all Capacity Block reservations in the region."""
    if reservation_id is not None:
        reservations: tuple[Reservation, ...] = (describe_reservation(ec2, reservation_id),)
    else:
        reservations = list_capacity_blocks(ec2)
    blocks = block_statuses(ec2, [r.capacity_block_id for r in reservations if r.capacity_block_id])
    return tuple(ReservationView(r, blocks.get(r.capacity_block_id or "")) for r in reservations)


# --------------------------------------------------------------------------- quotas


@dataclass(frozen=True)
class QuotaReading:
    """An EC2 vCPU quota value, or why it could not be read."""

    code: str | None
    name: str | None
    value: float | None
    error: str | None = None


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


# --------------------------------------------------------------------------- preflight

Check = Finding
"""One preflight line (level, code, message): a finding of the assessment, or one only boto3 can read."""


@dataclass(frozen=True)
class PreflightReport:
    """The go/no-go list for a stack's Capacity Block."""

    reservation_id: str
    checks: tuple[Finding, ...]

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
    terms: Terms = stack_terms.CAPACITY_BLOCK,
) -> tuple[Finding, ...]:
    """The assessment `pulumi up` applies (:func:`components.capacity.assessment.assess`), plus what only
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


def _quota_check(quota: QuotaReading | None, nodes: int, vcpus: int | None) -> Check:
    """The vCPU quota line; only a WARN at worst, since its relevance to blocks is unconfirmed."""
    if quota is None or quota.value is None:
        why = quota.error if quota is not None else "not read"
        return Check(WARN, "vCPU quota", f"could not read the On-Demand vCPU quota ({why}); check it in the Service Quotas console.")
    label = f"{quota.code} ({quota.name})"
    if vcpus is None:
        return Check(WARN, "vCPU quota", f"{label} is {quota.value:g} vCPUs but the instance type's vCPU count is unknown, so it was not compared.")
    need = nodes * vcpus
    if quota.value >= need:
        return Check(OK, "vCPU quota", f"{label} is {quota.value:g} vCPUs, enough for {nodes} x {vcpus} = {need} ({_QUOTA_CAVEAT}).")
    return Check(WARN, "vCPU quota", f"{label} is {quota.value:g} vCPUs, below {nodes} x {vcpus} = {need}; {_QUOTA_CAVEAT}, so request an increase if launches fail with VcpuLimitExceeded.")


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
) -> PreflightReport:
    """Read the reservation, its block status and the vCPU quota, and evaluate the go/no-go list.

    A missing or malformed reservation id is a FAIL line, not an exception; other
    AWS errors (credentials, permissions, network) raise UserError.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    if not reservation_id:
        return PreflightReport("", (Check(FAIL, "reservation", "the stack sets no kimi-k3:capacityReservationId."),))
    if not CAPACITY_RESERVATION_ID.match(reservation_id):
        return PreflightReport(reservation_id, (Check(FAIL, "reservation", f"{reservation_id!r} is not a reservation id (cr- followed by 17 hex digits)."),))
    try:
        items = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])["CapacityReservations"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "InvalidCapacityReservationId.NotFound":
            raise translate_aws_error(exc, region) from None
        items = []
    except BotoCoreError as exc:  # credentials, region, endpoint
        raise translate_aws_error(exc, region) from None
    if not items:
        return PreflightReport(reservation_id, (Check(FAIL, "reservation", f"{reservation_id} does not exist in {region} for this account."),))
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
    )
    return PreflightReport(reservation_id, checks)
