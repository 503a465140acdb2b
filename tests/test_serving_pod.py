"""The API pod as the stack renders it: the proxy owns the ports, vLLM sits on loopback, probes, drain, rollout, NLB, policy.

Rendered under the offline engine (Deployment and LeaderWorkerSet leader), read back object by
object, and checked with kubernetes-validate (strict) and checkov.
"""

from __future__ import annotations

import hashlib
import math

import pulumi
import pytest

from kimi_k3 import offline
from kimi_k3.errors import UserError
from kimi_k3.serving import api_pod, drain, nlb
from kimi_k3.serving.api_proxy import ApiProxyConfig, ApiRoute
from kimi_k3.serving.drain import ENGINE_LAG_S, MARGIN_S, DrainPlan
from kimi_k3.serving.front import ServingFront
from kimi_k3.serving.lws import VllmLeaderWorkerSet, VllmLeaderWorkerSetArgs
from kimi_k3.serving.vllm import VllmServer, VllmServerArgs
from tests import k8s_checks
from tests.builders import in_cluster, serving_contract, with_front
from tests.conftest import NOW

VPC = "10.42.0.0/16"
S3 = dict(cluster_name="kimi-k3-dev", aws_region="us-east-1")


def render(kind: str = "deployment", **changes) -> offline.PlanResult:
    if kind == "lws":
        values = dict(contract=serving_contract("s3", pipeline_parallel_size=2), instance_type="p5en.48xlarge", **S3)
    else:
        values = dict(contract=serving_contract("s3"), **S3)
    values.update(api_key=pulumi.Output.secret("sk-k"), **changes)

    def program() -> None:
        if kind == "lws":
            VllmLeaderWorkerSet("kimi", VllmLeaderWorkerSetArgs(**with_front(values)), opts=in_cluster())
        else:
            VllmServer("kimi", VllmServerArgs(**with_front(values)), opts=in_cluster())

    return offline.OfflineEngine(now=NOW).run(program)


def obj(plan, kind, name=None) -> dict:
    found = [m for m in plan.kubernetes_objects() if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


def api_template(plan) -> dict:
    """The pod template that serves the API (the Deployment's, or the LWS leader's)."""
    found = [m for m in plan.kubernetes_objects() if m["kind"] in ("Deployment", "LeaderWorkerSet")]
    (manifest,) = found
    if manifest["kind"] == "Deployment":
        return manifest["spec"]["template"]
    return manifest["spec"]["leaderWorkerTemplate"]["leaderTemplate"]


def containers(plan) -> dict[str, dict]:
    return {c["name"]: c for c in api_template(plan)["spec"]["containers"]}


NLB = dict(exposure="internal", vpc_cidr=VPC, allowed_cidrs=("10.0.0.0/8", "192.168.10.0/24"), replicas=2)
PLANS = {"deployment": dict(), "deployment-nlb": NLB, "lws-nlb": dict(NLB, kind="lws")}


@pytest.fixture(scope="module")
def plans():
    return {name: render(**changes) for name, changes in PLANS.items()}


# --- the proxy owns the ports; the engine binds loopback ----------------------------------------------


@pytest.mark.parametrize("name", sorted(PLANS))
def test_the_proxy_owns_every_port_and_the_engine_listens_on_loopback(plans, name):
    pod = containers(plans[name])
    proxy, engine = pod["api-proxy"], pod["vllm"]
    assert {p["name"]: p["containerPort"] for p in proxy["ports"]} == {"http": 8000, "probe": 8081, "metrics": 9090}
    assert all(p["containerPort"] not in (8000, 8001, 8081, 9090) for p in engine.get("ports", []))
    args = engine["args"]
    assert args[args.index("--host") + 1] == "127.0.0.1" and args[args.index("--port") + 1] == "8001"
    assert args.count("--host") == 1 and "0.0.0.0" not in args
    service = obj(plans[name], "Service", "kimi")
    assert service["spec"]["ports"][0]["targetPort"] == "http"


@pytest.mark.parametrize("name", sorted(PLANS))
def test_no_probe_of_the_kubelet_aims_at_loopback_ports(plans, name):
    # The kubelet probes the pod IP: an httpGet/tcpSocket on 8001 would always fail. The engine's probes are exec.
    for container in containers(plans[name]).values():
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            if probe not in container:
                continue
            spec = container[probe]
            if container["name"] == "vllm":
                assert "exec" in spec and "127.0.0.1:8001" in spec["exec"]["command"][2], (name, probe)
            else:
                assert spec["httpGet"]["port"] == "probe", (name, probe)
    engine = containers(plans[name])["vllm"]
    for probe in ("startupProbe", "livenessProbe"):
        compile(engine[probe]["exec"]["command"][2], probe, "exec")


def test_liveness_tolerates_the_longest_step_and_still_catches_a_dead_engine():
    # vLLM's /health reads only the engine's errored flag; the engine is declared dead once a step exceeds
    # VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS. The liveness window covers that step plus the margin, no more.
    for step_s in (300, 1800):
        env = (("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", str(step_s)),)
        plan = render(contract=serving_contract("s3", env=env))
        liveness = containers(plan)["vllm"]["livenessProbe"]
        window = liveness["failureThreshold"] * liveness["periodSeconds"]
        assert step_s + api_pod.LIVENESS_MARGIN_S <= window < step_s + api_pod.LIVENESS_MARGIN_S + liveness["periodSeconds"]
        assert liveness["timeoutSeconds"] < liveness["periodSeconds"]
    assert api_pod.liveness_failure_threshold(300) == math.ceil(420 / 30)


def test_readiness_keeps_proving_the_model_is_listed(plans):
    readiness = containers(plans["deployment"])["vllm"]["readinessProbe"]
    script = readiness["exec"]["command"][2]
    assert "http://127.0.0.1:8001/v1/models" in script and "'Kimi-K3'" in script
    assert containers(plans["deployment"])["api-proxy"]["readinessProbe"]["httpGet"] == {"path": "/health", "port": "probe"}


# --- resources: the sidecar fits the node's share, the pod stays Guaranteed ------------------------------


@pytest.mark.parametrize("name", sorted(PLANS))
def test_the_pod_is_guaranteed_and_fits_the_node(plans, name):
    spec = api_template(plans[name])["spec"]
    for container in spec["containers"] + spec["initContainers"]:
        requests, limits = container["resources"]["requests"], container["resources"]["limits"]
        assert requests["cpu"] == limits["cpu"] and requests["memory"] == limits["memory"], container["name"]

    def mib(value: str) -> int:
        return int(value[:-2]) * (1024 if value.endswith("Gi") else 1)

    total_cpu = sum(int(c["resources"]["limits"]["cpu"]) for c in spec["containers"])
    total_memory = sum(mib(c["resources"]["limits"]["memory"]) for c in spec["containers"])
    share_cpu, share_memory = (192 - 8, (4096 - 204) * 1024) if name != "lws-nlb" else (192 - 8, (2048 - 102) * 1024)
    assert (total_cpu, total_memory) == (share_cpu, share_memory), name  # node minus the reserved share, not a byte more


# --- config checksum: a change of nginx.conf rolls the pods ---------------------------------------------


def test_the_pod_template_carries_the_configs_checksum_and_a_change_rolls_the_pods():
    plain, extra = render(), render(extra_routes=("POST /v1/embeddings",))
    for plan in (plain, extra):
        text = obj(plan, "ConfigMap", "kimi-api-proxy")["data"]["nginx.conf"]
        assert api_template(plan)["metadata"]["annotations"][api_pod.CONFIG_CHECKSUM_ANNOTATION] == hashlib.sha256(text.encode()).hexdigest()
    before = api_template(plain)["metadata"]["annotations"][api_pod.CONFIG_CHECKSUM_ANNOTATION]
    after = api_template(extra)["metadata"]["annotations"][api_pod.CONFIG_CHECKSUM_ANNOTATION]
    assert before != after
    assert "location = /v1/embeddings {" in obj(extra, "ConfigMap", "kimi-api-proxy")["data"]["nginx.conf"]


def test_a_refused_route_stops_the_component_before_anything_is_declared():
    engine = offline.OfflineEngine(now=NOW)
    with pytest.raises(UserError, match=r"/invocations is on vLLM's unprotected list") as caught:
        engine.run(lambda: VllmServer("kimi", VllmServerArgs(contract=serving_contract(), api_key=pulumi.Output.secret("k"), front=ServingFront(extra_routes=("POST /invocations",))), opts=in_cluster()))
    assert caught.value.field == "extra_routes[0]"
    assert not [r for r in engine.resources if r.type.startswith("kubernetes:")]


# --- the drain: order and timings ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PLANS))
def test_prestop_then_proxy_drain_then_engine_drain_within_the_grace_period(plans, name):
    pod = containers(plans[name])
    spec = api_template(plans[name])["spec"]
    proxy_pre_stop = pod["api-proxy"]["lifecycle"]["preStop"]["sleep"]["seconds"]
    engine_pre_stop = pod["vllm"]["lifecycle"]["preStop"]["sleep"]["seconds"]
    args = pod["vllm"]["args"]
    shutdown = int(args[args.index("--shutdown-timeout") + 1])
    text = obj(plans[name], "ConfigMap", "kimi-api-proxy")["data"]["nginx.conf"]
    proxy_drain = int(text.split("worker_shutdown_timeout ", 1)[1].split("s;", 1)[0])
    assert (proxy_pre_stop, engine_pre_stop) == (180, 180 + ENGINE_LAG_S)  # the engine still accepts when the proxy stops
    assert shutdown == proxy_drain == 1800 > 0  # vLLM's default 0 would abort every in-flight request
    assert spec["terminationGracePeriodSeconds"] == engine_pre_stop + shutdown + MARGIN_S


def test_the_lws_workers_outlive_their_leaders_drain():
    plan = render(kind="lws")
    worker = obj(plan, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    script = worker["containers"][0]["lifecycle"]["preStop"]["exec"]["command"][2]
    assert "LWS_LEADER_ADDRESS" in script and f"+ {180 + ENGINE_LAG_S + 1800} ))" in script
    assert worker["terminationGracePeriodSeconds"] >= 180 + ENGINE_LAG_S + 1800


def test_the_grace_rule_refuses_a_period_the_drain_does_not_fit():
    with pytest.raises(UserError, match="termination_grace_period_s 600 is not accepted; it must be at least 2015 s"):
        offline.OfflineEngine(now=NOW).run(lambda: VllmServer("kimi", VllmServerArgs(contract=serving_contract(), api_key=pulumi.Output.secret("k"), front=ServingFront(termination_grace_period_s=600)), opts=in_cluster()))
    assert DrainPlan(pre_stop_sleep_s=10, drain_s=60).minimum_grace_s == 10 + 5 + 60 + 30
    plan = DrainPlan(pre_stop_sleep_s=30, drain_s=600)
    assert [t for t, _ in plan.timeline()] == sorted(t for t, _ in plan.timeline())


# --- rollout: one replica at a time, like the PDB -------------------------------------------------------


@pytest.mark.parametrize(("replicas", "strategy"), [(1, {"type": "Recreate"}), (2, {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}), (4, {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}})])
def test_replicas_roll_one_at_a_time_and_the_pdb_agrees(replicas, strategy):
    plan = render(replicas=replicas)
    assert obj(plan, "Deployment")["spec"]["strategy"] == strategy
    pdb = obj(plan, "PodDisruptionBudget")["spec"]
    assert pdb["maxUnavailable"] == strategy.get("rollingUpdate", {"maxUnavailable": 1})["maxUnavailable"]


def test_the_lws_rolls_one_group_at_a_time_like_its_pdb(plans):
    rollout = obj(plans["lws-nlb"], "LeaderWorkerSet")["spec"]["rolloutStrategy"]
    assert rollout == {"type": "RollingUpdate", "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0}}
    assert obj(plans["lws-nlb"], "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1


# --- the NLB keeps long generations ------------------------------------------------------------------


def test_the_service_annotations_are_nlb_annotations_of_the_stacks_proxy_and_drain(plans):
    annotations = obj(plans["deployment-nlb"], "Service", "kimi")["metadata"]["annotations"]
    expected = nlb.nlb_annotations(ApiProxyConfig(max_model_len=262_144, max_generation_s=1800, drain_s=1800), scheme="internal", pre_stop_sleep_s=180)
    assert annotations == expected
    assert annotations[f"{nlb.LB}listener-attributes.TCP-8000"] == "tcp.idle_timeout.seconds=3600"
    attributes = dict(pair.split("=") for pair in annotations[f"{nlb.LB}target-group-attributes"].split(","))
    delay = str(DrainPlan(pre_stop_sleep_s=180, drain_s=1800).deregistration_delay_s)
    assert delay == "1980"
    # An unhealthy (or draining, probe listener closed) target keeps its streams for the whole drain instead of an RST.
    assert attributes == {
        "deregistration_delay.timeout_seconds": delay, "preserve_client_ip.enabled": "true",
        "target_health_state.unhealthy.connection_termination.enabled": "false", "target_health_state.unhealthy.draining_interval_seconds": delay,
    }
    assert annotations[f"{nlb.LB}healthcheck-port"] == "8081"


def test_a_tls_listener_refuses_answers_longer_than_its_fixed_idle_timeout():
    arn = "arn:aws:acm:us-east-1:123456789012:certificate/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
    tls = dict(exposure="public", vpc_cidr=VPC, allowed_cidrs=("203.0.113.0/24",), tls_certificate_arn=arn)
    with pytest.raises(UserError, match=r"fixed 350 s idle timeout.*Update the TCP idle timeout") as caught:
        render(**tls)
    assert caught.value.field == "tls_certificate_arn"
    annotations = obj(render(**tls, max_generation_s=300), "Service", "kimi")["metadata"]["annotations"]
    assert annotations[f"{nlb.LB}ssl-cert"] == arn and not any("listener-attributes" in k for k in annotations)


# --- who reaches what -------------------------------------------------------------------------------------


def _rules_by_port(plan) -> dict[int, dict]:
    return {rule["ports"][0]["port"]: rule for rule in obj(plan, "NetworkPolicy", "kimi-server")["spec"]["ingress"]}


def test_client_namespaces_are_the_only_in_cluster_callers_even_behind_an_nlb():
    plan = render(**NLB, client_namespaces=("agents",))
    api = _rules_by_port(plan)[8000]["from"]
    namespaces = [p for p in api if "namespaceSelector" in p]
    assert namespaces == [{"namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["agents"]}]}}]
    blocks = [p["ipBlock"] for p in api if "ipBlock" in p]
    # 10.0.0.0/8 holds the VPC: its pods are left out; 192.168.10.0/24 lies outside it and is admitted as listed.
    assert blocks == [{"cidr": "10.0.0.0/8", "except": [VPC]}, {"cidr": "192.168.10.0/24"}]
    assert not any(b["cidr"] == VPC for b in blocks)


def test_metrics_are_reachable_from_the_monitoring_namespace_only_and_scraped_there(plans):
    for name, plan in plans.items():
        rules = _rules_by_port(plan)
        assert rules[9090]["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}], name
        annotations = api_template(plan)["metadata"]["annotations"]
        assert annotations["prometheus.io/port"] == "9090"
        assert obj(plan, "Service", "kimi-metrics")["spec"]["ports"][0]["port"] == 9090
        assert all(p["port"] != 9090 for p in obj(plan, "Service", "kimi")["spec"]["ports"])  # never an NLB listener
    monitor = obj(render(service_monitor=True), "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


def test_egress_is_dns_https_outside_the_vpc_and_the_pod_identity_agent(plans):
    spec = obj(plans["deployment-nlb"], "NetworkPolicy", "kimi-server")["spec"]
    ports = sorted((p["port"], p["protocol"]) for rule in spec["egress"] for p in rule["ports"])
    assert ports == [(53, "TCP"), (53, "UDP"), (80, "TCP"), (443, "TCP")]
    https = next(rule for rule in spec["egress"] if rule["ports"][0]["port"] == 443)
    assert https["to"] == [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [VPC, "169.254.0.0/16"]}}]
    agent = next(rule for rule in spec["egress"] if rule["ports"][0]["port"] == 80)
    assert agent["to"] == [{"ipBlock": {"cidr": "169.254.170.23/32"}}]


# --- the real schemas and the scanner -------------------------------------------------------------------


def test_every_manifest_passes_kubernetes_validate_strict(plans):
    for plan in plans.values():
        for manifest in plan.kubernetes_objects():
            if manifest["kind"] != "ServiceMonitor":
                k8s_checks.validate_manifest(manifest, "1.34")


def test_checkov_finds_nothing_in_the_api_pods(plans, tmp_path):
    for name, plan in plans.items():
        k8s_checks.write_manifests(plan.kubernetes_objects(), tmp_path / name)
    report = k8s_checks.checkov_scan(tmp_path)
    assert [(c["check_id"], c.get("resource")) for c in report["failed"]] == []
    assert report["passed"] > 100


def test_the_proxy_config_is_built_once_from_the_args():
    front = ServingFront(extra_routes=("POST /v1/embeddings",), max_generation_s=900, drain_s=600, inline_media_bytes=1024)
    args = VllmServerArgs(contract=serving_contract(max_model_len=131_072), api_key=pulumi.Output.secret("k"), front=front)
    config = api_pod.proxy_config(args)
    assert config == ApiProxyConfig(max_model_len=131_072, max_generation_s=900, drain_s=600, inline_media_bytes=1024, extra_routes=(ApiRoute("POST", "/v1/embeddings"),))


# --- the NLB's deregistration: the pinned minimum -----------------------------------------------------------


def test_behind_an_nlb_the_listener_outlasts_the_nlbs_two_minute_deregistration():
    # Public measurements (no AWS document gives the figure): IP targets keep receiving new connections for about two
    # minutes after DeregisterTargets, whatever the deregistration delay says.
    assert drain.NLB_STOPS_SENDING_S == 120
    for source in ("aws-load-balancer-controller#2366", "#3270", "aws/containers-roadmap#470", "at least 2 minutes", "120"):
        assert source in drain.NLB_STOPS_SENDING_SOURCE
    assert drain.MIN_PRE_STOP_BEHIND_NLB_S == 150 == drain.NLB_STOPS_SENDING_S + drain.CONTROLLER_LAG_S
    assert drain.DEFAULT_PRE_STOP_S >= drain.MIN_PRE_STOP_BEHIND_NLB_S
    with pytest.raises(drain.DrainError, match="behind an NLB it must be at least 150 s"):
        DrainPlan(pre_stop_sleep_s=149, drain_s=1800, behind_nlb=True)
    assert DrainPlan(pre_stop_sleep_s=30, drain_s=1800).pre_stop_sleep_s == 30  # in-cluster only: endpoints update within seconds
    # The figures it makes, each within its limit: the grace period (an int64, no maximum) and the target group's 0-3600 s.
    plan = DrainPlan(drain_s=1800, behind_nlb=True)
    assert (plan.pre_stop_sleep_s, plan.engine_pre_stop_s, plan.grace_s, plan.deregistration_delay_s) == (180, 185, 2015, 1980)
    assert plan.deregistration_delay_s <= nlb.DEREGISTRATION_DELAY_RANGE[1]
    assert DrainPlan(pre_stop_sleep_s=180, drain_s=3420, behind_nlb=True).deregistration_delay_s == 3600
    first = {}
    for at, what in plan.timeline():
        first.setdefault(what.split(":")[0], at)
    assert first["NLB"] < first["proxy"] == plan.pre_stop_sleep_s  # the NLB stops sending before the listener closes


@pytest.mark.parametrize("name", ["deployment-nlb", "lws-nlb"])
def test_the_stacks_nlb_pods_keep_their_listener_past_the_nlbs_deregistration(plans, name):
    pod = containers(plans[name])
    assert pod["api-proxy"]["lifecycle"]["preStop"]["sleep"]["seconds"] >= drain.MIN_PRE_STOP_BEHIND_NLB_S
