"""A stub Kubernetes API server for ``kimi-k3 status``: a real HTTP server answering the paths the client calls.

It answers, from the objects a test puts in, exactly what the official Python client asks:
``GET /api/v1/nodes``, ``GET /api/v1/namespaces/NS/pods`` (both with an equality
``labelSelector``), ``GET /api/v1/namespaces/NS/events``, and ``GET /api/v1/namespaces/NS/pods/POD/log``
(``container``, ``tailLines``, ``previous``), as the API server does: JSON lists with ``kind`` /
``apiVersion`` / ``items``, plain-text logs, a ``Status`` object with 400 for a container
that has not started, 404 for a pod that does not exist, 401 without the bearer token.

The objects are built by the functions below in the shape the API server returns them
(``v1.Node``, ``v1.Pod`` with its ``status``), so the pure views read the same documents a
real cluster would serve. Listens on 127.0.0.1 only, in a daemon thread.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

TOKEN = "k8s-test-token"


def iso(moment: datetime) -> str:
    """The API server's timestamp form (``2026-12-01T11:48:00Z``)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------- objects


def node(name: str, *, ready: bool = True, gpus: int = 8, created: datetime, labels: dict[str, str] | None = None, conditions: list[dict] | None = None) -> dict:
    """A ``v1.Node`` of the Capacity Block node group (pool label, instance type, ``nvidia.com/gpu``)."""
    base_labels = {"kimi-k3.io/node-pool": "capacity-block", "node.kubernetes.io/instance-type": "p6-b300.48xlarge", "kubernetes.io/hostname": name}
    return {
        "kind": "Node", "apiVersion": "v1",
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": iso(created), "labels": {**base_labels, **(labels or {})}},
        "spec": {"providerID": f"aws:///us-east-1a/i-0{hashlib.sha256(name.encode()).hexdigest()[:16]}", "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "192", "memory": "4224000000Ki", "nvidia.com/gpu": str(gpus), "pods": "737"},
            "allocatable": {"cpu": "191450m", "memory": "4200000000Ki", "nvidia.com/gpu": str(gpus), "pods": "737"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady" if ready else "KubeletNotReady",
                 "message": "kubelet is posting ready status" if ready else "container runtime network not ready", "lastTransitionTime": iso(created)},
                *(conditions or []),
            ],
            "nodeInfo": {"kubeletVersion": "v1.34.2-eks-b1e3c3a", "osImage": "Amazon Linux 2023.9.20251120"},
        },
    }


def container_status(name: str, state: dict, *, ready: bool = False, started: bool | None = None, restarts: int = 0, last: dict | None = None, image: str = "") -> dict:
    """A ``v1.ContainerStatus``."""
    out: dict[str, Any] = {"name": name, "state": state, "lastState": last or {}, "ready": ready, "restartCount": restarts, "image": image, "imageID": ""}
    if started is not None:
        out["started"] = started
    return out


def running(since: datetime) -> dict:
    return {"running": {"startedAt": iso(since)}}


def waiting(reason: str, message: str = "") -> dict:
    return {"waiting": {"reason": reason, **({"message": message} if message else {})}}


def terminated(exit_code: int, reason: str, since: datetime, message: str = "") -> dict:
    return {"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": iso(since), "finishedAt": iso(since + timedelta(minutes=1)), **({"message": message} if message else {})}}


def pod(
    name: str,
    *,
    created: datetime,
    node_name: str | None = None,
    init: list[dict] | None = None,
    containers: list[dict] | None = None,
    ready: bool = False,
    phase: str = "Pending",
    unschedulable: str | None = None,
    labels: dict[str, str] | None = None,
    namespace: str = "kimi-serving",
) -> dict:
    """A serving ``v1.Pod`` (labels of ``VllmServer``), with the status the kubelet reports."""
    conditions = []
    if unschedulable:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable, "lastTransitionTime": iso(created)})
    else:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": iso(created)})
        conditions.append({"type": "Initialized", "status": "True" if containers and all("running" in c["state"] or "terminated" in c["state"] for c in containers) else "False"})
        conditions.append({"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": iso(created + timedelta(minutes=25))})
    pod_labels = {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "kimi-k3-serving", "kimi-k3.io/model": "kimi-k3", **(labels or {})}
    spec: dict[str, Any] = {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:kimi-k3"}]}
    if node_name:
        spec["nodeName"] = node_name
    status: dict[str, Any] = {"phase": phase, "conditions": conditions}
    if init is not None:
        status["initContainerStatuses"] = init
    if containers is not None:
        status["containerStatuses"] = containers
    return {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "creationTimestamp": iso(created), "labels": pod_labels},
        "spec": spec,
        "status": status,
    }


def pulled_event(pod_name: str, image: str, took: str, at: datetime, namespace: str = "kimi-serving") -> dict:
    """The kubelet's ``Pulled`` event (``Successfully pulled image "…" in 1m7.272s (1m7.272s including waiting)``)."""
    return {
        "kind": "Event", "apiVersion": "v1", "metadata": {"name": f"{pod_name}.pulled", "namespace": namespace},
        "involvedObject": {"kind": "Pod", "name": pod_name, "namespace": namespace}, "reason": "Pulled", "type": "Normal",
        "message": f'Successfully pulled image "{image}" in {took} ({took} including waiting). Image size: 10778400361 bytes.',
        "firstTimestamp": iso(at), "lastTimestamp": iso(at),
    }


# --------------------------------------------------------------------------- the server


def _matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


class FakeKubeApi:
    """The stub API server. Put objects in :attr:`nodes`, :attr:`pods`, :attr:`logs`; read :attr:`requests`."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.nodes: list[dict] = []
        self.pods: dict[str, list[dict]] = {}
        self.logs: dict[tuple[str, str, str, bool], str] = {}
        """(namespace, pod, container, previous) -> log text."""
        self.events: dict[str, list[dict]] = {}
        """namespace -> ``v1.Event`` objects."""
        self.requests: list[tuple[str, dict[str, list[str]], str | None]] = []
        """(path, query, Authorization header) of every request."""
        self.before_each: Callable[[FakeKubeApi], None] | None = None
        """Called before a pod list is answered (a test advances the cluster's state there)."""
        self.forbid = False
        """Answer 403 to everything (an identity without read access)."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str, message: str) -> None:
                self._send(code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code})

            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                auth = self.headers.get("Authorization")
                server.requests.append((url.path, query, auth))
                if auth != f"Bearer {server.token}":
                    return self._status(401, "Unauthorized", "Unauthorized")
                if server.forbid:
                    return self._status(403, "Forbidden", f'pods is forbidden: User "arn:aws:sts::123456789012:assumed-role/dev/x" cannot list resource at {url.path}')
                selector = (query.get("labelSelector") or [""])[0]
                parts = url.path.strip("/").split("/")
                if parts == ["api", "v1", "nodes"]:
                    items = [n for n in server.nodes if _matches(n["metadata"]["labels"], selector)]
                    return self._send(200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "4242"}, "items": items})
                if len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods":
                    if server.before_each:
                        server.before_each(server)
                    items = [p for p in server.pods.get(parts[3], []) if _matches(p["metadata"]["labels"], selector)]
                    return self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "4243"}, "items": items})
                if len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "events":
                    return self._send(200, {"kind": "EventList", "apiVersion": "v1", "metadata": {"resourceVersion": "4244"}, "items": server.events.get(parts[3], [])})
                if len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods" and parts[6] == "log":
                    ns, name = parts[3], parts[5]
                    container = (query.get("container") or [""])[0]
                    previous = (query.get("previous") or ["false"])[0] == "true"
                    if not any(p["metadata"]["name"] == name for p in server.pods.get(ns, [])):
                        return self._status(404, "NotFound", f'pods "{name}" not found')
                    text = server.logs.get((ns, name, container, previous))
                    if text is None:
                        return self._status(400, "BadRequest", f'container "{container}" in pod "{name}" is waiting to start: PodInitializing')
                    lines = text.splitlines()
                    tail = int((query.get("tailLines") or [str(len(lines))])[0])
                    return self._send(200, "".join(line + "\n" for line in lines[-tail:]), "text/plain")
                return self._status(404, "NotFound", "the server could not find the requested resource")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def kubeconfig(self, cluster_name: str = "kimi-k3-dev", token: str | None = None) -> dict:
        """A kubeconfig for this server, shaped like the EKS one (context and cluster named after the cluster)."""
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": "aws",
            "clusters": [{"name": cluster_name, "cluster": {"server": self.url}}],
            "contexts": [{"name": "aws", "context": {"cluster": cluster_name, "user": "aws"}}],
            "users": [{"name": "aws", "user": {"token": token or self.token}}],
        }

    def __enter__(self) -> FakeKubeApi:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
