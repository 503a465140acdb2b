"""The SageMaker name rule (``hyperpod_rules.is_sagemaker_name``), one home for cluster, instance group and endpoint names.

The SageMaker model's pattern ``^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`` lets runs of hyphens through
at any length; the API also caps these names at 63 characters. Both halves hold wherever a name
reaches SageMaker: the HyperPod cluster, its instance groups and the endpoint the operator registers.
"""

from __future__ import annotations

import pytest

from kimi_k3.errors import UserError
from kimi_k3.hyperpod import rules as rules
from kimi_k3.hyperpod.endpoint import render_inference_endpoint_config
from tests.builders import serving_contract

LONG_HYPHENATED = "k" + "-" * 62 + "3"
"""64 characters that match the pattern (hyphens between two alphanumerics) but not the length cap."""


@pytest.mark.parametrize(
    "name, accepted",
    [("kimi-k3", True), ("k" * 63, True), ("k" * 64, False), (LONG_HYPHENATED, False), ("-k3", False), ("kimi_k3", False), (3, False)],
)
def test_the_pattern_and_the_length_both_decide(name, accepted):
    assert rules.is_sagemaker_name(name) is accepted


def test_cluster_and_group_names_use_the_rule():
    with pytest.raises(UserError, match=f"HyperPod cluster name '{LONG_HYPHENATED}' is not accepted; 1-63 letters"):
        rules.check_names(LONG_HYPHENATED, ("g",))
    with pytest.raises(UserError, match=f"instance group name '{LONG_HYPHENATED}' is not accepted; 1-63 letters"):
        rules.check_names("kimi-k3", (LONG_HYPHENATED,))


def test_an_endpoint_name_longer_than_63_is_refused_like_a_cluster_name():
    with pytest.raises(UserError, match="endpoint_name .* a SageMaker endpoint name: 1-63 letters, digits and '-'"):
        render_inference_endpoint_config(serving_contract(), endpoint_name=LONG_HYPHENATED)
    assert render_inference_endpoint_config(serving_contract(), endpoint_name="k" * 63)["spec"]["endpointName"] == "k" * 63
