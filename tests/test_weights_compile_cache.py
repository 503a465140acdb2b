"""Compile/JIT cache save and restore against moto's S3 and real directories; the key; the warm-up sidecar."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from kimi_k3.serving.pod_kit import HOME_ENV, SERVER_CACHE_ENV
from kimi_k3.weights import WeightsError, podmain, warmup
from kimi_k3.weights import compile_cache as cc
from tests.fake_openai_server import FakeOpenAIServer
from tests.weights_builders import seeded_bytes

BUCKET = "acme-ml-weights-us-west-2"
PREFIX_URI = f"s3://{BUCKET}/compile-cache/"
IMAGE = "vllm/vllm-openai@sha256:" + "9" * 64
REV = "3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20"


def inputs(**changes) -> cc.CacheKeyInputs:
    values = dict(image=IMAGE, model_revision=REV, engine_args=("--tensor-parallel-size", "8", "--max-model-len", "262144"), engine_env={"VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION": "1"}, gpu="B300", ami_release_version="1.34.2-20251120")
    values.update(changes)
    return cc.CacheKeyInputs(**values)


def test_the_key_is_stable_and_changes_with_everything_that_invalidates_a_kernel():
    base = cc.cache_key(inputs())
    assert base == cc.cache_key(inputs(engine_env={"VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION": "1"}))
    assert base.startswith(f"v2-b300-{REV[:12]}-")
    changed = {
        "image": IMAGE.replace("9" * 64, "8" * 64),
        "model_revision": "0" * 40,
        "engine_args": ("--tensor-parallel-size", "8", "--max-model-len", "131072"),
        "engine_env": {"VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION": "0"},
        "gpu": "B200",
        "ami_release_version": "1.34.2-20260610",
    }
    keys = {name: cc.cache_key(inputs(**{name: value})) for name, value in changed.items()}
    assert base not in keys.values() and len(set(keys.values())) == len(keys)


def test_a_floating_tag_has_no_cache_key():
    with pytest.raises(WeightsError, match="not pinned by digest"):
        cc.cache_key(inputs(image="vllm/vllm-openai:kimi-k3"))


def test_cache_dirs_follow_the_pod_environment():
    env = {**HOME_ENV, **SERVER_CACHE_ENV}
    assert cc.cache_dirs_from_env(env) == [
        "/home/vllm/.cache/vllm", "/home/vllm/.cache/torchinductor", "/home/vllm/.triton/cache", "/home/vllm/.nv/ComputeCache", "/home/vllm/.cache/flashinfer",
    ]  # DeepGEMM's directory (DG_JIT_CACHE_DIR) lies under VLLM_CACHE_ROOT: saved once
    assert cc.cache_dirs_from_env({"HOME": "/h", "DG_JIT_CACHE_DIR": "/dg", "VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR": "/fa", "FLASHINFER_WORKSPACE_BASE": "/fi"}) == ["/dg", "/fa", "/fi/.cache/flashinfer"]


def test_the_policy_writes_only_the_cache_prefix():
    policy = cc.compile_cache_policy(BUCKET, "compile-cache/")
    resources = {r for s in policy["Statement"] for r in s["Resource"]}
    assert resources == {f"arn:aws:s3:::{BUCKET}/compile-cache/*", f"arn:aws:s3:::{BUCKET}"}
    listing = next(s for s in policy["Statement"] if s["Action"] == ["s3:ListBucket"])
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["compile-cache/*"]}}
    assert not any("Delete" in a for s in policy["Statement"] for a in s["Action"])


@pytest.fixture()
def s3(monkeypatch):
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-west-2", "AWS_REGION": "us-west-2"}.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        client = boto3.client("s3", region_name="us-west-2")
        client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        yield client


def fill(root, tag: bytes) -> list[str]:
    dirs = [str(root / "home/.cache/vllm"), str(root / "home/.triton/cache")]
    os.makedirs(f"{dirs[0]}/torch_compile_cache/1517964802/rank_0_0", exist_ok=True)
    os.makedirs(dirs[1], exist_ok=True)
    with open(f"{dirs[0]}/torch_compile_cache/1517964802/rank_0_0/computation_graph.py", "wb") as fh:
        fh.write(b"graph " + tag)
    with open(f"{dirs[1]}/kernel.cubin", "wb") as fh:
        fh.write(seeded_bytes(9 << 20, "compile-cache") + tag)  # more than one part
    return dirs


def snapshot(dirs) -> dict[str, bytes]:
    out = {}
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                out[os.path.join(root, f)] = Path(root, f).read_bytes()
    return out


def test_save_then_restore_reproduces_the_cache_directories(s3, tmp_path):
    dirs = fill(tmp_path, b"one")
    before = snapshot(dirs)
    uri = cc.cache_object_uri(PREFIX_URI, cc.cache_key(inputs()))
    assert "saved 2 files" in cc.save(s3, uri, dirs)
    assert "already saved" in cc.save(s3, uri, dirs)
    for path in before:
        os.remove(path)
    assert "restored 2 files" in cc.restore(s3, uri, dirs)
    assert snapshot(dirs) == before


# What each cache of a vLLM 0.27.1 start writes, under the directories the pod's environment names (relative to HOME).
EVERY_CACHE = {
    ".cache/vllm/torch_compile_cache/3f1c/rank_0_0/backbone/cache_key_factors.json": "vLLM compile cache (Inductor artifacts)",
    ".cache/vllm/torch_compile_cache/torch_aot_compile/9ab2/rank_0_0/model": "AOT compiled function (VLLM_USE_AOT_COMPILE)",
    ".cache/vllm/deep_gemm/cache/kernel.fp8_gemm_nt.4f/kernel.cubin": "DeepGEMM JIT (DG_JIT_CACHE_DIR)",
    ".cache/vllm/flashinfer_autotune_cache/0.6.16.post3/100a/5e/autotune_configs.json": "FlashInfer autotune results",
    ".cache/vllm/startup_plan/startup_plan_0a1b2c3d4e5f6a7b.json": "vLLM startup plan (VLLM_ENABLE_STARTUP_PLAN)",
    ".triton/cache/XyZ/_fwd_kda_kernel.cubin": "Triton kernel",
    ".triton/cache/XyZ/_fwd_kda_kernel.autotune.json": "Triton autotuning result (TRITON_CACHE_AUTOTUNING)",
    ".cache/torchinductor/fxgraph/ab/fab12/entry": "Inductor FX graph cache",
    ".nv/ComputeCache/index": "CUDA driver JIT cache",
    ".cache/flashinfer/0.6.16.post3/100a/cached_ops/trtllm_fmha/trtllm_fmha.so": "FlashInfer JIT",
    ".cache/flashinfer/cubins/moe/kernel.cubin": "FlashInfer downloaded cubins",
}


def test_every_cache_directory_of_the_pod_survives_a_save_and_a_restore(s3, tmp_path):
    home = tmp_path / "home/vllm"
    env = {k: v.replace("/home/vllm", str(home)) for k, v in {**HOME_ENV, **SERVER_CACHE_ENV}.items()}
    dirs = cc.cache_dirs_from_env(env)
    for rel, what in EVERY_CACHE.items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(what.encode() + (seeded_bytes(70 << 20, "big") if "trtllm_fmha" in rel else b""))  # one file past a ranged GET
    (home / ".cache/huggingface/token").parent.mkdir(parents=True)
    (home / ".cache/huggingface/token").write_text("not a cache")
    before = snapshot(dirs)
    assert len(before) == len(EVERY_CACHE)  # the token is in no cache directory: never uploaded
    uri = cc.cache_object_uri(PREFIX_URI, cc.cache_key(inputs()))
    assert f"saved {len(EVERY_CACHE)} files" in cc.save(s3, uri, dirs)
    for path in before:
        os.remove(path)
    marker = str(home / ".cache/kimi-k3-compile-cache-restored")
    assert f"restored {len(EVERY_CACHE)} files" in cc.restore(s3, uri, dirs, marker=marker)
    assert snapshot(dirs) == before
    assert Path(marker).read_text() == uri + "\n"
    other = cc.cache_object_uri(PREFIX_URI, cc.cache_key(inputs(gpu="B200")))
    assert "miss" in cc.restore(s3, other, dirs, marker=marker) and not Path(marker).exists()  # a miss forces no AOT load


def test_a_miss_changes_nothing_and_a_corrupt_archive_is_not_restored(s3, tmp_path):
    dirs = fill(tmp_path, b"two")
    uri = cc.cache_object_uri(PREFIX_URI, cc.cache_key(inputs()))
    assert "miss" in cc.restore(s3, uri, dirs)
    cc.save(s3, uri, dirs)
    s3.put_object(Bucket=BUCKET, Key=f"compile-cache/{uri.rsplit('/', 1)[1]}", Body=b"not a tar", Metadata={"sha256": "0" * 64})
    marker = tmp_path / "restored"
    marker.write_text("stale")
    with pytest.raises(WeightsError, match="is not the 0000"):
        cc.restore(s3, uri, dirs, marker=str(marker))
    assert not marker.exists()


def test_an_archive_reaching_outside_the_cache_directories_is_refused(tmp_path):
    dirs = fill(tmp_path, b"x")
    evil = tmp_path / "evil.tar"
    (tmp_path / "payload").write_bytes(b"x")
    with tarfile.open(evil, "w") as tar:
        tar.add(tmp_path / "payload", arcname=str(tmp_path / "home/.bashrc").lstrip("/"))
    with pytest.raises(WeightsError, match="outside the cache directories"):
        cc.extract_archive(str(evil), dirs)
    assert not (tmp_path / "home/.bashrc").exists()


def test_cache_failures_never_fail_the_pod(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.setenv("CACHE_DIRS", str(tmp_path))
    monkeypatch.setenv("CACHE_S3_URI", f"s3://{BUCKET}/compile-cache/k.tar")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")  # nothing listens: every call fails
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setattr(podmain, "_s3", lambda: boto3.client("s3", region_name="us-west-2", endpoint_url="http://127.0.0.1:9", config=__import__("botocore.config").config.Config(retries={"max_attempts": 1}, connect_timeout=1)))
    assert podmain.main(["cache-restore"]) == 0
    assert podmain.main(["cache-save"]) == 0
    err = capsys.readouterr().err
    assert "restore failed, going on without it" in err and "save failed, going on without it" in err


def test_the_warm_up_sidecar_marks_the_pod_only_after_a_completion_went_through(tmp_path):
    marker = tmp_path / "warm"
    with FakeOpenAIServer(api_key="sk-test") as server:
        server.behaviour.served_model = "Kimi-K3"
        ok = warmup.warm_up_and_mark(server.url, "Kimi-K3", str(marker), api_key="sk-wrong", attempts=2, sleep=lambda s: None)
        assert not ok and not marker.exists()  # 401: no mark, the pod stays unready
        assert warmup.warm_up_and_mark(server.url, "Kimi-K3", str(marker), api_key="sk-test", sleep=lambda s: None)
        assert marker.exists()
        body = server.chat_requests()[-1]
        assert body["model"] == "Kimi-K3" and body["max_tokens"] == 8 and body["stream"] is False


def test_the_warm_up_waits_for_health_first(tmp_path):
    calls = []
    assert not warmup.wait_healthy("http://127.0.0.1:9", deadline_s=0.05, poll_s=0.01, sleep=lambda s: calls.append(s))
    assert calls


def test_after_an_engine_restart_the_sidecar_unmarks_the_pod_and_warms_the_new_engine_up(tmp_path):
    """The marker survives a container restart (``/tmp`` is the pod's): the restarted engine must not be Ready unwarmed."""
    marker = tmp_path / "warm"
    with FakeOpenAIServer(api_key="sk-test") as server:
        server.behaviour.served_model = "Kimi-K3"
        assert warmup.warm_up_and_mark(server.url, "Kimi-K3", str(marker), api_key="sk-test", sleep=lambda s: None)
        first = len(server.chat_requests())
        warmup.rewarm_after_restarts(server.url, "Kimi-K3", str(marker), api_key="sk-test", sleep=lambda s: None, rounds=3)
        assert len(server.chat_requests()) == first and marker.exists()  # healthy: nothing to do

        seen = []

        def restart_then_recover(seconds):
            # The engine restarts (503) on the first poll, is back by the next one.
            seen.append(marker.exists())
            server.behaviour.health_status = 503 if len(seen) == 1 else 200

        warmup.rewarm_after_restarts(server.url, "Kimi-K3", str(marker), api_key="sk-test", sleep=restart_then_recover, rounds=1)
        assert len(server.chat_requests()) == first + 1 and marker.exists()  # warmed up again, marked again
        assert seen[0] is True and False in seen  # unmarked while the new engine came up
