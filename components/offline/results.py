"""What one offline run declared, and the plan files written from it.

:class:`PlanResult` answers questions about the recorded resources (by type, parent,
children, the Kubernetes objects, the Helm values); :func:`write_plan` writes
``resources.json``, ``outputs.json``, ``state.json`` (what a later ``--previous`` run reads:
:mod:`kimi_k3.offline.state`), ``manifests/`` and ``helm/`` with deterministic bytes
(sorted by URN or object identity, keys sorted).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kimi_k3.errors import UserError
from kimi_k3.offline.fixtures import ReservationFixture
from kimi_k3.offline.helm_plan import helm_values_files
from kimi_k3.offline.redaction import redact
from kimi_k3.offline.state import write_state
from kimi_k3.stack import settings as stack_settings

if TYPE_CHECKING:
    from kimi_k3.hyperpod.training_plan_check import TrainingPlanFacts
    from kimi_k3.offline.record import RecordedResource



@dataclass
class PlanResult:
    """Everything one offline run declared."""

    project: str
    """Pulumi project name the program ran as."""
    stack: str
    """Stack name the program ran as."""
    resources: list[RecordedResource]
    """Every resource the program registered, in registration order (the stack itself left out)."""
    outputs: dict[str, Any]
    """Stack outputs, resolved; secret outputs keep Pulumi's secret marker."""
    warnings: list[str]
    """Messages logged at warning level or above during the run; from a stack's files, first one line per declared secret the file lacks."""
    settings: stack_settings.StackSettings | None = None
    """The stack's validated kimi-k3 settings; None for another project's program or a run not made from a stack's config."""
    reservation: ReservationFixture | None = None
    """The Capacity Block the engine answered the look-up with; None when none was answered."""
    now: datetime | None = None
    """The moment the program ran at (pinned by the engine)."""
    secret_keys: frozenset[str] = frozenset()
    """Config keys that were ``secure:`` values (a marked placeholder stood in for each)."""
    region: str | None = None
    """The AWS region the engine answered for."""
    training_plan: TrainingPlanFacts | None = None
    """The training plan the engine answered a ``hyperpod`` stack's look-up with."""

    def by_type(self, type_: str) -> list[RecordedResource]:
        """All resources of one type token."""
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: str | None = None) -> RecordedResource:
        """The single resource of ``type_`` (whose name ends with ``name`` if given)."""
        found = [r for r in self.by_type(type_) if name is None or r.name == name or r.name.endswith(name)]
        if len(found) != 1:
            names = [r.name for r in self.by_type(type_)]
            raise LookupError(f"expected one {type_} named {name!r}, found {len(found)} among {names}")
        return found[0]

    def parent_of(self, resource: RecordedResource) -> RecordedResource | None:
        """The resource's parent, if it has one other than the stack."""
        return next((r for r in self.resources if r.urn == resource.parent_urn), None)

    def children_of(self, resource: RecordedResource) -> list[RecordedResource]:
        """Direct children of a resource."""
        return [r for r in self.resources if r.parent_urn == resource.urn]

    def kubernetes_objects(self) -> list[dict]:
        """Every Kubernetes object declared, as a complete manifest with secrets redacted.

        Ordered by kind, namespace and name (not by registration order, which depends on
        how the engine's threads interleave). Helm releases are not objects: the provider
        renders their charts at apply time (:func:`helm_values` shows chart and values);
        providers are skipped.
        """
        manifests = [m for m in (kubernetes_manifest(r) for r in self.resources) if m is not None]
        return sorted(manifests, key=manifest_file_name)

    def helm_values(self) -> dict[str, str]:
        """``{"<release>.values.yaml": text}`` for every Helm release (chart, version, repository, values)."""
        return helm_values_files(self.resources, redact)

    def resources_document(self) -> list[dict]:
        """The ``resources.json`` content: type, name, parent, inputs (secrets redacted), by URN; ``ignoreChanges``
        when the resource has any (what a later ``pulumi up`` leaves alone).

        Sorted by URN, so two runs of the same inputs give the same bytes however the
        engine's threads interleaved the registrations.
        """
        by_urn = {r.urn: r for r in self.resources}
        document = []
        for resource in sorted(self.resources, key=lambda r: r.urn):
            parent = by_urn.get(resource.parent_urn or "")
            entry = {
                "type": resource.type,
                "name": resource.name,
                "urn": resource.urn,
                "parent": {"type": parent.type, "name": parent.name} if parent else None,
                "inputs": redact(resource.inputs),
            }
            if resource.ignore_changes:
                entry["ignoreChanges"] = list(resource.ignore_changes)
            document.append(entry)
        return document

    def plain_outputs(self) -> dict[str, Any]:
        """Stack outputs with secret ones redacted."""
        return {k: redact(v) for k, v in self.outputs.items()}


def manifest_file_name(manifest: Mapping[str, Any]) -> str:
    """``<kind>-<namespace>-<name>.yaml`` (cluster-scoped objects: ``<kind>-<name>.yaml``).

    Derived from the object's identity only, so a plan's file names do not depend on the
    order the program declared things in.
    """
    meta = manifest.get("metadata") or {}
    parts = (str(manifest["kind"]).lower(), meta.get("namespace"), meta.get("name"))
    return "-".join(str(p) for p in parts if p) + ".yaml"


def kubernetes_manifest(resource: RecordedResource) -> dict | None:
    """Turn a recorded ``kubernetes:<group>/<version>:<Kind>`` resource into a manifest."""
    if not resource.type.startswith("kubernetes:") or resource.type.startswith("kubernetes:helm.sh/"):
        return None
    group_version, kind = resource.type[len("kubernetes:") :].rsplit(":", 1)
    if group_version.startswith("core/"):
        group_version = group_version[len("core/") :]
    inputs = redact(resource.inputs)
    manifest = {"apiVersion": inputs.pop("apiVersion", group_version), "kind": inputs.pop("kind", kind)}
    manifest.update(inputs)
    return manifest



def write_plan(result: PlanResult, out_dir: Path) -> list[Path]:
    """Write ``resources.json``, ``outputs.json``, ``state.json``, ``manifests/*.yaml`` and ``helm/*.values.yaml``; returns manifest paths.

    Files a previous plan left in ``manifests/`` and ``helm/`` are removed first, so the
    directory holds exactly this plan.
    """
    import yaml

    out_dir.mkdir(parents=True, exist_ok=True)
    manifests_dir, helm_dir = out_dir / "manifests", out_dir / "helm"
    for directory, pattern in ((manifests_dir, "*.yaml"), (helm_dir, "*.values.yaml")):
        if directory.exists():
            for old in directory.glob(pattern):
                old.unlink()
        directory.mkdir(exist_ok=True)
    (out_dir / "resources.json").write_text(json.dumps(result.resources_document(), indent=2, sort_keys=True) + "\n")
    (out_dir / "outputs.json").write_text(json.dumps(result.plain_outputs(), indent=2, sort_keys=True) + "\n")
    write_state(result, out_dir)
    written = []
    for manifest in result.kubernetes_objects():
        path = manifests_dir / manifest_file_name(manifest)
        if path in written:
            raise UserError(f"two Kubernetes objects share kind, namespace and name ({path.name}); the API server would keep only one")
        path.write_text(yaml.safe_dump(manifest, sort_keys=True))
        written.append(path)
    for name, text in result.helm_values().items():
        (helm_dir / name).write_text(text)
    return written
