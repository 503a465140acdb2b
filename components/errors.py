"""Errors that end a run with one clear message instead of a traceback.

Three kinds, one style (``<what> <value> is not accepted; <what is>``):

- :class:`SettingsError`: a stack config value (the settings layer names the key);
- :class:`ComponentInputError`: a component's own args, each problem with the property
  path of the arg as the component names it, collected by :class:`Problems`;
- :class:`UserError`: anything else the user can fix (a flag, AWS answering no).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pulumi

from kimi_k3.core.arg_types import type_problems
from kimi_k3.core.example_values import example_findings
from kimi_k3.core.suggest import nearest


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


_Args = TypeVar("_Args", bound=type)

SECRET_FIX = 'pass a Pulumi secret: pulumi.Config().require_secret("<key>") for a stack secret, or pulumi.Output.secret(value)'
"""How to pass a secret arg, said where a plain ``str`` is refused (a plain value would be kept in clear text in the state)."""


def checked_args(cls: _Args | None = None, *, secrets: tuple[str, ...] = ()) -> Any:
    """Class decorator of a public args dataclass: its field types, checked on construction against its annotations.

    A wrong type (:func:`kimi_k3.core.arg_types.type_problems`), an unknown keyword (with the nearest field), a missing
    required field or a plain ``str`` in one of ``secrets`` raises :class:`ComponentInputError` naming the args class and
    the field, as the args are built: no traceback further in. Built by a program of one's own (not by this library,
    whose stack path lints the stack file instead), every string field holding an example value
    (:func:`kimi_k3.core.example_values.example_findings`) is logged as a warning, as ``kimi-k3 plan`` warns for a stack file.
    """

    def decorate(klass: _Args) -> _Args:
        original: Callable[..., None] = klass.__init__  # type: ignore[misc]
        signature = inspect.signature(original)

        @functools.wraps(original)
        def checked_init(self: Any, *args: Any, **kwargs: Any) -> None:
            try:
                signature.bind(self, *args, **kwargs)
            except TypeError as err:
                raise ComponentInputError(klass.__name__, None, [_call_problem(klass, str(err))]) from None
            original(self, *args, **kwargs)
            if type(self) is not klass:
                return
            found = [Problem(path, reason) for path, reason in type_problems(self, secrets)]
            for name in secrets:
                if isinstance(getattr(self, name), str):
                    found.append(Problem(name, f"{name} is a plain str, not a secret: {SECRET_FIX}"))
            if found:
                raise ComponentInputError(klass.__name__, None, found)
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if not str(caller).startswith("kimi_k3."):
                for warning in example_value_warnings(self, secrets):
                    pulumi.log.warn(warning)

        klass.__init__ = checked_init  # type: ignore[misc]
        return klass

    return decorate if cls is None else decorate(cls)


def _call_problem(klass: type, message: str) -> Problem:
    """The problem of a call the args' signature refuses (an unknown keyword, a missing field)."""
    fields = [f.name for f in dataclasses.fields(klass)]
    unknown = re.search(r"unexpected keyword argument '(\w+)'", message)
    if unknown:
        near = nearest(unknown[1], fields)
        hint = f"did you mean {near}?" if near else f"its fields: {', '.join(fields)}"
        return Problem(unknown[1], f"{unknown[1]} is not an argument of {klass.__name__}; {hint}")
    missing = re.search(r"missing a required argument: '(\w+)'", message)
    if missing:
        return Problem(missing[1], f"{missing[1]} is required (it has no default)")
    return Problem("args", f"{message} (fields, by keyword: {', '.join(fields)})")


def _strings_in(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """``(path, text)`` of every str inside a field's value (sequences and mappings looked into, Outputs not)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings_in(item, f"{path}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _strings_in(item, f"{path}[{index}]")


def example_value_warnings(args: Any, secrets: tuple[str, ...] = ()) -> list[str]:
    """One warning per field of the args dataclass ``args`` holding an example value (secret fields are never read)."""
    warnings = []
    for field in dataclasses.fields(args):
        if field.name in secrets:
            continue
        for path, text in _strings_in(getattr(args, field.name), field.name):
            for finding in example_findings(text):
                warnings.append(f"{type(args).__name__}.{path} holds {finding}: an example value left in the program; replace it with your own")
    return warnings


__all__ = [
    "SECRET_FIX",
    "ComponentInputError",
    "Problem",
    "Problems",
    "SettingsError",
    "UserError",
    "checked_args",
    "example_value_warnings",
]
