"""The record of one resource a program registered under the offline engine: a leaf, read by the engine that
makes it and by everything that reads a plan (the results, the state, the apply-time and HyperPod checks)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kimi_k3.offline.redaction import redact_numbers, reveal


@dataclass
class RecordedResource:
    """One resource the program registered, as the engine saw it."""

    type: str
    """Pulumi type token (``aws:eks/cluster:Cluster``, a component's ``kimi-k3:index:Cluster``)."""
    name: str
    """Logical name the program gave the resource."""
    urn: str
    """URN the mock monitor made from the parent, type and name."""
    parent_urn: str | None
    """URN of the parent (the stack's for a top-level resource); None when registered without one."""
    custom: bool
    """True for a provider-managed (custom) resource, False for a component resource."""
    inputs: dict
    """Inputs as registered; secret values keep Pulumi's secret marker (see :func:`reveal`)."""
    outputs: dict = field(default_factory=dict)
    """State the offline engine answered with."""
    id: str | None = None
    """Id the offline engine answered with (an ``__id`` among the answered outputs, else :func:`~kimi_k3.offline.answers.resource_id`)."""
    dependencies: list[str] = field(default_factory=list)
    """URNs the resource was registered as depending on (``depends_on`` plus input dependencies)."""
    provider: str = ""
    """Provider reference the resource was registered with (``urn::id``; empty: the default provider)."""
    ignore_changes: list[str] = field(default_factory=list)
    """Property paths a later update leaves alone (``ignore_changes``)."""
    transforms: int = 0
    """How many resource transforms the registration carried."""

    @property
    def plain_inputs(self) -> dict:
        """Inputs with secrets unwrapped and numbers as the program sent them."""
        return redact_numbers(reveal(self.inputs))


__all__ = ["RecordedResource"]
