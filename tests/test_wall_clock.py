"""Time is an input: only the clock module reads the wall clock, and what reads it is tested with the clock moved.

``make test`` runs the suite once; each test marked ``clock`` runs twice in it, as it is and with
the clock moved by 9 days (``tests/conftest.py``). What keeps those travelled runs honest:

* the static rule below: no module of the library outside :mod:`kimi_k3.core.clock` calls a
  wall-clock function (``datetime.now``, ``time.time``, ``date.today``, …, found in the AST),
  except the pod-side modules listed with their reason;
* every module that reads the clock (the entry points calling ``program_now``, the allowed pod
  modules) names a test marked ``clock`` that exercises it (:data:`CLOCK_READERS`);
* ``tests/conftest.py`` fails any test not marked ``clock`` that reads the unpinned clock.

``make test-travel`` still runs the whole suite at every offset.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

WALL_CLOCK_CALLS = {
    "datetime": {"now", "utcnow", "today", "fromtimestamp", "utcfromtimestamp"},
    "date": {"today", "fromtimestamp"},
    "time": {"time", "time_ns", "localtime", "gmtime", "ctime", "asctime", "strftime"},
}
"""``owner.function`` calls that read the wall clock. ``time.monotonic`` and ``perf_counter`` measure
durations, not the date, and are allowed. ``fromtimestamp`` of a given number is not a read, but
is listed so that ``fromtimestamp(time())`` style reads cannot hide behind it."""

ALLOWED = {
    "components/core/clock.py": "the clock module: program_now() is the one read of the wall clock",
    "components/weights/warmup.py": "runs in the serving pod, not in a plan: the readiness marker records when the pod became ready",
}
"""Library modules allowed to read the wall clock, with the reason."""

CLOCK_READERS = {
    "components/core/clock.py": "tests/test_time_travel.py::test_the_clock_really_moved",
    "components/cli/plan.py": "tests/test_time_travel.py::test_plan_of_each_stack_schedules_the_scale_up_after_now",
    "components/cli/capacity_clock.py": "tests/test_wall_clock.py::test_capacity_offerings_searches_from_the_moved_clock",
    "components/cli/hyperpod_plans.py": "tests/test_wall_clock.py::test_training_plan_offerings_search_from_the_moved_clock",
    "components/cli/bench.py": "tests/test_wall_clock.py::test_bench_reads_the_clock_once_before_its_checks",
    "components/weights/warmup.py": "tests/test_wall_clock.py::test_the_readiness_marker_records_the_moved_clock",
}
"""Each module that reads the clock, and a test marked ``clock`` that exercises that read."""

LIBRARY = [*sorted((ROOT / "components").rglob("*.py")), ROOT / "__main__.py", *sorted((ROOT / "policy").rglob("*.py"))]


def _owner(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def wall_clock_reads(source: str) -> list[str]:
    """``line: call`` for every wall-clock read in ``source`` (attribute calls and names imported from ``time``)."""
    tree = ast.parse(source)
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "time"
        for alias in node.names
        if alias.name in WALL_CLOCK_CALLS["time"]
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr in WALL_CLOCK_CALLS.get(_owner(func.value) or "", ())) or (isinstance(func, ast.Name) and func.id in imported):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def program_now_calls(source: str) -> int:
    """How many times ``source`` calls ``program_now`` (the library's read of the clock)."""
    return sum(
        1 for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and (_owner(node.func) == "program_now")
    )


def offenders(files: list[Path], root: Path) -> list[str]:
    """``path:line: call`` for every wall-clock read outside :data:`ALLOWED`."""
    return [
        f"{path.relative_to(root)}:{read}"
        for path in files
        if str(path.relative_to(root)) not in ALLOWED
        for read in wall_clock_reads(path.read_text())
    ]


def test_no_module_outside_the_clock_module_reads_the_wall_clock():
    found = offenders(LIBRARY, ROOT)
    assert found == [], "wall-clock reads outside kimi_k3.core.clock (take `now` from the caller):\n" + "\n".join(found)


@pytest.mark.parametrize("planted", [
    "from datetime import UTC, datetime\n\ndef start():\n    return datetime.now(UTC)\n",
    "import datetime\n\ndef start():\n    return datetime.datetime.utcnow()\n",
    "from datetime import date\n\ndef today():\n    return date.today()\n",
    "import time\n\ndef stamp():\n    return time.time()\n",
    "from time import time as wall\n\ndef stamp():\n    return wall()\n",
])
def test_the_rule_fails_on_a_planted_read_in_a_component(tmp_path, planted):
    component = tmp_path / "components" / "serving" / "nlb.py"
    component.parent.mkdir(parents=True)
    component.write_text((ROOT / "components" / "serving" / "nlb.py").read_text() + "\n\n" + planted)
    (found,) = offenders([component], tmp_path)
    assert found.startswith("components/serving/nlb.py:")


def test_durations_and_allowed_modules_are_not_offenders(tmp_path):
    timer = tmp_path / "components" / "cli" / "wait.py"
    timer.parent.mkdir(parents=True)
    timer.write_text("import time\n\ndef wait():\n    return time.monotonic() - time.perf_counter()\n")
    assert offenders([timer], tmp_path) == []
    assert wall_clock_reads((ROOT / "components" / "core" / "clock.py").read_text())  # the one read is found, and allowed


def _module_marked(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets)
        and "clock" in ast.unparse(node.value)
        for node in tree.body
    )


def _marked_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    module_marked = _module_marked(tree)
    return {
        node.name for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
        and (module_marked or any("mark.clock" in ast.unparse(d) for d in node.decorator_list))
    }


def test_every_module_that_reads_the_clock_has_a_marked_test():
    readers = {
        str(path.relative_to(ROOT)) for path in LIBRARY
        if path.name != "__main__.py"  # runs under the offline engine's pinned moment in every plan test
        and (program_now_calls(path.read_text()) or (str(path.relative_to(ROOT)) in ALLOWED and wall_clock_reads(path.read_text())))
    }
    assert set(CLOCK_READERS) == readers, "every module reading the clock needs a test marked clock in CLOCK_READERS"
    missing = []
    for module, test in CLOCK_READERS.items():
        file, name = test.split("::")
        if name not in _marked_tests(ROOT / file):
            missing.append(f"{module}: {test} is not a test marked clock")
    assert missing == []


TEST_HELPERS_READING_THE_CLOCK = {
    "tests/conftest.py": "the travelled runs themselves (--travel and the clock tests' second run move the clock from the real now)",
    "tests/fake_openai_server.py": "the fake server stamps 'created' as the OpenAI API does; no test compares it with a date",
    "tests/routing_harness.py": "a new mtime on Envoy's hosts file (c-ares re-reads a file whose mtime changed); no test compares it with a date",
}
"""Test modules allowed to read the wall clock outside a marked test, with the reason."""


def _reads_outside_marked_tests(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    if _module_marked(tree):
        return []
    marked = _marked_tests(path)
    inside = {
        read
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name in marked
        for read in wall_clock_reads(ast.unparse(node))
    }
    every = wall_clock_reads(path.read_text())
    return [] if len(every) == len(inside) else every


def test_every_test_that_reads_the_wall_clock_is_marked():
    found = [
        f"{path.relative_to(ROOT)}:{read}"
        for path in sorted((ROOT / "tests").glob("*.py"))
        if str(path.relative_to(ROOT)) not in TEST_HELPERS_READING_THE_CLOCK
        for read in _reads_outside_marked_tests(path)
    ]
    assert found == [], "wall-clock reads in tests not marked clock (the travelled runs would miss them):\n" + "\n".join(found)


# --- the marked tests of the readers that have none elsewhere ------------------------------------

@pytest.mark.clock
def test_capacity_offerings_searches_from_the_moved_clock(monkeypatch):
    from datetime import UTC, datetime, timedelta

    from kimi_k3.cli import capacity_clock

    seen = capacity_clock.utcnow()
    assert abs(seen - datetime.now(UTC)) < timedelta(seconds=5)  # under --travel, datetime.now is the moved clock


@pytest.mark.clock
def test_training_plan_offerings_search_from_the_moved_clock():
    from datetime import UTC, datetime, timedelta

    from kimi_k3.cli import hyperpod_plans

    assert abs(hyperpod_plans.utcnow() - datetime.now(UTC)) < timedelta(seconds=5)


@pytest.mark.clock
def test_bench_reads_the_clock_once_before_its_checks(monkeypatch, capsys):
    from kimi_k3 import cli
    from kimi_k3.cli import bench
    from kimi_k3.core import clock

    seen = []
    real = clock.program_now
    monkeypatch.setattr(clock, "program_now", lambda: seen.append(real()) or seen[-1])
    monkeypatch.delenv(bench.API_KEY_ENV, raising=False)
    assert cli.main(["bench", "--endpoint", "http://127.0.0.1:9/v1", "--out", "build/never"]) == 2
    from datetime import UTC, datetime, timedelta

    assert len(seen) == 1 and abs(seen[0] - datetime.now(UTC)) < timedelta(seconds=5)
    assert "no API key" in capsys.readouterr().err


@pytest.mark.clock
def test_the_readiness_marker_records_the_moved_clock(tmp_path):
    from datetime import UTC, datetime

    from kimi_k3.weights import warmup

    marker = tmp_path / "ready"
    warmup.mark_ready(str(marker))
    assert abs(int(marker.read_text()) - datetime.now(UTC).timestamp()) < 5


@pytest.mark.clock
def test_the_second_run_of_a_clock_test_has_the_clock_moved(request):
    import subprocess
    from datetime import UTC, datetime, timedelta

    from tests.conftest import CLOCK_TRAVEL, travel_offset

    moved = request.node.callspec.params.get("_clock_moved", "") if hasattr(request.node, "callspec") else ""
    shell_now = int(subprocess.run(["date", "-u", "+%s"], check=True, capture_output=True, text=True).stdout)  # a child's clock is not moved
    ahead = datetime.now(UTC).timestamp() - shell_now
    if request.config.getoption("--travel"):
        return  # the whole run is moved: the pass runs once, moved
    expected = travel_offset(CLOCK_TRAVEL).total_seconds() if moved else 0
    assert moved in ("", CLOCK_TRAVEL) and abs(ahead - expected) < 5, (moved, ahead)
    assert timedelta(seconds=expected) == (travel_offset(CLOCK_TRAVEL) if moved else timedelta(0))
