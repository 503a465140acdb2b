"""The warm-up request: the replica's first request is ours, not a client's.

The first request after start pays lazy initialisation (tens of seconds on a large model:
kernels JIT-compiled on first use, allocator growth). The sidecar waits for ``/health``,
sends one short chat completion, and only then writes the marker file the readiness probe
requires — so the Service sends no client to the pod before that request has gone through.
Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

WARMUP_PROMPT = "Reply with the single word: ready"


def warmup_body(model: str, max_tokens: int = 8) -> dict:
    """The warm-up chat completion: short prompt, a few tokens, greedy (deterministic, cheap)."""
    return {"model": model, "messages": [{"role": "user", "content": WARMUP_PROMPT}], "max_tokens": max_tokens, "temperature": 0, "stream": False}


def _get(url: str, timeout_s: float) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, OSError):
        return 0


def wait_healthy(base_url: str, deadline_s: float, poll_s: float = 5.0, clock=time.monotonic, sleep=time.sleep) -> bool:
    """Poll ``{base_url}/health`` until it answers 200 or ``deadline_s`` passes."""
    end = clock() + deadline_s
    while clock() < end:
        if _get(f"{base_url}/health", timeout_s=5) == 200:
            return True
        sleep(poll_s)
    return False


def send_warmup(base_url: str, model: str, api_key: str | None = None, timeout_s: float = 600) -> str:
    """One warm-up completion; returns the generated text, raises ``RuntimeError`` when it fails."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    req = urllib.request.Request(f"{base_url}/v1/chat/completions", data=json.dumps(warmup_body(model)).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            answer = json.load(resp)
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise RuntimeError(f"warm-up request failed: {err}") from None
    choices = answer.get("choices") or []
    if not choices:
        raise RuntimeError(f"warm-up answer has no choices: {str(answer)[:200]}")
    return str((choices[0].get("message") or {}).get("content") or "")


def mark_ready(marker: str) -> None:
    """Write the marker atomically (the readiness probe checks that it exists)."""
    tmp = f"{marker}.tmp"
    with open(tmp, "w") as fh:
        fh.write(f"{time.time():.0f}\n")
    os.replace(tmp, marker)


def warm_up_and_mark(base_url: str, model: str, marker: str, api_key: str | None = None, health_deadline_s: float = 6 * 3600, retry_s: float = 30, attempts: int | None = None, sleep=time.sleep) -> bool:
    """Wait for the engine, warm it up (retrying), then mark the pod ready; returns False if it never worked."""
    if not wait_healthy(base_url, health_deadline_s, sleep=sleep):
        print(f"warm-up: {base_url}/health never answered 200", file=sys.stderr, flush=True)
        return False
    tried = 0
    while attempts is None or tried < attempts:
        tried += 1
        start = time.monotonic()
        try:
            send_warmup(base_url, model, api_key)
        except RuntimeError as err:
            print(f"warm-up attempt {tried}: {err}; the pod stays unready", file=sys.stderr, flush=True)
            sleep(retry_s)
            continue
        mark_ready(marker)
        print(f"warm-up: first completion took {time.monotonic() - start:.1f} s; marked {marker}", file=sys.stderr, flush=True)
        return True
    return False


def rewarm_after_restarts(base_url: str, model: str, marker: str, api_key: str | None = None, poll_s: float = 10, sleep=time.sleep, rounds: int | None = None) -> None:
    """After the first warm-up: when the engine stops answering ``/health`` (its container restarted), unmark the pod
    and warm the new engine up before the readiness probe lets clients in again.

    The marker lives in the pod's ``/tmp`` ``emptyDir``, which survives a container restart: without this the
    restarted engine would be Ready on its first health check and its first client would pay the lazy initialisation.
    An engine start takes minutes, far longer than ``poll_s``, so the watcher sees every restart.

    :param rounds: polls before returning (``None``: until the pod stops); for tests.
    """
    polled = 0
    while rounds is None or polled < rounds:
        polled += 1
        sleep(poll_s)
        if _get(f"{base_url}/health", timeout_s=5) == 200:
            continue
        if os.path.exists(marker):
            os.remove(marker)
            print("warm-up: the engine stopped answering /health (restarted?); the pod is unready until it is warmed up again", file=sys.stderr, flush=True)
        warm_up_and_mark(base_url, model, marker, api_key=api_key, sleep=sleep)

