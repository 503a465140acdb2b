"""Tests for the boto3 capacity modules (kimi_k3.capacity.aws, offerings, status, preflight) against the real EC2 / Service Quotas API models.

Every AWS call goes through ``botocore.stub.Stubber``, which checks requests
(``expected_params``) and responses against the installed botocore model.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError, NoCredentialsError, NoRegionError

from kimi_k3.capacity import aws as capacity_aws
from kimi_k3.capacity import offerings, preflight, status
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.errors import UserError
from kimi_k3.stack import terms as stack_terms
from tests.aws_stubs import client, ec2, quotas  # noqa: F401 - fixtures
from tests.capacity_builders import BLOCK_ID, NOW, OFF_A, OFF_B, OFF_C, REGION, RID, UTC
from tests.capacity_builders import api_offering as offering
from tests.capacity_builders import api_reservation as reservation

assert all(len(i) == 20 for i in (RID, BLOCK_ID, OFF_A, OFF_B, OFF_C))


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("days", [1, 7, 14, 21, 28, 91, 182])
def test_accepted_durations(days):
    q = offerings.build_offering_query("p6-b300.48xlarge", 2, days, NOW)
    assert q.duration_hours == days * 24
    assert q.request()["CapacityDurationHours"] == days * 24


@pytest.mark.parametrize("days", [0, 15, 16, 20, 22, 183, 189, -7])
def test_rejected_durations(days):
    with pytest.raises(UserError, match="1-14 days, or 21-182 days in multiples of 7"):
        offerings.build_offering_query("p6-b300.48xlarge", 2, days, NOW)


def test_valid_duration_list_is_exactly_the_aws_rule():
    assert offerings.valid_duration_days() == tuple(range(1, 15)) + tuple(range(21, 183, 7))
    assert offerings.valid_duration_days()[-1] == 182 and 175 in offerings.valid_duration_days()


@pytest.mark.parametrize("count,ok", [(0, False), (1, True), (64, True), (65, False)])
def test_instance_count_range(count, ok):
    if ok:
        assert offerings.build_offering_query("p6-b300.48xlarge", count, 7, NOW).count == count
    else:
        with pytest.raises(UserError, match="1 to 64 instances"):
            offerings.build_offering_query("p6-b300.48xlarge", count, 7, NOW)


def test_start_window_must_be_within_eight_weeks_and_future():
    ok = offerings.build_offering_query("p6-b300.48xlarge", 1, 7, NOW, start_after=NOW + timedelta(weeks=8))
    assert ok.start_after == NOW + timedelta(weeks=8)
    with pytest.raises(UserError, match="within 8 weeks"):
        offerings.build_offering_query("p6-b300.48xlarge", 1, 7, NOW, start_after=NOW + timedelta(weeks=8, minutes=1))
    with pytest.raises(UserError, match="within 8 weeks"):
        offerings.build_offering_query("p6-b300.48xlarge", 1, 7, NOW, start_before=NOW + timedelta(days=57))
    with pytest.raises(UserError, match="in the past"):
        offerings.build_offering_query("p6-b300.48xlarge", 1, 7, NOW, start_after=NOW - timedelta(hours=1))
    with pytest.raises(UserError, match="later than --start-after"):
        offerings.build_offering_query("p6-b300.48xlarge", 1, 7, NOW, start_after=NOW + timedelta(days=5),
                                 start_before=NOW + timedelta(days=4))


def test_naive_iso_times_are_utc():
    assert offerings.parse_when("2026-06-10", "--start-after") == datetime(2026, 6, 10, tzinfo=UTC)
    assert offerings.parse_when("2026-06-10T13:30+02:00", "--x") == datetime(2026, 6, 10, 11, 30, tzinfo=UTC)
    with pytest.raises(UserError, match="--start-after 'next week' is not an ISO 8601"):
        offerings.parse_when("next week", "--start-after")


@pytest.mark.parametrize("value,ok", [
    (RID, True), ("cr-0a1b2c3d4e5f6071", False), ("cr-0a1b2c3d4e5f607189", False),
    ("cr-0A1B2C3D4E5F60718", False), ("cb-0a1b2c3d4e5f60718", False), ("", False),
])
def test_reservation_id_format(value, ok):
    if ok:
        assert capacity_aws.validate_reservation_id(value) == value
    else:
        with pytest.raises(UserError, match="cr- followed by 17 hex digits"):
            capacity_aws.validate_reservation_id(value)


def test_offering_id_format():
    assert capacity_aws.validate_offering_id(OFF_A) == OFF_A
    for bad in ("cb-0123456789abcdefg", RID, "cb-123"):
        with pytest.raises(UserError, match="cb- followed by 17 hex digits"):
            capacity_aws.validate_offering_id(bad)


# --------------------------------------------------------------------------- offerings


def test_find_offerings_paginates_and_sorts_by_price_then_start(ec2):
    c, stub = ec2
    q = offerings.build_offering_query("p6-b300.48xlarge", 2, 7, NOW)
    base = {"InstanceType": "p6-b300.48xlarge", "InstanceCount": 2, "CapacityDurationHours": 168}
    stub.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": [
            offering(OFF_A, "us-east-1a", datetime(2026, 6, 10, 11, 30, tzinfo=UTC), "3418560.00"),
            offering(OFF_C, "us-east-1c", datetime(2026, 6, 3, 11, 30, tzinfo=UTC), "3590400.00"),
        ], "NextToken": "page-2"},
        base,
    )
    stub.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": [
            offering(OFF_B, "us-east-1b", datetime(2026, 6, 8, 11, 30, tzinfo=UTC), "3418560.00"),
        ]},
        {**base, "NextToken": "page-2"},
    )
    found = offerings.find_offerings(c, q)
    assert [o.offering_id for o in found] == [OFF_B, OFF_A, OFF_C]  # same price: earlier start first
    assert found[0].upfront_fee == Decimal("3418560.00")
    assert found[0].currency == "USD" and found[0].duration_hours == 168
    assert found[0].end - found[0].start == timedelta(days=7)


def test_start_before_is_sent_as_end_bound_and_enforced_on_start(ec2):
    c, stub = ec2
    after = NOW + timedelta(days=1)
    before = datetime(2026, 6, 9, tzinfo=UTC)
    q = offerings.build_offering_query("p6-b300.48xlarge", 1, 7, NOW, start_after=after, start_before=before)
    stub.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": [
            offering(OFF_A, "us-east-1a", datetime(2026, 6, 10, 11, 30, tzinfo=UTC), "1709280.00", count=1),
            offering(OFF_B, "us-east-1b", datetime(2026, 6, 8, 11, 30, tzinfo=UTC), "1709280.00", count=1),
        ]},
        {"InstanceType": "p6-b300.48xlarge", "InstanceCount": 1, "CapacityDurationHours": 168,
         "StartDateRange": after, "EndDateRange": before + timedelta(days=8)},
    )
    assert [o.offering_id for o in offerings.find_offerings(c, q)] == [OFF_B]


def test_find_offering_reports_a_vanished_offering(ec2):
    c, stub = ec2
    q = offerings.build_offering_query("p6-b300.48xlarge", 2, 7, NOW)
    stub.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": []},
                      {"InstanceType": "p6-b300.48xlarge", "InstanceCount": 2, "CapacityDurationHours": 168})
    with pytest.raises(UserError, match=f"offering {OFF_A} is not among the current offerings.*run `kimi-k3 capacity offerings`"):
        offerings.find_offering(c, q, OFF_A)


# --------------------------------------------------------------------------- purchase / describe


def test_purchase_sends_platform_and_project_tag(ec2):
    c, stub = ec2
    stub.add_response(
        "purchase_capacity_block",
        {"CapacityReservation": reservation(state="payment-pending")},
        {"CapacityBlockOfferingId": OFF_A, "InstancePlatform": "Linux/UNIX",
         "TagSpecifications": [{"ResourceType": "capacity-reservation",
                                "Tags": [{"Key": "Project", "Value": "kimi-k3"}]}]},
    )
    r = offerings.purchase_block(c, OFF_A)
    assert r.reservation_id == RID and r.state == "payment-pending"
    assert ("Project", "kimi-k3") in r.tags


def test_ids_are_validated_before_any_call(ec2):
    c, _ = ec2  # no responses queued: a call would raise UnStubbedResponseError
    with pytest.raises(UserError, match="cb- followed by 17 hex"):
        offerings.purchase_block(c, "cb-notanid")
    with pytest.raises(UserError, match="cr- followed by 17 hex"):
        status.describe_reservation(c, "cr-123")


def test_reservation_times_and_usage(ec2):
    c, stub = ec2
    stub.add_response("describe_capacity_reservations",
                      {"CapacityReservations": [reservation(state="active", total=4, available=1,
                                                            start=datetime(2026, 5, 31, 11, 30, tzinfo=UTC))]},
                      {"CapacityReservationIds": [RID]})
    r = status.describe_reservation(c, RID)
    assert (r.total_instances, r.in_use, r.available_instances) == (4, 3, 1)
    assert r.time_to_start(NOW) == -timedelta(hours=20, minutes=30)
    assert r.time_to_end(NOW) == timedelta(days=6, hours=3, minutes=30)
    assert r.availability_zone_id == "use1-az4" and r.capacity_block_id == BLOCK_ID


@pytest.mark.parametrize("code,message,expected", [
    ("InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{RID}' does not exist",
     "capacity reservation not found in us-east-1"),
    ("InvalidCapacityReservationId.Malformed", "Invalid id", "malformed capacity reservation id"),
    ("UnauthorizedOperation", "You are not authorized to perform this operation. Encoded authorization failure message: " + "x" * 500,
     "AWS denied ec2:DescribeCapacityReservations in us-east-1 (UnauthorizedOperation)"),
    ("AuthFailure", "AWS was not able to validate the provided access credentials", "AWS rejected the credentials (AuthFailure)"),
    ("RequestLimitExceeded", "Request limit exceeded.", "AWS error RequestLimitExceeded from DescribeCapacityReservations in us-east-1"),
])
def test_client_errors_become_one_line_user_errors(ec2, code, message, expected):
    c, stub = ec2
    stub.add_client_error("describe_capacity_reservations", service_error_code=code, service_message=message,
                          http_status_code=400, expected_params={"CapacityReservationIds": [RID]})
    with pytest.raises(UserError) as info:
        status.describe_reservation(c, RID)
    text = str(info.value)
    assert expected in text
    assert "\n" not in text and len(text) < 300


def test_transport_errors_become_user_errors():
    assert "no AWS credentials found" in str(capacity_aws.translate_aws_error(NoCredentialsError()))
    assert "pass --region" in str(capacity_aws.translate_aws_error(NoRegionError()))
    err = capacity_aws.translate_aws_error(EndpointConnectionError(endpoint_url="https://ec2.mars-1.amazonaws.com/"), "mars-1")
    assert "cannot reach AWS in mars-1" in str(err) and "ec2.mars-1.amazonaws.com" in str(err)


def test_unreachable_endpoint_through_a_real_client():
    c = client("ec2", endpoint_url="http://127.0.0.1:9", config=Config(retries={"total_max_attempts": 1}, connect_timeout=2))
    with pytest.raises(UserError, match="cannot reach AWS in us-east-1"):
        status.describe_reservation(c, RID)


def test_list_keeps_only_capacity_blocks_across_pages(ec2):
    c, stub = ec2
    odcr = reservation("cr-0abcdef0123456789", rtype="default", itype="m7i.large", block=None)
    later = reservation("cr-0bbbbbbbbbbbbbbbb", start=datetime(2026, 7, 1, 11, 30, tzinfo=UTC))
    stub.add_response("describe_capacity_reservations",
                      {"CapacityReservations": [later, odcr], "NextToken": "t2"}, {})
    stub.add_response("describe_capacity_reservations",
                      {"CapacityReservations": [reservation()]}, {"NextToken": "t2"})
    found = status.list_capacity_blocks(c)
    assert [r.reservation_id for r in found] == [RID, "cr-0bbbbbbbbbbbbbbbb"]


def test_status_adds_block_health_when_the_model_has_it(ec2):
    c, stub = ec2
    assert status.supports_block_status(c)  # botocore installed here has DescribeCapacityBlockStatus
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation()]},
                      {"CapacityReservationIds": [RID]})
    stub.add_response("describe_capacity_block_status",
                      {"CapacityBlockStatuses": [{"CapacityBlockId": BLOCK_ID, "InterconnectStatus": "ok",
                                                  "TotalCapacity": 2, "TotalAvailableCapacity": 2,
                                                  "TotalUnavailableCapacity": 0}]},
                      {"CapacityBlockIds": [BLOCK_ID]})
    (view,) = status.reservation_status(c, RID)
    assert view.block == status.BlockStatus(BLOCK_ID, "ok", 2, 2, 0)


def test_status_without_block_status_operation_or_permission(ec2, monkeypatch):
    c, stub = ec2
    stub.add_client_error("describe_capacity_block_status", "UnauthorizedOperation", "no",
                          expected_params={"CapacityBlockIds": [BLOCK_ID]})
    assert status.block_statuses(c, [BLOCK_ID]) == {}
    monkeypatch.setattr(status, "supports_block_status", lambda _c: False)
    assert status.block_statuses(c, [BLOCK_ID]) == {}  # and no call (nothing queued)


# --------------------------------------------------------------------------- quotas


def test_read_p_quota(quotas):
    c, stub = quotas
    stub.add_response("get_service_quota",
                      {"Quota": {"ServiceCode": "ec2", "QuotaCode": "L-417A185B",
                                 "QuotaName": "Running On-Demand P instances", "Value": 384.0, "Unit": "None"}},
                      {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    assert preflight.read_vcpu_quota(c, "p6-b300.48xlarge") == preflight.QuotaReading("L-417A185B", "Running On-Demand P instances", 384.0)


def test_quota_read_failure_is_reported_not_raised(quotas):
    c, stub = quotas
    stub.add_client_error("get_service_quota", "AccessDeniedException", "User is not authorized",
                          expected_params={"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    q = preflight.read_vcpu_quota(c, "p6-b300.48xlarge")
    assert q.value is None and "servicequotas:GetServiceQuota" in q.error
    assert preflight.read_vcpu_quota(c, "g6e.48xlarge").error.startswith("no vCPU quota code known")


# --------------------------------------------------------------------------- preflight (pure)


def evaluate(res=None, **kw):
    args = dict(instance_type="p6-b300.48xlarge", region=REGION, nodes_required=2, now=NOW,
                quota=preflight.QuotaReading("L-417A185B", "Running On-Demand P instances", 384.0), vcpus_per_node=192)
    args.update(kw)
    return {c.code: c for c in preflight.evaluate_preflight(CapacityBlockFacts.from_ec2(res or reservation()), **args)}


def test_healthy_scheduled_block_is_all_ok():
    checks = evaluate()
    assert {c.level for c in checks.values()} == {"OK"}
    assert "starts in 9d 3h" in checks["window"].message
    assert "us-east-1a (use1-az4)" in checks["node group subnets"].message
    assert "does not say whether Capacity Block instances count" in checks["vCPU quota"].message


@pytest.mark.parametrize("state,level", [
    ("scheduled", "OK"), ("active", "OK"), ("payment-pending", "WARN"), ("payment-failed", "FAIL"),
    ("expired", "WARN"), ("cancelled", "FAIL"), ("failed", "FAIL"),
])
def test_state_levels(state, level):
    assert evaluate(reservation(state=state))["state"].level == level


@pytest.mark.parametrize("res,kw,name", [
    (reservation(itype="p5en.48xlarge"), {}, "instance type"),
    (reservation(az="us-west-2a"), {}, "availability zone"),
    (reservation(az="us-east-12a"), {}, "availability zone"),
    (reservation(total=1, available=1), {}, "instance count"),
    (reservation(rtype="default"), {}, "reservation"),
    (reservation(platform="Windows"), {}, "platform"),
])
def test_mismatches_fail(res, kw, name):
    checks = evaluate(res, **kw)
    assert checks[name].level == "FAIL", checks[name]


def test_local_zone_belongs_to_its_region():
    assert evaluate(reservation(az="us-east-1-dfw-2a"))["availability zone"].level == "OK"


def test_ending_within_one_hour_warns_that_the_group_stays_at_zero_and_just_over_warns_about_usable_time():
    start = NOW - timedelta(days=7) + timedelta(minutes=59)
    soon = evaluate(reservation(state="active", start=start, available=0))
    assert soon["window"].level == "WARN" and "ends in 59m" in soon["window"].message and "kept at 0 nodes" in soon["window"].message
    later = evaluate(reservation(state="active", start=start + timedelta(minutes=2), available=0))
    assert later["window"].level == "WARN" and "usable time" in later["window"].message
    ended = evaluate(reservation(state="active", start=NOW - timedelta(days=8)))
    assert ended["window"].level == "WARN" and "ended" in ended["window"].message


def test_active_block_with_too_few_free_instances_warns():
    checks = evaluate(reservation(state="active", start=NOW - timedelta(days=1), total=2, available=1))
    assert checks["free instances"].level == "WARN" and "1 in use" in checks["free instances"].message


def test_quota_levels():
    low = evaluate(quota=preflight.QuotaReading("L-417A185B", "Running On-Demand P instances", 192.0))["vCPU quota"]
    assert low.level == "WARN" and "below 2 x 192 = 384" in low.message
    unread = evaluate(quota=preflight.QuotaReading("L-417A185B", "x", None, "AWS denied servicequotas:GetServiceQuota"))["vCPU quota"]
    assert unread.level == "WARN" and "could not read" in unread.message
    assert evaluate(vcpus_per_node=None)["vCPU quota"].level == "WARN"


def test_impaired_interconnect_warns():
    checks = evaluate(block=status.BlockStatus(BLOCK_ID, "impaired", 2, 1, 1))
    assert checks["interconnect"].level == "WARN" and checks["capacity health"].level == "WARN"


# --------------------------------------------------------------------------- preflight (with AWS)


def test_run_preflight_go(ec2, quotas):
    c, stub = ec2
    q, qstub = quotas
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation()]},
                      {"CapacityReservationIds": [RID]})
    stub.add_response("describe_capacity_block_status",
                      {"CapacityBlockStatuses": [{"CapacityBlockId": BLOCK_ID, "InterconnectStatus": "insufficient-data",
                                                  "TotalCapacity": 2, "TotalAvailableCapacity": 2, "TotalUnavailableCapacity": 0}]},
                      {"CapacityBlockIds": [BLOCK_ID]})
    qstub.add_response("get_service_quota", {"Quota": {"QuotaCode": "L-417A185B", "Value": 768.0}},
                       {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    report = preflight.run_preflight(c, q, reservation_id=RID, instance_type="p6-b300.48xlarge", region=REGION,
                               nodes_required=2, now=NOW, vcpus_per_node=192)
    assert report.go and report.count("FAIL") == 0 and report.count("WARN") == 0


def test_run_preflight_missing_reservation_is_a_fail_line(ec2):
    c, stub = ec2
    stub.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound",
                          f"The capacity reservation ID '{RID}' does not exist",
                          expected_params={"CapacityReservationIds": [RID]})
    report = preflight.run_preflight(c, None, reservation_id=RID, instance_type="p6-b300.48xlarge", region=REGION,
                               nodes_required=1, now=NOW)
    assert not report.go and report.checks[0].message == f"{RID} does not exist in us-east-1 for this account."


def test_run_preflight_without_or_with_bad_id_makes_no_call(ec2):
    c, _ = ec2
    for rid, text in (("", "sets no kimi-k3:capacityReservationId"), ("cr-xyz", "not a reservation id")):
        report = preflight.run_preflight(c, None, reservation_id=rid, instance_type="p6-b300.48xlarge",
                                   region=REGION, nodes_required=1, now=NOW, terms=stack_terms.CAPACITY_BLOCK)
        assert not report.go and text in report.checks[0].message


def test_run_preflight_access_denied_raises_user_error(ec2):
    c, stub = ec2
    stub.add_client_error("describe_capacity_reservations", "UnauthorizedOperation", "You are not authorized",
                          expected_params={"CapacityReservationIds": [RID]})
    with pytest.raises(UserError, match="AWS denied ec2:DescribeCapacityReservations"):
        preflight.run_preflight(c, None, reservation_id=RID, instance_type="p6-b300.48xlarge", region=REGION,
                          nodes_required=1, now=NOW)
