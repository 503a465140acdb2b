"""The ``kimi-k3`` command line: ``plan``, ``capacity``, ``verify``, ``hyperpod``, ``bench``, ``weights``, ``status``, ``startup-report``, ``first-deploy``.

Each subcommand lives in its own module exposing ``add_parser(subparsers)``;
the parser it adds sets ``func`` to a callable ``(args) -> int``.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import sys
from collections.abc import Sequence

import pulumi

from kimi_k3.errors import UserError

SUBCOMMANDS = ("plan", "capacity", "verify", "hyperpod", "bench", "weights", "status", "startup-report", "first-deploy")
DISTRIBUTION = "kimi-k3-aws"
"""The package whose metadata ``kimi-k3 --version`` reports."""


def version() -> str:
    """``kimi-k3 <version>`` from the installed package's metadata."""
    from importlib import metadata

    try:
        return f"kimi-k3 {metadata.version(DISTRIBUTION)}"
    except metadata.PackageNotFoundError:
        return f"kimi-k3 (version unknown: the {DISTRIBUTION} package is not installed; pip install it)"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``kimi-k3`` parser; with ``only``, just that subcommand is imported.

    Each subcommand pulls in its own heavy dependencies (Pulumi providers, boto3,
    the OpenAI SDK); importing only the one that runs keeps ``plan`` fast.
    """
    parser = argparse.ArgumentParser(
        prog="kimi-k3",
        description="Deploy Kimi K3 on AWS with Pulumi: offline plan, Capacity Block operations, endpoint checks.",
    )
    parser.add_argument("--version", action="version", version=version(), help="print the installed version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS if only is None else (only,):
        importlib.import_module(f"kimi_k3.cli.{name.replace('-', '_')}").add_parser(sub)
    return parser


def one_line(err: BaseException) -> str:
    """The message of a user error on one line.

    A ``pulumi.InputPropertiesError`` from another library carries its problems in
    ``errors`` (property path and reason each), not always in its message: they are
    appended. Ours (:class:`~kimi_k3.errors.ComponentInputError`) already list them.
    """
    text = str(err)
    if isinstance(err, pulumi.InputPropertiesError) and not isinstance(err, UserError):
        listed = "; ".join(f"{e['property_path']}: {e['reason']}" for e in err.errors or ())
        text = " ".join(f"{text}: {listed}".strip(": ").split()) if listed else " ".join(text.split())
    elif isinstance(err, pulumi.RunError) and not isinstance(err, UserError):  # e.g. ConfigMissingError's two lines
        text = " ".join(text.split())
    return text


def _close_idle_event_loops() -> None:
    """Close the asyncio loops a program stopped by a user error leaves open (Pulumi's synchronous invokes make one per thread).

    Left to the interpreter's shutdown, a loop may be collected after its self-pipe socket, and its ``__del__`` then
    prints an "Exception ignored ... Invalid file descriptor" traceback after the one-line error.
    """
    import asyncio
    import gc

    atexit.unregister(_close_idle_event_loops)
    for obj in gc.get_objects():
        if isinstance(obj, asyncio.AbstractEventLoop) and not obj.is_running() and not obj.is_closed():
            obj.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status (0 ok, 1 check failed, 2 user error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--version"]:  # answered without importing any subcommand (they pull in the SDKs)
        print(version())
        return 0
    try:
        # a subcommand's parser may raise UserError for a bad flag (bench does: one line, exit 2)
        args = build_parser(argv[0] if argv and argv[0] in SUBCOMMANDS else None).parse_args(argv)
        return int(args.func(args) or 0)
    except (UserError, pulumi.RunError, pulumi.InputPropertiesError) as err:
        # pulumi.RunError: what the engine prints without a traceback, e.g. a program's Config().require_secret("apiKey")
        # of a key the stack does not set (ConfigMissingError)
        print(f"kimi-k3: error: {one_line(err)}", file=sys.stderr)
        atexit.register(_close_idle_event_loops)  # at exit, before the interpreter tears the sockets down
        return 2
    except KeyboardInterrupt:
        print("kimi-k3: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
