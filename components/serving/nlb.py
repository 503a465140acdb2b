"""AWS Load Balancer Controller annotations for the API Service's NLB, sized for long generations and the drain.

Checked against the controller's documented annotation set (kubernetes-sigs/aws-load-balancer-controller
``docs/guide/service/annotations.md``, tag v3.5.0) and the NLB limits:

* a TCP listener closes a flow idle for 350 s by default; ``tcp.idle_timeout.seconds`` takes 60-6000 s,
  set per listener through ``aws-load-balancer-listener-attributes.${Protocol}-${Port}`` (the controller
  builds the key from the listener's protocol and port: ``pkg/service/model_build_listener.go``);
* "The connection idle timeout for TLS listeners is 350 seconds and can't be modified" (Elastic Load
  Balancing, Network Load Balancers, "Update the TCP idle timeout"): with an ACM certificate on the
  listener, a non-streamed answer silent for longer than that is cut, so it is refused here;
* the target group's deregistration delay takes 0-3600 s (annotations.md, target-group-attributes); it is
  the stop sequence's preStop + drain (:func:`kimi_k3.serving.drain.deregistration_delay_s`);
* a target that fails its health checks keeps its established connections for as long
  (``target_health_state.unhealthy.connection_termination.enabled=false`` and
  ``.draining_interval_seconds``, annotations.md's example): by default the NLB resets every
  connection of an unhealthy target ("If a target becomes unhealthy, the load balancer sends
  a TCP RST for packets received on the client connections associated with the target",
  Elastic Load Balancing, "Health checks for Network Load Balancer target groups"), which
  would cut every live stream of a replica whose ``/health`` failed once, or whose probe
  listener closed while it drains;
* health checks go to the proxy's probe port and path, which forwards only vLLM's ``/health``
  (:mod:`kimi_k3.serving.api_proxy`);
* client IP preservation is on (``preserve_client_ip.enabled=true``): for IP targets it is off by
  default, and then the pods see the NLB's own addresses, which live in the same private subnets
  as the pods, so no NetworkPolicy could tell a client that came through the NLB from any pod of
  the VPC; the controller also ignores source ranges "in case preserve client IP is not enabled"
  (annotations.md, "Access control"). With it on, the pods' NetworkPolicy admits exactly the
  client CIDRs. (A client that is itself a target of this NLB cannot reach it through the NLB
  with client IP preservation on: in-cluster clients use the ClusterIP Service.)
"""

from __future__ import annotations

from kimi_k3.errors import UserError
from kimi_k3.serving import drain
from kimi_k3.serving.api_proxy import HEALTH_PATH, ApiProxyConfig


class NlbError(UserError):
    """A value the controller or the NLB would refuse; ``field`` says which: ``scheme``, ``pre_stop_sleep_s``,
    ``drain_s`` (the deregistration delay, preStop + drain, is too long), ``idle_timeout_s`` or ``tls_certificate_arn`` (a TLS listener's fixed idle timeout)."""

    def __init__(self, field: str, message: str) -> None:
        """``field`` names the refused value (see the class); ``message`` is the whole error text."""
        self.field = field
        super().__init__(message)

LB = "service.beta.kubernetes.io/aws-load-balancer-"
"""Prefix of the controller's Service annotations."""

SCHEMES = ("internal", "internet-facing")
"""Values of ``aws-load-balancer-scheme``."""

DEFAULT_IDLE_TIMEOUT_S = 3600
"""TCP listener idle timeout the stack asks for (the NLB default, 350 s, is shorter than a long reasoning answer)."""

IDLE_TIMEOUT_RANGE = (60, 6000)
"""What ``tcp.idle_timeout.seconds`` accepts."""

TLS_IDLE_TIMEOUT_S = 350
"""The fixed idle timeout of an NLB TLS listener."""

TLS_IDLE_TIMEOUT_SOURCE = "Elastic Load Balancing User Guide, Network Load Balancers, 'Update the TCP idle timeout': the TLS listener's idle timeout is 350 seconds and can't be modified"
"""Where the fixed TLS idle timeout is documented (quoted in messages)."""

DEREGISTRATION_DELAY_RANGE = (0, 3600)
"""What ``deregistration_delay.timeout_seconds`` accepts."""

EXPOSURE_SCHEMES = {"internal": "internal", "public": "internet-facing"}
"""The NLB scheme of each exposure that has one."""


def scheme_of(exposure: str) -> str:
    """``internal`` → ``internal``, ``public`` → ``internet-facing``."""
    if exposure not in EXPOSURE_SCHEMES:
        raise NlbError("scheme", f"nlb: exposure {exposure!r} has no load balancer; accepted: {', '.join(EXPOSURE_SCHEMES)}")
    return EXPOSURE_SCHEMES[exposure]


def check_listener(proxy: ApiProxyConfig, *, pre_stop_sleep_s: int, idle_timeout_s: int | None = None, tls_certificate_arn: str | None = None) -> tuple[int, int | None]:
    """The NLB's rules on a listener in front of ``proxy``: ``(deregistration delay, TCP idle timeout)`` (``None`` with TLS).

    The one home of the rules :func:`nlb_annotations` applies (the settings call it for the keys, the serving args for theirs).

    :raises NlbError: for a value the controller or the NLB would refuse, or one that would cut long answers.
    """
    if isinstance(pre_stop_sleep_s, bool) or not isinstance(pre_stop_sleep_s, int) or pre_stop_sleep_s < 0:
        raise NlbError("pre_stop_sleep_s", f"nlb: pre_stop_sleep_s {pre_stop_sleep_s!r} is not accepted; expected a whole number of seconds >= 0")
    delay = drain.deregistration_delay_s(pre_stop_sleep_s, proxy.drain_s)
    low, high = DEREGISTRATION_DELAY_RANGE
    if not low <= delay <= high:
        raise NlbError(
            "drain_s",
            f"nlb: deregistration delay {delay} s (preStop {pre_stop_sleep_s} s + drain {proxy.drain_s} s) is not accepted; "
            f"the target group takes {low}-{high} s: shorten the drain or the preStop sleep"
        )
    if tls_certificate_arn:
        if idle_timeout_s is not None:
            raise NlbError("tls_certificate_arn", f"nlb: idle_timeout_s {idle_timeout_s!r} cannot be set on a TLS listener; its idle timeout is fixed at {TLS_IDLE_TIMEOUT_S} s ({TLS_IDLE_TIMEOUT_SOURCE})")
        if proxy.max_generation_s > TLS_IDLE_TIMEOUT_S:
            raise NlbError(
                "tls_certificate_arn",
                f"nlb: max_generation_s {proxy.max_generation_s} is longer than a TLS listener's fixed {TLS_IDLE_TIMEOUT_S} s idle timeout: "
                f"a non-streamed answer would be cut ({TLS_IDLE_TIMEOUT_SOURCE}); lower it to {TLS_IDLE_TIMEOUT_S} or less (clients stream longer answers), or terminate TLS behind a TCP listener"
            )
        return delay, None
    idle = DEFAULT_IDLE_TIMEOUT_S if idle_timeout_s is None else idle_timeout_s
    low, high = IDLE_TIMEOUT_RANGE
    if isinstance(idle, bool) or not isinstance(idle, int) or not low <= idle <= high:
        raise NlbError("idle_timeout_s", f"nlb: idle_timeout_s {idle!r} is not accepted; a TCP listener takes {low}-{high} s")
    if idle < proxy.max_generation_s:
        raise NlbError(
            "idle_timeout_s",
            f"nlb: idle_timeout_s {idle} is shorter than max_generation_s {proxy.max_generation_s}: "
            "the NLB would close a connection still waiting for a non-streamed answer; raise it"
        )
    return delay, idle


def nlb_annotations(
    proxy: ApiProxyConfig,
    *,
    scheme: str,
    pre_stop_sleep_s: int,
    idle_timeout_s: int | None = None,
    tls_certificate_arn: str | None = None,
    service_port_name: str = "http",
) -> dict[str, str]:
    """Annotations of the LoadBalancer Service in front of the proxy (IP targets, HTTP health check on the probe port).

    :param proxy: the proxy's config (API and probe ports, drain timeout, longest generation).
    :param scheme: ``internal`` or ``internet-facing``.
    :param pre_stop_sleep_s: the proxy container's preStop sleep (NLB deregistration window).
    :param idle_timeout_s: TCP listener idle timeout (default :data:`DEFAULT_IDLE_TIMEOUT_S`);
        must cover ``proxy.max_generation_s`` (a non-streamed answer is silent that long). Not settable with TLS.
    :param tls_certificate_arn: ACM certificate: the listener terminates TLS (its idle timeout is fixed at 350 s).
    :param service_port_name: name of the Service port (the TLS listener's port).
    :raises UserError: for a value the controller or the NLB would refuse, or one that would cut long answers.
    """
    if scheme not in SCHEMES:
        raise NlbError("scheme", f"nlb: scheme {scheme!r} is not accepted; accepted: {', '.join(SCHEMES)}")
    delay, idle = check_listener(proxy, pre_stop_sleep_s=pre_stop_sleep_s, idle_timeout_s=idle_timeout_s, tls_certificate_arn=tls_certificate_arn)
    annotations = {
        f"{LB}type": "external",
        f"{LB}nlb-target-type": "ip",
        f"{LB}scheme": scheme,
        f"{LB}healthcheck-protocol": "HTTP",
        f"{LB}healthcheck-port": str(proxy.probe_port),
        f"{LB}healthcheck-path": HEALTH_PATH,
        f"{LB}target-group-attributes": (
            f"deregistration_delay.timeout_seconds={delay},preserve_client_ip.enabled=true,"
            f"target_health_state.unhealthy.connection_termination.enabled=false,target_health_state.unhealthy.draining_interval_seconds={delay}"
        ),
    }
    if idle is None:
        annotations[f"{LB}ssl-cert"] = tls_certificate_arn or ""
        annotations[f"{LB}ssl-ports"] = service_port_name
        return annotations
    annotations[f"{LB}listener-attributes.TCP-{proxy.api_port}"] = f"tcp.idle_timeout.seconds={idle}"
    return annotations
