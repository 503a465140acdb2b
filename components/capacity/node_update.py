"""Update the Capacity Block node group during a block: drain, size 0, ``UpdateNodegroupVersion``, scale back (boto3, EKS API).

The operator's way through the rule the change review enforces (``kimi-k3 plan`` refuses an AMI,
Kubernetes version or launch template version change of the GPU node group while the block
serves): "When upgrading managed node groups with Capacity Blocks, make sure that the desired size
of the node group is set to 0" (EKS user guide, capacity-blocks-mng, Considerations). Behind
``kimi-k3 capacity update-nodes STACK``, in four steps:

1. **drain and size 0** — ``UpdateNodegroupConfig`` desired 0 (min 0). EKS drains every pod of a
   node before it terminates the node ("When a node in a managed node group is terminated due to a
   scaling action or update, every Pod on that node is drained first", EKS API reference,
   UpdateNodegroupVersion), so each serving pod runs its stop sequence (the serving front's
   :class:`~kimi_k3.serving.drain.DrainPlan`, up to its ``terminationGracePeriodSeconds``); the
   evictions respect the serving PodDisruptionBudget, one pod at a time, so the estimate counts one
   grace period per replica. The step waits until the group's Auto Scaling groups hold no instance.
2. **update** — ``UpdateNodegroupVersion`` with the release version, Kubernetes version and/or launch
   template version given, then waits for the update (``DescribeUpdate``) to be ``Successful``.
3. **scale back** — to the reserved count through :mod:`kimi_k3.capacity.scale_up` (the one home of
   that rule: the block must be active and before EKS's scale-down, 40 minutes before its end).

Each run reads where the group stands first (:func:`remaining_steps`) and does only what is left, so
a rerun after a failure or a timeout resumes. Time is an input (:class:`Ticker`): the first "now" is
the command's, later ones add the monotonic time waited.

What is refused before anything is sent (:func:`plan_node_update`): a block that is not active, an
update that would not be serving again before EKS's scale-down moment, a node group without the
block's reservation tag, an update already in progress, and version requests the EKS API refuses
(:func:`version_problem`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kimi_k3.capacity import rules
from kimi_k3.capacity.aws import aws_errors
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.capacity.scale_up import RESERVATION_TAG, NodeGroupSize, apply_scale_up, plan_scale_up
from kimi_k3.capacity.scaling import EKS_SCALEDOWN_BEFORE_END
from kimi_k3.core import clock
from kimi_k3.errors import UserError

UPDATE_NODEGROUP_VERSION_SOURCE = "EKS API reference, UpdateNodegroupVersion (https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupVersion.html)"
"""Where the version rules of :func:`version_problem` are written."""

POLL_S = 30
"""Seconds between two reads while waiting: the delay of botocore's own EKS ``NodegroupActive`` waiter (botocore
``data/eks/2017-11-01/waiters-2.json``)."""

SCALE_IN, UPDATE, SCALE_BACK = "drain and size 0", "update", "scale back"
STEPS = (SCALE_IN, UPDATE, SCALE_BACK)
"""The steps, in order."""

CUSTOM_AMI = "CUSTOM"
"""``amiType`` of a node group whose launch template names its own AMI."""


@dataclass(frozen=True)
class NodeVersions:
    """What a node group runs (``DescribeNodegroup``), or what an update asks for (``None``: not asked)."""

    kubernetes_version: str | None = None
    """Kubernetes version (``version``, e.g. ``1.34``)."""
    release_version: str | None = None
    """EKS AMI release (``releaseVersion``, e.g. ``1.34.2-20251120``)."""
    launch_template_version: str | None = None
    """Launch template version (``launchTemplate.version``, a whole number)."""

    def asked(self) -> dict[str, str]:
        """The requested values by their EKS names."""
        named = {"version": self.kubernetes_version, "releaseVersion": self.release_version, "launchTemplate.version": self.launch_template_version}
        return {k: v for k, v in named.items() if v is not None}

    def text(self) -> str:
        """``releaseVersion 1.34.2-20251215, launchTemplate.version 4`` (the values by their EKS names)."""
        return ", ".join(f"{k} {v}" for k, v in self.asked().items()) or "nothing"


@dataclass(frozen=True)
class NodeGroupState:
    """The Capacity Block node group as EKS (and its Auto Scaling groups) report it now."""

    size: NodeGroupSize
    """Its scaling config and status."""
    versions: NodeVersions
    """What it runs."""
    ami_type: str = ""
    """``amiType`` (``CUSTOM``: the launch template names the AMI)."""
    launch_template_id: str | None = None
    """The launch template it was created with (``launchTemplate.id``); ``None``: none."""
    reservation_tag: str | None = None
    """Its ``kimi-k3.io/capacity-reservation`` tag."""
    instances: int = 0
    """Instances in its Auto Scaling groups (``DescribeAutoScalingGroups``), terminating ones included."""
    in_progress: UpdateState | None = None
    """The update EKS is running on it (``ListUpdates`` + ``DescribeUpdate``), if any."""

    @classmethod
    def from_api(cls, nodegroup: dict[str, Any], instances: int = 0, in_progress: UpdateState | None = None) -> NodeGroupState:
        """Build from ``DescribeNodegroup``'s ``nodegroup``."""
        template = nodegroup.get("launchTemplate") or {}
        versions = NodeVersions(nodegroup.get("version"), nodegroup.get("releaseVersion"), template.get("version"))
        return cls(NodeGroupSize.from_api(nodegroup), versions, nodegroup.get("amiType", ""), template.get("id"),
                   (nodegroup.get("tags") or {}).get(RESERVATION_TAG), instances, in_progress)


@dataclass(frozen=True)
class UpdateState:
    """One EKS update of the node group (``DescribeUpdate``'s ``update``)."""

    id: str
    """Update id."""
    type: str
    """``VersionUpdate``, ``ConfigUpdate`` …"""
    status: str
    """``InProgress``, ``Successful``, ``Failed``, ``Cancelled``."""
    errors: tuple[str, ...] = ()
    """Its error messages (``errors[].errorMessage``)."""
    versions: NodeVersions = NodeVersions()
    """What a version update asks for (its ``params``: ``Version``, ``ReleaseVersion``, ``LaunchTemplateVersion``)."""

    @classmethod
    def from_api(cls, update: dict[str, Any]) -> UpdateState:
        """Build from ``DescribeUpdate``'s ``update``."""
        errors = tuple(f"{e.get('errorCode', '')}: {e.get('errorMessage', '')}".strip(": ") for e in update.get("errors") or [])
        params = {p.get("type"): p.get("value") for p in update.get("params") or []}
        versions = NodeVersions(params.get("Version"), params.get("ReleaseVersion"), params.get("LaunchTemplateVersion"))
        return cls(str(update["id"]), str(update.get("type", "")), str(update.get("status", "")), errors, versions)


@dataclass(frozen=True)
class DowntimeFigures:
    """What one node update costs the serving, from the project's own figures (the caller gathers them)."""

    drain_s: int
    """Longest stop of a serving pod: the serving front's ``DrainPlan.grace_s`` (``terminationGracePeriodSeconds``)."""
    drain_rounds: int
    """How many of those stops follow one another: EKS's node drain evicts, and the serving PodDisruptionBudget lets an
    eviction take one pod at a time (``kimi_k3.serving.base.PDB_MAX_UNAVAILABLE``; why the block-end drain scales the
    workload instead, :mod:`kimi_k3.serving.block_end`), so one round per replica."""
    update_s: int
    """The version update of a group at desired 0 (the offline engine's ``NODE_GROUP_WITHOUT_JOIN_CHECK`` create time)."""
    node_start_min: float
    """A new node until it serves: the time-to-serve estimate's ``cold`` or ``warm`` case, the one the change review prices."""
    node_case: str
    """Which estimate case :attr:`node_start_min` is."""
    price_per_hour: float | None
    """Block rate per instance-hour (the catalog's, as the change review prices); ``None``: not known."""

    def step_seconds(self, step: str) -> float:
        """How long ``step`` is expected to take."""
        return {SCALE_IN: self.drain_s * self.drain_rounds, UPDATE: self.update_s, SCALE_BACK: self.node_start_min * 60}[step]


@dataclass(frozen=True)
class NodeUpdatePlan:
    """What the update does from where the group stands, and what it costs."""

    state: NodeGroupState
    """The group now."""
    block: CapacityBlockFacts
    """The block now."""
    target: NodeVersions
    """What the update asks EKS for."""
    steps: tuple[str, ...]
    """The steps left, in order (empty: nothing to do)."""
    figures: DowntimeFigures
    """The figures the estimate comes from."""
    now: datetime
    """When the plan was made."""
    resume_update: str | None = None
    """A version update already running that this run waits for instead of starting one."""

    @property
    def scaledown_at(self) -> datetime:
        """EKS's scale-down moment: the block's end minus 40 minutes."""
        assert self.block.end is not None
        return self.block.end - EKS_SCALEDOWN_BEFORE_END

    @property
    def downtime_min(self) -> int:
        """Whole minutes from the first step left until the new nodes serve (capacity reduced from the first pod's stop)."""
        return math.ceil(sum(self.figures.step_seconds(s) for s in self.steps) / 60) if self.steps else 0

    @property
    def outage_min(self) -> int:
        """Whole minutes with no replica serving: from the last pod's stop (the drains follow one another) until the new nodes serve."""
        if not self.steps:
            return 0
        earlier = (self.figures.drain_rounds - 1) * self.figures.drain_s if SCALE_IN in self.steps else 0
        return math.ceil((sum(self.figures.step_seconds(s) for s in self.steps) - earlier) / 60)

    @property
    def serving_again_at(self) -> datetime:
        """When the nodes are expected to serve again."""
        return self.now + timedelta(minutes=self.downtime_min)

    @property
    def node_minutes(self) -> int:
        """GPU-node-minutes lost, at most: every reserved node for the whole downtime."""
        return self.block.total_instances * self.downtime_min

    @property
    def cost_usd(self) -> float | None:
        """The lost node-minutes at the block rate."""
        price = self.figures.price_per_hour
        return None if price is None else self.node_minutes / 60 * price


@dataclass
class Ticker:
    """The command's clock: ``start`` (its "now") plus the time waited since, and the sleep that waits."""

    start: datetime
    """The command's "now" (read once, at the entry point)."""
    monotonic: Callable[[], float] = time.monotonic
    """Seconds from a monotonic clock (durations only)."""
    sleep: Callable[[float], None] = time.sleep
    """Waits that many seconds."""
    _origin: float | None = field(default=None, repr=False)

    def now(self) -> datetime:
        """``start`` plus the monotonic seconds since the first call."""
        if self._origin is None:
            self._origin = self.monotonic()
        return clock.utc(self.start) + timedelta(seconds=self.monotonic() - self._origin)


def _release_key(release: str) -> tuple[int, ...]:
    version, _, date = release.partition("-")
    return (*(int(p) for p in version.split(".")), int(date or 0))


def _minor_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def version_problem(state: NodeGroupState, target: NodeVersions) -> str | None:
    """Why EKS would refuse to update ``state`` to ``target`` (``None``: it would not); the rules and their source.

    From the EKS API reference, UpdateNodegroupVersion: a launch template only for a group deployed with one;
    ``version`` and ``releaseVersion`` not with a launch template that uses a custom AMI ("don't specify
    releaseVersion, or the node group update will fail"); "You cannot roll back a node group to an earlier
    Kubernetes version or AMI version". An AMI release must be one of the Kubernetes version it runs
    (:func:`kimi_k3.capacity.rules.ami_release_problem`).
    """
    current = state.versions
    if not target.asked():
        return "nothing to update to: give --release-version, --kubernetes-version and/or --launch-template-version (the values the stack's plan wants)"
    if target.launch_template_version is not None:
        if state.launch_template_id is None:
            return (f"--launch-template-version {target.launch_template_version}: node group {state.size.name} was not created with a launch template, "
                    f"and EKS updates a group with a launch template only if it was deployed with one ({UPDATE_NODEGROUP_VERSION_SOURCE})")
        if not target.launch_template_version.isdigit() or int(target.launch_template_version) < 1:
            return f"--launch-template-version {target.launch_template_version!r} is not accepted; a launch template version number (1 or more)"
    if state.ami_type == CUSTOM_AMI and (target.release_version or target.kubernetes_version):
        flag = "--release-version" if target.release_version else "--kubernetes-version"
        return (f"{flag} is not accepted: node group {state.size.name}'s launch template uses a custom AMI, and EKS fails such an update when "
                f"version or releaseVersion is given ({UPDATE_NODEGROUP_VERSION_SOURCE}); put the new AMI in a new launch template version "
                "and pass only --launch-template-version")
    kubernetes = target.kubernetes_version or current.kubernetes_version
    if target.kubernetes_version and current.kubernetes_version and _minor_key(target.kubernetes_version) < _minor_key(current.kubernetes_version):
        return (f"--kubernetes-version {target.kubernetes_version} is older than the group's {current.kubernetes_version}: "
                f"EKS cannot roll a node group back to an earlier Kubernetes version ({UPDATE_NODEGROUP_VERSION_SOURCE})")
    if target.release_version:
        problem = rules.ami_release_problem(target.release_version, kubernetes)
        if problem:
            return f"--release-version {target.release_version} is not accepted; {problem}"
        if current.release_version and rules.ami_release_problem(current.release_version) is None \
                and _release_key(target.release_version) < _release_key(current.release_version):
            return (f"--release-version {target.release_version} is older than the group's {current.release_version}: "
                    f"EKS cannot roll a node group back to an earlier AMI version ({UPDATE_NODEGROUP_VERSION_SOURCE})")
    return None


def at_target(state: NodeGroupState, target: NodeVersions) -> bool:
    """True when the group already runs every value ``target`` asks for."""
    current = state.versions
    return all(
        want is None or want == have
        for want, have in ((target.kubernetes_version, current.kubernetes_version), (target.release_version, current.release_version),
                           (target.launch_template_version, current.launch_template_version))
    )


def _same_asks(running: NodeVersions, target: NodeVersions) -> bool:
    """True when a running version update asks for no value other than ``target``'s (one it does not name is not checked)."""
    return all(have is None or want is None or have == want for have, want in (
        (running.kubernetes_version, target.kubernetes_version), (running.release_version, target.release_version),
        (running.launch_template_version, target.launch_template_version)))


def remaining_steps(state: NodeGroupState, target: NodeVersions, reserved: int) -> tuple[tuple[str, ...], str | None]:
    """The steps left from where the group stands, and the id of a running version update to wait for (resume).

    An update EKS is running refuses a new one (``ResourceInUseException``): a version update at size 0 is
    this flow's own and is waited for; a size-0 config update is waited for as the drain; anything else is refused.
    """
    running = state.in_progress
    if running is not None:
        if running.type == "VersionUpdate" and state.size.desired_size == 0 and _same_asks(running.versions, target):
            return (UPDATE, SCALE_BACK), running.id
        if running.type == "ConfigUpdate" and state.size.desired_size == 0 and not at_target(state, target):
            return (SCALE_IN, UPDATE, SCALE_BACK), None
        raise UserError(
            f"node group {state.size.name} has an update in progress ({running.type} {running.id}, desired size {state.size.desired_size}"
            + (f", to {running.versions.text()}" if running.versions.asked() else "") + "); "
            "EKS refuses another one until it ends (ResourceInUseException): wait for it "
            f"(aws eks describe-update --name {state.size.cluster} --nodegroup-name {state.size.name} --update-id {running.id}) and rerun"
        )
    if at_target(state, target):
        return ((SCALE_BACK,) if state.size.desired_size < reserved else ()), None
    if state.size.desired_size > 0 or state.instances > 0:
        return (SCALE_IN, UPDATE, SCALE_BACK), None
    return (UPDATE, SCALE_BACK), None


def plan_node_update(state: NodeGroupState, block: CapacityBlockFacts, now: datetime, target: NodeVersions, figures: DowntimeFigures) -> NodeUpdatePlan:
    """Check the update can be done now and list its steps (pure); UserError naming the refusal."""
    now = clock.utc(now)
    if state.reservation_tag != block.reservation_id:
        raise UserError(
            f"node group {state.size.name} is not the Capacity Block group of {block.reservation_id}: its {RESERVATION_TAG} tag is "
            f"{state.reservation_tag or 'missing'}; this command updates only the block's GPU node group"
        )
    if block.state != "active" or block.end is None:
        raise UserError(f"Capacity Block {block.reservation_id} is {block.state}: update the node group with `pulumi up` (no block serves, nothing to drain)")
    problem = version_problem(state, target)
    if problem:
        raise UserError(problem)
    steps, resume = remaining_steps(state, target, block.total_instances)
    plan = NodeUpdatePlan(state, block, target, steps, figures, now, resume)
    if steps and plan.serving_again_at > plan.scaledown_at:
        raise UserError(
            f"too late for a node update: {' + '.join(steps)} takes ~{plan.downtime_min} min (drain {figures.drain_rounds} x {figures.drain_s} s, update "
            f"{figures.update_s} s, a {figures.node_case} node start {math.ceil(figures.node_start_min)} min), serving again ~{plan.serving_again_at:%H:%M} UTC, "
            f"after EKS scales the group to 0 at {plan.scaledown_at:%Y-%m-%d %H:%M} UTC (40 min before the block ends); apply it with `pulumi up` after the block"
        )
    return plan


# --------------------------------------------------------------------------- the AWS side


def describe_state(eks: Any, autoscaling: Any, cluster: str, name: str) -> NodeGroupState:
    """The node group now: ``DescribeNodegroup``, its Auto Scaling groups' instances, and the update it runs (when ``UPDATING``)."""
    with aws_errors(eks.meta.region_name):
        nodegroup = eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]
    size = NodeGroupSize.from_api(nodegroup)
    running = running_update(eks, cluster, name) if size.status == "UPDATING" else None
    return NodeGroupState.from_api(nodegroup, count_instances(autoscaling, size.autoscaling_groups), running)


def running_update(eks: Any, cluster: str, name: str) -> UpdateState | None:
    """The node group's update in progress (``ListUpdates``, then ``DescribeUpdate`` of each until one is ``InProgress``)."""
    with aws_errors(eks.meta.region_name):
        for page in eks.get_paginator("list_updates").paginate(name=cluster, nodegroupName=name):
            for update_id in page.get("updateIds", []):
                update = UpdateState.from_api(eks.describe_update(name=cluster, nodegroupName=name, updateId=update_id)["update"])
                if update.status == "InProgress":
                    return update
    return None


def count_instances(autoscaling: Any, groups: tuple[str, ...]) -> int:
    """Instances in the Auto Scaling groups ``groups`` (``DescribeAutoScalingGroups``)."""
    if not groups:
        return 0
    with aws_errors(autoscaling.meta.region_name):
        found = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=list(groups))["AutoScalingGroups"]
    return sum(len(g.get("Instances") or []) for g in found)


def _in_use(err: Any, group: NodeGroupSize) -> UserError:
    message = " ".join(str(err.response.get("Error", {}).get("Message", "")).split())
    return UserError(
        f"EKS refused: node group {group.name} has an update in progress (ResourceInUseException: {message}); "
        "wait for it to end and rerun: the command resumes where the group stands"
    )


def _send(eks: Any, group: NodeGroupSize, call: Callable[[], dict[str, Any]]) -> str:
    """Run one EKS update call; its update id. ``ResourceInUseException`` (an update already running) becomes its own line."""
    from botocore.exceptions import ClientError

    with aws_errors(eks.meta.region_name):
        try:
            return str(call()["update"]["id"])
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "ResourceInUseException":
                raise _in_use(err, group) from None
            raise


def scale_to_zero(eks: Any, group: NodeGroupSize) -> str:
    """``UpdateNodegroupConfig`` min 0, desired 0 (max kept: EKS needs it at least 1); the update id."""
    config = {"minSize": 0, "maxSize": max(group.max_size, 1), "desiredSize": 0}
    return _send(eks, group, lambda: eks.update_nodegroup_config(clusterName=group.cluster, nodegroupName=group.name, scalingConfig=config))


def update_version(eks: Any, state: NodeGroupState, target: NodeVersions) -> str:
    """``UpdateNodegroupVersion`` with what ``target`` asks for (the launch template by the id the group was created with)."""
    group = state.size
    request: dict[str, Any] = {"clusterName": group.cluster, "nodegroupName": group.name}
    if target.kubernetes_version:
        request["version"] = target.kubernetes_version
    if target.release_version:
        request["releaseVersion"] = target.release_version
    if target.launch_template_version:
        request["launchTemplate"] = {"id": state.launch_template_id, "version": target.launch_template_version}
    return _send(eks, group, lambda: eks.update_nodegroup_version(**request))


def wait_update(eks: Any, group: NodeGroupSize, update_id: str, ticker: Ticker, deadline: datetime, poll_s: float = POLL_S) -> UpdateState:
    """Poll ``DescribeUpdate`` until the update ends; UserError unless ``Successful``, or at ``deadline``."""
    while True:
        with aws_errors(eks.meta.region_name):
            update = UpdateState.from_api(eks.describe_update(name=group.cluster, nodegroupName=group.name, updateId=update_id)["update"])
        if update.status == "Successful":
            return update
        if update.status in ("Failed", "Cancelled"):
            why = "; ".join(update.errors) or "no error reported"
            raise UserError(f"EKS update {update_id} ({update.type}) of node group {group.name} {update.status.lower()}: {why}; fix it and rerun (it resumes)")
        if ticker.now() + timedelta(seconds=poll_s) > deadline:
            raise UserError(f"EKS update {update_id} of node group {group.name} still {update.status} at {ticker.now():%H:%M} UTC; rerun to keep waiting (it resumes)")
        ticker.sleep(poll_s)


def wait_no_instances(autoscaling: Any, group: NodeGroupSize, ticker: Ticker, deadline: datetime, poll_s: float = POLL_S) -> None:
    """Poll the group's Auto Scaling groups until no instance is left (every pod drained, every node terminated)."""
    while (left := count_instances(autoscaling, group.autoscaling_groups)) > 0:
        if ticker.now() + timedelta(seconds=poll_s) > deadline:
            raise UserError(f"node group {group.name} still has {left} instance(s) at {ticker.now():%H:%M} UTC (pods draining?); rerun to keep waiting (it resumes)")
        ticker.sleep(poll_s)


@dataclass(frozen=True)
class Clients:
    """The boto3 clients the node update uses."""

    eks: Any
    """EKS client."""
    autoscaling: Any
    """Auto Scaling client (the group's instances)."""


def run_node_update(clients: Clients, plan: NodeUpdatePlan, ticker: Ticker, wait_deadline: datetime, say: Callable[[str], None] = print) -> NodeGroupState:
    """Do the plan's steps in order, each waited for; the group as it ends. A failure leaves a state a rerun resumes from.

    ``wait_deadline``: the latest time a wait may run to. Scaling back is asked only after the version update
    succeeded and the group reads at the target, and only through :func:`~kimi_k3.capacity.scale_up.plan_scale_up`
    at the moment it is sent (the block active, before the scale-down).
    """
    eks, group, running = clients.eks, plan.state.size, plan.state.in_progress
    deadline = min(wait_deadline, plan.scaledown_at)
    if SCALE_IN in plan.steps:
        if plan.state.size.desired_size > 0:
            update = scale_to_zero(eks, group)
            say(f"[{SCALE_IN}] asked EKS for desired 0 (update {update}); EKS drains each pod before terminating its node")
            wait_update(eks, group, update, ticker, deadline)
        elif running is not None and running.type == "ConfigUpdate":
            say(f"[{SCALE_IN}] waiting for the running config update {running.id}")
            wait_update(eks, group, running.id, ticker, deadline)
        wait_no_instances(clients.autoscaling, group, ticker, deadline)
        say(f"[{SCALE_IN}] node group {group.name} has no instance left")
    if UPDATE in plan.steps:
        update = plan.resume_update or update_version(eks, plan.state, plan.target)
        say(f"[{UPDATE}] {'waiting for the running' if plan.resume_update else 'asked EKS for'} version update {update} ({plan.target.text()})")
        wait_update(eks, group, update, ticker, deadline)
        say(f"[{UPDATE}] update {update} successful")
    state = describe_state(eks, clients.autoscaling, group.cluster, group.name)
    if SCALE_BACK in plan.steps:
        if not at_target(state, plan.target):
            raise UserError(f"node group {group.name} runs {state.versions.text()} after the update, not {plan.target.text()}: not scaling back; check it and rerun")
        scale = plan_scale_up(state.size, plan.block, ticker.now())
        update_id = apply_scale_up(eks, scale)
        say(f"[{SCALE_BACK}] asked EKS for {scale.target} node(s)" + (f" (update {update_id})" if update_id else " (already asked)"))
    return state


def make_autoscaling_client(region: str) -> Any:
    """An Auto Scaling client for ``region`` (the one place that makes one here; tests replace it)."""
    import boto3
    from botocore.config import Config

    with aws_errors(region):
        return boto3.session.Session(region_name=region).client(
            "autoscaling", config=Config(retries={"max_attempts": 4, "mode": "standard"}, user_agent_extra="kimi-k3-aws")
        )


__all__ = [
    "POLL_S", "SCALE_BACK", "SCALE_IN", "STEPS", "UPDATE", "UPDATE_NODEGROUP_VERSION_SOURCE", "Clients", "DowntimeFigures", "NodeGroupState",
    "NodeUpdatePlan", "NodeVersions", "Ticker", "UpdateState", "at_target", "count_instances", "describe_state", "make_autoscaling_client",
    "plan_node_update", "remaining_steps", "run_node_update", "running_update", "scale_to_zero", "update_version", "version_problem",
    "wait_no_instances", "wait_update",
]
