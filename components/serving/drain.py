"""How a serving pod stops without dropping the requests it is answering: the order and the timings.

One home for the stop sequence and its rule. When a pod is deleted (a rollout, a node
drain, the block-end drain before a Capacity Block ends), the kubelet runs each container's
``preStop`` hook, then sends its stop signal, then SIGKILLs whatever still runs
``terminationGracePeriodSeconds`` after the start (the grace period counts the hooks too:
Kubernetes docs, "Pod Lifecycle", termination of Pods):

1. ``t = 0``: the pod leaves the Service endpoints; the AWS Load Balancer Controller
   deregisters its IP from the NLB target group. The NLB does not stop opening new flows
   to it at once: IP targets keep receiving new connections for about two minutes after
   deregistration starts, whatever the deregistration delay (:data:`NLB_STOPS_SENDING_S`).
   Both containers sleep in ``preStop``; the proxy keeps serving whatever still arrives.
2. ``t = pre_stop_sleep_s``: the proxy gets its stop signal (its PID 1 hands nginx SIGQUIT):
   nginx closes its listeners and lets in-flight requests finish for up to ``drain_s``
   (``worker_shutdown_timeout``). Behind an NLB this must come after the NLB has stopped
   sending, or new connections meet a closed port and clients see resets:
   ``pre_stop_sleep_s >= MIN_PRE_STOP_BEHIND_NLB_S``.
3. ``t = pre_stop_sleep_s + ENGINE_LAG_S``: vLLM gets SIGTERM and, with
   ``--shutdown-timeout drain_s``, keeps generating for the requests still in flight
   (vLLM 0.27.1 ``vllm/v1/engine/core.py`` ``_handle_shutdown``: mode ``drain`` when the
   timeout is above 0; its default, 0, aborts them: ``vllm/config/vllm.py``
   ``shutdown_timeout``). The lag lets a request the proxy accepted in its last instant
   still reach an engine that accepts it.
4. Both exit when their requests are done; the kubelet's SIGKILL comes at the grace
   period, which must cover the engine's hook, its drain and its teardown:
   ``terminationGracePeriodSeconds >= pre_stop_sleep_s + ENGINE_LAG_S + drain_s + MARGIN_S``.

The NLB target stays ``draining`` as long as the proxy may still answer:
``deregistration_delay.timeout_seconds = pre_stop_sleep_s + drain_s`` (:func:`deregistration_delay_s`;
the target group takes 0-3600 s).

At a Capacity Block's end the same sequence runs for every replica at once, early enough to
finish before EKS scales the node group to 0 (:meth:`DrainPlan.block_end_stop_at`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from kimi_k3.capacity.scaling import EKS_SCALEDOWN_BEFORE_END
from kimi_k3.core.clock import utc
from kimi_k3.errors import UserError

ENGINE_LAG_S = 5
"""Seconds the engine's ``preStop`` outlasts the proxy's."""

MARGIN_S = 30
"""Seconds the grace period keeps beyond the engine's drain: vLLM's teardown (workers, NCCL, the distributed store) and process exit."""

NLB_STOPS_SENDING_S = 120
"""Seconds an NLB keeps opening new connections to an IP target after its deregistration starts, as measured in public.

Not documented by AWS; measured by users, consistently about two minutes whatever
``deregistration_delay.timeout_seconds`` says (:data:`NLB_STOPS_SENDING_SOURCE`)."""

NLB_STOPS_SENDING_SOURCE = (
    "kubernetes-sigs/aws-load-balancer-controller#2366 ('For NLBs in IP mode ... deregistration takes at least 2 minutes "
    "regardless of the deregistration delay setting; during deregistration, the pod may still receive new requests/connections; "
    "the preStop hook therefore has to sleep for at least 2 minutes', measured with raw TCP connections: 'It consistently took "
    "2 minutes'), #3270 (deregistration delay set to 5 s, requests still sent to the draining pod, 'the deregistering process "
    "takes about 2 minutes'), aws/containers-roadmap#470 ('about two minutes ... the effective minimum delay seems to be 120 "
    "seconds for the connections to stop coming to the target being drained after the deregistration call is made')"
)
"""Where :data:`NLB_STOPS_SENDING_S` comes from (quoted in messages and docs)."""

CONTROLLER_LAG_S = 30
"""Seconds from the pod's deletion to the controller's DeregisterTargets call (estimate: it sees the endpoint change within
seconds, but batches and is throttled by the ELB API; #2366 mentions rate-limited deregistrations)."""

MIN_PRE_STOP_BEHIND_NLB_S = NLB_STOPS_SENDING_S + CONTROLLER_LAG_S
"""The least ``preStop`` behind an NLB: the listener stays open until the NLB has stopped sending (150 s)."""

DEFAULT_PRE_STOP_S = 180
"""The ``preStop`` the stack uses: :data:`MIN_PRE_STOP_BEHIND_NLB_S` and half a minute for a slow day."""

PRE_STOP_RANGE = (0, 600)
"""Seconds of ``preStop`` sleep accepted (behind an NLB at least :data:`MIN_PRE_STOP_BEHIND_NLB_S`)."""

BLOCK_END_START_MARGIN_S = 300
"""Seconds the block-end drain starts ahead of what the stop sequence needs: the CronJob fires on the minute, its pod is
scheduled on a system node and its image pulled before it scales the serving workload to 0."""

DRAIN_RANGE = (1, 3600)
"""Seconds of drain accepted: nginx's ``worker_shutdown_timeout`` needs at least 1; the NLB target group's
deregistration delay (preStop + drain, :func:`deregistration_delay_s`) takes at most 3600."""


def deregistration_delay_s(pre_stop_sleep_s: int, drain_s: int) -> int:
    """How long the NLB target stays ``draining``: as long as the proxy may still answer (preStop + drain)."""
    return pre_stop_sleep_s + drain_s


class DrainError(UserError):
    """A stop-sequence value that cannot work; ``field`` names it (``pre_stop_sleep_s``, ``drain_s``, ``termination_grace_period_s``)."""

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

    pre_stop_sleep_s: int = DEFAULT_PRE_STOP_S
    """The proxy's ``preStop`` sleep: how long the pod keeps accepting while the NLB deregisters it."""
    drain_s: int = 1800
    """How long in-flight requests may take after the stop signal: nginx's ``worker_shutdown_timeout`` and
    vLLM's ``--shutdown-timeout``. Cover the longest generation clients run, or those are cut."""
    termination_grace_period_s: int | None = None
    """``terminationGracePeriodSeconds``; ``None`` = :attr:`minimum_grace_s`."""
    behind_nlb: bool = False
    """The pods are NLB targets: ``pre_stop_sleep_s`` must outlast the NLB's deregistration (:data:`MIN_PRE_STOP_BEHIND_NLB_S`)."""

    def __post_init__(self) -> None:
        _whole("pre_stop_sleep_s", self.pre_stop_sleep_s, *PRE_STOP_RANGE)
        _whole("drain_s", self.drain_s, *DRAIN_RANGE)
        if not isinstance(self.behind_nlb, bool):
            raise DrainError("behind_nlb", self.behind_nlb, "expected true or false")
        if self.behind_nlb and self.pre_stop_sleep_s < MIN_PRE_STOP_BEHIND_NLB_S:
            raise DrainError(
                "pre_stop_sleep_s", self.pre_stop_sleep_s,
                f"behind an NLB it must be at least {MIN_PRE_STOP_BEHIND_NLB_S} s: the NLB keeps opening connections to a "
                f"deregistered IP target for about {NLB_STOPS_SENDING_S} s (kubernetes-sigs/aws-load-balancer-controller#2366, "
                f"#3270, aws/containers-roadmap#470) plus {CONTROLLER_LAG_S} s for the controller, and a closed listener resets them",
            )
        if self.termination_grace_period_s is not None:
            _whole("termination_grace_period_s", self.termination_grace_period_s, 1, 86_400)
            if self.termination_grace_period_s < self.minimum_grace_s:
                raise DrainError(
                    "termination_grace_period_s", self.termination_grace_period_s,
                    f"it must be at least {self.minimum_grace_s} s = preStop {self.pre_stop_sleep_s} s + engine lag {ENGINE_LAG_S} s + "
                    f"drain {self.drain_s} s + margin {MARGIN_S} s, or the kubelet kills the engine before its in-flight requests finish",
                )

    @property
    def engine_pre_stop_s(self) -> int:
        """The engine container's ``preStop`` sleep."""
        return self.pre_stop_sleep_s + ENGINE_LAG_S

    @property
    def minimum_grace_s(self) -> int:
        """The least ``terminationGracePeriodSeconds`` that lets the whole drain happen."""
        return self.engine_pre_stop_s + self.drain_s + MARGIN_S

    @property
    def grace_s(self) -> int:
        """``terminationGracePeriodSeconds`` of the pod."""
        return self.minimum_grace_s if self.termination_grace_period_s is None else self.termination_grace_period_s

    @property
    def deregistration_delay_s(self) -> int:
        """How long the NLB target stays ``draining`` (:func:`deregistration_delay_s`)."""
        return deregistration_delay_s(self.pre_stop_sleep_s, self.drain_s)

    def block_end_stop_at(self, block_end: datetime) -> datetime:
        """When the block-end drain deletes the pods: early enough that the whole stop sequence (the grace period) ends
        before EKS scales the node group to 0, ``EKS_SCALEDOWN_BEFORE_END`` before ``block_end``, with
        :data:`BLOCK_END_START_MARGIN_S` to spare; on the whole minute (a CronJob fires on minutes)."""
        at = utc(block_end) - EKS_SCALEDOWN_BEFORE_END - timedelta(seconds=self.grace_s + BLOCK_END_START_MARGIN_S)
        return at.replace(second=0, microsecond=0)

    def timeline(self) -> list[tuple[int, str]]:
        """``[(seconds after the delete, what happens)]``, for docs and the plan's summary."""
        nlb = [(NLB_STOPS_SENDING_S, "NLB: stops opening new connections to the target (measured, not documented)")] if self.behind_nlb else []
        return sorted([
            (0, "pod removed from endpoints; NLB deregistration starts; both containers sleep in preStop"),
            *nlb,
            (self.pre_stop_sleep_s, "proxy: SIGQUIT, listeners closed, in-flight requests continue"),
            (self.engine_pre_stop_s, f"engine: SIGTERM, drains in-flight requests (--shutdown-timeout {self.drain_s})"),
            (self.pre_stop_sleep_s + self.drain_s, "proxy: drain deadline, remaining connections closed"),
            (self.engine_pre_stop_s + self.drain_s, "engine: drain deadline, remaining requests aborted"),
            (self.grace_s, "kubelet: SIGKILL to whatever still runs"),
        ], key=lambda step: step[0])


__all__ = [
    "BLOCK_END_START_MARGIN_S",
    "CONTROLLER_LAG_S",
    "DEFAULT_PRE_STOP_S",
    "DRAIN_RANGE",
    "ENGINE_LAG_S",
    "MARGIN_S",
    "MIN_PRE_STOP_BEHIND_NLB_S",
    "NLB_STOPS_SENDING_S",
    "NLB_STOPS_SENDING_SOURCE",
    "PRE_STOP_RANGE",
    "DrainError",
    "DrainPlan",
    "deregistration_delay_s",
]
