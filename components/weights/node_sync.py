"""The node-side sync: S3 prefix -> the node's NVMe at line rate, verified while it lands.

Tool choice (details and sources in docs/weights.md): the AWS CLI v2's CRT transfer client,
already in the pinned init image and Pod Identity capable, with ``target_bandwidth`` set per
instance type from the catalog — without it the CRT client targets 10 Gb/s on an instance its
bundled aws-c-s3 does not list (p6-b300 before aws-c-s3 v0.12.5; the pinned CLI 2.31.23
bundles awscrt 0.27.6), ~21 min for 1.56 TB instead of ~3.

Verification overlaps the transfer: the CRT client writes each file to a temporary name and
renames it when complete (aws/aws-cli ``awscli/s3transfer/crt.py``, ``RenameTempFileHandler``),
so a file under its final name is whole. ``VERIFY_WORKERS`` workers walk the sha256 manifest
(written largest first by the stager) and *claim* each file that is present with an atomic
``mkdir``, hashing it from the page cache while the sync goes on: dynamic longest-job-first
scheduling, not a static ``split -n l/N`` by line count (which gives one worker all the big
shards). Files that were already on disk before the sync started (a node-local cache) are
hashed after it ends, since the sync may still replace them. The hasher is ``openssl dgst
-sha256`` when present (3-4x coreutils ``sha256sum`` per core, tools/bench_verify.py), else
``sha256sum``. A marker keyed to the manifest's own hash lets a restarted container or a pod
re-created on the same node skip both sync and hashing: written (atomically) after every file
matched, it records the manifest's digest and each entry's size as verified, and the skip path
(``marker_holds``) requires the same manifest and every entry present at its recorded size, one
``stat`` per file; anything else (a file deleted, truncated or replaced by one of another size, a
marker of another manifest or of an older format) removes the marker and runs the sync, which
fetches what differs and hashes every file again. Files the manifest does not list are ignored.

Progress: every ``PROGRESS_INTERVAL_S`` seconds the script prints one line of
:mod:`kimi_k3.weights.progress` (bytes on the node of the prefix's total, from
``aws s3 ls --summarize``; rate; files verified), and a ``done`` line at the end; ``kimi-k3
status`` reads the newest one from the container's log tail.

Why not S3's checksums instead of a second read: the CRT client validates a multipart
object's full-object CRC only from aws-c-s3 v0.13.5 (2026-08, "Combine per-part CRCs for
whole-object download checksum validation", #663); before that only single-part objects. No
pinned CLI bundles it yet, so the sha256 pass stays — overlapped, it costs CPU, not time.
"""

from __future__ import annotations

from kimi_k3.core import catalog
from kimi_k3.errors import UserError
from kimi_k3.weights.progress import DEFAULT_INTERVAL_S, SHELL_FUNCTIONS

NODE_SYNC_SCRIPT = r"""set -eu
: "${WEIGHTS_S3_URI:?}" "${WEIGHTS_DIR:?}" "${SHA256_MANIFEST:?}" "${TARGET_BANDWIDTH:?}" "${VERIFY_WORKERS:?}"
mkdir -p "$WEIGHTS_DIR"
cd "$WEIGHTS_DIR"
marker=.kimi-k3-verified
digest() { if [ "$HASHER" = openssl ]; then set -- $(openssl dgst -sha256 -r "$1"); else set -- $(sha256sum "$1"); fi; printf '%s\n' "$1"; }
HASHER=sha256sum
if [ "${VERIFY_HASHER:-auto}" != sha256sum ] && command -v openssl >/dev/null 2>&1; then HASHER=openssl; fi
""" + SHELL_FUNCTIONS + r"""landed() { set -- $(du -sk . 2>/dev/null || echo 0); echo $(( ${1:-0} * 1024 )); }
aws configure set default.s3.preferred_transfer_client crt
streams=${SYNC_STREAMS:-1}
aws configure set default.s3.target_bandwidth "$(( TARGET_BANDWIDTH / streams ))"
aws s3 cp "${WEIGHTS_S3_URI}${SHA256_MANIFEST}" "$SHA256_MANIFEST.new" --only-show-errors
mv "$SHA256_MANIFEST.new" "$SHA256_MANIFEST"
want=$(digest "$SHA256_MANIFEST")
files=$(grep -c . "$SHA256_MANIFEST" || true)
total=0
listing=$(aws s3 ls "$WEIGHTS_S3_URI" --recursive --summarize 2>/dev/null || true)
case $listing in *"Total Size: "*) total=${listing##*Total Size: }; total=${total%%[!0-9]*}; total=${total:-0} ;; esac
size_of() { stat -c %s -- "$1" 2>/dev/null || wc -c < "$1"; }
sizes() { while IFS= read -r line; do f=${line#* }; f=${f#[ *]}; printf '%s %s\n' "$(size_of "$f")" "$f"; done < "$SHA256_MANIFEST"; }
marker_holds() {
  [ -f "$marker" ] || return 1
  {
    IFS= read -r head <&3 || head=
    [ "$head" = "$want" ] || { echo "weights marker $marker is for another manifest: syncing"; return 1; }
    while IFS= read -r line; do
      f=${line#* }; f=${f#[ *]}
      IFS= read -r was <&3 || was=
      [ -f "$f" ] || { echo "weights marker $marker: $f is missing on this node: syncing"; return 1; }
      [ "$was" = "$(size_of "$f") $f" ] || { echo "weights marker $marker: $f is not the size the marker recorded (${was%% *}): syncing"; return 1; }
    done < "$SHA256_MANIFEST"
  } 3< "$marker"
}
decided() { [ -z "${SYNC_DECIDED:-}" ] || : > "$SYNC_DECIDED"; }
if marker_holds; then
  decided; kimi_progress done "$(landed)" "$total" 0 "$files" "$files"; echo "weights already synced and verified on this node ($files files present at their sizes, marker $marker)"; exit 0
fi
rm -f "$marker"
[ -z "${SHARD_MARKERS:-}" ] || { rm -rf "$SHARD_MARKERS"; mkdir -p "$SHARD_MARKERS"; }
decided
work=$(mktemp -d "${TMPDIR:-/tmp}/weights-sync.XXXXXX")
reporter_pid=
trap 'kill "$reporter_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
while IFS= read -r line; do f=${line#* }; f=${f#[ *]}; [ -f "$f" ] && printf '%s\n' "$f" >> "$work/preexisting"; done < "$SHA256_MANIFEST"
touch "$work/preexisting"
start=$(date +%s)
start_bytes=$(landed)
sync_part() {
  [ "$streams" -gt 1 ] || { aws s3 sync "$WEIGHTS_S3_URI" . --no-progress --only-show-errors; return; }
  part=$1; n=0; set --
  while IFS= read -r line; do
    n=$((n + 1)); [ $(( (n - 1) % streams )) -eq "$part" ] || continue
    f=${line#* }; f=${f#[ *]}
    case $f in *[][*?]*) echo "weights file name $f has a pattern character: the partitioned sync cannot name it in --include" >&2; return 1 ;; esac
    set -- "$@" --include "$f"
  done < "$SHA256_MANIFEST"
  [ "$#" -eq 0 ] || aws s3 sync "$WEIGHTS_S3_URI" . --no-progress --only-show-errors --exclude "*" "$@"
}
(
  rc=0; parts=; p=0
  while [ "$p" -lt "$streams" ]; do sync_part "$p" & parts="$parts $!"; p=$((p + 1)); done
  for part_pid in $parts; do wait "$part_pid" || rc=1; done
  echo "$rc" > "$work/sync.rc"
) &
sync_pid=$!
verify_worker() {
  while :; do
    n=0; progress=0; pending=0
    while IFS= read -r line; do
      n=$((n + 1))
      [ -d "$work/claim.$n" ] && continue
      expected=${line%% *}; f=${line#* }; f=${f#[ *]}
      if [ ! -f "$f" ] || { [ ! -f "$work/sync.rc" ] && grep -Fxq -- "$f" "$work/preexisting"; }; then pending=1; continue; fi
      mkdir "$work/claim.$n" 2>/dev/null || continue
      progress=1
      got=$(digest "$f")
      if [ "$got" = "$expected" ]; then echo "verified $f"; echo "$f" >> "$work/verified"; [ -z "${SHARD_MARKERS:-}" ] || printf '%s\n' "$f" > "$SHARD_MARKERS/$n"; else echo "MISMATCH $f: sha256 $got, manifest $expected" >&2; echo "$f" >> "$work/failed"; fi
    done < "$SHA256_MANIFEST"
    [ "$pending" -eq 0 ] && return 0
    if [ -f "$work/sync.rc" ] && [ "$progress" -eq 0 ]; then
      n=0
      while IFS= read -r line; do n=$((n + 1)); f=${line#* }; f=${f#[ *]}; [ -d "$work/claim.$n" ] || [ -f "$f" ] || { mkdir "$work/claim.$n" 2>/dev/null && echo "MISSING $f after the sync" >&2 && echo "$f" >> "$work/failed"; }; done < "$SHA256_MANIFEST"
      return 0
    fi
    [ "$progress" -eq 1 ] || sleep "${VERIFY_POLL_S:-1}"
  done
}
reporter() {
  nap=; trap 'kill "$nap" 2>/dev/null; exit 0' TERM
  last_t=$start; last_b=$start_bytes
  kimi_progress weights "$last_b" "$total" 0 0 "$files"
  while :; do
    sleep "${PROGRESS_INTERVAL_S:-15}" & nap=$!; wait "$nap" || true
    t=$(date +%s); b=$(landed); rate=0
    [ "$t" -gt "$last_t" ] && rate=$(( (b - last_b) / (t - last_t) ))
    [ "$rate" -ge 0 ] || rate=0
    step=weights; [ -f "$work/sync.rc" ] && step=verify
    verified=0; [ -f "$work/verified" ] && verified=$(grep -c . "$work/verified" || true)
    kimi_progress "$step" "$b" "$total" "$rate" "$verified" "$files"
    last_t=$t; last_b=$b
  done
}
reporter & reporter_pid=$!
pids=""
i=0
while [ "$i" -lt "$VERIFY_WORKERS" ]; do verify_worker & pids="$pids $!"; i=$((i + 1)); done
wait "$sync_pid" || true
for pid in $pids; do wait "$pid"; done
kill "$reporter_pid" 2>/dev/null || true; wait "$reporter_pid" 2>/dev/null || true; reporter_pid=
if [ "$(cat "$work/sync.rc")" != 0 ]; then echo "aws s3 sync $WEIGHTS_S3_URI failed" >&2; exit 1; fi
if [ -s "$work/failed" ]; then echo "weights do not match $SHA256_MANIFEST: $(sort -u "$work/failed" | tr '\n' ' ')" >&2; exit 1; fi
{ printf '%s\n' "$want"; sizes; } > "$marker.new"
mv "$marker.new" "$marker"
elapsed=$(( $(date +%s) - start )); end_bytes=$(landed); rate=0
[ "$elapsed" -gt 0 ] && rate=$(( (end_bytes - start_bytes) / elapsed ))
kimi_progress done "$end_bytes" "$total" "$rate" "$files" "$files"
echo "synced and verified $files files from $WEIGHTS_S3_URI in $(( $(date +%s) - start )) s ($HASHER, $VERIFY_WORKERS workers, target $TARGET_BANDWIDTH B/s over $streams streams)"
"""
"""Shell of the sync init container (POSIX sh; the AWS CLI image has ``aws``, coreutils, ``grep``)."""


SIDECAR_KEEPALIVE = r"""
( %s ) || exit $?
echo "weights ready; the sync sidecar stays up (a native sidecar that exits is restarted)"
[ "${SYNC_ONESHOT:-0}" = 1 ] && exit 0
while :; do sleep 3600; done
"""
"""Wraps the sync when it runs as a native sidecar (``restartPolicy: Always``): it must not exit once done (Kubernetes docs,
"Sidecar Containers": a sidecar that exits is restarted), and a failed sync exits non-zero so the kubelet restarts it.
``SYNC_ONESHOT=1`` exits once done instead (the script run outside a pod: the tests, a debug shell)."""
SHARD_MARKERS = ".kimi-k3-shards"
"""Directory (in the weights directory) where the sync writes one file per verified shard, named by its manifest line: what a
loader reading shards in manifest order waits for (:mod:`kimi_k3.weights.pipelined_load`)."""
WEIGHTS_MARKER = ".kimi-k3-verified"
"""The whole-manifest marker the sync writes last (``marker`` in :data:`NODE_SYNC_SCRIPT`)."""


def sidecar_script(script: str) -> str:
    """``script`` (the sync) run as a native sidecar: it stays up once done, a failure exits (:data:`SIDECAR_KEEPALIVE`)."""
    return SIDECAR_KEEPALIVE % script


HASHERS = ("auto", "openssl", "sha256sum")
"""Accepted ``VERIFY_HASHER`` values: ``auto`` takes ``openssl`` when the image has it, else ``sha256sum``."""


def target_bandwidth_bytes_per_s(instance_type: str) -> int:
    """``default.s3.target_bandwidth`` for ``instance_type``: the catalog's Gbps as whole bytes per second.

    An integer is bytes per second in the AWS CLI (``awscli/topics/s3-config.rst``); the
    ``Gb/s`` suffix would be read in powers of two, so the integer form says exactly what we mean.
    """
    facts = catalog.STARTUP_FACTS.get(instance_type)
    if facts is None:
        raise UserError(f"node sync: no S3 target bandwidth for {instance_type!r} in the catalog; known: {', '.join(catalog.STARTUP_FACTS)}")
    return int(facts.s3_target_gbps.value * 1e9 / 8)


SYNC_STREAMS = 4
"""Concurrent ``aws s3 sync`` processes of the node sync, each over a disjoint partition of the manifest (line *n* goes to
stream (*n* - 1) mod 4: the manifest is written largest first, so each stream gets about a quarter of the bytes, and the
first shards in manifest order, which the pipelined loader reads first, arrive side by side), each with its own CRT client
targeting a quarter of the node's ``target_bandwidth``. The AWS CLI's S3 config topic (awscli/topics/s3-config.rst, read):
``auto`` resolves to ``crt`` only when "there are no other running processes of the AWS CLI using the CRT S3 transfer client.
To force multiple concurrently running processes of the AWS CLI to use the CRT S3 transfer client, set the
``preferred_transfer_client`` configuration variable to ``crt``", which the script does; with ``crt`` the CLI ignores
``max_concurrent_requests``, so processes are how the listing, comparison and file handling of the CLI's Python side run in
parallel. What several streams reach on a p6-b300 is not measured: the estimate keeps ``s3_node_rate`` at the middle of its
cited range."""


def sync_streams(streams: int) -> int:
    """``SYNC_STREAMS``: 1 (one sync of the whole prefix) to 16 (the manifest's small files and 96 shards spread over at most 16)."""
    if isinstance(streams, bool) or not isinstance(streams, int) or not 1 <= streams <= 16:
        raise UserError(f"node sync: streams {streams!r} is not accepted; accepted: 1 to 16")
    return streams


def verify_workers(cpus: int) -> int:
    """Hashing workers for an init container with ``cpus`` CPUs: half of them (the CRT client needs the rest), 1 to 64."""
    return max(1, min(64, cpus // 2))


def node_sync_env(*, weights_s3_uri: str, weights_dir: str, sha256_manifest: str, instance_type: str, cpus: int, hasher: str = "auto",
                  streams: int = 1) -> dict[str, str]:
    """Environment of the sync init container (with :data:`NODE_SYNC_SCRIPT` as ``sh -c``); ``streams``: :data:`SYNC_STREAMS`."""
    if hasher not in HASHERS:
        raise UserError(f"node sync: hasher {hasher!r} is not accepted; accepted: {', '.join(HASHERS)}")
    if not weights_s3_uri.endswith("/"):
        raise UserError(f"node sync: weights_s3_uri {weights_s3_uri!r} must end with '/'")
    return {
        "WEIGHTS_S3_URI": weights_s3_uri,
        "WEIGHTS_DIR": weights_dir,
        "SHA256_MANIFEST": sha256_manifest,
        "TARGET_BANDWIDTH": str(target_bandwidth_bytes_per_s(instance_type)),
        "VERIFY_WORKERS": str(verify_workers(cpus)),
        "VERIFY_HASHER": hasher,
        "PROGRESS_INTERVAL_S": str(DEFAULT_INTERVAL_S),
        "SYNC_STREAMS": str(sync_streams(streams)),
    }


def init_cpus(instance: catalog.InstanceType, reserved_cpu: int) -> int:
    """CPUs the sync init container may take: the node minus the system's share.

    Init containers run before the app containers, and a pod's effective request is the larger
    of the biggest init container and the sum of the app containers (Kubernetes docs,
    "Init Containers", resource sharing), so this costs the server nothing.
    """
    return instance.vcpus - reserved_cpu


def crt_fallback_minutes(bytes_total: float, efficiency: float = 1.0) -> float:
    """The same transfer at the CRT client's 10 Gb/s fallback."""
    return bytes_total / (catalog.CRT_FALLBACK_GBPS.value * 1e9 / 8 * efficiency) / 60


__all__ = [
    "HASHERS", "NODE_SYNC_SCRIPT", "SHARD_MARKERS", "SIDECAR_KEEPALIVE", "SYNC_STREAMS", "WEIGHTS_MARKER", "crt_fallback_minutes", "init_cpus", "node_sync_env",
    "sidecar_script", "sync_streams", "target_bandwidth_bytes_per_s", "verify_workers",
]
