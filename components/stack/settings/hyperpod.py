"""The HyperPod keys of a ``hyperpod`` stack (each rule's home is :mod:`kimi_k3.hyperpod`), and which keys each platform ignores.

A section of :mod:`kimi_k3.stack.settings` (the only reader of stack config).
"""

from __future__ import annotations

from dataclasses import dataclass

from kimi_k3.core import catalog
from kimi_k3.errors import ComponentInputError, SettingsError, UserError
from kimi_k3.stack import seam
from kimi_k3.stack.settings.capacity import CapacitySettings
from kimi_k3.stack.settings.cluster import ClusterSettings
from kimi_k3.stack.settings.reader import Reader, changed_keys, full_key, in_range
from kimi_k3.stack.settings.serving import ServingSettings


@dataclass(frozen=True)
class HyperPodSettings:
    """A ``hyperpod`` stack's SageMaker HyperPod cluster (``servingPlatform: hyperpod``)."""

    training_plan: str
    """The Flexible Training Plan backing the instance group: its ARN or name (``trainingPlanArn``)."""
    cluster_name: str
    """Name of the HyperPod cluster (``hyperpodClusterName``, default ``<project>-<stack>``)."""
    instance_type: str
    """HyperPod instance type of the instance group: ``ml.`` + ``gpuInstanceType``."""
    ebs_volume_gib: int
    """Extra EBS volume per instance (``hyperpodEbsVolumeGiB``)."""


EKS_ONLY_KEYS = (
    "capacityReservationId", "gpuAmiReleaseVersion", "gpuRootVolumeGiB", "efaEnabled", "capacityAlertEmail",
    "nvidiaDevicePluginVersion", "efaDevicePluginVersion", "dcgmExporterEnabled", "dcgmExporterVersion",
    "servingAllowedCidrs", "serviceMonitorEnabled",
    "servingExtraRoutes", "servingMaxGenerationSeconds", "servingDrainSeconds", "servingPreStopSeconds",
    "servingTerminationGraceSeconds", "nlbIdleTimeoutSeconds", "weightsKmsKeyArn",
    "prometheusOperatorEnabled", "prometheusOperatorInstall", "prometheusOperatorChartVersion", "deliveryCheckEnabled",
    "weightsStagingJob", "weightsStagingImage", "weightsBucketName", "compileCacheS3Uri", "nodeLocalWeights", "weightsSyncSidecar", "pipelinedWeightsLoad", "engineSnapshot", "peerWeightsTransfer", "engineSnapshotAgentImage", "imagePrePull", "fastImagePull",
    "dockerHubPullThroughSecretArn", "ecrPullThroughPrefix", "weightsVerifyHasher", "nodeCleanupImage",
    "conversationRouting", "routerSessionHeader", "routerReplicas", "routerPreStopSeconds", "routerImage",
)
"""Keys only the EKS path reads (Capacity Block node group, GPU plugins, the API proxy and its drain, the NLB, the alerts): a ``hyperpod`` stack warns when one is set."""


HYPERPOD_ONLY_KEYS = ("trainingPlanArn", "hyperpodClusterName", "hyperpodEbsVolumeGiB")
"""Keys only a ``hyperpod`` stack reads: an ``eks`` stack warns when one is set."""


def validate_hyperpod(
    r: Reader,
    serving_platform: str,
    region: str,
    cluster: ClusterSettings,
    capacity: CapacitySettings,
    serving: ServingSettings,
    default_cluster_name: str,
    warnings: list[str],
) -> HyperPodSettings | None:
    """What HyperPod requires of a ``hyperpod`` stack (each rule's home is named; this layer names the key).

    The rules: :mod:`kimi_k3.hyperpod.rules` (Kubernetes versions, names), the training
    plan reference (:func:`kimi_k3.hyperpod.training_plans.validate_plan_ref`), the instance types
    a plan can reserve (botocore's SageMaker model) and what the Inference Operator can
    serve (:func:`kimi_k3.hyperpod.endpoint.check_servable`).
    """
    if serving_platform != "hyperpod":
        stray = changed_keys(r, HYPERPOD_ONLY_KEYS)
        if stray:
            warnings.append(f"{', '.join(stray)} {'apply' if len(stray) > 1 else 'applies'} only to servingPlatform hyperpod; this stack is eks and ignores {'them' if len(stray) > 1 else 'it'}")
        return None
    from kimi_k3.hyperpod import rules as hyperpod_rules  # an EKS stack never loads the HyperPod modules
    from kimi_k3.hyperpod import training_plans  # an EKS stack never loads the HyperPod modules
    from kimi_k3.hyperpod.endpoint import check_servable  # an EKS stack never loads the HyperPod modules

    plan = r.get("trainingPlanArn")
    if not plan:
        raise SettingsError(
            full_key("trainingPlanArn"), None,
            "required when servingPlatform is hyperpod: the training plan (ARN or name) backing the instance group; "
            "buy one with `kimi-k3 hyperpod plans offerings` / `purchase`",
        )
    try:
        training_plans.validate_plan_ref(plan)
    except UserError:
        raise SettingsError(full_key("trainingPlanArn"), plan, "expected a training plan ARN (arn:aws:sagemaker:<region>:<account>:training-plan/<name>) or name") from None
    if plan.startswith("arn:") and plan.split(":")[3] != region:
        raise SettingsError(full_key("trainingPlanArn"), plan, f"a training plan of the stack's region {region} (aws:region): HyperPod uses plans of its own region only")
    try:
        hyperpod_rules.check_kubernetes_version(cluster.version)
    except UserError as err:
        raise SettingsError(full_key("clusterVersion"), cluster.version, str(err)) from None
    cluster_name = r.get("hyperpodClusterName") or default_cluster_name
    try:
        hyperpod_rules.check_names(cluster_name, ())
    except UserError:
        where = "" if r.get("hyperpodClusterName") else f" (the default <project>-<stack>; set {full_key('hyperpodClusterName')})"
        raise SettingsError(full_key("hyperpodClusterName"), cluster_name, f"1-63 letters, digits and '-', starting and ending with a letter or digit{where}") from None
    instance_type = f"ml.{capacity.instance_type}"
    plannable = training_plans.supported_instance_types()
    if instance_type not in plannable:
        accepted = ", ".join(t[3:] for t in plannable if t[3:] in catalog.INSTANCE_TYPES)
        raise SettingsError(full_key("gpuInstanceType"), capacity.instance_type, f"a type a training plan can reserve for HyperPod (ml.<type>): {accepted}")
    if serving.exposure != "cluster":
        raise SettingsError(
            full_key("exposure"), serving.exposure,
            "a hyperpod stack is reached through the SageMaker endpoint and the load balancer the Inference Operator creates itself; "
            "exposure applies to servingPlatform eks only: leave it at cluster",
        )
    try:
        check_servable(serving.contract, instance_type=instance_type, replicas=max(1, serving.replicas), api_key_secret="api-key", s3_region=region)
    except ComponentInputError as err:
        problem = err.problems[0]
        name = seam.key_name("InferenceEndpoint", problem.path) or "servingPlatform"
        value = r.get(name)
        reason = seam.in_key_terms("ServingContract", problem.reason, optional_prefix="contract.")
        raise SettingsError(full_key(name), list(value) if isinstance(value, tuple) else value, f"on servingPlatform hyperpod: {reason}") from None
    stray = changed_keys(r, EKS_ONLY_KEYS)
    if stray:
        warnings.append(f"{', '.join(stray)} {'apply' if len(stray) > 1 else 'applies'} only to servingPlatform eks; this stack is hyperpod and ignores {'them' if len(stray) > 1 else 'it'}")
    if serving.contract.weights.sha256_manifest:
        warnings.append(
            f"{full_key('weightsSha256Manifest')}: the HyperPod path does not verify the weights against it (the Inference Operator fetches "
            "the pinned revision itself); only the EKS path checks the manifest before serving"
        )
    return HyperPodSettings(
        training_plan=plan,
        cluster_name=cluster_name,
        instance_type=instance_type,
        ebs_volume_gib=in_range("hyperpodEbsVolumeGiB", r.get("hyperpodEbsVolumeGiB"), *hyperpod_rules.EBS_VOLUME_GIB),
    )
