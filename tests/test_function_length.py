"""No function in the library is longer than a reader can hold: :data:`MAX_FUNCTION_LINES`, counted from ``def`` to its
last line (docstring included, decorators not).

120 lines is the bound issue 35 drew: past it a function holds several concepts (a component's ``__init__`` declaring
every resource inline), and the split by concept (``Cluster._control_plane``, ``Cluster._system_nodes``, …) is what a
maintainer wants to read. The longest functions left are rendering tables (nginx.conf, the router) near 115 lines.
:data:`SPLIT_UNDER_WAY` names the functions other work is splitting now; an entry that is no longer too long must go.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

MAX_FUNCTION_LINES = 120
"""The longest a function in ``components/`` may be, in lines."""

SPLIT_UNDER_WAY = {
}
"""Functions over :data:`MAX_FUNCTION_LINES` whose split is under way (issue 35): remove each once it is split."""


def function_lengths(source: Path) -> dict[str, int]:
    """``path:Qualified.name`` → lines, for every function and method under ``source`` (upstream copies in ``data/`` left out)."""
    lengths: dict[str, int] = {}
    for path in sorted(source.rglob("*.py")):
        relative = path.relative_to(source)
        if "data" in relative.parts:
            continue

        def visit(node: ast.AST, prefix: str, relative: Path = relative) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    lengths[f"{relative.as_posix()}:{prefix}{child.name}"] = child.end_lineno - child.lineno + 1  # type: ignore[operator]
                    visit(child, f"{prefix}{child.name}.")
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")
                else:
                    visit(child, prefix)

        visit(ast.parse(path.read_text()), "")
    return lengths


def too_long(source: Path) -> list[str]:
    """``name (lines)`` of each function over :data:`MAX_FUNCTION_LINES` under ``source``, longest first."""
    lengths = function_lengths(source)
    return [f"{name} ({lines} lines)" for name, lines in sorted(lengths.items(), key=lambda kv: -kv[1]) if lines > MAX_FUNCTION_LINES]


def test_no_function_is_longer_than_the_limit():
    over = too_long(ROOT / "components")
    assert [entry for entry in over if entry.split(" (")[0] not in SPLIT_UNDER_WAY] == []


def test_every_function_allowed_to_be_long_still_is():
    """An allowance outlives its split only by mistake: it would let the function grow back unseen."""
    lengths = function_lengths(ROOT / "components")
    stale = sorted(name for name in SPLIT_UNDER_WAY if lengths.get(name, 0) <= MAX_FUNCTION_LINES)
    assert stale == [], f"split already (or gone): remove from SPLIT_UNDER_WAY: {stale}"


def test_the_check_sees_a_long_method_a_nested_function_and_a_short_one(tmp_path):
    source = tmp_path / "components"
    (source / "room").mkdir(parents=True)
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (source / "room" / "big.py").write_text(
        f"class Big:\n    def __init__(self):\n{body}\n\n\ndef outer():\n    def inner():\n{body}\n    return inner\n\n\ndef fits():\n    return 1\n"
    )
    (source / "data").mkdir()
    (source / "data" / "upstream.py").write_text(f"def copied():\n{body}\n")
    assert too_long(source) == [
        f"room/big.py:outer ({MAX_FUNCTION_LINES + 3} lines)",
        f"room/big.py:Big.__init__ ({MAX_FUNCTION_LINES + 1} lines)",
        f"room/big.py:outer.inner ({MAX_FUNCTION_LINES + 1} lines)",
    ]
