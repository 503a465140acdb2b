"""The serving front as one typed value: built once, validated in its constructor, taken whole by the serving components."""

from __future__ import annotations

import pulumi
import pytest

from kimi_k3 import ServingFront, offline
from kimi_k3.errors import ComponentInputError
from kimi_k3.serving import api_pod
from kimi_k3.serving.api_proxy import ApiProxyConfig, ApiRoute
from kimi_k3.serving.drain import DrainPlan
from kimi_k3.serving.front import FrontError
from kimi_k3.serving.vllm import VllmServer, VllmServerArgs
from kimi_k3.stack import seam
from tests.builders import in_cluster, load_stack_settings, serving_contract
from tests.conftest import NOW

VPC = "10.42.0.0/16"
S3 = dict(cluster_name="kimi-k3-dev", aws_region="us-east-1")
NLB = dict(exposure="internal", vpc_cidr=VPC, allowed_cidrs=("10.0.0.0/8",), **S3)


def server(**changes) -> VllmServer:
    return VllmServer("kimi", VllmServerArgs(contract=serving_contract("s3"), api_key=pulumi.Output.secret("sk-k"), **changes), opts=in_cluster())


@pytest.mark.parametrize(
    ("fields", "path", "words"),
    [
        ({"drain_s": 0}, "drain_s", "expected a whole number from 1 to 3600"),
        ({"max_generation_s": 30}, "max_generation_s", "expected a whole number from 60 to 86400"),
        ({"proxy_cpu": 9}, "proxy_cpu", "cpu 9 is not accepted"),
        ({"extra_routes": ("POST /v1/embeddings", "post /v1/embeddings")}, "extra_routes[1]", "each route once"),
        ({"extra_routes": ("POST /v1/chat/completions",)}, "extra_routes", "already allowed"),
        ({"termination_grace_period_s": 600}, "termination_grace_period_s", "at least 2015 s"),
        ({"pre_stop_sleep_s": 30, "behind_nlb": True}, "pre_stop_sleep_s", "behind an NLB it must be at least 150 s"),
        ({"nlb_idle_timeout_s": 900, "behind_nlb": True}, "nlb_idle_timeout_s", "shorter than max_generation_s 1800"),
        ({"tls_certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/0f1e", "behind_nlb": True}, "tls_certificate_arn", "fixed 350 s idle timeout"),
        ({"tls_certificate_arn": "not-an-arn"}, "tls_certificate_arn", "expected an ACM certificate ARN"),
    ],
)
def test_the_constructor_refuses_with_one_line_naming_its_field(fields, path, words):
    with pytest.raises(FrontError, match=words) as caught:
        ServingFront(**fields)
    assert caught.value.field == path
    assert str(caught.value).startswith("ServingFront: ") and "\n" not in str(caught.value)


def test_a_built_front_holds_its_drain_plan_and_builds_the_proxy_config_with_the_components_facts():
    front = ServingFront(extra_routes=("get /v1/responses",), max_generation_s=900, drain_s=600, pre_stop_sleep_s=200, behind_nlb=True, proxy_cpu=2)
    assert front.extra_routes == ("GET /v1/responses",)  # as the proxy writes it
    assert front.drain == DrainPlan(pre_stop_sleep_s=200, drain_s=600, behind_nlb=True)
    assert front.proxy_config(max_model_len=131_072, api_port=8000, check_api_key=False, behind_router=True) == ApiProxyConfig(
        max_model_len=131_072, max_generation_s=900, drain_s=600, extra_routes=(ApiRoute("GET", "/v1/responses"),), cpu=2,
        check_api_key=False, behind_router=True,
    )


def test_the_component_takes_the_front_whole():
    front = ServingFront(max_generation_s=900, drain_s=600, pre_stop_sleep_s=200, behind_nlb=True, nlb_idle_timeout_s=1200)
    args = VllmServerArgs(contract=serving_contract("s3"), api_key=pulumi.Output.secret("sk-k"), front=front, **NLB)
    assert api_pod.front(args) is front and api_pod.drain_plan(args) is front.drain
    annotations = api_pod.nlb_annotations(args, api_pod.proxy_config(args))
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-listener-attributes.TCP-8000"] == "tcp.idle_timeout.seconds=1200"
    assert "deregistration_delay.timeout_seconds=800," in annotations["service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"]


def test_without_a_front_the_component_takes_the_defaults_for_its_exposure():
    args = VllmServerArgs(contract=serving_contract("s3"), api_key=pulumi.Output.secret("sk-k"), **NLB)
    assert api_pod.front(args) == ServingFront(behind_nlb=True)
    assert api_pod.drain_plan(VllmServerArgs(contract=serving_contract(), api_key=pulumi.Output.secret("sk-k"))).behind_nlb is False


@pytest.mark.parametrize(("exposure", "behind_nlb"), [("internal", False), ("cluster", True)])
def test_a_front_its_exposure_contradicts_is_refused_before_anything_is_declared(exposure, behind_nlb):
    changes = NLB if exposure == "internal" else S3
    engine = offline.OfflineEngine(now=NOW)
    with pytest.raises(ComponentInputError, match=f"front.behind_nlb {behind_nlb} is not accepted; exposure {exposure}") as caught:
        engine.run(lambda: server(front=ServingFront(behind_nlb=behind_nlb), **{**changes, "exposure": exposure}))
    assert [p.path for p in caught.value.problems] == ["front.behind_nlb"]
    assert not [r for r in engine.resources if r.type.startswith("kubernetes:")]


def test_the_settings_build_the_front_once_and_the_seam_maps_each_key_to_one_field_of_it():
    front = load_stack_settings(servingDrainSeconds=900, servingPreStopSeconds=200, exposure="internal", servingAllowedCidrs=["10.0.0.0/8"]).serving.front
    assert isinstance(front, ServingFront) and (front.drain_s, front.pre_stop_sleep_s, front.behind_nlb) == (900, 200, True)
    rows = [feed for feed in seam.SEAM if feed.input == "ServingFront"]
    assert len({feed.key for feed in rows}) == len(rows) == 7
    for feed in rows:
        assert [other.input for other in seam.SEAM if other.key == feed.key] == ["ServingFront"], feed.key
