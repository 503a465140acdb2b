"""Weights that outlive the pod, under Pod Security ``restricted`` (no ``hostPath``).

Design (docs/weights.md has the whole of it): a directory on the node's NVMe RAID0 is
bind-mounted under a discovery directory at boot (:func:`bind_mount_script`), the
local-static-provisioner (kubernetes-sigs/sig-storage-local-static-provisioner, Helm chart
``helm/provisioner``) turns it into a ``local`` PersistentVolume with node affinity, and the
serving workload — a StatefulSet — claims it with a ``volumeClaimTemplate``
(:func:`weights_claim_template`) of the no-provisioner StorageClass (:func:`storage_class_args`,
``WaitForFirstConsumer``). A pod re-created on the node gets the same claim, the same volume,
the files and the verified marker: no transfer.

Failure modes and what handles them:

* the block's nodes are gone: the chart's **node-cleanup controller** deletes a claim bound to
  a local volume whose node no longer exists (``--pvc-deletion-delay``) and the stale volume
  (``--stale-pv-discovery-interval``), so the StatefulSet's pod does not stay Pending on a
  dead node; the StatefulSet's ``persistentVolumeClaimRetentionPolicy`` deletes claims with
  the set;
* the volume is not chowned on every mount: ``fsGroupChangePolicy: OnRootMismatch``
  (:func:`pod_security_context`);
* two revisions never mix: each revision syncs into its own directory
  (:func:`revision_dir`) and :data:`PRUNE_SCRIPT` removes the others before the sync.
"""

from __future__ import annotations

import re

import pulumi_kubernetes as k8s

from components.errors import UserError

NO_PROVISIONER = "kubernetes.io/no-provisioner"
"""Provisioner name of statically provisioned local volumes (Kubernetes docs, Storage Classes, Local)."""
RAID_MOUNT = "/mnt/k8s-disks/0"
"""Where nodeadm's ``setup-local-disks`` mounts the instance-store RAID0 (``localStorage.strategy: RAID0``)."""
DISCOVERY_DIR = "/mnt/kimi-local"
"""Discovery directory the provisioner watches (one mount under it = one PersistentVolume)."""


def revision_dir(mount_path: str, revision: str) -> str:
    """Directory of one revision's files inside the weights volume."""
    if not re.fullmatch(r"[0-9a-f]{40}", revision or ""):
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


def weights_claim_template(storage_class: str, size_gb: int, name: str = "models") -> k8s.core.v1.PersistentVolumeClaimArgs:
    """The StatefulSet's ``volumeClaimTemplate`` for the weights volume (one claim per replica, on its node)."""
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
    """``restricted`` pod context; ``fsGroupChangePolicy: OnRootMismatch`` so 1.7 TB is not chowned at every mount."""
    return k8s.core.v1.PodSecurityContextArgs(
        run_as_non_root=True, run_as_user=uid, run_as_group=uid, fs_group=uid, fs_group_change_policy="OnRootMismatch",
        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
    )


def bind_mount_script(source: str = f"{RAID_MOUNT}/kimi-weights", target: str = f"{DISCOVERY_DIR}/weights") -> str:
    """Boot script (a ``text/x-shellscript`` MIME part, run after nodeadm mounted the RAID0) exposing a RAID directory to the provisioner.

    The provisioner makes one PersistentVolume per *mount point* under its discovery
    directory, so the directory is bind-mounted there. To confirm on a real node: the part runs
    after ``setup-local-disks`` (it waits for the RAID mount for up to 5 minutes).
    """
    for path in (source, target):
        if not re.fullmatch(r"/[\w./-]+", path) or ".." in path.split("/"):
            raise UserError(f"node-local weights: path {path!r} is not an absolute path")
    return (
        "#!/bin/bash\nset -euo pipefail\n"
        f"for i in $(seq 300); do mountpoint -q {RAID_MOUNT} && break; sleep 1; done\n"
        f"mountpoint -q {RAID_MOUNT}\n"
        f"mkdir -p {source} {target}\n"
        f"mountpoint -q {target} || mount --bind {source} {target}\n"
    )


def provisioner_values(storage_class: str = "kimi-local-weights", node_selector: dict | None = None, tolerations: list | None = None) -> dict:
    """Helm values for the local-static-provisioner chart: one class over :data:`DISCOVERY_DIR`, and the node-cleanup controller on."""
    return {
        "classes": [{"name": storage_class, "hostDir": DISCOVERY_DIR, "volumeMode": "Filesystem", "storageClass": False}],
        "nodeSelector": node_selector or {},
        "tolerations": tolerations or [],
        "nodeCleanupController": {"enabled": True, "storageClassNames": [storage_class], "pvcDeletionDelay": "60s"},
    }
