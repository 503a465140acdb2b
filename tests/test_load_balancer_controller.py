"""LoadBalancerController: the official chart, pinned, with its own Pod Identity role and the official IAM policy."""

from __future__ import annotations

import json
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import pytest

from kimi_k3 import offline
from kimi_k3.addons.load_balancer_controller import IMAGE_TAGS, LoadBalancerController, LoadBalancerControllerArgs, controller_values
from kimi_k3.core.catalog import AWS_LOAD_BALANCER_CONTROLLER_CHART
from kimi_k3.core.labels import SYSTEM_NODE_LABELS
from tests.chart_values import chart_defaults, unknown_keys, values_copy_version
from tests.conftest import NOW
from tests.refusals import assert_refused_before_declaring

POLICY_FILE = Path(__file__).resolve().parent.parent / "components" / "data" / "aws-load-balancer-controller-iam-policy.json"
CHART_NAME = "aws-load-balancer-controller"
RELEASE = "kubernetes:helm.sh/v3:Release"
VPC_ID = "vpc-0a1b2c3d4e5f60718"


def _engine() -> offline.OfflineEngine:
    return offline.OfflineEngine(
        now=NOW,
        region="us-east-1",
        reservation=offline.ReservationFixture(id="cr-0a1b2c3d4e5f60718", availability_zone="us-east-1a", instance_count=2, start=NOW),
    )


def _args(**changes) -> LoadBalancerControllerArgs:
    base = dict(cluster_name="kimi-k3-dev", region="us-east-1", vpc_id=VPC_ID, tags={"project": "kimi-k3"})
    base.update(changes)
    return LoadBalancerControllerArgs(**base)


def _run(args: LoadBalancerControllerArgs | None = None):
    """Run the component with an explicit Kubernetes provider; return (result, component, provider)."""
    built: dict = {}

    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        built["provider"] = provider
        built["lbc"] = LoadBalancerController(
            "lbc", args or _args(), opts=pulumi.ResourceOptions(providers={"kubernetes": provider})
        )

    result = _engine().run(program)
    return result, built["lbc"], built["provider"]


@pytest.fixture(scope="module")
def run():
    return _run()


def test_release_installs_the_pinned_official_chart_into_kube_system(run):
    result, _, _ = run
    release = result.one(RELEASE, "lbc-release").plain_inputs
    chart, repo, version = AWS_LOAD_BALANCER_CONTROLLER_CHART.name, AWS_LOAD_BALANCER_CONTROLLER_CHART.repository, AWS_LOAD_BALANCER_CONTROLLER_CHART.version
    assert (release["chart"], release["repositoryOpts"]["repo"], release["version"]) == (chart, repo, version)
    assert (chart, repo, version) == (CHART_NAME, "https://aws.github.io/eks-charts", "3.5.0")
    assert release["namespace"] == "kube-system"
    assert release["name"] == "aws-load-balancer-controller"


def test_values_make_the_controller_independent_of_imds_and_keep_it_on_system_nodes(run):
    result, _, _ = run
    values = result.one(RELEASE, "lbc-release").plain_inputs["values"]
    assert (values["clusterName"], values["region"], values["vpcId"]) == ("kimi-k3-dev", "us-east-1", VPC_ID)
    assert values["serviceAccount"] == {"create": True, "name": "aws-load-balancer-controller"}
    assert values["replicaCount"] == 2
    assert values["nodeSelector"] == dict(SYSTEM_NODE_LABELS)
    assert values["priorityClassName"] == "system-cluster-critical"
    assert values["enableServiceMutatorWebhook"] is False
    assert values["image"] == {"repository": "public.ecr.aws/eks/aws-load-balancer-controller", "tag": "v3.5.0"}
    assert values["defaultTags"] == {"project": "kimi-k3"}


def test_every_value_we_set_exists_in_the_chart_defaults(run):
    result, _, _ = run
    assert values_copy_version(CHART_NAME) == AWS_LOAD_BALANCER_CONTROLLER_CHART.version
    values = result.one(RELEASE, "lbc-release").plain_inputs["values"]
    assert unknown_keys(values, chart_defaults(CHART_NAME)) == []


def test_pinned_image_is_the_charts_own_default_for_that_version():
    defaults = chart_defaults(CHART_NAME)
    assert IMAGE_TAGS[AWS_LOAD_BALANCER_CONTROLLER_CHART.version] == defaults["image"]["tag"]
    assert defaults["image"]["repository"] == "public.ecr.aws/eks/aws-load-balancer-controller"


def test_the_key_checker_catches_a_misspelt_value():
    values = controller_values(
        _args(extra_values={"nodeSelectr": {"a": "b"}, "serviceAccount": {"anotations": {}}, "podAnnotations": {"any": "x"}}),
        "v3.5.0",
    )
    assert sorted(unknown_keys(values, chart_defaults(CHART_NAME))) == ["nodeSelectr", "serviceAccount.anotations"]


def test_extra_values_are_deep_merged_over_ours():
    values = controller_values(_args(extra_values={"serviceAccount": {"annotations": {"a": "b"}}, "replicaCount": 3}), "v3.5.0")
    assert values["serviceAccount"] == {"create": True, "name": "aws-load-balancer-controller", "annotations": {"a": "b"}}
    assert values["replicaCount"] == 3
    assert values["vpcId"] == VPC_ID


def test_role_carries_the_vendored_official_iam_policy(run):
    result, _, _ = run
    policies = result.by_type("aws:iam/rolePolicy:RolePolicy")
    assert len(policies) == 1
    attached = json.loads(policies[0].plain_inputs["policy"])
    assert attached == json.loads(POLICY_FILE.read_text())
    actions = {a for s in attached["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert {"elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:RegisterTargets", "ec2:DescribeSubnets"} <= actions
    trust = json.loads(result.one("aws:iam/role:Role", "lbc-identity-role").plain_inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}


IAM_POLICY_SHA256_BY_CHART = {"3.5.0": "16f232c9d9f79366fe949c4550ad517a202380058a9e48d45a4e215044a20a6a"}
"""sha256 of kubernetes-sigs/aws-load-balancer-controller ``docs/install/iam_policy.json`` at the tag of each chart version
(chart 3.5.0 installs controller v3.5.0). Bump the chart in the catalog and this file together."""


def test_the_vendored_iam_policy_is_the_one_of_the_pinned_chart_version():
    import hashlib

    from kimi_k3.core import catalog

    chart_version = catalog.AWS_LOAD_BALANCER_CONTROLLER_CHART[2]
    assert chart_version in IAM_POLICY_SHA256_BY_CHART, f"chart {chart_version}: vendor its controller's iam_policy.json and pin its sha256 here"
    assert hashlib.sha256(POLICY_FILE.read_bytes()).hexdigest() == IAM_POLICY_SHA256_BY_CHART[chart_version]
    actions = {a for s in json.loads(POLICY_FILE.read_text())["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    # what v3.5.0 needs beyond older revisions: subnet discovery by reachability, IPAM pools, rule priorities
    assert {"ec2:DescribeRouteTables", "ec2:DescribeIpamPools", "elasticloadbalancing:SetRulePriorities"} <= actions


def test_pod_identity_binds_the_controllers_service_account(run):
    result, _, _ = run
    association = result.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", "lbc-identity-association").plain_inputs
    assert (association["clusterName"], association["namespace"], association["serviceAccount"]) == (
        "kimi-k3-dev",
        "kube-system",
        "aws-load-balancer-controller",
    )
    values = result.one(RELEASE, "lbc-release").plain_inputs["values"]
    assert values["serviceAccount"]["name"] == association["serviceAccount"]


def test_release_waits_for_the_pod_identity_association(run):
    result, _, _ = run
    association = result.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", "lbc-identity-association")
    release = result.one(RELEASE, "lbc-release")
    assert association.urn in release.dependencies
    order = [r.urn for r in result.resources]
    assert order.index(association.urn) < order.index(release.urn)


def test_children_hang_under_the_component_and_the_release_uses_the_given_provider(run):
    result, component, provider = run
    root = result.one("kimi-k3:index:LoadBalancerController", "lbc")
    assert {r.name for r in result.children_of(root)} == {"lbc-identity", "lbc-release"}
    assert component.release._provider is provider


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"region": "us-east"}, "region"),
        ({"vpc_id": "subnet-0a1b2c3d"}, "vpc_id"),
        ({"cluster_name": " "}, "cluster_name"),
        ({"version": "3.5"}, "version"),
        ({"version": "9.9.9"}, "image_tag"),
        ({"image_tag": "latest"}, "image_tag"),
        ({"replicas": 0}, "replicas"),
        ({"extra_values": {"serviceAccount": {"name": "other"}}}, "serviceAccount"),
    ],
)
def test_bad_args_stop_before_anything_is_declared(changes, message):
    assert_refused_before_declaring(lambda: LoadBalancerController("lbc", _args(**changes)), message, engine=_engine())


def test_another_chart_version_needs_its_image_tag_and_then_pins_both():
    result, _, _ = _run(_args(version="3.6.0", image_tag="v3.6.0"))
    release = result.one(RELEASE, "lbc-release").plain_inputs
    assert release["version"] == "3.6.0"
    assert release["values"]["image"]["tag"] == "v3.6.0"
