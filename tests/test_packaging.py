"""What installs the project stays the same whatever the date: every requirement is an exact pin.

An unpinned build backend is the same clock-dependence as a test reading the wall clock: setuptools
turns deprecations into errors on announced dates (the TOML-table ``project.license`` from
2027-02-18), so a checkout that installs today would stop installing then.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())


def _requirements() -> list[tuple[str, str]]:
    found = [("build-system.requires", r) for r in PYPROJECT["build-system"]["requires"]]
    found += [("project.dependencies", r) for r in PYPROJECT["project"]["dependencies"]]
    for extra, reqs in PYPROJECT["project"].get("optional-dependencies", {}).items():
        found += [(f"project.optional-dependencies.{extra}", r) for r in reqs]
    return found


@pytest.mark.parametrize("where,requirement", _requirements())
def test_every_requirement_is_an_exact_pin(where, requirement):
    specifiers = list(Requirement(requirement).specifier)
    assert len(specifiers) == 1 and specifiers[0].operator == "==", f"{where}: {requirement!r} is not pinned with =="


def test_the_license_is_an_spdx_expression_not_the_table_setuptools_refuses():
    assert isinstance(PYPROJECT["project"]["license"], str)
