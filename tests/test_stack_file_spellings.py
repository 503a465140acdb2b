"""Values that mean something else than they look (issue 24, point 2): refused with the key and the line, or warned.

Each mistake is planted in a copy of the dev stack and planned with ``kimi-k3 plan``: exit 2,
one line naming the key and the stack file's line, no traceback; a setting without effect
is a warning naming both keys.
"""

from __future__ import annotations

import pytest

from kimi_k3.cli import main
from kimi_k3.stack import settings
from kimi_k3.stack.project import library_project, read_stack_config
from tests.cli_helpers import one_line_error
from tests.user_project import copy_library_project, library_stack

NOW = ("--now", "2026-12-01T08:00:00Z")


def _refused(tmp_path, capsys, extra: str, replace: tuple[str, str] | None = None) -> tuple[str, int]:
    text = library_stack("dev")
    if replace:
        assert replace[0] in text
        text = text.replace(*replace)
    text += extra
    project = copy_library_project(tmp_path / "p", {"dev": text})
    out = tmp_path / "out"
    assert main(["plan", "dev", "--program", str(project), "--quiet", "--out", str(out), *NOW]) == 2
    err = one_line_error(capsys)
    assert "Traceback" not in err and not out.exists()
    lines = text.splitlines()
    return err, len(lines)


def test_a_key_written_twice_is_refused_with_both_lines(tmp_path, capsys):
    err, last = _refused(tmp_path, capsys, "  kimi-k3:exposure: internal\n")
    first = next(i for i, line in enumerate(library_stack("dev").splitlines(), 1) if line.startswith("  kimi-k3:exposure:"))
    assert f"Pulumi.dev.yaml line {last}: config key kimi-k3:exposure is written twice (first at line {first})" in err


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("  kimi-k3:efaEnabled: yes", "config kimi-k3:efaEnabled: 'yes' is a boolean in YAML 1.1 and the string 'yes' in YAML 1.2 (Pulumi): write true or false"),
        ("  kimi-k3:modelId: on", "config kimi-k3:modelId: 'on' is a boolean in YAML 1.1 and a string in YAML 1.2 (Pulumi): quote it ('on')"),
        ("  kimi-k3:replicas: 010", "config kimi-k3:replicas: '010' looks octal"),
        ("  kimi-k3:replicas: ２", "config kimi-k3:replicas: holds the non-ASCII digit '２' (U+FF12, fullwidth digit two); Pulumi's integer parsing refuses it: write '2'"),
        ("  kimi-k3:servingMaxGenerationSeconds: 30:00", "config kimi-k3:servingMaxGenerationSeconds: '30:00' is a base-60 number in YAML 1.1"),
    ],
)
def test_yaml_1_1_spellings_are_refused_with_the_key_and_line(tmp_path, capsys, line, expected):
    """The line replaces the dev stack's own line for the key, or is added at the end."""
    dev = library_stack("dev")
    prefix = line.split(": ", 1)[0] + ":"
    own = next((ln for ln in dev.splitlines() if ln.startswith(prefix)), None)
    text = dev.replace(own, line) if own else dev + line + "\n"
    number = text.splitlines().index(line) + 1
    err, _ = _refused(tmp_path, capsys, "", (dev, text))
    assert f"Pulumi.dev.yaml line {number}: {expected}" in err


def test_a_full_width_digit_in_a_quoted_integer_is_refused_by_the_settings_too():
    config = read_stack_config(library_project(), "dev", {"kimi-k3:replicas": "２"})
    with pytest.raises(settings.SettingsError, match="kimi-k3:replicas: '２' is not accepted; expected a whole number in ASCII digits"):
        settings.from_values(config.values, config.secret_keys)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"kimi-k3:servingAllowedCidrs": ["10.0.0.0/8"]}, "kimi-k3:servingAllowedCidrs has no effect with kimi-k3:exposure cluster"),
        ({"kimi-k3:clusterEndpointPublicAccess": False}, "kimi-k3:clusterPublicAccessCidrs has no effect with kimi-k3:clusterEndpointPublicAccess false"),
        ({"kimi-k3:availabilityZones": ["us-east-1a", "us-east-1b"], "kimi-k3:availabilityZoneCount": 3},
         "kimi-k3:availabilityZoneCount has no effect with kimi-k3:availabilityZones us-east-1a, us-east-1b"),
        ({"kimi-k3:alertTtftP99Seconds": 20}, "kimi-k3:alertTtftP99Seconds has no effect with kimi-k3:prometheusOperatorEnabled false"),
        ({"kimi-k3:dcgmExporterEnabled": False, "kimi-k3:dcgmExporterVersion": "4.1.0"}, "kimi-k3:dcgmExporterVersion has no effect with kimi-k3:dcgmExporterEnabled false"),
        ({"kimi-k3:trainingPlanArn": "my-plan"}, "kimi-k3:trainingPlanArn applies only to servingPlatform hyperpod; this stack is eks"),
    ],
)
def test_a_setting_without_effect_is_a_warning_naming_both_keys(overrides, expected):
    config = read_stack_config(library_project(), "dev", overrides)
    found = settings.from_values(config.values, config.secret_keys).warnings
    assert any(expected in w for w in found), found


def test_the_repository_stacks_set_nothing_without_effect():
    for stack in ("dev", "prod", "hyperpod"):
        config = read_stack_config(library_project(), stack)
        found = settings.from_values(config.values, config.secret_keys, stack=stack).warnings
        assert not [w for w in found if "has no effect" in w], (stack, found)


def test_max_model_len_0_is_the_engine_profiles_as_documented():
    """The config reference says ``maxModelLen`` 0 means the engine profile's; the code agrees."""
    from kimi_k3.stack.config_keys import CONFIG_KEYS

    assert "0: the engine profile's (Blackwell 1048576" in CONFIG_KEYS["maxModelLen"].description
    config = read_stack_config(library_project(), "dev", {"kimi-k3:maxModelLen": 0})
    assert settings.from_values(config.values, config.secret_keys).serving.contract.engine.max_model_len == 1048576
