"""The check every public args dataclass runs as it is constructed: :func:`checked_args`.

Field types against the class's own annotations (:mod:`kimi_k3.core.arg_types`), the call's keywords against its
fields, plain-text secrets, and example values left in one's own program (:mod:`kimi_k3.core.example_values`).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, TypeVar, overload

from kimi_k3.core.arg_types import describe, mismatch, parameter_types, type_name, type_problems, value_shown
from kimi_k3.core.clock import naive_problem
from kimi_k3.core.example_values import example_findings
from kimi_k3.core.suggest import nearest
from kimi_k3.errors import ComponentInputError, Problem, warn

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
                bound = signature.bind(self, *args, **kwargs)
            except TypeError as err:
                raise ComponentInputError(klass.__name__, None, [_call_problem(klass, str(err))]) from None
            given = {name: value for name, value in bound.arguments.items() if name != "self"}  # checked before __post_init__ reads them
            found = [Problem(path, reason) for path, reason in type_problems(klass, given, secrets)]
            for name in secrets:
                if isinstance(given.get(name), str):
                    found.append(Problem(name, f"{name} is a plain str, not a secret: {SECRET_FIX}"))
            if found:
                raise ComponentInputError(klass.__name__, None, found)
            original(self, *args, **kwargs)
            if not str(_caller(sys._getframe(1))).startswith("kimi_k3."):
                for warning in example_value_warnings(self, secrets):
                    warn(warning)

        klass.__init__ = checked_init  # type: ignore[misc]
        return klass

    return decorate if cls is None else decorate(cls)


def checked_component(cls: _Args | None = None, *, called: str | None = None) -> Any:
    """Class decorator of a public component: what its constructor is given, checked against its ``__init__``'s annotations.

    ``Cluster("c", "notargs")``, ``VllmServer("x", {})``, ``args=None``, a name that is not a ``str`` or ``opts`` that are
    not ``pulumi.ResourceOptions`` raise :class:`ComponentInputError` naming the component (``called``, where the user
    calls it by another name: ``Network.from_existing``), the parameter, the value's type and what is accepted (the args
    class), before the component reads an arg: one line, no ``AttributeError`` traceback further in.
    """

    def decorate(klass: _Args) -> _Args:
        original: Callable[..., None] = klass.__init__  # type: ignore[misc]
        signature = inspect.signature(original)
        component = called or klass.__name__

        @functools.wraps(original)
        def checked_init(self: Any, *args: Any, **kwargs: Any) -> None:
            found = _constructor_problems(klass, original, signature, component, (self, *args), kwargs)
            if found:
                name = kwargs.get("name", args[0] if args else None)
                raise ComponentInputError(component, name if isinstance(name, str) else None, found)
            original(self, *args, **kwargs)

        klass.__init__ = checked_init  # type: ignore[misc]
        return klass

    return decorate if cls is None else decorate(cls)


def _constructor_problems(
    klass: type, original: Callable[..., None], signature: inspect.Signature, component: str, args: tuple[Any, ...], kwargs: dict[str, Any],
) -> list[Problem]:
    """The problems of one constructor call: its binding, then each parameter's type."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as err:
        message = str(err)
        missing = re.search(r"missing a required (?:keyword-only )?argument: '(\w+)'", message)
        if missing:
            expected = describe(parameter_types(original, klass.__module__).get(missing[1], Any))
            return [Problem(missing[1], f"{missing[1]} is required: {expected}, as in {component}(name, ...)")]
        return [Problem("args", f"{message} ({component} takes {', '.join(p for p in signature.parameters if p != 'self')})")]
    annotations = parameter_types(original, klass.__module__)
    found = []
    for parameter, value in bound.arguments.items():
        if parameter == "self" or parameter not in annotations:
            continue
        wrong = mismatch(value, annotations[parameter], parameter)
        if wrong is None:
            naive = naive_problem(parameter, value) if isinstance(value, datetime) else None
            if naive:  # Platform(name, settings, now=datetime.now()): local time, hours off the block's window
                found.append(Problem(parameter, naive))
            continue
        _, _, expected = wrong
        shown = "None" if value is None else f"{value_shown(value)} ({type_name(value)})"
        build = f": {component}(name, {_bare_name(expected)}(...))" if parameter == "args" else ""
        found.append(Problem(parameter, f"{parameter} {shown} is not accepted; expected {describe(annotations[parameter])}{build}"))
    return found


_Function = TypeVar("_Function", bound=Callable[..., Any])


@overload
def checked_function(function: _Function, /) -> _Function: ...
@overload
def checked_function(*, called: str | None = None) -> Callable[[_Function], _Function]: ...
def checked_function(function: Any = None, *, called: str | None = None) -> Any:
    """Decorator of a public function one's own program calls (``assess``, ``verdict``, ``lookup_capacity_block``): its
    arguments checked against its annotations as it is called, the same check the args classes and components run.

    A value of the wrong type (a sequence's item named by its index), a missing argument, an unknown keyword (with the
    nearest parameter) or a ``datetime`` without a timezone (:func:`kimi_k3.core.clock.naive_problem`) raises
    :class:`ComponentInputError` naming the function (``called``, where the user calls it by another name), the
    argument, the value and its type and what is accepted, before the function reads it: one line, no
    ``AttributeError`` traceback further in.
    """

    def decorate(func: _Function) -> _Function:
        signature = inspect.signature(func)
        shown = called or func.__name__

        @functools.wraps(func)
        def checked_arguments(*args: Any, **kwargs: Any) -> Any:
            found = _call_problems(func, signature, shown, args, kwargs)
            if found:
                raise ComponentInputError(shown, None, found)
            return func(*args, **kwargs)

        return checked_arguments  # type: ignore[return-value]

    return decorate if function is None else decorate(function)


def _call_problems(func: Callable[..., Any], signature: inspect.Signature, shown: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Problem]:
    """The problems of one call of a checked function: its binding, then each argument's type and, for a datetime, its timezone."""
    parameters = [p for p in signature.parameters if p not in ("self", "cls")]
    annotations = parameter_types(func, func.__module__)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as err:
        return [_binding_problem(str(err), shown, signature, annotations)]
    found = []
    for parameter, value in bound.arguments.items():
        if parameter not in parameters or parameter not in annotations:
            continue
        wrong = mismatch(value, annotations[parameter], parameter)
        if wrong is not None:
            path, there, expected = wrong
            of_type = "None" if there is None else f"{value_shown(there)} ({type_name(there)})"
            found.append(Problem(parameter, f"{path} {of_type} is not accepted; expected {describe(expected)}"))
        elif isinstance(value, datetime):
            naive = naive_problem(parameter, value)
            if naive:
                found.append(Problem(parameter, naive))
    return found


def _binding_problem(message: str, shown: str, signature: inspect.Signature, annotations: Mapping[str, Any]) -> Problem:
    """The problem of a call the function's signature refuses: a missing argument, an unknown keyword, too many."""
    parameters = [p for p in signature.parameters if p not in ("self", "cls")]
    required = [p.name for p in signature.parameters.values() if p.name in parameters and p.default is inspect.Parameter.empty]
    usage = f"{shown}({', '.join(required)})"
    missing = re.search(r"missing a required (?:keyword-only )?argument: '(\w+)'", message)
    if missing:
        return Problem(missing[1], f"{missing[1]} is required: {describe(annotations.get(missing[1], Any))}, as in {usage}")
    unknown = re.search(r"unexpected keyword argument '(\w+)'", message)
    if unknown:
        near = nearest(unknown[1], parameters)
        hint = f"did you mean {near}?" if near else f"its arguments: {', '.join(parameters)}"
        return Problem(unknown[1], f"{unknown[1]} is not an argument of {shown}; {hint}")
    return Problem("args", f"{message} ({shown} takes {', '.join(parameters)}, as in {usage})")


def _bare_name(annotation: Any) -> str:
    """The class name of an annotation that is one class (``ClusterArgs``); else its description."""
    return annotation.__name__ if isinstance(annotation, type) else describe(annotation)


def _caller(frame: Any) -> str:
    """The module that built the args (past ``dataclasses.replace``, which builds them for its own caller)."""
    while frame is not None and frame.f_globals.get("__name__") == "dataclasses":
        frame = frame.f_back
    return str(frame.f_globals.get("__name__", "")) if frame is not None else ""


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


__all__ = ["SECRET_FIX", "checked_args", "checked_component", "checked_function", "example_value_warnings"]
