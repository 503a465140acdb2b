"""``kimi-k3 capacity extend-offerings`` / ``extend``: lengthen a stack's Capacity Block.

Like ``purchase``, buying an extension is irreversible and asks for an explicit "yes"
(``--yes`` for automation; without a terminal and without ``--yes`` it refuses before any
AWS call). The rules and AWS calls live in :mod:`kimi_k3.capacity.extensions`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kimi_k3.capacity import aws as capacity_aws
from kimi_k3.capacity import extensions as ext
from kimi_k3.capacity import status
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.cli import capacity_clock
from kimi_k3.cli.arguments import add_stack_arguments, whole_number
from kimi_k3.cli.capacity_tables import hours_text, print_offerings
from kimi_k3.cli.purchase import add_yes_flag, confirm_offer, refuse_without_confirmation
from kimi_k3.core.human_time import minute_text
from kimi_k3.errors import UserError


def _stack_block(stack: str, program: Path | None = None) -> tuple[Any, str]:
    """The stack's settings (of the project at ``program``, else found from here) and its reservation id."""
    from kimi_k3.stack.settings import load_stack  # loaded by this command only: the others start without it

    settings = load_stack(stack, program)
    rid = settings.capacity.reservation_id
    if not rid:
        raise UserError(f"stack {stack} has no {capacity_clock.CONFIG_KEY}: there is no Capacity Block to extend")
    return settings, rid


def _extendable(clients: capacity_aws.Clients, rid: str) -> CapacityBlockFacts:
    reservation = status.describe_reservation(clients.ec2, rid)
    ext.check_extendable(reservation, capacity_clock.utcnow())
    return reservation


def cmd_extend_offerings(args: argparse.Namespace) -> int:
    """List extension offerings of ``--days`` for the stack's block, cheapest first."""
    days = ext.validate_days(args.days)
    settings, rid = _stack_block(args.stack, args.program)
    clients = capacity_aws.make_clients(settings.region)
    reservation = _extendable(clients, rid)
    offerings = ext.find_extension_offerings(clients.ec2, rid, days)
    rows = ([o.offering_id, minute_text(o.extension_end), hours_text(o.duration_hours), f"{o.upfront_fee:,.2f}", o.currency] for o in offerings)
    print_offerings(f"Extensions of {rid} ({reservation.instance_count} x {reservation.instance_type}, ends {minute_text(reservation.end)} UTC) by {days} days:",
                    ["OFFERING", "NEW END (UTC)", "DURATION", "UPFRONT FEE", "CURRENCY"], rows,
                    "No extension offerings: extensions are not guaranteed; try another duration or later.",
                    f"kimi-k3 capacity extend {args.stack} OFFERING_ID --days {days}")
    return 0


def cmd_extend(args: argparse.Namespace) -> int:
    """Re-find the offering, show the new end and the fee, confirm, buy."""
    ext.validate_extension_offering_id(args.offering_id)
    days = ext.validate_days(args.days)
    refuse_without_confirmation(args.yes, "buy a Capacity Block extension")
    settings, rid = _stack_block(args.stack, args.program)
    clients = capacity_aws.make_clients(settings.region)
    reservation = _extendable(clients, rid)
    offering = ext.find_extension_offering(clients.ec2, rid, days, args.offering_id)
    heading = f"Extension {offering.offering_id} of {rid}: {reservation.instance_count} x {reservation.instance_type} in {reservation.availability_zone}"
    end = f"{minute_text(reservation.end)} UTC -> {minute_text(offering.extension_end)} UTC (+{hours_text(offering.duration_hours)})"
    if not confirm_offer(args.yes, offering, heading, {"end": end},
                         "An extension cannot be cancelled or refunded; its payment can stay pending for up to 12 hours.", "Extend the block", "Not extended."):
        return 1
    bought = ext.purchase_extension(clients.ec2, rid, offering.offering_id)
    print(f"\nExtension bought: status {bought.status}; {rid} keeps its id and will end {minute_text(bought.end)} UTC once paid.")
    print(f"When the payment has succeeded, run `pulumi up -s {args.stack}`: outputs, alert rules and the dashboard re-derive the end from the reservation.")
    print(f"Then check EKS's scale-down action moved: kimi-k3 status {args.stack}")
    return 0


def add_subcommands(sub: Any) -> None:
    """Add ``extend-offerings`` and ``extend`` to the ``capacity`` subparsers."""
    p = sub.add_parser("extend-offerings", help="list extensions of a stack's Capacity Block, cheapest first")
    add_stack_arguments(p)
    p.add_argument("--days", type=whole_number, required=True, help="extension length: 1-14 days, or 21-182 in multiples of 7")
    p.set_defaults(func=cmd_extend_offerings)

    p = sub.add_parser(
        "extend",
        help="buy an extension of a stack's Capacity Block (irreversible; asks for confirmation)",
        description="Extend the stack's Capacity Block. --days must be the one the offering was listed with, "
        "so the new end and the fee can be shown again before buying.",
    )
    add_stack_arguments(p)
    p.add_argument("offering_id", metavar="OFFERING_ID", help="id from `kimi-k3 capacity extend-offerings`")
    p.add_argument("--days", type=whole_number, required=True, help="the length the offering was listed with")
    add_yes_flag(p)
    p.set_defaults(func=cmd_extend)
