"""What rolls the pods: the code hash of the ConfigMap-shipped modules ignores their docstrings.

The serving pods and the staging Job carry :func:`~kimi_k3.weights.pod_files.content_hash`
as a pod-template annotation, so a change of the shipped code restarts them. A restart of a
serving pod is paid GPU time (drain, weights, compile, warm-up), so documentation alone must
not cause one, while any change of what runs must.
"""

from __future__ import annotations

import pytest

from kimi_k3.weights import pod_files

DOCUMENTED = '''"""Module docstring, é and 漢字 included."""

from dataclasses import dataclass

LIMIT = 3  # a comment


@dataclass(frozen=True)
class Entry:
    """A class docstring."""

    path: str
    """An attribute docstring."""

    def size(self) -> int:
        """A method docstring
        over two lines."""
        label = "é"; """a string statement after code on one line"""
        return len(self.path) + LIMIT
'''


def _shipped_with(monkeypatch: pytest.MonkeyPatch, key: str, text: str) -> None:
    files = dict(pod_files.pod_files())
    path, _ = files[key]
    files[key] = (path, text)
    monkeypatch.setattr(pod_files, "pod_files", lambda: files)


def test_without_docstrings_keeps_the_code_and_drops_every_docstring():
    stripped = pod_files.without_docstrings(DOCUMENTED)
    assert "docstring" not in stripped and "string statement" not in stripped
    assert stripped.splitlines() == [
        "from dataclasses import dataclass",
        "LIMIT = 3  # a comment",
        "@dataclass(frozen=True)",
        "class Entry:",
        "    path: str",
        "    def size(self) -> int:",
        '        label = "é"; ',
        "        return len(self.path) + LIMIT",
    ]


def test_a_documentation_change_of_a_shipped_module_keeps_the_hash(monkeypatch):
    before = pod_files.content_hash()
    text = pod_files.pod_files()["weights-stage"][1]
    assert "def job_name(revision: str) -> str:\n" in text
    redocumented = '"""Another module docstring."""\n' + text.split('"""', 2)[2].replace(
        "def job_name(revision: str) -> str:\n", 'def job_name(revision: str) -> str:\n    """Reworded."""\n', 1
    )
    _shipped_with(monkeypatch, "weights-stage", redocumented)
    assert pod_files.config_map_data()["weights-stage"] != text
    assert pod_files.content_hash() == before


def test_a_code_change_of_a_shipped_module_changes_the_hash(monkeypatch):
    before = pod_files.content_hash()
    text = pod_files.pod_files()["weights-stage"][1]
    assert 'STAGING_NAMESPACE = "kimi-weights"' in text
    _shipped_with(monkeypatch, "weights-stage", text.replace('STAGING_NAMESPACE = "kimi-weights"', 'STAGING_NAMESPACE = "kimi-weights-2"'))
    assert pod_files.content_hash() != before


def test_no_shipped_module_reads_its_docstrings():
    """The hash may leave docstrings out only while no pod-side code reads them."""
    readers = [key for key, (_, text) in pod_files.pod_files().items() if "__doc__" in text or "getdoc" in text]
    assert readers == []
