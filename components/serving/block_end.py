"""The block-end drain: every replica stops taking new work and drains before EKS scales the Capacity Block's nodes to 0.

Why a step of our own: forty minutes before a Capacity Block ends, EKS's scheduled action
scales the node group to 0 (``EKS_SCALEDOWN_BEFORE_END``), the node drain evicts the
serving pods, and thirty minutes before the end EC2 starts terminating the instances. The
eviction respects the PodDisruptionBudget (one pod at a time), so with two replicas the
second is not even asked to stop until the first is gone, up to a whole grace period later
(2,015 s with the defaults): its in-flight requests are cut when its instance goes. So a
one-time step runs earlier, at :meth:`kimi_k3.serving.drain.DrainPlan.block_end_stop_at`
(the end, minus the forty minutes, minus the grace period, minus
:data:`kimi_k3.serving.drain.BLOCK_END_START_MARGIN_S`), and scales the serving workload
to 0 through its ``scale`` subresource. A scale-down deletes the pods at once, without
evictions (a PDB governs evictions only), so every replica runs the same stop sequence in
parallel: it leaves the Service endpoints and the NLB target group, keeps its listener for
the preStop while the NLB stops sending, then drains its in-flight requests, and is gone
before EKS's scale-down.

The step is a Kubernetes CronJob on the system nodes (never the GPU nodes it drains),
pinned to one date and time (``minute hour day month *`` in ``Etc/UTC``), whose pod checks
it runs inside this block's window (a date-pinned CronJob would fire again a year later),
then makes one ``PATCH`` of ``{"spec": {"replicas": 0}}`` with curl and its ServiceAccount
token. The image is the proxy's (nginx's Debian images ship ``sh`` and ``curl``: the
``apt-get install ... curl`` of nginxinc/docker-nginx-unprivileged's Dockerfiles), so the
stack pins and mirrors no other image. Its Role may patch exactly that workload's scale,
nothing else; its NetworkPolicy admits only HTTPS out (the API server).

Two cases are decided by the program's ``now`` (an input, never the clock here):

* past the stop time (a ``pulumi up`` during the block's last hour or after it): the
  workload is declared with 0 replicas and no CronJob, so a late run never brings back
  replicas the step removed (nor starts ones whose nodes are about to go);
* within :data:`SCHEDULE_CREATE_MARGIN` of the stop time: the CronJob cannot be relied on
  to exist in time in a first ``pulumi up``; it fires at ``now`` plus the margin instead,
  later than the drain needs (:attr:`BlockEndPlan.late`; the stack warns).

The offline engine refuses a date-pinned CronJob whose time has passed when it would be
created (:func:`kimi_k3.offline.rules.date_pinned_cron_job_fires_after_creation`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.capacity.scaling import EKS_SCALEDOWN_BEFORE_END
from kimi_k3.cluster.pod_security import RUN_AS_USER, container_security_context
from kimi_k3.core import labels
from kimi_k3.core.clock import utc
from kimi_k3.errors import UserError
from kimi_k3.serving.drain import DrainPlan

SCHEDULE_CREATE_MARGIN = timedelta(minutes=60)
"""How long after the program starts the CronJob is sure to exist in a first ``pulumi up``.

The offline engine models the CronJob's create call in this project's prod stack 26
minutes into a first ``up`` (the control plane, the node groups, the GPU plugins and the load
balancer controller come first: ``components/offline/create_times.py``); an hour leaves room
for a slow day."""

FIRES_AT_ANNOTATION = "kimi-k3.io/fires-at"
"""CronJob annotation: the one moment (``YYYY-MM-DDThh:mm:ssZ``) its date-pinned schedule is meant to fire."""

TIME_ZONE = "Etc/UTC"
"""The CronJob's ``timeZone`` (stable since Kubernetes 1.27): its schedule is read in UTC whatever the controller's zone."""

IMAGE_CHECKOV_SKIP = (
    "CKV_K8S_38=the block-end step scales its one workload through the Kubernetes API with its ServiceAccount's token; "
    "its Role allows patching that workload's scale subresource and nothing else"
)
"""checkov skip (with its reason): the step's pod mounts its ServiceAccount token, which is what it is for."""

SCALE_SCRIPT = """set -eu
now=$(date -u +%s)
if [ "$now" -lt "$NOT_BEFORE" ] || [ "$now" -ge "$NOT_AFTER" ]; then
  echo "block-end drain of $WORKLOAD: $(date -u +%Y-%m-%dT%H:%M:%SZ) is outside this block's window; nothing to do"
  exit 0
fi
sa="${SA_DIR:-/var/run/secrets/kubernetes.io/serviceaccount}"
# Retried on timeouts, refused connections and 408/429/5xx; a 4xx (a wrong Role, a missing workload) fails at once.
if ! answer=$(curl --silent --show-error --fail-with-body --max-time 20 --retry 5 --retry-connrefused --retry-delay 5 \\
  --cacert "$sa/ca.crt" --oauth2-bearer "$(cat "$sa/token")" \\
  -X PATCH -H "Content-Type: application/merge-patch+json" --data '{"spec":{"replicas":0}}' \\
  "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT$SCALE_PATH"); then
  echo "block-end drain of $WORKLOAD: the API server refused the scale: $answer" >&2
  exit 1
fi
echo "block-end drain of $WORKLOAD: scaled to 0 at $(date -u +%Y-%m-%dT%H:%M:%SZ); every replica stops taking new work and drains"
"""
"""The step's pod: check the window, scale the workload to 0 (the API server's answer is its own error on failure)."""


@dataclass(frozen=True)
class BlockEnd:
    """The Capacity Block under the serving pods, and the moment the program runs."""

    ends_at: datetime
    """When the block ends (UTC)."""
    now: datetime
    """When this program runs (UTC; read once by the entry point)."""


@dataclass(frozen=True)
class BlockEndPlan:
    """What the block-end drain declares in this run (:func:`block_end_plan`)."""

    stop_at: datetime
    """When the pods must start stopping for the whole stop sequence to end before EKS's scale-down."""
    fires_at: datetime | None
    """When the CronJob scales the workload to 0; ``None``: the run is past :attr:`stop_at` and declares no CronJob."""
    scale_down_at: datetime
    """When EKS scales the node group to 0 (the block's end minus forty minutes)."""
    ends_at: datetime
    """When the block ends."""

    @property
    def serving(self) -> bool:
        """False once the run is past :attr:`stop_at`: the workload is declared with no replicas."""
        return self.fires_at is not None

    @property
    def late(self) -> bool:
        """The CronJob fires after :attr:`stop_at` (the run came too close to it): in-flight requests get less than the drain."""
        return self.fires_at is not None and self.fires_at > self.stop_at


@dataclass(frozen=True)
class ScaleTarget:
    """The workload the step scales: its API group, plural resource and name."""

    group: str
    """API group (``apps``, ``leaderworkerset.x-k8s.io``)."""
    version: str
    """API version (``v1``)."""
    resource: str
    """Plural resource (``deployments``, ``statefulsets``, ``leaderworkersets``)."""
    name: str
    """The object's name."""

    def scale_path(self, namespace: str) -> str:
        """The ``scale`` subresource's path on the API server."""
        return f"/apis/{self.group}/{self.version}/namespaces/{namespace}/{self.resource}/{self.name}/scale"


def _next_minute(moment: datetime) -> datetime:
    whole = moment.replace(second=0, microsecond=0)
    return whole if whole == moment else whole + timedelta(minutes=1)


def block_end_plan(drain: DrainPlan, block: BlockEnd) -> BlockEndPlan:
    """The block-end drain of a run at ``block.now`` (see the module docstring)."""
    stop_at = drain.block_end_stop_at(block.ends_at)
    now, ends_at = utc(block.now), utc(block.ends_at)
    fires_at = None if now >= stop_at else max(stop_at, _next_minute(now + SCHEDULE_CREATE_MARGIN))
    return BlockEndPlan(stop_at=stop_at, fires_at=fires_at, scale_down_at=ends_at - EKS_SCALEDOWN_BEFORE_END, ends_at=ends_at)


def cron_schedule(moment: datetime) -> str:
    """``minute hour day month *``: a schedule that fires at ``moment`` (UTC) and next on the same date a year later."""
    at = utc(moment)
    if at.second or at.microsecond:
        raise UserError(f"block-end drain: {at.isoformat()} is not on a whole minute; a CronJob fires on minutes")
    return f"{at.minute} {at.hour} {at.day} {at.month} *"


def iso(moment: datetime) -> str:
    """``YYYY-MM-DDThh:mm:ssZ`` (UTC)."""
    return utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def step_labels(name: str, common: dict[str, str]) -> dict[str, str]:
    """Labels of the step's objects and pod: never the serving pods' (their PDB, Services and policies do not select it)."""
    return {**common, "app.kubernetes.io/name": "kimi-k3-block-end", "app.kubernetes.io/instance": name, "app.kubernetes.io/component": "block-end"}


def declare_block_end_drain(
    name: str,
    *,
    namespace: str,
    plan: BlockEndPlan,
    target: ScaleTarget,
    image: str,
    common: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> k8s.batch.v1.CronJob | None:
    """ServiceAccount, Role, RoleBinding, NetworkPolicy and the CronJob of the block-end drain (nothing past the stop time)."""
    if plan.fires_at is None:
        return None
    step = f"{name}-block-end"
    step_label = step_labels(name, common)
    meta = k8s.meta.v1.ObjectMetaArgs(name=step, namespace=namespace, labels=step_label)
    account = k8s.core.v1.ServiceAccount(f"{step}-service-account", metadata=meta, automount_service_account_token=False, opts=opts)
    role = k8s.rbac.v1.Role(
        f"{step}-role",
        metadata=meta,
        rules=[k8s.rbac.v1.PolicyRuleArgs(api_groups=[target.group], resources=[f"{target.resource}/scale"], resource_names=[target.name], verbs=["patch"])],
        opts=opts,
    )
    binding = k8s.rbac.v1.RoleBinding(
        f"{step}-role-binding",
        metadata=meta,
        role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="Role", name=step),
        subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=step, namespace=namespace)],
        opts=opts,
    )
    np = k8s.networking.v1
    k8s.networking.v1.NetworkPolicy(
        f"{step}-network-policy",
        metadata=meta,
        spec=np.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=step_label),
            policy_types=["Ingress", "Egress"],
            # The API server: its private endpoint's network interfaces in the VPC, or its public endpoint; HTTPS only.
            egress=[np.NetworkPolicyEgressRuleArgs(
                to=[np.NetworkPolicyPeerArgs(ip_block=np.IPBlockArgs(cidr="0.0.0.0/0", except_=["169.254.0.0/16"]))],
                ports=[np.NetworkPolicyPortArgs(port=443, protocol="TCP")],
            )],
        ),
        opts=opts,
    )
    fires_at = plan.fires_at
    deadline = max(60, math.floor((plan.scale_down_at - fires_at).total_seconds()))
    env = {
        "WORKLOAD": f"{target.resource}/{target.name}",
        "SCALE_PATH": target.scale_path(namespace),
        "NOT_BEFORE": str(int((fires_at - timedelta(minutes=10)).timestamp())),
        "NOT_AFTER": str(int(plan.ends_at.timestamp())),
    }
    resources = {"cpu": "100m", "memory": "32Mi"}
    pod = k8s.core.v1.PodSpecArgs(
        service_account_name=step,
        automount_service_account_token=True,
        enable_service_links=False,
        restart_policy="Never",
        node_selector=dict(labels.SYSTEM_NODE_LABELS),
        security_context=k8s.core.v1.PodSecurityContextArgs(
            run_as_non_root=True, run_as_user=RUN_AS_USER, run_as_group=RUN_AS_USER,
            seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
        ),
        containers=[k8s.core.v1.ContainerArgs(
            name="scale-to-zero",
            image=image,
            image_pull_policy="IfNotPresent",
            command=["/bin/sh", "-c", SCALE_SCRIPT],
            env=[k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in env.items()],
            resources=k8s.core.v1.ResourceRequirementsArgs(requests=resources, limits=resources),
            security_context=container_security_context(),
        )],
    )
    return k8s.batch.v1.CronJob(
        f"{step}-cron-job",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=step, namespace=namespace, labels=step_label,
            annotations={FIRES_AT_ANNOTATION: iso(fires_at), "checkov.io/skip1": IMAGE_CHECKOV_SKIP},
        ),
        spec=k8s.batch.v1.CronJobSpecArgs(
            schedule=cron_schedule(fires_at),
            time_zone=TIME_ZONE,
            # Runs if it can start before EKS's scale-down; after that there is nothing left to drain.
            starting_deadline_seconds=deadline,
            concurrency_policy="Forbid",
            successful_jobs_history_limit=1,
            failed_jobs_history_limit=2,
            job_template=k8s.batch.v1.JobTemplateSpecArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(labels=step_label),
                spec=k8s.batch.v1.JobSpecArgs(
                    backoff_limit=3,
                    active_deadline_seconds=600,
                    template=k8s.core.v1.PodTemplateSpecArgs(metadata=k8s.meta.v1.ObjectMetaArgs(labels=step_label), spec=pod),
                ),
            ),
        ),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[account, role, binding])),
    )


__all__ = [
    "FIRES_AT_ANNOTATION",
    "SCALE_SCRIPT",
    "SCHEDULE_CREATE_MARGIN",
    "TIME_ZONE",
    "BlockEnd",
    "BlockEndPlan",
    "ScaleTarget",
    "block_end_plan",
    "cron_schedule",
    "declare_block_end_drain",
]
