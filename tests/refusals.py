"""Shared check for a component that must refuse its args before it declares anything.

Test modules import from here (and from ``builders``/``conftest``), never from each other.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kimi_k3 import offline
from kimi_k3.errors import UserError
from tests.conftest import NOW


def assert_refused_before_declaring(
    program: Callable[[], object],
    match: str | None = None,
    *,
    engine: offline.OfflineEngine | None = None,
    error: type[Exception] = UserError,
) -> Exception:
    """Run ``program`` under ``engine`` (default: a plain offline engine at ``NOW``): it raises ``error``
    matching ``match``, and no resource was declared. Returns the error for further checks."""
    engine = engine or offline.OfflineEngine(now=NOW)
    with pytest.raises(error, match=match) as caught:
        engine.run(program)
    assert engine.resources == []
    return caught.value
