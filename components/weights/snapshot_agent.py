"""The engine snapshot agent: a privileged DaemonSet on the GPU nodes that runs CRIU for the serving pods (docs/weights.md).

Dynamo Snapshot's design (docs.nvidia.com/dynamo, "Snapshotting GPU Workers": "The snapshot-agent DaemonSet
runs in privileged mode to perform CRIU operations"): CRIU needs the host's PID namespace to find and
freeze the engine's process tree and to enter the placeholder container's namespaces on a restore, and
``CAP_SYS_ADMIN`` and more, which only a privileged container gets. What runs is
:mod:`kimi_k3.weights.snapshot_agent_loop` from the pod-side modules' ConfigMap; the image brings CRIU >= 4.0
with its CUDA plugin, NVIDIA's ``cuda-checkpoint`` and ``python3`` (:data:`IMAGE_NEEDS`). The agent talks to
no API server: its ServiceAccount mounts no token and is bound to no role.

Its only host mount is the snapshot root on the node-local NVMe (:data:`HOST_SNAPSHOT_ROOT`), a directory of
the node-local weights volume the serving pods claim (they mount it as ``subPath``
:data:`SNAPSHOT_SUBPATH`, Pod Security ``restricted`` kept there).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.addons.gpu_plugins import PRIVILEGED_NAMESPACE_LABELS
from kimi_k3.cluster.kubernetes_provider import require_kubernetes_provider
from kimi_k3.core import labels
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.errors import Problems
from kimi_k3.weights import node_local, pod_files

NAMESPACE = "kimi-engine-snapshot"
"""Namespace of the agent (Pod Security ``privileged``: the one workload that needs it, kept apart from the serving pods)."""
NAME = "engine-snapshot-agent"
"""Name of the DaemonSet, its ServiceAccount and its code ConfigMap."""
SNAPSHOT_SUBPATH = ".engine-snapshots"
"""Directory of the node-local weights volume holding the snapshots (a dot name: the revision prune never touches it)."""
HOST_SNAPSHOT_ROOT = f"{node_local.WEIGHTS_MOUNT}/{SNAPSHOT_SUBPATH}"
"""The snapshot root on the host: the weights volume's directory (:data:`kimi_k3.weights.node_local.WEIGHTS_MOUNT`)."""
MOUNT_PATH = "/snapshots"
"""Where the agent and the serving pods mount the snapshot root."""
IMAGE_NEEDS = "CRIU >= 4.0 with its CUDA plugin, NVIDIA cuda-checkpoint, nsenter (util-linux) and python3"
"""What the agent's image must carry (engine_snapshot.REQUIREMENTS)."""
RESOURCES = {"cpu": "2", "memory": "2Gi"}
"""Requests of the agent (CRIU's own memory; the dump's pages stream to disk). Limits: memory only, a dump's CPU burst is short."""

CHECKOV_SKIPS = {
    "checkov.io/skip1": "CKV_K8S_16=CRIU dumps and restores the engine's process tree (ptrace, namespaces, CAP_SYS_ADMIN): Dynamo Snapshot's agent runs privileged for it",
    "checkov.io/skip2": "CKV_K8S_17=CRIU finds the engine's processes and enters the placeholder's namespaces through the host's PID namespace",
    "checkov.io/skip3": "CKV_K8S_20=a privileged container escalates by definition (CRIU needs it)",
    "checkov.io/skip4": "CKV_K8S_23=CRIU runs as root on the node (it restores processes of other users)",
    "checkov.io/skip5": "CKV_K8S_37=privileged holds every capability; dropping them would break CRIU",
    "checkov.io/skip6": "CKV_K8S_40=CRIU runs as root (UID 0)",
    "checkov.io/skip7": "CKV_K8S_8=the agent serves no port; its loop answers request files, which a liveness probe cannot check",
    "checkov.io/skip8": "CKV_K8S_9=the agent receives no traffic, so readiness means nothing for it",
    "checkov.io/skip9": "CKV_K8S_11=a dump's CPU is a short burst on a node whose CPUs the engine holds by request; memory is limited",
    "checkov.io/skip10": "CKV_K8S_28=privileged holds every capability, NET_RAW included (CRIU restores sockets)",
    "checkov.io/skip11": "CKV_K8S_39=CRIU needs CAP_SYS_ADMIN (namespaces, mounts of the restored tree)",
    "checkov.io/skip12": "CKV_K8S_31=CRIU's ptrace and namespace calls need an unconfined seccomp profile (privileged)",
}
"""Reasoned checkov skips of the agent's DaemonSet (a privileged, hostPID, root workload by design)."""


@checked_args
@dataclass(frozen=True)
class SnapshotAgentArgs:
    """Inputs of :class:`SnapshotAgent`."""

    image: str
    """The agent's image (:data:`IMAGE_NEEDS`), pinned by digest in prod (``repo@sha256:<64 hex>``)."""
    instance_type: str
    """GPU instance type of the nodes it runs on (a node selector beside the GPU node label)."""
    gpus: int
    """GPUs an engine holds (its tensor-parallel size): the driver floor of a multi-GPU snapshot applies from 2."""
    allow_floating_tag: bool = False
    """Accept an image pinned by tag (outside prod)."""


@checked_component
class SnapshotAgent(pulumi.ComponentResource):
    """The agent's Namespace (privileged), ServiceAccount (no token, no role), code ConfigMap, a deny-all NetworkPolicy and DaemonSet. Kubernetes provider through ``opts``.

    Attributes: ``namespace``, ``service_account``, ``config_map``, ``network_policy`` (deny all), ``daemonset``.
    """

    def __init__(self, name: str, args: SnapshotAgentArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Declare the agent: ``name`` prefixes every child's name, ``args`` as on :class:`SnapshotAgentArgs`, ``opts`` the usual resource options."""
        problems = Problems("SnapshotAgent", name)
        require_kubernetes_provider(problems, opts)
        if "@sha256:" not in args.image and not args.allow_floating_tag:
            problems.add("image", f"image {args.image!r} is not accepted; expected repo@sha256:<64 hex> (the image CRIU restores with must not move), or allow_floating_tag outside prod")
        elif "@sha256:" not in args.image and ":" not in args.image.rsplit("/", 1)[-1]:
            problems.add("image", f"image {args.image!r} is not accepted; expected repo:tag or repo@sha256:<64 hex>")
        problems.raise_any()
        super().__init__("kimi-k3:index:SnapshotAgent", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        part_of = {"app.kubernetes.io/part-of": "kimi-k3"}
        self.namespace = k8s.core.v1.Namespace(f"{name}-namespace", metadata=k8s.meta.v1.ObjectMetaArgs(name=NAMESPACE, labels={**part_of, **PRIVILEGED_NAMESPACE_LABELS}), opts=child)
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace])
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-sa", metadata=k8s.meta.v1.ObjectMetaArgs(name=NAME, namespace=NAMESPACE, labels=part_of), automount_service_account_token=False, opts=in_ns,
        )
        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-code", metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{NAME}-code", namespace=NAMESPACE, labels=part_of), data=pod_files.config_map_data(), opts=in_ns,
        )
        self.network_policy = k8s.networking.v1.NetworkPolicy(  # the agent talks to nobody: its protocol is files on the node
            f"{name}-deny-all", metadata=k8s.meta.v1.ObjectMetaArgs(name="default-deny", namespace=NAMESPACE, labels=part_of),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs(), policy_types=["Ingress", "Egress"]), opts=in_ns,
        )
        pod_labels = {"app.kubernetes.io/name": NAME, **part_of}
        self.daemonset = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=NAME, namespace=NAMESPACE, labels=pod_labels, annotations={"pulumi.com/skipAwait": "true", **CHECKOV_SKIPS}),
            spec=daemonset_spec(args, pod_labels),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.service_account, self.config_map]),
        )
        self.register_outputs({})


def daemonset_spec(args: SnapshotAgentArgs, pod_labels: dict[str, str]) -> k8s.apps.v1.DaemonSetSpecArgs:
    """The agent's DaemonSet: privileged, ``hostPID``, the snapshot root from the host, ``podmain snapshot-agent``."""
    toleration = labels.GPU_TOLERATION
    pull = "IfNotPresent" if "@sha256:" in args.image else "Always"
    return k8s.apps.v1.DaemonSetSpecArgs(
        selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(pod_labels)),
        update_strategy=k8s.apps.v1.DaemonSetUpdateStrategyArgs(type="RollingUpdate", rolling_update=k8s.apps.v1.RollingUpdateDaemonSetArgs(max_unavailable="100%")),
        template=k8s.core.v1.PodTemplateSpecArgs(
            metadata=k8s.meta.v1.ObjectMetaArgs(labels=dict(pod_labels), annotations={"kimi-k3/code-hash": pod_files.content_hash()}),
            spec=k8s.core.v1.PodSpecArgs(
                service_account_name=NAME,
                automount_service_account_token=False,
                enable_service_links=False,
                host_pid=True,
                security_context=k8s.core.v1.PodSecurityContextArgs(run_as_user=0, run_as_group=0, run_as_non_root=False),
                node_selector={**labels.GPU_NODE_SELECTOR, labels.INSTANCE_TYPE_LABEL: args.instance_type},
                tolerations=[k8s.core.v1.TolerationArgs(key=toleration["key"], operator=toleration["operator"], effect=toleration["effect"])],
                priority_class_name="system-node-critical",
                termination_grace_period_seconds=30,
                containers=[k8s.core.v1.ContainerArgs(
                    name="agent",
                    image=args.image,
                    image_pull_policy=pull,
                    command=["python3", "-m", "kimi_k3.weights.podmain", "snapshot-agent"],
                    env=[k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in {**pod_files.POD_ENV, "SNAPSHOT_ROOT": MOUNT_PATH, "SNAPSHOT_GPUS": str(args.gpus)}.items()],
                    resources=k8s.core.v1.ResourceRequirementsArgs(requests=dict(RESOURCES), limits={"memory": RESOURCES["memory"]}),
                    security_context=k8s.core.v1.SecurityContextArgs(privileged=True, read_only_root_filesystem=True),
                    volume_mounts=[
                        k8s.core.v1.VolumeMountArgs(name="snapshots", mount_path=MOUNT_PATH),
                        k8s.core.v1.VolumeMountArgs(name="code", mount_path=pod_files.MOUNT_PATH, read_only=True),
                        k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp"),
                    ],
                )],
                volumes=[
                    k8s.core.v1.VolumeArgs(name="snapshots", host_path=k8s.core.v1.HostPathVolumeSourceArgs(path=HOST_SNAPSHOT_ROOT, type="DirectoryOrCreate")),
                    pod_files.volume("code", f"{NAME}-code"),
                    k8s.core.v1.VolumeArgs(name="tmp", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="1Gi")),
                ],
            ),
        ),
    )


__all__ = [
    "CHECKOV_SKIPS",
    "HOST_SNAPSHOT_ROOT",
    "IMAGE_NEEDS",
    "MOUNT_PATH",
    "NAME",
    "NAMESPACE",
    "RESOURCES",
    "SNAPSHOT_SUBPATH",
    "SnapshotAgent",
    "SnapshotAgentArgs",
    "daemonset_spec",
]
