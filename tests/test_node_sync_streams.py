"""Issue 34 point 2: the node sync in several streams, each ``aws s3 sync`` over a disjoint partition of the manifest, run for real
(POSIX sh) against a fake ``aws`` that honours ``--exclude``/``--include`` as the AWS CLI does for a plain file name."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from kimi_k3.errors import UserError
from kimi_k3.weights import node_sync, serving_pod
from kimi_k3.weights.manifest import Manifest, ManifestEntry
from tests.weights_builders import seeded_bytes

FAKE_AWS = r"""#!/bin/sh
# fake aws: records each call; s3 sync copies the files its --include names (after --exclude "*"), or all without filters
echo "$$ $*" >> "$FAKE_LOG"
case "$1 $2" in
  "configure set") echo "$3=$4" >> "$FAKE_CONFIG"; exit 0 ;;
  "s3 cp") src=${3#s3://bucket/prefix/}; cp "$FAKE_BUCKET/$src" "$4"; exit 0 ;;
  "s3 sync")
    shift 4; want=; all=1
    while [ "$#" -gt 0 ]; do
      case $1 in
        --exclude) [ "$2" = "*" ] && all=0; shift 2 ;;
        --include) want="$want $2"; shift 2 ;;
        *) shift ;;
      esac
    done
    [ "$all" = 1 ] && want=$(cd "$FAKE_BUCKET" && ls)
    for f in $want; do
      [ -n "${FAKE_FAIL:-}" ] && [ "$f" = "$FAKE_FAIL" ] && exit 1
      cp "$FAKE_BUCKET/$f" "$f.tmp$$"; mv "$f.tmp$$" "$f"
    done
    exit 0 ;;
esac
echo "fake aws: unexpected $*" >&2; exit 2
"""


def run(tmp_path: Path, streams: int, n_files: int = 10, **fake: str) -> tuple[subprocess.CompletedProcess, dict[str, bytes]]:
    files = {f"model-{i:05d}.safetensors": seeded_bytes(4096 + i, f"m{i}") for i in range(1, n_files + 1)}
    root = tmp_path / "bucket"
    root.mkdir()
    for name, content in files.items():
        (root / name).write_bytes(content)
    manifest = Manifest("m/x", "0" * 40, tuple(ManifestEntry(p, len(c), hashlib.sha256(c).hexdigest()) for p, c in files.items()))
    (root / "SHA256SUMS").write_text(manifest.sha256sums())
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "aws").write_text(FAKE_AWS)
    (bindir / "aws").chmod(0o755)
    env = node_sync.node_sync_env(weights_s3_uri="s3://bucket/prefix/", weights_dir=str(tmp_path / "models"), sha256_manifest="SHA256SUMS",
                                  instance_type="p6-b300.48xlarge", cpus=4, streams=streams)
    env.update({"PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_BUCKET": str(root), "FAKE_LOG": str(tmp_path / "aws.log"), "FAKE_CONFIG": str(tmp_path / "config"),
                "TMPDIR": str(tmp_path), "VERIFY_POLL_S": "0.02", **fake})
    return subprocess.run(["sh", "-c", node_sync.NODE_SYNC_SCRIPT], env=env, capture_output=True, text=True, timeout=120), files


def test_four_streams_sync_disjoint_partitions_that_cover_the_manifest_each_at_a_quarter_of_the_target(tmp_path):
    proc, files = run(tmp_path, streams=4)
    assert proc.returncode == 0, proc.stderr
    config = (tmp_path / "config").read_text().splitlines()
    assert "default.s3.preferred_transfer_client=crt" in config  # forced: auto picks crt for one CLI process at a time only
    target = node_sync.target_bandwidth_bytes_per_s("p6-b300.48xlarge")
    assert f"default.s3.target_bandwidth={target // 4}" in config  # the node's target shared by the four CRT clients
    syncs = [line.split() for line in (tmp_path / "aws.log").read_text().splitlines() if line.split()[1:3] == ["s3", "sync"]]
    assert len(syncs) == 4 and len({s[0] for s in syncs}) == 4  # four processes
    parts = [[s[i + 1] for i, a in enumerate(s) if a == "--include"] for s in syncs]
    assert all(s[s.index("--exclude") + 1] == "*" for s in syncs)
    names = [line.split(" ", 1)[1].lstrip(" *") for line in (tmp_path / "bucket" / "SHA256SUMS").read_text().splitlines()]  # largest first
    assert sorted(name for part in parts for name in part) == sorted(names)  # together every manifest entry, each exactly once
    assert sorted(parts, key=lambda p: names.index(p[0])) == [names[k::4] for k in range(4)]  # line n to stream (n - 1) mod 4
    for name, content in files.items():
        assert (tmp_path / "models" / name).read_bytes() == content
    assert "over 4 streams" in proc.stdout


def test_one_failed_stream_fails_the_sync(tmp_path):
    proc, _ = run(tmp_path, streams=4, FAKE_FAIL="model-00003.safetensors")
    assert proc.returncode == 1 and "aws s3 sync s3://bucket/prefix/ failed" in proc.stderr


def test_one_stream_is_the_whole_prefix_sync(tmp_path):
    proc, _ = run(tmp_path, streams=1, n_files=3)
    assert proc.returncode == 0, proc.stderr
    (sync,) = [line.split() for line in (tmp_path / "aws.log").read_text().splitlines() if line.split()[1:3] == ["s3", "sync"]]
    assert "--include" not in sync and "--exclude" not in sync


def test_the_serving_pod_renders_the_streams_and_bad_counts_are_refused():
    env = serving_pod.sync_env(startup=serving_pod.ServingStartup(), weights_s3_uri="s3://b/p/", mount_path="/models", revision="r", sha256_manifest="SHA256SUMS",
                               instance_type="p6-b300.48xlarge", cpus=64, region="us-west-2")
    assert env["SYNC_STREAMS"] == str(node_sync.SYNC_STREAMS) == "4"
    for bad in (0, 17, True):
        with pytest.raises(UserError, match=r"node sync: streams .* is not accepted; accepted: 1 to 16"):
            node_sync.sync_streams(bad)
