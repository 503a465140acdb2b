"""Running a Pulumi project's program offline: the config the Pulumi CLI would hand it, then the engine."""

from __future__ import annotations

import dataclasses
import os
import runpy
import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from kimi_k3.hyperpod.training_plan_check import TrainingPlanFacts, rehearsal_facts
from kimi_k3.offline.engine import OfflineEngine
from kimi_k3.offline.fixtures import ReservationFixture, default_reservation, default_training_plan, next_block_start, training_plan_arn
from kimi_k3.offline.results import PlanResult
from kimi_k3.stack import project as project_files
from kimi_k3.stack import settings as stack_settings
from kimi_k3.stack.config_keys import PROJECT

TrainingPlanSource = TrainingPlanFacts | Callable[[stack_settings.StackSettings], TrainingPlanFacts]
"""A ``hyperpod`` stack's training plan offline: the facts, or a function of the stack's settings."""


def stack_region(values: Mapping[str, str]) -> str:
    """``aws:region`` of a stack's config, checked by the settings' rule (required, a known region shape)."""
    return stack_settings.region_of(values)


def _run_python_program(path: Path) -> Callable[[], None]:
    """Run ``path`` as ``__main__`` from its directory, as the Pulumi CLI's Python host does (cwd and sys.path)."""

    def main() -> None:
        directory = str(path.parent)
        added = directory not in sys.path
        if added:
            sys.path.insert(0, directory)
        previous = os.getcwd()
        os.chdir(directory)
        try:
            runpy.run_path(str(path), run_name="__main__")
        finally:
            os.chdir(previous)
            if added:
                sys.path.remove(directory)

    return main


def run_project(
    project: project_files.Project,
    stack: str,
    *,
    now: datetime,
    reservation: ReservationFixture | Callable[[stack_settings.StackSettings], ReservationFixture] | None = None,
    reservation_for: Callable[[str], ReservationFixture] | None = None,
    config_overrides: Mapping[str, Any] | None = None,
    engine_options: Mapping[str, Any] | None = None,
    training_plan: TrainingPlanSource | None = None,
    training_plan_for: Callable[[str], TrainingPlanFacts] | None = None,
) -> PlanResult:
    """Run a Pulumi project's program for one of its stacks under the offline engine.

    The config is what the Pulumi CLI would hand the program (stack file plus
    ``Pulumi.yaml`` defaults, see :mod:`kimi_k3.stack.project`). A kimi-k3 project (named
    ``kimi-k3``) has its settings validated first (a :class:`SettingsError` propagates,
    nothing runs) and its reservation built from them (``reservation``: a fixture, or a
    function of the settings). Any other project's program is not assumed to use kimi-k3
    settings: the Capacity Block look-up answers ``reservation_for(id)`` for whatever
    ``cr-`` id it asks (default: a scheduled one-instance block in the region's first AZ).
    ``now`` is the moment the program sees (:func:`kimi_k3.core.clock.program_now`).

    A ``hyperpod`` stack has no Capacity Block: its training plan (``training_plan``, default
    :func:`~kimi_k3.offline.fixtures.default_training_plan`) answers its ``DescribeTrainingPlan``.
    Another project's program gets ``training_plan_for(ref)`` for whatever plan it reads
    (default: a scheduled one-instance ``ml.p6-b300.48xlarge`` plan in the region's first AZ).
    """
    config = project_files.read_stack_config(project, stack, config_overrides)
    settings = None
    if project.uses_kimi_k3_settings:
        settings = stack_settings.from_values(config.values, config.secret_keys, project=PROJECT, stack=config.stack)
    project_files.check_declarations(project, config)
    region = settings.region if settings else stack_region(config.values)
    if settings is not None and settings.hyperpod is not None:
        plan = training_plan(settings) if callable(training_plan) else training_plan or default_training_plan(settings, now)
        engine = OfflineEngine(now=now, region=region, training_plan=plan, **{"plan_rules": True, **dict(engine_options or {})})
    elif settings is not None:
        fixture = reservation(settings) if callable(reservation) else reservation or default_reservation(settings, now)
        engine = OfflineEngine(now=now, region=region, reservation=fixture, **{"plan_rules": True, **dict(engine_options or {})})
    else:
        if reservation_for is None:
            def reservation_for(rid: str) -> ReservationFixture:
                return ReservationFixture(id=rid, availability_zone=f"{region}a", start=next_block_start(now))

        if training_plan_for is None:
            def training_plan_for(ref: str) -> TrainingPlanFacts:
                return rehearsal_facts(training_plan_arn(ref, region), availability_zone=f"{region}a", start=next_block_start(now))

        fixed = reservation if isinstance(reservation, ReservationFixture) else None
        engine = OfflineEngine(
            now=now, region=region, reservation=fixed, reservation_for=reservation_for, training_plan_for=training_plan_for, **{"plan_rules": True, **dict(engine_options or {})}
        )
    result = engine.run(
        _run_python_program(project.program), config=config.values, secret_keys=config.secret_keys, project=project.name, stack=config.stack
    )
    result.settings = settings
    result.secret_keys = config.secret_keys
    result.warnings = [*(absent_secret_warning(key, config.stack) for key in sorted(config.absent_secrets)), *result.warnings]
    return result


def absent_secret_warning(key: str, stack: str) -> str:
    """What the plan says about a declared secret the stack file does not hold (CI sets it)."""
    return (
        f"{key} is not in stack {stack}'s file: `pulumi up` refuses a missing value, so set it before preview/up with "
        f"`pulumi config set --secret {key} -s {stack}` (CI: tools/ci-stack-secrets.sh); a marked placeholder stood in offline"
    )


def run_stack(
    stack: str,
    *,
    now: datetime,
    root: Path | None = None,
    reservation: ReservationFixture | Callable[[stack_settings.StackSettings], ReservationFixture] | None = None,
    config_overrides: Mapping[str, Any] | None = None,
    engine_options: Mapping[str, Any] | None = None,
    program: Path | None = None,
    training_plan: TrainingPlanSource | None = None,
) -> PlanResult:
    """Run this repository's ``__main__.py`` for ``stacks/Pulumi.<stack>.yaml`` (:func:`run_project` of its project).

    ``root`` is another project directory of the same layout; ``program`` another program
    file; ``config_overrides`` (``{"kimi-k3:key": value}``, ``None`` deletes) rehearse
    other values without editing the stack file; ``training_plan`` is a ``hyperpod`` stack's plan.
    """
    project = project_files.load_project(root) if root is not None else project_files.library_project()
    if program is not None:
        project = dataclasses.replace(project, program=program)
    return run_project(
        project, stack, now=now, reservation=reservation, config_overrides=config_overrides, engine_options=engine_options, training_plan=training_plan
    )
