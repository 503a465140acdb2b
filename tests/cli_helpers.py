"""Checks shared by the CLI tests: a refused command says one line, exits 2, shows no traceback.

Test modules import from here (and from ``builders``/``conftest``), never from each other.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

ERROR_PREFIX = "kimi-k3: error: "
"""How ``kimi_k3.cli`` starts the one line it prints for a user mistake."""


def assert_one_line_error(err: str) -> str:
    """``err`` (the standard error of a refused command) is exactly one line starting :data:`ERROR_PREFIX`; returns it without the newline."""
    assert err.count("\n") == 1 and err.endswith("\n") and err.startswith(ERROR_PREFIX), err
    return err[:-1]


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    """What the command just run through ``kimi_k3.cli.main`` wrote to standard error, checked by :func:`assert_one_line_error`."""
    return assert_one_line_error(capsys.readouterr().err)


def refused_as_a_process(*args: str) -> str:
    """``python -m kimi_k3.cli ARGS`` in its own process (where a traceback would reach the user), from the repository root:
    exit 2, no traceback, one line of standard error (returned)."""
    proc = subprocess.run([sys.executable, "-m", "kimi_k3.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return assert_one_line_error(proc.stderr)
