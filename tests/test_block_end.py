"""The block-end drain: both replicas stop taking new work and drain before EKS scales the Capacity Block's nodes to 0.

Declared under the offline engine (the prod stack's plan, and the components with chosen
``now``), checked against the Kubernetes schema and checkov, the offline engine's rule for
date-pinned CronJobs, and the step's own script run with the real curl against a stub API
server over TLS.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import pytest

from kimi_k3 import offline
from kimi_k3.capacity.scaling import EKS_SCALEDOWN_BEFORE_END
from kimi_k3.offline.rules import ApplyTimeRuleError
from kimi_k3.offline.timeline import Timeline
from kimi_k3.serving import api_pod, block_end, drain
from kimi_k3.serving.block_end import FIRES_AT_ANNOTATION, BlockEnd, block_end_plan
from kimi_k3.serving.drain import DrainPlan
from kimi_k3.serving.lws import VllmLeaderWorkerSet, VllmLeaderWorkerSetArgs
from kimi_k3.serving.vllm import VllmServer, VllmServerArgs
from tests import k8s_checks
from tests.builders import in_cluster, serving_contract
from tests.conftest import NOW

END = datetime(2026, 12, 9, 11, 30, tzinfo=NOW.tzinfo)
NLB = dict(exposure="internal", vpc_cidr="10.42.0.0/16", allowed_cidrs=("10.0.0.0/8",), replicas=2)


def _shell_now() -> int:
    """The clock the step's script reads (``date -u +%s`` in a child process).

    The script reads the clock: that is its job (it runs at the block's end). Python's clock
    is moved by ``--travel``; a child process's is not, so the window is built on the latter.
    """
    return int(subprocess.run(["date", "-u", "+%s"], check=True, capture_output=True, text=True).stdout)


def render(kind: str = "deployment", now: datetime = NOW, **changes) -> offline.PlanResult:
    if kind == "lws":
        values = dict(contract=serving_contract("s3", pipeline_parallel_size=2), instance_type="p5en.48xlarge")
    else:
        values = dict(contract=serving_contract("s3"))
    values.update(cluster_name="kimi-k3-dev", aws_region="us-east-1", api_key=pulumi.Output.secret("sk-k"), block_end=BlockEnd(ends_at=END, now=now), **NLB)
    values.update(changes)

    def program() -> None:
        if kind == "lws":
            VllmLeaderWorkerSet("kimi", VllmLeaderWorkerSetArgs(**values), opts=in_cluster())
        else:
            VllmServer("kimi", VllmServerArgs(**values), opts=in_cluster())

    return offline.OfflineEngine(now=now).run(program)


def objects(plan, kind: str) -> list[dict]:
    return [m for m in plan.kubernetes_objects() if m["kind"] == kind]


def step_objects(plan) -> list[dict]:
    return [m for m in plan.kubernetes_objects() if m["metadata"].get("name", "").endswith("-block-end")]


# --- when: the whole stop sequence ends before EKS's scale-down --------------------------------------------


def test_the_drain_starts_early_enough_to_finish_before_eks_scales_the_nodes_to_zero():
    plan = DrainPlan(behind_nlb=True)  # preStop 180 s, drain 1800 s: grace 2015 s
    stop = plan.block_end_stop_at(END)
    assert timedelta(minutes=40) == EKS_SCALEDOWN_BEFORE_END
    # 11:30 - 40 min - 2015 s - 300 s = 10:11:25, on the minute before: 10:11 (79 minutes before the end).
    assert stop == datetime(2026, 12, 9, 10, 11, tzinfo=NOW.tzinfo)
    assert stop + timedelta(seconds=plan.grace_s) <= END - EKS_SCALEDOWN_BEFORE_END - timedelta(seconds=drain.BLOCK_END_START_MARGIN_S)
    # A shorter drain buys serving time at the end: 600 s of drain stops new work 59 minutes before the end.
    assert DrainPlan(drain_s=600, behind_nlb=True).block_end_stop_at(END) == datetime(2026, 12, 9, 10, 31, tzinfo=NOW.tzinfo)


def test_the_prod_plan_declares_the_step_for_its_block(prod_plan):
    (cron,) = [m for m in prod_plan.kubernetes_objects() if m["kind"] == "CronJob"]
    fires = datetime.strptime(cron["metadata"]["annotations"][FIRES_AT_ANNOTATION], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=NOW.tzinfo)
    (workload,) = [m for m in prod_plan.kubernetes_objects() if m["kind"] == "StatefulSet"]
    grace = workload["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    end = prod_plan.reservation.end
    assert grace == 2015 and fires == (end - EKS_SCALEDOWN_BEFORE_END - timedelta(seconds=grace + drain.BLOCK_END_START_MARGIN_S)).replace(second=0)
    assert end - fires == timedelta(minutes=79)
    assert cron["spec"]["schedule"] == f"{fires.minute} {fires.hour} {fires.day} {fires.month} *" and cron["spec"]["timeZone"] == "Etc/UTC"
    assert cron["spec"]["startingDeadlineSeconds"] == int((end - EKS_SCALEDOWN_BEFORE_END - fires).total_seconds())
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kimi-k3.io/node-pool": "system"} and "tolerations" not in pod  # never on the GPU nodes it drains
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["SCALE_PATH"] == "/apis/apps/v1/namespaces/kimi-serving/statefulsets/kimi-k3-serving/scale"
    assert int(env["NOT_BEFORE"]) <= fires.timestamp() < int(env["NOT_AFTER"]) == end.timestamp()
    assert pod["containers"][0]["image"] == workload["spec"]["template"]["spec"]["containers"][0]["image"]  # the proxy's image
    (role,) = [m for m in prod_plan.kubernetes_objects() if m["kind"] == "Role" and m["metadata"]["name"] == "kimi-k3-serving-block-end"]
    assert role["rules"] == [{"apiGroups": ["apps"], "resources": ["statefulsets/scale"], "resourceNames": ["kimi-k3-serving"], "verbs": ["patch"]}]
    # Two replicas: they go together, not one after the other through the PDB.
    assert workload["spec"]["replicas"] == 2 and workload["spec"]["podManagementPolicy"] == "Parallel"


def test_the_steps_objects_pass_the_schema_and_checkov(tmp_path):
    plan = render()
    found = step_objects(plan)
    assert sorted(m["kind"] for m in found) == ["CronJob", "NetworkPolicy", "Role", "RoleBinding", "ServiceAccount"]
    for manifest in found:
        for version in ("1.33", "1.34", "1.35"):
            k8s_checks.validate_manifest(manifest, version)
    report = k8s_checks.checkov_scan(k8s_checks.write_manifests(found, tmp_path / "block-end"))
    assert [(c["check_id"], c.get("check_name")) for c in report["failed"]] == []
    # Its pods are not the serving pods: the PDB, the Services and the server's NetworkPolicy do not select them.
    labels = next(m for m in found if m["kind"] == "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    pdb = objects(plan, "PodDisruptionBudget")[0]["spec"]["selector"]["matchLabels"]
    assert not pdb.items() <= labels.items()


@pytest.mark.parametrize(("kind", "path"), [
    ("deployment", "/apis/apps/v1/namespaces/kimi-serving/deployments/kimi/scale"),
    ("lws", "/apis/leaderworkerset.x-k8s.io/v1/namespaces/kimi-serving/leaderworkersets/kimi-lws/scale"),
])
def test_each_workload_kind_is_scaled_through_its_scale_subresource(kind, path):
    (cron,) = objects(render(kind), "CronJob")
    env = {e["name"]: e["value"] for e in cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SCALE_PATH"] == path


# --- runs past or close to the stop time -------------------------------------------------------------------


def test_a_run_past_the_stop_time_declares_no_replicas_and_no_step():
    late = datetime(2026, 12, 9, 10, 30, tzinfo=NOW.tzinfo)
    plan = render(now=late)
    assert objects(plan, "Deployment")[0]["spec"]["replicas"] == 0
    assert step_objects(plan) == []
    assert not block_end_plan(DrainPlan(behind_nlb=True), BlockEnd(ends_at=END, now=late)).serving


def test_a_run_close_to_the_stop_time_fires_as_soon_as_the_step_surely_exists():
    close = datetime(2026, 12, 9, 9, 41, 30, tzinfo=NOW.tzinfo)  # 30 minutes before the 10:11 stop time
    result = block_end_plan(DrainPlan(behind_nlb=True), BlockEnd(ends_at=END, now=close))
    assert result.late and result.fires_at == datetime(2026, 12, 9, 10, 42, tzinfo=NOW.tzinfo)  # now + 60 min, on the next minute
    (cron,) = objects(render(now=close), "CronJob")
    assert cron["metadata"]["annotations"][FIRES_AT_ANNOTATION] == "2026-12-09T10:42:00Z"


def test_the_offline_engine_refuses_a_date_pinned_cron_job_created_after_its_time():
    def program(fires: datetime, schedule: str | None = None) -> None:
        k8s.batch.v1.CronJob(
            "pinned",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="pinned", annotations={FIRES_AT_ANNOTATION: block_end.iso(fires)}),
            spec=k8s.batch.v1.CronJobSpecArgs(
                schedule=schedule or block_end.cron_schedule(fires), time_zone="Etc/UTC",
                job_template=k8s.batch.v1.JobTemplateSpecArgs(spec=k8s.batch.v1.JobSpecArgs(template=k8s.core.v1.PodTemplateSpecArgs(
                    spec=k8s.core.v1.PodSpecArgs(restart_policy="Never", containers=[k8s.core.v1.ContainerArgs(name="c", image="busybox:1")]))))),
            opts=in_cluster(),
        )

    with pytest.raises(ApplyTimeRuleError, match=r"pinned to 2026-11-30T15:59:00Z, which has passed when it is created.*CreationTimestamp"):
        offline.OfflineEngine(now=NOW).run(lambda: program(NOW - timedelta(minutes=1)))
    with pytest.raises(ApplyTimeRuleError, match=r"it would fire at another moment; expected '0 17 30 11 \*'"):
        offline.OfflineEngine(now=NOW).run(lambda: program(NOW + timedelta(hours=1), schedule="0 17 * * *"))
    offline.OfflineEngine(now=NOW).run(lambda: program(NOW + timedelta(hours=1)))


def test_the_prod_plans_step_is_created_well_within_its_margin(prod_plan):
    # The offline engine's model of a first `up`: when the CronJob's create call comes, against the program's start.
    timeline = Timeline(prod_plan.now)
    starts = None
    for resource in prod_plan.resources:
        moment = timeline.add(resource)
        if resource.type == "kubernetes:batch/v1:CronJob":
            starts = moment.starts
    assert starts is not None
    assert starts - prod_plan.now < block_end.SCHEDULE_CREATE_MARGIN / 1.5, starts - prod_plan.now
    print(f"the block-end CronJob's create call comes {(starts - prod_plan.now).total_seconds() / 60:.0f} minutes into a first `up`")


# --- the step's script, with the real curl -------------------------------------------------------------------


class _ApiServer(ThreadingHTTPServer):
    """A stub of the API server's scale subresource over TLS: records every request, answers 200 (or ``status``)."""

    def __init__(self, certfile: Path, keyfile: Path, status: int = 200) -> None:
        self.seen: list[dict] = []
        self.status = status
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                """Quiet."""

            def do_PATCH(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "type": self.headers.get("Content-Type"), "body": body})
                answer = json.dumps({"kind": "Scale", "spec": {"replicas": 0}} if server.status == 200 else {"kind": "Status", "message": "forbidden: no"}).encode()
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        super().__init__(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certfile, keyfile)
        self.socket = context.wrap_socket(self.socket, server_side=True)


@pytest.fixture
def api(tmp_path):
    """(start the stub with a status, the ServiceAccount directory): a self-signed certificate for 127.0.0.1, a token."""
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(tmp_path / "key.pem"), "-out", str(sa / "ca.crt")],
        check=True, capture_output=True,
    )
    (sa / "token").write_text("sa-token-123")
    servers = []

    def start(status: int = 200) -> _ApiServer:
        server = _ApiServer(sa / "ca.crt", tmp_path / "key.pem", status)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start, sa
    for server in servers:
        server.shutdown()
        server.server_close()


def _run_step(server: _ApiServer, sa: Path, *, not_before: int, not_after: int) -> subprocess.CompletedProcess:
    env = {
        "PATH": "/usr/bin:/bin", "SA_DIR": str(sa), "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(server.server_address[1]),
        "WORKLOAD": "statefulsets/kimi-k3-serving", "SCALE_PATH": "/apis/apps/v1/namespaces/kimi-serving/statefulsets/kimi-k3-serving/scale",
        "NOT_BEFORE": str(not_before), "NOT_AFTER": str(not_after),
    }
    return subprocess.run(["/bin/sh", "-c", block_end.SCALE_SCRIPT], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.clock
def test_the_step_scales_the_workload_to_zero_with_its_token(api):
    start, sa = api
    server = start()
    now = _shell_now()
    done = _run_step(server, sa, not_before=now - 60, not_after=now + 3600)
    assert done.returncode == 0, done.stderr
    assert "scaled to 0" in done.stdout
    assert server.seen == [{
        "path": "/apis/apps/v1/namespaces/kimi-serving/statefulsets/kimi-k3-serving/scale", "auth": "Bearer sa-token-123",
        "type": "application/merge-patch+json", "body": b'{"spec":{"replicas":0}}',
    }]


@pytest.mark.clock
def test_outside_its_blocks_window_the_step_does_nothing(api):
    start, sa = api
    server = start()
    now = _shell_now()
    for window in ((now + 60, now + 3600), (now - 3600, now - 60)):  # too early; a year later on the same date
        done = _run_step(server, sa, not_before=window[0], not_after=window[1])
        assert done.returncode == 0 and "nothing to do" in done.stdout
    assert server.seen == []


@pytest.mark.clock
def test_a_refused_scale_fails_the_job_with_the_api_servers_message(api):
    start, sa = api
    server = start(status=403)
    now = _shell_now()
    done = _run_step(server, sa, not_before=now - 60, not_after=now + 3600)
    assert done.returncode != 0 and "forbidden: no" in done.stdout + done.stderr
    assert len(server.seen) == 1  # a 4xx is not retried


def test_the_declared_replicas_follow_the_plan():
    args = VllmServerArgs(contract=serving_contract(), api_key=pulumi.Output.secret("k"), replicas=2, block_end=BlockEnd(ends_at=END, now=NOW))
    assert api_pod.declared_replicas(args) == 2
    past = VllmServerArgs(contract=serving_contract(), api_key=pulumi.Output.secret("k"), replicas=2, block_end=BlockEnd(ends_at=END, now=END))
    assert api_pod.declared_replicas(past) == 0
    assert api_pod.declared_replicas(VllmServerArgs(contract=serving_contract(), api_key=pulumi.Output.secret("k"), replicas=2)) == 2
