"""Shared check for a component that must refuse its args before it declares anything.

Test modules import from here (and from ``builders``/``conftest``), never from each other.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from components import offline
from components.errors import UserError
from tests.conftest import NOW


def assert_refused_before_declaring(program: Callable[[], object], match: str) -> None:
    """Run ``program`` under the offline engine: it raises a :class:`UserError` matching ``match``, and no resource was declared."""
    engine = offline.OfflineEngine(now=NOW)
    with pytest.raises(UserError, match=match):
        engine.run(program)
    assert engine.resources == []
