"""What ``kimi-k3 capacity`` and ``kimi-k3 hyperpod plans`` share, tested once against both.

Both commands take the same search flags (validated before any AWS call, :func:`kimi_k3.cli.purchase.search_query`),
list offerings the same way (:func:`kimi_k3.cli.capacity_tables.print_offerings`) and show the offer and the
stack config line around a purchase (:func:`kimi_k3.cli.purchase.confirm_offer`, ``print_purchased``).
Each test runs against the EC2 Capacity Block command and the SageMaker training plan command, with
stubbed botocore clients checked against the real API models.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from tests import capacity_builders as ec2_api
from tests import training_plan_builders as plan_api
from tests.aws_stubs import FakeStdin, aws, cli_env, no_aws, no_sagemaker, run_cli, sm  # noqa: F401 - fixtures
from tests.capacity_builders import REGION, RID, START


@dataclass(frozen=True)
class OfferingCli:
    """One of the two commands, with the stubs and answers its tests need."""

    command: tuple[str, ...]
    """The words before the action (``capacity``; ``hyperpod plans``)."""
    clients: str
    """Fixture of its stubbed clients."""
    no_clients: str
    """Fixture that fails the test on any client."""
    answer_search: Callable[[Any, list[dict[str, Any]]], None]
    """Queue the offering search's answer of these entries."""
    answer_purchase: Callable[[Any], None]
    """Queue the purchase's answer."""
    offering: Callable[..., dict[str, Any]]
    """An offering entry (id, AZ, start, fee)."""
    ids: tuple[str, str]
    """Two offering ids."""
    purchase_flags: tuple[str, ...]
    """Flags a purchase needs besides the search flags."""
    stack: str
    """The ``--stack`` of the purchase."""
    config: tuple[str, str]
    """The stack config key and the value a purchase prints for it."""


EC2 = OfferingCli(
    command=("capacity",),
    clients="aws",
    no_clients="no_aws",
    answer_search=lambda c, items: c.ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": items}, ec2_api.SEARCH),
    answer_purchase=lambda c: c.ec2.add_response(
        "purchase_capacity_block", {"CapacityReservation": ec2_api.api_reservation(state="payment-pending")}, ec2_api.PURCHASE),
    offering=ec2_api.api_offering,
    ids=(ec2_api.OFF_A, ec2_api.OFF_B),
    purchase_flags=(),
    stack="prod",
    config=("kimi-k3:capacityReservationId", RID),
)

SAGEMAKER = OfferingCli(
    command=("hyperpod", "plans"),
    clients="sm",
    no_clients="no_sagemaker",
    answer_search=lambda c, items: c.stub.add_response("search_training_plan_offerings", {"TrainingPlanOfferings": items}, plan_api.SEARCH),
    answer_purchase=lambda c: c.stub.add_response("create_training_plan", {"TrainingPlanArn": plan_api.ARN}, plan_api.CREATE),
    offering=plan_api.offering,
    ids=(plan_api.OFF_A, plan_api.OFF_B),
    purchase_flags=("--name", plan_api.NAME),
    stack="hyperpod",
    config=("kimi-k3:trainingPlanArn", plan_api.ARN),
)


# --------------------------------------------------------------------------- offerings


@pytest.mark.parametrize("cli,fees,row,hint", [
    (EC2, ("3590400.00", "3418560.00"), ["7d", "(168h)", "3,418,560.00", "USD"],
     "kimi-k3 capacity purchase OFFERING_ID --instance-type p6-b300.48xlarge --count 2 --days 7 --region us-east-1"),
    (SAGEMAKER, ("1680000.00", "1573056.00"), ["7d", "(168h)", "2", "1,573,056.00", "USD"],
     "kimi-k3 hyperpod plans purchase OFFERING_ID --name NAME --instance-type ml.p6-b300.48xlarge --count 2 --days 7 --region us-east-1"),
], ids=["capacity", "plans"])
def test_offerings_table_cheapest_first_with_purchase_hint(request, capsys, cli, fees, row, hint):
    clients = request.getfixturevalue(cli.clients)
    first, second = cli.ids
    cli.answer_search(clients, [cli.offering(second, "us-east-1b", START, fees[0]), cli.offering(first, "us-east-1a", START + timedelta(days=2), fees[1])])
    code, out, err = run_cli(capsys, *cli.command, "offerings", "--count", "2", "--days", "7", "--region", REGION)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[1].split()[:3] == ["OFFERING", "AZ", "START"]
    assert lines[2].split() == [first, "us-east-1a", "2026-06-12", "11:30", "2026-06-19", "11:30", *row]
    assert lines[3].startswith(second)
    assert hint in out
    assert clients.regions == [REGION]


@pytest.mark.parametrize("cli,argv,message", [
    (EC2, ["--count", "2", "--days", "15"], "--days 15 is not accepted"),
    (EC2, ["--count", "65", "--days", "7"], "--count 65 is not accepted"),
    (EC2, ["--count", "2", "--days", "7", "--start-after", "2026-08-01"], "within 8 weeks"),
    (EC2, ["--count", "2", "--days", "7", "--start-before", "soon"], "is not an ISO 8601"),
    (EC2, ["--count", "2", "--days", "7", "--region", "Virginia"], "not an AWS region name"),
    (SAGEMAKER, ["--count", "0", "--days", "7"], "--count 0 is not accepted"),
    (SAGEMAKER, ["--count", "3", "--days", "7"], "training plans reserve 1, 2, 4, 8, 16, 32, 64 instances"),
    (SAGEMAKER, ["--count", "2", "--days", "183"], "training plans last 1 to 182 days in 1-day steps"),
    (SAGEMAKER, ["--count", "2", "--days", "0"], "--days 0 is not accepted"),
    (SAGEMAKER, ["--count", "2", "--days", "7", "--instance-type", "p6-b300.48xlarge"], "training plans reserve ml.p4d.24xlarge"),
    (SAGEMAKER, ["--count", "2", "--days", "7", "--start-after", "2026-05-01"], "is in the past"),
    (SAGEMAKER, ["--count", "2", "--days", "7", "--end-before", "2026-06-05"], "leaves no room for 7 day(s)"),
    (SAGEMAKER, ["--count", "2", "--days", "7", "--start-after", "soon"], "is not an ISO 8601"),
    (SAGEMAKER, ["--count", "2", "--days", "7", "--region", "Virginia"], "not an AWS region name"),
])
def test_offerings_validation_happens_before_aws(request, capsys, cli, argv, message):
    request.getfixturevalue(cli.no_clients)
    code, _out, err = run_cli(capsys, *cli.command, "offerings", *argv)
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


# --------------------------------------------------------------------------- purchase


@pytest.mark.parametrize("cli,fee,shown", [(EC2, "3418560.00", "3,418,560.00"), (SAGEMAKER, "1573056.00", "1,573,056.00")], ids=["capacity", "plans"])
def test_purchase_with_yes_prints_the_config_line(request, capsys, monkeypatch, cli, fee, shown):
    clients = request.getfixturevalue(cli.clients)
    monkeypatch.setattr(sys, "stdin", FakeStdin("", tty=False))
    cli.answer_search(clients, [cli.offering(cli.ids[0], "us-east-1a", START, fee)])
    cli.answer_purchase(clients)
    code, out, err = run_cli(capsys, *cli.command, "purchase", cli.ids[0], *cli.purchase_flags, "--count", "2", "--days", "7", "--yes", "--stack", cli.stack)
    assert code == 0, err
    assert f"upfront fee  {shown} USD" in out
    assert "2026-06-10 11:30 UTC -> 2026-06-17 11:30 UTC, 7d (168h), starts in 9d 3h 30m" in out
    key, value = cli.config
    assert f"\n  {key}: {value}\n" in out
    assert f"pulumi config set {key} {value} -s {cli.stack}" in out
    assert "Type 'yes'" not in out
