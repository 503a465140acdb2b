"""Compatibility surface: the names ``components.capacity_ops`` had before it split into :mod:`components.capacity`.

Where each now lives: clients, error translation and id formats in
:mod:`components.capacity.aws`; durations, offerings and the purchase in
:mod:`components.capacity.offerings`; reservations and block health in
:mod:`components.capacity.status`; the go/no-go list in :mod:`components.capacity.preflight`;
the record in :mod:`components.capacity.facts` (``Reservation`` is
:class:`~components.capacity.facts.CapacityBlockFacts`) and the levels and findings in
:mod:`components.capacity.assessment` (``Check`` is
:class:`~components.capacity.assessment.Finding`). New code imports from there.

Names resolve on access (PEP 562), so replacing one where it lives (a test replacing
``components.capacity.aws.make_clients``) is seen through here too.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "components.capacity.aws": (
        "Clients", "aws_errors", "make_clients", "translate_aws_error", "validate_offering_id", "validate_region",
        "validate_reservation_id",
    ),
    "components.capacity.offerings": (
        "MAX_INSTANCES", "MAX_START_AHEAD", "Offering", "OfferingQuery", "PROJECT_TAG", "build_offering_query",
        "find_offering", "find_offerings", "parse_when", "purchase_block", "valid_duration_days",
    ),
    "components.capacity.status": (
        "BlockStatus", "ReservationView", "block_statuses", "describe_reservation", "list_capacity_blocks",
        "reservation_status", "supports_block_status",
    ),
    "components.capacity.preflight": ("PreflightReport", "QuotaReading", "VCPU_QUOTAS", "evaluate_preflight", "read_vcpu_quota", "run_preflight"),
    "components.capacity.assessment": ("FAIL", "INSTANCE_PLATFORM", "OK", "WARN"),
}
_ALIASES = {
    "Reservation": ("components.capacity.facts", "CapacityBlockFacts"),
    "Check": ("components.capacity.assessment", "Finding"),
}
_WHERE = {name: (module, name) for module, names in _HOMES.items() for name in names} | _ALIASES

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    home = _WHERE.get(name)
    if home is None:
        raise AttributeError(f"module 'components.capacity_ops' has no attribute {name!r}")
    module, attribute = home
    return getattr(importlib.import_module(module), attribute)


def __dir__() -> list[str]:
    return __all__
