"""Composition of the components for one stack: settings in, wired components out.

Everything that can refuse the stack (settings, the Capacity Block look-up, AZ
resolution) happens before the first resource is declared.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.addons.gpu_plugins import DcgmExporterArgs, EfaDevicePluginArgs, GpuNodePlugins, GpuNodePluginsArgs, NvidiaDevicePluginArgs
from kimi_k3.addons.load_balancer_controller import LoadBalancerController, LoadBalancerControllerArgs
from kimi_k3.addons.lws_controller import LwsController, LwsControllerArgs
from kimi_k3.addons.prometheus_operator import CRD_GROUP as PROMETHEUS_CRD_GROUP
from kimi_k3.addons.prometheus_operator import PrometheusOperator, PrometheusOperatorArgs
from kimi_k3.capacity.assessment import BlockNeeds, assess, verdict
from kimi_k3.capacity.delivery_check import ALARM_NAME_MAX, DeliveryCheck, alarm_name
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.capacity.lookup import CapacityBlockNotFound, lookup_or_recorded
from kimi_k3.capacity.node_group import (
    FAST_IMAGE_PULL_ROOT_IOPS,
    FAST_IMAGE_PULL_ROOT_THROUGHPUT_MIBPS,
    CapacityBlockNodeGroup,
    CapacityBlockNodeGroupArgs,
)
from kimi_k3.cluster.deploy_runner import DeployRunner, DeployRunnerArgs
from kimi_k3.cluster.deploy_runner import project_name_for as deploy_project_name
from kimi_k3.cluster.eks import Cluster, ClusterArgs
from kimi_k3.core.args_check import checked_component
from kimi_k3.core.names import fit
from kimi_k3.errors import UserError
from kimi_k3.network.vpc import ExistingNetworkArgs, Network, NetworkArgs
from kimi_k3.observability.monitoring import ServingMonitoring
from kimi_k3.serving.base import VllmServingBase
from kimi_k3.serving.block_end import BlockEnd
from kimi_k3.serving.block_end import iso as block_end_iso
from kimi_k3.serving.contracts import ServingContract, contract_summary
from kimi_k3.serving.lws import VllmLeaderWorkerSet, VllmLeaderWorkerSetArgs
from kimi_k3.serving.vllm import VllmServer, VllmServerArgs
from kimi_k3.stack import previous_run, time_to_serve
from kimi_k3.stack import terms as stack_terms
from kimi_k3.stack.foundation import StackFoundation, availability_zones, existing_private_subnets, secret_input
from kimi_k3.stack.monitoring import alerts_and_dashboard, dcgm_extra_values, delivery_check_args, serving_scrape_fields
from kimi_k3.stack.settings import StackSettings
from kimi_k3.stack.settings import cluster_name as stack_cluster_name
from kimi_k3.weights import time_to_serve as tts_component


@dataclass(frozen=True)
class ResolvedStack:
    """What the stack resolves to before anything is declared: facts read from AWS, the contract, the replica count.

    (Not to be confused with the settings' ``environment``, ``dev`` or ``prod``.)
    """

    reservation: CapacityBlockFacts
    """The Capacity Block ``capacity.reservation_id`` as read from AWS (``aws.ec2.get_capacity_block_reservation``)."""
    availability_zones: tuple[str, ...]
    """AZs of the network, the Capacity Block's first."""
    warnings: tuple[str, ...]
    """Non-fatal findings of assessing the block against the stack (:func:`~kimi_k3.capacity.assessment.verdict`), printed once."""
    existing_private_subnets_by_az: dict[str, str]
    """With an existing VPC: its private subnet of each AZ (from ``aws.ec2.get_subnet``)."""
    contract: ServingContract
    """The serving contract (image, weights, API, engine) built from the settings."""
    replicas: int
    """Serving replicas: configured, or one per group of reserved nodes."""


def resolve_stack(settings: StackSettings, now: datetime, recorded: CapacityBlockFacts | None = None) -> ResolvedStack:
    """Look the reservation up, derive the AZs and assess the block against the stack at ``now``.

    ``recorded``: the block as the stack's previous ``up`` recorded it (:func:`previous_run.recorded_block`): a block EC2
    no longer returns whose recorded end has passed is taken as ended (:func:`~kimi_k3.capacity.lookup.lookup_or_recorded`),
    so the stack stays updatable after its block; one warning says so.

    Raises :class:`UserError` (in the stack's config keys) for a block that cannot back the
    stack; the warnings are returned, to print once.
    """
    gone: list[str] = []
    try:
        block, line = lookup_or_recorded(settings.capacity.reservation_id, recorded, now, region=settings.region)
    except CapacityBlockNotFound as err:
        raise UserError(f"{err}. {stack_terms.BLOCK_NOT_FOUND_HINT}") from None
    if line is not None:
        gone.append(f"{line}; set {stack_terms.CAPACITY_BLOCK.reservation} to a new block, or `pulumi destroy`")
    existing = existing_private_subnets(settings)
    azs = tuple(existing) if existing else availability_zones(settings, block.availability_zone)
    needs = BlockNeeds(instance_type=settings.capacity.instance_type, nodes_required=settings.nodes_required, availability_zones=azs)
    warnings = [*gone, *verdict(assess(block, needs, now, stack_terms.CAPACITY_BLOCK))]
    contract = settings.serving.contract
    replicas = settings.replicas_for(block.instance_count)
    return ResolvedStack(
        reservation=block,
        availability_zones=azs,
        warnings=tuple(warnings),
        existing_private_subnets_by_az=existing,
        contract=contract,
        replicas=replicas,
    )


def deploy_runner_name(name: str) -> str:
    """Name of the stack's :class:`DeployRunner` component (``kimi-k3 first-deploy`` finds its URN by it)."""
    return f"{name}-deploy-runner"


@checked_component
class Platform(pulumi.ComponentResource):
    """Kimi K3 on AWS for one stack: network, EKS, Capacity Block GPU nodes, plugins, vLLM.

    A ``hyperpod`` stack (``settings.hyperpod``) declares the same network and EKS cluster,
    then the SageMaker HyperPod pieces instead of the GPU node group and vLLM
    (:mod:`kimi_k3.stack.hyperpod`, which this class delegates to).
    """

    prometheus_operator: PrometheusOperator | None = None
    """kube-prometheus-stack (``prometheusOperatorEnabled`` and ``prometheusOperatorInstall``), else ``None``."""
    deploy_runner: DeployRunner | None = None
    """The in-VPC deploy runner (``kimi-k3:deployRunner``), else ``None``."""
    hyperpod: Any = None
    """The HyperPod composition of a ``hyperpod`` stack (:class:`kimi_k3.stack.hyperpod.HyperPodServing`), else ``None``."""

    def __init__(self, name: str, settings: StackSettings, *, now: datetime, opts: pulumi.ResourceOptions | None = None) -> None:
        """Resolve the stack (:func:`resolve_stack`), then declare every component.

        :param name: base name of every resource of the stack.
        :param settings: validated stack settings (see :mod:`kimi_k3.stack.settings`).
        :param now: the moment the program runs (UTC), read once by the entry point
            (``kimi_k3.core.clock.program_now()``); the Capacity Block checks and the
            scale-up schedule are decided against it.
        :param opts: options of the component itself.
        """
        if settings.hyperpod is not None:
            self._compose_hyperpod(name, settings, now=now, opts=opts)
            return
        self._resolve(name, settings, now)
        tags = self._declare_foundation(name, settings, self.resolved, opts)
        self.gpu_nodes = self._declare_gpu_nodes(name, settings, now, tags)
        # Every Kubernetes-touching component gets the cluster's provider through its options.
        in_cluster = pulumi.ResourceOptions(parent=self, providers={"kubernetes": self.cluster.provider})
        # The operator's CRDs before anything of its kinds (ServiceMonitors, the PrometheusRule): installed, or read.
        self.prometheus_operator, operator_deps = self._declare_prometheus_operator(name, in_cluster)
        serving_deps = self._declare_serving_addons(name, in_cluster, operator_deps, tags)
        self.time_to_serve = self._declare_time_to_serve(name, in_cluster, tags)
        if self.time_to_serve is not None:
            serving_deps.append(self.time_to_serve)
        self.server = self._declare_server(name, now, pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=serving_deps)))
        self._warn_block_end()
        self.monitoring = self._declare_monitoring(name, pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=operator_deps)))
        self.delivery_check = self._declare_delivery_check(name, now, tags)
        self.register_outputs(self.stack_outputs())

    def _resolve(self, name: str, settings: StackSettings, now: datetime) -> None:
        """The stack as AWS and the previous ``up`` have it: the block, the AZs and the one-off schedules still ahead."""
        previous = previous_run.read_stack_resources()
        self.resolved = resolve_stack(settings, now, previous_run.recorded_block(previous, settings.capacity.reservation_id))
        # The one-off schedules a previous `up` created keep a time that lies ahead (kimi_k3.stack.previous_run).
        self.pending = previous_run.pending_schedules(
            previous, reservation_id=self.resolved.reservation.reservation_id,
            alarm=self.delivery_alarm_name(name, pulumi.get_stack()) if settings.monitoring.delivery_check else None,
        )

    def _declare_gpu_nodes(self, name: str, settings: StackSettings, now: datetime, tags: dict[str, str]) -> CapacityBlockNodeGroup:
        """The Capacity Block's GPU node group, scaled on the block's window."""
        cap = settings.capacity
        return CapacityBlockNodeGroup(
            f"{name}-gpu",
            CapacityBlockNodeGroupArgs(
                cluster_name=self.cluster.cluster_name,
                kubernetes_version=settings.cluster.version,
                subnet_ids_by_az=self.network.private_subnet_ids_by_az,
                instance_type=cap.instance_type,
                now=now,
                reservation=self.resolved.reservation,
                ami_release_version=cap.ami_release_version,
                root_volume_gib=cap.root_volume_gib,
                # FastImagePull writes the image to the root volume on the pinned AMI (kimi_k3.offline.image_store).
                root_volume_throughput_mibps=FAST_IMAGE_PULL_ROOT_THROUGHPUT_MIBPS if settings.time_to_serve.fast_image_pull else None,
                root_volume_iops=FAST_IMAGE_PULL_ROOT_IOPS if settings.time_to_serve.fast_image_pull else None,
                efa_enabled=cap.efa_enabled,
                # The same node security group as the system nodes: it admits all traffic from
                # itself (CoreDNS on system nodes, EFA between GPU nodes) and the control plane.
                security_group_ids=[self.cluster.node_security_group_id],
                vpc_id=self.network.vpc_id,
                node_role_arn=self.cluster.node_role_arn,
                alert_email=cap.alert_email,
                nodes_required=settings.nodes_required,
                tags=tags,
                user_data_parts=time_to_serve.user_data_parts(settings),
                pending_scale_up_at=self.pending.scale_up_at,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.cluster]),
        )

    def _declare_serving_addons(
        self, name: str, in_cluster: pulumi.ResourceOptions, operator_deps: list[pulumi.Resource], tags: dict[str, str]
    ) -> list[pulumi.Resource]:
        """The GPU node plugins, the load balancer controller (an NLB exposure) and the LWS controller (a replica across nodes);
        returns what the serving workload must depend on."""
        settings = self.settings
        plugins, cap, serving = settings.plugins, settings.capacity, settings.serving
        self.gpu_plugins = GpuNodePlugins(
            f"{name}-gpu-plugins",
            GpuNodePluginsArgs(
                nvidia=NvidiaDevicePluginArgs(version=plugins.nvidia_device_plugin_version),
                efa=EfaDevicePluginArgs(enabled=cap.efa_enabled, version=plugins.efa_device_plugin_version, region=settings.region),
                dcgm=DcgmExporterArgs(
                    enabled=plugins.dcgm_exporter_enabled,
                    version=plugins.dcgm_exporter_version,
                    service_monitor=serving.service_monitor_enabled,
                    extra_values=dcgm_extra_values(settings),
                    depends_on=operator_deps if serving.service_monitor_enabled else (),
                ),
            ),
            opts=in_cluster,
        )
        self.load_balancer_controller: LoadBalancerController | None = None
        if serving.exposure != "cluster":
            self.load_balancer_controller = LoadBalancerController(
                f"{name}-lb-controller",
                LoadBalancerControllerArgs(cluster_name=self.cluster.cluster_name, region=settings.region, vpc_id=self.network.vpc_id, tags=tags),
                opts=in_cluster,
            )
        # One node holds a replica: a Deployment. A replica across nodes (TP within a node x PP
        # across nodes): a LeaderWorkerSet, whose controller comes from its Helm chart.
        self.lws_controller: LwsController | None = None
        serving_deps: list[pulumi.Resource] = [r for r in (self.gpu_plugins, self.load_balancer_controller) if r is not None]
        if serving.service_monitor_enabled:
            serving_deps.extend(operator_deps)
        if settings.nodes_per_replica > 1:
            self.lws_controller = LwsController(f"{name}-lws", LwsControllerArgs(), opts=in_cluster)
            serving_deps.append(self.lws_controller)
        return serving_deps

    def _serving_args(self, now: datetime) -> dict[str, Any]:
        """The serving component's args: the contract, secrets, replicas, exposure, the time-to-serve wiring, the block's end,
        the routing tier and the serving front (one value, as the settings built it)."""
        settings, resolved = self.settings, self.resolved
        serving = settings.serving
        return dict(
            contract=resolved.contract,
            api_key=secret_input(serving.api_key),
            hugging_face_token=secret_input(serving.hugging_face_token),
            cluster_name=self.cluster.cluster_name,
            aws_region=settings.region,
            instance_type=settings.capacity.instance_type,
            replicas=resolved.replicas,
            exposure=serving.exposure,
            allowed_cidrs=serving.allowed_cidrs,
            vpc_cidr=self.network.vpc_cidr,
            service_monitor=serving.service_monitor_enabled,
            **serving_scrape_fields(settings),
            weights_kms_key_arn=settings.deployment.weights_kms_key_arn,
            startup=time_to_serve.serving_startup(settings, multi_node=settings.nodes_per_replica > 1),
            block_end=BlockEnd(ends_at=resolved.reservation.window()[1], now=now),
            # The routing tier (docs/routing.md): with two or more replicas, unless conversationRouting is off.
            routing=serving.routing_for(resolved.replicas),
            front=serving.front,
        )

    def _declare_server(self, name: str, now: datetime, opts: pulumi.ResourceOptions) -> VllmServingBase:
        """vLLM: a Deployment (a replica on one node) or a LeaderWorkerSet (a replica across nodes)."""
        serving_args = self._serving_args(now)
        if self.lws_controller:
            return VllmLeaderWorkerSet(f"{name}-serving", VllmLeaderWorkerSetArgs(**serving_args), opts=opts)
        return VllmServer(f"{name}-serving", VllmServerArgs(**serving_args), opts=opts)

    def _warn_block_end(self) -> None:
        """Say when this run comes too late for the block-end drain (:mod:`kimi_k3.serving.block_end`)."""
        plan = self.server.block_end_plan
        if plan is None:
            return
        if not plan.serving:
            pulumi.log.warn(
                f"the block-end drain's stop time {block_end_iso(plan.stop_at)} has passed: the serving workload is declared with 0 replicas "
                f"(the Capacity Block ends {block_end_iso(plan.ends_at)}; EKS scales its nodes to 0 at {block_end_iso(plan.scale_down_at)})"
            )
        elif plan.late:
            assert plan.fires_at is not None
            pulumi.log.warn(
                f"the block-end drain fires at {block_end_iso(plan.fires_at)}, after the {block_end_iso(plan.stop_at)} the whole drain needs: "
                f"requests still running at EKS's scale-down ({block_end_iso(plan.scale_down_at)}) are cut"
            )

    def _declare_time_to_serve(self, name: str, in_cluster: pulumi.ResourceOptions, tags: dict[str, str]) -> tts_component.TimeToServe | None:
        """Weights bucket, staging Job, node-local storage, image pre-pull and pull-through cache (the ``Time to serve`` keys),
        and the start-up estimate's warnings (:mod:`kimi_k3.stack.time_to_serve`)."""
        s = self.settings
        start, end = self.resolved.reservation.window()
        lines, warnings = time_to_serve.estimate_lines(s, (end - start).total_seconds() / 3600)
        self.startup_estimate = lines
        for warning in warnings:
            pulumi.log.warn(warning)
        args = time_to_serve.args_from_settings(
            s, cluster_name=self.cluster.cluster_name, node_role_name=self.cluster.node_role.name,
            hugging_face_token=secret_input(s.serving.hugging_face_token), tags=tags,
        )
        if not tts_component.declares_anything(args):
            return None
        return tts_component.TimeToServe(f"{name}-time-to-serve", args, opts=in_cluster)

    def _declare_prometheus_operator(self, name: str, in_cluster: pulumi.ResourceOptions) -> tuple[PrometheusOperator | None, list[pulumi.Resource]]:
        """kube-prometheus-stack and its namespace (``prometheusOperatorEnabled`` with ``prometheusOperatorInstall``), or, where
        the operator lives outside the stack, reads of the CRDs the stack's objects need (a preview fails on a missing one).
        Returns the operator (or ``None``) and what the objects of its kinds must depend on."""
        s = self.settings
        mon = s.monitoring
        provider = pulumi.ResourceOptions(parent=self, provider=self.cluster.provider)
        # Namespaces the stack's monitoring objects go into but does not create: they must exist (read, so a preview fails on a missing one).
        installs = mon.prometheus_operator and mon.install_operator
        existing = {mon.dashboard_namespace} if mon.prometheus_operator else set()
        if mon.prometheus_operator and not installs:
            existing.add(mon.namespace)
        existing.discard(mon.namespace if installs else "")
        reads: list[pulumi.Resource] = [k8s.core.v1.Namespace.get(f"{name}-namespace-{ns}", ns, opts=provider) for ns in sorted(existing)]
        if installs:
            operator = PrometheusOperator(
                f"{name}-prometheus-operator", PrometheusOperatorArgs(version=mon.operator_chart_version, namespace=mon.namespace), opts=in_cluster,
            )
            return operator, [operator, *reads]
        kinds = (["prometheusrules"] if mon.prometheus_operator else []) + (["servicemonitors"] if s.serving.service_monitor_enabled else [])
        reads += [
            k8s.apiextensions.v1.CustomResourceDefinition.get(f"{name}-crd-{plural}", f"{plural}.{PROMETHEUS_CRD_GROUP}", opts=provider) for plural in kinds
        ]
        return None, reads

    def _declare_monitoring(self, name: str, in_cluster: pulumi.ResourceOptions) -> ServingMonitoring | None:
        """The PrometheusRule and the dashboard (``kimi-k3:prometheusOperatorEnabled``), keyed on the reservation as it is now."""
        if not self.settings.monitoring.prometheus_operator:
            return None
        args = alerts_and_dashboard(self.settings, self.resolved.reservation, self.server.args)
        return ServingMonitoring(f"{name}-monitoring", args, opts=in_cluster)

    def _declare_delivery_check(self, name: str, now: datetime, tags: dict[str, str]) -> DeliveryCheck | None:
        """The CloudWatch delivery check on the GPU node group's ASG (``kimi-k3:deliveryCheckEnabled``)."""
        if not self.settings.monitoring.delivery_check:
            return None
        args = delivery_check_args(
            self.resolved.reservation, asg_name=self.gpu_nodes.asg_name, alert_topic_arn=self.gpu_nodes.alert_topic_arn, now=now, tags=tags,
            pending_switch_on_at=self.pending.switch_on_at, pending_switch_off_at=self.pending.switch_off_at,
            pending_state_reset_at=self.pending.state_reset_at,
            alarm_name=self.delivery_alarm_name(name, pulumi.get_stack()),
        )
        return DeliveryCheck(self._delivery_check_name(name), args, opts=pulumi.ResourceOptions(parent=self, depends_on=[self.gpu_nodes]))

    @staticmethod
    def _delivery_check_name(name: str) -> str:
        """Name of the stack's :class:`DeliveryCheck` component."""
        return f"{name}-delivery-check"

    @staticmethod
    def delivery_alarm_name(name: str, stack: str) -> str:
        """The delivery alarm's name in ``stack``: CloudWatch alarm names are unique per account and region, so it carries
        the cluster name (``kimi-k3-dev-delivery-check-gpu-instances-in-service``): dev and prod may share both."""
        return fit(alarm_name(f"{stack_cluster_name(name, stack)}-delivery-check"), ALARM_NAME_MAX)

    @staticmethod
    def _cluster_access(settings: StackSettings) -> dict[str, Any]:
        """Who reaches the cluster: the role the Kubernetes provider assumes and the read-only viewers (docs/access.md)."""
        access = settings.deployment
        return {"kubeconfig_role_arn": access.kubeconfig_role_arn, "viewer_role_arns": access.viewer_role_arns}

    def _declare_foundation(self, name: str, settings: StackSettings, resolved: StackFoundation, opts: pulumi.ResourceOptions | None) -> dict[str, str]:
        """Print the resolved stack's warnings, register the component, then declare the network and the EKS cluster
        (the same on both serving platforms); returns the tags of every AWS resource."""
        for warning in resolved.warnings:
            pulumi.log.warn(warning)
        super().__init__("kimi-k3:index:Platform", name, None, opts)
        self.settings = settings
        self.cluster_name = stack_cluster_name(name, pulumi.get_stack())
        tags = {"Project": "kimi-k3", "Stack": pulumi.get_stack(), "Environment": settings.environment, "ManagedBy": "pulumi"}
        self._declare_network(name, settings, resolved.availability_zones, resolved.existing_private_subnets_by_az, tags)
        self.deploy_runner = self._declare_deploy_runner(name, settings, tags)
        self._declare_cluster(name, settings, tags)
        return tags

    def _declare_network(
        self, name: str, settings: StackSettings, availability_zones: tuple[str, ...], existing_private_subnets_by_az: dict[str, str], tags: dict[str, str]
    ) -> None:
        """The stack's VPC (or the existing one), in ``availability_zones``: the same on both serving platforms."""
        child = pulumi.ResourceOptions(parent=self)
        net = settings.network
        if net.existing_vpc_id:
            self.network = Network.from_existing(
                f"{name}-network",
                ExistingNetworkArgs(
                    vpc_id=net.existing_vpc_id,
                    private_subnet_ids_by_az=existing_private_subnets_by_az,
                    public_subnet_ids=net.existing_public_subnet_ids,
                    availability_zones=availability_zones,
                ),
                opts=child,
            )
        else:
            self.network = Network(
                f"{name}-network",
                NetworkArgs(
                    cluster_name=self.cluster_name,
                    availability_zones=availability_zones,
                    vpc_cidr=net.vpc_cidr,
                    nat_mode=net.nat_mode,
                    flow_log_retention_days=net.flow_log_retention_days,
                    private_subnet_prefix=net.private_subnet_prefix,
                    public_subnet_prefix=net.public_subnet_prefix,
                    region=settings.region,
                    interface_endpoint_services=settings.deployment.interface_endpoints,
                    tags=tags,
                ),
                opts=child,
            )

    def _declare_deploy_runner(self, name: str, settings: StackSettings, tags: dict[str, str]) -> DeployRunner | None:
        """The in-VPC CodeBuild deploy runner (``kimi-k3:deployRunner``, docs/first-deploy.md): it depends on the network
        only, so ``pulumi up --target`` can create both before the cluster (``kimi-k3 first-deploy``)."""
        runner = settings.deployment.runner
        if runner is None:
            return None
        return DeployRunner(
            deploy_runner_name(name),
            DeployRunnerArgs(
                project_name=deploy_project_name(self.cluster_name),
                stack=pulumi.get_stack(),
                vpc_id=self.network.vpc_id,
                subnet_ids=list(self.network.private_subnet_ids_by_az.values()),
                deploy_role_arn=runner.deploy_role_arn,
                secret_arn=runner.secret_arn,
                source_url=runner.source_url,
                tags=tags,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _api_ingress_security_groups(self, settings: StackSettings) -> dict[str, Any]:
        """The security groups the cluster admits on 443: the configured ones and the deploy runner's."""
        groups: dict[str, Any] = {group: group for group in settings.cluster.api_ingress_security_group_ids}
        if self.deploy_runner is not None:
            groups["deploy-runner"] = self.deploy_runner.security_group_id
        return groups

    def _declare_cluster(self, name: str, settings: StackSettings, tags: dict[str, str]) -> None:
        """The EKS cluster (the orchestrator on a ``hyperpod`` stack): the same on both serving platforms."""
        child = pulumi.ResourceOptions(parent=self)
        c = settings.cluster
        self.cluster = Cluster(
            f"{name}-cluster",
            ClusterArgs(
                cluster_name=self.cluster_name,
                version=c.version,
                vpc_id=self.network.vpc_id,
                private_subnet_ids=list(self.network.private_subnet_ids_by_az.values()),
                admin_role_arns=c.admin_role_arns,
                endpoint_public_access=c.endpoint_public_access,
                public_access_cidrs=c.public_access_cidrs if c.endpoint_public_access else (),
                api_ingress_cidrs=c.api_ingress_cidrs,
                api_ingress_security_groups=self._api_ingress_security_groups(settings),
                service_cidr=c.service_cidr,
                log_retention_days=c.log_retention_days,
                system_node_instance_type=c.system_node_instance_type,
                system_node_count=c.system_node_count,
                system_node_disk_gib=c.system_node_disk_gib,
                deletion_protection=settings.production,
                **self._cluster_access(settings),
                tags=tags,
            ),
            opts=child,
        )

    def _compose_hyperpod(self, name: str, settings: StackSettings, *, now: datetime, opts: pulumi.ResourceOptions | None) -> None:
        """A ``hyperpod`` stack: read and check the training plan, then network, EKS and the HyperPod pieces."""
        from kimi_k3.stack import hyperpod as hyperpod_platform  # only hyperpod stacks load it (and pulumi-aws-native)
        resolved = hyperpod_platform.resolve_hyperpod_stack(settings, now)
        tags = self._declare_foundation(name, settings, resolved, opts)
        self.hyperpod = hyperpod_platform.HyperPodServing(self, self.network, self.cluster, name, settings, resolved, tags)
        self.register_outputs(self.stack_outputs())

    def stack_outputs(self) -> dict[str, Any]:
        """The stack outputs ``__main__.py`` exports."""
        if self.hyperpod is not None:
            return self.hyperpod.stack_outputs()
        block = self.resolved.reservation
        start, end = block.window()
        s = self.settings
        return {
            "region": s.region,
            "vpcId": self.network.vpc_id,
            "environment": s.environment,
            "availabilityZones": list(self.resolved.availability_zones),
            "capacityBlock": {
                "id": block.reservation_id,
                "state": block.state,
                "availabilityZone": block.availability_zone,
                "instanceType": block.instance_type,
                "instanceCount": block.instance_count,
                "start": start.isoformat(),
                "end": end.isoformat(),
            },
            "gpuNodes": block.instance_count,
            "gpusTotal": block.instance_count * s.instance.gpus,
            "replicas": self.resolved.replicas,
            "clusterName": self.cluster.cluster_name,
            "clusterEndpoint": self.cluster.endpoint,
            "deployRunnerProject": self.deploy_runner.project_name if self.deploy_runner else None,
            "kubeconfig": self.cluster.kubeconfig,
            "gpuNodeGroup": self.gpu_nodes.node_group_name,
            "gpuAutoScalingGroup": self.gpu_nodes.asg_name,
            "gpuScaling": self.gpu_nodes.scaling.summary(),
            "capacityAlertTopicArn": self.gpu_nodes.alert_topic_arn,
            "deliveryCheckAlarm": self.delivery_check.alarm.name if self.delivery_check else None,
            "alertRules": self.monitoring.rule_name if self.monitoring else None,
            "endpoint": self.server.endpoint_url,
            "servingNamespace": self.server.namespace,
            "servingService": self.server.service_name,
            **contract_summary(self.resolved.contract),
            "timeToFirstToken": list(self.startup_estimate),
        }
