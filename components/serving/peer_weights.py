"""The serving pods as each other's weight sources (``startup.peer_transfer``): their Service and NetworkPolicy.

ModelExpress's ``k8s-service`` backend finds a source through a Service of the serving pods with one named port per rank,
``rank-R`` on ``MX_WORKER_GRPC_PORT + R`` (ai-dynamo/modelexpress v0.5.1, examples/k8s_service_sources/sources-tp2-single-pod.yaml,
the multi-GPU-per-pod shape; docs/K8S_SERVICE_BACKEND.md). Its endpoints are the ready pods, so a pod still loading is no
source. The selector adds :data:`kimi_k3.weights.peer_transfer.PEER_KEY_LABEL`: only pods of the same image, revision,
engine args and env are peers.

The namespace denies everything by default (:func:`kimi_k3.serving.base.network_policies`); :func:`peers_network_policy` lets
the serving pods reach each other's ModelExpress ports (the WorkerGrpcServer and NIXL's listen thread of every rank) over the
pod network. The RDMA itself runs over the EFA interfaces, outside the pod network, admitted by the GPU nodes' EFA security
group (all traffic to and from itself: :mod:`kimi_k3.capacity.node_group`).

The same peer key label serves the engine snapshot's dump election (``engineSnapshot`` with two or more replicas and the S3
copy): :func:`key_peers_service`, a headless Service whose DNS answers are the Ready pods of the key.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.weights import peer_transfer


def rank_ports(gpus: int) -> list[k8s.core.v1.ServicePortArgs]:
    """``rank-R`` → ``MX_WORKER_GRPC_PORT + R`` for every rank of a TP ``gpus`` engine."""
    return [k8s.core.v1.ServicePortArgs(name=f"rank-{r}", port=peer_transfer.WORKER_GRPC_PORT + r, target_port=peer_transfer.WORKER_GRPC_PORT + r, protocol="TCP")
            for r in range(gpus)]


def peer_selector(selector: Mapping[str, str], key: str) -> dict[str, str]:
    """The serving pods' selector plus their peer key."""
    return {**selector, peer_transfer.PEER_KEY_LABEL: key}


def peers_service(name: str, namespace: str, selector: Mapping[str, str], key: str, gpus: int, labels: Mapping[str, str],
                  opts: pulumi.ResourceOptions) -> k8s.core.v1.Service:
    """``{name}-peers``: ClusterIP, one port per rank, the ready serving pods of ``key``."""
    return k8s.core.v1.Service(
        f"{name}-peers",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{name}-peers", namespace=namespace, labels=dict(labels)),
        spec=k8s.core.v1.ServiceSpecArgs(type="ClusterIP", session_affinity="None", selector=peer_selector(selector, key), ports=rank_ports(gpus)),
        opts=opts,
    )


def key_peers_service_name(name: str) -> str:
    """``{name}-key-peers``: the headless Service of the Ready serving pods of one peer key (:func:`key_peers_service`)."""
    return f"{name}-key-peers"


def key_peers_service(name: str, namespace: str, selector: Mapping[str, str], key: str, port: int, target_port: str, labels: Mapping[str, str],
                      opts: pulumi.ResourceOptions) -> k8s.core.v1.Service:
    """``{name}-key-peers``: headless (``clusterIP: None``), ``publishNotReadyAddresses: false``, the serving pods of ``key``.

    Kubernetes docs, "DNS for Services and Pods": a headless Service's A records are "the set of IPs of all of the Ready Pods
    selected by the Service", so the warm-up sidecar learns, without API access, whether another replica of its key serves
    (:func:`kimi_k3.weights.snapshot_pod.ready_peers`: the engine snapshot's dump election). Resolving it is a query to kube-dns,
    which the serving pods' NetworkPolicy already lets out (:func:`kimi_k3.serving.base.egress_rules`); no traffic goes to the
    peers, and ``port`` / ``target_port`` (the API's, the proxy container's port name) only name the endpoints' port."""
    return k8s.core.v1.Service(
        key_peers_service_name(name),
        metadata=k8s.meta.v1.ObjectMetaArgs(name=key_peers_service_name(name), namespace=namespace, labels=dict(labels)),
        spec=k8s.core.v1.ServiceSpecArgs(type="ClusterIP", cluster_ip="None", publish_not_ready_addresses=False, selector=peer_selector(selector, key),
                                         ports=[k8s.core.v1.ServicePortArgs(name=target_port, port=port, target_port=target_port, protocol="TCP")]),
        opts=opts,
    )


def peers_network_policy(name: str, namespace: str, selector: Mapping[str, str], key: str, gpus: int, labels: Mapping[str, str],
                         opts: pulumi.ResourceOptions) -> k8s.networking.v1.NetworkPolicy:
    """``{name}-peers``: the serving pods of ``key`` reach each other on every rank's WorkerGrpcServer and NIXL listen port, in and out."""
    np = k8s.networking.v1
    pods = [np.NetworkPolicyPeerArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=peer_selector(selector, key)))]
    ports = [np.NetworkPolicyPortArgs(port=base + r, protocol="TCP") for base in (peer_transfer.WORKER_GRPC_PORT, peer_transfer.METADATA_PORT) for r in range(gpus)]
    return np.NetworkPolicy(
        f"{name}-peers",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{name}-peers", namespace=namespace, labels=dict(labels)),
        spec=np.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=peer_selector(selector, key)),
            policy_types=["Ingress", "Egress"],
            ingress=[np.NetworkPolicyIngressRuleArgs(from_=pods, ports=ports)],
            egress=[np.NetworkPolicyEgressRuleArgs(to=pods, ports=ports)],
        ),
        opts=opts,
    )


__all__ = ["key_peers_service", "key_peers_service_name", "peer_selector", "peers_network_policy", "peers_service", "rank_ports"]
