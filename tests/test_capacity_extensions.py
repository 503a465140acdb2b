"""kimi_k3.capacity.extensions: the extension rules (pure, pinned clock) and the AWS calls (Stubber, real models)."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from kimi_k3.capacity import extensions as ext
from kimi_k3.capacity.assessment import FAIL, OK, WARN
from kimi_k3.capacity.facts import CapacityBlockFacts
from kimi_k3.errors import UserError
from tests.aws_stubs import autoscaling, ec2  # noqa: F401 - fixtures
from tests.capacity_builders import EXT_END as END
from tests.capacity_builders import EXT_NOW as NOW
from tests.capacity_builders import EXT_START as START
from tests.capacity_builders import OFFER, RID
from tests.capacity_builders import api_extension as extension
from tests.capacity_builders import api_extension_offering as offering

ASG = "eks-gpu-ng-12c9d3e4-5f6a-7b8c-9d0e-1f2a3b4c5d6e"


def reservation(state="active", end=END, rtype="capacity-block") -> CapacityBlockFacts:
    return CapacityBlockFacts(
        reservation_id=RID, availability_zone="us-east-1a", instance_type="p6-b300.48xlarge", instance_count=2, state=state,
        start=START, end=end, availability_zone_id="use1-az4", instance_platform="Linux/UNIX", reservation_type=rtype,
    )


# --------------------------------------------------------------------------- rules


@pytest.mark.parametrize("state", ["active", "scheduled"])
def test_active_and_scheduled_blocks_can_be_extended(state):
    ext.check_extendable(reservation(state=state), NOW)


@pytest.mark.parametrize("state", ["expired", "payment-pending", "payment-failed", "cancelled"])
def test_other_states_cannot(state):
    with pytest.raises(UserError, match=f"{RID} is {state}; only active or scheduled"):
        ext.check_extendable(reservation(state=state), NOW)


def test_window_opens_56_days_and_closes_1_hour_before_the_end():
    ext.check_extendable(reservation(end=NOW + timedelta(days=56)), NOW)
    ext.check_extendable(reservation(end=NOW + timedelta(hours=1)), NOW)
    with pytest.raises(UserError, match="ends 2027-01-28 09:01 UTC: extensions open 56 days before the end, on 2026-12-03 09:01 UTC"):
        ext.check_extendable(reservation(end=NOW + timedelta(days=56, minutes=1)), NOW)
    with pytest.raises(UserError, match="extensions close 1 hour before the end"):
        ext.check_extendable(reservation(end=NOW + timedelta(minutes=59)), NOW)


def test_only_capacity_blocks():
    with pytest.raises(UserError, match="is a default reservation, not a Capacity Block"):
        ext.check_extendable(reservation(rtype="default"), NOW)


@pytest.mark.parametrize("days,ok", [(1, True), (14, True), (15, False), (21, True), (22, False), (182, True), (189, False), (0, False)])
def test_extension_lengths(days, ok):
    if ok:
        assert ext.validate_days(days) == days
    else:
        with pytest.raises(UserError, match=f"--days {days} is not accepted; extensions last 1-14 days, or 21-182"):
            ext.validate_days(days)


# --------------------------------------------------------------------------- AWS calls


def test_offerings_paginate_and_sort_cheapest_first(ec2):
    c, stub = ec2
    params = {"CapacityReservationId": RID, "CapacityBlockExtensionDurationHours": 168}
    stub.add_response("describe_capacity_block_extension_offerings",
                      {"CapacityBlockExtensionOfferings": [offering("cbe-0bbbbbbbbbbbbbbbb", fee="1600000.00")], "NextToken": "t"}, params)
    stub.add_response("describe_capacity_block_extension_offerings",
                      {"CapacityBlockExtensionOfferings": [offering()]}, {**params, "NextToken": "t"})
    found = ext.find_extension_offerings(c, RID, 7)
    assert [o.offering_id for o in found] == [OFFER, "cbe-0bbbbbbbbbbbbbbbb"]
    assert found[0].extension_end == END + timedelta(days=7) and found[0].upfront_fee == Decimal("1572480.00")


def test_a_vanished_offering_is_a_user_error(ec2):
    c, stub = ec2
    stub.add_response("describe_capacity_block_extension_offerings", {"CapacityBlockExtensionOfferings": []},
                      {"CapacityReservationId": RID, "CapacityBlockExtensionDurationHours": 48})
    with pytest.raises(UserError, match=f"extension offering {OFFER} is not among the current 2-day offerings.*not guaranteed"):
        ext.find_extension_offering(c, RID, 2, OFFER)


def test_purchase_keeps_the_reservation_id(ec2):
    c, stub = ec2
    stub.add_response("purchase_capacity_block_extension", {"CapacityBlockExtensions": [extension()]},
                      {"CapacityBlockExtensionOfferingId": OFFER, "CapacityReservationId": RID})
    bought = ext.purchase_extension(c, RID, OFFER)
    assert bought.reservation_id == RID and bought.status == "payment-pending" and bought.end == END + timedelta(days=7)


@pytest.mark.parametrize("code,expected", [
    ("UnauthorizedOperation", "AWS denied ec2:PurchaseCapacityBlockExtension in us-east-1 (UnauthorizedOperation)"),
    ("InvalidCapacityReservationId.NotFound", "capacity reservation not found in us-east-1"),
    ("InsufficientCapacity", "AWS error InsufficientCapacity from PurchaseCapacityBlockExtension in us-east-1"),
])
def test_purchase_errors_are_one_line(ec2, code, expected):
    c, stub = ec2
    stub.add_client_error("purchase_capacity_block_extension", code, "details",
                          expected_params={"CapacityBlockExtensionOfferingId": OFFER, "CapacityReservationId": RID})
    with pytest.raises(UserError) as info:
        ext.purchase_extension(c, RID, OFFER)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_history_newest_first(ec2):
    c, stub = ec2
    old = extension("payment-succeeded", purchased=NOW - timedelta(days=3), days=1, oid="cbe-0aaaaaaaaaaaaaaaa")
    stub.add_response("describe_capacity_block_extension_history",
                      {"CapacityBlockExtensions": [old, extension()]}, {"CapacityReservationIds": [RID]})
    history = ext.extension_history(c, RID)
    assert [e.offering_id for e in history] == [OFFER, "cbe-0aaaaaaaaaaaaaaaa"]


# --------------------------------------------------------------------------- status line


def test_status_line_for_pending_failed_and_done():
    pending = ext.extension_status([ext.Extension.from_api(extension())], NOW)
    assert pending.level == WARN
    assert pending.message == ("7-day extension to 2026-12-15 11:30 UTC is payment-pending (fails if not paid by "
                               "2026-12-03 19:00 UTC, 600 min from now); the block still ends at 2026-12-08 11:30 UTC.")
    failed = ext.extension_status([ext.Extension.from_api(extension("payment-failed"))], NOW)
    assert failed.level == FAIL and "failed (payment-failed); the block still ends at 2026-12-08 11:30 UTC" in failed.message
    done = ext.extension_status([ext.Extension.from_api(extension("payment-succeeded"))], NOW)
    assert done.level == OK and done.message.endswith("the block now ends at 2026-12-15 11:30 UTC.")
    assert ext.extension_status([], NOW) is None


def test_status_reports_the_newest_extension():
    older_failed = ext.Extension.from_api(extension("payment-failed", purchased=NOW - timedelta(days=2)))
    newer_ok = ext.Extension.from_api(extension("payment-succeeded", purchased=NOW - timedelta(hours=1)))
    assert ext.extension_status([older_failed, newer_ok], NOW).level == OK


# --------------------------------------------------------------------------- EKS scale-down action


def scheduled(at: datetime) -> dict:
    return {"AutoScalingGroupName": ASG, "ScheduledActionName": ext.EKS_SCALEDOWN_ACTION,
            "ScheduledActionARN": f"arn:aws:autoscaling:us-east-1:123456789012:scheduledUpdateGroupAction:1:autoScalingGroupName/{ASG}:scheduledActionName/x",
            "Time": at, "StartTime": at, "MinSize": 0, "MaxSize": 2, "DesiredCapacity": 0}


def test_scaledown_still_at_the_old_end_after_an_extension_fails(autoscaling):
    c, stub = autoscaling
    stub.add_response("describe_scheduled_actions", {"ScheduledUpdateGroupActions": [scheduled(END - timedelta(minutes=40))]},
                      {"AutoScalingGroupName": ASG})
    check = ext.check_scaledown_action(c, ASG, END + timedelta(days=7), NOW)
    assert check.level == FAIL and "before the block's end - 40 min (2026-12-15 10:50 UTC)" in check.message


def test_scaledown_moved_with_the_end_is_ok(autoscaling):
    c, stub = autoscaling
    stub.add_response("describe_scheduled_actions", {"ScheduledUpdateGroupActions": [scheduled(END + timedelta(days=7, minutes=-40))]},
                      {"AutoScalingGroupName": ASG})
    assert ext.check_scaledown_action(c, ASG, END + timedelta(days=7), NOW).level == OK


def test_missing_scaledown_action_warns(autoscaling):
    c, stub = autoscaling
    stub.add_response("describe_scheduled_actions", {"ScheduledUpdateGroupActions": []}, {"AutoScalingGroupName": ASG})
    assert ext.check_scaledown_action(c, ASG, END, NOW).level == WARN


def test_scaledown_check_denied_names_autoscaling(autoscaling):
    c, stub = autoscaling
    stub.add_client_error("describe_scheduled_actions", "AccessDenied", "no", expected_params={"AutoScalingGroupName": ASG})
    with pytest.raises(UserError, match="AWS denied autoscaling:DescribeScheduledActions in us-east-1"):
        ext.check_scaledown_action(c, ASG, END, NOW)
