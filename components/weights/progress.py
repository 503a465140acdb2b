"""The progress lines the pods' staging steps print and ``kimi-k3 status`` reads: one home for the format.

A staging step (the node sync init container today) prints, among its ordinary log lines,
one JSON object per line every ``PROGRESS_INTERVAL_S`` seconds::

    {"kimi_k3_progress":1,"step":"weights","t":1796125800,"bytes_done":612000000000,"bytes_total":1700000000000,"rate_bps":21300000000,"files_verified":12,"files_total":64}

``kimi-k3 status`` reads the tail of the running container's log
(``GET /api/v1/namespaces/NS/pods/POD/log?container=C&tailLines=N``, what ``kubectl logs
--tail`` calls) and takes the last such line. Why the log and not annotations or the
termination message: the serving pods run without a ServiceAccount token (they cannot
patch themselves), and a termination message exists only once the container has ended.
Each line is self-contained (the rate is measured by the step itself over its last
interval), so a reader needs only the newest one; ``t`` (unix seconds) lets it tell a
stalled step from a slow one.

Steps: ``weights`` (bytes landing on the node; verification may run beside it),
``verify`` (the transfer ended, hashing goes on), ``done`` (synced and verified; also
printed when a node-local copy was already verified). ``bytes_total`` is 0 when the step
could not learn it (then there is no ETA). A failure is not a progress line: the
container exits non-zero with the reason on stderr.

Standard library only: the pod-side code may import it, and :data:`SHELL_FUNCTIONS` is
the same format for POSIX ``sh`` scripts (built from :data:`FIELDS`, so the two agree).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

KEY = "kimi_k3_progress"
"""Key that marks a progress line; its value is the format version."""

VERSION = 1
"""Format version this module writes and reads."""

STEPS = ("weights", "verify", "done")
"""Steps a line can report, in the order a staging step goes through them."""

FIELDS = ("step", "t", "bytes_done", "bytes_total", "rate_bps", "files_verified", "files_total")
"""Fields of a line after :data:`KEY`, in the order they are written."""

DEFAULT_INTERVAL_S = 15
"""Seconds between two lines (``PROGRESS_INTERVAL_S`` in the pod's environment)."""


@dataclass(frozen=True)
class Progress:
    """One progress line."""

    step: str
    """One of :data:`STEPS`."""
    t: int
    """Unix seconds when the step wrote the line."""
    bytes_done: int
    """Bytes of the weights on the node so far (files already there count)."""
    bytes_total: int
    """Bytes of the whole prefix; 0 when unknown."""
    rate_bps: int
    """Bytes per second landed over the last interval (on ``done``: over the whole transfer)."""
    files_verified: int
    """Files whose sha256 matched the manifest so far."""
    files_total: int
    """Files the manifest lists."""

    @property
    def fraction(self) -> float | None:
        """Share of the bytes done (0..1), ``None`` when the total is unknown."""
        if self.bytes_total <= 0:
            return None
        return min(1.0, self.bytes_done / self.bytes_total)

    @property
    def eta_s(self) -> float | None:
        """Seconds until the transfer completes at the current rate; ``None`` without a total or a rate."""
        if self.step != "weights" or self.bytes_total <= 0 or self.rate_bps <= 0:
            return None
        return max(0, self.bytes_total - self.bytes_done) / self.rate_bps

    def age_s(self, now_unix: float) -> float:
        """Seconds since the line was written (``now_unix`` is the reader's clock)."""
        return max(0.0, now_unix - self.t)


def format_line(progress: Progress) -> str:
    """The line for ``progress`` (compact JSON, fields in :data:`FIELDS` order)."""
    if progress.step not in STEPS:
        raise ValueError(f"progress step {progress.step!r} is not one of {', '.join(STEPS)}")
    values = {KEY: VERSION, **{name: getattr(progress, name) for name in FIELDS}}
    return json.dumps(values, separators=(",", ":"))


def parse_line(line: str) -> Progress | None:
    """The progress in ``line``, or ``None`` for any other log line (or a line of another version)."""
    text = line.strip()
    if not text.startswith("{") or KEY not in text:
        return None
    try:
        values = json.loads(text)
    except ValueError:
        return None
    if not isinstance(values, dict) or values.get(KEY) != VERSION or values.get("step") not in STEPS:
        return None
    try:
        numbers = {name: int(values[name]) for name in FIELDS if name != "step"}
    except (KeyError, TypeError, ValueError):
        return None
    return Progress(step=values["step"], **numbers)


def last_progress(lines: Iterable[str]) -> Progress | None:
    """The newest progress line among ``lines`` (a log tail, oldest first)."""
    found = None
    for line in lines:
        progress = parse_line(line)
        if progress is not None:
            found = progress
    return found


def _shell_printf() -> str:
    numbers = ",".join(f'"{name}":%s' for name in FIELDS if name != "step")
    return "{" + f'"{KEY}":{VERSION},"step":"%s",' + numbers + "}"


SHELL_FUNCTIONS = (
    "# progress lines for `kimi-k3 status` (components/weights/progress.py)\n"
    "kimi_progress() { printf '" + _shell_printf() + "\\n' "
    '"$1" "$(date +%s)" "$2" "$3" "$4" "$5" "$6"; }\n'
)
"""POSIX ``sh``: ``kimi_progress STEP BYTES_DONE BYTES_TOTAL RATE_BPS FILES_VERIFIED FILES_TOTAL``
prints one line of this format (``t`` is the shell's ``date +%s``)."""


__all__ = ["DEFAULT_INTERVAL_S", "FIELDS", "KEY", "SHELL_FUNCTIONS", "STEPS", "VERSION", "Progress", "format_line", "last_progress", "parse_line"]
