"""Durations and moments written for people, the same way in every command's output."""

from __future__ import annotations

from datetime import datetime, timedelta

from kimi_k3.core.clock import utc


def duration_text(delta: timedelta) -> str:
    """``6d 23h 25m`` / ``3h 5m`` / ``12m`` (sign dropped; callers say "in"/"ago")."""
    minutes = int(abs(delta).total_seconds() // 60)
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    parts = [f"{days}d"] if days else []
    if days or hours:
        parts.append(f"{hours}h")
    parts.append(f"{mins}m")
    return " ".join(parts)


def minute_text(moment: datetime | None) -> str:
    """``2026-12-01 11:30`` (UTC, to the minute; a naive value is taken as UTC), or ``-`` for none."""
    return "-" if moment is None else utc(moment).strftime("%Y-%m-%d %H:%M")


__all__ = ["duration_text", "minute_text"]
