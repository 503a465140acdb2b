"""One validation idiom: components collect every problem and raise it as one line, with property paths.

``ComponentInputError`` is a ``pulumi.RunError`` (the Python language host prints only its
message under ``pulumi up``: ``sdk/python/cmd/pulumi-language-python-exec`` in pulumi/pulumi
logs ``str(e)`` for a ``RunError`` and a traceback for anything else) and a
``pulumi.InputPropertiesError`` (its ``errors`` list property path and reason per problem).
"""

from __future__ import annotations

import pulumi
import pytest

from kimi_k3 import offline
from kimi_k3.capacity.node_group import CapacityBlockNodeGroup, CapacityBlockNodeGroupArgs
from kimi_k3.cli import main, one_line
from kimi_k3.cluster.pod_identity import PodIdentityRole, PodIdentityRoleArgs
from kimi_k3.errors import ComponentInputError, Problems, UserError
from tests.conftest import NOW


def test_a_component_error_is_a_run_error_and_an_input_properties_error():
    problems = Problems("Widget", "w")
    problems.reject("size", 0, "expected at least 1")
    with pytest.raises(ComponentInputError) as caught:
        problems.raise_any()
    err = caught.value
    assert isinstance(err, pulumi.RunError) and isinstance(err, pulumi.InputPropertiesError) and isinstance(err, UserError)
    assert str(err) == err.message == "Widget 'w': size 0 is not accepted; expected at least 1"
    assert err.errors == [{"property_path": "size", "reason": "size 0 is not accepted; expected at least 1"}]


def test_no_problem_raises_nothing_and_one_problem_raises():
    problems = Problems("Widget", "w")
    assert not problems and problems.raise_any() is None
    problems.reject("size", 0, "expected at least 1")
    assert problems
    with pytest.raises(ComponentInputError, match=r"^Widget 'w': size 0 is not accepted; expected at least 1$"):
        problems.raise_any()


def test_every_problem_is_reported_at_once_on_one_line():
    args = CapacityBlockNodeGroupArgs(
        cluster_name="c", kubernetes_version="1.34.2", subnet_ids_by_az={}, instance_type="p6-b300.48xlarge",
        now=NOW, reservation_id="cr-123", root_volume_gib=10, alert_email="nobody",
    )
    engine = offline.OfflineEngine(now=NOW, reservation=None)
    with pytest.raises(ComponentInputError) as caught:
        engine.run(lambda: CapacityBlockNodeGroup("gpu", args))
    err = caught.value
    paths = [e["property_path"] for e in err.errors]
    assert paths == ["reservation_id", "kubernetes_version", "subnet_ids_by_az", "root_volume_gib", "alert_email"]
    assert str(err).startswith("CapacityBlockNodeGroup 'gpu' has 5 problems: (1) reservation_id 'cr-123' is not accepted")
    assert "\n" not in str(err) and "kimi-k3:" not in str(err)  # the component's own args, no stack key
    assert engine.resources == []


def test_pod_identity_role_refuses_a_namespace_that_cannot_exist():
    engine = offline.OfflineEngine(now=NOW)
    args = PodIdentityRoleArgs(cluster_name="kimi-k3-dev", namespace="Kimi_Serving", service_account="vllm")
    with pytest.raises(ComponentInputError, match="PodIdentityRole 'weights': namespace 'Kimi_Serving' is not accepted; expected a Kubernetes namespace name"):
        engine.run(lambda: PodIdentityRole("weights", args))
    bad_account = PodIdentityRoleArgs(cluster_name="kimi-k3-dev", namespace="kimi-serving", service_account="VLLM")
    with pytest.raises(ComponentInputError, match="service_account 'VLLM' is not accepted"):
        engine.run(lambda: PodIdentityRole("weights", bad_account))
    assert engine.resources == []


def test_the_cli_prints_input_properties_errors_as_one_line(monkeypatch, capsys):
    """Ours and a plain ``pulumi.InputPropertiesError`` (another library's) both end as one line, exit 2."""
    from kimi_k3.cli import plan

    def raise_plain(args):
        raise pulumi.InputPropertiesError("bad inputs", [{"property_path": "spec.replicas", "reason": "must be\npositive"}])

    monkeypatch.setattr(plan, "run", raise_plain)
    assert main(["plan", "dev"]) == 2
    err = capsys.readouterr().err
    assert err == "kimi-k3: error: bad inputs: spec.replicas: must be positive\n"
    assert one_line(pulumi.InputPropertiesError("", [{"property_path": "a", "reason": "b"}])) == "a: b"
