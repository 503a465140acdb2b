"""``kimi-k3 verify``: check a running endpoint against the API contract.

Prints one row per check (``PASS``/``FAIL``, latency, time to first token,
tokens/s, detail) as each finishes, then a summary; or one JSON document with
``--json``. Exit status: 0 all passed, 1 a check failed, 2 the endpoint could
not be reached or rejected the key (printed as one line by ``kimi_k3.cli``).
The API key is never printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import TextIO

from kimi_k3.bringup import verify
from kimi_k3.cli.arguments import add_endpoint_arguments, api_key, positive_float, positive_int
from kimi_k3.errors import UserError

HEADER = f"{'':4} {'check':<13} {'latency':>8} {'ttft':>8} {'tok/s':>8}  detail"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``verify`` subcommand to the ``kimi-k3`` parser."""
    parser = subparsers.add_parser(
        "verify",
        help="check a running endpoint: models, chat, streaming, tool calls",
        description=(
            "Check an OpenAI-compatible endpoint against the Kimi K3 API contract: "
            "GET /v1/models lists the served model, a chat completion answers, a streamed "
            "completion reports time to first token and tokens/s, a get_weather tool "
            "call comes back well-formed (retried once: K3 occasionally emits a tool-call "
            "format its parser does not expect), and POST /invocations, which vLLM serves "
            "without the API key, is refused by the API proxy. Exit 0 when all pass, 1 when any fails, "
            "2 when the endpoint cannot be reached or rejects the API key."
        ),
    )
    add_endpoint_arguments(parser)
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=verify.DEFAULT_TIMEOUT_S,
        metavar="S",
        help="seconds per request (default: %(default)g)",
    )
    parser.add_argument(
        "--tool-choice",
        choices=verify.TOOL_CHOICES,
        default="auto",
        help="tool_choice for the tool-call check (default: %(default)s)",
    )
    parser.add_argument(
        "--max-tokens",
        type=positive_int,
        default=verify.DEFAULT_MAX_TOKENS,
        metavar="N",
        help="max_tokens per request, reasoning included (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    parser.set_defaults(func=run)
    return parser


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def format_row(result: verify.CheckResult) -> str:
    """``PASS name  latency  ttft  tok/s  detail`` for one check."""
    status = "PASS" if result.passed else "FAIL"
    latency = "-" if result.latency_s is None else f"{result.latency_s:.2f}s"
    ttft = "-" if result.ttft_s is None else f"{result.ttft_s:.2f}s"
    rate = _cell(result.tokens_per_s, ".1f")
    return f"{status} {result.name:<13} {latency:>8} {ttft:>8} {rate:>8}  {result.detail}"


def format_summary(report: verify.VerifyReport) -> str:
    """The closing line: how many passed, which failed, against what."""
    total = len(report.checks)
    passed = total - len(report.failed)
    line = f"{passed}/{total} checks passed for {report.model} at {report.base_url}"
    if report.failed:
        line += f"; failed: {', '.join(report.failed)}"
    return line


def _report_json(report: verify.VerifyReport, error: str | None = None) -> str:
    document = {
        "base_url": report.base_url,
        "model": report.model,
        "passed": report.passed and error is None,
        "failed": list(report.failed),
        "checks": [asdict(c) for c in report.checks],
    }
    if error is not None:
        document["error"] = error
    return json.dumps(document, indent=2)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the checks for parsed ``args``; 0 if all pass, 1 if any fails.

    Raises :class:`~kimi_k3.errors.UserError` (exit 2 in the CLI) for a
    missing key, a bad endpoint, an unreachable endpoint or a rejected key.
    """
    out = out or sys.stdout
    key = api_key(args)
    client = verify.make_client(args.endpoint, key, args.timeout)
    base_url = verify.normalise_endpoint(args.endpoint)
    options = verify.CheckOptions(args.model, args.tool_choice, args.max_tokens)
    results: list[verify.CheckResult] = []
    if not args.json:
        print(f"verifying {args.model} at {base_url}", file=out, flush=True)
    try:
        with client:
            for result in verify.iter_checks(client, options):
                if not args.json:
                    if not results:
                        print(HEADER, file=out)
                    print(format_row(result), file=out, flush=True)
                results.append(result)
    except UserError as err:
        if args.json:
            print(_report_json(verify.VerifyReport(base_url, args.model, tuple(results)), str(err)), file=out)
        raise
    report = verify.VerifyReport(base_url, args.model, tuple(results))
    if args.json:
        print(_report_json(report), file=out)
    else:
        print(format_summary(report), file=out)
    return 0 if report.passed else 1
