"""peerWeightsTransfer: a new pod's weights from a serving peer over EFA with ModelExpress v0.5.1.

The settings' refusals; the rendered objects (kubernetes-validate --strict, checkov, Pod Security, the EFA request against the
instance's interfaces, the EFA security group); the wrapper's peer-or-cold decision run for real (a real TCP listener as the
peer's Service, a stand-in ``vllm`` printing ModelExpress's own lines); the log lines of the vendored client at the tag, rendered
from its f-strings; the estimate following the key."""

from __future__ import annotations

import ast
import os
import socket
import stat
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from kimi_k3 import offline
from kimi_k3.bringup import startup
from kimi_k3.core import catalog
from kimi_k3.errors import SettingsError, UserError
from kimi_k3.weights import estimate, node_sync, peer_transfer
from kimi_k3.weights.serving_pod import ServingStartup
from tests.conftest import DATA, NOW, ROOT, fixture_for
from tests.k8s_checks import checkov_scan, validate_manifest, write_manifests

MX = DATA / "modelexpress-v0.5.1"
ON = {"kimi-k3:peerWeightsTransfer": True, "kimi-k3:efaEnabled": True, "kimi-k3:pipelinedWeightsLoad": False, "kimi-k3:engineSnapshot": False,
      "kimi-k3:engineSnapshotAgentImage": None}
"""The committed prod stack with the peer path on (EFA on; the pipelined loader and the engine snapshot off: the key excludes both)."""


@pytest.fixture(scope="module")
def peer_plan() -> offline.PlanResult:
    return offline.run_stack("prod", now=NOW, reservation=lambda s: fixture_for(s, availability_zone="us-west-2b", state="active"), config_overrides=ON)


def _objects(plan: offline.PlanResult) -> dict[tuple[str, str], dict]:
    return {(m["kind"], m["metadata"]["name"]): m for m in plan.kubernetes_objects()}


def _engine(plan: offline.PlanResult) -> tuple[dict, dict]:
    workload = _objects(plan)[("StatefulSet", "kimi-k3-serving")]
    (engine,) = [c for c in workload["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm"]
    return workload, engine


# --- the settings key and its refusals ---------------------------------------------------------------------------------

def _prod(**changes):
    """The committed prod stack's settings with :data:`ON` and ``changes`` (keys without the project prefix)."""
    from kimi_k3.stack import project, wire
    from kimi_k3.stack.settings import from_values

    config = project.read_stack_config(project.find_project(None, ROOT), "prod")
    values = {**config.values, **ON, **{f"kimi-k3:{k}": (v if isinstance(v, str) else wire.to_wire(v)) for k, v in changes.items()}}
    values = {k: v for k, v in values.items() if v is not None}
    return from_values(values, config.secret_keys, stack="prod")


def test_the_committed_stacks_leave_it_off_and_prod_accepts_it_with_its_requirements():
    from kimi_k3.stack import project, time_to_serve
    from kimi_k3.stack.settings import load_settings

    for stack in ("prod", "dev"):
        assert load_settings(project.find_project(None, ROOT), stack).time_to_serve.peer_transfer is False
    settings = _prod()
    assert settings.time_to_serve.peer_transfer is True
    assert time_to_serve.serving_startup(settings, multi_node=False).peer_transfer is True
    assert time_to_serve.startup_inputs(settings).peer_transfer is True


@pytest.mark.parametrize("changes, message", [
    (dict(efaEnabled=False), r"kimi-k3:peerWeightsTransfer: True is not accepted; needs EFA on the GPU nodes .*\(kimi-k3:efaEnabled\)"),
    (dict(pipelinedWeightsLoad=True), r"kimi-k3:peerWeightsTransfer: True is not accepted; both set vLLM's --load-format, and VLLM_PLUGINS=modelexpress stops the kimi_k3_pipelined plugin .*\(kimi-k3:pipelinedWeightsLoad\)"),
    (dict(replicas=1), r"kimi-k3:peerWeightsTransfer: True is not accepted; needs 2 or more replicas \(1\).*\(kimi-k3:replicas\)"),
    (dict(weightsSyncSidecar=False), r"kimi-k3:peerWeightsTransfer: True is not accepted; needs the sync as a sidecar.*\(kimi-k3:weightsSyncSidecar\)"),
    (dict(engineSnapshot=True, engineSnapshotAgentImage="210987654321.dkr.ecr.us-west-2.amazonaws.com/kimi-k3-snapshot-agent@sha256:" + "2e" * 32),
     r"kimi-k3:peerWeightsTransfer: True is not accepted; not with the engine snapshot: on the peer path this wrapper stays the parent of vLLM.*\(kimi-k3:engineSnapshot\)"),
    (dict(weightsSha256Manifest=""), r"kimi-k3:peerWeightsTransfer: True is not accepted; needs a sha256 manifest.*\(kimi-k3:weightsSha256Manifest\)"),
])
def test_the_key_is_refused_unless_its_requirements_hold(changes, message):
    with pytest.raises(SettingsError, match=message):
        _prod(**changes)


def test_the_rules_refuse_every_requirement_apart():
    ok = dict(replicas=2, pipeline_parallel_size=1, node_local_weights=True, sync_sidecar=True, image="r/vllm@sha256:" + "a" * 64, efa_enabled=True,
              efa_interfaces=16, pipelined_load=False, sha256_manifest="SHA256SUMS", engine_snapshot=False)
    assert peer_transfer.stack_problems(**ok) == []
    assert peer_transfer.stack_problems(**{**ok, "replicas": 0}) == []  # one per reserved node: resolved at deploy time
    for field, value in (("pipeline_parallel_size", 2), ("node_local_weights", False), ("sha256_manifest", None), ("efa_interfaces", 0)):
        assert [f for f, _ in peer_transfer.stack_problems(**{**ok, field: value})] == [field]
    ((field, why),) = peer_transfer.stack_problems(**{**ok, "image": "vllm/vllm-openai:v0.27.1"})  # prod's settings refuse it first (servingImage)
    assert field == "image" and "ModelExpress client v0.5.1 and NIXL's libfabric plugin" in why


def test_the_component_refuses_it_without_node_local_weights_or_beside_the_pipelined_loader():
    with pytest.raises(UserError, match=r"peer_transfer needs node_local_storage_class and sync_sidecar"):
        ServingStartup(peer_transfer=True, sync_sidecar=True)
    with pytest.raises(UserError, match=r"peer_transfer and pipelined_load both set vLLM's --load-format"):
        ServingStartup(peer_transfer=True, sync_sidecar=True, node_local_storage_class="local", pipelined_load=True)
    with pytest.raises(UserError, match=r"peer_transfer and engine_snapshot are not accepted together; not with the engine snapshot"):
        ServingStartup(peer_transfer=True, sync_sidecar=True, node_local_storage_class="local", engine_snapshot=True)


# --- what is rendered -------------------------------------------------------------------------------------------------

def test_the_engine_loads_with_modelexpress_over_every_efa_interface_of_the_node(peer_plan):
    workload, engine = _engine(peer_plan)
    env = {e["name"]: e.get("value") for e in engine["env"]}
    assert engine["args"][engine["args"].index("--load-format") + 1] == "modelexpress" and engine["args"].count("--load-format") == 1
    assert env["VLLM_PLUGINS"] == "modelexpress" and env["MX_METADATA_BACKEND"] == "k8s-service" and env["MX_K8S_SERVICE_PATTERN"] == "kimi-k3-serving-peers"
    assert env["MX_NIXL_BACKEND"] == "LIBFABRIC" and env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert env["MX_MODEL_REVISION"] == peer_plan.settings.serving.contract.weights.revision
    assert env["WEIGHTS_MARKER"] == f"{peer_plan.settings.serving.contract.weights.mount_path.rstrip('/')}/{node_sync.WEIGHTS_MARKER}"
    assert "peer-start" in engine["command"] and engine["command"][engine["command"].index("peer-start") + 1:][:2] == ["/bin/sh", "-c"]
    # the instance's EFA interfaces (catalog: p6-b300 has 16), requested = limited; more never schedules
    efa = catalog.INSTANCE_TYPES[peer_plan.settings.capacity.instance_type].efa_interfaces
    assert efa == 16
    assert engine["resources"]["requests"]["vpc.amazonaws.com/efa"] == engine["resources"]["limits"]["vpc.amazonaws.com/efa"] == str(efa)
    assert peer_transfer.efa_request_problem(efa + 1, efa, "p6-b300.48xlarge") == "17 EFA interfaces requested; p6-b300.48xlarge has 16: expected 1..16"
    assert workload["spec"]["template"]["metadata"]["labels"][peer_transfer.PEER_KEY_LABEL] == env["PEER_KEY"] and len(env["PEER_KEY"]) == 20


def test_the_peers_service_selects_the_serving_pods_of_the_same_key_with_one_port_per_rank(peer_plan):
    objects = _objects(peer_plan)
    workload, _ = _engine(peer_plan)
    labels = workload["spec"]["template"]["metadata"]["labels"]
    service = objects[("Service", "kimi-k3-serving-peers")]
    assert service["spec"]["selector"][peer_transfer.PEER_KEY_LABEL] == labels[peer_transfer.PEER_KEY_LABEL]
    assert all(labels[k] == v for k, v in service["spec"]["selector"].items())
    assert [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(f"rank-{r}", 6555 + r, 6555 + r) for r in range(8)]
    # the upstream multi-GPU-per-pod shape: rank-R on 6555 + R (examples/k8s_service_sources @ v0.5.1, vendored)
    upstream = (MX / "k8s_service_sources--sources-tp2-single-pod.yaml").read_text()
    assert "- name: rank-1\n      port: 6556\n      targetPort: 6556" in upstream
    policy = objects[("NetworkPolicy", "kimi-k3-serving-peers")]
    ports = sorted(p["port"] for p in policy["spec"]["ingress"][0]["ports"])
    assert ports == [*range(5555, 5563), *range(6555, 6563)] and policy["spec"]["egress"][0]["to"] == policy["spec"]["ingress"][0]["from"]


def test_a_pod_of_another_revision_or_image_is_no_peer():
    base = dict(image="r/vllm@sha256:" + "a" * 64, model_revision="3f7c", engine_args=["--tensor-parallel-size", "8"], engine_env={"A": "1"})
    key = peer_transfer.peer_key(**base)
    assert len(key) == 20 and key == peer_transfer.peer_key(**base)
    assert peer_transfer.peer_key(**{**base, "model_revision": "9e1d"}) != key
    assert peer_transfer.peer_key(**{**base, "image": "r/vllm@sha256:" + "b" * 64}) != key


def test_the_engine_adds_no_capability_so_restricted_pod_security_admits_it_and_ipc_lock_would_not_be(peer_plan):
    objects = _objects(peer_plan)
    namespace = objects[("Namespace", "kimi-serving")]
    level = namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    assert level == "restricted"
    _, engine = _engine(peer_plan)
    assert peer_transfer.capability_problem(engine["securityContext"]["capabilities"].get("add", []), level) is None
    # the upstream EFA example adds IPC_LOCK (vendored vllm-aws-efa.yaml): refused by restricted and by baseline
    assert "- IPC_LOCK" in (MX / "p2p_transfer_k8s--client--vllm--aws_efa--vllm-aws-efa.yaml").read_text()
    assert peer_transfer.capability_problem(["IPC_LOCK"], "restricted") == "capabilities IPC_LOCK are refused by Pod Security 'restricted' (allowed: NET_BIND_SERVICE)"
    assert peer_transfer.capability_problem(["IPC_LOCK"], "baseline") is not None and peer_transfer.capability_problem(["IPC_LOCK"], "privileged") is None


def test_the_gpu_nodes_have_the_efa_security_group_open_to_itself(peer_plan):
    rules = {r.type.rsplit(":", 1)[1]: r.plain_inputs for r in peer_plan.resources if "efa" in r.name.lower() and "Rule" in r.type}
    assert set(rules) == {"SecurityGroupIngressRule", "SecurityGroupEgressRule"}, rules
    for rule in rules.values():  # all traffic, to and from the group itself (EC2 user guide, efa-start)
        assert rule["ipProtocol"] == "-1" and rule["referencedSecurityGroupId"] == rule["securityGroupId"]
    releases = [r for r in peer_plan.by_type("kubernetes:helm.sh/v3:Release") if "efa-device-plugin" in r.name]
    assert len(releases) == 1  # the EFA device plugin advertises vpc.amazonaws.com/efa (efaEnabled)
    lt = peer_plan.one("aws:ec2/launchTemplate:LaunchTemplate", "gpu-lt").plain_inputs
    efa_only = [i for i in lt["networkInterfaces"] if i.get("interfaceType") == "efa-only"]
    assert len(efa_only) == 16 and all(next(iter(rules.values()))["securityGroupId"] in i["securityGroups"] for i in efa_only)


def test_the_rendered_objects_pass_strict_validation_and_checkov(peer_plan, tmp_path):
    objects = _objects(peer_plan)
    picked = [objects[("Service", "kimi-k3-serving-peers")], objects[("NetworkPolicy", "kimi-k3-serving-peers")], objects[("StatefulSet", "kimi-k3-serving")]]
    for manifest in picked:
        validate_manifest(manifest, peer_plan.settings.cluster.version)
    write_manifests(picked, tmp_path)
    report = checkov_scan(tmp_path)
    assert report["failed"] == [], [(c["check_id"], c["resource"]) for c in report["failed"]]


# --- the log lines of the vendored client, rendered from its own f-strings ----------------------------------------------

def _render(path: Path, marker: str, **names) -> str:
    """The message of the ``logger.*`` call in ``path`` whose f-string holds ``marker``, evaluated with ``names``."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("info", "warning") and node.args \
                and marker in ast.unparse(node.args[0]):
            return eval(compile(ast.Expression(node.args[0]), str(path), "eval"), {}, names)  # the vendored upstream f-string
    raise AssertionError(f"{marker!r} not in {path}")


def test_startup_report_reads_the_transfer_lines_the_pinned_client_writes():
    ctx = SimpleNamespace(global_rank=3)
    rdma = MX / "load_strategy--rdma_strategy.py"
    complete = _render(rdma, "RDMA transfer complete", ctx=ctx, tensor_count=1789, bytes_transferred=195.1e9, transfer_time=2.451, bandwidth_gbps=636.8)
    total = _render(rdma, "Total receive time", ctx=ctx, total_time=2.87)
    assert complete == "[Worker 3] [TIMING] RDMA transfer complete: 1789 tensors, 195.10 GB, 2.451s, 636.8 Gbps"
    log = startup.parse_engine_log([complete, total])
    assert {m.what: m.seconds for m in log.measurements} == {"peer transfer (RDMA only)": 2.451, "peer transfer": 2.87}


def test_the_wrapper_recognises_the_pinned_clients_fall_through_lines():
    chain = MX / "load_strategy--__init__.py"
    ctx = SimpleNamespace(global_rank=0)
    failed = _render(chain, "failed, ", ctx=ctx, strategy=SimpleNamespace(name="rdma"), e="RDMA receive failed: timeout")
    unexpected = _render(chain, "raised unexpected error", ctx=ctx, strategy=SimpleNamespace(name="rdma"), e="boom")
    no_rdma = _render(chain, "Eligible loaders", eligible=[SimpleNamespace(name="default")], s=None)
    with_rdma = _render(chain, "Eligible loaders", eligible=[SimpleNamespace(name="rdma"), SimpleNamespace(name="default")], s=None)
    assert failed == "[Worker 0] Strategy rdma failed, trying next: RDMA receive failed: timeout"
    assert peer_transfer.fallback_reason(failed) and peer_transfer.fallback_reason(unexpected) and peer_transfer.fallback_reason(no_rdma)
    assert peer_transfer.fallback_reason(with_rdma) is None
    assert peer_transfer.fallback_reason(_render(chain, "failed, ", ctx=ctx, strategy=SimpleNamespace(name="gds"), e="x")) is None


# --- the wrapper, run for real -----------------------------------------------------------------------------------------

FAKE_VLLM = """#!/bin/sh
# stands in for vLLM with ModelExpress: prints $FAKE_LINES (one per line), then sleeps $FAKE_SLEEP
printf '%s\\n' "$FAKE_LINES"
sleep "${FAKE_SLEEP:-0}"
echo "engine exited normally"
"""


@pytest.fixture
def pod(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    vllm = bin_dir / "vllm"
    vllm.write_text(FAKE_VLLM)
    vllm.chmod(vllm.stat().st_mode | stat.S_IEXEC)
    weights = tmp_path / "weights"
    weights.mkdir()
    return SimpleNamespace(tmp=tmp_path, path=f"{bin_dir}:{os.environ['PATH']}", marker=weights / ".verified", attempt=tmp_path / "attempted")


def _run(pod, *, port: int, lines: str = "", sleep: float = 0) -> subprocess.CompletedProcess:
    env = {
        "PATH": pod.path, "PYTHONPATH": str(ROOT), "MX_K8S_SERVICE_PATTERN": "127.0.0.1", "MX_WORKER_GRPC_PORT": str(port),
        "PEER_START_SCRIPT": 'exec vllm serve "$@"', "WEIGHTS_MARKER": str(pod.marker), "PEER_ATTEMPT_MARKER": str(pod.attempt),
        "FAKE_LINES": lines, "FAKE_SLEEP": str(sleep), "PEER_KEY": "1725f1a14a7e32136bcb",
    }
    cold = ["/bin/sh", "-c", 'echo "cold path: $*"', "vllm-serve", "--model", "/models/k3", "--load-format", "modelexpress"]
    return subprocess.run([sys.executable, "-m", "kimi_k3.weights.podmain", "peer-start", *cold], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def peer():
    """A listening socket standing in for the peers Service's rank-0 port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_serving_peer_takes_the_cold_path_and_says_why(pod):
    port = _free_port()
    result = _run(pod, port=port)
    assert result.returncode == 0
    assert ("peer transfer: no serving peer of this image, revision and engine (kimi-k3.io/peer-key=1725f1a14a7e32136bcb) answers at "
            f"127.0.0.1:{port} (ConnectionRefusedError") in result.stderr
    assert result.stdout == "cold path: --model /models/k3 --load-format modelexpress\n"
    assert not pod.attempt.exists()


def test_a_serving_peer_takes_the_peer_path_and_a_restart_after_it_the_cold_path(pod, peer):
    result = _run(pod, port=peer, lines="[Worker 0] [TIMING] Total receive time: 2.87s")
    assert result.returncode == 0, result.stderr
    assert f"a serving peer answers at 127.0.0.1:{peer}" in result.stderr
    assert "[TIMING] Total receive time: 2.87s" in result.stdout and "engine exited normally" in result.stdout and "cold path" not in result.stdout
    again = _run(pod, port=peer)  # the container restarted: the pod's /tmp remembers the attempt
    assert "peer transfer: an earlier start of this pod took the peer path: cold path" in again.stderr and again.stdout.startswith("cold path:")


def test_a_failed_transfer_before_the_node_has_its_weights_stops_the_engine_and_goes_cold(pod, peer):
    start = time.monotonic()
    result = _run(pod, port=peer, lines="[Worker 5] Strategy rdma failed, trying next: RDMA receive failed: timeout after 300.0s", sleep=40)
    assert time.monotonic() - start < 20  # the engine was stopped, not waited for
    assert "the transfer failed before the node's weights were complete (Strategy rdma failed, trying next: RDMA receive failed: timeout after 300.0s)" in result.stderr
    assert "engine exited normally" not in result.stdout and result.stdout.endswith("cold path: --model /models/k3 --load-format modelexpress\n")


def test_a_fall_through_once_the_node_has_its_weights_lets_the_disk_load_go_on(pod, peer):
    pod.marker.write_text("")
    result = _run(pod, port=peer, lines="Eligible loaders: ['default']", sleep=0.2)
    assert "peer transfer: ModelExpress fell through to the disk (Eligible loaders: ['default'])" in result.stderr
    assert "engine exited normally" in result.stdout and "cold path" not in result.stdout


# --- the estimate follows the key --------------------------------------------------------------------------------------

def test_the_replacement_case_takes_the_peer_only_with_the_key():
    x = estimate.StartupInputs(nodes=2, sidecar_sync=True)
    without = estimate.peer_replacement(x)
    assert without.phases == estimate.estimate_case(x, "warm").phases
    with_key = estimate.peer_replacement(replace(x, peer_transfer=True))
    assert any(p.name == "weights from a serving peer (NIXL over EFA)" for p in with_key.phases)
    assert not any(p.name.startswith("weights from a serving peer") for p in without.phases)
    assert with_key.minutes < without.minutes


def test_a_leader_worker_set_refuses_the_peer_path():
    from tests.test_lws import render

    startup = ServingStartup(peer_transfer=True, sync_sidecar=True, node_local_storage_class="kimi-local-weights")
    with pytest.raises(UserError, match=r"startup.peer_transfer True is not accepted; expected false: a peer's weights come from one pod holding every TP rank"):
        render(startup=startup)


def test_no_container_of_the_plan_adds_a_capability_its_namespaces_pod_security_refuses(peer_plan):
    """Pod Security admission refuses the pod at apply time (Pod Security Standards, "Capabilities"): every workload of the plan
    with the peer path on, against its namespace's ``enforce`` level."""
    objects = peer_plan.kubernetes_objects()
    levels = {m["metadata"]["name"]: m["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce", "privileged") for m in objects if m["kind"] == "Namespace"}
    checked, refused = [], []
    for m in objects:
        spec = (m.get("spec", {}).get("template") or {}).get("spec") if m["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job") else None
        if spec is None or m["metadata"].get("namespace") not in levels:
            continue
        for c in [*spec.get("initContainers", []), *spec.get("containers", [])]:
            checked.append((m["metadata"]["name"], c["name"]))
            problem = peer_transfer.capability_problem((c.get("securityContext") or {}).get("capabilities", {}).get("add", []), levels[m["metadata"]["namespace"]])
            if problem:
                refused.append((m["metadata"]["name"], c["name"], problem))
    assert ("kimi-k3-serving", "vllm") in checked and len(checked) >= 10 and refused == []


def test_prod_without_the_key_replaces_a_node_faster_and_no_case_gains_from_the_key():
    """docs/weights.md, "Why off in prod": with the snapshot's S3 copy, the committed prod stack (no key) restores a replaced
    node faster than the peer path would, which excludes the snapshot and the pipelined loader; not even the cold start gains
    now that prod's first Ready pays no dump (the dump's election, tests/test_engine_snapshot_election.py)."""
    from kimi_k3.stack import project, time_to_serve
    from kimi_k3.stack.settings import load_settings

    def figures(settings) -> dict[str, float]:
        x = time_to_serve.startup_inputs(settings)
        out = {case: round(e.minutes, 1) for case, e in estimate.estimate_all(x).items()}
        peer = estimate.peer_replacement(x)
        return {**out, "peer": round(peer.minutes, 1), "peer after Ready": round(peer.after_node_ready, 1)}

    committed = figures(load_settings(project.find_project(None, ROOT), "prod"))
    keyed = figures(_prod())
    assert committed["peer"] == committed["warm"]  # without the key a replaced node is a warm start, from the S3 copy
    assert keyed["peer"] > committed["peer"] and keyed["peer after Ready"] > committed["peer after Ready"]
    assert all(keyed[case] > committed[case] for case in ("cold", "warm", "pod re-created", "container restart")), (committed, keyed)
