"""Issue 34 point 2: the engine starts beside the sync and its vLLM loader plugin reads each shard once verified.

The writer is the real node sync script (tests/test_weights_node_sync.py's fake ``aws`` writing each file under a
temporary name, then renaming it, as the CRT client does); the engine side is the shell the pod runs and the pod
modules as the ConfigMap ships them, run by the system ``python3`` (no vLLM here: the plugin's entry point is found and
loaded for real, the loader class itself needs vLLM and torch, which only the engine image has).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from kimi_k3.errors import SettingsError, UserError
from kimi_k3.weights import WeightsError, node_sync, pipelined_load, pod_files, serving_pod, vllm_loader
from tests.builders import load_stack_settings
from tests.test_weights_node_sync import FAKE_AWS, bucket


def ship(tmp_path: Path) -> Path:
    """The pod modules written out as the ConfigMap's items lay them under the mount."""
    root = tmp_path / "opt-kimi-k3"
    for path, text in pod_files.pod_files().values():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def start_sync(tmp_path: Path, root: Path, delay: float) -> subprocess.Popen:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "aws").write_text(FAKE_AWS)
    (bindir / "aws").chmod(0o755)
    env = node_sync.node_sync_env(weights_s3_uri="s3://bucket/prefix/", weights_dir=str(tmp_path / "models"), sha256_manifest="SHA256SUMS",
                                  instance_type="p6-b300.48xlarge", cpus=4)
    env.update({"PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_BUCKET": str(root), "FAKE_LOG": str(tmp_path / "aws.log"), "TMPDIR": str(tmp_path),
                "VERIFY_POLL_S": "0.02", "FAKE_DELAY": str(delay), "SHARD_MARKERS": node_sync.SHARD_MARKERS})
    return subprocess.Popen(["sh", "-c", node_sync.NODE_SYNC_SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_engine_starts_once_its_files_are_verified_and_loads_each_shard_as_the_real_sync_verifies_it(tmp_path):
    root, files = bucket(tmp_path)  # manifest: model-00001, model-00002, sub/config.json, tokenizer.json; the sync lands config first
    # the sync lands the first shard of the manifest (the largest) before the second, half a second apart
    (root / ".order").write_text("\n".join(["SHA256SUMS", "sub/config.json", "tokenizer.json", "model-00001.safetensors", "model-00002.safetensors"]))
    code = ship(tmp_path)
    models = tmp_path / "models"
    sync = start_sync(tmp_path, root, delay=0.5)
    # the engine container's start, as the pod runs it, with "vllm serve" replaced by a line that records when it ran
    start = serving_pod.pipelined_engine_start(str(models), "SHA256SUMS", f'date +%s.%N > "{tmp_path}/engine-started"')
    engine = subprocess.run(["sh", "-c", start], env={**os.environ, "PYTHONPATH": str(code), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60)
    assert engine.returncode == 0, engine.stderr
    assert "engine files verified" in engine.stderr
    started = time.monotonic()
    assert not (models / node_sync.WEIGHTS_MARKER).exists()  # the engine did not wait for the whole manifest
    assert (models / node_sync.SHARD_MARKERS / "3").exists() and (models / node_sync.SHARD_MARKERS / "4").exists()  # config and tokenizer verified
    got: list[tuple[str, bool]] = []
    for group in pipelined_load.verified_groups(str(models), 1, "SHA256SUMS", poll_s=0.01, log=lambda _: None):
        (path,) = group
        got.append((os.path.basename(path), (models / node_sync.WEIGHTS_MARKER).exists()))
        assert Path(path).read_bytes() == files[os.path.basename(path)]  # verified means whole: its bytes are the bucket's
    assert sync.wait(timeout=60) == 0, sync.stderr.read() if sync.stderr else ""
    assert [name for name, _ in got] == ["model-00001.safetensors", "model-00002.safetensors"]  # manifest order, not arrival order
    assert not got[0][1]  # the first shard was handed to the loader before the sync had finished
    assert time.monotonic() - started < 60


def test_the_plugin_entry_point_is_found_on_the_shipped_pythonpath(tmp_path):
    code = ship(tmp_path)
    probe = (
        "import importlib.metadata as m\n"
        "(ep,) = [e for e in m.entry_points(group='vllm.general_plugins')]\n"
        "f = ep.load()\n"
        "print(ep.name, ep.value, f.__module__, f.__name__)\n"
    )
    # vLLM 0.27.1 vllm/plugins/__init__.py load_plugins_by_group: entry_points(group="vllm.general_plugins"), then plugin.load()();
    # the system python3 (not this venv, where kimi_k3 is installed) finds it on the shipped PYTHONPATH only
    out = subprocess.run(["python3", "-c", probe], env={"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [vllm_loader.ENTRY_POINT, "kimi_k3.weights.vllm_loader:register", "kimi_k3.weights.vllm_loader", "register"]


def test_groups_are_one_shard_per_rank_for_fastsafetensors_and_the_same_whatever_the_timing(tmp_path):
    names = [f"model-{i:05d}.safetensors" for i in range(1, 6)]
    (tmp_path / "SHA256SUMS").write_text("".join(f"{'0' * 64}  {n}\n" for n in names))
    (tmp_path / node_sync.WEIGHTS_MARKER).write_text("x")
    assert vllm_loader.group_size("fastsafetensors", 8) == 8 and vllm_loader.group_size("safetensors", 8) == 1
    groups = list(pipelined_load.verified_groups(str(tmp_path), 2, log=lambda _: None))
    assert [[os.path.basename(p) for p in g] for g in groups] == [names[0:2], names[2:4], names[4:5]]
    with pytest.raises(WeightsError, match=r"KIMI_K3_INNER_LOAD_FORMAT 'gguf' is not accepted; accepted: auto, safetensors, fastsafetensors, instanttensor"):
        vllm_loader.group_size("gguf", 8)
    with pytest.raises(WeightsError, match="group size 0"):
        list(pipelined_load.verified_groups(str(tmp_path), 0))


def test_engine_files_ready_needs_every_non_shard_entry(tmp_path):
    assert not pipelined_load.engine_files_ready(str(tmp_path), "SHA256SUMS")  # no manifest yet
    (tmp_path / "SHA256SUMS").write_text(f"{'0' * 64}  model-00001.safetensors\n{'0' * 64}  config.json\n")
    markers = tmp_path / node_sync.SHARD_MARKERS
    markers.mkdir()
    (markers / "1").write_text("model-00001.safetensors")
    assert not pipelined_load.engine_files_ready(str(tmp_path), "SHA256SUMS")  # a shard is not enough: vLLM reads config.json first
    (markers / "2").write_text("config.json")
    assert pipelined_load.engine_files_ready(str(tmp_path), "SHA256SUMS")
    assert pipelined_load.main(["engine-files-ready", str(tmp_path), "SHA256SUMS"]) == 0 and pipelined_load.main([]) == 2


def test_the_settings_key_needs_the_sidecar_and_a_manifest_and_is_on_in_prod():
    from kimi_k3.stack import project
    from kimi_k3.stack.settings import load_settings
    from tests.conftest import ROOT

    prod = load_settings(project.find_project(None, ROOT), "prod")
    assert prod.time_to_serve.pipelined_load is True
    from kimi_k3.stack import time_to_serve

    assert time_to_serve.startup_inputs(prod).pipelined_load is True and time_to_serve.serving_startup(prod, multi_node=False).pipelined_load is True
    with pytest.raises(SettingsError, match=r"kimi-k3:pipelinedWeightsLoad: True is not accepted; needs kimi-k3:weightsSyncSidecar true"):
        load_stack_settings("dev", pipelinedWeightsLoad=True)
    with pytest.raises(UserError, match="pipelined_load needs sync_sidecar"):
        serving_pod.ServingStartup(pipelined_load=True)


def test_the_engine_args_name_the_plugins_load_format():
    args = ["--model", "/models", "--load-format", "fastsafetensors", "--port", "8000"]
    assert serving_pod.pipelined_args(args) == ["--model", "/models", "--load-format", vllm_loader.LOAD_FORMAT, "--port", "8000"]
    assert vllm_loader.LOAD_FORMAT.lower() == vllm_loader.LOAD_FORMAT  # vLLM lowercases --load-format before the registry lookup
    env = serving_pod.pipelined_env("SHA256SUMS", "fastsafetensors")
    assert env["PYTHONPATH"] == pod_files.MOUNT_PATH and env[vllm_loader.INNER_FORMAT_ENV] == "fastsafetensors"


def test_a_vllm_plugins_list_without_the_loader_is_refused():
    """vLLM 0.27.1 loads only the plugins VLLM_PLUGINS names when it is set: without ours, --load-format kimi_k3_pipelined fails at start."""
    with pytest.raises(UserError, match=r"VLLM_PLUGINS 'other' leaves out 'kimi_k3_pipelined_load'"):
        serving_pod.pipelined_env("SHA256SUMS", "fastsafetensors", {"VLLM_PLUGINS": "other"})
    assert serving_pod.pipelined_env("SHA256SUMS", "fastsafetensors", {"VLLM_PLUGINS": f"other,{vllm_loader.ENTRY_POINT}"})
