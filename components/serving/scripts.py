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

# Leader: Ray head, wait for the whole group, then vLLM as PID 1 with the arguments of the container ("$@").
LEADER_SCRIPT = """set -eu
ray start --head --port="$RAY_GCS_PORT" --node-manager-port="$RAYLET_PORT" --object-store-memory="$RAY_OBJECT_STORE_BYTES" --include-dashboard=false --disable-usage-stats
deadline=$(( $(date +%s) + GROUP_JOIN_TIMEOUT_S ))
while :; do
  alive=$(python3 -c 'import ray; ray.init(address="auto", logging_level="ERROR"); print(sum(1 for n in ray.nodes() if n["Alive"]))' 2>/dev/null || echo 0)
  [ "$alive" -ge "$LWS_GROUP_SIZE" ] && break
  [ "$(date +%s)" -lt "$deadline" ] || { echo "only $alive of $LWS_GROUP_SIZE Ray nodes joined within ${GROUP_JOIN_TIMEOUT_S}s" >&2; exit 1; }
  echo "waiting for the group: $alive of $LWS_GROUP_SIZE Ray nodes alive"
  sleep 10
done
echo "all $LWS_GROUP_SIZE Ray nodes joined; starting vLLM"
exec vllm serve "$@"
"""

# Worker: wait until the leader's Ray head answers (it may still be staging weights), then join and block.
WORKER_SCRIPT = """set -eu
head="$LWS_LEADER_ADDRESS:$RAY_GCS_PORT"
deadline=$(( $(date +%s) + GROUP_JOIN_TIMEOUT_S ))
until python3 -c 'import os, socket; socket.create_connection((os.environ["LWS_LEADER_ADDRESS"], int(os.environ["RAY_GCS_PORT"])), 5).close()' 2>/dev/null; do
  [ "$(date +%s)" -lt "$deadline" ] || { echo "Ray head $head not reachable within ${GROUP_JOIN_TIMEOUT_S}s" >&2; exit 1; }
  echo "waiting for the Ray head at $head"
  sleep 10
done
exec ray start --address="$head" --node-manager-port="$RAYLET_PORT" --object-store-memory="$RAY_OBJECT_STORE_BYTES" --disable-usage-stats --block
"""


__all__ = ["HF_DOWNLOAD_SCRIPT", "LEADER_SCRIPT", "READINESS_SCRIPT", "S3_SYNC_SCRIPT", "VERIFY_SCRIPT", "WORKER_SCRIPT"]
