"""Issue 34 (the snapshot's S3 copy): the sync sidecar's copier uploads a sealed snapshot (CLAIM, the files, ``KEY`` last) and
fetches it on a new node (``KEY``'s digest first, the files, ``KEY`` last); the engine's wrapper verifies the copy as a local
snapshot and restores it, any miss a cold start named in its log.

The real copier (POSIX sh, :data:`kimi_k3.weights.snapshot_copy.COPIER_FUNCTIONS`) runs against a fake ``aws`` (the pattern of
tests/test_node_sync_streams.py: the AWS CLI is not here) whose bucket is a directory; real files, real sha256, the real
wrapper (:func:`kimi_k3.weights.snapshot_pod.restore_or_cold`) with a thread answering as the agent does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from kimi_k3.errors import UserError
from kimi_k3.weights import engine_snapshot, node_sync, serving_pod, snapshot_agent, snapshot_copy, snapshot_pod
from tests.conftest import ROOT
from tests.test_engine_snapshot_pod import KEY, FakeVllm, agent_thread, fake_dump

KEY = replace(KEY, kernel_release="6.12.40-64.114.amzn2023.x86_64", gpu_bus_ids=tuple(f"00000000:{b}:00.0" for b in ("0A", "1A", "2A", "3A", "8A", "9A", "AA", "BA")))
URI = "s3://bucket/compile-cache/engine-snapshots/"

FAKE_AWS = r"""#!/bin/sh
# fake aws: s3://bucket/<path> is $FAKE_BUCKET/<path>; every call logged (pid, args) in order
echo "$$ $*" >> "$FAKE_LOG"
local_of() { case $1 in s3://bucket/*) echo "$FAKE_BUCKET/${1#s3://bucket/}" ;; *) echo "$1" ;; esac; }
case "$1 $2" in
  "configure set") exit 0 ;;
  "s3 ls") [ -e "$(local_of "$3")" ] && { echo "2026-12-07 00:00:00 1 ${3##*/}"; exit 0; }; exit 1 ;;
  "s3 cp")
    src=$(local_of "$3"); dst=$(local_of "$4")
    [ -f "$src" ] || { echo "fatal error: An error occurred (404) when calling the HeadObject operation: Key not found" >&2; exit 1; }
    [ -n "${FAKE_FAIL:-}" ] && [ "${3##*/}" = "$FAKE_FAIL" ] && exit 1
    mkdir -p "$(dirname "$dst")"; cp "$src" "$dst.tmp$$"; mv "$dst.tmp$$" "$dst"; exit 0 ;;
  "s3 sync")
    src=$(local_of "$3"); dst=$(local_of "$4"); shift 4; want=
    while [ "$#" -gt 0 ]; do case $1 in --include) want="$want $2"; shift 2 ;; --exclude) shift 2 ;; *) shift ;; esac; done
    for f in $want; do
      [ -n "${FAKE_FAIL:-}" ] && [ "$f" = "$FAKE_FAIL" ] && exit 1
      [ -f "$src$f" ] || continue
      # as the AWS CLI's sync: a destination file of the same size, written after the source, is skipped (awscli s3 sync's size and time check)
      [ -f "$dst$f" ] && [ "$(wc -c < "$src$f")" = "$(wc -c < "$dst$f")" ] && [ "$dst$f" -nt "$src$f" ] && continue
      mkdir -p "$dst"; cp "$src$f" "$dst$f.tmp$$"; mv "$dst$f.tmp$$" "$dst$f"
    done
    exit 0 ;;
  "s3api put-object")
    shift 2; key=; body=; cond=
    while [ "$#" -gt 0 ]; do case $1 in --key) key=$2; shift 2 ;; --body) body=$2; shift 2 ;; --if-none-match) cond=$2; shift 2 ;; *) shift 2 ;; esac; done
    target="$FAKE_BUCKET/$key"
    mkdir -p "$(dirname "$target")"; cp "$body" "$target.tmp$$"
    if [ "$cond" = "*" ]; then
      # as S3: of two conditional writers one wins, atomically (ln refuses an existing name), the other gets 412
      ln "$target.tmp$$" "$target" 2>/dev/null || { rm -f "$target.tmp$$"
        echo "An error occurred (PreconditionFailed) when calling the PutObject operation: At least one of the pre-conditions you specified did not hold" >&2; exit 254; }
      rm -f "$target.tmp$$"
    else
      mv "$target.tmp$$" "$target"
    fi
    echo '{"ETag": "x"}'; exit 0 ;;
  "s3api delete-object")
    shift 2; key=
    while [ "$#" -gt 0 ]; do case $1 in --key) key=$2; shift 2 ;; *) shift 2 ;; esac; done
    rm -f "$FAKE_BUCKET/$key"; exit 0 ;;
esac
echo "fake aws: unexpected $*" >&2; exit 2
"""


def fake_aws(tmp_path: Path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "aws").write_text(FAKE_AWS)
    (bindir / "aws").chmod(0o755)
    (tmp_path / "bucket").mkdir(exist_ok=True)
    return {"PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_BUCKET": str(tmp_path / "bucket"), "FAKE_LOG": str(tmp_path / "aws.log"),
            "SNAPSHOT_S3_URI": URI, "SYNC_STREAMS": str(node_sync.SYNC_STREAMS), "SNAPSHOT_COPY_POLL_S": "0.02"}


def copier_call(tmp_path: Path, root: Path, action: str, digest: str, **env: str) -> subprocess.CompletedProcess:
    """One ``snap_upload`` / ``snap_fetch`` of the shipped functions, run by ``sh`` as the sidecar runs them."""
    script = snapshot_copy.COPIER_FUNCTIONS + f'\nsnap_{action} "$1"\n'
    return subprocess.run(["sh", "-c", script, "copier", digest], env={**fake_aws(tmp_path), "SNAPSHOT_ROOT": str(root), **env},
                          capture_output=True, text=True, timeout=60)


@contextmanager
def copier(tmp_path: Path, root: Path, **env: str) -> Iterator[None]:
    """The sidecar's copier loop running beside the test (its own process group, ended when the test is done)."""
    script = snapshot_copy.COPIER_FUNCTIONS + "\nsnapshot_copier\n"
    proc = subprocess.Popen(["sh", "-c", script], env={**fake_aws(tmp_path), "SNAPSHOT_ROOT": str(root), **env}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def sealed(root: Path, key: engine_snapshot.SnapshotKey = KEY) -> Path:
    """A snapshot of ``key`` taken by the real ``snapshot_after_healthy`` (a real HTTP server for vLLM, a thread for the agent)."""
    vllm = FakeVllm()
    stop = threading.Event()
    agent_thread(root, fake_dump(root, []), stop)
    try:
        assert snapshot_pod.snapshot_after_healthy(snapshot_pod.Engine(vllm.url), snapshot_pod.AgentChannel(root, poll_s=0.01), root, key, [].append, "pod-a")
    finally:
        stop.set()
        vllm.close()
    return snapshot_pod.snapshot_dir(root, key)


def calls(tmp_path: Path) -> list[list[str]]:
    return [line.split()[1:] for line in (tmp_path / "aws.log").read_text().splitlines()]


def in_s3(tmp_path: Path, key: engine_snapshot.SnapshotKey = KEY) -> Path:
    return tmp_path / "bucket" / "compile-cache" / "engine-snapshots" / key.digest()


# --- upload --------------------------------------------------------------------------------------------------------------

def test_a_sealed_snapshot_is_uploaded_claim_first_the_files_over_the_streams_and_key_last(tmp_path):
    directory = sealed(tmp_path / "node-a")
    done = copier_call(tmp_path, tmp_path / "node-a", "upload", KEY.digest())
    assert done.returncode == 0, done.stdout + done.stderr
    copy = in_s3(tmp_path)
    assert sorted(p.name for p in copy.iterdir()) == ["CLAIM", "KEY", "SHA256SUMS", "core-42.img", "pages-1.img"]
    for name in ("KEY", "SHA256SUMS", "core-42.img", "pages-1.img"):
        assert (copy / name).read_bytes() == (directory / name).read_bytes()
    log = calls(tmp_path)
    assert log[1][:2] == ["s3api", "put-object"] and "--if-none-match" in log[1]  # the claim, conditional, before any byte
    writes = [c for c in log if c[:2] in (["s3", "cp"], ["s3", "sync"])]
    assert writes[-1][:4] == ["s3", "cp", str(directory / "KEY"), f"{URI}{KEY.digest()}/KEY"]  # KEY last, after every file
    syncs = [c for c in writes if c[1] == "sync"]
    included = sorted(c[i + 1] for c in syncs for i, a in enumerate(c) if a == "--include")
    assert included == ["core-42.img", "pages-1.img"] and len(syncs) == 2  # two files over two of the four streams, each named once


def test_a_failed_file_upload_writes_no_key_so_the_half_copy_is_never_taken(tmp_path):
    sealed(tmp_path / "node-a")
    done = copier_call(tmp_path, tmp_path / "node-a", "upload", KEY.digest(), FAKE_FAIL="pages-1.img")
    assert done.returncode != 0 and "no KEY written" in done.stdout
    assert not (in_s3(tmp_path) / "KEY").exists()
    fetched = copier_call(tmp_path, tmp_path / "node-b", "fetch", KEY.digest())
    assert fetched.returncode != 0 and "no S3 copy of this key" in fetched.stdout


def test_a_second_replica_of_the_same_key_uploads_nothing_and_a_copy_in_s3_is_not_uploaded_again(tmp_path):
    sealed(tmp_path / "node-a")
    sealed(tmp_path / "node-b")
    copy = in_s3(tmp_path)
    copy.mkdir(parents=True)
    (copy / "CLAIM").write_text("another replica's claim\n")
    second = copier_call(tmp_path, tmp_path / "node-b", "upload", KEY.digest())
    assert second.returncode == 0 and "another replica is uploading this key" in second.stdout
    assert sorted(p.name for p in copy.iterdir()) == ["CLAIM"]  # nothing interleaved into the first uploader's copy
    (copy / "CLAIM").unlink()
    assert copier_call(tmp_path, tmp_path / "node-a", "upload", KEY.digest()).returncode == 0
    (tmp_path / "aws.log").unlink()
    again = copier_call(tmp_path, tmp_path / "node-b", "upload", KEY.digest())
    assert "already in S3" in again.stdout and [c[:2] for c in calls(tmp_path)] == [["s3", "ls"]]


# --- fetch and restore on a new node ---------------------------------------------------------------------------------------

def restore_on(tmp_path: Path, root: Path, key: engine_snapshot.SnapshotKey = KEY, **env: str) -> tuple[bool, list[str], list[dict]]:
    """The real wrapper on a new node (``root`` empty) with the copier loop beside it and a thread answering as the agent."""
    log: list[str] = []
    seen: list[dict] = []
    stop = threading.Event()
    agent_thread(root, lambda request: seen.append(request) or {"ok": True}, stop)
    try:
        with copier(tmp_path, root, **env):
            restored = snapshot_pod.restore_or_cold(snapshot_pod.AgentChannel(root, poll_s=0.01), root, key, log.append, "pod-b",
                                                    snapshot_pod.CopyChannel(root, URI, timeout_s=30, poll_s=0.02))
    finally:
        stop.set()
    return restored, log, seen


def uploaded(tmp_path: Path) -> Path:
    sealed(tmp_path / "node-a")
    assert copier_call(tmp_path, tmp_path / "node-a", "upload", KEY.digest()).returncode == 0
    return in_s3(tmp_path)


def test_a_new_node_fetches_the_copy_of_its_key_verifies_every_file_and_restores_it(tmp_path):
    uploaded(tmp_path)
    restored, log, seen = restore_on(tmp_path, tmp_path / "node-b")
    assert restored, log
    assert [r["action"] for r in seen] == ["restore"]
    local = snapshot_pod.snapshot_dir(tmp_path / "node-b", KEY)
    assert snapshot_pod.check(local, KEY).restore  # the copy is a local snapshot now: a later restart restores without S3
    short = KEY.digest()[:12]
    assert log[0].startswith(f"engine snapshot {short}: fetched the S3 copy in ") and "KEY last" in log[0]
    assert log[1].startswith(f"engine snapshot {short}: verified 2 files") and log[2].startswith(f"engine snapshot {short}: restored")
    fetch = [c for c in calls(tmp_path) if c[:2] == ["s3", "cp"] and c[2].startswith(URI)]
    assert fetch[0][2].endswith("/KEY") and fetch[1][2].endswith("/SHA256SUMS")  # KEY first (its digest checked), then the manifest


def test_a_copy_whose_key_is_another_keys_is_not_taken(tmp_path):
    """A copy under this key's digest holding another key (tampered, or a bug writing the wrong KEY): refused, cold, nothing restored."""
    copy = uploaded(tmp_path)
    other = replace(KEY, driver_version="590.86.10")
    (copy / "KEY").write_text(other.to_json())
    restored, log, seen = restore_on(tmp_path, tmp_path / "node-b")
    assert not restored and seen == []
    assert "not this key's digest: not taken" in log[-1] and log[-1].startswith(f"engine snapshot {KEY.digest()[:12]}: cold start: ")


def test_a_fetched_key_differing_in_a_field_is_refused_by_the_restore_decision(tmp_path):
    """Behind the copier's digest check, the wrapper's field-by-field decision: a KEY that lands but differs is a cold start naming
    the field, and the KEY is removed so no later start trusts it."""
    uploaded(tmp_path)
    node = tmp_path / "node-b"
    directory = snapshot_pod.snapshot_dir(node, KEY)

    class Landed(snapshot_pod.CopyChannel):
        def fetch(self, digest: str) -> tuple[bool, str]:  # the copy landed, but its KEY says kernel 6.1 (the copier's check skipped)
            directory.mkdir(parents=True)
            for f in in_s3(tmp_path).iterdir():
                (directory / f.name).write_bytes(f.read_bytes())
            (directory / "KEY").write_text(replace(KEY, kernel_release="6.1.0").to_json())
            return True, "fetched"

    log: list[str] = []
    assert not snapshot_pod.restore_or_cold(snapshot_pod.AgentChannel(node, timeout_s=1), node, KEY, log.append, "pod-b", Landed(node, URI))
    assert "snapshot kernel_release '6.1.0' differs from this pod's" in log[-1] and not (directory / "KEY").exists()


def test_one_corrupted_byte_in_the_copy_is_a_cold_start_naming_the_file(tmp_path):
    copy = uploaded(tmp_path)
    pages = bytearray((copy / "pages-1.img").read_bytes())
    pages[12345] ^= 1
    (copy / "pages-1.img").write_bytes(bytes(pages))
    restored, log, seen = restore_on(tmp_path, tmp_path / "node-b")
    assert not restored and seen == []
    assert "the S3 copy, fetched: snapshot file pages-1.img: sha256" in log[-1]
    assert not (snapshot_pod.snapshot_dir(tmp_path / "node-b", KEY) / "KEY").exists()
    pages[12345] ^= 1  # the copy repaired (a new upload): the next start fetches it and restores
    (copy / "pages-1.img").write_bytes(bytes(pages))
    restored, log, seen = restore_on(tmp_path, tmp_path / "node-b")
    assert restored and [r["action"] for r in seen] == ["restore"], log


def test_a_local_file_gone_bad_is_fetched_again_whole_not_skipped_by_the_sync(tmp_path):
    """A node whose fetched snapshot lost its KEY (a restore that never answered) and has a file of the right size but wrong bytes:
    the next fetch starts from an empty directory, since ``aws s3 sync`` skips a local file of the same size written after the object."""
    uploaded(tmp_path)
    node = tmp_path / "node-b"
    assert restore_on(tmp_path, node)[0]
    local = snapshot_pod.snapshot_dir(node, KEY)
    (local / "KEY").unlink()
    pages = bytearray((local / "pages-1.img").read_bytes())
    pages[7] ^= 1
    (local / "pages-1.img").write_bytes(bytes(pages))
    restored, log, _ = restore_on(tmp_path, node)
    assert restored, log


def test_no_copy_or_a_failed_download_is_a_cold_start_named_in_the_log(tmp_path):
    restored, log, _ = restore_on(tmp_path, tmp_path / "node-b")
    assert not restored and "no S3 copy of this key" in log[-1] and "cold start" in log[-1]
    uploaded(tmp_path)
    restored, log, _ = restore_on(tmp_path, tmp_path / "node-c", FAKE_FAIL="core-42.img")
    assert not restored and "download of the files from" in log[-1]
    assert not (snapshot_pod.snapshot_dir(tmp_path / "node-c", KEY) / "KEY").exists()  # KEY moved into place only after every file


def test_a_node_with_a_snapshot_of_its_key_does_not_fetch(tmp_path):
    sealed(tmp_path / "node-a")
    restored, _, _ = restore_on(tmp_path, tmp_path / "node-a")
    assert restored and not (tmp_path / "aws.log").exists()


def test_the_warm_up_sidecar_asks_for_the_upload_after_the_seal_and_not_for_a_restored_key(tmp_path):
    root = tmp_path / "node"
    vllm = FakeVllm()
    stop = threading.Event()
    seen: list[dict] = []
    agent_thread(root, fake_dump(root, seen), stop)
    log: list[str] = []
    copies = snapshot_pod.CopyChannel(root, URI)
    try:
        assert snapshot_pod.snapshot_after_healthy(snapshot_pod.Engine(vllm.url), snapshot_pod.AgentChannel(root, poll_s=0.01), root, KEY, log.append, "pod-a",
                                                   copies=copies)
        assert (root / ".s3" / f"upload.{KEY.digest()}").is_file() and log[-1].startswith(f"engine snapshot {KEY.digest()[:12]}: wake_up done")
        assert any(line == engine_snapshot.UPLOAD_LOG.format(key=KEY.digest()[:12], uri=f"{URI}{KEY.digest()}/") for line in log)
        # the engine restored this key (from the node or from S3) before answering /health: no second dump
        assert snapshot_pod.snapshot_after_healthy(snapshot_pod.Engine(vllm.url), snapshot_pod.AgentChannel(root, poll_s=0.01), root, KEY, log.append, "pod-a",
                                                   copies=copies)
        assert [r["action"] for r in seen] == ["dump"] and "a sealed snapshot of this key is on the node: no dump" in log[-2]
        # a refused copy's files (no KEY) are not sealed with the next dump: the directory starts empty
        directory = snapshot_pod.snapshot_dir(root, KEY)
        (directory / "KEY").unlink()
        (directory / "pages-99.img").write_bytes(b"a refused S3 copy's file")
        assert snapshot_pod.snapshot_after_healthy(snapshot_pod.Engine(vllm.url), snapshot_pod.AgentChannel(root, poll_s=0.01), root, KEY, log.append, "pod-a")
        assert "pages-99.img" not in (directory / "SHA256SUMS").read_text() and not (directory / "pages-99.img").exists()
    finally:
        stop.set()
        vllm.close()


# --- the key, the wiring --------------------------------------------------------------------------------------------------

def test_the_pod_key_carries_the_nodes_kernel_and_gpu_bus_ids(tmp_path):
    fields = {k: v for k, v in json.loads(KEY.to_json()).items() if k not in ("driver_version", "kernel_release", "gpu_bus_ids", "version")}
    key = snapshot_pod.pod_key(json.dumps(fields), "590.48.01", kernel_release=KEY.kernel_release, gpu_bus_ids=KEY.gpu_bus_ids)
    assert key == KEY and key.digest() != replace(KEY, gpu_bus_ids=KEY.gpu_bus_ids[::-1]).digest()
    assert engine_snapshot.key_from_json(KEY.to_json()) == KEY


def test_the_queue_and_the_sidecars_view_of_the_root_are_the_pods():
    assert snapshot_pod.CopyChannel.QUEUE == snapshot_copy.QUEUE
    assert f"{serving_pod.WEIGHTS_ROOT}/{snapshot_agent.SNAPSHOT_SUBPATH}" == snapshot_copy.SIDECAR_SNAPSHOT_ROOT
    assert engine_snapshot.s3_copy_uri("s3://b/compile-cache/") == "s3://b/compile-cache/engine-snapshots/"


def test_the_s3_copy_needs_the_snapshot_the_sidecar_and_the_cache_prefix():
    ok = serving_pod.ServingStartup(node_local_storage_class="kimi-local-weights", compile_cache_s3_uri="s3://acme-cache/cc/", sync_sidecar=True,
                                    engine_snapshot=True, engine_snapshot_s3=True)
    assert ok.engine_snapshot_s3_uri == "s3://acme-cache/cc/engine-snapshots/"
    for change in (dict(sync_sidecar=False), dict(engine_snapshot=False), dict(compile_cache_s3_uri=None)):
        with pytest.raises(UserError, match="engine_snapshot_s3 needs engine_snapshot, sync_sidecar and compile_cache_s3_uri"):
            replace(ok, **change)
    env = serving_pod.sync_env(startup=ok, weights_s3_uri="s3://w/p/", mount_path="/models", revision="f" * 40, sha256_manifest="SHA256SUMS",
                               instance_type="p6-b300.48xlarge", cpus=32, region="us-west-2")
    assert env["SNAPSHOT_S3_URI"] == "s3://acme-cache/cc/engine-snapshots/" and env["SNAPSHOT_ROOT"] == snapshot_copy.SIDECAR_SNAPSHOT_ROOT
    assert "snapshot_copier &" in serving_pod.sync_script(True, sidecar=True, snapshot_copy_on=True)
    assert "snapshot_copier" not in serving_pod.sync_script(True, sidecar=True)


def test_prod_deploys_the_copy_expires_it_and_its_role_reaches_only_the_cache_prefix(prod_plan):
    from tests.test_time_to_serve_stack import containers, env, serving_workload

    pod = serving_workload(prod_plan)["spec"]["template"]["spec"]
    prefix = "s3://acme-ml-weights-us-west-2/compile-cache/engine-snapshots/"
    sync = containers(pod, "initContainers")["fetch-weights"]
    assert env(sync)["SNAPSHOT_S3_URI"] == prefix and env(sync)["SNAPSHOT_ROOT"] == snapshot_copy.SIDECAR_SNAPSHOT_ROOT
    assert "snapshot_copier &" in sync["command"][2]
    assert any(m["mountPath"] == serving_pod.WEIGHTS_ROOT and "subPath" not in m for m in sync["volumeMounts"])  # the volume's root: the snapshots too
    for name in ("vllm", "warmup"):
        assert env(containers(pod)[name])["SNAPSHOT_S3_URI"] == prefix
    # the pipelined loader reads the restored engine's reload shard by shard: the wrapper does not wait for the whole weights marker
    assert "WEIGHTS_MARKER" not in env(containers(pod)["vllm"])
    (life,) = [r for r in prod_plan.resources if r.type == "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration"]
    rule = next(r for r in life.plain_inputs["rules"] if r["id"] == "expire-compile-cache-engine-snapshots")
    assert rule["filter"] == {"prefix": "compile-cache/engine-snapshots/"} and rule["expiration"] == {"days": engine_snapshot.S3_COPY_EXPIRY_DAYS}
    (policy,) = [r for r in prod_plan.resources if r.type == "aws:iam/rolePolicy:RolePolicy" and r.name.endswith("-weights-compile-cache")]
    statements = json.loads(policy.plain_inputs["policy"])["Statement"]
    writes = next(s for s in statements if "s3:PutObject" in s["Action"])
    assert writes["Resource"] == ["arn:aws:s3:::acme-ml-weights-us-west-2/compile-cache/*"]  # the copies' prefix is inside it, nothing else is


def test_the_estimate_follows_what_is_deployed_and_counts_the_first_dump_before_ready():
    from kimi_k3.stack import time_to_serve
    from kimi_k3.stack.settings import load_stack
    from kimi_k3.weights import estimate

    prod = load_stack("prod")
    x = time_to_serve.startup_inputs(prod)
    assert x.engine_snapshot_s3 and time_to_serve.engine_snapshot_s3(prod)
    assert not time_to_serve.startup_inputs(replace(prod, time_to_serve=replace(prod.time_to_serve, sync_sidecar=False, pipelined_load=False))).engine_snapshot_s3
    # one replica (no dump election, tests/test_engine_snapshot_election.py): the first start of a key dumps before its Ready
    cold, warm = estimate.estimate_case(replace(x, dump_beside_peer=False), "cold"), estimate.estimate_case(x, "warm")
    names = [p.name for p in cold.phases]
    dump = [n for n in names if n.startswith("engine snapshot dump")]
    assert len(dump) == 6 and names.index(dump[-1]) < names.index("first request (warm-up before Ready)")  # paid before Ready
    assert sum(p.minutes for p in cold.phases if p.name in dump) == pytest.approx(estimate.dump_minutes(x)) and 1.5 < estimate.dump_minutes(x) < 2.5
    assert not any(p.name.startswith("engine snapshot dump") for p in warm.phases)  # restored from the S3 copy: nothing to dump
    no_copy = estimate.estimate_case(replace(x, engine_snapshot_s3=False, dump_beside_peer=False), "warm")  # no copy: no claim to elect by
    assert any(p.name.startswith("engine snapshot dump") for p in no_copy.phases)  # a new node without the copy dumps the key again
    assert warm.minutes <= 8 < no_copy.minutes and warm.after_node_ready < 3.5
    fetch = next(p for p in warm.phases if p.name.startswith("engine snapshot from S3"))
    assert fetch.lane == "engine" and fetch.minutes == pytest.approx(90 / (13 / 2) / 60, rel=0.05)


def test_copies_in_a_bucket_the_stack_does_not_declare_are_warned_about_and_get_no_rule():
    from kimi_k3.stack.settings import load_stack
    from kimi_k3.weights import time_to_serve as tts

    prod = load_stack("prod")
    assert not any("do not expire" in w for w in prod.warnings)  # prod declares the cache's bucket: its lifecycle expires them
    import yaml

    from kimi_k3.stack import settings

    values = {k: v if isinstance(v, str) else json.dumps(v) for k, v in yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())["config"].items()}
    values.pop("kimi-k3:weightsBucketName")  # the bucket managed elsewhere
    values.pop("kimi-k3:weightsStagingJob")  # not this test's subject
    values["kimi-k3:apiKey"] = "offline-placeholder"
    managed_elsewhere = settings.from_values(values, {"kimi-k3:apiKey"}, stack="prod")
    assert managed_elsewhere.time_to_serve.engine_snapshot and managed_elsewhere.time_to_serve.sync_sidecar
    (warning,) = [w for w in managed_elsewhere.warnings if "do not expire" in w]
    assert warning.startswith("kimi-k3:engineSnapshot: the snapshots' S3 copies under s3://") and "kimi-k3:weightsBucketName" in warning
    args = tts.TimeToServeArgs(region="us-west-2", cluster_name="c", engine_image="i", instance_type="p6-b300.48xlarge", model_id="m", revision="f" * 40,
                               bucket_name="another-bucket", engine_snapshot_s3_uri="s3://acme-cache/cc/engine-snapshots/")
    assert tts.snapshot_copy_expiry(args) == {}
    assert tts.snapshot_copy_expiry(replace(args, bucket_name="acme-cache")) == {"cc/engine-snapshots/": engine_snapshot.S3_COPY_EXPIRY_DAYS}


def test_startup_report_reads_the_copiers_own_upload_line_and_the_wrappers_fetch_line(tmp_path):
    """The loop's stdout (the fetch-weights container's log) parsed by ``kimi-k3 startup-report``: the upload's seconds."""
    from kimi_k3.bringup import startup

    root = tmp_path / "node-a"
    sealed(root)
    out = tmp_path / "copier.log"
    script = snapshot_copy.COPIER_FUNCTIONS + "\nsnapshot_copier\n"
    with out.open("w") as sink:
        proc = subprocess.Popen(["sh", "-c", script], env={**fake_aws(tmp_path), "SNAPSHOT_ROOT": str(root)}, start_new_session=True, stdout=sink, stderr=subprocess.DEVNULL)
        try:
            snapshot_pod.CopyChannel(root, URI).upload(KEY.digest())
            deadline = time.monotonic() + 30
            while "upload:" not in out.read_text() and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
    lines = [*out.read_text().splitlines(), engine_snapshot.FETCH_LOG.format(key=KEY.digest()[:12], seconds=7.5)]
    seen = {m.what: m.seconds for m in startup.parse_engine_log(lines).measurements}
    assert set(seen) == {"engine snapshot upload", "engine snapshot fetch"} and seen["engine snapshot fetch"] == 7.5, lines
