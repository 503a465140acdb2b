"""Shared fixtures: the offline engine (one harness for plan and tests) and stack plans."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from components import offline

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
NOW = datetime(2026, 11, 30, 16, 0, tzinfo=timezone.utc)
"""A fixed 'now' for tests whose answers depend on the block's window."""


def fixture_for(settings, **changes) -> offline.ReservationFixture:
    """The default reservation of a stack, with a fixed start and optional changes."""
    base = offline.default_reservation(settings, now=NOW)
    values = {**base.__dict__, **changes}
    return offline.ReservationFixture(**values)


@pytest.fixture(scope="session")
def dev_plan() -> offline.PlanResult:
    """The dev stack run once through __main__.py under the offline engine."""
    return offline.run_stack("dev", reservation=fixture_for)


@pytest.fixture(scope="session")
def prod_plan() -> offline.PlanResult:
    """The prod stack run once through __main__.py under the offline engine."""
    return offline.run_stack("prod", reservation=lambda s: fixture_for(s, availability_zone="us-west-2b", state="active"))
