"""Helm releases in an offline plan: ``helm/<release>.values.yaml`` beside ``manifests/``.

``manifests/`` holds the Kubernetes objects the program declares itself. A
``kubernetes:helm.sh/v3:Release`` is different: the Kubernetes provider downloads the
chart and renders it at apply time (pulumi-kubernetes ``helm.v3.Release``), so its
objects appear nowhere in the plan. What the plan can show honestly is what decides
them: the chart, its version, its repository and the exact values. Each values file
is usable as is (``helm template ... -f <file>``); its header says where the chart
comes from. Secret values are redacted like everywhere else in a plan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Protocol

import yaml

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
"""Type token of a Helm release."""


class RecordedLike(Protocol):
    """What this module needs of a declared resource (:class:`kimi_k3.offline.RecordedResource`)."""

    type: str
    name: str
    inputs: dict


def _release(resource: RecordedLike, redact) -> dict[str, Any]:
    inputs = redact(resource.inputs)
    return {
        "resource": resource.name,
        "name": inputs.get("name") or resource.name,
        "namespace": inputs.get("namespace") or "default",
        "chart": inputs.get("chart"),
        "version": inputs.get("version"),
        "repository": (inputs.get("repositoryOpts") or {}).get("repo"),
        "values": inputs.get("values") or {},
        "value_files": inputs.get("valueYamlFiles") or [],
    }


def _file_names(releases: list[dict[str, Any]]) -> list[str]:
    """``<release>.values.yaml``; releases sharing a name (other namespaces) get ``<namespace>-<release>``."""
    clashes = Counter(r["name"] for r in releases)
    return [f"{r['namespace']}-{r['name']}.values.yaml" if clashes[r["name"]] > 1 else f"{r['name']}.values.yaml" for r in releases]


def _render(release: dict[str, Any]) -> str:
    repository, version = release["repository"], release["version"]
    source = f"--repo {repository} " if repository else ""
    # A local chart (a path) has no version to ask for: its Chart.yaml is the version.
    pinned = f"--version {version} " if version else ""
    header = [
        f"# Helm release {release['name']} in namespace {release['namespace']} ({HELM_RELEASE} '{release['resource']}').",
        f"# chart: {release['chart']}",
        f"# version: {version or '(none: the chart directory is the version)'}",
        f"# repository: {repository or '(none: the chart is an OCI reference or a local path)'}",
        "# The Kubernetes provider renders this chart with exactly these values at apply time; its objects are not in manifests/.",
        f"# Render them: helm template {release['name']} {release['chart']} {source}{pinned}"
        f"--namespace {release['namespace']} -f <this file>",
    ]
    if release["value_files"]:
        header.append(f"# The release also reads {len(release['value_files'])} valueYamlFiles, merged under these values.")
    body = yaml.safe_dump(release["values"], sort_keys=True) if release["values"] else "{}\n"
    return "\n".join(header) + "\n" + body


def helm_values_files(resources: Iterable[RecordedLike], redact) -> dict[str, str]:
    """``{file name: text}`` for every Helm release, ordered by file name (deterministic bytes).

    ``redact`` turns secret values into the plan's marker (:func:`kimi_k3.offline.redact`).
    """
    releases = sorted((_release(r, redact) for r in resources if r.type == HELM_RELEASE), key=lambda r: (r["name"], r["namespace"], r["resource"]))
    return dict(sorted(zip(_file_names(releases), map(_render, releases), strict=False)))


__all__ = ["HELM_RELEASE", "helm_values_files"]
