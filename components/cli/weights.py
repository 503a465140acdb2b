"""``kimi-k3 weights stage|status STACK``: the stack's pinned revision in its S3 prefix.

``status`` compares the prefix (``kimi-k3:weightsS3Uri``) with the revision's file list on
Hugging Face and prints files and bytes staged / missing / mismatched, with a progress bar.

``stage`` copies what is missing. Where it runs matters (1.56 TB): in AWS, in the stack's
region, never on a laptop and never on Capacity Block time. So:

* ``stage STACK`` (the default) does not copy: the copy runs in the cluster, as the Job the
  stack declares on the system nodes (see docs/weights.md); this prints the prefix's state
  and, with ``--wait``, follows it until the prefix is complete;
* ``stage STACK --here`` copies from this process — for a runner or instance inside AWS in the
  stack's region, with credentials that may write the prefix.

The copy logic is :mod:`kimi_k3.weights.stage`; this module only wires argparse and prints.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kimi_k3.cli.arguments import positive_int
from kimi_k3.errors import SettingsError, UserError
from kimi_k3.stack.settings import StackSettings, load_stack
from kimi_k3.weights import WeightsError
from kimi_k3.weights.manifest import DEFAULT_SHA256SUMS, MANIFEST_NAME


def make_s3_client(region: str) -> Any:
    """The S3 client of the stack's region (the one place that creates it; tests run it under moto)."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session(region_name=region).client(
        "s3", config=Config(retries={"max_attempts": 8, "mode": "adaptive"}, max_pool_connections=64, user_agent_extra="kimi-k3-aws-weights")
    )


def sleep(seconds: float) -> None:
    """Wait between polls (tests replace it)."""
    time.sleep(seconds)


def _target(stack: str, program: Path | None = None) -> tuple[StackSettings, str, str]:
    """Settings, the S3 URI and the sha256 manifest name of a stack (of the project at ``program``); a settings error names the key."""
    settings = load_stack(stack, program)
    uri = settings.serving.contract.weights.s3_uri
    if not uri:
        raise SettingsError(
            "kimi-k3:weightsS3Uri", None,
            f"stack {stack} has no S3 prefix (weightsSource is {settings.serving.contract.weights.source}); "
            "set kimi-k3:weightsS3Uri to s3://bucket/prefix/ in the stack's region to stage the weights there",
        )
    return settings, uri, settings.serving.contract.weights.sha256_manifest or DEFAULT_SHA256SUMS


def _hub(args: argparse.Namespace):
    from kimi_k3.weights.hub import DEFAULT_ENDPOINT, HubClient  # loaded by this command only: the others start without it

    return HubClient(args.hf_endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT, token=os.environ.get("HF_TOKEN") or None)


def _translate(run: Callable[[], int]) -> int:
    """Run, turning staging and AWS errors into one-line user errors."""
    try:
        return run()
    except WeightsError as err:
        raise UserError(f"weights: {err}") from None
    except Exception as err:  # botocore's NoCredentialsError / ClientError, without importing botocore here
        if type(err).__module__.startswith("botocore"):
            raise UserError(f"weights: AWS refused or is unreachable: {err}") from None
        raise


def _bar(total: int, initial: int, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1000, desc=desc, file=sys.stderr, disable=not enabled, dynamic_ncols=True)


def collect(args: argparse.Namespace, settings: StackSettings, uri: str, sums: str):
    """Survey the prefix: a :class:`~kimi_k3.weights.status.WeightsStatus`."""
    from kimi_k3.weights.s3store import S3Location  # loaded by this command only: the others start without it
    from kimi_k3.weights.stage import survey, survey_manifest  # loaded by this command only: the others start without it
    from kimi_k3.weights.status import WeightsStatus, deep_check  # loaded by this command only: the others start without it

    location = S3Location.parse(uri)
    s3 = make_s3_client(settings.region)
    weights = settings.serving.contract.weights
    from_s3 = survey_manifest(s3, location, weights.model_id, weights.revision) if weights.source == "s3" else None
    manifest: Any
    if from_s3 is not None:  # an S3-sourced stack whose prefix holds its manifest: S3 answers, Hugging Face is not asked
        verdicts, manifest = from_s3
    else:
        verdicts, manifest = survey(_hub(args), s3, location, weights.model_id, weights.revision, sums)
    if getattr(args, "deep", False):
        verdicts = deep_check(s3, location, verdicts, {e.path: e.sha256 for e in manifest.entries} if manifest else {})
    return WeightsStatus(uri, settings.serving.contract.weights.model_id, settings.serving.contract.weights.revision, tuple(verdicts), manifest is not None)


def cmd_status(args: argparse.Namespace) -> int:
    """Print the prefix's state; exit 0 when complete, 1 otherwise."""
    from kimi_k3.weights.stage import STAGED  # loaded by this command only: the others start without it
    from kimi_k3.weights.status import format_status  # loaded by this command only: the others start without it

    def run() -> int:
        settings, uri, sums = _target(args.stack, args.program)
        status = collect(args, settings, uri, sums)
        with _bar(status.total_bytes, status.bytes(STAGED), "staged", args.progress):
            pass
        print("\n".join(format_status(status)))
        print(_source_line(settings, uri, status))
        return 0 if status.complete else 1

    return _translate(run)


def _source_line(settings: StackSettings, uri: str, status: Any) -> str:
    """Where the stack's pods read the weights from, and what the status was measured against."""
    weights = settings.serving.contract.weights
    if weights.source != "s3":
        return (f"  source     the stack reads its weights from Hugging Face (kimi-k3:weightsSource {weights.source}); "
                f"{uri} is used once weightsSource is s3")
    against = "its manifest (S3 only)" if status.manifest_present and status.complete else f"the file list of {weights.model_id}@{weights.revision[:12]} on Hugging Face"
    return f"  source     the serving pods read the weights from {uri} (kimi-k3:weightsSource s3); checked against {against}"


def cmd_stage(args: argparse.Namespace) -> int:
    """Copy here (``--here``), or report on / wait for the in-cluster staging Job."""
    from kimi_k3.weights.stage import STAGED  # loaded by this command only: the others start without it
    from kimi_k3.weights.status import format_status  # loaded by this command only: the others start without it

    def run() -> int:
        settings, uri, sums = _target(args.stack, args.program)
        if args.here:
            return _stage_here(args, settings, uri, sums)
        status = collect(args, settings, uri, sums)
        if status.complete:
            print("\n".join(format_status(status)))
            print(f"nothing to stage: {uri} holds {settings.serving.contract.weights.model_id}@{settings.serving.contract.weights.revision}")
            return 0
        from kimi_k3.weights.stage import STAGING_NAMESPACE, job_name  # loaded by this command only: the others start without it

        job = job_name(settings.serving.contract.weights.revision)
        print(
            f"staging runs in the cluster: the Job {job} in namespace {STAGING_NAMESPACE} on the system nodes "
            f"(declared by the stack; follow it with `kubectl -n {STAGING_NAMESPACE} logs -f job/{job}`). "
            "Inside AWS in the stack's region, `--here` copies from this machine instead."
        )
        if not args.wait:
            print("\n".join(format_status(status)))
            return 1
        deadline = time.monotonic() + args.timeout
        with _bar(status.total_bytes, status.bytes(STAGED), "staged", args.progress) as bar:
            while not status.complete:
                if time.monotonic() >= deadline:
                    print("\n".join(format_status(status)))
                    print(f"not complete after {args.timeout} s", file=sys.stderr)
                    return 1
                sleep(args.interval)
                status = collect(args, settings, uri, sums)
                bar.n = status.bytes(STAGED)
                bar.refresh()
        print("\n".join(format_status(status)))
        return 0

    return _translate(run)


def _stage_here(args: argparse.Namespace, settings: StackSettings, uri: str, sums: str) -> int:
    from kimi_k3.weights.s3store import S3Location  # loaded by this command only: the others start without it
    from kimi_k3.weights.stage import stage  # loaded by this command only: the others start without it

    s3 = make_s3_client(settings.region)
    with _bar(0, 0, "copied", args.progress) as bar:

        def on_bytes(n: int) -> None:
            bar.total = max(bar.total or 0, bar.n + n)
            bar.update(n)

        report = stage(
            _hub(args), s3, S3Location.parse(uri), settings.serving.contract.weights.model_id, settings.serving.contract.weights.revision,
            sha256sums_name=sums, workers=args.workers, attempts=args.attempts, on_bytes=on_bytes,
            log=lambda line: bar.write(line, file=sys.stderr),
        )
    print(
        f"staged {settings.serving.contract.weights.model_id}@{settings.serving.contract.weights.revision} in {uri}: "
        f"{len(report.fetched)} copied ({report.bytes_fetched / 1e9:,.1f} GB), {len(report.skipped)} already there, "
        f"{len(report.retried)} fetched again after a checksum failure; wrote {sums} and {MANIFEST_NAME}"
    )
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``weights`` with its ``stage`` and ``status`` subcommands."""
    parser = subparsers.add_parser(
        "weights",
        help="stage the pinned model revision into the stack's S3 prefix; show how far it is",
        description="Weights in S3 for a stack (kimi-k3:modelId, kimi-k3:modelRevision, kimi-k3:weightsS3Uri). "
        "HF_TOKEN and HF_ENDPOINT are read as huggingface_hub reads them.",
    )
    sub = parser.add_subparsers(dest="weights_command", required=True, metavar="ACTION")
    for name, func, help_text in (
        ("status", cmd_status, "files and bytes staged / missing / mismatched in the prefix (exit 1 until complete)"),
        ("stage", cmd_stage, "copy the revision into the prefix (--here), or follow the in-cluster staging Job"),
    ):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("stack", metavar="STACK", help="stack name, e.g. prod")
        p.add_argument("--program", type=Path, metavar="DIR", help="directory of the Pulumi project (its Pulumi.yaml); default: the nearest one from here up")
        p.add_argument("--hf-endpoint", help="Hugging Face endpoint (default: $HF_ENDPOINT or https://huggingface.co)")
        p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=sys.stderr.isatty(), help="progress bar on stderr (default: when stderr is a terminal)")
        p.set_defaults(func=func)
        if name == "status":
            p.add_argument("--deep", action="store_true", help="also read every staged object back and compare its sha256 (reads every byte)")
        else:
            p.add_argument("--here", action="store_true", help="copy from this machine (inside AWS, in the stack's region)")
            p.add_argument("--workers", type=positive_int, default=8, help="files copied at once with --here (default 8)")
            p.add_argument("--attempts", type=positive_int, default=3, help="downloads of a file before giving up on a checksum failure (default 3)")
            p.add_argument("--wait", action="store_true", help="without --here: poll the prefix until it is complete")
            p.add_argument("--interval", type=positive_int, default=30, help="seconds between polls with --wait (default 30)")
            p.add_argument("--timeout", type=positive_int, default=6 * 3600, help="seconds to wait with --wait (default 6 h)")
    return parser
