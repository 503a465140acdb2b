"""Weights that outlive the pod, under Pod Security ``restricted`` (no ``hostPath``).

Design (docs/weights.md has the whole of it): a directory on the node's NVMe RAID0 is
bind-mounted under a discovery directory at every boot (:func:`boot_part` installs a mount unit), the
local-static-provisioner (kubernetes-sigs/sig-storage-local-static-provisioner, Helm chart
``helm/provisioner``) turns it into a ``local`` PersistentVolume with node affinity, and the
serving workload — a StatefulSet — claims it with a ``volumeClaimTemplate``
(:func:`weights_claim_template`) of the no-provisioner StorageClass (:func:`storage_class_args`,
``WaitForFirstConsumer``). A pod re-created on the node gets the same claim, the same volume,
the files and the verified marker: no transfer.

Failure modes and what handles them:

* the block's nodes are gone: the repository's **node-cleanup controller**
  (``docs/node-cleanup-controller.md``; not part of chart 2.9.0, so
  :func:`node_cleanup_deployment_spec` declares it) deletes a claim bound to a local volume
  whose node no longer exists (``--pvc-deletion-delay``) and then the volume
  (``--stale-pv-discovery-interval``), so the StatefulSet's pod does not stay Pending on a
  dead node; ``setPVOwnerRef`` makes each volume a dependent of its Node; the StatefulSet's
  ``persistentVolumeClaimRetentionPolicy`` deletes claims with the set;
* the volume is not chowned on every mount: ``fsGroupChangePolicy: OnRootMismatch``
  (:func:`pod_security_context`);
* two revisions never mix: each revision syncs into its own directory
  (:func:`revision_dir`) and :data:`PRUNE_SCRIPT` removes the others before the sync.
"""

from __future__ import annotations

import pulumi_kubernetes as k8s

from kimi_k3.cluster.image_reference import image_reference_problem
from kimi_k3.core.formats import GIT_REVISION, systemd_mount_unit
from kimi_k3.errors import UserError

NO_PROVISIONER = "kubernetes.io/no-provisioner"
"""Provisioner name of statically provisioned local volumes (Kubernetes docs, Storage Classes, Local)."""
RAID_MOUNT = "/mnt/k8s-disks/0"
"""Where nodeadm's ``setup-local-disks`` mounts the instance-store RAID0 (``localStorage.strategy: RAID0``)."""
DISCOVERY_DIR = "/mnt/kimi-local"
"""Discovery directory the provisioner watches (one mount under it = one PersistentVolume)."""


def revision_dir(mount_path: str, revision: str) -> str:
    """Directory of one revision's files inside the weights volume."""
    if not GIT_REVISION.fullmatch(revision or ""):
        raise UserError(f"node-local weights: revision {revision!r} is not a 40-hex commit SHA")
    return f"{mount_path.rstrip('/')}/{revision}"


PRUNE_SCRIPT = r"""set -eu
: "${WEIGHTS_ROOT:?}" "${KEEP_REVISION:?}"
for d in "$WEIGHTS_ROOT"/*; do
  [ -d "$d" ] || continue
  name=${d##*/}
  [ "$name" = "$KEEP_REVISION" ] && continue
  case "$name" in *[!0-9a-f]*) continue ;; esac
  [ "${#name}" -eq 40 ] || continue
  echo "removing weights of revision $name from this node"
  rm -rf -- "$d"
done
"""
"""Shell run before the sync: delete other revisions' directories (only 40-hex names: nothing else is touched)."""


def storage_class_args(name: str = "kimi-local-weights") -> dict:
    """Arguments of the StorageClass of node-local weight volumes (``k8s.storage.v1.StorageClass(**...)``)."""
    return dict(
        metadata=k8s.meta.v1.ObjectMetaArgs(name=name, labels={"app.kubernetes.io/part-of": "kimi-k3"}),
        provisioner=NO_PROVISIONER,
        volume_binding_mode="WaitForFirstConsumer",
        reclaim_policy="Delete",
        allow_volume_expansion=False,
    )


WEIGHTS_CLAIM_GB = 1955
"""The storage the weights claim requests, a fixed figure: never derived from the weights' size or any other setting.

The claim template is immutable: Kubernetes forbids StatefulSet spec updates other than
replicas, ordinals, template, updateStrategy, persistentVolumeClaimRetentionPolicy and
minReadySeconds (kubernetes/kubernetes ``pkg/apis/apps/validation/validation.go``,
``ValidateStatefulSetUpdate``), so pulumi-kubernetes replaces the StatefulSet on any change to
``spec.volumeClaimTemplates`` (``provider/pkg/provider/diff.go``, ``statefulSet``), and with
retention ``Delete`` and the StorageClass's reclaim ``Delete`` that wipes the weights on every
node. A figure computed from the model's expected size (``ceil(size x 1.15)``) would move
with a catalog update. The request is only a binding floor: a local PersistentVolume is the
node's whole RAID0 (30.4 TB on every supported type), which holds any accepted weights size.
1955 GB is what stacks were deployed with (1,700 GB x 1.15), so existing sets are kept."""


def weights_claim_template(storage_class: str, size_gb: int = WEIGHTS_CLAIM_GB, name: str = "models") -> k8s.core.v1.PersistentVolumeClaimArgs:
    """The StatefulSet's ``volumeClaimTemplate`` for the weights volume (one claim per replica, on its node; :data:`WEIGHTS_CLAIM_GB`)."""
    if size_gb < 1:
        raise UserError(f"node-local weights: size_gb {size_gb!r} is not accepted")
    return k8s.core.v1.PersistentVolumeClaimArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(name=name),
        spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
            access_modes=["ReadWriteOnce"],
            storage_class_name=storage_class,
            resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": f"{size_gb}G"}),
        ),
    )


def claim_retention_policy() -> k8s.apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicyArgs:
    """Delete the claims with the StatefulSet and on scale-down (a block's nodes never come back)."""
    return k8s.apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicyArgs(when_deleted="Delete", when_scaled="Delete")


def pod_security_context(uid: int = 10001) -> k8s.core.v1.PodSecurityContextArgs:
    """``restricted`` pod context; ``fsGroupChangePolicy: OnRootMismatch`` so 1.56 TB is not chowned at every mount."""
    return k8s.core.v1.PodSecurityContextArgs(
        run_as_non_root=True, run_as_user=uid, run_as_group=uid, fs_group=uid, fs_group_change_policy="OnRootMismatch",
        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
    )


WEIGHTS_SOURCE = f"{RAID_MOUNT}/kimi-weights"
"""The weights' directory on the RAID0."""
WEIGHTS_MOUNT = f"{DISCOVERY_DIR}/weights"
"""The bind mount of :data:`WEIGHTS_SOURCE` under the discovery directory: the provisioner's PersistentVolume path."""
WEIGHTS_MOUNT_UNIT = systemd_mount_unit(WEIGHTS_MOUNT)
"""The mount unit that binds :data:`WEIGHTS_SOURCE` at :data:`WEIGHTS_MOUNT` at every boot (``mnt-kimi\\x2dlocal-weights.mount``)."""
FIRST_BOOT_UNIT = "kimi-weights-volume.service"
"""The one-shot unit that, on the first boot, waits for nodeadm's RAID0, creates :data:`WEIGHTS_SOURCE` and starts the mount unit."""
FIRST_BOOT_SCRIPT = "/usr/local/sbin/kimi-weights-volume"
"""What :data:`FIRST_BOOT_UNIT` runs."""
RAID_WAIT_S = 900
"""How long the first-boot unit waits for the RAID0 (nodeadm-run makes it within a minute of cloud-final; past this the unit fails visibly)."""


def _mount_unit() -> str:
    # Before=kubelet.service: after a reboot the kubelet (started by nodeadm-run) restarts pods only once the
    # bind is back; a mount unit is also Before=local-fs.target by default, and the bind's What= makes it
    # require the RAID0's own mount unit, which setup-local-disks wrote and enabled on the first boot.
    return (
        "[Unit]\n"
        "Description=Kimi K3 node-local weights: the RAID0 directory the local-static-provisioner turns into a PersistentVolume\n"
        "Before=kubelet.service\n"
        "[Mount]\n"
        f"What={WEIGHTS_SOURCE}\n"
        f"Where={WEIGHTS_MOUNT}\n"
        "Type=none\n"
        "Options=bind\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def _first_boot_unit() -> str:
    # Not After=nodeadm-run.service: nodeadm-run starts the kubelet and waits for it, and the kubelet is
    # ordered after this unit, so that ordering would deadlock the boot. The script polls instead.
    return (
        "[Unit]\n"
        "Description=Kimi K3 node-local weights, first boot: wait for nodeadm's RAID0, then mount the weights directory\n"
        "Before=kubelet.service\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"ExecStart={FIRST_BOOT_SCRIPT}\n"
        f"TimeoutStartSec={RAID_WAIT_S + 60}\n"
    )


def _first_boot_script() -> str:
    return (
        "#!/bin/bash\nset -euo pipefail\n"
        f"for i in $(seq {RAID_WAIT_S}); do mountpoint -q {RAID_MOUNT} && break; sleep 1; done\n"
        f"mountpoint -q {RAID_MOUNT}\n"
        f"mkdir -p {WEIGHTS_SOURCE} {WEIGHTS_MOUNT}\n"
        f"systemctl start '{WEIGHTS_MOUNT_UNIT}'\n"
    )


HEREDOC_TAG = "KIMI_K3_EOF"


def boot_part() -> str:
    """The user-data shell part (``text/x-shellscript``) that makes the weights volume appear on every boot of a GPU node.

    cloud-init runs it in ``cloud-final``, *before* nodeadm-run creates the RAID0 (amazon-eks-ami
    ``nodeadm-run.service``: ``After=... cloud-final.service``), so it never waits: it installs a mount
    unit (enabled: it binds the weights directory again after a reboot, before the kubelet) and a
    one-shot unit it starts with ``--no-block``, which waits for the RAID0 outside cloud-final and then
    starts the mount. ``kimi_k3.offline.boot_order`` boots a node with it, twice, from the AMI's own
    unit files.
    """
    files = ((FIRST_BOOT_SCRIPT, _first_boot_script()), (f"/etc/systemd/system/{FIRST_BOOT_UNIT}", _first_boot_unit()), (f"/etc/systemd/system/{WEIGHTS_MOUNT_UNIT}", _mount_unit()))
    lines = [
        "#!/bin/bash",
        "set -euo pipefail",
        "# Runs in cloud-final, before nodeadm-run makes the RAID0: install units, never wait here.",
    ]
    for path, body in files:
        lines += [f"cat > '{path}' <<'{HEREDOC_TAG}'", body.rstrip("\n"), HEREDOC_TAG]
    lines += [
        f"chmod 0755 {FIRST_BOOT_SCRIPT}",
        "systemctl daemon-reload",
        f"systemctl enable '{WEIGHTS_MOUNT_UNIT}'",
        f"systemctl start --no-block {FIRST_BOOT_UNIT}",
    ]
    return "\n".join(lines) + "\n"


def provisioner_values(storage_class: str = "kimi-local-weights", node_selector: dict | None = None, tolerations: list | None = None) -> dict:
    """Helm values for the local-static-provisioner chart (``catalog.LOCAL_STATIC_PROVISIONER_CHART``).

    One class over :data:`DISCOVERY_DIR` (the StorageClass itself is declared by us,
    :func:`storage_class_args`), and ``setPVOwnerRef``: each volume is a dependent of its Node,
    so the garbage collector deletes it with the Node. The chart (2.9.0) does not deploy the
    node-cleanup controller; :func:`node_cleanup_deployment_spec` does.
    """
    return {
        "classes": [{"name": storage_class, "hostDir": DISCOVERY_DIR, "volumeMode": "Filesystem", "storageClass": False}],
        "setPVOwnerRef": True,
        "nodeSelector": node_selector or {},
        "tolerations": tolerations or [],
    }


NODE_CLEANUP_IMAGE = "registry.k8s.io/sig-storage/local-volume-node-cleanup:v2.9.0"


def cleanup_image_problem(image: str) -> str | None:
    """What is accepted instead of ``image`` as the node-cleanup controller's image (``TimeToServeArgs.node_cleanup_image``,
    the settings' ``nodeCleanupImage``); ``None``: accepted. prod's digest pin is the stack's rule (its environment)."""
    if image_reference_problem(image):
        return "expected repo:tag or repo@sha256:<64 hex>"
    return None
"""Release image of the node-cleanup controller (``REGISTRY ?= registry.k8s.io/sig-storage`` and
``local-volume-node-cleanup`` in the repository's Makefile and hack/release.sh at
local-static-provisioner-2.9.0); pin it by digest when integrating (not resolvable offline)."""

NODE_CLEANUP_RULES = (
    {"api_groups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list", "watch", "delete"]},
    {"api_groups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "list", "watch", "delete"]},
    {"api_groups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"api_groups": [""], "resources": ["events"], "verbs": ["create"]},
)
"""ClusterRole rules of the controller, as in the repository's
``deployment/kubernetes/example/node-cleanup-controller/rbac.yaml`` (local-static-provisioner-2.9.0)."""


NODE_CLEANUP_CHECKOV_SKIPS = {"checkov.io/skip1": "CKV_K8S_38=the controller watches Nodes and deletes PVs/PVCs through the API, so it needs its ServiceAccount token"}
"""Annotations for the controller Deployment's metadata (a reasoned checkov skip)."""


def node_cleanup_args(storage_class: str = "kimi-local-weights", pvc_deletion_delay_s: int = 60, stale_pv_interval_s: int = 10) -> list[str]:
    """Arguments of the controller (docs/node-cleanup-controller.md): opt in our StorageClass only."""
    return [f"--storageclass-names={storage_class}", f"--pvc-deletion-delay={pvc_deletion_delay_s}s", f"--stale-pv-discovery-interval={stale_pv_interval_s}s"]


def node_cleanup_deployment_spec(service_account: str, image: str = NODE_CLEANUP_IMAGE, storage_class: str = "kimi-local-weights", node_selector: dict | None = None) -> k8s.apps.v1.DeploymentSpecArgs:
    """The controller that deletes claims bound to local volumes of deleted nodes (after the delay) and then the volumes.

    Shaped on the repository's example ``deployment.yaml``, with a pinned image instead of its
    ``canary`` tag, a restricted security context and the system nodes' selector.
    """
    pod_labels = {"app.kubernetes.io/name": "local-volume-node-cleanup"}
    return k8s.apps.v1.DeploymentSpecArgs(
        replicas=1,
        selector=k8s.meta.v1.LabelSelectorArgs(match_labels=pod_labels),
        template=k8s.core.v1.PodTemplateSpecArgs(
            metadata=k8s.meta.v1.ObjectMetaArgs(labels=pod_labels),
            spec=k8s.core.v1.PodSpecArgs(
                service_account_name=service_account,
                node_selector=node_selector or {},
                security_context=k8s.core.v1.PodSecurityContextArgs(run_as_non_root=True, run_as_user=65532, run_as_group=65532, seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault")),
                containers=[
                    k8s.core.v1.ContainerArgs(
                        name="local-volume-node-cleanup-controller",
                        image=image,
                        image_pull_policy="IfNotPresent",
                        args=node_cleanup_args(storage_class),
                        ports=[k8s.core.v1.ContainerPortArgs(name="metrics", container_port=8080)],
                        resources=k8s.core.v1.ResourceRequirementsArgs(requests={"cpu": "10m", "memory": "32Mi"}, limits={"cpu": "200m", "memory": "128Mi"}),
                        liveness_probe=k8s.core.v1.ProbeArgs(http_get=k8s.core.v1.HTTPGetActionArgs(path="/metrics", port="metrics"), period_seconds=30),
                        readiness_probe=k8s.core.v1.ProbeArgs(http_get=k8s.core.v1.HTTPGetActionArgs(path="/metrics", port="metrics"), period_seconds=30),
                        security_context=k8s.core.v1.SecurityContextArgs(
                            run_as_non_root=True, allow_privilege_escalation=False, privileged=False, read_only_root_filesystem=True,
                            capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]), seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
                        ),
                    )
                ],
            ),
        ),
    )
