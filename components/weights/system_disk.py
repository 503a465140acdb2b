"""Does the weights staging Job's image fit the system nodes' root volume? The arithmetic, as one pure check.

The staging Job (:mod:`kimi_k3.weights.staging_job`) runs on the **system nodes**, whose one
gp3 root volume (``systemNodeDiskGiB``, 50 GiB by default) holds the OS, the kubelet's and
containerd's state, the logs and every image pulled there. The kubelet acts on that volume at
fixed fractions of it (KubeletConfiguration v1beta1 defaults, the kubelet config reference,
kubernetes ``staging/src/k8s.io/kubelet/config/v1beta1/types.go``; nodeadm keeps them):

* ``imageGCHighThresholdPercent: 85``: above 85 % used, image GC deletes unused images (down
  to ``imageGCLowThresholdPercent: 80``);
* ``evictionHard`` ``imagefs.available: 15%`` and ``nodefs.available: 10%``: on EKS AL2023
  containerd's root ``/var/lib/containerd`` is on the root volume, so the image filesystem is
  the node filesystem and 85 % used is also where the node gets ``DiskPressure``
  (pods evicted, nothing new scheduled: CoreDNS or a controller rescheduled there stays Pending).

So what runs there must stay under 85 % at its **peak**, which is while an image is pulled:
containerd holds a layer's compressed blob in its content store until it is unpacked into the
snapshot, and with ``discard_unpacked_layers = true`` (nodeadm's containerd config,
amazon-eks-ami ``nodeadm/internal/containerd/config.template.toml``) drops it only afterwards.
The peak of an image is its compressed plus its unpacked size; :func:`check` adds it to the
node's base (OS, state, logs) and the add-on images and compares with the threshold.

Figures (GiB; estimates with their sources, measure yours with ``crane manifest IMAGE | jq
'[.layers[].size] | add'`` for the compressed size and ``ctr -n k8s.io image usage`` /
``docker image inspect -f '{{.Size}}'`` for the unpacked one):

=================================  ==========  ========  =====================================
what                               compressed  unpacked  source
=================================  ==========  ========  =====================================
vLLM engine image (vllm-openai)    12          24        issue 21 (~10-20 GB); vLLM's CUDA image
                                                         with torch, FlashInfer and DeepGEMM
small staging image                0.1         0.35      images/weights-staging/Dockerfile:
                                                         python:3.12-slim (~45 MB / ~125 MB) +
                                                         boto3/botocore (~15 MB / ~100 MB)
OS, kubelet/containerd state, logs --          6         AL2023 EKS AMI (~4 GiB used) + logs
add-on images (vpc-cni, kube-proxy, --         2         the system node's DaemonSets and
CoreDNS, controllers)                                    controllers, all under ~300 MB each
=================================  ==========  ========  =====================================

With the engine image on the default 50 GiB: 6 + 2 + (12 + 24) = 44 GiB = 88 % > 85 %: image GC
and DiskPressure during the pull, the staging pod itself evicted. With the small image: 6 + 2
+ 0.45 = 8.45 GiB = 17 %. The engine image needs ``ceil(44 / 0.85) = 52`` GiB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

IMAGE_GC_HIGH_THRESHOLD_PERCENT = 85
"""Kubelet default ``imageGCHighThresholdPercent`` (KubeletConfiguration v1beta1, "Default: 85")."""
IMAGEFS_AVAILABLE_PERCENT = 15
"""Kubelet default ``evictionHard`` ``imagefs.available: 15%`` (the image filesystem is the root volume on AL2023)."""
NODEFS_AVAILABLE_PERCENT = 10
"""Kubelet default ``evictionHard`` ``nodefs.available: 10%``."""
KUBELET_SOURCE = (
    "kubelet config reference, KubeletConfiguration v1beta1 defaults (kubernetes staging/src/k8s.io/kubelet/config/v1beta1/"
    "types.go): imageGCHighThresholdPercent 85, evictionHard imagefs.available 15% and nodefs.available 10%"
)
LIMIT_PERCENT = min(IMAGE_GC_HIGH_THRESHOLD_PERCENT, 100 - IMAGEFS_AVAILABLE_PERCENT, 100 - NODEFS_AVAILABLE_PERCENT)
"""The highest use of the system node's root volume that neither starts image GC nor evicts pods: 85 %."""


@dataclass(frozen=True)
class ImageFootprint:
    """What one image takes on a node's disk."""

    name: str
    """What the image is (in messages)."""
    compressed_gib: float
    """Its layers as pulled (the content store, until unpacked)."""
    unpacked_gib: float
    """Its unpacked snapshot."""

    @property
    def peak_gib(self) -> float:
        """While it is pulled: compressed blobs and unpacked snapshot side by side."""
        return self.compressed_gib + self.unpacked_gib


ENGINE_IMAGE = ImageFootprint("the engine image", 12.0, 24.0)
"""The vLLM serving image (estimate, upper end of issue 21's ~10-20 GB)."""
STAGING_IMAGE = ImageFootprint("the staging image (images/weights-staging)", 0.1, 0.35)
"""python:3.12-slim plus boto3, built from ``images/weights-staging/Dockerfile``."""
NODE_BASE_GIB = 6.0
"""OS, kubelet and containerd state, logs on an AL2023 EKS system node."""
ADDON_IMAGES_GIB = 2.0
"""The add-on and controller images a system node runs."""


@dataclass(frozen=True)
class DiskVerdict:
    """The system node's root volume at the staging Job's peak."""

    disk_gib: int
    """Size of the root volume."""
    image: ImageFootprint
    """The staging Job's image."""
    peak_gib: float
    """Used at the image's pull: base + add-on images + the image's peak."""

    @property
    def percent(self) -> float:
        """``peak_gib`` as a percentage of the volume."""
        return 100.0 * self.peak_gib / self.disk_gib

    @property
    def fits(self) -> bool:
        """True when the peak stays at or under :data:`LIMIT_PERCENT`."""
        return self.percent <= LIMIT_PERCENT

    @property
    def minimum_disk_gib(self) -> int:
        """The smallest volume (whole GiB) on which this image fits."""
        return math.ceil(self.peak_gib * 100 / LIMIT_PERCENT)

    def arithmetic(self) -> str:
        """The sum, in one line."""
        i = self.image
        return (
            f"{NODE_BASE_GIB:g} GiB OS and state + {ADDON_IMAGES_GIB:g} GiB add-on images + {i.peak_gib:g} GiB for {i.name} at its pull "
            f"({i.compressed_gib:g} compressed + {i.unpacked_gib:g} unpacked) = {self.peak_gib:g} GiB, {self.percent:.0f}% of {self.disk_gib} GiB"
        )


def check(disk_gib: int, image: ImageFootprint) -> DiskVerdict:
    """The system node's root volume of ``disk_gib`` at the peak of the staging Job running ``image``."""
    return DiskVerdict(disk_gib=disk_gib, image=image, peak_gib=NODE_BASE_GIB + ADDON_IMAGES_GIB + image.peak_gib)


def refusal(verdict: DiskVerdict) -> str:
    """Why ``verdict`` does not fit and what does (one line, no key names: the settings layer adds them)."""
    return (
        f"{verdict.arithmetic()}, above the {LIMIT_PERCENT}% where the kubelet starts image GC and evicts pods ({KUBELET_SOURCE}); "
        f"{verdict.minimum_disk_gib} GiB or more fits it"
    )


__all__ = [
    "ADDON_IMAGES_GIB",
    "ENGINE_IMAGE",
    "IMAGEFS_AVAILABLE_PERCENT",
    "IMAGE_GC_HIGH_THRESHOLD_PERCENT",
    "KUBELET_SOURCE",
    "LIMIT_PERCENT",
    "NODEFS_AVAILABLE_PERCENT",
    "NODE_BASE_GIB",
    "STAGING_IMAGE",
    "DiskVerdict",
    "ImageFootprint",
    "check",
    "refusal",
]
