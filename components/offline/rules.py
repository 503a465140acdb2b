"""Rules AWS (or the AWS provider) enforces only at apply time, enforced by the offline engine on each registration.

``pulumi preview`` accepts these plans; ``pulumi up`` fails on them, often half an hour in.
The offline engine calls :meth:`ApplyTimeRules.on_registration` for every resource the
program registers (with the moment it would be created in a first ``up``, from
:mod:`kimi_k3.offline.timeline`) and fails the run with :class:`ApplyTimeRuleError`,
naming each rule's source, so a plan fails here the way AWS would fail there.

The rules (each a function below):

- :func:`schedule_starts_in_the_future` — an Auto Scaling scheduled action must start after
  the moment it is created (EC2 Auto Scaling API reference, PutScheduledUpdateGroupAction);
- :func:`schedule_sets_only_what_it_names` — the AWS provider sends 0 for a scheduled
  action's min or max size left unset (pulumi-aws ``autoscaling.Schedule``: "Set to -1 if you
  don't want to change the minimum size … Defaults to 0");
- :func:`capacity_block_updates_without_surge` — a ``CAPACITY_BLOCK`` managed node group
  must update with the ``MINIMAL`` strategy (EKS API reference, NodegroupUpdateConfig; EKS
  user guide, managed-node-update-behavior);
- :func:`one_time_schedule_fires_after_creation` — an EventBridge Scheduler one-time
  schedule (``at(...)``) must fire after it is created (reported refused at create; a schedule
  that never fires is as bad);
- :func:`date_pinned_cron_job_fires_after_creation` — a Kubernetes CronJob pinned to one date
  (``minute hour day month *``, the block-end drain) must fire after it is created: the
  CronJob controller counts schedules from the object's creation (kubernetes/kubernetes
  ``pkg/controller/cronjob/utils.go``, ``mostRecentScheduleTime``: ``earliestTime :=
  cj.ObjectMeta.CreationTimestamp.Time``), so a time already past fires next year, not now;
- :func:`node_boots_in_order` — a launch template's user data, booted twice (first boot and a
  reboot) through the AMI's own unit order (:mod:`kimi_k3.offline.boot_order`, from the
  vendored amazon-eks-ami and cloud-init unit files): no wait inside ``cloud-final`` for what
  ``nodeadm-run`` creates, no deadlock, no lost or late mount after a reboot;
- :func:`fast_image_pull_root_volume_carries_the_image` — with nodeadm's FastImagePull on the
  pinned AMI, SOCI's store is on the root gp3, not the RAID0 (:mod:`kimi_k3.offline.image_store`):
  its throughput must write the engine image within a minute (baseline 125 MiB/s: ~5 min);
- :func:`pending_scale_up_not_moved_later` — on a later run (a previous state), an update of
  a scheduled action that is still pending overwrites it (PutScheduledUpdateGroupAction:
  terraform-provider-aws creates and updates with the same call), so a later start time moves
  the scale-up and the reserved nodes idle meanwhile: refused;
- :func:`pending_switch_on_not_moved_later` — the same for an EventBridge Scheduler one-time
  schedule (UpdateSchedule overrides the existing schedule): a later ``at(...)`` leaves the
  delivery alarm silent longer: refused;
- :func:`custom_resource_has_its_crd` — a Kubernetes object of a kind no built-in API group
  serves (a custom resource, or a Helm release whose values make its chart render one) needs its
  CustomResourceDefinition installed by the plan before it (a CRD, or a Helm chart known to ship
  it, done earlier on the timeline) or read as pre-existing (``CustomResourceDefinition.get``):
  the API server rejects objects of unknown kinds, and pulumi-kubernetes fails the preview or
  the apply with "no matches for kind" (:data:`CRD_SOURCE`);
- :func:`namespaced_object_has_its_namespace` — an object (or a Helm release without
  ``createNamespace``) into a namespace the plan neither creates before it nor reads
  (``Namespace.get``): the NamespaceLifecycle admission plugin rejects it (:data:`NAMESPACE_SOURCE`).

:func:`custom_resource_has_its_crd` and :func:`namespaced_object_has_its_namespace` are stack rules
(:data:`STACK_RULES`): they and the plan rules
(:data:`PLAN_RULES`, the whole run once it has ended) check a stack's program, not a component alone:

- :func:`private_endpoint_admits_a_client` — an EKS cluster whose endpoint is private only
  needs a 443 ingress rule on its cluster security group (:data:`PRIVATE_ENDPOINT_SOURCE`):
  else no runner reaches the API and the first ``up`` fails at its first Kubernetes object;
- :func:`kimi_k3.offline.alarm_rules.switched_on_alarm_can_page` — an alarm declared with actions
  off and switched on by a one-time schedule must be set to OK after the switch-on: CloudWatch acts
  only on state transitions, so an alarm already in ALARM would never page.

A resource that exists since the previous run with the same inputs gets no API call, so the
rules about the moment of a call (:func:`schedule_starts_in_the_future`,
:func:`one_time_schedule_fires_after_creation`) do not apply to it (:attr:`Moment.unchanged`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kimi_k3.capacity.delivery_check import parse_scheduler_at
from kimi_k3.errors import UserError
from kimi_k3.offline import boot_order, image_store
from kimi_k3.offline.alarm_rules import switched_on_alarm_can_page
from kimi_k3.offline.timeline import Moment, Registration, Timeline
from kimi_k3.serving.block_end import FIRES_AT_ANNOTATION, TIME_ZONE, cron_schedule

if TYPE_CHECKING:
    from kimi_k3.offline.state import PreviousState

SCHEDULE = "aws:autoscaling/schedule:Schedule"
SCHEDULER_SCHEDULE = "aws:scheduler/schedule:Schedule"
CRON_JOB = "kubernetes:batch/v1:CronJob"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"

SCHEDULE_IN_THE_PAST_SOURCE = (
    "EC2 Auto Scaling API reference, PutScheduledUpdateGroupAction: 'If you try to schedule your action in the past, "
    "Amazon EC2 Auto Scaling returns an error message'"
)
SCHEDULE_SIZE_DEFAULT_SOURCE = (
    "pulumi-aws 7.51.1 autoscaling.Schedule min_size/max_size: 'Set to -1 if you don't want to change the minimum size "
    "at the scheduled time. Defaults to 0' (terraform-provider-aws internal/service/autoscaling/schedule.go sends every "
    "size that is not -1)"
)
MINIMAL_UPDATE_SOURCE = (
    "EKS API reference, NodegroupUpdateConfig.updateStrategy: the default strategy 'launches the new instances first, "
    "before terminating the old instances', the minimal one 'terminates the old instances before launching the new "
    "instances … useful … with hardware accelerators such as GPUs'; EKS user guide, managed-node-update-behavior"
)

SCHEDULE_OVERWRITE_SOURCE = (
    "terraform-provider-aws internal/service/autoscaling/schedule.go: CreateWithoutTimeout and UpdateWithoutTimeout are both "
    "resourceSchedulePut, which calls PutScheduledUpdateGroupAction ('Creates or updates a scheduled scaling action', "
    "EC2 Auto Scaling API reference): an update replaces the pending action's start time"
)
SCHEDULER_OVERWRITE_SOURCE = (
    "EventBridge Scheduler API reference, UpdateSchedule: 'EventBridge Scheduler uses all values, including empty values, "
    "specified in the request and overrides the existing schedule'"
)

ONE_TIME_SCHEDULE_SOURCE = (
    "EventBridge Scheduler user guide, schedule-types, 'One-time schedules': an at() schedule invokes its target once, "
    "at the time given; a time that has passed at create is rejected (DefangLabs/pulumi-defang cd/program/selfdestruct_aws.go, "
    "PR #425: 'AWS rejects a fire time in the past at create')"
)


CRD_SOURCE = (
    "Kubernetes API concepts: a custom resource's kind is served only once its CustomResourceDefinition is established, "
    "and the API server answers 404 for a kind it does not serve; pulumi-kubernetes fails the preview or the apply with "
    "'no matches for kind \"<Kind>\" in version \"<group/version>\"' (the error quoted in pulumi/pulumi-kubernetes#1712, "
    "kube-prometheus-stack's own objects applied before its CRDs)"
)
PRIVATE_ENDPOINT_SOURCE = (
    "EKS user guide, 'Cluster API server endpoint': with public access off, the API server is reachable only from within "
    "the cluster's VPC or a connected network, and the cluster security group must allow ingress on port 443 from the client"
)

BUILT_IN_API_GROUPS = frozenset({
    "core", "apps", "batch", "autoscaling", "policy", "networking.k8s.io", "rbac.authorization.k8s.io", "storage.k8s.io",
    "apiextensions.k8s.io", "admissionregistration.k8s.io", "apiregistration.k8s.io", "coordination.k8s.io", "discovery.k8s.io",
    "scheduling.k8s.io", "node.k8s.io", "certificates.k8s.io", "flowcontrol.apiserver.k8s.io", "events.k8s.io",
    "resource.k8s.io", "authentication.k8s.io", "authorization.k8s.io", "storagemigration.k8s.io",
})
"""API groups every Kubernetes API server serves (``core`` is the legacy group, ``kubernetes:core/v1:*`` in type tokens)."""

_PROMETHEUS_OPERATOR_KINDS = {
    "Alertmanager": "alertmanagers", "AlertmanagerConfig": "alertmanagerconfigs", "PodMonitor": "podmonitors", "Probe": "probes",
    "Prometheus": "prometheuses", "PrometheusAgent": "prometheusagents", "PrometheusRule": "prometheusrules",
    "ScrapeConfig": "scrapeconfigs", "ServiceMonitor": "servicemonitors", "ThanosRuler": "thanosrulers",
}
CHART_CRDS: Mapping[str, Mapping[tuple[str, str], str]] = {
    # prometheus-community/helm-charts, tag kube-prometheus-stack-88.3.0, charts/kube-prometheus-stack/charts/crds/crds/
    # (the crds sub-chart, condition crds.enabled, on by default): group, kind and plural of each file.
    "kube-prometheus-stack": {("monitoring.coreos.com", kind): plural for kind, plural in _PROMETHEUS_OPERATOR_KINDS.items()},
    # The chart's CRD leaderworkersets.leaderworkerset.x-k8s.io (components/addons/lws_controller.py).
    "lws": {("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): "leaderworkersets"},
    # The controller's elbv2.k8s.aws CRDs (the chart ships more, of other groups: a kind missing here is refused, never let through).
    "aws-load-balancer-controller": {("elbv2.k8s.aws", "TargetGroupBinding"): "targetgroupbindings", ("elbv2.k8s.aws", "IngressClassParams"): "ingressclassparams"},
}
"""CRDs a remote chart installs, by chart name: (group, kind) -> plural (the kinds this stack's objects use; an absent
kind makes the rule refuse, not pass). A local chart (a path) is read from its files (:func:`local_chart_crds`)."""

CHART_VALUES_KINDS: Mapping[str, tuple[tuple[tuple[str, ...], tuple[str, str]], ...]] = {
    # NVIDIA/dcgm-exporter deployment/templates/service-monitor.yaml: rendered when .Values.serviceMonitor.enabled.
    "dcgm-exporter": ((("serviceMonitor", "enabled"), ("monitoring.coreos.com", "ServiceMonitor")),),
}
"""Custom kinds a chart renders when a values switch is on: chart -> ((values path, (group, kind)), ...)."""

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
EKS_CLUSTER = "eks:index:Cluster"
INGRESS_RULE_TYPES = ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "aws:ec2/securityGroupRule:SecurityGroupRule")


@dataclass(frozen=True)
class RuleViolation:
    """One registration a rule refuses."""

    rule: str
    """The rule's function name."""
    resource: str
    """``type 'name'`` of the refused resource."""
    message: str
    """What is wrong and why AWS refuses it, with the source."""

    def line(self) -> str:
        """One line: the resource, then the message."""
        return f"{self.resource}: {self.message}"


class ApplyTimeRuleError(UserError):
    """The plan breaks a rule AWS enforces only at apply time (one line per violation, joined)."""

    def __init__(self, violations: list[RuleViolation]) -> None:
        """Fail with ``violations``, every refusal of the run in registration order; the message joins their lines."""
        self.violations = tuple(violations)
        super().__init__(
            "the offline engine refused what AWS would refuse during `pulumi up`: " + "; ".join(v.line() for v in violations)
        )


Rule = Callable[[Registration, Moment, "Timeline"], str | None]
"""A rule: the registration, its modelled moment and the timeline in; a refusal message or ``None`` out."""


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _minutes(delta_seconds: float) -> str:
    return f"{delta_seconds / 60:.0f} minutes"


def _create_call(moment: Moment, timeline: Timeline) -> str:
    """When a first ``pulumi up`` makes the resource's create call, against the run's start."""
    elapsed = (moment.starts - timeline.now).total_seconds()
    return (
        f"in a first `pulumi up` starting at {_when(timeline.now)} its create call comes at {_when(moment.starts)} "
        f"({_minutes(elapsed)} later, after what it depends on; create times in components/offline/create_times.py)"
    )


def parse_schedule_time(value: str) -> datetime:
    """A scheduled action's ``YYYY-MM-DDThh:mm:ssZ`` time (the only format the provider accepts)."""
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def schedule_starts_in_the_future(registration: Registration, moment: Moment, timeline: Timeline) -> str | None:
    """Refuse a scheduled action whose ``startTime`` is not after the moment its create call is made."""
    if registration.type != SCHEDULE or moment.unchanged:
        return None
    start = registration.inputs.get("startTime")
    if not isinstance(start, str):
        return None
    if parse_schedule_time(start) > moment.starts:
        return None
    return (
        f"startTime {start} is not in the future when the scheduled action is created: {_create_call(moment, timeline)}, "
        f"and AutoScaling refuses an action in the past ({SCHEDULE_IN_THE_PAST_SOURCE})"
    )


def schedule_sets_only_what_it_names(registration: Registration, moment: Moment, timeline: Timeline) -> str | None:
    """Refuse a scheduled action that leaves ``minSize`` or ``maxSize`` unset (the provider sends 0 for it)."""
    if registration.type != SCHEDULE:
        return None
    unset = [name for name in ("minSize", "maxSize", "desiredCapacity") if registration.inputs.get(name) is None]
    if not unset:
        return None
    return (
        f"{', '.join(unset)} unset: the AWS provider then sends 0, so the action would also set the group's "
        f"{' and '.join(unset)} to 0; give -1 for a size the action must leave alone ({SCHEDULE_SIZE_DEFAULT_SOURCE})"
    )


def capacity_block_updates_without_surge(registration: Registration, moment: Moment, timeline: Timeline) -> str | None:
    """Refuse a ``CAPACITY_BLOCK`` node group whose update strategy is not ``MINIMAL``."""
    if registration.type != NODE_GROUP or registration.inputs.get("capacityType") != "CAPACITY_BLOCK":
        return None
    update: Mapping[str, Any] = registration.inputs.get("updateConfig") or {}
    strategy = update.get("updateStrategy") or "DEFAULT"
    if strategy == "MINIMAL":
        return None
    return (
        f"capacityType CAPACITY_BLOCK with updateConfig.updateStrategy {strategy}: a Capacity Block has no spare instance, "
        f"so an update that launches replacements first ends in NodeCreationFailure; set updateStrategy MINIMAL "
        f"({MINIMAL_UPDATE_SOURCE})"
    )


def one_time_schedule_fires_after_creation(registration: Registration, moment: Moment, timeline: Timeline) -> str | None:
    """Refuse an EventBridge Scheduler ``at(...)`` schedule whose time is not after the moment its create call is made."""
    if registration.type != SCHEDULER_SCHEDULE or moment.unchanged:
        return None
    expression = registration.inputs.get("scheduleExpression")
    fires = parse_scheduler_at(expression) if isinstance(expression, str) else None
    if fires is None:
        return None
    if fires > moment.starts:
        return None
    return (
        f"scheduleExpression {expression} (UTC) has passed when the schedule is created: {_create_call(moment, timeline)}; "
        f"it would be refused, or never invoke its target ({ONE_TIME_SCHEDULE_SOURCE})"
    )


CRON_JOB_CREATION_SOURCE = (
    "kubernetes/kubernetes pkg/controller/cronjob/utils.go, mostRecentScheduleTime: 'earliestTime := "
    "cj.ObjectMeta.CreationTimestamp.Time' while the CronJob has no lastScheduleTime: a schedule time before the object's "
    "creation is never run; the next match of 'minute hour day month *' is a year later"
)


def date_pinned_cron_job_fires_after_creation(registration: Registration, moment: Moment, timeline: Timeline) -> str | None:
    """Refuse a CronJob pinned to one moment (annotation ``kimi-k3.io/fires-at``) whose moment is not after its creation,
    or whose schedule and time zone do not say that moment."""
    if registration.type != CRON_JOB:
        return None
    metadata: Mapping[str, Any] = registration.inputs.get("metadata") or {}
    fires = (metadata.get("annotations") or {}).get(FIRES_AT_ANNOTATION)
    if not isinstance(fires, str):
        return None
    spec: Mapping[str, Any] = registration.inputs.get("spec") or {}
    at = parse_schedule_time(fires)
    expected = cron_schedule(at)
    if spec.get("schedule") != expected or spec.get("timeZone") != TIME_ZONE:
        return (
            f"{FIRES_AT_ANNOTATION} {fires} but schedule {spec.get('schedule')!r} in time zone {spec.get('timeZone')!r}: "
            f"it would fire at another moment; expected {expected!r} in {TIME_ZONE}"
        )
    if at > moment.starts:
        return None
    return (
        f"the CronJob is pinned to {fires}, which has passed when it is created: {_create_call(moment, timeline)}; "
        f"it would not run until a year later ({CRON_JOB_CREATION_SOURCE})"
    )


def node_boots_in_order(registration: Registration, moment: Moment, timeline: Timeline) -> str | None:
    """Refuse a launch template whose user data, booted through the AMI's unit order, waits in cloud-final, deadlocks or loses a mount."""
    if registration.type != LAUNCH_TEMPLATE:
        return None
    user_data = registration.inputs.get("userData")
    if not isinstance(user_data, str) or not user_data:
        return None
    problems = boot_order.check_user_data(user_data).problems
    if not problems:
        return None
    return f"the node would not boot as planned (modelled on amazon-eks-ami {boot_order.AMI_RELEASE}): " + "; ".join(problems)


def fast_image_pull_root_volume_carries_the_image(registration: Registration, moment: Moment, timeline: Timeline) -> str | None:
    """Refuse a launch template whose FastImagePull writes the engine image to a root volume too slow for it
    (:mod:`kimi_k3.offline.image_store`: on the pinned AMI SOCI's store is not on the RAID0)."""
    if registration.type != LAUNCH_TEMPLATE:
        return None
    return image_store.root_volume_problem(registration.inputs)


def pending_scale_up_not_moved_later(registration: Registration, moment: Moment, timeline: Timeline) -> str | None:
    """Refuse an update that moves a scheduled action still pending at the update call to a later start time."""
    if registration.type != SCHEDULE:
        return None
    before = timeline.previous_inputs(registration.urn) or {}
    old, new = before.get("startTime"), registration.inputs.get("startTime")
    if not isinstance(old, str) or not isinstance(new, str):
        return None
    pending, moved = parse_schedule_time(old), parse_schedule_time(new)
    if pending <= moment.starts or moved <= pending:
        return None
    minutes = (moved - pending).total_seconds() / 60
    nodes = registration.inputs.get("desiredCapacity")
    idle = f"{int(nodes)} reserved nodes idle" if isinstance(nodes, (int, float)) and nodes > 0 else "the reserved nodes idle"
    return (
        f"startTime moves from {old} (pending: the action exists and has not fired at {_when(moment.starts)}) to {new}: "
        f"{minutes:.0f} minutes of {idle}; keep the pending time ({SCHEDULE_OVERWRITE_SOURCE})"
    )


def pending_switch_on_not_moved_later(registration: Registration, moment: Moment, timeline: Timeline) -> str | None:
    """Refuse an update that moves a one-time ``at(...)`` schedule still pending at the update call to a later time."""
    if registration.type != SCHEDULER_SCHEDULE:
        return None
    before = timeline.previous_inputs(registration.urn) or {}
    old, new = before.get("scheduleExpression"), registration.inputs.get("scheduleExpression")
    pending = parse_scheduler_at(old) if isinstance(old, str) else None
    moved = parse_scheduler_at(new) if isinstance(new, str) else None
    if pending is None or moved is None or pending <= moment.starts or moved <= pending:
        return None
    minutes = (moved - pending).total_seconds() / 60
    return (
        f"scheduleExpression moves from {old} (pending at {_when(moment.starts)}) to {new} (UTC): what it does happens "
        f"{minutes:.0f} minutes later (for the delivery check: the alarm stays silent that much longer); keep the pending time "
        f"({SCHEDULER_OVERWRITE_SOURCE})"
    )


def kubernetes_kind(type_: str) -> tuple[str, str, str] | None:
    """``(group, version, kind)`` of a Kubernetes object's type token (``kubernetes:monitoring.coreos.com/v1:PrometheusRule``);
    ``None`` for what is not an API object (providers, Helm releases, yaml/kustomize components)."""
    if not type_.startswith("kubernetes:") or type_.startswith(("kubernetes:helm.sh/", "kubernetes:yaml", "kubernetes:kustomize")):
        return None
    module, _, kind = type_.removeprefix("kubernetes:").partition(":")
    group, _, version = module.rpartition("/")
    if not group or not kind:
        return None
    return group, version, kind


def _chart_name(chart: str) -> str:
    """The chart's name in a release's ``chart``: ``lws`` of ``oci://registry.k8s.io/lws/charts/lws``, ``x`` of a path ``…/x``."""
    return chart.rstrip("/").rsplit("/", 1)[-1]


_CRD_FILE_GROUP = re.compile(r"^\s*group:\s*['\"]?([\w.-]+)", re.M)
_CRD_FILE_NAMES = re.compile(r"^\s*names:\s*$(?P<body>(?:\n\s+.*)+)", re.M)
_CRD_FILE_KIND = re.compile(r"^\s*kind:\s*['\"]?(\w+)", re.M)


@functools.lru_cache(maxsize=8)
def local_chart_crds(path: str) -> frozenset[tuple[str, str]]:
    """(group, kind) of every CustomResourceDefinition in a chart directory's files (a chart installed from a path)."""
    root = Path(path)
    if not root.is_absolute():
        root = Path(__file__).resolve().parents[2] / path
    found: set[tuple[str, str]] = set()
    if not root.is_dir():
        return frozenset()
    for file in root.rglob("*.yaml"):
        text = file.read_text(errors="replace")
        if "kind: CustomResourceDefinition" not in text:
            continue
        group, names = _CRD_FILE_GROUP.search(text), _CRD_FILE_NAMES.search(text)
        kind = _CRD_FILE_KIND.search(names.group("body")) if names else None
        if group and kind:
            found.add((group.group(1), kind.group(1)))
    return frozenset(found)


def _release_installs(registration: Registration, group: str, kind: str) -> bool:
    chart = str(registration.inputs.get("chart") or "")
    name = _chart_name(chart)
    if (group, kind) in CHART_CRDS.get(name, {}):
        return True
    return "/" in chart and not chart.startswith(("oci://", "http")) and (group, kind) in local_chart_crds(chart)


def _crd_declares(registration: Registration, group: str, kind: str) -> bool:
    spec = registration.inputs.get("spec") or {}
    return spec.get("group") == group and (spec.get("names") or {}).get("kind") == kind


def _crd_read(timeline: Timeline, group: str, kind: str) -> bool:
    plurals = {plural for kinds in CHART_CRDS.values() for (g, k), plural in kinds.items() if (g, k) == (group, kind)}
    plurals.add(kind.lower() + "s")
    return any(type_ == CRD and id_ in {f"{plural}.{group}" for plural in plurals} for type_, id_ in timeline.reads)


def _needed_kinds(registration: Registration) -> list[tuple[str, str]]:
    """The custom (group, kind)s a registration needs served: its own kind, or what a Helm release's values make it render."""
    if registration.type == HELM_RELEASE:
        values = registration.inputs.get("values") or {}
        needed = []
        for path, kind in CHART_VALUES_KINDS.get(_chart_name(str(registration.inputs.get("chart") or "")), ()):
            node: Any = values
            for part in path:
                node = node.get(part) if isinstance(node, Mapping) else None
            if node is True:
                needed.append(kind)
        return needed
    parsed = kubernetes_kind(registration.type)
    if parsed is None or parsed[0] in BUILT_IN_API_GROUPS:
        return []
    return [(parsed[0], parsed[2])]


def custom_resource_has_its_crd(registration: Registration, moment: Moment, timeline: Timeline) -> str | None:
    """Refuse an object of a custom kind whose CRD the plan neither installs before it nor reads as pre-existing."""
    problems = []
    for group, kind in _needed_kinds(registration):
        if _crd_read(timeline, group, kind):
            continue
        installers = [
            urn for urn, other in timeline.registrations.items()
            if urn != registration.urn and (
                (other.type == CRD and _crd_declares(other, group, kind)) or (other.type == HELM_RELEASE and _release_installs(other, group, kind))
            )
        ]
        if any(timeline.done(urn) <= moment.starts for urn in installers):
            continue
        what = f"{kind} ({group})"
        if installers:
            names = ", ".join(urn.rsplit("::", 1)[-1] for urn in installers)
            problems.append(f"{what} is created at {_when(moment.starts)}, before {names} installs its CRD: make it depend on that ({CRD_SOURCE})")
        else:
            problems.append(
                f"no CustomResourceDefinition serves {what}: the plan neither installs it (a CRD, or a chart that ships it) nor reads it "
                f"as pre-existing (CustomResourceDefinition.get) ({CRD_SOURCE})"
            )
    return "; ".join(problems) or None


NAMESPACE_SOURCE = (
    "Kubernetes admission controllers reference, NamespaceLifecycle (on by default): it 'ensures that requests in a "
    "non-existent Namespace are rejected'"
)
BUILT_IN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
"""Namespaces every cluster has."""
NAMESPACE = "kubernetes:core/v1:Namespace"


def _namespace_of(registration: Registration) -> str | None:
    if registration.type == HELM_RELEASE:
        if registration.inputs.get("createNamespace"):
            return None
        namespace = registration.inputs.get("namespace")
    elif kubernetes_kind(registration.type) is not None:
        namespace = (registration.inputs.get("metadata") or {}).get("namespace")
    else:
        return None
    return namespace if isinstance(namespace, str) and namespace and namespace not in BUILT_IN_NAMESPACES else None


def namespaced_object_has_its_namespace(registration: Registration, moment: Moment, timeline: Timeline) -> str | None:
    """Refuse an object (or a Helm release) into a namespace the plan neither creates before it nor reads as pre-existing."""
    namespace = _namespace_of(registration)
    if namespace is None or any(type_ == NAMESPACE and id_ == namespace for type_, id_ in timeline.reads):
        return None
    creators = [
        urn for urn, other in timeline.registrations.items()
        if urn != registration.urn and (
            (other.type == NAMESPACE and (other.inputs.get("metadata") or {}).get("name") == namespace)
            or (other.type == HELM_RELEASE and other.inputs.get("createNamespace") and other.inputs.get("namespace") == namespace)
        )
    ]
    if any(timeline.done(urn) <= moment.starts for urn in creators):
        return None
    if creators:
        names = ", ".join(urn.rsplit("::", 1)[-1] for urn in creators)
        return f"namespace {namespace} is created by {names} after this object's create call: make it depend on that ({NAMESPACE_SOURCE})"
    return f"namespace {namespace} is neither created by the plan nor read as pre-existing (Namespace.get) ({NAMESPACE_SOURCE})"


def private_endpoint_admits_a_client(registrations: Sequence[Registration]) -> list[tuple[Registration, str]]:
    """Refuse an EKS cluster with a private-only endpoint and no 443 ingress rule on its cluster security group."""
    refused = []
    for cluster in registrations:
        if cluster.type != EKS_CLUSTER or cluster.inputs.get("endpointPublicAccess") is not False:
            continue
        group = (getattr(cluster, "outputs", None) or {}).get("clusterSecurityGroupId")
        admitted = [
            r for r in registrations
            if r.type in INGRESS_RULE_TYPES and r.inputs.get("securityGroupId") == group and r.inputs.get("type", "ingress") == "ingress"
            and _port_in(r.inputs, 443)
        ]
        if not admitted:
            refused.append((
                cluster,
                "the EKS endpoint is private only and its cluster security group admits nothing on 443: no deploy runner or kubectl can "
                "reach the API, so the first `pulumi up` fails at its first Kubernetes object; set kimi-k3:deployRunner codebuild "
                "(docs/first-deploy.md), kimi-k3:clusterApiIngressCidrs or kimi-k3:clusterApiIngressSecurityGroupIds "
                f"({PRIVATE_ENDPOINT_SOURCE})",
            ))
    return refused


def _port_in(inputs: Mapping[str, Any], port: int) -> bool:
    low, high = inputs.get("fromPort"), inputs.get("toPort")
    if inputs.get("ipProtocol") in ("-1", "all") or inputs.get("protocol") in ("-1", "all"):
        return True
    return isinstance(low, (int, float)) and isinstance(high, (int, float)) and low <= port <= high


RULES: tuple[Rule, ...] = (
    schedule_starts_in_the_future, schedule_sets_only_what_it_names, capacity_block_updates_without_surge, one_time_schedule_fires_after_creation,
    date_pinned_cron_job_fires_after_creation, node_boots_in_order, pending_scale_up_not_moved_later, pending_switch_on_not_moved_later,
    fast_image_pull_root_volume_carries_the_image,
)
"""Every apply-time rule the offline engine enforces."""

PlanRule = Callable[[Sequence[Registration]], list[tuple[Registration, str]]]
"""A rule over the whole run: every registration in; (refused registration, message) pairs out."""

PLAN_RULES: tuple[PlanRule, ...] = (private_endpoint_admits_a_client, switched_on_alarm_can_page)
"""Every plan rule, checked once the program has ended."""

STACK_RULES: tuple[Rule, ...] = (custom_resource_has_its_crd, namespaced_object_has_its_namespace)
"""Registration rules about what a whole stack must declare (a component alone relies on what its stack installs):
checked on a stack's run (``OfflineEngine(plan_rules=True)``) with the plan rules."""


class ApplyTimeRules:
    """The rules, applied to each registration of one run against its modelled creation moment."""

    def __init__(
        self, now: datetime, rules: tuple[Rule, ...] = RULES, previous: PreviousState | None = None, plan_rules: tuple[PlanRule, ...] = PLAN_RULES,
    ) -> None:
        """Check a run starting at ``now`` (where its timeline starts) against ``rules``, by default every rule in :data:`RULES`;
        ``previous``: the state of the stack before this run (a later ``up``), ``None`` for a first ``up``."""
        self.timeline = Timeline(now, previous)
        self.rules = rules
        self.plan_rules = plan_rules
        self.violations: list[RuleViolation] = []
        self._names: dict[str, str] = {}
        self._ended = False

    def on_registration(self, registration: Registration, name: str) -> None:
        """Place the registration on the timeline and record what any rule refuses."""
        moment = self.timeline.add(registration)
        self._names[registration.urn] = name
        for rule in self.rules:
            message = rule(registration, moment, self.timeline)
            if message is not None:
                self.violations.append(RuleViolation(rule.__name__, f"{registration.type} '{name}'", message))

    def on_read(self, type_: str, id_: str) -> None:
        """Record a read of an existing resource (``Resource.get``): what the plan declares as pre-existing."""
        self.timeline.reads.append((type_, id_))

    def end(self) -> None:
        """Run the plan rules over the whole run (once)."""
        if self._ended:
            return
        self._ended = True
        registrations = list(self.timeline.registrations.values())
        for rule in self.plan_rules:
            for registration, message in rule(registrations):
                name = self._names.get(registration.urn, registration.urn.rsplit("::", 1)[-1])
                self.violations.append(RuleViolation(rule.__name__, f"{registration.type} '{name}'", message))

    def raise_any(self) -> None:
        """Run the plan rules (:meth:`end`), then raise :class:`ApplyTimeRuleError` when a rule refused something."""
        self.end()
        if self.violations:
            raise ApplyTimeRuleError(self.violations)


__all__ = [
    "BUILT_IN_API_GROUPS",
    "CHART_CRDS",
    "CHART_VALUES_KINDS",
    "CRD_SOURCE",
    "CRON_JOB_CREATION_SOURCE",
    "MINIMAL_UPDATE_SOURCE",
    "NAMESPACE_SOURCE",
    "ONE_TIME_SCHEDULE_SOURCE",
    "PLAN_RULES",
    "PRIVATE_ENDPOINT_SOURCE",
    "RULES",
    "SCHEDULER_OVERWRITE_SOURCE",
    "SCHEDULE_IN_THE_PAST_SOURCE",
    "SCHEDULE_OVERWRITE_SOURCE",
    "SCHEDULE_SIZE_DEFAULT_SOURCE",
    "STACK_RULES",
    "ApplyTimeRuleError",
    "ApplyTimeRules",
    "RuleViolation",
    "capacity_block_updates_without_surge",
    "custom_resource_has_its_crd",
    "date_pinned_cron_job_fires_after_creation",
    "fast_image_pull_root_volume_carries_the_image",
    "kubernetes_kind",
    "local_chart_crds",
    "namespaced_object_has_its_namespace",
    "node_boots_in_order",
    "one_time_schedule_fires_after_creation",
    "parse_schedule_time",
    "pending_scale_up_not_moved_later",
    "pending_switch_on_not_moved_later",
    "private_endpoint_admits_a_client",
    "schedule_sets_only_what_it_names",
    "schedule_starts_in_the_future",
]
