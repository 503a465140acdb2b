"""A container image reference, ``repo[:tag][@sha256:…]``: the one grammar every image a pod runs is checked against (pure: no Pulumi).

The serving contract (:class:`kimi_k3.serving.contracts.ImageContract`), the staging Job's image
(:func:`kimi_k3.weights.staging_job.image_problem`) and the node-cleanup controller's
(:func:`kimi_k3.weights.node_local.cleanup_image_problem`) all parse with :data:`IMAGE_RE`, so the settings and the
components refuse the same references. Grammar: the OCI distribution spec's (opencontainers/distribution-spec, spec.md,
"Pulling manifests": ``<name>`` path components ``[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*``, ``<reference>`` a tag
``[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`` or a digest), with a lower-case repository.
"""

from __future__ import annotations

import re

IMAGE_RE = re.compile(
    r"^(?P<repository>[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)
"""A container image reference ``repo[:tag][@sha256:…]`` (the OCI distribution grammar, lower-case repository)."""


def image_reference_problem(ref: str) -> str | None:
    """What is accepted instead of ``ref`` as an image a pod runs (a reference with a tag or a digest); ``None``: accepted."""
    match = IMAGE_RE.fullmatch(ref) if isinstance(ref, str) else None
    if not match or not (match["tag"] or match["digest"]):
        return "expected repo:tag or repo@sha256:<64 hex>"
    return None


__all__ = ["IMAGE_RE", "image_reference_problem"]
