"""The ``Capacity Block and GPU nodes`` keys and the ``GPU plugins`` keys.

A section of :mod:`kimi_k3.stack.settings` (the only reader of stack config).
"""

from __future__ import annotations

from dataclasses import dataclass

from kimi_k3.capacity import rules
from kimi_k3.core.formats import (
    CHART_VERSION,
    EMAIL_LETTER_TLD,
)
from kimi_k3.errors import SettingsError
from kimi_k3.stack.config_keys import CONFIG_KEYS
from kimi_k3.stack.settings.reader import Reader, full_key, in_range


@dataclass(frozen=True)
class CapacitySettings:
    """The Capacity Block and the GPU node group bought with it."""

    reservation_id: str
    """Capacity Block reservation id, ``cr-`` and 17 hex digits (``capacityReservationId``); ``""`` (unset) only on a ``hyperpod`` stack."""
    instance_type: str
    """GPU instance type, a key of :data:`kimi_k3.core.catalog.INSTANCE_TYPES` (``gpuInstanceType``)."""
    ami_release_version: str | None
    """EKS AL2023 NVIDIA AMI release to pin, e.g. ``1.34.2-20251120`` (``gpuAmiReleaseVersion``); ``None``: the latest at creation."""
    root_volume_gib: int
    """Encrypted root volume of each GPU node, GiB, 100 to 2000 (``gpuRootVolumeGiB``)."""
    efa_enabled: bool
    """Attach EFA interfaces to the GPU nodes and install the EFA device plugin (``efaEnabled``); required when a replica spans nodes."""
    alert_email: str | None
    """E-mail subscribed to the Capacity Block alerts' SNS topic (``capacityAlertEmail``); ``None``: the topic only."""


@dataclass(frozen=True)
class GpuPluginSettings:
    """Versions and switches of the GPU node plugins."""

    nvidia_device_plugin_version: str
    """Helm chart version of nvidia-device-plugin, without a leading ``v`` (``nvidiaDevicePluginVersion``)."""
    efa_device_plugin_version: str
    """Helm chart version of aws-efa-k8s-device-plugin, 0.5.10 or newer, without a leading ``v`` (``efaDevicePluginVersion``)."""
    dcgm_exporter_enabled: bool
    """Install the NVIDIA DCGM exporter (GPU metrics) on the GPU nodes (``dcgmExporterEnabled``)."""
    dcgm_exporter_version: str
    """Helm chart version of dcgm-exporter, without a leading ``v`` (``dcgmExporterVersion``)."""


def validate_capacity(r: Reader, prod: bool, *, hyperpod: bool = False) -> CapacitySettings:
    """The Capacity Block keys (the reservation, its instance type, the node counts), validated; a hyperpod stack needs no reservation."""
    reservation = r.get("capacityReservationId")
    if not reservation and not hyperpod:
        key = CONFIG_KEYS["capacityReservationId"]
        raise SettingsError(key.full_name, None, f"it is required: {key.description} Set it with `pulumi config set {key.full_name} <value>`")
    problem = rules.reservation_id_problem(reservation) if reservation else None  # the rule's home: the node group's
    if problem:
        raise SettingsError(full_key("capacityReservationId"), reservation, problem + (" to set here" if problem.startswith("that is") else ""))
    ami = r.get("gpuAmiReleaseVersion") or None
    ami_problem = rules.ami_release_problem(ami) if ami else None
    if ami_problem:
        raise SettingsError(full_key("gpuAmiReleaseVersion"), ami, ami_problem)
    if prod and not ami and not hyperpod:
        raise SettingsError(full_key("gpuAmiReleaseVersion"), None, "required in prod: pin the AL2023 NVIDIA AMI release so node replacements are reproducible")
    email = r.get("capacityAlertEmail") or None
    if email and not EMAIL_LETTER_TLD.fullmatch(email):
        raise SettingsError(full_key("capacityAlertEmail"), email, "expected an e-mail address such as oncall@example.com")
    return CapacitySettings(
        reservation_id=reservation,
        instance_type=_gpu_instance_type(r.get("gpuInstanceType")),
        ami_release_version=ami,
        root_volume_gib=in_range("gpuRootVolumeGiB", r.get("gpuRootVolumeGiB"), *rules.ROOT_VOLUME_GIB),
        efa_enabled=r.get("efaEnabled"),
        alert_email=email,
    )


def _gpu_instance_type(value: str) -> str:
    problem = rules.gpu_instance_type_problem(value)  # the rule's home: the node group's (CapacityBlockNodeGroupArgs.instance_type)
    if problem:
        raise SettingsError(full_key("gpuInstanceType"), value, problem)
    return value


def chart_version(name: str, value: str, minimum: tuple[int, ...] | None = None) -> str:
    """``value`` when it is a chart version (``0.17.0``), at least ``minimum`` if given; else the key ``name`` refused."""
    match = CHART_VERSION.fullmatch(value)
    if not match:
        raise SettingsError(full_key(name), value, "expected a chart version such as 0.20.0")
    if minimum and tuple(map(int, match.groups())) < minimum:
        raise SettingsError(full_key(name), value, f"accepted: {'.'.join(map(str, minimum))} or newer (older versions misdetect NVLink devices on p6)")
    return value.lstrip("v")


def validate_plugins(r: Reader) -> GpuPluginSettings:
    """The GPU node plugin chart versions, validated."""
    return GpuPluginSettings(
        nvidia_device_plugin_version=chart_version("nvidiaDevicePluginVersion", r.get("nvidiaDevicePluginVersion")),
        efa_device_plugin_version=chart_version("efaDevicePluginVersion", r.get("efaDevicePluginVersion"), (0, 5, 10)),
        dcgm_exporter_enabled=r.get("dcgmExporterEnabled"),
        dcgm_exporter_version=chart_version("dcgmExporterVersion", r.get("dcgmExporterVersion")),
    )
