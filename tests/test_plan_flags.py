"""Mistakes typed into ``kimi-k3 plan``: one line naming the flag (or key) and the value, exit 2, no traceback.

Also: ``--reservation-state expired`` rehearses a block that ended before ``now``, and
``plan`` warns about example values left in a stack and about S3 weights of another
revision than the one the stack pins.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kimi_k3.cli import main
from kimi_k3.offline.rehearsal import Rehearsal
from tests.cli_helpers import one_line_error, refused_as_a_process
from tests.user_project import copy_library_project, library_stack

NOW_TEXT = "2026-12-01T08:00:00Z"
NOW = ("--now", NOW_TEXT)


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--reservation-az", "us-east-1", "--reservation-az 'us-east-1' is not accepted; expected an availability zone of us-east-1 (the stack's aws:region), e.g. us-east-1a"),
        ("--reservation-az", "east", "--reservation-az 'east' is not accepted; expected an availability zone of us-east-1"),
        ("--reservation-az", "us-west-2a", "--reservation-az 'us-west-2a' is not accepted: it is an AZ of us-west-2, but the stack's aws:region is us-east-1"),
        ("--reservation-count", "0", "--reservation-count 0 is not accepted; a Capacity Block holds 1 to 64 instances"),
        ("--reservation-count", "-2", "--reservation-count -2 is not accepted; a Capacity Block holds 1 to 64 instances"),
        ("--reservation-count", "65", "--reservation-count 65 is not accepted; a Capacity Block holds 1 to 64 instances"),
        ("--reservation-start", "2026-11-28T11:30:00Z", "--reservation-start 2026-11-28T11:30:00Z is not accepted with --reservation-state expired: the block would end at 2026-12-05 11:30 UTC, not before now"),
    ],
)
def test_a_bad_rehearsal_flag_is_one_line_and_writes_nothing(tmp_path, capsys, flag, value, expected):
    out = tmp_path / "out"
    extra = ("--reservation-state", "expired") if flag == "--reservation-start" else ()
    assert main(["plan", "dev", "--out", str(out), *NOW, *extra, f"{flag}={value}"]) == 2
    assert expected in one_line_error(capsys)
    assert not out.exists()


def test_out_pointing_at_an_existing_file_is_one_line(tmp_path, capsys):
    existing = tmp_path / "plan.txt"
    existing.write_text("keep me\n")
    assert main(["plan", "dev", "--out", str(existing), *NOW]) == 2
    assert f"--out {existing.resolve()} is an existing file; give a directory" in one_line_error(capsys)
    assert existing.read_text() == "keep me\n"


def test_out_below_an_existing_file_is_one_line(tmp_path, capsys):
    existing = tmp_path / "plan.txt"
    existing.write_text("")
    assert main(["plan", "dev", "--out", str(existing / "dev"), *NOW]) == 2
    assert f"--out {existing / 'dev'}: cannot write the plan there (Not a directory)" in one_line_error(capsys)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "is empty: a stack file needs a config: mapping (at least aws:region)"),
        ("# nothing but a comment\n", "is empty: a stack file needs a config: mapping"),
        ("encryptionsalt: v1:c2FsdA==\n", "has no config: section (found: encryptionsalt)"),
        ("config:\n", "config: is empty; the stack's settings go under it"),
    ],
)
def test_an_empty_stack_file_or_one_without_config_says_so(tmp_path, capsys, text, expected):
    project = copy_library_project(tmp_path / "project", {"dev": text})
    for command in (["plan", "dev", "--out", str(tmp_path / "out"), *NOW], ["hyperpod", "dev"]):
        assert main([*command, "--program", str(project)]) == 2
        err = one_line_error(capsys)
        assert expected in err and str(project / "stacks" / "Pulumi.dev.yaml") in err
        assert "(not set)" not in err


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "dev", "--reservation-az", "us-west-2a"],
        ["plan", "dev", "--reservation-count", "0"],
        ["plan", "dev", "--out", "README.md"],
        ["plan", "dev", "--program", "tests/data"],
    ],
    ids=["az", "count", "out", "program"],
)
def test_as_a_process_there_is_no_traceback(args, tmp_path):
    assert args[2] in refused_as_a_process(*args, *NOW)


# --- expired and active blocks --------------------------------------------------------------------


@pytest.mark.parametrize("clock", ["2026-12-01T08:00:00", "2026-12-01T11:30:00", "2026-12-01T11:31:00", "2026-12-01T23:59:59"])
def test_expired_ends_before_now_and_active_holds_now(clock):
    now = datetime.fromisoformat(clock).replace(tzinfo=UTC)
    common = dict(reservation_id="cr-0a1b2c3d4e5f60718", instance_type="p6-b300.48xlarge", instance_count=1, availability_zone="us-east-1a", now=now)
    expired = Rehearsal(state="expired").fixture(**common)
    assert expired.end < now and now - expired.end <= timedelta(days=1) and (expired.end.hour, expired.end.minute) == (11, 30)
    active = Rehearsal(state="active").fixture(**common)
    assert active.start < now < active.end
    scheduled = Rehearsal().fixture(**common)
    assert scheduled.start - now >= timedelta(hours=12)


def test_plan_with_an_expired_block_reports_its_past_end(tmp_path, capsys):
    assert main(["plan", "dev", "--out", str(tmp_path / "x"), *NOW, "--reservation-state", "expired"]) == 0
    assert "Capacity Block cr-0a1b2c3d4e5f60718 is expired (ended 2026-11-30 11:30 UTC)" in capsys.readouterr().out


# --- example values and the weights revision ------------------------------------------------------


def test_plan_warns_about_the_example_values_of_the_example_stacks(tmp_path, capsys):
    assert main(["plan", "dev", "--quiet", "--out", str(tmp_path / "dev"), *NOW]) == 0
    printed = capsys.readouterr().out
    assert "kimi-k3:clusterPublicAccessCidrs holds '203.0.113.0/24' (a documentation address, RFC 5737 TEST-NET-3 203.0.113.0/24)" in printed
    assert "kimi-k3:clusterAdminRoleArns holds 'arn:aws:iam::123456789012:role/platform-admin' (AWS documentation's example account 123456789012)" in printed
    assert main(["plan", "prod", "--quiet", "--out", str(tmp_path / "prod"), *NOW]) == 0
    printed = capsys.readouterr().out
    assert "kimi-k3:capacityAlertEmail holds 'gpu-oncall@example.com' (the example domain example.com, RFC 2606)" in printed
    assert printed.count("gpu-oncall@example.com") == 1  # printed once


def test_plan_warns_about_weights_of_another_revision(tmp_path, capsys):
    other = "0123456789abcdef0123456789abcdef01234567"
    prod = library_stack("prod").replace("kimi-k3:modelRevision: 3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20", f"kimi-k3:modelRevision: {other}")
    project = copy_library_project(tmp_path / "project", {"prod": prod})
    assert main(["plan", "prod", "--program", str(project), "--quiet", "--out", str(tmp_path / "out"), *NOW]) == 0
    printed = capsys.readouterr().out
    assert (
        "kimi-k3:weightsS3Uri 's3://acme-ml-weights-us-west-2/moonshotai/Kimi-K3/3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20/' names revision "
        f"3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20, but kimi-k3:modelRevision is '{other}'"
    ) in printed
