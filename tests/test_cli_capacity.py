"""End-to-end tests of ``kimi-k3 capacity …`` through ``kimi_k3.cli.main``.

The client factory is replaced by stubbed botocore clients (requests and
responses checked against the real API models); the clock and stdin are injected.
"""

from __future__ import annotations

import sys
import types
from datetime import datetime, timedelta

import pytest

from kimi_k3.capacity import aws as capacity_aws
from kimi_k3.core.human_time import duration_text
from tests.aws_stubs import FakeStdin, aws, cli_env, client, no_aws  # noqa: F401 - fixtures
from tests.aws_stubs import run_capacity as run
from tests.capacity_builders import BLOCK_ID, NOW, OFF_A, OFF_B, PURCHASE, REGION, RID, SEARCH, START, UTC, api_extension
from tests.capacity_builders import api_offering as offering
from tests.capacity_builders import api_reservation as reservation

# --------------------------------------------------------------------------- offerings


def test_offerings_empty(aws, capsys):
    aws.ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": []},
                         {**SEARCH, "StartDateRange": datetime(2026, 6, 20, tzinfo=UTC)})
    code, out, _ = run(capsys, "offerings", "--count", "2", "--days", "7", "--start-after", "2026-06-20")
    assert code == 0 and "No offerings matched" in out


# --------------------------------------------------------------------------- purchase


def _lookup(aws):
    aws.ec2.add_response("describe_capacity_block_offerings",
                         {"CapacityBlockOfferings": [offering(OFF_A, "us-east-1a", START, "3418560.00")]}, SEARCH)


def test_purchase_interactive_yes(aws, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("yes\n", tty=True))
    _lookup(aws)
    aws.ec2.add_response("purchase_capacity_block", {"CapacityReservation": reservation(state="payment-pending")}, PURCHASE)
    code, out, _ = run(capsys, "purchase", OFF_A, "--count", "2", "--days", "7")
    assert code == 0
    assert "Buy this Capacity Block for 3,418,560.00 USD? Type 'yes' to buy:" in out
    assert f"pulumi config set kimi-k3:capacityReservationId {RID} -s STACK" in out


@pytest.mark.parametrize("answer", ["n\n", "\n", "maybe\n", ""])
def test_purchase_interactive_no_buys_nothing(aws, capsys, monkeypatch, answer):
    monkeypatch.setattr(sys, "stdin", FakeStdin(answer, tty=True))
    _lookup(aws)  # only the look-up is stubbed: a purchase call would fail the test
    code, out, _ = run(capsys, "purchase", OFF_A, "--count", "2", "--days", "7")
    assert code == 1 and "Not purchased." in out and RID not in out


def test_purchase_without_tty_or_yes_is_refused_before_aws(no_aws, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("yes\n", tty=False))
    code, _, err = run(capsys, "purchase", OFF_A, "--count", "2", "--days", "7")
    assert code == 2 and "stdin is not a terminal; pass --yes" in err


def test_purchase_of_a_gone_offering(aws, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("", tty=False))
    aws.ec2.add_response("describe_capacity_block_offerings",
                         {"CapacityBlockOfferings": [offering(OFF_B, "us-east-1b", START, "3418560.00")]}, SEARCH)
    code, _, err = run(capsys, "purchase", OFF_A, "--count", "2", "--days", "7", "--yes")
    assert code == 2 and f"offering {OFF_A} is not among the current offerings" in err


def test_purchase_malformed_offering_id(no_aws, capsys):
    code, _, err = run(capsys, "purchase", "cb-12345", "--count", "2", "--days", "7", "--yes")
    assert code == 2 and "cb- followed by 17 hex digits" in err


def test_purchase_denied(aws, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("", tty=False))
    _lookup(aws)
    aws.ec2.add_client_error("purchase_capacity_block", "UnauthorizedOperation",
                             "You are not authorized to perform this operation.", expected_params=PURCHASE)
    code, _, err = run(capsys, "purchase", OFF_A, "--count", "2", "--days", "7", "--yes")
    assert code == 2
    assert err == "kimi-k3: error: AWS denied ec2:PurchaseCapacityBlock in us-east-1 (UnauthorizedOperation): grant that action to your IAM identity\n"


# --------------------------------------------------------------------------- status


def test_status_one_reservation(aws, capsys):
    aws.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation()]},
                         {"CapacityReservationIds": [RID]})
    aws.ec2.add_response("describe_capacity_block_status", {"CapacityBlockStatuses": [
        {"CapacityBlockId": BLOCK_ID, "InterconnectStatus": "ok", "TotalCapacity": 2,
         "TotalAvailableCapacity": 2, "TotalUnavailableCapacity": 0}]}, {"CapacityBlockIds": [BLOCK_ID]})
    code, out, _ = run(capsys, "status", RID, "--region", REGION)
    assert code == 0
    assert f"{RID}  scheduled  (capacity-block)" in out
    assert "us-east-1a (use1-az4)" in out
    assert "start          in 9d 3h 30m" in out
    assert "end            in 16d 3h 30m" in out
    assert "2 reserved, 0 in use, 2 available" in out
    assert f"{BLOCK_ID}: interconnect ok, 0 of 2 unavailable" in out


def test_status_lists_only_capacity_blocks(aws, capsys):
    active = reservation("cr-0bbbbbbbbbbbbbbbb", state="active", start=datetime(2026, 5, 30, 11, 30, tzinfo=UTC), total=4, available=1)
    odcr = reservation("cr-0cccccccccccccccc", rtype="default")
    del odcr["CapacityBlockId"]
    aws.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation(), active, odcr]}, {})
    aws.ec2.add_response("describe_capacity_block_status", {"CapacityBlockStatuses": []}, {"CapacityBlockIds": [BLOCK_ID]})
    code, out, _ = run(capsys, "status")
    assert code == 0
    rows = out.splitlines()[2:]
    assert [r.split()[0] for r in rows] == ["cr-0bbbbbbbbbbbbbbbb", RID]
    assert "ends in 5d 3h 30m" in rows[0] and rows[0].rstrip().endswith("3/4")
    assert "starts in 9d 3h 30m" in rows[1] and rows[1].rstrip().endswith("0/2")
    assert aws.regions == [None]


@pytest.mark.parametrize("code_,expected", [
    ("InvalidCapacityReservationId.NotFound", "capacity reservation not found in us-east-1"),
    ("InvalidCapacityReservationId.Malformed", "malformed capacity reservation id"),
    ("UnauthorizedOperation", "AWS denied ec2:DescribeCapacityReservations in us-east-1"),
    ("AccessDenied", "AWS denied ec2:DescribeCapacityReservations in us-east-1"),
])
def test_status_client_errors(aws, capsys, code_, expected):
    aws.ec2.add_client_error("describe_capacity_reservations", code_, "details from AWS",
                             expected_params={"CapacityReservationIds": [RID]})
    code, out, err = run(capsys, "status", RID)
    assert code == 2 and out == ""
    assert err.startswith("kimi-k3: error: ") and expected in err and err.count("\n") == 1


def test_status_malformed_id_is_rejected_locally(no_aws, capsys):
    code, _, err = run(capsys, "status", "cr-ABC")
    assert code == 2 and "cr- followed by 17 hex digits" in err


def test_no_credentials_through_the_real_factory(capsys, monkeypatch, tmp_path):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                "AWS_DEFAULT_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code, _, err = run(capsys, "status", RID, "--region", REGION)
    assert code == 2
    assert err.startswith("kimi-k3: error: no AWS credentials found") and "Traceback" not in err


def test_no_region_through_the_real_factory(capsys, monkeypatch, tmp_path):
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code, _, err = run(capsys, "status")
    assert code == 2 and "no AWS region configured: pass --region or set AWS_REGION" in err


def test_unreachable_endpoint(capsys, monkeypatch):
    from botocore.config import Config

    ec2 = client("ec2", endpoint_url="http://127.0.0.1:9", config=Config(retries={"total_max_attempts": 1}, connect_timeout=2))
    monkeypatch.setattr(capacity_aws, "make_clients", lambda region: capacity_aws.Clients(ec2=ec2, quotas=None))
    code, _, err = run(capsys, "status", RID)
    assert code == 2 and "cannot reach AWS in us-east-1" in err and err.count("\n") == 1


# --------------------------------------------------------------------------- preflight


@pytest.fixture
def stack(monkeypatch):
    """A stand-in for the stack preflight reads (kimi_k3.stack.settings.load_settings), with the attributes it uses."""
    from kimi_k3.stack import settings as stack_settings

    loaded = {}
    settings = types.SimpleNamespace(
        region=REGION, environment="prod", nodes_required=2,
        capacity=types.SimpleNamespace(reservation_id=RID, instance_type="p6-b300.48xlarge"),
        network=types.SimpleNamespace(availability_zones=(), existing_vpc_id=None),
    )

    def load_settings(found, name):
        loaded["name"], loaded["project"] = name, found
        return settings

    monkeypatch.setattr(stack_settings, "load_settings", load_settings)
    return types.SimpleNamespace(settings=settings, loaded=loaded)


def _preflight_calls(aws, res, quota=768.0, extensions=()):
    aws.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [res]},
                         {"CapacityReservationIds": [RID]})
    aws.ec2.add_response("describe_capacity_block_status", {"CapacityBlockStatuses": [
        {"CapacityBlockId": BLOCK_ID, "InterconnectStatus": "ok", "TotalCapacity": res["TotalInstanceCount"],
         "TotalAvailableCapacity": res["AvailableInstanceCount"], "TotalUnavailableCapacity": 0}]},
        {"CapacityBlockIds": [BLOCK_ID]})
    aws.quotas.add_response("get_service_quota", {"Quota": {"QuotaCode": "L-417A185B", "Value": quota}},
                            {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    aws.ec2.add_response("describe_capacity_block_extension_history", {"CapacityBlockExtensions": list(extensions)},
                         {"CapacityReservationIds": [RID]})


def test_preflight_go(aws, stack, capsys):
    _preflight_calls(aws, reservation())
    code, out, _ = run(capsys, "preflight", "prod")
    assert code == 0
    assert stack.loaded["name"] == "prod" and aws.regions == [REGION]
    assert out.splitlines()[0] == f"Preflight for stack prod (prod, us-east-1), reservation {RID}, at 2026-06-01 08:00 UTC:"
    assert f"OK    reservation: {RID} exists and is a Capacity Block." in out
    assert "OK    vCPU quota: L-417A185B (Running On-Demand P instances) is 768 vCPUs, enough for 2 x 192 = 384" in out
    assert out.rstrip().endswith("GO (0 warnings): `pulumi up -s prod` can proceed.")


def test_preflight_go_with_warnings(aws, stack, capsys):
    _preflight_calls(aws, reservation(state="payment-pending"), quota=192.0)
    code, out, _ = run(capsys, "preflight", "prod")
    assert code == 0
    assert f"WARN  state: Capacity Block {RID} is payment-pending" in out and "WARN  vCPU quota:" in out
    assert "GO (2 warnings)" in out


def test_preflight_no_go(aws, stack, capsys):
    stack.settings.nodes_required = 3
    _preflight_calls(aws, reservation(state="active", start=NOW - timedelta(days=7) + timedelta(minutes=30), available=0))
    code, out, _ = run(capsys, "preflight", "prod")
    assert code == 1
    assert f"FAIL  instance count: Capacity Block {RID} reserves 2 instance(s) but the stack needs 3" in out
    assert f"WARN  window: Capacity Block {RID} ends in 30m" in out
    assert out.rstrip().endswith("NO-GO: 1 check failed; fix them before the block starts.")


def test_preflight_shows_a_pending_extension_without_changing_the_verdict(aws, stack, capsys):
    pending = api_extension("payment-pending", purchased=NOW - timedelta(hours=3))
    _preflight_calls(aws, reservation(), extensions=[pending])
    code, out, _ = run(capsys, "preflight", "prod")
    assert code == 0
    (line,) = [line for line in out.splitlines() if "extension:" in line]
    assert line.startswith("WARN  extension: 7-day extension to ") and "is payment-pending (fails if not paid by" in line
    assert out.rstrip().endswith("GO (0 warnings): `pulumi up -s prod` can proceed.")


def test_preflight_reservation_not_found(aws, stack, capsys):
    aws.ec2.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound",
                             f"The capacity reservation ID '{RID}' does not exist",
                             expected_params={"CapacityReservationIds": [RID]})
    code, out, _ = run(capsys, "preflight", "prod")
    assert code == 1 and f"FAIL  reservation: {RID} does not exist in us-east-1 for this account." in out


def test_preflight_access_denied_is_a_user_error(aws, stack, capsys):
    aws.ec2.add_client_error("describe_capacity_reservations", "UnauthorizedOperation", "not authorized",
                             expected_params={"CapacityReservationIds": [RID]})
    code, out, err = run(capsys, "preflight", "prod")
    assert code == 2 and out == "" and "AWS denied ec2:DescribeCapacityReservations" in err


def test_time_formatting():
    assert duration_text(timedelta(days=9, hours=3, minutes=30)) == "9d 3h 30m"
    assert duration_text(timedelta(minutes=-45)) == "45m"
    assert duration_text(timedelta(hours=2)) == "2h 0m"
