"""Where a serving pod is on its way to Ready, from its API object (``v1.Pod`` JSON) and a log tail (pure).

A serving pod goes through: scheduling onto a GPU node; its init containers (the weights
onto the node's NVMe, their verification; any cache restore); the engine image pull
(the kubelet pulls a container's image only when it is about to start it, so after the
init containers); the engine loading (the ``vllm`` container runs, its startup probe on
``/health`` has not passed yet: weights into the GPUs, compilation, CUDA graphs); warming
up (started, the readiness probe — the model listed by ``/v1/models`` — not passed yet);
ready. A pod can also be failed (a container exiting non-zero, a crash loop, an image
that cannot be pulled) or terminating.

Init containers whose log carries :mod:`kimi_k3.weights.progress` lines report bytes,
rate and files verified; others (the Hugging Face download) are shown by name and time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kimi_k3.core.clock import utc
from kimi_k3.weights.progress import DEFAULT_INTERVAL_S, Progress, last_progress

SCHEDULING, IMAGE_PULL, WEIGHTS, VERIFYING, INIT = "scheduling", "image pull", "weights", "verifying", "init"
CACHE_RESTORE = "compile cache restore"
ENGINE_LOADING, WARMING_UP, READY, FAILED, TERMINATING = "engine loading", "warming up", "ready", "failed", "terminating"
PHASES = (SCHEDULING, WEIGHTS, VERIFYING, CACHE_RESTORE, INIT, IMAGE_PULL, ENGINE_LOADING, WARMING_UP, READY, FAILED, TERMINATING)
"""Phases in the order a pod goes through them (failed and terminating can come at any point)."""

INIT_PHASES = {"fetch-weights": WEIGHTS, "verify-weights": VERIFYING, "restore-compile-cache": CACHE_RESTORE}
"""Init containers of the serving pods (``kimi_k3.serving.pod_kit``) and the phase each one is."""

ENGINE_CONTAINER = "vllm"
"""The serving pods' engine container."""

STALE_AFTER_S = 4 * DEFAULT_INTERVAL_S
"""A progress line older than this means the step stopped reporting (stuck, or its node froze)."""

LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
"""Label of a LeaderWorkerSet pod: 0 on the group's leader (which serves the API)."""

_FAILING_WAITS = ("CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError")


@dataclass(frozen=True)
class PodView:
    """One serving pod, as ``kimi-k3 status`` shows it."""

    name: str
    """The pod's ``metadata.name`` (``?`` when missing)."""
    role: str
    """``server`` (a Deployment pod), ``leader`` or ``worker`` (a LeaderWorkerSet group)."""
    node: str | None
    """Node it was scheduled to (``None`` while unscheduled)."""
    phase: str
    """One of :data:`PHASES`."""
    detail: str
    """One line for a person: what it waits for, or why it failed."""
    ready: bool
    """True when its ``Ready`` condition's status is ``True``."""
    restarts: int
    """Restarts of all its containers."""
    since: datetime | None
    """When the current step started (the running container's start), if known."""
    container: str | None = None
    """The container the phase is about."""
    progress: Progress | None = None
    """The newest progress line of that container, when it prints them."""
    stale_s: float | None = None
    """Age of that line when it is older than :data:`STALE_AFTER_S`, else ``None``."""
    problem: bool = False
    """True when it needs a person: failed, crash-looping, or no progress for a while."""

    @property
    def serves_api(self) -> bool:
        """True for the pods behind the Service (a Deployment pod or a group leader)."""
        return self.role in ("server", "leader")


def _when(text: str | None) -> datetime | None:
    if not text:
        return None
    return utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


def _condition(pod: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in pod.get("status", {}).get("conditions") or [] if c.get("type") == kind), None)


def role_of(pod: Mapping[str, Any]) -> str:
    """``server``, ``leader`` or ``worker`` from the pod's labels."""
    index = (pod.get("metadata", {}).get("labels") or {}).get(LWS_WORKER_INDEX)
    if index is None:
        return "server"
    return "leader" if index == "0" else "worker"


def _terminated(state: Mapping[str, Any]) -> str:
    t = state.get("terminated") or {}
    reason = t.get("reason") or "exited"
    message = " ".join(str(t.get("message") or "").split())
    return f"exit code {t.get('exitCode')} ({reason})" + (f": {message[:160]}" if message else "")


def log_wanted(pod: Mapping[str, Any]) -> tuple[str, bool] | None:
    """The container whose log tail tells more, and whether to read its previous instance (crash loop)."""
    status = pod.get("status", {})
    for cs in status.get("initContainerStatuses") or []:
        state = cs.get("state") or {}
        if "running" in state:
            return cs["name"], False
        if "terminated" in state and state["terminated"].get("exitCode") == 0:
            continue
        waiting = state.get("waiting") or {}
        if waiting.get("reason") == "CrashLoopBackOff" or "terminated" in state:
            return cs["name"], "terminated" not in state
        return None
    for cs in status.get("containerStatuses") or []:
        if cs.get("name") != ENGINE_CONTAINER:
            continue
        state = cs.get("state") or {}
        if "running" in state and not cs.get("ready"):
            return cs["name"], False
        if (state.get("waiting") or {}).get("reason") == "CrashLoopBackOff":
            return cs["name"], True
    return None


def _last_line(lines: Sequence[str]) -> str:
    for line in reversed(lines):
        text = " ".join(line.split())
        if text and not text.startswith("{"):
            return text[:160]
    return ""


def classify(pod: Mapping[str, Any], log: Sequence[str] = (), *, now: datetime) -> PodView:
    """The phase of ``pod`` at ``now``; ``log`` is the tail of the container :func:`log_wanted` names."""
    meta, status = pod.get("metadata", {}), pod.get("status", {})
    name, node = meta.get("name", "?"), (pod.get("spec") or {}).get("nodeName")
    statuses = list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])
    restarts = sum(int(cs.get("restartCount") or 0) for cs in statuses)
    ready_condition = _condition(pod, "Ready")
    ready = bool(ready_condition and ready_condition.get("status") == "True")
    base = dict(name=name, role=role_of(pod), node=node, ready=ready, restarts=restarts)
    now = utc(now)

    if meta.get("deletionTimestamp"):
        return PodView(**base, phase=TERMINATING, detail=f"terminating since {meta['deletionTimestamp']}", since=_when(meta.get("deletionTimestamp")))
    if ready:
        return PodView(**base, phase=READY, detail="ready: serving", since=_when(ready_condition.get("lastTransitionTime") if ready_condition else None))
    scheduled = _condition(pod, "PodScheduled")
    if not node or (scheduled and scheduled.get("status") == "False"):
        why = " ".join(str((scheduled or {}).get("message") or "waiting for the scheduler").split())
        return PodView(**base, phase=SCHEDULING, detail=f"waiting for a GPU node: {why[:200]}", since=_when(meta.get("creationTimestamp")))

    for cs in status.get("initContainerStatuses") or []:
        state = cs.get("state") or {}
        container = cs["name"]
        if "terminated" in state and state["terminated"].get("exitCode") == 0:
            continue
        waiting = state.get("waiting") or {}
        if "terminated" in state or waiting.get("reason") == "CrashLoopBackOff":
            last = cs.get("lastState") or {}
            what = _terminated(state if "terminated" in state else last)
            tail = _last_line(log)
            return PodView(**base, phase=FAILED, detail=f"init container {container} failed ({cs.get('restartCount', 0)} restarts): {what}" + (f"; last log line: {tail}" if tail else ""),
                           since=None, container=container, problem=True)
        if waiting.get("reason") in _FAILING_WAITS:
            return PodView(**base, phase=FAILED, detail=f"init container {container}: {waiting['reason']}: {' '.join(str(waiting.get('message') or '').split())[:200]}", since=None, container=container, problem=True)
        if "running" not in state:
            return PodView(**base, phase=IMAGE_PULL, detail=f"pulling the image of init container {container}", since=None, container=container)
        since = _when(state["running"].get("startedAt"))
        progress = last_progress(log)
        phase = INIT_PHASES.get(container, INIT)
        if progress is not None:
            phase = VERIFYING if progress.step in ("verify", "done") else WEIGHTS
        age = progress.age_s(now.timestamp()) if progress else None
        stale = age if age is not None and age > STALE_AFTER_S else None
        detail = _init_detail(container, phase, progress, since, now)
        if stale is not None:
            detail += f"; no progress line for {int(stale)} s"
        return PodView(**base, phase=phase, detail=detail, since=since, container=container, progress=progress, stale_s=stale, problem=stale is not None)

    for cs in status.get("containerStatuses") or []:
        if cs.get("name") != ENGINE_CONTAINER:
            continue
        state = cs.get("state") or {}
        waiting = state.get("waiting") or {}
        if waiting.get("reason") == "CrashLoopBackOff":
            tail = _last_line(log)
            return PodView(**base, phase=FAILED, detail=f"vllm is crash-looping ({cs.get('restartCount', 0)} restarts), last {_terminated(cs.get('lastState') or {})}" + (f"; last log line: {tail}" if tail else ""),
                           since=None, container=ENGINE_CONTAINER, problem=True)
        if waiting.get("reason") in _FAILING_WAITS:
            return PodView(**base, phase=FAILED, detail=f"vllm: {waiting['reason']}: {' '.join(str(waiting.get('message') or '').split())[:200]}", since=None, container=ENGINE_CONTAINER, problem=True)
        if "running" in state:
            since = _when(state["running"].get("startedAt"))
            tail = _last_line(log)
            running = f" for {_duration((now - since).total_seconds())}" if since else ""
            if cs.get("started"):
                return PodView(**base, phase=WARMING_UP, detail=f"engine up{running}, not ready yet (readiness: the model listed by /v1/models and, with the warm-up sidecar, its first request done)", since=since, container=ENGINE_CONTAINER)
            return PodView(**base, phase=ENGINE_LOADING, detail=f"engine loading{running}" + (f": {tail}" if tail else ""), since=since, container=ENGINE_CONTAINER)
        if "terminated" in state:
            return PodView(**base, phase=FAILED, detail=f"vllm {_terminated(state)}", since=None, container=ENGINE_CONTAINER, problem=True)
        return PodView(**base, phase=IMAGE_PULL, detail=f"pulling the engine image ({waiting.get('reason') or 'waiting'})", since=None, container=ENGINE_CONTAINER)
    return PodView(**base, phase=IMAGE_PULL, detail=f"pod {status.get('phase', 'Pending')}: containers not started", since=None)


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes}m" if hours else f"{minutes}m {secs}s"


def _init_detail(container: str, phase: str, progress: Progress | None, since: datetime | None, now: datetime) -> str:
    running = f" for {_duration((now - since).total_seconds())}" if since else ""
    if phase == CACHE_RESTORE:  # a few GB, no progress lines: a miss or an error is logged and the engine compiles
        return f"{container}: restoring the compile and JIT caches from S3{running}"
    if progress is None:
        what = {WEIGHTS: "copying the weights", VERIFYING: "verifying the weights"}.get(phase, "running")
        return f"{container}: {what}{running} (no progress reported)"
    if phase == VERIFYING:
        return f"{container}: verifying, {progress.files_verified} of {progress.files_total} files{running}"
    return f"{container}: weights{running}, {progress.files_verified} of {progress.files_total} files verified so far"


__all__ = ["ENGINE_CONTAINER", "INIT_PHASES", "PHASES", "STALE_AFTER_S", "PodView", "classify", "log_wanted", "role_of"]
