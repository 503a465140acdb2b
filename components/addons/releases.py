"""How a cluster controller's Helm chart is installed: the one place for the release options they share.

The AWS Load Balancer Controller and the LeaderWorkerSet controller are installed the same
way: into a namespace the stack declares itself (``create_namespace=False``), rolled back
when an install fails (``cleanup_on_fail``; Helm's ``--cleanup-on-fail``), and given ten
minutes to become ready (``timeout`` seconds, Helm's ``--timeout``; pulumi-kubernetes
``helm.v3.ReleaseArgs``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.core.formats import CHART_VERSION, DNS_LABEL
from kimi_k3.errors import Problems

CONTROLLER_TIMEOUT_S = 600
"""Seconds Helm waits for a controller release to become ready."""


def controller_release(
    resource_name: str,
    *,
    release_name: str,
    chart: str,
    version: str,
    namespace: pulumi.Input[str],
    values: dict[str, Any],
    opts: pulumi.ResourceOptions,
    repository: str | None = None,
) -> k8s.helm.v3.Release:
    """The Helm release of a controller chart (``repository``: the chart repository, when ``chart`` is not a full reference)."""
    return k8s.helm.v3.Release(
        resource_name,
        k8s.helm.v3.ReleaseArgs(
            name=release_name,
            chart=chart,
            version=version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=repository) if repository else None,
            namespace=namespace,
            create_namespace=False,
            values=values,
            cleanup_on_fail=True,
            timeout=CONTROLLER_TIMEOUT_S,
        ),
        opts=opts,
    )


RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
"""Namespaces a controller's own namespace may not be (the component declares, and a destroy deletes, it)."""


def check_release_args(problems: Problems, version: Any, namespace: Any, extra_values: Any, default_version: str) -> None:
    """The checks every controller release shares: a chart version without ``v``, a namespace of its own, values a mapping."""
    if not isinstance(version, str) or not CHART_VERSION.fullmatch(version) or version.startswith("v"):
        problems.reject("version", version, f"expected a chart version such as {default_version}")
    if not DNS_LABEL.fullmatch(namespace or "") or namespace in RESERVED_NAMESPACES:
        problems.reject("namespace", namespace, f"expected a DNS label other than {', '.join(RESERVED_NAMESPACES)}")
    if not isinstance(extra_values, Mapping):
        problems.reject("extra_values", extra_values, "must be a mapping of Helm values")


def controller_namespace(resource_name: str, namespace: str, opts: pulumi.ResourceOptions) -> k8s.core.v1.Namespace:
    """The namespace a controller's release goes into: Pod Security baseline enforced, restricted audited and warned
    (the controllers' charts set no seccomp profile, or run nothing that needs the host)."""
    return k8s.core.v1.Namespace(
        resource_name,
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=namespace,
            labels={
                "pod-security.kubernetes.io/enforce": "baseline",
                "pod-security.kubernetes.io/audit": "restricted",
                "pod-security.kubernetes.io/warn": "restricted",
                "app.kubernetes.io/part-of": "kimi-k3",
                "app.kubernetes.io/managed-by": "pulumi",
            },
        ),
        opts=opts,
    )


def register_release_outputs(component: Any, release: k8s.helm.v3.Release, namespace: str, version: str) -> None:
    """Set a controller component's ``namespace``, ``release_name`` and ``chart_version`` outputs and register them."""
    component.namespace = pulumi.Output.from_input(namespace)
    component.release_name = release.name.apply(lambda n: n or "")
    component.chart_version = pulumi.Output.from_input(version)
    component.register_outputs({"namespace": component.namespace, "releaseName": component.release_name, "chartVersion": component.chart_version})


__all__ = [
    "CONTROLLER_TIMEOUT_S", "RESERVED_NAMESPACES", "check_release_args", "controller_namespace", "controller_release",
    "register_release_outputs",
]
