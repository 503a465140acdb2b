"""``kimi-k3 capacity extend-offerings`` / ``extend`` end to end (stubbed EC2 with the real model, pinned clock)."""

from __future__ import annotations

import sys
import types
from datetime import timedelta

import pytest

from tests.aws_stubs import FakeStdin, aws, cli_env, no_aws  # noqa: F401 - fixtures
from tests.aws_stubs import run_capacity as run
from tests.capacity_builders import EXT_END as END
from tests.capacity_builders import EXT_NOW as NOW
from tests.capacity_builders import OFFER, REGION, RID, api_reservation
from tests.capacity_builders import api_extension as extension
from tests.capacity_builders import api_extension_offering as offering

SEARCH = {"CapacityReservationId": RID, "CapacityBlockExtensionDurationHours": 168}
BUY = {"CapacityBlockExtensionOfferingId": OFFER, "CapacityReservationId": RID}


@pytest.fixture(autouse=True)
def pinned(monkeypatch):
    from kimi_k3.cli import capacity_clock as capacity_cli

    monkeypatch.setattr(capacity_cli, "utcnow", lambda: NOW)


@pytest.fixture
def stack(monkeypatch):
    settings = types.SimpleNamespace(region=REGION, capacity=types.SimpleNamespace(reservation_id=RID))
    module = types.ModuleType("kimi_k3.stack.settings")
    module.load_stack = lambda name, root=None: settings
    monkeypatch.setitem(sys.modules, "kimi_k3.stack.settings", module)
    return settings


def _block(aws, state="active"):
    res = api_reservation(state=state, start=END - timedelta(days=7), available=0)
    aws.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [res]}, {"CapacityReservationIds": [RID]})


def test_extend_offerings_table(aws, stack, capsys):
    _block(aws)
    aws.ec2.add_response("describe_capacity_block_extension_offerings", {"CapacityBlockExtensionOfferings": [offering()]}, SEARCH)
    code, out, err = run(capsys, "extend-offerings", "prod", "--days", "7")
    assert code == 0, err
    assert f"Extensions of {RID} (2 x p6-b300.48xlarge, ends 2026-12-08 11:30 UTC) by 7 days:" in out
    assert out.splitlines()[2].split() == [OFFER, "2026-12-15", "11:30", "7d", "(168h)", "1,572,480.00", "USD"]
    assert "kimi-k3 capacity extend prod OFFERING_ID --days 7" in out


def test_no_offerings_says_extensions_are_not_guaranteed(aws, stack, capsys):
    _block(aws)
    aws.ec2.add_response("describe_capacity_block_extension_offerings", {"CapacityBlockExtensionOfferings": []}, SEARCH)
    code, out, _ = run(capsys, "extend-offerings", "prod", "--days", "7")
    assert code == 0 and "extensions are not guaranteed" in out


def test_an_expired_block_is_refused_before_any_offering_call(aws, stack, capsys):
    _block(aws, state="expired")
    code, _, err = run(capsys, "extend-offerings", "prod", "--days", "7")
    assert code == 2 and f"{RID} is expired; only active or scheduled Capacity Blocks can be extended" in err


def test_bad_days_before_aws(no_aws, stack, capsys):
    code, _, err = run(capsys, "extend-offerings", "prod", "--days", "16")
    assert code == 2 and "--days 16 is not accepted" in err and err.count("\n") == 1


def test_extend_with_yes(aws, stack, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("", tty=False))
    _block(aws)
    aws.ec2.add_response("describe_capacity_block_extension_offerings", {"CapacityBlockExtensionOfferings": [offering()]}, SEARCH)
    aws.ec2.add_response("purchase_capacity_block_extension", {"CapacityBlockExtensions": [extension()]}, BUY)
    code, out, err = run(capsys, "extend", "prod", OFFER, "--days", "7", "--yes")
    assert code == 0, err
    assert "end          2026-12-08 11:30 UTC -> 2026-12-15 11:30 UTC (+7d (168h))" in out
    assert "upfront fee  1,572,480.00 USD" in out
    assert f"status payment-pending; {RID} keeps its id and will end 2026-12-15 11:30 UTC once paid." in out
    assert "run `pulumi up -s prod`" in out


def test_extend_interactive_no_buys_nothing(aws, stack, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("no\n", tty=True))
    _block(aws)
    aws.ec2.add_response("describe_capacity_block_extension_offerings", {"CapacityBlockExtensionOfferings": [offering()]}, SEARCH)
    code, out, _ = run(capsys, "extend", "prod", OFFER, "--days", "7")  # a purchase call would be unstubbed: the test fails
    assert code == 1 and "Type 'yes' to buy:" in out and "Not extended." in out


def test_extend_interactive_yes(aws, stack, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("yes\n", tty=True))
    _block(aws)
    aws.ec2.add_response("describe_capacity_block_extension_offerings", {"CapacityBlockExtensionOfferings": [offering()]}, SEARCH)
    aws.ec2.add_response("purchase_capacity_block_extension", {"CapacityBlockExtensions": [extension()]}, BUY)
    code, out, _ = run(capsys, "extend", "prod", OFFER, "--days", "7")
    assert code == 0 and "Extension bought" in out


def test_extend_without_tty_or_yes_is_refused_before_aws(no_aws, stack, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("yes\n", tty=False))
    code, _, err = run(capsys, "extend", "prod", OFFER, "--days", "7")
    assert code == 2 and "stdin is not a terminal; pass --yes" in err


def test_extend_a_gone_offering(aws, stack, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("", tty=False))
    _block(aws)
    aws.ec2.add_response("describe_capacity_block_extension_offerings", {"CapacityBlockExtensionOfferings": []}, SEARCH)
    code, _, err = run(capsys, "extend", "prod", OFFER, "--days", "7", "--yes")
    assert code == 2 and f"extension offering {OFFER} is not among the current 7-day offerings" in err


def test_stack_without_reservation(no_aws, stack, capsys):
    stack.capacity.reservation_id = None
    code, _, err = run(capsys, "extend-offerings", "prod", "--days", "7")
    assert code == 2 and "stack prod has no kimi-k3:capacityReservationId" in err
