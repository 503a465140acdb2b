"""The one core of the two ways of reserving GPUs ahead: EC2 Capacity Blocks and SageMaker training plans.

Both are bought from an offering found by instance type, instance count, whole days and
an earliest start (EC2 ``DescribeCapacityBlockOfferings``; SageMaker
``SearchTrainingPlanOfferings``), both can be extended from an extension offering, both answer
with fees as decimal strings and times as datetimes, and both purchases carry the project's tag.
What they share is written here once: the search (:class:`CapacitySearch`, its request built
from the API's key map), the priced record every offering and extension is
(:class:`Priced`, :class:`ZonedOffer`, :class:`BoughtExtension`), the answer entry read into a
frozen dataclass (:func:`api_record`), paging and the cheapest-first order. Each API supplies
its key maps (``REQUEST_KEYS``, ``API_KEYS``) and its own bounds, in
:mod:`kimi_k3.capacity.offerings`, :mod:`kimi_k3.capacity.extensions` and
:mod:`kimi_k3.hyperpod.training_plans`.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar, Protocol, TypeVar

from kimi_k3.core.clock import utc
from kimi_k3.errors import UserError

RecordT = TypeVar("RecordT")

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

    REQUEST_KEYS: ClassVar[Mapping[str, str]] = {}
    """The API's parameter for each search value (``instance_type``, ``count``, ``duration_hours``,
    ``start_after`` and the names :meth:`end_bound` gives); each API's query sets it."""
    REQUEST_FIXED: ClassVar[Mapping[str, Any]] = {}
    """Parameters every search of the API sends as they are."""

    @property
    def duration_hours(self) -> int:
        """The duration in hours, the unit both APIs take."""
        return self.days * 24

    def end_bound(self) -> Mapping[str, datetime | None]:
        """The search's end bound as the API takes it, by name in :attr:`REQUEST_KEYS` (none here)."""
        return {}

    def request(self) -> dict[str, Any]:
        """Parameters for the API's offering search: each value under its API name, unset bounds left out."""
        values = {"instance_type": self.instance_type, "count": self.count, "duration_hours": self.duration_hours,
                  "start_after": self.start_after, **self.end_bound()}
        return {**{self.REQUEST_KEYS[name]: value for name, value in values.items() if value is not None}, **self.REQUEST_FIXED}


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


PricedT = TypeVar("PricedT", bound="Priced")


def cheapest_first(offers: Iterable[PricedT], when: Callable[[PricedT], datetime | None]) -> tuple[PricedT, ...]:
    """``offers`` cheapest first, then by ``when`` (earliest first, unknown last), then by offering id."""
    far = datetime.max.replace(tzinfo=UTC)
    return tuple(sorted(offers, key=lambda o: (o.upfront_fee, when(o) or far, o.offering_id)))


def paged_records(client: Any, operation: str, member: str, record: Callable[[Mapping[str, Any]], RecordT], **params: Any) -> list[RecordT]:
    """``record`` of every entry under ``member`` of every page of the paginated ``operation``."""
    found: list[RecordT] = []
    for page in client.get_paginator(operation).paginate(**params):
        found.extend(record(entry) for entry in page.get(member, []))
    return found


def fee(value: Any) -> Decimal:
    """An ``UpfrontFee`` as a Decimal: missing or empty is 0, anything unparsable NaN (shown, never hidden)."""
    try:
        return Decimal(str(value if value not in (None, "") else "0"))
    except InvalidOperation:
        return Decimal("NaN")


def optional_utc(value: datetime | None) -> datetime | None:
    """An API time made UTC, or None when the answer has none."""
    return utc(value) if value else None


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


@dataclass(frozen=True, kw_only=True)
class Priced:
    """What every offering and every bought extension of either API is: an offering's id and a price."""

    offering_id: str
    """The offering's id, the one a purchase takes (its API member: ``API_KEYS["offering_id"]``)."""
    upfront_fee: Decimal
    """Price, paid at purchase (``UpfrontFee``); 0 when not reported, NaN when unparsable."""
    currency: str
    """Currency of the fee (``CurrencyCode``, ``USD``)."""

    API_KEYS: ClassVar[Mapping[str, str]] = {}
    """The API member of each field whose member is not its name in CamelCase; each API's record sets it,
    ``offering_id`` always (a required member)."""

    @classmethod
    def api_values(cls, item: Mapping[str, Any]) -> dict[str, Any]:
        """The fields not read by their annotation from ``item``: the offering id (required), and what a record adds."""
        return {"offering_id": item[cls.API_KEYS["offering_id"]]}

    @classmethod
    def from_api(cls: type[PricedT], item: Mapping[str, Any]) -> PricedT:
        """Build from one API answer entry (boto3's parsed dict), through the record's key map."""
        return api_record(cls, item, cls.API_KEYS, **cls.api_values(item))


@dataclass(frozen=True, kw_only=True)
class ZonedOffer(Priced):
    """An offering of reserved instances in one Availability Zone, for a whole number of hours."""

    availability_zone: str
    """The one AZ of the reserved instances (``AvailabilityZone``, ``us-east-1a``)."""
    duration_hours: int
    """Length in hours."""


@dataclass(frozen=True, kw_only=True)
class BoughtExtension(Priced):
    """An extension bought for a reservation, as the purchase or the extension history reports it."""

    status: str
    """Status (payment) of the extension, in the API's words."""
    start: datetime | None
    """When it starts, the reservation's end before it (UTC); None when not reported."""
    end: datetime | None
    """The reservation's end once it is paid (UTC); None when not reported."""


__all__ = [
    "PROJECT_TAG",
    "BoughtExtension",
    "CapacitySearch",
    "Priced",
    "ZonedOffer",
    "api_record",
    "cheapest_first",
    "checked_start_after",
    "fee",
    "offering_by_id",
    "optional_utc",
    "paged_records",
]
