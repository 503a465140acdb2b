"""``kimi-k3 plan STACK``: run a Pulumi program offline, write what it would declare, judge it with the policy pack.

The program is the project of ``--program DIR``, else the nearest ``Pulumi.yaml`` from
the current directory up (:mod:`kimi_k3.stack.project`): this repository's own program
when run inside it, someone's own program anywhere else. The plan goes to
``<project>/build/plan/STACK`` unless ``--out`` says otherwise.

``--previous DIR`` makes the run a later ``up`` of the stack the plan in DIR recorded
(``state.json``, :mod:`kimi_k3.offline.state`): the program reads that state where it reads
its stack's existing resources, and the plan prints the change review against it
(:mod:`kimi_k3.offline.review`, docs/change-review.md), writes ``review.json`` and exits 1
when the change replaces weights volumes or GPU nodes while the block serves, unless
``--allow-disruption`` (an in-place GPU node group upgrade stays refused: EKS upgrades a Capacity
Block node group only at desired size 0).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from kimi_k3 import offline
from kimi_k3.capacity import scaling
from kimi_k3.cli.arguments import add_stack_arguments
from kimi_k3.core import clock
from kimi_k3.core.catalog import DEFAULT_GPU_INSTANCE_TYPE
from kimi_k3.errors import UserError
from kimi_k3.guardrails import stack_policy
from kimi_k3.guardrails import verdict as policy_verdict
from kimi_k3.hyperpod.training_plan_check import TrainingPlanFacts
from kimi_k3.offline import state as plan_state
from kimi_k3.offline import training_plan_rehearsal
from kimi_k3.offline.rehearsal import STATES, Rehearsal
from kimi_k3.stack import lint as stack_lint
from kimi_k3.stack import project
from kimi_k3.stack.settings import StackSettings
from kimi_k3.weights import estimate

if TYPE_CHECKING:
    from kimi_k3.offline.review import Review


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``plan`` subcommand."""
    parser = subparsers.add_parser(
        "plan",
        help="run a Pulumi program offline under Pulumi's mock engine: resources.json, manifests/, helm/ and the policy verdict",
        description=(
            "Runs the program of a Pulumi project (the nearest Pulumi.yaml from the current directory up, or --program DIR) "
            "for stack STACK under Pulumi's mock engine: no AWS credentials, no Pulumi CLI, no network. Writes resources.json, "
            "outputs.json, manifests/ and helm/, then runs the kimi-k3-guardrails policy pack over what was declared: "
            "exit 1 on a mandatory violation. Secret config values are replaced by marked placeholders and never written."
        ),
    )
    add_stack_arguments(parser)
    parser.add_argument("--out", type=Path, metavar="DIR", help="output directory (default: <project>/build/plan/STACK)")
    parser.add_argument("--quiet", action="store_true", help="print only the key facts, not the resource tree")
    parser.add_argument(
        "--now", metavar="ISO8601",
        help="the moment the program runs, e.g. 2026-12-01T08:00:00Z (default: the clock); pin it to diff two plans byte for byte",
    )
    parser.add_argument(
        "--policy-config", type=Path, metavar="FILE",
        help="policy pack config, as for `pulumi preview --policy-pack-config` (default: <project>/policy/config/STACK.json if it exists, else the file of the stack's kimi-k3:environment, e.g. policy/config/dev.json; a prod stack's own file may only raise the rules)",
    )
    changes = parser.add_argument_group("review the change against an earlier plan (docs/change-review.md)")
    changes.add_argument(
        "--previous", type=Path, metavar="DIR",
        help="the --out directory of an earlier plan of this stack: run as a later `pulumi up` of it and print the change review",
    )
    changes.add_argument(
        "--allow-disruption", action="store_true",
        help="accept a change that replaces weights volumes or GPU nodes while the block serves (refused otherwise: exit 1); "
        "an in-place GPU node group upgrade stays refused (EKS: upgrade a Capacity Block node group at desired size 0)",
    )
    changes.add_argument("--json", action="store_true", help="print the change review as JSON (for machines) instead of the summary; needs --previous")
    rehearse = parser.add_argument_group("rehearse the Capacity Block (the offline engine cannot read AWS)")
    rehearse.add_argument("--reservation-state", default="scheduled", choices=STATES)
    rehearse.add_argument("--reservation-az", help="AZ of the block, in the stack's region (default: the stack's first AZ)")
    rehearse.add_argument("--reservation-count", type=int, help="instances in the block, 1 to 64 (default: what the stack needs)")
    rehearse.add_argument("--reservation-start", help="start, ISO 8601 UTC (default: the next 11:30 UTC at least 12 hours after --now)")
    plan = parser.add_argument_group("rehearse the training plan of a hyperpod stack (the offline engine cannot read AWS)")
    plan.add_argument("--training-plan-state", default="Scheduled", choices=training_plan_rehearsal.STATES)
    plan.add_argument("--training-plan-az", help="AZ of the plan's capacity, in the stack's region (default: the stack's first AZ)")
    plan.add_argument("--training-plan-count", type=int, help="instances reserved: 1, 2, 4 ... 64 (default: what the stack needs)")
    plan.add_argument("--training-plan-type", help="instance type reserved, e.g. ml.p5en.48xlarge (default: ml.<the stack's gpuInstanceType>)")
    plan.add_argument("--training-plan-start", help="start, ISO 8601 UTC (default: the next 11:30 UTC at least 12 hours after --now)")
    parser.set_defaults(func=run)


def _check_out(out: Path, given: bool) -> None:
    where = f"--out {out}" if given else f"the output directory {out}"
    if out.exists() and not out.is_dir():
        raise UserError(f"{where} is an existing file; give a directory: the plan writes resources.json, outputs.json, manifests/ and helm/ into it")


def _any_block(rehearsal: Rehearsal, region: str, now: datetime):
    """For a program of another project: whatever ``cr-`` id it looks up, one block shaped by the flags."""
    rehearsal.check(region, now)

    def reservation_for(reservation_id: str) -> offline.ReservationFixture:
        return rehearsal.fixture(
            reservation_id=reservation_id, instance_type=DEFAULT_GPU_INSTANCE_TYPE, instance_count=1, availability_zone=f"{region}a", now=now
        )

    return reservation_for


def run(args: argparse.Namespace) -> int:
    """Run the offline plan, print the summary and the policy verdict; 1 on a mandatory violation."""
    if args.json and args.previous is None:
        raise UserError("--json prints the change review: give --previous DIR (the --out directory of an earlier plan) with it")
    # Read before the plan is written: --out may be the very directory of the previous plan.
    previous = plan_state.read(args.previous) if args.previous is not None else None
    now = clock.parse_moment(args.now, "--now") if args.now is not None else clock.program_now()
    start = clock.parse_moment(args.reservation_start, "--reservation-start") if args.reservation_start is not None else None
    if start is None and previous is not None:
        start = previous.reservation_start  # the same block as the previous plan's: a Capacity Block does not move
    rehearsal = Rehearsal(state=args.reservation_state, availability_zone=args.reservation_az, instance_count=args.reservation_count, start=start)
    plan_start = clock.parse_moment(args.training_plan_start, "--training-plan-start") if args.training_plan_start is not None else None
    if plan_start is None and previous is not None:
        plan_start = previous.training_plan_start
    plan_rehearsal = training_plan_rehearsal.TrainingPlanRehearsal(
        state=args.training_plan_state, availability_zone=args.training_plan_az, instance_count=args.training_plan_count,
        instance_type=args.training_plan_type, start=plan_start,
    )
    proj = project.find_project(args.program, Path.cwd())
    stack = project.short_stack_name(args.stack)
    out = (args.out or proj.directory / "build" / "plan" / stack).resolve()
    _check_out(out, args.out is not None)
    stack_config = project.read_stack_config(proj, args.stack)
    if args.policy_config is not None:
        policy = policy_verdict.PolicyCheck.from_file(args.policy_config, flag="--policy-config")
    else:  # the stack's environment's config, or its own file over it (never weaker in prod)
        policy = stack_policy.stack_policy(proj, stack, stack_policy.stack_environment(stack_config.stack_values))

    def for_settings(settings: StackSettings) -> offline.ReservationFixture:
        """A kimi-k3 stack's block: its id, type and node count, shaped by the flags."""
        rehearsal.check(settings.region, now)
        base = offline.default_reservation(settings, now)
        return rehearsal.fixture(
            reservation_id=base.id, instance_type=base.instance_type, instance_count=base.instance_count,
            availability_zone=base.availability_zone, now=now,
        )

    def plan_for_settings(settings: StackSettings) -> TrainingPlanFacts:
        """A hyperpod stack's training plan: its ARN, instance type and node count, shaped by the flags."""
        plan_rehearsal.check(settings.region, now)
        base = offline.default_training_plan(settings, now)
        (capacity,) = base.capacities
        return plan_rehearsal.facts(
            plan_arn=base.arn, instance_type=capacity.instance_type, instance_count=capacity.instance_count,
            availability_zone=capacity.availability_zone, now=now,
        )

    reservation_for = None if proj.uses_kimi_k3_settings else _any_block(rehearsal, offline.stack_region(stack_config.values), now)
    result = offline.run_project(
        proj, args.stack, now=now, reservation=for_settings, reservation_for=reservation_for, training_plan=plan_for_settings,
        engine_options={"previous": previous} if previous is not None else None,
    )
    verdict = policy.verdict(result.resources)
    change_review = None
    if previous is not None:
        from kimi_k3.offline.review import review  # loaded by --previous only: a plain plan starts without the change review

        change_review = review(previous, result, allow_disruption=args.allow_disruption)
    try:
        manifests = offline.write_plan(result, out)
        (out / "policy.json").write_text(json.dumps(verdict.document(), indent=2, sort_keys=True) + "\n")
        if change_review is not None:
            (out / "review.json").write_text(json.dumps(change_review.document(), indent=2, sort_keys=True) + "\n")
    except OSError as err:
        where = f"--out {args.out}" if args.out is not None else f"the output directory {out}"
        raise UserError(f"{where}: cannot write the plan there ({err.strerror})") from None
    warnings = stack_lint.stack_warnings(stack_config.stack_values, stack_config.secret_keys)
    if args.json and change_review is not None:
        print(json.dumps(change_review.document(), indent=2, sort_keys=True))
    else:
        print(render_summary(result, out, len(manifests), tree=not args.quiet, verdict=verdict, stack_warnings=warnings, project_name=proj.name))
        if change_review is not None:
            print("\n" + "\n".join(change_review.lines()))
    return exit_status(verdict, change_review)


def exit_status(verdict: policy_verdict.Verdict, change_review: Review | None) -> int:
    """0, or 1 on a mandatory policy violation or a change review that refuses the change."""
    refused = change_review is not None and change_review.refused is not None
    return 1 if refused or not verdict.passed else 0


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


def port_forward_command(outputs: dict) -> str | None:
    """``kubectl -n NS port-forward service/NAME PORT:PORT`` from the stack outputs that name the Service, if any."""
    namespace, service = outputs.get("servingNamespace"), outputs.get("servingService")
    if not namespace or not service:
        return None
    port = outputs.get("port") or 8000
    return f"kubectl -n {namespace} port-forward service/{service} {port}:{port}"


def _facts(result: offline.PlanResult, outputs: dict) -> list[str]:
    block = outputs.get("capacityBlock") or {}
    fixture = result.reservation
    lines = ["Key facts:", f"  region            {outputs.get('region') or result.region or '?'}"]
    if outputs.get("availabilityZones"):
        lines.append(f"  network AZs       {', '.join(outputs['availabilityZones'])}")
    if block:
        lines.append(f"  capacity block    {block.get('id')} — {block.get('state')} (offline fixture), AZ {block.get('availabilityZone')}")
        lines.append(f"  block window      {_when(block.get('start'))} -> {_when(block.get('end'))}")
        lines.append(f"  GPU nodes         {outputs.get('gpuNodes')} x {block.get('instanceType')} ({outputs.get('gpusTotal')} GPUs)")
        if outputs.get("gpuScaling"):
            lines.append(f"  GPU scale-up      {scaling.describe(outputs['gpuScaling'])}")
    elif outputs.get("trainingPlan"):
        plan = outputs["trainingPlan"]
        lines.append(f"  training plan     {plan.get('name')} — {plan.get('state')} (offline fixture), AZ {plan.get('availabilityZone')}")
        lines.append(f"  plan window       {_when(plan.get('start'))} -> {_when(plan.get('end'))}")
        lines.append(f"  HyperPod nodes    {outputs.get('gpuNodes')} x {plan.get('instanceType')} ({outputs.get('gpusTotal')} GPUs), cluster {outputs.get('hyperpodClusterName')}")
    elif fixture is not None:
        lines.append(f"  capacity block    {fixture.id} — {fixture.state} (offline fixture), AZ {fixture.availability_zone}, {fixture.instance_count} x {fixture.instance_type}")
        lines.append(f"  block window      {_when(fixture.start.isoformat())} -> {_when(fixture.end.isoformat())}")
    for key, label in (("endpoint", "endpoint"), ("servedModelName", "served model"), ("image", "image"), ("modelRevision", "model revision")):
        if key in outputs:
            lines.append(f"  {label:<17} {outputs[key]}")
    # The start-up estimate with the mechanisms the stack declares (kimi_k3.stack.time_to_serve; docs/weights.md).
    lines += [f"  {line}" for line in outputs.get("timeToFirstToken") or []]
    if outputs.get("timeToFirstToken"):  # what the cases and the cost mean, where they are printed
        lines += ["  where:"] + [f"    {line}" for line in estimate.legend_lines()]
    return lines


def render_summary(
    result: offline.PlanResult,
    out: Path,
    manifest_count: int,
    *,
    tree: bool = True,
    verdict: policy_verdict.Verdict | None = None,
    stack_warnings: list[str] | None = None,
    project_name: str | None = None,
) -> str:
    """The readable summary printed after a plan."""
    outputs = result.plain_outputs()
    what = f"stack {result.stack} ({outputs.get('environment', '?')})" if result.settings else f"project {project_name or result.project}, stack {result.stack}"
    lines = [f"kimi-k3 offline plan — {what}, now {_when(result.now.isoformat()) if result.now else '?'}", ""]
    if tree:
        lines.append(f"Resources ({len(result.resources)}):")
        lines.extend(render_tree(result))
        lines.append("")
    lines += _facts(result, outputs)
    if result.settings is None and outputs:
        lines += ["", "Outputs:"] + [f"  {key:<17} {json.dumps(value, sort_keys=True)[:160]}" for key, value in sorted(outputs.items())]
    forward = port_forward_command(outputs)
    if forward:
        lines += ["", f"Reach the API from your machine: {forward}"]
    if outputs.get("deployRunnerProject"):
        lines += ["", f"Private endpoint: `pulumi up` runs in CodeBuild project {outputs['deployRunnerProject']} inside the VPC; "
                  f"the first deploy's commands: kimi-k3 first-deploy {result.stack} (docs/first-deploy.md)"]
    warnings = list(dict.fromkeys(result.warnings + list(stack_warnings or [])))
    if warnings:
        lines += ["", "Warnings:"] + [f"  - {w}" for w in warnings]
    if result.secret_keys:
        lines += ["", "Secrets: secure: config values cannot be decrypted offline; a marked placeholder stood in and was written as [secret]."]
    if verdict is not None:
        lines += ["", *verdict.render()]
    helm = result.helm_values()
    lines += [
        "",
        f"Wrote {out / 'resources.json'} ({len(result.resources)} resources), {out / 'outputs.json'}, {manifest_count} manifests in "
        f"{out / 'manifests'} (objects the program declares), {len(helm)} Helm values files in {out / 'helm'} "
        "(charts the provider renders at apply time), " + f"{out / 'state.json'} (what `--previous {out}` reads)"
        + (f" and {out / 'policy.json'}" if verdict is not None else ""),
    ]
    return "\n".join(lines)


def _when(value: str | None) -> str:
    if not value:
        return "?"
    moment = datetime.fromisoformat(value).astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


__all__ = ["add_parser", "exit_status", "port_forward_command", "render_summary", "render_tree", "run"]
