"""The ``Network`` keys: the VPC layout (checked by :func:`kimi_k3.network.subnets.subnet_layout`) or an existing VPC.

A section of :mod:`kimi_k3.stack.settings` (the only reader of stack config).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from kimi_k3.core.formats import (
    LOG_RETENTION_DAYS,
    SUBNET_ID,
    VPC_ID,
)
from kimi_k3.errors import SettingsError, UserError
from kimi_k3.network.subnets import NAT_MODES, subnet_layout, vpc_cidr_problem
from kimi_k3.stack.settings.reader import Reader, full_key, in_range, one_of


@dataclass(frozen=True)
class NetworkSettings:
    """VPC layout: CIDR, AZs, NAT mode, flow logs, or an existing VPC."""

    vpc_cidr: str
    """IPv4 CIDR of a VPC the stack creates (``vpcCidr``): RFC 1918, /16 to /20; the service CIDR must lie apart from it."""
    availability_zones: tuple[str, ...]
    """Explicit AZs; empty means derive them from the Capacity Block's AZ."""
    availability_zone_count: int
    """AZs to spread over when ``availability_zones`` is empty, 2 to 4 (``availabilityZoneCount``)."""
    nat_mode: str
    """``single`` (one NAT gateway shared by every AZ) or ``perAz`` (one per AZ) (``natGateways``, :data:`kimi_k3.network.subnets.NAT_MODES`)."""
    flow_log_retention_days: int
    """Retention of the VPC flow logs in CloudWatch Logs, days (``flowLogRetentionDays``, a CloudWatch retention value)."""
    private_subnet_prefix: int
    """Prefix of each private subnet the VPC CIDR holds for the AZ count (:func:`kimi_k3.network.subnets.subnet_layout`)."""
    public_subnet_prefix: int
    """Prefix of each public subnet."""
    existing_vpc_id: str | None
    """VPC to use instead of creating one (``existingVpcId``); ``None``: the stack creates the VPC."""
    existing_private_subnet_ids: tuple[str, ...]
    """Private subnet ids of the existing VPC, one per AZ (``existingPrivateSubnetIds``); empty without ``existing_vpc_id``."""
    existing_public_subnet_ids: tuple[str, ...]
    """Public (load balancer) subnet ids of the existing VPC (``existingPublicSubnetIds``); empty without ``existing_vpc_id``."""


def validate_network(r: Reader, region: str) -> NetworkSettings:
    """The network keys (VPC CIDR, AZs, NAT, an existing VPC), validated for ``region``."""
    problem = vpc_cidr_problem(r.get("vpcCidr"))  # the rule's home: the network's (NetworkArgs.vpc_cidr)
    if problem:
        raise SettingsError(full_key("vpcCidr"), r.get("vpcCidr"), problem)
    vpc = ipaddress.IPv4Network(r.get("vpcCidr"))
    az_count = in_range("availabilityZoneCount", r.get("availabilityZoneCount"), 2, 4)
    azs = r.get("availabilityZones")
    for az in azs:
        if not re.fullmatch(rf"{re.escape(region)}[a-z]", az):
            raise SettingsError(full_key("availabilityZones"), az, f"expected AZ names of region {region}, e.g. {region}a")
    if len(set(azs)) != len(azs):
        raise SettingsError(full_key("availabilityZones"), list(azs), "each AZ once")
    if azs and len(azs) < 2:
        raise SettingsError(full_key("availabilityZones"), list(azs), "at least 2 AZs (EKS needs subnets in two AZs)")
    n_azs = len(azs) or az_count
    if vpc.prefixlen < 16 or vpc.prefixlen > 28:
        raise SettingsError(full_key("vpcCidr"), str(vpc), "accepted: a prefix between /16 and /20 (AWS VPCs are /16 to /28)")
    try:
        private_prefix, public_prefix = subnet_layout(vpc.prefixlen, n_azs)
    except UserError as err:
        raise SettingsError(full_key("vpcCidr"), str(vpc), str(err).replace(f"a /{vpc.prefixlen} VPC is too small", "too small")) from None
    if vpc.prefixlen > 20:
        raise SettingsError(full_key("vpcCidr"), str(vpc), "accepted: a prefix between /16 and /20")
    existing_vpc = r.get("existingVpcId") or None
    private_ids = r.get("existingPrivateSubnetIds")
    public_ids = r.get("existingPublicSubnetIds")
    if existing_vpc:
        if not VPC_ID.fullmatch(existing_vpc):
            raise SettingsError(full_key("existingVpcId"), existing_vpc, "expected a VPC id such as vpc-0a1b2c3d4e5f67890")
        if not private_ids:
            raise SettingsError(full_key("existingPrivateSubnetIds"), [], "required with existingVpcId: the private subnet ids, one per AZ")
    elif private_ids or public_ids:
        raise SettingsError(full_key("existingPrivateSubnetIds"), list(private_ids or public_ids), "only used together with existingVpcId")
    for name, ids in (("existingPrivateSubnetIds", private_ids), ("existingPublicSubnetIds", public_ids)):
        for subnet in ids:
            if not SUBNET_ID.fullmatch(subnet):
                raise SettingsError(full_key(name), subnet, "expected subnet ids such as subnet-0a1b2c3d4e5f67890")
    return NetworkSettings(
        vpc_cidr=str(vpc),
        availability_zones=azs,
        availability_zone_count=az_count,
        nat_mode=one_of("natGateways", r.get("natGateways"), NAT_MODES),
        flow_log_retention_days=one_of("flowLogRetentionDays", r.get("flowLogRetentionDays"), LOG_RETENTION_DAYS),
        private_subnet_prefix=private_prefix,
        public_subnet_prefix=public_prefix,
        existing_vpc_id=existing_vpc,
        existing_private_subnet_ids=private_ids,
        existing_public_subnet_ids=public_ids,
    )
