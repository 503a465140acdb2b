"""The cluster reads of ``kimi-k3 status``, with the official Kubernetes Python client, as the API's JSON.

Four read-only calls (what ``kubectl get nodes -l …``, ``kubectl get pods -n … -l …``,
``kubectl get events -n …`` and ``kubectl logs --tail`` call): ``GET /api/v1/nodes``,
``GET /api/v1/namespaces/NS/pods``, ``GET /api/v1/namespaces/NS/events``,
``GET /api/v1/namespaces/NS/pods/POD/log``. Answers stay the API's JSON (``_preload_content=False``)
so the pure views read the same documents a recorded response or a stub server holds.

The kubeconfig is the stack's (``pulumi stack output kubeconfig --show-secrets``) or a file
given with ``--kubeconfig``; never an ambient one picked silently. An EKS kubeconfig gets
its token from ``aws eks get-token --cluster-name NAME``: :func:`check_cluster_name` refuses
a kubeconfig whose context names another cluster than the stack's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kimi_k3.errors import UserError

TIMEOUT_S = 15
"""Seconds one API call may take."""


def _context(document: Mapping[str, Any], context: str | None) -> Mapping[str, Any] | None:
    name = context or document.get("current-context")
    return next((c for c in document.get("contexts") or [] if c.get("name") == name), None)


def exec_cluster_name(document: Mapping[str, Any], context: str | None = None) -> str | None:
    """The ``--cluster-name`` (or ``-i``, aws-iam-authenticator) an EKS kubeconfig's exec credential names, if any."""
    ctx = _context(document, context)
    if ctx is None:
        return None
    user_name = (ctx.get("context") or {}).get("user")
    user = next((u.get("user") or {} for u in document.get("users") or [] if u.get("name") == user_name), {})
    args = list((user.get("exec") or {}).get("args") or [])
    for flag in ("--cluster-name", "-i"):
        if flag in args and args.index(flag) + 1 < len(args):
            return str(args[args.index(flag) + 1])
    return None


def check_cluster_name(document: Mapping[str, Any], expected: str, context: str | None, source: str) -> None:
    """Refuse a kubeconfig whose exec credential is for another cluster than ``expected``."""
    named = exec_cluster_name(document, context)
    if named is not None and named != expected:
        raise UserError(f"{source} is for cluster {named}, not {expected} (the stack's): pass the stack's kubeconfig, or --context")


def read_kubeconfig(path: Path) -> dict[str, Any]:
    """A kubeconfig file (YAML or JSON) as a dict; UserError naming ``--kubeconfig`` when unreadable."""
    try:
        document = yaml.safe_load(path.expanduser().read_text())
    except OSError as err:
        raise UserError(f"--kubeconfig {path}: cannot read it ({err.strerror})") from None
    except yaml.YAMLError as err:
        raise UserError(f"--kubeconfig {path}: not YAML or JSON ({' '.join(str(err).split())[:120]})") from None
    if not isinstance(document, dict) or "clusters" not in document:
        raise UserError(f"--kubeconfig {path}: not a kubeconfig (no clusters)")
    return document


def parse_stack_output(text: str) -> dict[str, Any]:
    """The ``kubeconfig`` stack output as a dict (``pulumi stack output --json`` prints an object, or a string holding one)."""
    try:
        value = json.loads(text)
        if isinstance(value, str):
            value = yaml.safe_load(value)
    except (ValueError, yaml.YAMLError):
        raise UserError("the stack output kubeconfig is not a kubeconfig document") from None
    if not isinstance(value, dict) or "clusters" not in value:
        raise UserError("the stack output kubeconfig is not a kubeconfig document (no clusters)")
    return value


class KubeReader:
    """Read-only calls against one cluster, returning the API's JSON."""

    def __init__(self, document: Mapping[str, Any], context: str | None = None, source: str = "the kubeconfig") -> None:
        """Load credentials from the kubeconfig ``document`` (running its exec command, e.g. ``aws eks get-token``)."""
        from kubernetes import client, config

        configuration = client.Configuration()
        try:
            config.load_kube_config_from_dict(dict(document), context=context, client_configuration=configuration, persist_config=False)
        except Exception as err:  # ConfigException, or the exec plugin failing (no aws CLI, expired SSO session)
            raise UserError(f"{source}: cannot load it ({' '.join(str(err).split())[:200]})") from None
        configuration.retries = 1
        self.host = configuration.host
        self.source = source
        self._core = client.CoreV1Api(client.ApiClient(configuration))

    def _error(self, err: Exception, what: str) -> UserError:
        """One line for a failed call (``ApiException`` or a urllib3 connection error)."""
        from kubernetes.client.exceptions import ApiException

        if isinstance(err, ApiException):
            if err.status == 401:
                return UserError(f"the cluster API at {self.host} refused the credentials of {self.source} (401): refresh them (e.g. aws sso login) and retry")
            if err.status == 403:
                return UserError(f"the cluster API at {self.host} denied {what} (403): your identity needs read access to nodes, pods and pods/log (an EKS access entry)")
            return UserError(f"the cluster API at {self.host} answered {err.status} {err.reason} to {what}")
        reason = getattr(err, "reason", None) or err
        return UserError(f"cannot reach the cluster API at {self.host}: {' '.join(str(reason).split())[:160]}")

    def _call(self, what: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return method(*args, _preload_content=False, _request_timeout=TIMEOUT_S, **kwargs).data
        except (ApiException, HTTPError) as err:
            raise self._error(err, what) from None

    def nodes(self, selector: Mapping[str, str]) -> list[dict[str, Any]]:
        """Nodes with all of ``selector``'s labels."""
        data = self._call("list nodes", self._core.list_node, label_selector=_selector(selector))
        return list(json.loads(data).get("items") or [])

    def pods(self, namespace: str, selector: Mapping[str, str]) -> list[dict[str, Any]]:
        """Pods of ``namespace`` with all of ``selector``'s labels."""
        data = self._call(f"list pods in {namespace}", self._core.list_namespaced_pod, namespace, label_selector=_selector(selector))
        return list(json.loads(data).get("items") or [])

    def events(self, namespace: str) -> list[dict[str, Any]]:
        """Events of ``namespace`` (the kubelet's image pulls, scheduling)."""
        data = self._call(f"list events in {namespace}", self._core.list_namespaced_event, namespace)
        return list(json.loads(data).get("items") or [])

    def log_tail(self, namespace: str, pod: str, container: str, lines: int = 40, previous: bool = False, timestamps: bool = False) -> list[str]:
        """The last ``lines`` of a container's log (each led by its RFC 3339 time with ``timestamps``); empty when there is
        none yet (container waiting, pod gone)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            data = self._core.read_namespaced_pod_log(
                pod, namespace, container=container, tail_lines=lines, previous=previous, timestamps=timestamps,
                _preload_content=False, _request_timeout=TIMEOUT_S,
            ).data
        except ApiException as err:
            if err.status in (400, 404):  # "container … is waiting to start", or the pod went away
                return []
            raise self._error(err, f"read the log of {pod}/{container}") from None
        except HTTPError as err:
            raise self._error(err, f"read the log of {pod}/{container}") from None
        return data.decode("utf-8", "replace").splitlines()


def _selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


__all__ = ["TIMEOUT_S", "KubeReader", "check_cluster_name", "exec_cluster_name", "parse_stack_output", "read_kubeconfig"]
