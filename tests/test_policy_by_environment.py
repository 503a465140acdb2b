"""A copied stack is the stack it says it is: the policy config is keyed on ``kimi-k3:environment`` (issue 24, point 1).

A per-stack file overrides its environment's; on a prod stack it may only raise the rules.
"""

from __future__ import annotations

import json

import pytest

from kimi_k3.cli import main
from kimi_k3.errors import UserError
from kimi_k3.guardrails import stack_policy
from kimi_k3.stack import project as stack_project
from tests.cli_helpers import one_line_error
from tests.user_project import copy_library_project, library_stack

NOW = ("--now", "2026-12-01T08:00:00Z")


def test_a_copy_of_the_dev_stack_under_a_new_name_plans_and_passes_as_dev(tmp_path, capsys):
    project = copy_library_project(tmp_path / "project", {"alice": library_stack("dev")})
    out = tmp_path / "out"
    assert main(["plan", "alice", "--program", str(project), "--quiet", "--out", str(out), *NOW]) == 0
    printed = capsys.readouterr().out
    dev_json = project / "policy" / "config" / "dev.json"
    assert f"Policy pack kimi-k3-guardrails ({dev_json}, environment dev): passed" in printed
    verdict = json.loads((out / "policy.json").read_text())
    assert verdict["passed"] and verdict["config"] == str(dev_json) and verdict["basis"] == "environment dev"


def test_a_prod_stack_is_not_weakened_by_its_file_name(tmp_path, capsys):
    """The prod stack copied as ``dev``: dev.json is then its own file, weaker than prod.json: refused, one line."""
    project = copy_library_project(tmp_path / "project", {"dev": library_stack("prod")})
    out = tmp_path / "out"
    assert main(["plan", "dev", "--program", str(project), "--quiet", "--out", str(out), *NOW]) == 2
    err = one_line_error(capsys)
    assert f"policy config {project / 'policy' / 'config' / 'dev.json'}: " in err
    assert "of prod.json: stack dev is environment prod (kimi-k3:environment)" in err and "may only raise a prod stack's rules" in err
    assert "Traceback" not in err and not out.exists()


def _project(tmp_path, stack_text: str, files: dict[str, dict]):
    project = copy_library_project(tmp_path / "p", {"alice": stack_text}, policy=False)
    (project / "policy" / "config").mkdir(parents=True)
    for name, document in files.items():
        (project / "policy" / "config" / f"{name}.json").write_text(json.dumps(document))
    return stack_project.load_project(project)


PROD = {"k8s-images-pinned-by-digest": {"requireDigestPinnedImages": True}, "eks-control-plane-logging": "mandatory"}


def test_a_prod_stacks_own_file_may_raise_the_rules(tmp_path):
    proj = _project(tmp_path, library_stack("prod"), {"prod": PROD, "alice": {**PROD, "no-cluster-placement-group": "mandatory"}})
    check = stack_policy.stack_policy(proj, "alice", "prod")
    assert check.settings["no-cluster-placement-group"].level.value == "mandatory"
    assert check.basis == "stack alice's own file, over environment prod"


def test_a_prod_stacks_own_file_may_not_change_a_property(tmp_path):
    weaker = {**PROD, "k8s-load-balancer-source-ranges": {"allowWorldOpenLoadBalancers": True}}
    proj = _project(tmp_path, library_stack("prod"), {"prod": PROD, "alice": weaker})
    with pytest.raises(UserError, match=r"k8s-load-balancer-source-ranges\.allowWorldOpenLoadBalancers is True, not False of prod\.json"):
        stack_policy.stack_policy(proj, "alice", "prod")


def test_a_dev_stacks_own_file_overrides_its_environment(tmp_path):
    proj = _project(tmp_path, library_stack("dev"), {"dev": {"all": "advisory"}, "alice": {"all": "disabled"}})
    assert stack_policy.stack_policy(proj, "alice", "dev").settings["launch-template-imdsv2"].level.value == "disabled"


def test_without_any_file_the_packs_defaults_apply(tmp_path):
    proj = _project(tmp_path, library_stack("dev"), {})
    check = stack_policy.stack_policy(proj, "alice", "dev")
    assert check.source.startswith("no policy config") and check.basis == ""


def test_ci_gets_the_same_file_the_plan_uses(tmp_path, capsys, monkeypatch):
    project = copy_library_project(tmp_path / "project", {"alice": library_stack("dev"), "prod": library_stack("prod")})
    monkeypatch.chdir(project)
    assert stack_policy.main(["alice"]) == 0
    assert capsys.readouterr().out.strip() == str(project / "policy" / "config" / "dev.json")
    assert stack_policy.main(["prod"]) == 0
    assert capsys.readouterr().out.strip() == str(project / "policy" / "config" / "prod.json")
