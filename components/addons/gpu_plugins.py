"""GPU node plugins from their official Helm charts: NVIDIA device plugin, EFA device plugin, DCGM exporter.

The AL2023 NVIDIA AMI ships the driver but not the device plugin, so without
:class:`GpuNodePlugins` no pod can request ``nvidia.com/gpu``. Each plugin is a
pinned Helm release (``kubernetes:helm.sh/v3:Release``) whose values, as recorded
in the plan, are exactly what gets installed: tolerate the GPU taint, run on GPU
nodes only, priority class ``system-node-critical``.

The EFA plugin's image is pulled from the EKS add-on registry of the cluster's own region
(the chart's default points at us-west-2's: :mod:`kimi_k3.addons.image_registries`), and
the DCGM exporter does not start a DCGM host engine of its own: it connects to the one the
EKS node monitoring agent already runs on every GPU node (its ``dcgm-server`` DaemonSet,
``nv-hostengine`` on hostPort 5555), whose GPU health checks drive EKS node auto repair.
One host engine per node: two would each hold the GPUs' profiling counters, and the
exporter's ``-r`` option exists for exactly this (the chart's values: 'Use "-r",
"<HOST>:<PORT>" … to connect to an already running hostengine').

The Kubernetes provider of the target cluster comes through ``opts`` (``providers=
{"kubernetes": provider}``) and reaches every child through ``parent=self``; without one
the component refuses, so the charts never land on whatever cluster the ambient
kubeconfig points at (:mod:`kimi_k3.cluster.kubernetes_provider`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.addons.helm_values import deep_merge
from kimi_k3.addons.image_registries import registry_for
from kimi_k3.cluster.kubernetes_provider import require_kubernetes_provider
from kimi_k3.core import catalog, labels
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.core.formats import CHART_VERSION, DNS_LABEL
from kimi_k3.errors import Problems

PRIORITY_CLASS = "system-node-critical"
"""Priority class of every plugin: a GPU node without its device plugins is useless."""

DEFAULT_NAMESPACE = "gpu-plugins"

PRIVILEGED_NAMESPACE_LABELS: Mapping[str, str] = {
    "pod-security.kubernetes.io/enforce": "privileged",
    "pod-security.kubernetes.io/audit": "privileged",
    "pod-security.kubernetes.io/warn": "privileged",
}
"""Pod Security labels: the device plugins mount host paths and run privileged (EFA), DCGM needs SYS_ADMIN."""

_RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
EFA_MIN_VERSION = (0, 5, 10)
"""EFA device plugin releases before 0.5.10 misdetect NVLink devices on p6 instances."""

EFA_IMAGE_PATH = "eks/aws-efa-k8s-device-plugin"
"""The EFA plugin's repository inside an EKS add-on registry (the chart's ``image.repository`` after the host)."""

NODE_MONITORING_AGENT_DCGM_PORT = 5555
"""Port of the EKS node monitoring agent's ``nv-hostengine`` on each GPU node (its chart's ``dcgm-server``
DaemonSet: ``nv-hostengine -n -b ALL``, containerPort and hostPort 5555)."""


@checked_args
@dataclass(frozen=True)
class NvidiaDevicePluginArgs:
    """The NVIDIA device plugin release (advertises ``nvidia.com/gpu`` on each GPU node)."""

    enabled: bool = True
    """Install the chart. Turn off only if something else (e.g. the GPU Operator) provides the plugin."""
    version: str = catalog.NVIDIA_DEVICE_PLUGIN_CHART.version
    """Chart version of ``nvidia-device-plugin``."""
    extra_values: Mapping[str, Any] = field(default_factory=dict)
    """Helm values deep-merged over ours (yours win; lists are replaced, not appended)."""


@checked_args
@dataclass(frozen=True)
class EfaDevicePluginArgs:
    """The AWS EFA device plugin release (advertises ``vpc.amazonaws.com/efa``)."""

    enabled: bool = False
    """Install the chart. Needed only when one model replica spans several nodes."""
    region: str | None = None
    """Region of the cluster: the image is pulled from that region's EKS add-on registry. ``None`` keeps the
    chart's default image (us-west-2's registry), which nodes elsewhere pull across regions through the NAT."""
    version: str = catalog.EFA_DEVICE_PLUGIN_CHART.version
    """Chart version of ``aws-efa-k8s-device-plugin``, 0.5.10 or newer (``0.5.30`` and ``v0.5.30`` are the same)."""
    extra_values: Mapping[str, Any] = field(default_factory=dict)
    """Helm values deep-merged over ours (yours win; lists are replaced, not appended)."""


@checked_args
@dataclass(frozen=True)
class DcgmExporterArgs:
    """The NVIDIA DCGM exporter release: GPU utilisation, memory, XID errors as Prometheus metrics."""

    enabled: bool = True
    """Install the chart."""
    version: str = catalog.DCGM_EXPORTER_CHART.version
    """Chart version of ``dcgm-exporter``."""
    service_monitor: bool = False
    """Create a Prometheus Operator ``ServiceMonitor``. Needs the CRD in the cluster, else the install fails."""
    host_engine_port: int | None = NODE_MONITORING_AGENT_DCGM_PORT
    """Port of the DCGM host engine already running on each node (the EKS node monitoring agent's, reached at the
    node's IP); the exporter connects to it (``-r``) instead of embedding its own. ``None``: the exporter starts its
    own host engine (a cluster without the node monitoring agent)."""
    extra_values: Mapping[str, Any] = field(default_factory=dict)
    """Helm values deep-merged over ours (yours win; lists are replaced, not appended)."""
    depends_on: Sequence[pulumi.Resource] = ()
    """What the release waits for: with ``service_monitor``, whatever installs the ServiceMonitor CRD (the Prometheus
    Operator's release), so the chart's ServiceMonitor is not applied before its kind is served."""


@checked_args
@dataclass(frozen=True)
class GpuNodePluginsArgs:
    """Which plugins to install (the cluster comes from ``opts``: :mod:`kimi_k3.cluster.kubernetes_provider`)."""

    namespace: str = DEFAULT_NAMESPACE
    """Namespace of the releases."""
    create_namespace: bool = True
    """Declare the namespace (with privileged Pod Security labels). Set False to use an existing one."""
    node_selector: Mapping[str, str] = field(default_factory=lambda: dict(labels.GPU_PRESENT_SELECTOR))
    """Node labels every plugin requires: every GPU node (:data:`kimi_k3.core.labels.GPU_PRESENT_SELECTOR`)."""
    nvidia: NvidiaDevicePluginArgs = field(default_factory=NvidiaDevicePluginArgs)
    """NVIDIA device plugin settings."""
    efa: EfaDevicePluginArgs = field(default_factory=EfaDevicePluginArgs)
    """EFA device plugin settings."""
    dcgm: DcgmExporterArgs = field(default_factory=DcgmExporterArgs)
    """DCGM exporter settings."""


def validate(args: GpuNodePluginsArgs, name: str = "gpu-plugins", opts: pulumi.ResourceOptions | None = None) -> None:
    """Raise :class:`~kimi_k3.errors.ComponentInputError` for arguments (or options) that cannot produce a working install."""
    problems = Problems("GpuNodePlugins", name)
    require_kubernetes_provider(problems, opts)
    if not DNS_LABEL.fullmatch(args.namespace or ""):
        problems.reject("namespace", args.namespace, "not a valid Kubernetes namespace name: expected a DNS label")
    elif args.create_namespace and args.namespace in _RESERVED_NAMESPACES:
        problems.reject("namespace", args.namespace, "it always exists, so the component cannot declare it; set create_namespace=False")
    if not args.node_selector:
        problems.add("node_selector", "node_selector is empty: the plugins would run on every node, not only GPU nodes")
    plugins = (("nvidia", args.nvidia, None), ("efa", args.efa, EFA_MIN_VERSION), ("dcgm", args.dcgm, None))
    for field_name, sub, minimum in plugins:
        if not isinstance(sub.extra_values, Mapping):
            problems.reject(f"{field_name}.extra_values", sub.extra_values, "must be a mapping of Helm values")
        if not sub.enabled:
            continue
        match = CHART_VERSION.fullmatch(sub.version or "")
        if not match:
            problems.reject(f"{field_name}.version", sub.version, "expected a chart version such as 1.2.3")
        elif minimum and tuple(int(part) for part in match.groups()) < minimum:
            problems.reject(
                f"{field_name}.version", sub.version,
                f"{'.'.join(map(str, minimum))} or newer is required (older releases misdetect NVLink devices on p6 instances)",
            )
    if args.efa.enabled and args.efa.region is not None and registry_for(args.efa.region) is None:
        problems.reject("efa.region", args.efa.region, "a region the EKS user guide lists an add-on image registry for (add-ons-images)")
    port = args.dcgm.host_engine_port
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535):
        problems.reject("dcgm.host_engine_port", port, "a TCP port (1-65535) or None")
    problems.raise_any()


def efa_chart_version(version: str) -> str:
    """The EFA chart's own spelling of a version: ``aws/eks-charts`` publishes it as ``v0.5.30``."""
    return "v" + version.lstrip("v")


def nvidia_values(args: GpuNodePluginsArgs) -> dict[str, Any]:
    """Values of ``nvidia-device-plugin``: ours, then the user's ``extra_values`` over them."""
    ours = {
        # The chart's default affinity requires NFD labels (feature.node.kubernetes.io/pci-10de.present)
        # that EKS nodes never get without NFD. We replace it with one required term on our GPU node
        # labels instead of enabling gfd (which would deploy NFD master and workers cluster-wide).
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(args.node_selector.items())]}
                    ]
                }
            }
        },
        "tolerations": [dict(labels.GPU_TOLERATION)],
        "priorityClassName": PRIORITY_CLASS,
    }
    return deep_merge(ours, args.nvidia.extra_values)


def efa_values(args: GpuNodePluginsArgs) -> dict[str, Any]:
    """Values of ``aws-efa-k8s-device-plugin`` (its template already sets ``system-node-critical``
    and an affinity on EFA-capable instance types; p6-b300 is in the chart's list), with the image
    from the region's EKS add-on registry when ``efa.region`` is given."""
    ours: dict[str, Any] = {"tolerations": [dict(labels.GPU_TOLERATION)], "nodeSelector": dict(args.node_selector)}
    registry = registry_for(args.efa.region) if args.efa.region else None
    if registry:
        ours["image"] = {"repository": f"{registry}/{EFA_IMAGE_PATH}"}
    return deep_merge(ours, args.efa.extra_values)


def dcgm_values(args: GpuNodePluginsArgs) -> dict[str, Any]:
    """Values of ``dcgm-exporter``: GPU nodes only, GPU taint tolerated, ServiceMonitor per argument, and the
    node's existing DCGM host engine (``-r $(NODE_IP):5555``) unless ``host_engine_port`` is ``None``."""
    ours: dict[str, Any] = {
        "nodeSelector": dict(args.node_selector),
        "tolerations": [dict(labels.GPU_TOLERATION)],
        "priorityClassName": PRIORITY_CLASS,
        "serviceMonitor": {"enabled": args.dcgm.service_monitor},
    }
    if args.dcgm.host_engine_port is not None:
        # The node's own IP (downward API), expanded by the kubelet in the argument: the agent's
        # host engine listens on the node (hostPort), the exporter runs on the pod network.
        ours["extraEnv"] = [{"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}]
        ours["arguments"] = ["-r", f"$(NODE_IP):{args.dcgm.host_engine_port}"]
    return deep_merge(ours, args.dcgm.extra_values)


@checked_component
class GpuNodePlugins(pulumi.ComponentResource):
    """NVIDIA device plugin, EFA device plugin and DCGM exporter on the GPU nodes, from pinned Helm charts.

    Attributes (``None`` when the plugin or the namespace is turned off):
    ``namespace`` (the declared ``Namespace``), ``namespace_name`` (``Output[str]``),
    ``nvidia_device_plugin``, ``efa_device_plugin``, ``dcgm_exporter`` (``helm.v3.Release``).
    """

    namespace: k8s.core.v1.Namespace | None
    namespace_name: pulumi.Output[str]
    nvidia_device_plugin: k8s.helm.v3.Release | None
    efa_device_plugin: k8s.helm.v3.Release | None
    dcgm_exporter: k8s.helm.v3.Release | None

    def __init__(self, name: str, args: GpuNodePluginsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate ``args``, then declare the namespace and one Helm release per enabled plugin.

        :param name: base name of the child resources.
        :param args: plugin switches, versions and extra values.
        :param opts: options of the component; ``providers`` must hold the target cluster's Kubernetes provider.
        """
        validate(args, name, opts)
        super().__init__("kimi-k3:index:GpuNodePlugins", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        self.namespace = None
        namespace: pulumi.Input[str] = args.namespace
        if args.create_namespace:
            self.namespace = k8s.core.v1.Namespace(
                f"{name}-namespace",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=args.namespace, labels=dict(PRIVILEGED_NAMESPACE_LABELS)),
                opts=child,
            )
            namespace = self.namespace.metadata.apply(lambda m: str(m.name))
        self.namespace_name = pulumi.Output.from_input(namespace)

        def release(
            suffix: str, chart: catalog.HelmChart, version: str, values: dict[str, Any], depends_on: Sequence[pulumi.Resource] = (),
        ) -> k8s.helm.v3.Release:
            return k8s.helm.v3.Release(
                f"{name}-{suffix}",
                k8s.helm.v3.ReleaseArgs(
                    name=chart.name,
                    chart=chart.name,
                    version=version,
                    repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository),
                    namespace=namespace,
                    create_namespace=False,
                    values=values,
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(depends_on)) if depends_on else child,
            )

        self.nvidia_device_plugin = (
            release("nvidia-device-plugin", catalog.NVIDIA_DEVICE_PLUGIN_CHART, args.nvidia.version.lstrip("v"), nvidia_values(args))
            if args.nvidia.enabled
            else None
        )
        self.efa_device_plugin = (
            release("efa-device-plugin", catalog.EFA_DEVICE_PLUGIN_CHART, efa_chart_version(args.efa.version), efa_values(args))
            if args.efa.enabled
            else None
        )
        self.dcgm_exporter = (
            release("dcgm-exporter", catalog.DCGM_EXPORTER_CHART, args.dcgm.version.lstrip("v"), dcgm_values(args), args.dcgm.depends_on)
            if args.dcgm.enabled
            else None
        )

        releases = {
            "nvidiaDevicePlugin": self.nvidia_device_plugin,
            "efaDevicePlugin": self.efa_device_plugin,
            "dcgmExporter": self.dcgm_exporter,
        }
        self.register_outputs(
            {"namespace": self.namespace_name, **{key: r.name for key, r in releases.items() if r is not None}}
        )


__all__ = [
    "EFA_IMAGE_PATH",
    "NODE_MONITORING_AGENT_DCGM_PORT",
    "DcgmExporterArgs",
    "EfaDevicePluginArgs",
    "GpuNodePlugins",
    "GpuNodePluginsArgs",
    "NvidiaDevicePluginArgs",
    "dcgm_values",
    "efa_chart_version",
    "efa_values",
    "nvidia_values",
]
