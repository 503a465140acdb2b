"""``VllmServer``: Kimi K3 on vLLM as a Deployment, one pod per Capacity Block GPU node.

Around the Deployment it declares what every serving component declares (namespace,
ServiceAccount, Pod Identity role, Secrets, Service, NetworkPolicies, PDB, scraping:
:mod:`kimi_k3.serving.base`); the pod comes from the pod kit
(:mod:`kimi_k3.serving.pod_kit`): init containers stage and verify the weights on
the node's NVMe, then ``vllm serve`` starts with the contract's arguments on loopback, behind
the API proxy sidecar (:mod:`kimi_k3.serving.api_pod`). A Capacity Block has no spare GPU
node for a surge, so replicas roll one at a time (:func:`rollout_strategy`).

For a contract whose replica spans several nodes use
:class:`~kimi_k3.serving.lws.VllmLeaderWorkerSet`.

Kubernetes provider: ``opts=pulumi.ResourceOptions(providers={"kubernetes": k8s_provider})``;
the Kubernetes children inherit it, and the component refuses to run without one
(:mod:`kimi_k3.cluster.kubernetes_provider`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.cluster.kubernetes_provider import require_kubernetes_provider
from kimi_k3.core import labels
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.errors import Problems
from kimi_k3.serving import api_pod, api_proxy, peer_weights
from kimi_k3.serving.args import VllmServingArgs
from kimi_k3.serving.base import PDB_MAX_UNAVAILABLE, SECRET_ENV_SKIP, Foundation, VllmServingBase, checkov_skips, scrape_annotations
from kimi_k3.serving.block_end import ScaleTarget
from kimi_k3.serving.validation import validate_serving_args
from kimi_k3.weights import node_local, peer_transfer, pod_files
from kimi_k3.weights.serving_pod import WARMUP_CHECKOV_SKIPS


def rollout_strategy(replicas: int) -> k8s.apps.v1.DeploymentStrategyArgs:
    """How a pod-template change rolls out on Capacity Block nodes (no spare GPU node, so never a surge).

    * one replica: ``Recreate`` (the new pod can only schedule on the node the old one frees);
    * two or more: ``RollingUpdate`` with ``maxSurge: 0, maxUnavailable: 1``: one replica at a time
      goes, the others keep serving. ``Recreate`` would take every replica down at once: zero tokens
      on every paid node until the slowest reload ends. The PodDisruptionBudget allows the same one
      pod (:data:`kimi_k3.serving.base.PDB_MAX_UNAVAILABLE`), so a node drain and a rollout never take more.
    """
    if replicas < 2:
        return k8s.apps.v1.DeploymentStrategyArgs(type="Recreate")
    return k8s.apps.v1.DeploymentStrategyArgs(
        type="RollingUpdate",
        rolling_update=k8s.apps.v1.RollingUpdateDeploymentArgs(max_surge=0, max_unavailable=PDB_MAX_UNAVAILABLE),
    )


@checked_args(secrets=("api_key", "hugging_face_token"))
@dataclass(frozen=True)
class VllmServerArgs(VllmServingArgs):
    """Inputs of :class:`VllmServer` (single-node replicas; see :class:`~kimi_k3.serving.args.VllmServingArgs` for every field)."""


@checked_component
class VllmServer(VllmServingBase):
    """Kimi K3 behind vLLM's OpenAI-compatible API on the Capacity Block GPU nodes, one pod per replica.

    For a contract whose replica spans several nodes use
    :class:`~kimi_k3.serving.lws.VllmLeaderWorkerSet`.

    Outputs: ``endpoint_url`` (``…/v1``), ``served_model_name``, ``image``,
    ``model_revision``, ``namespace``, ``service_name``.
    """

    def __init__(self, name: str, args: VllmServerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate, then declare the server's workload and its front: ``name`` prefixes every child's name, ``args`` as on
        ``VllmServerArgs``, ``opts`` the usual resource options (parent; providers, which must name the Kubernetes provider)."""
        problems = _problems(name, args)
        require_kubernetes_provider(problems, opts)
        problems.raise_any()
        super().__init__("kimi-k3:index:VllmServer", name, None, opts)
        self.args = args
        foundation = self._declare_foundation(name, args)
        kit, selector = foundation.kit, foundation.selector
        pod_labels = {**foundation.common, **selector, "app.kubernetes.io/component": "server", labels.MODEL_LABEL: labels.MODEL}
        self.peers_service: k8s.core.v1.Service | None = None
        self.key_peers_service: k8s.core.v1.Service | None = None
        if kit.peer_transfer or kit.snapshot_election:  # the one peer key label: same image, revision, engine args and env
            pod_labels[peer_transfer.PEER_KEY_LABEL] = kit.peer_key()
        if kit.snapshot_election:  # the warm-up sidecar's DNS answer: the Ready replicas of its key (the dump's election)
            self.key_peers_service = peer_weights.key_peers_service(name, args.namespace, selector, kit.peer_key(), args.contract.api.port,
                                                                    api_proxy.PORT_NAMES["api"],
                                                                    foundation.common, foundation.in_namespace)
        if kit.peer_transfer:  # every serving pod is a weight source for the next (ModelExpress's k8s-service backend)
            key = kit.peer_key()
            self.peers_service = peer_weights.peers_service(name, args.namespace, selector, key, kit.instance.gpus, foundation.common, foundation.in_namespace)
            peer_weights.peers_network_policy(name, args.namespace, selector, key, kit.instance.gpus, foundation.common, foundation.in_namespace)

        pod_annotations = {**scrape_annotations(args), **api_pod.template_annotations(args)}
        warmup = kit.warmup_sidecar()
        if args.startup is not None and args.startup.needs_code:
            pod_annotations["kimi-k3.io/startup-code-sha256"] = pod_files.content_hash()  # a code change rolls the pods
        deployment_annotations = checkov_skips(args, SECRET_ENV_SKIP, *(WARMUP_CHECKOV_SKIPS if warmup else ()))
        if not args.await_rollout:
            deployment_annotations["pulumi.com/skipAwait"] = "true"
        containers = [kit.api_sidecar(), kit.api_container(), *([warmup] if warmup else [])]
        template = k8s.core.v1.PodTemplateSpecArgs(
            metadata=k8s.meta.v1.ObjectMetaArgs(labels=pod_labels, annotations=pod_annotations),
            spec=kit.pod_spec(kit.init_containers(), containers, kit.api_volumes()),
        )
        self.deployment: k8s.apps.v1.Deployment | None = None
        self.stateful_set: k8s.apps.v1.StatefulSet | None = None
        if kit.node_local_weights:
            self.stateful_set = node_local_stateful_set(name, args, foundation, pod_labels, deployment_annotations, template)
            self._declare_frontend(name, args, foundation, selector)
            self._declare_block_end(name, args, foundation, ScaleTarget("apps", "v1", "statefulsets", name))
            self._register()
            return
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=args.namespace, labels=pod_labels, annotations=deployment_annotations),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=api_pod.declared_replicas(args),
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
                strategy=rollout_strategy(args.replicas),
                revision_history_limit=5,
                progress_deadline_seconds=args.weights_staging_timeout_s + args.contract.startup_budget_s(),
                template=template,
            ),
            opts=foundation.workload,
        )

        self._declare_frontend(name, args, foundation, selector)
        self._declare_block_end(name, args, foundation, ScaleTarget("apps", "v1", "deployments", name))
        self._register()


def node_local_stateful_set(
    name: str, args: VllmServerArgs, foundation: Foundation, pod_labels: dict[str, str], annotations: dict[str, str], template: k8s.core.v1.PodTemplateSpecArgs,
) -> k8s.apps.v1.StatefulSet:
    """The workload with node-local weights: a StatefulSet whose claim template binds each replica to a volume on its node.

    A re-created pod gets the same claim, hence the same node and the verified files (no transfer).
    Claims go with the set and on scale-down (:func:`kimi_k3.weights.node_local.claim_retention_policy`);
    the node-cleanup controller deletes a claim whose node is gone, so the pod schedules elsewhere.
    Updates roll one pod at a time (the StatefulSet default), as :func:`rollout_strategy` does.
    """
    startup = args.startup
    assert startup is not None and startup.node_local_storage_class is not None
    return k8s.apps.v1.StatefulSet(
        f"{name}-statefulset",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=args.namespace, labels=pod_labels, annotations=annotations),
        spec=k8s.apps.v1.StatefulSetSpecArgs(
            replicas=api_pod.declared_replicas(args),
            selector=k8s.meta.v1.LabelSelectorArgs(match_labels=foundation.selector),
            service_name=f"{name}-metrics",  # the headless metrics Service (clusterIP None) governs the set
            pod_management_policy="Parallel",
            update_strategy=k8s.apps.v1.StatefulSetUpdateStrategyArgs(type="RollingUpdate"),
            revision_history_limit=5,
            persistent_volume_claim_retention_policy=node_local.claim_retention_policy(),
            # A fixed request: the claim template is immutable (a change replaces the set and wipes the weights).
            volume_claim_templates=[node_local.weights_claim_template(startup.node_local_storage_class)],
            template=template,
        ),
        opts=foundation.workload,
    )


def _problems(name: str, args: VllmServerArgs) -> Problems:
    """Every problem of ``args``."""
    problems = Problems("VllmServer", name)
    nodes = validate_serving_args(name, args, problems)
    if nodes is not None and nodes != 1:
        problems.reject(
            "contract.engine.pipeline_parallel_size", nodes,
            "a Deployment runs one pod per node: use VllmLeaderWorkerSet (kimi_k3.serving.lws) for multi-node replicas",
        )
    return problems


def _validate(name: str, args: VllmServerArgs) -> None:
    """Raise :class:`~kimi_k3.errors.ComponentInputError` with every problem of ``args``."""
    _problems(name, args).raise_any()


__all__ = ["VllmServer", "VllmServerArgs", "node_local_stateful_set", "rollout_strategy"]
