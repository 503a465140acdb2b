"""Facts the library relies on: instance types, the model's footprint, pinned versions.

Plain data, no Pulumi. Sources: the EC2 instance type pages (accelerated computing),
the EC2 and EKS user guides on Capacity Blocks, and the vLLM recipe for Kimi K3
(vllm-project/recipes ``models/moonshotai/Kimi-K3.yaml``). Update a pin here and its test
data together.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple


@dataclass(frozen=True)
class InstanceType:
    """An EC2 GPU instance type that can serve Kimi K3 (fully or as one node of a group)."""

    name: str
    """EC2 instance type name, e.g. ``p6-b300.48xlarge``."""
    gpu: str
    """GPU model, e.g. ``B300``."""
    gpus: int
    """GPUs per instance."""
    gpu_memory_mib: int
    """Memory per GPU in MiB."""
    vcpus: int
    """vCPUs per instance."""
    memory_gib: int
    """Host memory in GiB."""
    efa_interfaces: int
    """EFA interfaces the instance supports."""
    network_cards: int
    """Network cards (one EFA interface per card beyond the primary)."""
    nvme_gb: int
    """Local instance-store NVMe in GB."""
    on_demand_usd_per_hour: float
    """Approximate us-east-1 on-demand price, for cost estimates only."""

    @property
    def gpu_memory_gb(self) -> float:
        """Total GPU memory of the instance in GB (10^9 bytes)."""
        return self.gpus * self.gpu_memory_mib * 2**20 / 1e9


INSTANCE_TYPES: MappingProxyType[str, InstanceType] = MappingProxyType(
    {
        t.name: t
        for t in (
            InstanceType("p6-b300.48xlarge", "B300", 8, 275_040, 192, 4096, 16, 17, 30_400, 142.4),
            InstanceType("p6-b200.48xlarge", "B200", 8, 183_359, 192, 2048, 8, 8, 30_400, 113.9),
            InstanceType("p5en.48xlarge", "H200", 8, 144_384, 192, 2048, 16, 16, 30_400, 63.3),
        )
    }
)
"""GPU instance types the library knows how to size for Kimi K3."""

DEFAULT_GPU_INSTANCE_TYPE = "p6-b300.48xlarge"

NON_GPU_FAMILIES = ("t", "m", "c", "r", "x", "z", "i", "d", "h", "a", "u", "hpc", "im", "is")
"""Instance families that have no NVIDIA GPU: used to tell a typo from a wrong choice."""


@dataclass(frozen=True)
class ModelFootprint:
    """What one copy of the model needs, used to check that a node group can hold it."""

    model_id: str
    """Hugging Face model id, ``org/name`` (the serving contract's default ``model_id``)."""
    served_model_name: str
    """Name the OpenAI-compatible API serves the model under (the default ``served_model_name`` and ``--model`` of the CLI)."""
    total_params_b: float
    """Total parameters, in billions."""
    active_params_b: float
    """Parameters active per token (a mixture of experts), in billions."""
    experts: int
    """Experts per mixture-of-experts layer."""
    active_experts: int
    """Experts each token is routed to."""
    weights_gb: float
    """Size of the MXFP4 checkpoint on disk in GB (10^9 bytes): :data:`KIMI_K3_WEIGHTS_SOURCE`."""
    weights_shards: int
    """Safetensors shards of the checkpoint (``model-000NN-of-000MM.safetensors``)."""
    largest_shard_gb: float
    """Size of the largest shard in GB: the verification tail after the last byte lands."""
    min_kv_cache_gb: float
    """GPU memory to leave for KV cache and activations at a useful context length."""


KIMI_K3 = ModelFootprint(
    model_id="moonshotai/Kimi-K3",
    served_model_name="Kimi-K3",
    total_params_b=2800,
    active_params_b=104,
    experts=896,
    active_experts=16,
    weights_gb=1560.9,
    weights_shards=96,
    largest_shard_gb=16.3,
    min_kv_cache_gb=150,
)

KIMI_K3_WEIGHTS_SOURCE = (
    "1,453.7 GiB = 1,560.9 GB in 96 safetensors shards (kernelore/kimi-k3-gcp-enterprise-serving README.md, "
    "'Static Disk Capacity'; FareedKhan-dev/kimi-k3-in-c issue #18: 'the checkpoint is 1.56 TB'; ggml-org/llama.cpp PR #26185: "
    "'all 96 official safetensors headers'); shards of about 16.3 GB (1,560.9 GB / 96 = 16.26 GB)"
)
"""Where the checkpoint's size and shard count come from (read 2026-12)."""


def nodes_to_hold_model(instance: InstanceType, model: ModelFootprint = KIMI_K3) -> int:
    """Smallest number of ``instance`` nodes whose GPU memory holds the weights plus KV cache.

    A floor for a replica's size; how many nodes a replica actually spans (its
    ``nodes_per_replica``) is the contract's pipeline parallel size.
    """
    need = model.weights_gb + model.min_kv_cache_gb
    nodes = 1
    while nodes * instance.gpu_memory_gb * 0.95 < need:
        nodes += 1
    return nodes


# --- Kubernetes / EKS -------------------------------------------------------

SUPPORTED_EKS_VERSIONS = ("1.33", "1.34", "1.35")
"""EKS versions this release is tested against (kubernetes-validate schemas exist for each)."""
DEFAULT_EKS_VERSION = "1.34"

# Managed add-on versions are pinned per stack (ClusterArgs.addon_versions) or resolved
# explicitly with aws.eks.get_addon_version for the cluster version (see cluster.py).

# --- Helm charts --------------------------------------------------------------

class HelmChart(NamedTuple):
    """A cluster add-on installed from its official Helm chart, pinned (a named tuple: ``name, repository, version``)."""

    name: str
    """Chart name in its repository."""
    repository: str
    """Chart repository URL (``https://…``, or ``oci://…`` for an OCI registry)."""
    version: str
    """The pinned chart version."""


NVIDIA_DEVICE_PLUGIN_CHART = HelmChart("nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "0.20.0")
EFA_DEVICE_PLUGIN_CHART = HelmChart("aws-efa-k8s-device-plugin", "https://aws.github.io/eks-charts", "0.5.30")
DCGM_EXPORTER_CHART = HelmChart("dcgm-exporter", "https://nvidia.github.io/dcgm-exporter/helm-charts", "4.8.3")
AWS_LOAD_BALANCER_CONTROLLER_CHART = HelmChart("aws-load-balancer-controller", "https://aws.github.io/eks-charts", "3.5.0")
LWS_CHART = HelmChart("lws", "oci://registry.k8s.io/lws/charts", "0.10.0")
KUBE_PROMETHEUS_STACK_CHART = HelmChart("kube-prometheus-stack", "https://prometheus-community.github.io/helm-charts", "88.3.0")
"""The Prometheus Operator, its CRDs (``monitoring.coreos.com``), Prometheus, Alertmanager and Grafana
(prometheus-community/helm-charts, tag ``kube-prometheus-stack-88.3.0``, commit 54199b5bd7cdc3e6f27457791d744dd2761d378e,
2026-08-11; appVersion v0.93.0, kubeVersion >=1.25.0-0)."""
LOCAL_STATIC_PROVISIONER_CHART = HelmChart("local-static-provisioner", "https://kubernetes-sigs.github.io/sig-storage-local-static-provisioner", "2.9.0")

# --- Serving ------------------------------------------------------------------

MODEL_MOUNT_PATH = "/models/kimi-k3"
API_PORT = 8000
ENGINE_READY_TIMEOUT_S = 3600
"""``VLLM_ENGINE_READY_TIMEOUT_S`` of vLLM's Kimi K3 recipe for B300 (vllm-project/recipes)."""

# Bounds of the engine profile (enforced by kimi_k3.serving.contracts.EngineProfile).
ENGINE_READY_TIMEOUT_RANGE = (600, 10_800)
"""Seconds: under 10 minutes a 1.56 TB load and a cold compile cannot both finish; past 3 hours the engine is wedged, not slow."""
MAX_MODEL_LEN_RANGE = (1024, 1_048_576)
"""Tokens: vLLM's Kimi K3 recipe serves contexts up to 1,048,576."""
GPU_MEMORY_UTILIZATION_RANGE = (0.5, 0.98)
"""Fraction of GPU memory vLLM may take: above 0.98 CUDA graphs and NCCL buffers run out of room."""
PIPELINE_PARALLEL_RANGE = (1, 8)
"""Nodes one replica may span (pipeline stages); a Capacity Block holds at most 64 instances."""


# --- Time to serve: figures the weights staging, node sync and start-up estimate use ---------
# Each figure carries where it comes from. ``estimate=True`` marks a figure nobody has measured
# on a real Capacity Block yet; the estimate module prints it as such.


@dataclass(frozen=True)
class Figure:
    """A number the library relies on, with its unit, source and date (or marked as an estimate)."""

    value: float
    """The number itself."""
    unit: str
    """Unit of :attr:`value` (``Gbps``, ``USD/h``, ``min``, ``GB/s``...)."""
    source: str
    """Where the number comes from (repository/path@commit, AWS page) or how it was estimated."""
    date: str
    """When the number was read or estimated (``YYYY-MM``)."""
    estimate: bool = False
    """True when no measurement or published figure backs it (printed as ``estimate``)."""
    low: float | None = None
    """Low end of the figure's range (an estimate's, or the spread of the cited measurements); ``None``: :attr:`value`."""
    high: float | None = None
    """High end of the range; ``None``: :attr:`value`."""

    @property
    def lo(self) -> float:
        """:attr:`low`, or :attr:`value` when the figure has no range."""
        return self.value if self.low is None else self.low

    @property
    def hi(self) -> float:
        """:attr:`high`, or :attr:`value` when the figure has no range."""
        return self.value if self.high is None else self.high


@dataclass(frozen=True)
class StartupFacts:
    """Per-instance-type figures for staging weights and starting the engine."""

    s3_target_gbps: Figure
    """Target bandwidth to give the AWS CLI's CRT client (``default.s3.target_bandwidth``)."""
    nvme_drives: int
    """Instance-store NVMe drives (RAID0 by nodeadm ``localStorage``)."""
    nvme_write_gbytes_per_s_per_drive: Figure
    """Sustained sequential write of one instance-store drive (bounds the sync)."""
    nvme_read_gbytes_per_s_per_drive: Figure
    """Sustained sequential read of one instance-store drive (bounds a load that misses the page cache)."""
    block_usd_per_hour: Figure | None
    """Capacity Block price per instance-hour (not the on-demand rate); ``None`` when unknown."""


_AWS_C_S3 = "awslabs/aws-c-s3 source/s3_platform_info.c @ dd71b3be (v0.12.5, 2026-06-02), single-NIC figure"
_NVME_WRITE = Figure(2.0, "GB/s", "estimate: datacenter NVMe Gen4 sequential write; AWS publishes no per-drive figure for P instances", "2026-12", estimate=True, low=1.5, high=3.0)
_NVME_READ = Figure(3.0, "GB/s", "estimate: datacenter NVMe Gen4 sequential read; AWS publishes no per-drive figure for P instances", "2026-12", estimate=True, low=2.0, high=7.0)

STARTUP_FACTS: MappingProxyType[str, StartupFacts] = MappingProxyType(
    {
        "p6-b300.48xlarge": StartupFacts(
            s3_target_gbps=Figure(350, "Gbps", _AWS_C_S3, "2026-12"),
            nvme_drives=8,
            nvme_write_gbytes_per_s_per_drive=_NVME_WRITE,
            nvme_read_gbytes_per_s_per_drive=_NVME_READ,
            block_usd_per_hour=Figure(
                112.3, "USD/h",
                "upper end of the 93.6-112.3 USD per instance-hour Capacity Block offerings seen in public run logs "
                "(upfront fee / hours); block prices move with supply and demand, check `kimi-k3 capacity offerings`",
                "2026-12", estimate=True,
            ),
        ),
        "p6-b200.48xlarge": StartupFacts(
            s3_target_gbps=Figure(200, "Gbps", _AWS_C_S3, "2026-12"),
            nvme_drives=8,
            nvme_write_gbytes_per_s_per_drive=_NVME_WRITE,
            nvme_read_gbytes_per_s_per_drive=_NVME_READ,
            block_usd_per_hour=None,
        ),
        "p5en.48xlarge": StartupFacts(
            s3_target_gbps=Figure(100, "Gbps", _AWS_C_S3, "2026-12"),
            nvme_drives=8,
            nvme_write_gbytes_per_s_per_drive=_NVME_WRITE,
            nvme_read_gbytes_per_s_per_drive=_NVME_READ,
            block_usd_per_hour=Figure(
                43.26, "USD/h",
                "EC2 Capacity Blocks pricing page, effective instance hourly rate for 8 x H200 in US East (Ohio), prices of 2025-01",
                "2025-01", estimate=True,
            ),
        ),
    }
)
"""Staging and start-up figures per GPU instance type (keys match :data:`INSTANCE_TYPES`)."""

CRT_FALLBACK_GBPS = Figure(
    10, "Gbps",
    "aws-cli awscli/topics/s3-config.rst (target_bandwidth: falls back to ten gigabits per second) and "
    "awslabs/aws-c-s3 source/s3_util.c g_default_throughput_target_gbps = 10.0",
    "2026-12",
)
"""What the CRT client targets on an instance type its bundled aws-c-s3 does not list."""

AWS_CLI_BUNDLED_AWSCRT = {"2.31.23": "0.27.6"}
"""awscrt pinned by the AWS CLI release (aws/aws-cli pyproject.toml at the tag). awscrt 0.27.6 predates
aws-c-s3 v0.12.5 (2026-06-02), the first release listing p6-b300, so that CLI falls back to 10 Gb/s there."""
