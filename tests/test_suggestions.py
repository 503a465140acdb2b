"""A misspelt name gets its "did you mean" in any case: stack config keys (through ``kimi-k3 plan``) and policy names."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kimi_k3.cli import main
from kimi_k3.core.suggest import nearest
from kimi_k3.errors import SettingsError
from kimi_k3.guardrails.rules import ALL_POLICIES
from kimi_k3.guardrails.verdict import resolve_policy_config
from tests.cli_helpers import assert_one_line_error, one_line_error
from tests.user_project import copy_library_project, library_stack

NOW = ("--now", "2026-12-01T08:00:00Z")


def _stack_with(tmp_path, old: str, new: str):
    dev = library_stack("dev")
    assert dev.count(old) == 1
    return copy_library_project(tmp_path / "user", {"dev": dev.replace(old, new)})


def test_a_key_in_another_case_is_refused_with_its_right_spelling_as_a_process(tmp_path):
    """``kimi-k3 plan`` in its own process (where a traceback would reach the user): exit 2, one line, the hint."""
    project = _stack_with(tmp_path, "kimi-k3:maxModelLen:", "kimi-k3:MAXMODELLEN:")
    proc = subprocess.run([sys.executable, "-m", "kimi_k3.cli", "plan", "dev", "--quiet", "--out", str(tmp_path / "out"), *NOW],
                          capture_output=True, text=True, cwd=project, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    line = assert_one_line_error(proc.stderr)
    assert line == "kimi-k3: error: config kimi-k3:MAXMODELLEN: '262144' is not accepted; unknown key; did you mean kimi-k3:maxModelLen?"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        ("kimi-k3:maxModelLen:", "kimi-k3:MAXMODELLENGTH:", "unknown key; did you mean kimi-k3:maxModelLen?"),  # misspelt and in capitals
        ("kimi-k3:maxModelLen:", "kimi-k3:maxmodellen:", "unknown key; did you mean kimi-k3:maxModelLen?"),
        ("kimi-k3:maxModelLen:", "KIMI-K3:maxModelLen:", "unknown namespace 'KIMI-K3': this stack reads kimi-k3: and aws: keys; did you mean kimi-k3:maxModelLen?"),
        ("aws:region:", "aws:REGION:", "not a setting of the AWS provider; did you mean aws:region?"),
    ],
)
def test_kimi_k3_plan_suggests_the_key_whatever_its_case(tmp_path, capsys, old, new, hint):
    project = _stack_with(tmp_path, old, new)
    assert main(["plan", "dev", "--program", str(project), "--quiet", "--out", str(tmp_path / "out"), *NOW]) == 2
    line = one_line_error(capsys)
    assert line.endswith(hint), line


def test_a_policy_name_in_another_case_gets_its_hint():
    name = ALL_POLICIES[0].name
    _, warnings = resolve_policy_config({name.upper(): "advisory"}, "policy/config/dev.json")
    assert warnings == [f"policy/config/dev.json configures {name.upper()!r}, which is not a policy of kimi-k3-guardrails (did you mean {name}?); the engine ignores it"]


def test_nearest_compares_in_lower_case_and_answers_as_spelt():
    keys = ("maxModelLen", "maxNumSeqs", "replicas")
    assert nearest("MAXMODELLEN", keys) == "maxModelLen"
    assert nearest("MaxModelLength", keys) == "maxModelLen"
    assert nearest("REPLICAS", keys) == "replicas"
    assert nearest("zzz", keys) is None


def test_an_integer_enum_suggests_the_accepted_values_next_to_the_value():
    from kimi_k3.core.formats import LOG_RETENTION_DAYS
    from kimi_k3.core.suggest import did_you_mean, nearest_numbers

    assert nearest_numbers(45, LOG_RETENTION_DAYS) == (30, 60)
    assert nearest_numbers(0, LOG_RETENTION_DAYS) == (1,) and nearest_numbers(4000, LOG_RETENTION_DAYS) == (3653,)
    assert nearest_numbers(30, LOG_RETENTION_DAYS) == () and nearest_numbers(True, LOG_RETENTION_DAYS) == ()
    assert did_you_mean(45, LOG_RETENTION_DAYS) == "; did you mean 30 or 60?" and did_you_mean("opensll", ("openssl", "sha256sum")) == "; did you mean openssl?"


@pytest.mark.parametrize("key", ["flowLogRetentionDays", "clusterLogRetentionDays"])
def test_a_log_retention_key_off_cloudwatchs_set_names_the_nearest_accepted_days(key):
    from tests.builders import load_stack_settings

    with pytest.raises(SettingsError, match=r"did you mean 30 or 60\?$"):
        load_stack_settings(**{key: 45})


def test_the_components_log_retention_args_name_the_nearest_accepted_days_too():
    from kimi_k3 import Cluster, ClusterArgs, Network, NetworkArgs, offline
    from kimi_k3.errors import UserError
    from tests.conftest import NOW

    builds = {
        "flow_log_retention_days": lambda: Network("n", NetworkArgs(cluster_name="c", flow_log_retention_days=45)),
        "log_retention_days": lambda: Cluster("c", ClusterArgs(version="1.34", vpc_id="vpc-0a1b2c3d4e5f67890", private_subnet_ids=["subnet-1", "subnet-2"],
                                                            admin_role_arns=["arn:aws:iam::111122223333:role/admin"], log_retention_days=45)),
    }
    for arg, build in builds.items():
        with pytest.raises(UserError, match=rf"{arg} 45 is not accepted; .*did you mean 30 or 60\?"):
            offline.OfflineEngine(now=NOW).run(build)
