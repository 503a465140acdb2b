"""What a change does to a running Capacity Block: which GPU pods restart, whether weights move or GPU nodes are replaced.

From a :class:`~kimi_k3.offline.diff.ChangeSet` this finds the disruptions, each with its
order, the capacity kept and the GPU-node-minutes it costs:

* **GPU pods restart** — a workload whose pods request ``nvidia.com/gpu`` changes its pod
  template (the pod template hash changes: an image digest, an engine flag such as
  ``--max-model-len``, the start-up code shipped in a ConfigMap, whose digest the template
  carries in ``kimi-k3.io/startup-code-sha256``, the proxy config's
  ``kimi-k3.io/api-proxy-config-sha256``). A StatefulSet's ``RollingUpdate`` deletes and
  re-creates one pod at a time, highest ordinal first ("updating each Pod one at a time",
  Kubernetes docs, StatefulSets, Rolling Updates; ``podManagementPolicy: Parallel`` affects
  scaling only); a Deployment's ``Recreate`` stops every pod first; its ``RollingUpdate``
  cannot surge on a Capacity Block whose every node holds a replica, so ``maxUnavailable``
  pods at a time (none: the rollout waits on a Pending surge pod). Each pod costs the
  estimate's "pod re-created" minutes (:mod:`kimi_k3.weights.estimate`).
* **weights volumes replaced** — a replaced StatefulSet (any change to its immutable spec,
  e.g. the claim template) is deleted before it is re-created (a named object,
  pulumi-kubernetes ``deleteBeforeReplace``): every pod stops at once, and with
  ``persistentVolumeClaimRetentionPolicy.whenDeleted: Delete`` the claims go with it, the
  StorageClass's ``reclaimPolicy: Delete`` wipes the node-local volumes, and every replica
  transfers its weights again ("pod re-created" without node-local weights).
* **GPU nodes replaced** — the Capacity Block node group moves to a new AMI release,
  Kubernetes version or launch template version (EKS ``UpdateNodegroupVersion``: every
  node replaced, ``updateConfig.maxUnavailable`` at a time, ``MINIMAL``: terminate first),
  or the group itself is replaced (its new nodes launch into the block only once the old
  group's instances are gone: all at once). Each node is a new instance: a cold start
  ("warm" when the compile caches are in S3), weights transferred again.

Minutes come from the estimate's functions and the stack's settings, the price from the
catalog's block rate (:func:`kimi_k3.weights.estimate.block_price`); without kimi-k3
settings (someone else's program) the minutes are not known.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from kimi_k3.capacity.assessment import BEFORE, ENDED, ENDING, SERVING
from kimi_k3.capacity.node_update import DowntimeFigures
from kimi_k3.offline.create_times import NODE_GROUP_WITHOUT_JOIN_CHECK
from kimi_k3.offline.diff import CREATE, DELETE, REPLACE, UNCHANGED, ChangeSet, ResourceChange, render_path, value_at
from kimi_k3.offline.replacement_rules import covers
from kimi_k3.serving.base import PDB_MAX_UNAVAILABLE
from kimi_k3.stack import time_to_serve
from kimi_k3.weights import estimate

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
LEADER_WORKER_SET = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
POD_TEMPLATES: Mapping[str, tuple[str, ...]] = {
    "kubernetes:apps/v1:StatefulSet": ("spec", "template"),
    "kubernetes:apps/v1:Deployment": ("spec", "template"),
    LEADER_WORKER_SET: ("spec", "leaderWorkerTemplate"),
}
"""Workload types whose pods can hold GPUs, and where their pod template lives."""
NODE_VERSION_PATHS = ("launchTemplate.version", "releaseVersion", "version")
"""Node group properties EKS applies with UpdateNodegroupVersion (every node replaced; terraform-provider-aws node_group.go)."""
ANNOTATION_REASONS = {
    "kimi-k3.io/startup-code-sha256": "start-up code shipped in a ConfigMap (kimi-k3.io/startup-code-sha256)",
    "kimi-k3.io/api-proxy-config-sha256": "proxy config (kimi-k3.io/api-proxy-config-sha256)",
}
"""Checksum annotations of the serving pod template and what a change of each means."""
CAPACITY_BLOCK_UPGRADE_SOURCE = (
    "EKS user guide, Create a managed node group with Capacity Blocks for ML, Considerations "
    "(https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html): 'When upgrading managed node groups with "
    "Capacity Blocks, make sure that the desired size of the node group is set to 0'"
)
"""The rule a GPU node upgrade during a block breaks: EKS upgrades a Capacity Block node group only at desired size 0."""


@dataclass(frozen=True)
class BlockContext:
    """Where the block stands at the new run's ``now``."""

    phase: str | None
    """``before``, ``serving``, ``ending``, ``ended`` (:mod:`kimi_k3.capacity.assessment`); ``None``: not known."""
    start: datetime | None = None
    """Block start."""
    end: datetime | None = None
    """Block end."""
    nodes: int = 0
    """Instances the block reserves."""
    instance_type: str | None = None
    """Its instance type."""

    @property
    def serving(self) -> bool:
        """True while GPU pods can be serving: the block is active and not past EKS's scale-down."""
        return self.phase in (SERVING, ENDING)


def block_context(outputs: Mapping[str, Any], now: datetime | None) -> BlockContext:
    """The block from a kimi-k3 stack's outputs (``capacityBlock``, ``gpuScaling``), or a training plan's window."""
    block, scaling = outputs.get("capacityBlock") or {}, outputs.get("gpuScaling") or {}
    window = block or outputs.get("trainingPlan") or {}
    start = datetime.fromisoformat(window["start"]) if window.get("start") else None
    end = datetime.fromisoformat(window["end"]) if window.get("end") else None
    phase = scaling.get("phase")
    if phase is None and start and end and now:
        phase = BEFORE if now < start else (ENDED if now >= end else SERVING)
    nodes = int(block.get("instanceCount") or outputs.get("gpuNodes") or 0)
    return BlockContext(phase, start, end, nodes, block.get("instanceType") or window.get("instanceType"))


@dataclass(frozen=True)
class Minutes:
    """Per-replica or per-node minutes of serving lost, from the time-to-serve estimate, and the block rate."""

    pod_recreated: float
    """A pod re-created on its node (weights kept when node-local)."""
    pod_transfer: float
    """A pod re-created whose weights must be transferred again (volume wiped or emptyDir)."""
    node_start: float
    """A new node: boot, join, transfer, image, engine ("cold", or "warm" with compile caches in S3)."""
    node_case: str
    """Which estimate case :attr:`node_start` is."""
    price_per_hour: float | None
    """Block rate per instance-hour; ``None`` when unknown."""


def minutes_for(settings: Any) -> Minutes | None:
    """The stack's minutes (``None`` without kimi-k3 settings or start-up figures for its instance type)."""
    if settings is None or getattr(settings, "hyperpod", None) is not None:
        return None
    x = time_to_serve.startup_inputs(settings)
    if x.instance_type not in estimate.catalog.STARTUP_FACTS:
        return None
    case = "warm" if x.compile_cache else "cold"
    price = estimate.block_price(x.instance_type)
    return Minutes(
        pod_recreated=estimate.estimate_case(x, "pod re-created").minutes,
        pod_transfer=estimate.estimate_case(replace(x, node_local_weights=False), "pod re-created").minutes,
        node_start=estimate.estimate_case(x, case).minutes,
        node_case=case,
        price_per_hour=price.value if price else None,
    )


def node_update_figures(settings: Any) -> DowntimeFigures | None:
    """What ``kimi-k3 capacity update-nodes`` prices a GPU node update during a block with (``None`` as :func:`minutes_for`).

    The same node start and block rate as a node replacement here; the serving front's drain
    (``DrainPlan.grace_s``) once per replica, the PodDisruptionBudget letting EKS's drain evict one pod
    at a time (``PDB_MAX_UNAVAILABLE``); the update at size 0, the offline engine's create time of a
    node group without nodes (:data:`kimi_k3.offline.create_times.NODE_GROUP_WITHOUT_JOIN_CHECK`).
    """
    minutes = minutes_for(settings)
    if minutes is None:
        return None
    return DowntimeFigures(
        drain_s=settings.serving.front.drain.grace_s,
        drain_rounds=math.ceil(settings.serving.replicas / PDB_MAX_UNAVAILABLE),
        update_s=int(NODE_GROUP_WITHOUT_JOIN_CHECK.duration.total_seconds()),
        node_start_min=minutes.node_start, node_case=minutes.node_case, price_per_hour=minutes.price_per_hour,
    )


@dataclass(frozen=True)
class Disruption:
    """One consequence for the serving GPUs."""

    kind: str
    """``pods`` (GPU pods restart), ``weights`` (weights volumes replaced) or ``nodes`` (GPU nodes replaced)."""
    change: ResourceChange
    """The resource change behind it."""
    count: int
    """Pods (replicas) or nodes affected."""
    order: str
    """``one at a time``, ``2 at a time``, ``all at once`` or ``not now`` (OnDelete, a stalled rollout)."""
    why: str
    """What changed, in words."""
    minutes_each: float | None
    """Serving minutes lost per replica or node; ``None``: not known."""
    nodes_each: int = 1
    """GPU nodes per replica (a LeaderWorkerSet group holds several)."""
    replicas: int = 1
    """Replicas of the workload (for the capacity kept)."""
    note: str = ""
    """Anything the order does not say (a stalled rollout, a partition)."""
    upgrade: bool = False
    """True for a Capacity Block node group upgraded in place (EKS ``UpdateNodegroupVersion``: a new AMI release, Kubernetes
    version or launch template version), which EKS wants done at desired size 0 (:data:`CAPACITY_BLOCK_UPGRADE_SOURCE`)."""

    @property
    def whole_minutes_each(self) -> int | None:
        """:attr:`minutes_each` rounded up, as the plan's start-up estimate prints it."""
        return None if self.minutes_each is None else math.ceil(self.minutes_each)

    @property
    def node_minutes(self) -> int | None:
        """GPU-node-minutes lost in total (from :attr:`whole_minutes_each`, so the printed figures add up)."""
        each = self.whole_minutes_each
        if each is None or self.order == "not now":
            return None
        return self.count * self.nodes_each * each

    def cost(self, price_per_hour: float | None) -> float | None:
        """The lost node-minutes at the block rate."""
        minutes = self.node_minutes
        return None if minutes is None or price_per_hour is None else minutes / 60 * price_per_hour

    @property
    def capacity_kept(self) -> str:
        """How much serving capacity stays up while it happens."""
        if self.order == "all at once" or self.replicas <= 1:
            return "no capacity"
        if self.order == "one at a time":
            return "half capacity" if self.replicas == 2 else f"{self.replicas - 1}/{self.replicas} capacity"
        at_once = int(self.order.split()[0]) if self.order[0].isdigit() else 1
        return f"{max(self.replicas - at_once, 0)}/{self.replicas} capacity"


def _gpu_template(change: ResourceChange, before: bool = False) -> bool:
    prefix = POD_TEMPLATES.get(change.type)
    inputs = change.old if before else change.new
    if prefix is None or inputs is None:
        return False
    return "nvidia.com/gpu" in str(value_at(inputs, prefix))


def _replicas(inputs: Mapping[str, Any] | None) -> int:
    value = value_at(inputs, ("spec", "replicas"))
    return int(value) if isinstance(value, (int, float)) else 1


def _nodes_each(change: ResourceChange) -> int:
    if change.type != LEADER_WORKER_SET:
        return 1
    size = value_at(change.new or change.old, ("spec", "leaderWorkerTemplate", "size"))
    return int(size) if isinstance(size, (int, float)) else 1


def _flags(args: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    items = [str(a) for a in args] if isinstance(args, list) else []
    for i, item in enumerate(items):
        if item.startswith("--"):
            key, _, value = item.partition("=")
            out[key] = value if value else (items[i + 1] if i + 1 < len(items) and not items[i + 1].startswith("--") else "")
    return out


def _short(value: Any, limit: int = 48) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def template_reasons(change: ResourceChange) -> list[str]:
    """Why the pod template hash changes, in words (image digest, flags, annotations, other fields)."""
    prefix = POD_TEMPLATES.get(change.type, ("spec", "template"))
    reasons: list[str] = []
    for path in change.paths:
        if tuple(path[: len(prefix)]) != prefix:
            continue
        rest = path[len(prefix):]
        keys = [p for p in rest if isinstance(p, str)]
        if keys[-1:] == ["image"]:
            old, new = change.value(path, before=True), change.value(path)
            reasons.append("image digest" if "@sha256:" in str(old) and "@sha256:" in str(new) else "image")
        elif "args" in keys or "command" in keys:
            container = path[: len(prefix) + rest.index("args" if "args" in keys else "command") + 1]
            old, new = _flags(change.value(container, before=True)), _flags(change.value(container))
            moved = [f"{k} {_short(old.get(k, '(unset)'), 16)} -> {_short(new.get(k, '(unset)'), 16)}" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
            reasons += moved or ["container args"]
        elif "annotations" in keys:
            key = str(rest[-1])
            reasons.append(ANNOTATION_REASONS.get(key, f"annotation {key}"))
        elif "env" in keys:
            at = rest.index("env")
            entry = path[: len(prefix) + at + 2]
            name = value_at(change.new, (*entry, "name")) or value_at(change.old, (*entry, "name"))
            reasons.append(f"env {name}" if isinstance(name, str) else "container env")
        else:
            reasons.append(render_path(tuple(keys[:4])))
    return list(dict.fromkeys(reasons))


def _rollout(change: ResourceChange, replicas: int, spare_nodes: int) -> tuple[str, str]:
    """``(order, note)`` of a pod template update under the workload's update strategy."""
    inputs = change.new or {}
    if change.type == "kubernetes:apps/v1:StatefulSet":
        strategy = value_at(inputs, ("spec", "updateStrategy")) or {}
        if strategy.get("type") == "OnDelete":
            return "not now", "updateStrategy OnDelete: pods keep the old template until they are deleted"
        rolling = strategy.get("rollingUpdate") or {}
        at_once = rolling.get("maxUnavailable") or 1
        note = f"ordinals below partition {rolling['partition']} keep the old template" if rolling.get("partition") else ""
        return ("one at a time" if at_once == 1 else f"{at_once} at a time"), note
    if change.type == "kubernetes:apps/v1:Deployment":
        strategy = value_at(inputs, ("spec", "strategy")) or {}
        if strategy.get("type") == "Recreate":
            return "all at once", "strategy Recreate"
        rolling = strategy.get("rollingUpdate") or {}
        unavailable = _count(rolling.get("maxUnavailable", "25%"), replicas, up=False)
        surge = _count(rolling.get("maxSurge", "25%"), replicas, up=True)
        if surge and spare_nodes >= surge:
            return "surged", "a spare GPU node takes the surge pod: capacity kept"
        if unavailable == 0:
            return "not now", "maxUnavailable 0 and no spare GPU node in the block: the surge pod stays Pending and the rollout waits"
        return ("one at a time" if unavailable == 1 else f"{unavailable} at a time"), "no spare GPU node for a surge pod"
    rolling = value_at(inputs, ("spec", "rolloutStrategy", "rollingUpdateConfiguration")) or {}
    at_once = rolling.get("maxUnavailable") or 1
    return ("one at a time" if at_once == 1 else f"{at_once} at a time"), "LeaderWorkerSet: whole groups"


def _count(value: Any, replicas: int, *, up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = replicas * float(value[:-1]) / 100
        return math.ceil(exact) if up else math.floor(exact)
    return int(value or 0)


def _wipes_claims(change: ResourceChange, storage_classes: Mapping[str, Mapping[str, Any]]) -> bool:
    inputs = change.old or {}
    templates = value_at(inputs, ("spec", "volumeClaimTemplates")) or []
    retention = (value_at(inputs, ("spec", "persistentVolumeClaimRetentionPolicy")) or {}).get("whenDeleted", "Retain")
    if not templates or retention != "Delete":
        return False
    classes = [value_at(t, ("spec", "storageClassName")) for t in templates]
    return any((storage_classes.get(str(c)) or {}).get("reclaimPolicy", "Delete") == "Delete" for c in classes)


def workload_disruptions(changes: ChangeSet, minutes: Minutes | None, block: BlockContext) -> list[Disruption]:
    """GPU pods restarting, and weights volumes replaced, from the GPU workloads' changes."""
    classes = {
        str(value_at(c.new or c.old, ("metadata", "name"))): (c.new or c.old or {})
        for c in changes if c.type == STORAGE_CLASS
    }
    out: list[Disruption] = []
    for change in changes:
        if change.type not in POD_TEMPLATES or change.action == UNCHANGED:
            continue
        if not (_gpu_template(change) or _gpu_template(change, before=True)):
            continue
        replicas = _replicas(change.new or change.old)
        each = _nodes_each(change)
        spare = max(block.nodes - replicas * each, 0)
        if change.action in (REPLACE, DELETE, CREATE):
            transfer = minutes.pod_transfer if minutes else None
            if change.action == CREATE:
                out.append(Disruption("pods", change, replicas, "all at once", "new workload: pods start", transfer, each, replicas))
                continue
            why = "replaced: " + ", ".join(render_path(p) for p in change.replace_because) if change.action == REPLACE else "deleted"
            wiped = change.type == "kubernetes:apps/v1:StatefulSet" and _wipes_claims(change, classes)
            kind = "weights" if wiped else "pods"
            note = ("deleted before it is re-created (a named object); claims deleted with it (whenDeleted: Delete), "
                    "local volumes reclaimed (reclaimPolicy: Delete): weights transferred again") if wiped else "every pod stops before the new ones start"
            out.append(Disruption(kind, change, replicas, "all at once", why, transfer, each, replicas, note))
            continue
        reasons = template_reasons(change)
        if not reasons:
            continue
        order, note = _rollout(change, replicas, spare)
        if order == "surged":
            continue
        node_local = bool(value_at(change.new, ("spec", "volumeClaimTemplates")))
        each_minutes = (minutes.pod_recreated if node_local else minutes.pod_transfer) if minutes else None
        out.append(Disruption("pods", change, replicas, order, "spec.template (" + ", ".join(reasons) + ")", each_minutes, each, replicas, note))
    return out


def node_disruptions(changes: ChangeSet, minutes: Minutes | None, block: BlockContext, ids: Mapping[str, str]) -> list[Disruption]:
    """GPU nodes replaced: the Capacity Block node group replaced, or moved to a new AMI release / version / launch template version."""
    groups = [c for c in changes if c.type == NODE_GROUP and (value_at(c.new or c.old, ("capacityType",)) == "CAPACITY_BLOCK")]
    templates = {ids.get(c.urn): c for c in changes if c.type == LAUNCH_TEMPLATE and c.action == "update" and ids.get(c.urn)}
    each = minutes.node_start if minutes else None
    out: list[Disruption] = []
    for group in groups:
        nodes = block.nodes or int(value_at(group.new or group.old, ("scalingConfig", "maxSize")) or 0)
        if group.action == REPLACE:
            why = "replaced: " + ", ".join(render_path(p) for p in group.replace_because)
            note = "the new group's nodes launch into the block only once the old group's instances are gone"
            out.append(Disruption("nodes", group, nodes, "all at once", why, each, 1, nodes, note))
            continue
        moved = [p for p in group.paths if any(covers(v, p) for v in NODE_VERSION_PATHS)]
        template = templates.get(str(value_at(group.new, ("launchTemplate", "id"))))
        if not moved and template is None:
            continue
        reasons = [f"{render_path(p)} {_short(group.value(p, before=True), 24)} -> {_short(group.value(p), 24)}" for p in moved]
        if template is not None:
            reasons.append("launch template new version (" + ", ".join(render_path(p) for p in template.paths[:3]) + ")")
        at_once = int(value_at(group.new, ("updateConfig", "maxUnavailable")) or 1)
        order = "one at a time" if at_once == 1 else f"{at_once} at a time"
        out.append(Disruption(
            "nodes", group, nodes, order, ", ".join(reasons), each, 1, nodes, "UpdateNodegroupVersion, MINIMAL: each node terminated, then a new one launched",
            upgrade=True,
        ))
    return out


def disruptions(changes: ChangeSet, minutes: Minutes | None, block: BlockContext, ids: Mapping[str, str]) -> list[Disruption]:
    """Every disruption of the serving GPUs the change set causes (workloads first, then nodes)."""
    return [*workload_disruptions(changes, minutes, block), *node_disruptions(changes, minutes, block, ids)]


__all__ = [
    "ANNOTATION_REASONS", "CAPACITY_BLOCK_UPGRADE_SOURCE", "NODE_VERSION_PATHS", "POD_TEMPLATES",
    "BlockContext", "Disruption", "Minutes", "block_context", "disruptions", "minutes_for", "node_disruptions", "node_update_figures", "template_reasons",
    "workload_disruptions",
]
