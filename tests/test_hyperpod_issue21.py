"""HyperPod (issue 21, point 7): creation before the training plan starts, EFA, add-on versions for the cluster.

* The stack creates the HyperPod cluster about a day before its plan starts. A plan's instance
  groups are provisioned only when it becomes Active at its start (CreateTrainingPlan API
  reference); the standard provisioning model fails a create it cannot fully provision, and the
  ``AWS::SageMaker::Cluster`` create handler gives up after 720 minutes (its schema's
  ``handlers.create.timeoutInMinutes``, vendored by pulumi-aws-native). So the cluster is
  declared with ``NodeProvisioningMode: Continuous`` (sagemaker-hyperpod-scaling-eks), and the
  standard model is refused when the create comes more than 12 hours before the start.
* An EFA instance type (the catalog's ``efa_interfaces``) gets a security group allowing all
  traffic from and to itself (EC2 user guide, efa-start), in the cluster's VPC config.
* The Inference Operator's add-on and its dependency add-ons resolve to EKS's default version for
  the cluster's Kubernetes version (``aws.eks.get_addon_version``, ``most_recent=False``), as the
  cluster's own add-ons do, unless pinned.
"""

from __future__ import annotations

from datetime import timedelta

import pulumi
import pytest

from kimi_k3 import offline
from kimi_k3.errors import ComponentInputError, UserError
from kimi_k3.hyperpod import cluster as hc
from kimi_k3.hyperpod import inference_operator as io
from kimi_k3.hyperpod import rules as hyperpod_rules
from tests.hyperpod_builders import NOW, PLAN
from tests.test_hyperpod_cluster import build

CLUSTER = "aws-native:sagemaker:Cluster"
GET_ADDON_VERSION = "aws:eks/getAddonVersion:getAddonVersion"


@pytest.mark.parametrize(("mode", "lead", "refused"), [
    (None, timedelta(hours=24), True),  # the stack's case with the standard model: the create times out
    (None, timedelta(hours=11), False),  # inside the handler's 12 hours
    (hyperpod_rules.CONTINUOUS, timedelta(days=7), False),
])
def test_the_standard_model_is_refused_more_than_12_hours_before_the_plan(mode, lead, refused):
    start = NOW + lead
    if not refused:
        hyperpod_rules.check_provisioning_mode(mode, start, NOW)
        return
    with pytest.raises(UserError, match="NodeProvisioningMode [(]standard[)] on a cluster created 24 h before its training plan starts") as err:
        hyperpod_rules.check_provisioning_mode(mode, start, NOW)
    assert "timeoutInMinutes 720" in str(err.value) and "use Continuous" in str(err.value)
    assert timedelta(minutes=720) == hyperpod_rules.CREATE_HANDLER_TIMEOUT


def test_the_cluster_is_declared_with_continuous_provisioning(hyperpod_plan):
    cluster = hyperpod_plan.one(CLUSTER).inputs
    assert cluster["nodeProvisioningMode"] == "Continuous"
    assert "minInstanceCount" not in cluster["instanceGroups"][0]  # not in aws-native 1.84.0's schema


def test_the_component_refuses_the_standard_model_a_day_before_the_plan():
    assert PLAN.start - NOW == timedelta(days=1)
    with pytest.raises(ComponentInputError, match=r"NodeProvisioningMode \(standard\) on a cluster created 24 h before"):
        build(node_provisioning_mode=None, now=NOW)
    assert build(node_provisioning_mode=None, now=PLAN.start - timedelta(hours=2)).one(CLUSTER).inputs.get("nodeProvisioningMode") is None


def test_an_efa_instance_type_gets_the_self_referencing_security_group(hyperpod_plan):
    assert hc.has_efa("ml.p6-b300.48xlarge") and not hc.has_efa("ml.m7i.xlarge")
    group = hyperpod_plan.one("aws:ec2/securityGroup:SecurityGroup", "kimi-k3-hyperpod-efa")
    rules = {r.inputs["type"]: r.inputs for r in hyperpod_plan.by_type("aws:ec2/securityGroupRule:SecurityGroupRule") if "-efa-" in r.name}
    assert set(rules) == {"ingress", "egress"}
    for rule in rules.values():
        assert (rule["protocol"], rule["fromPort"], rule["toPort"], rule["self"]) == ("-1", 0, 0, True)
        assert rule["securityGroupId"] == group.id
    assert group.id in hyperpod_plan.one(CLUSTER).inputs["vpcConfig"]["securityGroupIds"]
    assert group.inputs["vpcId"] == hyperpod_plan.outputs["vpcId"]


def test_an_efa_type_without_a_vpc_is_refused():
    with pytest.raises(ComponentInputError, match="vpc_id is required: ml.p6-b300.48xlarge has EFA"):
        build(vpc_id=None)


def test_the_operator_add_ons_resolve_for_the_clusters_kubernetes_version():
    engine = offline.OfflineEngine(now=NOW, region="us-east-1")

    def program() -> None:
        stand_in = pulumi.CustomResource("test:index:HyperPodClusterStandIn", "hp-cluster", {})
        io.HyperPodInferenceOperator("kimi-hp-inference", io.HyperPodInferenceOperatorArgs(
            eks_cluster_name="kimi-k3-hyperpod", hyperpod_cluster_arn="arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdef012345",
            oidc_provider_arn="arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/0123",
            oidc_issuer="oidc.eks.us-east-1.amazonaws.com/id/0123", region="us-east-1", account_id="123456789012",
            kubernetes_version="1.33", addon_versions={"metrics-server": "v0.8.0-eksbuild.1"}, depends_on=(stand_in,),
        ))

    result = engine.run(program)
    asked = {a["addonName"]: a for token, a in engine.invokes if token == GET_ADDON_VERSION}
    assert set(asked) == set(io.PINNED_ADDON_VERSIONS) - {"metrics-server"}  # a pinned one is not looked up
    assert all(a["kubernetesVersion"] == "1.33" and not a.get("mostRecent") for a in asked.values())
    addons = {r.inputs["addonName"]: r.inputs["addonVersion"] for r in result.by_type("aws:eks/addon:Addon")}
    assert addons["metrics-server"] == "v0.8.0-eksbuild.1"
    assert addons[io.ADDON] == "v1.0.0-eksbuild.1"  # the offline engine's stand-in for DescribeAddonVersions' default

