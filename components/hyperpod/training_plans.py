"""SageMaker Flexible Training Plan operations with boto3: find, buy, inspect, extend.

Pure logic for the ``kimi-k3 hyperpod plans`` commands, with the same shape as
:mod:`kimi_k3.capacity` for EC2 Capacity Blocks: every function takes the
boto3 SageMaker client it needs and, where time matters, a timezone-aware ``now``;
inputs are validated before AWS is called; results are small frozen dataclasses;
nothing here prints. AWS failures become one-line
:class:`kimi_k3.errors.UserError` messages (:func:`sagemaker_errors`).

The four operations exist in botocore 1.44.8's SageMaker model
(``botocore/data/sagemaker/2017-07-24/service-2.json``):

* ``SearchTrainingPlanOfferings`` (``InstanceType``, ``InstanceCount``,
  ``StartTimeAfter``, ``EndTimeBefore``, ``DurationHours`` 1-87600,
  ``TargetResources``; with ``TrainingPlanArn`` it returns *extension* offerings);
* ``CreateTrainingPlan`` (``TrainingPlanName``, ``TrainingPlanOfferingId``, ``Tags``);
  the plan becomes ``Scheduled`` after the upfront payment, ``Active`` at its start;
* ``DescribeTrainingPlan`` (name or ARN) with ``ReservedCapacitySummaries``, each
  with its instance type, count, Availability Zone and window;
* ``ExtendTrainingPlan`` (``TrainingPlanExtensionOfferingId`` only: the offering
  names the plan) and ``DescribeTrainingPlanExtensionHistory``.

A plan is bought for one kind of target resource; only a ``hyperpod-cluster``
plan can back a HyperPod instance group (API reference, ``TargetResources``).
A purchase, like an extension, is a payment that cannot be undone here.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, ClassVar

from kimi_k3.capacity.aws import translate_aws_error, translated_errors, validate_region
from kimi_k3.capacity.reserved import (
    PROJECT_TAG,
    BoughtExtension,
    CapacitySearch,
    Priced,
    ZonedOffer,
    api_record,
    cheapest_first,
    checked_start_after,
    offering_by_id,
    paged_records,
)
from kimi_k3.core.clock import utc
from kimi_k3.errors import UserError

HYPERPOD_TARGET = "hyperpod-cluster"
"""``TargetResources`` value of plans that can back a HyperPod instance group."""

MAX_DURATION_HOURS = 87600
"""Upper bound of ``DurationHours`` in the SageMaker model."""

PLAN_DAYS = range(1, 183)
"""Durations a training plan is offered in: 1-day increments from 1 to 182 days (SageMaker developer guide,
"Search training plan offerings", search-training-plan-offerings-api-cli-sdk)."""

PLAN_INSTANCE_COUNTS = (1, 2, 4, 8, 16, 32, 64)
"""Instance quantities a training plan is offered in (same page)."""

PLAN_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}$")
"""``TrainingPlanName`` pattern of the SageMaker model."""

PLAN_ARN = re.compile(r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}$")
"""``TrainingPlanArn`` of the SageMaker model, with a plan name as its last part."""

OFFERING_ID = re.compile(r"^[a-z0-9\-]{1,256}$")
"""``TrainingPlanOfferingId`` pattern of the SageMaker model."""

_NOT_FOUND = {"ResourceNotFound", "ResourceNotFoundException"}
_DENIED = {"AccessDeniedException", "AccessDenied", "UnauthorizedOperation"}


# --------------------------------------------------------------------------- errors


def translate_sagemaker_error(exc: BaseException, region: str | None = None) -> UserError:
    """One-line :class:`UserError` for a SageMaker failure.

    SageMaker's own error codes are handled here; everything else (credentials,
    region, endpoint, throttling) goes to :func:`kimi_k3.capacity.aws.translate_aws_error`.
    That function names the service ``servicequotas`` for ``AccessDeniedException``
    (the code EC2 never uses), which would be wrong for SageMaker, so denials are
    translated here first.
    """
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = err.get("Code", "Unknown")
        message = " ".join(str(err.get("Message", "")).split())[:200]
        op = getattr(exc, "operation_name", "") or "the request"
        where = f" in {region}" if region else ""
        if code in _DENIED:
            return UserError(f"AWS denied sagemaker:{op}{where} ({code}): grant that action to your IAM identity")
        if code in _NOT_FOUND:
            return UserError(f"not found{where} ({message}): check the training plan name or ARN, the region and the account; "
                             "list your plans with `kimi-k3 hyperpod plans status`")
        if code == "ResourceLimitExceeded":
            return UserError(f"SageMaker refused {op}{where}: a limit was reached ({message}); ask for a quota increase or free the resource")
        if code in ("ResourceInUse", "ResourceAlreadyExists", "ConflictException"):
            return UserError(f"SageMaker refused {op}{where} ({code}): {message}")
        if code == "ValidationException":
            return UserError(f"SageMaker rejected {op}{where} as invalid: {message}")
    return translate_aws_error(exc, region)


def sagemaker_errors(region: str | None = None) -> contextlib.AbstractContextManager[None]:
    """Context manager: re-raise any botocore error as a one-line :class:`UserError` (:func:`translate_sagemaker_error`)."""
    return translated_errors(translate_sagemaker_error, region)


def make_client(region: str | None) -> Any:
    """The boto3 SageMaker client (the one place that creates it; tests replace it)."""
    if region is not None:
        validate_region(region)
    import boto3
    from botocore.config import Config

    config = Config(retries={"max_attempts": 4, "mode": "standard"}, connect_timeout=10, read_timeout=60, user_agent_extra="kimi-k3-aws")
    with sagemaker_errors(region):
        return boto3.session.Session(region_name=region).client("sagemaker", config=config)


# --------------------------------------------------------------------------- validation


def supported_instance_types() -> tuple[str, ...]:
    """Instance types a training plan can reserve: the ``ReservedCapacityInstanceType`` enum of botocore's model."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    return tuple(model.shape_for("ReservedCapacityInstanceType").enum)


def validate_plan_name(value: str) -> str:
    """Return ``value`` if it is a valid ``TrainingPlanName``, else raise UserError."""
    if not isinstance(value, str) or not PLAN_NAME.match(value):
        raise UserError(f"--name {value!r} is not accepted; a training plan name is 1-64 letters, digits and '-', starting and ending with a letter or digit")
    return value


def validate_plan_ref(value: str) -> str:
    """Return ``value`` if it is a training plan name or ARN, else raise UserError."""
    if isinstance(value, str) and (PLAN_NAME.match(value) or PLAN_ARN.match(value)):
        return value
    raise UserError(f"{value!r} is not a training plan name or ARN (arn:aws:sagemaker:<region>:<account>:training-plan/<name>)")


def validate_offering_id(value: str) -> str:
    """Return ``value`` if it looks like a ``TrainingPlanOfferingId``, else raise UserError."""
    if not isinstance(value, str) or not OFFERING_ID.match(value):
        raise UserError(f"{value!r} is not a training plan offering id (lowercase letters, digits and '-', from `kimi-k3 hyperpod plans offerings`)")
    return value


@dataclass(frozen=True)
class OfferingQuery(CapacitySearch):
    """A validated search for training plan offerings for a HyperPod cluster (``search_training_plan_offerings``)."""

    end_before: datetime | None = None
    """Latest end (UTC)."""

    REQUEST_KEYS: ClassVar[Mapping[str, str]] = {
        "instance_type": "InstanceType", "count": "InstanceCount", "duration_hours": "DurationHours",
        "start_after": "StartTimeAfter", "end_before": "EndTimeBefore",
    }
    REQUEST_FIXED: ClassVar[Mapping[str, Any]] = {"TargetResources": [HYPERPOD_TARGET]}

    def end_bound(self) -> Mapping[str, datetime | None]:
        """``EndTimeBefore``: the latest end as given."""
        return {"end_before": self.end_before}


def build_offering_query(instance_type: str, count: int, days: int, now: datetime, start_after: datetime | None = None,
                         end_before: datetime | None = None) -> OfferingQuery:
    """Validate a search before calling AWS (instance type of the model's enum, bounds, a window in the future)."""
    known = supported_instance_types()
    if instance_type not in known:
        raise UserError(f"--instance-type {instance_type!r} is not accepted; training plans reserve {', '.join(known)}")
    if isinstance(count, bool) or not isinstance(count, int) or count not in PLAN_INSTANCE_COUNTS:
        raise UserError(f"--count {count!r} is not accepted; training plans reserve {', '.join(map(str, PLAN_INSTANCE_COUNTS))} instances")
    if isinstance(days, bool) or not isinstance(days, int) or days not in PLAN_DAYS:
        raise UserError(f"--days {days!r} is not accepted; training plans last 1 to 182 days in 1-day steps")
    now = utc(now)
    start_after = checked_start_after(start_after, now)
    if end_before is not None:
        end_before = utc(end_before)
        earliest_end = (start_after or now) + timedelta(days=days)
        if end_before < earliest_end:
            raise UserError(
                f"--end-before {end_before:%Y-%m-%d %H:%M} UTC leaves no room for {days} day(s) "
                f"starting {'after ' + format(start_after, '%Y-%m-%d %H:%M') + ' UTC' if start_after else 'now'}; "
                f"use a date on or after {earliest_end:%Y-%m-%d %H:%M} UTC"
            )
    return OfferingQuery(instance_type, count, days, start_after, end_before)


# --------------------------------------------------------------------------- results


_PLAN_TIMES = {"start": "StartTime", "end": "EndTime"}
"""Members of a plan's and its capacities' window (``StartTime``/``EndTime``)."""

_EXTENSION_DATES = {"start": "StartDate", "end": "EndDate"}
"""Members of an extension's window (``StartDate``/``EndDate``)."""


def _hours(item: Mapping[str, Any]) -> float:
    return int(item.get("DurationHours", 0)) + int(item.get("DurationMinutes", 0)) / 60


def _capacities(item: Mapping[str, Any], key: str) -> tuple[ReservedCapacity, ...]:
    return tuple(ReservedCapacity.from_api(c) for c in item.get(key, ()))


@dataclass(frozen=True)
class ReservedCapacity:
    """One block of reserved instances inside an offering or a plan (one AZ, one window)."""

    instance_type: str
    """HyperPod instance type."""
    instance_count: int
    """Instances reserved."""
    availability_zone: str
    """AZ the instances are in (an instance group must use a subnet of this AZ)."""
    start: datetime | None
    """Start of the window (UTC)."""
    end: datetime | None
    """End of the window (UTC)."""
    status: str = ""
    """``Pending``, ``Scheduled``, ``Active``, ``Expired`` or ``Failed`` (plans only)."""
    availability_zone_id: str = ""
    """AZ id (``use1-az4``), when AWS reports it."""

    @classmethod
    def from_api(cls, item: Mapping[str, Any]) -> ReservedCapacity:
        """Build from a ``ReservedCapacityOffering`` or a ``ReservedCapacitySummary``."""
        count = int(item.get("InstanceCount", item.get("TotalInstanceCount", 0)))
        return api_record(cls, item, _PLAN_TIMES, instance_count=count)


def _window(capacities: tuple[ReservedCapacity, ...]) -> tuple[datetime | None, datetime | None]:
    starts = [c.start for c in capacities if c.start]
    ends = [c.end for c in capacities if c.end]
    return (min(starts) if starts else None, max(ends) if ends else None)


@dataclass(frozen=True, kw_only=True)
class PlanOffering(Priced):
    """One training plan offering that can be bought (a ``TrainingPlanOfferings`` entry; ``offering_id`` is its
    ``TrainingPlanOfferingId``, the id ``purchase`` takes)."""

    target_resources: tuple[str, ...]
    """What a plan bought from it can back (``hyperpod-cluster``)."""
    duration_hours: float
    """Total duration."""
    capacities: tuple[ReservedCapacity, ...]
    """The reserved capacity it consists of (instance type, count, AZ, window)."""

    API_KEYS: ClassVar[Mapping[str, str]] = {"offering_id": "TrainingPlanOfferingId"}

    @classmethod
    def api_values(cls, item: Mapping[str, Any]) -> dict[str, Any]:
        """The offering id, the duration (hours and minutes) and the reserved capacities."""
        return {**super().api_values(item), "duration_hours": _hours(item), "capacities": _capacities(item, "ReservedCapacityOfferings")}

    @property
    def start(self) -> datetime | None:
        """Earliest start among its capacities."""
        return _window(self.capacities)[0]

    @property
    def end(self) -> datetime | None:
        """Latest end among its capacities."""
        return _window(self.capacities)[1]

    @property
    def availability_zones(self) -> tuple[str, ...]:
        """AZs of its capacities, in order, each once."""
        return tuple(dict.fromkeys(c.availability_zone for c in self.capacities if c.availability_zone))

    @property
    def instance_count(self) -> int:
        """Instances over all its capacities."""
        return sum(c.instance_count for c in self.capacities)


@dataclass(frozen=True)
class TrainingPlan:
    """What ``DescribeTrainingPlan`` says about one plan."""

    arn: str
    """``TrainingPlanArn`` (what an instance group's ``TrainingPlanArn`` takes)."""
    name: str
    """``TrainingPlanName``."""
    status: str
    """``Pending``, ``Scheduled``, ``Active``, ``Expired`` or ``Failed``."""
    status_message: str
    """AWS's note on the status, if any."""
    start: datetime | None
    """Start of the plan (UTC)."""
    end: datetime | None
    """End of the plan (UTC)."""
    duration_hours: float
    """Total duration."""
    upfront_fee: Decimal
    """What was paid."""
    currency: str
    """Currency of the fee."""
    total_instances: int
    """Instances reserved."""
    available_instances: int
    """Instances not in use."""
    in_use_instances: int
    """Instances in use (by HyperPod instance groups)."""
    unhealthy_instances: int
    """Instances AWS reports unhealthy."""
    target_resources: tuple[str, ...]
    """What the plan can back."""
    capacities: tuple[ReservedCapacity, ...] = field(default=())
    """Its reserved capacities (instance type, count, AZ, window)."""

    @classmethod
    def from_api(cls, item: Mapping[str, Any]) -> TrainingPlan:
        """Build from a ``DescribeTrainingPlan`` response (or a ``TrainingPlanSummary``)."""
        keys = {**_PLAN_TIMES, "name": "TrainingPlanName", "total_instances": "TotalInstanceCount", "available_instances": "AvailableInstanceCount",
                "in_use_instances": "InUseInstanceCount", "unhealthy_instances": "UnhealthyInstanceCount"}
        return api_record(cls, item, keys, arn=item["TrainingPlanArn"], status=item.get("Status", "Unknown"), duration_hours=_hours(item),
                          capacities=_capacities(item, "ReservedCapacitySummaries"))

    @property
    def availability_zones(self) -> tuple[str, ...]:
        """AZs of its capacities, in order, each once."""
        return tuple(dict.fromkeys(c.availability_zone for c in self.capacities if c.availability_zone))

    @property
    def instance_types(self) -> tuple[str, ...]:
        """Instance types of its capacities, each once."""
        return tuple(dict.fromkeys(c.instance_type for c in self.capacities if c.instance_type))


@dataclass(frozen=True, kw_only=True)
class ExtensionOffering(ZonedOffer):
    """One offering that extends an existing plan (same capacity, later end; a ``TrainingPlanExtensionOfferings``
    entry, its id the ``TrainingPlanExtensionOfferingId`` that ``extend`` takes)."""

    start: datetime | None
    """Start of the extension (UTC)."""
    end: datetime | None
    """End of the extension (UTC): the plan's new end."""

    API_KEYS: ClassVar[Mapping[str, str]] = {"offering_id": "TrainingPlanExtensionOfferingId", **_EXTENSION_DATES}


@dataclass(frozen=True, kw_only=True)
class Extension(BoughtExtension):
    """One extension of a plan, as ``ExtendTrainingPlan`` or the extension history reports it (a ``TrainingPlanExtensions`` entry)."""

    payment_status: str
    """Payment status of the extension."""

    API_KEYS: ClassVar[Mapping[str, str]] = {"offering_id": "TrainingPlanExtensionOfferingId", **_EXTENSION_DATES}


# --------------------------------------------------------------------------- operations


def _region(sm: Any) -> str:
    return sm.meta.region_name


def search_offerings(sm: Any, query: OfferingQuery) -> tuple[PlanOffering, ...]:
    """Offerings matching ``query`` for HyperPod clusters, cheapest first, then earliest start."""
    with sagemaker_errors(_region(sm)):
        response = sm.search_training_plan_offerings(**query.request())
    offerings = [PlanOffering.from_api(o) for o in response.get("TrainingPlanOfferings", [])]
    return cheapest_first((o for o in offerings if not o.target_resources or HYPERPOD_TARGET in o.target_resources), lambda o: o.start)


def find_offering(sm: Any, query: OfferingQuery, offering_id: str) -> PlanOffering:
    """The offering ``offering_id`` among those ``query`` returns now, or UserError if it is gone."""
    validate_offering_id(offering_id)
    return offering_by_id(
        search_offerings(sm, query),
        offering_id,
        f"offering {offering_id} is not among the current training plan offerings for {query.count} x {query.instance_type}, "
        f"{query.days} days in {_region(sm)}: offerings change; run `kimi-k3 hyperpod plans offerings` with the same flags again",
    )


def create_plan(sm: Any, name: str, offering_id: str) -> str:
    """Buy the offering as a plan named ``name``; returns its ARN. Irreversible."""
    validate_plan_name(name)
    validate_offering_id(offering_id)
    with sagemaker_errors(_region(sm)):
        response = sm.create_training_plan(TrainingPlanName=name, TrainingPlanOfferingId=offering_id, Tags=[dict(PROJECT_TAG)])
    return response["TrainingPlanArn"]


def describe_plan(sm: Any, name_or_arn: str) -> TrainingPlan:
    """The plan ``name_or_arn`` (UserError naming the plan if it does not exist)."""
    validate_plan_ref(name_or_arn)
    with sagemaker_errors(_region(sm)):
        return TrainingPlan.from_api(sm.describe_training_plan(TrainingPlanName=name_or_arn))


def list_plans(sm: Any) -> tuple[TrainingPlan, ...]:
    """Every training plan of the account in the region, newest start first."""
    with sagemaker_errors(_region(sm)):
        return tuple(paged_records(sm, "list_training_plans", "TrainingPlanSummaries", TrainingPlan.from_api, SortBy="StartTime", SortOrder="Descending"))


def search_extension_offerings(sm: Any, plan: TrainingPlan, days: int | None = None) -> tuple[ExtensionOffering, ...]:
    """Offerings that extend ``plan`` (optionally by ``days``), cheapest first."""
    if days is not None and (isinstance(days, bool) or not isinstance(days, int) or not 1 <= days * 24 <= MAX_DURATION_HOURS):
        raise UserError(f"--days {days!r} is not accepted; expected 1 to {MAX_DURATION_HOURS // 24} whole days")
    if plan.status not in ("Active", "Scheduled"):
        raise UserError(f"training plan {plan.name} is {plan.status}; only a Scheduled or Active plan can be extended")
    params: dict[str, Any] = {"TrainingPlanArn": plan.arn}
    if days is not None:
        params["DurationHours"] = days * 24
    with sagemaker_errors(_region(sm)):
        response = sm.search_training_plan_offerings(**params)
    return cheapest_first((ExtensionOffering.from_api(o) for o in response.get("TrainingPlanExtensionOfferings", [])), lambda o: o.end)


def find_extension_offering(sm: Any, plan: TrainingPlan, offering_id: str, days: int | None = None) -> ExtensionOffering:
    """The extension offering ``offering_id`` for ``plan``, or UserError if it is not offered (any more)."""
    if not isinstance(offering_id, str) or not offering_id.strip():
        raise UserError("--offering is empty; pass an id from `kimi-k3 hyperpod plans extend PLAN`")
    return offering_by_id(
        search_extension_offerings(sm, plan, days),
        offering_id,
        f"extension offering {offering_id} is not offered for training plan {plan.name} now; "
        f"run `kimi-k3 hyperpod plans extend {plan.name}` again to list the current ones",
    )


def extend_plan(sm: Any, offering_id: str) -> tuple[Extension, ...]:
    """Buy the extension offering ``offering_id``; returns the extensions AWS reports. Irreversible."""
    with sagemaker_errors(_region(sm)):
        response = sm.extend_training_plan(TrainingPlanExtensionOfferingId=offering_id)
    return tuple(Extension.from_api(e) for e in response.get("TrainingPlanExtensions", []))


def extension_history(sm: Any, plan: TrainingPlan) -> tuple[Extension, ...]:
    """Every extension bought for ``plan`` (every page)."""
    with sagemaker_errors(_region(sm)):
        return tuple(paged_records(sm, "describe_training_plan_extension_history", "TrainingPlanExtensions", Extension.from_api, TrainingPlanArn=plan.arn))


def as_json(value: Any) -> Any:
    """Plain JSON data for a result dataclass (datetimes as ISO 8601 UTC, fees as strings)."""
    from dataclasses import fields, is_dataclass

    if is_dataclass(value) and not isinstance(value, type):
        out = {f.name: as_json(getattr(value, f.name)) for f in fields(value)}
        for name in ("start", "end", "availability_zones", "instance_count"):
            if hasattr(type(value), name) and isinstance(getattr(type(value), name), property):
                out[name] = as_json(getattr(value, name))
        return out
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    return value


__all__ = [
    "HYPERPOD_TARGET",
    "Extension",
    "ExtensionOffering",
    "OfferingQuery",
    "PlanOffering",
    "ReservedCapacity",
    "TrainingPlan",
    "as_json",
    "build_offering_query",
    "create_plan",
    "describe_plan",
    "extend_plan",
    "extension_history",
    "find_extension_offering",
    "find_offering",
    "list_plans",
    "make_client",
    "sagemaker_errors",
    "search_extension_offerings",
    "search_offerings",
    "supported_instance_types",
    "translate_sagemaker_error",
    "validate_offering_id",
    "validate_plan_name",
    "validate_plan_ref",
]
