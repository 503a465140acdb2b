"""Composition of the components for one stack: settings in, wired components out.

Everything that can refuse the stack (settings, the Capacity Block look-up, AZ
resolution) happens before the first resource is declared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from components.errors import UserError
from components.network import Network, NetworkArgs
from components.reservation import CapacityBlockFacts, check_capacity_block, lookup_capacity_block
from components.settings import StackSettings


@dataclass(frozen=True)
class Environment:
    """Facts read from AWS before declaring anything."""

    reservation: CapacityBlockFacts
    availability_zones: tuple[str, ...]
    """AZs of the network, the Capacity Block's first."""
    warnings: tuple[str, ...]
    existing_private_subnets_by_az: dict[str, str]
    """With an existing VPC: its private subnet of each AZ (from ``aws.ec2.get_subnet``)."""


def resolve_environment(settings: StackSettings) -> Environment:
    """Look the reservation up, derive the AZs and check the block fits the stack."""
    block = lookup_capacity_block(settings.capacity.reservation_id)
    existing = _existing_private_subnets(settings)
    azs = tuple(existing) if existing else _availability_zones(settings, block.availability_zone)
    warnings = check_capacity_block(
        block,
        instance_type=settings.capacity.instance_type,
        availability_zones=azs,
        nodes_required=settings.nodes_required,
    )
    return Environment(reservation=block, availability_zones=azs, warnings=tuple(warnings), existing_private_subnets_by_az=existing)


def _existing_private_subnets(settings: StackSettings) -> dict[str, str]:
    by_az: dict[str, str] = {}
    for subnet_id in settings.network.existing_private_subnet_ids:
        az = aws.ec2.get_subnet(id=subnet_id).availability_zone
        if az in by_az:
            raise UserError(
                f"config kimi-k3:existingPrivateSubnetIds: {subnet_id} and {by_az[az]} are both in {az}; "
                "accepted: one private subnet per AZ"
            )
        by_az[az] = subnet_id
    return by_az


def _availability_zones(settings: StackSettings, block_az: str) -> tuple[str, ...]:
    net = settings.network
    if net.availability_zones:
        return net.availability_zones
    region_azs = aws.get_availability_zones(state="available").names
    if block_az not in region_azs:
        raise UserError(f"Capacity Block AZ {block_az} is not an available AZ of {settings.region} ({', '.join(region_azs)})")
    others = [az for az in region_azs if az != block_az]
    if len(others) + 1 < net.availability_zone_count:
        raise UserError(
            f"config kimi-k3:availabilityZoneCount: {net.availability_zone_count} is not accepted; "
            f"{settings.region} has {len(region_azs)} available AZs"
        )
    return (block_az, *others[: net.availability_zone_count - 1])


class Platform(pulumi.ComponentResource):
    """Kimi K3 on AWS for one stack: network, EKS, Capacity Block GPU nodes, plugins, vLLM."""

    def __init__(self, name: str, settings: StackSettings, opts: pulumi.ResourceOptions | None = None) -> None:
        """Resolve the environment, then declare every component.

        :param name: base name of every resource of the stack.
        :param settings: validated stack settings (see :mod:`components.settings`).
        :param opts: options of the component itself.
        """
        environment = resolve_environment(settings)
        for warning in environment.warnings:
            pulumi.log.warn(warning)
        super().__init__("kimi-k3:index:Platform", name, None, opts)
        self.settings = settings
        self.environment = environment
        self.cluster_name = f"{name}-{pulumi.get_stack()}"
        tags = {"Project": "kimi-k3", "Stack": pulumi.get_stack(), "Environment": settings.environment, "ManagedBy": "pulumi"}
        child = pulumi.ResourceOptions(parent=self)
        net = settings.network

        self.network = Network(
            f"{name}-network",
            NetworkArgs(
                cluster_name=self.cluster_name,
                availability_zones=environment.availability_zones,
                vpc_cidr=net.vpc_cidr,
                nat_mode=net.nat_mode,
                flow_log_retention_days=net.flow_log_retention_days,
                region=settings.region,
                tags=tags,
                existing_vpc_id=net.existing_vpc_id,
                existing_private_subnet_ids_by_az=environment.existing_private_subnets_by_az,
                existing_public_subnet_ids=net.existing_public_subnet_ids,
            ),
            opts=child,
        )

        self.register_outputs(self.stack_outputs())

    def stack_outputs(self) -> dict[str, Any]:
        """The stack outputs ``__main__.py`` exports."""
        block = self.environment.reservation
        s = self.settings
        return {
            "region": s.region,
            "vpcId": self.network.vpc_id,
            "environment": s.environment,
            "availabilityZones": list(self.environment.availability_zones),
            "capacityBlock": {
                "id": block.reservation_id,
                "state": block.state,
                "availabilityZone": block.availability_zone,
                "instanceType": block.instance_type,
                "instanceCount": block.instance_count,
                "start": block.start.isoformat(),
                "end": block.end.isoformat(),
            },
            "gpuNodes": block.instance_count,
            "gpusTotal": block.instance_count * s.instance.gpus,
            "servedModelName": "Kimi-K3",
            "modelRevision": s.serving.model_revision,
            "image": str(s.serving.image),
        }
