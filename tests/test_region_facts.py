"""Region and instance facts (issue 24, points 4 and 5): a region that does not exist, one the library has no
data for, an unpinned weights prefix, and messages that name the key the user set."""

from __future__ import annotations

import pytest

from kimi_k3.cli import main
from kimi_k3.stack import settings
from kimi_k3.stack.project import library_project, read_stack_config
from kimi_k3.stack.region_facts import REGION_DATA_SOURCE
from tests.cli_helpers import one_line_error
from tests.user_project import copy_library_project, library_stack

NOW = ("--now", "2026-12-01T08:00:00Z")
REV = "3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20"


def _plan_refused(tmp_path, capsys, stack: str, old: str, new: str) -> str:
    text = library_stack(stack)
    assert old in text
    project = copy_library_project(tmp_path / "p", {stack: text.replace(old, new)})
    assert main(["plan", stack, "--program", str(project), "--quiet", "--out", str(tmp_path / "out"), *NOW]) == 2
    err = one_line_error(capsys)
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(("region", "expected"), [
    ("eu-east-1", "config aws:region: 'eu-east-1' is not accepted; not an EC2 region (botocore "),
    ("us-north-1", "config aws:region: 'us-north-1' is not accepted; not an EC2 region"),
    ("us-eats-1", "config aws:region: 'us-eats-1' is not accepted; expected an AWS region name such as us-east-1, us-west-2 or eu-north-1; did you mean"),
])
def test_a_region_typo_names_aws_region_first(tmp_path, capsys, region, expected):
    """The dev stack's pull-through secret ARN names us-east-1: the typo is reported on aws:region, not on the ARN."""
    err = _plan_refused(tmp_path, capsys, "dev", "aws:region: us-east-1", f"aws:region: {region}")
    assert err.startswith(f"kimi-k3: error: {expected}") and "dockerHubPullThroughSecretArn" not in err


def test_a_region_without_data_for_the_gpu_type_warns_with_the_catalog_and_its_date():
    config = read_stack_config(library_project(), "dev", {"aws:region": "eu-west-3", "kimi-k3:dockerHubPullThroughSecretArn": None})
    found = settings.from_values(config.values, config.secret_keys).warnings
    warning = next(w for w in found if w.startswith("aws:region eu-west-3"))
    assert f"the library has no data for p6-b300.48xlarge there ({REGION_DATA_SOURCE}: us-east-1, us-west-2)" in warning
    assert "2026-12" in warning and "kimi-k3 capacity offerings" in warning


def test_the_repository_stacks_have_data_for_their_region():
    for stack in ("dev", "prod"):
        config = read_stack_config(library_project(), stack)
        assert not [w for w in settings.from_values(config.values, config.secret_keys, stack=stack).warnings if w.startswith("aws:region")]


def test_an_unpinned_weights_prefix_is_refused_in_prod(tmp_path, capsys):
    err = _plan_refused(tmp_path, capsys, "prod", f"moonshotai/Kimi-K3/{REV}/", "moonshotai/Kimi-K3/latest/")
    assert "config kimi-k3:weightsS3Uri: 's3://acme-ml-weights-us-west-2/moonshotai/Kimi-K3/latest/' is not accepted; prod requires a pinned prefix" in err
    assert f"the prefix does not name the pinned revision {REV} (kimi-k3:modelRevision)" in err


def test_an_unpinned_weights_prefix_is_a_warning_in_dev():
    config = read_stack_config(library_project(), "dev", {"kimi-k3:weightsSource": "s3", "kimi-k3:weightsS3Uri": "s3://acme-weights-us-east-1/kimi/latest/"})
    found = settings.from_values(config.values, config.secret_keys).warnings
    assert any(w.startswith("kimi-k3:weightsS3Uri: the prefix does not name the pinned revision") and w.endswith("(refused in prod)") for w in found), found


def test_a_vpc_overlapping_the_default_service_range_names_vpc_cidr(tmp_path, capsys):
    err = _plan_refused(tmp_path, capsys, "dev", "kimi-k3:vpcCidr: 10.42.0.0/16", "kimi-k3:vpcCidr: 172.20.0.0/16")
    assert "config kimi-k3:vpcCidr: '172.20.0.0/16' is not accepted; must not overlap the Kubernetes service CIDR 172.20.0.0/16 (kimi-k3:clusterServiceCidr's default)" in err


def test_a_service_range_the_user_set_over_the_vpc_names_cluster_service_cidr():
    config = read_stack_config(library_project(), "dev", {"kimi-k3:clusterServiceCidr": "10.42.0.0/16"})
    with pytest.raises(settings.SettingsError) as caught:
        settings.from_values(config.values, config.secret_keys)
    assert caught.value.key == "kimi-k3:clusterServiceCidr" and "(kimi-k3:vpcCidr)" in str(caught.value)


def test_the_regions_read_from_the_endpoint_data_are_botocores_own_answer():
    """ec2_regions reads botocore's endpoints.json without botocore.session: the same regions the session lists."""
    import botocore.session

    from kimi_k3.stack import region_facts

    session = botocore.session.get_session()
    expected = {r for partition in session.get_available_partitions() for r in session.get_available_regions("ec2", partition_name=partition)}
    regions, version = region_facts.ec2_regions()
    assert regions == expected and "us-east-1" in regions and version == botocore.__version__
