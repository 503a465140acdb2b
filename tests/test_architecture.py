"""The structure drawn from the import graph (tools/import_graph.py): rooms by concept, one direction, no circles.

docs/architecture.md draws the rooms and their order; these tests hold the code to it.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "tools" / "import_graph.py")
assert _spec and _spec.loader
import_graph = importlib.util.module_from_spec(_spec)
sys.modules["import_graph"] = import_graph
_spec.loader.exec_module(import_graph)

MAX_LINES = 700
PENDING_SPLIT: set[str] = set()
"""Modules above :data:`MAX_LINES` whose split is under way (none once the settings are split by section)."""


@pytest.fixture(scope="module")
def graph():
    return import_graph.load()


def test_there_is_no_import_circle(graph):
    """No two modules import each other, counting type-only imports and imports inside functions."""
    assert graph.circles() == []


def test_no_room_imports_a_room_above_it(graph):
    assert graph.upward_imports() == []


def test_every_room_is_placed_in_the_layers_and_documented(graph):
    rooms = {graph.room(m) for m in graph.modules}
    assert rooms <= set(import_graph.LAYERS)
    architecture = (ROOT / "docs" / "architecture.md").read_text()
    assert [room for room in sorted(rooms - {"kimi_k3", "errors"}) if f"{room}/" not in architecture] == []


def room_edges_drawn(text: str) -> dict[str, set[str]]:
    """The table between ``<!-- room-edges -->`` and ``<!-- /room-edges -->``: room → the rooms it imports."""
    table = text.split("<!-- room-edges -->", 1)[1].split("<!-- /room-edges -->", 1)[0]
    rows = [line.split() for line in table.splitlines() if line.strip() and not line.startswith("```")]
    return {row[0]: set(row[1:]) for row in rows}


def test_the_architecture_page_draws_what_imports_what(graph):
    """docs/architecture.md's room-to-room table is the import graph's, so the page is the current map."""
    drawn = room_edges_drawn((ROOT / "docs" / "architecture.md").read_text())
    fresh = {room: targets for room, targets in graph.room_edges().items() if targets}
    table = "".join(f"{r:<14} {' '.join(x for x in import_graph.LAYERS if x in fresh[r])}\n" for r in import_graph.LAYERS if r in fresh)
    assert drawn == fresh, f"docs/architecture.md, 'What imports what': draw it as\n{table}"


def test_the_top_level_holds_at_most_twelve_modules(graph):
    assert len(graph.top_level_modules()) <= 12


def test_no_module_is_longer_than_seven_hundred_lines(graph):
    long = [path for lines, path in graph.largest(20) if lines > MAX_LINES]
    assert sorted(set(long) - PENDING_SPLIT) == []


def test_every_import_inside_a_function_says_why(graph):
    """Lazy imports stay only for start-up (a command, a stack kind or a pod subcommand loads what it uses), each with its reason."""
    missing = [f"{f.module}:{f.line} -> {f.target}" for f in graph.function_imports if not f.reason]
    assert missing == []


def _plant(tmp_path, files: dict[str, str]):
    """The import graph of a library tree made of ``files`` (path under ``components/`` → text)."""
    source = tmp_path / "components"
    for rel, text in files.items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(text)
    return import_graph.load(source)


def test_the_checker_sees_a_circle_behind_type_checking_or_a_function_import(tmp_path):
    """A circle closed only by a ``TYPE_CHECKING`` import, or only by an import inside a function, is a circle."""
    planted = _plant(tmp_path, {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/args.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kimi_k3.core.builder import B\n",
        "core/builder.py": "from kimi_k3.core import args\n",
        "core/cmd.py": "def f():\n    from kimi_k3.core import sub  # lazily\n    return sub\n",
        "core/sub.py": "from kimi_k3.core import cmd\n",
    })
    assert planted.circles() == [["kimi_k3.core.args", "kimi_k3.core.builder"], ["kimi_k3.core.cmd", "kimi_k3.core.sub"]]
    assert planted.type_edges == {"kimi_k3.core.args": {"kimi_k3.core.builder"}}


def test_the_checker_sees_a_planted_circle_and_an_upward_import(tmp_path):
    """The graph finds what it must: a circle between two modules and an import from core into stack."""
    planted = _plant(tmp_path, {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/a.py": "from kimi_k3.core import b\nfrom kimi_k3.stack import s\n",
        "core/b.py": "from kimi_k3.core import a\n",
        "stack/__init__.py": "",
        "stack/s.py": "def f():\n    from kimi_k3.core import a\n    return a\n",
    })
    assert planted.circles() == [["kimi_k3.core.a", "kimi_k3.core.b", "kimi_k3.stack.s"], ["room core", "room stack"]]  # s's lazy import closes it
    assert planted.upward_imports() == [("kimi_k3.core.a", "kimi_k3.stack.s")]
    assert [(f.module, f.reason) for f in planted.function_imports] == [("kimi_k3.stack.s", "")]


def private_imports(source) -> list[str]:
    """``path:line: name`` for each import of another module's ``_private`` name (or of a ``_private`` module) under ``source``,
    and each use of a ``_private`` attribute of an imported library module (``clock._PINNED``)."""
    import ast

    found = []
    for path in sorted(source.rglob("*.py")):
        if "data" in path.relative_to(source).parts:
            continue
        tree = ast.parse(path.read_text())
        modules: set[str] = set()  # names bound to a library module in this file
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(import_graph.PACKAGE):
                private = [p for p in (node.module or "").split(".") if p.startswith("_") and not p.startswith("__")]
                for alias in node.names:
                    if private or (alias.name.startswith("_") and not alias.name.startswith("__")):
                        found.append(f"{path.relative_to(source)}:{node.lineno}: from {node.module} import {alias.name}")
                    modules.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(import_graph.PACKAGE):
                        if any(p.startswith("_") and not p.startswith("__") for p in alias.name.split(".")):
                            found.append(f"{path.relative_to(source)}:{node.lineno}: import {alias.name}")
                        modules.add(alias.asname or alias.name.split(".")[0])
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                found.append(f"{path.relative_to(source)}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_reaches_into_another_modules_private_names():
    """What modules share is public in its own module: no import of another module's ``_name`` (or of a ``_module``)."""
    assert private_imports(import_graph.SOURCE) == []


def test_the_private_import_check_sees_each_way_in(tmp_path):
    source = tmp_path / "components"
    source.mkdir()
    (source / "a.py").write_text(
        "from kimi_k3.core._reader import key\nfrom kimi_k3.core.reader import _key\nfrom kimi_k3.core import clock\n"
        "import kimi_k3.core._x\nfrom kimi_k3.core.reader import __all__, key_of\nprint(clock._PINNED, clock.now)\n"
    )
    assert private_imports(source) == [
        "a.py:1: from kimi_k3.core._reader import key", "a.py:2: from kimi_k3.core.reader import _key", "a.py:4: import kimi_k3.core._x",
        "a.py:6: clock._PINNED",
    ]
