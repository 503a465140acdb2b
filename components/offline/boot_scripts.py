"""What a boot-time shell script does, as steps the boot model runs: waits, mounts, unit starts, files it writes.

:func:`parse_script` reads the constructs the library writes (here-documents of files and units, bounded
``mountpoint`` polls, ``systemctl start/enable``, ``mount --bind``); any other line that names a path is a
:class:`Uses` of it, so a script acting below a mount point that is not there yet is caught.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kimi_k3.offline.systemd_units import UnitFile, parse_unit


@dataclass(frozen=True)
class Step:
    """One thing a job does; ``origin`` says where it comes from (a part's line, an upstream source)."""

    origin: str
    """Where the step comes from, for messages."""


@dataclass(frozen=True)
class Wait(Step):
    """Poll until ``path`` is a mount point, for at most ``timeout_s`` (None: forever)."""

    path: str = ""
    """The mount point waited for."""
    timeout_s: float | None = None
    """Bound of the poll in seconds."""


@dataclass(frozen=True)
class Need(Step):
    """Fail (``set -e``) unless ``path`` is a mount point."""

    path: str = ""
    """The mount point required."""


@dataclass(frozen=True)
class Mount(Step):
    """Mount ``where`` (a bind of ``what`` when given); ``unit`` is the enabled mount unit that persists it."""

    where: str = ""
    """The new mount point."""
    what: str | None = None
    """Bind source (a directory), or None for a device."""
    unit: str | None = None
    """Mount unit written and enabled for later boots (None: a one-off mount)."""


@dataclass(frozen=True)
class Start(Step):
    """``systemctl start``: queue ``unit``; ``block`` waits until it has started (or failed)."""

    unit: str = ""
    """The unit started."""
    block: bool = True
    """False for ``--no-block``."""


@dataclass(frozen=True)
class Enable(Step):
    """``systemctl enable``: start ``unit`` at later boots."""

    unit: str = ""
    """The unit enabled."""


@dataclass(frozen=True)
class Install(Step):
    """A unit file written (and loaded by the next daemon-reload)."""

    unit: UnitFile = field(default_factory=lambda: UnitFile(""))
    """The unit."""


@dataclass(frozen=True)
class Uses(Step):
    """A command that reads or writes ``path`` (a wait or write below a mount point that is not there yet is a defect)."""

    path: str = ""
    """The path used."""


@dataclass(frozen=True)
class StartsPods(Step):
    """The kubelet runs: pods (re)start with their volumes as mounted at this moment."""


@dataclass(frozen=True)
class Script:
    """A shell part of the user data, or a script file a part writes."""

    name: str
    """``user data part N (text/x-shellscript)`` or the file's path."""
    steps: tuple[Step, ...]
    """What it does, in order."""
    files: Mapping[str, str] = field(default_factory=dict)
    """Files it writes with a here-document (path → content)."""


_HEREDOC = re.compile(r"""^cat\s+>\s*(?P<path>'[^']+'|"[^"]+"|\S+)\s*<<-?\s*(?P<tag>'[^']+'|"[^"]+"|\w+)\s*$""")
_WAIT_LOOP = re.compile(r"^for \w+ in \$\(seq (?P<n>\d+)\); do mountpoint -q (?P<path>\S+) && (?:break|exit 0); sleep (?P<s>[\d.]+); done$")
_UNTIL_LOOP = re.compile(r"^until mountpoint -q (?P<path>\S+); do sleep [\d.]+; done$")
_PATH = re.compile(r"(?<![\w$])/(?:[\w.\\-]+/?)+")


def _unquote(word: str) -> str:
    return shlex.split(word)[0] if word else word


def parse_script(name: str, text: str) -> Script:
    """The steps of a shell script, for the constructs the library writes; any other line that names a path counts as using it."""
    steps: list[Step] = []
    files: dict[str, str] = {}
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        number, line = index + 1, lines[index].strip()
        index += 1
        origin = f"{name}, line {number}"
        if not line or line.startswith("#"):
            continue
        heredoc = _HEREDOC.match(line)
        if heredoc:
            tag = _unquote(heredoc["tag"])
            body: list[str] = []
            while index < len(lines) and lines[index].strip() != tag:
                body.append(lines[index])
                index += 1
            index += 1
            path = _unquote(heredoc["path"])
            files[path] = "\n".join(body) + "\n"
            if path.startswith("/etc/systemd/system/") and "/" not in path.removeprefix("/etc/systemd/system/"):
                steps.append(Install(origin, parse_unit(path.rsplit("/", 1)[1], files[path])))
            continue
        steps.extend(_line_steps(line, origin))
    return Script(name, tuple(steps), files)


def _line_steps(line: str, origin: str) -> list[Step]:
    loop = _WAIT_LOOP.match(line)
    if loop:
        return [Wait(origin, loop["path"], int(loop["n"]) * float(loop["s"]))]
    until = _UNTIL_LOOP.match(line)
    if until:
        return [Wait(origin, until["path"], None)]
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    if words[:2] == ["mountpoint", "-q"] and len(words) == 3:
        return [Need(origin, words[2])]
    if words[:2] == ["mountpoint", "-q"] and len(words) == 8 and words[3] == "||" and words[4:6] == ["mount", "--bind"]:
        return [Mount(origin, words[7], what=words[6])]
    if words[:2] == ["mount", "--bind"] and len(words) == 4:
        return [Mount(origin, words[3], what=words[2])]
    if words[:1] == ["systemctl"]:
        return _systemctl(words[1:], origin)
    if words[:1] in (["set"], ["chmod"], ["echo"], ["#!/bin/bash"], ["#!/bin/sh"]):
        return []
    return [Uses(origin, path.rstrip("/")) for path in _PATH.findall(line)]


def _systemctl(args: Sequence[str], origin: str) -> list[Step]:
    flags = {a for a in args if a.startswith("--")}
    words = [a for a in args if not a.startswith("--")]
    if not words:
        return []
    verb, units = words[0], words[1:]
    if verb in ("start", "restart"):
        return [Start(origin, u, block="--no-block" not in flags) for u in units]
    if verb == "enable":
        steps: list[Step] = [Enable(origin, u) for u in units]
        if "--now" in flags:
            steps += [Start(origin, u, block="--no-block" not in flags) for u in units]
        return steps
    return []

