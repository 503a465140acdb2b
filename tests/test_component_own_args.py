"""Components check their own args (issue 24, point 6): a program building them directly gets one-line errors
before anything is declared, as the settings layer gives for a stack."""

from __future__ import annotations

import pulumi

from kimi_k3 import Network, NetworkArgs, VllmServer, VllmServerArgs, offline
from kimi_k3.errors import ComponentInputError
from tests.builders import block_facts, serving_contract
from tests.conftest import NOW
from tests.refusals import assert_refused_before_declaring


def test_more_replicas_than_the_block_has_nodes_is_refused_by_the_server_itself():
    block = block_facts(instance_count=2)
    err = assert_refused_before_declaring(
        lambda: VllmServer("kimi-k3", VllmServerArgs(contract=serving_contract(), api_key=pulumi.Output.secret("k"), replicas=3, reservation=block)),
        error=ComponentInputError,
    )
    assert "replicas 3 is not accepted; at most 2: the Capacity Block" in str(err) and "\n" not in str(err)


def test_a_block_of_another_instance_type_is_refused():
    block = block_facts(instance_type="p5en.48xlarge")
    err = assert_refused_before_declaring(
        lambda: VllmServer("kimi-k3", VllmServerArgs(contract=serving_contract(), api_key=pulumi.Output.secret("k"), replicas=1, reservation=block)),
        error=ComponentInputError,
    )
    assert "instance_type 'p6-b300.48xlarge' is not accepted; the Capacity Block" in str(err) and "reserves p5en.48xlarge" in str(err)


def test_azs_outside_the_providers_region_are_refused_by_the_network_itself():
    engine = offline.OfflineEngine(now=NOW, region="us-west-2")
    err = assert_refused_before_declaring(
        lambda: Network("net", NetworkArgs(cluster_name="c", vpc_cidr="10.50.0.0/16", availability_zones=("us-west-2a", "us-east-1b"))),
        engine=engine, error=ComponentInputError,
    )
    assert "not all in region us-west-2, the AWS provider's region (aws:region)" in str(err)


def test_a_missing_api_key_is_refused_by_the_server_itself():
    err = assert_refused_before_declaring(
        lambda: VllmServer("kimi-k3", VllmServerArgs(contract=serving_contract())), error=ComponentInputError,
    )
    assert "api_key is required" in str(err)
