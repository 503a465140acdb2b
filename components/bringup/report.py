"""One snapshot of a stack's bring-up, for machines (:meth:`BringUp.to_json`) and people (:func:`render`) (pure).

Ready means the endpoint can serve the stack: every expected replica's API pod (a
Deployment pod, or a LeaderWorkerSet group's leader) is Ready. Hopeless means it never
will on this block (expired, cancelled, payment failed): ``--wait`` stops there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tqdm import tqdm

from kimi_k3.bringup.nodes import NodesSummary
from kimi_k3.bringup.pods import VERIFYING, WEIGHTS, PodView
from kimi_k3.capacity.assessment import PENDING_STATES, USABLE_STATES, Finding
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.core.clock import utc
from kimi_k3.core.human_time import duration_text, minute_text

SCHEMA = "kimi-k3-status/1"
"""``schema`` of the JSON document; bumped when a field changes meaning."""


@dataclass(frozen=True)
class BringUp:
    """Everything ``kimi-k3 status`` shows at one moment."""

    stack: str
    """Name of the Pulumi stack (``StackSettings.stack``)."""
    now: datetime
    """The moment of the snapshot; ages and times to go are measured from it."""
    reservation_id: str
    """The Capacity Block the stack's settings name (``cr-…``), known even when EC2 could not be read."""
    block: CapacityBlockFacts | None
    """The reservation as EC2 reports it now; ``None`` when it could not be read."""
    replicas_expected: int
    """Replicas the stack serves on this block (``StackSettings.replicas_for``)."""
    namespace: str
    """Namespace of the serving pods."""
    nodes: NodesSummary | None = None
    """The GPU nodes against the reserved count; ``None`` when the cluster was not read."""
    pods: tuple[PodView, ...] = ()
    """The serving pods, sorted by name; empty when there are none yet or the cluster was not read."""
    extension: Finding | None = None
    """The newest Capacity Block extension (``None``: never extended)."""
    scaledown: Finding | None = None
    """Whether EKS's scale-down action still sits at the block's end - 40 min (checked on active or extended blocks)."""
    errors: tuple[str, ...] = ()
    """What could not be read (AWS or the cluster), one line each."""

    @property
    def replicas_ready(self) -> int:
        """API pods that are Ready."""
        return sum(1 for p in self.pods if p.serves_api and p.ready)

    @property
    def ready(self) -> bool:
        """Every expected replica serves."""
        return self.replicas_expected > 0 and self.replicas_ready >= self.replicas_expected

    @property
    def hopeless(self) -> bool:
        """The block is in a state where no instance will run: neither usable nor pending (the assessment's states)."""
        return self.block is not None and self.block.state not in USABLE_STATES + PENDING_STATES

    def to_json(self) -> dict[str, Any]:
        """The snapshot as a JSON-ready dict (times in ISO 8601 UTC, durations in seconds)."""
        block = self.block
        now = utc(self.now)
        return {
            "schema": SCHEMA,
            "stack": self.stack,
            "now": now.isoformat(),
            "ready": self.ready,
            "endpoint": {"replicas_ready": self.replicas_ready, "replicas_expected": self.replicas_expected},
            "startup_report": startup_report_command(self.stack) if self.ready else None,
            "capacity_block": None if block is None else {
                "id": block.reservation_id,
                "state": block.state,
                "instance_type": block.instance_type,
                "instance_count": block.instance_count,
                "availability_zone": block.availability_zone,
                "start": block.start.isoformat() if block.start else None,
                "end": block.end.isoformat() if block.end else None,
                "seconds_to_start": _seconds(block.time_to_start(now)),
                "seconds_left": _seconds(block.time_to_end(now)),
            },
            "extension": _finding(self.extension),
            "scaledown": _finding(self.scaledown),
            "gpu_nodes": None if self.nodes is None else {
                "reserved": self.nodes.reserved,
                "joined": self.nodes.joined,
                "ready": self.nodes.ready,
                "gpus_allocatable": self.nodes.gpus_allocatable,
                "nodes": [
                    {"name": n.name, "ready": n.ready, "gpus_allocatable": n.gpus_allocatable, "instance_id": n.instance_id, "unhealthy": list(n.unhealthy)}
                    for n in self.nodes.nodes
                ],
            },
            "pods": [_pod_json(p, now) for p in self.pods],
            "errors": list(self.errors),
        }


def _seconds(delta: timedelta | None) -> int | None:
    return None if delta is None else int(delta.total_seconds())


def _finding(finding: Finding | None) -> dict[str, str] | None:
    return None if finding is None else {"level": finding.level, "code": finding.code, "message": finding.message}


def _pod_json(p: PodView, now: datetime) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": p.name, "role": p.role, "node": p.node, "phase": p.phase, "detail": p.detail, "ready": p.ready,
        "restarts": p.restarts, "problem": p.problem, "container": p.container,
        "phase_seconds": int((utc(now) - p.since).total_seconds()) if p.since else None,
    }
    if p.progress is not None:
        pr = p.progress
        out["progress"] = {
            "step": pr.step, "bytes_done": pr.bytes_done, "bytes_total": pr.bytes_total, "rate_bps": pr.rate_bps,
            "eta_seconds": None if pr.eta_s is None else int(pr.eta_s), "files_verified": pr.files_verified,
            "files_total": pr.files_total, "reported_at": pr.t,
        }
    return out


# --------------------------------------------------------------------------- for people


def bar(done: float, total: float, elapsed_s: float, *, unit: str = "B", rate: float | None = None, width: int = 20) -> str:
    """A tqdm progress bar as text (tqdm's own meter, so the figures read like every other tqdm bar)."""
    scale = unit == "B"
    fmt = "{percentage:3.0f}%|{bar:" + str(width) + "}| {n_fmt}" + ("B" if scale else "") + "/{total_fmt}" + ("B" if scale else f" {unit}")
    if rate is not None:
        fmt += " [{rate_fmt}, ETA {remaining}]"
    return tqdm.format_meter(
        min(done, total), total, elapsed_s, unit=unit if scale else "it", unit_scale=scale, unit_divisor=1000, rate=rate, bar_format=fmt,
    )


def _block_lines(report: BringUp, now: datetime) -> list[str]:
    b = report.block
    if b is None:
        return [f"Capacity Block {report.reservation_id}: not read"]
    lines = [f"Capacity Block {b.reservation_id}: {b.state}, {b.instance_count} x {b.instance_type} in {b.availability_zone}"]
    if b.start is not None and b.end is not None:
        start, end = utc(b.start), utc(b.end)
        when = f"starts in {duration_text(start - now)}" if start > now else f"started {duration_text(now - start)} ago"
        left = f"ends in {duration_text(end - now)}" if end > now else f"ended {duration_text(now - end)} ago"
        lines.append(f"  window      {minute_text(start)} -> {minute_text(end)} UTC, {when}, {left}")
        if start <= now < end:
            used = (now - start).total_seconds()
            meter = tqdm.format_meter(used, (end - start).total_seconds(), used, bar_format="{percentage:3.0f}%|{bar:20}|")
            lines.append(f"  elapsed     {meter} {duration_text(now - start)} of {duration_text(end - start)}")
    for label, finding in (("extension", report.extension), ("scale-down", report.scaledown)):
        if finding is not None:
            lines.append(f"  {label:<11} {finding.level} {finding.message}")
    return lines


def _node_lines(report: BringUp, now: datetime) -> list[str]:
    n = report.nodes
    if n is None:
        return ["GPU nodes: not read"]
    lines = [f"GPU nodes: {n.joined} of {n.reserved} joined, {n.ready} Ready, {n.gpus_allocatable} GPUs allocatable"]
    for node in n.nodes:
        age = f"joined {duration_text(now - node.created)} ago" if node.created else ""
        health = f"  {'; '.join(node.unhealthy)}" if node.unhealthy else ""
        lines.append(f"  {node.name:<44} {'Ready' if node.ready else 'NotReady':<8} {node.gpus_allocatable} GPUs  {age}{health}".rstrip())
    return lines


def _pod_line(p: PodView, now: datetime) -> list[str]:
    where = f"on {p.node}" if p.node else "unscheduled"
    restarts = f", {p.restarts} restarts" if p.restarts else ""
    head = f"  {p.name} ({p.role}, {where}{restarts}): {p.phase}{'  <-- needs attention' if p.problem else ''}"
    lines = [head, f"    {p.detail}"]
    pr = p.progress
    if pr is not None and p.phase in (WEIGHTS, VERIFYING):
        elapsed = (now - p.since).total_seconds() if p.since else 0.0
        if pr.bytes_total > 0:
            lines.append("    bytes  " + bar(pr.bytes_done, pr.bytes_total, elapsed, rate=float(pr.rate_bps) if pr.step == "weights" and pr.rate_bps > 0 else None))
        else:
            lines.append(f"    bytes  {pr.bytes_done / 1e9:,.1f} GB on the node at {pr.rate_bps / 1e9:,.2f} GB/s (total unknown)")
        if pr.files_total > 0:
            lines.append("    files  " + bar(pr.files_verified, pr.files_total, elapsed, unit="verified"))
    return lines


def startup_report_command(stack: str) -> str:
    """The command that lays this start's measured phases beside the estimate (``kimi-k3 startup-report``)."""
    return f"kimi-k3 startup-report {stack}"


def render(report: BringUp) -> list[str]:
    """The snapshot as lines for a terminal."""
    now = utc(report.now)
    lines = [f"kimi-k3 status {report.stack} at {minute_text(now)} UTC"]
    lines += _block_lines(report, now)
    lines += _node_lines(report, now)
    unread = pods_unread(report)
    if unread is not None:  # not "0 of N ready": nothing is known of the pods
        lines.append(f"Serving pods in {report.namespace}: not read ({unread}); {report.replicas_expected} replicas expected")
    else:
        lines.append(f"Serving pods in {report.namespace}: {report.replicas_ready} of {report.replicas_expected} replicas ready")
    if not report.pods and unread is None:
        lines.append("  none yet")
    for p in report.pods:
        lines += _pod_line(p, now)
    for error in report.errors:
        lines.append(f"could not read: {error}")
    if report.ready:
        lines.append("Endpoint: READY")
        lines.append(f"Start-up phases measured beside the estimate: {startup_report_command(report.stack)}")
    elif report.hopeless:
        lines.append(f"Endpoint: will not come up: the Capacity Block is {report.block.state if report.block else '?'}")
    elif unread is not None:
        lines.append("Endpoint: unknown: the serving pods could not be read")
    else:
        lines.append(f"Endpoint: not ready ({report.replicas_ready} of {report.replicas_expected} replicas)")
    return lines


def pods_unread(report: BringUp) -> str | None:
    """Why the serving pods could not be read (the cluster's error), or ``None`` when they were."""
    return next((error.removeprefix("cluster: ") for error in report.errors if error.startswith("cluster:")), None)


def summary_line(report: BringUp) -> str:
    """One line per poll for a log (``--wait`` without a terminal)."""
    now = utc(report.now)
    block = report.block.state if report.block else "?"
    nodes = f"{report.nodes.ready}/{report.nodes.reserved} GPU nodes Ready" if report.nodes else "nodes ?"
    phases = ", ".join(f"{p.name.rsplit('-', 1)[-1]} {p.phase}" + (f" {p.progress.fraction:.0%}" if p.progress and p.progress.fraction is not None and p.phase == WEIGHTS else "") for p in report.pods) or "no pods"
    if pods_unread(report) is not None:
        return f"{now:%H:%M:%S} block {block}; {nodes}; pods not read ({pods_unread(report)}); ?/{report.replicas_expected} ready"
    return f"{now:%H:%M:%S} block {block}; {nodes}; {phases}; {report.replicas_ready}/{report.replicas_expected} ready"


__all__ = ["SCHEMA", "BringUp", "bar", "pods_unread", "render", "startup_report_command", "summary_line"]
