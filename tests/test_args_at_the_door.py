"""Types at the door (issue 32, point 2) and example values in one's own program (point 4), beside the mistakes table:
the args check of every public args class, the example-value warning's one home, and the stack path left as it was."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
from datetime import UTC, datetime

import pulumi
import pytest

import kimi_k3
from kimi_k3 import CapacityBlockFacts, ClusterArgs, NetworkArgs, offline
from kimi_k3.core import example_values
from kimi_k3.core.args_check import example_value_warnings
from kimi_k3.errors import ComponentInputError
from kimi_k3.stack import lint
from tests.conftest import NOW

PUBLIC_ARGS = sorted(name for name in kimi_k3.__all__ if name.endswith("Args") or name in ("BlockNeeds", "ServingContract", "WeightsContract", "ApiContract", "EngineProfile", "ImageContract"))


@pytest.mark.parametrize("name", PUBLIC_ARGS)
def test_every_public_args_class_checks_its_types_at_the_door(name):
    cls = getattr(kimi_k3, name)
    assert dataclasses.is_dataclass(cls) and cls.__init__.__code__.co_name == "checked_init", name


def test_a_float_version_is_one_line_naming_the_field_its_type_and_what_is_accepted():
    with pytest.raises(ComponentInputError) as caught:
        ClusterArgs(version=1.34, vpc_id="vpc-1", private_subnet_ids=["a", "b"], admin_role_arns=["r"])  # type: ignore[arg-type]
    assert str(caught.value) == "ClusterArgs: version 1.34 (float) is not accepted; expected a str"
    assert caught.value.errors == [{"property_path": "version", "reason": "version 1.34 (float) is not accepted; expected a str"}]


def test_a_wrong_item_names_its_index_and_a_bool_is_not_an_int():
    with pytest.raises(ComponentInputError, match=r"^NetworkArgs: availability_zones\[1\] 2 \(int\) is not accepted; expected a str$"):
        NetworkArgs(cluster_name="c", availability_zones=["us-east-1a", 2])  # type: ignore[list-item]
    with pytest.raises(ComponentInputError, match=r"flow_log_retention_days True \(bool\) is not accepted; expected an int"):
        NetworkArgs(cluster_name="c", flow_log_retention_days=True)


def test_the_example_value_rule_has_one_home_for_stack_files_and_args():
    text = "arn:aws:iam::123456789012:role/platform-admin"
    finding = example_values.example_findings(text)
    assert finding == [f"{text!r} (AWS documentation's example account 123456789012)"]
    assert lint.example_value_warnings({"kimi-k3:clusterAdminRoleArns": f'["{text}"]'}) == [
        f"kimi-k3:clusterAdminRoleArns holds {finding[0]}: an example value left in the stack; replace it with your own"]
    args = NetworkArgs(cluster_name="c", availability_zones=("us-east-1a", "us-east-1b"), tags={"owner": "ops@example.com"})
    assert example_value_warnings(args) == [
        "NetworkArgs.tags['owner'] holds 'ops@example.com' (the example domain example.com, RFC 2606): an example value left in the program; replace it with your own"]


def test_the_stack_path_does_not_warn_for_its_args_again(dev_plan):
    """The stack file is linted (kimi-k3 plan); the args the platform builds from it are not warned a second time."""
    assert not [w for w in dev_plan.warnings if "left in the program" in w]


PUBLIC_COMPONENTS = sorted(
    name for name in kimi_k3.__all__ if isinstance(getattr(kimi_k3, name), type) and issubclass(getattr(kimi_k3, name), pulumi.ComponentResource)
)
"""Every component ``kimi_k3`` exports (``Network.from_existing``'s ``ExistingNetwork`` is walked through its caller below)."""


def _refusal(build) -> str:
    """The one line a program building ``build()`` is refused with, under the offline engine, before anything is declared."""
    engine = offline.OfflineEngine(now=NOW)
    with pytest.raises(ComponentInputError) as caught:
        engine.run(build)
    assert [r.type for r in engine.resources if not r.type.startswith("pulumi:providers:")] == []
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_every_public_component_is_one_the_walk_knows():
    assert len(PUBLIC_COMPONENTS) >= 20 and {"Cluster", "VllmServer", "Network", "CapacityBlockNodeGroup", "Platform"} <= set(PUBLIC_COMPONENTS)


@pytest.mark.parametrize("name", PUBLIC_COMPONENTS)
@pytest.mark.parametrize("given", ["notargs", {}, None], ids=["str", "dict", "None"])
def test_something_other_than_the_args_class_is_one_line_naming_the_component_the_argument_its_type_and_the_class(name, given):
    component = getattr(kimi_k3, name)
    parameter = list(inspect.signature(component.__init__).parameters)[2]  # (self, name, args)
    expected = typing.get_type_hints(component.__init__, vars(sys.modules[component.__module__]))[parameter].__name__
    message = _refusal(lambda: component("x", given, now=NOW) if name == "Platform" else component("x", given))
    shown = "None" if given is None else f"{given!r} ({type(given).__name__})"
    assert message.startswith(f"{name} 'x': {parameter} {shown} is not accepted; expected a{'n' if expected[0] in 'AEIOU' else ''} {expected}"), message


def test_the_args_left_out_or_by_keyword_none_and_the_existing_network_are_named_too():
    assert _refusal(lambda: kimi_k3.Cluster("c")) == "Cluster 'c': args is required: a ClusterArgs, as in Cluster(name, ...)"  # type: ignore[call-arg]
    assert _refusal(lambda: kimi_k3.VllmServer("x", args=None)).startswith("VllmServer 'x': args None is not accepted; expected a VllmServerArgs")  # type: ignore[arg-type]
    net = NetworkArgs(cluster_name="c")
    assert "Network.from_existing 'n': args NetworkArgs(" in _refusal(lambda: kimi_k3.Network.from_existing("n", net))  # type: ignore[arg-type]
    assert _refusal(lambda: kimi_k3.Network(3, net)) == "Network: name 3 (int) is not accepted; expected a str"  # type: ignore[arg-type]


def test_opts_that_are_not_resource_options_are_named_without_an_address():
    message = _refusal(lambda: kimi_k3.WeightsBucket("w", kimi_k3.WeightsBucketArgs(bucket_name="kimi-weights"), opts={"provider": pulumi.ResourceOptions()}))  # type: ignore[arg-type]
    assert message.startswith("WeightsBucket 'w': opts {'provider': <ResourceOptions>} (dict) is not accepted; expected a ResourceOptions or None"), message


_FACTS = {"reservation_id": "cr-0a1b2c3d4e5f60718", "availability_zone": "us-east-1a", "instance_type": "p6-b300.48xlarge", "instance_count": 2, "state": "active",
          "start": datetime(2026, 12, 1, 11, 30, tzinfo=UTC), "end": datetime(2026, 12, 8, 11, 30, tzinfo=UTC)}


@pytest.mark.parametrize(("change", "line"), [
    ({"instance_count": "2"}, "CapacityBlockFacts: instance_count '2' (str) is not accepted; expected an int (a whole number)"),
    ({"instance_count": 2.0}, "CapacityBlockFacts: instance_count 2.0 (float) is not accepted; expected an int (a whole number)"),
    ({"start": 1764577800.0}, "CapacityBlockFacts: start 1764577800.0 (float) is not accepted; expected a datetime or None"),
    ({"end": datetime(2026, 12, 8, 11, 30)}, "CapacityBlockFacts: end 2026-12-08T11:30:00 has no timezone; expected a UTC datetime such as datetime(2026, 12, 1, 11, 30, tzinfo=UTC)"),
    ({"instance_type": "p6-b300"}, "CapacityBlockFacts: instance_type 'p6-b300' is not accepted; expected an EC2 instance type such as p6-b300.48xlarge; did you mean p6-b300.48xlarge?"),
    ({"instance_count": -1}, "CapacityBlockFacts: instance_count -1 is not accepted; expected 0 or more instances"),
    ({"tags": {"team": "llm"}}, "CapacityBlockFacts: tags {'team': 'llm'} (dict) is not accepted; expected a sequence of tuple (str, str) (a list or tuple, not a str)"),
    ({"reservation_idd": "cr-0a1b2c3d4e5f60718"}, "CapacityBlockFacts: reservation_idd is not an argument of CapacityBlockFacts; did you mean reservation_id?"),
])
def test_hand_built_capacity_block_facts_are_refused_at_construction(change, line):
    with pytest.raises(ComponentInputError) as caught:
        CapacityBlockFacts(**{**_FACTS, **change})
    assert str(caught.value) == line


def test_the_facts_ec2_answers_map_into_are_accepted():
    facts = CapacityBlockFacts.from_ec2({
        "CapacityReservationId": "cr-0a1b2c3d4e5f60718", "AvailabilityZone": "us-east-1a", "InstanceType": "p6-b300.48xlarge", "TotalInstanceCount": 2,
        "State": "scheduled", "StartDate": _FACTS["start"], "EndDate": _FACTS["end"], "Tags": [{"Key": "team", "Value": "llm"}],
    })
    assert (facts.instance_count, facts.start, facts.tags) == (2, _FACTS["start"], (("team", "llm"),))


def _exported_functions() -> list[tuple[str, str]]:
    """``(package, name)`` of every plain function a package of the public face exports (what one's own program calls)."""
    import kimi_k3.hyperpod
    import kimi_k3.serving

    return sorted((package.__name__, name) for package in (kimi_k3, kimi_k3.serving, kimi_k3.hyperpod)
                  for name in package.__all__ if inspect.isfunction(getattr(package, name)))


def test_the_walk_finds_the_exported_functions():
    assert {("kimi_k3", "assess"), ("kimi_k3", "verdict"), ("kimi_k3", "lookup_capacity_block"),
            ("kimi_k3", "render_inference_endpoint_config"), ("kimi_k3.serving", "contract_summary")} <= set(_exported_functions())


@pytest.mark.parametrize(("package", "name"), _exported_functions())
def test_every_exported_function_checks_its_arguments_at_the_door(package, name):
    function = getattr(sys.modules[package], name)
    assert function.__code__.co_name == "checked_arguments", f"{package}.{name} is not wrapped by core/args_check.checked_function"
    parameters = inspect.signature(function).parameters.values()
    required = [p.name for p in parameters if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    first = required[0]
    with pytest.raises(ComponentInputError) as caught:
        function(*[object()] * len(required))  # nothing the library's functions take as an argument
    assert caught.value.component == name and len(caught.value.problems) == len(required), str(caught.value)
    assert caught.value.problems[0].reason.startswith(f"{first} <object> (object) is not accepted; expected "), str(caught.value)


_NOW = datetime(2026, 12, 1, 8, tzinfo=UTC)


@pytest.mark.parametrize(("call", "line"), [
    (lambda: kimi_k3.assess(CapacityBlockFacts(**_FACTS), "p6-b300.48xlarge", _NOW),
     "assess: needs 'p6-b300.48xlarge' (str) is not accepted; expected a BlockNeeds"),
    (lambda: kimi_k3.assess(CapacityBlockFacts(**_FACTS), kimi_k3.BlockNeeds("p6-b300.48xlarge")),
     "assess: now is required: a datetime, as in assess(block, needs, now)"),
    (lambda: kimi_k3.assess(CapacityBlockFacts(**_FACTS), kimi_k3.BlockNeeds("p6-b300.48xlarge"), datetime(2026, 12, 1, 8)),
     "assess: now 2026-12-01T08:00:00 has no timezone; expected a UTC datetime such as datetime(2026, 12, 1, 11, 30, tzinfo=UTC)"),
    (lambda: kimi_k3.assess(CapacityBlockFacts(**_FACTS), kimi_k3.BlockNeeds("p6-b300.48xlarge"), _NOW, term=None),
     "assess: term is not an argument of assess; did you mean terms?"),
    (lambda: kimi_k3.verdict(["cannot serve"]), "verdict: findings[0] 'cannot serve' (str) is not accepted; expected a Finding"),
    (lambda: kimi_k3.verdict(kimi_k3.assess), "verdict: findings <function assess> (function) is not accepted; expected a sequence of Finding (a list or tuple, not a str)"),
    (lambda: kimi_k3.lookup_capacity_block("cr-0a1b2c3d4e5f60718", pulumi.ResourceOptions()),
     "lookup_capacity_block: opts <ResourceOptions> (ResourceOptions) is not accepted; expected an InvokeOptions or None"),
    (lambda: kimi_k3.lookup_capacity_block("cr-0a1b2c3d4e5f60718", region="us-east-1a"),
     "lookup_capacity_block: region 'us-east-1a' is not accepted; expected an AWS region name such as us-east-1"),
])
def test_an_exported_function_refuses_a_wrong_argument_in_one_line_naming_it(call, line):
    with pytest.raises(ComponentInputError) as caught:
        call()
    assert str(caught.value) == line


def test_verdict_refuses_a_generator_whose_warnings_it_would_lose():
    """``verdict`` reads its findings twice (the failures, then the warnings): a generator would give no warnings at all."""
    ending = CapacityBlockFacts(**{**_FACTS, "end": _NOW + (_FACTS["end"] - _FACTS["start"]) / 84})  # two hours left: a warning
    findings = kimi_k3.assess(ending, kimi_k3.BlockNeeds("p6-b300.48xlarge"), _NOW)
    assert kimi_k3.verdict(findings)
    with pytest.raises(ComponentInputError, match=r"^verdict: findings <generator object .* \(generator\) is not accepted"):
        kimi_k3.verdict(f for f in findings)


def test_the_platform_refuses_a_naive_now_naming_its_own_parameter():
    from tests.builders import load_stack_settings

    settings = load_stack_settings()
    message = _refusal(lambda: kimi_k3.Platform("kimi", settings, now=datetime(2026, 12, 1, 8)))
    assert message == "Platform 'kimi': now 2026-12-01T08:00:00 has no timezone; expected a UTC datetime such as datetime(2026, 12, 1, 11, 30, tzinfo=UTC)"


@pytest.mark.parametrize(("changes", "line"), [
    ({"nodes_required": 0}, "BlockNeeds: nodes_required 0 is not accepted; expected at least 1"),
    ({"region": "us-east-1a"}, "BlockNeeds: region 'us-east-1a' is not accepted; expected an AWS region name such as us-east-1"),
])
def test_block_needs_no_block_can_be_judged_against_are_refused_where_they_are_built(changes, line):
    with pytest.raises(ComponentInputError) as caught:
        kimi_k3.BlockNeeds("p6-b300.48xlarge", **changes)
    assert str(caught.value) == line


def test_the_serving_startup_checks_its_field_types_at_the_door():
    """``ServingStartup`` (``VllmServingArgs.startup``) refused ``warmup="no"`` as true before it was checked."""
    from kimi_k3.weights.serving_pod import ServingStartup

    with pytest.raises(ComponentInputError) as caught:
        ServingStartup(warmup="no")
    assert str(caught.value) == "ServingStartup: warmup 'no' (str) is not accepted; expected a bool"
    with pytest.raises(ComponentInputError, match=r"ServingStartup: sync_streams .* did you mean"):
        ServingStartup(sync_streams=4)  # type: ignore[call-arg]
