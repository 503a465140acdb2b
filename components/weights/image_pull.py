"""Keep the engine image off the critical path: pre-pull it, pull it in parallel, pull it in region.

* **Pre-pull DaemonSet** on the GPU nodes (:func:`prepull_daemonset_spec`): the kubelet pulls
  a pod's image only when it is about to start that container, so the serving pod's engine
  image is pulled after its init containers (the weight sync). A DaemonSet pod that uses the
  same image starts on the node as soon as it is Ready and pulls it *while* the sync runs.
  Pulls run side by side: nodeadm sets ``serializeImagePulls: false``
  (awslabs/amazon-eks-ami ``nodeadm/internal/kubelet/config.go``).
* **FastImagePull** (:func:`check_fast_image_pull`, :func:`nodeadm_fast_image_pull`): nodeadm's
  feature gate that configures containerd to pull and unpack layers in parallel (SOCI
  parallel mode; ``nodeadm/doc/api.md``, ``doc/examples.md``). It is tied to the pinned AMI
  release: nodeadm gained SOCI support in v20250813 (amazon-eks-ami#2352), and v20260505's
  containerd 2.2.3 broke the SOCI snapshotter (nodes stay NotReady, amazon-eks-ami#2712, a
  duplicate of #2710; pinning v20260423 was the workaround).
* **ECR pull-through cache for Docker Hub** (:func:`pull_through_cache_rule_args`,
  :func:`through_cache`): dev's floating-tag image comes from ECR in the stack's region instead
  of crossing a NAT from Docker Hub. ECR requires Docker Hub credentials in a Secrets Manager
  secret whose name starts with ``ecr-pullthroughcache/``, in the rule's account and region
  (ECR user guide, pull-through-cache-creating-rule / -creating-secret).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import pulumi_aws as aws
import pulumi_kubernetes as k8s

from kimi_k3.core import labels
from kimi_k3.errors import UserError

FAST_IMAGE_PULL_FIRST_RELEASE = "20250813"
"""First AMI release whose nodeadm configures the SOCI snapshotter (amazon-eks-ami CHANGELOG, PR #2352)."""
FAST_IMAGE_PULL_KNOWN_BAD = {
    "20260505": "containerd 2.2.3 breaks the SOCI snapshotter and nodes stay NotReady (awslabs/amazon-eks-ami#2712, duplicate of #2710; v20260423 works)",
}
"""AMI releases (date part) on which FastImagePull is known to break the node."""
NODE_KNOWN_ISSUES = {
    "20260520": "reported: RunPodSandbox fails with image localhost/kubernetes/pause not found, nodes never reach Ready (awslabs/amazon-eks-ami#2729)",
}
"""AMI releases with a reported node start-up problem regardless of FastImagePull (a warning)."""
_RELEASE = re.compile(r"^(?:\d+\.\d+(?:\.\d+)?-)?v?(\d{8})$")


FLOATING_TAG_SKIP = "CKV_K8S_43=the image is pinned by tag, which settings allow outside prod only (with a warning); prod requires a digest"
"""checkov skip (with its reason) for a tag-pinned image in a non-production stack."""


def release_date(ami_release_version: str) -> str:
    """The ``YYYYMMDD`` of an EKS AMI release (``1.34.2-20251120`` or ``v20251120``)."""
    match = _RELEASE.match(ami_release_version or "")
    if not match:
        raise UserError(f"AMI release {ami_release_version!r} is not accepted; expected <kubernetes version>-<YYYYMMDD> such as 1.34.2-20251120")
    return match.group(1)


def check_fast_image_pull(ami_release_version: str | None, enabled: bool) -> list[str]:
    """Warnings for the GPU nodes' AMI release; raises :class:`UserError` when FastImagePull cannot work on it."""
    warnings: list[str] = []
    if ami_release_version is not None:
        date = release_date(ami_release_version)
        if date in NODE_KNOWN_ISSUES:
            warnings.append(f"AMI release {ami_release_version}: {NODE_KNOWN_ISSUES[date]}")
    if not enabled:
        return warnings
    if ami_release_version is None:
        raise UserError("FastImagePull needs a pinned AMI release (gpuAmiReleaseVersion): known-bad releases can only be refused when the release is known")
    date = release_date(ami_release_version)
    if date in FAST_IMAGE_PULL_KNOWN_BAD:
        raise UserError(f"FastImagePull is not accepted on AMI release {ami_release_version}: {FAST_IMAGE_PULL_KNOWN_BAD[date]}; pin another release or turn FastImagePull off")
    if date < FAST_IMAGE_PULL_FIRST_RELEASE:
        raise UserError(f"FastImagePull is not accepted on AMI release {ami_release_version}: nodeadm configures SOCI parallel pull from v{FAST_IMAGE_PULL_FIRST_RELEASE} on")
    return warnings


def nodeadm_fast_image_pull() -> str:
    """The NodeConfig document (a MIME part of the launch template's user data) turning FastImagePull on."""
    return "---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  featureGates:\n    FastImagePull: true\n"


def _restricted() -> k8s.core.v1.SecurityContextArgs:
    return k8s.core.v1.SecurityContextArgs(
        run_as_non_root=True, run_as_user=10001, run_as_group=10001, allow_privilege_escalation=False, privileged=False, read_only_root_filesystem=True,
        capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]), seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
    )


PREPULL_CHECKOV_SKIPS = {
    "checkov.io/skip1": "CKV_K8S_8=the pre-pull pod only holds the image on the node (sleep); it serves nothing a liveness probe could check",
    "checkov.io/skip2": "CKV_K8S_9=the pre-pull pod receives no traffic, so readiness means nothing for it",
}
"""Annotations for the pre-pull DaemonSet's metadata (reasoned checkov skips, as the project's convention)."""


def prepull_daemonset_spec(image: str, pod_labels: Mapping[str, str], instance_type: str | None = None) -> k8s.apps.v1.DaemonSetSpecArgs:
    """A DaemonSet on the GPU nodes whose only job is to have ``image`` pulled early, and kept.

    The init container runs the image once (``python3 -c pass``), the main container idles in
    the same image (``sleep infinity``), so no second image is needed and the kubelet's image
    garbage collector never removes an image a running container uses. Requests are tiny: the
    serving pod keeps the node.
    """
    if "@sha256:" not in image and ":" not in image.rsplit("/", 1)[-1]:
        raise UserError(f"image pre-pull: {image!r} must carry a tag or a digest")
    pull = "IfNotPresent" if "@sha256:" in image else "Always"
    tiny = k8s.core.v1.ResourceRequirementsArgs(requests={"cpu": "10m", "memory": "16Mi"}, limits={"cpu": "100m", "memory": "64Mi"})
    selector = {**labels.GPU_NODE_SELECTOR, **({labels.INSTANCE_TYPE_LABEL: instance_type} if instance_type else {})}
    return k8s.apps.v1.DaemonSetSpecArgs(
        selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(pod_labels)),
        update_strategy=k8s.apps.v1.DaemonSetUpdateStrategyArgs(type="RollingUpdate", rolling_update=k8s.apps.v1.RollingUpdateDaemonSetArgs(max_unavailable="100%")),
        template=k8s.core.v1.PodTemplateSpecArgs(
            metadata=k8s.meta.v1.ObjectMetaArgs(labels=dict(pod_labels)),
            spec=k8s.core.v1.PodSpecArgs(
                automount_service_account_token=False,
                enable_service_links=False,
                node_selector=selector,
                tolerations=[k8s.core.v1.TolerationArgs(key=labels.GPU_TOLERATION["key"], operator=labels.GPU_TOLERATION["operator"], effect=labels.GPU_TOLERATION["effect"])],
                termination_grace_period_seconds=5,
                security_context=k8s.core.v1.PodSecurityContextArgs(run_as_non_root=True, run_as_user=10001, run_as_group=10001, seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault")),
                init_containers=[k8s.core.v1.ContainerArgs(name="pull", image=image, image_pull_policy=pull, command=["python3", "-c", "pass"], resources=tiny, security_context=_restricted())],
                containers=[k8s.core.v1.ContainerArgs(name="keep", image=image, image_pull_policy=pull, command=["sleep", "infinity"], resources=tiny, security_context=_restricted())],
            ),
        ),
    )


ECR_SECRET_PREFIX = "ecr-pullthroughcache/"
DOCKER_HUB_URL = "registry-1.docker.io"
_PREFIX = re.compile(r"^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*$")


PREFIX_ACCEPTED = "2-30 lower-case letters, digits and . _ - (/ between parts), as ECR's ecrRepositoryPrefix"
"""What :func:`valid_prefix` accepts, in the words of a refusal."""


def valid_prefix(ecr_repository_prefix: str) -> bool:
    """Whether ECR accepts ``ecr_repository_prefix`` as a pull-through cache rule's prefix (CreatePullThroughCacheRule:
    2-30 characters, ``(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*``)."""
    return 2 <= len(ecr_repository_prefix) <= 30 and bool(_PREFIX.match(ecr_repository_prefix))


def pull_through_cache_rule_args(credential_secret_arn: str, ecr_repository_prefix: str = "docker-hub") -> aws.ecr.PullThroughCacheRuleArgs:
    """The ECR rule caching Docker Hub under ``ecr_repository_prefix`` (credentials from Secrets Manager, as ECR requires for Docker Hub).

    A registry holds one rule per prefix: creating one whose prefix another rule has fails
    (``PullThroughCacheRuleAlreadyExistsException``, ECR API reference, CreatePullThroughCacheRule). Adopt an existing
    rule with ``pulumi import aws:ecr/pullThroughCacheRule:PullThroughCacheRule <name> <prefix>`` (the import id is the
    prefix; docs/weights.md has the exact command with the parent), or pick another prefix.
    """
    if not valid_prefix(ecr_repository_prefix):
        raise UserError(f"pull-through cache: prefix {ecr_repository_prefix!r} is not accepted; expected 2-30 lower-case characters as ECR repository names use")
    match = re.match(r"^arn:aws[\w-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:(.+)$", credential_secret_arn or "")
    if not match or not match.group(1).startswith(ECR_SECRET_PREFIX):
        raise UserError(f"pull-through cache: credential secret {credential_secret_arn!r} is not accepted; ECR requires a Secrets Manager secret named {ECR_SECRET_PREFIX}... holding the Docker Hub username and accessToken")
    return aws.ecr.PullThroughCacheRuleArgs(ecr_repository_prefix=ecr_repository_prefix, upstream_registry_url=DOCKER_HUB_URL, credential_arn=credential_secret_arn)


def through_cache(image: str, account_id: str, region: str, ecr_repository_prefix: str = "docker-hub") -> str:
    """A Docker Hub image reference rewritten to the pull-through cache (``nginx`` -> ``…/docker-hub/library/nginx``)."""
    if not re.fullmatch(r"\d{12}", account_id):
        raise UserError(f"pull-through cache: account id {account_id!r} is not 12 digits")
    first = image.split("/", 1)[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        if first not in ("docker.io", "registry-1.docker.io", "index.docker.io"):
            raise UserError(f"pull-through cache: {image!r} is not a Docker Hub image")
        image = image.split("/", 1)[1]
    if "/" not in image.split("@", 1)[0].split(":", 1)[0]:
        image = f"library/{image}"
    return f"{account_id}.dkr.ecr.{region}.amazonaws.com/{ecr_repository_prefix}/{image}"


def pull_through_node_policy(account_id: str, region: str, ecr_repository_prefix: str = "docker-hub", partition: str = "aws") -> dict:
    """What the GPU node role needs to pull through the cache the first time (the cache creates the repository and imports the image)."""
    repos = f"arn:{partition}:ecr:{region}:{account_id}:repository/{ecr_repository_prefix}/*"
    return {
        "Version": "2012-10-17",
        "Statement": [{"Sid": "PullThroughCache", "Effect": "Allow", "Action": ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"], "Resource": [repos]}],
    }
