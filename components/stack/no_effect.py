"""Settings that have no effect given the others: a warning naming both keys (``kimi-k3 plan`` prints it).

Each rule says which key is ignored, which key (and value) makes it ignored, and why; the
stack still plans. :func:`kimi_k3.stack.settings.from_values` calls :func:`no_effect_warnings`
with its typed reader, so a value counts as set when it differs from the key's default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kimi_k3.stack.config_keys import PROJECT


@dataclass(frozen=True)
class NoEffect:
    """One rule: ``ignored`` has no effect while ``when(get)`` holds, because of ``by``."""

    ignored: tuple[str, ...]
    """Keys (without namespace) that are ignored."""
    by: str
    """The key whose value makes them ignored."""
    when: Callable[[Callable[[str], Any]], bool]
    """True when ``by``'s value (read with the typed getter) makes ``ignored`` ineffective."""
    why: str
    """What the ``by`` value means for them, and what to do."""


RULES = (
    NoEffect(("servingAllowedCidrs", "nlbIdleTimeoutSeconds"), "exposure", lambda get: get("exposure") == "cluster" and get("servingPlatform") == "eks",
             "exposure cluster declares no load balancer; set exposure internal or public to use it, or remove it"),
    NoEffect(("clusterPublicAccessCidrs",), "clusterEndpointPublicAccess", lambda get: not get("clusterEndpointPublicAccess"),
             "false keeps the EKS API endpoint private, so no public CIDR reaches it; remove it, or make the endpoint public"),
    NoEffect(("availabilityZoneCount",), "availabilityZones", lambda get: bool(get("availabilityZones")),
             "an explicit AZ list sets how many AZs the VPC spans; remove one of the two"),
    NoEffect(("vpcCidr", "natGateways", "flowLogRetentionDays"), "existingVpcId", lambda get: bool(get("existingVpcId")),
             "the stack uses that VPC as it is and creates no VPC, NAT gateway or flow log; remove them"),
    NoEffect(("dcgmExporterVersion",), "dcgmExporterEnabled", lambda get: not get("dcgmExporterEnabled"),
             "false installs no DCGM exporter; remove it, or enable the exporter"),
    NoEffect(("prometheusSelectorLabels", "grafanaDashboardNamespace", "alertTtftP99Seconds"), "prometheusOperatorEnabled",
             lambda get: not get("prometheusOperatorEnabled"),
             "false declares no PrometheusRule, dashboard or ServiceMonitor for them to apply to; enable the operator, or remove them"),
)
"""The settings the library knows to be ineffective in combination (each checked against the components that read them)."""


def no_effect_warnings(get: Callable[[str], Any], changed: Callable[[Iterable[str]], list[str]]) -> list[str]:
    """One warning per rule whose ignored keys are set while its condition holds."""
    found = []
    for rule in RULES:
        if not rule.when(get):
            continue
        stray = changed(rule.ignored)
        if not stray:
            continue
        value = get(rule.by)
        shown = ", ".join(value) if isinstance(value, tuple) else str(value).lower() if isinstance(value, bool) else value
        verb = "have" if len(stray) > 1 else "has"
        found.append(f"{', '.join(stray)} {verb} no effect with {PROJECT}:{rule.by} {shown}: {rule.why}")
    return found


__all__ = ["RULES", "NoEffect", "no_effect_warnings"]
