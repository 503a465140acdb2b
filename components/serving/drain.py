"""How a serving pod stops without dropping the requests it is answering: the order and the timings.

One home for the stop sequence and its rule. When a pod is deleted (a rollout, a node
drain, the scale-down EKS schedules forty minutes before a Capacity Block ends), the
kubelet runs each container's ``preStop`` hook, then sends its stop signal, then SIGKILLs
whatever still runs ``terminationGracePeriodSeconds`` after the start (the grace period
counts the hooks too: Kubernetes docs, "Pod Lifecycle", termination of Pods):

1. ``t = 0``: the pod leaves the Service endpoints; the AWS Load Balancer Controller
   deregisters its IP from the NLB target group, which stops opening new flows to it.
   Both containers sleep in ``preStop``; the proxy keeps serving whatever still arrives.
2. ``t = pre_stop_s``: the proxy gets SIGQUIT (its image's ``STOPSIGNAL``): nginx closes
   its listeners at once and lets in-flight requests finish for up to ``drain_s``
   (``worker_shutdown_timeout``).
3. ``t = pre_stop_s + ENGINE_LAG_S``: vLLM gets SIGTERM and, with
   ``--shutdown-timeout drain_s``, keeps generating for the requests still in flight
   (vLLM 0.27.1 ``vllm/v1/engine/core.py`` ``_handle_shutdown``: mode ``drain`` when the
   timeout is above 0; its default, 0, aborts them: ``vllm/config/vllm.py``
   ``shutdown_timeout``). The lag lets a request the proxy accepted in its last instant
   still reach an engine that accepts it.
4. Both exit when their requests are done; the kubelet's SIGKILL comes at the grace
   period, which must cover the engine's hook, its drain and its teardown:
   ``terminationGracePeriodSeconds ≥ pre_stop_s + ENGINE_LAG_S + drain_s + MARGIN_S``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kimi_k3.errors import UserError

ENGINE_LAG_S = 5
"""Seconds the engine's ``preStop`` outlasts the proxy's."""

MARGIN_S = 30
"""Seconds the grace period keeps beyond the engine's drain: vLLM's teardown (workers, NCCL, the Ray head) and process exit."""

PRE_STOP_RANGE = (0, 600)
"""Seconds of ``preStop`` sleep accepted (the NLB deregisters in seconds; minutes only delay the stop)."""

DRAIN_RANGE = (1, 3600)
"""Seconds of drain accepted: nginx's ``worker_shutdown_timeout`` needs at least 1; the NLB target group's
deregistration delay (preStop + drain, see :mod:`kimi_k3.serving.nlb`) takes at most 3600."""


class DrainError(UserError):
    """A stop-sequence value that cannot work; ``field`` names it (``pre_stop_s``, ``drain_s``, ``grace_period_s``)."""

    def __init__(self, field: str, value: object, accepted: str) -> None:
        """``field`` names the setting, ``value`` is the refused value and ``accepted`` says what would be accepted."""
        self.field = field
        self.value = value
        self.accepted = accepted
        super().__init__(f"drain: {field} {value!r} is not accepted; {accepted}")


def _whole(field: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise DrainError(field, value, f"expected whole seconds from {low} to {high}")
    return value


@dataclass(frozen=True, kw_only=True)
class DrainPlan:
    """The stop sequence of one serving pod (see the module docstring); validated when built."""

    pre_stop_s: int = 30
    """The proxy's ``preStop`` sleep: how long the pod keeps accepting while the NLB deregisters it."""
    drain_s: int = 1800
    """How long in-flight requests may take after the stop signal: nginx's ``worker_shutdown_timeout`` and
    vLLM's ``--shutdown-timeout``. Cover the longest generation clients run, or those are cut."""
    grace_period_s: int | None = None
    """``terminationGracePeriodSeconds``; ``None`` = :attr:`minimum_grace_s`."""

    def __post_init__(self) -> None:
        _whole("pre_stop_s", self.pre_stop_s, *PRE_STOP_RANGE)
        _whole("drain_s", self.drain_s, *DRAIN_RANGE)
        if self.grace_period_s is not None:
            _whole("grace_period_s", self.grace_period_s, 1, 86_400)
            if self.grace_period_s < self.minimum_grace_s:
                raise DrainError(
                    "grace_period_s", self.grace_period_s,
                    f"it must be at least {self.minimum_grace_s} s = preStop {self.pre_stop_s} s + engine lag {ENGINE_LAG_S} s + "
                    f"drain {self.drain_s} s + margin {MARGIN_S} s, or the kubelet kills the engine before its in-flight requests finish",
                )

    @property
    def engine_pre_stop_s(self) -> int:
        """The engine container's ``preStop`` sleep."""
        return self.pre_stop_s + ENGINE_LAG_S

    @property
    def minimum_grace_s(self) -> int:
        """The least ``terminationGracePeriodSeconds`` that lets the whole drain happen."""
        return self.engine_pre_stop_s + self.drain_s + MARGIN_S

    @property
    def grace_s(self) -> int:
        """``terminationGracePeriodSeconds`` of the pod."""
        return self.minimum_grace_s if self.grace_period_s is None else self.grace_period_s

    @property
    def deregistration_delay_s(self) -> int:
        """How long the NLB target stays ``draining``: as long as the proxy may still answer (preStop + drain)."""
        return self.pre_stop_s + self.drain_s

    def timeline(self) -> list[tuple[int, str]]:
        """``[(seconds after the delete, what happens)]``, for docs and the plan's summary."""
        return [
            (0, "pod removed from endpoints; NLB deregistration starts; both containers sleep in preStop"),
            (self.pre_stop_s, "proxy: SIGQUIT, listeners closed, in-flight requests continue"),
            (self.engine_pre_stop_s, f"engine: SIGTERM, drains in-flight requests (--shutdown-timeout {self.drain_s})"),
            (self.pre_stop_s + self.drain_s, "proxy: drain deadline, remaining connections closed"),
            (self.engine_pre_stop_s + self.drain_s, "engine: drain deadline, remaining requests aborted"),
            (self.grace_s, "kubelet: SIGKILL to whatever still runs"),
        ]


__all__ = ["DRAIN_RANGE", "ENGINE_LAG_S", "MARGIN_S", "PRE_STOP_RANGE", "DrainError", "DrainPlan"]
