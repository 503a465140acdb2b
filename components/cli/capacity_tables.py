"""How the ``kimi-k3 capacity`` and ``kimi-k3 hyperpod plans`` commands print: tables, times, durations.

Capacity Block and training plan offerings, extension offerings, reservations and plans are
all listed the same way: a heading, a left-aligned table (or one line saying there is none),
and the command that buys one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from kimi_k3.core.human_time import duration_text


def relative(when: datetime | None, now: datetime, future: str, past: str) -> str:
    """"in 2d 1h 0m" / "3h 5m ago" relative to ``now`` ("-" when there is no time)."""
    if when is None:
        return "-"
    delta = when - now
    return f"{future} {duration_text(delta)}" if delta > timedelta(0) else f"{past} {duration_text(delta)} ago"


def hours_text(hours: float) -> str:
    """``7d (168h)`` for whole days, else ``30h`` / ``1.5h``."""
    whole = int(hours)
    return f"{whole // 24}d ({whole}h)" if whole % 24 == 0 and whole == hours else f"{hours:g}h"


def table(rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in rows)


def print_offerings(heading: str, header: Sequence[str], rows: Iterable[Sequence[str]], empty: str, buy: str) -> None:
    """A listing of offerings: ``heading``, then the table under ``header`` and how to ``buy`` one, or ``empty`` when there is none."""
    body = list(rows)
    print(heading)
    if not body:
        print(empty)
        return
    print(table([header, *body]))
    print(f"\nTo buy one (irreversible): {buy}")


__all__ = ["hours_text", "print_offerings", "relative", "table"]
