"""Every name derived from the stack's name fits its own AWS limit, for every stack name the stack-name rule accepts (issue 33, point 6).

A stack named ``barsmultinode`` used to fail its own settings: the default ``ecrPullThroughPrefix``
``kimi-k3-barsmultinode-docker-hub`` is 32 characters, ECR takes 30. The rule: a derived name that
fits is kept (existing stacks keep their resources' names), a longer one is cut and ends with 8 hex
digits of its SHA-256 (:func:`kimi_k3.core.names.fit`).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from kimi_k3.cluster import deploy_runner
from kimi_k3.cluster.eks import _CLUSTER_NAME
from kimi_k3.core.names import fit
from kimi_k3.errors import UserError
from kimi_k3.hyperpod.rules import is_sagemaker_name
from kimi_k3.stack import settings
from kimi_k3.stack.platform import Platform
from kimi_k3.weights.image_pull import valid_prefix

LONGEST = "a" * 99 + "Z"
"""The longest stack name the rule accepts (100 characters)."""
STACK_NAMES = st.from_regex(settings.STACK_NAME, fullmatch=True)


def derived(stack: str) -> dict[str, str]:
    """Every name the platform derives from ``stack`` (the platform's component is named ``kimi-k3``)."""
    cluster = settings.cluster_name("kimi-k3", stack)
    project = deploy_runner.project_name_for(cluster)
    return {
        "cluster": cluster,
        "deploy project": project,
        "deploy role": deploy_runner.role_name(project),
        "delivery alarm": Platform.delivery_alarm_name("kimi-k3", stack),
        "ecr prefix": settings.pull_through_prefix("kimi-k3", stack),
        "hyperpod cluster": settings.hyperpod_cluster_name("kimi-k3", stack),
    }


def problems(stack: str) -> list[str]:
    names = derived(stack)
    checks = {
        "cluster": bool(_CLUSTER_NAME.match(names["cluster"])),
        "deploy project": bool(deploy_runner._PROJECT_NAME.match(names["deploy project"])),
        "deploy role": len(names["deploy role"]) <= 64 and bool(re.fullmatch(r"[\w+=,.@-]+", names["deploy role"])),
        "delivery alarm": 1 <= len(names["delivery alarm"]) <= 255,
        "ecr prefix": valid_prefix(names["ecr prefix"]),
        "hyperpod cluster": is_sagemaker_name(names["hyperpod cluster"]),
    }
    return [f"{what} {names[what]!r}" for what, ok in checks.items() if not ok]


@pytest.mark.parametrize("stack", ["dev", "barsmultinode", LONGEST, "Team_A.prod-2", "x"])
def test_every_derived_name_fits_its_limit(stack):
    assert problems(stack) == []


@hypothesis_settings(max_examples=300, deadline=None)
@given(STACK_NAMES)
def test_every_derived_name_fits_its_limit_for_any_accepted_stack_name(stack):
    assert problems(stack) == []


def test_names_that_fit_are_kept_as_they_were():
    assert derived("prod") == {
        "cluster": "kimi-k3-prod", "deploy project": "kimi-k3-prod-deploy", "deploy role": "kimi-k3-prod-deploy-runner",
        "delivery alarm": "kimi-k3-prod-delivery-check-gpu-instances-in-service", "ecr prefix": "kimi-k3-prod-docker-hub",
        "hyperpod cluster": "kimi-k3-prod",
    }


def test_a_long_name_is_cut_and_hashed_deterministically_and_distinctly():
    assert settings.pull_through_prefix("kimi-k3", "barsmultinode") == "kimi-k3-barsmultinode-480394bb"
    one, other = LONGEST, "a" * 99 + "Y"
    assert derived(one) == derived(one)
    assert all(derived(one)[k] != derived(other)[k] for k in ("cluster", "deploy project", "ecr prefix", "hyperpod cluster"))


def test_names_a_rule_changed_are_hashed_so_two_stacks_never_meet():
    """``Dev`` lower-cases to ``dev``: ECR has one pull-through rule per prefix, so the two must differ."""
    assert settings.pull_through_prefix("kimi-k3", "Dev") != settings.pull_through_prefix("kimi-k3", "dev")
    assert fit("a.b", 63, separators="-") != fit("a-b", 63, separators="-")


def _dev_values() -> tuple[dict, frozenset[str]]:
    values, secrets = settings.read_stack_file("dev")
    return dict(values), frozenset(secrets)


@pytest.mark.parametrize("stack", ["barsmultinode", LONGEST])
def test_the_dev_settings_accept_a_long_stack_name(stack):
    """dev declares a Docker Hub pull-through rule, so its default prefix is checked (the old code refused barsmultinode)."""
    values, secrets = _dev_values()
    found = settings.from_values(values, secrets, stack=stack)
    assert valid_prefix(found.time_to_serve.pull_through_prefix)


@pytest.mark.parametrize("stack", ["", "a/b", "a" * 101, "dev prod"])
def test_a_stack_name_outside_the_rule_is_refused_in_one_line(stack):
    values, secrets = _dev_values()
    with pytest.raises(UserError, match=r"^stack name .* is not accepted; expected 1-100 letters, digits, '-', '_' or '.' \(Pulumi's stack names\)$"):
        settings.from_values(values, secrets, stack=stack)
