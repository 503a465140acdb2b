"""The pod-side modules as ConfigMap data: how the staging and cache code reaches a pod.

The Job and the cache containers run the project's own files (no image of ours to build
and pin): the modules listed in :data:`components.weights.POD_MODULES`, read from this
package, become keys of a ConfigMap mounted at :data:`MOUNT_PATH`; ``items`` rebuild the
package layout and ``PYTHONPATH`` points at the mount. ``components/__init__.py`` is
replaced by a stub, because the real one imports Pulumi.
"""

from __future__ import annotations

import hashlib
from importlib import resources

import pulumi_kubernetes as k8s

from components.weights import POD_MODULES

MOUNT_PATH = "/opt/kimi-k3"
"""Where the ConfigMap is mounted; ``PYTHONPATH`` of the pod-side containers."""
ROOT_STUB = '"""Stub of the kimi-k3-aws package root for pods: only components.weights runs there."""\n'


def pod_files() -> dict[str, tuple[str, str]]:
    """ConfigMap key -> (path under the mount, file content), in a stable order."""
    files = {"components-init": ("components/__init__.py", ROOT_STUB)}
    package = resources.files("components.weights")
    files["weights-init"] = ("components/weights/__init__.py", package.joinpath("__init__.py").read_text())
    for name in POD_MODULES:
        files[f"weights-{name}"] = (f"components/weights/{name}.py", package.joinpath(f"{name}.py").read_text())
    return files


def content_hash() -> str:
    """sha256 of every shipped file (an annotation on the pod template: a code change rolls the pods)."""
    digest = hashlib.sha256()
    for key, (path, text) in sorted(pod_files().items()):
        digest.update(f"{key}\0{path}\0{text}\0".encode())
    return digest.hexdigest()


def config_map_data() -> dict[str, str]:
    """``data`` of the ConfigMap."""
    return {key: text for key, (_, text) in pod_files().items()}


def volume(name: str, config_map_name: str) -> k8s.core.v1.VolumeArgs:
    """The ConfigMap volume that rebuilds the package layout (read-only for everyone)."""
    return k8s.core.v1.VolumeArgs(
        name=name,
        config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(
            name=config_map_name,
            default_mode=0o444,
            items=[k8s.core.v1.KeyToPathArgs(key=key, path=path) for key, (path, _) in pod_files().items()],
        ),
    )


POD_ENV = {"PYTHONPATH": MOUNT_PATH, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}
"""Environment that makes ``python3 -m components.weights.podmain`` find the mounted files (read-only: no .pyc)."""
