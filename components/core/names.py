"""Names derived from a stack's name that must fit an AWS limit: kept as they are when they fit, else shortened by a hash.

A derived name (``kimi-k3-<stack>-docker-hub``, ``<cluster>-deploy``, the delivery alarm's name …)
grows with the stack's name; each AWS API has its own limit. :func:`fit` keeps a name that fits
unchanged (so an existing stack's resources keep their names) and otherwise cuts it and appends
``-`` and 8 hex digits of the SHA-256 of the whole name: deterministic (the same stack always gets
the same name), distinct for stacks that share a long prefix, and within the limit. Callers that
need one case or one separator pass ``lower`` / ``separators``; runs of separators collapse to one.
"""

from __future__ import annotations

import hashlib
import re

HASH_DIGITS = 8
"""Hex digits of the SHA-256 appended to a shortened name."""


def fit(name: str, limit: int, *, lower: bool = False, separators: str = "-_") -> str:
    """``name`` within ``limit`` characters: letters, digits and ``separators`` (any other character and runs of
    separators become one ``-``), lower-cased with ``lower``; a name longer than ``limit``, or one these rules changed (two
    stacks must not meet on one name: ``Dev`` and ``dev``), is cut and ends ``-<8 hex>``."""
    text = name.lower() if lower else name
    text = re.sub(rf"[^A-Za-z0-9{re.escape(separators)}]+", "-", text) if "-" in separators else text
    text = re.sub(rf"[{re.escape(separators)}]{{2,}}", "-", text).strip(separators)
    if len(text) <= limit and text == name:
        return text
    digest = hashlib.sha256(name.encode()).hexdigest()[:HASH_DIGITS]
    head = text[: limit - HASH_DIGITS - 1].rstrip(separators)
    return f"{head}-{digest}"


__all__ = ["HASH_DIGITS", "fit"]
