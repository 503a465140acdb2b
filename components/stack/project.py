"""Which Pulumi project a ``kimi-k3`` command works on, and the config of one of its stacks.

The commands that read a stack (``plan``, ``hyperpod``, ``capacity preflight``) work on
the user's project, never on the installed package: the project is the directory of
``--program DIR``, else the nearest ``Pulumi.yaml`` from the current directory upwards
(as the Pulumi CLI finds it: "the nearest parent folder containing a Pulumi.yaml file
determines the current project", Pulumi docs, Projects). Its stack files live in
``stackConfigDir`` (default: the project directory), named ``Pulumi.<stack>.yaml``.

A stack's config is what the Pulumi CLI would hand the program, following pulumi/pulumi
``sdk/go/common/workspace``: ``project.go`` (``RewriteShorthandConfigValues``: a plain
value under ``config:`` is a default for a key of the project's namespace and a value
for another namespace; a key without ``:`` belongs to the project) and ``config.go``
(``mergeConfig``: a declared default fills a key the stack does not set, a declared key
of the project's namespace with neither is missing; ``validateStackConfigValue``: a
``secret`` key must be a ``secure:`` value, a typed key must hold its type).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kimi_k3.errors import SettingsError, UserError
from kimi_k3.stack import stack_file, wire
from kimi_k3.stack.config_keys import PROJECT

LIBRARY_ROOT = Path(__file__).resolve().parents[2]
"""This repository's checkout (its own Pulumi project: ``Pulumi.yaml`` beside ``components/``) when the package runs from a source tree."""

PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml")
"""Names the Pulumi CLI accepts for the project file."""

PROJECT_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
"""Project names: alphanumerics, hyphens, underscores and periods (Pulumi project file reference)."""

CONFIG_TYPES = ("string", "integer", "boolean", "array")
"""Types a ``config:`` declaration may give (pulumi/pulumi project.go)."""


@dataclass(frozen=True)
class ConfigDeclaration:
    """One key declared under ``config:`` in ``Pulumi.yaml``."""

    key: str
    """Full key, ``namespace:name`` (a bare name gets the project's namespace)."""
    type: str | None = None
    """``string``, ``integer``, ``boolean`` or ``array``; ``None`` when untyped."""
    items: Mapping[str, Any] | None = None
    """Item type of an array (``{"type": "string"}``)."""
    default: Any = None
    """Default used when the stack does not set the key."""
    value: Any = None
    """Value used when the stack does not set the key (a plain value of another namespace)."""
    secret: bool = False
    """The stack must set the key as a ``secure:`` value."""


@dataclass(frozen=True)
class Project:
    """A Pulumi project on disk: name, program, where its stack files are, declared config."""

    name: str
    """``name:`` of ``Pulumi.yaml``: the namespace of the program's own config keys."""
    directory: Path
    """The directory holding ``Pulumi.yaml``."""
    project_file: Path
    """``Pulumi.yaml`` (or ``Pulumi.yml``)."""
    program: Path
    """The Python file the Pulumi CLI runs (``__main__.py`` of ``main:``, default the project directory)."""
    stack_config_dir: Path
    """Where ``Pulumi.<stack>.yaml`` files are (``stackConfigDir``, default the project directory)."""
    config: tuple[ConfigDeclaration, ...] = ()
    """Keys declared under ``config:``."""

    @property
    def uses_kimi_k3_settings(self) -> bool:
        """True for a project named ``kimi-k3``: its stacks are validated as kimi-k3 settings before it runs."""
        return self.name == PROJECT

    def stack_file(self, stack: str) -> Path:
        """``<stackConfigDir>/Pulumi.<stack>.yaml`` (an ``org/project/stack`` name uses its last part)."""
        extension = self.project_file.suffix
        return self.stack_config_dir / f"Pulumi.{short_stack_name(stack)}{extension}"

    def known_stacks(self) -> list[str]:
        """Stack names that have a stack file, sorted."""
        extension = self.project_file.suffix
        return sorted(p.name[len("Pulumi.") : -len(extension)] for p in self.stack_config_dir.glob(f"Pulumi.*{extension}") if p != self.project_file)


@dataclass(frozen=True)
class StackConfig:
    """What the Pulumi CLI would hand a project's program for one stack."""

    stack: str
    """Stack name."""
    path: Path
    """The stack file."""
    values: dict[str, str]
    """Every key in the wire form programs read (``{"ns:key": "string"}``), declared defaults applied."""
    secret_keys: frozenset[str]
    """Keys set as ``secure:`` values (a marked placeholder stands in for each offline)."""
    stack_values: dict[str, str]
    """Only what the stack file itself sets (wire form): what a person wrote and may have left as an example."""
    structured_keys: frozenset[str] = frozenset()
    """Keys whose value is a list or map (JSON in :attr:`values`), as Pulumi marks object values."""
    absent_secrets: frozenset[str] = frozenset()
    """Declared secrets the stack file does not hold (CI sets them before preview/up); offline a
    marked placeholder stands in for each, as for a ``secure:`` value."""


def short_stack_name(stack: str) -> str:
    """``dev`` for ``dev`` and for ``org/project/dev``."""
    return stack.rsplit("/", 1)[-1]


# --- finding and reading the project -----------------------------------------------------------


def find_project(program: Path | None, cwd: Path) -> Project:
    """The project of ``--program`` (a directory or its ``Pulumi.yaml``), else the nearest one from ``cwd`` up."""
    if program is not None:
        path = program.expanduser()
        if path.is_file() and path.name in PROJECT_FILES:
            return load_project(path.parent, flag="--program")
        if not path.is_dir():
            raise UserError(f"--program {program}: no such directory; give the directory of your Pulumi program (the one with Pulumi.yaml)")
        return load_project(path, flag="--program")
    here = cwd.resolve()
    for directory in (here, *here.parents):
        if any((directory / name).is_file() for name in PROJECT_FILES):
            return load_project(directory)
    raise UserError(f"no Pulumi.yaml in {here} or its parents: cd into your Pulumi project, or pass --program DIR")


def _fast_safe_load(text: str) -> Any:
    """``yaml.safe_load(text)``, parsed by libyaml where PyYAML has it (the same objects: the same safe constructor and
    resolver; a tenth of the time for the project file's config block, ~0.08 s of every plan). A document libyaml refuses
    is parsed again by the pure-Python parser, so the error, and the message built from it, is ``safe_load``'s own."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None:
        return yaml.safe_load(text)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError:
        return yaml.safe_load(text)


def load_project(directory: Path, *, flag: str | None = None) -> Project:
    """Read ``Pulumi.yaml`` of ``directory``; a mistake is one :class:`UserError` naming the file."""
    directory = directory.resolve()
    found = [directory / name for name in PROJECT_FILES if (directory / name).is_file()]
    if not found:
        where = f"{flag} {directory}" if flag else str(directory)
        raise UserError(f"{where}: no Pulumi.yaml there; give the directory of your Pulumi program, or cd into it")
    project_file = found[0]
    text = project_file.read_text()
    try:
        document = _fast_safe_load(text)
    except yaml.YAMLError as err:
        raise UserError(f"{project_file} is not valid YAML: {' '.join(str(err).split())}") from None
    if not isinstance(document, dict):
        raise UserError(f"{project_file}: expected a mapping with name: and runtime:")
    name = document.get("name")
    if not isinstance(name, str) or not PROJECT_NAME.fullmatch(name):
        raise UserError(f"{project_file}: name {name!r} is not accepted; a project name is letters, digits, '-', '_' and '.'")
    runtime = document.get("runtime")
    runtime_name = runtime.get("name") if isinstance(runtime, dict) else runtime
    if runtime_name != "python":
        raise UserError(f"{project_file}: runtime {runtime_name!r}: kimi-k3 plan runs Python programs (runtime: python) only")
    config = document.get("config")
    stack_dir = document.get("stackConfigDir")
    if isinstance(config, str):  # the old spelling of stackConfigDir (RewriteConfigPathIntoStackConfigDir)
        if stack_dir is not None:
            raise UserError(f"{project_file}: config and stackConfigDir both name the stack directory; use only stackConfigDir")
        stack_dir, config = config, None
    main = document.get("main")
    program = _program(project_file, directory / main if isinstance(main, str) and main else directory)
    return Project(
        name=name,
        directory=directory,
        project_file=project_file,
        program=program,
        stack_config_dir=(directory / stack_dir).resolve() if isinstance(stack_dir, str) and stack_dir else directory,
        config=_declarations(project_file, name, config),
    )


def _program(project_file: Path, main: Path) -> Path:
    program = main / "__main__.py" if main.is_dir() else main
    if not program.is_file() or program.suffix != ".py":
        raise UserError(f"{project_file}: no Python program at {program} (main: names the directory of __main__.py or a .py file)")
    return program


def _declarations(project_file: Path, name: str, config: Any) -> tuple[ConfigDeclaration, ...]:
    if config is None:
        return ()
    if not isinstance(config, dict):
        raise UserError(f"{project_file}: config must be a mapping of keys to declarations")
    declared = []
    for key, entry in config.items():
        full = str(key) if ":" in str(key) else f"{name}:{key}"
        own = full.split(":", 1)[0] == name
        if not isinstance(entry, dict):  # shorthand: a default of our namespace, a value of another
            declared.append(ConfigDeclaration(full, default=entry) if own else ConfigDeclaration(full, value=entry))
            continue
        type_ = entry.get("type")
        if type_ is not None and type_ not in CONFIG_TYPES:
            raise UserError(f"{project_file}: config {key}: type {type_!r} is not accepted; accepted: {', '.join(CONFIG_TYPES)}")
        if "default" in entry and "value" in entry:
            raise UserError(f"{project_file}: config {key} cannot have both a 'default' and a 'value'")
        declared.append(ConfigDeclaration(full, type_, entry.get("items"), entry.get("default"), entry.get("value"), bool(entry.get("secret"))))
    return tuple(declared)


def library_project() -> Project:
    """This repository's own project (``Pulumi.yaml`` beside ``components/``; a source checkout only)."""
    return load_project(LIBRARY_ROOT)


# --- one stack's config ---------------------------------------------------------------------------


def read_stack_document(path: Path, stack: str, known: list[str]) -> tuple[dict[str, str], set[str], set[str]]:
    """Wire values, secret keys and structured (list/map) keys of the stack file at ``path``.

    The rules of the document itself: it exists (else the ``known`` stacks are listed),
    is YAML read as Pulumi reads it (:mod:`kimi_k3.stack.stack_file`: no key twice, no YAML 1.1
    spelling, ``secure:`` values that are ciphertext), is not empty, has a ``config:`` mapping. ``secure:`` entries cannot be
    decrypted offline: a marked placeholder stands in and the key is reported secret; it
    ends with a digest of the (public) ciphertext, so a rotated secret gives another
    placeholder and a plan against the previous one shows the change (:mod:`kimi_k3.offline.state`).
    """
    if not path.is_file():
        raise SettingsError("stack", stack, f"no stack file {path}; known stacks: {', '.join(known) or 'none'}")
    try:  # duplicate keys, YAML 1.1 spellings and plain-text secure: values are refused with the key and line
        document = stack_file.load(path)
    except yaml.YAMLError as err:
        raise SettingsError("stack", stack, f"{path.name} is not valid YAML: {' '.join(str(err).split())}") from None
    if document is None:
        raise UserError(f"stack file {path} is empty: a stack file needs a config: mapping (at least aws:region); "
                        f"add one with `pulumi config set aws:region <region> -s {stack}` or copy an example stack")
    if not isinstance(document, dict) or "config" not in document:
        keys = ", ".join(map(str, document)) if isinstance(document, dict) else type(document).__name__
        raise UserError(f"stack file {path} has no config: section (found: {keys}); the stack's settings go under "
                        f"config:, e.g. `pulumi config set aws:region <region> -s {stack}`")
    raw = document.get("config")
    if raw is None:
        raise UserError(f"stack file {path}: config: is empty; the stack's settings go under it (at least aws:region)")
    if not isinstance(raw, dict):
        raise SettingsError("config", raw, f"{path.name}: 'config' must be a mapping of keys to values")
    values: dict[str, str] = {}
    secret_keys: set[str] = set()
    structured: set[str] = set()
    for key, value in raw.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            ciphertext = hashlib.sha256(str(value["secure"]).encode()).hexdigest()[:12]
            values[key] = f"{wire.SECRET_PLACEHOLDER_PREFIX}{key}#{ciphertext}"
            secret_keys.add(key)
        else:
            values[key] = wire.to_wire(value)
            if isinstance(value, (list, dict)):
                structured.add(key)
    return values, secret_keys, structured


def read_stack_config(project: Project, stack: str, overrides: Mapping[str, Any] | None = None) -> StackConfig:
    """The config the Pulumi CLI would hand ``project``'s program for ``stack``.

    ``overrides`` (``{"ns:key": value}``, ``None`` deletes) rehearse other values without
    editing the stack file. A kimi-k3 project's values are then validated by
    :func:`kimi_k3.stack.settings.from_values` (the caller does it, see :func:`kimi_k3.stack.settings.load_settings`).
    """
    path = project.stack_file(stack)
    values, secret_keys, structured = read_stack_document(path, stack, project.known_stacks())
    stack_values = dict(values)
    for key, value in (overrides or {}).items():
        if value is None:
            values.pop(key, None)
            secret_keys.discard(key)
        else:
            values[key] = value if isinstance(value, str) else wire.to_wire(value)
            if isinstance(value, (list, tuple, dict)):
                structured.add(key)
    absent_secrets: set[str] = set()
    for declaration in sorted(project.config, key=lambda d: d.key):
        if declaration.key in values:
            continue
        chosen = declaration.default if declaration.default is not None else declaration.value
        if chosen is not None:
            values[declaration.key] = wire.to_wire(chosen)
            if isinstance(chosen, (list, dict)):
                structured.add(declaration.key)
        elif declaration.secret:
            # Secrets stay out of committed stack files; CI sets them (`pulumi config set --secret`,
            # tools/ci-stack-secrets.sh) before preview/up. Offline a marked placeholder stands in.
            values[declaration.key] = f"{wire.SECRET_PLACEHOLDER_PREFIX}{declaration.key}"
            secret_keys.add(declaration.key)
            absent_secrets.add(declaration.key)
    return StackConfig(short_stack_name(stack), path, values, frozenset(secret_keys), stack_values, frozenset(structured), frozenset(absent_secrets))


def stack_config(project: Project, stack: str, overrides: Mapping[str, Any] | None = None) -> StackConfig:
    """:func:`read_stack_config` checked against ``Pulumi.yaml``'s declarations (missing, secret, type).

    For a kimi-k3 project, validate the settings first (:func:`kimi_k3.stack.settings.from_values`):
    its messages say more about its own keys.
    """
    config = read_stack_config(project, stack, overrides)
    check_declarations(project, config)
    return config


def check_declarations(project: Project, config: StackConfig) -> None:
    """Refuse what ``pulumi up`` refuses before running the program: a missing, plain-text-secret or mistyped key."""
    missing = [d.key for d in project.config if d.key not in config.values and d.key.split(":", 1)[0] == project.name]
    if missing:
        shown = ", ".join(sorted(missing))
        raise UserError(
            f"stack {config.stack} is missing configuration {'value' if len(missing) == 1 else 'values'} {shown} "
            f"(declared in {project.project_file.name} without a default); set {'it' if len(missing) == 1 else 'them'} with "
            f"`pulumi config set [--secret] {sorted(missing)[0]} <value> -s {config.stack}`"
        )
    for declaration in sorted(project.config, key=lambda d: d.key):
        if declaration.type is None or declaration.key not in config.values:
            continue
        key = declaration.key
        if declaration.secret and key not in config.secret_keys:
            raise SettingsError(key, "<plain text value>", f"{project.project_file.name} declares it secret: set it with `pulumi config set --secret {key} <value> -s {config.stack}`")
        raw = config.values[key]
        content: Any = raw
        if key in config.structured_keys:
            content = json.loads(raw)
        if key not in config.secret_keys and not _holds_type(declaration.type, declaration.items, content):
            raise SettingsError(key, content, f"{project.project_file.name} declares it {_type_name(declaration.type, declaration.items)}")


def _holds_type(type_: str, items: Mapping[str, Any] | None, value: Any) -> bool:
    """pulumi/pulumi ``ValidateConfigValue``: scalars arrive as strings, structured values decoded."""
    if type_ == "string":
        return isinstance(value, str)
    if type_ == "integer":
        if isinstance(value, bool):
            return False
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return True
        return isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value) is not None
    if type_ == "boolean":
        return isinstance(value, bool) or value in ("true", "false")
    if not isinstance(value, list) or not items:
        return False
    return all(_holds_type(items.get("type", ""), items.get("items"), item) for item in value)


def _type_name(type_: str, items: Mapping[str, Any] | None) -> str:
    return f"array<{_type_name(items.get('type', ''), items.get('items'))}>" if items else type_


__all__ = [
    "PROJECT_FILES",
    "ConfigDeclaration",
    "Project",
    "StackConfig",
    "check_declarations",
    "find_project",
    "library_project",
    "load_project",
    "read_stack_config",
    "read_stack_document",
    "short_stack_name",
    "stack_config",
]
