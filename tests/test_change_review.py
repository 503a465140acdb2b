"""Rehearsals of the change review: a second run of prod against its previous plan, the printed review and the exit status.

Each rehearsal is one change a pull request makes (a stack file edit, a library change
monkeypatched in, a program edit) planned as a second ``up`` against the plan of the same
stack before it; minutes and costs are read through the time-to-serve estimate's functions,
so they follow its figures.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from kimi_k3 import offline
from kimi_k3.cli import main
from kimi_k3.cli.plan import exit_status
from kimi_k3.guardrails import verdict as policy_verdict
from kimi_k3.observability import alerts
from kimi_k3.offline import impact
from kimi_k3.offline import state as plan_state
from kimi_k3.offline.review import Review, review
from kimi_k3.offline.state import PreviousState
from kimi_k3.weights import estimate, node_local
from tests.conftest import ROOT
from tests.review_runs import BEFORE, KEY_ROTATION, SERVING, prod_serving, prod_serving_plan, project_copy, run

NEW_DIGEST = "210987654321.dkr.ecr.us-west-2.amazonaws.com/vllm-openai@sha256:" + "4" * 64
NEXT_AMI = "1.34.2-20251215"


def reviewed(previous: PreviousState, result: offline.PlanResult, *, allow_disruption: bool = False) -> tuple[Review, str, int]:
    """The review, as printed, and the exit status ``kimi-k3 plan --previous`` would end with."""
    found = review(previous, result, allow_disruption=allow_disruption)
    verdict = policy_verdict.PolicyCheck.from_file(ROOT / "policy" / "config" / f"{result.stack}.json").verdict(result.resources)
    return found, "\n".join(found.lines()), exit_status(verdict, found)


def minutes_of(result: offline.PlanResult) -> impact.Minutes:
    found = impact.minutes_for(result.settings)
    assert found is not None
    return found


def cost(node_minutes: int) -> str:
    price = estimate.block_price("p6-b300.48xlarge")
    assert price is not None
    return f"~${node_minutes / 60 * price.value:,.0f}"


def serving_rerun(**options) -> tuple[offline.PlanResult, str, int, Review]:
    previous = prod_serving()
    result = run("prod", SERVING, "active", previous, **options)
    found, printed, status = reviewed(previous, result)
    return result, printed, status, found


# --- no change, a documentation-only change -------------------------------------------


def test_no_change_restarts_nothing_and_exits_0():
    _, printed, status, _ = serving_rerun()
    assert printed.splitlines()[0] == "Change review (against build/plan/prod, block serving until 2026-12-08 11:30 UTC):"
    assert "no change: all " in printed and "serving impact: none (no GPU pod restarts, no GPU node replaced)" in printed
    assert "weights: kept (node-local volumes unchanged)   GPU nodes: kept" in printed
    assert status == 0


def test_a_documentation_only_change_to_the_program_restarts_nothing(tmp_path):
    program = tmp_path / "__main__.py"
    source = (Path(__file__).resolve().parent.parent / "__main__.py").read_text()
    program.write_text(source.replace('"""Kimi K3 on AWS', '"""Kimi K3 on AWS (a reworded docstring)', 1) + "\n# a comment a docs PR adds\n")
    _, printed, status, _ = serving_rerun(program=program)
    assert "no change: all " in printed and "serving impact: none" in printed and status == 0


# --- pod template changes: rolling restarts ----------------------------------------------


def test_an_image_digest_change_rolls_the_gpu_pods_one_at_a_time_with_minutes_and_cost():
    result, printed, status, _ = serving_rerun(config_overrides={"kimi-k3:servingImage": NEW_DIGEST})
    each = round_up(minutes_of(result).pod_recreated)
    # the image digest is part of the engine snapshot's key too (SNAPSHOT_KEY_FIELDS): a new image never restores an old snapshot; and of the peer key label: a pod of the new image is never a peer of an old one
    assert re.search(r"  update   kubernetes:apps/v1:StatefulSet kimi-k3-serving   spec\.template \((metadata\.labels\[.kimi-k3\.io/peer-key.\], )?(env SNAPSHOT_KEY_FIELDS, )?image digest", printed)
    assert (
        f"serving impact: 2 GPU pods of kimi-k3-serving restart one at a time (half capacity for ~{each} min each), "
        f"~{2 * each} GPU-node-minutes, {cost(2 * each)}"
    ) in printed
    assert "weights: kept (node-local volumes unchanged)   GPU nodes: kept" in printed
    assert "refused" not in printed and status == 0


def test_a_max_model_len_change_restarts_the_gpu_pods():
    result, printed, status, _ = serving_rerun(config_overrides={"kimi-k3:maxModelLen": 131072})
    assert "--max-model-len 262144 -> 131072" in printed
    each = round_up(minutes_of(result).pod_recreated)
    assert f"2 GPU pods of kimi-k3-serving restart one at a time (half capacity for ~{each} min each)" in printed
    assert status == 0


def round_up(minutes: float) -> int:
    return -int(-minutes // 1)


# --- weights volumes and GPU nodes: refused while the block serves ---------------------------


def test_a_claim_template_change_replaces_the_weights_volumes_and_is_refused_during_the_block(monkeypatch):
    previous = prod_serving()
    template = node_local.weights_claim_template
    monkeypatch.setattr(node_local, "weights_claim_template", lambda storage_class, size_gb=0, name="models": template(storage_class, 2400, name))
    result = run("prod", SERVING, "active", previous)
    found, printed, status = reviewed(previous, result)
    assert "  replace  kubernetes:apps/v1:StatefulSet kimi-k3-serving   spec.volumeClaimTemplates[0].spec.resources.requests.storage 1955G -> 2400G (deleted, then re-created)" in printed
    each = round_up(minutes_of(result).pod_transfer)
    assert f"2 GPU pods of kimi-k3-serving stop at once and transfer their weights again (no capacity for ~{each} min" in printed
    assert "weights: re-transferred on every node" in printed
    assert found.refused is not None and found.refused.startswith("refused while the block serves (until 2026-12-08 11:30 UTC): kubernetes:apps/v1:StatefulSet kimi-k3-serving")
    assert f"replaces the weights volumes: ~{2 * each} GPU-node-minutes ({cost(2 * each)})" in found.refused
    assert status == 1
    _, _, allowed = reviewed(previous, result, allow_disruption=True)
    assert allowed == 0


def test_an_ami_release_change_rolls_the_gpu_nodes_with_a_cold_start_each_and_is_refused_during_the_block():
    previous = prod_serving()
    result = run("prod", SERVING, "active", previous, config_overrides={"kimi-k3:gpuAmiReleaseVersion": NEXT_AMI})
    found, printed, status = reviewed(previous, result)
    assert f"  update   aws:eks/nodeGroup:NodeGroup kimi-k3-gpu-ng   releaseVersion 1.34.2-20251120 -> {NEXT_AMI}" in printed
    node = round_up(minutes_of(result).node_start)
    assert (
        f"2 GPU nodes replaced one at a time (a cold start per node: new instance, weights and engine, ~{node} min each; half capacity meanwhile"
    ) in printed
    assert f"~{2 * node} GPU-node-minutes, {cost(2 * node)}" in printed
    assert "weights: re-transferred to each new node   GPU nodes: replaced one at a time" in printed
    assert found.refused is not None and "aws:eks/nodeGroup:NodeGroup kimi-k3-gpu-ng" in found.refused and "replaces the GPU nodes" in found.refused
    assert status == 1
    # EKS: "When upgrading managed node groups with Capacity Blocks, make sure that the desired size of the node group is set to 0"
    assert reviewed(previous, result, allow_disruption=True)[2] == 1


# --- the scheduled scale-up of a re-run, an alert rule --------------------------------------


def test_a_key_rotation_at_1120_for_a_block_at_1130_keeps_the_scheduled_scale_up(tmp_path):
    first = project_copy(tmp_path / "first", "prod", secrets={"kimi-k3:apiKey": "v1:bm9uY2UtYmVmb3Jl:Y2lwaGVydGV4dCBvZiB0aGUga2V5IGJlZm9yZSByb3RhdGlvbg=="})
    previous = PreviousState.from_plan(run("prod", BEFORE, "scheduled", root=first), "build/plan/prod")
    rotated = project_copy(tmp_path / "rotated", "prod", secrets={"kimi-k3:apiKey": "v1:bm9uY2UtYWZ0ZXIh:Y2lwaGVydGV4dCBvZiB0aGUga2V5IGFmdGVyIHJvdGF0aW9u"})
    result = run("prod", KEY_ROTATION, "scheduled", previous, root=rotated)
    found, printed, status = reviewed(previous, result)
    assert result.one("aws:autoscaling/schedule:Schedule").inputs["startTime"] == "2026-12-01T11:30:00Z"
    assert "block not serving yet: starts 2026-12-01 11:30 UTC" in printed.splitlines()[0]
    assert "note: scheduled scale-up kimi-k3-gpu-scale-at-start: 2026-12-01T11:30:00Z (kept)" in printed
    assert "note: one-time schedule kimi-k3-delivery-check-enable-alarm-actions: at(2026-12-01T11:50:00) (kept)" in printed
    assert "  replace  kubernetes:core/v1:Secret kimi-k3-serving-api-key   stringData (secret) (deleted, then re-created)" in printed
    assert "serving impact: none (no GPU pod restarts" in printed and status == 0
    assert [c.type for c in found.changes.changed()] == ["kubernetes:core/v1:Secret"]


def test_adding_an_alert_rule_has_no_gpu_impact(monkeypatch):
    previous = prod_serving()
    rules = alerts.serving_rules
    extra = {"alert": "KimiK3Example", "expr": "vector(0) > 1", "labels": {"severity": "info"}, "annotations": {"summary": "an example"}}
    monkeypatch.setattr(alerts, "serving_rules", lambda args: [*rules(args), extra])
    result = run("prod", SERVING, "active", previous)
    found, printed, status = reviewed(previous, result)
    (line,) = [line for line in printed.splitlines() if "PrometheusRule" in line]
    assert line.startswith("  update   kubernetes:monitoring.coreos.com/v1:PrometheusRule kimi-k3-alerts   spec.groups[0].rules")
    assert "(rules beyond metadata not known)" in line
    assert "serving impact: none (no GPU pod restarts, no GPU node replaced)" in printed and status == 0
    assert not found.disruptions


# --- the command ---------------------------------------------------------------------------


def test_kimi_k3_plan_previous_prints_the_review_writes_review_json_and_refuses_with_exit_1(tmp_path, capsys):
    # p1: what `kimi-k3 plan prod --out p1` wrote while the block served (the same run, written here)
    offline.write_plan(prod_serving_plan(), tmp_path / "p1")
    assert (tmp_path / "p1" / "state.json").is_file()
    common = ["--now", "2026-12-02T08:00:00Z", "--reservation-state", "active", "--quiet"]  # the block's start comes from p1
    bumped = project_copy(tmp_path / "bumped", "prod", edit={"kimi-k3:servingImage": NEW_DIGEST})
    capsys.readouterr()
    assert main(["plan", "prod", "--program", str(bumped), "--out", str(tmp_path / "p2"), "--previous", str(tmp_path / "p1"), *common]) == 0
    out = capsys.readouterr().out
    assert f"Change review (against {tmp_path / 'p1'}, block serving until 2026-12-08 11:30 UTC):" in out
    assert "GPU pods of kimi-k3-serving restart one at a time" in out
    document = json.loads((tmp_path / "p2" / "review.json").read_text())
    assert document["refused"] is None and document["impact"][0]["kind"] == "pods" and document["impact"][0]["count"] == 2
    # a node roll while the block serves: one line naming it, exit 1; --json prints the same review for machines
    rolled = project_copy(tmp_path / "rolled", "prod", edit={"kimi-k3:gpuAmiReleaseVersion": NEXT_AMI})
    args = ["plan", "prod", "--program", str(rolled), "--out", str(tmp_path / "p3"), "--previous", str(tmp_path / "p1"), *common]
    assert main([*args, "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["refused"].startswith("refused while the block serves") and printed["gpuNodes"].startswith("GPU nodes: replaced one at a time")


def test_previous_must_be_a_plan_and_json_needs_previous(tmp_path, capsys):
    assert main(["plan", "prod", "--previous", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")]) == 2
    assert "--previous " in capsys.readouterr().err
    assert main(["plan", "prod", "--json", "--out", str(tmp_path / "out")]) == 2
    assert "--json prints the change review: give --previous DIR" in capsys.readouterr().err


def test_a_plan_written_before_state_json_still_reads(tmp_path):
    result = prod_serving_plan()
    offline.write_plan(result, tmp_path / "old")
    (tmp_path / "old" / "state.json").unlink()
    old = plan_state.read(tmp_path / "old")
    assert not old.complete and old.reservation_start == prod_serving().reservation_start
    assert set(old.resources) == set(prod_serving().resources)
    _, printed, status = reviewed(old, result)
    assert "no change: all " in printed and "has no state.json" in printed and status == 0


def _secret(value):
    from pulumi.runtime import rpc

    return {rpc._special_sig_key: rpc._special_secret_sig, "value": value}


def test_the_state_fingerprints_placeholders_and_never_a_real_secret():
    from kimi_k3.offline.redaction import SECRET_MARK
    from kimi_k3.stack.settings import SECRET_PLACEHOLDER_PREFIX

    before = f"{SECRET_PLACEHOLDER_PREFIX}kimi-k3:apiKey#aaaa"
    after = f"{SECRET_PLACEHOLDER_PREFIX}kimi-k3:apiKey#bbbb"
    # The API-key Secret holds the key and a file derived from it: the derived file must not hide a rotation.
    old = plan_state.state_value(_secret({"key": before, "key-check.conf": "secure_link \"x\";\n"}))
    new = plan_state.state_value(_secret({"key": after, "key-check.conf": "secure_link \"y\";\n"}))
    assert old != new and set(old) == {SECRET_MARK}
    assert plan_state.state_value(_secret({"key": before, "key-check.conf": "other"})) == old
    real = plan_state.state_value(_secret("sk-live-0123456789"))
    assert real == SECRET_MARK and "sk-live" not in json.dumps(old)
