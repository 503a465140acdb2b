"""``VllmLeaderWorkerSet``: Kimi K3 on vLLM when one replica spans several GPU nodes.

A Deployment schedules pods one by one; a replica that needs ``N`` nodes (TP=8 within
a node × PP=N across nodes, e.g. p5en: 8×141 GB cannot hold ~1.6 TB of weights plus
KV cache) must start, fail and restart as a unit. A LeaderWorkerSet
(``leaderworkerset.x-k8s.io/v1``, controller: :class:`~kimi_k3.addons.lws_controller.LwsController`)
runs, per replica, one leader pod and ``N−1`` worker pods:

* vLLM's own multi-node mode, no Ray: vLLM 0.27.1's multiprocessing executor spans nodes
  (``vllm/v1/executor/multiproc_executor.py``: ``supports_pp = True``, one executor per
  node, ``nnodes_within_dp``; ``--nnodes``, ``--node-rank``, ``--master-addr``,
  ``--master-port`` "for multi-node distributed inference when
  distributed_executor_backend is mp", ``vllm/config/parallel.py``; ``vllm serve
  --headless`` on the other nodes "Run headless workers (for multi-node PP/TP)",
  ``vllm/entrypoints/cli/serve.py``). Ray is not a dependency of the vLLM 0.27.1 wheel
  (its ``Requires-Dist`` names no ``ray``), so an image built from it has none, and the
  Ray path would fail only once the block had started;
* leader: waits until every worker has staged its weights (:data:`GROUP_GATE_PORT`,
  :data:`kimi_k3.serving.scripts.LEADER_SCRIPT`), then ``exec vllm serve`` with the
  contract's arguments plus ``--pipeline-parallel-size N`` and :func:`multi_node_args`
  (node rank 0, the master address its own), on loopback behind the API proxy sidecar
  (:mod:`kimi_k3.serving.api_pod`: the same proxy, probes and stop sequence as
  ``VllmServer``); it alone serves the API;
* workers: tell the leader their weights are staged, then ``exec vllm serve`` with the same
  arguments, their ``--node-rank`` (``LWS_WORKER_INDEX``) and ``--headless``; every rank
  joins the torch.distributed store on the leader's :data:`DIST_MASTER_PORT`. The gate
  keeps the ranks' start within seconds of each other: a worker staging its copy of the
  weights for an hour would otherwise outlast torch's rendezvous timeout;
* ``restartPolicy: RecreateGroupOnPodRestart``: one failed pod recreates the whole
  group (a wedged NCCL rank would otherwise hang the others);
* every pod requests a whole node (GPUs, EFA interfaces, CPU, memory) and stages its
  own copy of the weights on its node's NVMe with the same init containers as
  :class:`~kimi_k3.serving.vllm.VllmServer`.

Around the workload it declares exactly what ``VllmServer`` declares (shared code:
namespace, ServiceAccount, Pod Identity role, Secrets, Service, NetworkPolicies, PDB,
ServiceMonitor, outputs); the Service selects the leaders only
(``leaderworkerset.sigs.k8s.io/worker-index: "0"``) and one more NetworkPolicy lets
the pods of the set reach each other on every port (the distributed store, the gate, NCCL bootstrap, Gloo, the
executor's message queues).

Security context: the same as the single-node server (non-root, every capability
dropped, read-only root, RuntimeDefault seccomp, restricted Pod Security). The
multiprocessing executor needs no more: its shared-memory queues live in the ``/dev/shm``
volume. EFA needs no privilege either: the device plugin hands the
``/dev/infiniband/uverbs*`` devices to the container. What it does need is enough
locked memory (``RLIMIT_MEMLOCK``) for memory registration, which a pod cannot set:
it is inherited from the node's container runtime. ``CAP_IPC_LOCK`` would not help,
a non-root process has an empty effective capability set. If NCCL logs
``ibv_reg_mr`` / "Cannot allocate memory" errors, raise ``LimitMEMLOCK`` of
containerd on the GPU nodes. ``FI_EFA_USE_HUGE_PAGE=0`` keeps libfabric off huge
pages, so no ``hugepages-2Mi`` request is needed and forked worker processes stay safe.

The LeaderWorkerSet object is named ``{name}-lws``: the LWS controller creates a
headless Service named after the set (for ``LWS_LEADER_ADDRESS``), which must not
collide with the API Service ``{name}``.

Kubernetes provider: ``opts.providers``, as for ``VllmServer``. The LWS CRD and webhook must exist first: make the component depend
on the :class:`~kimi_k3.addons.lws_controller.LwsController`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.cluster.kubernetes_provider import require_kubernetes_provider
from kimi_k3.core import catalog, labels
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.errors import Problems
from kimi_k3.serving import api_pod
from kimi_k3.serving.args import VllmServingArgs
from kimi_k3.serving.base import PDB_MAX_UNAVAILABLE, SECRET_ENV_SKIP, VllmServingBase, checkov_skips, egress_rules, scrape_annotations
from kimi_k3.serving.block_end import ScaleTarget
from kimi_k3.serving.contracts import ServingContract
from kimi_k3.serving.engine_flags import flag_of
from kimi_k3.serving.pod_kit import PROBE_PERIOD_S, kit_env_names
from kimi_k3.serving.scripts import LEADER_SCRIPT, WORKER_SCRIPT
from kimi_k3.serving.validation import validate_serving_args

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
"""Label the LWS controller puts on every pod: ``"0"`` for the leader."""
EFA_RESOURCE = "vpc.amazonaws.com/efa"
"""Extended resource of the EFA device plugin."""
DIST_MASTER_PORT = 29501
"""``--master-port``: the leader's torch.distributed store, which every rank of the group joins (vLLM's default)."""
GROUP_GATE_PORT = 29600
"""Where the leader waits for its workers before it starts vLLM (:data:`kimi_k3.serving.scripts.LEADER_SCRIPT`)."""

POD_IP_ENV = k8s.core.v1.EnvVarArgs(
    name="VLLM_HOST_IP", value_from=k8s.core.v1.EnvVarSourceArgs(field_ref=k8s.core.v1.ObjectFieldSelectorArgs(field_path="status.podIP")),
)
"""``VLLM_HOST_IP``: the address each node's vLLM announces to the group (the pod's, instead of a guess from a UDP route)."""

LEADER_STORE_PROBE = (
    "import os, socket; socket.create_connection((os.environ['LWS_LEADER_ADDRESS'], int(os.environ['DIST_MASTER_PORT'])), 5).close()"
)
"""A worker's probe: the leader's torch.distributed store answers."""


def multi_node_args(nodes: int, *, node_rank: str) -> list[str]:
    """vLLM's own multi-node flags for one node of the group (vLLM 0.27.1, ``vllm/config/parallel.py``: ``nnodes``,
    ``node_rank``, ``master_addr``, ``master_port`` "for multi-node distributed inference when distributed_executor_backend
    is mp"); ``$(LWS_...)`` is expanded by the kubelet from the variables the LWS controller adds to every container."""
    return [
        "--distributed-executor-backend", "mp", "--nnodes", str(nodes), "--node-rank", node_rank,
        "--master-addr", "$(LWS_LEADER_ADDRESS)", "--master-port", str(DIST_MASTER_PORT),
    ]

EFA_ENV: Mapping[str, str] = {
    # NCCL over libfabric's EFA provider (the aws-ofi-nccl plugin in the image); never fall back to TCP sockets silently.
    "FI_PROVIDER": "efa",
    # GPUDirect RDMA on p4d/p5/p6 (the default with libfabric >= 1.18; harmless to state).
    "FI_EFA_USE_DEVICE_RDMA": "1",
    # vLLM forks its workers: keep registered memory fork-safe (no-op on kernels >= 5.15) and avoid huge pages.
    "FI_EFA_FORK_SAFE": "1",
    "FI_EFA_USE_HUGE_PAGE": "0",
    # Bootstrap / out-of-band TCP of NCCL and Gloo on the pod's VPC CNI interface.
    "NCCL_SOCKET_IFNAME": "eth0",
    "GLOO_SOCKET_IFNAME": "eth0",
}
"""NCCL/libfabric environment for cross-node traffic over EFA (aws-samples/awsome-distributed-training EFA cheatsheet)."""

GROUP_ENV = ("GROUP_GATE_PORT", "DIST_MASTER_PORT", "GROUP_JOIN_TIMEOUT_S", "VLLM_HOST_IP")
"""Variables the component sets in the group's engine containers (``nccl_env`` may not set them)."""

HF_TOKEN_ENV_SKIP = "CKV_K8S_35=huggingface_hub reads the token only from HF_TOKEN (or a token file in HOME); it comes from a secretKeyRef into the download init container, never into the args or the spec"
"""checkov skip (with its reason) for the worker pods, whose only secret is the Hugging Face token of the download init container."""

WORKER_PRE_STOP_SCRIPT = """deadline=$(( $(date +%s) + {wait_s} ))
while [ "$(date +%s)" -lt "$deadline" ] && python3 -c 'import os, socket; socket.create_connection((os.environ["LWS_LEADER_ADDRESS"], int(os.environ["DIST_MASTER_PORT"])), 2).close()' 2>/dev/null; do
  sleep 5
done
"""
"""A worker's ``preStop``: wait while the leader's engine (its torch.distributed store) still answers, at most the leader's
preStop plus drain."""

_RESERVED_EXTRA_FLAGS = ("--distributed-executor-backend", "--data-parallel-size", "--nnodes", "--node-rank", "--headless", "--master-addr", "--master-port", "-n", "-r")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@checked_args(secrets=("api_key", "hugging_face_token"))
@dataclass(frozen=True)
class VllmLeaderWorkerSetArgs(VllmServingArgs):
    """Inputs of :class:`VllmLeaderWorkerSet`: every :class:`~kimi_k3.serving.args.VllmServingArgs` field plus the group's network.

    ``replicas`` counts groups (each ``pipeline_parallel_size`` nodes);
    ``weights_staging_timeout_s`` also bounds how long a leader waits for its workers
    to join (they stage their own copy of the weights first).
    """

    efa_enabled: bool = True
    """Request EFA interfaces on every pod and run NCCL over libfabric/EFA. Off: NCCL uses TCP sockets (slow; testing only)."""
    efa_interfaces: int | None = None
    """EFA interfaces each pod requests; default: all of the instance type's (p5en and p6-b300: 16)."""
    nccl_env: Mapping[str, str] = field(default_factory=dict)
    """Extra or overriding NCCL/libfabric variables (e.g. ``NCCL_DEBUG=INFO``), merged over :data:`EFA_ENV`."""


@checked_component
class VllmLeaderWorkerSet(VllmServingBase):
    """Kimi K3 behind vLLM's OpenAI-compatible API, each replica a LeaderWorkerSet group of whole GPU nodes.

    Outputs (as :class:`~kimi_k3.serving.vllm.VllmServer`): ``endpoint_url``,
    ``served_model_name``, ``image``, ``model_revision``, ``namespace``,
    ``service_name``; plus ``nodes_per_replica`` (int) and the ``leader_worker_set``
    resource.
    """

    def __init__(self, name: str, args: VllmLeaderWorkerSetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate, then declare the LeaderWorkerSet and its front: ``name`` prefixes every child's name, ``args`` as on
        ``VllmLeaderWorkerSetArgs``, ``opts`` the usual resource options (parent; providers, which must name the Kubernetes provider)."""
        problems, found = _problems(name, args)
        require_kubernetes_provider(problems, opts)
        problems.raise_any()
        assert found is not None  # no problem: the contract's nodes are known
        nodes = found
        super().__init__("kimi-k3:index:VllmLeaderWorkerSet", name, None, opts)
        self.args = args
        self.nodes_per_replica = nodes
        contract = args.contract
        foundation = self._declare_foundation(name, args)
        kit, common, selector, secret_names = foundation.kit, foundation.common, foundation.selector, foundation.kit.secret_names
        instance = kit.instance
        api_selector = {**selector, WORKER_INDEX_LABEL: "0"}
        base_pod_labels = {**common, **selector, labels.MODEL_LABEL: labels.MODEL}

        group_env = {**(EFA_ENV if args.efa_enabled else {}), **args.nccl_env}
        join_env = {
            "GROUP_GATE_PORT": str(GROUP_GATE_PORT),
            "DIST_MASTER_PORT": str(DIST_MASTER_PORT),
            "GROUP_JOIN_TIMEOUT_S": str(args.weights_staging_timeout_s),
        }
        extra_resources = {EFA_RESOURCE: str(args.efa_interfaces or instance.efa_interfaces)} if args.efa_enabled else {}
        init_containers = kit.init_containers()
        drain = api_pod.drain_plan(args)
        engine_args = api_pod.engine_args(args, contract.weights.mount_path)

        leader = kit.api_container(
            command=["/bin/sh", "-c", LEADER_SCRIPT, "vllm-leader"],
            args=[*engine_args, *multi_node_args(nodes, node_rank="0")],
            env=[*kit.engine_env({**group_env, **join_env}), POD_IP_ENV],
            ports=[
                k8s.core.v1.ContainerPortArgs(name="dist-master", container_port=DIST_MASTER_PORT, protocol="TCP"),
                k8s.core.v1.ContainerPortArgs(name="group-gate", container_port=GROUP_GATE_PORT, protocol="TCP"),
            ],
            resources=kit.engine_resources(extra_resources, beside_proxy=True),
            # The leader may wait up to weights_staging_timeout_s for its workers before vLLM starts loading.
            **kit.probes(extra_startup_s=args.weights_staging_timeout_s),
        )
        leader_store = k8s.core.v1.ExecActionArgs(command=["python3", "-c", LEADER_STORE_PROBE])
        worker = k8s.core.v1.ContainerArgs(
            name="vllm-worker",
            image=contract.image.image,
            image_pull_policy=contract.image.pull_policy,
            command=["/bin/sh", "-c", WORKER_SCRIPT, "vllm-worker"],
            # The same engine arguments as the leader's (vLLM builds the same config), as one headless node of the group.
            args=[*engine_args, *multi_node_args(nodes, node_rank="$(LWS_WORKER_INDEX)"), "--headless"],
            env=[*kit.engine_env({**group_env, **join_env}, with_api_key=False), POD_IP_ENV],
            resources=kit.engine_resources(extra_resources),
            # Up = the group's torch.distributed store on the leader answers (it lives as long as the leader's engine).
            startup_probe=k8s.core.v1.ProbeArgs(
                exec_=leader_store,
                period_seconds=PROBE_PERIOD_S,
                timeout_seconds=8,
                failure_threshold=-(-(args.weights_staging_timeout_s + args.contract.startup_budget_s() + 600) // PROBE_PERIOD_S),
            ),
            liveness_probe=k8s.core.v1.ProbeArgs(exec_=leader_store, period_seconds=30, timeout_seconds=8, failure_threshold=4),
            readiness_probe=k8s.core.v1.ProbeArgs(exec_=leader_store, period_seconds=15, timeout_seconds=8, failure_threshold=2),
            # A worker outlives its leader's drain: it leaves once the leader's engine is gone (its store closed) or the
            # drain's deadline passed; SIGTERM before that would kill the ranks in-flight requests need.
            lifecycle=k8s.core.v1.LifecycleArgs(pre_stop=k8s.core.v1.LifecycleHandlerArgs(exec_=k8s.core.v1.ExecActionArgs(
                command=["/bin/sh", "-c", WORKER_PRE_STOP_SCRIPT.format(wait_s=drain.engine_pre_stop_s + drain.drain_s)],
            ))),
            security_context=kit.security_context(),
            volume_mounts=kit.mounts(shm=True),
        )

        leader_labels = {**base_pod_labels, "app.kubernetes.io/component": "leader"}
        worker_labels = {**base_pod_labels, "app.kubernetes.io/component": "worker"}
        leader_annotations = {**checkov_skips(args, SECRET_ENV_SKIP), **scrape_annotations(args), **api_pod.template_annotations(args)}
        worker_annotations = checkov_skips(args, *([HF_TOKEN_ENV_SKIP] if "HF_TOKEN" in secret_names else [])) or None
        lws_annotations = checkov_skips(args, SECRET_ENV_SKIP)
        if args.await_rollout:
            lws_annotations["pulumi.com/waitFor"] = "condition=Available"
        else:
            lws_annotations["pulumi.com/skipAwait"] = "true"

        def template(pod_labels: dict, annotations: dict | None, containers: list[k8s.core.v1.ContainerArgs], volumes: list | None = None) -> dict:
            return {
                "metadata": k8s.meta.v1.ObjectMetaArgs(labels=pod_labels, annotations=annotations or None),
                "spec": kit.pod_spec(init_containers, containers, volumes),
            }

        self.lws_name = f"{name}-lws"
        self.leader_worker_set = k8s.apiextensions.CustomResource(
            f"{name}-lws",
            api_version=LWS_API_VERSION,
            kind="LeaderWorkerSet",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=self.lws_name, namespace=args.namespace, labels={**common, **selector}, annotations=lws_annotations),
            spec={
                "replicas": api_pod.declared_replicas(args),
                # Workers are created with the leader: the leader waits for them before it can become ready.
                "startupPolicy": "LeaderCreated",
                # No spare node in a Capacity Block: replace one group at a time, never surge.
                "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {"maxUnavailable": PDB_MAX_UNAVAILABLE, "maxSurge": 0}},
                "networkConfig": {"subdomainPolicy": "Shared"},
                "leaderWorkerTemplate": {
                    "size": nodes,
                    "restartPolicy": "RecreateGroupOnPodRestart",
                    "leaderTemplate": template(leader_labels, leader_annotations, [kit.api_sidecar(), leader], kit.api_volumes()),
                    "workerTemplate": template(worker_labels, worker_annotations, [worker]),
                },
            },
            opts=foundation.workload,
        )

        self._declare_frontend(name, args, foundation, api_selector)
        self._declare_block_end(name, args, foundation, ScaleTarget("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", self.lws_name))
        self.group_network_policy = _group_network_policy(name, args, common, selector, foundation.in_namespace)
        self._register()


def _group_network_policy(name: str, args: VllmServingArgs, common: Mapping[str, str], selector: Mapping[str, str], opts: pulumi.ResourceOptions) -> k8s.networking.v1.NetworkPolicy:
    """Pods of the set reach each other on every port (the distributed store, NCCL/Gloo bootstrap) and, like the leader, DNS/HTTPS/Pod Identity.

    EFA traffic itself (SRD, OS bypass) never passes through the pod network, so no
    NetworkPolicy sees it; the node security group governs it.
    """
    np = k8s.networking.v1
    peers = [np.NetworkPolicyPeerArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(selector)))]
    return np.NetworkPolicy(
        f"{name}-group",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{name}-group", namespace=args.namespace, labels=dict(common)),
        spec=np.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(selector)),
            policy_types=["Ingress", "Egress"],
            ingress=[np.NetworkPolicyIngressRuleArgs(from_=peers)],
            egress=egress_rules(args).apply(lambda rules: [np.NetworkPolicyEgressRuleArgs(to=peers), *rules]),
        ),
        opts=opts,
    )


def _problems(name: str, args: VllmLeaderWorkerSetArgs) -> tuple[Problems, int | None]:
    """Every problem of ``args``, and the nodes one replica spans (``None`` if unknown)."""
    problems = Problems("VllmLeaderWorkerSet", name)
    if not isinstance(args, VllmLeaderWorkerSetArgs):
        problems.reject("args", type(args).__name__, "expected VllmLeaderWorkerSetArgs")
        return problems, None
    nodes = validate_serving_args(name, args, problems)
    if len(name) > 36:
        # Pod names: <name>-lws-<group>-<worker> must stay a DNS label with room for the indices.
        problems.reject("name", name, f"at most 36 characters (pods are named {name}-lws-<group>-<worker>)")
    instance = catalog.INSTANCE_TYPES.get(args.instance_type)
    if nodes is not None and nodes < 2 and instance is not None:
        problems.reject(
            "contract.engine.pipeline_parallel_size", nodes,
            f"the contract's replica fits on one {instance.name} node: use VllmServer (kimi_k3.serving.vllm) for single-node replicas",
        )
    for arg in args.contract.engine.extra_args if isinstance(args.contract, ServingContract) else ():
        if flag_of(arg) in _RESERVED_EXTRA_FLAGS:
            problems.reject("contract.engine.extra_args", arg, "the leader-worker set runs vLLM's own multi-node mode across the group and sets the distribution itself")
    if args.startup is not None and args.startup.peer_transfer:
        problems.reject("startup.peer_transfer", True, "expected false: a peer's weights come from one pod holding every TP rank (ModelExpress's k8s-service sources); use VllmServer")
    if not isinstance(args.efa_enabled, bool):
        problems.reject("efa_enabled", args.efa_enabled, "expected true or false")
    if args.efa_interfaces is not None:
        most = instance.efa_interfaces if instance is not None else 0
        if isinstance(args.efa_interfaces, bool) or not isinstance(args.efa_interfaces, int) or not 1 <= args.efa_interfaces <= most:
            problems.reject("efa_interfaces", args.efa_interfaces, f"{args.instance_type} has 1 to {most}")
        elif not args.efa_enabled:
            problems.add("efa_interfaces", "efa_interfaces is set but efa_enabled is false")
    for key, value in dict(args.nccl_env).items():
        if not _ENV_NAME_RE.match(str(key)) or not isinstance(value, str):
            problems.add("nccl_env", f"nccl_env entry {key!r}={value!r} is not accepted; expected NAME=string")
        elif isinstance(args.contract, ServingContract) and (key in kit_env_names(args.contract) or key in GROUP_ENV or key.startswith("LWS_")):
            problems.add("nccl_env", f"nccl_env may not set {key}; the component sets it")
    return problems, nodes


def _validate(name: str, args: VllmLeaderWorkerSetArgs) -> int:
    """Raise :class:`~kimi_k3.errors.ComponentInputError` with every problem of ``args``; return the nodes per replica."""
    problems, nodes = _problems(name, args)
    problems.raise_any()
    assert nodes is not None  # no problem: the contract's nodes are known
    return nodes


__all__ = [
    "EFA_ENV",
    "EFA_RESOURCE",
    "WORKER_INDEX_LABEL",
    "VllmLeaderWorkerSet",
    "VllmLeaderWorkerSetArgs",
]
