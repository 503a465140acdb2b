"""``kimi-k3 capacity``: find, buy, inspect and preflight EC2 Capacity Blocks.

Buying a block is irreversible and expensive, so it is an explicit operator
action here rather than a side effect of ``pulumi up``. The AWS logic lives in
:mod:`kimi_k3.capacity`; this module only wires argparse and prints.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import Any

from kimi_k3.capacity import assessment, preflight, status
from kimi_k3.capacity import aws as capacity_aws
from kimi_k3.capacity import offerings as capacity_offerings
from kimi_k3.cli import capacity_clock, capacity_extend, capacity_scale_up, capacity_update_nodes
from kimi_k3.cli.arguments import add_stack_arguments, whole_number
from kimi_k3.cli.capacity_tables import hours_text, print_offerings, relative, table
from kimi_k3.cli.purchase import add_yes_flag, confirm_offer, print_purchased, refuse_without_confirmation, search_flags, search_query
from kimi_k3.core import catalog
from kimi_k3.core.human_time import minute_text

DEFAULT_INSTANCE_TYPE = "p6-b300.48xlarge"


# --------------------------------------------------------------------------- commands


def _query(args: argparse.Namespace, now: datetime) -> capacity_offerings.OfferingQuery:
    """Validated offering search from the shared search flags (and --region)."""
    return search_query(args, now, capacity_offerings.build_offering_query, "start_before")


def cmd_offerings(args: argparse.Namespace) -> int:
    """List offerings, cheapest first."""
    now = capacity_clock.utcnow()
    query = _query(args, now)
    clients = capacity_aws.make_clients(args.region)
    offerings = capacity_offerings.find_offerings(clients.ec2, query)
    rows = ([o.offering_id, o.availability_zone, minute_text(o.start), minute_text(o.end), hours_text(o.duration_hours), f"{o.upfront_fee:,.2f}", o.currency]
            for o in offerings)
    print_offerings(f"Capacity Block offerings for {query.count} x {query.instance_type}, {query.days} days, in {clients.region} (cheapest first):",
                    ["OFFERING", "AZ", "START (UTC)", "END (UTC)", "DURATION", "UPFRONT FEE", "CURRENCY"], rows,
                    "No offerings matched. Try other dates, another duration or fewer instances.",
                    f"kimi-k3 capacity purchase OFFERING_ID {search_flags(args, clients.region, 'start_before')}")
    return 0


def cmd_purchase(args: argparse.Namespace) -> int:
    """Look the offering up, show price and window, confirm, buy, print the stack config line."""
    capacity_aws.validate_offering_id(args.offering_id)
    now = capacity_clock.utcnow()
    query = _query(args, now)
    refuse_without_confirmation(args.yes, "buy a Capacity Block")
    clients = capacity_aws.make_clients(args.region)
    offering = capacity_offerings.find_offering(clients.ec2, query, args.offering_id)
    heading = f"Offering {offering.offering_id}: {offering.instance_count} x {offering.instance_type} in {offering.availability_zone} ({clients.region})"
    window = f"{minute_text(offering.start)} UTC -> {minute_text(offering.end)} UTC, {hours_text(offering.duration_hours)}, starts {relative(offering.start, now, 'in', 'started')}"
    if not confirm_offer(args.yes, offering, heading, {"window": window}, "A Capacity Block purchase cannot be cancelled or refunded.",
                         "Buy this Capacity Block", "Not purchased."):
        return 1
    r = capacity_offerings.purchase_block(clients.ec2, offering.offering_id)
    print_purchased(f"Purchased: capacity reservation {r.reservation_id} (state {r.state}, {r.instance_count} x {r.instance_type} in {r.availability_zone}).",
                    capacity_clock.CONFIG_KEY, r.reservation_id, args.stack, "Before the block starts, run: kimi-k3 capacity preflight {stack}")
    return 0


def _print_one(view: status.ReservationView, now: datetime) -> None:
    """Detailed status of one reservation."""
    r, b = view.reservation, view.block
    az = f"{r.availability_zone} ({r.availability_zone_id})" if r.availability_zone_id else r.availability_zone
    print(f"{r.reservation_id}  {r.state}  ({r.reservation_type})")
    print(f"  instance type  {r.instance_type}")
    print(f"  AZ             {az}")
    print(f"  window         {minute_text(r.start)} UTC -> {minute_text(r.end)} UTC")
    print(f"  start          {relative(r.start, now, 'in', 'started')}")
    print(f"  end            {relative(r.end, now, 'in', 'ended')}")
    print(f"  instances      {r.instance_count} reserved, {r.in_use} in use, {r.available_instances} available")
    if b is not None:
        print(f"  block          {b.capacity_block_id}: interconnect {b.interconnect_status}, {b.unavailable} of {b.total} unavailable")


def cmd_status(args: argparse.Namespace) -> int:
    """Show one reservation, or all Capacity Block reservations in the region."""
    if args.reservation_id:
        capacity_aws.validate_reservation_id(args.reservation_id)
    if args.region is not None:
        capacity_aws.validate_region(args.region)
    now = capacity_clock.utcnow()
    clients = capacity_aws.make_clients(args.region)
    views = status.reservation_status(clients.ec2, args.reservation_id)
    if args.reservation_id:
        _print_one(views[0], now)
        return 0
    if not views:
        print(f"No Capacity Block reservations in {clients.region}.")
        return 0
    rows = [["RESERVATION", "STATE", "INSTANCE TYPE", "AZ", "START (UTC)", "END (UTC)", "STARTS/ENDS", "IN USE/RESERVED"]]
    for v in views:
        r = v.reservation
        if r.start is not None and r.start > now:
            when = relative(r.start, now, "starts in", "started")
        else:
            when = relative(r.end, now, "ends in", "ended")
        rows.append([r.reservation_id, r.state, r.instance_type, r.availability_zone, minute_text(r.start), minute_text(r.end), when, f"{r.in_use}/{r.instance_count}"])
    print(f"Capacity Block reservations in {clients.region} (now {minute_text(now)} UTC):")
    print(table(rows))
    return 0


def _vcpus(instance_type: str) -> int | None:
    """vCPUs per instance from the catalog, or None if the catalog does not know the type."""
    try:
        from kimi_k3.core.catalog import INSTANCE_TYPES  # loaded by this command only: the others start without it
    except ImportError:  # pragma: no cover - catalog is part of the package
        return None
    entry = INSTANCE_TYPES.get(instance_type)
    return None if entry is None else int(entry.vcpus)


def _network_azs(settings: Any) -> tuple[str, ...] | None:
    """The AZs the stack's network covers when its config lists them (``None``: derived at plan time, not checked)."""
    net = settings.network
    return tuple(net.availability_zones) if net.availability_zones and not net.existing_vpc_id else None


def _weights_bucket(settings: Any) -> str | None:
    """The bucket an S3-sourced stack syncs its weights from (``kimi-k3:weightsS3Uri``); None for Hugging Face."""
    location = settings.serving.contract.weights.s3_location
    return location.bucket if location is not None else None


def cmd_preflight(args: argparse.Namespace) -> int:
    """Go/no-go list for the stack's Capacity Block; exit 0 on go, 1 on no-go."""
    from kimi_k3.stack import project  # loaded by this command only: the others start without it
    from kimi_k3.stack import settings as stack_settings  # loaded by this command only: the others start without it
    from kimi_k3.stack import terms as stack_terms  # loaded by this command only: the others start without it

    s = stack_settings.load_settings(project.find_project(args.program, Path.cwd()), args.stack)
    now = capacity_clock.utcnow()
    clients = capacity_aws.make_clients(s.region)
    report = preflight.run_preflight(
        clients.ec2,
        clients.quotas,
        reservation_id=s.capacity.reservation_id,
        instance_type=s.capacity.instance_type,
        region=s.region,
        nodes_required=s.nodes_required,
        now=now,
        vcpus_per_node=_vcpus(s.capacity.instance_type),
        availability_zones=_network_azs(s),
        terms=stack_terms.CAPACITY_BLOCK,
        s3=clients.s3,
        weights_bucket=_weights_bucket(s) if clients.s3 is not None else None,
        weights_gb=catalog.KIMI_K3.weights_gb,
    )
    print(f"Preflight for stack {args.stack} ({s.environment}, {s.region}), reservation {report.reservation_id or '(none)'}, at {minute_text(now)} UTC:")
    for c in report.checks:
        print(f"{c.level:<4}  {c.code}: {c.message}")
    exists = report.reservation_id and not any(c.code == "reservation" and c.level == assessment.FAIL for c in report.checks)
    if exists:
        # shown, not counted: a pending or failed extension leaves the block as the checks above saw it
        from kimi_k3.capacity.extensions import read_extension_status  # loaded by this command only: the others start without it

        extension = read_extension_status(clients.ec2, report.reservation_id, now)
        if extension is not None:
            print(f"{extension.level:<4}  {extension.code}: {extension.message}")
    fails, warns = report.count(assessment.FAIL), report.count(assessment.WARN)
    if report.go:
        print(f"GO ({warns} warning{'s' if warns != 1 else ''}): `pulumi up -s {args.stack}` can proceed.")
        return 0
    print(f"NO-GO: {fails} check{'s' if fails != 1 else ''} failed; fix them before the block starts.")
    return 1


# --------------------------------------------------------------------------- wiring


def _add_search_flags(p: argparse.ArgumentParser, required: bool) -> None:
    """Flags shared by ``offerings`` and ``purchase`` (purchase re-finds the offering with them)."""
    p.add_argument("--instance-type", default=DEFAULT_INSTANCE_TYPE, help=f"EC2 instance type (default {DEFAULT_INSTANCE_TYPE})")
    p.add_argument("--count", type=whole_number, required=required, help="instances in the block, 1-64")
    p.add_argument("--days", type=whole_number, required=required, help="duration: 1-14 days, or 21-182 in multiples of 7")
    p.add_argument("--start-after", metavar="ISO", help="earliest start, e.g. 2026-06-10 or 2026-06-10T11:30Z (within 8 weeks)")
    p.add_argument("--start-before", metavar="ISO", help="latest start (within 8 weeks)")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``capacity`` with its ``offerings``/``purchase``/``status``/``preflight`` subcommands."""
    parser = subparsers.add_parser(
        "capacity",
        help="find, buy, inspect and preflight EC2 Capacity Blocks",
        description="EC2 Capacity Block operations. Buying is irreversible and never happens during `pulumi up`.",
    )
    sub = parser.add_subparsers(dest="capacity_command", required=True, metavar="ACTION")

    p = sub.add_parser("offerings", help="list Capacity Block offerings, cheapest first")
    _add_search_flags(p, required=True)
    p.add_argument("--region", help="AWS region (default: your AWS config)")
    p.set_defaults(func=cmd_offerings)

    p = sub.add_parser(
        "purchase",
        help="buy an offering (irreversible; asks for confirmation)",
        description="Buy a Capacity Block offering. The search flags must be those the offering was listed with, "
        "so the price and window can be shown again before buying.",
    )
    p.add_argument("offering_id", metavar="OFFERING_ID", help="cb-... id from `kimi-k3 capacity offerings`")
    _add_search_flags(p, required=True)
    add_yes_flag(p)
    p.add_argument("--stack", help="stack name to put into the printed `pulumi config set` command")
    p.add_argument("--region", help="AWS region (default: your AWS config)")
    p.set_defaults(func=cmd_purchase)

    p = sub.add_parser("status", help="state, window and usage of Capacity Block reservations")
    p.add_argument("reservation_id", metavar="RESERVATION_ID", nargs="?", help="cr-... id (default: all Capacity Blocks in the region)")
    p.add_argument("--region", help="AWS region (default: your AWS config)")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("preflight", help="go/no-go checks on a stack's Capacity Block before it starts")
    add_stack_arguments(p)
    p.set_defaults(func=cmd_preflight)

    capacity_extend.add_subcommands(sub)
    capacity_scale_up.add_subcommand(sub)
    capacity_update_nodes.add_subcommand(sub)
    return parser
