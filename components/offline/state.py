"""What a plan recorded of each resource for a later run: ``state.json``, and reading it back as the previous state.

``kimi-k3 plan STACK --out DIR`` writes ``DIR/state.json`` beside ``resources.json``: every
resource's URN, type, name, parent, id, inputs and the outputs the offline engine answered
with, the stack outputs, the run's ``now`` and the Capacity Block it rehearsed. A later
``kimi-k3 plan STACK --previous DIR`` reads it back as :class:`PreviousState`: the offline
engine answers the program's read of its own stack's resources from it (the builtin
``pulumi:pulumi:readStackResourceOutputs`` invoke, :mod:`kimi_k3.stack.previous_run`), the
apply-time rules see which resources already exist (:mod:`kimi_k3.offline.rules`), and the
change review diffs against it (:mod:`kimi_k3.offline.diff`).

Secrets. Nothing secret is written: a secret value becomes ``{"[secret]": FINGERPRINT}``
when it is an offline placeholder (the stand-in for a ``secure:`` value, which carries a
digest of the public ciphertext, :func:`kimi_k3.stack.project.read_stack_document`), so a
rotated key still shows as a change; any other secret becomes ``"[secret]"`` and compares
equal to every other (a real secret is never fingerprinted).

A plan directory written before ``state.json`` existed still reads: its ``resources.json``
gives the inputs (secrets masked, no ids, no computed outputs); :attr:`PreviousState.complete`
says which.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pulumi.runtime import rpc

from kimi_k3.errors import UserError
from kimi_k3.offline.redaction import SECRET_MARK, redact, redact_numbers
from kimi_k3.stack.settings import SECRET_PLACEHOLDER_PREFIX

if TYPE_CHECKING:
    from kimi_k3.hyperpod.training_plan_check import TrainingPlanFacts
    from kimi_k3.offline.fixtures import ReservationFixture
    from kimi_k3.offline.record import RecordedResource

STATE_FILE = "state.json"
"""The file a plan writes its state to."""
STATE_FORMAT = "kimi-k3-plan-state/1"
"""The ``format`` of :data:`STATE_FILE`; another format is refused with one line."""


def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig


def _plain_leaf(value: Any) -> Any:
    while _is_secret(value):
        value = value["value"]
    return value


def _leaves(value: Any) -> list[Any]:
    value = _plain_leaf(value)
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _plain(value: Any) -> Any:
    value = _plain_leaf(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def fingerprint(secret: Any) -> Any:
    """A secret as the state records it: ``{"[secret]": 16 hex}`` over the offline placeholders in it (stand-ins
    derived from public data), else ``"[secret]"``.

    Only placeholder strings enter the digest: a secret that also holds values derived from its placeholder
    (the API-key Secret's key-check file, a digest of the key) changes exactly when the placeholder does, and
    a real secret's bytes never reach the state.
    """
    placeholders = [leaf for leaf in _leaves(secret) if isinstance(leaf, str) and leaf.startswith(SECRET_PLACEHOLDER_PREFIX)]
    if placeholders:
        digest = hashlib.sha256(json.dumps(sorted(placeholders)).encode()).hexdigest()[:16]
        return {SECRET_MARK: digest}
    return SECRET_MARK


def state_value(value: Any) -> Any:
    """``value`` (inputs or outputs as the engine recorded them) in the state's JSON form: secrets fingerprinted, whole floats as ints."""
    if _is_secret(value):
        return fingerprint(value)
    if isinstance(value, dict):
        if rpc._special_sig_key in value:
            return redact_numbers(redact(value))
        return {k: state_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [state_value(v) for v in value]
    return redact_numbers(redact(value))


def masked_value(value: Any) -> Any:
    """``value`` as ``resources.json`` records it (every secret leaf masked): to compare with a plan that has no ``state.json``."""
    return redact_numbers(redact(value))


def computed_outputs(inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> dict[str, Any]:
    """The outputs that are not the inputs echoed back (what the provider computed)."""
    return {k: v for k, v in outputs.items() if k not in inputs or inputs[k] != v}


@dataclass(frozen=True)
class ResourceState:
    """One resource as a plan recorded it."""

    urn: str
    """URN (parent chain, type and name)."""
    type: str
    """Pulumi type token."""
    name: str
    """Logical name."""
    custom: bool
    """True for a provider-managed resource (a component has no state of its own)."""
    inputs: dict[str, Any]
    """Inputs in the state's form (:func:`state_value`)."""
    outputs: dict[str, Any] = field(default_factory=dict)
    """Outputs the provider computed (ids, ARNs), in the state's form; empty for a plan without ``state.json``."""
    id: str | None = None
    """Id the engine answered with; ``None`` for a component or a plan without ``state.json``."""
    parent: str | None = None
    """URN of the parent resource, if any."""
    dependencies: tuple[str, ...] = ()
    """URNs the resource was registered as depending on."""
    ignore_changes: tuple[str, ...] = ()
    """Property paths a later update leaves alone."""

    def document(self) -> dict[str, Any]:
        """The resource's entry in :data:`STATE_FILE`."""
        return {
            "urn": self.urn, "type": self.type, "name": self.name, "custom": self.custom, "id": self.id, "parent": self.parent,
            "inputs": self.inputs, "outputs": self.outputs, "dependencies": list(self.dependencies), "ignoreChanges": list(self.ignore_changes),
        }

    @property
    def state(self) -> dict[str, Any]:
        """Inputs and computed outputs together: what Pulumi's state holds as the resource's outputs."""
        return {**self.inputs, **self.outputs}


def resource_state(resource: RecordedResource, *, masked: bool = False) -> ResourceState:
    """A recorded resource in the state's form (``masked``: secrets masked as in ``resources.json``)."""
    convert = masked_value if masked else state_value
    inputs = convert(resource.inputs)
    outputs = {} if masked else convert(computed_outputs(resource.inputs, resource.outputs))
    return ResourceState(
        urn=resource.urn, type=resource.type, name=resource.name, custom=resource.custom, inputs=inputs,
        outputs=outputs, id=None if masked else resource.id, parent=resource.parent_urn,
        dependencies=tuple(sorted(set(resource.dependencies))), ignore_changes=tuple(resource.ignore_changes),
    )


@dataclass(frozen=True)
class PreviousState:
    """The state of an earlier plan: the resources that exist for the next run, their properties and ids."""

    stack: str
    """Stack the plan was made for."""
    resources: dict[str, ResourceState]
    """Resources by URN."""
    outputs: dict[str, Any] = field(default_factory=dict)
    """Stack outputs (secrets masked)."""
    now: datetime | None = None
    """The moment the earlier plan ran at."""
    source: str = ""
    """Where it was read from (a directory), for messages."""
    complete: bool = True
    """False for a plan without ``state.json``: inputs only, secrets masked, no ids or computed outputs."""
    reservation_start: datetime | None = None
    """Start of the Capacity Block the earlier plan rehearsed (a later run rehearses the same block by default)."""
    training_plan_start: datetime | None = None
    """Start of the training plan a ``hyperpod`` stack's earlier plan rehearsed (likewise)."""

    def resource(self, urn: str) -> ResourceState | None:
        """The resource with ``urn``, if it existed."""
        return self.resources.get(urn)

    def stack_resource_outputs(self, project: str = "kimi-k3") -> dict[str, Any]:
        """What the builtin ``pulumi:pulumi:readStackResourceOutputs`` answers: ``{urn: {"type", "outputs"}}`` of every custom
        resource, and of the root ``pulumi:pulumi:Stack`` resource with the stack outputs.

        The backend answers every resource of the snapshot that is not pending deletion, the root stack resource too, whose
        outputs are the stack's exports (pulumi/pulumi ``pkg/backend/httpstate/backend.go`` and ``pkg/backend/diy``,
        ``GetStackResourceOutputs``: ``for _, r := range snapshot.Resources { if r.Delete { continue } …}``;
        ``GetStackOutputs`` reads the same root resource's ``Outputs``).
        """
        found: dict[str, Any] = {urn: {"type": r.type, "outputs": r.state} for urn, r in sorted(self.resources.items()) if r.custom}
        if self.outputs and self.stack:
            found[stack_urn(self.stack, project)] = {"type": ROOT_STACK_TYPE, "outputs": dict(self.outputs)}
        return found

    def state_of(self, resource: RecordedResource) -> ResourceState:
        """A resource of a new run in the same form as this state's (masked when this state is)."""
        return resource_state(resource, masked=not self.complete)

    def inputs_of(self, inputs: Mapping[str, Any]) -> Any:
        """Inputs of a new run's registration in the same form as this state's."""
        return state_value(inputs) if self.complete else masked_value(inputs)

    @classmethod
    def from_plan(cls, result: PlanResult, source: str = "") -> PreviousState:
        """The state a plan writes, without writing it (a test's previous run)."""
        return parse(state_document(result), source or f"plan of stack {result.stack}")


class PlanResult(Protocol):
    """What the state reads of a plan (a :class:`~kimi_k3.offline.results.PlanResult`, which writes its state through this module)."""

    @property
    def project(self) -> str: ...
    @property
    def stack(self) -> str: ...
    @property
    def now(self) -> datetime | None: ...
    @property
    def region(self) -> str | None: ...
    @property
    def reservation(self) -> ReservationFixture | None: ...
    @property
    def training_plan(self) -> TrainingPlanFacts | None: ...
    @property
    def resources(self) -> list[RecordedResource]: ...
    def plain_outputs(self) -> dict[str, Any]: ...


ROOT_STACK_TYPE = "pulumi:pulumi:Stack"
"""Type of a stack's root resource, whose outputs are the stack's exports."""


def stack_urn(stack: str, project: str) -> str:
    """URN of the root resource of ``stack`` of ``project`` (``urn:pulumi:dev::kimi-k3::pulumi:pulumi:Stack::kimi-k3-dev``)."""
    return f"urn:pulumi:{stack}::{project}::{ROOT_STACK_TYPE}::{project}-{stack}"


def state_document(result: PlanResult) -> dict[str, Any]:
    """The content of :data:`STATE_FILE` for a plan: sorted by URN, so the same inputs give the same bytes."""
    fixture = result.reservation
    return {
        "format": STATE_FORMAT,
        "project": result.project,
        "stack": result.stack,
        "now": result.now.isoformat() if result.now else None,
        "region": result.region,
        "reservation": None if fixture is None else {
            "id": fixture.id, "state": fixture.state, "availabilityZone": fixture.availability_zone, "instanceType": fixture.instance_type,
            "instanceCount": fixture.instance_count, "start": fixture.start.isoformat(), "end": fixture.end.isoformat(),
        },
        "trainingPlan": None if result.training_plan is None else {"arn": result.training_plan.arn, "start": result.training_plan.start.isoformat()},
        "outputs": result.plain_outputs(),
        "resources": [resource_state(r).document() for r in sorted(result.resources, key=lambda r: r.urn)],
    }


def write_state(result: PlanResult, out_dir: Path) -> Path:
    """Write :data:`STATE_FILE` of ``result`` into ``out_dir``."""
    path = out_dir / STATE_FILE
    path.write_text(json.dumps(state_document(result), indent=1, sort_keys=True) + "\n")
    return path


def parse(document: Mapping[str, Any], source: str) -> PreviousState:
    """A :data:`STATE_FILE` document as a :class:`PreviousState` (``source`` names it in errors)."""
    if document.get("format") != STATE_FORMAT:
        raise UserError(f"--previous {source}: {STATE_FILE} has format {document.get('format')!r}; this kimi-k3 reads {STATE_FORMAT} (re-run that plan)")
    resources = {}
    for entry in document.get("resources") or []:
        resources[entry["urn"]] = ResourceState(
            urn=entry["urn"], type=entry["type"], name=entry["name"], custom=bool(entry.get("custom", True)),
            inputs=entry.get("inputs") or {}, outputs=entry.get("outputs") or {}, id=entry.get("id"), parent=entry.get("parent"),
            dependencies=tuple(entry.get("dependencies") or ()), ignore_changes=tuple(entry.get("ignoreChanges") or ()),
        )
    now = document.get("now")
    start = (document.get("reservation") or {}).get("start")
    plan_start = (document.get("trainingPlan") or {}).get("start")
    return PreviousState(
        stack=str(document.get("stack") or ""), resources=resources, outputs=dict(document.get("outputs") or {}),
        now=datetime.fromisoformat(now) if now else None, source=source, reservation_start=datetime.fromisoformat(start) if start else None,
        training_plan_start=datetime.fromisoformat(plan_start) if plan_start else None,
    )


def _from_resources_json(directory: Path, source: str) -> PreviousState:
    """A plan written before ``state.json``: inputs from ``resources.json`` (secrets masked), outputs from ``outputs.json``."""
    try:
        entries = json.loads((directory / "resources.json").read_text())
        outputs = json.loads((directory / "outputs.json").read_text()) if (directory / "outputs.json").is_file() else {}
    except (OSError, ValueError) as err:
        raise UserError(f"--previous {source}: cannot read resources.json ({err})") from None
    resources = {}
    for entry in entries:
        # resources.json has no custom flag: kimi-k3 component types are components, everything else a provider's resource.
        custom = not entry["type"].startswith("kimi-k3:")
        resources[entry["urn"]] = ResourceState(
            urn=entry["urn"], type=entry["type"], name=entry["name"], custom=custom, inputs=entry.get("inputs") or {},
            ignore_changes=tuple(entry.get("ignoreChanges") or ()),
        )
    start = (outputs.get("capacityBlock") or {}).get("start")
    return PreviousState(
        stack=directory.name, resources=resources, outputs=outputs, source=source, complete=False,
        reservation_start=datetime.fromisoformat(start) if isinstance(start, str) else None,
    )


def read(directory: Path) -> PreviousState:
    """The previous state of the plan in ``directory`` (``--previous DIR``); one line naming the flag when it is not a plan."""
    source = str(directory)
    if not directory.is_dir():
        raise UserError(f"--previous {source} is not a directory; give the --out directory of an earlier `kimi-k3 plan` (e.g. build/plan/STACK)")
    path = directory / STATE_FILE
    if path.is_file():
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise UserError(f"--previous {source}: cannot read {STATE_FILE} ({err})") from None
        return parse(document, source)
    if (directory / "resources.json").is_file():
        return _from_resources_json(directory, source)
    raise UserError(f"--previous {source} holds no plan (no {STATE_FILE}, no resources.json); give the --out directory of an earlier `kimi-k3 plan`")


__all__ = [
    "ROOT_STACK_TYPE",
    "STATE_FILE",
    "STATE_FORMAT",
    "PreviousState",
    "ResourceState",
    "computed_outputs",
    "fingerprint",
    "masked_value",
    "parse",
    "read",
    "resource_state",
    "stack_urn",
    "state_document",
    "state_value",
    "write_state",
]
