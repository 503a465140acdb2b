"""The README explains its numbers (issue 24, point 8): the time-to-first-token cases and the cost line are
defined where ``kimi-k3 plan`` prints them, and the README holds the same definitions."""

from __future__ import annotations

from kimi_k3.cli import main
from kimi_k3.weights import estimate
from tests.conftest import ROOT


def test_plan_defines_each_case_and_the_cost_line_under_them(tmp_path, capsys):
    assert main(["plan", "dev", "--quiet", "--out", str(tmp_path), "--now", "2026-12-01T08:00:00Z"]) == 0
    out = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(out) if line.strip().startswith("time to first token: cold "))
    assert out[start + 1].strip().startswith("cost per start at $") and out[start + 2].strip() == "where:"
    legend = [line.strip() for line in out[start + 3 : start + 3 + len(estimate.CASES) + 1]]
    assert legend == estimate.legend_lines()
    assert [line.split(":", 1)[0] for line in legend] == [*estimate.CASES, "cost per start"]
    assert "prepaid" in legend[-1] and "not an extra bill" in legend[-1] and "the date is when the rate was read" in legend[-1]


def test_the_readme_defines_the_same_cases_in_its_time_to_first_token_section():
    section = (ROOT / "README.md").read_text().split("## Time to first token", 1)[1].split("\n## ", 1)[0]
    for line in estimate.legend_lines():
        name, meaning = line.split(": ", 1)
        assert f"- **{name}**: {meaning}." in section, name
