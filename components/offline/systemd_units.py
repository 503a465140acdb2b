"""systemd unit files, as far as a GPU node's boot order needs them: ordering, mounts, what starts at boot.

:func:`parse_unit` reads the keys the boot model uses (``After=``, ``Before=``, ``RequiresMountsFor=``,
``WantedBy=``, ``ExecStart=``, ``[Mount]``), :func:`render_cloud_init_template` renders cloud-init's
``## template:jinja`` units for Amazon Linux, :func:`upstream_units` parses the AMI's vendored units, and
:func:`ordered_after` is systemd's job ordering with the default dependencies (systemd.unit(5),
systemd.mount(5), systemd.service(5)).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

AMI_RELEASE = "v20251120"
"""The amazon-eks-ami release whose boot is modelled (the prod stack's pinned ``gpuAmiReleaseVersion`` 1.34.2-20251120)."""
CLOUD_INIT_RELEASE = "22.2.2"
"""The cloud-init release AL2023 ships (its ``cloud-final.service`` and ``cloud.cfg`` are vendored)."""
CLOUD_FINAL = "cloud-final.service"
NODEADM_RUN = "nodeadm-run.service"
NODEADM_CONFIG = "nodeadm-config.service"
KUBELET = "kubelet.service"
LOCAL_FS = "local-fs.target"


@dataclass(frozen=True)
class UnitFile:
    """The parts of a systemd unit file the boot model reads."""

    name: str
    """Unit name (``nodeadm-run.service``, ``mnt-k8s\\x2ddisks-0.mount``)."""
    after: frozenset[str] = frozenset()
    """``After=`` units."""
    before: frozenset[str] = frozenset()
    """``Before=`` units."""
    requires_mounts_for: tuple[str, ...] = ()
    """``RequiresMountsFor=`` paths (ordered after, and requiring, the mount units of each prefix)."""
    wanted_by: frozenset[str] = frozenset()
    """``[Install] WantedBy=`` targets (an enabled unit starts at boot)."""
    exec_start: tuple[str, ...] = ()
    """``ExecStart=`` command lines."""
    what: str | None = None
    """``[Mount] What=`` (mount units)."""
    where: str | None = None
    """``[Mount] Where=`` (mount units)."""
    options: str = ""
    """``[Mount] Options=``."""
    default_dependencies: bool = True
    """``DefaultDependencies=`` (``no`` drops the implicit local-fs/basic ordering)."""

    @property
    def is_mount(self) -> bool:
        """True for a ``.mount`` unit."""
        return self.name.endswith(".mount")


_LIST_KEYS = {"After": "after", "Before": "before", "WantedBy": "wanted_by", "RequiresMountsFor": "requires_mounts_for"}


def render_cloud_init_template(text: str, variant: str = "amazon") -> str:
    """cloud-init's ``## template:jinja`` unit rendered for ``variant`` (only the ``if variant …`` blocks its templates use)."""
    out: list[str] = []
    stack: list[bool] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("## template:"):
            continue
        match = re.fullmatch(r"\{%\s*(if|elif|else|endif)\s*(.*?)\s*%\}", stripped)
        if match:
            keyword, condition = match.groups()
            if keyword == "if":
                stack.append(_variant_condition(condition, variant))
            elif keyword == "else":
                stack[-1] = not stack[-1]
            elif keyword == "endif":
                stack.pop()
            else:
                raise ValueError(f"elif is not rendered: {line!r}")
            continue
        if all(stack):
            out.append(line)
    return "\n".join(out) + "\n"


def _variant_condition(condition: str, variant: str) -> bool:
    listed = re.fullmatch(r"variant in \[(.*)\]", condition)
    if listed:
        return variant in re.findall(r'"([^"]+)"', listed[1])
    equal = re.fullmatch(r'variant == "([^"]+)"', condition)
    if equal:
        return variant == equal[1]
    raise ValueError(f"template condition not rendered: {condition!r}")


def parse_unit(name: str, text: str) -> UnitFile:
    """Parse ``text`` as the unit file ``name`` (repeated list keys accumulate, as systemd reads them)."""
    values: dict[str, list[str]] = {}
    scalars: dict[str, str] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key in _LIST_KEYS:
            values.setdefault(_LIST_KEYS[key], []).extend(value.split())
        elif key == "ExecStart":
            values.setdefault("exec_start", []).append(value)
        else:
            scalars[f"{section}.{key}"] = value
    return UnitFile(
        name=name,
        after=frozenset(values.get("after", ())),
        before=frozenset(values.get("before", ())),
        requires_mounts_for=tuple(values.get("requires_mounts_for", ())),
        wanted_by=frozenset(values.get("wanted_by", ())),
        exec_start=tuple(values.get("exec_start", ())),
        what=scalars.get("Mount.What"),
        where=scalars.get("Mount.Where"),
        options=scalars.get("Mount.Options", ""),
        default_dependencies=scalars.get("Unit.DefaultDependencies", "yes").lower() not in ("no", "false", "0"),
    )


def vendored(name: str) -> str:
    """A vendored upstream file, by its path under ``components/data``."""
    return resources.files("kimi_k3").joinpath("data", name).read_text()


def upstream_units() -> dict[str, UnitFile]:
    """The AMI's units that order a GPU node's boot, parsed from the vendored files."""
    ami = f"amazon-eks-ami-{AMI_RELEASE}"
    units = {
        name: parse_unit(name, vendored(f"{ami}/{name}"))
        for name in (NODEADM_CONFIG, NODEADM_RUN, KUBELET)
    }
    units[CLOUD_FINAL] = parse_unit(CLOUD_FINAL, render_cloud_init_template(vendored(f"cloud-init-{CLOUD_INIT_RELEASE}/cloud-final.service.tmpl")))
    units[LOCAL_FS] = UnitFile(LOCAL_FS, default_dependencies=False)
    return units


def _mount_needs(unit: UnitFile) -> tuple[str, ...]:
    """Paths whose mount units ``unit`` requires: ``RequiresMountsFor=``, a bind's source and a mount point's parent (systemd.mount(5))."""
    needs = list(unit.requires_mounts_for)
    if unit.is_mount:
        if unit.what and unit.what.startswith("/") and "bind" in unit.options.split(","):
            needs.append(unit.what)
        if unit.where:
            needs.append(unit.where.rsplit("/", 1)[0] or "/")
    return tuple(needs)


def ordered_after(units: Mapping[str, UnitFile], unit: str, other: str) -> bool:
    """True when ``unit``'s start waits for ``other``'s job: ``After=``, the other's ``Before=``, the mounts it needs, default dependencies."""
    a, b = units.get(unit), units.get(other)
    if (a and other in a.after) or (b and unit in b.before):
        return True
    if a and b and b.is_mount and b.where and any(is_under(p, b.where) for p in _mount_needs(a)):
        return True
    if other == LOCAL_FS and a is not None and a.default_dependencies and not a.is_mount and unit != LOCAL_FS:
        return True
    return unit == LOCAL_FS and b is not None and b.is_mount and b.default_dependencies


def ordered_before(units: Mapping[str, UnitFile], first: str, then: str) -> bool:
    """True when ``then`` cannot start before ``first`` has (the ordering, followed transitively)."""
    seen, frontier = {first}, [first]
    while frontier:
        current = frontier.pop()
        for name in units:
            if name not in seen and ordered_after(units, name, current):
                if name == then:
                    return True
                seen.add(name)
                frontier.append(name)
    return False


def is_under(path: str, point: str) -> bool:
    """True when ``path`` is ``point`` or below it."""
    point = point.rstrip("/") or "/"
    return path == point or path.startswith(point + "/") or point == "/"
