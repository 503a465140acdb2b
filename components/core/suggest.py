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


__all__ = ["nearest"]
