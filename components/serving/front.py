"""The serving front: how the API is fronted and how its pods stop, as one typed value built once and validated once.

:class:`ServingFront` holds the API proxy's own options (extra routes, inline media, the longest generation, its CPU),
the stop sequence (:class:`~kimi_k3.serving.drain.DrainPlan`) and the NLB listener's options (idle timeout, TLS). Its
constructor runs the rules each part owns (:class:`~kimi_k3.serving.api_proxy.ApiProxyConfig`,
:class:`~kimi_k3.serving.drain.DrainPlan`, :func:`~kimi_k3.serving.nlb.check_listener`) and raises one
:class:`FrontError` naming its own field, so a built value is one the serving components deploy without asking again.
The settings build it from the ``servingDrainSeconds`` family of keys (:mod:`kimi_k3.stack.seam` maps each key to a field
here); a program of its own builds it directly and passes it as ``VllmServerArgs(front=...)``.

What the front does not own comes from the component's other args when the proxy config is assembled
(:meth:`ServingFront.proxy_config`): the context length and the API port (the serving contract), whether nginx checks a
key (an API key was given) and whether the routing tier sits in front (``routing``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from kimi_k3.core import catalog
from kimi_k3.core.args_check import checked_args
from kimi_k3.errors import UserError
from kimi_k3.serving import nlb
from kimi_k3.serving.api_proxy import ApiProxyConfig, ApiRoute, ProxyConfigError, check_extra_route
from kimi_k3.serving.drain import DEFAULT_PRE_STOP_S, DrainError, DrainPlan

TLS_CERTIFICATE_ARN = re.compile(r"^arn:aws[\w-]*:acm:[\w-]+:\d{12}:certificate/[\w-]+$")
"""An ACM certificate ARN (what the NLB's TLS listener takes)."""

_RULE_CONTEXT_LEN = 1024
"""The context length the front's own proxy rules are checked with: none of the proxy's rules on the front's fields
involves the context length (the contract's), so any length the proxy accepts checks them alike."""


class FrontError(UserError):
    """A :class:`ServingFront` field its rules refuse: ``field`` names it (``drain_s``, ``extra_routes[1]``), ``value`` is the
    refused value and ``accepted`` says what is accepted (the owning rule's words)."""

    def __init__(self, field: str, value: object, accepted: str, *, rule: UserError | None = None) -> None:
        """``field`` the refused field's path, ``value`` its value, ``accepted`` what is accepted (for a rule another module
        owns, ``rule``, its whole message: the message is then that rule's own)."""
        self.field = field
        self.value = value
        self.accepted = accepted
        super().__init__(f"ServingFront: {rule if rule is not None else f'{field} {value!r} is not accepted; {accepted}'}")


@checked_args
@dataclass(frozen=True, kw_only=True)
class ServingFront:
    """The API proxy's options, the stop sequence and the NLB listener of a serving component; validated when built."""

    extra_routes: tuple[str, ...] = ()
    """Routes the API proxy forwards besides the OpenAI defaults, ``"METHOD /exact/path"``, each once (vetted by
    :func:`kimi_k3.serving.api_proxy.check_extra_route`; kept as the proxy writes them, the method upper-case)."""
    inline_media_bytes: int = 0
    """Request-body bytes allowed on top of the text bound for inline (base64) media; 0 with text-only serving."""
    max_generation_s: int = 1800
    """Longest a request may stay silent (a non-streamed answer sends nothing until it is done): the proxy's
    upstream read timeout and the floor of the NLB's idle timeout."""
    drain_s: int = 1800
    """Seconds in-flight requests may take to finish once the pod stops: the proxy's graceful-stop bound and
    vLLM's ``--shutdown-timeout`` (vLLM's default, 0, aborts them). Cover the longest generation clients run."""
    pre_stop_sleep_s: int = DEFAULT_PRE_STOP_S
    """Seconds the API proxy keeps serving after the pod leaves the endpoints, before its graceful stop: the NLB keeps
    sending new connections for about two minutes (behind an NLB at least :data:`kimi_k3.serving.drain.MIN_PRE_STOP_BEHIND_NLB_S`);
    the engine's preStop is a few seconds longer (:mod:`kimi_k3.serving.drain`)."""
    termination_grace_period_s: int | None = None
    """``terminationGracePeriodSeconds``; ``None`` = the least that covers preStop + drain + margin
    (:attr:`kimi_k3.serving.drain.DrainPlan.minimum_grace_s`); a smaller value is refused."""
    behind_nlb: bool = False
    """The API is reached through an NLB (``internal`` or ``public`` exposure): the pods are its targets, so the stop
    sequence and the listener follow the NLB's rules. The component refuses a value its ``exposure`` contradicts."""
    nlb_idle_timeout_s: int | None = None
    """Idle timeout of the NLB's TCP listener (``None``: :data:`kimi_k3.serving.nlb.DEFAULT_IDLE_TIMEOUT_S`)."""
    tls_certificate_arn: str | None = None
    """ACM certificate: the NLB listener then terminates TLS (https endpoint; its idle timeout is fixed at 350 s)."""
    proxy_cpu: int = 1
    """Whole CPUs of the proxy sidecar (taken from the engine's share of the node)."""

    def __post_init__(self) -> None:
        proxy = self._checked_proxy()
        object.__setattr__(self, "extra_routes", tuple(str(route) for route in self.routes))  # as the proxy writes them: "GET /v1/responses"
        plan = self.drain
        if self.tls_certificate_arn is not None and not (isinstance(self.tls_certificate_arn, str) and TLS_CERTIFICATE_ARN.match(self.tls_certificate_arn)):
            raise FrontError("tls_certificate_arn", self.tls_certificate_arn, "expected an ACM certificate ARN")
        if self.behind_nlb:
            try:
                nlb.check_listener(proxy, pre_stop_sleep_s=plan.pre_stop_sleep_s, idle_timeout_s=self.nlb_idle_timeout_s, tls_certificate_arn=self.tls_certificate_arn)
            except nlb.NlbError as err:
                path = {"idle_timeout_s": "nlb_idle_timeout_s"}.get(err.field, err.field)
                raise FrontError(path, getattr(self, path, None), str(err), rule=err) from None

    @functools.cached_property
    def routes(self) -> tuple[ApiRoute, ...]:
        """:attr:`extra_routes` as routes, each vetted by the proxy's rule and given once (checked by the constructor)."""
        if isinstance(self.extra_routes, str) or not isinstance(self.extra_routes, (tuple, list)):
            raise FrontError("extra_routes", self.extra_routes, "expected a tuple of 'METHOD /path' strings")
        parsed: list[ApiRoute] = []
        for index, item in enumerate(self.extra_routes):
            try:
                route = ApiRoute.parse(item)
                check_extra_route(route)
            except UserError as err:
                raise FrontError(f"extra_routes[{index}]", item, str(err), rule=err) from None
            if route in parsed:
                raise FrontError(f"extra_routes[{index}]", item, "each route once")
            parsed.append(route)
        return tuple(parsed)

    @functools.cached_property
    def drain(self) -> DrainPlan:
        """The stop sequence of the API pods (checked by the constructor)."""
        try:
            return DrainPlan(
                pre_stop_sleep_s=self.pre_stop_sleep_s, drain_s=self.drain_s, termination_grace_period_s=self.termination_grace_period_s,
                behind_nlb=self.behind_nlb,
            )
        except DrainError as err:
            raise FrontError(err.field, err.value, err.accepted) from None

    def _checked_proxy(self) -> ApiProxyConfig:
        """The proxy's rules on the front's own fields (ranges, a route the defaults already allow), after each route's own."""
        self.routes  # noqa: B018 - each route's own rules first, under its index
        try:
            return self.proxy_config(max_model_len=_RULE_CONTEXT_LEN)
        except ProxyConfigError as err:
            path = {"cpu": "proxy_cpu"}.get(err.field, err.field)
            raise FrontError(path, getattr(self, path, None), str(err), rule=err) from None
        except UserError as err:  # the proxy's route rules (a route the defaults already allow)
            raise FrontError("extra_routes", list(self.extra_routes), str(err), rule=err) from None

    def proxy_config(self, *, max_model_len: int, api_port: int = catalog.API_PORT, check_api_key: bool = True, behind_router: bool = False) -> ApiProxyConfig:
        """The API proxy's config: this front's options with what the component's other args decide (the contract's context
        length and API port, whether a key is checked, whether the routing tier sends every request)."""
        return ApiProxyConfig(
            max_model_len=max_model_len, max_generation_s=self.max_generation_s, drain_s=self.drain_s, inline_media_bytes=self.inline_media_bytes,
            extra_routes=self.routes, api_port=api_port, cpu=self.proxy_cpu, check_api_key=check_api_key, behind_router=behind_router,
        )


__all__ = ["TLS_CERTIFICATE_ARN", "FrontError", "ServingFront"]
