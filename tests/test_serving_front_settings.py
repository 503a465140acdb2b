"""The serving-front keys (proxy routes, drain, NLB, HyperPod routing): each checked by the rule that owns it, the key named."""

from __future__ import annotations

import json

import jsonschema
import pytest

from kimi_k3 import cli
from kimi_k3.errors import SettingsError
from kimi_k3.hyperpod import routing as hyperpod_routing
from kimi_k3.hyperpod.endpoint import render_inference_endpoint_config
from kimi_k3.hyperpod.routing import HyperPodRouting
from tests.builders import load_stack_settings
from tests.conftest import DATA

INTERNAL = dict(exposure="internal", servingAllowedCidrs=["10.0.0.0/8"])


def refused(key: str, match: str, **changes) -> SettingsError:
    with pytest.raises(SettingsError, match=match) as caught:
        load_stack_settings(**changes)
    assert caught.value.key == f"kimi-k3:{key}", caught.value
    assert "\n" not in str(caught.value)
    return caught.value


def test_the_defaults_give_a_drain_that_covers_the_longest_generation():
    front = load_stack_settings().serving.front
    assert (front.max_generation_s, front.drain_s, front.pre_stop_sleep_s, front.termination_grace_period_s, front.nlb_idle_timeout_s) == (1800, 1800, 180, None, 3600)
    assert front.extra_routes == () and front.inline_media_bytes == 0


def test_extra_routes_pass_the_proxys_own_rules():
    front = load_stack_settings(servingExtraRoutes=["POST /v1/embeddings", "get /v1/responses"]).serving.front
    assert front.extra_routes == ("POST /v1/embeddings", "GET /v1/responses")
    refused("servingExtraRoutes", "unprotected list", servingExtraRoutes=["POST /invocations"])
    refused("servingExtraRoutes", "guards only /v1, /v2, /inference", servingExtraRoutes=["POST /custom"])
    refused("servingExtraRoutes", "already allowed", servingExtraRoutes=["POST /v1/chat/completions"])
    refused("servingExtraRoutes", "bypasses the key or changes the model", servingExtraRoutes=["POST /v1/load_lora_adapter"])
    refused("servingExtraRoutes", "each route once", servingExtraRoutes=["POST /v1/embeddings", "POST /v1/embeddings"])
    refused("servingExtraRoutes", "expected 'METHOD /path'", servingExtraRoutes=["/v1/embeddings"])


def test_the_drain_rule_names_the_key_that_breaks_it():
    refused("servingTerminationGraceSeconds", "at least 2015 s = preStop 180 s", servingTerminationGraceSeconds=300)
    assert load_stack_settings(servingTerminationGraceSeconds=2100).serving.front.termination_grace_period_s == 2100
    refused("servingDrainSeconds", "drain_s 0 is not accepted; expected a whole number from 1 to 3600", servingDrainSeconds=0)
    refused("servingPreStopSeconds", "whole seconds from 0 to 600", servingPreStopSeconds=900)
    refused("servingMaxGenerationSeconds", "max_generation_s 30 is not accepted", servingMaxGenerationSeconds=30)
    # Behind an NLB the target group's deregistration delay (preStop + drain) takes at most 3600 s.
    refused("servingDrainSeconds", "deregistration delay 3780 s", servingDrainSeconds=3600, **INTERNAL)
    # Behind an NLB the listener must outlast the NLB's deregistration; in-cluster only, a short preStop is fine.
    refused("servingPreStopSeconds", "behind an NLB it must be at least 150 s", servingPreStopSeconds=30, **INTERNAL)
    assert load_stack_settings(servingPreStopSeconds=30).serving.front.pre_stop_sleep_s == 30
    assert load_stack_settings(servingDrainSeconds=3600).serving.front.drain_s == 3600  # no NLB: fine


def test_a_drain_shorter_than_the_longest_generation_is_a_warning():
    s = load_stack_settings(servingDrainSeconds=600)
    assert any("kimi-k3:servingDrainSeconds: 600 s is shorter than servingMaxGenerationSeconds 1800 s" in w for w in s.warnings)


def test_the_nlb_idle_timeout_covers_the_longest_generation():
    refused("nlbIdleTimeoutSeconds", "shorter than max_generation_s 1800", nlbIdleTimeoutSeconds=900, **INTERNAL)
    refused("nlbIdleTimeoutSeconds", "a TCP listener takes 60-6000 s", nlbIdleTimeoutSeconds=7200, **INTERNAL)
    assert load_stack_settings(nlbIdleTimeoutSeconds=6000, **INTERNAL).serving.front.nlb_idle_timeout_s == 6000


def test_internal_exposure_needs_its_client_cidrs_and_warns_about_ones_inside_the_vpc():
    refused("servingAllowedCidrs", "required when exposure is internal", exposure="internal")
    s = load_stack_settings(exposure="internal", servingAllowedCidrs=["10.42.3.0/24"])
    assert any("10.42.3.0/24 lies inside the VPC 10.42.0.0/16" in w for w in s.warnings)


def test_the_new_keys_are_documented_in_their_own_section():
    from kimi_k3.stack.config_keys import CONFIG_KEYS, SECTIONS

    section = dict(SECTIONS)["Serving: API proxy, drain and engine profile"]
    for name in ("servingExtraRoutes", "mediaPolicy", "servingDrainSeconds", "nlbIdleTimeoutSeconds", "servingEnv", "decodeContextParallel", "hyperpodRoutingStrategy"):
        assert name in section and CONFIG_KEYS[name].description


# --- HyperPod routing and KV cache ---------------------------------------------------------------------

SCHEMA = json.loads((DATA / "inferenceendpointconfig-v1.schema.json").read_text())
SPEC = SCHEMA["properties"]["spec"]["properties"]


def test_the_routing_constants_are_the_crds():
    assert tuple(SPEC["intelligentRoutingSpec"]["properties"]["routingStrategy"]["enum"]) == hyperpod_routing.ROUTING_STRATEGIES
    assert tuple(SPEC["loadBalancer"]["properties"]["routingAlgorithm"]["enum"]) == hyperpod_routing.LOAD_BALANCER_ALGORITHMS
    kv = SPEC["kvCacheSpec"]["properties"]
    assert {"enableL1Cache", "enableL2Cache", "l2CacheSpec"} <= set(kv)
    import re

    pattern = kv["l2CacheSpec"]["properties"]["l2CacheBackend"]["pattern"]
    assert all(re.fullmatch(pattern, backend) for backend in hyperpod_routing.L2_CACHE_BACKENDS)


def test_the_stacks_routing_keys_reach_the_inference_endpoint_config():
    s = load_stack_settings(hyperpodRoutingStrategy="kvaware", hyperpodLoadBalancerAlgorithm="round_robin",
                            hyperpodKvCache="l1-l2", hyperpodL2CacheBackend="redis", hyperpodL2CacheUrl="redis://cache.internal:6379")
    manifest = render_inference_endpoint_config(s.serving.contract, routing=s.serving.hyperpod_routing)
    jsonschema.validate(manifest, SCHEMA)
    spec = manifest["spec"]
    assert spec["intelligentRoutingSpec"] == {"enabled": True, "routingStrategy": "kvaware"}
    assert spec["loadBalancer"] == {"healthCheckPath": "/health", "routingAlgorithm": "round_robin"}
    assert spec["kvCacheSpec"] == {"enableL1Cache": True, "enableL2Cache": True, "l2CacheSpec": {"l2CacheBackend": "redis", "l2CacheLocalUrl": "redis://cache.internal:6379"}}
    # The same engine profile as on EKS: the contract's flags (text only, the recipe's FP8-KV pairing).
    args = spec["worker"]["args"]
    assert "--language-model-only" in args and "--attention-config" in args
    plain = render_inference_endpoint_config(s.serving.contract)
    assert "intelligentRoutingSpec" not in plain["spec"] and "kvCacheSpec" not in plain["spec"]
    assert render_inference_endpoint_config(s.serving.contract, routing=HyperPodRouting(kv_cache="off"))["spec"]["kvCacheSpec"] == {"enableL1Cache": False, "enableL2Cache": False}


@pytest.mark.parametrize(
    ("changes", "key", "match"),
    [
        (dict(hyperpodRoutingStrategy="random"), "hyperpodRoutingStrategy", "accepted: prefixaware, kvaware, session, roundrobin"),
        (dict(hyperpodLoadBalancerAlgorithm="least_connections"), "hyperpodLoadBalancerAlgorithm", "accepted: least_outstanding_requests, round_robin"),
        (dict(hyperpodKvCache="l2"), "hyperpodKvCache", "accepted: off, l1, l1-l2"),
        (dict(hyperpodKvCache="l1-l2"), "hyperpodL2CacheBackend", "required when kv_cache is l1-l2"),
        (dict(hyperpodKvCache="l1", hyperpodL2CacheBackend="redis"), "hyperpodL2CacheBackend", "only used when kv_cache is l1-l2"),
        (dict(hyperpodKvCache="l1-l2", hyperpodL2CacheBackend="memcached"), "hyperpodL2CacheBackend", "accepted: redis, tieredstorage"),
    ],
)
def test_routing_keys_the_crd_refuses_are_refused_with_the_key(changes, key, match):
    refused(key, match, **changes)


def test_the_hyperpod_command_renders_the_stacks_routing(tmp_path, monkeypatch):
    import yaml

    from kimi_k3.cli import hyperpod as hyperpod_cli

    routed = load_stack_settings(hyperpodRoutingStrategy="prefixaware", hyperpodKvCache="l1")
    monkeypatch.setattr(hyperpod_cli.stack_settings, "load_settings", lambda project, stack: routed)
    out = tmp_path / "endpoint.yaml"
    assert cli.main(["hyperpod", "dev", "--out", str(out)]) == 0
    manifest = yaml.safe_load(out.read_text())
    jsonschema.validate(manifest, SCHEMA)
    assert manifest["spec"]["intelligentRoutingSpec"] == {"enabled": True, "routingStrategy": "prefixaware"}
    assert manifest["spec"]["kvCacheSpec"] == {"enableL1Cache": True, "enableL2Cache": False}
