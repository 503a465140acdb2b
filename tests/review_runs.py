"""Two-run rehearsals for the change review: a previous plan of a stack, then a second run that sees its state.

The previous plans are computed once per test process (``functools.cache``) and shared by the
test modules that need them; each rehearsal's second run is its own.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from kimi_k3 import offline
from kimi_k3.offline.state import PreviousState
from tests.conftest import ROOT

BLOCK_START = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
"""The rehearsed block's start (blocks start at 11:30 UTC); it ends seven days later."""
BEFORE = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
"""A first `up` the day before the block."""
SERVING = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
"""A moment the block serves."""
KEY_ROTATION = datetime(2026, 12, 1, 11, 20, tzinfo=UTC)
"""Ten minutes before the block's start."""


def block(state: str) -> Callable[[Any], offline.ReservationFixture]:
    """The stack's block, starting at :data:`BLOCK_START`, in ``state``."""

    def fixture(settings: Any) -> offline.ReservationFixture:
        base = offline.default_reservation(settings, BEFORE)
        return offline.ReservationFixture(
            id=base.id, availability_zone=base.availability_zone, instance_type=base.instance_type,
            instance_count=base.instance_count, state=state, start=BLOCK_START,
        )

    return fixture


def run(stack: str, now: datetime, state: str, previous: PreviousState | None = None, **options: Any) -> offline.PlanResult:
    """One run of ``stack`` at ``now`` with the block in ``state``; ``previous`` makes it a later `up`."""
    engine = dict(options.pop("engine_options", None) or {})
    if previous is not None:
        engine["previous"] = previous
    return offline.run_stack(stack, now=now, reservation=block(state), engine_options=engine or None, **options)


@cache
def prod_serving_plan() -> offline.PlanResult:
    """Prod planned while its block serves (the previous plan of the in-block rehearsals)."""
    return run("prod", SERVING, "active")


@cache
def prod_serving() -> PreviousState:
    """The state :func:`prod_serving_plan` records, as a later run reads it back."""
    return PreviousState.from_plan(prod_serving_plan(), "build/plan/prod")


def project_copy(tmp_path: Path, stack: str, edit: Mapping[str, Any] | None = None, secrets: Mapping[str, str] | None = None) -> Path:
    """A copy of this project (``Pulumi.yaml``, ``__main__.py``, the stack file, its policy config) with the stack's
    config keys changed by ``edit`` and ``secure:`` values set by ``secrets`` (a stack file as a user edits it)."""
    root = tmp_path / "project"
    (root / "stacks").mkdir(parents=True, exist_ok=True)
    (root / "policy" / "config").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copy(ROOT / "__main__.py", root / "__main__.py")
    shutil.copy(ROOT / "policy" / "config" / f"{stack}.json", root / "policy" / "config" / f"{stack}.json")
    document = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    document["config"].update(edit or {})
    document["config"].update({key: {"secure": value} for key, value in (secrets or {}).items()})
    (root / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    return root
