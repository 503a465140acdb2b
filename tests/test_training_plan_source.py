"""The hyperpod stack's preview-time read of its training plan: boto3 DescribeTrainingPlan, checked with Stubber against botocore's model.

Under ``pulumi preview`` the platform calls :func:`stack_training_plan` once, before any
resource; these tests give it a real botocore SageMaker client whose calls Stubber checks
(operation, parameters, response shape), instead of the offline engine's stand-in.
"""

from __future__ import annotations

import pytest
from botocore.stub import Stubber

from kimi_k3 import offline
from kimi_k3.errors import UserError
from kimi_k3.hyperpod import training_plan_check
from kimi_k3.hyperpod.training_plan_check import stack_training_plan
from kimi_k3.offline.sagemaker import OfflineSageMaker
from kimi_k3.stack import settings
from kimi_k3.stack.platform import Platform
from tests.aws_stubs import client as aws_client
from tests.aws_stubs import installed_client
from tests.conftest import NOW

STACK = settings.load_stack("hyperpod")
PLAN = offline.default_training_plan(STACK, NOW)


def test_the_default_reader_is_boto3_for_the_stacks_region(monkeypatch):
    client = aws_client("sagemaker")
    with installed_client(monkeypatch, training_plan_check, client) as (stub, regions):
        stub.add_response("describe_training_plan", PLAN.describe_response(), {"TrainingPlanName": PLAN.arn})
        assert stack_training_plan(PLAN.arn, "us-east-1") == PLAN
        stub.assert_no_pending_responses()
    assert regions == ["us-east-1"]


def test_the_offline_engines_answer_has_the_shape_of_the_real_model():
    """What the engine's stand-in client returns is a DescribeTrainingPlan response botocore accepts (Stubber validates it)."""
    answers = offline.OfflineEngine(now=NOW, training_plan=PLAN).training_plans
    response = OfflineSageMaker(answers, "us-east-1").describe_training_plan(TrainingPlanName=PLAN.arn)
    client = aws_client("sagemaker")
    with Stubber(client) as stub:
        stub.add_response("describe_training_plan", response, {"TrainingPlanName": PLAN.arn})
        assert training_plan_check.read_training_plan(client, PLAN.arn) == PLAN


def platform_reading_through(client, engine: offline.OfflineEngine) -> offline.OfflineEngine:
    """The hyperpod stack's Platform under ``engine``, its plan read through ``client`` (as under pulumi preview)."""

    def program() -> None:
        with training_plan_check.answered_by(lambda region: client):
            Platform("kimi-k3", STACK, now=NOW)

    values, secret_keys = settings.read_stack_file("hyperpod")
    engine.run(program, config=values, secret_keys=secret_keys, stack="hyperpod")
    return engine


def test_the_stack_reads_its_plan_once_before_declaring_anything():
    client = aws_client("sagemaker")
    with Stubber(client) as stub:
        stub.add_response("describe_training_plan", PLAN.describe_response(), {"TrainingPlanName": STACK.hyperpod.training_plan})
        # The engine knows the account's plan too (its create-time rules look the instance group's plan up, as AWS does).
        engine = platform_reading_through(client, offline.OfflineEngine(now=NOW, region="us-east-1", training_plan=PLAN))
        stub.assert_no_pending_responses()
    (group,) = next(r for r in engine.resources if r.type == "aws-native:sagemaker:Cluster").plain_inputs["instanceGroups"]
    assert group["trainingPlanArn"] == PLAN.arn


@pytest.mark.parametrize("code,message,expected", [
    ("ResourceNotFound", "Training plan kimi-k3-p6 not found", "not found in us-east-1 (Training plan kimi-k3-p6 not found)"),
    ("AccessDeniedException", "not authorized", "AWS denied sagemaker:DescribeTrainingPlan in us-east-1 (AccessDeniedException)"),
])
def test_a_plan_that_cannot_be_read_stops_the_stack_in_one_line_naming_the_key(code, message, expected):
    client = aws_client("sagemaker")
    engine = offline.OfflineEngine(now=NOW, region="us-east-1")
    with Stubber(client) as stub, pytest.raises(UserError) as error:
        stub.add_client_error("describe_training_plan", code, message, expected_params={"TrainingPlanName": STACK.hyperpod.training_plan})
        platform_reading_through(client, engine)
    text = str(error.value)
    assert "\n" not in text and text.startswith(f"kimi-k3:trainingPlanArn {STACK.hyperpod.training_plan}: ") and expected in text
    assert engine.resources == []
