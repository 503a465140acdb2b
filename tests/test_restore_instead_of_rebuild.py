"""Issue 34: restore instead of rebuild, the sync as a native sidecar, the pipelined loader, and what the report reads of them."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from kimi_k3.bringup import startup
from kimi_k3.errors import SettingsError, UserError
from kimi_k3.stack import project
from kimi_k3.stack.settings import load_settings
from kimi_k3.weights import WeightsError, engine_snapshot, node_sync, pipelined_load
from kimi_k3.weights import estimate as est
from kimi_k3.weights.startup_figures import FIGURES
from tests.builders import load_stack_settings
from tests.conftest import ROOT

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm@sha256:" + "a" * 64
KEY = engine_snapshot.SnapshotKey(image=IMAGE, driver_version="590.48.01", gpu="B300", gpus=8, model_revision="f" * 40,
                                  engine_args=("--tensor-parallel-size", "8", "--enable-sleep-mode"), engine_env=(("VLLM_USE_V1", "1"),))
PROD = est.StartupInputs(nodes=2, sidecar_sync=True)
TARGETS = {"cold": 12, "warm": 8, "pod re-created": 2, "container restart": 1.5}
"""Issue 34's central targets."""


# --- the snapshot's key and its checks -------------------------------------------------------------------------------

def test_a_snapshot_restores_only_under_its_own_key_and_names_the_first_field_that_differs():
    assert engine_snapshot.restore_decision(KEY.to_json(), KEY)[0] is True
    for change, field in ((dict(driver_version="590.86.10"), "driver_version"), (dict(image=IMAGE[:-1] + "b"), "image"), (dict(gpu="B200"), "gpu"),
                          (dict(engine_args=("--tensor-parallel-size", "8")), "engine_args"), (dict(model_revision="e" * 40), "model_revision"),
                          (dict(kernel_release="6.12.0-other"), "kernel_release"), (dict(gpu_bus_ids=("00000000:1A:00.0",)), "gpu_bus_ids")):
        ok, reason = engine_snapshot.restore_decision(replace(KEY, **change).to_json(), KEY)
        assert not ok and reason.startswith(f"snapshot {field} ") and reason.endswith("cold start"), reason
    assert engine_snapshot.restore_decision(None, KEY) == (False, "no snapshot (KEY missing): cold start")
    assert not engine_snapshot.restore_decision("{not json", KEY)[0]
    assert not engine_snapshot.restore_decision(KEY.to_json().replace(f'"{engine_snapshot.KEY_VERSION}"', '"v0"'), KEY)[0]  # another layout
    assert KEY.digest() != replace(KEY, engine_env=(("VLLM_USE_V1", "0"),)).digest()


def test_a_snapshot_key_refuses_a_floating_tag_and_a_non_driver_version():
    with pytest.raises(UserError, match="must be pinned by digest"):
        replace(KEY, image="vllm/vllm-openai:v0.27.1")
    with pytest.raises(UserError, match="driver_version 'latest'"):
        replace(KEY, driver_version="latest")


def test_the_node_must_have_dynamos_driver_floor_criu_4_and_x86():
    assert engine_snapshot.requirement_problems("590.48.01", 8, (4, 1)) == []
    assert engine_snapshot.requirement_problems("580.159.04", 1, (4, 0)) == []  # single-GPU: 580 is enough
    problems = engine_snapshot.requirement_problems("580.159.04", 8, (3, 19), arch="aarch64")
    assert len(problems) == 3 and "older than 590" in problems[0] and "CRIU 3.19" in problems[1] and "x86_64" in problems[2]
    assert "CRIU missing" in engine_snapshot.requirement_problems("590.1", 8, None)[0]


def test_restored_bytes_are_verified_like_the_weights():
    manifest = "ab  pages-1.img\ncd  core-2.img\n"
    assert engine_snapshot.manifest_problems(manifest, {"pages-1.img": "ab", "core-2.img": "cd"}) == []
    assert engine_snapshot.manifest_problems(manifest, {"pages-1.img": "ab", "core-2.img": "ce"}) == ["core-2.img: sha256 ce, manifest cd"]
    assert engine_snapshot.manifest_problems(manifest, {"pages-1.img": "ab"}) == ["core-2.img is missing"]
    assert engine_snapshot.manifest_problems("", {}) == ["SHA256SUMS lists no file"]


# --- the estimate --------------------------------------------------------------------------------------------------

def minutes(x, case):
    return est.estimate_case(x, case).minutes


def test_a_snapshot_replaces_engine_start_compile_and_graphs_on_restart_and_recreation():
    with_snapshot = replace(PROD, engine_snapshot=True)
    for case in ("container restart", "pod re-created"):
        names = [p.name for p in est.estimate_case(with_snapshot, case).phases]
        assert "engine snapshot restore (CRIU + cuda-checkpoint)" in names and "weights reload into the restored engine (page cache)" in names
        assert not any(n.startswith(("compile", "CUDA graph capture", "engine start")) for n in names), names
        assert minutes(with_snapshot, case) < minutes(PROD, case) - 1
    # without node-local weights there is no snapshot on the node to restore
    assert minutes(replace(with_snapshot, node_local_weights=False), "container restart") == minutes(replace(PROD, node_local_weights=False), "container restart")


def test_the_snapshot_restore_is_its_bytes_at_the_cited_restore_rate():
    restart = est.estimate_case(replace(PROD, engine_snapshot=True), "container restart")
    restore = next(p for p in restart.phases if p.name.startswith("engine snapshot restore"))
    state, rate = FIGURES["snapshot_state_gb"], FIGURES["snapshot_restore_rate"]
    assert restore.minutes == pytest.approx(state.value / rate.value / 60) and restore.hi == pytest.approx(state.hi / rate.lo / 60)
    assert rate.value == pytest.approx((145 / 41 + 31 / 12) / 2)  # the middle of the two cited restores


def test_the_sidecar_puts_the_cache_restore_beside_the_sync_and_the_pipelined_load_the_engine_start():
    warm = est.estimate_case(PROD, "warm")
    restore = next(p for p in warm.phases if p.name == "compile cache restore")
    assert restore.block == "node-prep" and not warm.on_critical_path(restore)
    assert minutes(PROD, "warm") < minutes(replace(PROD, sidecar_sync=False), "warm")
    pipelined = replace(PROD, pipelined_load=True)
    phases = est.estimate_case(pipelined, "warm").phases
    start = next(p for p in phases if p.name == "engine start")
    assert start.block == "node-prep" and start.lane == "engine"
    assert minutes(pipelined, "warm") < minutes(PROD, "warm") - 0.5
    # the load cannot end before the last shard has arrived and been verified, however early the engine starts
    lanes = {p.lane: 0.0 for p in phases if p.block}
    for p in phases:
        if p.block:
            lanes[p.lane] += p.minutes
    assert lanes["weights"] > sum(p.minutes for p in phases if p.lane == "weights" and p.name.startswith("weights sync"))


def test_prod_against_issue_34s_targets_each_miss_names_the_phase_in_its_way():
    every = replace(PROD, pipelined_load=True, engine_snapshot=True, engine_snapshot_s3=True)
    results = {case: e.minutes for case, e in est.estimate_all(every).items()}
    assert results["warm"] <= TARGETS["warm"]
    # what stands in the way with every mechanism on (docs/weights.md, "Findings"): the weights into the GPUs at the cited
    # page-cache loader rate (restart, re-created pod, warm after Ready), the cold compile and kernel JIT (cold)
    assert results["container restart"] > TARGETS["container restart"] and results["pod re-created"] > TARGETS["pod re-created"] - 0.1
    assert results["cold"] > TARGETS["cold"]
    reload = next(p for p in est.estimate_case(every, "container restart").phases if p.name.startswith("weights reload"))
    assert reload.minutes == max(p.minutes for p in est.estimate_case(every, "container restart").phases)
    cold = est.estimate_case(every, "cold")
    assert sum(p.minutes for p in cold.phases if p.name.startswith(("compile (cold)", "kernel JIT"))) > results["cold"] - TARGETS["cold"]


def test_a_node_replaced_beside_a_serving_peer_takes_the_weights_over_efa():
    peer = est.peer_replacement(replace(PROD, engine_snapshot=True, engine_snapshot_s3=True, peer_transfer=True))
    transfer = next(p for p in peer.phases if p.name.startswith("weights from a serving peer"))
    assert transfer.minutes == pytest.approx(1560.9 / FIGURES["peer_transfer_rate"].value / 60)
    assert peer.minutes < minutes(replace(PROD, engine_snapshot=True, engine_snapshot_s3=True, pipelined_load=True), "warm")


# --- the sidecar and the pipelined loader ------------------------------------------------------------------------------

def test_the_sidecar_key_needs_s3_weights_and_one_node_replicas():
    assert load_settings(project.find_project(None, ROOT), "prod").time_to_serve.sync_sidecar is True  # the committed prod stack
    with pytest.raises(SettingsError, match=r"kimi-k3:weightsSyncSidecar: True is not accepted; needs kimi-k3:weightsSource s3"):
        load_stack_settings("dev", weightsSyncSidecar=True, weightsSource="huggingface")


def test_the_loaders_marker_names_are_the_syncs():
    assert pipelined_load.SHARD_MARKERS == node_sync.SHARD_MARKERS and pipelined_load.WEIGHTS_MARKER == node_sync.WEIGHTS_MARKER
    assert f"marker={node_sync.WEIGHTS_MARKER}\n" in node_sync.NODE_SYNC_SCRIPT


def test_the_loader_yields_shards_in_manifest_order_as_each_is_verified(tmp_path):
    names = ["model-00002.safetensors", "model-00001.safetensors", "config.json", "model-00003.safetensors"]
    (tmp_path / "SHA256SUMS").write_text("".join(f"{'0' * 64}  {n}\n" for n in names))
    markers = tmp_path / node_sync.SHARD_MARKERS
    markers.mkdir()
    got: list[tuple[str, float]] = []
    logged: list[str] = []

    def verify_later() -> None:
        for n in (1, 2, 3, 4):  # the sync verifies them one after the other
            time.sleep(0.05)
            (markers / str(n)).write_text(names[n - 1])

    writer = threading.Thread(target=verify_later)
    writer.start()
    for path in pipelined_load.verified_shards(str(tmp_path), poll_s=0.01, log=logged.append):
        got.append((path.rsplit("/", 1)[1], time.monotonic()))
        assert (markers / str(names.index(path.rsplit("/", 1)[1]) + 1)).exists()  # never before its marker
    writer.join()
    assert [n for n, _ in got] == ["model-00002.safetensors", "model-00001.safetensors", "model-00003.safetensors"]
    assert len(logged) == 1 and startup.parse_engine_log(logged).measurements[0].what == "pipelined load wait"


def test_the_loader_takes_everything_at_once_when_the_whole_manifest_is_verified_and_gives_up_after_its_timeout(tmp_path):
    (tmp_path / "SHA256SUMS").write_text(f"{'0' * 64}  model-00001.safetensors\n")
    (tmp_path / node_sync.WEIGHTS_MARKER).write_text("x")
    assert len(list(pipelined_load.verified_shards(str(tmp_path), log=lambda _: None))) == 1
    (tmp_path / node_sync.WEIGHTS_MARKER).unlink()
    ticks = iter(range(0, 10_000, 10))
    with pytest.raises(WeightsError, match=r"shard 1 \(model-00001.safetensors\) not verified after 30 s"):
        list(pipelined_load.verified_shards(str(tmp_path), timeout_s=30, clock=lambda: float(next(ticks)), sleep=lambda _: None, log=lambda _: None))


# --- startup-report reads the new phases -------------------------------------------------------------------------------

NEW_PHASE_LINES = [
    # vLLM 0.27.1 vllm/v1/executor/abstract.py (logger.info "It took %.6f seconds to fall asleep." / "... to wake up tags %s.")
    "(EngineCore_DP0 pid=212) INFO 12-07 05:01:02 [abstract.py:304] It took 2.514233 seconds to fall asleep.",
    # vLLM 0.27.1 vllm/v1/worker/gpu_model_runner.py reload_weights (logger.info_once "Reloading and processing weights took %.2f seconds")
    "(Worker_TP0 pid=371) INFO 12-07 05:03:07 [gpu_model_runner.py:5605] Reloading and processing weights took 58.31 seconds",
    "(EngineCore_DP0 pid=212) INFO 12-07 05:03:09 [abstract.py:322] It took 1.734902 seconds to wake up tags ['kv_cache'].",
    # ai-dynamo/modelexpress load_strategy/rdma_strategy.py (f-strings of _receive_from_peer)
    "(Worker_TP3 pid=380) INFO 12-07 05:02:40 [rdma_strategy.py:512] [Worker 3] [TIMING] RDMA transfer complete: 1811 tensors, 195.11 GB, 17.902s, 87.2 Gbps",
    "(Worker_TP3 pid=380) INFO 12-07 05:02:41 [rdma_strategy.py:520] [Worker 3] [TIMING] Total receive time: 18.44s",
    # this project's lines (kimi_k3.weights.engine_snapshot, node_sync)
    engine_snapshot.VERIFY_LOG.format(key=KEY.digest()[:12], files=412, gb=88.4, seconds=1.2),
    engine_snapshot.RESTORE_LOG.format(key=KEY.digest()[:12], gb=88.4, seconds=31.7),
    engine_snapshot.FETCH_LOG.format(key=KEY.digest()[:12], seconds=9.4) + " (fetched 412 files and KEY last from s3://acme/c/engine-snapshots/ab/ in 9 s)",
    # the copier's line in the fetch-weights container (kimi_k3.weights.snapshot_copy, COPIER_SCRIPT)
    f"engine snapshot copy {KEY.digest()[:12]}: upload: uploaded 412 files and KEY last to s3://acme/c/engine-snapshots/{KEY.digest()}/ in 38 s",
    "synced and verified 97 files from s3://acme-ml-weights-us-west-2/kimi-k3/ in 131 s (openssl, 16 workers, target 43750000000 B/s)",
]


def test_the_report_reads_every_new_phase_from_real_format_lines_beside_the_estimate():
    log = startup.parse_engine_log(NEW_PHASE_LINES)
    seen = {m.what: m.seconds for m in log.measurements}
    assert seen == {"sleep": 2.514233, "wake up": 1.734902, "weights reload": 58.31, "peer transfer (RDMA only)": 17.902, "peer transfer": 18.44,
                    "engine snapshot verify": 1.2, "engine snapshot restore": 31.7, "weights sync and verify": 131.0,
                    "engine snapshot fetch": 9.4, "engine snapshot upload": 38.0}
    restart = startup.report(est.estimate_case(replace(PROD, engine_snapshot=True), "container restart"), log.measurements)
    rows = {r.name: r for r in restart.rows}
    assert rows["engine snapshot restore (CRIU + cuda-checkpoint)"].measured_min == pytest.approx(31.7 / 60, abs=0.01)
    assert rows["engine snapshot sha256 verify"].measured_min == pytest.approx(1.2 / 60, abs=0.01)
    assert rows["KV cache re-allocated (wake_up)"].measured_min == pytest.approx(1.734902 / 60, abs=0.01)
    assert rows["weights reload into the restored engine (page cache)"].measured_min == pytest.approx(58.31 / 60, abs=0.01)
    peer = {r.name: r for r in startup.report(est.peer_replacement(replace(PROD, peer_transfer=True)), log.measurements).rows}
    assert peer["weights from a serving peer (NIXL over EFA)"].measured_min == pytest.approx(18.44 / 60, abs=0.01)
    warm = {r.name: r for r in startup.report(est.estimate_case(replace(PROD, engine_snapshot=True, engine_snapshot_s3=True), "warm"), log.measurements).rows}
    assert warm["weights and engine snapshot sync (S3, CRT)"].measured_min == pytest.approx(131 / 60, abs=0.01)
    fetched = [r for r in warm.values() if r.name.startswith("engine snapshot from S3")]
    assert fetched and all(r.measured_min == pytest.approx(9.4 / 60, abs=0.01) for r in fetched), list(warm)
    lines = startup.render(restart)
    assert any(line.split() [:6] == ["engine", "snapshot", "restore", "(CRIU", "+", "cuda-checkpoint)"] and "measured   0.53" in line for line in lines), lines


def test_the_s3_rate_sits_at_the_middle_of_its_range_not_its_slow_end():
    rate = FIGURES["s3_node_rate"]
    assert rate.value == pytest.approx((rate.lo + rate.hi) / 2) and rate.lo == 10.0  # issue 34: 10 GB/s was its low end
    sync = next(p for p in est.estimate_case(PROD, "warm").phases if p.name.startswith("weights sync"))
    assert sync.minutes == pytest.approx(1560.9 / 13.0 / 60)
