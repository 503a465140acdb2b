"""The start-up estimate: phases with sources and ranges, the critical path, costs at the block rate, derived timeouts."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from kimi_k3.core import catalog
from kimi_k3.errors import UserError
from kimi_k3.weights import estimate as est
from kimi_k3.weights.startup_figures import FIGURES

PROD = est.StartupInputs(nodes=2)
TODAY = replace(PROD, **est.TODAYS_MECHANISMS)
TARGETS = {"cold": 18, "warm": 10, "pod re-created": 4, "container restart": 3}
"""Issue 26's central targets."""


def minutes(x, case):
    return est.estimate_case(x, case).minutes


def test_the_line_a_plan_prints_has_ranges_the_warm_part_after_ready_and_the_drain():
    lines = est.format_estimates(PROD)
    line = lines[0]
    assert re.fullmatch(
        r"time to first token: cold \d+ min \(\d+–\d+\), warm \d+ min \(\d+–\d+; \d+ after the node is Ready\), "
        r"pod re-created \d+ min \(\d+–\d+\) after the old pod's drain of 0\.6–31 min, container restart \d+ min \(\d+–\d+\)", line,
    ), line
    assert "$112.3/instance-h x 2 nodes (block rate, estimate, 2026-12)" in lines[1]
    cold = est.estimate_case(PROD, "cold")
    assert f"cold {-(-cold.minutes // 1):.0f} min ({int(cold.low)}–" in line


def test_the_weights_are_the_models_real_size_and_shards():
    assert catalog.KIMI_K3.weights_gb == 1560.9 and catalog.KIMI_K3.weights_shards == 96
    assert round(catalog.KIMI_K3.weights_gb / catalog.KIMI_K3.weights_shards, 1) == pytest.approx(catalog.KIMI_K3.largest_shard_gb, abs=0.1)
    assert "1,453.7 GiB" in catalog.KIMI_K3_WEIGHTS_SOURCE and round(1453.7 * 2**30 / 1e9, 1) == 1560.9


def test_every_figure_is_cited_measured_or_an_estimate_with_its_range():
    for key, f in FIGURES.items():
        assert len(f.source) > 40, key
        assert f.lo <= f.value <= f.hi, key
        if f.estimate and key != "nat_data_processing":
            assert f.lo < f.hi, f"{key}: an estimate carries its range"
            assert f.source.startswith("estimate"), key
    # cited figures that disagree are taken in the middle, never the best
    assert FIGURES["compile_cold"].value == pytest.approx((118.36 + 160.29) / 2 / 60)
    assert FIGURES["image_pull_fast"].value == pytest.approx((59.813 + 67.272) / 2 / 60)
    load = FIGURES["weights_load"]
    assert load.lo < load.value < load.hi  # the median of three upstream loads, not the fastest


def test_every_phase_has_a_source_and_unmeasured_ones_are_marked_with_their_range():
    for case in est.estimate_all(PROD).values():
        assert case.low <= case.minutes <= case.high
        for phase in case.phases:
            assert len(phase.source) > 20, phase
            assert phase.lo <= phase.minutes <= phase.hi, phase
            if phase.estimate:
                assert "estimate" in est.format_phases(case)[list(case.phases).index(phase) + 1] or phase.source.startswith("min(")


def test_todays_stack_and_each_mechanism_moves_it():
    assert minutes(TODAY, "cold") > minutes(PROD, "cold") * 2
    assert minutes(replace(TODAY, crt_target_bandwidth=True), "cold") < minutes(TODAY, "cold") - 15  # 10 Gb/s fallback -> the measured S3 rate
    assert minutes(replace(TODAY, node_local_weights=True), "pod re-created") < minutes(TODAY, "pod re-created") - 20
    assert minutes(replace(TODAY, compile_cache=True), "warm") < minutes(TODAY, "warm") - 3
    assert minutes(replace(TODAY, image_prepull=True), "cold") < minutes(TODAY, "cold")
    assert minutes(replace(PROD, startup_plan=False), "warm") > minutes(PROD, "warm")
    assert minutes(replace(PROD, capture_sizes=16), "container restart") < minutes(PROD, "container restart")
    # the weights from the page cache instead of the NVMe: the loader is the bound on p6-b300 either way (8 NVMe ~ its rate)
    assert minutes(replace(PROD, buffered_load=False), "container restart") >= minutes(PROD, "container restart")


def test_prod_against_issue_26s_targets_and_what_stands_in_the_way():
    results = {case: e.minutes for case, e in est.estimate_all(PROD).items()}
    assert results["cold"] <= TARGETS["cold"] and results["pod re-created"] <= TARGETS["pod re-created"]
    # warm and container restart miss by minutes no mechanism of ours holds: node boot, the S3 transfer and the engine's own phases
    needed = est.mechanisms_needed(PROD, TARGETS)
    assert set(needed) == {"warm", "container restart"}
    issue_34 = (est.TOGGLES["sidecar_sync"], est.TOGGLES["pipelined_load"], est.TOGGLES["engine_snapshot"])
    for case in needed:  # only issue 34's mechanisms are left to turn on
        assert needed[case] and all(help.startswith(issue_34) for help in needed[case]), needed[case]
    warm = est.estimate_case(PROD, "warm")
    assert warm.after_node_ready > 4
    sync = next(p for p in warm.phases if p.name.startswith("weights sync"))
    assert sync.minutes == pytest.approx(catalog.KIMI_K3.weights_gb / FIGURES["s3_node_rate"].value / 60)


def test_a_pre_pulled_image_hides_behind_the_longer_lane():
    cold = est.estimate_case(PROD, "cold")
    pull = next(p for p in cold.phases if p.name.startswith("engine image pull"))
    sync = next(p for p in cold.phases if p.name.startswith("weights sync"))
    lane_weights = sum(p.minutes for p in cold.phases if p.lane == "weights")
    assert cold.on_critical_path(pull) != cold.on_critical_path(sync)
    assert cold.minutes == pytest.approx(sum(p.minutes for p in cold.phases if not p.block) + max(pull.minutes, lane_weights))


def test_streaming_from_s3_would_shorten_a_new_nodes_load_but_not_the_restarts_and_checks_nothing():
    options = {o.name: o for o in est.overlap_options(PROD)}
    ours = options["node copy, verified, then a page-cache load (the stacks)"]
    alone = options["Run:ai streamer from S3, no node copy"]
    both = options["Run:ai streamer from S3 while the node copy is written"]
    assert ours.verified and not alone.verified and not both.verified
    assert alone.minutes < ours.minutes and alone.restart_minutes > ours.restart_minutes
    assert both.minutes > ours.minutes  # two readers share the node's S3 rate


def test_hugging_face_direct_is_far_slower_and_says_what_to_turn_on():
    dev = replace(TODAY, weights_source="huggingface", image_in_region=False, nodes=1)
    assert minutes(dev, "cold") > 60
    assert any(h.startswith("weights staged in S3") for h in est.mechanisms_needed(dev, {"cold": 25})["cold"])


def test_costs_use_the_block_price_and_say_when_it_is_unknown():
    cold = est.estimate_case(PROD, "cold")
    assert cold.cost_usd(112.3, 2) == pytest.approx(cold.minutes / 60 * 112.3 * 2)
    line = est.format_estimates(replace(PROD, instance_type="p6-b200.48xlarge"))[1]
    assert "unknown Capacity Block price" in line and "on-demand $113.9/h is not what a block costs" in line


def test_the_ready_timeout_and_startup_probe_cover_the_cold_engines_high_end():
    recommended = est.recommended_ready_timeout_s(PROD)
    cold = est.estimate_case(PROD, "cold")
    assert recommended >= max(est.engine_minutes(cold) * 2, est.engine_minutes(cold, "high")) * 60 + 600 and recommended % 60 == 0
    assert est.check_ready_timeout(recommended, PROD) is None
    assert est.check_ready_timeout(catalog.ENGINE_READY_TIMEOUT_S, PROD) is None
    warning = est.check_ready_timeout(900, PROD)
    assert warning.startswith("engine ready timeout 900 s is shorter than the cold start estimate's high end")
    assert est.startup_probe_failure_threshold(3600, 10) * 10 >= 3600 + 600


def test_a_block_too_short_to_serve_is_a_warning():
    assert est.block_window_warning(24, PROD) is None
    assert "cannot serve" in est.block_window_warning(0.5, PROD)
    assert "serves only" in est.block_window_warning(8, replace(TODAY, weights_source="huggingface"))


def test_bad_inputs_are_one_line_errors():
    with pytest.raises(UserError, match="no start-up figures for 'g6.xlarge'"):
        est.estimate_case(replace(PROD, instance_type="g6.xlarge"), "cold")
    with pytest.raises(UserError, match="case 'hot'"):
        est.estimate_case(PROD, "hot")
    with pytest.raises(UserError, match="verify 'maybe'"):
        est.estimate_case(replace(PROD, verify="maybe"), "cold")


def test_plan_lines_for_the_real_stacks():
    from kimi_k3.stack import time_to_serve
    from kimi_k3.stack.settings import load_stack

    prod = load_stack("prod")
    lines, warnings = time_to_serve.estimate_lines(prod, block_hours=24)
    assert lines[0].startswith("time to first token: cold ") and "x 2 nodes" in lines[1]
    assert time_to_serve.baseline_inputs(prod).image_in_region  # the prod image is in ECR in us-west-2
    assert not any("weights come from Hugging Face" in w for w in warnings)
    _, dev = time_to_serve.estimate_lines(load_stack("dev"), block_hours=None)
    assert any("weights come from Hugging Face through the NAT gateway: ~" in w for w in dev)
    assert time_to_serve.baseline_inputs(load_stack("dev")).image_in_region  # Docker Hub through the stack's ECR pull-through cache
    base = time_to_serve.baseline_inputs(prod)
    on = replace(base, **dict.fromkeys(est.TOGGLES, True), verify="overlapped", hasher="openssl", verify_workers=64)
    assert est.estimate_case(on, "cold").minutes < est.estimate_case(base, "cold").minutes / 1.8


def test_the_estimate_never_sees_settings():
    """Issue 35: components take typed inputs; the stack layer builds StartupInputs from settings."""
    import ast
    from pathlib import Path

    source = Path(est.__file__).read_text()
    imported = {node.module for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom) and node.module}
    assert not any(m.startswith("kimi_k3.stack") for m in imported)
    assert not hasattr(est, "inputs_from_settings") and not hasattr(est, "plan_lines")


def test_the_snapshot_restore_is_bounded_below_by_cuda_checkpoints_measured_device_half(monkeypatch):
    """The H100 run: cuda-checkpoint restored 32 GiB in 8.57 s and 4 GiB in 2.43 s; a whole CRIU + cuda-checkpoint restore cannot beat that."""
    from kimi_k3.weights import startup_figures as sf

    assert sf.device_restore_s(32 * 2**30 / 1e9) == pytest.approx(8.57) and sf.device_restore_s(4 * 2**30 / 1e9) == pytest.approx(2.425)
    x = replace(PROD, engine_snapshot=True)
    (restore,) = [p for p in est.estimate_case(x, "container restart").phases if p.name.startswith("engine snapshot restore")]
    floor = sf.device_restore_s(sf.FIGURES["snapshot_state_gb"].value / sf.SNAPSHOT_GPUS) / 60
    assert restore.minutes >= floor and restore.lo >= sf.device_restore_s(sf.FIGURES["snapshot_state_gb"].lo / sf.SNAPSHOT_GPUS) / 60
    fast = {**sf.FIGURES, "snapshot_restore_rate": replace(sf.FIGURES["snapshot_restore_rate"], value=1e6, low=1e6, high=1e6)}
    monkeypatch.setattr(est, "FIGURES", fast)  # a restore rate no disk could give: the measured device half is what is left
    (bound,) = [p for p in est.estimate_case(x, "container restart").phases if p.name.startswith("engine snapshot restore")]
    assert bound.minutes == pytest.approx(floor)
    assert "CRIU's host half (the processes' pages read back from the NVMe) was not measured" in sf.FIGURES["snapshot_restore_rate"].source
