"""``kimi-k3 first-deploy STACK``: the exact commands of the first deploy of a stack with a private-only endpoint.

A private endpoint admits only what its cluster security group lets in on 443, from the VPC or a connected
network (EKS user guide, "Cluster API server endpoint"); a stack that creates its VPC has no runner in it yet.
With ``kimi-k3:deployRunner codebuild`` the supported sequence is (docs/first-deploy.md):

1. ``pulumi up --target`` the network and the deploy runner only: every resource under the stack's
   ``Network`` and ``DeployRunner`` components (with their ancestors), which depend on nothing else;
2. admit the runner's role in the deploy role's trust policy (the role exists now: IAM refuses a principal
   that does not);
3. ``aws codebuild start-build``: the build runs ``pulumi up`` for the whole stack from inside the VPC.

The URNs come from the stack's offline plan (``kimi-k3 plan STACK`` writes ``build/plan/STACK/state.json``;
the mock engine builds URNs the way the Pulumi engine does). The command checks that the target set is closed
(nothing in it depends on a resource outside it), so step 1 cannot fail on a missing dependency.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kimi_k3.errors import UserError

NETWORK_TYPE = "kimi-k3:index:Network"
RUNNER_TYPE = "kimi-k3:index:DeployRunner"
PROJECT_TYPE = "aws:codebuild/project:Project"
ROLE_TYPE = "aws:iam/role:Role"
LOG_GROUP_TYPE = "aws:cloudwatch/logGroup:LogGroup"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``first-deploy``."""
    p = subparsers.add_parser(
        "first-deploy",
        help="print the exact commands of a private stack's first deploy (network and runner, then CodeBuild)",
        description=__doc__.split("\n\n", 1)[0] if __doc__ else None,
    )
    p.add_argument("stack", metavar="STACK", help="stack name, e.g. prod")
    p.add_argument("--plan", type=Path, default=None, metavar="DIR", help="the stack's offline plan (default: build/plan/STACK, run `kimi-k3 plan STACK` first)")
    p.set_defaults(func=run)


def _ancestors(urn: str, parents: Mapping[str, str | None]) -> list[str]:
    chain = []
    parent = parents.get(urn)
    while parent and parent in parents:
        chain.append(parent)
        parent = parents.get(parent)
    return chain


def target_urns(resources: Sequence[Mapping[str, Any]]) -> list[str]:
    """The URNs of step 1: the Network and DeployRunner components, everything under them, and their ancestors.

    Raises :class:`UserError` when the plan has no deploy runner, or when a target depends on a resource outside the set.
    """
    parents = {r["urn"]: r.get("parent") for r in resources}
    roots = [r["urn"] for r in resources if r["type"] in (NETWORK_TYPE, RUNNER_TYPE)]
    if not any(r["type"] == RUNNER_TYPE for r in resources):
        raise UserError("the plan declares no deploy runner: set kimi-k3:deployRunner codebuild (docs/first-deploy.md), then run `kimi-k3 plan STACK` again")
    chosen = set(roots)
    for r in resources:
        if any(root in _ancestors(r["urn"], parents) for root in roots):
            chosen.add(r["urn"])
    for urn in list(chosen):
        chosen.update(_ancestors(urn, parents))
    outside = sorted({dep for r in resources if r["urn"] in chosen for dep in r.get("dependencies") or () if dep not in chosen and dep in parents})
    if outside:
        raise UserError(f"the network and the runner depend on {', '.join(outside)}: `pulumi up --target` would fail; keep the runner on the network only")
    order = {r["urn"]: index for index, r in enumerate(resources)}
    return sorted(chosen, key=order.__getitem__)


def _one(resources: Sequence[Mapping[str, Any]], type_: str, parent_type: str) -> Mapping[str, Any]:
    parents = {r["urn"]: r for r in resources}
    for r in resources:
        parent = parents.get(r.get("parent") or "")
        if r["type"] == type_ and parent is not None and parent["type"] == parent_type:
            return r
    raise UserError(f"the plan has no {type_} under {parent_type}")


def commands(state: Mapping[str, Any]) -> list[str]:
    """The first deploy, as shell lines (comments and commands), from an offline plan's ``state.json``."""
    resources = state["resources"]
    stack, region = state["stack"], state["region"]
    targets = target_urns(resources)
    project = _one(resources, PROJECT_TYPE, RUNNER_TYPE)["inputs"]
    role = _one(resources, ROLE_TYPE, RUNNER_TYPE)["inputs"]
    logs = _one(resources, LOG_GROUP_TYPE, RUNNER_TYPE)["inputs"]
    env = {e["name"]: e["value"] for e in project["environment"]["environmentVariables"]}
    deploy_role_arn = env["DEPLOY_ROLE_ARN"]
    deploy_role = deploy_role_arn.split(":role/", 1)[1].rsplit("/", 1)[-1]
    account = deploy_role_arn.split(":")[4]
    partition = deploy_role_arn.split(":")[1]
    secret = env["KIMI_K3_API_KEY"].rsplit(":", 1)[0]
    runner_role_arn = f"arn:{partition}:iam::{account}:role/{role['name']}"
    statement = json.dumps({"Effect": "Allow", "Principal": {"AWS": runner_role_arn}, "Action": "sts:AssumeRole"}, separators=(",", ":"))
    target_lines = " \\\n  ".join(f"--target {shlex.quote(urn)}" for urn in targets)
    return [
        f"# First deploy of stack {stack} ({region}): its EKS endpoint is private and only the in-VPC runner reaches it.",
        "# 0. Once per account and region, what the stack does not create (docs/first-deploy.md):",
        f"#    the deploy secret {secret} (JSON keys PULUMI_ACCESS_TOKEN, KIMI_K3_API_KEY) and CodeBuild's GitHub access:",
        f"aws secretsmanager describe-secret --region {region} --secret-id {shlex.quote(secret)} --query ARN",
        f"aws codebuild import-source-credentials --region {region} --server-type GITHUB --auth-type PERSONAL_ACCESS_TOKEN --token \"$GITHUB_TOKEN\"",
        "# 1. The network and the deploy runner only (they depend on nothing else of the stack):",
        f"pulumi up --stack {shlex.quote(stack)} --yes \\\n  {target_lines}",
        f"# 2. Let the runner's role ({runner_role_arn}) assume the deploy role {deploy_role} (add one statement to its trust policy):",
        f"aws iam get-role --role-name {shlex.quote(deploy_role)} --query Role.AssumeRolePolicyDocument --output json > trust.json",
        f"jq --argjson s {shlex.quote(statement)} '.Statement += [$s]' trust.json > trust-with-runner.json",
        f"aws iam update-assume-role-policy --role-name {shlex.quote(deploy_role)} --policy-document file://trust-with-runner.json",
        "# 3. The whole stack, `pulumi up` from inside the VPC (the same command deploys every later change):",
        f"aws codebuild start-build --region {region} --project-name {shlex.quote(project['name'])} --source-version \"$(git rev-parse HEAD)\"",
        f"aws logs tail {shlex.quote(logs['name'])} --region {region} --follow",
    ]


def run(args: argparse.Namespace) -> int:
    """Print the commands from the stack's offline plan."""
    from kimi_k3.stack import project as stack_project  # loaded by this command only: the others start without it

    plan_dir = args.plan or stack_project.find_project(None, Path.cwd()).directory / "build" / "plan" / args.stack
    path = plan_dir / "state.json"
    try:
        state = json.loads(path.read_text())
    except OSError:
        raise UserError(f"{path}: no offline plan of stack {args.stack}; run `kimi-k3 plan {args.stack}` first") from None
    if state.get("stack") != args.stack:
        raise UserError(f"{path} is the plan of stack {state.get('stack')!r}, not {args.stack!r}")
    print("\n".join(commands(state)))
    return 0


__all__ = ["add_parser", "commands", "run", "target_urns"]
