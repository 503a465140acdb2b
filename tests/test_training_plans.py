"""``kimi-k3 hyperpod plans …`` and kimi_k3.hyperpod.training_plans against botocore's real SageMaker model.

The client factory is replaced by a stubbed botocore SageMaker client: every request
and response is checked against ``sagemaker/2017-07-24/service-2.json`` of botocore
1.44.8 by ``Stubber``. The clock and stdin are injected.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from botocore.stub import Stubber

from kimi_k3.errors import UserError
from kimi_k3.hyperpod import training_plans as tp
from tests.aws_stubs import SESSION, FakeStdin, cli_env, no_sagemaker, sm  # noqa: F401 - fixtures
from tests.aws_stubs import client as aws_client
from tests.aws_stubs import run_plans as run
from tests.capacity_builders import NOW, REGION, START
from tests.training_plan_builders import ARN, CREATE, EXT, NAME, OFF_A, OFF_B, SEARCH, offering, plan

# --------------------------------------------------------------------------- the model


def test_the_operations_exist_in_botocores_sagemaker_model():
    model = SESSION.get_service_model("sagemaker")
    for op in ("SearchTrainingPlanOfferings", "CreateTrainingPlan", "DescribeTrainingPlan", "ExtendTrainingPlan", "DescribeTrainingPlanExtensionHistory"):
        assert op in model.operation_names
    assert list(model.operation_model("ExtendTrainingPlan").input_shape.required_members) == ["TrainingPlanExtensionOfferingId"]
    assert "ml.p6-b300.48xlarge" in tp.supported_instance_types()
    assert tp.HYPERPOD_TARGET in model.shape_for("SageMakerResourceName").enum


# --------------------------------------------------------------------------- offerings


def test_offerings_for_other_targets_are_dropped_and_json_is_plain_data(sm, capsys):
    sm.stub.add_response("search_training_plan_offerings", {"TrainingPlanOfferings": [
        offering(OFF_A, "us-east-1a", START, "1573056.00"),
        offering(OFF_B, "us-east-1b", START, "1.00", targets=("training-job",)),
    ]}, {**SEARCH, "StartTimeAfter": datetime(2026, 6, 5, tzinfo=UTC)})
    code, out, _ = run(capsys, "offerings", "--count", "2", "--days", "7", "--start-after", "2026-06-05", "--json")
    assert code == 0
    data = json.loads(out)
    assert [o["offering_id"] for o in data] == [OFF_A]
    assert data[0]["upfront_fee"] == "1573056.00" and data[0]["start"] == "2026-06-10T11:30:00Z"
    assert data[0]["availability_zones"] == ["us-east-1a"] and data[0]["instance_count"] == 2


def test_no_offerings(sm, capsys):
    sm.stub.add_response("search_training_plan_offerings", {"TrainingPlanOfferings": []}, SEARCH)
    code, out, _ = run(capsys, "offerings", "--count", "2", "--days", "7")
    assert code == 0 and "No offerings matched" in out


# --------------------------------------------------------------------------- purchase


def _lookup(sm):
    sm.stub.add_response("search_training_plan_offerings", {"TrainingPlanOfferings": [offering(OFF_A, "us-east-1a", START, "1573056.00")]}, SEARCH)


def test_purchase_json_keeps_stdout_machine_readable(sm, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("", tty=False))
    _lookup(sm)
    sm.stub.add_response("create_training_plan", {"TrainingPlanArn": ARN}, CREATE)
    code, out, err = run(capsys, "purchase", OFF_A, "--name", NAME, "--count", "2", "--days", "7", "--yes", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["trainingPlanArn"] == ARN and data["offering"]["offering_id"] == OFF_A
    assert "upfront fee  1,573,056.00 USD" in err


def test_purchase_interactive_yes(sm, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("yes\n", tty=True))
    _lookup(sm)
    sm.stub.add_response("create_training_plan", {"TrainingPlanArn": ARN}, CREATE)
    code, out, _ = run(capsys, "purchase", OFF_A, "--name", NAME, "--count", "2", "--days", "7")
    assert code == 0
    assert f"Buy training plan {NAME} for 1,573,056.00 USD? Type 'yes' to buy:" in out
    assert f"pulumi config set kimi-k3:trainingPlanArn {ARN} -s STACK" in out


@pytest.mark.parametrize("answer", ["n\n", "\n", "y es\n", ""])
def test_purchase_interactive_no_buys_nothing(sm, capsys, monkeypatch, answer):
    monkeypatch.setattr(sys, "stdin", FakeStdin(answer, tty=True))
    _lookup(sm)  # only the look-up is stubbed: a create call would fail the test
    code, out, _ = run(capsys, "purchase", OFF_A, "--name", NAME, "--count", "2", "--days", "7")
    assert code == 1 and "Not purchased." in out and ARN not in out


def test_purchase_without_a_tty_or_yes_is_refused_before_aws(no_sagemaker, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("yes\n", tty=False))
    code, _, err = run(capsys, "purchase", OFF_A, "--name", NAME, "--count", "2", "--days", "7")
    assert code == 2 and "refusing to buy a training plan without confirmation: stdin is not a terminal; pass --yes" in err


@pytest.mark.parametrize("argv,message", [
    (["OFFER_ID", "--name", NAME], "is not a training plan offering id"),
    ([OFF_A, "--name=-bad-"], "--name '-bad-' is not accepted"),
    ([OFF_A, "--name", "x" * 65], "is not accepted; a training plan name is 1-64"),
])
def test_purchase_bad_ids_are_refused_before_aws(no_sagemaker, capsys, argv, message):
    code, _, err = run(capsys, "purchase", *argv, "--count", "2", "--days", "7", "--yes")
    assert code == 2 and message in err


def test_purchase_of_an_offering_that_is_gone(sm, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("", tty=False))
    sm.stub.add_response("search_training_plan_offerings", {"TrainingPlanOfferings": [offering(OFF_B, "us-east-1b", START, "1.00")]}, SEARCH)
    code, _, err = run(capsys, "purchase", OFF_A, "--name", NAME, "--count", "2", "--days", "7", "--yes")
    assert code == 2 and f"offering {OFF_A} is not among the current training plan offerings" in err


@pytest.mark.parametrize("code_,expected", [
    ("AccessDeniedException", "AWS denied sagemaker:CreateTrainingPlan in us-east-1 (AccessDeniedException): grant that action"),
    ("ResourceLimitExceeded", "SageMaker refused CreateTrainingPlan in us-east-1: a limit was reached"),
    ("ResourceInUse", "SageMaker refused CreateTrainingPlan in us-east-1 (ResourceInUse)"),
    ("ValidationException", "SageMaker rejected CreateTrainingPlan in us-east-1 as invalid"),
])
def test_purchase_errors_are_one_line(sm, capsys, monkeypatch, code_, expected):
    monkeypatch.setattr(sys, "stdin", FakeStdin("", tty=False))
    _lookup(sm)
    sm.stub.add_client_error("create_training_plan", code_, "details from AWS", expected_params=CREATE)
    code, _out, err = run(capsys, "purchase", OFF_A, "--name", NAME, "--count", "2", "--days", "7", "--yes")
    assert code == 2 and expected in err and err.count("\n") == 1 and "Traceback" not in err


# --------------------------------------------------------------------------- status


def test_status_of_one_plan(sm, capsys):
    sm.stub.add_response("describe_training_plan", plan(), {"TrainingPlanName": NAME})
    code, out, _ = run(capsys, "status", NAME, "--region", REGION)
    assert code == 0
    assert out.splitlines()[0] == f"{NAME}  Scheduled"
    assert f"arn            {ARN}" in out
    assert "for            hyperpod-cluster" in out
    assert "start          in 9d 3h 30m" in out and "end            in 16d 3h 30m" in out
    assert "2 reserved, 0 in use, 2 available, 0 unhealthy" in out
    assert "capacity       2 x ml.p6-b300.48xlarge in us-east-1a (use1-az4), Scheduled, 2026-06-10 11:30 -> 2026-06-17 11:30 UTC" in out


def test_status_lists_every_plan_and_json(sm, capsys):
    active = {**plan("Active", start=datetime(2026, 5, 30, 11, 30, tzinfo=UTC)), "TrainingPlanName": "older"}
    active["TrainingPlanArn"] = ARN.replace(NAME, "older")
    active.pop("UnhealthyInstanceCount")
    scheduled = plan()
    scheduled.pop("UnhealthyInstanceCount")
    page = {"TrainingPlanSummaries": [scheduled, active]}
    sm.stub.add_response("list_training_plans", page, {"SortBy": "StartTime", "SortOrder": "Descending"})
    code, out, _ = run(capsys, "status")
    assert code == 0
    rows = out.splitlines()[2:]
    assert [r.split()[0] for r in rows] == [NAME, "older"]
    assert "starts in 9d 3h 30m" in rows[0] and "ends in 5d 3h 30m" in rows[1]
    sm.stub.add_response("list_training_plans", page, {"SortBy": "StartTime", "SortOrder": "Descending"})
    code, out, _ = run(capsys, "status", "--json")
    assert [p["name"] for p in json.loads(out)] == [NAME, "older"]


def test_status_not_found_is_one_line(sm, capsys):
    sm.stub.add_client_error("describe_training_plan", "ResourceNotFound", f"Training plan {NAME} not found", expected_params={"TrainingPlanName": NAME})
    code, out, err = run(capsys, "status", NAME)
    assert code == 2 and out == ""
    assert err.startswith("kimi-k3: error: not found in us-east-1") and "kimi-k3 hyperpod plans status" in err and err.count("\n") == 1


def test_status_of_a_malformed_reference(no_sagemaker, capsys):
    code, _, err = run(capsys, "status", "arn:aws:sagemaker:us-east-1:1234:training-plan/x")
    assert code == 2 and "is not a training plan name or ARN" in err


def test_no_credentials_through_the_real_factory(capsys, monkeypatch, tmp_path):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code, _, err = run(capsys, "status", NAME, "--region", REGION)
    assert code == 2 and err.startswith("kimi-k3: error: no AWS credentials found") and "Traceback" not in err


# --------------------------------------------------------------------------- extend


def ext_offering(oid=EXT, fee="224722.29", days=1):
    end = START + timedelta(days=7)
    return {"TrainingPlanExtensionOfferingId": oid, "AvailabilityZone": "us-east-1a", "StartDate": end, "EndDate": end + timedelta(days=days),
            "DurationHours": 24 * days, "UpfrontFee": fee, "CurrencyCode": "USD"}


def test_extend_lists_offerings(sm, capsys):
    sm.stub.add_response("describe_training_plan", plan("Active"), {"TrainingPlanName": NAME})
    sm.stub.add_response("search_training_plan_offerings", {"TrainingPlanOfferings": [], "TrainingPlanExtensionOfferings": [
        ext_offering("tpeo-2", "449444.58", 2), ext_offering()]}, {"TrainingPlanArn": ARN})
    code, out, _ = run(capsys, "extend", NAME)
    assert code == 0
    rows = out.splitlines()
    assert rows[2].split() == [EXT, "us-east-1a", "2026-06-17", "11:30", "2026-06-18", "11:30", "1d", "(24h)", "224,722.29", "USD"]
    assert rows[3].startswith("tpeo-2")
    assert f"kimi-k3 hyperpod plans extend {NAME} --offering EXTENSION_OFFERING --region us-east-1" in out


def test_extend_buys_with_yes(sm, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("", tty=False))
    sm.stub.add_response("describe_training_plan", plan("Active"), {"TrainingPlanName": NAME})
    sm.stub.add_response("search_training_plan_offerings", {"TrainingPlanOfferings": [], "TrainingPlanExtensionOfferings": [ext_offering()]},
                         {"TrainingPlanArn": ARN, "DurationHours": 24})
    end = START + timedelta(days=7)
    sm.stub.add_response("extend_training_plan", {"TrainingPlanExtensions": [{
        "TrainingPlanExtensionOfferingId": EXT, "ExtendedAt": NOW, "StartDate": end, "EndDate": end + timedelta(days=1),
        "Status": "Pending", "PaymentStatus": "Pending", "AvailabilityZone": "us-east-1a", "DurationHours": 24,
        "UpfrontFee": "224722.29", "CurrencyCode": "USD"}]}, {"TrainingPlanExtensionOfferingId": EXT})
    code, out, err = run(capsys, "extend", NAME, "--days", "1", "--offering", EXT, "--yes")
    assert code == 0, err
    assert "upfront fee  224,722.29 USD" in out
    assert f"Extended: {EXT} 2026-06-17 11:30 -> 2026-06-18 11:30 UTC, status Pending, payment Pending." in out


def test_extend_without_a_tty_or_yes_is_refused_before_aws(no_sagemaker, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("yes\n", tty=False))
    code, _, err = run(capsys, "extend", NAME, "--offering", EXT)
    assert code == 2 and "refusing to extend a training plan without confirmation" in err


def test_an_expired_plan_cannot_be_extended(sm, capsys):
    sm.stub.add_response("describe_training_plan", plan("Expired"), {"TrainingPlanName": NAME})
    code, _, err = run(capsys, "extend", NAME)
    assert code == 2 and f"training plan {NAME} is Expired; only a Scheduled or Active plan can be extended" in err


def test_extend_interactive_no(sm, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin("no\n", tty=True))
    sm.stub.add_response("describe_training_plan", plan("Active"), {"TrainingPlanName": NAME})
    sm.stub.add_response("search_training_plan_offerings", {"TrainingPlanOfferings": [], "TrainingPlanExtensionOfferings": [ext_offering()]}, {"TrainingPlanArn": ARN})
    code, out, _ = run(capsys, "extend", NAME, "--offering", EXT)
    assert code == 1 and "Not extended." in out


# --------------------------------------------------------------------------- library level


def test_extension_history_reads_every_page():
    client = aws_client("sagemaker")
    item = {"TrainingPlanExtensionOfferingId": EXT, "Status": "Active", "PaymentStatus": "Paid", "UpfrontFee": "1", "CurrencyCode": "USD"}
    with Stubber(client) as stub:
        stub.add_response("describe_training_plan_extension_history", {"TrainingPlanExtensions": [item], "NextToken": "t"}, {"TrainingPlanArn": ARN})
        stub.add_response("describe_training_plan_extension_history", {"TrainingPlanExtensions": [{**item, "TrainingPlanExtensionOfferingId": "tpeo-2"}]},
                          {"TrainingPlanArn": ARN, "NextToken": "t"})
        history = tp.extension_history(client, tp.TrainingPlan.from_api(plan()))
    assert [e.offering_id for e in history] == [EXT, "tpeo-2"] and history[0].upfront_fee == Decimal("1")


def test_the_sagemaker_translation_falls_back_to_the_shared_one():
    from botocore.exceptions import EndpointConnectionError

    err = tp.translate_sagemaker_error(EndpointConnectionError(endpoint_url="https://api.sagemaker.us-east-1.amazonaws.com/"), REGION)
    assert isinstance(err, UserError) and str(err).startswith("cannot reach AWS in us-east-1")
