"""kimi_k3.HyperPodInferenceOperator under the offline engine: the add-on, its dependencies, roles, order."""

from __future__ import annotations

import json

import pulumi
import pytest

from kimi_k3 import offline
from kimi_k3.errors import UserError
from kimi_k3.hyperpod import inference_operator as hi
from kimi_k3.hyperpod.cluster import CHART_DIR
from kimi_k3.hyperpod.inference_operator import HyperPodInferenceOperator, HyperPodInferenceOperatorArgs
from tests.hyperpod_builders import NOW

REGION = "us-east-1"
ISSUER = "oidc.eks.us-east-1.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF"
PROVIDER_ARN = f"arn:aws:iam::123456789012:oidc-provider/{ISSUER}"
HP_ARN = "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdef012345"
ADDON_TYPE = "aws:eks/addon:Addon"


def build(**changes) -> offline.PlanResult:
    engine = offline.OfflineEngine(now=NOW, region=REGION)

    def program() -> None:
        stand_in = pulumi.CustomResource("test:index:HyperPodClusterStandIn", "hp-cluster", {})
        values = dict(eks_cluster_name="kimi-k3-hyperpod", hyperpod_cluster_arn=HP_ARN, oidc_provider_arn=PROVIDER_ARN, oidc_issuer=ISSUER,
                      region=REGION, account_id="123456789012", depends_on=(stand_in,), tags={"Project": "kimi-k3"})
        values.update(changes)
        HyperPodInferenceOperator("kimi-hp-inference", HyperPodInferenceOperatorArgs(**values))

    return engine.run(program)


@pytest.fixture(scope="module")
def plan() -> offline.PlanResult:
    return build(weights_bucket="acme-weights", weights_prefix="moonshotai/Kimi-K3/3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20/")


def addon(plan: offline.PlanResult, name: str) -> offline.RecordedResource:
    return next(r for r in plan.by_type(ADDON_TYPE) if r.plain_inputs["addonName"] == name)


def names_of(plan: offline.PlanResult, urns: list[str]) -> set[str]:
    by_urn = {r.urn: r.name for r in plan.resources}
    return {by_urn[u] for u in urns if u in by_urn}


def test_the_operator_is_the_eks_add_on_configured_as_aws_documents(plan):
    operator = addon(plan, "amazon-sagemaker-hyperpod-inference").plain_inputs
    assert operator["addonVersion"] == "v1.0.0-eksbuild.1" and operator["clusterName"] == "kimi-k3-hyperpod"
    config = json.loads(operator["configurationValues"])
    roles = {r.name: r.outputs["arn"] for r in plan.by_type("aws:iam/role:Role")}
    tls = next(r for r in plan.by_type("aws:s3/bucket:Bucket")).outputs["bucket"]
    assert config == {
        "executionRoleArn": roles["kimi-hp-inference-execution-role"],
        "tlsCertificateS3Bucket": tls,
        "hyperpodClusterArn": HP_ARN,
        "alb": {"enabled": True, "serviceAccount": {"create": True, "roleArn": roles["kimi-hp-inference-alb-role"]}},
        "keda": {"enabled": True, "auth": {"aws": {"irsa": {"enabled": True, "roleArn": roles["kimi-hp-inference-keda-role"]}}}},
    }


def test_the_add_ons_come_after_the_hyperpod_cluster_and_the_operator_after_its_dependencies(plan):
    operator = addon(plan, "amazon-sagemaker-hyperpod-inference")
    deps = names_of(plan, operator.dependencies)
    assert {"hp-cluster", "kimi-hp-inference-cert-manager", "kimi-hp-inference-aws-mountpoint-s3-csi-driver", "kimi-hp-inference-metrics-server"} <= deps
    for name in hi.DEPENDENCY_ADDONS:
        assert "hp-cluster" in names_of(plan, addon(plan, name).dependencies)


def test_the_execution_role_name_has_the_prefix_the_add_on_requires(plan):
    role = plan.one("aws:iam/role:Role", "kimi-hp-inference-execution-role").plain_inputs
    assert role["name"].startswith("SageMakerHyperPodInference")
    chart_rule = (CHART_DIR / "charts/inference-operator/templates/_validateRequiredValues.tpl").read_text()
    assert 'hasPrefix "SageMakerHyperPodInference"' in chart_rule  # the rule the prefix answers


@pytest.mark.parametrize("role,namespace,account", [
    ("kimi-hp-inference-execution-role", "hyperpod-inference-system", "hyperpod-inference-operator-controller-manager"),
    ("kimi-hp-inference-alb-role", "hyperpod-inference-system", "aws-load-balancer-controller"),
    ("kimi-hp-inference-keda-role", "hyperpod-inference-system", "keda-operator"),
    ("kimi-hp-inference-s3-csi-role", "kube-system", "s3-csi-driver-sa"),
])
def test_each_role_trusts_exactly_one_service_account(plan, role, namespace, account):
    trust = json.loads(plan.one("aws:iam/role:Role", role).plain_inputs["assumeRolePolicy"])
    federated = [s for s in trust["Statement"] if "Federated" in s["Principal"]]
    assert len(federated) == 1 and federated[0]["Principal"]["Federated"] == PROVIDER_ARN
    assert federated[0]["Condition"] == {"StringEquals": {f"{ISSUER}:aud": "sts.amazonaws.com", f"{ISSUER}:sub": f"system:serviceaccount:{namespace}:{account}"}}
    assert "*" not in json.dumps(federated[0]["Condition"])


def test_the_s3_csi_driver_only_reads_the_weights_prefix(plan):
    policy = json.loads(plan.one("aws:iam/rolePolicy:RolePolicy", "kimi-hp-inference-s3-csi-weights").plain_inputs["policy"])
    actions = {s["Action"] for s in policy["Statement"]}
    assert actions == {"s3:ListBucket", "s3:GetObject"}
    read = next(s for s in policy["Statement"] if s["Action"] == "s3:GetObject")
    assert read["Resource"] == "arn:aws:s3:::acme-weights/moonshotai/Kimi-K3/3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20/*"
    assert addon(plan, "aws-mountpoint-s3-csi-driver").plain_inputs["serviceAccountRoleArn"] == plan.one("aws:iam/role:Role", "kimi-hp-inference-s3-csi-role").outputs["arn"]


def test_hugging_face_weights_grant_the_s3_driver_nothing():
    result = build()
    assert not [r for r in result.by_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("s3-csi-weights")]


def test_the_operator_policy_is_scoped_to_the_region_account_and_tls_bucket(plan):
    statements = {s["Sid"]: s for s in json.loads(plan.one("aws:iam/rolePolicy:RolePolicy", "kimi-hp-inference-execution-policy").plain_inputs["policy"])["Statement"]}
    tls = next(r for r in plan.by_type("aws:s3/bucket:Bucket")).outputs["bucket"]
    assert statements["TlsBucketAccess"]["Resource"] == [f"arn:aws:s3:::{tls}", f"arn:aws:s3:::{tls}/*"]
    assert statements["PassOwnRoleToSageMaker"]["Resource"] == plan.one("aws:iam/role:Role", "kimi-hp-inference-execution-role").outputs["arn"]
    assert statements["SageMakerCreateTagged"]["Condition"]["StringEquals"]["aws:RequestTag/CreatedBy"] == "HyperPodInference"
    assert all(":*:*:" not in json.dumps(s.get("Resource", "")) for s in statements.values())


def test_the_alb_role_gets_the_official_controller_policy(plan):
    from kimi_k3.addons.load_balancer_controller import iam_policy_document

    assert plan.one("aws:iam/rolePolicy:RolePolicy", "kimi-hp-inference-alb-policy").plain_inputs["policy"] == iam_policy_document()


@pytest.mark.parametrize("changes,message", [
    ({"addon_versions": {"amazon-sagemaker-hyperpod-inference": "1.0.0"}}, "an EKS add-on version such as v1.0.0-eksbuild.1"),
    ({"addon_versions": {"karpenter": "v1.0.0-eksbuild.1"}}, "addon_versions key 'karpenter' is not accepted"),
    ({"execution_role_name": "kimi-inference"}, "starting with SageMakerHyperPodInference (the add-on refuses other names)"),
    ({"weights_bucket": "Acme_Weights"}, "weights_bucket='Acme_Weights' is not an S3 bucket name"),
])
def test_bad_args(changes, message):
    with pytest.raises(UserError) as error:
        build(**changes)
    assert message in str(error.value) and "\n" not in str(error.value)
