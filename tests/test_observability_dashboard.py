"""The Grafana dashboard: built with grafana-foundation-sdk, every query parses (real promtool), sidecar ConfigMap valid."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from grafana_foundation_sdk.models.dashboard import Dashboard

from kimi_k3.errors import UserError
from kimi_k3.observability import dashboard as d
from kimi_k3.observability import metrics
from tests import k8s_checks, promtool
from tests.fresh_process import output_of

END = datetime(2026, 12, 8, 11, 30, tzinfo=UTC)
ARGS = d.DashboardArgs(block_end=END, reserved_instances=2)


@pytest.fixture(scope="module")
def board() -> dict:
    return json.loads(d.dashboard_json(ARGS))


def test_every_panel_query_parses_with_promtool(board, tmp_path):
    # Grafana substitutes $__rate_interval before sending a query; promtool gets the same substitution.
    exprs = [e.replace("$__rate_interval", "5m") for e in d.panel_expressions(board)]
    assert len(exprs) >= 14
    rules = {"groups": [{"name": "dashboard-queries", "rules": [{"record": f"kimi_k3:panel_query_{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    proc = promtool.check_rules(rules, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_broken_query_is_caught(tmp_path):
    proc = promtool.check_rules({"groups": [{"name": "x", "rules": [{"record": "x:y", "expr": "sum(rate(vllm:generation_tokens_total[5m])"}]}]}, tmp_path)
    assert proc.returncode != 0


def test_panels_the_issue_asks_for(board):
    titles = [p["title"] for p in board["panels"] if p["type"] != "row"]
    assert titles == [
        "Time left in the block", "Ready GPU nodes", "Reserved instances", "Requests running",
        "Time to first token", "Inter-token latency", "Tokens per second", "Queue", "KV-cache usage",
        "GPU utilisation", "HBM used", "Power draw",
    ]
    text = json.dumps(board)
    for name in (metrics.VLLM_TTFT, metrics.VLLM_ITL, metrics.VLLM_GENERATION_TOKENS, metrics.VLLM_WAITING,
                 metrics.VLLM_KV_USAGE, metrics.DCGM_GPU_UTIL, metrics.DCGM_FB_USED, metrics.DCGM_POWER):
        assert name in text
    for deprecated in metrics.DEPRECATED_VLLM:
        assert deprecated not in text


def test_time_left_counts_down_to_the_blocks_end_and_follows_an_extension(board):
    (left,) = [p for p in board["panels"] if p["title"] == "Time left in the block"]
    assert left["targets"][0]["expr"] == f"vector({int(END.timestamp())}) - time()"
    extended = json.loads(d.dashboard_json(d.DashboardArgs(block_end=END + timedelta(days=7), reserved_instances=2)))
    (moved,) = [p for p in extended["panels"] if p["title"] == "Time left in the block"]
    assert moved["targets"][0]["expr"] == f"vector({int((END + timedelta(days=7)).timestamp())}) - time()"


def test_every_query_uses_the_datasource_variable(board):
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource"]
    targets = [t for p in board["panels"] for t in p.get("targets", [])]
    assert targets and all(t["datasource"] == {"type": "prometheus", "uid": "${datasource}"} for t in targets)


def test_layout_ids_unique_and_no_overlap(board):
    ids = [p["id"] for p in board["panels"]]
    assert len(set(ids)) == len(ids)
    cells = set()
    for p in board["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, p["title"]
                cells.add((x, y))


def test_json_loads_back_into_the_sdk_model(board):
    model = Dashboard.from_json(board)
    assert model.uid == d.DASHBOARD_UID and len(model.panels) == len(board["panels"])


def test_configmap_for_the_sidecar_is_a_valid_strict_object(tmp_path):
    cm = d.dashboard_configmap(ARGS)
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["kimi-k3.json"])["uid"] == "kimi-k3-serving"
    k8s_checks.validate_manifest(cm, "1.34")
    report = k8s_checks.checkov_scan(k8s_checks.write_manifests([cm], tmp_path / "m"))
    assert report["failed"] == []


def test_byte_identical_for_the_same_inputs_in_another_process():
    """Two runs of a stack (two processes, other hash seeds) render the same dashboard JSON, byte for byte."""
    code = "import sys; from tests.test_observability_dashboard import ARGS, d; sys.stdout.write(d.dashboard_json(ARGS))"
    assert output_of(code, hash_seed=1) == d.dashboard_json(ARGS) == output_of(code, hash_seed=2)


def test_bad_inputs():
    with pytest.raises(UserError, match="reserved_instances 0"):
        d.dashboard_json(d.DashboardArgs(block_end=END, reserved_instances=0))
    with pytest.raises(UserError, match="not a valid Kubernetes namespace"):
        d.dashboard_configmap(d.DashboardArgs(block_end=END, reserved_instances=1, namespace="Monitoring"))
