"""``kimi-k3 hyperpod plans``: find, buy, inspect and extend SageMaker Flexible Training Plans.

A training plan is the capacity source of the HyperPod path's ``ml.p6-b300.48xlarge``
instance group (the EKS path uses EC2 Capacity Blocks, ``kimi-k3 capacity``).
Buying or extending one is a payment, so it is an explicit operator action here and
never a side effect of ``pulumi up``: ``purchase`` and ``extend`` show the price and
window again and need a typed ``yes`` on a terminal, or ``--yes``. Every command
prints JSON with ``--json``. The AWS logic lives in :mod:`kimi_k3.hyperpod.training_plans`.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import Any

from kimi_k3.capacity.aws import validate_region
from kimi_k3.cli.arguments import whole_number
from kimi_k3.cli.capacity_tables import hours_text, print_offerings, relative, table
from kimi_k3.cli.purchase import add_yes_flag, confirm_offer, print_purchased, refuse_without_confirmation, search_flags, search_query
from kimi_k3.core import clock
from kimi_k3.core.human_time import minute_text
from kimi_k3.hyperpod import training_plans as tp

DEFAULT_INSTANCE_TYPE = "ml.p6-b300.48xlarge"
"""The HyperPod instance type that holds one Kimi K3 replica."""
CONFIG_KEY = "kimi-k3:trainingPlanArn"
"""Stack config key a HyperPod stack reads its plan from (docs/hyperpod.md)."""


def utcnow() -> datetime:
    """The command's "now" (:func:`kimi_k3.core.clock.program_now`, read once per command; tests replace this to pin it)."""
    return clock.program_now()


def _print_json(value: Any) -> None:
    print(json.dumps(tp.as_json(value), indent=2, sort_keys=False))


def _query(args: argparse.Namespace, now: datetime) -> tp.OfferingQuery:
    return search_query(args, now, tp.build_offering_query, "end_before")


# --------------------------------------------------------------------------- commands


def cmd_offerings(args: argparse.Namespace) -> int:
    """List training plan offerings for a HyperPod cluster, cheapest first."""
    query = _query(args, utcnow())
    sm = tp.make_client(args.region)
    offerings = tp.search_offerings(sm, query)
    region = sm.meta.region_name
    if args.json:
        _print_json(offerings)
        return 0
    rows = ([o.offering_id, ",".join(o.availability_zones) or "-", minute_text(o.start), minute_text(o.end), hours_text(o.duration_hours),
             str(o.instance_count), f"{o.upfront_fee:,.2f}", o.currency] for o in offerings)
    print_offerings(f"Training plan offerings for {query.count} x {query.instance_type}, {query.days} days, for HyperPod clusters in {region} (cheapest first):",
                    ["OFFERING", "AZ", "START (UTC)", "END (UTC)", "DURATION", "INSTANCES", "UPFRONT FEE", "CURRENCY"], rows,
                    "No offerings matched. Try other dates, another duration or fewer instances.",
                    f"kimi-k3 hyperpod plans purchase OFFERING_ID --name NAME {search_flags(args, region, 'end_before')}")
    return 0


def cmd_purchase(args: argparse.Namespace) -> int:
    """Re-find the offering, show price and window, confirm, buy, print the stack config line."""
    tp.validate_offering_id(args.offering_id)
    tp.validate_plan_name(args.name)
    now = utcnow()
    query = _query(args, now)
    refuse_without_confirmation(args.yes, "buy a training plan")
    sm = tp.make_client(args.region)
    offering = tp.find_offering(sm, query, args.offering_id)
    region = sm.meta.region_name
    out = sys.stderr if args.json else sys.stdout
    heading = f"Offering {offering.offering_id}: {offering.instance_count} x {query.instance_type} in {','.join(offering.availability_zones) or '?'} ({region})"
    window = (f"{minute_text(offering.start)} UTC -> {minute_text(offering.end)} UTC, {hours_text(offering.duration_hours)}, "
              f"starts {relative(offering.start, now, 'in', 'started')}")
    if not confirm_offer(args.yes, offering, heading, {"window": window}, "A training plan purchase is a payment that this tool cannot undo.",
                         f"Buy training plan {args.name}", "Not purchased.", out):
        return 1
    arn = tp.create_plan(sm, args.name, offering.offering_id)
    if args.json:
        _print_json({"trainingPlanArn": arn, "name": args.name, "offering": offering})
        return 0
    print_purchased(f"Purchased: training plan {args.name} ({arn}); it becomes Scheduled once the payment is through.", CONFIG_KEY, arn, args.stack,
                    f"Check it with: kimi-k3 hyperpod plans status {args.name} --region {region}")
    return 0


def _print_plan(plan: tp.TrainingPlan, now: datetime) -> None:
    print(f"{plan.name}  {plan.status}" + (f"  ({plan.status_message})" if plan.status_message else ""))
    print(f"  arn            {plan.arn}")
    print(f"  for            {', '.join(plan.target_resources) or '-'}")
    print(f"  window         {minute_text(plan.start)} UTC -> {minute_text(plan.end)} UTC, {hours_text(plan.duration_hours)}")
    print(f"  start          {relative(plan.start, now, 'in', 'started')}")
    print(f"  end            {relative(plan.end, now, 'in', 'ended')}")
    print(f"  instances      {plan.total_instances} reserved, {plan.in_use_instances} in use, "
          f"{plan.available_instances} available, {plan.unhealthy_instances} unhealthy")
    print(f"  upfront fee    {plan.upfront_fee:,.2f} {plan.currency}")
    for c in plan.capacities:
        az = f"{c.availability_zone} ({c.availability_zone_id})" if c.availability_zone_id else c.availability_zone
        print(f"  capacity       {c.instance_count} x {c.instance_type} in {az}, {c.status}, {minute_text(c.start)} -> {minute_text(c.end)} UTC")


def cmd_status(args: argparse.Namespace) -> int:
    """Show one plan in detail, or every plan of the region."""
    if args.plan:
        tp.validate_plan_ref(args.plan)
    if args.region is not None:
        validate_region(args.region)
    now = utcnow()
    sm = tp.make_client(args.region)
    if args.plan:
        plan = tp.describe_plan(sm, args.plan)
        if args.json:
            _print_json(plan)
        else:
            _print_plan(plan, now)
        return 0
    plans = tp.list_plans(sm)
    if args.json:
        _print_json(plans)
        return 0
    region = sm.meta.region_name
    if not plans:
        print(f"No training plans in {region}.")
        return 0
    rows = [["PLAN", "STATUS", "FOR", "START (UTC)", "END (UTC)", "STARTS/ENDS", "IN USE/RESERVED"]]
    for p in plans:
        when = relative(p.start, now, "starts in", "started") if p.start and p.start > now else relative(p.end, now, "ends in", "ended")
        rows.append([p.name, p.status, ",".join(p.target_resources) or "-", minute_text(p.start), minute_text(p.end), when, f"{p.in_use_instances}/{p.total_instances}"])
    print(f"Training plans in {region} (now {minute_text(now)} UTC):")
    print(table(rows))
    return 0


def cmd_extend(args: argparse.Namespace) -> int:
    """Without ``--offering``: list extension offerings. With it: confirm and buy that extension."""
    tp.validate_plan_ref(args.plan)
    if args.region is not None:
        validate_region(args.region)
    if args.offering:
        refuse_without_confirmation(args.yes, "extend a training plan")
    sm = tp.make_client(args.region)
    plan = tp.describe_plan(sm, args.plan)
    out = sys.stderr if args.json else sys.stdout
    if not args.offering:
        offerings = tp.search_extension_offerings(sm, plan, args.days)
        if args.json:
            _print_json(offerings)
            return 0
        rows = ([o.offering_id, o.availability_zone or "-", minute_text(o.start), minute_text(o.end), hours_text(o.duration_hours), f"{o.upfront_fee:,.2f}", o.currency]
                for o in offerings)
        days = f" --days {args.days}" if args.days else ""
        print_offerings(f"Extension offerings for training plan {plan.name} ({plan.status}, ends {minute_text(plan.end)} UTC), cheapest first:",
                        ["EXTENSION OFFERING", "AZ", "START (UTC)", "NEW END (UTC)", "DURATION", "UPFRONT FEE", "CURRENCY"], rows,
                        "No extension offerings now. Capacity for an extension is not guaranteed; try another duration later.",
                        f"kimi-k3 hyperpod plans extend {plan.name} --offering EXTENSION_OFFERING{days} --region {sm.meta.region_name}")
        return 0
    offering = tp.find_extension_offering(sm, plan, args.offering, args.days)
    heading = f"Extend training plan {plan.name} (ends {minute_text(plan.end)} UTC) with {offering.offering_id}:"
    extension = f"{minute_text(offering.start)} UTC -> {minute_text(offering.end)} UTC, {hours_text(offering.duration_hours)}, in {offering.availability_zone or '?'}"
    if not confirm_offer(args.yes, offering, heading, {"extension": extension}, "An extension is a payment that this tool cannot undo.",
                         f"Extend {plan.name}", "Not extended.", out):
        return 1
    extensions = tp.extend_plan(sm, offering.offering_id)
    if args.json:
        _print_json({"trainingPlanArn": plan.arn, "extensions": extensions})
        return 0
    for e in extensions:
        print(f"Extended: {e.offering_id} {minute_text(e.start)} -> {minute_text(e.end)} UTC, status {e.status or '-'}, payment {e.payment_status or '-'}.")
    print(f"The plan keeps its ARN; no stack change is needed. Check it with: kimi-k3 hyperpod plans status {plan.name}")
    return 0


# --------------------------------------------------------------------------- wiring


def _search_flags_to(p: argparse.ArgumentParser) -> None:
    p.add_argument("--instance-type", default=DEFAULT_INSTANCE_TYPE, help=f"HyperPod instance type (default {DEFAULT_INSTANCE_TYPE})")
    p.add_argument("--count", type=whole_number, required=True, help="instances to reserve: 1, 2, 4, 8, 16, 32 or 64")
    p.add_argument("--days", type=whole_number, required=True, help="duration: 1 to 182 days")
    p.add_argument("--start-after", metavar="ISO", help="earliest start, e.g. 2026-06-10 or 2026-06-10T11:30Z")
    p.add_argument("--end-before", metavar="ISO", help="latest end")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--region", help="AWS region (default: your AWS config)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def build_parser(prog: str = "kimi-k3 hyperpod plans") -> argparse.ArgumentParser:
    """The ``plans`` parser with its ``offerings``/``purchase``/``status``/``extend`` actions."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="SageMaker Flexible Training Plans for the HyperPod path. Buying and extending are payments and never happen during `pulumi up`.",
    )
    sub = parser.add_subparsers(dest="plans_command", required=True, metavar="ACTION")

    p = sub.add_parser("offerings", help="list training plan offerings for HyperPod clusters, cheapest first")
    _search_flags_to(p)
    _common(p)
    p.set_defaults(func=cmd_offerings)

    p = sub.add_parser("purchase", help="buy an offering as a training plan (irreversible; asks for confirmation)",
                       description="Buy a training plan offering. The search flags must be those it was listed with, so the price and window can be shown again.")
    p.add_argument("offering_id", metavar="OFFERING_ID", help="offering id from `kimi-k3 hyperpod plans offerings`")
    p.add_argument("--name", required=True, help="name of the new training plan (1-64 letters, digits, '-')")
    _search_flags_to(p)
    add_yes_flag(p)
    p.add_argument("--stack", help="stack name to put into the printed `pulumi config set` command")
    _common(p)
    p.set_defaults(func=cmd_purchase)

    p = sub.add_parser("status", help="state, window, AZ and usage of training plans")
    p.add_argument("plan", metavar="PLAN", nargs="?", help="plan name or ARN (default: every plan in the region)")
    _common(p)
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("extend", help="list extension offerings of a plan, or buy one with --offering (irreversible)")
    p.add_argument("plan", metavar="PLAN", help="plan name or ARN")
    p.add_argument("--days", type=whole_number, help="length of the extension in whole days (default: every length offered)")
    p.add_argument("--offering", metavar="EXTENSION_OFFERING", help="buy this extension offering (from the listing)")
    add_yes_flag(p)
    _common(p)
    p.set_defaults(func=cmd_extend)
    return parser
