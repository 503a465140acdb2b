"""What the serving containers run: the shell and Python scripts, as text.

Each script reads its inputs from the container's environment (names in capitals),
never from its command line, so no secret or path is baked into the Kubernetes spec.
The pod kit (:mod:`kimi_k3.serving.pod_kit`) and the LeaderWorkerSet component
put them into containers; the tests run the verify script with the real coreutils.
"""

from __future__ import annotations

# Shell run by the verify init container: parallel `sha256sum --check` over the manifest.
VERIFY_SCRIPT = """set -eu
cd "$WEIGHTS_DIR"
test -s "$SHA256_MANIFEST" || { echo "sha256 manifest $SHA256_MANIFEST missing in $WEIGHTS_DIR" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/sha256.XXXXXX")
lines=$(wc -l < "$SHA256_MANIFEST")
parts=$(nproc); [ "$parts" -gt 32 ] && parts=32; [ "$parts" -gt "$lines" ] && parts=$lines; [ "$parts" -ge 1 ] || parts=1
split -n "l/$parts" "$SHA256_MANIFEST" "$work/part."
pids=""
for part in "$work"/part.*; do
  [ -s "$part" ] || continue
  sha256sum --check --quiet --strict "$part" & pids="$pids $!"
done
failed=0
for pid in $pids; do wait "$pid" || failed=1; done
rm -rf "$work"
[ "$failed" -eq 0 ] || { echo "weights do not match $SHA256_MANIFEST" >&2; exit 1; }
echo "weights verified against $SHA256_MANIFEST ($lines files)"
"""

S3_SYNC_SCRIPT = """set -eu
aws configure set default.s3.preferred_transfer_client crt
aws s3 sync "$WEIGHTS_S3_URI" "$WEIGHTS_DIR" --no-progress --only-show-errors
echo "synced $WEIGHTS_S3_URI to $WEIGHTS_DIR: $(du -sh "$WEIGHTS_DIR" | cut -f1)"
"""

HF_DOWNLOAD_SCRIPT = """import os
from huggingface_hub import snapshot_download
path = snapshot_download(repo_id=os.environ["MODEL_ID"], revision=os.environ["MODEL_REVISION"], cache_dir=os.environ["HF_HUB_CACHE"], max_workers=16)
print("downloaded", os.environ["MODEL_ID"], "at", os.environ["MODEL_REVISION"], "to", path, flush=True)
"""

# Readiness: the model is listed by the OpenAI API (the key is read from the environment, never from the spec).
READINESS_SCRIPT = """import json, os, sys, urllib.request
req = urllib.request.Request("http://127.0.0.1:{port}{path}", headers={{"Authorization": "Bearer " + os.environ.get("VLLM_API_KEY", "")}})
with urllib.request.urlopen(req, timeout=8) as resp:
    ids = [m.get("id") for m in json.load(resp).get("data", [])]
sys.exit(0 if {name!r} in ids else 1)
"""

# The group gate: every worker reports (its index) once its init containers have staged its weights and keeps asking;
# the leader answers "wait" until all have reported, then "go" to each, and starts vLLM once each has had its "go", so
# every rank starts within seconds of the others (torch's rendezvous would time out on a rank an hour late).
# Leader: the gate, then vLLM as PID 1 with the container's arguments ("$@": vLLM's multi-node flags, node rank 0).
LEADER_SCRIPT = """set -eu
python3 - <<'GATE'
import os, socket, sys, time
workers = int(os.environ["LWS_GROUP_SIZE"]) - 1
timeout = int(os.environ["GROUP_JOIN_TIMEOUT_S"])
deadline = time.monotonic() + timeout
server = socket.create_server(("", int(os.environ["GROUP_GATE_PORT"])))
server.settimeout(5)
ready, released = set(), set()
while len(released) < workers:
    if time.monotonic() > deadline:
        sys.exit(f"only {len(ready)} of {workers} workers staged their weights within {timeout}s")
    try:
        conn, _ = server.accept()
    except TimeoutError:
        continue
    with conn:
        try:
            conn.settimeout(5)
            index = conn.recv(64).decode().strip()
            if not (index.isdigit() and 0 < int(index) <= workers):
                continue
            ready.add(index)
            go = len(ready) == workers
            conn.sendall(b"go\\n" if go else b"wait\\n")
        except OSError:
            continue
    if go:
        released.add(index)
    else:
        print(f"waiting for the group: {len(ready)} of {workers} workers ready", flush=True)
print(f"all {workers} workers ready; starting vLLM", flush=True)
GATE
exec vllm serve "$@"
"""

# Worker: its weights are staged (the init containers are done): ask the leader until it says go, then vLLM headless, PID 1.
WORKER_SCRIPT = """set -eu
deadline=$(( $(date +%s) + GROUP_JOIN_TIMEOUT_S ))
until python3 -c 'import os, socket; s = socket.create_connection((os.environ["LWS_LEADER_ADDRESS"], int(os.environ["GROUP_GATE_PORT"])), 5); s.settimeout(5); s.sendall(os.environ["LWS_WORKER_INDEX"].encode() + b"\\n"); raise SystemExit(0 if s.recv(16).startswith(b"go") else 1)' 2>/dev/null; do
  [ "$(date +%s)" -lt "$deadline" ] || { echo "the group's leader $LWS_LEADER_ADDRESS:$GROUP_GATE_PORT did not let worker $LWS_WORKER_INDEX in within ${GROUP_JOIN_TIMEOUT_S}s" >&2; exit 1; }
  echo "waiting for the group at $LWS_LEADER_ADDRESS:$GROUP_GATE_PORT"
  sleep "${GROUP_POLL_S:-5}"
done
echo "the group is ready; starting vLLM on node $LWS_WORKER_INDEX of the group (headless)"
exec vllm serve "$@"
"""


__all__ = ["HF_DOWNLOAD_SCRIPT", "LEADER_SCRIPT", "READINESS_SCRIPT", "S3_SYNC_SCRIPT", "VERIFY_SCRIPT", "WORKER_SCRIPT"]
