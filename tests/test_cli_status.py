"""`kimi-k3 status STACK` against a stub Kubernetes API server (real HTTP) and Stubber-checked EC2 / EKS / Auto Scaling."""

from __future__ import annotations

import json
import os
import socket
import types
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from botocore.stub import Stubber

from kimi_k3 import cli
from kimi_k3.bringup import collect
from kimi_k3.capacity.extensions import EKS_SCALEDOWN_ACTION
from kimi_k3.cli import capacity_clock as capacity_cli
from kimi_k3.cli import status as status_cli
from kimi_k3.weights.progress import Progress, format_line
from tests import fake_kube_api as k
from tests.aws_stubs import client
from tests.capacity_builders import EXT_END, EXT_START, RID, api_extension, api_reservation

NOW = EXT_START + timedelta(minutes=35)
CLUSTER = "kimi-k3-dev"
NODE_GROUP = "kimi-k3-gpu-ng-3f2a91c"
ASG = "eks-kimi-k3-gpu-ng-3f2a91c-5cc9a1b2-77d0-2f1e-0a44-1c7e0f9b2d3a"
NODE_A, NODE_B = "ip-10-42-1-5.ec2.internal", "ip-10-42-1-6.ec2.internal"
POD_A, POD_B = "kimi-k3-serving-6d8f9c7b54-abcde", "kimi-k3-serving-6d8f9c7b54-fghij"


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch):
    monkeypatch.setattr(capacity_cli, "utcnow", lambda: NOW)


@pytest.fixture
def api():
    with k.FakeKubeApi() as server:
        server.nodes = [
            k.node(NODE_A, created=NOW - timedelta(minutes=24)),
            k.node(NODE_B, ready=False, gpus=0, created=NOW - timedelta(minutes=2)),
            k.node("ip-10-42-0-9.ec2.internal", created=NOW - timedelta(days=2), labels={"kimi-k3.io/node-pool": "system"}),
        ]
        server.pods["kimi-serving"] = [
            k.pod(POD_A, created=NOW - timedelta(minutes=20), node_name=NODE_A,
                  init=[k.container_status("fetch-weights", k.running(NOW - timedelta(minutes=1)))],
                  containers=[k.container_status("vllm", k.waiting("PodInitializing"))]),
            k.pod(POD_B, created=NOW - timedelta(minutes=20),
                  unschedulable="0/4 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 3 Insufficient nvidia.com/gpu."),
        ]
        server.logs[("kimi-serving", POD_A, "fetch-weights", False)] = "\n".join([
            format_line(Progress("weights", int((NOW - timedelta(seconds=20)).timestamp()), 300_000_000_000, 1_700_000_000_000, 20_500_000_000, 2, 64)),
            "verified model-00063-of-00064.safetensors",
            format_line(Progress("weights", int((NOW - timedelta(seconds=5)).timestamp()), 612_000_000_000, 1_700_000_000_000, 21_300_000_000, 9, 64)),
        ])
        yield server


def ready_pod(name: str, node: str) -> dict:
    return k.pod(name, created=NOW - timedelta(minutes=40), node_name=node, phase="Running", ready=True,
                 init=[k.container_status("fetch-weights", k.terminated(0, "Completed", NOW - timedelta(minutes=38)))],
                 containers=[k.container_status("vllm", k.running(NOW - timedelta(minutes=30)), ready=True, started=True)])


@pytest.fixture
def aws(monkeypatch):
    clients = collect.AwsClients(ec2=client("ec2"), eks=client("eks"), autoscaling=client("autoscaling"))
    regions = []

    def factory(region):
        regions.append(region)
        return clients

    monkeypatch.setattr(collect, "make_aws_clients", factory)
    stubs = types.SimpleNamespace(ec2=Stubber(clients.ec2), eks=Stubber(clients.eks), autoscaling=Stubber(clients.autoscaling), regions=regions)
    for stub in (stubs.ec2, stubs.eks, stubs.autoscaling):
        stub.activate()
    yield stubs
    for stub in (stubs.ec2, stubs.eks, stubs.autoscaling):
        stub.assert_no_pending_responses()
        stub.deactivate()


def block_reads(aws, *, state="active", history=(), node_group=True, scaledown_at=EXT_END - timedelta(minutes=40)):
    """The AWS calls of one snapshot, in order."""
    aws.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [api_reservation(state=state, start=EXT_START, available=0)]},
                         {"CapacityReservationIds": [RID]})
    aws.ec2.add_response("describe_capacity_block_extension_history", {"CapacityBlockExtensions": list(history)}, {"CapacityReservationIds": [RID]})
    if node_group:
        aws.eks.add_response("list_nodegroups", {"nodegroups": ["kimi-k3-system-ng", NODE_GROUP]}, {"clusterName": CLUSTER})
        aws.eks.add_response("describe_nodegroup", {"nodegroup": {"nodegroupName": "kimi-k3-system-ng", "clusterName": CLUSTER, "tags": {}}},
                             {"clusterName": CLUSTER, "nodegroupName": "kimi-k3-system-ng"})
        aws.eks.add_response("describe_nodegroup", {"nodegroup": {
            "nodegroupName": NODE_GROUP, "clusterName": CLUSTER, "status": "ACTIVE", "capacityType": "CAPACITY_BLOCK",
            "scalingConfig": {"minSize": 0, "maxSize": 2, "desiredSize": 2}, "tags": {"kimi-k3.io/capacity-reservation": RID},
            "resources": {"autoScalingGroups": [{"name": ASG}]}}}, {"clusterName": CLUSTER, "nodegroupName": NODE_GROUP})
    if scaledown_at is not None and (state == "active" or history):
        aws.autoscaling.add_response("describe_scheduled_actions", {"ScheduledUpdateGroupActions": [{
            "AutoScalingGroupName": ASG, "ScheduledActionName": EKS_SCALEDOWN_ACTION,
            "ScheduledActionARN": f"arn:aws:autoscaling:us-east-1:123456789012:scheduledUpdateGroupAction:1:autoScalingGroupName/{ASG}:scheduledActionName/x",
            "StartTime": scaledown_at, "Time": scaledown_at, "MinSize": 0, "MaxSize": 2, "DesiredCapacity": 0}]}, {"AutoScalingGroupName": ASG})


def kubeconfig_file(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["status", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- one snapshot


def test_status_shows_the_block_the_gpu_nodes_and_each_pods_phase(api, aws, tmp_path, capsys):
    block_reads(aws)
    code, out, err = run(capsys, "dev", "--kubeconfig", str(kubeconfig_file(tmp_path, api.kubeconfig())))
    assert code == 1, err  # not ready yet
    assert aws.regions == ["us-east-1"]
    lines = out.splitlines()
    assert lines[0] == "kimi-k3 status dev at 2026-12-01 12:05 UTC"
    assert f"Capacity Block {RID}: active, 2 x p6-b300.48xlarge in us-east-1a" in out
    assert "started 35m ago, ends in 6d 23h 25m" in out
    assert f"scale-down  OK EKS scales {ASG} to 0 at 2026-12-08 10:50 UTC (block end - 40 min)." in out
    assert "GPU nodes: 2 of 2 joined, 1 Ready, 8 GPUs allocatable" in out and "ip-10-42-0-9" not in out
    assert f"{POD_A} (server, on {NODE_A}): weights" in out
    assert "612GB/1.70TB [21.3GB/s, ETA 00:51]" in out and "9/64 verified" in out
    assert f"{POD_B} (server, unscheduled): scheduling" in out and "3 Insufficient nvidia.com/gpu" in out
    assert lines[-1] == "Endpoint: not ready (0 of 2 replicas)"
    # the client used the kubeconfig's credentials and asked only for what it shows
    paths = {path for path, _, _ in api.requests}
    assert paths == {"/api/v1/nodes", "/api/v1/namespaces/kimi-serving/pods", f"/api/v1/namespaces/kimi-serving/pods/{POD_A}/log"}
    assert {auth for _, _, auth in api.requests} == {f"Bearer {k.TOKEN}"}
    queries = {path: q for path, q, _ in api.requests}
    assert queries["/api/v1/nodes"]["labelSelector"] == ["kimi-k3.io/node-pool=capacity-block"]
    assert queries["/api/v1/namespaces/kimi-serving/pods"]["labelSelector"] == ["kimi-k3.io/model=kimi-k3"]
    assert queries[f"/api/v1/namespaces/kimi-serving/pods/{POD_A}/log"]["container"] == ["fetch-weights"]
    assert queries[f"/api/v1/namespaces/kimi-serving/pods/{POD_A}/log"]["tailLines"] == [str(collect.LOG_TAIL_LINES)]


def test_json_for_machines(api, aws, tmp_path, capsys):
    block_reads(aws, history=[api_extension("payment-pending", purchased=NOW - timedelta(hours=2))])
    code, out, _ = run(capsys, "dev", "--kubeconfig", str(kubeconfig_file(tmp_path, api.kubeconfig())), "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["schema"] == "kimi-k3-status/1" and doc["ready"] is False and doc["stack"] == "dev"
    assert doc["capacity_block"]["id"] == RID and doc["capacity_block"]["seconds_left"] == int((EXT_END - NOW).total_seconds())
    assert doc["extension"]["level"] == "WARN" and "payment-pending" in doc["extension"]["message"]
    assert doc["gpu_nodes"] == {**doc["gpu_nodes"], "reserved": 2, "joined": 2, "ready": 1, "gpus_allocatable": 8}
    phases = {p["name"]: p["phase"] for p in doc["pods"]}
    assert phases == {POD_A: "weights", POD_B: "scheduling"}
    weights = next(p for p in doc["pods"] if p["name"] == POD_A)["progress"]
    assert weights["bytes_done"] == 612_000_000_000 and weights["eta_seconds"] == 51


def test_an_extended_block_whose_scaledown_did_not_move_is_a_fail_line(api, aws, tmp_path, capsys):
    extended_end = EXT_END + timedelta(days=7)
    aws.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [api_reservation(state="active", start=EXT_START, days=14, available=0)]},
                         {"CapacityReservationIds": [RID]})
    aws.ec2.add_response("describe_capacity_block_extension_history", {"CapacityBlockExtensions": [api_extension("payment-succeeded", purchased=NOW - timedelta(hours=1))]},
                         {"CapacityReservationIds": [RID]})
    aws.eks.add_response("list_nodegroups", {"nodegroups": [NODE_GROUP]}, {"clusterName": CLUSTER})
    aws.eks.add_response("describe_nodegroup", {"nodegroup": {"nodegroupName": NODE_GROUP, "clusterName": CLUSTER, "tags": {"kimi-k3.io/capacity-reservation": RID},
                                                              "resources": {"autoScalingGroups": [{"name": ASG}]}}}, {"clusterName": CLUSTER, "nodegroupName": NODE_GROUP})
    old = EXT_END - timedelta(minutes=40)
    aws.autoscaling.add_response("describe_scheduled_actions", {"ScheduledUpdateGroupActions": [{
        "AutoScalingGroupName": ASG, "ScheduledActionName": EKS_SCALEDOWN_ACTION, "StartTime": old, "Time": old, "DesiredCapacity": 0}]}, {"AutoScalingGroupName": ASG})
    code, out, _ = run(capsys, "dev", "--kubeconfig", str(kubeconfig_file(tmp_path, api.kubeconfig())))
    assert code == 1
    assert f"extension   OK extended by a 7-day extension; the block now ends at {extended_end:%Y-%m-%d %H:%M} UTC." in out
    assert "scale-down  FAIL EKS scales" in out and "the action was not moved after the extension" in out


# --------------------------------------------------------------------------- --wait


class FakeTime:
    """Stands in for the status module's ``time``: polls advance the clock, sleeping costs nothing."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_wait_returns_0_once_every_replica_is_ready(api, aws, tmp_path, capsys, monkeypatch):
    clock = FakeTime()
    monkeypatch.setattr(status_cli, "time", clock)
    lists = []

    def advance(server):
        lists.append(1)
        if len(lists) == 3:
            server.pods["kimi-serving"] = [ready_pod(POD_A, NODE_A), ready_pod(POD_B, NODE_B)]

    api.before_each = advance
    for poll in range(3):
        block_reads(aws, node_group=poll == 0)  # the node group's ASG is looked up once
    code, out, _ = run(capsys, "dev", "--kubeconfig", str(kubeconfig_file(tmp_path, api.kubeconfig())), "--wait", "--interval", "20")
    assert code == 0
    assert clock.sleeps == [20, 20]
    summaries = [line for line in out.splitlines() if line.startswith("12:05:00 ")]
    assert len(summaries) == 2 and "abcde weights 36%" in summaries[0] and "0/2 ready" in summaries[0]
    assert out.rstrip().endswith("Endpoint: READY\nStart-up phases measured beside the estimate: kimi-k3 startup-report dev")


def test_wait_gives_up_at_the_timeout_with_exit_1(api, aws, tmp_path, capsys, monkeypatch):
    clock = FakeTime()
    monkeypatch.setattr(status_cli, "time", clock)
    for poll in range(3):
        block_reads(aws, node_group=poll == 0)
    code, out, _ = run(capsys, "dev", "--kubeconfig", str(kubeconfig_file(tmp_path, api.kubeconfig())), "--wait", "--interval", "30", "--timeout", "60")
    assert code == 1
    assert clock.sleeps == [30, 30]
    assert out.rstrip().endswith("Timed out after 60 s: the endpoint is not ready.")


def test_wait_stops_at_once_when_the_block_can_no_longer_serve(api, aws, tmp_path, capsys, monkeypatch):
    clock = FakeTime()
    monkeypatch.setattr(status_cli, "time", clock)
    block_reads(aws, state="expired", node_group=False)
    code, out, _ = run(capsys, "dev", "--kubeconfig", str(kubeconfig_file(tmp_path, api.kubeconfig())), "--wait")
    assert code == 1 and clock.sleeps == []
    assert out.rstrip().endswith("Endpoint: will not come up: the Capacity Block is expired")


# --------------------------------------------------------------------------- kubeconfig and errors


def test_the_stacks_kubeconfig_comes_from_pulumi_stack_output(api, aws, tmp_path, capsys, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "kubeconfig.json").write_text(json.dumps(api.kubeconfig()))
    (bindir / "pulumi").write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/pulumi.args\npwd >> {tmp_path}/pulumi.args\ncat {tmp_path}/kubeconfig.json\n')
    (bindir / "pulumi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    block_reads(aws)
    code, out, err = run(capsys, "dev")
    assert code == 1, err
    args, cwd = (tmp_path / "pulumi.args").read_text().splitlines()
    assert args == "stack output kubeconfig --show-secrets --json --stack dev"
    assert Path(cwd) == Path(__file__).resolve().parent.parent  # the project's directory
    assert "GPU nodes: 2 of 2 joined" in out


def test_without_the_pulumi_cli_it_says_how_to_pass_the_kubeconfig(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(status_cli.shutil, "which", lambda name: None)
    code, out, err = run(capsys, "dev")
    assert code == 2 and out == ""
    assert err.strip() == (
        "kimi-k3: error: no kubeconfig: the Pulumi CLI is not on PATH; write the stack's with "
        "`pulumi stack output kubeconfig --show-secrets -s dev > kubeconfig.json`, then pass --kubeconfig kubeconfig.json"
    )


def test_a_kubeconfig_for_another_cluster_is_refused(tmp_path, capsys):
    document = {"clusters": [{"name": "c", "cluster": {"server": "https://example.invalid"}}], "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                                                          "args": ["eks", "get-token", "--cluster-name", "kimi-k3-prod", "--output", "json"]}}}]}
    code, _, err = run(capsys, "dev", "--kubeconfig", str(kubeconfig_file(tmp_path, document)))
    assert code == 2 and "is for cluster kimi-k3-prod, not kimi-k3-dev (the stack's)" in err and err.count("\n") == 1


@pytest.mark.parametrize("content, message", [("[not: yaml", "not YAML or JSON"), ("just: a map", "not a kubeconfig (no clusters)")])
def test_a_bad_kubeconfig_file_is_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "kc"
    path.write_text(content)
    code, _, err = run(capsys, "dev", "--kubeconfig", str(path))
    assert code == 2 and message in err and err.count("\n") == 1
    code, _, err = run(capsys, "dev", "--kubeconfig", str(tmp_path / "missing"))
    assert code == 2 and "cannot read it" in err


def test_forbidden_or_unreachable_cluster_still_shows_the_block(api, aws, tmp_path, capsys):
    api.forbid = True
    block_reads(aws)
    code, out, _ = run(capsys, "dev", "--kubeconfig", str(kubeconfig_file(tmp_path, api.kubeconfig())))
    assert code == 1 and f"Capacity Block {RID}: active" in out
    assert f"could not read: cluster: the cluster API at {api.url} denied list nodes (403)" in out
    # the pods were not read: not "0 of 1 replicas ready" (issue 24)
    assert "Serving pods in kimi-serving: not read (the cluster API" in out and "replicas ready" not in out and "0 of 1" not in out
    assert "Endpoint: unknown: the serving pods could not be read" in out

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    document = api.kubeconfig()
    document["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{closed}"
    block_reads(aws)
    code, out, _ = run(capsys, "dev", "--kubeconfig", str(kubeconfig_file(tmp_path, document)))
    assert code == 1 and f"could not read: cluster: cannot reach the cluster API at http://127.0.0.1:{closed}" in out


def test_wrong_credentials_are_named(api, aws, tmp_path, capsys):
    block_reads(aws)
    code, out, _ = run(capsys, "dev", "--kubeconfig", str(kubeconfig_file(tmp_path, api.kubeconfig(token="stale"))))
    assert code == 1 and "refused the credentials of --kubeconfig" in out and "(401)" in out


def test_denied_aws_reads_leave_the_cluster_view(api, aws, tmp_path, capsys):
    aws.ec2.add_client_error("describe_capacity_reservations", "UnauthorizedOperation", "not authorized", expected_params={"CapacityReservationIds": [RID]})
    code, out, _ = run(capsys, "dev", "--kubeconfig", str(kubeconfig_file(tmp_path, api.kubeconfig())))
    assert code == 1
    assert f"Capacity Block {RID}: not read" in out and "could not read: Capacity Block: AWS denied ec2:DescribeCapacityReservations" in out
    assert "GPU nodes: 2 of 1 joined" in out  # the reserved count falls back to the stack's nodes


@pytest.mark.parametrize("flag, value", [("--timeout", "0"), ("--interval", "soon")])
def test_bad_flags_are_usage_errors(capsys, flag, value):
    with pytest.raises(SystemExit) as info:
        cli.main(["status", "dev", flag, value])
    assert info.value.code == 2 and flag in capsys.readouterr().err
