"""The time-to-first-token figures the README and docs/weights.md show are the estimate of the committed stacks."""

from __future__ import annotations

import pytest

from kimi_k3.stack import settings, time_to_serve
from kimi_k3.weights import estimate
from tests.conftest import ROOT

CASES = ("cold", "warm", "pod re-created", "container restart")


def _figures(stack: str) -> list[str]:
    estimates = estimate.estimate_all(time_to_serve.startup_inputs(settings.load_stack(stack)))
    return [f"{estimates[case].minutes:.1f}" for case in CASES]


def _row(path, label: str) -> list[str]:
    (line,) = [line for line in path.read_text().splitlines() if line.startswith(f"| {label}")]
    return [cell.strip() for cell in line.strip("|").split("|")][1:5]


@pytest.mark.parametrize("doc,labels", [
    ("README.md", {"prod": "prod: every mechanism", "dev": "dev: Hugging Face direct"}),
    ("docs/weights.md", {"prod": "prod (`stacks/Pulumi.prod.yaml`", "dev": "dev (`stacks/Pulumi.dev.yaml`"}),
])
def test_the_documented_table_is_the_estimate_of_the_committed_stacks(doc, labels):
    for stack, label in labels.items():
        assert _row(ROOT / doc, label) == _figures(stack), f"{doc}: the {stack} row"


def test_the_readme_quotes_the_line_kimi_k3_plan_prints_for_prod():
    lines, _ = time_to_serve.estimate_lines(settings.load_stack("prod"), None)
    (line,) = [line for line in lines if line.startswith("time to first token")]
    assert f"    {line}\n" in (ROOT / "README.md").read_text()
