"""The engine's own start, cut (issue 26, point 2), as the prod and dev stacks declare it: every name checked against vLLM 0.27.1.

The forced AOT load after a restore, the complete cache directories, the page-cache loads (sync memory and buffered reads),
vLLM's startup plan, and the CUDA graph sizes matched to the profile's maximum batch.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess

import pytest

from kimi_k3.core import catalog
from kimi_k3.errors import SettingsError
from kimi_k3.serving import engine_profiles
from kimi_k3.serving.contracts import ContractError, EngineProfile
from kimi_k3.serving.pod_kit import CACHE_RESTORED_MARKER, node_share, weights_limit_gb
from kimi_k3.weights import compile_cache, serving_pod, vllm_loader
from tests.builders import load_stack_settings
from tests.conftest import ROOT
from tests.test_time_to_serve_stack import containers, env, serving_workload

VLLM = json.loads((ROOT / "tests/data/vllm-0.27.1-names.json").read_text())


def memory_gib(quantity: str) -> float:
    if quantity.endswith("Gi"):
        return float(quantity[:-2])
    assert quantity.endswith("Mi"), quantity
    return float(quantity[:-2]) / 1024


def test_prod_forces_the_aot_load_only_after_a_restore(prod_plan):
    pod = serving_workload(prod_plan)["spec"]["template"]["spec"]
    engine = containers(pod)["vllm"]
    # prod syncs in a native sidecar (weightsSyncSidecar) and loads pipelined (pipelinedWeightsLoad): the engine waits for its
    # config files only, then the AOT wrapper; its loader waits for each shard; engineSnapshot puts the restore-or-cold
    # wrapper in front of that cold command
    start = serving_pod.pipelined_engine_start("/models/kimi-k3", "SHA256SUMS", serving_pod.aot_load_wrapper(CACHE_RESTORED_MARKER))
    assert engine["command"] == serving_pod.engine_start_command(["/bin/sh", "-c", start, "vllm-serve"])
    restore = containers(pod, "initContainers")["restore-compile-cache"]
    assert env(restore)["CACHE_RESTORED_MARKER"] == CACHE_RESTORED_MARKER
    assert {"VLLM_FORCE_AOT_LOAD", "VLLM_ENABLE_STARTUP_PLAN"} <= set(VLLM["env_vars"])
    home = {m["mountPath"] for m in restore["volumeMounts"]} & {m["mountPath"] for m in engine["volumeMounts"]}
    assert any(CACHE_RESTORED_MARKER.startswith(path + "/") for path in home)  # the marker travels on the shared HOME


def test_dev_without_a_cache_starts_vllm_directly(dev_plan):
    engine = containers(serving_workload(dev_plan)["spec"]["template"]["spec"])["vllm"]
    assert engine["command"] == ["vllm", "serve"]


@pytest.fixture()
def fake_vllm(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "vllm"
    script.write_text('#!/bin/sh\necho "force=${VLLM_FORCE_AOT_LOAD:-unset} args=$*"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def test_the_aot_wrapper_runs_under_sh_forces_once_and_execs_vllm(tmp_path, fake_vllm):
    marker = tmp_path / "restored"
    marker.write_text("s3://b/compile-cache/k.tar\n")
    wrapper = serving_pod.aot_load_wrapper(str(marker))
    environ = {**os.environ, "PATH": f"{fake_vllm}:{os.environ['PATH']}"}
    first = subprocess.run(["/bin/sh", "-c", wrapper, "vllm-serve", "--model", "/models/kimi-k3"], env=environ, capture_output=True, text=True, check=True)
    assert first.stdout.strip() == "force=1 args=serve --model /models/kimi-k3"
    assert "VLLM_FORCE_AOT_LOAD=1" in first.stderr and not marker.exists()
    again = subprocess.run(["/bin/sh", "-c", wrapper, "vllm-serve", "--model", "/models/kimi-k3"], env=environ, capture_output=True, text=True, check=True)
    assert again.stdout.strip() == "force=unset args=serve --model /models/kimi-k3"  # a restart after a failed forced load compiles


def test_the_cache_covers_every_jit_directory_the_engine_writes(prod_plan):
    pod = serving_workload(prod_plan)["spec"]["template"]["spec"]
    engine_env = env(containers(pod)["vllm"])
    dirs = env(containers(pod, "initContainers")["restore-compile-cache"])["CACHE_DIRS"].split(":")
    assert dirs == compile_cache.cache_dirs_from_env(engine_env)
    for variable in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "CUDA_CACHE_PATH"):
        assert engine_env[variable] in dirs
    assert engine_env["DG_JIT_CACHE_DIR"].startswith(engine_env["VLLM_CACHE_ROOT"] + "/")  # saved with the vLLM cache root
    assert f"{engine_env['FLASHINFER_WORKSPACE_BASE']}/.cache/flashinfer" in dirs
    assert engine_env["TRITON_CACHE_AUTOTUNING"] == "1"
    assert env(containers(pod)["warmup"])["CACHE_DIRS"].split(":") == dirs


def test_weights_load_through_the_page_cache_the_sync_left_full(prod_plan):
    s = prod_plan.settings
    pod = serving_workload(prod_plan)["spec"]["template"]["spec"]
    engine = containers(pod)["vllm"]
    assert env(engine)["FASTSAFETENSORS_ODIRECT"] == "0" and env(engine)["VLLM_ENABLE_STARTUP_PLAN"] == "1"
    # the pipelined loader reads each group of shards with the profile's own fastsafetensors iterator
    assert "--load-format" in engine["args"] and engine["args"][engine["args"].index("--load-format") + 1] == vllm_loader.LOAD_FORMAT
    assert env(engine)[vllm_loader.INNER_FORMAT_ENV] == "fastsafetensors"
    fetch = containers(pod, "initContainers")["fetch-weights"]
    instance = catalog.INSTANCE_TYPES[s.capacity.instance_type]
    share = serving_pod.sidecar_sync_memory_gib(weights_limit_gb(s.serving.contract))  # a native sidecar (prod): its own share, the weights + 64 GiB, not the node's
    assert fetch["resources"]["limits"]["memory"] == fetch["resources"]["requests"]["memory"] == f"{share}Gi"
    assert share * 2**30 > catalog.KIMI_K3.weights_gb * 1e9 * 1.1  # the page cache of the files it wrote stays within its limit
    weights_gib = catalog.KIMI_K3.weights_gb * 1e9 / 2**30
    # the pod's request is the larger of its biggest init container and the sum of its containers and sidecars: still one node
    sidecars = [c for c in pod["initContainers"] if c.get("restartPolicy") == "Always"]
    total = sum(memory_gib(c["resources"]["requests"]["memory"]) for c in [*pod["containers"], *sidecars])
    _, node_memory, _ = node_share(instance, 8, None)
    assert total <= node_memory + 1e-6
    assert max(memory_gib(c["resources"]["requests"]["memory"]) for c in pod["initContainers"]) <= total + 1e-6
    assert memory_gib(engine["resources"]["limits"]["memory"]) > weights_gib  # a restarted engine's reads stay cached under its limit


def test_the_capture_sizes_follow_the_profiles_maximum_batch():
    assert engine_profiles.cudagraph_capture_sizes() == (1, 2, 4, *range(8, 256, 8), *range(256, 513, 16))  # vLLM 0.27.1's 51 at 1024 sequences
    assert engine_profiles.cudagraph_capture_sizes(5, 4096) == (1, 2, 4, 5)  # the Hopper recipe's --max-num-seqs 5
    assert engine_profiles.cudagraph_capture_sizes(100)[-3:] == (88, 96, 100)
    assert EngineProfile(extra_args=("--max-num-seqs", "64")).cudagraph_capture_sizes[-1] == 64
    assert EngineProfile(tuning_args=("--max-num-batched-tokens", "128")).cudagraph_capture_sizes[-1] == 128
    with pytest.raises(ContractError, match="may not set cudagraph_capture_sizes"):
        EngineProfile(extra_args=("--compilation-config", '{"cudagraph_capture_sizes": [1, 2]}'))
    with pytest.raises(ContractError, match="--max-num-seqs takes a whole number"):
        EngineProfile(extra_args=("--max-num-seqs", "many"))
    assert "--cudagraph-capture-sizes" in VLLM["flags"] and "cudagraph_capture_sizes" in VLLM["choices"]["compilation_config"]


@pytest.mark.parametrize("plan_fixture", ["prod_plan", "dev_plan"])
def test_both_stacks_pass_the_matched_sizes(request, plan_fixture):
    plan = request.getfixturevalue(plan_fixture)
    args = containers(serving_workload(plan)["spec"]["template"]["spec"])["vllm"]["args"]
    start = args.index("--cudagraph-capture-sizes") + 1
    sizes = []
    for item in args[start:]:
        if item.startswith("--"):
            break
        sizes.append(int(item))
    assert tuple(sizes) == plan.settings.serving.contract.engine.cudagraph_capture_sizes


def test_the_capture_sizes_are_the_contracts_to_set():
    with pytest.raises(SettingsError, match="--cudagraph-capture-sizes is set by the contract") as caught:
        load_stack_settings("prod", vllmExtraArgs=["--cudagraph-capture-sizes", "1", "2"])
    assert caught.value.key == "kimi-k3:vllmExtraArgs"
