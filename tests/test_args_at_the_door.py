"""Types at the door (issue 32, point 2) and example values in one's own program (point 4), beside the mistakes table:
the args check of every public args class, the example-value warning's one home, and the stack path left as it was."""

from __future__ import annotations

import dataclasses

import pytest

import kimi_k3
from kimi_k3 import ClusterArgs, NetworkArgs
from kimi_k3.core import example_values
from kimi_k3.core.args_check import example_value_warnings
from kimi_k3.errors import ComponentInputError
from kimi_k3.stack import lint

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
