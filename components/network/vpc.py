"""The VPC the cluster and the Capacity Block GPU nodes live in.

One private and one public subnet per AZ (the Capacity Block's AZ among them),
NAT gateway(s), an S3 gateway endpoint on every private route table (weights are
pulled from S3 at terabyte scale; through a NAT they would be billed per GB),
interface endpoints (by default ECR, STS, EKS Auth and EC2:
:data:`kimi_k3.network.endpoints.DEFAULT_INTERFACE_ENDPOINTS`) so image pulls,
credentials and the nodes' EC2 calls stay inside the VPC, and flow logs to CloudWatch Logs.

A VPC someone else manages is imported, not configured as a mode:
:meth:`Network.from_existing` (:class:`ExistingNetwork`) takes its ids, declares nothing
and exposes the same outputs, so everything downstream takes either. This is how
pulumi-awsx handles it (``Vpc.fromExistingIds`` in ``awsx-classic/ec2/vpc.ts``: "This will
not cause a VPC (or any sub-resources) to be created"; ``DefaultVpc`` in
``awsx/ec2/defaultVpc.ts``, a component that only reads ids), tag v3.8.0.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.core.formats import AVAILABILITY_ZONE, LOG_RETENTION_DAYS, SUBNET_ID, VPC_ID
from kimi_k3.core.suggest import did_you_mean
from kimi_k3.errors import Problems, UserError
from kimi_k3.network.endpoints import DEFAULT_INTERFACE_ENDPOINTS, endpoint_problems
from kimi_k3.network.subnets import NAT_MODES, SubnetPlan, plan_subnets, vpc_cidr_problem

TYPE = "kimi-k3:index:Network"
"""Type token of the component, new or existing VPC alike (an existing one keeps the same URN)."""

DEFAULT_INTERFACE_ENDPOINT_SERVICES = DEFAULT_INTERFACE_ENDPOINTS
"""Interface endpoints by default: ECR (image manifests and auth), STS (IRSA), EKS Auth (Pod Identity) and EC2
(the nodes' own calls); see :mod:`kimi_k3.network.endpoints`."""

@checked_args
@dataclass(frozen=True)
class NetworkArgs:
    """What a new VPC looks like (for a VPC someone else manages, see :class:`ExistingNetworkArgs`)."""

    cluster_name: str
    """EKS cluster name, for the ``kubernetes.io/cluster/<name>=shared`` subnet tags."""
    availability_zones: Sequence[str] = ()
    """AZs to span, the Capacity Block's AZ first (at least two)."""
    vpc_cidr: str = "10.0.0.0/16"
    """IPv4 CIDR of the VPC; private subnets are carved first, public ones after."""
    nat_mode: str = "single"
    """``single`` (one NAT gateway, in the first AZ) or ``perAz`` (one per AZ)."""
    flow_log_retention_days: int = 30
    """Retention of the VPC flow-log group, in days (a value CloudWatch Logs accepts)."""
    flow_log_kms_key_id: pulumi.Input[str] | None = None
    """KMS key ARN to encrypt the flow-log group with; ``None`` keeps CloudWatch's default encryption."""
    private_subnet_prefix: int | None = 20
    """Prefix length of each private (node) subnet: /20 gives 4,091 addresses, room for prefix delegation.
    ``None``: the largest that fits the VPC and the AZ count (:func:`kimi_k3.network.subnets.subnet_layout`)."""
    public_subnet_prefix: int | None = 24
    """Prefix length of each public (load balancer) subnet; ``None``: the largest that fits."""
    region: str | None = None
    """Region for endpoint service names (``com.amazonaws.<region>.s3``); ``None`` asks the provider (``aws.get_region``)."""
    interface_endpoint_services: Sequence[str] = DEFAULT_INTERFACE_ENDPOINT_SERVICES
    """Services reached through interface endpoints with private DNS (short names such as ``ecr.api``; accepted:
    :data:`kimi_k3.network.endpoints.INTERFACE_ENDPOINT_SERVICES`)."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags on every resource (a ``Name`` tag is added per resource)."""


@checked_args
@dataclass(frozen=True)
class ExistingNetworkArgs:
    """The ids of a VPC someone else manages (:meth:`Network.from_existing`)."""

    vpc_id: str
    """The VPC (``vpc-…``)."""
    private_subnet_ids_by_az: Mapping[str, str]
    """Its private subnet of each AZ (AZ name -> ``subnet-…``): where the nodes go."""
    public_subnet_ids: Sequence[str] = ()
    """Its public subnets, for internet-facing load balancers (may be empty)."""
    availability_zones: Sequence[str] = ()
    """AZs to lead with, the Capacity Block's AZ first; each must have a private subnet. Empty: the mapping's order."""


def _validate_azs(azs: Sequence[str], problems: Problems, region: str | None = None) -> None:
    """AZ names, no AZ twice, all in ``region`` (when given)."""
    for index, az in enumerate(azs):
        if not AVAILABILITY_ZONE.fullmatch(az):
            problems.reject(f"availability_zones[{index}]", az, "expected an AZ name such as us-east-1a")
    if len(set(azs)) != len(azs):
        problems.reject("availability_zones", list(azs), "it lists an AZ twice")
    if region and any(not az.startswith(region) for az in azs):
        problems.reject("availability_zones", list(azs), f"not all in region {region}")


def _validate(name: str, args: NetworkArgs) -> SubnetPlan:
    """Check every arg of a new VPC before anything is declared; its subnet plan."""
    problems = Problems("Network", name)
    azs = list(args.availability_zones)
    if args.region is None and azs:  # the provider's region (aws:region): every AZ must be in it
        provider_region = aws.get_region().region
        if any(not az.startswith(provider_region) for az in azs):
            problems.reject(
                "availability_zones", azs,
                f"not all in region {provider_region}, the AWS provider's region (aws:region): use AZs of {provider_region}, or set aws:region to theirs",
            )
    _validate_azs(azs, problems, args.region)
    if len(azs) < 2:
        problems.reject("availability_zones", azs, "a new VPC needs at least 2 (EKS requires subnets in two AZs)")
    if args.nat_mode not in NAT_MODES:
        problems.reject("nat_mode", args.nat_mode, f"one of {', '.join(NAT_MODES)}")
    if args.flow_log_retention_days not in LOG_RETENTION_DAYS:
        problems.reject("flow_log_retention_days", args.flow_log_retention_days, f"one of {', '.join(map(str, LOG_RETENTION_DAYS))} (the retention periods CloudWatch Logs accepts){did_you_mean(args.flow_log_retention_days, LOG_RETENTION_DAYS)}")
    for problem in endpoint_problems(args.interface_endpoint_services):
        problems.add("interface_endpoint_services", f"interface_endpoint_services: {problem}")
    if not args.cluster_name:
        problems.add("cluster_name", "cluster_name is required (subnets carry the kubernetes.io/cluster/<name> tag)")
    plan: SubnetPlan | None = None
    cidr_problem = vpc_cidr_problem(args.vpc_cidr)
    if cidr_problem:
        problems.reject("vpc_cidr", args.vpc_cidr, cidr_problem)
    else:
        try:
            plan = plan_subnets(args.vpc_cidr, azs, args.private_subnet_prefix, args.public_subnet_prefix)
        except UserError as err:
            problems.add("vpc_cidr", f"vpc_cidr {args.vpc_cidr!r} is not accepted; {err}")
    problems.raise_any()
    assert plan is not None  # no problem: the plan was made
    return plan


def _validate_existing(name: str, args: ExistingNetworkArgs) -> None:
    """Check the ids of an existing VPC before anything is read."""
    problems = Problems("Network", name)
    azs = list(args.availability_zones)
    _validate_azs(azs, problems)
    if not VPC_ID.fullmatch(args.vpc_id or ""):
        problems.reject("vpc_id", args.vpc_id, "expected a VPC id such as vpc-0a1b2c3d4e5f67890")
    by_az = dict(args.private_subnet_ids_by_az)
    if not by_az:
        problems.add("private_subnet_ids_by_az", "private_subnet_ids_by_az is required: the private subnet of each AZ")
    for az, subnet in by_az.items():
        if not AVAILABILITY_ZONE.fullmatch(az):
            problems.reject("private_subnet_ids_by_az", az, "its keys are AZ names such as us-east-1a")
        if not SUBNET_ID.fullmatch(subnet):
            problems.reject(f"private_subnet_ids_by_az[{az!r}]", subnet, "expected a subnet id such as subnet-0a1b2c3d4e5f67890")
    for index, subnet in enumerate(args.public_subnet_ids):
        if not SUBNET_ID.fullmatch(subnet):
            problems.reject(f"public_subnet_ids[{index}]", subnet, "expected a subnet id such as subnet-0a1b2c3d4e5f67890")
    missing = [az for az in azs if az not in by_az]
    if by_az and missing:
        problems.reject("availability_zones", azs, f"VPC {args.vpc_id} has no private subnet in {', '.join(missing)} (covered: {', '.join(by_az)})")
    problems.raise_any()


@checked_component
class Network(pulumi.ComponentResource):
    """A VPC for EKS with Capacity Block GPU nodes; :meth:`from_existing` for one someone else manages.

    Attributes (also registered as outputs): ``vpc_id``, ``vpc_cidr``,
    ``private_subnet_ids_by_az`` (plain dict AZ -> ``Output[str]``, in AZ order),
    ``private_subnet_ids`` and ``public_subnet_ids`` (``Output[list[str]]``).
    AWS resources go through the default AWS provider or the one in ``opts``.
    """

    vpc_id: pulumi.Output[str]
    vpc_cidr: pulumi.Output[str]
    private_subnet_ids_by_az: dict[str, pulumi.Output[str]]
    private_subnet_ids: pulumi.Output[list[str]]
    public_subnet_ids: pulumi.Output[list[str]]
    availability_zones: tuple[str, ...]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate ``args`` (raising :class:`~kimi_k3.errors.ComponentInputError` before declaring anything), then declare the VPC."""
        plan = _validate(name, args)
        super().__init__(TYPE, name, None, opts)
        self._init_attributes()
        self._create(name, args, plan)
        self._register()

    @classmethod
    def from_existing(cls, name: str, args: ExistingNetworkArgs, opts: pulumi.ResourceOptions | None = None) -> Network:
        """A VPC someone else manages, as a :class:`Network`: the same outputs, nothing declared (:class:`ExistingNetwork`)."""
        return ExistingNetwork(name, args, opts)

    def subnet_in(self, az: str) -> pulumi.Output[str]:
        """The private subnet of ``az``; :class:`UserError` naming the covered AZs when there is none."""
        if az not in self.private_subnet_ids_by_az:
            raise UserError(f"the network has no private subnet in {az}; it covers {', '.join(self.private_subnet_ids_by_az)}")
        return self.private_subnet_ids_by_az[az]

    def _init_attributes(self) -> None:
        self.nat_gateway_ids: list[pulumi.Output[str]] = []
        self.private_route_table_ids: list[pulumi.Output[str]] = []
        self.endpoint_security_group_id: pulumi.Output[str] | None = None
        self.flow_log_group_name: pulumi.Output[str] | None = None

    def _register(self) -> None:
        """The list of private subnet ids, then the outputs (once, last)."""
        self.private_subnet_ids = pulumi.Output.all(*self.private_subnet_ids_by_az.values()).apply(list)
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "vpcCidr": self.vpc_cidr,
                "privateSubnetIdsByAz": self.private_subnet_ids_by_az,
                "privateSubnetIds": self.private_subnet_ids,
                "publicSubnetIds": self.public_subnet_ids,
            }
        )

    # -- new VPC

    def _create(self, name: str, args: NetworkArgs, plan: SubnetPlan) -> None:
        child = pulumi.ResourceOptions(parent=self)
        self.availability_zones = tuple(args.availability_zones)
        region = args.region or aws.get_region(opts=pulumi.InvokeOptions(parent=self)).region
        cluster_tag = {f"kubernetes.io/cluster/{args.cluster_name}": "shared"}

        def tags(suffix: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
            return {**args.tags, **(extra or {}), "Name": f"{name}-{suffix}"}

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=tags("vpc"),
            opts=child,
        )
        self.vpc_id = vpc.id
        self.vpc_cidr = vpc.cidr_block
        # Adopt the default security group with no rules, so nothing can use it by accident.
        aws.ec2.DefaultSecurityGroup(f"{name}-default-sg", vpc_id=vpc.id, ingress=[], egress=[], tags=tags("default-sg"), opts=child)

        def subnets(kind: str, cidrs: Mapping[str, ipaddress.IPv4Network], elb_role: str) -> dict[str, aws.ec2.Subnet]:
            # No public IPs even on the public subnets: load balancers get theirs from the ELB service.
            return {
                az: aws.ec2.Subnet(
                    f"{name}-{kind}-{az}",
                    vpc_id=vpc.id,
                    availability_zone=az,
                    cidr_block=str(cidrs[az]),
                    map_public_ip_on_launch=False,
                    tags=tags(f"{kind}-{az}", {**cluster_tag, elb_role: "1"}),
                    opts=child,
                )
                for az in self.availability_zones
            }

        private_subnets = subnets("private", plan.private, "kubernetes.io/role/internal-elb")
        public_subnets = subnets("public", plan.public, "kubernetes.io/role/elb")
        self.private_subnet_ids_by_az = {az: s.id for az, s in private_subnets.items()}
        self.public_subnet_ids = pulumi.Output.all(*(s.id for s in public_subnets.values())).apply(list)

        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=tags("igw"), opts=child)
        public_rt = aws.ec2.RouteTable(f"{name}-public-rt", vpc_id=vpc.id, tags=tags("public-rt"), opts=child)
        aws.ec2.Route(f"{name}-public-default", route_table_id=public_rt.id, destination_cidr_block="0.0.0.0/0", gateway_id=igw.id, opts=child)
        for az, subnet in public_subnets.items():
            aws.ec2.RouteTableAssociation(f"{name}-public-{az}", subnet_id=subnet.id, route_table_id=public_rt.id, opts=child)

        nat_azs = self.availability_zones if args.nat_mode == "perAz" else self.availability_zones[:1]
        nats: dict[str, aws.ec2.NatGateway] = {}
        for az in nat_azs:
            eip = aws.ec2.Eip(f"{name}-nat-{az}", domain="vpc", tags=tags(f"nat-{az}"), opts=child)
            nats[az] = aws.ec2.NatGateway(
                f"{name}-nat-{az}",
                allocation_id=eip.allocation_id,
                subnet_id=public_subnets[az].id,
                connectivity_type="public",
                tags=tags(f"nat-{az}"),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
            )
        self.nat_gateway_ids = [n.id for n in nats.values()]

        private_rts: list[aws.ec2.RouteTable] = []
        for az, subnet in private_subnets.items():
            rt = aws.ec2.RouteTable(f"{name}-private-{az}", vpc_id=vpc.id, tags=tags(f"private-{az}"), opts=child)
            nat = nats.get(az) or nats[nat_azs[0]]
            aws.ec2.Route(f"{name}-private-{az}-default", route_table_id=rt.id, destination_cidr_block="0.0.0.0/0", nat_gateway_id=nat.id, opts=child)
            aws.ec2.RouteTableAssociation(f"{name}-private-{az}", subnet_id=subnet.id, route_table_id=rt.id, opts=child)
            private_rts.append(rt)
        self.private_route_table_ids = [rt.id for rt in private_rts]

        self._endpoints(name, args, region, vpc, list(private_subnets.values()), private_rts, tags)
        self._flow_logs(name, args, region, vpc, tags)

    def _endpoints(self, name, args, region, vpc, private_subnets, private_rts, tags) -> None:
        child = pulumi.ResourceOptions(parent=self)
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[rt.id for rt in private_rts],
            tags=tags("s3"),
            opts=child,
        )
        if not args.interface_endpoint_services:
            return
        sg = aws.ec2.SecurityGroup(
            f"{name}-endpoints",
            vpc_id=vpc.id,
            description="HTTPS from inside the VPC to its interface endpoints",
            ingress=[
                aws.ec2.SecurityGroupIngressArgs(
                    protocol="tcp", from_port=443, to_port=443, cidr_blocks=[vpc.cidr_block], description="HTTPS from the VPC"
                )
            ],
            egress=[],
            tags=tags("endpoints"),
            opts=child,
        )
        self.endpoint_security_group_id = sg.id
        for service in args.interface_endpoint_services:
            aws.ec2.VpcEndpoint(
                f"{name}-{service.replace('.', '-')}",
                vpc_id=vpc.id,
                service_name=f"com.amazonaws.{region}.{service}",
                vpc_endpoint_type="Interface",
                private_dns_enabled=True,
                subnet_ids=[s.id for s in private_subnets],
                security_group_ids=[sg.id],
                tags=tags(service.replace(".", "-")),
                opts=child,
            )

    def _flow_logs(self, name, args, region, vpc, tags) -> None:
        child = pulumi.ResourceOptions(parent=self)
        group = aws.cloudwatch.LogGroup(
            f"{name}-flow-logs",
            retention_in_days=args.flow_log_retention_days,
            kms_key_id=args.flow_log_kms_key_id,
            tags=tags("flow-logs"),
            opts=child,
        )
        self.flow_log_group_name = group.name
        invoke = pulumi.InvokeOutputOptions(parent=self)
        account = aws.get_caller_identity_output(opts=invoke).account_id
        partition = aws.get_partition_output(opts=invoke).partition
        trust = pulumi.Output.all(account, partition).apply(
            lambda a: json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "vpc-flow-logs.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                            # Confused-deputy guard recommended by the VPC flow-logs guide.
                            "Condition": {
                                "StringEquals": {"aws:SourceAccount": a[0]},
                                "ArnLike": {"aws:SourceArn": f"arn:{a[1]}:ec2:{region}:{a[0]}:vpc-flow-log/*"},
                            },
                        }
                    ],
                }
            )
        )
        role = aws.iam.Role(f"{name}-flow-logs", assume_role_policy=trust, description=f"VPC flow logs of {name} to CloudWatch Logs", tags=tags("flow-logs"), opts=child)
        policy = group.arn.apply(
            lambda arn: json.dumps(
                {
                    "Version": "2012-10-17",
                    # The VPC user guide's least permissions (kimi_k3.core.documented_policies.FLOW_LOGS_POLICY), scoped to
                    # the stack's log group where the action takes a log group; DescribeLogGroups lists, so it takes "*".
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                            "Resource": [arn, f"{arn}:*"],
                        },
                        {"Effect": "Allow", "Action": "logs:DescribeLogGroups", "Resource": "*"},
                    ],
                }
            )
        )
        aws.iam.RolePolicy(f"{name}-flow-logs", role=role.id, policy=policy, opts=child)
        aws.ec2.FlowLog(
            f"{name}-flow-log",
            vpc_id=vpc.id,
            traffic_type="ALL",
            log_destination_type="cloud-watch-logs",
            log_destination=group.arn,
            iam_role_arn=role.arn,
            tags=tags("flow-log"),
            opts=child,
        )


@checked_component(called="Network.from_existing")
class ExistingNetwork(Network):
    """A VPC someone else manages: its ids as :class:`Network` outputs; nothing declared, nothing destroyed.

    Build it with :meth:`Network.from_existing`. The VPC's CIDR is read with
    ``aws.ec2.get_vpc`` (an invoke). :attr:`availability_zones` lists the AZs passed in
    first (the Capacity Block's AZ leads), then any other AZ the VPC has a private subnet in.
    """

    def __init__(self, name: str, args: ExistingNetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate the ids (raising before anything is read), then expose them."""
        _validate_existing(name, args)
        # The component itself, without Network.__init__: it would declare a new VPC.
        pulumi.ComponentResource.__init__(self, TYPE, name, None, opts)
        self._init_attributes()
        by_az = args.private_subnet_ids_by_az
        self.availability_zones = tuple(dict.fromkeys([*args.availability_zones, *by_az]))
        self.vpc_id = pulumi.Output.from_input(args.vpc_id)
        self.vpc_cidr = aws.ec2.get_vpc_output(id=args.vpc_id, opts=pulumi.InvokeOutputOptions(parent=self)).cidr_block
        self.private_subnet_ids_by_az = {az: pulumi.Output.from_input(by_az[az]) for az in self.availability_zones}
        self.public_subnet_ids = pulumi.Output.from_input(list(args.public_subnet_ids))
        self._register()


__all__ = ["DEFAULT_INTERFACE_ENDPOINT_SERVICES", "NAT_MODES", "ExistingNetwork", "ExistingNetworkArgs", "Network", "NetworkArgs", "SubnetPlan", "plan_subnets"]
