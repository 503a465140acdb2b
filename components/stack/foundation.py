"""What both serving platforms (the EKS ``Platform`` and the ``hyperpod`` composition) resolve and share before
they declare the network and the EKS cluster: the AZs, an existing VPC's subnets, secrets as inputs."""

from __future__ import annotations

from typing import Protocol

import pulumi
import pulumi_aws as aws

from kimi_k3.errors import SettingsError, UserError
from kimi_k3.stack.settings import Secret, StackSettings


def existing_private_subnets(settings: StackSettings) -> dict[str, str]:
    """With an existing VPC: its private subnet of each AZ, read from AWS (one per AZ)."""
    by_az: dict[str, str] = {}
    for subnet_id in settings.network.existing_private_subnet_ids:
        az = aws.ec2.get_subnet(id=subnet_id).availability_zone
        if az in by_az:
            raise SettingsError("kimi-k3:existingPrivateSubnetIds", list(settings.network.existing_private_subnet_ids), f"one private subnet per AZ ({subnet_id} and {by_az[az]} are both in {az})")
        by_az[az] = subnet_id
    return by_az


def availability_zones(settings: StackSettings, block_az: str, capacity: str = "Capacity Block") -> tuple[str, ...]:
    """The network's AZs: the configured ones, or ``block_az`` (where the ``capacity`` is) and the next AZs of the region."""
    net = settings.network
    if net.availability_zones:
        return net.availability_zones
    region_azs = aws.get_availability_zones(state="available").names
    if block_az not in region_azs:
        raise UserError(f"{capacity} AZ {block_az} is not an available AZ of {settings.region} ({', '.join(region_azs)})")
    others = [az for az in region_azs if az != block_az]
    if len(others) + 1 < net.availability_zone_count:
        raise SettingsError("kimi-k3:availabilityZoneCount", net.availability_zone_count, f"at most {len(region_azs)}: the available AZs of {settings.region}")
    return (block_az, *others[: net.availability_zone_count - 1])


def secret_input(secret: Secret | None) -> pulumi.Output[str] | None:
    """A stack secret as a Pulumi secret input of a component (``None`` stays ``None``); both serving platforms use it."""
    return pulumi.Output.secret(secret.value) if secret else None


class StackFoundation(Protocol):
    """What both serving platforms resolve before declaring the shared network and EKS cluster."""

    @property
    def warnings(self) -> tuple[str, ...]:
        """Findings that do not stop the stack, printed once."""

    @property
    def availability_zones(self) -> tuple[str, ...]:
        """AZs of the network, the capacity's first."""

    @property
    def existing_private_subnets_by_az(self) -> dict[str, str]:
        """With an existing VPC: its private subnet of each AZ."""
