"""Every field of a public record carries an attribute docstring.

A record's fields are the arguments of its constructor, and the project's standard is a
docstring on every public class and argument. ruff's pydocstyle rules (the ``D1`` family in
pyproject.toml) check modules, classes and functions but not attributes, so this test reads
the fields: every annotated field of a public dataclass or NamedTuple in the library is
followed by a string (PEP 257's attribute docstring, which IDEs and Sphinx show).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("components", "policy")


def _is_record(cls: ast.ClassDef) -> bool:
    for decorator in cls.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (isinstance(target, ast.Name) and target.id == "dataclass") or (isinstance(target, ast.Attribute) and target.attr == "dataclass"):
            return True
    return any(isinstance(base, ast.Name) and base.id == "NamedTuple" for base in cls.bases)


def _is_class_var(annotation: ast.expr) -> bool:
    target = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return (isinstance(target, ast.Name) and target.id == "ClassVar") or (isinstance(target, ast.Attribute) and target.attr == "ClassVar")


def undocumented_fields(source: str) -> Iterator[str]:
    """``Class.field`` for each public record field of ``source`` with no docstring right after it."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef) or node.name.startswith("_") or not _is_record(node):
            continue
        for statement, following in zip(node.body, [*node.body[1:], None], strict=True):
            if not isinstance(statement, ast.AnnAssign) or not isinstance(statement.target, ast.Name):
                continue
            if statement.target.id.startswith("_") or _is_class_var(statement.annotation):
                continue
            documented = isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant) and isinstance(following.value.value, str)
            if not documented:
                yield f"{node.name}.{statement.target.id}"


def _library_files() -> list[Path]:
    return sorted(path for folder in LIBRARY for path in (ROOT / folder).rglob("*.py") if "data" not in path.relative_to(ROOT).parts)


def test_the_checker_finds_an_undocumented_field_and_passes_a_documented_one():
    source = '''
from dataclasses import dataclass
import dataclasses
from typing import ClassVar, NamedTuple

@dataclass(frozen=True)
class Window:
    """A window."""

    start: int
    """Start, in seconds."""
    end: int
    KIND: ClassVar[str] = "w"
    _cache: int = 0

@dataclasses.dataclass
class Other:
    """Another."""

    size: int

class Chart(NamedTuple):
    """A chart."""

    version: str

class _Private(NamedTuple):
    hidden: str

class Plain:
    """Not a record: its annotations are not constructor arguments."""

    note: str
'''
    assert list(undocumented_fields(source)) == ["Window.end", "Other.size", "Chart.version"]


def test_every_public_record_field_has_a_docstring():
    missing = [
        f"{path.relative_to(ROOT)}: {field}"
        for path in _library_files()
        for field in undocumented_fields(path.read_text(encoding="utf-8"))
    ]
    assert not missing, "public record fields without a docstring:\n" + "\n".join(missing)
