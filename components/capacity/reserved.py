"""What the two ways of reserving GPUs ahead share: EC2 Capacity Blocks and SageMaker training plans.

Both are bought from an offering found by instance type, instance count, whole days and
an earliest start (EC2 ``DescribeCapacityBlockOfferings``; SageMaker
``SearchTrainingPlanOfferings``), both answer with fees as decimal strings and times as
datetimes, and both purchases carry the project's tag. Every answer entry becomes a frozen
dataclass the same way (:func:`api_record`). The service-specific bounds stay in
:mod:`kimi_k3.capacity.offerings` and :mod:`kimi_k3.hyperpod.training_plans`.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol, TypeVar

from kimi_k3.core.clock import utc
from kimi_k3.errors import UserError

PROJECT_TAG = {"Key": "Project", "Value": "kimi-k3"}
"""Tag put on every Capacity Block reservation and training plan bought through this tool."""


@dataclass(frozen=True)
class CapacitySearch:
    """The part of an offering search both services take: what, how many, how long, from when."""

    instance_type: str
    """Instance type to reserve (``p6-b300.48xlarge``; SageMaker: ``ml.p6-b300.48xlarge``)."""
    count: int
    """Instances to reserve."""
    days: int
    """Duration in whole days."""
    start_after: datetime | None = None
    """Earliest start (UTC)."""

    @property
    def duration_hours(self) -> int:
        """The duration in hours, the unit both APIs take."""
        return self.days * 24


def checked_start_after(start_after: datetime | None, now: datetime) -> datetime | None:
    """``--start-after`` made UTC; UserError when it lies before ``now``."""
    if start_after is None:
        return None
    start_after = utc(start_after)
    if start_after < utc(now):
        raise UserError(f"--start-after {start_after:%Y-%m-%d %H:%M} UTC is in the past; omit it to search from now")
    return start_after


class _HasOfferingId(Protocol):
    @property
    def offering_id(self) -> str: ...


OfferingT = TypeVar("OfferingT", bound=_HasOfferingId)


def offering_by_id(offerings: Iterable[OfferingT], offering_id: str, gone: str) -> OfferingT:
    """The offering ``offering_id`` among the current ``offerings``; UserError ``gone`` when it is not offered (any more).

    Offerings go first come, first served, so every purchase finds its offering again right before buying.
    """
    for offering in offerings:
        if offering.offering_id == offering_id:
            return offering
    raise UserError(gone)


def fee(value: Any) -> Decimal:
    """An ``UpfrontFee`` as a Decimal: missing or empty is 0, anything unparsable NaN (shown, never hidden)."""
    try:
        return Decimal(str(value if value not in (None, "") else "0"))
    except InvalidOperation:
        return Decimal("NaN")


def optional_utc(value: datetime | None) -> datetime | None:
    """An API time made UTC, or None when the answer has none."""
    return utc(value) if value else None


RecordT = TypeVar("RecordT")

_KEY_ALIASES = {"currency": "CurrencyCode"}
"""Fields whose API member is not their name in CamelCase, the same in every answer."""

_READERS: dict[Any, Callable[[Mapping[str, Any], str, Any], Any]] = {
    str: lambda item, key, default: item.get(key, "" if default is dataclasses.MISSING else default),
    int: lambda item, key, _default: int(item.get(key, 0)),
    Decimal: lambda item, key, _default: fee(item.get(key)),
    datetime: lambda item, key, _default: utc(item[key]),
    datetime | None: lambda item, key, _default: optional_utc(item.get(key)),
    tuple[str, ...]: lambda item, key, _default: tuple(item.get(key, ())),
}
"""How a field is read, by its annotation: text or its default, a whole number or 0, a fee, a required
UTC time, an optional UTC time, a list of names."""


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


@functools.cache
def _field_types(cls: type) -> tuple[tuple[str, Any, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name], f.default) for f in dataclasses.fields(cls))


def api_record(cls: type[RecordT], item: Mapping[str, Any], keys: Mapping[str, str] | None = None, **values: Any) -> RecordT:
    """The frozen dataclass ``cls`` built from one API answer entry ``item`` (boto3's parsed dict).

    A field given in ``values`` takes that value; every other field is read from the member
    ``keys[field]``, else the field's name in CamelCase (``availability_zone`` → ``AvailabilityZone``,
    ``currency`` → ``CurrencyCode``), the way its annotation says (:data:`_READERS`).
    """
    keys = keys or {}
    for name, kind, default in _field_types(typing.cast(type, cls)):
        if name not in values:
            reader = _READERS.get(kind)
            if reader is None:
                raise TypeError(f"{cls.__name__}.{name}: no API reader for {kind}; pass its value to api_record")
            values[name] = reader(item, keys.get(name) or _KEY_ALIASES.get(name) or _camel(name), default)
    return cls(**values)


__all__ = ["PROJECT_TAG", "CapacitySearch", "api_record", "checked_start_after", "fee", "offering_by_id", "optional_utc"]
