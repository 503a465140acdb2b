"""The Amazon ECR registry EKS replicates its add-on images to, per region (the EFA device plugin's image comes from there).

Read from the EKS user guide page "View Amazon container image registries for Amazon EKS
add-ons" (``latest/ug/workloads/add-ons-images.adoc`` of awsdocs/amazon-eks-user-guide),
vendored unchanged as ``components/data/eks-add-on-image-registries.adoc`` (provenance in
``components/data/README.md``). Most regions use account 602401143452; opt-in regions use
their own accounts, and China regions a ``.amazonaws.com.cn`` domain. A node pulls its images
from its own region's registry (through the VPC's ECR endpoints); another region's image
would cross the NAT, and an opt-in region's may not be readable at all.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from types import MappingProxyType

REGISTRIES_FILE = "eks-add-on-image-registries.adoc"
"""Package data file (``components/data``) with the page's table."""

_ROW = re.compile(r"^\|([a-z]+(?:-[a-z]+)+-\d+)\n\|(\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.(?:com|com\.cn|eu))$", re.M)


@functools.lru_cache(maxsize=1)
def registries() -> MappingProxyType[str, str]:
    """Region -> registry host (``602401143452.dkr.ecr.us-east-1.amazonaws.com``), as the page lists them."""
    text = resources.files("kimi_k3").joinpath("data", REGISTRIES_FILE).read_text()
    return MappingProxyType(dict(_ROW.findall(text)))


def registry_for(region: str) -> str | None:
    """The EKS add-on image registry of ``region`` (``None``: the page lists no registry for it)."""
    return registries().get(region)


__all__ = ["REGISTRIES_FILE", "registries", "registry_for"]
