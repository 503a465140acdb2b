"""Region and weights facts a stack is checked against, each with its source (issue 24, point 4).

* **Regions that exist**: ``aws:region`` must be an EC2 region of botocore's endpoint data
  (the installed botocore's ``endpoints.json``, its version named in the message): a name of
  the right shape that AWS does not have (``eu-east-1``, ``us-north-1``) is refused, with the
  nearest real region.
* **Regions the library has data for**: :data:`REGION_DATA` lists, per GPU instance type, the
  regions the catalog's figures (block price, S3 and NAT estimates) and the tested stacks cover.
  Elsewhere the plan warns: whether Capacity Blocks offer the type there is AWS's answer
  (``kimi-k3 capacity offerings``), not the library's.
* **Weights pinned to a revision**: an S3 weights prefix that names no revision (a 40-hex
  commit, ``kimi-k3:modelRevision``) may hold any revision (a re-sync changes what the pods serve):
  refused in prod, warned elsewhere.
"""

from __future__ import annotations

import difflib
import functools
import gzip
import json
import re
from pathlib import Path
from types import MappingProxyType

REGION_DATA_SOURCE = "kimi_k3.stack.region_facts.REGION_DATA (the regions of the catalog's figures and of the tested stacks), 2026-12"
"""Where :data:`REGION_DATA` comes from, and its date."""

REGION_DATA: MappingProxyType[str, tuple[str, ...]] = MappingProxyType(
    {
        "p6-b300.48xlarge": ("us-east-1", "us-west-2"),  # the dev and prod stacks
        "p6-b200.48xlarge": (),  # the catalog has no block price for it
        "p5en.48xlarge": ("us-east-2",),  # the catalog's block price: EC2 Capacity Blocks pricing, US East (Ohio)
    }
)
"""GPU instance type -> regions the library has figures for (not AWS's list of offerings)."""


@functools.lru_cache(maxsize=1)
def ec2_regions() -> tuple[frozenset[str], str]:
    """EC2 regions of every partition in the installed botocore's endpoint data, and botocore's version (empty without botocore).

    Read from botocore's ``data/endpoints.json`` as ``Session.get_available_regions("ec2", partition)`` reads it: the
    ``ec2`` endpoints of each partition that are among the partition's ``regions`` (botocore 1.44.18,
    ``botocore/regions.py`` ``EndpointResolver.get_available_endpoints``), without importing ``botocore.session``
    (a third of a second of every plan; tests/test_region_facts.py holds the two answers equal).
    """
    try:  # boto3 is a dependency of the package; without botocore no region is refused
        import botocore
    except ImportError:  # pragma: no cover - botocore comes with boto3
        return frozenset(), ""
    regions: set[str] = set()
    for partition in _endpoint_data(Path(botocore.__file__).parent / "data")["partitions"]:
        endpoints = partition["services"].get("ec2", {}).get("endpoints", {})
        regions.update(name for name in endpoints if name in partition["regions"])
    return frozenset(regions), botocore.__version__


def _endpoint_data(data: Path) -> dict:
    """botocore's endpoint data (``endpoints.json``, or the ``.gz`` some releases ship)."""
    plain, packed = data / "endpoints.json", data / "endpoints.json.gz"
    if plain.exists():
        return json.loads(plain.read_bytes())
    return json.loads(gzip.decompress(packed.read_bytes()))


def nearest_region(region: str) -> str | None:
    """The EC2 region closest to ``region`` (a typo's intended region), or ``None``."""
    near = difflib.get_close_matches(region, sorted(ec2_regions()[0]), n=1, cutoff=0.6)
    return near[0] if near else None


def unknown_region(region: str) -> str | None:
    """Why ``region`` is refused (not an EC2 region), or ``None``."""
    regions, version = ec2_regions()
    if not regions or region in regions:
        return None
    near = nearest_region(region)
    hint = f"did you mean {near}? " if near else ""
    return f"not an EC2 region (botocore {version}'s endpoint data lists {len(regions)}); {hint}e.g. us-east-1, us-west-2"


def region_warnings(region: str, instance_type: str) -> list[str]:
    """A warning when the library has no data for ``instance_type`` in ``region``."""
    covered = REGION_DATA.get(instance_type, ())
    if region in covered:
        return []
    return [
        f"aws:region {region}: the library has no data for {instance_type} there ({REGION_DATA_SOURCE}: "
        f"{', '.join(covered) or 'no region'}): the block price and the start-up estimates are not of {region}, "
        f"and whether Capacity Blocks offer {instance_type} in {region} is AWS's answer: check `kimi-k3 capacity offerings` there before buying"
    ]


def unpinned_weights(s3_uri: str | None, revision: str) -> str | None:
    """Why an S3 weights prefix is not pinned (it names no 40-hex revision), or ``None``."""
    if not s3_uri or not revision or re.search(r"(?<![0-9a-fA-F])[0-9a-f]{40}(?![0-9a-fA-F])", s3_uri):
        return None  # pinned; a prefix naming another revision is kimi_k3.stack.lint's warning
    return (
        f"the prefix does not name the pinned revision {revision} (kimi-k3:modelRevision): it may hold any revision, and a re-sync "
        f"changes what the pods serve; sync the revision to its own prefix, e.g. s3://<bucket>/moonshotai/Kimi-K3/{revision}/"
    )


__all__ = ["REGION_DATA", "REGION_DATA_SOURCE", "ec2_regions", "nearest_region", "region_warnings", "unknown_region", "unpinned_weights"]
