"""``kimi-k3 status STACK``: the bring-up as a person wants to watch it (and a script can wait for).

Shows the Capacity Block's state and time left, a pending or failed extension, whether EKS's
scale-down still sits at the end - 40 min, the GPU nodes joined / Ready / GPUs allocatable,
and each serving pod's phase with progress bars (weights: bytes of the total, rate, ETA;
verifying; engine loading; ready). ``--wait`` polls until every replica is ready (exit 0),
the block can no longer serve, or ``--timeout`` (exit 1); ``--json`` prints the snapshot as
one JSON document. Read-only: nothing in AWS or the cluster changes.

The cluster is read through the stack's kubeconfig (``pulumi stack output kubeconfig
--show-secrets``, run for you when the Pulumi CLI is on PATH) or ``--kubeconfig FILE``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kimi_k3.cli.arguments import add_stack_arguments, positive_float
from kimi_k3.errors import UserError

DEFAULT_TIMEOUT_S = 7200
"""``--wait`` gives up after this long by default (a cold start is estimated at ~30-90 min, docs/weights.md)."""
DEFAULT_INTERVAL_S = 15.0
"""Seconds between two polls (the staging steps print a progress line every 15 s)."""


def stack_kubeconfig(stack: str, project_dir: Path) -> dict[str, Any]:
    """The stack's ``kubeconfig`` output, read with the Pulumi CLI (a secret: ``--show-secrets``)."""
    from kimi_k3.bringup.kube import parse_stack_output  # loaded by this command only: the others start without it

    pulumi = shutil.which("pulumi")
    how = f"`pulumi stack output kubeconfig --show-secrets -s {stack} > kubeconfig.json`, then pass --kubeconfig kubeconfig.json"
    if pulumi is None:
        raise UserError(f"no kubeconfig: the Pulumi CLI is not on PATH; write the stack's with {how}")
    try:
        proc = subprocess.run(
            [pulumi, "stack", "output", "kubeconfig", "--show-secrets", "--json", "--stack", stack],
            cwd=project_dir, capture_output=True, text=True, timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise UserError(f"`pulumi stack output kubeconfig -s {stack}` did not run ({err}); write it with {how}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"`pulumi stack output kubeconfig -s {stack}` failed: {' '.join(last.split())[:200]}")
    return parse_stack_output(proc.stdout)


def _clock() -> Any:
    from kimi_k3.cli import capacity_clock  # loaded by this command only: the others start without it

    return capacity_clock.utcnow()


def cmd_status(args: argparse.Namespace) -> int:
    """Print the snapshot (or poll with --wait); exit 0 when the endpoint is ready, 1 when not."""
    from kimi_k3.bringup import collect, kube, report  # loaded by this command only: the others start without it
    from kimi_k3.stack import project  # loaded by this command only: the others start without it
    from kimi_k3.stack import settings as stack_settings  # loaded by this command only: the others start without it
    from kimi_k3.stack.settings import cluster_name  # loaded by this command only: the others start without it

    found = project.find_project(args.program, Path.cwd())
    settings = stack_settings.load_settings(found, args.stack)
    if args.kubeconfig is not None:
        document, source = kube.read_kubeconfig(args.kubeconfig), f"--kubeconfig {args.kubeconfig}"
    else:
        document, source = stack_kubeconfig(args.stack, found.project_file.parent), f"the kubeconfig of stack {args.stack}"
    kube.check_cluster_name(document, cluster_name(settings.project, settings.stack), args.context, source)
    reader = kube.KubeReader(document, args.context, source)
    watcher = collect.Watcher(settings, collect.make_aws_clients(settings.region), reader, args.namespace or collect.SERVING_NAMESPACE)

    tty = sys.stdout.isatty() and not args.json
    deadline = time.monotonic() + args.timeout
    drawn = 0
    timed_out = False
    while True:
        snapshot = watcher.snapshot(_clock())
        if not args.wait or snapshot.ready or snapshot.hopeless:
            break
        if time.monotonic() >= deadline:
            timed_out = True
            break
        if tty:
            lines = report.render(snapshot)
            if drawn:
                sys.stdout.write(f"\x1b[{drawn}F\x1b[J")
            print("\n".join(lines), flush=True)
            drawn = len(lines)
        elif not args.json:
            print(report.summary_line(snapshot), flush=True)
        time.sleep(max(0.0, min(args.interval, deadline - time.monotonic())))

    if args.json:
        print(json.dumps(snapshot.to_json(), indent=2, sort_keys=True))
    else:
        if drawn:
            sys.stdout.write(f"\x1b[{drawn}F\x1b[J")
        print("\n".join(report.render(snapshot)))
        if timed_out:
            print(f"Timed out after {args.timeout:g} s: the endpoint is not ready.")
    return 0 if snapshot.ready else 1


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``status``."""
    p = subparsers.add_parser(
        "status",
        help="watch a stack's bring-up: the Capacity Block, GPU nodes, each serving pod's phase; --wait for scripts",
        description="Read-only view of a stack's bring-up: the Capacity Block's state and time left (boto3), "
        "the GPU nodes joined / Ready / GPUs allocatable and each serving pod's phase (Kubernetes API). "
        "Exit 0 when every replica is ready, 1 when not (or on --timeout), 2 for a usage error.",
    )
    add_stack_arguments(p)
    p.add_argument("--kubeconfig", type=Path, metavar="FILE", help="kubeconfig of the stack's cluster (default: `pulumi stack output kubeconfig --show-secrets`)")
    p.add_argument("--context", help="kubeconfig context to use (default: its current context)")
    p.add_argument("--namespace", help="namespace of the serving pods (default: the serving components', kimi-serving)")
    p.add_argument("--wait", action="store_true", help="poll until the endpoint is ready (exit 0), the block cannot serve, or --timeout (exit 1)")
    p.add_argument("--timeout", type=positive_float, default=DEFAULT_TIMEOUT_S, metavar="S", help=f"with --wait: give up after S seconds (default {DEFAULT_TIMEOUT_S})")
    p.add_argument("--interval", type=positive_float, default=DEFAULT_INTERVAL_S, metavar="S", help=f"with --wait: seconds between polls (default {DEFAULT_INTERVAL_S:g})")
    p.add_argument("--json", action="store_true", help="print the (final) snapshot as one JSON document")
    p.set_defaults(func=cmd_status)
    return p
