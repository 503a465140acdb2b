"""Pulumi projects written into a temporary directory, as a user of the package would have them."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import ROOT


def copy_library_project(dest: Path, stacks: dict[str, str] | None = None, *, policy: bool = True) -> Path:
    """This repository's program (Pulumi.yaml, __main__.py) in ``dest``, with its stacks or the given stack files.

    ``stacks`` maps a stack name to the text of its ``stacks/Pulumi.<name>.yaml``;
    ``policy`` copies ``policy/config/*.json`` too.
    """
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, dest / name)
    (dest / "stacks").mkdir(exist_ok=True)
    if stacks is None:
        stacks = {p.name[len("Pulumi.") : -len(".yaml")]: p.read_text() for p in (ROOT / "stacks").glob("Pulumi.*.yaml")}
    for stack, text in stacks.items():
        (dest / "stacks" / f"Pulumi.{stack}.yaml").write_text(text)
    if policy:
        shutil.copytree(ROOT / "policy" / "config", dest / "policy" / "config", dirs_exist_ok=True)
    return dest


def library_stack(stack: str) -> str:
    """The text of this repository's ``stacks/Pulumi.<stack>.yaml``."""
    return (ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text()


def write_project(dest: Path, *, pulumi_yaml: str, program: str, stacks: dict[str, str], stack_dir: str = ".") -> Path:
    """A project of one's own: ``Pulumi.yaml``, ``__main__.py`` and stack files (in ``stack_dir``)."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "Pulumi.yaml").write_text(pulumi_yaml)
    (dest / "__main__.py").write_text(program)
    (dest / stack_dir).mkdir(parents=True, exist_ok=True)
    for stack, text in stacks.items():
        (dest / stack_dir / f"Pulumi.{stack}.yaml").write_text(text)
    return dest
