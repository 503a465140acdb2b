"""Metric names read by the alert rules and the dashboard — one home, each with its source.

vLLM (``vllm-project/vllm``, ``vllm/v1/metrics/loggers.py``, ``PrometheusStatLogger``;
listed on docs.vllm.ai ``usage/metrics`` for v0.32.0): every series carries the labels
``model_name`` (the served model name) and ``engine``. Counters are declared without the
``_total`` suffix and exposed with it by ``prometheus_client``.

DCGM exporter (``NVIDIA/dcgm-exporter`` chart 4.8.3, commit 7ad58324,
``deployment/templates/metrics-configmap.yaml``: the counter list the chart mounts over
``/etc/dcgm-exporter/default-counters.csv``): series carry ``gpu``, ``UUID``, ``modelName``
and the node name (``Hostname``, renamed ``hostname`` upstream after 4.8.2 — the rules
never match on it).

kube-state-metrics (``kubernetes/kube-state-metrics`` v2.20.0, ``docs/metrics/``): only
STABLE series. Extended resources are exported with the name sanitised
(``nvidia.com/gpu`` -> ``nvidia_com_gpu``, ``internal/store/node.go``).
"""

from __future__ import annotations

# --- vLLM ------------------------------------------------------------------------------
VLLM_TTFT = "vllm:time_to_first_token_seconds"
"""Histogram: time to first token per request, seconds."""
VLLM_ITL = "vllm:inter_token_latency_seconds"
"""Histogram: time between two output tokens, seconds (replaces ``time_per_output_token_seconds``)."""
VLLM_E2E = "vllm:e2e_request_latency_seconds"
"""Histogram: end-to-end request latency, seconds."""
VLLM_WAITING = "vllm:num_requests_waiting"
"""Gauge: requests queued, not yet scheduled."""
VLLM_RUNNING = "vllm:num_requests_running"
"""Gauge: requests in the running batch."""
VLLM_KV_USAGE = "vllm:kv_cache_usage_perc"
"""Gauge: KV-cache usage as a fraction (1 = 100 %). Not the deprecated ``vllm:gpu_cache_usage_perc``."""
VLLM_GENERATION_TOKENS = "vllm:generation_tokens_total"
"""Counter: output tokens generated."""
VLLM_PROMPT_TOKENS = "vllm:prompt_tokens_total"
"""Counter: prompt (prefill) tokens processed."""
VLLM_MODEL_LABEL = "model_name"
"""Label of every vLLM series holding the served model name (``--served-model-name``)."""

DEPRECATED_VLLM = ("vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds")
"""Names that vLLM deprecated; the rules and panels must never use them."""

# --- DCGM exporter -------------------------------------------------------------------------
DCGM_XID = "DCGM_FI_DEV_XID_ERRORS"
"""Gauge: value of the last XID error (0: none). In the chart's default list."""
DCGM_ECC_DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
"""Counter: double-bit (uncorrectable) volatile ECC errors. Commented out by default; enabled by :mod:`.dcgm_counters`."""
DCGM_ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
"""Gauge: 1 when remapping of memory rows failed (the GPU needs a reset/replacement). Default list."""
DCGM_UNCORRECTABLE_REMAPPED_ROWS = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
"""Counter: rows remapped after uncorrectable errors. Default list."""
DCGM_THERMAL_VIOLATION = "DCGM_FI_DEV_THERMAL_VIOLATION"
"""Counter: ns of clock throttling for thermal reasons. Enabled by :mod:`.dcgm_counters`."""
DCGM_POWER_VIOLATION = "DCGM_FI_DEV_POWER_VIOLATION"
"""Counter: ns of clock throttling at the power cap. Enabled by :mod:`.dcgm_counters`."""
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
"""Gauge: GPU utilisation, %. Default list."""
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
"""Gauge: framebuffer (HBM) used, MiB. Default list."""
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"
"""Gauge: framebuffer (HBM) free, MiB. Default list."""
DCGM_POWER = "DCGM_FI_DEV_POWER_USAGE"
"""Gauge: power draw, W. Default list."""
DCGM_GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
"""Gauge: GPU temperature, °C. Default list."""

# --- kube-state-metrics ----------------------------------------------------------------------
KSM_NODE_CONDITION = "kube_node_status_condition"
"""Gauge per node/condition/status (``condition="Ready", status="true"`` is 1 on a Ready node)."""
KSM_NODE_ALLOCATABLE = "kube_node_status_allocatable"
"""Gauge per node/resource (``resource="nvidia_com_gpu"``: GPUs the device plugin advertises)."""
KSM_POD_READY = "kube_pod_status_ready"
"""Gauge per pod/condition (``condition="true"`` is 1 on a Ready pod)."""
KSM_POD_START = "kube_pod_start_time"
"""Gauge: unix time the kubelet acknowledged the pod (before image pulls and init containers)."""
KSM_INIT_RUNNING = "kube_pod_init_container_status_running"
"""Gauge per pod/init container: 1 while it runs."""
GPU_RESOURCE_LABEL_VALUE = "nvidia_com_gpu"
"""``nvidia.com/gpu`` as kube-state-metrics spells it in the ``resource`` label."""

DCGM_METRICS = (
    DCGM_XID, DCGM_ECC_DBE, DCGM_ROW_REMAP_FAILURE, DCGM_UNCORRECTABLE_REMAPPED_ROWS, DCGM_THERMAL_VIOLATION,
    DCGM_POWER_VIOLATION, DCGM_GPU_UTIL, DCGM_FB_USED, DCGM_FB_FREE, DCGM_POWER, DCGM_GPU_TEMP,
)
"""Every DCGM field this package reads (each must be in the exporter's counter list)."""
