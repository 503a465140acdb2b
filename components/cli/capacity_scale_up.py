"""``kimi-k3 capacity scale-up STACK``: ask EKS for the block's GPU nodes now.

The operator's lever when an active block has fewer GPU nodes than it reserves (see
:mod:`kimi_k3.capacity.scale_up`). It changes the node group's desired size only;
the next ``pulumi up`` keeps it (desired size is not managed by Pulumi while it drifts
within the block's window).
"""

from __future__ import annotations

import argparse
from typing import Any

from kimi_k3.capacity import aws as capacity_aws
from kimi_k3.capacity import scale_up as scaling
from kimi_k3.capacity.status import describe_reservation
from kimi_k3.cli import capacity_clock
from kimi_k3.cli.arguments import add_stack_arguments
from kimi_k3.errors import UserError


def cmd_scale_up(args: argparse.Namespace) -> int:
    """Find the stack's GPU node group, check the block, set the desired size (or show it with --dry-run)."""
    from kimi_k3.stack.settings import cluster_name, load_stack  # loaded by this command only: the others start without it

    settings = load_stack(args.stack, args.program)
    rid = settings.capacity.reservation_id
    cluster = args.cluster or cluster_name(settings.project, settings.stack)
    if args.count is not None and args.count < 1:
        raise UserError(f"--count {args.count} is not accepted; a whole number from 1 to the block's reserved count")
    now = capacity_clock.utcnow()
    clients = capacity_aws.make_clients(settings.region)
    block = describe_reservation(clients.ec2, rid)
    eks = scaling.make_eks_client(settings.region)
    group = scaling.find_block_node_group(eks, cluster, rid)
    plan = scaling.plan_scale_up(group, block, now, args.count)
    print(f"Node group {group.name} of {cluster}: {group.desired_size} desired (min {group.min_size}, max {group.max_size}), status {group.status}")
    print(f"Capacity Block {rid}: {block.state}, {block.total_instances} reserved, ends {block.end:%Y-%m-%d %H:%M} UTC" if block.end else f"Capacity Block {rid}: {block.state}")
    if not plan.needed:
        print(f"Nothing to do: the node group already asks for {group.desired_size} node(s) (target {plan.target}).")
        return 0
    if args.dry_run:
        print(f"Would set desired size {group.desired_size} -> {plan.target} (scalingConfig {plan.scaling_config}); --dry-run: nothing sent.")
        return 0
    update = scaling.apply_scale_up(eks, plan)
    print(f"Asked EKS for {plan.target} node(s): update {update}. Watch it with `kubectl get nodes -l kimi-k3.io/node-pool=capacity-block -w`.")
    return 0


def add_subcommand(sub: Any) -> None:
    """Add ``capacity scale-up`` to the ``capacity`` subcommands."""
    p = sub.add_parser(
        "scale-up",
        help="ask EKS for the block's GPU nodes now (an active block with too few nodes)",
        description="Set the stack's Capacity Block node group to the reserved count now (EKS UpdateNodegroupConfig). "
        "Refused unless the block is active and more than 40 minutes from its end.",
    )
    add_stack_arguments(p)
    p.add_argument("--count", type=int, help="nodes to ask for (default: the block's reserved count)")
    p.add_argument("--cluster", help="EKS cluster name (default: the stack's, kimi-k3-STACK)")
    p.add_argument("--dry-run", action="store_true", help="show what would change, send nothing")
    p.set_defaults(func=cmd_scale_up)
