"""Node labels and taints shared by the node group, the GPU plugins and the serving stack.

The Capacity Block node group sets them; everything that must run on (or stay off)
the GPU nodes selects or tolerates exactly these, so they live in one place.
"""

from __future__ import annotations

from types import MappingProxyType

GPU_NODE_POOL_LABEL = "kimi-k3.io/node-pool"
GPU_NODE_POOL = "capacity-block"
MODEL_LABEL = "kimi-k3.io/model"
MODEL = "kimi-k3"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
"""Set by the kubelet on every node; used to select a given GPU instance type."""

GPU_NODE_LABELS = MappingProxyType({GPU_NODE_POOL_LABEL: GPU_NODE_POOL, MODEL_LABEL: MODEL, GPU_PRESENT_LABEL: "true"})
"""Labels the Capacity Block node group puts on its nodes."""

GPU_NODE_SELECTOR = MappingProxyType({GPU_NODE_POOL_LABEL: GPU_NODE_POOL})
"""Selector that lands a pod on the Capacity Block GPU nodes (the serving pods)."""

GPU_PRESENT_SELECTOR = MappingProxyType({GPU_PRESENT_LABEL: GPU_NODE_LABELS[GPU_PRESENT_LABEL]})
"""Selector of every GPU node, whichever node group it belongs to (the GPU plugins).

The Capacity Block node group sets the label; another GPU node group only has to set it
too. It is the label the NVIDIA chart itself honours to force a deployment, unlike the pool
label, which would tie the plugins to one node group.
"""

GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"
GPU_TAINT_EFFECT = "NoSchedule"
"""Taint on GPU nodes: only pods that tolerate it (GPU plugins, vLLM) run there."""

GPU_TOLERATION = MappingProxyType({"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT})
"""The toleration (in Kubernetes/Helm-values form) matching the GPU taint."""

SYSTEM_NODE_LABELS = MappingProxyType({"kimi-k3.io/node-pool": "system"})
"""Labels of the CPU system node group that runs controllers and add-ons."""
