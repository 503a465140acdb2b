"""IAM permissions AWS documents for a role, vendored byte for byte, and what a role's policy leaves out of them.

Where an AWS guide lists the actions a role must have, the list is copied into ``components/data/``
(provenance in ``components/data/README.md``) and the role's policy is checked against it
(:func:`uncovered`), so a dropped action fails a test instead of a build or a flow log at run time:

- :data:`CODEBUILD_VPC_POLICY`: AWS CodeBuild user guide, "Allow CodeBuild access to AWS services required
  to create a VPC network interface" (the deploy runner's service role, :mod:`kimi_k3.cluster.deploy_runner`);
- :data:`FLOW_LOGS_POLICY`: Amazon VPC user guide, "IAM role for publishing flow logs to CloudWatch Logs"
  ("must include at least the following permissions"; the flow-logs role, :mod:`kimi_k3.network.vpc`);
- :data:`EKS_NODE_ROLE_PAGE`: EKS user guide, "Amazon EKS node IAM role" (the managed policies a node role
  needs, :func:`required_node_policies`; :mod:`kimi_k3.cluster.node_role`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any

CODEBUILD_VPC_POLICY = "codebuild-vpc-network-interface-policy.json"
"""The CodeBuild user guide's example policy for a build in a VPC (``components/data/``)."""
FLOW_LOGS_POLICY = "vpc-flow-logs-cloudwatch-policy.json"
"""The VPC user guide's least permissions of a flow log's role publishing to CloudWatch Logs (``components/data/``)."""
EKS_NODE_ROLE_PAGE = "eks-create-node-role.adoc"
"""The EKS user guide page "Amazon EKS node IAM role" (``components/data/``)."""


def data_text(name: str) -> str:
    """A vendored file of ``components/data/``."""
    return resources.files("kimi_k3").joinpath("data", name).read_text()


def documented_policy(name: str) -> dict[str, Any]:
    """A vendored policy document (:data:`CODEBUILD_VPC_POLICY`, :data:`FLOW_LOGS_POLICY`)."""
    document: dict[str, Any] = json.loads(data_text(name))
    return document


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def statements(policy: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The statements of a policy document (one statement or a list)."""
    yield from _listed(policy.get("Statement") or [])


def _resource_kind(arn: str) -> str:
    """What an ARN names once its region and account are left out: ``ec2:network-interface/*`` of
    ``arn:aws:ec2:region:account-id:network-interface/*``; ``*`` for ``*``."""
    if arn == "*":
        return "*"
    parts = arn.split(":", 5)
    return f"{parts[2]}:{parts[5]}" if len(parts) == 6 else arn


def uncovered(documented: Mapping[str, Any], policy: Mapping[str, Any], narrowed: Mapping[str, str] | None = None) -> list[str]:
    """What ``policy`` leaves out of ``documented``, one line each: a documented action no Allow statement grants; one
    granted on another kind of resource than documented (``narrowed`` names the actions the role grants on a narrower
    resource on purpose, with the reason); a documented condition (operator and key) the granting statement lacks, or
    one whose documented value (not a placeholder) it changes."""
    narrowed = dict(narrowed or {})
    problems = []
    ours = [s for s in statements(policy) if s.get("Effect") == "Allow"]
    for doc in statements(documented):
        kinds = {_resource_kind(r) for r in _listed(doc.get("Resource"))}
        for action in _listed(doc.get("Action")):
            granting = [s for s in ours if action in _listed(s.get("Action"))]
            if not granting:
                problems.append(f"{action} is not granted")
                continue
            fits = [s for s in granting if {_resource_kind(str(r)) for r in _listed(s.get("Resource"))} <= kinds or (kinds == {"*"} and action in narrowed)]
            if not fits:
                problems.append(f"{action} is granted on {[s.get('Resource') for s in granting]}, documented on {sorted(kinds)}")
                continue
            for operator, keys in (doc.get("Condition") or {}).items():
                for key, value in keys.items():
                    theirs = [(s.get("Condition") or {}).get(operator, {}) for s in fits]
                    if not any(key in t for t in theirs):
                        problems.append(f"{action}: condition {operator} {key} is missing")
                    elif not any(_placeholder(v) for v in _listed(value)) and not any(_listed(t.get(key)) == _listed(value) for t in theirs if key in t):
                        problems.append(f"{action}: condition {operator} {key} is not {value}")
    return problems


_PLACEHOLDER = re.compile(r"\b(region|account-id|account_id|subnet-id-\d+)\b")


def _placeholder(value: Any) -> bool:
    return isinstance(value, str) and bool(_PLACEHOLDER.search(value))


_REQUIRED_POLICY = re.compile(r"^\* (?!\(Optional\)).*?link:aws-managed-policy/latest/reference/(\w+)\.html", re.M)


def required_node_policies(page: str | None = None) -> tuple[str, ...]:
    """The managed policies the EKS node IAM role page lists as required (its bullets not marked "(Optional)")."""
    return tuple(dict.fromkeys(_REQUIRED_POLICY.findall(page if page is not None else data_text(EKS_NODE_ROLE_PAGE))))


__all__ = [
    "CODEBUILD_VPC_POLICY", "EKS_NODE_ROLE_PAGE", "FLOW_LOGS_POLICY", "data_text", "documented_policy", "required_node_policies", "statements",
    "uncovered",
]
