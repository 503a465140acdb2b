"""Where a GPU node writes the engine image, read from the pinned AMI's own disk setup, and the root volume that must carry it.

With a NodeConfig's ``localStorage.strategy: RAID0`` nodeadm runs the AMI's ``setup-local-disks``,
which builds the instance-store RAID0 and bind-mounts the directories it lists onto it
(:func:`raid_bound_dirs`, read from the vendored amazon-eks-ami v20251120 script:
``BIND_MOUNTS+=("kubelet")``, ``("containerd")`` and ``/var/log/pods``). With nodeadm's
``FastImagePull`` feature gate, containerd pulls through the SOCI snapshotter, whose store is
:data:`SOCI_STORE`: in v20251120 it is not among the bound directories — the mount onto the instance
store arrived later (awslabs/amazon-eks-ami PR #2548, "feat: mount soci directory to instance store",
merged 2025-12-05; #2588 made it optional) — so the image's layers and snapshots land on the **root
gp3 volume**, at its baseline 125 MiB/s unless throughput is provisioned.

:func:`fast_image_pull_root_volume_carries_the_image` is the offline engine's rule (in
:data:`kimi_k3.offline.rules.RULES`): a launch template with FastImagePull on, whose SOCI store is not
on the RAID0, must give the root volume the throughput to write the engine image
(:data:`kimi_k3.weights.system_disk.ENGINE_IMAGE`: compressed blobs, then the unpacked snapshot) within
:data:`IMAGE_WRITE_BUDGET_S`. At 125 MiB/s its ~36 GiB take ~5 min of paid GPU time per node start;
at the 1,000 MiB/s the platform provisions (:data:`kimi_k3.capacity.node_group.FAST_IMAGE_PULL_ROOT_THROUGHPUT_MIBPS`),
~37 s.
"""

from __future__ import annotations

import base64
import binascii
import email
import email.message
import math
import re
from collections.abc import Mapping
from typing import Any

import yaml

from kimi_k3.capacity.node_group import GP3_BASELINE_THROUGHPUT_MIBPS, ROOT_DEVICE
from kimi_k3.offline.systemd_units import AMI_RELEASE, vendored
from kimi_k3.weights.system_disk import ENGINE_IMAGE

SOCI_STORE = "/var/lib/soci-snapshotter-grpc"
"""The SOCI snapshotter's root directory (PR #2548 mounts it onto the instance store in later releases)."""
SETUP_LOCAL_DISKS = f"amazon-eks-ami-{AMI_RELEASE}/setup-local-disks"
"""The vendored disk-setup script of the pinned release (``components/data/``)."""
IMAGE_WRITE_BUDGET_S = 60
"""The most seconds writing the engine image to the root volume may take on a node start (paid GPU time)."""
SOURCE = (
    f"amazon-eks-ami {AMI_RELEASE} setup-local-disks (vendored in components/data/amazon-eks-ami-{AMI_RELEASE}/; BIND_MOUNTS: kubelet, containerd; /var/log/pods); "
    f"the SOCI store {SOCI_STORE} is mounted onto the instance store only from awslabs/amazon-eks-ami PR #2548 on; gp3 baseline "
    "125 MiB/s (EBS user guide, General Purpose SSD volumes)"
)
"""Where the rule's facts come from."""

_BIND = re.compile(r'BIND_MOUNTS\+=\("([\w-]+)"\)')


def raid_bound_dirs(script: str | None = None) -> frozenset[str]:
    """The directories ``setup-local-disks`` bind-mounts onto the RAID (``/var/lib/<name>`` of each ``BIND_MOUNTS`` entry,
    and ``/var/log/pods`` when the script binds it)."""
    text = script if script is not None else vendored(SETUP_LOCAL_DISKS)
    found = {f"/var/lib/{name}" for name in _BIND.findall(text)}
    if "var-log-pods.mount" in text:
        found.add("/var/log/pods")
    return frozenset(found)


def soci_store_on_raid(script: str | None = None) -> bool:
    """Whether the pinned AMI puts SOCI's store on the RAID0 (below a bound directory)."""
    return any(d == SOCI_STORE or SOCI_STORE.startswith(d + "/") for d in raid_bound_dirs(script))


def _node_configs(user_data: str) -> list[dict[str, Any]]:
    try:
        text = base64.b64decode(user_data, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        text = user_data
    message = email.message_from_string(text)
    parts = message.get_payload() if message.is_multipart() else [message]
    configs = []
    for part in parts:
        if not isinstance(part, email.message.Message):
            continue
        body = part.get_payload() if part.get_content_type() == "application/node.eks.aws" else None
        if isinstance(body, str):
            configs += [d for d in yaml.safe_load_all(body) if isinstance(d, dict)]
    return configs


def fast_image_pull_on_raid(user_data: str) -> tuple[bool, bool]:
    """``(FastImagePull on, localStorage RAID0/RAID10)`` of a launch template's user data (nodeadm merges its NodeConfigs)."""
    fast = raid = False
    for config in _node_configs(user_data):
        spec = config.get("spec") or {}
        fast = fast or (spec.get("featureGates") or {}).get("FastImagePull") is True
        strategy = str(((spec.get("instance") or {}).get("localStorage") or {}).get("strategy", "")).upper()
        raid = raid or strategy in ("RAID0", "RAID10")
    return fast, raid


def root_throughput(inputs: Mapping[str, Any]) -> float:
    """The root volume's throughput (MiB/s) a launch template gives: its ``throughput``, else gp3's baseline."""
    for mapping in inputs.get("blockDeviceMappings") or []:
        if isinstance(mapping, dict) and mapping.get("deviceName") == ROOT_DEVICE:
            value = (mapping.get("ebs") or {}).get("throughput")
            return float(value) if isinstance(value, (int, float)) and value > 0 else GP3_BASELINE_THROUGHPUT_MIBPS
    return GP3_BASELINE_THROUGHPUT_MIBPS


def image_write_seconds(throughput_mibps: float) -> float:
    """Seconds to write the engine image (compressed blobs and unpacked snapshot) at ``throughput_mibps``."""
    return (ENGINE_IMAGE.compressed_gib + ENGINE_IMAGE.unpacked_gib) * 1024 / throughput_mibps


def needed_throughput() -> int:
    """The least root-volume throughput (MiB/s) that writes the engine image within :data:`IMAGE_WRITE_BUDGET_S`."""
    return math.ceil((ENGINE_IMAGE.compressed_gib + ENGINE_IMAGE.unpacked_gib) * 1024 / IMAGE_WRITE_BUDGET_S)


def root_volume_problem(inputs: Mapping[str, Any], script: str | None = None) -> str | None:
    """One line when a launch template's FastImagePull writes the engine image to a root volume too slow for it."""
    user_data = inputs.get("userData")
    if not isinstance(user_data, str) or not user_data:
        return None
    fast, raid = fast_image_pull_on_raid(user_data)
    if not fast or (raid and soci_store_on_raid(script)):
        return None
    throughput = root_throughput(inputs)
    seconds = image_write_seconds(throughput)
    if seconds <= IMAGE_WRITE_BUDGET_S:
        return None
    return (
        f"FastImagePull writes the engine image ({ENGINE_IMAGE.compressed_gib:g} GiB compressed + {ENGINE_IMAGE.unpacked_gib:g} GiB "
        f"unpacked) into {SOCI_STORE} on the root volume, not the RAID0, on amazon-eks-ami {AMI_RELEASE}: at {throughput:g} MiB/s "
        f"that is ~{seconds:.0f} s per node start; provision at least {needed_throughput()} MiB/s (blockDeviceMappings "
        f"{ROOT_DEVICE} ebs.throughput, with IOPS >= throughput / 0.25) ({SOURCE})"
    )


__all__ = [
    "IMAGE_WRITE_BUDGET_S", "SOCI_STORE", "SOURCE", "fast_image_pull_on_raid", "image_write_seconds", "needed_throughput", "raid_bound_dirs",
    "root_throughput", "root_volume_problem", "soci_store_on_raid",
]
