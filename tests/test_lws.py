"""Multi-node serving: VllmLeaderWorkerSet and the LWS controller under the offline engine.

The main rendering is a p5en-style replica: TP=8 within a node × PP=2 across nodes,
EFA on. Objects are checked against the LeaderWorkerSet CRD schema (vendored in
tests/data), the Kubernetes 1.34 schemas (strict) and checkov; the leader/worker
scripts run for real (their group gate is Python sockets on loopback) in front of a
fake ``vllm`` binary that records when and how it was started.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pulumi
import pytest

from kimi_k3 import offline
from kimi_k3.addons.lws_controller import LwsController, LwsControllerArgs
from kimi_k3.core import catalog, labels
from kimi_k3.errors import UserError
from kimi_k3.serving import ServingContract, VllmServer, VllmServerArgs
from kimi_k3.serving.lws import EFA_RESOURCE, WORKER_INDEX_LABEL, VllmLeaderWorkerSet, VllmLeaderWorkerSetArgs, multi_node_args
from kimi_k3.serving.scripts import LEADER_SCRIPT, WORKER_SCRIPT
from tests import k8s_checks
from tests.builders import REVISION, S3_URI, in_cluster, serving_contract
from tests.chart_values import chart_defaults, unknown_keys, values_copy_version
from tests.conftest import NOW
from tests.refusals import assert_refused_before_declaring
from tests.seed_deployment import SEED_ARGS, SEED_ENV, flag_values

API_KEY = "sk-test-api-key-lws-51e0"
HF_TOKEN = "hf_test_token_lws_9a1c"
VPC_CIDR = "10.42.0.0/16"
P5EN = "p5en.48xlarge"


def contract(source: str = "s3", pp: int = 2, **engine) -> ServingContract:
    return serving_contract(source, **{"tensor_parallel_size": 8, "pipeline_parallel_size": pp, **engine})


def base_args(**changes) -> dict:
    values = dict(
        contract=contract(),
        api_key=pulumi.Output.secret(API_KEY),
        instance_type=P5EN,
        cluster_name="kimi-k3-dev",
        aws_region="us-east-1",
    )
    values.update(changes)
    return values


def render(**changes) -> offline.PlanResult:
    """Declare one VllmLeaderWorkerSet named ``kimi`` and export its outputs."""

    def program() -> None:
        server = VllmLeaderWorkerSet("kimi", VllmLeaderWorkerSetArgs(**base_args(**changes)), opts=in_cluster())
        for key in ("endpoint_url", "served_model_name", "namespace", "service_name"):
            pulumi.export(key, getattr(server, key))
        pulumi.export("nodes_per_replica", server.nodes_per_replica)

    return offline.OfflineEngine(now=NOW).run(program)


MODES = {
    "s3-internal": dict(exposure="internal", vpc_cidr=VPC_CIDR, allowed_cidrs=("10.0.0.0/8",), replicas=2),
    "hf-cluster": dict(contract=contract("huggingface"), hugging_face_token=pulumi.Output.secret(HF_TOKEN), service_monitor=True),
}


@pytest.fixture(scope="module")
def plans() -> dict[str, offline.PlanResult]:
    return {mode: render(**changes) for mode, changes in MODES.items()}


@pytest.fixture(scope="module")
def plan(plans) -> offline.PlanResult:
    return plans["s3-internal"]


def obj(plan: offline.PlanResult, kind: str, name: str | None = None) -> dict:
    found = [m for m in plan.kubernetes_objects() if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} named {name}"
    return found[0]


def lws(plan: offline.PlanResult) -> dict:
    return obj(plan, "LeaderWorkerSet")


def templates(plan: offline.PlanResult) -> dict[str, dict]:
    t = lws(plan)["spec"]["leaderWorkerTemplate"]
    return {"leader": t["leaderTemplate"], "worker": t["workerTemplate"]}


def container(plan: offline.PlanResult, role: str) -> dict:
    """The engine container of a role (the leader also runs the API proxy sidecar: tests/test_serving_pod.py)."""
    (c,) = [c for c in templates(plan)[role]["spec"]["containers"] if c["name"] != "api-proxy"]
    return c


def env_of(c: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


# --- the group ------------------------------------------------------------------------


def test_one_group_per_replica_of_pipeline_parallel_size_nodes_restarting_together(plan):
    spec = lws(plan)["spec"]
    assert lws(plan)["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert spec["replicas"] == 2
    assert spec["leaderWorkerTemplate"]["size"] == 2  # = pipeline_parallel_size
    assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert spec["startupPolicy"] == "LeaderCreated"  # the leader waits for its workers: they must not wait for it to be ready
    assert spec["rolloutStrategy"]["rollingUpdateConfiguration"] == {"maxUnavailable": 1, "maxSurge": 0}
    assert plan.outputs["nodes_per_replica"] == 2


def test_group_size_follows_the_pipeline_stages():
    plan = render(contract=contract(pp=4))
    assert lws(plan)["spec"]["leaderWorkerTemplate"]["size"] == 4
    assert flag_values(container(plan, "leader")["args"])["--pipeline-parallel-size"] == "4"


def test_leader_runs_vllms_own_multi_node_mode_with_every_seed_flag(plans):
    leader = container(plans["hf-cluster"], "leader")
    assert leader["command"][:2] == ["/bin/sh", "-c"]
    script = leader["command"][2]
    assert 'exec vllm serve "$@"' in script and "ray" not in script.lower().replace("array", "")
    got = flag_values(leader["args"])
    assert flag_values(SEED_ARGS).items() <= got.items()
    assert got["--pipeline-parallel-size"] == "2" and got["--tensor-parallel-size"] == "8"
    # vLLM 0.27.1's multiprocessing executor across nodes (vllm/config/parallel.py nnodes/node_rank/master_addr/master_port).
    assert (got["--distributed-executor-backend"], got["--nnodes"], got["--node-rank"]) == ("mp", "2", "0")
    assert (got["--master-addr"], got["--master-port"]) == ("$(LWS_LEADER_ADDRESS)", "29501")
    # vLLM on loopback behind the proxy sidecar, which owns the API port.
    assert (got["--host"], got["--port"], got["--revision"]) == ("127.0.0.1", "8001", REVISION)
    assert got["--shutdown-timeout"] == "1800"
    assert SEED_ENV.items() <= env_of(leader).items()
    assert env_of(leader)["VLLM_HOST_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert leader["ports"] == [{"name": "dist-master", "containerPort": 29501, "protocol": "TCP"}, {"name": "group-gate", "containerPort": 29600, "protocol": "TCP"}]
    proxy = next(c for c in templates(plans["hf-cluster"])["leader"]["spec"]["containers"] if c["name"] == "api-proxy")
    assert {"name": "http", "containerPort": 8000, "protocol": "TCP"} in proxy["ports"]
    s3 = flag_values(container(plans["s3-internal"], "leader")["args"])
    assert s3["--model"] == "/models/kimi-k3"


def test_vllm_0_27_1_has_every_multi_node_flag_the_group_uses(plan):
    names = json.loads((Path(__file__).parent / "data" / "vllm-0.27.1-names.json").read_text())["flags"]
    added = {a for a in [*multi_node_args(2, node_rank="0"), "--headless"] if a.startswith("--")}
    assert added == {"--distributed-executor-backend", "--nnodes", "--node-rank", "--master-addr", "--master-port", "--headless"}
    assert added <= set(names)
    for role in ("leader", "worker"):
        assert added - {"--headless"} <= set(container(plan, role)["args"]), role


def test_workers_run_headless_vllm_with_their_node_rank_and_serve_no_api(plan):
    worker = container(plan, "worker")
    leader = container(plan, "leader")
    script = worker["command"][2]
    assert worker["command"][:2] == ["/bin/sh", "-c"] and 'exec vllm serve "$@"' in script and "LWS_LEADER_ADDRESS" in script
    got = flag_values(worker["args"])
    assert worker["args"][-1] == "--headless" and got["--node-rank"] == "$(LWS_WORKER_INDEX)"
    # The same engine configuration as the leader's: only the node rank and headless differ.
    assert {k: v for k, v in got.items() if k not in ("--node-rank", "--headless")} == {k: v for k, v in flag_values(leader["args"]).items() if k != "--node-rank"}
    assert "ports" not in worker or all(p["containerPort"] != 8000 for p in worker["ports"])
    env = env_of(worker)
    assert "VLLM_API_KEY" not in env and env["DIST_MASTER_PORT"] == "29501" and env["GROUP_GATE_PORT"] == "29600"
    assert SEED_ENV.items() <= env.items()  # the same engine environment on every node
    assert not any(k.startswith("RAY_") for k in {**env, **env_of(leader)})


# --- the scripts, for real: the group gate on loopback, a fake vllm ------------------------------------


def fake_vllm(tmp_path: Path) -> dict[str, str]:
    """A ``vllm`` that appends ``<monotonic time> <node> vllm <args>`` to a log; the real python3 beside it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    (bin_dir / "vllm").write_text(f"#!/bin/sh\necho \"$({sys.executable} -c 'import time; print(time.monotonic())') $NODE vllm $*\" >> {log}\n")
    (bin_dir / "vllm").chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "LOG": str(log)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_env(env: dict[str, str], port: int, node: str, size: int = 3, timeout_s: int = 60) -> dict[str, str]:
    return {
        "PATH": env["PATH"], "NODE": node, "GROUP_GATE_PORT": str(port), "DIST_MASTER_PORT": "29501", "GROUP_JOIN_TIMEOUT_S": str(timeout_s),
        "GROUP_POLL_S": "0.2", "LWS_GROUP_SIZE": str(size), "LWS_LEADER_ADDRESS": "127.0.0.1", "LWS_WORKER_INDEX": node,
    }


def start_script(script: str, env: dict[str, str], args: list[str] = ()) -> subprocess.Popen:
    return subprocess.Popen(["/bin/sh", "-c", script, "vllm-node", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_group_starts_vllm_on_every_node_only_once_every_worker_has_its_weights(tmp_path, plan):
    env, port = fake_vllm(tmp_path), _free_port()
    args = container(plan, "leader")["args"]
    leader = start_script(LEADER_SCRIPT, group_env(env, port, "0"), args)
    early = start_script(WORKER_SCRIPT, group_env(env, port, "1"), ["--headless"])
    time.sleep(1.5)  # worker 2 is still staging its weights: nobody may start
    assert not Path(env["LOG"]).exists()
    t_late = time.monotonic()
    late = start_script(WORKER_SCRIPT, group_env(env, port, "2"), ["--headless"])
    for process in (leader, early, late):
        out, err = process.communicate(timeout=30)
        assert process.returncode == 0, (out, err)
    calls = [line.split(" ", 3) for line in Path(env["LOG"]).read_text().splitlines()]
    assert sorted(node for _, node, _, _ in calls) == ["0", "1", "2"]
    started = [float(at) for at, _, _, _ in calls]
    assert min(started) >= t_late and max(started) - min(started) < 5  # all ranks within seconds of each other
    leader_call = next(rest for _, node, _, rest in calls if node == "0")
    assert leader_call == "serve " + " ".join(args)  # the container's arguments, untouched


def test_the_leader_gives_up_when_a_worker_never_comes(tmp_path):
    env, port = fake_vllm(tmp_path), _free_port()
    leader = start_script(LEADER_SCRIPT, group_env(env, port, "0", size=2, timeout_s=1))
    _, err = leader.communicate(timeout=30)
    assert leader.returncode == 1 and "only 0 of 1 workers staged their weights within 1s" in err
    assert not Path(env["LOG"]).exists()


def test_a_worker_gives_up_when_the_leader_never_opens_its_gate(tmp_path):
    env, port = fake_vllm(tmp_path), _free_port()
    worker = start_script(WORKER_SCRIPT, group_env(env, port, "1", timeout_s=1))
    _, err = worker.communicate(timeout=30)
    assert worker.returncode == 1 and "did not let worker 1 in within 1s" in err
    assert not Path(env["LOG"]).exists()


# --- resources, EFA, placement ----------------------------------------------------------------


def test_every_pod_takes_a_whole_node_with_its_efa_interfaces(plan):
    for role in ("leader", "worker"):
        resources = container(plan, role)["resources"]
        assert resources["limits"][EFA_RESOURCE] == "16" and resources["limits"]["nvidia.com/gpu"] == "8", role
        assert {k: resources["requests"][k] for k in resources["limits"]} == resources["limits"], role  # requests = limits
        env = env_of(container(plan, role))
        assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1" and env["NCCL_SOCKET_IFNAME"] == "eth0", role
        spec = templates(plan)[role]["spec"]
        assert spec["nodeSelector"] == {**labels.GPU_NODE_SELECTOR, labels.INSTANCE_TYPE_LABEL: P5EN}
        assert dict(labels.GPU_TOLERATION) in spec["tolerations"]
        shm = {v["name"]: v for v in spec["volumes"]}["shm"]
        assert shm["emptyDir"]["medium"] == "Memory"
        assert {"name": "shm", "mountPath": "/dev/shm"} in container(plan, role)["volumeMounts"]


def test_efa_count_follows_the_instance_type_and_can_be_turned_off():
    b300 = render(instance_type="p6-b300.48xlarge")
    assert container(b300, "worker")["resources"]["limits"][EFA_RESOURCE] == str(catalog.INSTANCE_TYPES["p6-b300.48xlarge"].efa_interfaces)
    off = render(efa_enabled=False)
    for role in ("leader", "worker"):
        assert EFA_RESOURCE not in container(off, role)["resources"]["limits"]
        assert "FI_PROVIDER" not in env_of(container(off, role))
    debug = render(nccl_env={"NCCL_DEBUG": "INFO"})
    assert env_of(container(debug, "worker"))["NCCL_DEBUG"] == "INFO"


def test_weights_are_staged_by_every_pod_on_its_own_node(plans):
    for mode, plan in plans.items():
        leader, worker = (templates(plan)[r]["spec"] for r in ("leader", "worker"))
        assert [c["name"] for c in leader["initContainers"]] == ["fetch-weights", "verify-weights"], mode
        assert worker["initContainers"] == leader["initContainers"], mode
        assert {v["name"]: v for v in worker["volumes"]}["models"]["emptyDir"] == {"sizeLimit": "1794G"}
        assert {"name": "models", "mountPath": "/models/kimi-k3"} in container(plan, "worker")["volumeMounts"]
    fetch = templates(plans["s3-internal"])["worker"]["spec"]["initContainers"][0]
    assert env_of(fetch)["WEIGHTS_S3_URI"] == S3_URI
    sa = obj(plans["s3-internal"], "ServiceAccount")["metadata"]["name"]
    assert all(templates(plans["s3-internal"])[r]["spec"]["serviceAccountName"] == sa for r in ("leader", "worker"))
    association = plans["s3-internal"].one("aws:eks/podIdentityAssociation:PodIdentityAssociation").plain_inputs
    assert association["serviceAccount"] == sa


def test_hugging_face_token_reaches_only_the_download_containers(plans):
    for role in ("leader", "worker"):
        spec = templates(plans["hf-cluster"])[role]["spec"]
        assert env_of(spec["initContainers"][0])["HF_TOKEN"] == {"secretKeyRef": {"name": "kimi-hf-token", "key": "key"}}
        assert "HF_TOKEN" not in env_of(spec["containers"][0])


# --- probes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("ready_timeout_s", [3600, 5400])
def test_probes_outlast_the_group_join_and_the_engine_load(ready_timeout_s):
    plan = render(contract=contract(ready_timeout_s=ready_timeout_s), weights_staging_timeout_s=5000)
    leader = container(plan, "leader")
    startup = leader["startupProbe"]
    assert "http://127.0.0.1:8001/health" in startup["exec"]["command"][2]
    assert startup["failureThreshold"] * startup["periodSeconds"] >= 5000 + ready_timeout_s + 600
    assert env_of(leader)["GROUP_JOIN_TIMEOUT_S"] == "5000"
    # The recipe's PP profile lets a step run 1800 s (VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS): liveness waits that long plus a margin.
    liveness = leader["livenessProbe"]
    assert "http://127.0.0.1:8001/health" in liveness["exec"]["command"][2]
    assert liveness["failureThreshold"] * liveness["periodSeconds"] >= int(env_of(leader).get("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "300")) + 120
    assert "/v1/models" in leader["readinessProbe"]["exec"]["command"][2]
    worker = container(plan, "worker")
    startup = worker["startupProbe"]
    assert "DIST_MASTER_PORT" in startup["exec"]["command"][2]  # the leader's distributed store answers
    assert startup["failureThreshold"] * startup["periodSeconds"] >= 5000 + ready_timeout_s
    assert worker["readinessProbe"]["exec"] == worker["livenessProbe"]["exec"] == startup["exec"]


# --- service and network ------------------------------------------------------------------------


def test_the_service_sends_api_traffic_to_leaders_only(plans):
    plan = plans["s3-internal"]
    svc = obj(plan, "Service", "kimi")
    selector = svc["spec"]["selector"]
    assert selector[WORKER_INDEX_LABEL] == "0"
    rest = {k: v for k, v in selector.items() if k != WORKER_INDEX_LABEL}
    for role in ("leader", "worker"):
        assert rest.items() <= templates(plan)[role]["metadata"]["labels"].items(), role
    # the LWS controller names its headless Service after the set: it must not be the API Service
    assert lws(plan)["metadata"]["name"] != svc["metadata"]["name"]
    assert svc["spec"]["type"] == "LoadBalancer"
    assert plans["hf-cluster"].outputs["endpoint_url"] == "http://kimi.kimi-serving.svc.cluster.local:8000/v1"
    assert obj(plan, "NetworkPolicy", "kimi-server")["spec"]["podSelector"]["matchLabels"] == selector


def test_group_pods_reach_each_other_on_every_port(plan):
    spec = obj(plan, "NetworkPolicy", "kimi-group")["spec"]
    selector = {k: v for k, v in obj(plan, "Service", "kimi")["spec"]["selector"].items() if k != WORKER_INDEX_LABEL}
    assert spec["podSelector"]["matchLabels"] == selector
    (ingress,) = spec["ingress"]
    assert ingress == {"from": [{"podSelector": {"matchLabels": selector}}]}  # no ports: all of them
    assert spec["egress"][0] == {"to": [{"podSelector": {"matchLabels": selector}}]}
    ports = {(p["port"], p["protocol"]) for rule in spec["egress"][1:] for p in rule["ports"]}
    assert ports == {(53, "UDP"), (53, "TCP"), (443, "TCP"), (80, "TCP")}  # DNS, S3, Pod Identity Agent: workers stage weights too
    deny = obj(plan, "NetworkPolicy", "kimi-default-deny")["spec"]
    assert deny["podSelector"] == {} and "ingress" not in deny


def test_disruption_budget_and_metrics(plans):
    pdb = obj(plans["s3-internal"], "PodDisruptionBudget")["spec"]
    assert pdb["maxUnavailable"] == 1
    assert WORKER_INDEX_LABEL not in pdb["selector"]["matchLabels"]  # covers leaders and workers
    assert templates(plans["s3-internal"])["leader"]["metadata"]["annotations"]["prometheus.io/port"] == "9090"  # the proxy's metrics port
    assert "annotations" not in templates(plans["s3-internal"])["worker"]["metadata"]
    monitor = obj(plans["hf-cluster"], "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"


# --- security -------------------------------------------------------------------------------


def test_every_container_is_locked_down_like_the_single_node_server(plans):
    for mode, plan in plans.items():
        for role, template in templates(plan).items():
            spec = template["spec"]
            assert spec["securityContext"]["runAsNonRoot"] is True and spec["automountServiceAccountToken"] is False
            for c in spec["initContainers"] + spec["containers"]:
                sc = c["securityContext"]
                assert sc["allowPrivilegeEscalation"] is False and sc["privileged"] is False, (mode, role, c["name"])
                assert sc["capabilities"] == {"drop": ["ALL"]} and sc["readOnlyRootFilesystem"] is True
                assert ({"/tmp"} if c["name"] == "api-proxy" else {"/tmp", "/home/vllm"}) <= {m["mountPath"] for m in c["volumeMounts"]}
            assert "hostPath" not in json.dumps(spec)
        assert obj(plan, "Namespace")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_api_key_is_a_secret_key_ref_on_the_leader_only(plan):
    assert env_of(container(plan, "leader"))["VLLM_API_KEY"] == {"secretKeyRef": {"name": "kimi-api-key", "key": "key"}}
    assert API_KEY not in json.dumps(plan.one("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet").plain_inputs)
    assert offline.contains_secret(plan.one("kubernetes:core/v1:Secret", "kimi-api-key").inputs["stringData"])


def test_every_manifest_passes_its_schema(plans):
    for plan in plans.values():
        for manifest in plan.kubernetes_objects():
            if manifest["kind"] == "ServiceMonitor":
                continue  # CRD schema excerpt checked in test_vllm_server
            k8s_checks.validate_manifest(manifest, "1.34")
    broken = copy.deepcopy(lws(plans["s3-internal"]))
    broken["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "RecreateGroup"
    with pytest.raises(jsonschema.ValidationError):
        k8s_checks.validate_manifest(broken, "1.34")


def _as_pods(plan: offline.PlanResult) -> list[dict]:
    """checkov does not know LeaderWorkerSet: scan its two pod templates as Pods too."""
    out = []
    for role, template in templates(plan).items():
        metadata = {**template["metadata"], "name": f"kimi-lws-{role}", "namespace": "kimi-serving"}
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]})
    return out


@pytest.fixture(scope="module")
def checkov_report(plans, tmp_path_factory):
    root = tmp_path_factory.mktemp("lws-manifests")
    for mode, plan in plans.items():
        k8s_checks.write_manifests(plan.kubernetes_objects() + _as_pods(plan), root / mode)
    # Control: the leader pod without its skip annotations must fail CKV_K8S_35, proving the templates are scanned.
    control = _as_pods(plans["s3-internal"])[0]
    control["metadata"] = {k: v for k, v in control["metadata"].items() if k != "annotations"} | {"name": "control"}
    k8s_checks.write_manifests([control], root / "control")
    return k8s_checks.checkov_scan(root)


def test_checkov_finds_nothing_and_every_skip_has_a_reason(checkov_report, plans):
    failed = [(c["check_id"], c.get("resource")) for c in checkov_report["failed"]]
    assert failed == [("CKV_K8S_35", "Pod.kimi-serving.control")]  # only the unannotated control
    summary = [r["summary"] for r in checkov_report["raw"]]
    assert sum(s["parsing_errors"] for s in summary) == 0 and sum(s["passed"] for s in summary) > 100
    assert sum(s["skipped"] for s in summary) >= 3  # two leader pods and the Hugging Face worker pod
    for plan in plans.values():
        for manifest in plan.kubernetes_objects() + _as_pods(plan):
            for key, value in (manifest["metadata"].get("annotations") or {}).items():
                if key.startswith("checkov.io/skip"):
                    check, _, reason = value.partition("=")
                    assert check.startswith("CKV") and len(reason) > 20, value


# --- refusals -----------------------------------------------------------------------------


def test_a_single_node_contract_is_refused_with_a_pointer_to_vllm_server():
    assert_refused_before_declaring(lambda: VllmLeaderWorkerSet("kimi", VllmLeaderWorkerSetArgs(**base_args(contract=contract(pp=1)))), "use VllmServer")


def test_vllm_server_refuses_multi_node_and_points_here():
    assert_refused_before_declaring(lambda: VllmServer("kimi", VllmServerArgs(**base_args())), "VllmLeaderWorkerSet")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"contract": contract(extra_args=("--distributed-executor-backend=mp",))}, "--distributed-executor-backend"),
        ({"efa_interfaces": 17}, "efa_interfaces 17"),
        ({"efa_interfaces": 4, "efa_enabled": False}, "efa_enabled is false"),
        ({"nccl_env": {"HOME": "/root"}}, "nccl_env may not set HOME"),
        ({"nccl_env": {"bad name": "1"}}, "nccl_env entry"),
        ({"api_key": None}, "api_key is required"),
        ({"contract": contract(tensor_parallel_size=4)}, "tensor_parallel_size=4"),
        ({"exposure": "internal"}, "vpc_cidr is required"),
    ],
)
def test_bad_args_stop_before_anything_is_declared(changes, message):
    assert_refused_before_declaring(lambda: VllmLeaderWorkerSet("kimi", VllmLeaderWorkerSetArgs(**base_args(**changes))), message)


def test_children_are_parented_named_after_the_component_and_use_the_provider_in_opts():
    seen: dict[str, str] = {}

    def capture(args):
        seen[args.name] = args.provider
        return {}

    kinds = ["kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", "kubernetes:core/v1:Service", "kubernetes:networking.k8s.io/v1:NetworkPolicy"]
    engine = offline.OfflineEngine(now=NOW, resource_overrides=dict.fromkeys(kinds, capture))

    def program() -> None:
        VllmLeaderWorkerSet("kimi", VllmLeaderWorkerSetArgs(**base_args()), opts=in_cluster("gpu-cluster"))

    result = engine.run(program)
    assert set(seen) == {"kimi-lws", "kimi-service", "kimi-metrics", "kimi-default-deny", "kimi-server", "kimi-group"}
    assert all("pulumi:providers:kubernetes::gpu-cluster" in p for p in seen.values()), seen
    component = result.one("kimi-k3:index:VllmLeaderWorkerSet")
    assert all(r.name.startswith("kimi-") for r in result.children_of(component))


def test_rollout_wait_is_opt_in(plan):
    assert lws(plan)["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    waited = lws(render(await_rollout=True))["metadata"]["annotations"]
    assert waited["pulumi.com/waitFor"] == "condition=Available" and "pulumi.com/skipAwait" not in waited


# --- the LWS controller ----------------------------------------------------------------------


RELEASE = "kubernetes:helm.sh/v3:Release"


def controller_plan(**changes) -> offline.PlanResult:
    def program() -> None:
        LwsController("lws", dataclasses.replace(LwsControllerArgs(), **changes), opts=in_cluster("cluster-k8s"))

    return offline.OfflineEngine(now=NOW).run(program)


@pytest.fixture(scope="module")
def controller() -> offline.PlanResult:
    return controller_plan()


def test_controller_is_the_pinned_oci_chart_on_the_system_nodes(controller):
    release = controller.one(RELEASE, "lws-release")
    inputs = release.plain_inputs
    assert inputs["chart"] == "oci://registry.k8s.io/lws/charts/lws" and "repositoryOpts" not in inputs
    assert inputs["version"] == catalog.LWS_CHART.version == "0.10.0"
    assert inputs["namespace"] == "lws-system"
    values = inputs["values"]
    assert values["nodeSelector"] == dict(labels.SYSTEM_NODE_LABELS)
    assert values["image"]["manager"] == {"repository": "registry.k8s.io/lws/lws", "tag": "v0.10.0", "pullPolicy": "IfNotPresent"}
    assert values["replicaCount"] == 2
    ns = obj(controller, "Namespace", "lws-system")
    k8s_checks.validate_manifest(ns, "1.34")


def test_controller_values_exist_in_the_chart_and_the_copy_matches_the_pin(controller):
    values = controller.one(RELEASE, "lws-release").plain_inputs["values"]
    assert unknown_keys(values, chart_defaults("lws")) == []
    assert values_copy_version("lws") == catalog.LWS_CHART.version
    typo = controller_plan(extra_values={"nodeSelecter": {"a": "b"}}).one(RELEASE, "lws-release").plain_inputs["values"]
    assert unknown_keys(typo, chart_defaults("lws")) == ["nodeSelecter"]


def test_controller_children_use_the_provider_in_opts():
    seen: dict[str, str] = {}

    def capture(args):
        seen[args.name] = args.provider
        return {}

    engine = offline.OfflineEngine(now=NOW, resource_overrides={RELEASE: capture, "kubernetes:core/v1:Namespace": capture})

    def program() -> None:
        LwsController("lws", LwsControllerArgs(), opts=in_cluster("cluster-k8s"))

    engine.run(program)
    assert set(seen) == {"lws-release", "lws-namespace"}
    assert all("pulumi:providers:kubernetes::cluster-k8s" in p for p in seen.values())


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"version": "latest"}, "chart version"), ({"namespace": "kube-system"}, "namespace"), ({"replicas": 0}, "replicas"), ({"node_selector": {}}, "node_selector")],
)
def test_controller_bad_args_are_refused(changes, message):
    engine = offline.OfflineEngine(now=NOW)
    with pytest.raises(UserError, match=message):
        engine.run(lambda: LwsController("lws", dataclasses.replace(LwsControllerArgs(), **changes), opts=in_cluster("p")))
    assert [r for r in engine.resources if r.type != "pulumi:providers:kubernetes"] == []
