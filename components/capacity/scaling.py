"""How the Capacity Block node group is sized in one ``pulumi up``, so that it reaches the reserved count whatever the timing.

The decision follows the block's phase at the run's ``now``
(:func:`kimi_k3.capacity.assessment.phase`):

- **before** the start: the group is created at desired 0 and a one-off Auto Scaling
  scheduled action raises *only the desired capacity* to the reserved count at
  ``max(start, now + margin)``. Auto Scaling refuses an action in the past (EC2 Auto Scaling
  API reference, PutScheduledUpdateGroupAction), and in a first ``up`` the action is created
  only after the cluster and the node group, :data:`SCALE_UP_MARGIN` after the program
  starts at the latest: a block starting inside that window is scaled up at ``now + margin``
  instead of being left without an action. Later runs leave the desired size alone
  (``ignore_changes``): the action owns it. The margin applies when the action is created,
  not on later runs: PutScheduledUpdateGroupAction overwrites an existing action
  (terraform-provider-aws ``internal/service/autoscaling/schedule.go`` creates and updates
  with the same ``resourceSchedulePut``), so a re-run that recomputed ``now + margin`` would
  move a pending scale-up later (a key rotation at 11:20 for a block at 11:30: to 12:05, 35
  minutes of idle reserved nodes). An action that already exists and still lies ahead keeps
  its time (:func:`keep_pending`; the caller reads it from the stack's previous state,
  :mod:`kimi_k3.stack.previous_run`).
- **serving** (active, or past its start while EC2 still says ``scheduled``): this run sets
  the desired size to the reserved count itself, without ``ignore_changes``, so a group left
  below the count (a first ``up`` that failed before its action was created, an action that
  fired before the block was active) is raised by the next ``up``. Nothing else legitimately
  moves the desired size inside the window: the reserved instances are paid for either way.
- **ending** (within an hour of the end): desired 0 for a new group, and the desired size is
  left alone (``ignore_changes``): EKS's own "Capacity Scaledown Before Reservation End"
  action takes it to 0 forty minutes before the end (EKS user guide, capacity-blocks-mng).
- **ended**: the group is kept at 0 (set explicitly), so the stack stays updatable.

The minimum stays 0 in every phase and the scheduled action leaves min and max alone:
pinning the minimum to the count would fight EKS's scale-down to 0 before the end. The
maximum is the reserved count: there is never capacity beyond the block.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kimi_k3.capacity.assessment import BEFORE, ENDED, ENDING, SERVING, phase
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.core.clock import utc

EKS_SCALEDOWN_BEFORE_END = timedelta(minutes=40)
"""EKS scales a Capacity Block node group to 0 this long before the block ends, by its scheduled action
"Amazon EKS Node Group Capacity Scaledown Before Reservation End" (EKS user guide, capacity-blocks-mng)."""

SCALE_UP_MARGIN = timedelta(minutes=45)
"""How long after the program starts the scale-up action is created, at the latest, in a first ``pulumi up``.

The modelled first ``up`` of this project's stacks creates the action 26 minutes after the
program starts: VPC subnets, the EKS control plane (15 minutes, aws/containers-roadmap#1227),
vpc-cni / kube-proxy / pod-identity add-ons (2), the system node group (5), CoreDNS and the
node monitoring agent (2), then the GPU node group (2) — the create times and their sources
are in ``components/offline/create_times.py``, and the offline engine refuses a plan whose
action would start before its modelled creation. 45 minutes leaves 19 minutes for a slow
control plane. A block starting within the margin is scaled up at ``now + margin``: up to 45
minutes of it unused, which ``kimi-k3 capacity scale-up STACK`` shortens by hand."""

SCALED_DESIRED_SIZE = "scalingConfig.desiredSize"
"""The node group property the scheduled action and EKS change outside Pulumi."""


@dataclass(frozen=True)
class ScalingPlan:
    """How the node group is sized in this run, and whether a scheduled action scales it later."""

    phase: str
    """The block's phase at ``now`` (``before``, ``serving``, ``ending``, ``ended``)."""
    min_size: int
    """Minimum size of the node group: 0 in every phase, so EKS can scale it to 0 before the block ends."""
    max_size: int
    """Maximum size of the node group: the reserved instance count, never more."""
    desired_size: int
    """Desired size declared in this run."""
    desired_managed: bool
    """True: this run sets the desired size (no ``ignore_changes``); False: the scheduled action or EKS own it."""
    scale_at: datetime | None
    """When the one-off scheduled action raises the desired capacity (``None``: no action)."""
    scale_to: int
    """The desired capacity the action sets (the reserved count)."""

    @property
    def ignore_changes(self) -> list[str]:
        """The node group's ``ignore_changes`` for this run."""
        return [] if self.desired_managed else [SCALED_DESIRED_SIZE]

    def summary(self) -> dict[str, Any]:
        """A plain description (the ``gpuScaling`` stack output): phase, the size now, when and to what it rises."""
        return {
            "phase": self.phase,
            "desiredNow": self.desired_size,
            "desiredSetByThisRun": self.desired_managed,
            "scaleUpAt": self.scale_at.isoformat() if self.scale_at else None,
            "reservedCount": self.scale_to,
        }


def describe(summary: dict[str, Any]) -> str:
    """One line for a :meth:`ScalingPlan.summary` (the plan's key facts): how many GPU nodes now, and when the count comes."""
    count, now = summary["reservedCount"], summary["desiredNow"]
    if summary["phase"] == BEFORE:
        at = datetime.fromisoformat(summary["scaleUpAt"]).strftime("%Y-%m-%d %H:%M UTC")
        return f"{now} now -> {count} at {at} (one-off scheduled action, desired capacity only)"
    if summary["phase"] == SERVING:
        return f"{now} now: this run sets the desired size to the reserved count ({count})"
    if summary["phase"] == ENDING:
        return f"{now} for a new group; running nodes stay until EKS scales the group to 0 forty minutes before the end"
    return f"kept at {now}: the block has ended"


def keep_pending(pending: datetime | None, fresh: datetime, now: datetime, not_before: datetime) -> datetime:
    """When a one-off schedule fires: ``pending``, the time of the one that already exists, while it still lies ahead.

    ``fresh`` is the time a new schedule would get in this run. A pending time is kept when it
    is after ``now`` and not before ``not_before`` (the earliest time the schedule may fire,
    e.g. the block's start); the earlier of the two wins, so a pending schedule is never moved
    later by a re-run. A pending time that has passed (the schedule fired) gives ``fresh``.
    """
    if pending is None:
        return fresh
    pending = utc(pending)
    if pending <= utc(now) or pending < utc(not_before):
        return fresh
    return min(pending, fresh)


def scaling_plan(
    facts: CapacityBlockFacts, now: datetime, margin: timedelta = SCALE_UP_MARGIN, pending_scale_up_at: datetime | None = None
) -> ScalingPlan:
    """The sizing of the block's node group in a run at ``now`` (see the module docstring).

    ``pending_scale_up_at``: the start time of this block's scale-up action as it exists already
    (a previous run's); kept while it lies ahead (:func:`keep_pending`).
    """
    now = utc(now)
    count = facts.instance_count
    start, _ = facts.window()
    current = phase(facts, now)
    if current == BEFORE:
        scale_at = keep_pending(pending_scale_up_at, max(start, now + margin), now, not_before=start)
        return ScalingPlan(current, 0, count, 0, desired_managed=False, scale_at=scale_at, scale_to=count)
    if current == SERVING:
        return ScalingPlan(current, 0, count, count, desired_managed=True, scale_at=None, scale_to=count)
    if current == ENDING:
        return ScalingPlan(current, 0, count, 0, desired_managed=False, scale_at=None, scale_to=count)
    assert current == ENDED
    return ScalingPlan(current, 0, count, 0, desired_managed=True, scale_at=None, scale_to=count)


__all__ = ["EKS_SCALEDOWN_BEFORE_END", "SCALED_DESIRED_SIZE", "SCALE_UP_MARGIN", "ScalingPlan", "describe", "keep_pending", "scaling_plan"]
