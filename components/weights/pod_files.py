"""The pod-side modules as ConfigMap data: how the staging and cache code reaches a pod.

The Job and the cache containers run the project's own files (no image of ours to build
and pin): the modules listed in :data:`kimi_k3.weights.POD_MODULES`, read from this
package, become keys of a ConfigMap mounted at :data:`MOUNT_PATH`; ``items`` rebuild the
package layout and ``PYTHONPATH`` points at the mount. ``components/__init__.py`` is
replaced by a stub, because the real one imports Pulumi.
"""

from __future__ import annotations

import ast
import hashlib
from importlib import resources

import pulumi_kubernetes as k8s

from kimi_k3.weights import POD_MODULES, vllm_loader

MOUNT_PATH = "/opt/kimi-k3"
"""Where the ConfigMap is mounted; ``PYTHONPATH`` of the pod-side containers."""
ROOT_STUB = '"""Stub of the kimi-k3-aws package root for pods: only kimi_k3.weights runs there."""\n'


def pod_files() -> dict[str, tuple[str, str]]:
    """ConfigMap key -> (path under the mount, file content), in a stable order."""
    files = {"root-init": ("kimi_k3/__init__.py", ROOT_STUB)}
    package = resources.files("kimi_k3.weights")
    files["weights-init"] = ("kimi_k3/weights/__init__.py", package.joinpath("__init__.py").read_text())
    for name in POD_MODULES:
        files[f"weights-{name}"] = (f"kimi_k3/weights/{name}.py", package.joinpath(f"{name}.py").read_text())
    # The vLLM loader plugin's distribution metadata: importlib.metadata finds a *.dist-info on PYTHONPATH (vllm_loader).
    files["plugin-metadata"] = (f"{vllm_loader.DIST_INFO}/METADATA", vllm_loader.METADATA)
    files["plugin-entry-points"] = (f"{vllm_loader.DIST_INFO}/entry_points.txt", vllm_loader.entry_points_txt())
    return files


def without_docstrings(text: str) -> str:
    """``text`` of a module with every docstring (module, class, function, attribute) cut out and blank lines dropped.

    What runs is the same with or without them (no pod module reads ``__doc__``). The spans come from
    the parser's positions (UTF-8 byte columns), which do not change between Python versions, unlike
    ``ast.dump`` or the token stream, so the operator's Python does not change the hash.
    """
    lines = text.encode().splitlines(keepends=True)
    spans = [
        (node.lineno - 1, node.col_offset, node.end_lineno - 1, node.end_col_offset)
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str) and node.end_lineno is not None
        and node.end_col_offset is not None
    ]
    for first, start, last, end in sorted(spans, reverse=True):
        lines[first : last + 1] = [lines[first][:start] + lines[last][end:]]
    return "".join(line.decode() for line in lines if line.strip())


def content_hash() -> str:
    """sha256 of the code of every shipped file, an annotation on the pod templates: a code change rolls the pods.

    Docstrings are left out (:func:`without_docstrings`): a change of documentation updates the
    ConfigMap's text but does not restart pods on paid GPUs.
    """
    digest = hashlib.sha256()
    for key, (path, text) in sorted(pod_files().items()):
        code = without_docstrings(text) if path.endswith(".py") else text
        digest.update(f"{key}\0{path}\0{code}\0".encode())
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
"""Environment that makes ``python3 -m kimi_k3.weights.podmain`` find the mounted files (read-only: no .pyc)."""
