"""Small CLI consistencies (issue 24, point 7): usage on a missing argument, the instance type checked before AWS."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kimi_k3.cli import capacity_clock as capacity_cli
from kimi_k3.cli import main
from tests.cli_helpers import one_line_error


@pytest.mark.parametrize("command", [["bench"], ["plan"], ["status"]])
def test_a_missing_argument_shows_the_usage_line_like_every_command(command, capsys):
    with pytest.raises(SystemExit) as caught:
        main(command)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: kimi-k3 {command[0]} ") and f"kimi-k3 {command[0]}: error: the following arguments are required:" in err
    assert "Traceback" not in err


def test_bench_still_refuses_a_bad_value_in_one_line(capsys, tmp_path):
    assert main(["bench", "--endpoint", "http://127.0.0.1:9/v1", "--out", str(tmp_path), "--requests", "0"]) == 2
    assert "--requests" in one_line_error(capsys)


def test_capacity_offerings_checks_the_instance_type_before_asking_aws(capsys, monkeypatch):
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setattr(capacity_cli, "utcnow", lambda: datetime(2026, 12, 1, 8, 0, tzinfo=UTC))  # not about the date
    assert main(["capacity", "offerings", "--instance-type", "p6-b300.48xlarg", "--count", "1", "--days", "2", "--region", "us-east-1"]) == 2
    err = one_line_error(capsys)
    assert "--instance-type 'p6-b300.48xlarg' is not a type kimi-k3 can serve Kimi K3 on; did you mean p6-b300.48xlarge?" in err
    assert "credentials" not in err
