"""When each resource of a first ``pulumi up`` would be created: the run's ``now`` plus create times along its dependencies.

Pulumi creates a resource once everything it depends on exists: the resources named in
``depends_on``, those whose outputs feed its inputs (both arrive as the registration's
dependencies) and its provider. So a resource's create call happens at the latest moment
one of those is done, and it is done :func:`~kimi_k3.offline.create_times.create_time`
later. A component resource has no create call of its own: depending on it means depending
on every resource registered under it so far. (A remote component such as pulumi-eks's
``eks:index:Cluster`` is answered as one resource under mocks and has its own create time.)

A child also waits for its parent: the engine answers a registration only once the
resource's own dependencies are done, and a child is registered with its parent's URN,
so ``depends_on`` given to a component holds back everything declared inside it.

Without a previous state this is a model of the first ``up`` (nothing exists yet): the
slowest case. With one (a later ``up``, :mod:`kimi_k3.offline.state`), a resource that
exists with the same inputs gets no API call at all: it is done at ``now`` and its moment
says :attr:`Moment.unchanged`; a changed one is modelled as taking its create time (an
update is rarely slower than a create).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from kimi_k3.offline.create_times import CREATE_TIMES, NO_TIME, CreateTime, create_time

if TYPE_CHECKING:
    from kimi_k3.offline.state import PreviousState

UNCHANGED = CreateTime(NO_TIME.duration, "exists with the same inputs since the previous run: no API call")


class Registration(Protocol):
    """What the timeline reads of a registration (a :class:`~kimi_k3.offline.engine.RecordedResource`)."""

    type: str
    urn: str
    parent_urn: str | None
    custom: bool
    inputs: dict
    dependencies: list[str]
    provider: str


@dataclass(frozen=True)
class Moment:
    """When one resource's creation starts (its create call) and when it is done."""

    starts: datetime
    """When the create call is made: its parent answered and everything it depends on done (the run's ``now`` at the earliest)."""
    done: datetime
    """When the resource is usable by what depends on it: ``starts`` plus the create time."""
    create_time: CreateTime
    """The modelled create time and its source; ``NO_TIME`` for a component resource."""
    unchanged: bool = False
    """True when the resource exists with the same inputs since the previous run (no API call is made)."""


class Timeline:
    """The modelled creation moments of the resources registered so far, from ``now``."""

    def __init__(self, now: datetime, previous: PreviousState | None = None) -> None:
        """Start an empty timeline at ``now``, the moment the ``pulumi up`` starts; ``previous``: what exists already."""
        self.now = now
        self.previous = previous
        self._moments: dict[str, Moment] = {}
        self._parents: dict[str, str | None] = {}
        self._components: set[str] = set()
        self._registered: dict[str, datetime] = {}
        """When each registration is answered (what its children wait for)."""
        self.registrations: dict[str, Registration] = {}
        """Every registration placed so far, by URN (what a rule looks back on)."""
        self.reads: list[tuple[str, str]] = []
        """Existing resources the program reads (``Resource.get``: type and id), in order; they must exist before the run."""

    def add(self, registration: Registration) -> Moment:
        """Place one registration (in registration order: its dependencies are already placed)."""
        self._parents[registration.urn] = registration.parent_urn
        self.registrations[registration.urn] = registration
        if not registration.custom and registration.type not in CREATE_TIMES:
            self._components.add(registration.urn)
        waits_for = [*registration.dependencies]
        if registration.provider:
            waits_for.append(provider_urn(registration.provider))
        parent_answered = self._registered.get(registration.parent_urn or "", self.now)
        starts = max([parent_answered, *(self.done(urn) for urn in waits_for)])
        unchanged = self.exists_unchanged(registration)
        if unchanged:
            starts, cost = self.now, UNCHANGED
        else:
            cost = NO_TIME if registration.urn in self._components else create_time(registration.type, registration.inputs)
        moment = Moment(starts=starts, done=starts + cost.duration, create_time=cost, unchanged=unchanged)
        self._moments[registration.urn] = moment
        self._registered[registration.urn] = moment.done
        return moment

    def done(self, urn: str) -> datetime:
        """When the resource ``urn`` exists (a component: when everything under it does; unknown: ``now``)."""
        if urn in self._components:
            below = [m.done for u, m in self._moments.items() if u != urn and self._is_under(u, urn)]
            return max(below, default=self.now)
        moment = self._moments.get(urn)
        return moment.done if moment else self.now

    def previous_inputs(self, urn: str) -> dict | None:
        """The inputs ``urn`` had in the previous run (state form), or ``None`` when it did not exist."""
        found = self.previous.resource(urn) if self.previous is not None else None
        return found.inputs if found is not None else None

    def exists_unchanged(self, registration: Registration) -> bool:
        """True when the registration's resource exists since the previous run with the same inputs."""
        before = self.previous_inputs(registration.urn)
        if before is None or self.previous is None:
            return False
        return self.previous.inputs_of(registration.inputs) == before

    def moment(self, urn: str) -> Moment | None:
        """The placed moment of ``urn``, if registered."""
        return self._moments.get(urn)

    def _is_under(self, urn: str, ancestor: str) -> bool:
        parent = self._parents.get(urn)
        while parent is not None:
            if parent == ancestor:
                return True
            parent = self._parents.get(parent)
        return False


def provider_urn(reference: str) -> str:
    """The URN part of a provider reference (``urn::id``)."""
    return reference.rsplit("::", 1)[0]


__all__ = ["UNCHANGED", "Moment", "Registration", "Timeline", "provider_urn"]
