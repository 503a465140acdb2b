"""The progress format the staging steps print and `kimi-k3 status` reads, and the node sync script emitting it for real."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from kimi_k3.weights import progress
from kimi_k3.weights.node_sync import NODE_SYNC_SCRIPT, node_sync_env
from tests.weights_builders import seeded_bytes

# fake aws: like the CRT client (temp file + rename per file); `s3 ls --summarize` totals the bucket directory.
FAKE_AWS = r"""#!/bin/sh
case "$1 $2" in
  "configure set") exit 0 ;;
  "s3 cp") cp "$FAKE_BUCKET/${3#s3://bucket/prefix/}" "$4"; exit 0 ;;
  "s3 ls")
    [ -n "${FAKE_LS_FAILS:-}" ] && { echo "An error occurred (AccessDenied)" >&2; exit 1; }
    n=0; size=0
    for f in $(cd "$FAKE_BUCKET" && find . -type f ! -name .order | sed 's|^\./||'); do
      s=$(wc -c < "$FAKE_BUCKET/$f"); n=$((n + 1)); size=$((size + s)); echo "2026-12-01 11:00:00 $s $f"
    done
    printf '\nTotal Objects: %s\n   Total Size: %s\n' "$n" "$size"; exit 0 ;;
  "s3 sync")
    for f in $(cat "$FAKE_BUCKET/.order"); do
      mkdir -p "$(dirname "$f")"
      cp "$FAKE_BUCKET/$f" "$f.a1b2c3d4"; sleep "${FAKE_DELAY:-0}"; mv "$f.a1b2c3d4" "$f"
    done
    exit 0 ;;
esac
echo "fake aws: unexpected $*" >&2; exit 2
"""


def make_bucket(tmp_path: Path) -> tuple[Path, int]:
    root = tmp_path / "bucket"
    root.mkdir()
    files = {"model-00001.safetensors": seeded_bytes(3 << 20, "model-00001"), "model-00002.safetensors": seeded_bytes(2 << 20, "model-00002"), "config.json": b"{}"}
    for path, content in files.items():
        (root / path).write_bytes(content)
    (root / "SHA256SUMS").write_text("".join(f"{hashlib.sha256(c).hexdigest()}  {p}\n" for p, c in files.items()))
    (root / ".order").write_text("SHA256SUMS\nconfig.json\nmodel-00002.safetensors\nmodel-00001.safetensors\n")
    total = sum(len(c) for c in files.values()) + (root / "SHA256SUMS").stat().st_size
    return root, total


def run_sync(tmp_path: Path, root: Path, **env_changes: str) -> subprocess.CompletedProcess:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "aws").write_text(FAKE_AWS)
    (bindir / "aws").chmod(0o755)
    env = node_sync_env(weights_s3_uri="s3://bucket/prefix/", weights_dir=str(tmp_path / "models"), sha256_manifest="SHA256SUMS", instance_type="p6-b300.48xlarge", cpus=2)
    env.update({"PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_BUCKET": str(root), "TMPDIR": str(tmp_path), **env_changes})
    return subprocess.run(["sh", "-c", NODE_SYNC_SCRIPT], env=env, capture_output=True, text=True, timeout=120)


def lines_of(proc: subprocess.CompletedProcess) -> list[progress.Progress]:
    return [p for p in (progress.parse_line(line) for line in proc.stdout.splitlines()) if p is not None]


# --------------------------------------------------------------------------- the format


def test_a_line_round_trips_and_other_log_lines_are_not_progress():
    p = progress.Progress("weights", 1_796_125_800, 612_000_000_000, 1_700_000_000_000, 21_300_000_000, 12, 64)
    line = progress.format_line(p)
    assert line.startswith('{"kimi_k3_progress":1,"step":"weights","t":1796125800,')
    assert progress.parse_line(line) == p
    for other in ("verified model-00001.safetensors", "{}", '{"kimi_k3_progress":2,"step":"weights"}', '{"kimi_k3_progress":1,"step":"dancing","t":1}', "{not json kimi_k3_progress"):
        assert progress.parse_line(other) is None


def test_the_newest_line_of_a_tail_wins_and_gives_fraction_and_eta():
    lines = [
        progress.format_line(progress.Progress("weights", 100, 0, 1000, 0, 0, 4)),
        "verified config.json",
        progress.format_line(progress.Progress("weights", 115, 400, 1000, 50, 1, 4)),
        "verified tokenizer.json",
    ]
    newest = progress.last_progress(lines)
    assert newest is not None and newest.t == 115
    assert newest.fraction == 0.4 and newest.eta_s == 12.0 and newest.age_s(130) == 15
    assert progress.Progress("weights", 1, 10, 0, 5, 0, 0).eta_s is None  # no total: no ETA
    assert progress.Progress("verify", 1, 10, 10, 0, 1, 4).eta_s is None
    assert progress.last_progress(["nothing here"]) is None


def test_an_unknown_step_is_refused_when_writing():
    with pytest.raises(ValueError, match="'uploading' is not one of weights, verify, done"):
        progress.format_line(progress.Progress("uploading", 1, 0, 0, 0, 0, 0))


def test_the_shell_function_writes_the_same_format():
    proc = subprocess.run(["sh", "-c", progress.SHELL_FUNCTIONS + "kimi_progress verify 5 10 2 3 4"], capture_output=True, text=True, check=True)
    parsed = progress.parse_line(proc.stdout)
    assert parsed is not None
    assert (parsed.step, parsed.bytes_done, parsed.bytes_total, parsed.rate_bps, parsed.files_verified, parsed.files_total) == ("verify", 5, 10, 2, 3, 4)
    assert abs(parsed.t - int(subprocess.run(["date", "+%s"], capture_output=True, text=True).stdout)) <= 2


# --------------------------------------------------------------------------- the node sync script emits it


def test_the_node_sync_reports_bytes_of_the_total_then_done(tmp_path):
    root, total = make_bucket(tmp_path)
    proc = run_sync(tmp_path, root, PROGRESS_INTERVAL_S="1", FAKE_DELAY="1.2")
    assert proc.returncode == 0, proc.stderr
    reported = lines_of(proc)
    assert len(reported) >= 3, proc.stdout
    first, last = reported[0], reported[-1]
    assert first.step == "weights" and first.bytes_total == total and first.files_total == 3
    assert last.step == "done" and last.files_verified == last.files_total == 3 and last.bytes_done >= total
    assert [p.t for p in reported] == sorted(p.t for p in reported)
    assert [p.bytes_done for p in reported] == sorted(p.bytes_done for p in reported)
    assert any(p.step == "weights" and 0 < p.bytes_done < total and p.rate_bps > 0 for p in reported), reported
    assert "synced and verified 3 files" in proc.stdout


def test_a_node_that_already_holds_the_verified_weights_reports_done_at_once(tmp_path):
    root, total = make_bucket(tmp_path)
    assert run_sync(tmp_path, root).returncode == 0
    proc = run_sync(tmp_path, root)
    assert proc.returncode == 0 and "already synced and verified" in proc.stdout
    (only,) = lines_of(proc)
    assert only.step == "done" and only.files_verified == 3 and only.bytes_total == total


def test_without_a_listing_the_total_is_unknown_and_the_sync_still_succeeds(tmp_path):
    root, _ = make_bucket(tmp_path)
    proc = run_sync(tmp_path, root, FAKE_LS_FAILS="1")
    assert proc.returncode == 0, proc.stderr
    reported = lines_of(proc)
    assert reported and all(p.bytes_total == 0 and p.eta_s is None for p in reported)
    assert reported[-1].step == "done"


def test_the_interval_is_part_of_the_container_env():
    env = node_sync_env(weights_s3_uri="s3://b/p/", weights_dir="/m", sha256_manifest="S", instance_type="p6-b300.48xlarge", cpus=8)
    assert env["PROGRESS_INTERVAL_S"] == str(progress.DEFAULT_INTERVAL_S)
