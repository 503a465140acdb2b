"""What every ``kimi-k3`` command that pays for capacity asks before it buys.

Capacity Block purchases and extensions and training plan purchases and extensions
cannot be undone, so each shows the offer, then needs ``--yes`` or an explicit ``yes``
typed at a terminal; without a terminal and without ``--yes`` it refuses before any
AWS call.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol, TextIO, TypeVar

from kimi_k3.capacity.aws import validate_region
from kimi_k3.capacity.offerings import parse_when
from kimi_k3.errors import UserError

QueryT = TypeVar("QueryT")


def refuse_without_confirmation(yes: bool, what: str) -> None:
    """UserError unless ``--yes`` was given or stdin is a terminal that can answer the question."""
    if not yes and not sys.stdin.isatty():
        raise UserError(f"refusing to {what} without confirmation: stdin is not a terminal; pass --yes to confirm non-interactively")


def confirm(prompt: str) -> bool:
    """Ask on stdin; True only for an explicit yes."""
    try:
        answer = input(prompt)
    except EOFError:
        return False
    return answer.strip().lower() in {"y", "yes"}


def confirmed_payment(yes: bool, question: str, fee: Decimal, currency: str, refused: str, out: TextIO | None = None) -> bool:
    """True to go ahead: ``--yes``, or ``yes`` typed to "QUESTION for FEE CURRENCY?"; else prints ``refused`` and is False."""
    if yes:
        return True
    sys.stdout.flush()
    if confirm(f"{question} for {fee:,.2f} {currency}? Type 'yes' to buy: "):
        return True
    print(refused, file=out or sys.stdout)
    return False


class Priced(Protocol):
    """An offering with its price (every Capacity Block and training plan offering)."""

    @property
    def upfront_fee(self) -> Decimal: ...
    @property
    def currency(self) -> str: ...


def confirm_offer(yes: bool, offer: Priced, heading: str, details: Mapping[str, str], note: str, question: str, refused: str,
                  out: TextIO | None = None) -> bool:
    """Show the offer (``heading``, one line per ``details`` label, its fee, ``note`` on what cannot be undone), then ask.

    True to go ahead (:func:`confirmed_payment` with ``question``); ``out`` is where the offer goes (stdout by default).
    """
    stream = out or sys.stdout
    print(heading, file=stream)
    for label, value in {**details, "upfront fee": f"{offer.upfront_fee:,.2f} {offer.currency}"}.items():
        print(f"  {label:<13}{value}", file=stream)
    print(note, file=stream)
    return confirmed_payment(yes, question, offer.upfront_fee, offer.currency, refused, out)


def print_purchased(summary: str, key: str, value: str, stack: str | None, next_step: str) -> None:
    """After a purchase: ``summary``, how to put ``value`` into the stack as ``key``, and ``next_step`` (``{stack}`` names the stack)."""
    stack = stack or "STACK"
    print(f"\n{summary}")
    print(stack_config_hint(key, value, stack))
    print(next_step.replace("{stack}", stack))


def stack_config_hint(key: str, value: str, stack: str) -> str:
    """How to put a bought id into the stack: the stack file line, or the ``pulumi config set`` command."""
    return "\n".join((
        f"Put it into the stack config (stacks/Pulumi.{stack}.yaml):",
        f"  {key}: {value}",
        "or run:",
        f"  pulumi config set {key} {value} -s {stack}",
    ))


def search_query(args: argparse.Namespace, now: datetime, build: Callable[..., QueryT], bound: str) -> QueryT:
    """The offering search ``build`` validates from the search flags, after checking ``--region``.

    ``bound`` is the dest of the flag that ends the search window (``start_before``, ``end_before``).
    """
    if args.region is not None:
        validate_region(args.region)

    def when(dest: str) -> datetime | None:
        value = getattr(args, dest)
        return parse_when(value, f"--{dest.replace('_', '-')}") if value else None

    window: dict[str, Any] = {"start_after": when("start_after"), bound: when(bound)}
    return build(instance_type=args.instance_type, count=args.count, days=args.days, now=now, **window)


def add_yes_flag(parser: argparse.ArgumentParser) -> None:
    """``--yes``: buy without the typed confirmation (every paying command has it)."""
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation (automation)")


def search_flags(args: argparse.Namespace, region: str, *bounds: str) -> str:
    """The search flags to repeat on a purchase command line (``bounds``: the optional window flags' dests)."""
    flags = f"--instance-type {args.instance_type} --count {args.count} --days {args.days}"
    for dest in ("start_after", *bounds):
        if getattr(args, dest):
            flags += f" --{dest.replace('_', '-')} {getattr(args, dest)}"
    return f"{flags} --region {region}"


__all__ = ["add_yes_flag", "confirm", "confirm_offer", "confirmed_payment", "print_purchased", "refuse_without_confirmation", "search_flags", "search_query", "stack_config_hint"]
