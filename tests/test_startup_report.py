"""`kimi-k3 startup-report`: real upstream vLLM start-up logs, saved cluster objects, and a stub cluster, beside the estimate."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from kimi_k3 import cli
from kimi_k3.bringup import report as bringup_report
from kimi_k3.bringup import startup
from tests import fake_kube_api as k
from tests.conftest import NOW, ROOT

LOGS = ROOT / "tests/data/vllm-startup-logs"

UPSTREAM = {
    # file: (every measurement it holds, seconds), the cache verdict
    "deepseek-r1-tp16-h800-vllm-0.8.4.log": ({"weights load": 23.36}, None),
    "deepseek-v4-flash-sm12x-instanttensor.log": ({"weights load": 24.16}, None),
    "deepseek-v4-flash-sm8x-graph-capture.log": ({"CUDA graph capture": 22.0}, None),
    "kimi-linear-48b-tp2-compile-cache-hit.log": ({"compiled graph load": 4.027, "compile": 11.68}, True),
    "runai-streamer-67-engine-tail.log": ({"inductor compile": 36.76, "compile": 45.81, "CUDA graph capture": 37.0, "engine init": 90.84}, False),
}


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_every_upstream_log_gives_the_durations_it_holds(name):
    log = startup.parse_engine_log((LOGS / name).read_text().splitlines())
    expected, hit = UPSTREAM[name]
    assert {m.what: m.seconds for m in log.measurements} == expected
    assert log.cache_hit is hit
    assert hashlib.sha256((LOGS / name).read_bytes()).hexdigest() in (ROOT / "tests/data/README.md").read_text()  # vendored with provenance


def test_the_engine_log_of_a_start_times_its_start_the_slowest_worker_and_the_kv_suggestion():
    lines = [
        "2026-12-01T11:31:00.102345678Z INFO 12-01 11:31:00 [api_server.py:1] vLLM API server version 0.27.1",
        "2026-12-01T11:31:44.5Z (Worker_TP0 pid=11) INFO 12-01 11:31:44 [gpu_model_runner.py:5250] Starting to load model /models/kimi-k3...",
        "2026-12-01T11:32:50Z (Worker_TP0 pid=11) INFO 12-01 11:32:50 [default_loader.py:405] Loading weights took 61.20 seconds",
        "2026-12-01T11:32:52Z (Worker_TP3 pid=14) INFO 12-01 11:32:52 [default_loader.py:405] Loading weights took 63.90 seconds",
        "2026-12-01T11:33:01Z (Worker_TP0 pid=11) INFO 12-01 11:33:01 [gpu_model_runner.py:5406] Model loading took 181.7 GiB memory and 77.100000 seconds",
        "2026-12-01T11:33:40Z (Worker_TP0 pid=11) INFO 12-01 11:33:40 [decorators.py:311] Directly load AOT compilation from path /home/vllm/.cache/vllm/torch_compile_cache/torch_aot_compile/ab/rank_0_0/model",
        "2026-12-01T11:33:40Z (Worker_TP0 pid=11) INFO 12-01 11:33:40 [monitor.py:53] torch.compile took 21.40 s in total",
        "2026-12-01T11:34:30Z (Worker_TP0 pid=11) INFO 12-01 11:34:30 [gpu_worker.py:789] Free memory on device (266.1/268.6 GiB) on startup. Replace gpu_memory_utilization config with `--kv-cache-memory=60129542144` (56.00 GiB) to fit into requested memory, or `--kv-cache-memory=62277025792` (58.00 GiB) to fully utilize gpu memory.",
        "2026-12-01T11:35:10Z (Worker_TP0 pid=11) INFO 12-01 11:35:10 [gpu_model_runner.py:6914] Graph capturing finished in 31 secs, took 3.10 GiB",
        "2026-12-01T11:35:12Z (APIServer pid=1) INFO 12-01 11:35:12 [api_server.py:2] Starting vLLM API server on http://127.0.0.1:8001",
    ]
    log = startup.parse_engine_log(lines)
    got = {m.what: m.seconds for m in log.measurements}
    assert got["engine start"] == pytest.approx(44.397655, abs=1e-3) and got["engine total"] == pytest.approx(251.897655, abs=1e-3)
    assert got["weights load"] == 63.90 and got["model loading"] == 77.1 and got["compile"] == 21.4 and got["CUDA graph capture"] == 31
    assert log.cache_hit is True and log.kv_cache_memory_bytes == 60129542144


def test_kubelet_durations_read_as_go_prints_them():
    assert startup.duration_seconds("1m7.272s") == pytest.approx(67.272)
    assert startup.duration_seconds("59.813s") == pytest.approx(59.813)
    assert startup.duration_seconds("1h2m3s") == 3723 and startup.duration_seconds("350ms") == pytest.approx(0.35)
    assert startup.duration_seconds("soon") is None


def cluster_objects():
    """A started node and pod as the API server returns them, and the kubelet's pull event."""
    start = NOW
    node = k.node("ip-10-60-1-5.us-west-2.compute.internal", created=start + timedelta(minutes=3))
    node["status"]["conditions"][1]["lastTransitionTime"] = k.iso(start + timedelta(minutes=4))
    pod = k.pod(
        "kimi-k3-serving-0", created=start + timedelta(minutes=4, seconds=10), node_name=node["metadata"]["name"], phase="Running", ready=True,
        init=[
            {**k.container_status("fetch-weights", {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": k.iso(start + timedelta(minutes=4, seconds=30)),
                                                                  "finishedAt": k.iso(start + timedelta(minutes=7, seconds=20))}})},
            {**k.container_status("restore-compile-cache", {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": k.iso(start + timedelta(minutes=7, seconds=21)),
                                                                          "finishedAt": k.iso(start + timedelta(minutes=7, seconds=31))}})},
        ],
        containers=[k.container_status("vllm", k.running(start + timedelta(minutes=7, seconds=32)), ready=True, started=True)],
    )
    pod["status"]["conditions"][0]["lastTransitionTime"] = k.iso(start + timedelta(minutes=4, seconds=12))
    pod["status"]["conditions"][-1]["lastTransitionTime"] = k.iso(start + timedelta(minutes=11, seconds=2))
    pulled = k.pulled_event("kimi-k3-serving-0", "210987654321.dkr.ecr.us-west-2.amazonaws.com/vllm-openai@sha256:" + "9" * 64, "1m7.272s", start + timedelta(minutes=5))
    return node, pod, pulled


def test_the_cluster_objects_time_the_node_the_init_containers_the_engine_and_the_pull():
    node, pod, pulled = cluster_objects()
    got = {m.what: m.seconds for m in startup.cluster_measurements([node], [pod], [pulled])}
    assert got == {
        "node registered to Ready": 60, "pod start": 18, "weights sync and verify": 170, "compile cache restore (container)": 10,
        "engine container to Ready": 210, "image pull": pytest.approx(67.272),
    }
    nodes, pods, events = startup.split_kinds({"kind": "List", "items": [node, pod, pulled]})
    assert (len(nodes), len(pods), len(events)) == (1, 1, 1)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["startup-report", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_an_upstream_log_alone_prints_every_phase_it_holds_beside_the_estimate(name, capsys, tmp_path):
    out_file = tmp_path / "startup.json"
    code, out, _ = run(capsys, "--engine-log", str(LOGS / name), "--out", str(out_file))
    assert code == 0
    document = json.loads(out_file.read_text())
    assert document["schema"] == startup.SCHEMA and document["case"] == ("warm" if UPSTREAM[name][1] else "cold")
    measured = {m["what"] for m in document["measurements"]}
    assert measured == set(UPSTREAM[name][0])
    rows = {r["name"]: r for r in document["phases"]}
    for what in measured & {"weights load", "compile", "CUDA graph capture"}:
        row = next(r for n, r in rows.items() if startup._evidence_for(n) and what in startup._evidence_for(n))
        assert row["measured_min"] == pytest.approx(UPSTREAM[name][0][what] / 60, abs=0.01)
        assert f"measured {row['measured_min']:6.2f}" in out
    for what in measured - {"weights load", "compile", "CUDA graph capture"}:
        assert what in out  # printed under "also measured"


def test_prods_replica_that_dumped_the_key_is_compared_with_the_start_that_dumps_and_the_other_without(capsys, tmp_path):
    """Prod's two replicas of a new key: the claim's winner slept and woke (the dump), the other went Ready without."""
    log = (LOGS / "kimi-k3-tp8-vllm-0.27.1-format-pipelined.log").read_text()
    dumped, plain = tmp_path / "dumped.log", tmp_path / "plain.log"
    dumped.write_text(log)
    plain.write_text("".join(line for line in log.splitlines(keepends=True) if "to fall asleep" not in line and "to wake up" not in line))
    rows = {}
    for name, path in (("dumped", dumped), ("plain", plain)):
        code, _, _ = run(capsys, "prod", "--engine-log", str(path), "--out", str(tmp_path / f"{name}.json"))
        assert code == 0
        rows[name] = {r["name"] for r in json.loads((tmp_path / f"{name}.json").read_text())["phases"]}
    assert "engine snapshot dump: sleep level 2" in rows["dumped"]
    assert not any(n.startswith("engine snapshot dump") for n in rows["plain"])


def test_saved_objects_and_a_log_against_a_stacks_estimate(capsys, tmp_path):
    node, pod, pulled = cluster_objects()
    events = tmp_path / "objects.json"
    events.write_text(json.dumps({"kind": "List", "items": [node, pod, pulled]}))
    code, out, _ = run(capsys, "prod", "--engine-log", str(LOGS / "kimi-linear-48b-tp2-compile-cache-hit.log"), "--events", str(events), "--out", str(tmp_path / "s.json"))
    assert code == 0
    assert "warm case" in out and "compile (cache hit)" in out
    rows = {r["name"]: r for r in json.loads((tmp_path / "s.json").read_text())["phases"]}
    assert rows["weights sync (S3, CRT)"]["measured_min"] == pytest.approx(170 / 60, abs=0.01)
    assert rows["pod start"]["measured_min"] == pytest.approx(0.3)
    assert rows["node boot, join and GPUs advertised"]["measured_min"] == 1.0  # registration to Ready; EC2's launch is not in the objects


def test_startup_report_reads_the_stacks_cluster(capsys, tmp_path, monkeypatch):
    node, pod, pulled = cluster_objects()
    with k.FakeKubeApi() as api:
        api.nodes = [node]
        api.pods["kimi-serving"] = [pod]
        api.events["kimi-serving"] = [pulled]
        api.logs[("kimi-serving", "kimi-k3-serving-0", "vllm", False)] = (LOGS / "runai-streamer-67-engine-tail.log").read_text()
        api.logs[("kimi-serving", "kimi-k3-serving-0", "restore-compile-cache", False)] = (
            "compile cache s3://acme-ml-weights-us-west-2/compile-cache/v2-b300-x.tar: restored 4242 files (5368709120 bytes) [9.4 s]\n"
        )
        kubeconfig = tmp_path / "kubeconfig.yaml"
        kubeconfig.write_text(yaml.safe_dump(api.kubeconfig("kimi-k3-prod")))
        code, _, err = run(capsys, "prod", "--kubeconfig", str(kubeconfig), "--case", "warm", "--out", str(tmp_path / "s.json"))
        paths = {path for path, _, _ in api.requests}
    assert code == 0, err
    assert "/api/v1/namespaces/kimi-serving/events" in paths
    rows = {r["name"]: r for r in json.loads((tmp_path / "s.json").read_text())["phases"]}
    assert rows["compile cache restore"]["measured_min"] == pytest.approx(9.4 / 60, abs=0.01)
    assert rows["CUDA graph capture (51 sizes)"]["measured_min"] == pytest.approx(37 / 60, abs=0.01)
    assert rows["engine image pull (DaemonSet, beside the sync)"]["measured_min"] == pytest.approx(67.272 / 60, abs=0.01)


def test_nothing_to_read_is_one_line(capsys, tmp_path):
    code, _, err = run(capsys)
    assert code != 0 and "give STACK (reads its cluster) or --engine-log FILE" in err
    code, _, err = run(capsys, "--engine-log", str(tmp_path / "missing.log"))
    assert code != 0 and "cannot read it" in err
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    code, _, err = run(capsys, "--engine-log", str(LOGS / "runai-streamer-67-engine-tail.log"), "--events", str(bad))
    assert code != 0 and "not JSON" in err


def test_status_links_to_the_report_once_the_endpoint_is_ready():
    ready = bringup_report.BringUp(stack="prod", now=NOW, reservation_id="cr-0", block=None, replicas_expected=0, namespace="kimi-serving")
    assert bringup_report.startup_report_command("prod") == "kimi-k3 startup-report prod"
    assert not any("startup-report" in line for line in bringup_report.render(ready))  # not ready: no link
    assert ready.to_json()["startup_report"] is None
    assert Path(ROOT / "components/cli/startup_report.py").exists()


def test_a_vllm_0_27_1_format_log_gives_every_phase_it_prints_beside_the_prod_estimate():
    """Issue 34 point 5: every start-up phase vLLM 0.27.1 prints at INFO, and the pipelined loader's, beside the estimate's cold case
    of the committed prod stack (sidecar sync, pipelined load). The log is composed from 0.27.1's format strings (tests/data/README.md)."""
    from kimi_k3.stack import settings, time_to_serve
    from kimi_k3.weights import estimate

    log = startup.parse_engine_log((LOGS / "kimi-k3-tp8-vllm-0.27.1-format-pipelined.log").read_text().splitlines())
    got = {m.what: m.seconds for m in log.measurements}
    assert got == {
        "pipelined load wait": 8.4, "weights load": 64.85, "model loading": 67.012345, "compile": 138.6, "profile run": 6.21,
        "CUDA graph capture": 29.0, "engine init": 177.4, "sleep": 2.514233, "wake up": 1.201877,
        "engine start": 44.5, "engine total": 289.5,  # 0.27.1's banner ("vLLM server version") to "Starting to load model" / "Starting vLLM server on"
    }
    assert log.cache_hit is None  # 0.27.1 prints neither "Compiling a graph for" nor an AOT load at INFO here
    # the log is of the replica that dumped the new key (it slept and woke): prod's other replica is Ready without a dump
    prod = replace(time_to_serve.startup_inputs(settings.load_stack("prod")), dump_beside_peer=False)
    rows = {r.name: r for r in startup.report(estimate.estimate_case(prod, "cold"), log.measurements).rows}
    measured = {name for name, r in rows.items() if r.measured_min is not None}
    assert measured == {
        "engine start", "weights load into GPUs (page cache), each shard once verified", "last shard into the GPUs (pipelined load)",
        "compile (cold)", "profile run and KV cache", "CUDA graph capture (51 sizes)",
        # the first dump of the key (engineSnapshot), before Ready: vLLM's own sleep and wake-up lines
        "engine snapshot dump: sleep level 2", "engine snapshot dump: wake, KV cache re-allocated",
    }
    # what the engine log cannot time: the node and the pod (the cluster's objects), the sync (its own container's log), the kernel
    # JIT (inside the profile run), memory profiling (0.27.1 logs "Memory profiling takes" at DEBUG: vllm/v1/worker/gpu_worker.py:562)
    assert set(rows) - measured == {
        "node boot, join and GPUs advertised", "pod start", "weights sync (S3, CRT)", "sha256 verify (overlapped; tail after the last file)",
        "engine image pull (DaemonSet, beside the sync)", "kernel JIT and autotune (cold)", "memory profiling", "first request (warm-up before Ready)",
        # the dump's device, CRIU and seal parts are one line of the warm-up sidecar's log (DUMP_LOG), not the engine's, and this log
        # has no line of the wake's reload
        "engine snapshot dump: cuda-checkpoint (GPUs side by side)", "engine snapshot dump: CRIU writes the pages to the NVMe",
        "engine snapshot dump: SHA256SUMS then KEY (seal)", "engine snapshot dump: wake, weights reloaded (page cache)",
    }
    assert rows["compile (cold)"].measured_min == round(138.6 / 60, 2) and rows["last shard into the GPUs (pipelined load)"].measured_min == 0.14
    text = "\n".join(startup.render(startup.report(estimate.estimate_case(prod, "container restart"), log.measurements)))
    # prod restores its engine snapshot on a container restart (engineSnapshot): vLLM's wake-up line times the KV cache's
    # re-allocation; the sleep line, which no phase of this case names, is listed as also measured
    restart = {r.name: r for r in startup.report(estimate.estimate_case(prod, "container restart"), log.measurements).rows}
    assert restart["KV cache re-allocated (wake_up)"].measured_min == round(1.201877 / 60, 2)
    assert "also measured:" in text and "\n  sleep " in text
