"""The node sync script, run for real (POSIX sh, coreutils, openssl) against a fake ``aws`` that behaves
like the CRT client: it writes each file under a temporary name and renames it when complete."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from kimi_k3.core import catalog
from kimi_k3.errors import UserError
from kimi_k3.weights import estimate, node_sync
from kimi_k3.weights.manifest import Manifest, ManifestEntry
from kimi_k3.weights.node_sync import (
    crt_fallback_minutes,
    node_sync_env,
    target_bandwidth_bytes_per_s,
    verify_workers,
)
from tests.weights_builders import corrupted, seeded_bytes

FAKE_AWS = r"""#!/bin/sh
# fake aws: configure set records; s3 cp/sync copy from $FAKE_BUCKET (a directory) via temp file + rename.
echo "$*" >> "$FAKE_LOG"
case "$1 $2" in
  "configure set") exit 0 ;;
  "s3 cp") src=${3#s3://bucket/prefix/}; cp "$FAKE_BUCKET/$src" "$4"; exit 0 ;;
  "s3 sync")
    for f in $(cat "$FAKE_BUCKET/.order"); do
      [ -n "${FAKE_SKIP:-}" ] && [ "$f" = "$FAKE_SKIP" ] && continue
      mkdir -p "$(dirname "$f")"
      cp "$FAKE_BUCKET/$f" "$f.a1b2c3d4"; sleep "${FAKE_DELAY:-0}"; mv "$f.a1b2c3d4" "$f"
      echo "synced $f" >> "$FAKE_LOG"
    done
    exit "${FAKE_SYNC_RC:-0}" ;;
esac
echo "fake aws: unexpected $*" >&2; exit 2
"""


def bucket(tmp_path: Path, corrupt: str | None = None, files: dict[str, bytes] | None = None) -> tuple[Path, dict[str, bytes]]:
    root = tmp_path / "bucket"
    root.mkdir(exist_ok=True)
    files = files or {"model-00001.safetensors": seeded_bytes(3 << 20, "model-00001"), "model-00002.safetensors": seeded_bytes(1 << 20, "model-00002"), "sub/config.json": b"{}", "tokenizer.json": seeded_bytes(1000, "tokenizer")}
    manifest = Manifest("m/x", "0" * 40, tuple(ManifestEntry(p, len(c), hashlib.sha256(c).hexdigest()) for p, c in files.items()))
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content if path != corrupt else corrupted(content))
    (root / "SHA256SUMS").write_text(manifest.sha256sums())
    # the sync delivers the small files first and the biggest last, as a listing in key order might
    (root / ".order").write_text("\n".join(["SHA256SUMS", "sub/config.json", "tokenizer.json", "model-00002.safetensors", "model-00001.safetensors"]))
    return root, files


def run(tmp_path: Path, root: Path, **fake) -> subprocess.CompletedProcess:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "aws").write_text(FAKE_AWS)
    (bindir / "aws").chmod(0o755)
    env = node_sync_env(weights_s3_uri="s3://bucket/prefix/", weights_dir=str(tmp_path / "models"), sha256_manifest="SHA256SUMS", instance_type="p6-b300.48xlarge", cpus=4)
    # VERIFY_POLL_S: the verify workers look for landed files every 50 ms instead of 1 s, so a sync of the small bucket takes a fraction of a second
    env.update({"PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_BUCKET": str(root), "FAKE_LOG": str(tmp_path / "aws.log"), "TMPDIR": str(tmp_path), "VERIFY_POLL_S": "0.05", **{k: str(v) for k, v in fake.items()}})
    return subprocess.run(["sh", "-c", node_sync.NODE_SYNC_SCRIPT], env=env, capture_output=True, text=True, timeout=120)


def test_sync_sets_the_crt_target_and_verifies_every_file(tmp_path):
    root, files = bucket(tmp_path)
    proc = run(tmp_path, root)
    assert proc.returncode == 0, proc.stderr
    log = (tmp_path / "aws.log").read_text()
    assert "configure set default.s3.preferred_transfer_client crt" in log
    assert f"configure set default.s3.target_bandwidth {350 * 10**9 // 8}" in log
    assert sorted(line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("verified ")) == sorted(files)
    assert "synced and verified 4 files" in proc.stdout and "(openssl, 2 workers" in proc.stdout
    for path, content in files.items():
        assert (tmp_path / "models" / path).read_bytes() == content


def test_verification_overlaps_the_transfer(tmp_path):
    root, _ = bucket(tmp_path)
    proc = run(tmp_path, root, FAKE_DELAY="1.5")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # small files are hashed while the big ones are still on their way
    assert lines.index("verified tokenizer.json") < len([line for line in lines if line.startswith("verified ")]) - 1
    log = (tmp_path / "aws.log").read_text().splitlines()
    assert log[-1] == "synced model-00001.safetensors"


def test_a_corrupt_file_fails_the_container_naming_it(tmp_path):
    root, _ = bucket(tmp_path, corrupt="model-00002.safetensors")
    proc = run(tmp_path, root)
    assert proc.returncode == 1
    assert "MISMATCH model-00002.safetensors" in proc.stderr and "weights do not match SHA256SUMS: model-00002.safetensors" in proc.stderr
    assert not (tmp_path / "models/.kimi-k3-verified").exists()


def test_a_file_the_sync_never_delivers_fails_the_container(tmp_path):
    root, _ = bucket(tmp_path)
    proc = run(tmp_path, root, FAKE_SKIP="tokenizer.json")
    assert proc.returncode == 1 and "MISSING tokenizer.json after the sync" in proc.stderr


def test_a_failed_sync_fails_the_container(tmp_path):
    root, _ = bucket(tmp_path)
    proc = run(tmp_path, root, FAKE_SYNC_RC="1")
    assert proc.returncode == 1 and "aws s3 sync s3://bucket/prefix/ failed" in proc.stderr


def test_a_restarted_container_on_verified_weights_skips_sync_and_hashing(tmp_path):
    root, _ = bucket(tmp_path)
    assert run(tmp_path, root).returncode == 0
    (tmp_path / "aws.log").unlink()
    proc = run(tmp_path, root)
    assert proc.returncode == 0 and "already synced and verified on this node" in proc.stdout
    assert "s3 sync" not in (tmp_path / "aws.log").read_text()


def test_files_already_on_disk_are_hashed_and_a_stale_one_is_caught(tmp_path):
    root, files = bucket(tmp_path)
    models = tmp_path / "models"
    models.mkdir()
    (models / "tokenizer.json").write_bytes(b"stale")  # e.g. from an older sync; the fake sync replaces it
    proc = run(tmp_path, root)
    assert proc.returncode == 0, proc.stderr  # hashed after the sync replaced it, not before
    assert (models / "tokenizer.json").read_bytes() == files["tokenizer.json"]


def test_sha256sum_is_the_fallback_hasher(tmp_path):
    root, _ = bucket(tmp_path)
    proc = run(tmp_path, root, VERIFY_HASHER="sha256sum")
    assert proc.returncode == 0 and "(sha256sum, 2 workers" in proc.stdout


def test_the_env_comes_from_the_catalog_and_the_cpu_share():
    assert target_bandwidth_bytes_per_s("p6-b300.48xlarge") == 43_750_000_000
    assert target_bandwidth_bytes_per_s("p5en.48xlarge") == 12_500_000_000
    assert verify_workers(184) == 64 and verify_workers(16) == 8 and verify_workers(1) == 1
    with pytest.raises(UserError, match="no S3 target bandwidth for 'g5.xlarge'"):
        target_bandwidth_bytes_per_s("g5.xlarge")
    with pytest.raises(UserError, match="hasher 'md5'"):
        node_sync_env(weights_s3_uri="s3://b/p/", weights_dir="/m", sha256_manifest="S", instance_type="p6-b300.48xlarge", cpus=8, hasher="md5")


def test_line_rate_versus_the_crt_fallback_for_the_whole_checkpoint():
    size = catalog.KIMI_K3.weights_gb * 1e9
    assert round(crt_fallback_minutes(size), 1) == 20.8  # 1,560.9 GB at the 10 Gb/s fallback
    sync = next(p for p in estimate.estimate_case(estimate.StartupInputs(), "cold").phases if p.name.startswith("weights sync"))
    assert sync.minutes < crt_fallback_minutes(size) / 7  # the estimate's home of the line rate: 10 GB/s measured upstream


# --- the verified marker's skip path: what a restarted container finds on the node ------------------------------------

MARKER = ".kimi-k3-verified"


class SetupFailed(RuntimeError):
    """The first, complete sync of a marker scenario did not leave a marker: not the assertion the scenario makes."""


def synced_node(tmp_path: Path) -> tuple[Path, dict[str, bytes], Path]:
    """A bucket, and a node on which a complete sync left every file and the verified marker; the fake aws's log emptied."""
    root, files = bucket(tmp_path)
    first = run(tmp_path, root)
    models = tmp_path / "models"
    if first.returncode != 0 or not (models / MARKER).is_file():
        raise SetupFailed(first.stderr)
    (tmp_path / "aws.log").unlink()
    return root, files, models


def assert_synced_again(tmp_path: Path, proc: subprocess.CompletedProcess, files: dict[str, bytes], reason: str) -> None:
    """The rerun did not skip: it says why, ran the sync, hashed, and left every file whole and a marker that holds again."""
    assert proc.returncode == 0, proc.stderr
    assert "already synced and verified" not in proc.stdout, proc.stdout
    assert reason in proc.stdout, proc.stdout
    assert "s3 sync" in (tmp_path / "aws.log").read_text()
    assert sorted(line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("verified ")) == sorted(files)
    for path, content in files.items():
        assert (tmp_path / "models" / path).read_bytes() == content, path
    recorded = (tmp_path / "models" / MARKER).read_text().splitlines()[1:]
    assert sorted(recorded) == sorted(f"{len(content)} {path}" for path, content in files.items())


def file_deleted(tmp_path: Path) -> None:
    root, files, models = synced_node(tmp_path)
    (models / "tokenizer.json").unlink()
    assert_synced_again(tmp_path, run(tmp_path, root), files, "tokenizer.json is missing on this node: syncing")


def shard_truncated(tmp_path: Path) -> None:
    root, files, models = synced_node(tmp_path)
    shard = models / "model-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:4096])
    assert_synced_again(tmp_path, run(tmp_path, root), files, "model-00002.safetensors is not the size the marker recorded (1048576): syncing")


def file_replaced_by_another_size(tmp_path: Path) -> None:
    root, files, models = synced_node(tmp_path)
    (models / "tokenizer.json").write_bytes(seeded_bytes(1500, "other tokenizer"))
    assert_synced_again(tmp_path, run(tmp_path, root), files, "tokenizer.json is not the size the marker recorded (1000): syncing")


def bucket_holds_a_new_manifest(tmp_path: Path) -> None:
    """The prefix now holds another revision of one file (a new manifest): the node's marker is for the old one."""
    root, files, _ = synced_node(tmp_path)
    files = {**files, "sub/config.json": b"[]"}  # same size: only the manifest's digest tells them apart
    bucket(tmp_path, files=files)
    assert_synced_again(tmp_path, run(tmp_path, root), files, "is for another manifest: syncing")


def marker_of_the_older_format(tmp_path: Path) -> None:
    """A marker written before sizes were recorded (the manifest's digest only): synced and hashed once more."""
    root, files, models = synced_node(tmp_path)
    marker = models / MARKER
    marker.write_text(marker.read_text().splitlines()[0] + "\n")
    assert_synced_again(tmp_path, run(tmp_path, root), files, "model-00001.safetensors is not the size the marker recorded (): syncing")


def extra_file_is_ignored(tmp_path: Path) -> None:
    root, _, models = synced_node(tmp_path)
    (models / "notes.txt").write_text("left by someone")
    proc = run(tmp_path, root)
    assert proc.returncode == 0 and "already synced and verified on this node (4 files present at their sizes" in proc.stdout, proc.stdout
    assert "s3 sync" not in (tmp_path / "aws.log").read_text()
    assert (models / "notes.txt").read_text() == "left by someone"


MARKER_SCENARIOS = {f.__name__: f for f in (file_deleted, shard_truncated, file_replaced_by_another_size, bucket_holds_a_new_manifest, marker_of_the_older_format, extra_file_is_ignored)}


@pytest.mark.parametrize("scenario", MARKER_SCENARIOS)
def test_a_rerun_skips_only_when_every_manifest_entry_is_present_at_its_size(scenario, tmp_path):
    MARKER_SCENARIOS[scenario](tmp_path)


SKIP_CHECKS = {
    "presence": '[ -f "$f" ] || { echo "weights marker',
    "size": '[ "$was" = "$(size_of "$f") $f" ]',
    "manifest match": '[ "$head" = "$want" ]',
}
"""Each check of the skip path (``marker_holds`` in the script), by a fragment of its one line."""

BITES = {
    ("presence", "size"): ("file_deleted", "shard_truncated", "file_replaced_by_another_size", "marker_of_the_older_format"),
    ("size",): ("shard_truncated", "file_replaced_by_another_size", "marker_of_the_older_format"),
    ("presence",): ("file_deleted",),  # the size check alone still fetches it again, but no longer says it is missing
    ("manifest match",): ("bucket_holds_a_new_manifest",),
}
"""Which scenarios must fail when the skip path loses those checks: each check is bitten by at least one scenario."""


def without_checks(script: str, *checks: str) -> str:
    """``script`` with the lines of ``checks`` (keys of :data:`SKIP_CHECKS`) removed; each fragment is on exactly one line."""
    lines = script.split("\n")
    for check in checks:
        hits = [i for i, line in enumerate(lines) if SKIP_CHECKS[check] in line]
        assert len(hits) == 1, (check, hits)
        del lines[hits[0]]
    return "\n".join(lines)


def test_every_skip_check_is_bitten_by_a_scenario():
    assert {check for checks in BITES for check in checks} == set(SKIP_CHECKS)
    assert {s for scenarios in BITES.values() for s in scenarios} | {"extra_file_is_ignored"} == set(MARKER_SCENARIOS)


@pytest.mark.parametrize(("checks", "scenario"), [(checks, s) for checks, scenarios in BITES.items() for s in scenarios], ids=lambda v: "+".join(v) if isinstance(v, tuple) else v)
def test_the_scenario_fails_when_the_skip_path_loses_the_check(checks, scenario, tmp_path, monkeypatch):
    """Mutation check: with the check patched out of the script, the scenario's assertions fail (the sync is skipped, or
    skipped for another reason); with it, they pass (the test above)."""
    monkeypatch.setattr(node_sync, "NODE_SYNC_SCRIPT", without_checks(node_sync.NODE_SYNC_SCRIPT, *checks))
    with pytest.raises(AssertionError):
        MARKER_SCENARIOS[scenario](tmp_path)
