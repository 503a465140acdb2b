"""Issue 34 point 1, the pod side: the engine's restore-or-cold wrapper, its snapshot after the first healthy start, the agent's loop.

Real files in tmp, real sha256. ``FakeVllm`` is a real HTTP server standing in for vLLM 0.27.1's ``/health``, ``/sleep?level=2`` and
``/wake_up`` (the dev endpoints of ``VLLM_SERVER_DEV_MODE=1``); the agent is the real :mod:`kimi_k3.weights.snapshot_agent_loop`
where the test runs it, with a runner standing in for CRIU (CRIU 3.17.1 cannot initialise in this VM: docs/weights.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kimi_k3.bringup import startup
from kimi_k3.weights import engine_snapshot, snapshot_agent_loop, snapshot_pod

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm@sha256:" + "a" * 64
KEY = engine_snapshot.SnapshotKey(image=IMAGE, driver_version="590.48.01", gpu="B300", gpus=8, model_revision="f" * 40,
                                  engine_args=("--tensor-parallel-size", "8", "--enable-sleep-mode"), engine_env=(("VLLM_SERVER_DEV_MODE", "1"),))


class FakeVllm:
    """A real HTTP server on loopback answering as vLLM does: ``/health`` 200 (503 while ``down``), ``POST /sleep`` / ``/wake_up`` 200."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.down = False
        self.refused: set[str] = set()  # collective_rpc methods answered 500
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, code: int) -> None:
                owner.calls.append(f"{self.command} {self.path}")
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                self._answer(503 if owner.down and self.path == "/health" else 200 if self.path == "/health" else 404)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.path == "/collective_rpc":
                    method = json.loads(body)["method"]
                    owner.calls.append(f"rpc {method}")
                    if method in owner.refused:
                        return self._answer(500)
                self._answer(200 if self.path in ("/sleep?level=2", "/wake_up?tags=weights", "/wake_up?tags=kv_cache", "/collective_rpc") else 404)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def vllm():
    server = FakeVllm()
    yield server
    server.close()


def agent_thread(root: Path, answer, stop: threading.Event) -> threading.Thread:
    """A thread answering each request file under ``root`` with ``answer(request)``, as the agent does (its file protocol)."""
    requests, results = root / snapshot_pod.AGENT_DIR / snapshot_pod.REQUESTS, root / snapshot_pod.AGENT_DIR / snapshot_pod.RESULTS

    def loop() -> None:
        while not stop.is_set():
            for path in sorted(requests.glob("*.json")) if requests.is_dir() else []:
                request = json.loads(path.read_text())
                results.mkdir(parents=True, exist_ok=True)
                (results / f".{path.name}").write_text(json.dumps(answer(request)))
                os.replace(results / f".{path.name}", results / path.name)  # atomically, as the agent does
                path.unlink()
            time.sleep(0.01)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def fake_dump(root: Path, seen: list[dict]):
    """Answers a dump by writing image files into its directory (what CRIU writes), a restore with ok."""
    def answer(request: dict) -> dict:
        seen.append(request)
        if request["action"] == "dump":
            directory = root / request["directory"]
            (directory / "pages-1.img").write_bytes(os.urandom(3 << 20))
            (directory / "core-42.img").write_bytes(b"core" * 100)
        return {"ok": True}
    return answer


def take_snapshot(root: Path, vllm: FakeVllm, log: list[str]) -> list[dict]:
    seen: list[dict] = []
    stop = threading.Event()
    agent_thread(root, fake_dump(root, seen), stop)
    try:
        assert snapshot_pod.snapshot_after_healthy(snapshot_pod.Engine(vllm.url), snapshot_pod.AgentChannel(root, poll_s=0.01), root, KEY, log.append, "pod-a")
    finally:
        stop.set()
    return seen


def test_a_snapshot_sleeps_the_engine_dumps_writes_the_manifest_then_the_key_and_wakes_it(tmp_path, vllm):
    log: list[str] = []
    seen = take_snapshot(tmp_path, vllm, log)
    assert [c for c in vllm.calls if c != "GET /health"] == [  # level 2 discards the weights: they are reloaded before the KV cache
        "POST /sleep?level=2", "rpc checkpoint_prepare", "POST /collective_rpc", "rpc checkpoint_restore", "POST /collective_rpc",
        "POST /wake_up?tags=weights", "rpc reload_weights", "POST /collective_rpc", "POST /wake_up?tags=kv_cache"]
    assert seen[0]["action"] == "dump" and seen[0]["token"] == "pod-a" and seen[0]["directory"] == KEY.digest()
    directory = tmp_path / KEY.digest()
    assert engine_snapshot.key_from_json((directory / "KEY").read_text()) == KEY
    sums = (directory / "SHA256SUMS").read_text().splitlines()
    assert sorted(line.split("  ")[1] for line in sums) == ["core-42.img", "pages-1.img"]
    assert (directory / "KEY").stat().st_mtime_ns >= (directory / "SHA256SUMS").stat().st_mtime_ns
    assert any(line.startswith(f"engine snapshot {KEY.digest()[:12]}: dumped and sealed 2 files") for line in log)


def test_a_failed_dump_leaves_no_key_and_still_wakes_the_engine(tmp_path, vllm):
    log: list[str] = []
    stop = threading.Event()
    agent_thread(tmp_path, lambda request: {"ok": False, "error": "criu dump exited 1: vdso"}, stop)
    try:
        assert not snapshot_pod.snapshot_after_healthy(snapshot_pod.Engine(vllm.url), snapshot_pod.AgentChannel(tmp_path, poll_s=0.01), tmp_path, KEY, log.append, "pod-a")
    finally:
        stop.set()
    assert vllm.calls[-1] == "POST /wake_up?tags=kv_cache"
    assert not (tmp_path / KEY.digest() / "KEY").exists()
    assert "dump failed: criu dump exited 1: vdso" in log[0]


def restore(root: Path, key=KEY) -> tuple[bool, list[str], list[dict]]:
    log: list[str] = []
    seen: list[dict] = []
    stop = threading.Event()
    agent_thread(root, fake_dump(root, seen), stop)
    try:
        ok = snapshot_pod.restore_or_cold(snapshot_pod.AgentChannel(root, poll_s=0.01), root, key, log.append, "pod-b")
    finally:
        stop.set()
    return ok, log, seen


def test_an_engine_that_refuses_checkpoint_prepare_is_not_dumped_and_is_woken(tmp_path, vllm):
    vllm.refused = {"checkpoint_prepare"}
    log: list[str] = []
    seen: list[dict] = []
    stop = threading.Event()
    agent_thread(tmp_path, fake_dump(tmp_path, seen), stop)
    try:
        assert not snapshot_pod.snapshot_after_healthy(snapshot_pod.Engine(vllm.url), snapshot_pod.AgentChannel(tmp_path, poll_s=0.01), tmp_path, KEY, log.append, "pod-a")
    finally:
        stop.set()
    assert seen == [] and "checkpoint_prepare refused" in log[0]
    assert "rpc checkpoint_restore" not in vllm.calls and vllm.calls[-1] == "POST /wake_up?tags=kv_cache"
    assert not (tmp_path / KEY.digest() / "KEY").exists()


def test_a_restored_engine_whose_communicators_cannot_be_rebuilt_loses_its_key(tmp_path, vllm):
    take_snapshot(tmp_path, vllm, [])
    directory = tmp_path / KEY.digest()
    vllm.refused = {"checkpoint_restore"}
    log: list[str] = []
    assert snapshot_pod.hold_restored(snapshot_pod.Engine(vllm.url), directory, log.append, start_timeout_s=0.2, poll_s=0.05) == 1
    assert not (directory / "KEY").exists() and "KEY removed" in log[0]


SURFACE = json.loads((Path(__file__).parent / "data" / "vllm-0.27.1-names.json").read_text())


def test_every_call_the_snapshot_makes_exists_in_vllm_0_27_1(tmp_path, vllm):
    """The dump and the restore call only routes, query parameters, wake-up tags and worker methods the 0.27.1 wheel has."""
    take_snapshot(tmp_path, vllm, [])
    snapshot_pod.hold_restored(snapshot_pod.Engine(vllm.url), tmp_path / KEY.digest(), [].append, poll_s=0.05, stop=lambda: True)
    dev = SURFACE["dev_endpoints"]
    methods = [c.removeprefix("rpc ") for c in vllm.calls if c.startswith("rpc ")]
    assert methods and set(methods) <= set(dev["worker"]["methods"])
    for call in (c for c in vllm.calls if not c.startswith("rpc ") and c != "GET /health"):
        verb, _, target = call.partition(" ")
        path, _, query = target.partition("?")
        route = dev["routes"][f"{verb} {path}"]
        for name, _, value in (q.partition("=") for q in query.split("&") if q):
            assert name in route["query"], call
            if name == "tags":
                assert value in dev["worker"]["wake_up_tags"], call
    assert set(engine_snapshot.DEV_MODE_ENV) == {dev["gate_env"]}
    assert set(engine_snapshot.CHECKPOINTABLE_ENV) <= set(SURFACE["env_vars"])
    assert set(engine_snapshot.CHECKPOINTABLE_FLAGS) <= set(SURFACE["flags"]) and engine_snapshot.SLEEP_MODE_FLAG in SURFACE["flags"]


def test_startup_report_reads_vllm_0_27_1s_sleep_wake_and_reload_lines():
    """Each of the wheel's sleep, wake-up and in-place reload log formats, filled, is read as its step."""
    from kimi_k3.bringup import startup
    filled = {fmt: fmt.replace("%.6f", "12.5").replace("%.2f", "12.5").replace("%s", "['weights']") for fmt in SURFACE["dev_endpoints"]["log_formats"]}
    read = {}
    for fmt, line in filled.items():
        found = [what for what, pattern in startup.LOG_DURATIONS if (m := pattern.search(line)) and float(m["s"]) == 12.5]
        read[fmt] = found[0] if found else None
    assert read == {"It took %.6f seconds to fall asleep.": "sleep", "It took %.6f seconds to wake up tags %s.": "wake up",
                    "Reloading and processing weights took %.2f seconds": "weights reload"}


def test_a_matching_snapshot_is_verified_then_restored_into_the_placeholder(tmp_path, vllm):
    take_snapshot(tmp_path, vllm, [])
    ok, log, seen = restore(tmp_path)
    assert ok and [r["action"] for r in seen] == ["restore"] and seen[0]["token"] == "pod-b"
    assert log[0].startswith(f"engine snapshot {KEY.digest()[:12]}: verified 2 files (0.0 GB) in ") and " restored " in log[1]


def test_one_corrupted_byte_is_a_cold_start_naming_the_file(tmp_path, vllm):
    take_snapshot(tmp_path, vllm, [])
    pages = tmp_path / KEY.digest() / "pages-1.img"
    data = bytearray(pages.read_bytes())
    data[12345] ^= 0x01
    pages.write_bytes(bytes(data))
    ok, log, seen = restore(tmp_path)
    assert not ok and seen == []  # no restore requested
    assert "cold start" in log[0] and "pages-1.img: sha256 " in log[0]


def test_a_changed_driver_or_image_is_a_cold_start_naming_the_field(tmp_path, vllm):
    take_snapshot(tmp_path, vllm, [])
    directory = tmp_path / KEY.digest()
    for change, name in ((dict(driver_version="590.86.10"), "driver_version"), (dict(image=IMAGE[:-1] + "b"), "image")):
        new = replace(KEY, **change)
        (tmp_path / new.digest()).mkdir(exist_ok=True)
        for f in directory.iterdir():  # the old snapshot where the new key would look (a directory reused across keys)
            (tmp_path / new.digest() / f.name).write_bytes(f.read_bytes())
        ok, log, seen = restore(tmp_path, new)
        assert not ok and seen == [] and f"cold start: snapshot {name} " in log[0], log
    ok, log, _ = restore(tmp_path, replace(KEY, gpus=4))  # a key never dumped: no directory at all
    assert not ok and "KEY missing" in log[0]


def test_a_restored_engine_that_stops_answering_loses_its_key(tmp_path, vllm):
    take_snapshot(tmp_path, vllm, [])
    directory = tmp_path / KEY.digest()
    vllm.down = True
    log: list[str] = []
    assert snapshot_pod.hold_restored(snapshot_pod.Engine(vllm.url), directory, log.append, start_timeout_s=0.2, poll_s=0.05) == 1
    assert not (directory / "KEY").exists() and "KEY removed" in log[0]
    vllm.down = False
    take_snapshot(tmp_path, vllm, [])
    stops = iter([False] * 50)
    marker = tmp_path / ".kimi-k3-verified"
    threading.Timer(0.2, marker.touch).start()  # the sync verifies the weights a little later
    vllm.calls.clear()
    assert snapshot_pod.hold_restored(snapshot_pod.Engine(vllm.url), directory, [].append, poll_s=0.05, stop=lambda: next(stops, True), weights_marker=marker) == 0
    assert (directory / "KEY").exists() and vllm.calls[:5] == [  # the restored engine was dumped prepared and asleep
        "rpc checkpoint_restore", "POST /collective_rpc", "POST /wake_up?tags=weights", "rpc reload_weights", "POST /collective_rpc"]


def test_startup_report_reads_the_lines_the_wrapper_writes(tmp_path, vllm):
    log: list[str] = []
    take_snapshot(tmp_path, vllm, log)
    _, restore_log, _ = restore(tmp_path)
    parsed = {m.what: m.seconds for m in startup.parse_engine_log(log + restore_log).measurements}
    assert {"engine snapshot dump", "engine snapshot verify", "engine snapshot restore"} <= set(parsed)


def test_the_engine_start_execs_the_cold_command_when_there_is_no_snapshot(tmp_path):
    """``podmain engine-start`` run as the pod runs it (the shipped files, python3 -m): no snapshot → the command runs, the reason logged."""
    from kimi_k3.weights import pod_files

    code = tmp_path / "code"
    for path, text in pod_files.pod_files().values():
        (code / path).parent.mkdir(parents=True, exist_ok=True)
        (code / path).write_text(text)
    fields = {k: v for k, v in json.loads(KEY.to_json()).items() if k not in ("driver_version", "version")}
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}", "PYTHONPATH": str(code), "SNAPSHOT_ROOT": str(tmp_path / "snap"),
           "SNAPSHOT_KEY_FIELDS": json.dumps(fields), "VLLM_URL": "http://127.0.0.1:9", "HOSTNAME": "pod-c"}
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\necho 590.48.01\n")  # the node's driver, as nvidia-smi prints it
    (tmp_path / "nvidia-smi").chmod(0o755)
    done = subprocess.run([sys.executable, "-m", "kimi_k3.weights.podmain", "engine-start", sys.executable, "-c",
                           "import os; print('cold', os.environ['KIMI_K3_SNAPSHOT_TOKEN'])"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "cold pod-c"
    assert "cold start: no snapshot (KEY missing)" in done.stderr


def test_the_agent_finds_the_engine_tree_by_its_token_and_refuses_a_node_short_of_the_requirements(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env={**os.environ, snapshot_agent_loop.TOKEN_ENV: "pod-d"})
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and snapshot_agent_loop.find_pids("pod-d") != [child.pid]:
            time.sleep(0.05)
        assert snapshot_agent_loop.find_pids("pod-d") == [child.pid]
        ran: list[list[str]] = []

        def criu(argv):  # stands in for CRIU 4.x, which this VM cannot run
            ran.append(list(argv))
            return subprocess.CompletedProcess(argv, 0, "Version: 4.1\n" if argv[1] == "--version" else "", "")

        request = {"action": "dump", "directory": KEY.digest(), "token": "pod-d"}
        (tmp_path / KEY.digest()).mkdir()  # the pod creates it before it asks
        assert snapshot_agent_loop.handle(request, tmp_path, driver_version="590.48.01", gpus=8, runner=criu, arch="x86_64") == {"ok": True}
        assert ran[-1][:4] == ["criu", "dump", "--tree", str(child.pid)] and "--leave-running" in ran[-1]
        old = snapshot_agent_loop.handle(request, tmp_path, driver_version="580.95.05", gpus=8, runner=criu, arch="x86_64")
        assert old == {"ok": False, "error": "driver 580.95.05 is older than 590 (Dynamo Snapshot's floor for multi-GPU snapshots)"}
        escape = snapshot_agent_loop.handle({**request, "directory": "../etc"}, tmp_path, driver_version="590.48.01", gpus=8, runner=criu, arch="x86_64")
        assert not escape["ok"] and "not one snapshot under the root" in escape["error"]
    finally:
        child.kill()
        child.wait()
