"""Run the real ``promtool`` (Debian package ``prometheus``) on rule files and rule unit tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

INSTALL_HINT = "promtool is not installed: run `make system-packages` (Debian package `prometheus`, listed in tools/debian-packages.txt)"


def promtool_binary() -> str:
    """Path of promtool, or an AssertionError with the install hint (never a skip)."""
    found = shutil.which("promtool")
    if not found:
        raise AssertionError(INSTALL_HINT)
    return found


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run promtool with ``args``; returns the finished process (output captured as text)."""
    return subprocess.run([promtool_binary(), *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def check_rules(rules: dict, directory: Path) -> subprocess.CompletedProcess:
    """``promtool check rules`` on ``rules`` (a rule file: ``{"groups": [...]}``) written into ``directory``."""
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return run("check", "rules", str(path))


def run_rule_tests(rules: dict, tests: list[dict], directory: Path, evaluation_interval: str = "1m") -> subprocess.CompletedProcess:
    """``promtool test rules`` of ``tests`` (promtool's ``tests:`` entries) against ``rules``."""
    (directory / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    spec = {"rule_files": ["rules.yaml"], "evaluation_interval": evaluation_interval, "tests": tests}
    (directory / "tests.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return run("test", "rules", "tests.yaml", cwd=directory)
