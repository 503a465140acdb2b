"""The stack config schema: every ``kimi-k3:*`` key, its type, default and meaning.

One table serves three readers: the settings loader (types, defaults, unknown-key
detection), ``Pulumi.yaml`` (a test checks it declares exactly these keys with the
same types and defaults) and the configuration reference (docs/configuration.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from kimi_k3.cluster.access import CALLER
from kimi_k3.core import catalog
from kimi_k3.network.endpoints import DEFAULT_INTERFACE_ENDPOINTS, INTERFACE_ENDPOINT_SERVICES

PROJECT = "kimi-k3"

KeyType = Literal["string", "integer", "boolean", "array"]


@dataclass(frozen=True)
class ConfigKey:
    """One documented stack config key of the ``kimi-k3`` namespace."""

    name: str
    """Key without namespace, e.g. ``capacityReservationId``."""
    type: KeyType
    """Pulumi project config type (``string``, ``integer``, ``boolean`` or ``array``)."""
    description: str
    """What the key controls, as shown in Pulumi.yaml and docs/configuration.md."""
    default: Any = None
    """Default when unset; ``None`` means the key is required."""
    secret: bool = False
    """Whether the value must be set with ``pulumi config set --secret``."""

    @property
    def required(self) -> bool:
        """A key without a default must be set in the stack."""
        return self.default is None

    @property
    def full_name(self) -> str:
        """Namespaced key as it appears in stack files, e.g. ``kimi-k3:vpcCidr``."""
        return f"{PROJECT}:{self.name}"


def _range(bounds: tuple[float, float], fmt: str = "") -> str:
    """``600 to 10800``: a bound pair from the catalog, as the descriptions show it."""
    low, high = bounds
    return f"{low:{fmt}} to {high:{fmt}}"


_KEYS = (
    # --- stack --------------------------------------------------------------
    ConfigKey("environment", "string", "Environment class of the stack: dev or prod (a staging stack is one of them). prod enforces digest-pinned images, a private cluster endpoint and a pinned AMI release."),
    # --- network ------------------------------------------------------------
    ConfigKey("vpcCidr", "string", "IPv4 CIDR of the VPC (RFC 1918, /16 to /20). One private and one public subnet per AZ: a /20 and a /24 when they fit, smaller in a smaller VPC (down to a /22 and a /26); a CIDR that cannot hold them for the AZ count is refused.", "10.42.0.0/16"),
    ConfigKey("availabilityZones", "array", "AZs of the VPC. Empty: the Capacity Block's AZ plus the next AZs of the region up to availabilityZoneCount. When set, it must include the Capacity Block's AZ.", []),
    ConfigKey("availabilityZoneCount", "integer", "Number of AZs when availabilityZones is empty (2 to 4).", 2),
    ConfigKey("natGateways", "string", "NAT gateways: 'single' (one shared, cheaper) or 'perAz' (one per AZ, survives an AZ outage).", "single"),
    ConfigKey("flowLogRetentionDays", "integer", "Retention of the VPC flow logs in CloudWatch Logs, in days (a CloudWatch retention value, 1 to 3653).", 30),
    ConfigKey("existingVpcId", "string", "Use this VPC instead of creating one (vpc-...). Requires existingPrivateSubnetIds and existingPublicSubnetIds.", ""),
    ConfigKey("existingPrivateSubnetIds", "array", "Private subnet ids of the existing VPC, one per AZ, including the Capacity Block's AZ.", []),
    ConfigKey("existingPublicSubnetIds", "array", "Public subnet ids of the existing VPC (for load balancers).", []),
    # --- cluster ------------------------------------------------------------
    ConfigKey("clusterVersion", "string", "EKS Kubernetes version (major.minor).", catalog.DEFAULT_EKS_VERSION),
    ConfigKey("clusterEndpointPublicAccess", "boolean", "Expose the EKS API endpoint publicly (restricted to clusterPublicAccessCidrs). Must be false in prod.", False),
    ConfigKey("clusterPublicAccessCidrs", "array", "CIDRs allowed to reach a public EKS API endpoint. Required when the endpoint is public; 0.0.0.0/0 is refused.", []),
    ConfigKey("clusterApiIngressCidrs", "array", "CIDRs admitted on 443 to the EKS cluster security group (the API server's private endpoint ENIs): a VPN or a peered network your deploy runner or kubectl runs in. With a private-only endpoint the API is reachable only from the VPC or a connected network through that security group, so a private endpoint needs this, clusterApiIngressSecurityGroupIds or deployRunner.", []),
    ConfigKey("clusterApiIngressSecurityGroupIds", "array", "Security group ids (sg-..., in the cluster's VPC or a peered one) admitted on 443 to the EKS cluster security group, e.g. a self-hosted runner's. See clusterApiIngressCidrs.", []),
    ConfigKey("clusterAdminRoleArns", "array", "IAM role ARNs granted cluster-admin through EKS access entries (at least one). The cluster creator is not made admin implicitly: the deployment's Kubernetes provider reaches the cluster as one of these roles (kimi-k3:kubeconfigRoleArn)."),
    ConfigKey("clusterServiceCidr", "string", "Kubernetes service CIDR; must not overlap the VPC.", "172.20.0.0/16"),
    ConfigKey("clusterLogRetentionDays", "integer", "Retention of the EKS control-plane logs, in days (a CloudWatch retention value, 1 to 3653).", 90),
    ConfigKey("systemNodeInstanceType", "string", "Instance type of the CPU system node group that runs cluster add-ons.", "m7i.xlarge"),
    ConfigKey("systemNodeCount", "integer", "Nodes in the system node group (2 to 10, spread over the AZs).", 2),
    ConfigKey("systemNodeDiskGiB", "integer", "Root volume of each system node, GiB (gp3, 20 to 1000). With weightsStagingJob it must hold the staging image at its pull under the kubelet's 85% image-GC and eviction point (docs/weights.md, the system-disk arithmetic).", 50),
    # --- capacity block / GPU nodes ------------------------------------------
    ConfigKey("capacityReservationId", "string", "EC2 Capacity Block reservation id (cr- followed by 17 hex digits), bought with 'kimi-k3 capacity purchase'. Required when servingPlatform is eks; a hyperpod stack uses trainingPlanArn instead.", ""),
    ConfigKey("gpuInstanceType", "string", "GPU instance type of the Capacity Block.", "p6-b300.48xlarge"),
    ConfigKey("gpuAmiReleaseVersion", "string", "EKS AL2023 NVIDIA AMI release version to pin (e.g. 1.34.2-20251120). Empty: latest at creation. Required in prod.", ""),
    ConfigKey("gpuRootVolumeGiB", "integer", "Encrypted root volume of GPU nodes in GiB (100 to 2000; images and weights live on the RAID0 NVMe).", 200),
    ConfigKey("efaEnabled", "boolean", "Attach EFA interfaces to GPU nodes and install the EFA device plugin. Needed only when one replica spans several nodes.", False),
    ConfigKey("capacityAlertEmail", "string", "E-mail subscribed to the Capacity Block expiration/delivery alerts (SNS). Empty: topic only.", ""),
    # --- GPU plugins ----------------------------------------------------------
    ConfigKey("nvidiaDevicePluginVersion", "string", "Helm chart version of nvidia-device-plugin.", catalog.NVIDIA_DEVICE_PLUGIN_CHART.version),
    ConfigKey("efaDevicePluginVersion", "string", "Helm chart version of aws-efa-k8s-device-plugin (0.5.10 or newer).", catalog.EFA_DEVICE_PLUGIN_CHART.version.lstrip("v")),
    ConfigKey("dcgmExporterEnabled", "boolean", "Install NVIDIA DCGM exporter for GPU metrics on GPU nodes.", True),
    ConfigKey("dcgmExporterVersion", "string", "Helm chart version of dcgm-exporter.", catalog.DCGM_EXPORTER_CHART.version),
    # --- serving ------------------------------------------------------------
    ConfigKey("servingImage", "string", "vLLM image, pinned by digest (repo@sha256:...). A tag is refused in prod and warned about elsewhere.", "vllm/vllm-openai:kimi-k3"),
    ConfigKey("modelId", "string", "Hugging Face model id.", "moonshotai/Kimi-K3"),
    ConfigKey("modelRevision", "string", "Exact model revision: the 40-hex commit SHA of the Hugging Face repository."),
    ConfigKey("weightsSource", "string", "Where the weights come from: 'huggingface' or 's3'.", "huggingface"),
    ConfigKey("weightsS3Uri", "string", "S3 prefix holding the weights (s3://bucket/prefix/), same region. Required when weightsSource is s3.", ""),
    ConfigKey("weightsSha256Manifest", "string", "Path inside the weights of a sha256sum manifest checked before serving. Empty: no check.", ""),
    ConfigKey("tensorParallelSize", "integer", "vLLM --tensor-parallel-size (GPUs per node share one TP group).", 8),
    ConfigKey("pipelineParallelSize", "integer", f"vLLM --pipeline-parallel-size (nodes per replica when one node cannot hold the model; {_range(catalog.PIPELINE_PARALLEL_RANGE)}).", 1),
    ConfigKey("gpuMemoryUtilization", "string", f"vLLM --gpu-memory-utilization, a decimal from {_range(catalog.GPU_MEMORY_UTILIZATION_RANGE, '.2f')}. Empty: the engine profile's (Blackwell single node 0.95, multi-node 0.90).", ""),
    ConfigKey("maxModelLen", "integer", f"vLLM --max-model-len ({_range(catalog.MAX_MODEL_LEN_RANGE)} tokens). 0: the engine profile's (Blackwell 1048576, Hopper 32768).", 0),
    ConfigKey("kvCacheDtype", "string", "vLLM --kv-cache-dtype: auto, fp8, fp8_e4m3 or fp8_e5m2. Empty: the engine profile's (Blackwell fp8 with the recipe's --attention-config, Hopper auto).", ""),
    ConfigKey("vllmExtraArgs", "array", "Extra vLLM arguments appended verbatim, one flag or value per item (flags the library manages are refused in every spelling: -tp, --flag=value, --no-flag).", []),
    ConfigKey("engineReadyTimeoutSeconds", "integer", f"VLLM_ENGINE_READY_TIMEOUT_S and the startup-probe budget ({_range(catalog.ENGINE_READY_TIMEOUT_RANGE)} seconds).", catalog.ENGINE_READY_TIMEOUT_S),
    ConfigKey("replicas", "integer", "Serving replicas (0 to 64). 0: one per group of reserved nodes.", 0),
    ConfigKey("exposure", "string", "How the API is reached: 'cluster' (port-forward), 'internal' (internal NLB) or 'public' (NLB restricted to servingAllowedCidrs).", "cluster"),
    ConfigKey("servingAllowedCidrs", "array", "Client CIDRs allowed to call the API through the load balancer; required for internal and public exposure. A CIDR containing the VPC admits it minus the VPC (pods of the VPC call in-cluster).", []),
    ConfigKey("serviceMonitorEnabled", "boolean", "Create a Prometheus Operator ServiceMonitor (needs its CRDs); otherwise scrape annotations.", False),
    ConfigKey("apiKey", "string", "API key clients must send (Bearer). Set with: pulumi config set --secret kimi-k3:apiKey.", secret=True),
    ConfigKey("huggingFaceToken", "string", "Hugging Face token for gated downloads. Set with --secret. Empty: anonymous.", "", secret=True),
    # --- serving: API proxy, drain, engine profile ---------------------------
    ConfigKey("servingExtraRoutes", "array", "Routes the API proxy forwards besides POST /v1/chat/completions, POST /v1/completions and GET /v1/models, one 'METHOD /exact/path' per item (GET or POST, under /v1, /v2 or /inference; vLLM's unprotected routes and the LoRA/generate bypasses are refused).", []),
    ConfigKey("mediaPolicy", "string", "What requests may carry besides text: 'text-only' (vLLM --language-model-only: the vision encoder is skipped, media inputs refused) or 'allowlist' (images fetched only from mediaAllowedDomains, redirects off, or sent inline).", "text-only"),
    ConfigKey("mediaAllowedDomains", "array", "Host names vLLM may fetch media from (--allowed-media-domains; exact host names, no wildcards). Required with mediaPolicy allowlist.", []),
    ConfigKey("mediaInlineMiB", "integer", "MiB of inline (base64) media a request body may carry on top of the text bound (0 to 512; base64 is 4/3 of the image size). Only with mediaPolicy allowlist.", 0),
    ConfigKey("servingMaxGenerationSeconds", "integer", "Longest a request may wait silently for its answer (a non-streamed answer sends nothing until done): the proxy's upstream read timeout and the floor of the NLB idle timeout (60 to 86400).", 1800),
    ConfigKey("servingDrainSeconds", "integer", "How long in-flight requests may take to finish when a pod stops (rollout, node drain, Capacity Block end): the proxy's graceful stop and vLLM --shutdown-timeout (1 to 3600; at most 3600 minus servingPreStopSeconds behind an NLB).", 1800),
    ConfigKey("servingPreStopSeconds", "integer", "Seconds a stopping pod keeps accepting while the NLB deregisters it, before the drain starts (0 to 600; behind an NLB at least 150: it keeps sending new connections for about 2 minutes).", 180),
    ConfigKey("servingTerminationGraceSeconds", "integer", "terminationGracePeriodSeconds of the serving pods. 0: the least that covers servingPreStopSeconds + 5 + servingDrainSeconds + 30; a smaller value is refused, and so is one above 86400.", 0),
    ConfigKey("nlbIdleTimeoutSeconds", "integer", "Idle timeout of the NLB's TCP listener (60 to 6000; the NLB default is 350); at least servingMaxGenerationSeconds.", 3600),
    ConfigKey("decodeContextParallel", "boolean", "The recipe's decode context parallelism (--decode-context-parallel-size 8, a2a, TOKENSPEED_MLA decode with TRTLLM_RAGGED prefill): single-node TP8 with FP8 KV cache only.", False),
    # --- serving: conversation routing ------------------------------------------
    ConfigKey("conversationRouting", "boolean", "With two or more replicas, an Envoy routing tier between the NLB and the replicas keeps each conversation on its replica (its prefix stays in that replica's KV cache): consistent hashing on routerSessionHeader with bounded load, least-request for requests without it; a draining or not-ready replica gets no new session (docs/routing.md). false: the Service reaches the replicas directly. One replica never declares it.", True),
    ConfigKey("routerSessionHeader", "string", "Header clients name their conversation with (e.g. x-session-id: <conversation id>); lowercase letters, digits and '-'. Requests without it are spread least-request: the router cannot hash a body.", "x-session-id"),
    ConfigKey("routerReplicas", "integer", "Router pods on the system nodes (2 to 10), behind a PodDisruptionBudget that lets one go at a time.", 2),
    ConfigKey("routerPreStopSeconds", "integer", "Seconds a stopping router pod keeps accepting while the NLB deregisters it, before it drains its streams for servingDrainSeconds (0 to 600; behind an NLB at least 150, the serving pods' rule, and with servingDrainSeconds at most 3600 s, the target group's deregistration delay).", 180),
    ConfigKey("routerImage", "string", "Envoy image of the routing tier: the upstream envoyproxy/envoy pinned by digest; prod requires a digest (mirror it into ECR).", "docker.io/envoyproxy/envoy:v1.39.1@sha256:57e14a549d7bd43c8d3f6d03e8cfa653e037d4b38e133acd9b54f38c524401b4"),
    ConfigKey("hyperpodRoutingStrategy", "string", "HyperPod path (kimi-k3 hyperpod): the operator's intelligent routing, prefixaware, kvaware, session or roundrobin. Empty: off. It cannot be added to or changed on an existing endpoint (InferenceEndpointConfig v1).", ""),
    ConfigKey("hyperpodLoadBalancerAlgorithm", "string", "HyperPod path: the ALB target group's routing algorithm, least_outstanding_requests or round_robin. Empty: the operator's default (least_outstanding_requests).", ""),
    ConfigKey("hyperpodKvCache", "string", "HyperPod path: KV-cache offloading, off, l1 (CPU) or l1-l2 (CPU and hyperpodL2CacheBackend). Empty: the operator's default.", ""),
    ConfigKey("hyperpodL2CacheBackend", "string", "HyperPod path: the L2 KV-cache backend with hyperpodKvCache l1-l2, redis or tieredstorage.", ""),
    ConfigKey("hyperpodL2CacheUrl", "string", "HyperPod path: l2CacheLocalUrl of the L2 KV-cache backend (e.g. redis://cache.internal:6379).", ""),
    ConfigKey("servingEnv", "array", "Extra environment variables of the engine, one NAME=value per item; they override the engine profile's, and the ones the library sets (API key, caches, ready timeout, media redirects...) are refused.", []),
    # --- monitoring and alerts -------------------------------------------------
    ConfigKey("prometheusOperatorEnabled", "boolean", "Monitor with the Prometheus Operator (installed by the stack unless prometheusOperatorInstall is false): declare the alert rules (PrometheusRule), the Grafana dashboard ConfigMap and ServiceMonitors for vLLM and the DCGM exporter (whatever serviceMonitorEnabled says: the rules read what they scrape).", False),
    ConfigKey("prometheusOperatorInstall", "boolean", "With prometheusOperatorEnabled: install the Prometheus Operator from the stack (kube-prometheus-stack, release kube-prometheus-stack in monitoringNamespace, which the stack declares), before the objects that need its CRDs. false: the operator, its CRDs and the namespace exist already; the stack reads the CRDs it needs and the preview fails on a missing one.", True),
    ConfigKey("prometheusOperatorChartVersion", "string", "Helm chart version of kube-prometheus-stack (prometheus-community) installed with prometheusOperatorInstall.", catalog.KUBE_PROMETHEUS_STACK_CHART.version),
    ConfigKey("prometheusSelectorLabels", "array", "Labels, as key=value, on the PrometheusRule and the ServiceMonitors so the operator's rule and ServiceMonitor selectors pick them up (kube-prometheus-stack selects release=<its Helm release name>). Empty: no label.", ["release=kube-prometheus-stack"]),
    ConfigKey("monitoringNamespace", "string", "Namespace of the Prometheus that scrapes the serving pods (their NetworkPolicy admits it) and of the PrometheusRule; declared by the stack with prometheusOperatorInstall, else it must exist.", "monitoring"),
    ConfigKey("grafanaDashboardNamespace", "string", "Namespace of the Grafana dashboard ConfigMap (labelled grafana_dashboard=1 for Grafana's sidecar). Empty: monitoringNamespace.", ""),
    ConfigKey("alertTtftP99Seconds", "integer", "KimiK3TimeToFirstTokenHigh fires when the p99 time to first token stays above this many seconds for 10 minutes (1 to 600). The one threshold that depends on your traffic: long agentic prompts need more than chat. The other thresholds follow vLLM's behaviour (docs/observability.md).", 10),
    ConfigKey("deliveryCheckEnabled", "boolean", "Declare the delivery check: a CloudWatch alarm, outside the cluster, that notifies the Capacity Block alerts topic when fewer GPU instances than reserved are in service 20 minutes after the block's start.", True),
    # --- deployment access and private wiring ----------------------------------
    ConfigKey("kubeconfigRoleArn", "string", f"IAM role the deployment's Kubernetes provider (and the exported kubeconfig) assumes to reach the cluster (aws eks get-token --role-arn): one of clusterAdminRoleArns; the identity running Pulumi needs sts:AssumeRole on it. Empty: the first of clusterAdminRoleArns. '{CALLER}': no role is assumed, the credentials running Pulumi are used as they are and must themselves be one of clusterAdminRoleArns (or of clusterViewerRoleArns, for a read-only preview).", ""),
    ConfigKey("clusterViewerRoleArns", "array", "IAM role ARNs granted read-only access to the cluster (EKS access entries with AmazonEKSViewPolicy, cluster-wide), e.g. the CI preview role. A role cannot also be in clusterAdminRoleArns (EKS keeps one access entry per principal).", []),
    ConfigKey("deployRunner", "string", "'codebuild': declare an AWS CodeBuild project in the stack's private subnets that runs `pulumi up` for this stack inside the VPC (its security group admitted on 443 to the cluster), the supported first deploy of a private cluster (docs/first-deploy.md). Empty: none.", ""),
    ConfigKey("deployRunnerRoleArn", "string", "With deployRunner: the IAM role the runner's build assumes to run `pulumi up` (your deploy role, one of clusterAdminRoleArns; its trust policy must admit the runner's role). The runner's own role can only assume it, read deployRunnerSecretArn, write its logs and attach to the VPC.", ""),
    ConfigKey("deployRunnerSecretArn", "string", "With deployRunner: Secrets Manager secret (JSON, same region) with the keys PULUMI_ACCESS_TOKEN and KIMI_K3_API_KEY the build reads (CodeBuild secrets-manager environment variables).", ""),
    ConfigKey("deployRunnerSourceUrl", "string", "With deployRunner: HTTPS URL of this repository for CodeBuild to check out (https://github.com/<owner>/<repo>.git; the account's CodeBuild GitHub connection or source credential must reach it).", ""),
    ConfigKey("interfaceEndpoints", "array", f"Interface VPC endpoints (private DNS) of a new VPC, by service: {', '.join(INTERFACE_ENDPOINT_SERVICES)}. The default keeps image pulls, credentials (STS, EKS Auth for Pod Identity) and the nodes' EC2 calls off the NAT; add logs once something ships node logs to CloudWatch Logs. Each endpoint bills per AZ-hour. Not used with existingVpcId.", list(DEFAULT_INTERFACE_ENDPOINTS)),
    ConfigKey("weightsKmsKeyArn", "string", "KMS key ARN (arn:aws:kms:<stack region>:<account>:key/<id>) of an SSE-KMS weights bucket (weightsSource s3): the serving pods' role gets kms:Decrypt on it; without it an SSE-KMS bucket answers AccessDenied. Empty: the bucket uses SSE-S3.", ""),
    # --- time to serve: weights staging, caches, image pull ---------------------
    ConfigKey("weightsStagingJob", "boolean", "Declare the in-region staging Job (namespace kimi-weights, on the system nodes) that copies modelId@modelRevision into weightsS3Uri with its own Pod Identity role writing only that prefix; resumable, verified against the sha256 Hugging Face publishes (docs/weights.md). Needs weightsSource s3; its image is weightsStagingImage (pinned by digest in prod).", False),
    ConfigKey("weightsStagingImage", "string", "Image of the staging Job: Python 3 with boto3 (images/weights-staging/Dockerfile: python:3.12-slim + boto3, ~0.5 GB), pinned by digest in prod. Empty: servingImage, the ~36 GB-at-pull engine image, which needs systemNodeDiskGiB 52 or more.", ""),
    ConfigKey("weightsBucketName", "string", "Declare the bucket of weightsS3Uri (and of compileCacheS3Uri) with secure defaults: public access blocked, no ACLs, SSE-S3 (SSE-KMS with weightsKmsKeyArn), TLS-only policy, versioning, unfinished uploads aborted after 7 days, protect on. Must be the bucket weightsS3Uri names. Empty: the bucket is managed elsewhere.", ""),
    ConfigKey("compileCacheS3Uri", "string", "s3://bucket/prefix/ of the torch.compile and Triton/Inductor/FlashInfer/CUDA JIT caches: restored before the engine starts and saved once the replica is warmed up, keyed on image digest, model revision, engine arguments, GPU and AMI release. Needs a digest-pinned servingImage. Empty: off.", ""),
    ConfigKey("nodeLocalWeights", "boolean", "Keep the weights on the node's NVMe beyond the pod: a StatefulSet whose volumeClaimTemplate uses a node-local StorageClass (local-static-provisioner plus its node-cleanup controller, so nothing stays Pending on a dead node's volume), one directory per revision, fsGroupChangePolicy OnRootMismatch. A pod re-created on the node skips the sync. Needs weightsSource s3 and single-node replicas (pipelineParallelSize 1).", False),
    ConfigKey("weightsSyncSidecar", "boolean", "Run the node-side S3 sync as a native sidecar (an init container with restartPolicy Always, Kubernetes 1.33+) instead of an init container: the engine starts and restores its caches beside the transfer and its loader reads each shard once the sync has verified it (docs/weights.md). Needs weightsSource s3 and single-node replicas.", False),
    ConfigKey("pipelinedWeightsLoad", "boolean", "With weightsSyncSidecar: start vLLM once its config files are verified and load the weights with the project's own vLLM loader (--load-format kimi_k3_pipelined, a vllm.general_plugins entry point shipped in the pod), which reads the shards in manifest order, each once the sync has verified it, instead of waiting for the whole manifest (docs/weights.md). Needs weightsSha256Manifest.", False),
    ConfigKey("engineSnapshot", "boolean", "Restore instead of rebuild (docs/weights.md): after the first healthy start, put vLLM to sleep (level 2; adds --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1, whose /sleep and /wake_up the API proxy never forwards), CRIU + cuda-checkpoint dump it onto the node's NVMe with a sha256 of every file, wake it; a container restart or a re-created pod on the node restores it when image digest, driver, kernel, GPU and bus IDs, model revision, engine args and env all match, else starts cold; with weightsSyncSidecar and compileCacheS3Uri the sync sidecar copies it to <compileCacheS3Uri>engine-snapshots/ (expired after 14 days in a declared bucket) and a new node restores that copy; with 2 or more replicas only the replica that wins the key's CLAIM in S3 dumps a new key, once another replica of the key is Ready (a headless {name}-key-peers Service; else Ready without a dump after 15 min), so the first Ready pays no dump (1 replica: the dump before its Ready). Declares the privileged, hostPID snapshot agent DaemonSet (engineSnapshotAgentImage). Needs nodeLocalWeights, a digest-pinned servingImage, an x86-64 GPU instance type and single-node replicas; the node's driver (590+) and CRIU (4.0+) are checked on the node.", False),
    ConfigKey("engineSnapshotAgentImage", "string", "Image of the engine snapshot agent (engineSnapshot): CRIU 4.0+ with its CUDA plugin, NVIDIA cuda-checkpoint, nsenter and python3; pinned by digest in prod. Required with engineSnapshot.", ""),
    ConfigKey("peerWeightsTransfer", "boolean", "A new pod takes its weights GPU to GPU from a serving replica over EFA with NVIDIA Dynamo ModelExpress v0.5.1 instead of waiting for the S3 sync (docs/weights.md): vLLM loads with --load-format modelexpress (VLLM_PLUGINS=modelexpress), every serving pod is a source behind a {name}-peers Service of the pods of the same image, revision, engine args and env; no serving peer, or a failed transfer before the node's own copy is complete, takes the cold path, named in the engine's log. The received bytes are checked by tensor name, size and dtype only. Needs servingImage pinned by digest and built with the ModelExpress client and NIXL's libfabric plugin, efaEnabled, nodeLocalWeights, weightsSyncSidecar, weightsSha256Manifest, replicas 2 or more and single-node replicas; excludes pipelinedWeightsLoad (both set the load format) and engineSnapshot (the agent's dump would take the peer wrapper with the engine).", False),
    ConfigKey("nodeCleanupImage", "string", "Image of the local-static-provisioner's node-cleanup controller (nodeLocalWeights): the release image by tag outside prod; prod requires it pinned by digest, e.g. mirrored into ECR (its digest is not resolvable offline).", "registry.k8s.io/sig-storage/local-volume-node-cleanup:v2.9.0"),
    ConfigKey("imagePrePull", "boolean", "Pre-pull the engine image on the GPU nodes with a DaemonSet, so it is pulled while the weights sync instead of after them.", False),
    ConfigKey("fastImagePull", "boolean", "nodeadm FastImagePull (SOCI parallel pull and unpack) on the GPU nodes. Needs a pinned gpuAmiReleaseVersion of v20250813 or later; refused on known-bad releases (v20260505, awslabs/amazon-eks-ami#2712).", False),
    ConfigKey("dockerHubPullThroughSecretArn", "string", "Secrets Manager secret ARN (name starting with ecr-pullthroughcache/, in the stack's region, holding the Docker Hub username and accessToken, as ECR requires): declare an ECR pull-through cache rule for Docker Hub (prefix ecrPullThroughPrefix) and pull a Docker Hub servingImage through it, in region instead of across the NAT. Empty: off.", ""),
    ConfigKey("ecrPullThroughPrefix", "string", "ECR repository prefix of the Docker Hub pull-through cache rule (2-30 lower-case characters, ECR's pattern). A registry has one rule per prefix, so a prefix another rule uses (the common docker-hub) fails the create: adopt that rule with pulumi import (docs/weights.md) or keep the default. Empty: <project>-<stack>-docker-hub, distinct per stack.", ""),
    ConfigKey("weightsVerifyHasher", "string", "Hasher of the node-side sha256 check of S3 weights: auto (openssl dgst when the image has it, else sha256sum), openssl or sha256sum.", "auto"),
    # --- serving platform (SageMaker HyperPod) ---------------------------------
    ConfigKey("servingPlatform", "string", "Where Kimi K3 runs: 'eks' (Capacity Block node group and vLLM on the EKS cluster) or 'hyperpod' (a SageMaker HyperPod cluster orchestrated by the EKS cluster, on a Flexible Training Plan, served by the HyperPod Inference Operator; see docs/hyperpod.md).", "eks"),
    ConfigKey("trainingPlanArn", "string", "Flexible Training Plan (ARN, or name) backing the HyperPod instance group, bought with 'kimi-k3 hyperpod plans purchase'. Required when servingPlatform is hyperpod.", ""),
    ConfigKey("hyperpodClusterName", "string", "Name of the SageMaker HyperPod cluster (1-63 letters, digits and '-'). Empty: <project>-<stack>, like the EKS cluster.", ""),
    ConfigKey("hyperpodEbsVolumeGiB", "integer", "Extra EBS volume per HyperPod instance in GiB (1 to 16384), mounted at /opt/sagemaker: containerd, the kubelet and the operator's weights download live there.", 2048),
)

CONFIG_KEYS: MappingProxyType[str, ConfigKey] = MappingProxyType({k.name: k for k in _KEYS})
"""All ``kimi-k3`` config keys by name, in documentation order."""


SECTIONS = (
    ("Stack", ("environment",)),
    ("Network", ("vpcCidr", "availabilityZones", "availabilityZoneCount", "natGateways", "flowLogRetentionDays", "existingVpcId", "existingPrivateSubnetIds", "existingPublicSubnetIds")),
    ("Cluster", ("clusterVersion", "clusterEndpointPublicAccess", "clusterPublicAccessCidrs", "clusterApiIngressCidrs", "clusterApiIngressSecurityGroupIds", "clusterAdminRoleArns", "clusterServiceCidr", "clusterLogRetentionDays", "systemNodeInstanceType", "systemNodeCount", "systemNodeDiskGiB")),
    ("Capacity Block and GPU nodes", ("capacityReservationId", "gpuInstanceType", "gpuAmiReleaseVersion", "gpuRootVolumeGiB", "efaEnabled", "capacityAlertEmail")),
    ("GPU plugins", ("nvidiaDevicePluginVersion", "efaDevicePluginVersion", "dcgmExporterEnabled", "dcgmExporterVersion")),
    ("Serving", ("servingImage", "modelId", "modelRevision", "weightsSource", "weightsS3Uri", "weightsSha256Manifest", "tensorParallelSize", "pipelineParallelSize", "gpuMemoryUtilization", "maxModelLen", "kvCacheDtype", "vllmExtraArgs", "engineReadyTimeoutSeconds", "replicas", "exposure", "servingAllowedCidrs", "serviceMonitorEnabled", "apiKey", "huggingFaceToken")),
    ("Serving: API proxy, drain and engine profile", ("servingExtraRoutes", "mediaPolicy", "mediaAllowedDomains", "mediaInlineMiB", "servingMaxGenerationSeconds", "servingDrainSeconds", "servingPreStopSeconds", "servingTerminationGraceSeconds", "nlbIdleTimeoutSeconds", "decodeContextParallel", "servingEnv", "hyperpodRoutingStrategy", "hyperpodLoadBalancerAlgorithm", "hyperpodKvCache", "hyperpodL2CacheBackend", "hyperpodL2CacheUrl")),
    ("Serving: conversation routing", ("conversationRouting", "routerSessionHeader", "routerReplicas", "routerPreStopSeconds", "routerImage")),
    ("Monitoring and alerts", ("prometheusOperatorEnabled", "prometheusOperatorInstall", "prometheusOperatorChartVersion", "prometheusSelectorLabels", "monitoringNamespace", "grafanaDashboardNamespace", "alertTtftP99Seconds", "deliveryCheckEnabled")),
    ("Deployment access and private wiring", ("kubeconfigRoleArn", "clusterViewerRoleArns", "deployRunner", "deployRunnerRoleArn", "deployRunnerSecretArn", "deployRunnerSourceUrl", "interfaceEndpoints", "weightsKmsKeyArn")),
    ("Time to serve: weights staging, caches, image pull", ("weightsStagingJob", "weightsStagingImage", "weightsBucketName", "compileCacheS3Uri", "nodeLocalWeights", "weightsSyncSidecar", "pipelinedWeightsLoad", "engineSnapshot", "engineSnapshotAgentImage", "peerWeightsTransfer", "nodeCleanupImage", "imagePrePull", "fastImagePull", "dockerHubPullThroughSecretArn", "ecrPullThroughPrefix", "weightsVerifyHasher")),
    ("Serving platform (SageMaker HyperPod)", ("servingPlatform", "trainingPlanArn", "hyperpodClusterName", "hyperpodEbsVolumeGiB")),
)
"""Keys grouped for the configuration reference, docs/configuration.md (every key exactly once)."""


def pulumi_yaml_config() -> dict[str, dict[str, Any]]:
    """The ``config:`` block of Pulumi.yaml: every key with type, description and default."""
    declared: dict[str, dict[str, Any]] = {}
    for key in CONFIG_KEYS.values():
        entry: dict[str, Any] = {"type": key.type, "description": key.description}
        if key.type == "array":
            entry["items"] = {"type": "string"}
        if key.secret and key.required:
            entry["secret"] = True
        if not key.required:
            entry["default"] = list(key.default) if isinstance(key.default, (list, tuple)) else key.default
        declared[key.name] = entry
    return declared


CONFIGURATION_DOC = "docs/configuration.md"
"""The generated configuration reference (``make docs``), relative to the repository root."""

_INTRO = """\
Set with `pulumi config set kimi-k3:<key> <value> -s <stack>` (lists: `--path 'kimi-k3:key[0]'`
or edit the YAML). Every key is declared in `Pulumi.yaml`; an unknown key, a wrong type or a bad
value stops the run before anything is declared, with one message naming the key, the value and
what is accepted. `prod` (`kimi-k3:environment: prod`) is stricter: digest-pinned images, a private
EKS endpoint, a pinned AMI release, no `0.0.0.0/0`.
"""


def _anchor(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return "".join(ch for ch in title.lower() if ch.isalnum() or ch in " -").replace(" ", "-")


def _default_cell(key: ConfigKey) -> str:
    import json

    if key.required:
        default = "**required**"
    elif key.default == "":
        default = "empty"
    else:
        shown = json.dumps(list(key.default)) if isinstance(key.default, (list, tuple)) else (json.dumps(key.default) if isinstance(key.default, bool) else str(key.default))
        default = f"`{shown}`"
    return default + (" (secret)" if key.secret else "")


def markdown_reference() -> str:
    """The configuration reference, ``docs/configuration.md``: one table per section, with contents."""
    out = ["# Configuration reference", "",
           "<!-- generated by `make docs` from components/stack/config_keys.py: edit the table there, not here -->", "",
           _INTRO, "## Contents", ""]
    out += [f"- [{title}](#{_anchor(title)})" for title, _ in SECTIONS]
    for title, names in SECTIONS:
        out += ["", f"## {title}", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        if title == SECTIONS[0][0]:
            out.append("| `aws:region` | string | **required** | AWS region of the stack (the AWS provider's setting), e.g. `us-east-1`. |")
        for name in names:
            key = CONFIG_KEYS[name]
            out.append(f"| `{key.full_name}` | {key.type} | {_default_cell(key)} | {key.description.replace('|', '/')} |")
    return "\n".join(out) + "\n"


def _write_docs() -> None:
    """Regenerate Pulumi.yaml's config block and docs/configuration.md (``make docs``)."""
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[2]
    pulumi_yaml = root / "Pulumi.yaml"
    text = pulumi_yaml.read_text()
    head = text[: text.index("config:\n")]
    pulumi_yaml.write_text(head + yaml.safe_dump({"config": pulumi_yaml_config()}, sort_keys=False, width=100, allow_unicode=True))
    (root / CONFIGURATION_DOC).write_text(markdown_reference())


if __name__ == "__main__":
    _write_docs()
