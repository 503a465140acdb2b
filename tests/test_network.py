"""kimi_k3.Network under the offline engine, built from explicit args (no stack config)."""

from __future__ import annotations

import ipaddress
import json
from datetime import UTC, datetime

import pytest

from kimi_k3 import offline
from kimi_k3.errors import UserError
from kimi_k3.network.vpc import ExistingNetworkArgs, Network, NetworkArgs, plan_subnets
from tests.conftest import NOW
from tests.refusals import assert_refused_before_declaring

BLOCK_AZ = "us-east-1c"
AZS = (BLOCK_AZ, "us-east-1a", "us-east-1b")
SUBNET = "aws:ec2/subnet:Subnet"
ROUTE = "aws:ec2/route:Route"
RTA = "aws:ec2/routeTableAssociation:RouteTableAssociation"
ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
NAT = "aws:ec2/natGateway:NatGateway"


def _engine() -> offline.OfflineEngine:
    fixture = offline.ReservationFixture(
        id="cr-0a1b2c3d4e5f60718", availability_zone=BLOCK_AZ, instance_count=2, state="scheduled", start=datetime(2026, 12, 2, 11, 30, tzinfo=UTC)
    )
    return offline.OfflineEngine(now=NOW, region="us-east-1", reservation=fixture)


def _run(**changes):
    values = {"cluster_name": "kimi-dev", "availability_zones": AZS, "vpc_cidr": "10.20.0.0/16", "flow_log_retention_days": 90, "tags": {"Project": "kimi-k3"}}
    values.update(changes)
    holder = {}
    engine = _engine()

    def program():
        holder["network"] = Network("net", NetworkArgs(**values))

    result = engine.run(program)
    return result, holder["network"]


@pytest.fixture(scope="module")
def per_az():
    return _run(nat_mode="perAz")


@pytest.fixture(scope="module")
def single():
    return _run(nat_mode="single")


def _subnets(result, kind):
    return {r.plain_inputs["availabilityZone"]: r for r in result.by_type(SUBNET) if f"-{kind}-" in r.name}


def _by_id(result, type_):
    return {r.id: r for r in result.by_type(type_)}


def _resolve(output):
    """Value of an Output created during a finished offline run."""
    from pulumi.runtime.sync_await import _sync_await

    return _sync_await(output.future())


def test_subnets_cover_the_args_azs_block_az_first(per_az):
    result, network = per_az
    # registration order under the engine is not declaration order: compare as sets
    assert sorted(_subnets(result, "private")) == sorted(AZS)
    assert sorted(_subnets(result, "public")) == sorted(AZS)
    assert list(network.private_subnet_ids_by_az) == list(AZS)
    assert BLOCK_AZ in network.private_subnet_ids_by_az
    ids = _resolve(network.private_subnet_ids)
    assert ids == [_subnets(result, "private")[az].id for az in AZS]
    assert _resolve(network.subnet_in(BLOCK_AZ)) == _subnets(result, "private")[BLOCK_AZ].id


def test_subnet_in_an_uncovered_az_names_the_covered_ones(per_az):
    _, network = per_az
    with pytest.raises(UserError, match="us-east-1d.*us-east-1c, us-east-1a, us-east-1b"):
        network.subnet_in("us-east-1d")


def test_children_are_parented_and_dns_is_on(per_az):
    result, _ = per_az
    component = result.one("kimi-k3:index:Network")
    assert all(r.parent_urn == component.urn for r in result.resources if r is not component)
    vpc = result.one("aws:ec2/vpc:Vpc").plain_inputs
    assert vpc["enableDnsHostnames"] is True and vpc["enableDnsSupport"] is True
    assert vpc["cidrBlock"] == "10.20.0.0/16"


def test_no_public_ips_and_eks_load_balancer_tags(per_az):
    result, _ = per_az
    for _az, subnet in _subnets(result, "private").items():
        inputs = subnet.plain_inputs
        assert inputs["mapPublicIpOnLaunch"] is False
        assert inputs["tags"]["kubernetes.io/role/internal-elb"] == "1"
        assert "kubernetes.io/role/elb" not in inputs["tags"]
        assert inputs["tags"]["kubernetes.io/cluster/kimi-dev"] == "shared"
        assert inputs["tags"]["Project"] == "kimi-k3"
    for subnet in _subnets(result, "public").values():
        tags = subnet.plain_inputs["tags"]
        assert tags["kubernetes.io/role/elb"] == "1"
        assert "kubernetes.io/role/internal-elb" not in tags
        assert tags["kubernetes.io/cluster/kimi-dev"] == "shared"


def test_default_sizes_are_private_20_public_24_without_overlap(per_az):
    result, _ = per_az
    private = [ipaddress.IPv4Network(s.plain_inputs["cidrBlock"]) for s in _subnets(result, "private").values()]
    public = [ipaddress.IPv4Network(s.plain_inputs["cidrBlock"]) for s in _subnets(result, "public").values()]
    assert {n.prefixlen for n in private} == {20} and {n.prefixlen for n in public} == {24}
    vpc = ipaddress.IPv4Network("10.20.0.0/16")
    blocks = private + public
    assert all(b.subnet_of(vpc) for b in blocks)
    assert not any(a.overlaps(b) for i, a in enumerate(blocks) for b in blocks[i + 1 :])
    assert max(private) < min(public)  # private blocks first, public after
    assert plan_subnets("10.20.0.0/16", AZS).private[BLOCK_AZ] == ipaddress.IPv4Network("10.20.0.0/20")


def _private_default_routes(result):
    """AZ -> the 0.0.0.0/0 route of that AZ's private route table (through the subnet association)."""
    routes = {r.plain_inputs["routeTableId"]: r.plain_inputs for r in result.by_type(ROUTE)}
    subnet_az = {s.id: az for az, s in _subnets(result, "private").items()}
    found = {}
    for assoc in result.by_type(RTA):
        az = subnet_az.get(assoc.plain_inputs["subnetId"])
        if az:
            found[az] = routes[assoc.plain_inputs["routeTableId"]]
    return found


def test_per_az_mode_routes_each_private_table_to_the_nat_of_its_az(per_az):
    result, _ = per_az
    nats = _by_id(result, NAT)
    assert len(nats) == len(AZS)
    public_az = {s.id: az for az, s in _subnets(result, "public").items()}
    routes = _private_default_routes(result)
    assert set(routes) == set(AZS)
    for az, route in routes.items():
        assert route["destinationCidrBlock"] == "0.0.0.0/0"
        assert public_az[nats[route["natGatewayId"]].plain_inputs["subnetId"]] == az


def test_single_mode_has_one_nat_in_the_block_az_shared_by_all(single):
    result, _ = single
    nats = result.by_type(NAT)
    assert len(nats) == 1
    public_az = {s.id: az for az, s in _subnets(result, "public").items()}
    assert public_az[nats[0].plain_inputs["subnetId"]] == BLOCK_AZ
    routes = _private_default_routes(result)
    assert set(routes) == set(AZS)
    assert {r["natGatewayId"] for r in routes.values()} == {nats[0].id}


def test_public_subnets_route_to_the_internet_gateway(single):
    result, _ = single
    igw = result.one("aws:ec2/internetGateway:InternetGateway")
    public_rt = result.one("aws:ec2/routeTable:RouteTable", "public-rt")
    route = next(r.plain_inputs for r in result.by_type(ROUTE) if r.plain_inputs["routeTableId"] == public_rt.id)
    assert route == {**route, "destinationCidrBlock": "0.0.0.0/0", "gatewayId": igw.id}
    public_ids = {s.id for s in _subnets(result, "public").values()}
    assert {a.plain_inputs["subnetId"] for a in result.by_type(RTA) if a.plain_inputs["routeTableId"] == public_rt.id} == public_ids


def test_s3_gateway_endpoint_is_on_every_private_route_table(per_az):
    result, _network = per_az
    s3 = [r.plain_inputs for r in result.by_type(ENDPOINT) if r.plain_inputs["serviceName"] == "com.amazonaws.us-east-1.s3"]
    assert len(s3) == 1 and s3[0]["vpcEndpointType"] == "Gateway"
    private_rts = {a.plain_inputs["routeTableId"] for a in result.by_type(RTA) if a.plain_inputs["subnetId"] in {s.id for s in _subnets(result, "private").values()}}
    assert len(private_rts) == len(AZS)
    assert set(s3[0]["routeTableIds"]) == private_rts


def test_ecr_sts_eks_auth_and_ec2_interface_endpoints_are_private_in_private_subnets(per_az):
    result, _ = per_az
    interface = {r.plain_inputs["serviceName"]: r.plain_inputs for r in result.by_type(ENDPOINT) if r.plain_inputs["vpcEndpointType"] == "Interface"}
    assert set(interface) == {f"com.amazonaws.us-east-1.{s}" for s in ("ecr.api", "ecr.dkr", "sts", "eks-auth", "ec2")}
    private_ids = {s.id for s in _subnets(result, "private").values()}
    sg = result.one("aws:ec2/securityGroup:SecurityGroup", "endpoints")
    for endpoint in interface.values():
        assert endpoint["privateDnsEnabled"] is True
        assert set(endpoint["subnetIds"]) == private_ids
        assert endpoint["securityGroupIds"] == [sg.id]
    ingress = sg.plain_inputs["ingress"]
    assert ingress == [{**ingress[0], "protocol": "tcp", "fromPort": 443, "toPort": 443, "cidrBlocks": ["10.20.0.0/16"]}]
    assert not sg.plain_inputs.get("egress")


def test_region_arg_names_the_endpoint_services():
    result, _ = _run(region="us-west-2", availability_zones=("us-west-2b", "us-west-2a"))
    services = {r.plain_inputs["serviceName"] for r in result.by_type(ENDPOINT)}
    assert "com.amazonaws.us-west-2.s3" in services and "com.amazonaws.us-west-2.ecr.dkr" in services


def test_flow_logs_go_to_the_log_group_with_its_retention_through_a_scoped_role(per_az):
    result, _ = per_az
    group = result.one("aws:cloudwatch/logGroup:LogGroup")
    assert group.plain_inputs["retentionInDays"] == 90
    flow = result.one("aws:ec2/flowLog:FlowLog").plain_inputs
    role = result.one("aws:iam/role:Role")
    assert flow["logDestination"] == group.outputs["arn"]
    assert flow["logDestinationType"] == "cloud-watch-logs"
    assert flow["trafficType"] == "ALL"
    assert flow["vpcId"] == result.one("aws:ec2/vpc:Vpc").id
    assert flow["iamRoleArn"] == role.outputs["arn"]
    trust = json.loads(role.plain_inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "vpc-flow-logs.amazonaws.com"}
    assert trust["Condition"]["StringEquals"]["aws:SourceAccount"] == offline.ACCOUNT_ID
    policy = json.loads(result.one("aws:iam/rolePolicy:RolePolicy").plain_inputs["policy"])
    arn = group.outputs["arn"]
    scoped, listing = policy["Statement"]
    assert set(scoped["Resource"]) == {arn, f"{arn}:*"} and "logs:PutLogEvents" in scoped["Action"]
    assert (listing["Action"], listing["Resource"]) == ("logs:DescribeLogGroups", "*")  # a list call: no log-group resource


@pytest.mark.parametrize(
    ("cidr", "azs", "smallest"),
    [("10.0.0.0/20", AZS, "/18"), ("10.0.0.0/19", ("us-east-1a", "us-east-1b"), "/18"), ("10.0.0.0/18", (*AZS, "us-east-1d"), "/17")],
)
def test_too_small_cidr_is_refused_before_anything_is_declared(cidr, azs, smallest):
    refused = assert_refused_before_declaring(lambda: Network("net", NetworkArgs(cluster_name="kimi-dev", availability_zones=azs, vpc_cidr=cidr)), engine=_engine())
    message = str(refused)
    assert cidr in message and f"{len(azs)} AZs" in message and f"smallest prefix that fits is {smallest}" in message


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"availability_zones": ("us-east-1a",)}, "at least 2"),
        ({"nat_mode": "perAZ"}, "nat_mode 'perAZ'"),
        ({"availability_zones": ("us-east-1a", "us-east-1a")}, "twice"),
        ({"region": "us-west-2"}, "not all in region us-west-2"),
        ({"vpc_cidr": "10.0.0.1/16"}, "expected an IPv4 CIDR such as"),
    ],
)
def test_bad_args_are_refused_before_anything_is_declared(changes, match):
    args = {"cluster_name": "kimi-dev", "availability_zones": AZS, **changes}
    assert_refused_before_declaring(lambda: Network("net", NetworkArgs(**args)), match, engine=_engine())


EXISTING = {"vpc_id": "vpc-0a1b2c3d4e5f67890", "private_subnet_ids_by_az": {"us-east-1a": "subnet-0a1b2c3d4e5f67891", BLOCK_AZ: "subnet-0a1b2c3d4e5f67890"}}


def _run_existing(**changes):
    holder = {}
    result = _engine().run(lambda: holder.setdefault("network", Network.from_existing("net", ExistingNetworkArgs(**{**EXISTING, **changes}))))
    return result, holder["network"]


def test_existing_vpc_declares_no_ec2_resources_and_exposes_the_ids():
    result, network = _run_existing(availability_zones=(BLOCK_AZ,), public_subnet_ids=("subnet-0a1b2c3d4e5f67899",))
    assert isinstance(network, Network)
    assert [r.type for r in result.resources] == ["kimi-k3:index:Network"]
    assert _resolve(network.vpc_id) == "vpc-0a1b2c3d4e5f67890"
    assert _resolve(network.vpc_cidr) == "10.0.0.0/16"
    assert _resolve(network.subnet_in(BLOCK_AZ)) == "subnet-0a1b2c3d4e5f67890"
    # the AZs passed in lead (the block's AZ first), whatever the mapping's order
    assert list(network.private_subnet_ids_by_az) == [BLOCK_AZ, "us-east-1a"]
    assert _resolve(network.private_subnet_ids) == ["subnet-0a1b2c3d4e5f67890", "subnet-0a1b2c3d4e5f67891"]
    assert _resolve(network.public_subnet_ids) == ["subnet-0a1b2c3d4e5f67899"]


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"vpc_id": "vpc-xyz"}, "vpc_id 'vpc-xyz' is not accepted; expected a VPC id"),
        ({"private_subnet_ids_by_az": {BLOCK_AZ: "sn-123"}}, "'sn-123' is not accepted; expected a subnet id"),
        ({"private_subnet_ids_by_az": {}}, "private_subnet_ids_by_az is required"),
        ({"availability_zones": ("us-east-1d",)}, r"no private subnet in us-east-1d \(covered: us-east-1a, us-east-1c\)"),
    ],
)
def test_existing_vpc_ids_are_validated(changes, match):
    assert_refused_before_declaring(lambda: Network.from_existing("net", ExistingNetworkArgs(**{**EXISTING, **changes})), match, engine=_engine())
