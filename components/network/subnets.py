"""How a VPC is carved into subnets: the one home of the layout rule (pure, no Pulumi).

One private (node) subnet and one public (load balancer) subnet per AZ. Every private
block comes first, then every public one, each aligned to its own size, so the plan
depends only on the inputs. The sizes follow the VPC: a /20 private and a /24 public
subnet per AZ when they fit, smaller ones in a smaller VPC, down to the floors below.
:class:`kimi_k3.network.vpc.Network` declares the plan; the settings layer calls
:func:`subnet_layout` so a VPC CIDR that cannot hold the subnets is refused before
anything is declared.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from kimi_k3.errors import UserError

NAT_MODES = ("single", "perAz")
"""``single``: one NAT gateway shared by every AZ (cheaper); ``perAz``: one per AZ (no cross-AZ dependency)."""

AWS_SUBNET_PREFIXES = range(16, 29)
"""Prefix lengths AWS accepts for a VPC or an IPv4 subnet (/16 to /28; Amazon VPC User Guide, "VPC CIDR blocks")."""

PRIVATE_PREFIXES = (20, 21, 22)
"""Private subnet sizes tried, largest first. /22 (1,019 usable addresses: AWS keeps 5 per subnet)
is the floor: with VPC CNI prefix delegation every node takes /28 blocks for its pods, and the
system nodes, GPU nodes, interface endpoints and rolling replacements must fit."""

PUBLIC_PREFIXES = (24, 25, 26)
"""Public subnet sizes tried, largest first; /26 keeps room for NAT gateways and NLB nodes
(an NLB needs at least 8 free addresses per subnet, Elastic Load Balancing User Guide)."""


@dataclass(frozen=True)
class SubnetPlan:
    """CIDR blocks carved from the VPC, one private and one public per AZ, in AZ order."""

    private: dict[str, ipaddress.IPv4Network]
    """Private (node) subnet of each AZ, keyed by AZ name."""
    public: dict[str, ipaddress.IPv4Network]
    """Public (load balancer, NAT gateway) subnet of each AZ, keyed by AZ name."""


def _aligned_offsets(sizes: Sequence[int]) -> tuple[list[int], int]:
    """Offsets of consecutive blocks, each aligned to its size, and the total span."""
    offsets, cursor = [], 0
    for size in sizes:
        cursor = -(-cursor // size) * size
        offsets.append(cursor)
        cursor += size
    return offsets, cursor


def _span(az_count: int, private_prefix: int, public_prefix: int) -> int:
    sizes = [2 ** (32 - private_prefix)] * az_count + [2 ** (32 - public_prefix)] * az_count
    return _aligned_offsets(sizes)[1]


PRIVATE_RANGES = "a private RFC 1918 range (10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16)"
"""What a VPC's CIDR must lie in: the stack and a direct ``NetworkArgs`` refuse a public range alike."""


def vpc_cidr_problem(vpc_cidr: str) -> str | None:
    """Why ``vpc_cidr`` cannot be a new VPC's range (not a strict IPv4 CIDR, not RFC 1918); ``None``: it can.

    The size is :func:`plan_subnets`'s rule (it depends on the AZs and the subnet prefixes)."""
    try:
        network = ipaddress.IPv4Network(vpc_cidr, strict=True)
    except ValueError as err:
        return f"expected an IPv4 CIDR such as 10.42.0.0/16 ({err})"
    if not network.is_private:
        return f"expected {PRIVATE_RANGES}"
    return None


def subnet_layout(vpc_prefix: int, az_count: int) -> tuple[int, int]:
    """The largest (private, public) subnet prefixes a /``vpc_prefix`` VPC holds for ``az_count`` AZs.

    Raises :class:`UserError` naming the smallest VPC prefix that fits when none does.
    """
    capacity = 2 ** (32 - vpc_prefix)
    for private in PRIVATE_PREFIXES:
        for public in PUBLIC_PREFIXES:
            if _span(az_count, private, public) <= capacity:
                return private, public
    need = _span(az_count, PRIVATE_PREFIXES[-1], PUBLIC_PREFIXES[-1])
    smallest = 32 - (need - 1).bit_length()
    raise UserError(
        f"a /{vpc_prefix} VPC is too small for {az_count} AZs (at least a /{PRIVATE_PREFIXES[-1]} private and a "
        f"/{PUBLIC_PREFIXES[-1]} public subnet per AZ); use a /{smallest} or larger, or fewer AZs"
    )


def plan_subnets(
    vpc_cidr: str, availability_zones: Sequence[str], private_prefix: int | None = None, public_prefix: int | None = None
) -> SubnetPlan:
    """Carve the subnets deterministically: every private block first, then every public one.

    Prefixes left ``None`` come from :func:`subnet_layout`. Raises :class:`UserError`
    when the CIDR cannot hold them, naming the CIDR, the AZ count and the smallest
    prefix that would.
    """
    try:
        vpc = ipaddress.IPv4Network(vpc_cidr, strict=True)
    except ValueError as exc:
        raise UserError(f"VPC CIDR {vpc_cidr!r} is not an IPv4 network such as 10.0.0.0/16 ({exc})") from None
    if vpc.prefixlen not in AWS_SUBNET_PREFIXES:
        raise UserError(f"VPC CIDR {vpc} is not accepted; AWS VPCs are /16 to /28")
    n = len(availability_zones)
    if private_prefix is None or public_prefix is None:
        auto_private, auto_public = subnet_layout(vpc.prefixlen, n)
        private_prefix = auto_private if private_prefix is None else private_prefix
        public_prefix = auto_public if public_prefix is None else public_prefix
    for label, prefix in (("private", private_prefix), ("public", public_prefix)):
        if prefix not in AWS_SUBNET_PREFIXES:
            raise UserError(f"{label} subnet prefix /{prefix} is not accepted; AWS subnets are /16 to /28")
    sizes = [2 ** (32 - private_prefix)] * n + [2 ** (32 - public_prefix)] * n
    offsets, span = _aligned_offsets(sizes)
    if span > vpc.num_addresses:
        smallest = 32 - (span - 1).bit_length()
        hint = "" if smallest >= 16 else " (beyond AWS's largest VPC, /16: use fewer AZs or smaller subnets)"
        raise UserError(
            f"VPC CIDR {vpc} is too small for {n} AZs with a /{private_prefix} private and a /{public_prefix} "
            f"public subnet per AZ; the smallest prefix that fits is /{smallest}{hint}"
        )
    base = int(vpc.network_address)
    blocks = [ipaddress.IPv4Network((base + offset, 32 - (size - 1).bit_length())) for offset, size in zip(offsets, sizes, strict=False)]
    return SubnetPlan(private=dict(zip(availability_zones, blocks[:n], strict=False)), public=dict(zip(availability_zones, blocks[n:], strict=False)))


__all__ = ["AWS_SUBNET_PREFIXES", "NAT_MODES", "SubnetPlan", "plan_subnets", "subnet_layout"]
