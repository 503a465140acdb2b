"""Errors that end a run with one clear message instead of a traceback.

Three kinds, one style (``<what> <value> is not accepted; <what is>``):

- :class:`SettingsError`: a stack config value (the settings layer names the key);
- :class:`ComponentInputError`: a component's own args, each problem with the property
  path of the arg as the component names it, collected by :class:`Problems`;
- :class:`UserError`: anything else the user can fix (a flag, AWS answering no).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi


class UserError(pulumi.RunError):
    """A mistake the user can fix (bad config, bad flag, unreachable AWS).

    Subclasses ``pulumi.RunError`` so that under ``pulumi up`` the engine prints
    only the message, and the ``kimi-k3`` CLI prints it as one line and exits 2.
    """


class SettingsError(UserError):
    """A stack config value that is missing, malformed or not accepted.

    The message always names the key, the bad value and what is accepted.
    """

    def __init__(self, key: str, value: object, accepted: str) -> None:
        """``key`` the config key (``aws:region``), ``value`` its bad value (None: not set), ``accepted`` what is accepted instead."""
        self.key = key
        self.value = value
        self.accepted = accepted
        shown = "(not set)" if value is None else repr(value)
        # A URL's password (redis://user:password@host) is never shown.
        message = re.sub(r"(://[^/\s:@'\"]+:)[^@\s'\"]+@", r"\1***@", f"config {key}: {shown} is not accepted; {accepted}")
        super().__init__(message)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a component's args."""

    path: str
    """Property path of the arg, as the component's args name it (``root_volume_gib``, ``nvidia.version``, ``admin_role_arns[1]``)."""
    reason: str
    """One sentence that starts with the path: ``<path> <value> is not accepted; <what is>`` or ``<path> is required ...``."""


class ComponentInputError(UserError, pulumi.InputPropertiesError):
    """A component's args that cannot work, every problem at once, phrased in the component's own args.

    Both a :class:`UserError` and a ``pulumi.InputPropertiesError`` (pulumi 3.272,
    ``pulumi/errors.py``): as a ``RunError`` it prints as one line under ``pulumi up``
    (the Python language host logs ``str(e)`` of a ``RunError`` and a traceback for any
    other exception: ``sdk/python/cmd/pulumi-language-python-exec``) and in the
    ``kimi-k3`` CLI; as an ``InputPropertiesError`` it carries ``errors``, one
    ``{"property_path", "reason"}`` per problem, for tools that list them. A
    composition that knows which config key set an arg (the platform) names the key
    itself; the component never does.
    """

    def __init__(self, component: str, name: str | None, problems: Sequence[Problem]) -> None:
        """``component`` the component's type name (``CapacityBlockNodeGroup``) or args class (``ClusterArgs``), ``name`` its
        resource name (``None`` for an args class refused as it is constructed), ``problems`` every problem found."""
        self.component = component
        self.name = name
        self.problems = tuple(problems)
        who = component if name is None else f"{component} {name!r}"
        if len(self.problems) == 1:
            message = f"{who}: {self.problems[0].reason}"
        else:
            listed = " ".join(f"({i}) {p.reason}" for i, p in enumerate(self.problems, start=1))
            message = f"{who} has {len(self.problems)} problems: {listed}"
        super().__init__(message, [{"property_path": p.path, "reason": p.reason} for p in self.problems])


class Problems:
    """Collects the problems with one component's args, then raises them together.

    ::

        problems = Problems("CapacityBlockNodeGroup", name)
        if args.root_volume_gib < 20:
            problems.reject("root_volume_gib", args.root_volume_gib, "expected 20..16384 GiB (gp3)")
        problems.raise_any()
    """

    def __init__(self, component: str, name: str) -> None:
        """Collect for the component ``component`` (its type name, ``CapacityBlockNodeGroup``) named ``name``."""
        self.component = component
        self.name = name
        self.found: list[Problem] = []

    def reject(self, path: str, value: object, accepted: str) -> None:
        """``<path> <value> is not accepted; <accepted>``."""
        self.found.append(Problem(path, f"{path} {value!r} is not accepted; {accepted}"))

    def add(self, path: str, reason: str) -> None:
        """A problem in other words; ``reason`` starts with ``path`` (``api_key is required ...``)."""
        self.found.append(Problem(path, reason))

    def adopt(self, path: str, error: UserError) -> None:
        """A rule another module owns refused ``path``: keep its message as the reason."""
        self.found.append(Problem(path, str(error)))

    def __bool__(self) -> bool:
        return bool(self.found)

    def raise_any(self) -> None:
        """Raise :class:`ComponentInputError` with every problem found so far (nothing when there is none)."""
        if self.found:
            raise ComponentInputError(self.component, self.name, self.found)


def warn(message: str) -> None:
    """Log ``message`` at warning level through the Pulumi engine (``pulumi up`` and ``kimi-k3 plan`` show it)."""
    pulumi.log.warn(message)


__all__ = ["ComponentInputError", "Problem", "Problems", "SettingsError", "UserError", "warn"]
