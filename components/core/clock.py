"""The moment a program runs: read once at an entry point, then passed everywhere as ``now``.

No component, composition or check reads the wall clock: they take ``now`` from their
caller. Only entry points call :func:`program_now` — ``__main__.py`` (under ``pulumi
up``/``preview`` that is the real time) and the ``kimi-k3`` commands. The offline engine
runs a program inside :func:`pinned`, so ``kimi-k3 plan --now …`` and the tests decide
what "now" is and two plans of the same inputs are byte-identical.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import UTC, datetime

from kimi_k3.errors import UserError

_PINNED: ContextVar[datetime | None] = ContextVar("kimi_k3_pinned_now", default=None)


def utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime (a naive value is taken as UTC)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def naive_problem(name: str, moment: datetime) -> str | None:
    """Why ``moment``, given as ``name``, is refused (it has no timezone: ``datetime.now()`` is the machine's local time,
    hours off UTC on most laptops); ``None`` when it is aware. The one wording of that refusal for a record and a call."""
    if moment.utcoffset() is not None:
        return None
    return f"{name} {moment.isoformat()} has no timezone; expected a UTC datetime such as datetime(2026, 12, 1, 11, 30, tzinfo=UTC)"


def program_now() -> datetime:
    """The moment the running program uses as "now" (UTC).

    The pinned moment inside :func:`pinned` (offline plan, tests), else the wall clock.
    Call it once, at the program's entry point, and pass the value down.
    """
    moment = _PINNED.get()
    return moment if moment is not None else datetime.now(UTC)


@contextlib.contextmanager
def pinned(moment: datetime) -> Iterator[datetime]:
    """Run a block with :func:`program_now` answering ``moment`` (made UTC)."""
    token = _PINNED.set(utc(moment))
    try:
        yield utc(moment)
    finally:
        _PINNED.reset(token)


def parse_moment(text: str, flag: str) -> datetime:
    """Parse an ISO 8601 date or date-time given for ``flag`` (``Z`` or an offset; naive = UTC)."""
    try:
        return utc(datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00")))
    except (ValueError, AttributeError):
        raise UserError(f"{flag} {text!r} is not accepted; expected an ISO 8601 time such as 2026-12-07T11:30:00Z") from None


__all__ = ["naive_problem", "parse_moment", "pinned", "program_now", "utc"]
