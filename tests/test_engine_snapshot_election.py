"""Issue 34, cold case: only one replica dumps a new key, and only while another replica of the key already serves.

Two warm-up sidecar runs for real, one per node: each its own snapshot root, its own copier loop (the shipped POSIX sh,
:data:`kimi_k3.weights.snapshot_copy.COPIER_FUNCTIONS`) against one fake S3 bucket (tests/test_engine_snapshot_s3.py's fake
``aws``, whose conditional put is atomic as S3's is), its own real HTTP server in vLLM's place and a thread answering as the
snapshot agent; the real :func:`kimi_k3.weights.snapshot_pod.snapshot_after_healthy` then the real warm-up marker
(:func:`kimi_k3.weights.warmup.mark_ready`), the order ``podmain warmup-then-save`` runs them in. "Ready" is the marker; the
headless Service's DNS answer is a stand-in resolver that returns the pod IPs whose marker exists (only Ready endpoints resolve).
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from kimi_k3.weights import engine_snapshot, peer_transfer, snapshot_pod, warmup
from tests.test_engine_snapshot_pod import FakeVllm, agent_thread, fake_dump
from tests.test_engine_snapshot_s3 import KEY, URI, copier, in_s3

HOST = "kimi-k3-key-peers.kimi-k3.svc.cluster.local"
SERVING = "kimi-k3-metrics.kimi-k3.svc.cluster.local"
IPS = {"a": "10.0.1.10", "b": "10.0.2.20", "old": "10.0.3.30"}


class Dns:
    """Stands in for CoreDNS answering the headless Services: the IPs of the pods whose warm-up marker exists (Ready ones only);
    :data:`HOST` the pods of this key (``markers``), :data:`SERVING` every serving pod (``other_key`` too)."""

    def __init__(self, markers: dict[str, Path], other_key: dict[str, Path] | None = None) -> None:
        self.markers, self.other_key = markers, other_key or {}
        self.asked: list[str] = []

    def __call__(self, host: str, port, proto: int = 0) -> list:
        self.asked.append(host)
        pods = {HOST: self.markers, SERVING: {**self.markers, **self.other_key}}.get(host, {})
        ready = [IPS[pod] for pod, marker in pods.items() if marker.exists()]
        if not ready:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, proto, "", (ip, 0)) for ip in ready]


class Node:
    """One replica's node: snapshot root, fake vLLM, agent thread (recording at each dump whether the other pod was Ready)."""

    def __init__(self, tmp_path: Path, pod: str, markers: dict[str, Path]) -> None:
        self.pod, self.root, self.marker = pod, tmp_path / f"node-{pod}", markers[pod]
        self.root.mkdir()
        self.vllm = FakeVllm()
        self.log: list[str] = []
        self.dumps: list[dict] = []  # each dump request, with "others_ready": the other replicas' markers at that moment
        self.others = [m for p, m in markers.items() if p != pod]
        self.stop = threading.Event()
        record = fake_dump(self.root, self.dumps)

        def answer(request: dict) -> dict:
            request["others_ready"] = [m.exists() for m in self.others]
            return record(request)

        agent_thread(self.root, answer, self.stop)

    def sidecar(self, dns: Dns | None, wait_s: float = 30.0) -> bool:
        """``warmup-then-save``'s order: the snapshot step, then Ready (the marker)."""
        peers = snapshot_pod.Peers(HOST, IPS[self.pod], wait_s=wait_s, poll_s=0.05, resolver=dns, serving_host=SERVING) if dns is not None else None
        sealed = snapshot_pod.snapshot_after_healthy(snapshot_pod.Engine(self.vllm.url), snapshot_pod.AgentChannel(self.root, poll_s=0.01), self.root, KEY,
                                                     self.log.append, f"pod-{self.pod}", copies=snapshot_pod.CopyChannel(self.root, URI, poll_s=0.02), peers=peers)
        warmup.mark_ready(str(self.marker))
        return sealed

    def slept(self) -> bool:
        return any(c.startswith("POST /sleep") for c in self.vllm.calls)

    def close(self) -> None:
        self.stop.set()
        self.vllm.close()


def two_nodes(tmp_path: Path) -> tuple[Node, Node, Dns]:
    markers = {pod: tmp_path / f"ready-{pod}" for pod in ("a", "b")}
    return Node(tmp_path, "a", markers), Node(tmp_path, "b", markers), Dns(markers)


def wait_for(path: Path, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not path.exists():
        time.sleep(0.05)
    return path.exists()


def test_of_two_replicas_of_a_new_key_the_loser_goes_ready_at_once_and_the_winner_dumps_only_once_the_loser_serves(tmp_path):
    a, b, dns = two_nodes(tmp_path)
    results: dict[str, bool] = {}
    try:
        with copier(tmp_path, a.root), copier(tmp_path, b.root):
            threads = [threading.Thread(target=lambda n=n: results.__setitem__(n.pod, n.sidecar(dns))) for n in (a, b)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            assert wait_for(in_s3(tmp_path) / "KEY")  # the winner's upload went through its own claim (no 412 against itself)
    finally:
        a.close()
        b.close()
    winner, loser = (a, b) if results["a"] else (b, a)
    assert results[winner.pod] and not results[loser.pod]
    assert not loser.slept() and loser.dumps == []  # the loser never slept its engine: it went Ready at once
    assert [d["others_ready"] for d in winner.dumps] == [[True]]  # one dump, taken while the other replica was Ready
    assert snapshot_pod.check(snapshot_pod.snapshot_dir(winner.root, KEY), KEY).restore
    assert not (snapshot_pod.snapshot_dir(loser.root, KEY) / engine_snapshot.KEY_FILE).exists()
    assert winner.marker.exists() and loser.marker.exists()
    short = KEY.digest()[:12]
    assert any(line.startswith(f"engine snapshot {short}: dump election: no dump, Ready now: another replica won the claim") for line in loser.log), loser.log
    assert any(f"{IPS[loser.pod]} Ready after" in line and "dumping before this replica's Ready" in line for line in winner.log), winner.log
    assert HOST in dns.asked


def test_a_winner_without_a_ready_peer_in_the_bound_goes_ready_without_a_dump_and_releases_the_claim(tmp_path):
    markers = {pod: tmp_path / f"ready-{pod}" for pod in ("a", "b")}
    a = Node(tmp_path, "a", markers)  # node b is not Ready during a's first start
    dns = Dns(markers)
    claim = in_s3(tmp_path) / engine_snapshot.S3_CLAIM
    try:
        with copier(tmp_path, a.root):
            start = time.monotonic()
            assert not a.sidecar(dns, wait_s=0.5)
            took = time.monotonic() - start
            deadline = time.monotonic() + 20
            while claim.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not claim.exists()  # released: the next start of the key may claim it
            first = list(a.log)
            markers["b"].touch()  # the next start, beside a Ready replica: it wins the claim again and dumps
            assert a.sidecar(dns)
    finally:
        a.close()
    assert 0.5 <= took < 10 and not any("dumped and sealed" in line for line in first)
    assert any("no other replica of this key Ready in 0.5 s: Ready without a dump, claim released" in line for line in first), first
    assert [d["others_ready"] for d in a.dumps] == [[True]]  # the one dump was the second start's, beside a Ready peer


def test_in_a_rollout_the_first_pod_of_the_new_key_goes_ready_beside_the_old_keys_pod_without_waiting_the_bound(tmp_path):
    """The StatefulSet replaces one pod at a time and waits for it: the other pod still serves the old key and is never this key's
    peer, so waiting the 15 min would only keep the service at half capacity. The next pod of the new key dumps beside this one."""
    markers = {pod: tmp_path / f"ready-{pod}" for pod in ("a", "b")}
    old = {"old": tmp_path / "ready-old"}
    old["old"].touch()  # the old key's replica serves
    a = Node(tmp_path, "a", markers)
    claim = in_s3(tmp_path) / engine_snapshot.S3_CLAIM
    try:
        with copier(tmp_path, a.root):
            start = time.monotonic()
            assert not a.sidecar(Dns(markers, old), wait_s=60)
            took = time.monotonic() - start
            deadline = time.monotonic() + 20
            while claim.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not claim.exists()  # released: b, replaced next with the new key, wins it and dumps beside a
    finally:
        a.close()
    assert took < 10 and not a.slept() and a.dumps == [] and a.marker.exists()
    assert any(f"{IPS['old']} of another key serve, none of this key" in line for line in a.log), a.log


def test_one_replica_keeps_the_old_order_dump_before_its_own_ready(tmp_path):
    markers = {"a": tmp_path / "ready-a"}
    a = Node(tmp_path, "a", markers)
    try:
        with copier(tmp_path, a.root):
            assert a.sidecar(None)  # replicas 1: no peers host, no election
            assert wait_for(in_s3(tmp_path) / "KEY")
    finally:
        a.close()
    assert a.slept() and len(a.dumps) == 1
    assert not any("dump election" in line for line in a.log)


def test_a_key_already_in_s3_is_not_dumped_again(tmp_path):
    a, b, dns = two_nodes(tmp_path)
    copy = in_s3(tmp_path)
    copy.mkdir(parents=True)
    (copy / "KEY").write_text(KEY.to_json())
    try:
        with copier(tmp_path, a.root):
            assert not a.sidecar(dns)
    finally:
        a.close()
        b.close()
    assert not a.slept() and a.dumps == [] and a.marker.exists()
    assert any("its S3 copy exists" in line for line in a.log), a.log


def test_ready_peers_leaves_out_this_pod_and_answers_nothing_when_the_name_does_not_resolve(tmp_path):
    markers = {pod: tmp_path / f"ready-{pod}" for pod in ("a", "b")}
    dns = Dns(markers)
    assert snapshot_pod.ready_peers(HOST, IPS["a"], dns) == []  # NXDOMAIN: none Ready
    markers["a"].touch()
    assert snapshot_pod.ready_peers(HOST, IPS["a"], dns) == []  # only itself
    markers["b"].touch()
    assert snapshot_pod.ready_peers(HOST, IPS["a"], dns) == [IPS["b"]]


# --- what the plan declares ------------------------------------------------------------------------------------------------

def _objects(plan) -> dict[tuple[str, str], dict]:
    return {(m["kind"], m["metadata"]["name"]): m for m in plan.kubernetes_objects()}


def _selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_prod_declares_the_headless_service_of_the_ready_replicas_of_the_key_and_the_sidecar_resolves_it(prod_plan, tmp_path):
    from tests.k8s_checks import checkov_scan, validate_manifest, write_manifests
    from tests.test_time_to_serve_stack import containers, env, serving_workload

    objects = _objects(prod_plan)
    service = objects[("Service", "kimi-k3-serving-key-peers")]
    workload = serving_workload(prod_plan)
    labels = workload["spec"]["template"]["metadata"]["labels"]
    spec = service["spec"]
    assert spec["clusterIP"] == "None" and spec["publishNotReadyAddresses"] is False  # only Ready endpoints resolve
    assert _selects(spec["selector"], labels) and peer_transfer.PEER_KEY_LABEL in spec["selector"]  # the pods of this key, the one label
    warm = env(containers(workload["spec"]["template"]["spec"])["warmup"])
    namespace = service["metadata"]["namespace"]
    assert warm[engine_snapshot.PEERS_HOST_ENV] == f"kimi-k3-serving-key-peers.{namespace}.svc.cluster.local"
    assert warm[engine_snapshot.POD_IP_ENV] == {"fieldRef": {"fieldPath": "status.podIP"}}
    serving_name, _, rest = warm[engine_snapshot.SERVING_HOST_ENV].partition(".")
    every = objects[("Service", serving_name)]  # every Ready serving pod, of any key (a rollout's old pod)
    assert rest == f"{namespace}.svc.cluster.local" and every["spec"]["clusterIP"] == "None" and not every["spec"].get("publishNotReadyAddresses")
    assert _selects(every["spec"]["selector"], labels) and peer_transfer.PEER_KEY_LABEL not in every["spec"]["selector"]
    # the pod may ask kube-dns: an egress rule of a policy selecting the serving pods names kube-dns on 53
    dns_out = [p for (kind, _), p in objects.items() if kind == "NetworkPolicy" and _selects(p["spec"]["podSelector"].get("matchLabels", {}), labels)
               and any(any(t.get("podSelector", {}).get("matchLabels") == {"k8s-app": "kube-dns"} for t in rule.get("to", []))
                       and {"port": 53, "protocol": "UDP"} in rule.get("ports", []) for rule in p["spec"].get("egress", []))]
    assert dns_out, "no NetworkPolicy lets the serving pods query kube-dns"
    picked = [service, workload, *dns_out]
    for manifest in picked:
        validate_manifest(manifest, prod_plan.settings.cluster.version)
    write_manifests(picked, tmp_path)
    report = checkov_scan(tmp_path)
    assert report["failed"] == [], [(c["check_id"], c["resource"]) for c in report["failed"]]


def test_one_replica_declares_no_election():
    from kimi_k3.stack import time_to_serve
    from kimi_k3.stack.settings import load_stack

    prod = load_stack("prod")
    one = replace(prod, serving=replace(prod.serving, replicas=1))
    assert time_to_serve.startup_inputs(prod).dump_beside_peer and not time_to_serve.startup_inputs(one).dump_beside_peer
    assert not engine_snapshot.dump_waits_for_peer(s3_copy=False, replicas=2) and engine_snapshot.dump_waits_for_peer(s3_copy=True, replicas=2)


def test_the_cold_case_first_ready_pays_no_dump_and_the_plan_prints_the_full_capacity_extra():
    from kimi_k3.stack import time_to_serve
    from kimi_k3.stack.settings import load_stack
    from kimi_k3.weights import estimate

    x = time_to_serve.startup_inputs(load_stack("prod"))
    single = replace(x, dump_beside_peer=False)
    cold, old = estimate.estimate_case(x, "cold"), estimate.estimate_case(single, "cold")
    assert not any(p.name.startswith("engine snapshot dump") for p in cold.phases)
    assert cold.minutes == pytest.approx(old.minutes - estimate.dump_minutes(x))  # the first Ready is the loser's: no dump
    assert estimate.estimate_case(x, "warm").minutes == estimate.estimate_case(single, "warm").minutes  # the S3 copy: no dump either way
    lines = estimate.format_estimates(x)
    assert lines[-1].endswith(f"full capacity at +{estimate.dump_minutes(x):.1f} min") and "first Ready pays no dump" in lines[-1]
    assert "dumps it before Ready" in estimate.format_estimates(single)[-1]
