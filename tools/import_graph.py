"""The library's structure, drawn from its import graph: rooms, circles, upward imports, function-level imports.

    .venv/bin/python tools/import_graph.py            # the figures, as JSON
    .venv/bin/python tools/import_graph.py --edges    # and every room-to-room arrow

A *room* is a package directly under ``components/`` (``core``, ``capacity``, …) or a top-level module.
:data:`LAYERS` orders the rooms from the bottom up (docs/architecture.md draws them); an import from a
room to one above it is an *upward import*. ``tests/test_architecture.py`` holds the library to zero
circles (every import counted: at module level, type-only and inside functions) and zero upward imports,
and to a reason on every import made inside a function.
"""

from __future__ import annotations

import ast
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "components"
PACKAGE = "kimi_k3"

LAYERS = (
    "errors", "core", "network", "cluster", "addons", "capacity", "weights", "serving", "observability", "hyperpod",
    "stack", "guardrails", "offline", "bench", "bringup", "cli", PACKAGE,
)
"""Rooms from the bottom up: a room may import the rooms before it, never one after it."""


@dataclass(frozen=True)
class FunctionImport:
    """An import of the library made inside a function."""

    module: str
    """The importing module."""
    line: int
    """Its line."""
    target: str
    """The module imported."""
    reason: str
    """The comment on the import line (empty: none)."""


@dataclass
class Graph:
    """The import graph of the library's modules."""

    modules: dict[str, Path] = field(default_factory=dict)
    """Every module (dotted name under ``kimi_k3``) and its file."""
    edges: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Module-level imports: module → the modules it imports (``TYPE_CHECKING`` blocks left out: :attr:`type_edges`)."""
    type_edges: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Imports made only for the type checker (inside ``if TYPE_CHECKING:``): module → the modules it imports."""
    function_imports: list[FunctionImport] = field(default_factory=list)
    """Imports made inside functions."""

    def room(self, module: str) -> str:
        """The room of ``module``: its package under the root, or the top-level module's own name."""
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else PACKAGE

    def room_edges(self) -> dict[str, set[str]]:
        """Room → the other rooms it imports (every import counted, as for :meth:`circles`)."""
        out: dict[str, set[str]] = defaultdict(set)
        for source, targets in self.every_edge().items():
            for target in targets:
                if self.room(source) != self.room(target):
                    out[self.room(source)].add(self.room(target))
        return out

    def upward_imports(self) -> list[tuple[str, str]]:
        """Imports (every kind, as for :meth:`circles`) from a room to a room above it in :data:`LAYERS` (the package root may import anything)."""
        found = []
        for source, targets in sorted(self.every_edge().items()):
            for target in sorted(targets):
                a, b = self.room(source), self.room(target)
                if a != b and a != PACKAGE and _layer(b) > _layer(a):
                    found.append((source, target))
        return found

    def every_edge(self) -> dict[str, set[str]]:
        """Module → every module it imports: at module level, for the type checker only (``TYPE_CHECKING``) and inside functions."""
        out: dict[str, set[str]] = defaultdict(set)
        for edges in (self.edges, self.type_edges):
            for source, targets in edges.items():
                out[source] |= targets
        for imported in self.function_imports:
            out[imported.module].add(imported.target)
        return out

    def circles(self) -> list[list[str]]:
        """Strongly connected sets of more than one module (import circles), and of rooms: every import counts, a
        type-only one or one made inside a function too (a circle hidden behind ``TYPE_CHECKING`` or a lazy import is
        still two modules that cannot be understood, or moved, one without the other)."""
        return _cycles(self.every_edge()) + [[f"room {r}" for r in c] for c in _cycles(self.room_edges())]

    def top_level_modules(self) -> list[str]:
        """Modules directly under ``components/`` (the package's ``__init__`` left out)."""
        return sorted(m for m, path in self.modules.items() if m.count(".") == 1 and path.name != "__init__.py")

    def largest(self, count: int = 5) -> list[tuple[int, str]]:
        """The ``count`` longest modules: (lines, path under ``components/``)."""
        root = min((p.parent for p in self.modules.values()), key=lambda p: len(p.parts))
        sizes = [(len(path.read_text().splitlines()), str(path.relative_to(root))) for path in self.modules.values()]
        return sorted(sizes, reverse=True)[:count]


def _layer(room: str) -> int:
    return LAYERS.index(room) if room in LAYERS else -1


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def load(source: Path | None = None) -> Graph:
    """Read every module under ``source`` (default ``components/``; ``data/`` left out) and its imports of the library."""
    source = source or SOURCE
    graph = Graph()
    for path in sorted(source.rglob("*.py")):
        rel = path.relative_to(source)
        if rel.parts[0] == "data":
            continue
        parts = [p for p in rel.with_suffix("").parts if p != "__init__"]
        graph.modules[".".join([PACKAGE, *parts])] = path
    for module, path in graph.modules.items():
        text = path.read_text()
        lines = text.splitlines()
        tree = ast.parse(text)
        _walk(graph, module, lines, tree.body, in_function=False)
    return graph


def _resolve(graph: Graph, name: str) -> str:
    while name and name not in graph.modules:
        name = name.rpartition(".")[0]
    return name


def _walk(graph: Graph, module: str, lines: list[str], body: list[ast.stmt], *, in_function: bool, for_types: bool = False) -> None:
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in _targets(graph, node):
                if target == module:
                    continue
                if for_types:
                    graph.type_edges[module].add(target)
                elif in_function:
                    line = lines[node.lineno - 1]
                    reason = line.split("#", 1)[1].strip() if "#" in line else ""
                    graph.function_imports.append(FunctionImport(module, node.lineno, target, reason))
                else:
                    graph.edges[module].add(target)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            _walk(graph, module, lines, node.body, in_function=in_function, for_types=True)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _walk(graph, module, lines, node.body, in_function=True, for_types=for_types)
        else:
            for child_body in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, child_body, None)
                if isinstance(children, list) and children and isinstance(children[0], ast.AST):
                    stmts = [c for c in children if isinstance(c, ast.stmt)] + [s for h in children if isinstance(h, ast.ExceptHandler) for s in h.body]
                    _walk(graph, module, lines, stmts, in_function=in_function, for_types=for_types)


def _targets(graph: Graph, node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        names = [f"{base}.{alias.name}" for alias in node.names] if base.startswith(PACKAGE) else []
    return {r for r in (_resolve(graph, n) for n in names if n == PACKAGE or n.startswith(PACKAGE + ".")) if r}


def report(graph: Graph, edges: bool = False) -> dict:
    """The figures of ``graph`` (what ``docs/architecture.md`` and the closing notes quote)."""
    rooms = sorted({graph.room(m) for m in graph.modules})
    out = {
        "modules": len(graph.modules),
        "rooms": len(rooms),
        "top_level_modules": graph.top_level_modules(),
        "import_arrows": sum(len(t) for t in graph.edges.values()),
        "circles": graph.circles(),
        "upward_imports": graph.upward_imports(),
        "function_imports": len(graph.function_imports),
        "function_imports_without_reason": [f"{f.module}:{f.line} -> {f.target}" for f in graph.function_imports if not f.reason],
        "largest": graph.largest(),
    }
    if edges:
        out["room_edges"] = {k: sorted(v) for k, v in sorted(graph.room_edges().items())}
    return out


if __name__ == "__main__":
    print(json.dumps(report(load(), edges="--edges" in sys.argv), indent=1))
