"""The diff of a plan against a previous plan: per resource create, update (which properties), replace, delete or unchanged.

Inputs are compared in the state's form (:mod:`kimi_k3.offline.state`: secrets fingerprinted,
numbers normalised), property by property; paths a registration ignores (``ignore_changes``)
are left out, as ``pulumi up`` leaves them. Whether a change updates or replaces follows the
encoded rules of :mod:`kimi_k3.offline.replacement_rules`; a type without rules is reported as
``change`` with its rules "not known". A replacement also reaches what refers to the replaced
resource's provider-assigned id: an AWS resource whose replacing property holds that id is
replaced too (a launch template renamed gives a new ``lt-`` id, and the node group that names
it is replaced), otherwise it is updated. (Kubernetes objects keep their ``namespace/name``
id across a replacement, so nothing cascades from them.)

Component resources have no provider state and are not listed; a remote component
(``eks:index:Cluster``) is, with its rules not known.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kimi_k3.offline.redaction import SECRET_MARK
from kimi_k3.offline.replacement_rules import Path, TypeRules, covers, refused, replacing, rules_for
from kimi_k3.offline.state import PreviousState, ResourceState

CREATE, UPDATE, REPLACE, DELETE, UNCHANGED, CHANGE = "create", "update", "replace", "delete", "unchanged", "change"
"""Actions; ``change``: the inputs differ and the type's rules are not known (update or replace)."""


def is_secret(value: Any) -> bool:
    """True for a secret as the state records it."""
    return value == SECRET_MARK or (isinstance(value, dict) and set(value) == {SECRET_MARK})


def changed_paths(old: Any, new: Any, path: Path = ()) -> list[Path]:
    """Every path where ``old`` and ``new`` differ (a list of another length, a secret, differs as a whole)."""
    if is_secret(old) or is_secret(new):
        return [] if old == new else [path]
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[Path] = []
        for key in sorted(set(old) | set(new)):
            found += changed_paths(old.get(key), new.get(key), (*path, key))
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [p for i, (a, b) in enumerate(zip(old, new, strict=True)) for p in changed_paths(a, b, (*path, i))]
    return [] if old == new else [path]


def value_at(tree: Any, path: Path) -> Any:
    """The value at ``path`` in ``tree`` (``None`` where it is absent)."""
    for part in path:
        if isinstance(part, int):
            tree = tree[part] if isinstance(tree, list) and part < len(tree) else None
        else:
            tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def render_path(path: Path) -> str:
    """``spec.template.metadata.annotations["kimi-k3.io/x"]``, ``containers[1].image``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "." in part or "/" in part:
            out += f'["{part}"]'
        else:
            out += ("." if out else "") + part
    return out


@dataclass(frozen=True)
class ResourceChange:
    """What the next ``pulumi up`` does to one resource."""

    urn: str
    """URN."""
    type: str
    """Type token."""
    name: str
    """Logical name."""
    action: str
    """:data:`CREATE`, :data:`UPDATE`, :data:`REPLACE`, :data:`DELETE`, :data:`UNCHANGED` or :data:`CHANGE`."""
    paths: tuple[Path, ...] = ()
    """Changed properties (an update's or a replacement's)."""
    replace_because: tuple[Path, ...] = ()
    """The changed properties that force the replacement."""
    refused: tuple[Path, ...] = ()
    """Changed properties the API refuses to update (the apply fails)."""
    rules: TypeRules | None = None
    """The type's encoded rules; ``None``: not known."""
    cascade_from: str = ""
    """URN of a replaced resource whose new id this one takes (why it changes although its own inputs did not)."""
    old: Mapping[str, Any] | None = None
    """Inputs before (state form); ``None`` for a create."""
    new: Mapping[str, Any] | None = None
    """Inputs after (state form); ``None`` for a delete."""

    @property
    def display_name(self) -> str:
        """A Kubernetes object's ``metadata.name``, else the logical name."""
        for inputs in (self.new, self.old):
            name = value_at(inputs, ("metadata", "name")) if inputs else None
            if isinstance(name, str):
                return name
        return self.name

    @property
    def rules_known(self) -> bool:
        """True when the type's replacement rules are encoded (fully)."""
        return self.rules is not None and self.rules.beyond_known

    def value(self, path: Path, *, before: bool = False) -> Any:
        """The value at ``path`` after (``before``: before) the change."""
        return value_at(self.old if before else self.new, path)

    def touches(self, prefix: str) -> list[Path]:
        """The changed paths under the dotted ``prefix``."""
        return [p for p in self.paths if covers(prefix, p)]


@dataclass(frozen=True)
class ChangeSet:
    """Every resource's change between a previous plan and a new one."""

    changes: tuple[ResourceChange, ...]
    """By URN."""
    previous: PreviousState
    """What the diff was against."""

    def __iter__(self) -> Iterator[ResourceChange]:
        """Every change, unchanged ones included, by URN."""
        return iter(self.changes)

    def changed(self) -> list[ResourceChange]:
        """The resources the next ``up`` touches."""
        return [c for c in self.changes if c.action != UNCHANGED]

    def of_type(self, type_: str) -> list[ResourceChange]:
        """Changes of one type."""
        return [c for c in self.changes if c.type == type_]

    def get(self, urn: str) -> ResourceChange | None:
        """The change of ``urn``."""
        return next((c for c in self.changes if c.urn == urn), None)


def _diffable(type_: str, custom: bool) -> bool:
    return custom or not type_.startswith("kimi-k3:")


def _ignored(path: Path, ignore: Iterable[str]) -> bool:
    return any(covers(prefix, path) for prefix in ignore)


def _classify(urn: str, before: ResourceState, after: ResourceState) -> ResourceChange:
    paths = [p for p in changed_paths(before.inputs, after.inputs) if not _ignored(p, after.ignore_changes)]
    rules = rules_for(after.type)
    forced: list[Path] = []
    if not paths:
        action = UNCHANGED
    elif rules is None:
        action = CHANGE
    else:
        forced = replacing(rules, paths)
        action = REPLACE if forced else UPDATE
    return ResourceChange(
        urn, after.type, after.name, action, paths=tuple(paths), replace_because=tuple(forced),
        refused=tuple(refused(rules, paths)) if rules is not None else (), rules=rules, old=before.inputs, new=after.inputs,
    )


def _holds(tree: Any, needle: str) -> list[Path]:
    """Paths of ``tree`` whose string value contains ``needle``."""
    if isinstance(tree, dict):
        return [(k, *p) for k, v in tree.items() for p in _holds(v, needle)]
    if isinstance(tree, list):
        return [(i, *p) for i, v in enumerate(tree) for p in _holds(v, needle)]
    return [()] if isinstance(tree, str) and needle in tree else []


def _cascade(changes: dict[str, ResourceChange], before: Mapping[str, ResourceState]) -> None:
    """Replacements reach what holds the replaced resource's provider-assigned id (see the module docstring)."""
    pending = [c for c in changes.values() if c.action == REPLACE and not c.type.startswith("kubernetes:")]
    while pending:
        replaced = pending.pop()
        old_id = before[replaced.urn].id if replaced.urn in before else None
        if not old_id or len(old_id) < 6:
            continue
        for urn, change in list(changes.items()):
            if urn == replaced.urn or change.action in (CREATE, DELETE, REPLACE) or change.new is None:
                continue
            holding = _holds(change.new, old_id)
            if not holding:
                continue
            forced = replacing(change.rules, holding) if change.rules else []
            action = REPLACE if forced else (UPDATE if change.rules else CHANGE)
            changes[urn] = ResourceChange(
                urn=urn, type=change.type, name=change.name, action=action, paths=tuple(dict.fromkeys([*change.paths, *holding])),
                replace_because=tuple(forced), rules=change.rules, cascade_from=replaced.urn, old=change.old, new=change.new,
            )
            if action == REPLACE:
                pending.append(changes[urn])


def diff(previous: PreviousState, resources: Iterable[Any]) -> ChangeSet:
    """The changes from ``previous`` to the new run's recorded ``resources``."""
    after = {r.urn: previous.state_of(r) for r in resources if _diffable(r.type, r.custom)}
    before = {urn: r for urn, r in previous.resources.items() if _diffable(r.type, r.custom)}
    changes: dict[str, ResourceChange] = {}
    for urn in sorted(set(before) | set(after)):
        if urn not in before:
            a = after[urn]
            changes[urn] = ResourceChange(urn, a.type, a.name, CREATE, rules=rules_for(a.type), new=a.inputs)
        elif urn not in after:
            b = before[urn]
            changes[urn] = ResourceChange(urn, b.type, b.name, DELETE, rules=rules_for(b.type), old=b.inputs)
        else:
            changes[urn] = _classify(urn, before[urn], after[urn])
    _cascade(changes, before)
    return ChangeSet(tuple(changes[urn] for urn in sorted(changes)), previous)


__all__ = [
    "CHANGE", "CREATE", "DELETE", "REPLACE", "UNCHANGED", "UPDATE",
    "ChangeSet", "ResourceChange", "changed_paths", "diff", "is_secret", "render_path", "value_at",
]
