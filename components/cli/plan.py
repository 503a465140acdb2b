"""``kimi-k3 plan STACK``: run the program offline and write what it would declare."""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from pathlib import Path

from components import clock, offline
from components.settings import PROJECT_ROOT, StackSettings


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``plan`` subcommand."""
    parser = subparsers.add_parser(
        "plan",
        help="run the stack offline under Pulumi's mock engine and write resources.json + manifests/",
        description=(
            "Runs __main__.py for stacks/Pulumi.STACK.yaml under Pulumi's mock engine: no AWS credentials, "
            "no Pulumi CLI, no network. Secret config values are replaced by marked placeholders and never written."
        ),
    )
    parser.add_argument("stack", help="stack name (stacks/Pulumi.STACK.yaml)")
    parser.add_argument("--out", type=Path, help="output directory (default: build/plan/STACK)")
    parser.add_argument("--quiet", action="store_true", help="print only the key facts, not the resource tree")
    parser.add_argument(
        "--now", metavar="ISO8601",
        help="the moment the program runs, e.g. 2026-12-01T08:00:00Z (default: the clock); pin it to diff two plans byte for byte",
    )
    rehearse = parser.add_argument_group("rehearse the Capacity Block (the offline engine cannot read AWS)")
    rehearse.add_argument("--reservation-state", default="scheduled", choices=("scheduled", "active", "payment-pending", "payment-failed", "expired", "cancelled"))
    rehearse.add_argument("--reservation-az", help="AZ of the block (default: the first AZ of the region)")
    rehearse.add_argument("--reservation-count", type=int, help="instances in the block (default: what the stack needs)")
    rehearse.add_argument("--reservation-start", help="start, ISO 8601 UTC (default: the next 11:30 UTC at least 12 hours after --now)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the offline plan and print the summary."""
    now = clock.parse_moment(args.now, "--now") if args.now is not None else clock.program_now()
    start = clock.parse_moment(args.reservation_start, "--reservation-start") if args.reservation_start is not None else None

    def fixture(settings: StackSettings) -> offline.ReservationFixture:
        base = offline.default_reservation(settings, now)
        return offline.ReservationFixture(
            id=base.id,
            availability_zone=args.reservation_az or base.availability_zone,
            instance_type=base.instance_type,
            instance_count=args.reservation_count or base.instance_count,
            state=args.reservation_state,
            start=start or base.start,
        )

    result = offline.run_stack(args.stack, now=now, reservation=fixture)
    out = args.out or PROJECT_ROOT / "build" / "plan" / args.stack
    manifests = offline.write_plan(result, out)
    print(render_summary(result, out, len(manifests), tree=not args.quiet))
    return 0


def render_tree(result: offline.PlanResult) -> list[str]:
    """The resource tree, one line per resource, children indented under parents."""
    children: dict[str | None, list[offline.RecordedResource]] = {}
    known = {r.urn for r in result.resources}
    for resource in result.resources:
        parent = resource.parent_urn if resource.parent_urn in known else None
        children.setdefault(parent, []).append(resource)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for resource in sorted(children.get(parent, []), key=lambda r: r.urn):
            lines.append(f"{'  ' * depth}{resource.type}  {resource.name}")
            walk(resource.urn, depth + 1)

    walk(None, 1)
    return lines


def render_summary(result: offline.PlanResult, out: Path, manifest_count: int, *, tree: bool = True) -> str:
    """The readable summary printed after a plan."""
    outputs = result.plain_outputs()
    block = outputs.get("capacityBlock") or {}
    lines = [f"kimi-k3 offline plan — stack {result.stack} ({outputs.get('environment', '?')}), now {_when(result.now.isoformat()) if result.now else '?'}", ""]
    if tree:
        lines.append(f"Resources ({len(result.resources)}):")
        lines.extend(render_tree(result))
        lines.append("")
    lines += [
        "Key facts:",
        f"  region            {outputs.get('region')}",
        f"  network AZs       {', '.join(outputs.get('availabilityZones', []))}",
        f"  capacity block    {block.get('id')} — {block.get('state')} (offline fixture), AZ {block.get('availabilityZone')}",
        f"  block window      {_when(block.get('start'))} -> {_when(block.get('end'))}",
        f"  GPU nodes         {outputs.get('gpuNodes')} x {block.get('instanceType')} ({outputs.get('gpusTotal')} GPUs)",
    ]
    for key, label in (("endpoint", "endpoint"), ("servedModelName", "served model"), ("image", "image"), ("modelRevision", "model revision")):
        if key in outputs:
            lines.append(f"  {label:<17} {outputs[key]}")
    if result.warnings:
        lines += ["", "Warnings:"] + [f"  - {w}" for w in result.warnings]
    if result.settings and any(getattr(s, "placeholder", False) for s in (result.settings.serving.api_key, result.settings.serving.hugging_face_token)):
        lines += ["", "Secrets: secure: config values cannot be decrypted offline; a marked placeholder stood in and was written as [secret]."]
    lines += ["", f"Wrote {out / 'resources.json'} ({len(result.resources)} resources), {out / 'outputs.json'} and {manifest_count} manifests in {out / 'manifests'}"]
    return "\n".join(lines)


def _when(value: str | None) -> str:
    if not value:
        return "?"
    moment = datetime.fromisoformat(value).astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


__all__ = ["add_parser", "render_summary", "render_tree", "run", "json"]
