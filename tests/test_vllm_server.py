"""VllmServer under the offline engine: what the cluster would receive, checked object by object."""

from __future__ import annotations

import json

import pulumi
import pytest

from kimi_k3 import offline
from kimi_k3.core import labels
from kimi_k3.errors import UserError
from kimi_k3.serving import ImageContract, ServingContract, VllmServer, VllmServerArgs, WeightsContract, proxy_edge, router_edge
from kimi_k3.serving.base import POD_IDENTITY_AGENT_CIDR
from kimi_k3.serving.pod_kit import AWS_CLI_IMAGE
from tests import k8s_checks
from tests.builders import IMAGE, REVISION, S3_URI, in_cluster, serving_contract, with_front
from tests.conftest import NOW
from tests.refusals import assert_refused_before_declaring
from tests.seed_deployment import SEED_ARGS, SEED_ENV, flag_values

API_KEY = "sk-test-api-key-0f3c9a"
HF_TOKEN = "hf_test_token_7d21"
VPC_CIDR = "10.42.0.0/16"
NLB_HOST = "k8s-kimiserv-kimi-0123456789.elb.us-east-1.amazonaws.com"


def contract(source: str = "huggingface", **engine) -> ServingContract:
    return serving_contract(source, **engine)


def base_args(**changes) -> dict:
    values = dict(contract=contract(), api_key=pulumi.Output.secret(API_KEY))
    values.update(changes)
    return with_front(values)


def render(*, lb_status: bool = False, **changes) -> offline.PlanResult:
    """Declare one VllmServer named ``kimi`` and export its outputs."""
    overrides = {}
    if lb_status:
        overrides["kubernetes:core/v1:Service"] = lambda a: {"status": {"loadBalancer": {"ingress": [{"hostname": NLB_HOST}]}}}
    engine = offline.OfflineEngine(now=NOW, resource_overrides=overrides)

    def program() -> None:
        server = VllmServer("kimi", VllmServerArgs(**base_args(**changes)), opts=in_cluster())
        for key in ("endpoint_url", "served_model_name", "image", "model_revision", "namespace", "service_name"):
            pulumi.export(key, getattr(server, key))

    return engine.run(program)


S3_ARGS = dict(contract=contract("s3"), cluster_name="kimi-k3-dev", aws_region="us-east-1")
MODES = {
    "cluster": dict(hugging_face_token=pulumi.Output.secret(HF_TOKEN), service_monitor=True, service_monitor_labels={"release": "kube-prometheus-stack"}),
    "internal": dict(**S3_ARGS, exposure="internal", vpc_cidr=VPC_CIDR, allowed_cidrs=("10.0.0.0/8",), replicas=2),
    # A TLS listener's idle timeout is fixed at 350 s: answers must not stay silent longer.
    "public": dict(**S3_ARGS, exposure="public", vpc_cidr=VPC_CIDR, allowed_cidrs=("203.0.113.0/24",), max_generation_s=300,
                   tls_certificate_arn="arn:aws:acm:us-east-1:123456789012:certificate/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"),
}


@pytest.fixture(scope="module")
def plans() -> dict[str, offline.PlanResult]:
    """One rendering per exposure mode (HF weights for cluster, S3 for the NLB modes)."""
    return {mode: render(lb_status=mode != "cluster", **changes) for mode, changes in MODES.items()}


def obj(plan: offline.PlanResult, kind: str, name: str | None = None) -> dict:
    found = [m for m in plan.kubernetes_objects() if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} named {name}"
    return found[0]


def pod_spec(plan: offline.PlanResult) -> dict:
    return obj(plan, "Deployment")["spec"]["template"]["spec"]


def server(plan: offline.PlanResult) -> dict:
    """The engine container (the pod also runs the API proxy sidecar: tests/test_serving_pod.py)."""
    (container,) = [c for c in pod_spec(plan)["containers"] if c["name"] == "vllm"]
    return container


def env_of(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


# --- the engine command line ------------------------------------------------------


def test_every_seed_argument_and_env_reaches_the_server(plans):
    container = server(plans["cluster"])
    assert container["command"] == ["vllm", "serve"]
    got = flag_values(container["args"])
    assert flag_values(SEED_ARGS).items() <= got.items()
    assert SEED_ENV.items() <= env_of(container).items()
    assert env_of(container)["VLLM_ENGINE_READY_TIMEOUT_S"] == "3600"
    # vLLM listens on loopback only; the proxy sidecar owns the pod's ports.
    assert (got["--port"], got["--host"], got["--revision"]) == ("8001", "127.0.0.1", REVISION)
    assert "ports" not in container


def test_s3_weights_are_served_from_the_stable_path(plans):
    got = flag_values(server(plans["internal"])["args"])
    seed = flag_values(SEED_ARGS)
    seed["--model"] = "/models/kimi-k3"
    assert seed.items() <= got.items()
    mounts = {m["name"]: m["mountPath"] for m in server(plans["internal"])["volumeMounts"]}
    assert mounts["models"] == "/models/kimi-k3"


# --- probes -------------------------------------------------------------------------


@pytest.mark.parametrize("ready_timeout_s", [3600, 5400])
def test_startup_probe_outlasts_the_engine_ready_timeout(ready_timeout_s):
    plan = render(contract=contract(ready_timeout_s=ready_timeout_s))
    probe = server(plan)["startupProbe"]
    assert probe["exec"]["command"][:2] == ["python3", "-c"] and "http://127.0.0.1:8001/health" in probe["exec"]["command"][2]
    assert probe["failureThreshold"] * probe["periodSeconds"] >= ready_timeout_s + 600
    assert env_of(server(plan))["VLLM_ENGINE_READY_TIMEOUT_S"] == str(ready_timeout_s)
    deadline = obj(plan, "Deployment")["spec"]["progressDeadlineSeconds"]
    assert deadline >= probe["failureThreshold"] * probe["periodSeconds"] + 7200


def test_readiness_proves_the_model_is_served_without_exposing_the_key(plans):
    container = server(plans["cluster"])
    assert "http://127.0.0.1:8001/health" in container["livenessProbe"]["exec"]["command"][2]
    command = container["readinessProbe"]["exec"]["command"]
    assert command[:2] == ["python3", "-c"]
    script = command[2]
    assert "http://127.0.0.1:8001/v1/models" in script and "'Kimi-K3'" in script and 'os.environ.get("VLLM_API_KEY"' in script
    compile(script, "readiness", "exec")  # valid Python
    assert API_KEY not in json.dumps(obj(plans["cluster"], "Deployment"))


def test_graceful_shutdown(plans):
    spec = pod_spec(plans["cluster"])
    # The engine's preStop outlasts the proxy's by 5 s; the grace period covers it, the drain and a margin.
    assert server(plans["cluster"])["lifecycle"]["preStop"] == {"sleep": {"seconds": 185}}
    assert spec["terminationGracePeriodSeconds"] == 185 + 1800 + 30
    assert obj(plans["cluster"], "Deployment")["spec"]["strategy"] == {"type": "Recreate"}  # one replica
    assert obj(plans["internal"], "Deployment")["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}


# --- resources and placement ----------------------------------------------------------


def test_gpu_cpu_memory_and_shm_sized_for_the_node(plans):
    resources = server(plans["cluster"])["resources"]
    limits = resources["limits"]
    # The node's share (184 vCPU, 3892 GiB) minus the proxy sidecar's 1 CPU and 512 MiB.
    assert limits == {"cpu": "183", "memory": f"{3892 * 1024 - 512}Mi", "nvidia.com/gpu": "8"}
    assert {k: resources["requests"][k] for k in limits} == limits  # Guaranteed QoS
    volumes = {v["name"]: v for v in pod_spec(plans["cluster"])["volumes"]}
    assert volumes["shm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Gi"}
    assert int(limits["memory"][:-2]) > 64 * 4 * 1024  # shm is counted inside the limit, with room to spare
    assert volumes["models"]["emptyDir"]["sizeLimit"] == "1794G"  # 1560 GB + 15%
    assert {"name": "shm", "mountPath": "/dev/shm"} in server(plans["cluster"])["volumeMounts"]


def test_pods_land_on_capacity_block_gpu_nodes(plans):
    spec = pod_spec(plans["cluster"])
    assert spec["nodeSelector"] == {**labels.GPU_NODE_SELECTOR, labels.INSTANCE_TYPE_LABEL: "p6-b300.48xlarge"}
    assert dict(labels.GPU_TOLERATION) in spec["tolerations"]


def test_a_multi_node_contract_is_refused():
    with pytest.raises(UserError, match="LeaderWorkerSet"):
        render(contract=contract(pipeline_parallel_size=2))


# --- security ---------------------------------------------------------------------------


def test_every_container_is_locked_down(plans):
    for mode, plan in plans.items():
        spec = pod_spec(plan)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["automountServiceAccountToken"] is False
        for container in spec["initContainers"] + spec["containers"]:
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, (mode, container["name"])
            assert sc["capabilities"] == {"drop": ["ALL"]}
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["runAsUser"] > 10000 and sc["runAsNonRoot"] is True
            writable = {m["mountPath"] for m in container["volumeMounts"]}
            assert ({"/tmp"} if container["name"] == "api-proxy" else {"/tmp", "/home/vllm"}) <= writable
        assert "hostPath" not in json.dumps(spec)
    ns = obj(plans["cluster"], "Namespace")
    assert ns["metadata"]["name"] == "kimi-serving"
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    sa = obj(plans["cluster"], "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False
    assert pod_spec(plans["cluster"])["serviceAccountName"] == sa["metadata"]["name"]


def test_server_caches_point_into_the_writable_home(plans):
    env = env_of(server(plans["cluster"]))
    for key in ("HOME", "XDG_CACHE_HOME", "VLLM_CACHE_ROOT", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "HF_HOME"):
        assert env[key].startswith("/home/vllm"), key
    assert env["USER"] and env["HF_HUB_OFFLINE"] == "1"


# --- secrets ----------------------------------------------------------------------------


def test_api_key_flows_from_a_pulumi_secret_to_a_secret_key_ref(plans):
    plan = plans["cluster"]
    secret = plan.one("kubernetes:core/v1:Secret", "kimi-api-key")
    assert offline.contains_secret(secret.inputs["stringData"])
    # The key for vLLM and, for the proxy's check before any body is read, its digest: both only in this Secret.
    assert secret.plain_inputs["stringData"] == {"key": API_KEY, proxy_edge.KEY_FILE: proxy_edge.key_check_file(API_KEY),
                                                 router_edge.KEY_DIGEST_FILE: router_edge.key_digest(API_KEY)}
    digest = proxy_edge.key_digest(API_KEY)
    for resource in plan.resources:
        if resource is not secret:
            text = json.dumps(resource.plain_inputs)
            assert API_KEY not in text and digest not in text, resource.type
    env = env_of(server(plan))
    assert env["VLLM_API_KEY"] == {"secretKeyRef": {"name": "kimi-api-key", "key": "key"}}
    assert not any(a.startswith("--api-key") for a in server(plan)["args"])
    deployment = plan.one("kubernetes:apps/v1:Deployment")
    assert API_KEY not in json.dumps(deployment.plain_inputs)


def test_hugging_face_token_only_reaches_the_download_container(plans):
    plan = plans["cluster"]
    secret = plan.one("kubernetes:core/v1:Secret", "kimi-hf-token")
    assert offline.contains_secret(secret.inputs["stringData"])
    fetch = next(c for c in pod_spec(plan)["initContainers"] if c["name"] == "fetch-weights")
    assert env_of(fetch)["HF_TOKEN"] == {"secretKeyRef": {"name": "kimi-hf-token", "key": "key"}}
    assert "HF_TOKEN" not in env_of(server(plan))
    assert not plans["internal"].by_type("kubernetes:core/v1:Secret")[1:]  # S3 mode: only the API key


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"api_key": None}, "api_key is required"),
        ({"api_key": None, "require_api_key": False, "exposure": "public", "vpc_cidr": VPC_CIDR, "allowed_cidrs": ("203.0.113.0/24",)}, "public exposure always needs one"),
        ({"exposure": "public", "vpc_cidr": VPC_CIDR}, "allowed_cidrs is required"),
        ({"exposure": "internal"}, "vpc_cidr is required"),
        ({"exposure": "everywhere"}, "accepted: cluster, internal, public"),
        ({"allowed_cidrs": ("10.0.0.1/8",)}, "allowed_cidrs entry"),
        ({"contract": contract("s3")}, "cluster_name and aws_region are required"),
        ({"replicas": 0}, "replicas 0"),
        ({"instance_type": "g5.48xlarge"}, "instance_type"),
        ({"shm_size_gib": 2048}, "shm_size_gib"),
        ({"termination_grace_period_s": 40}, "termination_grace_period_s 40 is not accepted; it must be at least 2015 s"),
        ({"exposure": "internal", "vpc_cidr": VPC_CIDR}, "allowed_cidrs is required for internal exposure"),
        ({"drain_s": 0}, "drain_s 0 is not accepted"),
        ({"extra_routes": ("POST /invocations",)}, "unprotected list"),
        ({"exposure": "public", "vpc_cidr": VPC_CIDR, "allowed_cidrs": ("203.0.113.0/24",), "tls_certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/0f1e"}, "TLS listener"),
        ({"exposure": "internal", "vpc_cidr": VPC_CIDR, "allowed_cidrs": ("10.0.0.0/8",), "nlb_idle_timeout_s": 600}, "idle_timeout_s 600 is shorter than max_generation_s 1800"),
        ({"exposure": "internal", "vpc_cidr": VPC_CIDR, "allowed_cidrs": ("10.0.0.0/8",), "drain_s": 3590}, "deregistration delay 3770 s"),
        ({"exposure": "internal", "vpc_cidr": VPC_CIDR, "allowed_cidrs": ("10.0.0.0/8",), "pre_stop_sleep_s": 30}, "pre_stop_sleep_s 30 is not accepted; behind an NLB it must be at least 150 s"),
    ],
)
def test_bad_args_stop_before_anything_is_declared(changes, message):
    assert_refused_before_declaring(lambda: VllmServer("kimi", VllmServerArgs(**base_args(**changes))), message)


def test_serving_without_a_key_is_possible_when_asked_for():
    plan = render(api_key=None, require_api_key=False)
    assert "VLLM_API_KEY" not in env_of(server(plan))
    assert plan.by_type("kubernetes:core/v1:Secret") == []


# --- exposure -----------------------------------------------------------------------------


def test_cluster_exposure_is_a_cluster_ip_service(plans):
    svc = obj(plans["cluster"], "Service", "kimi")
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}]
    assert "annotations" not in svc["metadata"]
    assert plans["cluster"].outputs["endpoint_url"] == "http://kimi.kimi-serving.svc.cluster.local:8000/v1"


def test_internal_exposure_is_an_internal_nlb_on_pod_ips(plans):
    svc = obj(plans["internal"], "Service", "kimi")
    a = svc["metadata"]["annotations"]
    assert svc["spec"]["type"] == "LoadBalancer"
    assert a["service.beta.kubernetes.io/aws-load-balancer-type"] == "external"
    assert a["service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"] == "ip"
    assert a["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert a["service.beta.kubernetes.io/aws-load-balancer-healthcheck-path"] == "/health"
    assert a["service.beta.kubernetes.io/aws-load-balancer-healthcheck-port"] == "8081"  # the proxy's probe port
    assert svc["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/8"]
    assert obj(plans["internal"], "Namespace")["metadata"]["labels"]["elbv2.k8s.aws/pod-readiness-gate-inject"] == "enabled"
    assert plans["internal"].outputs["endpoint_url"] == f"http://{NLB_HOST}:8000/v1"


def test_public_exposure_is_restricted_to_the_allowed_cidrs(plans):
    svc = obj(plans["public"], "Service", "kimi")
    a = svc["metadata"]["annotations"]
    assert a["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internet-facing"
    assert svc["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    assert a["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"].startswith("arn:aws:acm:")
    assert a["service.beta.kubernetes.io/aws-load-balancer-ssl-ports"] == "http"
    assert plans["public"].outputs["endpoint_url"] == f"https://{NLB_HOST}:8000/v1"


# --- network policy -------------------------------------------------------------------------


def test_namespace_denies_by_default(plans):
    deny = obj(plans["cluster"], "NetworkPolicy", "kimi-default-deny")
    assert deny["spec"]["podSelector"] == {}
    assert sorted(deny["spec"]["policyTypes"]) == ["Egress", "Ingress"]
    assert "ingress" not in deny["spec"] and "egress" not in deny["spec"]


def _peers(rule: dict) -> list[dict]:
    return rule.get("from", rule.get("to", []))


def test_server_policy_allows_only_what_the_server_needs(plans):
    for mode, plan in plans.items():
        spec = obj(plan, "NetworkPolicy", "kimi-server")["spec"]
        assert spec["podSelector"]["matchLabels"] == obj(plan, "Deployment")["spec"]["selector"]["matchLabels"]
        by_port = {rule["ports"][0]["port"]: rule for rule in spec["ingress"]}
        assert all(len(rule["ports"]) == 1 and rule["ports"][0]["protocol"] == "TCP" for rule in spec["ingress"])
        # API port: clients; metrics port: the monitoring namespace; probe port: the NLB's health checks (from the VPC).
        assert set(by_port) == ({8000, 9090} if mode == "cluster" else {8000, 9090, 8081}), mode
        api_rule = by_port[8000]
        blocks = [p["ipBlock"] for p in _peers(api_rule) if "ipBlock" in p]
        assert [p for p in _peers(api_rule) if "namespaceSelector" in p] == [{"namespaceSelector": {}}]
        if mode == "cluster":
            assert blocks == []
        else:
            # The client CIDRs only, never the VPC: an ipBlock matches pod addresses too.
            assert {b["cidr"] for b in blocks} == set(MODES[mode]["allowed_cidrs"])
            assert all(b["cidr"] != VPC_CIDR for b in blocks)
            assert _peers(by_port[8081]) == [{"ipBlock": {"cidr": VPC_CIDR}}]
        if mode == "internal":
            assert blocks == [{"cidr": "10.0.0.0/8", "except": [VPC_CIDR]}]  # 10/8 holds the VPC: its pods are left out
        assert _peers(by_port[9090]) == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
        egress_ports = {(p["port"], p["protocol"]) for rule in spec["egress"] for p in rule["ports"]}
        expected = {(53, "UDP"), (53, "TCP"), (443, "TCP")} | ({(80, "TCP")} if mode != "cluster" else set())
        assert egress_ports == expected, mode
        dns = spec["egress"][0]
        assert _peers(dns)[0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
        https = next(r for r in spec["egress"] if r["ports"] == [{"port": 443, "protocol": "TCP"}])
        excluded = {"169.254.0.0/16"} | ({VPC_CIDR} if mode != "cluster" else set())
        assert _peers(https) == [{"ipBlock": {"cidr": "0.0.0.0/0", "except": sorted(excluded, key=lambda c: c != VPC_CIDR)}}]
        agent = [r for r in spec["egress"] if any(p.get("ipBlock", {}).get("cidr") == POD_IDENTITY_AGENT_CIDR for p in _peers(r))]
        assert len(agent) == (0 if mode == "cluster" else 1)


def test_client_namespaces_narrow_in_cluster_access():
    plan = render(client_namespaces=("apps", "agents"))
    api_rule = obj(plan, "NetworkPolicy", "kimi-server")["spec"]["ingress"][0]
    assert _peers(api_rule) == [{"namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["apps", "agents"]}]}}]


# --- disruption budget, metrics -------------------------------------------------------------


@pytest.mark.parametrize("replicas", [1, 2])
def test_disruption_budget_lets_a_drain_through(replicas):
    plan = render(replicas=replicas)
    assert obj(plan, "Deployment")["spec"]["replicas"] == replicas
    pdb = obj(plan, "PodDisruptionBudget")["spec"]
    assert pdb["maxUnavailable"] == 1 and "minAvailable" not in pdb
    # allowed disruptions with every pod healthy: >= 1 (never blocks a drain), < replicas when replicas > 1
    assert 1 <= pdb["maxUnavailable"] <= max(1, replicas - 1)
    assert pdb["selector"]["matchLabels"] == obj(plan, "Deployment")["spec"]["selector"]["matchLabels"]


def test_service_monitor_when_the_operator_is_present(plans):
    monitor = obj(plans["cluster"], "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == "kimi-serving"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s", "scheme": "http"}]
    # It selects the metrics Service (the proxy's metrics port), never the API Service behind the NLB.
    metrics = obj(plans["cluster"], "Service", "kimi-metrics")
    assert set(monitor["spec"]["selector"]["matchLabels"].items()) <= set(metrics["metadata"]["labels"].items())
    assert not set(monitor["spec"]["selector"]["matchLabels"].items()) <= set(obj(plans["cluster"], "Service", "kimi")["metadata"]["labels"].items())
    assert metrics["spec"]["ports"] == [{"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}]
    assert not any(k.startswith("prometheus.io/") for k in obj(plans["cluster"], "Deployment")["spec"]["template"]["metadata"]["annotations"])


# Excerpt of the ServiceMonitor v1 openAPIV3Schema: the fields VllmServer sets, with their types,
# enums, patterns and `required` copied from prometheus-operator/prometheus-operator
# example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml (commit 01b1a0ea,
# operator 0.84.1). Unknown fields are refused here because the API server prunes them.
_DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
SERVICE_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["endpoints", "selector"],
            "additionalProperties": False,
            "properties": {
                "endpoints": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "interval": {"type": "string", "pattern": _DURATION},
                            "path": {"type": "string"},
                            "port": {"type": "string"},
                            "scheme": {"type": "string", "enum": ["http", "https"]},
                        },
                    },
                },
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"any": {"type": "boolean"}, "matchNames": {"type": "array", "items": {"type": "string"}}},
                },
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}, "matchExpressions": {"type": "array"}},
                },
            },
        },
    },
}


def test_service_monitor_matches_the_crd_schema(plans):
    import jsonschema

    jsonschema.validate(obj(plans["cluster"], "ServiceMonitor"), SERVICE_MONITOR_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"spec": {"endpoints": [{"port": "http", "scheme": "tcp"}], "selector": {}}}, SERVICE_MONITOR_SCHEMA)


def test_scrape_annotations_without_the_operator(plans):
    assert plans["internal"].by_type("kubernetes:monitoring.coreos.com/v1:ServiceMonitor") == []
    annotations = obj(plans["internal"], "Deployment")["spec"]["template"]["metadata"]["annotations"]
    scrape = {k: v for k, v in annotations.items() if k.startswith("prometheus.io/")}
    assert scrape == {"prometheus.io/scrape": "true", "prometheus.io/port": "9090", "prometheus.io/path": "/metrics"}


# --- weights staging and Pod Identity ----------------------------------------------------------


def test_s3_weights_are_synced_and_verified_by_pinned_init_containers(plans):
    fetch, verify = pod_spec(plans["internal"])["initContainers"]
    assert fetch["image"] == AWS_CLI_IMAGE and "@sha256:" in fetch["image"]
    assert env_of(fetch)["WEIGHTS_S3_URI"] == S3_URI and env_of(fetch)["WEIGHTS_DIR"] == "/models/kimi-k3"
    assert env_of(fetch)["AWS_REGION"] == "us-east-1"
    assert 'aws s3 sync "$WEIGHTS_S3_URI" "$WEIGHTS_DIR"' in fetch["command"][2]
    import subprocess

    for script in (fetch["command"][2], verify["command"][2]):
        assert subprocess.run(["/bin/sh", "-n", "-c", script], capture_output=True).returncode == 0
    assert verify["name"] == "verify-weights"
    assert env_of(verify) == {"WEIGHTS_DIR": "/models/kimi-k3", "SHA256_MANIFEST": "SHA256SUMS"}
    assert "sha256sum --check" in verify["command"][2]


def test_hugging_face_weights_are_downloaded_at_the_pinned_revision(plans):
    fetch, verify = pod_spec(plans["cluster"])["initContainers"]
    assert fetch["image"] == IMAGE and fetch["command"][:2] == ["python3", "-c"]
    env = env_of(fetch)
    assert (env["MODEL_ID"], env["MODEL_REVISION"], env["HF_HUB_CACHE"]) == ("moonshotai/Kimi-K3", REVISION, "/models/kimi-k3")
    compile(fetch["command"][2], "download", "exec")
    assert env_of(verify)["WEIGHTS_DIR"] == f"/models/kimi-k3/models--moonshotai--Kimi-K3/snapshots/{REVISION}"
    assert env_of(server(plans["cluster"]))["HF_HUB_CACHE"] == "/models/kimi-k3"


def test_no_manifest_no_verify_container():
    weights = WeightsContract(revision=REVISION)
    plan = render(contract=ServingContract(ImageContract.parse(IMAGE), weights))
    assert [c["name"] for c in pod_spec(plan)["initContainers"]] == ["fetch-weights"]


def test_pod_identity_reads_exactly_the_weights_prefix(plans):
    plan = plans["internal"]
    policy = json.loads(plan.one("aws:iam/rolePolicy:RolePolicy").plain_inputs["policy"])
    statements = {s["Sid"]: s for s in policy["Statement"]}
    assert set(statements) == {"ReadWeightObjects", "ListWeightPrefix"}
    assert statements["ReadWeightObjects"]["Action"] == ["s3:GetObject"]
    assert statements["ReadWeightObjects"]["Resource"] == ["arn:aws:s3:::model-bucket/kimi-k3/0123456/*"]
    assert statements["ListWeightPrefix"]["Action"] == ["s3:ListBucket"]
    assert statements["ListWeightPrefix"]["Resource"] == ["arn:aws:s3:::model-bucket"]
    assert statements["ListWeightPrefix"]["Condition"] == {"StringLike": {"s3:prefix": ["kimi-k3/0123456/*"]}}
    assert all("*" not in a for s in policy["Statement"] for a in s["Action"])
    association = plan.one("aws:eks/podIdentityAssociation:PodIdentityAssociation").plain_inputs
    assert (association["clusterName"], association["namespace"], association["serviceAccount"]) == ("kimi-k3-dev", "kimi-serving", "kimi")
    assert plans["cluster"].by_type("kimi-k3:index:PodIdentityRole") == []


def test_kms_key_is_added_only_when_given():
    key = "arn:aws:kms:us-east-1:123456789012:key/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
    plan = render(**S3_ARGS, weights_kms_key_arn=key)
    policy = json.loads(plan.one("aws:iam/rolePolicy:RolePolicy").plain_inputs["policy"])
    assert policy["Statement"][-1] == {"Sid": "DecryptWeights", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [key]}


# --- outputs, structure ---------------------------------------------------------------------


def test_outputs(plans):
    outputs = plans["cluster"].outputs
    assert outputs["served_model_name"] == "Kimi-K3"
    assert outputs["image"] == IMAGE
    assert outputs["model_revision"] == REVISION
    assert outputs["namespace"] == "kimi-serving"
    assert outputs["service_name"] == "kimi"


def test_children_are_parented_and_named_after_the_component(plans):
    plan = plans["internal"]
    component = plan.one("kimi-k3:index:VllmServer")
    for resource in plan.children_of(component):
        assert resource.name.startswith("kimi-")
    kinds = {r.type for r in plan.children_of(component)}
    assert "kubernetes:apps/v1:Deployment" in kinds and "kimi-k3:index:PodIdentityRole" in kinds


def test_deployment_does_not_block_pulumi_up_by_default(plans):
    assert obj(plans["cluster"], "Deployment")["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert "pulumi.com/skipAwait" not in obj(render(await_rollout=True), "Deployment")["metadata"]["annotations"]


# --- real schemas and the scanner ---------------------------------------------------------------


def test_every_manifest_passes_the_kubernetes_1_34_schema(plans):
    for _mode, plan in plans.items():
        for manifest in plan.kubernetes_objects():
            assert manifest["metadata"].get("name"), manifest["kind"]
            if manifest["kind"] == "ServiceMonitor":
                continue  # CRD: see test_service_monitor_matches_the_crd_schema
            k8s_checks.validate_manifest(manifest, "1.34")


@pytest.fixture(scope="module")
def checkov_report(plans, tmp_path_factory):
    root = tmp_path_factory.mktemp("vllm-manifests")
    for mode, plan in plans.items():
        k8s_checks.write_manifests(plan.kubernetes_objects(), root / mode)
    return k8s_checks.checkov_scan(root)


def test_checkov_finds_nothing_and_every_skip_has_a_reason(checkov_report, plans):
    failed = [(c["check_id"], c.get("resource"), c.get("file_path")) for c in checkov_report["failed"]]
    assert failed == []
    summary = [r["summary"] for r in checkov_report["raw"]]
    assert sum(s["failed"] for s in summary) == 0 and sum(s["parsing_errors"] for s in summary) == 0
    assert sum(s["passed"] for s in summary) > 100  # it really scanned the three renderings
    for _mode, plan in plans.items():
        for manifest in plan.kubernetes_objects():
            for key, value in (manifest["metadata"].get("annotations") or {}).items():
                if key.startswith("checkov.io/skip"):
                    check, _, reason = value.partition("=")
                    assert check.startswith("CKV") and len(reason) > 20, value


def test_the_kubernetes_provider_in_opts_reaches_every_kubernetes_child():
    seen: dict[str, str] = {}

    def capture(args):
        seen[args.name] = args.provider
        return {}

    kinds = ["kubernetes:core/v1:Namespace", "kubernetes:apps/v1:Deployment", "kubernetes:core/v1:Service", "kubernetes:policy/v1:PodDisruptionBudget", "kubernetes:core/v1:ConfigMap"]
    engine = offline.OfflineEngine(now=NOW, resource_overrides=dict.fromkeys(kinds, capture))

    def program() -> None:
        VllmServer("kimi", VllmServerArgs(**base_args()), opts=in_cluster("gpu-cluster"))

    engine.run(program)
    assert set(seen) == {"kimi-namespace", "kimi-deployment", "kimi-service", "kimi-metrics", "kimi-pdb", "kimi-api-proxy"}
    assert all("pulumi:providers:kubernetes::gpu-cluster" in p for p in seen.values()), seen


def test_the_verify_script_accepts_intact_weights_and_refuses_corrupt_ones(tmp_path):
    import hashlib
    import subprocess

    from kimi_k3.serving.scripts import VERIFY_SCRIPT

    weights = tmp_path / "weights"
    (weights / "sub").mkdir(parents=True)
    files = {"model-00001.safetensors": b"a" * 1000, "sub/config.json": b"{}", "tokenizer.json": b"tok"}
    for rel, data in files.items():
        (weights / rel).write_bytes(data)
    (weights / "SHA256SUMS").write_text("".join(f"{hashlib.sha256(d).hexdigest()}  {rel}\n" for rel, d in files.items()))

    def run() -> subprocess.CompletedProcess:
        env = {"PATH": "/usr/bin:/bin", "WEIGHTS_DIR": str(weights), "SHA256_MANIFEST": "SHA256SUMS", "TMPDIR": str(tmp_path)}
        return subprocess.run(["/bin/sh", "-c", VERIFY_SCRIPT], env=env, capture_output=True, text=True, timeout=60)

    ok = run()
    assert ok.returncode == 0, ok.stderr
    assert "verified against SHA256SUMS (3 files)" in ok.stdout
    (weights / "sub/config.json").write_bytes(b"{ }")
    bad = run()
    assert bad.returncode == 1 and "do not match" in bad.stderr
    (weights / "sub/config.json").unlink()
    assert run().returncode == 1  # a missing file fails too
