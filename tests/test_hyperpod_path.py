"""The HyperPod path composed in one program: cluster -> inference operator -> endpoint.

What a ``hyperpod`` stack will declare once the platform wires it (the order is the
behaviour a user relies on: HyperPod refuses a cluster without the dependencies chart,
the add-on needs the cluster's ARN, the endpoint needs the operator's CRD), and every
Kubernetes manifest of it checked like the EKS path's.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pytest

from components import offline
from components.hyperpod_cluster import HyperPodCluster, HyperPodClusterArgs
from components.hyperpod_inference import HyperPodInferenceOperator, HyperPodInferenceOperatorArgs
from components.hyperpod_rules import EksForHyperPod
from components.serving.contracts import ImageContract, ServingContract, WeightsContract
from components.serving.hyperpod import HyperPodInferenceEndpoint, HyperPodInferenceEndpointArgs
from tests import k8s_checks
from tests.test_hyperpod_cluster import EKS_ARN, NODE_SG, NOW, OVERRIDES, PLAN, REGION, SUBNET

REVISION = "3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20"
IMAGE = "vllm/vllm-openai@sha256:" + "a" * 64
ISSUER = "oidc.eks.us-east-1.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF"


@pytest.fixture(scope="module")
def path() -> offline.PlanResult:
    engine = offline.OfflineEngine(now=NOW, region=REGION, resource_overrides=OVERRIDES)

    def program() -> None:
        provider = k8s.Provider("eks-k8s", kubeconfig=pulumi.Output.secret("{}"))
        cluster = HyperPodCluster("kimi-k3", HyperPodClusterArgs(
            eks_cluster_arn=EKS_ARN, eks=EksForHyperPod("1.34", "API", "v1.20.4-eksbuild.1"), kubernetes_provider=provider,
            region=REGION, subnet_id=SUBNET, subnet_availability_zone="us-east-1a", security_group_ids=(NODE_SG,),
            training_plan=PLAN, instance_count=1, cluster_name="kimi-k3-hyperpod"))
        operator = HyperPodInferenceOperator("kimi-k3-inference", HyperPodInferenceOperatorArgs(
            eks_cluster_name="kimi-k3-hyperpod", hyperpod_cluster_arn=cluster.cluster_arn,
            oidc_provider_arn=f"arn:aws:iam::123456789012:oidc-provider/{ISSUER}", oidc_issuer=ISSUER,
            region=REGION, account_id="123456789012", depends_on=(cluster,)))
        contract = ServingContract(image=ImageContract.parse(IMAGE), weights=WeightsContract(revision=REVISION))
        endpoint = HyperPodInferenceEndpoint(
            "kimik3",
            HyperPodInferenceEndpointArgs(contract=contract, api_key_secret="kimik3-api-key"),
            opts=pulumi.ResourceOptions(depends_on=[operator.addon], providers={"kubernetes": provider}),
        )
        pulumi.export("endpointObject", endpoint.object_name)

    return engine.run(program)


def test_the_endpoint_comes_after_the_operator_which_comes_after_the_cluster(path):
    by_urn = {r.urn: r for r in path.resources}
    endpoint = path.one("kubernetes:inference.sagemaker.aws.amazon.com/v1:InferenceEndpointConfig")
    endpoint_parent = path.parent_of(endpoint)
    assert any(by_urn[u].type == "aws:eks/addon:Addon" for u in endpoint_parent.dependencies if u in by_urn)
    operator = next(r for r in path.by_type("aws:eks/addon:Addon") if r.plain_inputs["addonName"] == "amazon-sagemaker-hyperpod-inference")
    # depends_on a component waits for its children: the HyperPod cluster itself among them
    assert any(by_urn[u].type == "aws-native:sagemaker:Cluster" for u in operator.dependencies if u in by_urn)
    order = [r.type for r in path.resources]
    assert order.index("kubernetes:helm.sh/v3:Release") < order.index("aws-native:sagemaker:Cluster")


def test_every_manifest_passes_the_schemas_and_checkov(path, tmp_path):
    manifests = path.kubernetes_objects()
    assert [m["kind"] for m in manifests] == ["InferenceEndpointConfig"]
    for manifest in manifests:
        k8s_checks.validate_manifest(manifest, "1.34")
    report = k8s_checks.checkov_scan(k8s_checks.write_manifests(manifests, tmp_path / "hyperpod"))
    assert report["failed"] == [], [(c["check_id"], c["resource"]) for c in report["failed"]]
    assert sum(r.get("summary", {}).get("parsing_errors", 0) for r in report["raw"]) == 0


def test_no_resource_but_the_provider_holds_the_kubeconfig(path):
    holders = [r.name for r in path.resources if offline.contains_secret(r.inputs)]
    assert holders == ["eks-k8s"]
