"""EKS node auto repair for the Capacity Block GPU nodes: on, one node at a time, Reboot before Replace for GPU faults.

EKS managed node groups repair nodes only when ``nodeRepairConfig.enabled`` is set (EKS API
reference, NodeRepairConfig: "Node auto repair is disabled by default"). The EKS node
monitoring agent (an add-on the cluster installs) reports GPU faults as the node condition
``AcceleratedHardwareReady`` with reasons such as ``NvidiaXID74Error``; EKS repairs such a
node after 10 minutes, by Reboot or Replace depending on the reason (EKS user guide,
node-repair and node-health-nma, "NVIDIA XID error codes"; only managed node groups can
Reboot).

A replacement is the wrong first answer on a Capacity Block: the instance is scarce (its
slot must come back inside the same reservation), a new instance starts with empty local
NVMe, so the ~1.6 TB of weights and the compile cache are fetched again, while a reboot keeps
the instance store. So for the reasons EKS replaces by default but whose NVIDIA resolution
starts with a GPU reset or a reboot (``RESET_GPU`` / ``WORKFLOW_NVLINK_ERR`` buckets of the
NVIDIA XID catalog, as the agent's ``monitors/nvidia/dcgm/dcgm_policies.go`` lists them),
:data:`REBOOT_FIRST` overrides the action to ``Reboot`` (pulumi-aws 7.51.1
``NodeGroupNodeRepairConfigNodeRepairConfigOverrideArgs``). XID 79 ("GPU has fallen off the
bus", bucket ``RESTART_BM``: a power cycle, which a reboot is not) keeps ``Replace``.
"""

from __future__ import annotations

from types import MappingProxyType

import pulumi_aws as aws

ACCELERATED_HARDWARE = "AcceleratedHardwareReady"
"""The node condition the EKS node monitoring agent sets for GPU faults."""

REPAIR_WAIT_MINUTES = 10
"""Minutes a GPU condition must last before the repair: EKS's own default for AcceleratedHardwareReady (node-repair)."""

REBOOT_FIRST = MappingProxyType(
    {
        "NvidiaXID74Error": "NVLink error (NVIDIA: reset the GPU or reboot the node)",
        "NvidiaXID119Error": "GSP RPC timeout (NVIDIA: reset the GPU)",
        "NvidiaXID120Error": "GSP error (NVIDIA: reset the GPU)",
        "NvidiaXID140Error": "unrecovered ECC error (NVIDIA: reset the GPU)",
        "NvidiaNVLinkError": "NVLink errors reported by the driver (NVIDIA: reset or reboot)",
        "NvidiaDoubleBitError": "double-bit ECC error (EKS itself reboots for XID 48, the same fault)",
    }
)
"""Reasons (``nodeUnhealthyReason``) of ``AcceleratedHardwareReady`` that EKS replaces by default and this group reboots."""

MAX_PARALLEL_REPAIRS = 1
"""Nodes repaired at once: one, so the other replicas keep serving while a node reboots."""


def gpu_node_repair_config() -> aws.eks.NodeGroupNodeRepairConfigArgs:
    """The GPU node group's ``node_repair_config``: enabled, one node at a time, :data:`REBOOT_FIRST` overrides."""
    return aws.eks.NodeGroupNodeRepairConfigArgs(
        enabled=True,
        max_parallel_nodes_repaired_count=MAX_PARALLEL_REPAIRS,
        node_repair_config_overrides=[
            aws.eks.NodeGroupNodeRepairConfigNodeRepairConfigOverrideArgs(
                node_monitoring_condition=ACCELERATED_HARDWARE,
                node_unhealthy_reason=reason,
                min_repair_wait_time_mins=REPAIR_WAIT_MINUTES,
                repair_action="Reboot",
            )
            for reason in REBOOT_FIRST
        ],
    )


__all__ = ["ACCELERATED_HARDWARE", "MAX_PARALLEL_REPAIRS", "REBOOT_FIRST", "REPAIR_WAIT_MINUTES", "gpu_node_repair_config"]
