"""What `kimi-k3 status` makes of the API's objects: each pod's phase, the GPU nodes, the snapshot (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kimi_k3.bringup import nodes as node_views
from kimi_k3.bringup import pods
from kimi_k3.bringup.report import BringUp, bar, render, summary_line
from kimi_k3.capacity.assessment import FAIL, WARN, Finding
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.weights.progress import Progress, format_line
from tests import fake_kube_api as k

NOW = datetime(2026, 12, 1, 12, 5, tzinfo=UTC)
START = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
CREATED = NOW - timedelta(minutes=20)
NODE = "ip-10-42-1-5.ec2.internal"
DONE = k.container_status("fetch-weights", k.terminated(0, "Completed", CREATED))


def weights_line(t: datetime, done: int, total: int = 1_700_000_000_000, rate: int = 20_000_000_000, verified: int = 10, files: int = 64, step: str = "weights") -> str:
    return format_line(Progress(step, int(t.timestamp()), done, total, rate, verified, files))


def syncing(started: datetime = NOW - timedelta(minutes=1)) -> dict:
    return k.pod("kimi-k3-serving-7d9f-a", created=CREATED, node_name=NODE, init=[k.container_status("fetch-weights", k.running(started))],
                 containers=[k.container_status("vllm", k.waiting("PodInitializing"), image="vllm/vllm-openai:kimi-k3")])


def test_an_unschedulable_pod_waits_for_a_gpu_node_and_says_why():
    p = k.pod("a", created=CREATED, unschedulable="0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
    view = pods.classify(p, now=NOW)
    assert view.phase == pods.SCHEDULING and "3 Insufficient nvidia.com/gpu" in view.detail and view.node is None
    assert pods.log_wanted(p) is None


def test_the_weights_phase_reads_bytes_rate_and_eta_from_the_newest_progress_line():
    p = syncing()
    assert pods.log_wanted(p) == ("fetch-weights", False)
    log = ["verified config.json", weights_line(NOW - timedelta(seconds=20), 400_000_000_000), "verified a.safetensors", weights_line(NOW - timedelta(seconds=5), 612_000_000_000)]
    view = pods.classify(p, log, now=NOW)
    assert view.phase == pods.WEIGHTS and not view.problem and view.container == "fetch-weights"
    assert view.progress is not None and view.progress.bytes_done == 612_000_000_000
    assert round(view.progress.eta_s) == 54  # (1700 - 612) GB at 20 GB/s
    assert "10 of 64 files verified so far" in view.detail and "for 1m 0s" in view.detail


def test_a_progress_line_that_stopped_coming_is_flagged():
    view = pods.classify(syncing(), [weights_line(NOW - timedelta(minutes=3), 612_000_000_000)], now=NOW)
    assert view.problem and view.stale_s == 180 and "no progress line for 180 s" in view.detail


def test_verify_step_and_a_step_without_progress_lines():
    assert pods.classify(syncing(), [weights_line(NOW, 1_700_000_000_000, step="verify", verified=60)], now=NOW).phase == pods.VERIFYING
    hf = pods.classify(syncing(), ["Fetching 72 files:  12%|#2  | 9/72"], now=NOW)
    assert hf.phase == pods.WEIGHTS and "no progress reported" in hf.detail and hf.progress is None
    verify = k.pod("a", created=CREATED, node_name=NODE, init=[DONE, k.container_status("verify-weights", k.running(NOW - timedelta(minutes=2)))])
    assert pods.classify(verify, now=NOW).phase == pods.VERIFYING
    restore = k.pod("a", created=CREATED, node_name=NODE, init=[DONE, k.container_status("restore-compile-cache", k.running(NOW - timedelta(seconds=30)))])
    view = pods.classify(restore, now=NOW)
    assert view.phase == pods.CACHE_RESTORE and view.detail == "restore-compile-cache: restoring the compile and JIT caches from S3 for 0m 30s"


def test_a_failed_init_container_names_its_exit_and_last_line():
    p = k.pod("a", created=CREATED, node_name=NODE, init=[k.container_status(
        "fetch-weights", k.waiting("CrashLoopBackOff", "back-off 40s restarting failed container"), restarts=2,
        last=k.terminated(1, "Error", NOW - timedelta(minutes=2)))])
    assert pods.log_wanted(p) == ("fetch-weights", True)
    view = pods.classify(p, ["weights do not match SHA256SUMS: model-00002.safetensors"], now=NOW)
    assert view.phase == pods.FAILED and view.problem and view.restarts == 2
    assert "exit code 1 (Error)" in view.detail and "model-00002.safetensors" in view.detail


def test_after_the_init_containers_the_engine_image_is_pulled_then_the_engine_loads_then_warms_up():
    pulling = k.pod("a", created=CREATED, node_name=NODE, init=[DONE], containers=[k.container_status("vllm", k.waiting("ContainerCreating"))])
    assert pods.classify(pulling, now=NOW).phase == pods.IMAGE_PULL
    loading = k.pod("a", created=CREATED, node_name=NODE, init=[DONE], phase="Running",
                    containers=[k.container_status("vllm", k.running(NOW - timedelta(minutes=6, seconds=12)), started=False)])
    assert pods.log_wanted(loading) == ("vllm", False)
    view = pods.classify(loading, ["INFO 12-01 11:59:02 [default_loader.py:262] Loading weights took 170.20 seconds"], now=NOW)
    assert view.phase == pods.ENGINE_LOADING and "for 6m 12s" in view.detail and "Loading weights took 170.20 seconds" in view.detail
    warming = k.pod("a", created=CREATED, node_name=NODE, init=[DONE], phase="Running", containers=[k.container_status("vllm", k.running(NOW - timedelta(minutes=9)), started=True)])
    assert pods.classify(warming, now=NOW).phase == pods.WARMING_UP


def test_a_ready_pod_and_a_crash_looping_engine():
    ready = k.pod("a", created=CREATED, node_name=NODE, init=[DONE], phase="Running", ready=True,
                  containers=[k.container_status("vllm", k.running(NOW - timedelta(minutes=10)), ready=True, started=True)])
    view = pods.classify(ready, now=NOW)
    assert view.phase == pods.READY and view.ready and view.serves_api
    crashing = k.pod("a", created=CREATED, node_name=NODE, init=[DONE], phase="Running", containers=[k.container_status(
        "vllm", k.waiting("CrashLoopBackOff"), restarts=3, last=k.terminated(1, "Error", NOW - timedelta(minutes=1)))])
    assert pods.log_wanted(crashing) == ("vllm", True)
    view = pods.classify(crashing, ["RuntimeError: CUDA error: uncorrectable ECC error encountered"], now=NOW)
    assert view.phase == pods.FAILED and "crash-looping (3 restarts)" in view.detail and "uncorrectable ECC" in view.detail


def test_leader_worker_set_roles():
    leader = k.pod("g-0", created=CREATED, labels={pods.LWS_WORKER_INDEX: "0"})
    worker = k.pod("g-0-1", created=CREATED, labels={pods.LWS_WORKER_INDEX: "1"})
    assert (pods.role_of(leader), pods.role_of(worker), pods.role_of(k.pod("d", created=CREATED))) == ("leader", "worker", "server")
    assert not pods.classify(worker, now=NOW).serves_api


def test_gpu_nodes_joined_ready_and_allocatable():
    summary = node_views.summarize([
        k.node("b", created=NOW - timedelta(minutes=25)),
        k.node("a", ready=False, gpus=0, created=NOW - timedelta(minutes=2),
               conditions=[{"type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaXID79", "message": "GPU has fallen off the bus"}]),
    ], reserved=2)
    assert (summary.joined, summary.ready, summary.gpus_allocatable) == (2, 1, 8)
    assert [n.name for n in summary.nodes] == ["a", "b"]
    assert summary.nodes[0].unhealthy == ("AcceleratedHardwareReady: GPU has fallen off the bus",)
    assert summary.nodes[1].instance_id.startswith("i-0")


def block(**changes) -> CapacityBlockFacts:
    values = dict(reservation_id="cr-0a1b2c3d4e5f60718", availability_zone="us-east-1a", instance_type="p6-b300.48xlarge",
                  instance_count=2, state="active", start=START, end=START + timedelta(days=7))
    values.update(changes)
    return CapacityBlockFacts(**values)


def snapshot(**changes) -> BringUp:
    view = pods.classify(syncing(), [weights_line(NOW - timedelta(seconds=5), 612_000_000_000)], now=NOW)
    values = dict(stack="dev", now=NOW, reservation_id="cr-0a1b2c3d4e5f60718", block=block(), replicas_expected=2, namespace="kimi-serving",
                  nodes=node_views.summarize([k.node(NODE, created=NOW - timedelta(minutes=25))], 2), pods=(view,),
                  extension=Finding(WARN, "extension", "7-day extension to 2026-12-15 11:30 UTC is payment-pending"),
                  scaledown=Finding(FAIL, "scale-down", "EKS scales the ASG to 0 at 2026-12-08 10:50 UTC, before the block's end - 40 min"))
    values.update(changes)
    return BringUp(**values)


def test_the_snapshot_as_json_for_machines():
    doc = snapshot().to_json()
    assert doc["schema"] == "kimi-k3-status/1" and doc["ready"] is False
    assert doc["endpoint"] == {"replicas_ready": 0, "replicas_expected": 2}
    assert doc["capacity_block"]["state"] == "active" and doc["capacity_block"]["seconds_left"] == 7 * 86400 - 35 * 60
    assert doc["extension"]["level"] == "WARN" and doc["scaledown"]["level"] == "FAIL"
    assert doc["gpu_nodes"]["ready"] == 1 and doc["gpu_nodes"]["gpus_allocatable"] == 8
    (p,) = doc["pods"]
    assert p["phase"] == "weights" and p["progress"]["eta_seconds"] == 54 and p["progress"]["bytes_total"] == 1_700_000_000_000


def test_the_snapshot_for_people_has_the_block_the_nodes_and_progress_bars():
    text = "\n".join(render(snapshot()))
    assert "Capacity Block cr-0a1b2c3d4e5f60718: active, 2 x p6-b300.48xlarge in us-east-1a" in text
    assert "started 35m ago, ends in 6d 23h 25m" in text
    assert "scale-down  FAIL EKS scales" in text and "extension   WARN 7-day extension" in text
    assert "GPU nodes: 1 of 2 joined, 1 Ready, 8 GPUs allocatable" in text
    assert " 36%|" in text and "612G" in text and "1.70TB" in text and "20.0GB/s" in text and "ETA 00:54" in text
    assert "Endpoint: not ready (0 of 2 replicas)" in text
    assert "0/2 ready" in summary_line(snapshot()) and "a weights 36%" in summary_line(snapshot())


def test_ready_and_hopeless():
    ready_pod = pods.classify(k.pod("a", created=CREATED, node_name=NODE, init=[DONE], ready=True, phase="Running",
                                    containers=[k.container_status("vllm", k.running(CREATED), ready=True, started=True)]), now=NOW)
    assert snapshot(pods=(ready_pod, ready_pod), scaledown=None).ready
    ready = snapshot(pods=(ready_pod, ready_pod))
    assert render(ready)[-2:] == ["Endpoint: READY", f"Start-up phases measured beside the estimate: kimi-k3 startup-report {ready.stack}"]
    assert ready.to_json()["startup_report"] == f"kimi-k3 startup-report {ready.stack}"
    expired = snapshot(block=block(state="expired"), pods=())
    assert expired.hopeless and render(expired)[-1] == "Endpoint: will not come up: the Capacity Block is expired"


@pytest.mark.parametrize(
    ("state", "hopeless"),
    [("expired", True), ("cancelled", True), ("payment-failed", True), ("failed", True), ("unsupported", True),
     ("unavailable", True), ("scheduled", False), ("active", False), ("payment-pending", False), ("pending", False),
     ("assessing", False), ("delayed", False)],
)
def test_wait_gives_up_exactly_where_the_assessment_says_no_node_group_can_use_the_block(state, hopeless):
    """``status --wait`` stops on the states the capacity assessment refuses, and waits through the pending ones."""
    assert snapshot(block=block(state=state), pods=()).hopeless is hopeless


def test_a_bar_is_tqdms_meter():
    assert bar(50, 100, 10, unit="files") .startswith(" 50%|")
    assert "500MB/1.00GB [100MB/s, ETA 00:05]" in bar(500e6, 1e9, 5, rate=100e6)
