"""Field types of an args dataclass, checked against its own annotations (pure: no Pulumi, no library import).

One helper for every public ``*Args`` class (:func:`kimi_k3.core.args_check.checked_args` applies it on
construction): a value whose type the field's annotation does not admit is one problem naming the
field, the value's type and what is accepted. A ``str`` where a sequence is expected is one problem
(never one per character); ``bool`` is not an ``int``; an ``int`` is a ``float``; list and tuple
stand for each other (a ``Sequence``); anything an annotation does not pin (``Any``, a name only
imported for type checking) is not checked.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import re
import sys
import types
import typing
from collections.abc import Mapping
from typing import Any

_UNCHECKED = object()
"""An annotation this module does not check (``Any``, a type variable, a name it cannot resolve)."""

_SEQUENCES = (collections.abc.Sequence, collections.abc.Iterable, collections.abc.Collection, list, tuple)
_MAPPINGS = (collections.abc.Mapping, dict)


_FIELD_TYPES: dict[type, dict[str, Any]] = {}


def field_types(cls: type) -> dict[str, Any]:
    """``{field: annotation}`` of the dataclass ``cls`` (each string annotation evaluated in its module; unresolvable: unchecked)."""
    if cls not in _FIELD_TYPES:
        _FIELD_TYPES[cls] = _annotations(cls)
    return _FIELD_TYPES[cls]


def _annotations(cls: type) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        namespace = vars(sys.modules[klass.__module__]) if klass.__module__ in sys.modules else {}
        for name, annotation in vars(klass).get("__annotations__", {}).items():
            if isinstance(annotation, str):
                try:
                    annotation = eval(annotation, dict(namespace), {})  # the class's own annotation, in its own module
                except Exception:  # a name imported only under TYPE_CHECKING: not checked
                    annotation = _UNCHECKED
            found[name] = annotation
    return {f.name: found.get(f.name, _UNCHECKED) for f in dataclasses.fields(cls)}


def parameter_types(func: Any, module: str) -> dict[str, Any]:
    """``{parameter: annotation}`` of ``func`` (a component's ``__init__``), each string annotation evaluated in the module
    ``module`` (unresolvable: unchecked); ``self`` is left out. Evaluated once per function, at its first call."""
    if func in _PARAMETER_TYPES:
        return _PARAMETER_TYPES[func]
    namespace = vars(sys.modules[module]) if module in sys.modules else {}
    found: dict[str, Any] = {}
    for name, annotation in getattr(func, "__annotations__", {}).items():
        if name in ("self", "return"):
            continue
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, dict(namespace), {})  # the component's own annotation, in its own module
            except Exception:  # a name imported only under TYPE_CHECKING: not checked
                annotation = _UNCHECKED
        found[name] = annotation
    _PARAMETER_TYPES[func] = found
    return found


_PARAMETER_TYPES: dict[Any, dict[str, Any]] = {}


def describe(annotation: Any) -> str:
    """What an annotation accepts, in words a user reads (``a str``, ``a sequence of str``, ``None``)."""
    if annotation is _UNCHECKED or annotation is Any:
        return "anything"
    if annotation is type(None) or annotation is None:
        return "None"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if _is_pulumi_input(members):  # pulumi.Input[T]: T, an Awaitable of it or an Output of it
            text = f"{describe(_input_of(members))} or a pulumi.Output of it"
        else:
            text = " or ".join(dict.fromkeys(describe(a) for a in members))
        return f"{text} or None" if len(members) < len(args) else text
    if origin is tuple and args and args[-1] is not Ellipsis:  # a fixed-length tuple: a pair, a triple
        return f"a tuple ({', '.join(_bare(_plain(describe(a))) for a in args)})"
    if origin in _SEQUENCES:
        inner = args[0] if args else Any
        return f"a sequence of {_bare(_plain(describe(inner)))} (a list or tuple, not a str)"
    if origin in _MAPPINGS:
        key, value = args if len(args) == 2 else (Any, Any)
        return f"a mapping of {_bare(describe(key))} to {_bare(describe(value))}"
    if origin is typing.Literal:
        return "one of " + ", ".join(map(repr, args))
    if origin is collections.abc.Awaitable:
        return f"an awaitable of {_bare(describe(args[0] if args else Any))}"
    if origin is not None and isinstance(origin, type):
        return _article(origin.__name__)
    if isinstance(annotation, type):
        return _article("int (a whole number)" if annotation is int else annotation.__name__)
    return "anything"


def _plain(text: str) -> str:
    """A nested description without its own "(a list or tuple, not a str)": the outer one says it once."""
    return text.replace(" (a list or tuple, not a str)", "")


def _bare(text: str) -> str:
    return text.removeprefix("a ").removeprefix("an ")


def _article(name: str) -> str:
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _is_pulumi_input(members: list[Any]) -> bool:
    origins = {typing.get_origin(m) for m in members}
    return collections.abc.Awaitable in origins and any(getattr(o, "__name__", "") == "Output" for o in origins if o is not None)


def _input_of(members: list[Any]) -> Any:
    plain = [m for m in members if typing.get_origin(m) is not collections.abc.Awaitable and getattr(typing.get_origin(m), "__name__", "") != "Output"]
    return plain[0] if len(plain) == 1 else typing.Union[tuple(plain)] if plain else Any  # noqa: UP007 - built from a tuple


def mismatch(value: Any, annotation: Any, path: str) -> tuple[str, Any, Any] | None:
    """The first place ``value`` is not what ``annotation`` admits: ``(path, value there, annotation there)``; ``None``: it fits."""
    if annotation is _UNCHECKED or annotation is Any or isinstance(annotation, typing.TypeVar):
        return None
    if annotation is None or annotation is type(None):
        return None if value is None else (path, value, annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        each = [mismatch(value, member, path) for member in args]
        if any(f is None for f in each):
            return None
        deeper = [f for f in each if f is not None and f[0] != path]  # the right container with a wrong item: name the item
        return deeper[0] if len(deeper) == 1 else (path, value, annotation)
    if origin is typing.Literal:
        return None if value in args else (path, value, annotation)
    if origin is typing.Annotated:
        return mismatch(value, args[0], path)
    if origin in _SEQUENCES:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, collections.abc.Sequence)):
            return (path, value, annotation)
        if origin is tuple and args and args[-1] is not Ellipsis:  # a fixed-length tuple
            if len(value) != len(args):
                return (path, value, annotation)
            items = list(zip(value, args, strict=True))
        else:
            items = [(item, args[0] if args else Any) for item in value]
        for index, (item, inner) in enumerate(items):
            found = mismatch(item, inner, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if origin in _MAPPINGS:
        if not isinstance(value, collections.abc.Mapping):
            return (path, value, annotation)
        key_type, value_type = args if len(args) == 2 else (Any, Any)
        for key, item in value.items():
            found = mismatch(key, key_type, f"{path} key {key!r}") or mismatch(item, value_type, f"{path}[{key!r}]")
            if found is not None:
                return found
        return None
    if origin is collections.abc.Awaitable:
        return None if isinstance(value, collections.abc.Awaitable) else (path, value, annotation)
    if origin is collections.abc.Callable or annotation is collections.abc.Callable:
        return None if callable(value) else (path, value, annotation)
    if origin is not None:
        return None if not isinstance(origin, type) or isinstance(value, origin) else (path, value, annotation)
    if not isinstance(annotation, type):
        return None
    if annotation is float:
        fits = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif annotation is int:
        fits = isinstance(value, int) and not isinstance(value, bool)
    else:
        fits = isinstance(value, annotation)
    return None if fits else (path, value, annotation)


def type_name(value: Any) -> str:
    """``None`` or the value's type name (``float``, ``str``)."""
    return "None" if value is None else type(value).__name__


def type_problems(cls: type, values: Mapping[str, Any], secret_fields: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """``(path, reason)`` for each of ``values`` (field name -> value given to the dataclass ``cls``) its field's annotation
    does not admit. A field of ``secret_fields`` never shows its value (``<the value>``)."""
    problems = []
    annotations = field_types(cls)
    for name, given in values.items():
        found = mismatch(given, annotations.get(name, _UNCHECKED), name)
        if found is None:
            continue
        path, value, expected = found
        shown = "<the value>" if name in secret_fields else _short(value)
        of_type = "" if value is None else f" ({type_name(value)})"
        problems.append((path, f"{path} {shown}{of_type} is not accepted; expected {describe(expected)}"))
    return problems


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
"""The memory address in a default ``repr`` (never the same twice: no message shows it)."""


def _shown(value: Any) -> str:
    """``repr`` with every Pulumi Output as ``<Output>`` (its repr holds a memory address: never the same twice)."""
    if type(value).__name__ == "Output":
        return "<Output>"
    if " object at 0x" in object.__repr__(value) and type(value).__repr__ is object.__repr__:  # a resource, a provider: no address in a message
        return f"<{type(value).__name__}>"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(map(_shown, value))
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, collections.abc.Mapping):
        return "{" + ", ".join(f"{_shown(k)}: {_shown(v)}" for k, v in value.items()) + "}"
    return _ADDRESS.sub("", repr(value))  # a function, a generator: <function assess>, never its address


def value_shown(value: Any) -> str:
    """The value as a refusal shows it: its ``repr``, Outputs as ``<Output>``, cut at 80 characters."""
    return _short(value)


def _short(value: Any, limit: int = 80) -> str:
    text = _shown(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = ["describe", "field_types", "mismatch", "parameter_types", "type_name", "type_problems", "value_shown"]
