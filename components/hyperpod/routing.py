"""The HyperPod Inference Operator's routing and KV-cache options, as the ``InferenceEndpointConfig`` v1 CRD has them.

Field names, enums and defaults from the CRD's v1 ``openAPIV3Schema`` (aws/sagemaker-hyperpod-cli
``helm_chart/HyperPodHelmChart/charts/inference-operator/config/crd/inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml``,
commit 011ca927, copied in ``tests/data/inferenceendpointconfig-v1.schema.json``; a test checks these
constants against it):

* ``spec.intelligentRoutingSpec``: ``enabled`` and ``routingStrategy`` (``prefixaware`` by
  default, ``kvaware``, ``session``, ``roundrobin``). The CRD: "This feature is currently not
  supported for existing deployments. Adding this configuration to an existing deployment will
  be rejected", and "Once set, the enabled field cannot be modified": choose before the first apply;
* ``spec.loadBalancer.routingAlgorithm``: the ALB target group's ``least_outstanding_requests``
  (default) or ``round_robin``;
* ``spec.kvCacheSpec``: ``enableL1Cache`` (CPU offloading, default true), ``enableL2Cache``
  (default false) with ``l2CacheSpec.l2CacheBackend`` (``redis`` or ``tieredstorage``, "Required
  when L2CacheSpec is provided") and ``l2CacheSpec.l2CacheLocalUrl``.

Pure and validated: :func:`kimi_k3.hyperpod.endpoint.render_inference_endpoint_config` adds
:meth:`HyperPodRouting.spec_fields` to the object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kimi_k3.errors import UserError

ROUTING_STRATEGIES = ("prefixaware", "kvaware", "session", "roundrobin")
"""``intelligentRoutingSpec.routingStrategy`` enum."""
LOAD_BALANCER_ALGORITHMS = ("least_outstanding_requests", "round_robin")
"""``loadBalancer.routingAlgorithm`` enum."""
KV_CACHE_MODES = ("off", "l1", "l1-l2")
"""How the stack names the KV-cache offloading choices: none, CPU (L1), CPU and an L2 backend."""
L2_CACHE_BACKENDS = ("redis", "tieredstorage")
"""``kvCacheSpec.l2CacheSpec.l2CacheBackend`` values (the CRD's pattern ``(?i)redis|tieredstorage``)."""


class HyperPodRoutingError(UserError):
    """A routing or KV-cache option the CRD refuses; ``field`` names the :class:`HyperPodRouting` field."""

    def __init__(self, field: str, value: object, accepted: str) -> None:
        """``field`` names the :class:`HyperPodRouting` field, ``value`` is the refused value and ``accepted`` says what the CRD accepts."""
        self.field = field
        super().__init__(f"hyperpod routing: {field} {value!r} is not accepted; {accepted}")


@dataclass(frozen=True, kw_only=True)
class HyperPodRouting:
    """The operator's routing and KV-cache options; ``None`` leaves a field to the operator's default."""

    routing_strategy: str | None = None
    """Intelligent routing (``intelligentRoutingSpec.enabled`` + ``routingStrategy``); ``None``: off."""
    load_balancer_algorithm: str | None = None
    """The ALB target group's ``routingAlgorithm``; ``None``: the operator's default (least outstanding requests)."""
    kv_cache: str | None = None
    """One of :data:`KV_CACHE_MODES`; ``None``: no ``kvCacheSpec`` (the operator's defaults)."""
    l2_cache_backend: str | None = None
    """With ``kv_cache="l1-l2"``: :data:`L2_CACHE_BACKENDS`."""
    l2_cache_url: str | None = None
    """With ``kv_cache="l1-l2"``: ``l2CacheLocalUrl`` (e.g. the Redis endpoint)."""

    def __post_init__(self) -> None:
        for field, value, accepted in (
            ("routing_strategy", self.routing_strategy, ROUTING_STRATEGIES),
            ("load_balancer_algorithm", self.load_balancer_algorithm, LOAD_BALANCER_ALGORITHMS),
            ("kv_cache", self.kv_cache, KV_CACHE_MODES),
            ("l2_cache_backend", self.l2_cache_backend, L2_CACHE_BACKENDS),
        ):
            if value is not None and value not in accepted:
                raise HyperPodRoutingError(field, value, f"accepted: {', '.join(accepted)}")
        l2 = self.kv_cache == "l1-l2"
        if l2 and self.l2_cache_backend is None:
            raise HyperPodRoutingError("l2_cache_backend", None, f"required when kv_cache is l1-l2 (the CRD: required when L2CacheSpec is provided): {', '.join(L2_CACHE_BACKENDS)}")
        if not l2 and (self.l2_cache_backend is not None or self.l2_cache_url is not None):
            field = "l2_cache_backend" if self.l2_cache_backend is not None else "l2_cache_url"
            raise HyperPodRoutingError(field, getattr(self, field), "only used when kv_cache is l1-l2")
        if self.l2_cache_url is not None and (not isinstance(self.l2_cache_url, str) or not self.l2_cache_url or any(c.isspace() for c in self.l2_cache_url)):
            raise HyperPodRoutingError("l2_cache_url", self.l2_cache_url, "expected a URL without spaces, e.g. redis://cache.internal:6379")

    def spec_fields(self, health_check_path: str) -> dict[str, Any]:
        """The ``spec`` fields these options set (``loadBalancer`` always carries the health check path)."""
        fields: dict[str, Any] = {}
        if self.routing_strategy is not None:
            fields["intelligentRoutingSpec"] = {"enabled": True, "routingStrategy": self.routing_strategy}
        load_balancer: dict[str, Any] = {"healthCheckPath": health_check_path}
        if self.load_balancer_algorithm is not None:
            load_balancer["routingAlgorithm"] = self.load_balancer_algorithm
        fields["loadBalancer"] = load_balancer
        if self.kv_cache is not None:
            spec: dict[str, Any] = {"enableL1Cache": self.kv_cache != "off", "enableL2Cache": self.kv_cache == "l1-l2"}
            if self.kv_cache == "l1-l2":
                l2: dict[str, Any] = {"l2CacheBackend": self.l2_cache_backend}
                if self.l2_cache_url:
                    l2["l2CacheLocalUrl"] = self.l2_cache_url
                spec["l2CacheSpec"] = l2
            fields["kvCacheSpec"] = spec
        return fields


__all__ = ["KV_CACHE_MODES", "L2_CACHE_BACKENDS", "LOAD_BALANCER_ALGORITHMS", "ROUTING_STRATEGIES", "HyperPodRouting", "HyperPodRoutingError"]
