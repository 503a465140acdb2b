"""How a cluster controller's Helm chart is installed: the one place for the release options they share.

The AWS Load Balancer Controller and the LeaderWorkerSet controller are installed the same
way: into a namespace the stack declares itself (``create_namespace=False``), rolled back
when an install fails (``cleanup_on_fail``; Helm's ``--cleanup-on-fail``), and given ten
minutes to become ready (``timeout`` seconds, Helm's ``--timeout``; pulumi-kubernetes
``helm.v3.ReleaseArgs``).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

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


__all__ = ["CONTROLLER_TIMEOUT_S", "controller_release"]
