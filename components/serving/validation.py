"""What no vLLM serving component can deploy, checked before anything is declared: the args' own bounds, and what the
pod's builders (the API proxy, the stop sequence, the NLB, the routing tier, the time-to-serve wiring) would refuse, in
the args' names. It sits above the args (a leaf) and the builders it asks (:mod:`kimi_k3.serving.api_pod`,
:mod:`kimi_k3.serving.pod_kit`); :class:`~kimi_k3.serving.vllm.VllmServer` and
:class:`~kimi_k3.serving.lws.VllmLeaderWorkerSet` call it.
"""

from __future__ import annotations

import ipaddress
from datetime import datetime

from kimi_k3.core import catalog
from kimi_k3.core.formats import DNS_LABEL
from kimi_k3.errors import Problems, UserError
from kimi_k3.serving import api_pod, nlb
from kimi_k3.serving.args import VllmServingArgs
from kimi_k3.serving.block_end import BlockEnd
from kimi_k3.serving.contracts import EXPOSURES, ContractError, ServingContract
from kimi_k3.serving.drain import DrainError
from kimi_k3.serving.front import ServingFront
from kimi_k3.serving.pod_kit import node_share
from kimi_k3.serving.router import ConversationRouting


def validate_serving_args(name: str, args: VllmServingArgs, problems: Problems) -> int | None:
    """Add to ``problems`` what no serving component can deploy; return the nodes one replica spans (``None`` if unknown)."""
    if not isinstance(args.contract, ServingContract):
        problems.reject("contract", type(args.contract).__name__, "expected a ServingContract")
        return None
    if not DNS_LABEL.match(name) or len(name) > 40:
        problems.reject("name", name, "expected a DNS label of at most 40 characters (it names the Kubernetes objects)")
    if not DNS_LABEL.match(args.namespace) or len(args.namespace) > 63:
        problems.reject("namespace", args.namespace, "expected a DNS label")
    nodes: int | None = None
    if args.instance_type not in catalog.INSTANCE_TYPES:
        problems.reject("instance_type", args.instance_type, f"known: {', '.join(catalog.INSTANCE_TYPES)}")
    else:
        instance = catalog.INSTANCE_TYPES[args.instance_type]
        try:
            nodes = args.contract.nodes_per_replica(instance.gpus)  # TP must fill whole nodes
        except ContractError as err:
            problems.adopt(f"contract.{err.field}", err)
        cpu, memory, reserved_memory = node_share(instance, args.reserved_cpu, args.reserved_memory_gib)
        if cpu < 8 or memory < 64:
            problems.add(
                "reserved_cpu",
                f"reserved_cpu {args.reserved_cpu} and reserved_memory_gib {reserved_memory} are not accepted; "
                f"they leave {cpu} vCPU / {memory} GiB of a {instance.name} to the server: reserve less",
            )
        elif args.shm_size_gib * 4 > memory:
            problems.reject("shm_size_gib", args.shm_size_gib, f"at most a quarter of the {memory} GiB memory limit")
    if isinstance(args.replicas, bool) or not isinstance(args.replicas, int) or not 1 <= args.replicas <= 64:
        problems.reject("replicas", args.replicas, "expected 1 to 64 (one per reserved GPU node)")
    elif args.reservation is not None:
        block = args.reservation
        per_replica = nodes or 1
        if block.instance_type and block.instance_type != args.instance_type:
            problems.reject("instance_type", args.instance_type, f"the Capacity Block {block.reservation_id} reserves {block.instance_type}")
        elif args.replicas * per_replica > block.instance_count:
            fits = block.instance_count // per_replica
            problems.reject(
                "replicas", args.replicas,
                f"at most {fits}: the Capacity Block {block.reservation_id} reserves {block.instance_count} {block.instance_type or 'GPU'} "
                f"node{'s' if block.instance_count != 1 else ''} and one replica spans {per_replica}",
            )
    if args.exposure not in EXPOSURES:
        problems.reject("exposure", args.exposure, f"accepted: {', '.join(EXPOSURES)}")
    if args.api_key is None and (args.require_api_key or args.exposure == "public"):
        why = "public exposure always needs one" if args.exposure == "public" else "set require_api_key=False to serve without one"
        problems.add("api_key", f"api_key is required ({why}); pass it as a Pulumi secret")
    for index, cidr in enumerate(args.allowed_cidrs):
        try:
            ipaddress.IPv4Network(cidr, strict=True)
        except ValueError as err:
            problems.add(f"allowed_cidrs[{index}]", f"allowed_cidrs entry {cidr!r} is not accepted; expected an IPv4 CIDR ({err})")
    if args.exposure in ("internal", "public") and not args.allowed_cidrs:
        problems.add("allowed_cidrs", f"allowed_cidrs is required for {args.exposure} exposure (the client CIDRs allowed through the NLB; the pods' NetworkPolicy admits exactly them)")
    if args.exposure in EXPOSURES and args.exposure != "cluster" and args.vpc_cidr is None:
        problems.add("vpc_cidr", f"vpc_cidr is required for {args.exposure} exposure (the NLB reaches the pods from the VPC)")
    if isinstance(args.vpc_cidr, str):
        try:
            ipaddress.IPv4Network(args.vpc_cidr, strict=True)
        except ValueError as err:
            problems.reject("vpc_cidr", args.vpc_cidr, f"expected an IPv4 CIDR ({err})")
    for path, ns in (*((f"client_namespaces[{i}]", n) for i, n in enumerate(args.client_namespaces)), ("metrics_namespace", args.metrics_namespace)):
        if not DNS_LABEL.match(ns):
            problems.reject(path, ns, "expected a DNS label")
    if args.contract.weights.source == "s3" and (args.cluster_name is None or args.aws_region is None):
        problems.add("cluster_name", "cluster_name and aws_region are required when the weights come from S3 (Pod Identity and the bucket's region)")
    _front_problems(args, problems)
    _routing_problems(args, problems)
    _startup_problems(args, problems)
    if args.block_end is not None and not (
        isinstance(args.block_end, BlockEnd) and all(isinstance(t, datetime) and t.tzinfo is not None for t in (args.block_end.ends_at, args.block_end.now))
    ):
        problems.reject("block_end", args.block_end, "expected a BlockEnd of two timezone-aware datetimes (the block's end, the run's now)")
    if args.init_image and "@sha256:" not in args.init_image and ":" not in args.init_image.rsplit("/", 1)[-1]:
        problems.reject("init_image", args.init_image, "expected an image with a tag or a digest")
    return nodes


def _routing_problems(args: VllmServingArgs, problems: Problems) -> None:
    """What the routing tier cannot do with these args."""
    routing = args.routing
    if routing is None:
        return
    if not isinstance(routing, ConversationRouting):
        problems.reject("routing", routing, "expected a ConversationRouting or None")
        return
    if isinstance(args.replicas, int) and args.replicas < 2:
        problems.reject("routing", "ConversationRouting", f"a routing tier needs two or more replicas (replicas is {args.replicas}); leave routing None")
    try:
        routing.drain_plan(api_pod.front(args).drain_s, args.exposure in nlb.EXPOSURE_SCHEMES)
    except DrainError as err:
        problems.reject(f"routing.{err.field}", err.value, err.accepted)


def _startup_problems(args: VllmServingArgs, problems: Problems) -> None:
    """What the time-to-serve wiring cannot do with these args."""
    startup = args.startup
    if startup is None:
        return
    if startup.node_local_storage_class is not None and args.contract.weights.source != "s3":
        problems.reject("startup.node_local_storage_class", startup.node_local_storage_class, "only with S3 weights (the node-side sync keeps one verified directory per revision)")
    cache = startup.cache_prefix
    if cache is not None:
        if not args.contract.image.pinned:
            problems.reject("startup.compile_cache_s3_uri", cache.uri, "only with an image pinned by digest (caches are keyed on the exact build)")
        if args.contract.weights.source != "s3":
            problems.reject("startup.compile_cache_s3_uri", cache.uri, "only with S3 weights (the pod's Pod Identity role exists for them)")


def _front_problems(args: VllmServingArgs, problems: Problems) -> None:
    """What the serving front cannot do with these args. The front validated its own fields when it was built
    (:class:`~kimi_k3.serving.front.ServingFront`); what is left is whether it agrees with the exposure and the contract."""
    front = args.front
    if front is not None and not isinstance(front, ServingFront):
        problems.reject("front", type(front).__name__, "expected a ServingFront or None")
        return
    behind_nlb = args.exposure in nlb.EXPOSURE_SCHEMES
    if front is not None and front.behind_nlb != behind_nlb:
        problems.reject(
            "front.behind_nlb", front.behind_nlb,
            f"exposure {args.exposure} {'puts' if behind_nlb else 'puts no'} NLB in front of the pods: set it to {behind_nlb}",
        )
        return
    try:
        api_pod.proxy_config(args)
    except UserError as err:  # the contract bounds the context length as the proxy does; its API port may take one of the proxy's own
        problems.adopt("contract.api.port", err)


__all__ = ["validate_serving_args"]
