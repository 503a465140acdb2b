"""The one way a component is told which Kubernetes cluster to install into: a provider in its ``opts``.

Convention (every Kubernetes-touching component: ``GpuNodePlugins``,
``LoadBalancerController``, ``LwsController``, ``VllmServer``, ``VllmLeaderWorkerSet``,
``HyperPodInferenceEndpoint``, ``HyperPodCluster`` — which takes its ``aws-native``
provider the same way)::

    GpuNodePlugins("gpu-plugins", GpuNodePluginsArgs(),
                   opts=pulumi.ResourceOptions(providers={"kubernetes": cluster.provider}))

and every child is declared with ``parent=self`` only. This is Pulumi's own mechanism
(Pulumi docs, resource options ``providers``: "the map flows from the component to every
child via parent inheritance"; ``provider``: "a provider set on a component is inherited by
its child custom resources of the same package"), and the one the AWS provider already
takes into every component here (``Network``, ``Cluster``, ``CapacityBlockNodeGroup``,
and the Pod Identity roles inside ``LoadBalancerController`` and ``VllmServer``). An
explicit ``provider`` arg beside it would be a second convention, and a component with
AWS and Kubernetes children would take its two providers two different ways.

What Pulumi does not do is refuse: with no Kubernetes provider in ``opts`` or in a parent,
the children fall back to the default provider, which reads the ambient kubeconfig
(``KUBECONFIG``, ``~/.kube/config``, its current context) and installs into whatever cluster
that is. :func:`require_kubernetes_provider` refuses that before anything is declared.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi

from kimi_k3.errors import Problems

PACKAGE = "kubernetes"
"""Package name of the Kubernetes provider (``pulumi:providers:kubernetes``)."""

_ANY_KUBERNETES_TYPE = "kubernetes:core/v1:Namespace"
"""A type token of the package, to ask a parent which provider its Kubernetes children get."""


def kubernetes_provider(opts: pulumi.ResourceOptions | None) -> pulumi.ProviderResource | None:
    """The Kubernetes provider children of a component with ``opts`` will use, or ``None`` (the ambient one).

    Looked up as the Pulumi SDK does (``Resource._get_providers``): ``opts.provider`` when it
    is a Kubernetes provider, then ``opts.providers`` (a map by package or a list), then
    what ``opts.parent`` hands its children.
    """
    if opts is None:
        return None
    if opts.provider is not None and getattr(opts.provider, "package", None) == PACKAGE:
        return opts.provider
    providers = opts.providers
    if isinstance(providers, Mapping):
        found = providers.get(PACKAGE)
        if found is not None:
            return found
    elif providers:
        for provider in providers:
            if getattr(provider, "package", None) == PACKAGE:
                return provider
    if opts.parent is not None:
        return opts.parent.get_provider(_ANY_KUBERNETES_TYPE)
    return None


def require_kubernetes_provider(problems: Problems, opts: pulumi.ResourceOptions | None) -> None:
    """Add a problem to ``problems`` unless ``opts`` (or a parent) names the Kubernetes provider."""
    if kubernetes_provider(opts) is None:
        problems.add(
            "opts.providers",
            "opts.providers has no Kubernetes provider: pass opts=pulumi.ResourceOptions(providers={'kubernetes': provider}) "
            "(or a parent that has one); the component never installs into the cluster the ambient kubeconfig points at",
        )


__all__ = ["PACKAGE", "kubernetes_provider", "require_kubernetes_provider"]
