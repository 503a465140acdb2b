"""One assessment of a Capacity Block against what a caller needs: the findings every caller shares.

:func:`assess` returns one :class:`Finding` (level ``OK``/``WARN``/``FAIL``, a code, one
sentence) per rule, in a fixed order. The callers decide what to do with them, never what
they are:

- ``Platform`` raises on the ``FAIL`` findings and warns once on the ``WARN`` ones, before
  anything is declared;
- ``CapacityBlockNodeGroup``, when it looked the block up itself, raises its ``FAIL``
  findings as a :class:`~kimi_k3.errors.ComponentInputError` and warns on the rest;
- ``kimi-k3 capacity preflight`` prints them all, with what only boto3 can read besides
  (block health, free instances, the vCPU quota).

A message names what the caller's user touched: :class:`Terms` (the stack's config keys
for the platform and preflight, :data:`ARGS_TERMS` for the component used alone).

The rules and where they come from (EC2 User Guide, "Capacity Blocks for ML" and "Use
Capacity Blocks with EKS managed node groups"; EKS User Guide, capacity-blocks-mng):

- a node group can use a reservation of type ``capacity-block`` only, in state
  ``scheduled`` or ``active``; ``payment-pending``, ``pending``, ``assessing`` and ``delayed``
  may still turn usable (warn); every other state (``expired``, ``payment-failed``,
  ``cancelled``, ``failed``, ``unsupported``, ``unavailable`` …) cannot;
- the launch template's instance type must be the block's; the node group's subnet must be
  in the block's AZ (a subnet elsewhere fails with a misleading "instance types do not
  exist"); the block must reserve the nodes the caller needs; its platform is ``Linux/UNIX``;
- EKS scales the node group to 0 forty minutes before the end (EC2 terminates from thirty
  minutes before): a block ending within :data:`ENDING_SOON` cannot serve; under
  :data:`SHORT_WINDOW` of usable time a first vLLM boot (60-75 minutes) barely fits.

A block that has ended (``expired``, or past its end) does not refuse the stack: the stack
must stay updatable after its block (rotate the API key, change serving, scale the GPU nodes
away), so the assessment warns and :func:`phase` says ``ended``, in which the node group is
kept at zero nodes (:mod:`kimi_k3.capacity.scaling`). The phase of a block at a moment —
before its start, serving, ending, ended — has its one home here, :func:`phase`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.core import formats
from kimi_k3.core.args_check import checked_args, checked_function
from kimi_k3.core.clock import utc
from kimi_k3.errors import ComponentInputError, Problem, UserError

OK, WARN, FAIL = "OK", "WARN", "FAIL"
"""Finding levels: fine, works with a caveat, cannot work."""

USABLE_STATES = ("scheduled", "active")
"""States in which a node group can be (or become) backed by the block."""
ENDED_STATES = ("expired",)
"""States of a block whose window is over: the stack stays updatable, its GPU node group at zero."""
PENDING_STATES = ("payment-pending", "pending", "assessing", "delayed")
"""States that may still turn usable: allowed with a warning."""

INSTANCE_PLATFORM = "Linux/UNIX"
"""Platform of a block EKS AL2023 NVIDIA nodes can use (and the one ``kimi-k3 capacity purchase`` buys)."""

ENDING_SOON = timedelta(hours=1)
"""A block ending sooner than this cannot serve (EKS scales the node group to 0 at end - 40 min)."""

SHORT_WINDOW = timedelta(hours=3)
"""Usable time below which the window is a warning: a first boot can take 60-75 minutes."""

BEFORE, SERVING, ENDING, ENDED = "before", "serving", "ending", "ended"
"""The phases of a block at a moment (:func:`phase`)."""

KEPT_AT_ZERO = "the stack can still be updated, with its GPU node group kept at 0 nodes"
"""What an ended or ending block means for the stack (said in its warnings)."""


def phase(block: CapacityBlockFacts, now: datetime) -> str:
    """Where ``now`` falls in the block's life: :data:`BEFORE` its start, :data:`SERVING`, :data:`ENDING`, :data:`ENDED`.

    ``ended``: the block is expired or its end has passed; ``ending``: it ends within
    :data:`ENDING_SOON` (EKS scales the node group to 0 forty minutes before the end);
    ``serving``: it is active, or its start has passed (EC2 reports ``active`` minutes late);
    ``before``: not started yet (``scheduled`` or still ``payment-pending``).
    """
    now = utc(now)
    start, end = block.window()
    if block.state in ENDED_STATES or now >= end:
        return ENDED
    if now >= end - ENDING_SOON:
        return ENDING
    if block.state == "active" or start <= now:
        return SERVING
    return BEFORE

@dataclass(frozen=True)
class Finding:
    """One rule applied to one block: its level, a short code, one sentence, and what it is about."""

    level: str
    """:data:`OK`, :data:`WARN` or :data:`FAIL`."""
    code: str
    """Short name of the rule (``state``, ``instance type``, ``window`` …), as preflight prints it."""
    message: str
    """One sentence, in the caller's terms."""
    subject: str = "reservation"
    """Which of the caller's inputs a ``FAIL`` asks to change: ``reservation``, ``instance_type``,
    ``availability_zones`` or ``nodes_required`` (:meth:`Terms.name` names it in the caller's API)."""


@checked_args
@dataclass(frozen=True)
class BlockNeeds:
    """What the caller needs of the block."""

    instance_type: str
    """Instance type the node group launches."""
    nodes_required: int = 1
    """GPU nodes the caller needs at least."""
    availability_zones: tuple[str, ...] | None = None
    """AZs the network covers (``None``: not checked)."""
    region: str | None = None
    """Region the block must be in (``None``: not checked)."""

    def __post_init__(self) -> None:
        """Refuse needs no block can be judged against (the types are checked before, at the door): fewer than 1 node, a region
        that is not a region's name (``us-east-1a`` given as the region would fail every block as "not in region us-east-1a")."""
        problems = []
        if self.nodes_required < 1:
            problems.append(Problem("nodes_required", f"nodes_required {self.nodes_required} is not accepted; expected at least 1"))
        if self.region is not None and not formats.REGION.fullmatch(self.region):
            problems.append(Problem("region", f"region {self.region!r} is not accepted; expected an AWS region name such as us-east-1"))
        if problems:
            raise ComponentInputError("BlockNeeds", None, problems)


@dataclass(frozen=True)
class Terms:
    """How the caller's API names the inputs a finding asks to change (the API its user touched)."""

    reservation: str
    """The block's id input (``reservation_id``, ``kimi-k3:capacityReservationId``)."""
    instance_type: str
    """The instance type input."""
    availability_zones: str
    """Where the AZs come from (``subnet_ids_by_az``, ``kimi-k3:availabilityZones``)."""
    nodes: str
    """The input that sets how many nodes are needed (``nodes_required``, ``kimi-k3:replicas``)."""
    nodes_needed: str
    """The nodes needed, with ``{n}``: ``nodes_required is {n}``, ``the stack needs {n} (…)``."""
    assign: str
    """How to set an input, with ``{name}`` and ``{value}`` (``pass {name}={value!r}``)."""
    new_block: str
    """How to use another block (``buy a new one (…) and pass its id as reservation_id``)."""

    def name(self, subject: str) -> str:
        """The caller's name of a finding's ``subject``."""
        return {
            "reservation": self.reservation,
            "instance_type": self.instance_type,
            "availability_zones": self.availability_zones,
            "nodes_required": self.nodes,
        }[subject]


ARGS_TERMS = Terms(
    reservation="reservation_id",
    instance_type="instance_type",
    availability_zones="subnet_ids_by_az",
    nodes="nodes_required",
    nodes_needed="nodes_required is {n}",
    assign="pass {name}={value!r}",
    new_block="buy a new one (`kimi-k3 capacity offerings`) and pass its id as reservation_id",
)
"""The terms of :class:`~kimi_k3.capacity.node_group.CapacityBlockNodeGroupArgs` (the component used alone)."""


def _when(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def span(delta: timedelta) -> str:
    """A short human duration for messages (``2d 3h``, ``45m``); the sign is dropped."""
    minutes = int(abs(delta).total_seconds() // 60)
    days, rem = divmod(minutes, 1440)
    hours, mins = divmod(rem, 60)
    parts = [f"{days}d"] if days else []
    if hours:
        parts.append(f"{hours}h")
    if mins and not days:
        parts.append(f"{mins}m")
    return " ".join(parts) or "0m"


def az_in_region(az: str, region: str) -> bool:
    """Whether AZ (or Local Zone) name ``az`` belongs to ``region``."""
    if not az.startswith(region):
        return False
    rest = az[len(region):]
    return (len(rest) == 1 and rest.isalpha()) or rest.startswith("-")


@checked_function
def assess(block: CapacityBlockFacts, needs: BlockNeeds, now: datetime, terms: Terms = ARGS_TERMS) -> tuple[Finding, ...]:
    """Every finding about ``block`` against ``needs`` at ``now`` (pure: no AWS call, no clock)."""
    now = utc(now)
    rid = block.reservation_id
    found: list[Finding] = []

    def add(level: str, code: str, message: str, subject: str = "reservation") -> None:
        found.append(Finding(level, code, message, subject))

    if block.reservation_type == "capacity-block":
        add(OK, "reservation", f"{rid} exists and is a Capacity Block.")
    else:
        add(FAIL, "reservation", f"{rid} is a {block.reservation_type!r} reservation, not a Capacity Block, so a launch template with market type capacity-block cannot use it.")

    state = block.state
    if state in USABLE_STATES:
        add(OK, "state", f"Capacity Block {rid} is {state}.")
    elif state == "payment-pending":
        add(WARN, "state", f"Capacity Block {rid} is payment-pending; it becomes scheduled once AWS has processed the payment, and nodes can join only once it is active.")
    elif state in PENDING_STATES:
        add(WARN, "state", f"Capacity Block {rid} is {state}; nodes can join only once it is scheduled and then active.")
    elif state in ENDED_STATES:
        ended = f" (ended {_when(block.end)})" if block.end else ""
        add(WARN, "state", f"Capacity Block {rid} is {state}{ended}; {KEPT_AT_ZERO}. To serve again, {terms.new_block}.")
    else:
        add(FAIL, "state", f"Capacity Block {rid} is {state}; a node group needs a scheduled or active block: {terms.new_block}.")

    if block.instance_type == needs.instance_type:
        add(OK, "instance type", f"{block.instance_type} matches {terms.instance_type}.", "instance_type")
    else:
        fix = terms.assign.format(name=terms.instance_type, value=block.instance_type)
        add(FAIL, "instance type", f"Capacity Block {rid} reserves {block.instance_type}, but {terms.instance_type} is {needs.instance_type}; {fix} or use a block of {needs.instance_type}.", "instance_type")

    az = block.availability_zone
    shown = f"{az} ({block.availability_zone_id})" if block.availability_zone_id else az
    if needs.region is not None and not az_in_region(az, needs.region):
        add(FAIL, "availability zone", f"Capacity Block {rid} is in {shown}, which is not in region {needs.region}.", "availability_zones")
    elif needs.availability_zones is not None and az not in needs.availability_zones:
        add(FAIL, "availability zone",
            f"Capacity Block {rid} is in {az}, which the network does not cover (AZs: {', '.join(needs.availability_zones)}); "
            f"add {az} to {terms.availability_zones} (EKS would otherwise fail with 'instance types do not exist').", "availability_zones")
    else:
        where = f" in region {needs.region}" if needs.region else ""
        covered = ", which the network covers" if needs.availability_zones is not None else ""
        add(OK, "availability zone", f"Capacity Block {rid} is in {shown}{where}{covered}.", "availability_zones")

    needed = terms.nodes_needed.format(n=needs.nodes_required)
    if block.instance_count >= needs.nodes_required:
        add(OK, "instance count", f"{block.instance_count} reserved, {needed}.", "nodes_required")
    else:
        add(FAIL, "instance count", f"Capacity Block {rid} reserves {block.instance_count} instance(s) but {needed}; lower {terms.nodes} or buy a larger block.", "nodes_required")

    found.extend(_window(block, now, terms))

    if block.instance_platform and block.instance_platform != INSTANCE_PLATFORM:
        add(FAIL, "platform", f"Capacity Block {rid} is for {block.instance_platform}, but EKS AL2023 NVIDIA nodes are {INSTANCE_PLATFORM}.")
    return tuple(found)


def _window(block: CapacityBlockFacts, now: datetime, terms: Terms) -> list[Finding]:
    """The window and start findings (the block's dates against ``now``)."""
    rid = block.reservation_id
    if block.start is None or block.end is None:
        return [Finding(FAIL, "window", f"{rid} has no start or end date, which a Capacity Block always has.")]
    start, end = block.start, block.end
    left = end - now
    found: list[Finding] = []
    if left <= timedelta(0):
        if block.state not in ENDED_STATES:  # the state finding already says it ended
            found.append(Finding(WARN, "window", f"Capacity Block {rid} ended at {_when(end)} ({span(left)} ago); {KEPT_AT_ZERO}. To serve again, {terms.new_block}."))
        else:
            found.append(Finding(OK, "window", f"Capacity Block {rid} ended at {_when(end)} ({span(left)} ago)."))
    elif left <= ENDING_SOON:
        found.append(Finding(WARN, "window", f"Capacity Block {rid} ends in {span(left)} ({_when(end)}): EKS scales the node group to 0 forty minutes before the end, so {KEPT_AT_ZERO} (nodes already running stay until EKS scales them in). To serve again, {terms.new_block}."))
    else:
        usable = end - max(now, start)
        if usable < SHORT_WINDOW:
            found.append(Finding(WARN, "window", f"Capacity Block {rid} has only {span(usable)} of usable time left; a first vLLM boot can take 60-75 minutes and nodes drain 40 minutes before the end."))
        elif start > now:
            found.append(Finding(OK, "window", f"Capacity Block {rid} starts in {span(start - now)} ({_when(start)}), ends {_when(end)}."))
        else:
            found.append(Finding(OK, "window", f"Capacity Block {rid} is running, ends in {span(left)} ({_when(end)})."))
    if block.state != "active" and (block.state in USABLE_STATES or block.state in PENDING_STATES) and start <= now < end:
        found.append(Finding(WARN, "start", f"Capacity Block {rid} started at {_when(start)} but is still {block.state}; the node group asks for its nodes now and launches are retried until the block is active."))
    return found


def failures(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """The ``FAIL`` findings."""
    return tuple(f for f in findings if f.level == FAIL)


def warnings(findings: Iterable[Finding]) -> tuple[str, ...]:
    """The messages of the ``WARN`` findings."""
    return tuple(f.message for f in findings if f.level == WARN)


@checked_function
def verdict(findings: Sequence[Finding]) -> tuple[str, ...]:
    """Raise :class:`UserError` with every ``FAIL`` message (one line); else return the ``WARN`` messages."""
    failed = failures(findings)
    if len(failed) == 1:
        raise UserError(failed[0].message)
    if failed:
        raise UserError(f"the Capacity Block cannot back the node group: {' '.join(f'({i}) {f.message}' for i, f in enumerate(failed, start=1))}")
    return warnings(findings)


__all__ = [
    "ARGS_TERMS",
    "BEFORE",
    "ENDED",
    "ENDED_STATES",
    "ENDING",
    "ENDING_SOON",
    "FAIL",
    "INSTANCE_PLATFORM",
    "KEPT_AT_ZERO",
    "OK",
    "PENDING_STATES",
    "SERVING",
    "SHORT_WINDOW",
    "USABLE_STATES",
    "WARN",
    "BlockNeeds",
    "Finding",
    "Terms",
    "assess",
    "az_in_region",
    "failures",
    "phase",
    "span",
    "verdict",
    "warnings",
]
