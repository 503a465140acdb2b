"""``kimi-k3 capacity update-nodes STACK``: the GPU node group's AMI / Kubernetes / launch template update during a block.

The way through the change review's refusal (``kimi-k3 plan`` refuses such a change while the block
serves: EKS upgrades a Capacity Block node group only at desired size 0). It prints the plan first —
the steps left, the block's time left, the serving downtime and what it costs, and whether it ends
before EKS's scale-down — and changes nothing without ``--yes`` or a ``yes`` typed at a terminal.
The steps and their rules live in :mod:`kimi_k3.capacity.node_update`.

The versions are the flags', else the stack config's (``gpuAmiReleaseVersion`` and ``clusterVersion``, the values
the stack's plan declares for the node group; a launch template version is a number ``pulumi up`` makes, so only a
flag gives it); the
downtime comes from the project's figures (:func:`kimi_k3.offline.impact.node_update_figures`): the serving
front's drain (``DrainPlan.grace_s``) once per replica, the offline engine's time for a node group at size 0
(``NODE_GROUP_WITHOUT_JOIN_CHECK``) and the time-to-serve estimate of a new node with the block rate, as the
change review prices a node replacement (:func:`kimi_k3.offline.impact.minutes_for`).
"""

from __future__ import annotations

import argparse
import math
import sys
from datetime import timedelta
from typing import Any

from kimi_k3.capacity import aws as capacity_aws
from kimi_k3.capacity import node_update as nu
from kimi_k3.capacity import scale_up as scaling
from kimi_k3.capacity.status import describe_reservation
from kimi_k3.cli import capacity_clock
from kimi_k3.cli.arguments import add_stack_arguments, positive_int
from kimi_k3.cli.purchase import add_yes_flag, confirm
from kimi_k3.core.human_time import minute_text
from kimi_k3.errors import UserError

WAIT_FACTOR = 2
"""The waits give up after this many times the estimated downtime (the safety factor the estimate's ready timeout uses,
``estimate.recommended_ready_timeout_s``); a rerun resumes."""


def ticker() -> nu.Ticker:
    """The command's clock: its "now" plus the monotonic time waited (tests replace this to pin and skip the waits)."""
    return nu.Ticker(capacity_clock.utcnow())


def figures(settings: Any) -> nu.DowntimeFigures:
    """The stack's downtime figures (:func:`kimi_k3.offline.impact.node_update_figures`); UserError without start-up figures."""
    from kimi_k3.offline import impact  # loaded by this command only: the others start without it

    found = impact.node_update_figures(settings)
    if found is None:
        raise UserError(f"no start-up figures for {settings.capacity.instance_type}: the downtime of a node update cannot be estimated, nor whether it fits the block")
    return found


def wanted_versions(args: argparse.Namespace, settings: Any) -> tuple[nu.NodeVersions, str]:
    """The versions to update to and where they come from: the flags, else the stack's config (the values its plan declares:
    ``gpuAmiReleaseVersion`` and ``clusterVersion``)."""
    if args.kubernetes_version or args.release_version or args.launch_template_version is not None:
        lt = None if args.launch_template_version is None else str(args.launch_template_version)
        return nu.NodeVersions(args.kubernetes_version, args.release_version, lt), "from the flags"
    release = settings.capacity.ami_release_version
    if not release:
        raise UserError(f"stack {args.stack} pins no gpuAmiReleaseVersion: pass --release-version, --kubernetes-version or --launch-template-version")
    return nu.NodeVersions(settings.cluster.version, release), f"from the stack's config: clusterVersion, gpuAmiReleaseVersion of Pulumi.{args.stack}.yaml"


def _group_state(eks: Any, autoscaling: Any, cluster: str, rid: str, nodegroup: str | None) -> nu.NodeGroupState:
    name = nodegroup or scaling.find_block_node_group(eks, cluster, rid).name
    return nu.describe_state(eks, autoscaling, cluster, name)


def print_plan(plan: nu.NodeUpdatePlan) -> None:
    """The plan: the group, the block, the steps left, the downtime and its cost, the scale-down moment."""
    state, block, f = plan.state, plan.block, plan.figures
    g = state.size
    print(f"Node group {g.name} of {g.cluster}: {g.desired_size} desired, {state.instances} instance(s), status {g.status}, runs {state.versions.text()}")
    left = (block.end - plan.now) if block.end else timedelta(0)
    print(f"Capacity Block {block.reservation_id}: {block.state}, {block.total_instances} reserved, ends {minute_text(block.end)} UTC "
          f"({left.total_seconds() / 3600:.1f} h left); EKS scales the group to 0 at {minute_text(plan.scaledown_at)} UTC")
    if not plan.steps:
        print(f"Nothing to do: the group runs {plan.target.text()} and asks for {g.desired_size} node(s).")
        return
    print(f"Update to {plan.target.text()}, steps left:")
    for number, step in enumerate(plan.steps, 1):
        about = {
            nu.SCALE_IN: f"UpdateNodegroupConfig desired 0 (min 0); EKS drains the serving pods before terminating the nodes, one at a time "
                         f"(the PodDisruptionBudget), each up to {f.drain_s} s (the serving front's drain): up to {math.ceil(f.drain_rounds * f.drain_s / 60)} min; "
                         "wait until no instance is left",
            nu.UPDATE: (f"wait for the running version update {plan.resume_update}" if plan.resume_update else "UpdateNodegroupVersion")
                       + f" at size 0 (~{math.ceil(f.update_s / 60)} min), wait until DescribeUpdate says Successful",
            nu.SCALE_BACK: f"desired {block.total_instances} (the reserved count); a {f.node_case} node start ~{math.ceil(f.node_start_min)} min until it serves",
        }[step]
        print(f"  {number}. {step}: {about}")
    cost = "" if plan.cost_usd is None else f", {plan.cost_usd:,.0f} USD at {f.price_per_hour:,.2f} USD per instance-hour"
    print(f"Serving downtime: ~{plan.downtime_min} min from the first pod's stop until the new nodes serve, no replica at all for the last "
          f"~{plan.outage_min} min (up to {plan.node_minutes} GPU-node-minutes{cost}); "
          f"serving again ~{minute_text(plan.serving_again_at)} UTC, before the scale-down at {minute_text(plan.scaledown_at)} UTC")


def _go_ahead(yes: bool) -> bool:
    if yes:
        return True
    if not sys.stdin.isatty():
        print("Not started: stdin is not a terminal; pass --yes to go ahead (--dry-run shows the plan only).")
        return False
    sys.stdout.flush()
    if confirm("Stop serving and update the GPU nodes now? Type 'yes' to go ahead: "):
        return True
    print("Not started.")
    return False


def cmd_update_nodes(args: argparse.Namespace) -> int:
    """Read the block and the group, print the plan, then (``--yes`` or a typed yes) run the steps left."""
    from kimi_k3.stack.settings import cluster_name, load_stack  # loaded by this command only: the others start without it

    settings = load_stack(args.stack, args.program)
    target, source = wanted_versions(args, settings)
    rid = settings.capacity.reservation_id
    if not rid:
        raise UserError(f"stack {args.stack} has no {capacity_clock.CONFIG_KEY}: without a Capacity Block, update the node group with `pulumi up`")
    costs = figures(settings)
    cluster = args.cluster or cluster_name(settings.project, settings.stack)
    clock = ticker()
    now = clock.now()
    block = describe_reservation(capacity_aws.make_clients(settings.region).ec2, rid)
    eks, autoscaling = scaling.make_eks_client(settings.region), nu.make_autoscaling_client(settings.region)
    plan = nu.plan_node_update(_group_state(eks, autoscaling, cluster, rid, args.nodegroup), block, now, target, costs)
    print(f"Versions wanted ({source}): {target.text()}")
    print_plan(plan)
    if not plan.steps:
        return 0
    if args.dry_run:
        print("--dry-run: nothing sent.")
        return 0
    if not _go_ahead(args.yes):
        return 1
    wait = args.wait_minutes if args.wait_minutes is not None else WAIT_FACTOR * plan.downtime_min
    nu.run_node_update(nu.Clients(eks, autoscaling), plan, clock, now + timedelta(minutes=wait))
    print(f"Done. Watch the nodes come back: kimi-k3 status {args.stack} --kubeconfig kubeconfig.json --wait")
    return 0


def add_subcommand(sub: Any) -> None:
    """Add ``capacity update-nodes`` to the ``capacity`` subcommands."""
    p = sub.add_parser(
        "update-nodes",
        help="update the GPU node group's AMI / Kubernetes / launch template version during a block (drain, size 0, update, scale back)",
        description="Update the stack's Capacity Block node group while the block is active, the way EKS accepts it: drain and "
        "scale to 0, UpdateNodegroupVersion, scale back to the reserved count. Prints the plan (steps, downtime, cost) first; "
        "refused when it would not serve again before EKS's scale-down 40 minutes before the end. Rerun after a failure: it resumes.",
    )
    add_stack_arguments(p)
    p.add_argument("--release-version", metavar="VERSION", help="EKS AMI release to update to, e.g. 1.34.2-20251120 (default, with no version flag: the stack's gpuAmiReleaseVersion)")
    p.add_argument("--kubernetes-version", metavar="VERSION", help="Kubernetes version to update to, e.g. 1.34 (default, with no version flag: the stack's clusterVersion)")
    p.add_argument("--launch-template-version", type=positive_int, metavar="N", help="launch template version to update to (the number `pulumi up` made)")
    p.add_argument("--cluster", help="EKS cluster name (default: the stack's, kimi-k3-STACK)")
    p.add_argument("--nodegroup", help="node group name (default: the one tagged with the block's reservation id)")
    p.add_argument("--wait-minutes", type=positive_int, metavar="MIN",
                   help=f"give up waiting after this long (default: {WAIT_FACTOR} x the estimated downtime; a rerun resumes), never past the scale-down")
    p.add_argument("--dry-run", action="store_true", help="print the plan, send nothing")
    add_yes_flag(p)
    p.set_defaults(func=cmd_update_nodes)
