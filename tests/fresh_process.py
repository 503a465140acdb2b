"""Run a snippet in a new Python process with another hash seed: "the same inputs give the same output" across runs.

Within one process, calling a function twice hides what differs between runs: set and dict-of-set
iteration order (``PYTHONHASHSEED``), the global ``random`` state, the import order. The snippet runs
in the repository root with ``PYTHONHASHSEED`` set, and its stdout comes back.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT


def output_of(code: str, hash_seed: int) -> str:
    """stdout of ``python -c code`` in the repository root with ``PYTHONHASHSEED=hash_seed``."""
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout
