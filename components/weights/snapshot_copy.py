"""The engine snapshot's S3 copy: uploaded once sealed, fetched on a new node (issue 34; docs/weights.md, "The snapshot's S3 copy").

Who moves the bytes: the **sync sidecar** (``weightsSyncSidecar``), the pod's one long-lived AWS CLI container. It already has the
bucket's role (the pod's Pod Identity ServiceAccount: every container of the pod gets its credentials), the CRT transfer client
configured at the node's target bandwidth and several streams (:mod:`kimi_k3.weights.node_sync`), and the node-local weights
volume's root mounted, of which the snapshot root is a directory (``/weights/.engine-snapshots``). The snapshot agent keeps no
API access and its deny-all NetworkPolicy: it never talks to S3.

The pods ask for a copy with files under ``<snapshot root>/.s3/`` (:data:`QUEUE`): ``upload.<key digest>`` (the warm-up
sidecar, after ``SHA256SUMS`` then ``KEY`` are sealed) or ``fetch.<key digest>`` (the engine's wrapper, when the node has no
snapshot of its key), each written atomically; :data:`COPIER_FUNCTIONS`'s loop answers with ``<request>.ok`` or
``<request>.fail`` (one line: what happened) and removes the request. In S3, a key's copy is ``<copy prefix><key digest>/``:

* **upload**: nothing when ``KEY`` is already there; else ``CLAIM`` with ``If-None-Match: *`` (one uploader per key: a second
  gets 412), every file but ``KEY`` (``SHA256SUMS`` among them) over :data:`~kimi_k3.weights.node_sync.SYNC_STREAMS` streams, then
  ``KEY`` last: a copy without ``KEY`` is never taken, so a half-uploaded copy is a miss, not a partial restore;
* **claim** (the dump's election, :func:`kimi_k3.weights.snapshot_pod.elect_dump`): before a new key is dumped, the same
  ``CLAIM`` with ``If-None-Match: *``; the answer's first word is :data:`~kimi_k3.weights.engine_snapshot.CLAIM_WON` (written, or held by this node since an earlier
  start: ``held.<key digest>`` on the snapshot root), :data:`~kimi_k3.weights.engine_snapshot.CLAIM_HELD` (412: another replica holds it), :data:`~kimi_k3.weights.engine_snapshot.CLAIM_COPIED`
  (``KEY`` already in S3) or :data:`~kimi_k3.weights.engine_snapshot.CLAIM_ERROR`. The winner's upload writes no second ``CLAIM``; **release** deletes a claim won
  and given up (no dump), so the next start of the key tries again;
* **fetch**: ``KEY`` first, refused unless its sha256 is the digest asked for (the digest is the sha256 of the key's JSON:
  :meth:`~kimi_k3.weights.engine_snapshot.SnapshotKey.digest`); then ``SHA256SUMS``, then the files it lists over the streams,
  ``KEY`` moved into place last. The wrapper then checks the copy exactly as a local snapshot
  (:func:`kimi_k3.weights.snapshot_pod.check`: :func:`~kimi_k3.weights.engine_snapshot.restore_decision` field by field, every
  file's sha256 against ``SHA256SUMS``); any miss is a cold start, named in its log.

POSIX sh and the AWS CLI only (the sync image has no Python).
"""

from __future__ import annotations

from kimi_k3.weights import engine_snapshot
from kimi_k3.weights.snapshot_agent import SNAPSHOT_SUBPATH

QUEUE = ".s3"
"""Directory of the copy requests and answers under the snapshot root."""

SIDECAR_SNAPSHOT_ROOT = f"/weights/{SNAPSHOT_SUBPATH}"
"""The snapshot root as the sync sidecar sees it: the weights volume's root is mounted at ``/weights``
(:data:`kimi_k3.weights.serving_pod.WEIGHTS_ROOT`) and the snapshots are its ``.engine-snapshots`` directory
(:data:`kimi_k3.weights.snapshot_agent.SNAPSHOT_SUBPATH`; tests/test_engine_snapshot_s3.py holds ``/weights`` to ``WEIGHTS_ROOT``)."""

_COPIER_TEMPLATE = r"""
snap_q="$SNAPSHOT_ROOT/.s3"
snap_sum() { if command -v openssl >/dev/null 2>&1; then set -- $(openssl dgst -sha256 -r "$1"); else set -- $(sha256sum "$1"); fi; printf '%s\n' "$1"; }
snap_streams() {
  # every file SHA256SUMS lists, over ${SYNC_STREAMS:-1} aws s3 sync processes of disjoint partitions (line n to stream (n-1) mod N)
  src=$1; dst=$2; list=$3; n_streams=${SYNC_STREAMS:-1}; p=0; pids=
  while [ "$p" -lt "$n_streams" ]; do
    (
      n=0; set --
      while IFS= read -r line; do
        n=$((n + 1)); [ $(( (n - 1) % n_streams )) -eq "$p" ] || continue
        f=${line#* }; f=${f#[ *]}
        case $f in *[][*?]*|KEY|CLAIM) echo "snapshot file name $f cannot be copied by name" >&2; exit 1 ;; esac
        set -- "$@" --include "$f"
      done < "$list"
      [ "$#" -eq 0 ] || aws s3 sync "$src" "$dst" --no-progress --only-show-errors --exclude "*" "$@"
    ) & pids="$pids $!"
    p=$((p + 1))
  done
  rc=0; for pid in $pids; do wait "$pid" || rc=1; done
  return "$rc"
}
snap_upload() {
  d=$1; dir="$SNAPSHOT_ROOT/$d"; dest="${SNAPSHOT_S3_URI}$d/"
  [ -f "$dir/KEY" ] && [ -f "$dir/SHA256SUMS" ] || { echo "not sealed on this node (KEY or SHA256SUMS missing): not uploaded"; return 1; }
  if aws s3 ls "${dest}KEY" >/dev/null 2>&1; then echo "already in S3 at $dest: nothing to upload"; return 0; fi
  bucket=${dest#s3://}; bucket=${bucket%%/*}; path=${dest#s3://$bucket/}
  if [ -f "$snap_q/held.$d" ]; then
    :  # this node won the claim before its dump (snap_claim): the CLAIM in S3 is its own
  elif ! err=$(aws s3api put-object --bucket "$bucket" --key "${path}CLAIM" --if-none-match '*' --body "$dir/SHA256SUMS" 2>&1 >/dev/null); then
    case $err in *PreconditionFailed*|*412*) echo "another replica is uploading this key to $dest: not uploaded"; return 0 ;; esac
    echo "claim of $dest failed: $err"; return 1
  fi
  start=$(date +%s)
  aws s3 cp "$dir/SHA256SUMS" "${dest}SHA256SUMS" --only-show-errors || { echo "upload of SHA256SUMS to $dest failed"; return 1; }
  snap_streams "$dir/" "$dest" "$dir/SHA256SUMS" || { echo "upload of the files to $dest failed: no KEY written"; return 1; }
  aws s3 cp "$dir/KEY" "${dest}KEY" --only-show-errors || { echo "upload of KEY to $dest failed"; return 1; }
  rm -f "$snap_q/held.$d"
  echo "uploaded $(grep -c . "$dir/SHA256SUMS") files and KEY last to $dest in $(( $(date +%s) - start )) s"
}
snap_claim() {
  # the dump's election (snapshot_pod.elect_dump): the same CLAIM the upload writes, taken before the dump; held.<digest> records
  # on this node that the CLAIM in S3 is this node's (its upload then writes no second one; a restarted pod on it keeps the claim)
  d=$1; dest="${SNAPSHOT_S3_URI}$d/"
  if aws s3 ls "${dest}KEY" >/dev/null 2>&1; then echo "@CLAIM_COPIED@ already in S3 at $dest: no dump"; return 1; fi
  if [ -f "$snap_q/held.$d" ]; then echo "@CLAIM_WON@ ${dest}CLAIM is this node's (an earlier start claimed it)"; return 0; fi
  bucket=${dest#s3://}; bucket=${bucket%%/*}; path=${dest#s3://$bucket/}; mkdir -p "$snap_q"
  printf '%s\n' "${HOSTNAME:-this pod}" > "$snap_q/.claim.$d"  # the claim names its pod (for whoever reads the bucket)
  if ! err=$(aws s3api put-object --bucket "$bucket" --key "${path}CLAIM" --if-none-match '*' --body "$snap_q/.claim.$d" 2>&1 >/dev/null); then
    case $err in *PreconditionFailed*|*412*) echo "@CLAIM_HELD@ another replica holds ${dest}CLAIM"; return 1 ;; esac
    echo "@CLAIM_ERROR@ claim of ${dest}CLAIM failed: $err"; return 1
  fi
  : > "$snap_q/held.$d"
  echo "@CLAIM_WON@ ${dest}CLAIM written (If-None-Match: *)"
}
snap_release() {
  # a claim won and given up (no dump): the next start of the key may claim it again
  d=$1; dest="${SNAPSHOT_S3_URI}$d/"
  [ -f "$snap_q/held.$d" ] || { echo "no claim of this node to release"; return 0; }
  bucket=${dest#s3://}; bucket=${bucket%%/*}; path=${dest#s3://$bucket/}
  aws s3api delete-object --bucket "$bucket" --key "${path}CLAIM" >/dev/null 2>&1 || { echo "release of ${dest}CLAIM failed"; return 1; }
  rm -f "$snap_q/held.$d"
  echo "released ${dest}CLAIM"
}
snap_fetch() {
  d=$1; dir="$SNAPSHOT_ROOT/$d"; src="${SNAPSHOT_S3_URI}$d/"
  rm -rf "$dir"; mkdir -p "$dir"  # no KEY here (the wrapper asks only then): nothing in it is trusted, and sync would skip same-size files
  start=$(date +%s)
  aws s3 cp "${src}KEY" "$dir/.KEY.s3" --only-show-errors >/dev/null 2>&1 || { echo "no S3 copy of this key ($src has no KEY: never uploaded, still uploading, or expired)"; return 1; }
  got=$(snap_sum "$dir/.KEY.s3")
  [ "$got" = "$d" ] || { rm -f "$dir/.KEY.s3"; echo "the S3 copy's KEY has sha256 $got, not this key's digest: not taken"; return 1; }
  aws s3 cp "${src}SHA256SUMS" "$dir/SHA256SUMS" --only-show-errors || { echo "the S3 copy at $src has no SHA256SUMS"; return 1; }
  snap_streams "$src" "$dir/" "$dir/SHA256SUMS" || { echo "download of the files from $src failed"; return 1; }
  mv "$dir/.KEY.s3" "$dir/KEY"
  echo "fetched $(grep -c . "$dir/SHA256SUMS") files and KEY last from $src in $(( $(date +%s) - start )) s"
}
snapshot_copier() {
  set +e
  mkdir -p "$snap_q"
  while :; do
    for req in "$snap_q"/claim.* "$snap_q"/release.* "$snap_q"/upload.* "$snap_q"/fetch.*; do
      [ -f "$req" ] || continue
      name=${req##*/}
      case $name in *.ok|*.fail|*.tmp) continue ;; esac
      action=${name%%.*}; d=${name#*.}
      case $d in ""|*[!0-9a-f]*) echo "snapshot copy: request $name names no key digest" >&2; rm -f "$req"; continue ;; esac
      rm -f "$req.ok" "$req.fail"
      if out=$("snap_$action" "$d" 2>&1); then verdict=ok; else verdict=fail; fi
      out=$(printf '%s' "$out" | tail -n 1)
      echo "engine snapshot copy ${d%"${d#????????????}"}: $action: $out"
      printf '%s\n' "$out" > "$req.$verdict.tmp" && mv "$req.$verdict.tmp" "$req.$verdict"
      rm -f "$req"
    done
    sleep "${SNAPSHOT_COPY_POLL_S:-1}"
  done
}
"""


def _claim_words(template: str) -> str:
    """``template`` with the claim's answer words of :mod:`~kimi_k3.weights.engine_snapshot` (their one home, which the pod reads)."""
    for word in ("CLAIM_WON", "CLAIM_HELD", "CLAIM_COPIED", "CLAIM_ERROR"):
        template = template.replace(f"@{word}@", getattr(engine_snapshot, word))
    return template


COPIER_FUNCTIONS = _claim_words(_COPIER_TEMPLATE)
"""Shell functions of the copy (see the module docstring); :func:`copier_script` starts :func:`snapshot_copier` in the background."""


def copier_script(script: str) -> str:
    """``script`` (the sync) with the snapshot copier running beside it in the background, for the pod's life (the sidecar's);
    not with ``SYNC_ONESHOT=1`` (the script run outside a pod, which ends once synced)."""
    return f'{COPIER_FUNCTIONS}\n[ "${{SYNC_ONESHOT:-0}}" = 1 ] || snapshot_copier &\n{script}'


def copier_env(compile_cache_s3_uri: str) -> dict[str, str]:
    """The sync sidecar's environment for the copier: where the snapshots are (its view of the volume) and their S3 prefix."""
    return {"SNAPSHOT_ROOT": SIDECAR_SNAPSHOT_ROOT, "SNAPSHOT_S3_URI": engine_snapshot.s3_copy_uri(compile_cache_s3_uri)}


__all__ = ["COPIER_FUNCTIONS", "QUEUE", "SIDECAR_SNAPSHOT_ROOT", "copier_env", "copier_script"]
