"""The change review: what the next ``pulumi up`` does, resource by resource, and what it costs a running block.

:func:`review` puts together the diff against the previous plan (:mod:`kimi_k3.offline.diff`),
the disruptions of the serving GPUs (:mod:`kimi_k3.offline.impact`) and the block's phase at
the new run's ``now``; :class:`Review` renders it for people (:meth:`Review.lines`) and
machines (:meth:`Review.document`), and says whether it is refused: a change that replaces
the weights volumes or the GPU nodes while the block serves is refused (one line naming
the change and its cost) unless the caller allows the disruption (``--allow-disruption``).

An in-place upgrade of the Capacity Block node group (a new AMI release, Kubernetes version or
launch template version: EKS ``UpdateNodegroupVersion``) while the block serves is refused even
with ``--allow-disruption``: EKS wants a Capacity Block node group upgraded at desired size 0
(:data:`kimi_k3.offline.impact.CAPACITY_BLOCK_UPGRADE_SOURCE`); the message names the rule and
the way that works (apply after the block, or before it starts, when the group is at 0).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kimi_k3.capacity.assessment import BEFORE, ENDED, ENDING
from kimi_k3.offline.diff import CHANGE, CREATE, DELETE, REPLACE, UNCHANGED, ChangeSet, ResourceChange, diff, is_secret, render_path
from kimi_k3.offline.impact import (
    CAPACITY_BLOCK_UPGRADE_SOURCE,
    POD_TEMPLATES,
    BlockContext,
    Disruption,
    Minutes,
    block_context,
    disruptions,
    minutes_for,
    template_reasons,
)
from kimi_k3.offline.results import PlanResult
from kimi_k3.offline.state import PreviousState

SECRET = "kubernetes:core/v1:Secret"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SCHEDULES = {"aws:autoscaling/schedule:Schedule": ("startTime", "scheduled scale-up"), "aws:scheduler/schedule:Schedule": ("scheduleExpression", "one-time schedule")}
SECRET_ENV_SOURCE = (
    "Kubernetes docs, Secrets, 'Using Secrets as environment variables': a container reads them at start and does not see a "
    "later update until it restarts"
)


def _when(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if moment else "?"


def _money(value: float | None) -> str:
    return "cost not known (no block rate for the instance type)" if value is None else f"~${value:,.0f}"


def _values(change: ResourceChange, path: tuple) -> str:
    old, new = change.value(path, before=True), change.value(path)
    if is_secret(old) or is_secret(new):
        return " (secret)"
    if isinstance(old, (dict, list)) or isinstance(new, (dict, list)):
        return ""
    if old is not None and new is not None and len(str(old)) <= 40 and len(str(new)) <= 40:
        return f" {old} -> {new}"
    return ""


def describe(change: ResourceChange, limit: int = 4) -> str:
    """The properties part of a change's line."""
    if change.action in (CREATE, DELETE):
        return ""
    if change.type in POD_TEMPLATES and (reasons := template_reasons(change)):
        others = [p for p in change.paths if not render_path(p).startswith(("spec.template", "spec.leaderWorkerTemplate"))]
        text = "spec.template (" + ", ".join(reasons) + ")"
        return text + "".join(f", {render_path(p)}{_values(change, p)}" for p in others[:limit])
    shown = [f"{render_path(p)}{_values(change, p)}" for p in (change.replace_because or change.paths)[:limit]]
    more = len(change.replace_because or change.paths) - limit
    text = ", ".join(shown) + (f" (+{more} more)" if more > 0 else "")
    if change.cascade_from:
        text += " (takes the replaced resource's new id)"
    if change.action == REPLACE and change.rules is not None and change.rules.delete_before_replace:
        text += " (deleted, then re-created)"
    if change.action == CHANGE:
        text += " (replacement rules not known)"
    elif change.rules is not None and not change.rules.beyond_known:
        text += " (rules beyond metadata not known)"
    return text


def _impact_phrase(d: Disruption, price: float | None) -> str:
    each = d.whole_minutes_each
    each_text = "minutes not known" if each is None else f"~{each} min"
    total = "" if d.node_minutes is None else f", ~{d.node_minutes} GPU-node-minutes, {_money(d.cost(price))}"
    name = d.change.display_name
    if d.order == "not now":
        return f"{d.count} GPU pods of {name} keep the old template for now ({d.note})"
    if d.kind == "nodes":
        return f"{d.count} GPU nodes replaced {d.order} (a cold start per node: new instance, weights and engine, {each_text} each; {d.capacity_kept} meanwhile; {d.why}){total}"
    if d.kind == "weights":
        return f"{d.count} GPU pods of {name} stop at once and transfer their weights again (no capacity for {each_text}; {d.why}){total}"
    span = f"{d.capacity_kept} for {each_text} each" if d.order != "all at once" else f"no capacity for {each_text}"
    return f"{d.count} GPU pods of {name} restart {d.order} ({span}){total}"


@dataclass(frozen=True)
class Review:
    """The change review of one plan against a previous one."""

    against: str
    """Where the previous plan was read from."""
    block: BlockContext
    """The block at the new run's ``now``."""
    changes: ChangeSet
    """Every resource's change."""
    disruptions: tuple[Disruption, ...]
    """What the changes do to the serving GPUs."""
    minutes: Minutes | None
    """The estimate's minutes and the block rate; ``None``: not known."""
    notes: tuple[str, ...]
    """Other consequences worth knowing (a secret's new value, pending schedules, rules not known)."""
    allow_disruption: bool = False
    """True when the caller accepts replacing weights volumes or GPU nodes while the block serves."""

    @property
    def price(self) -> float | None:
        """Block rate per instance-hour."""
        return self.minutes.price_per_hour if self.minutes else None

    @property
    def disruptive(self) -> list[Disruption]:
        """The disruptions that replace weights volumes or GPU nodes."""
        return [d for d in self.disruptions if d.kind in ("weights", "nodes")]

    @property
    def refused(self) -> str | None:
        """One line when the change upgrades the GPU node group in place while the block serves (never allowed), or replaces
        weights volumes or GPU nodes while it serves and that is not allowed."""
        if not self.block.serving:
            return None
        upgrades = [d for d in self.disruptions if d.upgrade]
        if upgrades:
            parts = [
                f"{d.change.type} {d.change.display_name} ({d.why}) replaces the GPU nodes in place"
                + ("" if d.node_minutes is None else f" (~{d.node_minutes} GPU-node-minutes, {_money(d.cost(self.price))})")
                for d in upgrades
            ]
            return (
                f"refused while the block serves (until {_when(self.block.end)}), --allow-disruption or not: " + "; ".join(parts)
                + ": an upgrade of the Capacity Block node group at its reserved size; EKS upgrades such a group only at desired "
                f"size 0 ({CAPACITY_BLOCK_UPGRADE_SOURCE}); do it during the block with `kimi-k3 capacity update-nodes STACK` (drain, size 0, "
                "update, scale back: it prints the downtime first), or apply after the block ends, or before the next one starts"
            )
        if self.allow_disruption or not self.disruptive:
            return None
        parts = []
        for d in self.disruptive:
            what = "replaces the weights volumes" if d.kind == "weights" else "replaces the GPU nodes"
            cost = "" if d.node_minutes is None else f": ~{d.node_minutes} GPU-node-minutes ({_money(d.cost(self.price))})"
            parts.append(f"{d.change.type} {d.change.display_name} ({d.why}) {what}{cost}")
        return (
            f"refused while the block serves (until {_when(self.block.end)}): " + "; ".join(parts)
            + "; re-run with --allow-disruption to accept, or apply after the block"
        )

    def header(self) -> str:
        """``Change review (against DIR, block serving until ...):``."""
        phase, block = self.block.phase, self.block
        if block.serving:
            where = f"block serving until {_when(block.end)}" + (" (EKS scales the nodes to 0 forty minutes before)" if phase == ENDING else "")
        elif phase == BEFORE:
            where = f"block not serving yet: starts {_when(block.start)}"
        elif phase == ENDED:
            where = f"block ended {_when(block.end)}"
        else:
            where = "no Capacity Block known"
        return f"Change review (against {self.against}, {where}):"

    def impact_lines(self) -> list[str]:
        """The serving impact, the weights and the GPU nodes."""
        phrases = [_impact_phrase(d, self.price) for d in self.disruptions]
        if not phrases:
            impact = "serving impact: none (no GPU pod restarts, no GPU node replaced)"
        elif self.block.serving:
            impact = "serving impact: " + "; ".join(phrases)
        else:
            impact = "serving impact: none now (no block is serving); while one serves this would be: " + "; ".join(phrases)
        weights, nodes = self.weights_state(), self.nodes_state()
        return [impact, f"{weights}   {nodes}"]

    def weights_state(self) -> str:
        """``weights: kept (...)`` or how they move."""
        wiped = [d for d in self.disruptions if d.kind == "weights"]
        if wiped:
            return f"weights: re-transferred on every node ({wiped[0].change.display_name} replaced: volumes wiped)"
        if any(d.kind == "nodes" for d in self.disruptions):
            return "weights: re-transferred to each new node"
        pods = [d for d in self.disruptions if d.kind == "pods" and d.order != "not now"]
        node_local = [c for c in self.changes if c.type == "kubernetes:apps/v1:StatefulSet" and c.new and (c.new.get("spec") or {}).get("volumeClaimTemplates")]
        if node_local:
            return "weights: kept (node-local volumes unchanged)"
        if pods:
            return "weights: in emptyDir: each restarted pod transfers them again"
        return "weights: kept"

    def nodes_state(self) -> str:
        """``GPU nodes: kept`` or how they are replaced."""
        nodes = [d for d in self.disruptions if d.kind == "nodes"]
        if not nodes:
            return "GPU nodes: kept"
        return f"GPU nodes: replaced {nodes[0].order} ({nodes[0].why})"

    def change_lines(self) -> list[str]:
        """One line per resource the next ``up`` touches, then the count of unchanged ones."""
        lines = []
        for change in self.changes.changed():
            props = describe(change)
            lines.append(f"{change.action:<9}{change.type} {change.display_name}" + (f"   {props}" if props else ""))
        unchanged = sum(1 for c in self.changes if c.action == UNCHANGED)
        lines.append(f"unchanged: {unchanged} resources" if lines else f"no change: all {unchanged} resources unchanged")
        return lines

    def lines(self) -> list[str]:
        """The review as printed."""
        out = [self.header(), *(f"  {line}" for line in self.change_lines()), *(f"  {line}" for line in self.impact_lines())]
        out += [f"  note: {note}" for note in self.notes]
        if self.refused:
            out.append(f"  {self.refused}")
        return out

    def document(self) -> dict[str, Any]:
        """The review for machines (``--json``)."""
        block = self.block
        return {
            "against": self.against,
            "block": {"phase": block.phase, "serving": block.serving, "start": block.start.isoformat() if block.start else None,
                      "end": block.end.isoformat() if block.end else None, "nodes": block.nodes, "instanceType": block.instance_type},
            "changes": [_change_document(c) for c in self.changes.changed()],
            "unchanged": sum(1 for c in self.changes if c.action == UNCHANGED),
            "impact": [_disruption_document(d, self.price) for d in self.disruptions],
            "weights": self.weights_state(),
            "gpuNodes": self.nodes_state(),
            "notes": list(self.notes),
            "refused": self.refused,
        }


def _change_document(change: ResourceChange) -> dict[str, Any]:
    rules = "not known" if change.rules is None else ("known" if change.rules.beyond_known else "metadata only")
    return {
        "urn": change.urn, "type": change.type, "name": change.display_name, "action": change.action,
        "properties": [render_path(p) for p in change.paths], "replaceBecause": [render_path(p) for p in change.replace_because],
        "refusedByApi": [render_path(p) for p in change.refused], "rules": rules, "source": change.rules.source if change.rules else None,
        "describe": describe(change),
    }


def _disruption_document(d: Disruption, price: float | None) -> dict[str, Any]:
    return {
        "kind": d.kind, "resource": d.change.urn, "name": d.change.display_name, "count": d.count, "order": d.order, "why": d.why,
        "minutesEach": d.whole_minutes_each, "gpuNodeMinutes": d.node_minutes, "costUsd": None if d.cost(price) is None else round(d.cost(price) or 0, 2),
        "capacityKept": d.capacity_kept, "note": d.note,
    }


def _schedule_notes(changes: ChangeSet) -> list[str]:
    notes = []
    for change in changes:
        if change.type not in SCHEDULES or change.new is None:
            continue
        key, what = SCHEDULES[change.type]
        value = change.new.get(key)
        if not isinstance(value, str) or (change.type.startswith("aws:scheduler/") and not value.startswith("at(")):
            continue
        before = change.old.get(key) if change.old else None
        state = "new" if before is None else ("kept" if before == value else f"moved from {before}")
        notes.append(f"{what} {change.display_name}: {value} ({state})")
    return notes


def _secret_notes(changes: Iterable[ResourceChange], restarts: bool) -> list[str]:
    notes = []
    for change in changes:
        if change.type == SECRET and change.action in (REPLACE, "update"):
            after = "the restarting pods read it" if restarts else "running pods keep the old value until they restart"
            notes.append(f"Secret {change.display_name} changes ({describe(change)}): {after} ({SECRET_ENV_SOURCE})")
        elif change.type == CONFIG_MAP and change.action == REPLACE:
            notes.append(f"ConfigMap {change.display_name} is deleted, then re-created: pods that use it restart only through a checksum annotation")
    return notes


def _notes(changes: ChangeSet, found: list[Disruption], previous: PreviousState, minutes: Minutes | None) -> list[str]:
    notes = _schedule_notes(changes)
    notes += _secret_notes(changes, restarts=any(d.kind in ("pods", "weights") and d.order != "not now" for d in found))
    refused_updates = [c for c in changes if c.refused]
    notes += [f"{c.type} {c.display_name}: the API refuses to update {', '.join(render_path(p) for p in c.refused)}: the apply fails" for c in refused_updates]
    unknown = sorted({c.type for c in changes.changed() if c.rules is None})
    if unknown:
        notes.append(f"replacement rules not known for {', '.join(unknown)}: `pulumi preview --diff` decides update or replace")
    if not previous.complete:
        notes.append(f"{previous.source} has no state.json (an older plan): compared from resources.json, secrets masked, ids not known")
    if found and minutes is None:
        notes.append("minutes not known: no kimi-k3 settings or start-up figures for this stack")
    elif minutes is not None and found:
        notes.append(f"minutes from the time-to-serve estimate: pod re-created ~{math.ceil(minutes.pod_recreated)} min, "
                     f"with a weights transfer ~{math.ceil(minutes.pod_transfer)} min, new node ({minutes.node_case}) ~{math.ceil(minutes.node_start)} min")
    return notes


def review(previous: PreviousState, result: PlanResult, *, allow_disruption: bool = False) -> Review:
    """The review of ``result`` (the new run) against ``previous``."""
    changes = diff(previous, result.resources)
    block = block_context(result.plain_outputs(), result.now)
    minutes = minutes_for(result.settings)
    ids: Mapping[str, str] = {r.urn: r.id for r in result.resources if r.id}
    found = disruptions(changes, minutes, block, ids)
    return Review(previous.source, block, changes, tuple(found), minutes, tuple(_notes(changes, found, previous, minutes)), allow_disruption)


__all__ = ["SECRET_ENV_SOURCE", "Review", "describe", "review"]
