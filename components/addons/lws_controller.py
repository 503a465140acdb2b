"""``LwsController``: the LeaderWorkerSet controller from its official Helm chart.

Installs the pinned chart ``oci://registry.k8s.io/lws/charts/lws`` (CRD
``leaderworkersets.leaderworkerset.x-k8s.io``, controller manager, webhooks) as a
``kubernetes:helm.sh/v3:Release`` on the system nodes. ``helm.v3.Release`` takes an
OCI chart as the full ``oci://…/lws`` reference in ``chart`` plus ``version`` (no
``repositoryOpts``).

The controller image is pinned to the chart's own release (``v<version>``) with
``IfNotPresent``: the chart's values default to ``tag: main`` / ``Always`` in the
source tree. Two replicas (the manager runs with ``--leader-elect``): its webhook sits
on the creation path of every LeaderWorkerSet pod, so one evicted controller pod must
not stop a group from being recreated.

Helm installs the CRD from the chart's ``crds/`` only on first install; a chart
upgrade that changes the CRD needs the CRD applied by hand (or the chart's own
upgrade hook), as for any Helm-managed CRD.

Kubernetes provider: through ``opts`` (``providers={"kubernetes": provider}``), inherited by
every child; refused without one (:mod:`kimi_k3.cluster.kubernetes_provider`).
Make :class:`~kimi_k3.serving.lws.VllmLeaderWorkerSet` depend on this component.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi

from kimi_k3.addons.helm_values import deep_merge
from kimi_k3.addons.releases import check_release_args, controller_namespace, controller_release, register_release_outputs
from kimi_k3.cluster.kubernetes_provider import require_kubernetes_provider
from kimi_k3.core import catalog, labels
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.errors import Problems

CHART, REPOSITORY, DEFAULT_VERSION = catalog.LWS_CHART.name, catalog.LWS_CHART.repository, catalog.LWS_CHART.version
CHART_REF = f"{REPOSITORY}/{CHART}"
"""Full OCI reference of the chart, as ``helm.v3.Release`` wants it in ``chart``."""
IMAGE_REPOSITORY = "registry.k8s.io/lws/lws"
"""Controller image (the chart's default repository)."""
DEFAULT_NAMESPACE = "lws-system"
RELEASE_NAME = "lws"
PRIORITY_CLASS = "system-cluster-critical"
"""The controller's webhook admits every LeaderWorkerSet pod: keep it scheduled ahead of workloads."""



@checked_args
@dataclass(frozen=True)
class LwsControllerArgs:
    """Inputs of :class:`LwsController` (the cluster comes from ``opts``)."""

    version: str = DEFAULT_VERSION
    """Chart version (``0.10.0``); the controller image ``v<version>`` is pinned with it."""
    namespace: str = DEFAULT_NAMESPACE
    """Namespace of the release (declared by the component)."""
    replicas: int = 2
    """Controller manager replicas (leader-elected)."""
    node_selector: Mapping[str, str] = field(default_factory=lambda: dict(labels.SYSTEM_NODE_LABELS))
    """Where the controller runs: the CPU system nodes."""
    extra_values: Mapping[str, Any] = field(default_factory=dict)
    """Helm values deep-merged over ours (yours win; lists are replaced, not appended)."""


def controller_values(args: LwsControllerArgs) -> dict[str, Any]:
    """Helm values of the release (every key exists in the chart's ``values.yaml``)."""
    ours = {
        "replicaCount": args.replicas,
        "image": {"manager": {"repository": IMAGE_REPOSITORY, "tag": f"v{args.version}", "pullPolicy": "IfNotPresent"}},
        "nodeSelector": dict(args.node_selector),
        "priorityClassName": PRIORITY_CLASS,
    }
    return deep_merge(ours, dict(args.extra_values))


def validate(args: LwsControllerArgs, name: str = "lws", opts: pulumi.ResourceOptions | None = None) -> None:
    """Raise :class:`~kimi_k3.errors.ComponentInputError` for arguments (or options) that cannot produce a working install."""
    problems = Problems("LwsController", name)
    require_kubernetes_provider(problems, opts)
    check_release_args(problems, args.version, args.namespace, args.extra_values, DEFAULT_VERSION)
    if isinstance(args.replicas, bool) or not isinstance(args.replicas, int) or not 1 <= args.replicas <= 5:
        problems.reject("replicas", args.replicas, "expected 1 to 5")
    if not args.node_selector:
        problems.add("node_selector", "node_selector is empty: the controller would land on GPU nodes too")
    problems.raise_any()


@checked_component
class LwsController(pulumi.ComponentResource):
    """The LeaderWorkerSet controller (CRD + manager + webhooks), pinned, on the system nodes.

    Attributes: ``release`` (depend on it), ``values``; outputs ``namespace``,
    ``release_name``, ``chart_version``.
    """

    namespace: pulumi.Output[str]
    release_name: pulumi.Output[str]
    chart_version: pulumi.Output[str]

    def __init__(self, name: str, args: LwsControllerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate, then declare the namespace and the Helm release: ``name`` prefixes every child's name, ``args`` as on
        ``LwsControllerArgs``, ``opts`` the usual resource options (parent; providers, which must name the Kubernetes provider)."""
        validate(args, name, opts)
        super().__init__("kimi-k3:index:LwsController", name, None, opts)
        self.values = controller_values(args)
        k8s_opts = pulumi.ResourceOptions(parent=self)
        self.namespace_resource = controller_namespace(f"{name}-namespace", args.namespace, k8s_opts)
        self.release = controller_release(
            f"{name}-release",
            release_name=RELEASE_NAME,
            chart=CHART_REF,
            version=args.version,
            namespace=args.namespace,
            values=self.values,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.namespace_resource]),
        )
        register_release_outputs(self, self.release, args.namespace, args.version)


__all__ = ["CHART_REF", "LwsController", "LwsControllerArgs", "controller_values"]
