"""A misspelt name gets its "did you mean" in any case: stack config keys (through ``kimi-k3 plan``) and policy names."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kimi_k3.cli import main
from kimi_k3.core.suggest import nearest
from kimi_k3.guardrails.rules import ALL_POLICIES
from kimi_k3.guardrails.verdict import resolve_policy_config
from tests.cli_helpers import assert_one_line_error, one_line_error
from tests.user_project import copy_library_project, library_stack

NOW = ("--now", "2026-12-01T08:00:00Z")


def _stack_with(tmp_path, old: str, new: str):
    dev = library_stack("dev")
    assert dev.count(old) == 1
    return copy_library_project(tmp_path / "user", {"dev": dev.replace(old, new)})


def test_a_key_in_another_case_is_refused_with_its_right_spelling_as_a_process(tmp_path):
    """``kimi-k3 plan`` in its own process (where a traceback would reach the user): exit 2, one line, the hint."""
    project = _stack_with(tmp_path, "kimi-k3:maxModelLen:", "kimi-k3:MAXMODELLEN:")
    proc = subprocess.run([sys.executable, "-m", "kimi_k3.cli", "plan", "dev", "--quiet", "--out", str(tmp_path / "out"), *NOW],
                          capture_output=True, text=True, cwd=project, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    line = assert_one_line_error(proc.stderr)
    assert line == "kimi-k3: error: config kimi-k3:MAXMODELLEN: '262144' is not accepted; unknown key; did you mean kimi-k3:maxModelLen?"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        ("kimi-k3:maxModelLen:", "kimi-k3:MAXMODELLENGTH:", "unknown key; did you mean kimi-k3:maxModelLen?"),  # misspelt and in capitals
        ("kimi-k3:maxModelLen:", "kimi-k3:maxmodellen:", "unknown key; did you mean kimi-k3:maxModelLen?"),
        ("kimi-k3:maxModelLen:", "KIMI-K3:maxModelLen:", "unknown namespace 'KIMI-K3': this stack reads kimi-k3: and aws: keys; did you mean kimi-k3:maxModelLen?"),
        ("aws:region:", "aws:REGION:", "not a setting of the AWS provider; did you mean aws:region?"),
    ],
)
def test_kimi_k3_plan_suggests_the_key_whatever_its_case(tmp_path, capsys, old, new, hint):
    project = _stack_with(tmp_path, old, new)
    assert main(["plan", "dev", "--program", str(project), "--quiet", "--out", str(tmp_path / "out"), *NOW]) == 2
    line = one_line_error(capsys)
    assert line.endswith(hint), line


def test_a_policy_name_in_another_case_gets_its_hint():
    name = ALL_POLICIES[0].name
    _, warnings = resolve_policy_config({name.upper(): "advisory"}, "policy/config/dev.json")
    assert warnings == [f"policy/config/dev.json configures {name.upper()!r}, which is not a policy of kimi-k3-guardrails (did you mean {name}?); the engine ignores it"]


def test_nearest_compares_in_lower_case_and_answers_as_spelt():
    keys = ("maxModelLen", "maxNumSeqs", "replicas")
    assert nearest("MAXMODELLEN", keys) == "maxModelLen"
    assert nearest("MaxModelLength", keys) == "maxModelLen"
    assert nearest("REPLICAS", keys) == "replicas"
    assert nearest("zzz", keys) is None
