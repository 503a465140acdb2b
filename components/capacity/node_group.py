"""The GPU node group bought as an EC2 Capacity Block: it comes up in the block's AZ at its start.

:class:`CapacityBlockNodeGroup` declares, for one Capacity Block reservation:

- a launch template (``capacity-block`` market, targeted reservation, the instance
  type, IMDSv2, encrypted gp3 root, nodeadm user data that RAID0s the local NVMe,
  optional EFA interfaces) — no placement group anywhere;
- an EKS managed node group (``CAPACITY_BLOCK``, ``AL2023_x86_64_NVIDIA``) in the one
  subnet of the block's AZ, labelled and tainted for GPU workloads, with its own node
  role unless one is given; updates without surge (``MINIMAL``: a block has no spare
  instance) and auto repair that reboots before it replaces (:mod:`kimi_k3.capacity.node_repair`);
- sized for the block's phase (:mod:`kimi_k3.capacity.scaling`): before the start, an
  Auto Scaling scheduled action raises the desired capacity to the reserved count at
  ``max(start, now + margin)``; once the block runs, the run itself sets the count; after
  it, the group is kept at zero;
- with EFA, a security group that admits all traffic to and from itself on every EFA
  interface (EKS user guide, sec-group-reqs: "Outbound, All, Self (for EFA traffic)");
- an EventBridge rule for the block's delivery / expiration-warning events, to an
  encrypted SNS topic (optional e-mail subscription).

Given only the reservation's id, the component looks the block up and assesses it
(:func:`kimi_k3.capacity.assessment.assess`: state, instance type, AZ, count, window)
before anything is declared; a block that cannot back the node group stops the run with one
message in the component's own args. Given the facts a caller looked up, it trusts the
caller's assessment (``Platform`` assesses once, in the stack's terms).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pulumi
import pulumi_aws as aws

from kimi_k3.capacity import rules
from kimi_k3.capacity.assessment import ARGS_TERMS, BlockNeeds, assess, failures, warnings
from kimi_k3.capacity.delivery_check import TOPIC_KEY_ACTIONS, cloudwatch_key_statement, cloudwatch_topic_statement, service_statement
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.capacity.lookup import CapacityBlockNotFound, lookup_capacity_block
from kimi_k3.capacity.node_repair import gpu_node_repair_config
from kimi_k3.capacity.scaling import SCALE_UP_MARGIN, ScalingPlan, scaling_plan
from kimi_k3.cluster import versions
from kimi_k3.cluster.node_role import eks_node_role
from kimi_k3.core import catalog, labels
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.core.clock import naive_problem
from kimi_k3.core.formats import EMAIL_LETTER_TLD
from kimi_k3.errors import Problems

INSTANCE_TYPE_NODE_LABEL = "kimi-k3.io/instance-type"
"""Node label carrying the EC2 instance type the node group was declared for.

(The kubelet also sets ``node.kubernetes.io/instance-type``; this one is set by the node
group itself, so it is known before the first node joins.)
"""

AMI_TYPE = "AL2023_x86_64_NVIDIA"
"""EKS-optimized Amazon Linux 2023 with the NVIDIA driver (no custom AMI: EKS merges its bootstrap)."""

CAPACITY_TYPE = "CAPACITY_BLOCK"
UPDATE_STRATEGY = "MINIMAL"
"""Node replacement on update: terminate first, then launch (EKS API reference, NodegroupUpdateConfig: "useful …
with hardware accelerators such as GPUs"). The default launches first, and a Capacity Block has no spare instance.
An update during a block still restarts the serving pod on each replaced node: the weights load again."""
ROOT_DEVICE = "/dev/xvda"
GP3_BASELINE_THROUGHPUT_MIBPS = 125
"""A gp3 volume's throughput when none is provisioned (EBS user guide, General Purpose SSD volumes: 125 MiB/s, 3,000 IOPS)."""
GP3_THROUGHPUT_RANGE_MIBPS = (125, 1000)
"""Throughput a launch template's gp3 volume takes (EC2 API reference, LaunchTemplateEbsBlockDeviceRequest, Throughput: 125 to 1,000)."""
GP3_IOPS_RANGE = (3000, 16000)
"""IOPS a gp3 volume takes (EC2 API reference, LaunchTemplateEbsBlockDeviceRequest, Iops: gp3 3,000 - 16,000)."""
GP3_MIBPS_PER_IOPS = 0.25
"""gp3's most throughput per provisioned IOPS (EBS user guide, gp3: "0.25 MiB/s per provisioned IOPS"): 1,000 MiB/s needs 4,000 IOPS."""
FAST_IMAGE_PULL_ROOT_THROUGHPUT_MIBPS = 1000
"""The GPU root volume's throughput with FastImagePull: on the pinned AMI SOCI's store is on the root volume, not the RAID0
(:mod:`kimi_k3.offline.image_store`), so the engine image is written there; gp3's most."""
FAST_IMAGE_PULL_ROOT_IOPS = 4000
"""The GPU root volume's IOPS with FastImagePull: the least that carries :data:`FAST_IMAGE_PULL_ROOT_THROUGHPUT_MIBPS`."""
"""Root device name of the AL2023 EKS AMIs."""

# Detail types of the Capacity Block events, from the EC2 User Guide page "Monitor Capacity
# Blocks using EventBridge" (capacity-blocks-monitor). The current HTML page names them
# "Capacity Block Reservation Delivered/Expiration Warning", its markdown edition and other
# translations "Capacity Block Delivered/Expiration Warning": match both spellings.
DELIVERED_DETAIL_TYPES = ("Capacity Block Reservation Delivered", "Capacity Block Delivered")
EXPIRATION_WARNING_DETAIL_TYPES = ("Capacity Block Reservation Expiration Warning", "Capacity Block Expiration Warning")
EVENT_DETAIL_TYPES = DELIVERED_DETAIL_TYPES + EXPIRATION_WARNING_DETAIL_TYPES
"""Every detail-type the alert rule matches (all carry the reservation ARN in ``resources``)."""

USER_DATA_BOUNDARY = "KIMI-K3-NODEADM"
_TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}


def nodeadm_user_data(extra_parts: Sequence[tuple[str, str]] = ()) -> str:
    """The launch template's user data: one nodeadm ``NodeConfig`` that RAID0s the instance store.

    nodeadm (AL2023) reads MIME multi-part user data and merges every
    ``application/node.eks.aws`` part; for a managed node group without a custom AMI,
    EKS adds its own part with the cluster details, so ours carries only
    ``spec.instance.localStorage`` (schema: awslabs/amazon-eks-ami ``nodeadm/doc/api.md``,
    ``LocalStorageStrategy`` enum RAID0 | RAID10 | Mount). With RAID0, containerd and the
    kubelet (images, emptyDirs, the weights cache) live on the 30 TB of local NVMe.
    ``extra_parts`` are further ``(content type, body)`` MIME parts after it (another
    ``application/node.eks.aws`` NodeConfig, which nodeadm merges, or a ``text/x-shellscript``).
    Returned base64-encoded, as ``LaunchTemplate.user_data`` expects.
    """
    node_config = "\n".join(
        [
            "---",
            "apiVersion: node.eks.aws/v1alpha1",
            "kind: NodeConfig",
            "spec:",
            "  instance:",
            "    localStorage:",
            "      strategy: RAID0",
        ]
    )
    document = "\n".join(
        [
            "MIME-Version: 1.0",
            f'Content-Type: multipart/mixed; boundary="{USER_DATA_BOUNDARY}"',
            "",
            f"--{USER_DATA_BOUNDARY}",
            "Content-Type: application/node.eks.aws",
            "",
            node_config,
            "",
            *(line for content_type, body in extra_parts for line in (f"--{USER_DATA_BOUNDARY}", f"Content-Type: {content_type}", "", body.rstrip("\n"), "")),
            f"--{USER_DATA_BOUNDARY}--",
            "",
        ]
    )
    return base64.b64encode(document.encode()).decode()


def efa_network_interfaces(
    instance: catalog.InstanceType, security_group_ids: Sequence[pulumi.Input[str]]
) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
    """Network interfaces that expose every EFA of ``instance`` (EC2 User Guide, efa-acc-inst-types).

    The primary interface (card 0, device 0) is an ENA interface (an EFA-only interface
    cannot be primary). When every card has an EFA (e.g. p5en: 16 on 16 cards), card 0
    gets an EFA-only interface at device 1; when there is one more card than EFAs
    (p6-b300: 16 EFA on 17 cards) card 0 is the ENA-only card. Every further card gets
    one EFA-only interface at device index 0. Security groups go on every interface
    (with interfaces in the template, none may be set at the template level).
    """
    groups = list(security_group_ids)

    def interface(card: int, device: int, kind: str) -> aws.ec2.LaunchTemplateNetworkInterfaceArgs:
        return aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=card,
            device_index=device,
            interface_type=kind,
            security_groups=groups,
            delete_on_termination="true",
        )

    interfaces = [interface(0, 0, "interface")]
    if instance.efa_interfaces >= instance.network_cards:  # card 0 has an EFA too
        interfaces.append(interface(0, 1, "efa-only"))
        efa_cards = range(1, instance.network_cards)
    else:  # card 0 is the ENA-only card
        efa_cards = range(1, instance.efa_interfaces + 1)
    interfaces.extend(interface(card, 0, "efa-only") for card in efa_cards)
    return interfaces


def event_pattern(reservation_arn: str) -> str:
    """EventBridge pattern for this block's delivery and expiration-warning events."""
    return json.dumps({"source": ["aws.ec2"], "detail-type": list(EVENT_DETAIL_TYPES), "resources": [reservation_arn]})


def reservation_arn(facts: CapacityBlockFacts, region: str, account_id: str, partition: str = "aws") -> str:
    """ARN of the Capacity Reservation behind a block (what its events carry in ``resources``)."""
    return f"arn:{partition}:ec2:{region}:{account_id}:capacity-reservation/{facts.reservation_id}"


LEAVE_UNCHANGED = -1
"""A scheduled action's size the action must not change (pulumi-aws ``autoscaling.Schedule``: "Set to -1 if you don't want to change")."""


def scale_up_action_name(reservation_id: str) -> str:
    """Name of the one-off Auto Scaling scheduled action that scales a block's node group up (one per block)."""
    return f"kimi-k3-{reservation_id}-start"


def rfc3339(moment: datetime) -> str:
    """``2026-12-01T11:30:00Z``: the UTC form Auto Scaling scheduled actions take."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@checked_args
@dataclass(frozen=True)
class CapacityBlockNodeGroupArgs:
    """Inputs of :class:`CapacityBlockNodeGroup`."""

    cluster_name: pulumi.Input[str]
    """Name of the EKS cluster the nodes join."""
    kubernetes_version: str
    """Kubernetes version of the cluster (``1.34``); the node group runs the same."""
    subnet_ids_by_az: Mapping[str, pulumi.Input[str]]
    """Private subnet per AZ of the network; only the subnet of the block's AZ is used."""
    instance_type: str
    """EC2 instance type the block reserves (``p6-b300.48xlarge``); set on the launch template only."""
    now: datetime
    """The moment the program runs (UTC), from its entry point (``kimi_k3.core.clock.program_now()``):
    the block checks and the scale-up schedule are decided against it; nothing here reads the clock."""
    reservation: CapacityBlockFacts | None = None
    """The block, already looked up (the platform does this before declaring anything)."""
    reservation_id: str | None = None
    """The block's id (``cr-…``), when ``reservation`` is not given: the component looks it up."""
    ami_release_version: str | None = None
    """EKS AMI release to pin (``1.34.2-20251120``); ``None`` takes the latest at creation."""
    root_volume_gib: int = 200
    """Size of the encrypted gp3 root volume (the vLLM image is large; weights go to local NVMe)."""
    root_volume_throughput_mibps: int | None = None
    """Provisioned throughput of the root volume, MiB/s (125 to 1,000); ``None``: gp3's baseline 125 MiB/s. With FastImagePull
    the image is written to the root volume (:data:`FAST_IMAGE_PULL_ROOT_THROUGHPUT_MIBPS`)."""
    root_volume_iops: int | None = None
    """Provisioned IOPS of the root volume (3,000 to 16,000, at least throughput / 0.25); ``None``: gp3's baseline 3,000."""
    efa_enabled: bool = False
    """Attach every EFA of the instance (needed only when a replica spans nodes)."""
    security_group_ids: Sequence[pulumi.Input[str]] = ()
    """Security groups of the nodes (must allow node <-> control plane traffic). Empty: EKS applies
    the cluster security group. With EFA, the component adds its own EFA group to every interface."""
    vpc_id: pulumi.Input[str] | None = None
    """VPC of the nodes: where the EFA security group is created (required with ``efa_enabled``)."""
    scale_up_margin: timedelta = SCALE_UP_MARGIN
    """How long after ``now`` the scale-up action is created at the latest (:data:`kimi_k3.capacity.scaling.SCALE_UP_MARGIN`);
    a block starting sooner is scaled up at ``now + scale_up_margin``."""
    pending_scale_up_at: datetime | None = None
    """Start time of this block's scale-up action (:func:`scale_up_action_name`) as it exists already, read by the caller
    from the stack's previous state; a time still ahead is kept instead of being recomputed (a re-run never moves it
    later: :func:`kimi_k3.capacity.scaling.keep_pending`)."""
    node_role_arn: pulumi.Input[str] | None = None
    """Existing node IAM role; ``None`` creates one with the EKS worker, ECR pull and CNI policies."""
    alert_email: str | None = None
    """Address subscribed to the block's delivery / expiration alerts (confirmation mail follows)."""
    nodes_required: int = 1
    """Nodes the stack needs (replicas x nodes per replica); the block must reserve at least this many."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags on every resource, the instances and their volumes."""
    user_data_parts: Sequence[tuple[str, str]] = ()
    """Extra ``(content type, body)`` MIME parts of the launch template's user data (:func:`nodeadm_user_data`)."""


@checked_component
class CapacityBlockNodeGroup(pulumi.ComponentResource):
    """GPU nodes backed by one EC2 Capacity Block, sized to the block across its life.

    Attributes (also registered as outputs): ``node_group_name``, ``asg_name``,
    ``availability_zone``, ``start``, ``end``, ``instance_count``, ``state``,
    ``alert_topic_arn``, ``launch_template_id``, ``scaling`` (the run's :class:`ScalingPlan`);
    plus ``reservation`` (the facts used) and ``node_group`` / ``launch_template`` /
    ``alert_topic`` / ``efa_security_group`` (the resources).
    """

    def __init__(self, name: str, args: CapacityBlockNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Check the block against the args, then declare the node group and its alerts.

        Raises :class:`~kimi_k3.errors.ComponentInputError` (nothing declared) when the args or the block cannot work.
        """
        _validate(name, args)
        facts, block_warnings = _block(name, args)
        plan = scaling_plan(facts, args.now, args.scale_up_margin, args.pending_scale_up_at)
        super().__init__("kimi-k3:index:CapacityBlockNodeGroup", name, None, opts)
        for warning in block_warnings:
            pulumi.log.warn(warning, resource=self)

        child = pulumi.ResourceOptions(parent=self)
        tags = {**args.tags, "kimi-k3.io/capacity-reservation": facts.reservation_id}
        self.reservation = facts
        self.scaling = plan
        self.efa_security_group: aws.ec2.SecurityGroup | None = (
            self._efa_security_group(name, args, tags, child) if args.efa_enabled else None
        )
        self.launch_template = self._launch_template(name, args, tags)
        node_role_arn = args.node_role_arn if args.node_role_arn is not None else self._node_role(name, tags, child)
        self.node_group = self._node_group(name, args, node_role_arn, tags)
        self.asg_name = self.node_group.resources.apply(lambda rs: rs[0].autoscaling_groups[0].name)  # type: ignore[index]  # EKS always reports one ASG
        self.scale_up = self._scale_up_action(name, child)
        self.alert_topic = self._alerts(name, args, facts, tags, child)
        self._expose_block(facts)
        self.register_outputs(self._outputs())

    def _launch_template(self, name: str, args: CapacityBlockNodeGroupArgs, tags: Mapping[str, str]) -> aws.ec2.LaunchTemplate:
        """The GPU nodes' launch template: ``capacity-block`` market targeting the block, IMDSv2, encrypted gp3 root,
        nodeadm user data, and with EFA every EFA interface (in the given groups and the EFA group)."""
        interface_groups = list(args.security_group_ids)
        if self.efa_security_group is not None:
            interface_groups.append(self.efa_security_group.id)
        return aws.ec2.LaunchTemplate(
            f"{name}-lt",
            description=f"Kimi K3 GPU nodes on Capacity Block {self.reservation.reservation_id}",
            instance_type=args.instance_type,
            instance_market_options=aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block"),
            capacity_reservation_specification=aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                    capacity_reservation_id=self.reservation.reservation_id,
                ),
            ),
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",
                # Hop limit 1: pods cannot reach IMDS (they get AWS access via Pod Identity only).
                http_put_response_hop_limit=1,
            ),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name=ROOT_DEVICE,
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=args.root_volume_gib,
                        volume_type="gp3",
                        throughput=args.root_volume_throughput_mibps,
                        iops=args.root_volume_iops,
                        encrypted="true",
                        delete_on_termination="true",
                    ),
                )
            ],
            user_data=nodeadm_user_data(args.user_data_parts),
            network_interfaces=(
                efa_network_interfaces(catalog.INSTANCE_TYPES[args.instance_type], interface_groups)
                if args.efa_enabled
                else None
            ),
            vpc_security_group_ids=(list(args.security_group_ids) or None) if not args.efa_enabled else None,
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags)
                for kind in ("instance", "volume", "network-interface")
            ],
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _node_group(
        self, name: str, args: CapacityBlockNodeGroupArgs, node_role_arn: pulumi.Input[str], tags: Mapping[str, str]
    ) -> aws.eks.NodeGroup:
        """The EKS managed node group (``CAPACITY_BLOCK``) in the block's AZ, GPU-labelled and tainted, sized by :attr:`scaling`."""
        plan = self.scaling
        return aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=args.cluster_name,
            node_role_arn=node_role_arn,
            subnet_ids=[args.subnet_ids_by_az[self.reservation.availability_zone]],
            capacity_type=CAPACITY_TYPE,
            ami_type=AMI_TYPE,
            version=args.kubernetes_version,
            release_version=args.ami_release_version,
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=self.launch_template.id,
                version=self.launch_template.latest_version.apply(lambda v: str(int(v))),
            ),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=plan.min_size, max_size=plan.max_size, desired_size=plan.desired_size
            ),
            # No surge: every node the block holds is in use and there is no spare reserved
            # capacity to launch a replacement into, so updates terminate first, one node at a time.
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1, update_strategy=UPDATE_STRATEGY),
            node_repair_config=gpu_node_repair_config(),
            labels={**labels.GPU_NODE_LABELS, INSTANCE_TYPE_NODE_LABEL: args.instance_type},
            taints=[
                aws.eks.NodeGroupTaintArgs(
                    key=labels.GPU_TAINT_KEY,
                    value=labels.GPU_TAINT_VALUE,
                    effect=_TAINT_EFFECTS[labels.GPU_TAINT_EFFECT],
                )
            ],
            tags=tags,
            # Before the start the scheduled action (_scale_up_action) owns the desired size, in the last hour
            # EKS's own scale-in does: then a later `pulumi up` must not undo them. While the
            # block serves (and after it) this run sets the size itself (kimi_k3.capacity.scaling).
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=plan.ignore_changes),
        )

    def _scale_up_action(self, name: str, child: pulumi.ResourceOptions) -> aws.autoscaling.Schedule | None:
        """The scheduled action raising the group to the reserved count, when :attr:`scaling` has one (before the start)."""
        plan = self.scaling
        if plan.scale_at is None:
            return None
        # One-off action (no recurrence) at max(start, now + margin), or the pending action's
        # time when one already exists and lies ahead (kimi_k3.capacity.scaling). It sets the desired
        # capacity only (-1: leave min and max alone; the provider sends 0 for an unset
        # size): EKS's own action scales the group to 0 forty minutes before the block ends
        # (EC2 terminates the instances from thirty minutes before) and must be able to.
        return aws.autoscaling.Schedule(
            f"{name}-scale-at-start",
            scheduled_action_name=scale_up_action_name(self.reservation.reservation_id),
            autoscaling_group_name=self.asg_name,
            start_time=rfc3339(plan.scale_at),
            min_size=LEAVE_UNCHANGED,
            max_size=LEAVE_UNCHANGED,
            desired_capacity=plan.scale_to,
            opts=child,
        )

    def _expose_block(self, facts: CapacityBlockFacts) -> None:
        """Set the attributes that describe the block and the declared resources (the registered outputs)."""
        start, end = facts.window()
        self.node_group_name = self.node_group.node_group_name
        self.availability_zone = facts.availability_zone
        self.start = start.isoformat()
        self.end = end.isoformat()
        self.instance_count = facts.instance_count
        self.state = facts.state
        self.alert_topic_arn = self.alert_topic.arn
        self.launch_template_id = self.launch_template.id

    def _outputs(self) -> dict[str, object]:
        """The component's registered outputs, by their camelCase names."""
        return {
            "nodeGroupName": self.node_group_name,
            "asgName": self.asg_name,
            "availabilityZone": self.availability_zone,
            "start": self.start,
            "end": self.end,
            "instanceCount": self.instance_count,
            "state": self.state,
            "alertTopicArn": self.alert_topic_arn,
            "launchTemplateId": self.launch_template_id,
            "scaling": self.scaling.summary(),
        }

    def _efa_security_group(
        self, name: str, args: CapacityBlockNodeGroupArgs, tags: Mapping[str, str], child: pulumi.ResourceOptions
    ) -> aws.ec2.SecurityGroup:
        """A group admitting all traffic to and from itself, for every EFA interface.

        EFA needs both directions to the group itself (EKS user guide, sec-group-reqs: "Outbound,
        All, Self (for EFA traffic)"; EC2 user guide, efa-start: the group must allow all
        inbound and outbound traffic to and from the security group itself). The pulumi-eks
        node group has self ingress only (nodejs/eks/nodes/securitygroup.ts), so the EFA rules
        live in a group of their own, as terraform-aws-eks does (modules/eks-managed-node-group,
        ``all_self_efa`` ingress and egress).
        """
        group = aws.ec2.SecurityGroup(
            f"{name}-efa",
            vpc_id=args.vpc_id,
            description=f"EFA traffic between the GPU nodes of Capacity Block {self.reservation.reservation_id}",
            tags={**tags, "Name": f"{name}-efa"},
            opts=child,
        )
        rule_opts = pulumi.ResourceOptions(parent=self)
        rules = ((aws.vpc.SecurityGroupIngressRule, "ingress", "from"), (aws.vpc.SecurityGroupEgressRule, "egress", "to"))
        for rule, direction, preposition in rules:
            rule(
                f"{name}-efa-self-{direction}",
                security_group_id=group.id,
                referenced_security_group_id=group.id,
                ip_protocol="-1",
                description=f"All traffic {preposition} the EFA group itself",
                opts=rule_opts,
            )
        return group

    def _node_role(self, name: str, tags: Mapping[str, str], child: pulumi.ResourceOptions) -> pulumi.Output[str]:
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
        role = eks_node_role(name, partition=partition, description="EKS node role of the Kimi K3 Capacity Block GPU nodes", tags=tags, opts=child)
        return role.arn_when_attached

    def _alerts(
        self,
        name: str,
        args: CapacityBlockNodeGroupArgs,
        facts: CapacityBlockFacts,
        tags: Mapping[str, str],
        child: pulumi.ResourceOptions,
    ) -> aws.sns.Topic:
        identity = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        region = aws.get_region_output(opts=pulumi.InvokeOutputOptions(parent=self))
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
        arn = pulumi.Output.all(region.region, identity.account_id, partition).apply(
            lambda v: reservation_arn(facts, v[0], v[1], v[2])
        )
        rule = aws.cloudwatch.EventRule(
            f"{name}-block-events",
            description=f"Capacity Block {facts.reservation_id}: delivered / expiration warning",
            event_pattern=arn.apply(event_pattern),
            tags=dict(tags),
            opts=child,
        )
        # EventBridge cannot publish to a topic encrypted with the AWS managed key
        # (alias/aws/sns): its key policy cannot grant events.amazonaws.com. So the topic
        # gets its own customer managed key whose policy lets EventBridge use it, and
        # CloudWatch too: the delivery check's alarm (and any alarm of this account) notifies
        # this topic.
        key = aws.kms.Key(
            f"{name}-alerts-key",
            description=f"Encrypts the Capacity Block alerts topic of {name}",
            enable_key_rotation=True,
            deletion_window_in_days=7,
            policy=pulumi.Output.all(partition, identity.account_id).apply(lambda v: _alerts_key_policy(v[0], v[1])),
            tags=dict(tags),
            opts=child,
        )
        topic = aws.sns.Topic(f"{name}-alerts", kms_master_key_id=key.arn, tags=dict(tags), opts=child)
        aws.sns.TopicPolicy(
            f"{name}-alerts-policy",
            arn=topic.arn,
            policy=pulumi.Output.all(topic.arn, rule.arn, identity.account_id).apply(lambda v: _topic_policy(v[0], v[1], v[2])),
            opts=child,
        )
        aws.cloudwatch.EventTarget(f"{name}-block-events-to-sns", rule=rule.name, arn=topic.arn, opts=child)
        if args.alert_email:
            aws.sns.TopicSubscription(
                f"{name}-alerts-email", topic=topic.arn, protocol="email", endpoint=args.alert_email, opts=child
            )
        return topic


def _topic_policy(topic_arn: str, rule_arn: str, account_id: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                service_statement(
                    "CapacityBlockEvents", "events.amazonaws.com", "sns:Publish", topic_arn, {"ArnEquals": {"aws:SourceArn": rule_arn}}
                ),
                cloudwatch_topic_statement(topic_arn, account_id),
            ],
        }
    )


def _alerts_key_policy(partition: str, account_id: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "AccountAdministers",
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
                    "Action": "kms:*",
                    "Resource": "*",
                },
                service_statement(
                    "EventBridgePublishesToTopic", "events.amazonaws.com", TOPIC_KEY_ACTIONS, "*",
                    {"StringEquals": {"aws:SourceAccount": account_id}},
                ),
                cloudwatch_key_statement(account_id),
            ],
        }
    )


def _block(name: str, args: CapacityBlockNodeGroupArgs) -> tuple[CapacityBlockFacts, tuple[str, ...]]:
    """The block and the warnings to print: looked up and assessed here, or handed in already assessed."""
    problems = Problems("CapacityBlockNodeGroup", name)
    if args.reservation is not None:
        facts = args.reservation
        for path, problem in (("instance_type", rules.block_type_problem(facts, args.instance_type)), ("nodes_required", rules.block_count_problem(facts, args.nodes_required))):
            if problem:
                problems.reject(path, getattr(args, path), problem)
        if facts.availability_zone not in args.subnet_ids_by_az:
            problems.add("subnet_ids_by_az", f"subnet_ids_by_az has no subnet in {facts.availability_zone}, the AZ of Capacity Block {facts.reservation_id}")
        if facts.start is None or facts.end is None:
            problems.add("reservation", f"reservation {facts.reservation_id} has no start or end date, which a Capacity Block always has")
        problems.raise_any()
        return facts, ()
    try:
        facts = lookup_capacity_block(args.reservation_id or "")
    except CapacityBlockNotFound as err:
        problems.add("reservation_id", f"{err}: check reservation_id and the AWS provider's region, or list your blocks with `kimi-k3 capacity status`")
        problems.raise_any()
        raise
    needs = BlockNeeds(instance_type=args.instance_type, nodes_required=args.nodes_required, availability_zones=tuple(args.subnet_ids_by_az))
    findings = assess(facts, needs, args.now, ARGS_TERMS)
    for failure in failures(findings):
        problems.add(ARGS_TERMS.name(failure.subject), failure.message)
    problems.raise_any()
    return facts, warnings(findings)


def _validate(name: str, args: CapacityBlockNodeGroupArgs) -> None:
    """Refuse args that cannot make a working node group (before any look-up or resource), every problem at once."""
    problems = Problems("CapacityBlockNodeGroup", name)
    if (args.reservation is None) == (args.reservation_id is None):
        problems.add("reservation_id", "exactly one of reservation (looked-up facts) or reservation_id is required")
    elif args.reservation_id is not None and rules.reservation_id_problem(args.reservation_id):
        problems.reject("reservation_id", args.reservation_id, rules.reservation_id_problem(args.reservation_id) or "")
    version_problem = versions.version_problem(args.kubernetes_version)
    cluster_version = versions.declared_version(args.cluster_name)
    skew = versions.skew_problem(args.kubernetes_version, cluster_version) if cluster_version else None
    if version_problem or skew:
        problems.reject("kubernetes_version", args.kubernetes_version, version_problem or skew or "")
    elif args.ami_release_version and rules.ami_release_problem(args.ami_release_version, args.kubernetes_version):
        problems.reject("ami_release_version", args.ami_release_version, rules.ami_release_problem(args.ami_release_version, args.kubernetes_version) or "")
    type_problem = rules.gpu_instance_type_problem(args.instance_type)
    if type_problem:
        problems.reject("instance_type", args.instance_type, type_problem)
    naive = naive_problem("now", args.now)  # datetime.now() is local time: the scale-up would be scheduled hours off the block's start
    if naive:
        problems.add("now", naive)
    if not args.subnet_ids_by_az:
        problems.reject("subnet_ids_by_az", dict(args.subnet_ids_by_az), "the node group needs the subnet of the Capacity Block's AZ")
    if not rules.ROOT_VOLUME_GIB[0] <= args.root_volume_gib <= rules.ROOT_VOLUME_GIB[1]:
        problems.reject("root_volume_gib", args.root_volume_gib, "expected {}..{} GiB (gp3; images and weights live on the NVMe RAID0)".format(*rules.ROOT_VOLUME_GIB))
    low, high = GP3_THROUGHPUT_RANGE_MIBPS
    throughput = args.root_volume_throughput_mibps
    if throughput is not None and not low <= throughput <= high:
        problems.reject("root_volume_throughput_mibps", throughput, f"expected {low}..{high} MiB/s (gp3)")
    iops = args.root_volume_iops
    if iops is not None and not GP3_IOPS_RANGE[0] <= iops <= GP3_IOPS_RANGE[1]:
        problems.reject("root_volume_iops", iops, f"expected {GP3_IOPS_RANGE[0]}..{GP3_IOPS_RANGE[1]} (gp3)")
    elif throughput is not None and throughput > (iops or GP3_IOPS_RANGE[0]) * GP3_MIBPS_PER_IOPS:
        problems.reject(
            "root_volume_iops", iops,
            f"{throughput} MiB/s needs at least {math.ceil(throughput / GP3_MIBPS_PER_IOPS)} IOPS (gp3: 0.25 MiB/s per provisioned IOPS)",
        )
    if args.nodes_required < 1:
        problems.reject("nodes_required", args.nodes_required, "expected at least 1")
    if args.efa_enabled:
        if not args.security_group_ids:
            problems.add("security_group_ids", "efa_enabled needs security_group_ids: with network interfaces in the launch template, the node security group must be named on each")
        if args.vpc_id is None:
            problems.add("vpc_id", "efa_enabled needs vpc_id: the EFA security group (all traffic to and from itself) is created in the nodes' VPC")
    if args.scale_up_margin < timedelta(0):
        problems.reject("scale_up_margin", args.scale_up_margin, "a duration of 0 or more")
    if args.alert_email is not None and not EMAIL_LETTER_TLD.fullmatch(args.alert_email):
        problems.reject("alert_email", args.alert_email, "expected an e-mail address such as oncall@example.com")
    problems.raise_any()


__all__ = [
    "AMI_TYPE",
    "EVENT_DETAIL_TYPES",
    "INSTANCE_TYPE_NODE_LABEL",
    "UPDATE_STRATEGY",
    "CapacityBlockNodeGroup",
    "CapacityBlockNodeGroupArgs",
    "ScalingPlan",
    "efa_network_interfaces",
    "event_pattern",
    "nodeadm_user_data",
    "scale_up_action_name",
    "scaling_plan",
]
