"""``kimi-k3 plan`` judges what it planned with the policy pack, as ``pulumi preview --policy-pack policy`` would."""

from __future__ import annotations

import json
import types

import pytest
from pulumi_policy import EnforcementLevel, PolicyConfigSchema, ResourceValidationPolicy
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from kimi_k3.cli import main
from kimi_k3.guardrails import rules as g
from kimi_k3.guardrails.verdict import PolicyCheck, PolicySetting, evaluate, load_policy_config, resolve_policy_config
from tests.user_project import copy_library_project, library_stack

NOW = ("--now", "2026-12-01T08:00:00Z")
DIGEST_RULE = "k8s-images-pinned-by-digest"
TAG = "vllm/vllm-openai:kimi-k3"


def _dev_project(tmp_path, policy_document: dict | str | None):
    """The repository's program with its dev stack (a floating image tag) and the given policy config."""
    # Without the dev stack's pull-through cache and pre-pull: the rules below are checked on the serving Deployment's two images.
    stack = "".join(line for line in library_stack("dev").splitlines(keepends=True) if "dockerHubPullThroughSecretArn" not in line and "imagePrePull" not in line)
    project = copy_library_project(tmp_path / "project", {"dev": stack}, policy=False)
    if policy_document is not None:
        (project / "policy" / "config").mkdir(parents=True)
        text = policy_document if isinstance(policy_document, str) else json.dumps(policy_document)
        (project / "policy" / "config" / "dev.json").write_text(text)
    return project


def _plan(project, out, *extra: str) -> int:
    return main(["plan", "dev", "--program", str(project), "--quiet", "--out", str(out), *NOW, *extra])


def test_a_mandatory_violation_fails_the_plan_and_names_policy_resource_and_message(tmp_path, capsys):
    project = _dev_project(tmp_path, {DIGEST_RULE: {"requireDigestPinnedImages": True}})
    out = tmp_path / "out"
    assert _plan(project, out) == 1
    printed = capsys.readouterr().out
    assert "FAILED, 3 mandatory violations" in printed  # the vllm and warm-up containers and the fetch-weights init container
    lines = [line for line in printed.splitlines() if line.strip().startswith("[mandatory]")]
    assert len(lines) == 3
    for line, container in zip(lines, ("containers[vllm]", "containers[warmup]", "initContainers[fetch-weights]"), strict=True):
        assert f"[mandatory] {DIGEST_RULE} — kubernetes:apps/v1:Deployment 'kimi-k3-serving-deployment':" in line
        assert f"{container}: image '{TAG}' is not pinned by digest" in line
    # the plan is still written, for the reviewer, with the verdict beside it
    assert (out / "resources.json").is_file()
    verdict = json.loads((out / "policy.json").read_text())
    assert verdict["passed"] is False and verdict["config"] == str(project / "policy" / "config" / "dev.json")
    assert [(v["policy"], v["level"], v["name"]) for v in verdict["violations"]] == [(DIGEST_RULE, "mandatory", "kimi-k3-serving-deployment")] * 3


def test_the_same_violation_as_advisory_is_listed_and_passes(tmp_path, capsys):
    project = _dev_project(tmp_path, {DIGEST_RULE: {"enforcementLevel": "advisory", "requireDigestPinnedImages": True}})
    assert _plan(project, tmp_path / "out") == 0
    printed = capsys.readouterr().out
    assert "passed, 3 advisory findings" in printed
    assert f"[advisory] {DIGEST_RULE} — kubernetes:apps/v1:Deployment 'kimi-k3-serving-deployment'" in printed


def test_policy_config_flag_overrides_the_stacks_file(tmp_path, capsys):
    project = _dev_project(tmp_path, {DIGEST_RULE: {"requireDigestPinnedImages": False}})
    assert _plan(project, tmp_path / "a") == 0
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps({DIGEST_RULE: "mandatory"}))  # the property's default (true) applies
    assert _plan(project, tmp_path / "b", "--policy-config", str(strict)) == 1
    assert f"Policy pack kimi-k3-guardrails ({strict}): FAILED" in capsys.readouterr().out


def test_without_a_policy_config_the_packs_defaults_apply(tmp_path, capsys):
    assert _plan(_dev_project(tmp_path, None), tmp_path / "out") == 1
    printed = capsys.readouterr().out
    assert "no policy config: the pack's defaults, i.e. the production settings" in printed and f"[mandatory] {DIGEST_RULE}" in printed


@pytest.mark.parametrize(
    ("document", "findings"),
    [({"all": "disabled"}, "passed, 0 advisory findings"), ({"all": "advisory"}, "passed, 3 advisory findings")],
)
def test_all_sets_every_level(tmp_path, capsys, document, findings):
    assert _plan(_dev_project(tmp_path, document), tmp_path / "out") == 0
    assert findings in capsys.readouterr().out


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_repository_stacks_pass(stack, tmp_path, capsys):
    assert main(["plan", stack, "--quiet", "--out", str(tmp_path), *NOW]) == 0
    assert "Policy pack kimi-k3-guardrails (" in capsys.readouterr().out
    assert json.loads((tmp_path / "policy.json").read_text())["violations"] == []


def test_a_key_naming_no_policy_is_noted_not_fatal(tmp_path, capsys):
    project = _dev_project(tmp_path, {DIGEST_RULE: {"requireDigestPinnedImages": False}, "k8s-image-pinned": "advisory"})
    assert _plan(project, tmp_path / "out") == 0
    assert "configures 'k8s-image-pinned', which is not a policy of kimi-k3-guardrails (did you mean k8s-images-pinned-by-digest?)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (json.dumps({DIGEST_RULE: "strict"}), f"{DIGEST_RULE}: 'strict' is not a valid enforcement level; accepted: advisory, mandatory, remediate, disabled"),
        (json.dumps({DIGEST_RULE: {"enforcementLevel": 1}}), "is not a valid enforcement level; must be a string"),
        (json.dumps({DIGEST_RULE: {"requireDigestPinnedImages": "yes"}}), f"{DIGEST_RULE}: requireDigestPinnedImages: 'yes' is not of type 'boolean'"),
        (json.dumps({DIGEST_RULE: 3}), "3 is not a valid value; must be an enforcement level string or an object"),
        ("[1]", "expected a JSON object keyed by policy name"),
        ("{not json", "is not valid JSON"),
    ],
)
def test_a_config_the_engine_would_refuse_is_one_line_and_writes_nothing(tmp_path, capsys, text, expected):
    project = _dev_project(tmp_path, text)
    out = tmp_path / "out"
    assert _plan(project, out) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and expected in err and str(project / "policy" / "config" / "dev.json") in err
    assert not out.exists()


def test_a_missing_policy_config_file_names_the_flag(tmp_path, capsys):
    assert main(["plan", "dev", "--out", str(tmp_path / "out"), "--policy-config", str(tmp_path / "nope.json"), *NOW]) == 2
    err = capsys.readouterr().err
    assert f"--policy-config {tmp_path / 'nope.json'}: no such file" in err


# --- the engine's way of feeding the pack ------------------------------------------------------


def test_defaults_come_from_each_rules_config_schema_and_levels_from_the_rules():
    settings, warnings = resolve_policy_config(None, "none")
    assert warnings == []
    assert settings[DIGEST_RULE] == PolicySetting(EnforcementLevel.MANDATORY, {"requireDigestPinnedImages": True})
    assert settings["k8s-no-host-network-or-privileged"].properties == {"allowedNamespaces": list(g.DEFAULT_PRIVILEGED_NAMESPACES)}
    assert settings["no-cluster-placement-group"].level == EnforcementLevel.ADVISORY
    assert {name: s.level for name, s in settings.items()} == {p.name: p.enforcement_level for p in g.ALL_POLICIES}


def test_an_empty_config_file_is_no_config(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("  \n")
    assert load_policy_config(path) is None
    assert PolicyCheck.from_file(path).settings == resolve_policy_config(None, "none")[0]


def test_a_level_string_keeps_the_properties_and_an_object_overlays_them():
    settings, _ = resolve_policy_config({DIGEST_RULE: "advisory", "k8s-no-host-network-or-privileged": {"allowedNamespaces": ["x"]}}, "t")
    assert settings[DIGEST_RULE] == PolicySetting(EnforcementLevel.ADVISORY, {"requireDigestPinnedImages": True})
    assert settings["k8s-no-host-network-or-privileged"] == PolicySetting(EnforcementLevel.MANDATORY, {"allowedNamespaces": ["x"]})


def _policy(name: str, validate, schema: dict | None = None, level=EnforcementLevel.MANDATORY) -> ResourceValidationPolicy:
    return ResourceValidationPolicy(
        name=name, description=name, validate=validate, enforcement_level=level,
        config_schema=PolicyConfigSchema(properties=schema) if schema else None,
    )


def test_numbers_reach_the_rule_as_floats_as_through_the_analyzers_protobuf_struct():
    seen = {}
    rule = _policy("limit", lambda args, report: seen.update(args.get_config()), {"max": {"type": "integer", "default": 3}})
    settings, _ = resolve_policy_config({"limit": {"max": 5}}, "t", [rule])
    assert settings["limit"].properties == {"max": 5.0} and isinstance(settings["limit"].properties["max"], float)
    evaluate([types.SimpleNamespace(type="t:i:R", name="r", urn="urn:r", inputs={})], settings, [rule])
    assert seen == {"max": 5.0}


def test_remediate_reports_as_mandatory_and_an_unknown_value_as_advisory():
    tagged = types.SimpleNamespace(type="t:i:R", name="r", urn="urn:r", inputs={"image": UNKNOWN_STRING_VALUE})
    remediated = _policy("fix-me", lambda args, report: report("bad"))
    reads_unknown = _policy("reads", lambda args, report: report(args.props["image"]))
    settings, _ = resolve_policy_config({"fix-me": "remediate"}, "t", [remediated, reads_unknown])
    found = evaluate([tagged], settings, [remediated, reads_unknown])
    assert [(v.policy, v.level) for v in found] == [("fix-me", EnforcementLevel.MANDATORY), ("reads", EnforcementLevel.ADVISORY)]
    assert "can't run policy 'reads' during preview" in found[1].message


def test_disabled_rules_do_not_run():
    ran = []
    rule = _policy("off", lambda args, report: ran.append(1))
    settings, _ = resolve_policy_config({"off": "disabled"}, "t", [rule])
    assert evaluate([types.SimpleNamespace(type="t", name="r", urn="u", inputs={})], settings, [rule]) == [] and ran == []
