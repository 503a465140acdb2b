"""The same stack, rehearsal flags and ``--now`` give byte-identical plans."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kimi_k3.cli import main
from tests.conftest import ROOT

NOW_FLAG = ("--now", "2026-12-01T08:00:00Z")


def _digest_tree(directory: Path) -> dict[str, str]:
    """sha256 of every file under ``directory`` by relative path."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.rglob("*")) if p.is_file()}


def _plan_in_a_process(out: Path, hash_seed: str, *flags: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    proc = subprocess.run(
        [sys.executable, "-m", "kimi_k3.cli", "plan", "prod", "--quiet", "--out", str(out), *NOW_FLAG, *flags],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return _digest_tree(out)


def test_two_processes_with_different_hash_seeds_write_the_same_bytes(tmp_path):
    """A fresh process with a fixed hash seed writes what this (test) process writes with its own: two seeds, two
    processes, one of them having planned other stacks before (what leaks from one plan into the next shows too).
    One child process instead of two: the plan's start-up is the slow part, and one new process is what differs."""
    flags = ("--reservation-state", "active", "--reservation-start", "2026-11-30T11:30:00Z", "--reservation-az", "us-west-2b")
    seed = "4242" if os.environ.get("PYTHONHASHSEED") != "4242" else "1"  # another seed than this process's
    assert main(["plan", "prod", "--quiet", "--out", str(tmp_path / "a"), *NOW_FLAG, *flags]) == 0
    first = _digest_tree(tmp_path / "a")
    second = _plan_in_a_process(tmp_path / "b", seed, *flags)
    assert first == second
    assert {"resources.json", "outputs.json"} <= set(first) and any(name.startswith("manifests/") for name in first)


def test_manifest_file_names_come_from_kind_namespace_and_name(tmp_path):
    assert main(["plan", "dev", "--quiet", "--out", str(tmp_path), *NOW_FLAG]) == 0
    names = sorted(p.name for p in (tmp_path / "manifests").glob("*.yaml"))
    assert "namespace-kimi-serving.yaml" in names
    assert "deployment-kimi-serving-kimi-k3-serving.yaml" in names
    assert not any(name[:3].isdigit() for name in names)


def test_now_pins_the_schedule_and_the_fixture(tmp_path):
    assert main(["plan", "dev", "--quiet", "--out", str(tmp_path), *NOW_FLAG]) == 0
    text = (tmp_path / "resources.json").read_text()
    assert '"startTime": "2026-12-02T11:30:00Z"' in text  # next 11:30 UTC at least 12 h after --now


@pytest.mark.parametrize("value", ["yesterday", "2026-13-01", ""])
def test_a_bad_now_is_one_line(value, tmp_path, capsys):
    assert main(["plan", "dev", "--out", str(tmp_path), "--now", value]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--now" in err and repr(value) in err and "ISO 8601" in err
    assert not tmp_path.joinpath("resources.json").exists()
