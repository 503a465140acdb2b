"""Which policy config a stack is judged under: its environment's, or its own file, never weaker in prod.

``policy/config/<environment>.json`` (``kimi-k3:environment``: dev, prod) is the
config of every stack of that environment, so a copy of the dev stack under a new name
(``Pulumi.alice.yaml``) is judged as dev. ``policy/config/<stack>.json``, when it exists,
overrides it for that one stack; on a prod stack the override may only raise the rules
(a higher enforcement level), never lower a level or change a property: a prod stack can
never be weakened by a file name. Without either file the pack's defaults apply (the
production settings).

A stack of another project (no ``kimi-k3:environment``) has no environment: only its own
``policy/config/<stack>.json`` applies, else the defaults.

``python -m kimi_k3.guardrails.stack_policy STACK`` prints the file ``pulumi preview
--policy-pack-config`` should get for a stack of the project in the current directory
(CI passes it to the pack).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path

from pulumi_policy import EnforcementLevel

from kimi_k3.errors import UserError
from kimi_k3.guardrails.verdict import PolicyCheck, PolicySetting
from kimi_k3.stack import project as stack_project
from kimi_k3.stack.settings import ENVIRONMENTS

ENVIRONMENT_KEY = "kimi-k3:environment"
"""The stack setting the policy config is keyed on."""

STRICTNESS = {
    EnforcementLevel.DISABLED: 0,
    EnforcementLevel.ADVISORY: 1,
    EnforcementLevel.MANDATORY: 2,
    EnforcementLevel.REMEDIATE: 2,  # reported as mandatory (the analyzer's downgrade)
}
"""How strict each enforcement level is."""


def config_dir(project: stack_project.Project) -> Path:
    """``<project>/policy/config``."""
    return project.directory / "policy" / "config"


def policy_files(project: stack_project.Project, stack: str, environment: str | None) -> tuple[Path | None, Path | None]:
    """The stack's own file and its environment's file, each ``None`` when absent."""
    directory = config_dir(project)
    own = directory / f"{stack_project.short_stack_name(stack)}.json"
    shared = directory / f"{environment}.json" if environment else None
    return (own if own.is_file() else None), (shared if shared is not None and shared.is_file() else None)


def _weakening(override: Mapping[str, PolicySetting], floor: Mapping[str, PolicySetting]) -> str | None:
    """The first way ``override`` is weaker than ``floor`` (a lower level or another property), or ``None``."""
    for name in sorted(floor):
        low, high = override[name], floor[name]
        if STRICTNESS[low.level] < STRICTNESS[high.level]:
            return f"{name} is {low.level.value}, below {high.level.value}"
        for prop in sorted(set(high.properties) | set(low.properties)):
            if low.properties.get(prop) != high.properties.get(prop):
                return f"{name}.{prop} is {low.properties.get(prop)!r}, not {high.properties.get(prop)!r}"
    return None


def stack_policy(project: stack_project.Project, stack: str, environment: str | None) -> PolicyCheck:
    """The pack under the stack's policy config (module docstring); a prod override that weakens is one :class:`UserError`."""
    name = stack_project.short_stack_name(stack)
    own, shared = policy_files(project, stack, environment)
    if own is None or own == shared:
        check = PolicyCheck.from_file(shared)
        basis = f"environment {environment}" if shared is not None else ""
        return dataclasses.replace(check, basis=basis)
    check = PolicyCheck.from_file(own)
    if environment == "prod":
        weaker = _weakening(check.settings, PolicyCheck.from_file(shared).settings)
        if weaker is not None:
            floor = shared or config_dir(project) / "prod.json"
            floor_name = floor.name if shared else "the pack's defaults"
            raise UserError(
                f"policy config {own}: {weaker} of {floor_name}: stack {name} is environment prod "
                f"({ENVIRONMENT_KEY}), and a stack's own file may only raise a prod stack's rules; change {floor}, "
                f"which every prod stack shares, or remove {own.name}"
            )
    basis = f"stack {name}'s own file, over environment {environment}" if environment else f"stack {name}'s own file"
    return dataclasses.replace(check, basis=basis)


def stack_environment(values: Mapping[str, str]) -> str | None:
    """The stack's ``kimi-k3:environment`` when it is one the settings accept (they refuse any other value)."""
    value = values.get(ENVIRONMENT_KEY)
    return value if value in ENVIRONMENTS else None


def policy_config_path(stack: str, cwd: Path | None = None) -> Path | None:
    """The file ``pulumi preview --policy-pack-config`` should get for ``stack`` (``None``: the pack's defaults)."""
    project = stack_project.find_project(None, cwd or Path.cwd())
    config = stack_project.read_stack_config(project, stack)
    environment = stack_environment(config.stack_values)
    stack_policy(project, stack, environment)  # a prod override that weakens is refused here too
    own, shared = policy_files(project, stack, environment)
    return own or shared


def main(argv: list[str] | None = None) -> int:
    """Print the stack's policy config path (empty: none, the pack's defaults); exit 2 on a mistake."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m kimi_k3.guardrails.stack_policy STACK", file=sys.stderr)
        return 2
    try:
        path = policy_config_path(args[0])
    except UserError as err:
        print(f"kimi-k3: error: {err}", file=sys.stderr)
        return 2
    print(path or "")
    return 0


if __name__ == "__main__":  # pragma: no cover - the CLI entry
    raise SystemExit(main())


__all__ = ["ENVIRONMENT_KEY", "config_dir", "main", "policy_config_path", "policy_files", "stack_environment", "stack_policy"]
