"""Every config key's accepted set is closed (issue 32, point 3): an unknown value is refused with the nearest spelling;
``environment`` has no unlisted class; an explicit ``replicas: 0`` says what it means; a stack file's path where the
stack name goes names the stack."""

from __future__ import annotations

import ast

import pytest

from kimi_k3.cli import main
from kimi_k3.errors import SettingsError
from kimi_k3.stack import settings
from tests.builders import load_stack_settings, stack_config
from tests.conftest import ROOT

HYPERPOD = {"servingPlatform": "hyperpod", "trainingPlanArn": "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p", "exposure": "cluster"}

MISSPELT = {
    "environment": ("prd", "prod"),
    "servingPlatform": ("ekss", "eks"),
    "natGateways": ("perAZ", "perAz"),
    "weightsSource": ("S3x", "s3"),
    "kvCacheDtype": ("fp8_e4m", "fp8_e4m3"),
    "exposure": ("publc", "public"),
    "mediaPolicy": ("text_only", "text-only"),
    "deployRunner": ("codebuld", "codebuild"),
    "weightsVerifyHasher": ("openssl3", "openssl"),
    "hyperpodRoutingStrategy": ("prefix-aware", "prefixaware"),
    "hyperpodLoadBalancerAlgorithm": ("round-robin", "round_robin"),
    "hyperpodKvCache": ("l1l2", "l1-l2"),
    "hyperpodL2CacheBackend": ("rediss", "redis"),
}
"""Every string key with a closed set of values, a misspelling of one and the value it should suggest."""


def _refusal(**changes) -> SettingsError:
    with pytest.raises(SettingsError) as caught:
        settings.from_values(stack_config(**changes), {"kimi-k3:apiKey"})
    return caught.value


@pytest.mark.parametrize("key", sorted(MISSPELT))
def test_a_misspelt_value_of_an_enum_like_key_is_refused_with_did_you_mean(key):
    value, near = MISSPELT[key]
    extra = HYPERPOD if key.startswith("hyperpod") else {}
    if key == "hyperpodL2CacheBackend":
        extra = {**extra, "hyperpodKvCache": "l1-l2"}
    err = _refusal(**{**extra, key: value})
    assert err.key == f"kimi-k3:{key}" and str(err).endswith(f"; did you mean {near}?"), str(err)


def test_every_string_key_a_settings_one_of_checks_is_in_the_table():
    """The keys the settings check with ``_one_of`` (the closed sets they own) are all tried above."""
    found = set()
    for path in (ROOT / "components" / "stack" / "settings").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_one_of" and isinstance(node.args[0], ast.Constant):
                found.add(node.args[0].value)
    integer_sets = {"flowLogRetentionDays", "clusterLogRetentionDays"}  # CloudWatch's retention days: numbers, no spelling
    assert found - integer_sets <= set(MISSPELT), sorted(found - integer_sets - set(MISSPELT))


def test_staging_is_not_an_environment_and_says_what_to_use():
    err = _refusal(environment="staging")
    assert err.key == "kimi-k3:environment" and "accepted: dev, prod" in str(err) and "a staging stack is dev" in str(err)
    assert settings.ENVIRONMENTS == ("dev", "prod")
    for environment in settings.ENVIRONMENTS:  # each accepted class has its policy config
        assert (ROOT / "policy" / "config" / f"{environment}.json").is_file()


def test_replicas_zero_in_prod_is_warned_with_what_it_means():
    prod = load_stack_settings("prod", replicas=0)
    assert any(w.startswith("kimi-k3:replicas: 0 means one replica per group of 1 reserved node: the Capacity Block's instance count decides") for w in prod.warnings), prod.warnings
    assert prod.replicas_for(2) == 2  # what it means: one per reserved node of a 2-node block
    dev = load_stack_settings("dev", replicas=0)  # dev's default: the block decides, as documented
    assert not any(w.startswith("kimi-k3:replicas") for w in dev.warnings)


@pytest.mark.parametrize("given", ["stacks/Pulumi.dev.yaml", "Pulumi.dev.yaml", "/abs/stacks/Pulumi.dev.yml"])
def test_a_stack_files_path_where_the_stack_goes_names_the_stack(given, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["plan", given]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a stack file's path: pass the stack name `dev`" in err, err
