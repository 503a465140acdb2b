"""The "did you mean" of every refusal that names a known spelling: the nearest candidate, in any case."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def nearest(name: str, candidates: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The candidate closest to ``name``, compared case-insensitively (``MAXMODELLEN`` → ``maxModelLen``), as spelt; ``None`` when none is close.

    Compared in lower case, a key typed in another case is as close as the key itself, and a misspelling in
    another case (``MAXMODELLENGTH``) scores as the same misspelling would in the right one.
    """
    by_lower: dict[str, str] = {}
    for candidate in sorted(candidates):
        by_lower.setdefault(candidate.lower(), candidate)
    close = difflib.get_close_matches(name.lower(), sorted(by_lower), n=1, cutoff=cutoff)
    return by_lower[close[0]] if close else None


def nearest_numbers(value: int | float, accepted: Iterable[int | float]) -> tuple[int | float, ...]:
    """The accepted numbers next to ``value``: the largest below it and the smallest above it (one where ``value`` is
    outside them all); ``()`` when ``value`` is accepted or none is a number. ``45`` among CloudWatch's retention days: ``(30, 60)``."""
    numbers = sorted({a for a in accepted if isinstance(a, (int, float)) and not isinstance(a, bool)})
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not numbers or value in numbers:
        return ()
    below = [n for n in numbers if n < value]
    above = [n for n in numbers if n > value]
    return tuple(side for side in (below[-1] if below else None, above[0] if above else None) if side is not None)


def did_you_mean(value: object, accepted: Iterable[object]) -> str:
    """``"; did you mean X?"`` for a refused member of a closed set: the nearest spelling of a string, the accepted
    numbers next to a number (``"; did you mean 30 or 60?"``); ``""`` when nothing is near."""
    accepted = tuple(accepted)
    if isinstance(value, str):
        near = nearest(value, [str(a) for a in accepted if str(a)])
        return f"; did you mean {near}?" if near else ""
    numbers = nearest_numbers(value, [a for a in accepted if isinstance(a, (int, float))])  # type: ignore[arg-type]
    return f"; did you mean {' or '.join(map(str, numbers))}?" if numbers else ""


__all__ = ["did_you_mean", "nearest", "nearest_numbers"]
