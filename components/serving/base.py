"""What every vLLM serving component declares around its workload.

:class:`VllmServingBase` declares, in one namespace (``kimi-serving`` by default):

* Namespace with Pod Security ``restricted`` (enforce, audit, warn): the pods run
  as non-root with every capability dropped, ``RuntimeDefault`` seccomp and only
  ``emptyDir``/``secret`` volumes, so the strictest level fits them;
* ServiceAccount without an API token, plus an EKS Pod Identity role that can read
  exactly the weights prefix when the weights come from S3;
* Secrets for the API key (and the Hugging Face token), handed to containers with
  ``secretKeyRef`` only;
* the API proxy's ConfigMap (the rendered ``nginx.conf``, :mod:`kimi_k3.serving.api_pod`);
* after the subclass's workload: Service (ClusterIP, or an NLB through the AWS Load
  Balancer Controller, annotated by :func:`kimi_k3.serving.nlb.nlb_annotations`) to the
  proxy's API port, a metrics Service to the proxy's metrics port, NetworkPolicies
  (default deny + what the server needs, port by port), a PodDisruptionBudget and
  Prometheus scraping (ServiceMonitor on the metrics Service, or pod annotations).

Subclasses (:class:`~kimi_k3.serving.vllm.VllmServer`,
:class:`~kimi_k3.serving.lws.VllmLeaderWorkerSet`) call
:meth:`VllmServingBase._declare_foundation`, build their pods from the returned
:class:`Foundation` (its :class:`~kimi_k3.serving.pod_kit.PodKit`), then call
:meth:`VllmServingBase._declare_frontend` and :meth:`VllmServingBase._register`.

Kubernetes provider: through the component's ``opts`` (``providers={"kubernetes": provider}``),
inherited by every Kubernetes child; the components refuse to run without one
(:mod:`kimi_k3.cluster.kubernetes_provider`). AWS children (the Pod Identity role) use the
component's AWS provider (default or from ``opts`` the same way).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.cluster.pod_identity import PodIdentityRole, PodIdentityRoleArgs
from kimi_k3.serving import api_pod, api_proxy, block_end, nlb, router
from kimi_k3.serving.args import VllmServingArgs
from kimi_k3.serving.pod_kit import PodKit, startup_code_config_map
from kimi_k3.weights import pod_files
from kimi_k3.weights.compile_cache import compile_cache_policy
from kimi_k3.weights.image_pull import FLOATING_TAG_SKIP

POD_IDENTITY_AGENT_CIDR = "169.254.170.23/32"
"""Link-local address of the EKS Pod Identity Agent (credentials for the S3 init container)."""

APP_NAME = "vllm"
"""``app.kubernetes.io/name`` of every serving pod."""

PDB_MAX_UNAVAILABLE = 1
"""Pods the PodDisruptionBudget lets an eviction take at once: the same one pod a rollout takes."""

METRICS_SERVICE_LABEL = "kimi-k3.io/metrics"
"""Label of the metrics Service (what the ServiceMonitor selects: the API Service has no metrics port)."""

LINK_LOCAL_CIDR = "169.254.0.0/16"
"""Instance metadata and other link-local services: never reachable over HTTPS from the serving pods."""


@dataclass(frozen=True)
class Foundation:
    """What :meth:`VllmServingBase._declare_foundation` declared and the workload builds on."""

    common: dict[str, str]
    """Labels on every Kubernetes object of the component."""
    selector: dict[str, str]
    """Labels selecting every pod of the component."""
    kit: PodKit
    """The pod pieces, bound to the component's Secrets."""
    in_namespace: pulumi.ResourceOptions
    """Options of every object inside the namespace (the component as parent, after the Namespace)."""
    workload: pulumi.ResourceOptions
    """Options of the workload: as :attr:`in_namespace`, after the proxy's ConfigMap."""


def weights_policy(bucket: str, prefix: str, partition: str = "aws", kms_key_arn: str | None = None) -> dict:
    """IAM policy reading exactly one S3 prefix (objects and their listing), nothing else."""
    statements: list[dict[str, Any]] = [
        {"Sid": "ReadWeightObjects", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"arn:{partition}:s3:::{bucket}/{prefix}*"]},
        {
            "Sid": "ListWeightPrefix",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [f"arn:{partition}:s3:::{bucket}"],
            "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*"]}},
        },
    ]
    if kms_key_arn:
        statements.append({"Sid": "DecryptWeights", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [kms_key_arn]})
    return {"Version": "2012-10-17", "Statement": statements}


class VllmServingBase(pulumi.ComponentResource):
    """What every vLLM serving component declares around its workload.

    Namespace, ServiceAccount, Pod Identity role, Secrets (:meth:`_declare_foundation`),
    then Service, NetworkPolicies, PodDisruptionBudget, ServiceMonitor and the outputs
    (:meth:`_declare_frontend`). Subclasses declare the workload in between.

    Outputs: ``endpoint_url`` (``…/v1``), ``served_model_name``, ``image``,
    ``model_revision``, ``namespace``, ``service_name``.
    """

    args: VllmServingArgs
    """The serving arguments the component was declared with (the monitoring derives its budgets from them)."""
    endpoint_url: pulumi.Output[str | None]
    served_model_name: pulumi.Output[str]
    image: pulumi.Output[str]
    model_revision: pulumi.Output[str]
    namespace: pulumi.Output[str]
    service_name: pulumi.Output[str]

    def _declare_foundation(self, name: str, args: VllmServingArgs) -> Foundation:
        """Namespace, ServiceAccount, weights role and Secrets; returns what the workload builds on."""
        contract = args.contract
        common = common_labels(args)
        selector = app_selector(name)
        ns = args.namespace
        ns_labels = {
            **common,
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/audit": "restricted",
            "pod-security.kubernetes.io/warn": "restricted",
        }
        if args.exposure != "cluster":
            # The controller adds a readiness gate: a pod gets traffic only once the NLB target is healthy.
            ns_labels["elbv2.k8s.aws/pod-readiness-gate-inject"] = "enabled"
        self.namespace_resource = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=ns, labels=ns_labels),
            opts=pulumi.ResourceOptions(parent=self),
        )
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace_resource])

        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-service-account",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=ns, labels={**common, **selector}),
            automount_service_account_token=False,
            opts=in_ns,
        )

        self.weights_role: PodIdentityRole | None = None
        if contract.weights.source == "s3":
            bucket, prefix = contract.weights.s3_bucket, contract.weights.s3_prefix
            # WeightsContract sets both for S3 weights; validate_serving_args makes sure the cluster is named (Pod Identity).
            assert bucket is not None and prefix is not None and args.cluster_name is not None

            def policy(key: str | None) -> str:
                return json.dumps(weights_policy(bucket, prefix, args.aws_partition, key))

            document = pulumi.Output.from_input(args.weights_kms_key_arn).apply(policy)
            inline: dict[str, pulumi.Input[str]] = {"read-weights": document}
            cache_location = args.startup.cache_prefix if args.startup is not None else None  # parsed once, by the settings or ServingStartup
            if cache_location is not None:
                inline["compile-cache"] = pulumi.Output.from_input(args.weights_kms_key_arn).apply(
                    lambda key: json.dumps(compile_cache_policy(cache_location.bucket, cache_location.prefix, args.aws_partition, key))
                )
            self.weights_role = PodIdentityRole(
                f"{name}-weights",
                PodIdentityRoleArgs(
                    cluster_name=args.cluster_name,
                    namespace=ns,
                    service_account=name,
                    inline_policies=inline,
                    tags={"kimi-k3/component": "vllm-server"},
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )

        def opaque_secret(secret_name: str, data: Mapping[str, pulumi.Input[str]]) -> k8s.core.v1.Secret:
            """An Opaque Secret ``secret_name`` holding ``data``."""
            return k8s.core.v1.Secret(
                secret_name,
                metadata=k8s.meta.v1.ObjectMetaArgs(name=secret_name, namespace=ns, labels={**common, **selector}),
                type="Opaque",
                string_data=dict(data),
                opts=in_ns,
            )

        secret_names: dict[str, str] = {}
        self.api_key_secret = None
        if args.api_key is not None:
            key_secret = api_pod.api_key_secret_name(name)
            secret_names["VLLM_API_KEY"] = key_secret
            self.api_key_secret = opaque_secret(key_secret, api_pod.api_key_secret_data(args.api_key))
        self.hf_token_secret = None
        if args.hugging_face_token is not None and contract.weights.source == "huggingface":
            secret_names["HF_TOKEN"] = f"{name}-hf-token"
            self.hf_token_secret = opaque_secret(f"{name}-hf-token", {"key": pulumi.Output.secret(args.hugging_face_token)})
        self.api_proxy_config_map = api_pod.config_map(name, args, {**common, **selector}, in_ns)
        workload_deps: list[pulumi.Resource] = [self.namespace_resource, self.api_proxy_config_map]
        self.startup_code_config_map = None
        if args.startup is not None and args.startup.needs_code:
            # The warm-up sidecar and the cache restore run the project's pod-side modules from this ConfigMap.
            self.startup_code_config_map = k8s.core.v1.ConfigMap(
                f"{name}-startup-code",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=startup_code_config_map(name), namespace=ns, labels={**common, **selector}),
                data=pod_files.config_map_data(),
                opts=in_ns,
            )
            workload_deps.append(self.startup_code_config_map)
        workload = pulumi.ResourceOptions(parent=self, depends_on=workload_deps)
        return Foundation(common=common, selector=selector, kit=PodKit(name, args, secret_names), in_namespace=in_ns, workload=workload)

    def _declare_frontend(self, name: str, args: VllmServingArgs, foundation: Foundation, api_selector: Mapping[str, str]) -> None:
        """Service (to the ``api_selector`` pods), NetworkPolicies, PDB (over every pod of the component), ServiceMonitor, outputs."""
        common, selector, in_ns = foundation.common, foundation.selector, foundation.in_namespace
        contract = args.contract
        ns = args.namespace
        proxy = api_pod.proxy_config(args)
        behind_nlb = args.exposure in nlb.EXPOSURE_SCHEMES
        port_name = api_proxy.PORT_NAMES["api"]
        service_annotations: dict[str, str] = {}
        service_type = "ClusterIP"
        source_ranges: Any = None
        # With the routing tier the Service (and the NLB) reaches the router pods, which reach the replicas.
        self.router = self._declare_router(name, args, foundation, api_selector) if args.routing is not None else None
        front_selector = self.router.selector if self.router is not None else dict(api_selector)
        front_pre_stop = args.routing.drain_plan(api_pod.front(args).drain_s, behind_nlb).pre_stop_sleep_s if args.routing is not None else api_pod.drain_plan(args).pre_stop_sleep_s
        if behind_nlb:
            service_type = "LoadBalancer"
            service_annotations = api_pod.nlb_annotations(args, proxy, pre_stop_sleep_s=front_pre_stop, service_port_name=port_name)
            source_ranges = list(args.allowed_cidrs)
        self.service = k8s.core.v1.Service(
            f"{name}-service",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=ns, labels={**common, **selector}, annotations=service_annotations or None),
            spec=k8s.core.v1.ServiceSpecArgs(
                type=service_type,
                selector=front_selector,
                ports=[k8s.core.v1.ServicePortArgs(name=port_name, port=contract.api.port, target_port=port_name, protocol="TCP")],
                load_balancer_source_ranges=source_ranges,
            ),
            opts=in_ns,
        )
        # Metrics have their own Service: a port on the API Service would be a listener on the NLB.
        metrics_port = api_proxy.PORT_NAMES["metrics"]
        self.metrics_service = k8s.core.v1.Service(
            f"{name}-metrics",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{name}-metrics", namespace=ns, labels={**common, **selector, METRICS_SERVICE_LABEL: "true"}),
            spec=k8s.core.v1.ServiceSpecArgs(
                type="ClusterIP",
                cluster_ip="None",
                selector=dict(api_selector),
                ports=[k8s.core.v1.ServicePortArgs(name=metrics_port, port=proxy.metrics_port, target_port=metrics_port, protocol="TCP")],
            ),
            opts=in_ns,
        )

        self.network_policies = network_policies(name, args, common, api_selector, in_ns)

        self.pod_disruption_budget = k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=ns, labels={**common, **selector}),
            # One pod at a time may go (as a rollout: vllm.rollout_strategy); a drain of a one-replica server proceeds.
            spec=k8s.policy.v1.PodDisruptionBudgetSpecArgs(max_unavailable=PDB_MAX_UNAVAILABLE, selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(selector))),
            opts=in_ns,
        )

        self.service_monitor = None
        if args.service_monitor:
            self.service_monitor = k8s.apiextensions.CustomResource(
                f"{name}-service-monitor",
                api_version="monitoring.coreos.com/v1",
                kind="ServiceMonitor",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=ns, labels={**common, **selector, **args.service_monitor_labels}),
                spec={
                    "selector": {"matchLabels": {**selector, METRICS_SERVICE_LABEL: "true"}},
                    "namespaceSelector": {"matchNames": [ns]},
                    "endpoints": [{"port": metrics_port, "path": api_proxy.METRICS_PATH, "interval": "30s", "scheme": "http"}],
                },
                opts=in_ns,
            )

        scheme = "https" if api_pod.front(args).tls_certificate_arn else "http"
        port = contract.api.port
        if behind_nlb:
            self.endpoint_url = self.service.status.apply(lambda status: _nlb_url(status, scheme, port))
        else:
            self.endpoint_url = pulumi.Output.from_input(f"http://{name}.{ns}.svc.cluster.local:{port}/v1")
        self.served_model_name = pulumi.Output.from_input(contract.api.served_model_name)
        self.image = pulumi.Output.from_input(contract.image.image)
        self.model_revision = pulumi.Output.from_input(contract.weights.revision)
        self.namespace = self.namespace_resource.metadata.apply(_name_of)
        self.service_name = self.service.metadata.apply(_name_of)

    def _declare_router(self, name: str, args: VllmServingArgs, foundation: Foundation, api_selector: Mapping[str, str]) -> router.RouterTier:
        """The routing tier (:mod:`kimi_k3.serving.router`): who may call it is who may call the API without it."""
        routing = args.routing
        assert routing is not None
        proxy = api_pod.proxy_config(args)
        behind_nlb = args.exposure in nlb.EXPOSURE_SCHEMES
        config = router.config_for(
            name, args.namespace, routing, routes=(*api_proxy.DEFAULT_ROUTES, *proxy.extra_routes),
            max_generation_s=proxy.max_generation_s, drain_s=proxy.drain_s, api_port=args.contract.api.port,
            check_key=proxy.check_api_key, limits=proxy.limits,
        )

        def ingress(vpc_cidr: str | None) -> list[k8s.networking.v1.NetworkPolicyIngressRuleArgs]:
            peers = [k8s.networking.v1.NetworkPolicyPeerArgs(namespace_selector=_namespaces(args.client_namespaces))]
            peers += client_peers(args.allowed_cidrs, vpc_cidr) if behind_nlb else []
            health = [k8s.networking.v1.NetworkPolicyPeerArgs(ip_block=k8s.networking.v1.IPBlockArgs(cidr=vpc_cidr))] if behind_nlb and vpc_cidr else None
            return router.ingress_rules(config, peers, health)

        return router.declare_router(
            name, namespace=args.namespace, routing=routing, config=config, plan=routing.drain_plan(proxy.drain_s, behind_nlb),
            api_selector=api_selector, common=foundation.common, ingress=pulumi.Output.from_input(args.vpc_cidr).apply(ingress),
            opts=foundation.in_namespace, await_rollout=args.await_rollout,
            key_secret=api_pod.api_key_secret_name(name) if proxy.check_api_key else None,
        )

    def _declare_block_end(self, name: str, args: VllmServingArgs, foundation: Foundation, target: block_end.ScaleTarget) -> None:
        """The block-end drain of the workload ``target`` (:mod:`kimi_k3.serving.block_end`), when the args name a block."""
        plan = api_pod.block_end(args)
        self.block_end_plan = plan
        self.block_end_cron_job = None
        if plan is not None:
            self.block_end_cron_job = block_end.declare_block_end_drain(
                name, namespace=args.namespace, plan=plan, target=target, image=args.proxy_image, common=foundation.common, opts=foundation.in_namespace,
            )

    def _register(self) -> None:
        """Register the outputs (once, last)."""
        self.register_outputs(
            {
                "endpointUrl": self.endpoint_url,
                "servedModelName": self.served_model_name,
                "image": self.image,
                "modelRevision": self.model_revision,
                "namespace": self.namespace,
                "serviceName": self.service_name,
            }
        )


def common_labels(args: VllmServingArgs) -> dict[str, str]:
    """Labels on every Kubernetes object of a serving component."""
    return {"app.kubernetes.io/part-of": "kimi-k3", "app.kubernetes.io/managed-by": "pulumi", **args.labels}


def app_selector(name: str) -> dict[str, str]:
    """Labels selecting every pod of the serving component called ``name``."""
    return {"app.kubernetes.io/name": APP_NAME, "app.kubernetes.io/instance": name}


def scrape_annotations(args: VllmServingArgs) -> dict[str, str]:
    """``prometheus.io/*`` annotations of the API pods (the proxy's metrics port), unless a ServiceMonitor scrapes them."""
    return api_pod.scrape_annotations(args)


SECRET_ENV_SKIP = "CKV_K8S_35=vLLM reads its API key only from VLLM_API_KEY or --api-key; the env var comes from a secretKeyRef so the key is in neither the args nor the spec"
"""checkov skip (with its reason) for the API key handed over as an environment variable."""



def checkov_skips(args: VllmServingArgs, *reasons: str) -> dict[str, str]:
    """``checkov.io/skipN`` annotations: the given reasons, plus the floating-tag one when the image has no digest."""
    if not args.contract.image.pinned:
        reasons = (*reasons, FLOATING_TAG_SKIP)
    return {f"checkov.io/skip{i}": reason for i, reason in enumerate(reasons, start=1)}


def _namespaces(names: tuple[str, ...]) -> k8s.meta.v1.LabelSelectorArgs:
    """Selector of the named namespaces; every namespace when ``names`` is empty."""
    if not names:
        return k8s.meta.v1.LabelSelectorArgs()
    return k8s.meta.v1.LabelSelectorArgs(
        match_expressions=[k8s.meta.v1.LabelSelectorRequirementArgs(key="kubernetes.io/metadata.name", operator="In", values=list(names))]
    )


def egress_rules(args: VllmServingArgs) -> pulumi.Output[list[k8s.networking.v1.NetworkPolicyEgressRuleArgs]]:
    """What a serving pod may reach: cluster DNS; HTTPS outside the VPC (S3 through its gateway endpoint, Hugging Face,
    allowlisted media hosts) but not inside it nor link-local; the Pod Identity Agent (S3 weights) on port 80.

    Nothing else: the engine listens on loopback and calls nothing in the cluster; the kubelet pulls the images.
    """
    np = k8s.networking.v1

    def build(vpc_cidr: str | None) -> list[k8s.networking.v1.NetworkPolicyEgressRuleArgs]:
        excluded = [c for c in (vpc_cidr, LINK_LOCAL_CIDR) if c]
        egress = [
            np.NetworkPolicyEgressRuleArgs(
                to=[np.NetworkPolicyPeerArgs(
                    namespace_selector=_namespaces(("kube-system",)),
                    pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"k8s-app": "kube-dns"}),
                )],
                ports=[np.NetworkPolicyPortArgs(port=53, protocol="UDP"), np.NetworkPolicyPortArgs(port=53, protocol="TCP")],
            ),
            np.NetworkPolicyEgressRuleArgs(
                to=[np.NetworkPolicyPeerArgs(ip_block=np.IPBlockArgs(cidr="0.0.0.0/0", except_=excluded))],
                ports=[np.NetworkPolicyPortArgs(port=443, protocol="TCP")],
            ),
        ]
        if args.contract.weights.source == "s3":
            egress.append(
                np.NetworkPolicyEgressRuleArgs(to=[np.NetworkPolicyPeerArgs(ip_block=np.IPBlockArgs(cidr=POD_IDENTITY_AGENT_CIDR))], ports=[np.NetworkPolicyPortArgs(port=80, protocol="TCP")])
            )
        return egress

    return pulumi.Output.from_input(args.vpc_cidr).apply(build)


def client_peers(allowed_cidrs: tuple[str, ...], vpc_cidr: str | None) -> list[k8s.networking.v1.NetworkPolicyPeerArgs]:
    """ipBlocks of the clients allowed through the NLB (client IP preservation keeps their addresses).

    A client CIDR that contains the VPC leaves the VPC out (``except``): pods take their addresses
    from the VPC's subnets, and an ipBlock matches pod addresses too, so ``10.0.0.0/8`` would
    otherwise admit every pod of the cluster whatever ``client_namespaces`` says. In-cluster
    clients are admitted by namespace; a client subnet inside the VPC is admitted as listed.
    """
    np = k8s.networking.v1
    vpc = ipaddress.IPv4Network(vpc_cidr) if vpc_cidr else None
    peers = []
    for cidr in allowed_cidrs:
        net = ipaddress.IPv4Network(cidr)
        excluded = [str(vpc)] if vpc is not None and vpc.subnet_of(net) else None
        peers.append(np.NetworkPolicyPeerArgs(ip_block=np.IPBlockArgs(cidr=cidr, except_=excluded)))
    return peers


def network_policies(name: str, args: VllmServingArgs, common: Mapping[str, str], api_selector: Mapping[str, str], opts: pulumi.ResourceOptions) -> list[k8s.networking.v1.NetworkPolicy]:
    """Default deny for the namespace, plus ``{name}-server`` for the API pods, port by port.

    * API port: pods of ``client_namespaces`` (every namespace when empty) and, behind an NLB,
      the client CIDRs (:func:`client_peers`);
    * metrics port: the monitoring namespace only;
    * probe port: the NLB health checks (from the VPC: the NLB's nodes live in its subnets; the
      port answers ``/health`` and ``/livez`` only). Behind the routing tier the API and probe
      ports admit the router pods only (:func:`kimi_k3.serving.router.router_peers`). The kubelet needs no rule: the VPC CNI's
      network policy agent always admits the node's own address;
    * egress: :func:`egress_rules`.
    """
    ns = args.namespace
    np = k8s.networking.v1
    proxy = api_pod.proxy_config(args)
    deny = np.NetworkPolicy(
        f"{name}-default-deny",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{name}-default-deny", namespace=ns, labels=dict(common)),
        spec=np.NetworkPolicySpecArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs(), policy_types=["Ingress", "Egress"]),
        opts=opts,
    )
    in_cluster = [np.NetworkPolicyPeerArgs(namespace_selector=_namespaces(args.client_namespaces))]
    behind_nlb = args.exposure in nlb.EXPOSURE_SCHEMES

    def ingress(vpc_cidr: str | None) -> list[k8s.networking.v1.NetworkPolicyIngressRuleArgs]:
        if args.routing is not None:
            # Behind the routing tier only the router pods reach the API port (their X-Forwarded-For is trusted) and the probe port.
            peers = router.router_peers(name)
            return api_proxy.ingress_rules(proxy, api_peers=peers, metrics_namespace=args.metrics_namespace, health_check_peers=router.router_peers(name))
        peers = in_cluster + (client_peers(args.allowed_cidrs, vpc_cidr) if behind_nlb else [])
        health = [np.NetworkPolicyPeerArgs(ip_block=np.IPBlockArgs(cidr=vpc_cidr))] if behind_nlb and vpc_cidr else None
        return api_proxy.ingress_rules(proxy, api_peers=peers, metrics_namespace=args.metrics_namespace, health_check_peers=health)

    server = np.NetworkPolicy(
        f"{name}-server",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{name}-server", namespace=ns, labels=dict(common)),
        spec=np.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(api_selector)),
            policy_types=["Ingress", "Egress"],
            ingress=pulumi.Output.from_input(args.vpc_cidr).apply(ingress),
            egress=egress_rules(args),
        ),
        opts=opts,
    )
    return [deny, server]


def _name_of(metadata: Any) -> str:
    """``metadata.name`` of a typed SDK output or of its plain form."""
    return str(metadata.name if hasattr(metadata, "name") else metadata["name"])


def _nlb_url(status: Any, scheme: str, port: int) -> str | None:
    """``scheme://<nlb hostname>:port/v1`` from a Service status, ``None`` until the NLB exists."""
    def get(obj: Any, key: str, attr: str) -> Any:
        if obj is None:
            return None
        if hasattr(obj, attr):  # typed SDK output (a dict subclass keyed by wire names)
            return getattr(obj, attr)
        return obj.get(key) if isinstance(obj, dict) else None

    ingress = get(get(status, "loadBalancer", "load_balancer"), "ingress", "ingress") or []
    host = get(ingress[0], "hostname", "hostname") if ingress else None
    return f"{scheme}://{host}:{port}/v1" if host else None


__all__ = [
    "APP_NAME",
    "METRICS_SERVICE_LABEL",
    "POD_IDENTITY_AGENT_CIDR",
    "SECRET_ENV_SKIP",
    "Foundation",
    "VllmServingBase",
    "checkov_skips",
    "client_peers",
    "egress_rules",
    "scrape_annotations",
    "weights_policy",
]
