"""``kimi-k3 startup-report``: each start-up phase's measured minutes beside the estimate, and ``startup.json``.

Two ways in:

* ``kimi-k3 startup-report STACK``: reads the stack's cluster (the official Kubernetes client, the
  stack's kubeconfig as ``kimi-k3 status`` reads it): the GPU nodes, the serving pods, the events
  of the serving namespace, the engine container's log (with timestamps), the sync's and the cache restore's;
* ``kimi-k3 startup-report [STACK] --engine-log FILE [--events FILE]``: a saved engine log and,
  optionally, ``kubectl get nodes,pods,events -o json`` saved to a file. Without STACK the
  estimate is the catalog's default (p6-b300, every mechanism on).

The case compared against is ``--case``, or read from the evidence: a compile-cache hit in the
engine log is ``warm``, a compile is ``cold``. Read-only; writes ``--out`` (default ``startup.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from kimi_k3.errors import UserError

CASES = ("cold", "warm", "pod re-created", "container restart")
LOG_LINES = 20_000
"""Lines of the engine log read from the cluster (a start prints a few thousand)."""


def _read(path: Path, what: str) -> str:
    try:
        return path.expanduser().read_text(errors="replace")
    except OSError as err:
        raise UserError(f"{what} {path}: cannot read it ({err.strerror})") from None


def _objects(path: Path) -> dict[str, Any]:
    text = _read(path, "--events")
    try:
        document = json.loads(text)
    except ValueError:
        raise UserError(f"--events {path}: not JSON (save it with `kubectl get nodes,pods,events -n kimi-serving -o json > FILE`)") from None
    if isinstance(document, list):
        document = {"items": document}
    if not isinstance(document, dict):
        raise UserError(f"--events {path}: expected a Kubernetes List or object")
    return document


def _cluster_evidence(args: argparse.Namespace, settings: Any) -> tuple[list[str], dict[str, Any], list[str]]:
    """(engine log lines, a List of nodes+pods+events, what was read) from the stack's cluster."""
    from kimi_k3.bringup import collect, kube  # loaded by this command only: the others start without it
    from kimi_k3.cli.status import stack_kubeconfig  # loaded by this command only: the others start without it
    from kimi_k3.core import labels  # loaded by this command only: the others start without it
    from kimi_k3.stack import project  # loaded by this command only: the others start without it
    from kimi_k3.stack.settings import cluster_name  # loaded by this command only: the others start without it

    if args.kubeconfig is not None:
        document, source = kube.read_kubeconfig(args.kubeconfig), f"--kubeconfig {args.kubeconfig}"
    else:
        found = project.find_project(args.program, Path.cwd())
        document, source = stack_kubeconfig(args.stack, found.project_file.parent), f"the kubeconfig of stack {args.stack}"
    kube.check_cluster_name(document, cluster_name(settings.project, settings.stack), args.context, source)
    reader = kube.KubeReader(document, args.context, source)
    namespace = args.namespace or collect.SERVING_NAMESPACE
    nodes = reader.nodes(labels.GPU_NODE_SELECTOR)
    pods = reader.pods(namespace, collect.SERVING_SELECTOR)
    events = reader.events(namespace)
    lines: list[str] = []
    for pod in pods:
        name = pod["metadata"]["name"]
        for container in ("fetch-weights", "restore-compile-cache", "vllm"):  # the sync's last line times a sidecar's transfer
            lines += reader.log_tail(namespace, name, container, LOG_LINES, timestamps=True)
        break  # one pod's log: the replicas start alike; the objects cover them all
    read = [f"{len(nodes)} GPU nodes, {len(pods)} serving pods and {len(events)} events in {namespace} ({source})"]
    return lines, {"items": [*nodes, *pods, *events]}, read


def cmd_startup_report(args: argparse.Namespace) -> int:
    """Print the phases beside the estimate and write the JSON document."""
    from kimi_k3.bringup import startup  # loaded by this command only: the others start without it
    from kimi_k3.weights import estimate  # loaded by this command only: the others start without it

    if args.stack is None and args.engine_log is None:
        raise UserError("startup-report: give STACK (reads its cluster) or --engine-log FILE (a saved engine log)")
    settings = None
    if args.stack is not None:
        from kimi_k3.stack import project  # loaded by this command only: the others start without it
        from kimi_k3.stack import settings as stack_settings  # loaded by this command only: the others start without it
        from kimi_k3.stack.time_to_serve import startup_inputs  # loaded by this command only: the others start without it

        settings = stack_settings.load_settings(project.find_project(args.program, Path.cwd()), args.stack)
        inputs = startup_inputs(settings)
    else:
        inputs = estimate.StartupInputs()
    objects: dict[str, Any]
    if args.engine_log is not None:
        lines, objects, sources = _read(args.engine_log, "--engine-log").splitlines(), {"items": []}, [f"--engine-log {args.engine_log}"]
        if args.events is not None:
            objects, sources = _objects(args.events), [*sources, f"--events {args.events}"]
    else:
        lines, objects, sources = _cluster_evidence(args, settings)
    log = startup.parse_engine_log(lines)
    nodes, pods, events = startup.split_kinds(objects)
    measurements = [*startup.cluster_measurements(nodes, pods, events), *log.measurements]
    case = args.case or ("warm" if log.cache_hit else "cold")
    if inputs.engine_snapshot_s3 and not any(m.what == "engine snapshot restore" for m in log.measurements):
        inputs = dataclasses.replace(inputs, engine_snapshot_s3=False)  # this start restored no snapshot: compare it with the start that rebuilds
    if inputs.dump_beside_peer and any(m.what == "sleep" for m in log.measurements):
        inputs = dataclasses.replace(inputs, dump_beside_peer=False)  # this replica won the key's claim and dumped it: compare it with the start that dumps
    result = startup.report(estimate.estimate_case(inputs, case), measurements, cache_hit=log.cache_hit,
                            kv_cache_memory_bytes=log.kv_cache_memory_bytes, sources=sources)
    print("\n".join(startup.render(result)))
    args.out.write_text(json.dumps(result.to_json(), indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``startup-report``."""
    p = subparsers.add_parser(
        "startup-report",
        help="each start-up phase's measured minutes beside the estimate (the cluster, or saved logs); writes startup.json",
        description="Read what a start took, phase by phase, and lay it beside the estimate kimi-k3 plan prints: from the stack's cluster "
        "(nodes, serving pods, events, the engine's log) or from a saved engine log (--engine-log) and objects (--events). Read-only.",
    )
    p.add_argument("stack", metavar="STACK", nargs="?", help="stack name (reads its cluster; with --engine-log, only its estimate)")
    p.add_argument("--program", type=Path, metavar="DIR", help="directory of the Pulumi project (its Pulumi.yaml); default: the nearest one from here up")
    p.add_argument("--engine-log", type=Path, metavar="FILE", help="a saved engine log (kubectl logs POD -c vllm --timestamps > FILE)")
    p.add_argument("--events", type=Path, metavar="FILE", help="with --engine-log: kubectl get nodes,pods,events -n kimi-serving -o json > FILE")
    p.add_argument("--case", choices=CASES, help="the estimate's case to compare against (default: warm on a compile-cache hit, else cold)")
    p.add_argument("--kubeconfig", type=Path, metavar="FILE", help="kubeconfig of the stack's cluster (default: `pulumi stack output kubeconfig --show-secrets`)")
    p.add_argument("--context", help="kubeconfig context to use (default: its current context)")
    p.add_argument("--namespace", help="namespace of the serving pods (default: kimi-serving)")
    p.add_argument("--out", type=Path, default=Path("startup.json"), metavar="FILE", help="where to write the JSON document (default: startup.json)")
    p.set_defaults(func=cmd_startup_report)
    return p
