"""The policy pack's verdict on an offline plan, reached the way ``pulumi preview --policy-pack`` reaches it.

``kimi-k3 plan`` runs every rule of :mod:`kimi_k3.guardrails.rules` over every resource
the program declared and prints the verdict: mandatory violations fail the plan,
advisory ones are listed. Nothing here is a re-implementation of a rule; what is
reproduced is how the Pulumi engine feeds the pack:

* **Config** (``--policy-pack-config FILE``): parsed, given defaults and checked as
  in pulumi/pulumi ``pkg/resource/analyzer/config.go`` (``parsePolicyPackConfig``,
  ``extractEnforcementLevel``, ``createConfigWithDefaults``, ``applyConfig``,
  ``validatePolicyPackConfig``): each key is a policy name or ``all``; a value is an
  enforcement level string or an object with ``enforcementLevel`` and the policy's
  properties; each policy starts from its own level (else the pack's) and the
  ``default`` of every property in its ``config_schema``; the result must satisfy
  the schema. The properties then travel to the analyzer as a protobuf ``Struct``
  (pulumi_policy 1.21 ``PolicyPack.Configure``: ``json_format.MessageToDict``), so
  numbers arrive as floats; :func:`resolve_policy_config` does the same round trip.
* **Arguments**: ``ResourceValidationArgs`` built as ``PolicyPack.Analyze`` builds
  them: ``deserialize_properties`` and the unknown-checking proxy over the wire
  properties (camelCase names), the policy's config (``None`` when empty).
* **Levels**: ``disabled`` skips the rule; ``remediate`` reports as mandatory (the
  analyzer's downgrade); a value unknown during preview becomes an advisory
  "can't run policy" diagnostic, as the analyzer reports it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from kimi_k3.core.suggest import nearest
from kimi_k3.errors import UserError
from kimi_k3.guardrails.rules import ALL_POLICIES, PACK_ENFORCEMENT_LEVEL, PACK_NAME

ALL_KEY = "all"
"""The config key that sets the enforcement level of every policy."""

LEVELS = tuple(level.value for level in EnforcementLevel)
"""Enforcement levels the engine accepts: advisory, mandatory, remediate, disabled."""


class RecordedLike(Protocol):
    """What :func:`evaluate` needs of a declared resource (:class:`kimi_k3.offline.RecordedResource`)."""

    type: str
    name: str
    urn: str
    inputs: dict


@dataclass(frozen=True)
class PolicySetting:
    """One policy's effective enforcement level and properties (what ``args.get_config()`` returns)."""

    level: EnforcementLevel
    """Enforcement level after the pack's, the policy's and the config file's."""
    properties: Mapping[str, Any]
    """Schema defaults overlaid with the config file's properties, as the analyzer receives them."""


@dataclass(frozen=True)
class Violation:
    """One report of one policy on one resource."""

    policy: str
    """Policy name, e.g. ``k8s-images-pinned-by-digest``."""
    level: EnforcementLevel
    """``mandatory`` (fails the plan) or ``advisory`` (listed)."""
    resource_type: str
    """Type token of the resource, e.g. ``kubernetes:apps/v1:Deployment``."""
    resource_name: str
    """Pulumi name of the resource."""
    urn: str
    """URN of the resource."""
    message: str
    """What the rule reported (it names the object and says how to fix it)."""

    def line(self) -> str:
        """``[mandatory] policy — type 'name': message`` on one line."""
        return f"[{self.level.value}] {self.policy} — {self.resource_type} '{self.resource_name}': {' '.join(self.message.split())}"


@dataclass(frozen=True)
class Verdict:
    """The pack's verdict on one plan."""

    violations: tuple[Violation, ...]
    """Every report, sorted by policy, then URN, then message."""
    config_source: str
    """Where the policy config came from (a path), or that the pack's defaults applied."""
    warnings: tuple[str, ...] = field(default_factory=tuple)
    """Findings about the config itself (e.g. a key naming no policy, which the engine ignores)."""
    basis: str = ""
    """Why that config applies to the stack (``environment dev``, ``stack alice's own file``); empty when given by a flag."""

    @property
    def mandatory(self) -> tuple[Violation, ...]:
        """Violations that fail ``pulumi preview``/``up``."""
        return tuple(v for v in self.violations if v.level == EnforcementLevel.MANDATORY)

    @property
    def advisory(self) -> tuple[Violation, ...]:
        """Violations the engine only reports."""
        return tuple(v for v in self.violations if v.level != EnforcementLevel.MANDATORY)

    @property
    def passed(self) -> bool:
        """True when no mandatory violation was reported."""
        return not self.mandatory

    def document(self) -> dict[str, Any]:
        """The verdict as JSON-safe data (``policy.json`` of a plan)."""
        return {
            "pack": PACK_NAME,
            "config": self.config_source,
            "basis": self.basis,
            "passed": self.passed,
            "warnings": list(self.warnings),
            "violations": [
                {"policy": v.policy, "level": v.level.value, "type": v.resource_type, "name": v.resource_name, "urn": v.urn, "message": v.message}
                for v in self.violations
            ],
        }

    def render(self) -> list[str]:
        """The verdict as printed by ``kimi-k3 plan``."""
        head = f"Policy pack {PACK_NAME} ({self.config_source}{', ' + self.basis if self.basis else ''}): "
        if self.passed:
            head += f"passed, {len(self.advisory)} advisory finding{'s' if len(self.advisory) != 1 else ''}"
        else:
            head += f"FAILED, {len(self.mandatory)} mandatory violation{'s' if len(self.mandatory) != 1 else ''} (pulumi preview/up would refuse the stack)"
            head += f", {len(self.advisory)} advisory" if self.advisory else ""
        return [head] + [f"  {v.line()}" for v in self.mandatory + self.advisory] + [f"  note: {w}" for w in self.warnings]


# --- config ---------------------------------------------------------------------------------


def _level(value: Any, where: str) -> EnforcementLevel:
    if not isinstance(value, str):
        raise UserError(f"{where}: {value!r} is not a valid enforcement level; must be a string, one of {', '.join(LEVELS)}")
    if value not in LEVELS:
        raise UserError(f"{where}: {value!r} is not a valid enforcement level; accepted: {', '.join(LEVELS)}")
    return EnforcementLevel(value)


def parse_policy_config(document: Any, source: str) -> dict[str, tuple[EnforcementLevel | None, dict[str, Any] | None]]:
    """``{key: (level, properties)}`` from a parsed ``--policy-pack-config`` document.

    As the engine's ``parsePolicyPackConfig``: a string is a level, an object may hold
    ``enforcementLevel`` plus properties, anything else is refused; empty entries drop.
    """
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise UserError(f"policy config {source}: expected a JSON object keyed by policy name (or 'all'), got {type(document).__name__}")
    parsed: dict[str, tuple[EnforcementLevel | None, dict[str, Any] | None]] = {}
    for key, value in document.items():
        where = f"policy config {source}: {key}"
        level: EnforcementLevel | None
        if isinstance(value, str):
            level, properties = _level(value, where), None
        elif isinstance(value, dict):
            rest = dict(value)
            level = _level(rest.pop("enforcementLevel"), f"{where}.enforcementLevel") if "enforcementLevel" in rest else None
            properties = rest or None
        else:
            raise UserError(f"{where}: {value!r} is not a valid value; must be an enforcement level string or an object")
        if level is not None or properties:
            parsed[key] = (level, properties)
    return parsed


def load_policy_config(path: Path, flag: str | None = None) -> dict[str, Any] | None:
    """Read a ``--policy-pack-config`` JSON file (empty content: no config, as the engine allows)."""
    what = f"{flag} {path}" if flag else f"policy config {path}"
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"{what}: no such file; give the JSON file `pulumi preview --policy-pack-config` would get") from None
    except IsADirectoryError:
        raise UserError(f"{what} is a directory; give the JSON file `pulumi preview --policy-pack-config` would get") from None
    except OSError as err:
        raise UserError(f"{what}: cannot read it ({err.strerror})") from None
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"{what} is not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None


def _schema(policy: ResourceValidationPolicy) -> dict[str, Any] | None:
    """The JSON schema the engine checks a policy's properties against (``convertSchema``)."""
    if policy.config_schema is None:
        return None
    schema: dict[str, Any] = {"type": "object"}
    if policy.config_schema.properties:
        schema["properties"] = policy.config_schema.properties
    if policy.config_schema.required:
        schema["required"] = list(policy.config_schema.required)
    return schema


def _as_analyzer_sees(properties: Mapping[str, Any]) -> dict[str, Any]:
    """Properties after the trip through a protobuf ``Struct`` into ``PolicyPack.Configure``."""
    from google.protobuf import json_format, struct_pb2

    message = struct_pb2.Struct()
    message.update(dict(properties))
    return json_format.MessageToDict(message)


def resolve_policy_config(
    document: Any, source: str, policies: Sequence[ResourceValidationPolicy] = ALL_POLICIES
) -> tuple[dict[str, PolicySetting], list[str]]:
    """Each policy's effective level and properties under ``document``, and warnings about the document.

    Raises :class:`UserError` (naming ``source``, the policy and the property) when the
    engine would refuse the config.
    """
    import jsonschema

    parsed = parse_policy_config(document, source)
    levels = {p.name: p.enforcement_level or PACK_ENFORCEMENT_LEVEL for p in policies}
    properties: dict[str, dict[str, Any]] = {
        p.name: {k: v["default"] for k, v in (p.config_schema.properties if p.config_schema else {}).items() if "default" in v}
        for p in policies
    }
    all_level = parsed.get(ALL_KEY, (None, None))[0]
    if all_level is not None:
        levels = dict.fromkeys(levels, all_level)
    warnings = []
    for key, (level, given) in parsed.items():
        if key == ALL_KEY:
            continue
        if key not in levels:
            close = nearest(key, levels)
            hint = f" (did you mean {close}?)" if close else ""
            warnings.append(f"{source} configures {key!r}, which is not a policy of {PACK_NAME}{hint}; the engine ignores it")
            continue
        if level is not None:
            levels[key] = level
        properties[key].update(given or {})
    settings = {}
    for policy in policies:
        schema = _schema(policy)
        if schema is not None:
            errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(properties[policy.name]), key=lambda e: list(e.path))
            if errors:
                shown = "; ".join(f"{'.'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in errors)
                raise UserError(f"policy config {source}: {policy.name}: {shown}")
        settings[policy.name] = PolicySetting(levels[policy.name], _as_analyzer_sees(properties[policy.name]))
    return settings, warnings


# --- evaluation -------------------------------------------------------------------------------


def policy_args(
    resource_type: str, props: Mapping[str, Any], name: str = "r", config: Mapping[str, Any] | None = None, urn: str = ""
) -> ResourceValidationArgs:
    """``ResourceValidationArgs`` as ``PolicyPack.Analyze`` builds them from a resource's wire properties."""
    opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)
    proxied = unknown_checking_proxy(deserialize_properties(dict(props)))
    return ResourceValidationArgs(
        resource_type, proxied, urn or f"urn:pulumi:stack::project::{resource_type}::{name}", name, opts, None, dict(config) if config else None
    )


def run_policy(policy: ResourceValidationPolicy, args: ResourceValidationArgs) -> list[str]:
    """Messages one policy reports for one resource (the rules are synchronous)."""
    found: list[str] = []
    def report(message: str, urn: str | None = None) -> None:
        found.append(message)

    result = policy.validate(args, report)
    if result is not None:  # pragma: no cover - a coroutine would be a rule written wrongly for this pack
        raise TypeError(f"policy {policy.name} returned {result!r}; the guardrails are synchronous")
    return found


def evaluate(
    resources: Iterable[RecordedLike],
    settings: Mapping[str, PolicySetting],
    policies: Sequence[ResourceValidationPolicy] = ALL_POLICIES,
) -> list[Violation]:
    """Every policy (not disabled) over every resource; sorted, so the verdict's bytes do not depend on order."""
    found: list[Violation] = []
    for policy in policies:
        setting = settings[policy.name]
        if setting.level == EnforcementLevel.DISABLED:
            continue
        level = EnforcementLevel.MANDATORY if setting.level == EnforcementLevel.REMEDIATE else setting.level
        for resource in resources:
            args = policy_args(resource.type, resource.inputs, resource.name, setting.properties, resource.urn)
            try:
                messages = [(level, m) for m in run_policy(policy, args)]
            except UnknownValueError as err:
                messages = [(EnforcementLevel.ADVISORY, f"can't run policy '{policy.name}' during preview: {err.message}")]
            found += [Violation(policy.name, lvl, resource.type, resource.name, resource.urn, message) for lvl, message in messages]
    return sorted(found, key=lambda v: (v.policy, v.urn, v.message))


@dataclass(frozen=True)
class PolicyCheck:
    """The pack with one stack's config resolved: build it before the program runs, judge the plan after."""

    settings: Mapping[str, PolicySetting]
    """Each policy's effective level and properties."""
    source: str
    """Where the config came from, for the verdict's header."""
    warnings: tuple[str, ...] = ()
    """Findings about the config document (see :func:`resolve_policy_config`)."""
    basis: str = ""
    """Why that config applies to the stack (:mod:`kimi_k3.guardrails.stack_policy`); empty when given by a flag."""

    @classmethod
    def from_file(cls, path: Path | None, *, flag: str | None = None) -> PolicyCheck:
        """The pack under the config file at ``path`` (``None``: no file, the pack's defaults apply)."""
        if path is None:
            settings, warnings = resolve_policy_config(None, "(none)")
            return cls(settings, "no policy config: the pack's defaults, i.e. the production settings", tuple(warnings))
        settings, warnings = resolve_policy_config(load_policy_config(path, flag), str(path))
        return cls(settings, str(path), tuple(warnings))

    def verdict(self, resources: Iterable[RecordedLike]) -> Verdict:
        """Every policy over ``resources``."""
        return Verdict(tuple(evaluate(list(resources), self.settings)), self.source, self.warnings, self.basis)


__all__ = [
    "PolicyCheck",
    "PolicySetting",
    "Verdict",
    "Violation",
    "evaluate",
    "load_policy_config",
    "parse_policy_config",
    "policy_args",
    "resolve_policy_config",
    "run_policy",
]
