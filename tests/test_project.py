"""Project files users rely on: Pulumi.yaml declares every config key, README documents them."""

from __future__ import annotations

import re

import pytest
import yaml

from kimi_k3.stack.config_keys import CONFIG_KEYS, CONFIGURATION_DOC, SECTIONS, markdown_reference, pulumi_yaml_config
from tests.conftest import ROOT


def _project() -> dict:
    return yaml.safe_load((ROOT / "Pulumi.yaml").read_text())


def test_pulumi_yaml_runs_python_in_the_project_venv_with_stacks_dir():
    project = _project()
    assert project["name"] == "kimi-k3"
    assert project["runtime"]["name"] == "python"
    assert project["runtime"]["options"]["virtualenv"] == ".venv"
    assert project["stackConfigDir"] == "stacks"


def test_pulumi_yaml_declares_exactly_the_config_keys_with_types_and_defaults():
    declared = _project()["config"]
    assert list(declared) == list(CONFIG_KEYS)
    for name, key in CONFIG_KEYS.items():
        entry = declared[name]
        assert entry["type"] == key.type, name
        assert entry["description"] == key.description, name
        if key.required:
            assert "default" not in entry, f"{name} is required and must have no default"
        else:
            assert entry["default"] == (list(key.default) if isinstance(key.default, tuple) else key.default), name
    assert declared["apiKey"].get("secret") is True
    assert declared == pulumi_yaml_config(), "Pulumi.yaml is stale: run `make docs`"


def test_the_configuration_reference_is_generated_from_the_schema():
    assert (ROOT / CONFIGURATION_DOC).read_text() == markdown_reference(), f"{CONFIGURATION_DOC} is stale: run `make docs`"
    grouped = [name for _, names in SECTIONS for name in names]
    assert sorted(grouped) == sorted(CONFIG_KEYS) and len(grouped) == len(set(grouped))


def test_stack_files_use_only_declared_keys_and_hold_no_clear_secrets():
    for path in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        config = yaml.safe_load(path.read_text())["config"]
        for key, value in config.items():
            namespace, name = key.split(":", 1)
            assert namespace in ("kimi-k3", "aws"), key
            if namespace == "kimi-k3":
                assert name in CONFIG_KEYS, f"{path.name}: {key}"
                if CONFIG_KEYS[name].secret:
                    assert isinstance(value, dict) and set(value) == {"secure"}, f"{path.name}: {key} must be a secure: entry"


def test_the_reference_documents_every_config_key_and_the_readme_the_two_set_up_commands():
    reference = (ROOT / CONFIGURATION_DOC).read_text()
    for name in CONFIG_KEYS:
        assert f"`kimi-k3:{name}`" in reference, name
    assert "`aws:region`" in reference
    readme = (ROOT / "README.md").read_text()
    assert CONFIGURATION_DOC in readme
    assert re.search(r"^make plan$", readme, re.M) and re.search(r"^make test$", readme, re.M)


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M)


def test_the_project_file_reads_as_safe_load_reads_it_and_a_mistake_keeps_its_message(tmp_path):
    """Pulumi.yaml is parsed by libyaml when present: the same document as yaml.safe_load, and safe_load's own error text."""
    from kimi_k3.stack import project as project_module

    text = (ROOT / "Pulumi.yaml").read_text()
    assert project_module._fast_safe_load(text) == yaml.safe_load(text)
    broken = "name: kimi-k3\nruntime: python\nconfig: {a: [1, 2}\n"
    with pytest.raises(yaml.YAMLError) as expected:
        yaml.safe_load(broken)
    with pytest.raises(yaml.YAMLError) as got:
        project_module._fast_safe_load(broken)
    assert str(got.value) == str(expected.value)
