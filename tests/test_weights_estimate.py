"""The start-up estimate: phases with sources, the critical path, costs at the block rate, derived timeouts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kimi_k3.core import catalog
from kimi_k3.errors import UserError
from kimi_k3.weights import estimate as est

PROD = est.StartupInputs(nodes=2)
TODAY = replace(PROD, crt_target_bandwidth=False, verify="sequential", hasher="sha256sum", verify_workers=32, compile_cache=False, node_local_weights=False, image_prepull=False, fast_image_pull=False)


def minutes(x, case):
    return est.estimate_case(x, case).minutes


def test_the_line_a_plan_prints():
    lines = est.format_estimates(PROD)
    assert lines[0].startswith("time to first token: cold ") and ", warm " in lines[0] and ", pod re-created " in lines[0] and ", container restart " in lines[0]
    assert "$112.3/instance-h x 2 nodes (block rate, estimate, 2026-12)" in lines[1]


def test_todays_stack_models_at_about_an_hour_and_each_mechanism_moves_it():
    assert 50 <= minutes(TODAY, "cold") <= 65  # the review's ~60 min
    assert minutes(replace(TODAY, crt_target_bandwidth=True), "cold") < minutes(TODAY, "cold") - 15  # 10 Gb/s fallback -> catalog target
    assert minutes(replace(TODAY, node_local_weights=True), "pod re-created") < minutes(TODAY, "pod re-created") - 20
    assert minutes(replace(TODAY, compile_cache=True), "warm") < minutes(TODAY, "warm") - 5
    assert minutes(replace(TODAY, image_prepull=True), "cold") < minutes(TODAY, "cold")


def test_prod_with_every_mechanism_against_the_targets():
    results = {case: e.minutes for case, e in est.estimate_all(PROD).items()}
    assert results["pod re-created"] <= 10
    assert results["cold"] < minutes(TODAY, "cold") / 2
    # node boot alone (an estimate) is 10 min of a 12 min warm target: the model says so instead of hiding it
    needed = est.mechanisms_needed(PROD, {"cold": 25, "warm": 12, "pod re-created": 10})
    assert "pod re-created" not in needed
    for case in needed:
        assert needed[case] == ["none left to turn on: the remaining minutes are node boot and the engine itself"]


def test_a_pre_pulled_image_hides_behind_the_longer_lane():
    cold = est.estimate_case(PROD, "cold")
    pull = next(p for p in cold.phases if p.name.startswith("engine image pull"))
    sync = next(p for p in cold.phases if p.name.startswith("weights sync"))
    lane_weights = sum(p.minutes for p in cold.phases if p.lane == "weights")
    assert cold.on_critical_path(pull) != cold.on_critical_path(sync)
    assert cold.minutes == pytest.approx(sum(p.minutes for p in cold.phases if not p.block) + max(pull.minutes, lane_weights))


def test_every_phase_has_a_source_and_unmeasured_ones_are_marked():
    for case in est.estimate_all(PROD).values():
        for phase in case.phases:
            assert len(phase.source) > 20, phase
    assert est.FIGURES["node_boot"].estimate and not est.FIGURES["openssl_per_core"].estimate
    assert "aws-c-s3" in catalog.STARTUP_FACTS["p6-b300.48xlarge"].s3_target_gbps.source


def test_hugging_face_direct_is_far_slower_and_says_what_to_turn_on():
    dev = replace(TODAY, weights_source="huggingface", image_in_region=False, nodes=1)
    assert minutes(dev, "cold") > 75
    assert any(h.startswith("weights staged in S3") for h in est.mechanisms_needed(dev, {"cold": 25})["cold"])


def test_costs_use_the_block_price_and_say_when_it_is_unknown():
    cold = est.estimate_case(PROD, "cold")
    assert cold.cost_usd(112.3, 2) == pytest.approx(cold.minutes / 60 * 112.3 * 2)
    line = est.format_estimates(replace(PROD, instance_type="p6-b200.48xlarge"))[1]
    assert "unknown Capacity Block price" in line and "on-demand $113.9/h is not what a block costs" in line


def test_the_ready_timeout_and_startup_probe_cover_the_cold_engine():
    recommended = est.recommended_ready_timeout_s(PROD)
    cold_engine = est.engine_minutes(est.estimate_case(PROD, "cold")) * 60
    assert recommended >= cold_engine * 2 + 600 and recommended % 60 == 0
    assert est.check_ready_timeout(recommended, PROD) is None
    assert est.check_ready_timeout(catalog.ENGINE_READY_TIMEOUT_S, PROD) is None
    warning = est.check_ready_timeout(900, PROD)
    assert warning.startswith("engine ready timeout 900 s is shorter than the cold start estimate")
    assert est.startup_probe_failure_threshold(3600, 10) * 10 >= 3600 + 600


def test_a_block_too_short_to_serve_is_a_warning():
    assert est.block_window_warning(24, PROD) is None
    assert "cannot serve" in est.block_window_warning(1, PROD)
    assert "serves only" in est.block_window_warning(8, replace(TODAY, weights_source="huggingface"))


def test_bad_inputs_are_one_line_errors():
    with pytest.raises(UserError, match="no start-up figures for 'g6.xlarge'"):
        est.estimate_case(replace(PROD, instance_type="g6.xlarge"), "cold")
    with pytest.raises(UserError, match="case 'hot'"):
        est.estimate_case(PROD, "hot")
    with pytest.raises(UserError, match="verify 'maybe'"):
        est.estimate_case(replace(PROD, verify="maybe"), "cold")


def test_plan_lines_for_the_real_stacks():
    from kimi_k3.stack.settings import load_stack

    prod = load_stack("prod")
    lines = est.plan_lines(prod, block_hours=24)
    assert lines[0].startswith("time to first token: cold ") and "x 2 nodes" in lines[1]
    assert est.inputs_from_settings(prod).image_in_region  # the prod image is in ECR in us-west-2
    assert not any(line.startswith("warning: weights come from Hugging Face") for line in lines)
    dev = est.plan_lines(load_stack("dev"))
    assert any(line.startswith("warning: weights come from Hugging Face through the NAT gateway: ~") for line in dev)
    assert est.inputs_from_settings(load_stack("dev")).image_in_region  # Docker Hub through the stack's ECR pull-through cache
    on = est.inputs_from_settings(prod, crt_target_bandwidth=True, verify="overlapped", hasher="openssl", verify_workers=64, compile_cache=True, node_local_weights=True, image_prepull=True, fast_image_pull=True)
    assert est.estimate_case(on, "cold").minutes < est.estimate_case(est.inputs_from_settings(prod), "cold").minutes / 1.8
