"""NLB Service annotations against the AWS Load Balancer Controller v3.5.0 documentation (vendored in tests/data)."""

from __future__ import annotations

import re

import pytest

from kimi_k3.errors import UserError
from kimi_k3.serving.api_proxy import ApiProxyConfig
from kimi_k3.serving.nlb import LB, nlb_annotations
from tests.conftest import DATA

DOC = (DATA / "aws-load-balancer-controller-v3.5.0-service-annotations.md").read_text()
PROXY = ApiProxyConfig(max_model_len=262_144, max_generation_s=3600, drain_s=300)
ACM = "arn:aws:acm:us-east-1:123456789012:certificate/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"


def documented() -> dict[re.Pattern, str]:
    """Annotation name pattern → documented type, from the table at the top of annotations.md."""
    table = {}
    for name, kind in re.findall(r"^\| \[(service\.beta\.kubernetes\.io/[^\]\s]+)\s*\]\([^)]*\)\s*\|\s*((?:[^|\\]|\\\|)+?)\s*\|", DOC, re.M):
        pattern = re.escape(name).replace(re.escape("${Protocol}-${Port}"), r"(TCP|UDP|TLS|TCP_UDP)-\d+")
        table[re.compile(pattern + "$")] = kind
    return table


DOCUMENTED = documented()


def kind_of(key: str) -> str:
    kinds = [kind for pattern, kind in DOCUMENTED.items() if pattern.match(key)]
    assert len(kinds) == 1, f"{key} is not in the controller's documented annotations"
    return kinds[0]


def test_the_vendored_table_is_the_controllers_list():
    assert len(DOCUMENTED) > 40
    assert kind_of(f"{LB}listener-attributes.TCP-8000") == "stringMap"
    assert kind_of(f"{LB}healthcheck-port") == "integer \\| traffic-port \\| named-service-port"
    for misspelt in (f"{LB}listener-attribute.TCP-8000", f"{LB}listener-attributes.tcp-8000", f"{LB}target-group-attribute", f"{LB}idle-timeout"):
        assert not any(p.match(misspelt) for p in DOCUMENTED), misspelt


@pytest.mark.parametrize(
    "kwargs",
    [dict(scheme="internal", pre_stop_sleep_s=30), dict(scheme="internet-facing", pre_stop_sleep_s=30, tls_certificate_arn=ACM)],
    ids=["internal-tcp", "public-tls"],
)
def test_every_annotation_is_documented_with_a_value_of_its_type(kwargs):
    proxy = PROXY if "tls_certificate_arn" not in kwargs else ApiProxyConfig(max_model_len=262_144, max_generation_s=300)
    for key, value in nlb_annotations(proxy, **kwargs).items():
        kind = kind_of(key)
        assert isinstance(value, str) and value, key  # annotation values are strings
        if kind == "stringMap":
            assert all(re.fullmatch(r"[\w.]+=[^,=]+", pair) for pair in value.split(",")), (key, value)
            for attribute in (pair.split("=")[0] for pair in value.split(",")):
                assert attribute in DOC, f"attribute {attribute} of {key} is not in the controller's docs"
        elif kind == "integer":
            assert value.isdigit(), (key, value)
        elif kind.startswith("integer \\|"):
            assert value.isdigit() or value == "traffic-port", (key, value)


def test_long_generations_survive_the_listener_and_the_drain_the_target_group():
    annotations = nlb_annotations(PROXY, scheme="internal", pre_stop_sleep_s=30)
    assert annotations[f"{LB}listener-attributes.TCP-8000"] == "tcp.idle_timeout.seconds=3600"
    # 30 s preStop + 300 s drain; client IP preservation so the pods' NetworkPolicy sees the clients, not the NLB; an
    # unhealthy target keeps its connections for as long instead of an RST to each (the documented pair of attributes).
    assert annotations[f"{LB}target-group-attributes"] == (
        "deregistration_delay.timeout_seconds=330,preserve_client_ip.enabled=true,"
        "target_health_state.unhealthy.connection_termination.enabled=false,target_health_state.unhealthy.draining_interval_seconds=330"
    )
    assert "target_health_state.unhealthy.connection_termination.enabled=false,target_health_state.unhealthy.draining_interval_seconds=30" in DOC
    assert (annotations[f"{LB}healthcheck-port"], annotations[f"{LB}healthcheck-path"], annotations[f"{LB}healthcheck-protocol"]) == ("8081", "/health", "HTTP")
    assert annotations[f"{LB}nlb-target-type"] == "ip" and annotations[f"{LB}type"] == "external"
    # The documented example of the listener attribute has exactly this shape.
    assert "service.beta.kubernetes.io/aws-load-balancer-listener-attributes.TCP-80: tcp.idle_timeout.seconds=400" in DOC


def test_a_tls_listener_gets_no_idle_timeout_and_must_not_wait_longer_than_350_s():
    short = ApiProxyConfig(max_model_len=262_144, max_generation_s=300)
    annotations = nlb_annotations(short, scheme="internet-facing", pre_stop_sleep_s=30, tls_certificate_arn=ACM)
    assert annotations[f"{LB}ssl-cert"] == ACM and annotations[f"{LB}ssl-ports"] == "http"
    assert not any("listener-attributes" in k for k in annotations)
    with pytest.raises(UserError, match="fixed 350 s idle timeout: a non-streamed answer would be cut"):
        nlb_annotations(PROXY, scheme="internet-facing", pre_stop_sleep_s=30, tls_certificate_arn=ACM)
    with pytest.raises(UserError, match="cannot be set on a TLS listener"):
        nlb_annotations(short, scheme="internet-facing", pre_stop_sleep_s=30, tls_certificate_arn=ACM, idle_timeout_s=3600)


@pytest.mark.parametrize(
    ("proxy", "kwargs", "message"),
    [
        (PROXY, dict(idle_timeout_s=59), "idle_timeout_s 59 is not accepted; a TCP listener takes 60-6000 s"),
        (PROXY, dict(idle_timeout_s=6001), "takes 60-6000 s"),
        (PROXY, dict(idle_timeout_s=1800), "shorter than max_generation_s 3600"),
        (ApiProxyConfig(max_model_len=4096, drain_s=3600), dict(), "deregistration delay 3630 s .* takes 0-3600 s"),
        (PROXY, dict(scheme="public"), "scheme 'public' is not accepted; accepted: internal, internet-facing"),
        (PROXY, dict(pre_stop_sleep_s=-5), "pre_stop_sleep_s -5 is not accepted"),
    ],
)
def test_values_the_nlb_would_refuse_or_that_cut_answers_are_refused(proxy, kwargs, message):
    with pytest.raises(UserError, match=message):
        nlb_annotations(proxy, **{"scheme": "internal", "pre_stop_sleep_s": 30, **kwargs})
