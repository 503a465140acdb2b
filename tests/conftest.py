"""Shared fixtures: the offline engine (one harness for plan and tests) and stack plans."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kimi_k3 import offline

pytest_plugins = ("tests.proxy_harness",)
"""Fixtures shared by the proxy tests (the nginx sandbox)."""

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
"""A fixed 'now' for tests whose answers depend on the block's window."""


def fixture_for(settings, **changes) -> offline.ReservationFixture:
    """The default reservation of a stack, with a fixed start and optional changes."""
    base = offline.default_reservation(settings, now=NOW)
    values = {**base.__dict__, **changes}
    return offline.ReservationFixture(**values)


TRAVEL_UNITS = {"m": "minutes", "h": "hours", "d": "days"}


def travel_offset(text: str) -> timedelta:
    """``8h`` / ``9d`` / ``75d`` / ``-2h`` as a timedelta (for ``--travel``)."""
    match = re.fullmatch(r"([+-]?\d+)([mhd])", text.strip())
    if not match:
        raise pytest.UsageError(f"--travel {text!r}: expected a whole number of minutes, hours or days such as 8h, 9d or 75d")
    return timedelta(**{TRAVEL_UNITS[match[2]]: int(match[1])})


def travel_destination(text: str, now: datetime) -> datetime:
    """Where ``--travel`` moves the clock: an offset from ``now`` (``8h``, ``9d``, ``75d``) or an instant (``2026-12-16T03:00Z``).

    An instant reproduces a failure seen at one moment (a block boundary, a month end) on any later day.
    """
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}T[\d:]+(Z|[+-]\d{2}:\d{2})", text.strip()):
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        return moment.astimezone(UTC)
    return now + travel_offset(text)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--travel", metavar="OFFSET",
        help="run the suite with the wall clock moved by OFFSET from the real now (e.g. 8h, 9d, 75d), or to an instant "
        "(2026-12-16T03:00Z): proves no test depends on today's date",
    )


def pytest_configure(config: pytest.Config) -> None:
    offset = config.getoption("--travel")
    if offset:
        import time_machine

        traveller = time_machine.travel(travel_destination(offset, datetime.now(UTC)), tick=True)
        traveller.start()
        config.stash[_TRAVELLER] = traveller


def pytest_unconfigure(config: pytest.Config) -> None:
    traveller = config.stash.get(_TRAVELLER, None)
    if traveller is not None:
        traveller.stop()


_TRAVELLER: pytest.StashKey[Any] = pytest.StashKey()


def pytest_report_header(config: pytest.Config) -> str | None:
    offset = config.getoption("--travel")
    return f"clock travelled by {offset}: now {datetime.now(UTC):%Y-%m-%d %H:%M} UTC" if offset else None


CLOCK_MARK = "clock"
"""The marker of a test that exercises the wall clock: it runs twice, as it is and with the clock moved by :data:`CLOCK_TRAVEL`."""
CLOCK_TRAVEL = "9d"
"""How far the second run of a ``clock`` test moves the clock (``make test-travel`` moves the whole suite by 8h, 9d and 75d)."""
SELF_TRAVELLING = "tests/test_time_travel.py"
"""The module that moves the clock itself (8h, 9d, 75d): its tests run once."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test marked ``clock`` runs twice in the same session: at the real now and with the clock moved
    (unless the whole run is already travelled, ``--travel``)."""
    if (
        metafunc.definition.get_closest_marker(CLOCK_MARK) is not None
        and not metafunc.config.getoption("--travel")
        and not metafunc.definition.nodeid.startswith(SELF_TRAVELLING)
        and "_clock_moved" in metafunc.fixturenames
    ):
        metafunc.parametrize("_clock_moved", ["", CLOCK_TRAVEL], indirect=True, ids=["now", f"clock+{CLOCK_TRAVEL}"])


@pytest.fixture(autouse=True)
def _clock_moved(request: pytest.FixtureRequest):
    """The wall clock moved by ``request.param`` (``""``: not moved) for the test's whole run, fixtures included."""
    offset = getattr(request, "param", "")
    if not offset:
        yield
        return
    import time_machine

    with time_machine.travel(datetime.now(UTC) + travel_offset(offset), tick=True):
        yield


@pytest.fixture(autouse=True)
def _commands_run_from_the_repository(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest):
    """``kimi-k3`` commands find their project from the current directory (the nearest Pulumi.yaml):
    tests run them from this repository unless they move elsewhere themselves.

    Also the guard of the travelled runs: a test not marked ``clock`` that reads the wall clock
    (:func:`kimi_k3.core.clock.program_now` outside a pinned moment) fails, so every test whose
    answer may depend on today's date is in the pass that moves the clock.
    """
    monkeypatch.chdir(ROOT)
    if request.node.get_closest_marker(CLOCK_MARK) is not None:
        yield
        return
    from kimi_k3.core import clock

    real = clock.program_now
    reads: list[str] = []

    def guarded() -> datetime:
        if clock._PINNED.get() is None:
            reads.append("program_now")
        return real()

    monkeypatch.setattr(clock, "program_now", guarded)
    yield
    if reads:
        pytest.fail(
            f"{request.node.nodeid} reads the wall clock (kimi_k3.core.clock.program_now, not pinned): "
            f"pin its moment, or mark it @pytest.mark.{CLOCK_MARK} so it also runs with the clock moved",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def dev_plan() -> offline.PlanResult:
    """The dev stack run once through __main__.py under the offline engine."""
    return offline.run_stack("dev", now=NOW, reservation=fixture_for)


@pytest.fixture(scope="session")
def prod_plan() -> offline.PlanResult:
    """The prod stack run once through __main__.py under the offline engine."""
    return offline.run_stack("prod", now=NOW, reservation=lambda s: fixture_for(s, availability_zone="us-west-2b", state="active"))


@pytest.fixture(scope="session")
def hyperpod_plan() -> offline.PlanResult:
    """The hyperpod stack (SageMaker HyperPod on the stack's EKS cluster) run once through __main__.py, its training plan the default fixture."""
    return offline.run_stack("hyperpod", now=NOW)
