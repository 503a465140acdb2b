"""Which Kubernetes versions a cluster and its node groups may run: the one home of the version rules.

Pure (no Pulumi): the settings layer (``clusterVersion``), :class:`kimi_k3.cluster.eks.Cluster` (``version``) and
:class:`kimi_k3.capacity.node_group.CapacityBlockNodeGroup` (``kubernetes_version``) all ask these functions, so a
stack file and one's own program are refused alike.

The skew rule is EKS's: a managed node group cannot run a newer Kubernetes minor than its cluster (EKS user guide,
"Update a managed node group for your cluster": the node group's version "can't be greater than the cluster's"), and
the kubelet may be at most three minors older than the API server (Kubernetes "Version Skew Policy",
kubernetes.io/releases/version-skew-policy, kubelet: "must not be newer than kube-apiserver, and may be up to three
minor versions older", since 1.28).
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

from kimi_k3.core import catalog

MAX_KUBELET_LAG = 3
"""Minor versions a node's kubelet may lag behind the API server (Kubernetes version skew policy, since 1.28)."""


def version_problem(version: str) -> str | None:
    """What is accepted instead of ``version`` as a cluster's (or node group's) Kubernetes version; ``None``: accepted."""
    if version in catalog.SUPPORTED_EKS_VERSIONS:
        return None
    return f"accepted: {', '.join(catalog.SUPPORTED_EKS_VERSIONS)} (the EKS versions this release is tested against)"


def _minor(version: str) -> int:
    return int(version.split(".")[1])


def skew_problem(node_version: str, cluster_version: str) -> str | None:
    """Why a node group of ``node_version`` cannot join a cluster of ``cluster_version``; ``None``: it can."""
    if version_problem(node_version) or version_problem(cluster_version):
        return None  # named by version_problem
    lag = _minor(cluster_version) - _minor(node_version)
    if lag < 0:
        return f"the cluster runs {cluster_version}: a node group cannot run a newer Kubernetes than its cluster (EKS refuses it); use {cluster_version}"
    if lag > MAX_KUBELET_LAG:
        return f"the cluster runs {cluster_version}: a kubelet may lag the API server by {MAX_KUBELET_LAG} minor versions at most (Kubernetes version skew policy)"
    return None


_DECLARED: dict[int, tuple[weakref.ReferenceType[Any], str]] = {}


def remember(cluster_name: Any, version: str) -> None:
    """Note that the cluster whose name is the object ``cluster_name`` (a ``Cluster``'s output) runs ``version``."""
    with contextlib.suppress(TypeError):  # a plain str cannot be referenced weakly: nothing to remember it by
        _DECLARED[id(cluster_name)] = (weakref.ref(cluster_name), version)


def declared_version(cluster_name: Any) -> str | None:
    """The version of the cluster declared in this program whose name is ``cluster_name``; ``None``: not one of them."""
    entry = _DECLARED.get(id(cluster_name))
    if entry is None or entry[0]() is not cluster_name:
        return None
    return entry[1]


__all__ = ["MAX_KUBELET_LAG", "declared_version", "remember", "skew_problem", "version_problem"]
