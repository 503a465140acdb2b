"""A GPU node's boot, modelled from the AMI's own unit files: user data that waits for what a later unit creates fails offline.

A launch template's user data runs inside a fixed systemd order that no plan shows. On the
AL2023 EKS AMI (amazon-eks-ami ``v20251120``, the unit files and sources vendored byte for byte in
``components/data/amazon-eks-ami-v20251120/``; cloud-init ``22.2.2`` in
``components/data/cloud-init-22.2.2/``):

* cloud-init runs the ``text/x-shellscript`` parts in ``cloud-final.service`` (module
  ``scripts-user`` of ``cloud_final_modules``), once per instance: not again after a reboot;
* ``nodeadm-run.service`` is ordered ``After=nodeadm-config.service cloud-final.service``; it runs
  ``nodeadm init --skip config``, whose run phase sets up the local disks (``setup-local-disks
  raid0``: the instance-store RAID0 at ``/mnt/k8s-disks/0``, persisted as an enabled mount unit)
  and then starts the kubelet and waits until it runs (``StartDaemon`` → ``waitForStatus``);
* the kubelet is not enabled at AMI build (``install-nodeadm.sh`` enables the nodeadm units only):
  nodeadm-run starts it on every boot;
* mount units get ``Before=local-fs.target`` and services ``After=basic.target`` (so after
  ``local-fs.target``) by default (systemd.mount(5), systemd.service(5) "Default Dependencies").

:func:`simulate` runs one boot as a small job engine over those units (ordering, blocking starts,
waits on mount points with their bounds) and the steps of our shell parts and of the units they
install; :func:`check_user_data` runs the first boot and a reboot and returns what a real node
would get wrong, each with its source:

* a shell part that waits or blocks inside ``cloud-final`` (nothing nodeadm-run creates can appear
  then), or uses a path below a mount point that appears only later (it would write to the root
  volume);
* a deadlock (for example a unit ``After=nodeadm-run.service`` and ``Before=kubelet.service``:
  nodeadm-run waits for the kubelet, the kubelet for the unit, the unit for nodeadm-run);
* a step that fails (a mount point that never appears, a bind of an unmounted directory);
* after a reboot, a mount of the first boot that is gone, or not ordered before the kubelet, which
  then restarts pods whose local volume is a plain directory on the root EBS volume.
"""

from __future__ import annotations

import base64
import binascii
import email
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import yaml

from kimi_k3.core.formats import systemd_mount_unit
from kimi_k3.offline.boot_scripts import Enable, Install, Mount, Need, Script, Start, StartsPods, Step, Uses, Wait, parse_script
from kimi_k3.offline.systemd_units import (
    AMI_RELEASE,
    CLOUD_FINAL,
    CLOUD_INIT_RELEASE,
    KUBELET,
    LOCAL_FS,
    NODEADM_CONFIG,
    NODEADM_RUN,
    UnitFile,
    is_under,
    ordered_after,
    ordered_before,
    upstream_units,
)

RAID_MOUNT = "/mnt/k8s-disks/0"
"""Where ``setup-local-disks raid0`` mounts the instance-store array (``MNT_DIR="/mnt/k8s-disks"``, ``array_mount_point="${MNT_DIR}/0"``)."""

SOURCES = {
    "cloud-final": f"cloud-init {CLOUD_INIT_RELEASE} config/cloud.cfg.tmpl (scripts-user in cloud_final_modules) and cloudinit/config/cc_scripts_user.py (frequency PER_INSTANCE)",
    "nodeadm-run": f"amazon-eks-ami {AMI_RELEASE} templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-run.service: After=nodeadm-config.service cloud-final.service",
    "local-disk": f"amazon-eks-ami {AMI_RELEASE} nodeadm/cmd/nodeadm/init/init.go (run phase: NewLocalDiskAspect, then runDaemons) and its setup-local-disks script (vendored beside it: the mount unit of ${{MNT_DIR}}/0, systemctl enable --now)",
    "kubelet": f"amazon-eks-ami {AMI_RELEASE} nodeadm/internal/kubelet/daemon.go (EnsureRunning → StartDaemon) and nodeadm/internal/daemon/systemd.go (StartDaemon waits for the unit to run); kubelet.service is not enabled by templates/al2023/provisioners/install-nodeadm.sh",
    "default-deps": "systemd.mount(5) and systemd.service(5), Default Dependencies: mount units Before=local-fs.target, services After=basic.target",
}
"""Where each modelled behaviour comes from (``tests/test_boot_order.py`` checks the vendored files say so)."""


# --- the boot ---------------------------------------------------------------------------------


@dataclass
class _Job:
    unit: str
    segments: list[tuple[str, tuple[Step, ...]]]
    state: str = "queued"  # queued | running | done | failed
    segment: int = 0
    pc: int = 0
    wait_since: float | None = None
    blocked_on: str = ""


@dataclass(frozen=True)
class Event:
    """One line of the boot log."""

    at_s: float
    """Seconds into the boot (modelled: only waits take time)."""
    unit: str
    """The job."""
    text: str
    """What happened."""


@dataclass(frozen=True)
class BootResult:
    """What one modelled boot did."""

    events: tuple[Event, ...]
    """The log, in order."""
    problems: tuple[str, ...]
    """What went wrong (empty: a clean boot)."""
    mounted: frozenset[str]
    """Mount points at the end."""
    mounted_by: Mapping[str, str]
    """The unit whose job mounted each mount point."""
    kubelet_saw: frozenset[str] | None
    """Mount points when the kubelet started (None: it never started)."""
    units: Mapping[str, UnitFile]
    """Unit files known at the end (upstream, installed, persisted mount units)."""
    enabled: frozenset[str]
    """Units enabled at the end."""
    programs: Mapping[str, tuple[Step, ...]]
    """Each unit's steps (for the next boot)."""


def nodeadm_run_steps(raid: bool) -> tuple[Step, ...]:
    """nodeadm-run's run phase: the local-disk aspect (when the NodeConfig asks for RAID0), then the kubelet, waited for."""
    steps: list[Step] = []
    if raid:
        steps.append(Mount(SOURCES["local-disk"], RAID_MOUNT, unit=systemd_mount_unit(RAID_MOUNT)))
    steps.append(Start(SOURCES["kubelet"], KUBELET, block=True))
    return tuple(steps)


class _Boot:
    def __init__(
        self, units: Mapping[str, UnitFile], programs: Mapping[str, tuple[Step, ...]], enabled: Iterable[str],
        user_scripts: Sequence[Script], files: Mapping[str, str], first: bool,
    ) -> None:
        self.units = dict(units)
        self.programs = dict(programs)
        self.enabled = set(enabled)
        self.files = dict(files)
        self.first = first
        self.user_scripts = list(user_scripts)
        self.mounted: set[str] = set()
        self.mounted_by: dict[str, str] = {}
        self.jobs: dict[str, _Job] = {}
        self.order: list[str] = []
        self.events: list[Event] = []
        self.problems: list[str] = []
        self.now = 0.0
        self.kubelet_saw: frozenset[str] | None = None

    def _ordered_after(self, unit: str, other: str) -> bool:
        return ordered_after(self.units, unit, other)

    def queue(self, unit: str, origin: str) -> None:
        if unit in self.jobs and self.jobs[unit].state in ("queued", "running", "done"):
            return
        if unit not in self.units and unit not in self.programs:
            self.problems.append(f"{origin} starts {unit}, which no unit file defines")
            return
        segments: list[tuple[str, tuple[Step, ...]]]
        if unit == CLOUD_FINAL:
            segments = [(s.name, s.steps) for s in self.user_scripts] if self.first else []
        else:
            segments = [(unit, self.programs.get(unit, self._unit_program(unit)))]
        self.jobs[unit] = _Job(unit, segments)
        self.order.append(unit)

    def _unit_program(self, unit: str) -> tuple[Step, ...]:
        u = self.units[unit]
        if u.is_mount and u.where:
            bind = "bind" in u.options.split(",")
            return (Mount(f"{unit} ([Mount] Where={u.where})", u.where, what=u.what if bind else None),)
        steps: list[Step] = []
        for command in u.exec_start:
            program = command.lstrip("-@+!:").split()[0] if command.strip() else ""
            if program in self.files:
                steps.extend(parse_script(program, self.files[program]).steps)
        return tuple(steps)

    def _can_begin(self, job: _Job) -> tuple[bool, str]:
        for other in self.order:
            o = self.jobs[other]
            if other == job.unit or o.state in ("done", "failed"):
                continue
            if self._ordered_after(job.unit, other):
                return False, other
        return True, ""

    def _log(self, unit: str, text: str) -> None:
        self.events.append(Event(self.now, unit, text))

    def _step(self, job: _Job, step: Step) -> str:
        """Run one step: ``next`` (done), ``block`` (try again later) or ``fail`` (the segment stops)."""
        if isinstance(step, Wait):
            if self.mounted_covers(step.path):
                if job.wait_since is not None and job.wait_since < self.now:
                    self._log(job.unit, f"{step.path} appeared after {self.now - job.wait_since:.0f} s")
                self._end_wait(job, step)
                return "next"
            if job.wait_since is None:
                job.wait_since = self.now
                self._log(job.unit, f"waits for {step.path} ({step.origin})")
            job.blocked_on = f"waits for {step.path}"
            return "block"
        if isinstance(step, Need):
            if self.mounted_covers(step.path):
                return "next"
            self._fail(job, f"{step.origin}: {step.path} is not mounted, so the script stops there (set -e)")
            return "fail"
        if isinstance(step, Uses):
            pending = self._mounted_later(step.path)
            if pending and job.unit == CLOUD_FINAL:
                self.problems.append(
                    f"{step.origin} (in {CLOUD_FINAL}) uses {step.path}, below {pending}, which {self.mounted_by_unit_later(pending)} "
                    f"mounts only after {CLOUD_FINAL} ({SOURCES['nodeadm-run']}): it acts on the root volume instead"
                )
            return "next"
        if isinstance(step, Mount):
            if step.what:
                source_mount = self._mounted_later(step.what)
                if source_mount:
                    self._fail(job, f"{step.origin}: binds {step.what}, a directory of the root volume ({source_mount} is not mounted yet)")
                    return "fail"
            if step.where not in self.mounted:
                self.mounted.add(step.where)
                self.mounted_by[step.where] = job.unit
                self._log(job.unit, f"mounts {step.where}" + (f" (bind of {step.what})" if step.what else ""))
            if step.unit:
                self.units.setdefault(step.unit, UnitFile(step.unit, where=step.where, what=step.what, options="bind" if step.what else "", wanted_by=frozenset({"multi-user.target"})))
                self.enabled.add(step.unit)
            return "next"
        if isinstance(step, Start):
            target = self.jobs.get(step.unit)
            if target is None or (target.state == "failed" and job.wait_since is None):
                self.queue(step.unit, step.origin)
                target = self.jobs.get(step.unit)
                self._log(job.unit, f"starts {step.unit}" + ("" if step.block else " (--no-block)"))
            if not step.block or target is None or target.state in ("done", "failed"):
                self._end_wait(job, step)
                return "next"
            if job.wait_since is None:
                job.wait_since = self.now
            job.blocked_on = f"waits for {step.unit} to start"
            return "block"
        if isinstance(step, Enable):
            self.enabled.add(step.unit)
            return "next"
        if isinstance(step, Install):
            self.units[step.unit.name] = step.unit
            self.programs.pop(step.unit.name, None)
            return "next"
        if isinstance(step, StartsPods):
            self.kubelet_saw = frozenset(self.mounted)
            self._log(job.unit, "runs: pods start with their volumes")
            return "next"
        return "next"

    def _end_wait(self, job: _Job, step: Step) -> None:
        """A wait or blocking start is over: one inside cloud-final that took time is a defect (nothing it waits for can come then)."""
        if job.unit == CLOUD_FINAL and job.wait_since is not None and self.now > job.wait_since:
            self._cloud_final_block(step, job.blocked_on, f"{self.now - job.wait_since:.0f} s")
        job.wait_since = None

    def _cloud_final_block(self, step: Step, what: str, how_long: str) -> None:
        self.problems.append(
            f"{step.origin} {what} inside {CLOUD_FINAL} and blocks the boot for {how_long}: cloud-init runs user-data shell parts in "
            f"{CLOUD_FINAL} ({SOURCES['cloud-final']}), and {NODEADM_RUN}, which creates the RAID0 and starts the kubelet, comes "
            f"after it ({SOURCES['nodeadm-run']}); never wait there for what nodeadm-run creates"
        )

    def _fail(self, job: _Job, text: str) -> None:
        self.problems.append(text)
        self._log(job.unit, f"fails: {text}")

    def mounted_covers(self, path: str) -> bool:
        return path in self.mounted

    def _mounted_later(self, path: str) -> str | None:
        """The not-yet-mounted mount point some job will create, that ``path`` is below (or is)."""
        for point in self._future_mounts():
            if is_under(path, point) and point not in self.mounted:
                return point
        return None

    def _future_mounts(self) -> list[str]:
        points: list[str] = []
        for program in [*self.programs.values(), *(self._unit_program(u) for u in self.units if u not in self.programs)]:
            points.extend(s.where for s in program if isinstance(s, Mount))
        return sorted(set(points), key=len, reverse=True)

    def mounted_by_unit_later(self, point: str) -> str:
        for unit, program in self.programs.items():
            if any(isinstance(s, Mount) and s.where == point for s in program):
                return unit
        return "a later unit"

    def _advance(self, job: _Job) -> bool:
        progressed = False
        while job.state == "running":
            if job.segment >= len(job.segments):
                job.state = "done"
                self._log(job.unit, "done")
                return True
            _name, steps = job.segments[job.segment]
            if job.pc >= len(steps):
                job.segment, job.pc = job.segment + 1, 0
                continue
            step = steps[job.pc]
            outcome = self._step(job, step)
            if outcome == "block":
                return progressed
            progressed = True
            if outcome == "fail":
                if job.unit != CLOUD_FINAL:
                    job.state = "failed"
                    return True
                job.segment, job.pc = job.segment + 1, 0
                continue
            job.blocked_on = ""
            job.pc += 1
        return progressed

    def run(self, boot_units: Iterable[str]) -> BootResult:
        for unit in boot_units:
            self.queue(unit, "boot")
        while True:
            progressed = True
            while progressed:
                progressed = False
                for unit in list(self.order):
                    job = self.jobs[unit]
                    if job.state == "queued":
                        ok, _ = self._can_begin(job)
                        if ok:
                            job.state = "running"
                            self._log(unit, "starts")
                            progressed = True
                    if job.state == "running":
                        progressed = self._advance(job) or progressed
            unsettled = [self.jobs[u] for u in self.order if self.jobs[u].state in ("queued", "running")]
            if not unsettled:
                break
            deadline = self._next_deadline(unsettled)
            if deadline is None:
                cloud_final = self.jobs.get(CLOUD_FINAL)
                if cloud_final and cloud_final.state == "running":
                    self._cloud_final_block(cloud_final.segments[cloud_final.segment][1][cloud_final.pc], cloud_final.blocked_on, "ever")
                self.problems.append("boot deadlock: " + "; ".join(self._why_stuck(j) for j in unsettled))
                break
        return BootResult(
            tuple(self.events), tuple(dict.fromkeys(self.problems)), frozenset(self.mounted), dict(self.mounted_by), self.kubelet_saw,
            dict(self.units), frozenset(self.enabled), dict(self.programs),
        )

    def _next_deadline(self, jobs: Sequence[_Job]) -> float | None:
        """Move time to the first bounded wait's end; that wait gives up (the next step sees what is mounted then)."""
        best: tuple[float, _Job] | None = None
        for job in jobs:
            if job.state != "running" or job.wait_since is None:
                continue
            step = job.segments[job.segment][1][job.pc]
            if isinstance(step, Wait) and step.timeout_s is not None:
                end = job.wait_since + step.timeout_s
                if best is None or end < best[0]:
                    best = (end, job)
        if best is None:
            return None
        end, job = best
        step = job.segments[job.segment][1][job.pc]
        assert isinstance(step, Wait)
        self.now = end
        self._log(job.unit, f"gives up waiting for {step.path} after {step.timeout_s:.0f} s ({step.origin})")
        self._end_wait(job, step)
        job.pc += 1
        return end

    def _why_stuck(self, job: _Job) -> str:
        if job.state == "queued":
            _, other = self._can_begin(job)
            return f"{job.unit} is ordered after {other} ({self._order_reason(job.unit, other)})"
        return f"{job.unit} {job.blocked_on}"

    def _order_reason(self, unit: str, other: str) -> str:
        a, b = self.units.get(unit), self.units.get(other)
        if a and other in a.after:
            return f"{unit}: After={other}"
        if b and unit in b.before:
            return f"{other}: Before={unit}"
        return "RequiresMountsFor/default dependencies"


# --- user data ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class UserData:
    """A launch template's user data, split into what the boot model needs."""

    scripts: tuple[Script, ...]
    """Its ``text/x-shellscript`` parts, in order."""
    raid0: bool
    """True when a nodeadm NodeConfig part asks for ``localStorage.strategy: RAID0`` (or RAID10)."""


def parse_user_data(user_data: str) -> UserData:
    """Split base64 MIME multi-part user data (as ``LaunchTemplate.user_data`` holds it) into shell parts and the NodeConfig's disk strategy."""
    try:
        text = base64.b64decode(user_data, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        text = user_data
    message = email.message_from_string(text)
    parts = message.get_payload() if message.is_multipart() else [message]
    scripts: list[Script] = []
    raid0 = False
    for number, part in enumerate(parts, start=1):
        content_type = part.get_content_type()
        body = part.get_payload()
        if not isinstance(body, str):
            continue
        if content_type == "text/x-shellscript":
            scripts.append(parse_script(f"user data part {number} ({content_type})", body))
        elif content_type == "application/node.eks.aws":
            for document in yaml.safe_load_all(body):
                strategy = (((document or {}).get("spec") or {}).get("instance") or {}).get("localStorage", {}).get("strategy", "")
                raid0 = raid0 or str(strategy).upper() in ("RAID0", "RAID10")
    return UserData(tuple(scripts), raid0)


AMI_ENABLED = (NODEADM_CONFIG, CLOUD_FINAL, NODEADM_RUN)
"""Units that start at every boot (install-nodeadm.sh enables the nodeadm units; cloud-final is WantedBy=cloud-init.target)."""


def simulate(user_data: UserData, previous: BootResult | None = None) -> BootResult:
    """One boot: the first (``previous`` None: the shell parts run) or the next one after ``previous`` (a reboot)."""
    programs: dict[str, tuple[Step, ...]] = {NODEADM_RUN: nodeadm_run_steps(user_data.raid0), KUBELET: (StartsPods(SOURCES["kubelet"]),), NODEADM_CONFIG: (), CLOUD_FINAL: ()}
    files = {path: content for script in user_data.scripts for path, content in script.files.items()}
    if previous is None:
        boot = _Boot(upstream_units(), programs, AMI_ENABLED, user_data.scripts, files, first=True)
        return boot.run([LOCAL_FS, *AMI_ENABLED])
    units = dict(previous.units)
    boot = _Boot(units, {**programs, **{k: v for k, v in previous.programs.items() if k not in programs}}, previous.enabled, (), files, first=False)
    for unit in units.values():
        if unit.is_mount:
            boot.programs.pop(unit.name, None)
    at_boot = [u for u in previous.enabled if u in units and (units[u].wanted_by & {"multi-user.target", "local-fs.target", "default.target"} or u in AMI_ENABLED)]
    return boot.run([LOCAL_FS, *sorted(set(at_boot) | set(AMI_ENABLED), key=lambda u: (u not in AMI_ENABLED, u))])


@dataclass(frozen=True)
class BootCheck:
    """The first boot and a reboot of one user data, and what a real node would get wrong."""

    first: BootResult
    """The first boot."""
    reboot: BootResult
    """The boot after a reboot (EKS node repair ``Reboot``, or an operator's)."""
    problems: tuple[str, ...]
    """Every defect, one line each (empty: the node boots in order)."""


def check_user_data(user_data: str | UserData) -> BootCheck:
    """Boot the node twice and list what goes wrong: waits in cloud-final, deadlocks, failures, mounts lost or late after a reboot."""
    parsed = parse_user_data(user_data) if isinstance(user_data, str) else user_data
    first = simulate(parsed)
    reboot = simulate(parsed, previous=first)
    problems = list(first.problems)
    problems.extend(f"after a reboot: {p}" for p in reboot.problems if p not in first.problems)
    ours = sorted(point for point in first.mounted if point != RAID_MOUNT)
    for point in ours:
        if point not in reboot.mounted:
            problems.append(
                f"after a reboot {point} is not mounted again: the shell part that mounted it runs once per instance "
                f"({SOURCES['cloud-final']}) and no enabled unit mounts it, so the local volume becomes a directory of the root volume"
            )
        elif not ordered_before(reboot.units, reboot.mounted_by[point], KUBELET):
            problems.append(
                f"after a reboot {reboot.mounted_by[point]}, which mounts {point}, is not ordered before {KUBELET} (Before={KUBELET}, or a "
                f"mount unit's default Before={LOCAL_FS}; {SOURCES['default-deps']}): the kubelet may restart pods first, with the "
                f"local volume on the root volume"
            )
    return BootCheck(first, reboot, tuple(dict.fromkeys(problems)))


__all__ = [
    "AMI_RELEASE",
    "CLOUD_INIT_RELEASE",
    "RAID_MOUNT",
    "SOURCES",
    "BootCheck",
    "BootResult",
    "Event",
    "UserData",
    "check_user_data",
    "parse_user_data",
    "simulate",
]
