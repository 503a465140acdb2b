"""kimi_k3.Cluster under the offline engine: security and layout properties, bad input."""

from __future__ import annotations

import json
from dataclasses import replace

import pulumi
import pytest

from kimi_k3 import offline
from kimi_k3.cluster.eks import CONTROL_PLANE_LOG_TYPES, MANAGED_ADDONS, Cluster, ClusterArgs, disable_creator_admin_bootstrap
from kimi_k3.core import labels
from kimi_k3.errors import UserError
from tests.conftest import NOW

ADMIN = "arn:aws:iam::123456789012:role/kimi-k3-admin"
CI = "arn:aws:iam::123456789012:role/github-actions-deploy"
SUBNETS = ("subnet-0aaa0000000000001", "subnet-0bbb0000000000002", "subnet-0ccc0000000000003")
ARGS = ClusterArgs(
    version="1.34",
    vpc_id="vpc-0123456789abcdef0",
    private_subnet_ids=SUBNETS,
    public_subnet_ids=("subnet-0ddd0000000000004",),
    admin_role_arns=(ADMIN, CI),
    service_cidr="172.20.0.0/16",
    log_retention_days=30,
    tags={"Project": "kimi-k3"},
)
ADDON_TYPE = "aws:eks/addon:Addon"


class Run:
    """One offline run of a Cluster, with what the engine saw of dependencies and transforms."""

    def __init__(self, result: offline.PlanResult, engine: offline.OfflineEngine) -> None:
        self.result = result
        self.engine = engine
        self.eks = result.one("eks:index:Cluster")

    def depends_on(self, resource: offline.RecordedResource) -> set[str]:
        """Names of the resources ``resource`` was declared to depend on."""
        by_urn = {r.urn: r.name for r in self.result.resources}
        return {by_urn.get(urn, urn) for urn in resource.dependencies}

    def addon(self, name: str) -> offline.RecordedResource:
        return self.result.one(ADDON_TYPE, f"-{name}")


@pytest.fixture
def build():
    """Build a Cluster named ``kimi-dev`` with explicit args (no stack config) and return the run."""

    def run(args: ClusterArgs = ARGS, grant: bool = False) -> Run:
        engine = offline.OfflineEngine(now=NOW, region="us-east-1")

        def program() -> None:
            cluster = Cluster("kimi-dev", args)
            pulumi.export("clusterName", cluster.cluster_name)
            pulumi.export("endpoint", cluster.endpoint)
            pulumi.export("kubeconfig", cluster.kubeconfig)
            pulumi.export("nodeSecurityGroupId", cluster.node_security_group_id)
            pulumi.export("clusterSecurityGroupId", cluster.cluster_security_group_id)
            pulumi.export("oidcProviderArn", cluster.oidc_provider_arn)
            pulumi.export("oidcIssuer", cluster.oidc_issuer)
            pulumi.export("nodeRoleArn", cluster.node_role_arn)
            pulumi.export("systemNodeGroup", cluster.system_node_group.node_group_name)
            if grant:
                role = cluster.grant(
                    "weights",
                    namespace="kimi-serving",
                    service_account="vllm",
                    inline_policies={"read": json.dumps({"Version": "2012-10-17", "Statement": []})},
                )
                pulumi.export("grantRoleArn", role.role_arn)

        result = engine.run(program)
        return Run(result, engine)

    return run


def refused(args: ClusterArgs) -> tuple[str, offline.OfflineEngine]:
    engine = offline.OfflineEngine(now=NOW, region="us-east-1")
    with pytest.raises(UserError) as error:
        engine.run(lambda: Cluster("kimi-dev", args))
    return str(error.value), engine


# --- control plane ------------------------------------------------------------------


def test_control_plane_uses_access_entries_a_private_endpoint_and_all_logs(build) -> None:
    inputs = build().eks.plain_inputs
    assert inputs["authenticationMode"] == "API"
    assert inputs["endpointPrivateAccess"] is True
    assert inputs["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in inputs
    assert inputs["enabledClusterLogTypes"] == ["api", "audit", "authenticator", "controllerManager", "scheduler"]
    assert inputs["skipDefaultNodeGroup"] is True
    assert inputs["version"] == "1.34"
    assert inputs["name"] == "kimi-dev"
    assert inputs["kubernetesServiceIpAddressRange"] == "172.20.0.0/16"
    assert inputs["privateSubnetIds"] == list(SUBNETS)


def test_public_endpoint_is_limited_to_the_configured_cidrs(build) -> None:
    run = build(replace(ARGS, endpoint_public_access=True, public_access_cidrs=("203.0.113.0/24", "198.51.100.7/32")))
    inputs = run.eks.plain_inputs
    assert inputs["endpointPublicAccess"] is True
    assert inputs["endpointPrivateAccess"] is True
    assert inputs["publicAccessCidrs"] == ["203.0.113.0/24", "198.51.100.7/32"]


def test_admins_are_access_entries_with_cluster_scoped_admin_policy(build) -> None:
    entries = build().eks.plain_inputs["accessEntries"]
    assert sorted(e["principalArn"] for e in entries.values()) == sorted([ADMIN, CI])
    for entry in entries.values():
        assert entry["type"] == "STANDARD"
        assert list(entry["accessPolicies"].values()) == [
            {
                "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
                "accessScope": {"type": "cluster"},
            }
        ]


def test_cluster_creator_is_not_made_admin_implicitly(build) -> None:
    run = build()
    # pulumi-eks hard-codes the flag on its inner aws:eks/cluster:Cluster; our transform rides on the component.
    assert run.eks.transforms == 1
    inner = {"name": "kimi-dev", "accessConfig": {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": True}}
    result = disable_creator_admin_bootstrap(
        pulumi.ResourceTransformArgs(custom=True, type_="aws:eks/cluster:Cluster", name="kimi-dev-eks-eksCluster", props=inner, opts=pulumi.ResourceOptions())
    )
    assert result is not None
    assert result.props["accessConfig"] == {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False}
    assert result.props["name"] == "kimi-dev"
    other = pulumi.ResourceTransformArgs(custom=True, type_="aws:iam/role:Role", name="r", props={"name": "r"}, opts=pulumi.ResourceOptions())
    assert disable_creator_admin_bootstrap(other) is None


def test_no_aws_auth_and_no_add_ons_from_pulumi_eks_or_eks_bootstrap(build) -> None:
    inputs = build().eks.plain_inputs
    assert "roleMappings" not in inputs and "userMappings" not in inputs
    assert inputs["bootstrapSelfManagedAddons"] is False
    assert inputs["useDefaultVpcCni"] is True
    assert inputs["corednsAddonOptions"]["enabled"] is False
    assert inputs["kubeProxyAddonOptions"]["enabled"] is False


# --- encryption and logs --------------------------------------------------------------


def test_secrets_are_encrypted_with_a_rotated_key_created_here(build) -> None:
    run = build()
    key = run.result.one("aws:kms/key:Key")
    assert key.plain_inputs["enableKeyRotation"] is True
    alias = run.result.one("aws:kms/alias:Alias")
    assert alias.plain_inputs["name"] == "alias/eks/kimi-dev-secrets"
    assert alias.plain_inputs["targetKeyId"] == key.outputs["keyId"]
    assert run.eks.plain_inputs["encryptionConfigKeyArn"] == key.outputs["arn"]


def test_a_given_key_arn_is_used_and_no_key_is_created(build) -> None:
    arn = "arn:aws:kms:us-east-1:123456789012:key/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    run = build(replace(ARGS, encryption_config_key_arn=arn))
    assert run.result.by_type("aws:kms/key:Key") == []
    assert run.eks.plain_inputs["encryptionConfigKeyArn"] == arn


def test_control_plane_log_group_is_created_first_with_retention(build) -> None:
    run = build()
    group = run.result.one("aws:cloudwatch/logGroup:LogGroup")
    assert group.plain_inputs["name"] == "/aws/eks/kimi-dev/cluster"
    assert group.plain_inputs["retentionInDays"] == 30
    assert group.name in run.depends_on(run.eks)
    assert set(CONTROL_PLANE_LOG_TYPES) == {"api", "audit", "authenticator", "controllerManager", "scheduler"}


# --- system nodes ---------------------------------------------------------------------


def test_system_node_group_is_on_demand_cpu_multi_az_and_labelled(build) -> None:
    run = build()
    group = run.result.one("aws:eks/nodeGroup:NodeGroup").plain_inputs
    assert group["capacityType"] == "ON_DEMAND"
    assert group["amiType"] == "AL2023_x86_64_STANDARD"
    assert group["instanceTypes"] == ["m7i.xlarge"]
    assert group["subnetIds"] == list(SUBNETS)
    assert group["scalingConfig"] == {"desiredSize": 2, "minSize": 2, "maxSize": 2}
    assert group["labels"] == dict(labels.SYSTEM_NODE_LABELS)
    assert "taints" not in group
    assert group["clusterName"] == "kimi-dev"
    assert group["nodeRepairConfig"] == {"enabled": True}


def test_system_nodes_require_imdsv2_with_hop_limit_1_and_encrypted_root(build) -> None:
    run = build()
    template = run.result.one("aws:ec2/launchTemplate:LaunchTemplate")
    group = run.result.one("aws:eks/nodeGroup:NodeGroup").plain_inputs
    assert group["launchTemplate"]["id"] == template.id
    meta = template.plain_inputs["metadataOptions"]
    assert meta["httpTokens"] == "required"
    assert meta["httpPutResponseHopLimit"] == 1
    (root,) = template.plain_inputs["blockDeviceMappings"]
    assert root["deviceName"] == "/dev/xvda"
    assert root["ebs"]["encrypted"] == "true"
    assert template.plain_inputs["vpcSecurityGroupIds"] == [run.result.outputs["nodeSecurityGroupId"]]
    assert "instanceType" not in template.plain_inputs


def test_node_role_has_exactly_the_worker_policies(build) -> None:
    run = build()
    role = run.result.one("aws:iam/role:Role", "kimi-dev-node-role")
    trust = json.loads(role.plain_inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    attached = {
        a.plain_inputs["policyArn"] for a in run.result.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if a.name.startswith("kimi-dev-node-")
    }
    assert attached == {
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
        "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    }
    assert run.result.one("aws:eks/nodeGroup:NodeGroup").plain_inputs["nodeRoleArn"] == role.outputs["arn"]
    assert run.result.outputs["nodeRoleArn"] == role.outputs["arn"]


# --- add-ons --------------------------------------------------------------------------


def test_add_ons_are_declared_once_with_versions_resolved_for_the_cluster_version(build) -> None:
    run = build()
    assert sorted(a.plain_inputs["addonName"] for a in run.result.by_type(ADDON_TYPE)) == sorted(MANAGED_ADDONS)
    lookups = {a["addonName"]: a for token, a in run.engine.invokes if token == "aws:eks/getAddonVersion:getAddonVersion"}
    assert set(lookups) == set(MANAGED_ADDONS)
    for addon in MANAGED_ADDONS:
        assert lookups[addon]["kubernetesVersion"] == "1.34"
        assert lookups[addon].get("mostRecent", False) is False
        assert run.addon(addon).plain_inputs["clusterName"] == "kimi-dev"
    assert run.addon("vpc-cni").plain_inputs["addonVersion"] == "v1.20.4-eksbuild.1"
    assert run.addon("kube-proxy").plain_inputs["addonVersion"] == "v1.34.3-eksbuild.2"


def test_pinned_add_on_versions_are_used_without_a_lookup(build) -> None:
    run = build(replace(ARGS, addon_versions={"vpc-cni": "v1.19.6-eksbuild.7", "coredns": "v1.11.4-eksbuild.14"}))
    assert run.addon("vpc-cni").plain_inputs["addonVersion"] == "v1.19.6-eksbuild.7"
    assert run.addon("coredns").plain_inputs["addonVersion"] == "v1.11.4-eksbuild.14"
    looked_up = {a["addonName"] for token, a in run.engine.invokes if token == "aws:eks/getAddonVersion:getAddonVersion"}
    assert looked_up == set(MANAGED_ADDONS) - {"vpc-cni", "coredns"}


def test_add_on_configuration(build) -> None:
    run = build()
    cni = json.loads(run.addon("vpc-cni").plain_inputs["configurationValues"])
    assert cni == {"env": {"ENABLE_PREFIX_DELEGATION": "true", "WARM_PREFIX_TARGET": "1"}, "enableNetworkPolicy": "true"}
    coredns = json.loads(run.addon("coredns").plain_inputs["configurationValues"])
    assert coredns == {"nodeSelector": dict(labels.SYSTEM_NODE_LABELS)}
    monitoring = json.loads(run.addon("eks-node-monitoring-agent").plain_inputs["configurationValues"])
    assert monitoring["dcgmAgent"]["tolerations"] == [dict(labels.GPU_TOLERATION)]


def test_networking_add_ons_come_before_nodes_and_coredns_after(build) -> None:
    run = build()
    nodes = run.result.one("aws:eks/nodeGroup:NodeGroup")
    assert {run.addon(a).name for a in ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")} <= run.depends_on(nodes)
    assert nodes.name in run.depends_on(run.addon("coredns"))
    assert nodes.name in run.depends_on(run.addon("eks-node-monitoring-agent"))


# --- outputs, provider, Pod Identity -----------------------------------------------------


def test_outputs_and_secret_kubeconfig(build) -> None:
    run = build()
    outputs = run.result.outputs
    assert outputs["clusterName"] == "kimi-dev"
    assert offline.contains_secret(outputs["kubeconfig"])
    kubeconfig = json.loads(offline.reveal(outputs["kubeconfig"]))
    assert outputs["endpoint"] == kubeconfig["clusters"][0]["cluster"]["server"]
    assert outputs["endpoint"].startswith("https://")
    eks_outputs = run.eks.outputs
    assert outputs["nodeSecurityGroupId"] == eks_outputs["nodeSecurityGroupId"]
    assert outputs["clusterSecurityGroupId"] == eks_outputs["clusterSecurityGroupId"]
    assert outputs["oidcProviderArn"] == eks_outputs["oidcProviderArn"]
    assert outputs["oidcIssuer"] == eks_outputs["oidcIssuer"]
    assert outputs["systemNodeGroup"]


def test_kubernetes_provider_gets_the_secret_kubeconfig_and_waits_for_nodes(build) -> None:
    run = build()
    provider = run.result.one("pulumi:providers:kubernetes")
    assert run.result.parent_of(provider).type == "kimi-k3:index:Cluster"
    assert offline.contains_secret(provider.inputs["kubeconfig"])
    assert provider.plain_inputs["enableServerSideApply"] in (True, "true")
    assert {run.result.one("aws:eks/nodeGroup:NodeGroup").name, run.addon("coredns").name} <= run.depends_on(provider)


def test_kubeconfig_can_assume_an_admin_role(build) -> None:
    run = build(replace(ARGS, kubeconfig_role_arn=CI))
    assert run.eks.plain_inputs["providerCredentialOpts"] == {"roleArn": CI}


def test_every_child_is_parented_under_the_component(build) -> None:
    run = build(grant=True)
    component = run.result.one("kimi-k3:index:Cluster")
    for resource in run.result.resources:
        if resource is component:
            continue
        assert resource.name.startswith("kimi-dev-"), resource.name
        ancestor = run.result.parent_of(resource)
        while ancestor is not None and ancestor is not component:
            ancestor = run.result.parent_of(ancestor)
        assert ancestor is component, resource.name


def test_grant_wires_a_pod_identity_role_to_the_cluster(build) -> None:
    run = build(grant=True)
    grant = run.result.one("kimi-k3:index:PodIdentityRole", "kimi-dev-weights")
    assert run.result.parent_of(grant).type == "kimi-k3:index:Cluster"
    association = run.result.one("aws:eks/podIdentityAssociation:PodIdentityAssociation").plain_inputs
    assert association["clusterName"] == "kimi-dev"
    assert (association["namespace"], association["serviceAccount"]) == ("kimi-serving", "vllm")
    role = run.result.one("aws:iam/role:Role", "kimi-dev-weights-role")
    assert association["roleArn"] == role.outputs["arn"] == run.result.outputs["grantRoleArn"]
    trust = json.loads(role.plain_inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert run.addon("eks-pod-identity-agent").name in run.depends_on(grant)


def test_cluster_name_can_be_set_and_names_the_log_group(build) -> None:
    run = build(replace(ARGS, cluster_name="kimi-k3-prod"))
    assert run.eks.plain_inputs["name"] == "kimi-k3-prod"
    assert run.result.one("aws:cloudwatch/logGroup:LogGroup").plain_inputs["name"] == "/aws/eks/kimi-k3-prod/cluster"
    assert run.result.outputs["clusterName"] == "kimi-k3-prod"


# --- bad input: one clear error naming the arg, nothing declared -------------------------


@pytest.mark.parametrize(
    ("change", "arg"),
    [
        ({"admin_role_arns": (ADMIN, "arn:aws:iam::123456789012:user/alice")}, "admin_role_arns[1]"),
        ({"admin_role_arns": ("kimi-k3-admin",)}, "admin_role_arns[0]"),
        ({"admin_role_arns": ()}, "admin_role_arns"),
        ({"endpoint_public_access": True, "public_access_cidrs": ("0.0.0.0/0",)}, "public_access_cidrs[0]"),
        ({"endpoint_public_access": True, "public_access_cidrs": ("203.0.113.0/24", "::/0")}, "public_access_cidrs[1]"),
        ({"endpoint_public_access": True, "public_access_cidrs": ()}, "public_access_cidrs"),
        ({"endpoint_public_access": True, "public_access_cidrs": ("203.0.113.7/24",)}, "public_access_cidrs[0]"),
        ({"public_access_cidrs": ("203.0.113.0/24",)}, "public_access_cidrs"),
        ({"version": "1.34.2"}, "version"),
        ({"private_subnet_ids": ("subnet-0aaa0000000000001",)}, "private_subnet_ids"),
        ({"service_cidr": "8.8.0.0/16"}, "service_cidr"),
        ({"log_retention_days": 42}, "log_retention_days"),
        ({"system_node_count": 1}, "system_node_count"),
        ({"system_node_instance_type": "m7i"}, "system_node_instance_type"),
        ({"encryption_config_key_arn": "alias/eks"}, "encryption_config_key_arn"),
        ({"addon_versions": {"aws-ebs-csi-driver": "v1.48.0-eksbuild.1"}}, "addon_versions"),
        ({"addon_versions": {"vpc-cni": "latest"}}, "addon_versions['vpc-cni']"),
        ({"kubeconfig_role_arn": "arn:aws:iam::123456789012:role/someone-else"}, "kubeconfig_role_arn"),
        ({"cluster_name": "x" * 101}, "cluster_name"),
    ],
)
def test_bad_input_is_refused_before_anything_is_declared(change: dict, arg: str) -> None:
    message, engine = refused(replace(ARGS, **change))
    assert f"{arg} " in message
    assert "kimi-dev" in message
    assert engine.resources == []


def test_access_entries_do_not_depend_on_list_order(build) -> None:
    forward = build().eks.plain_inputs["accessEntries"]
    backward = build(replace(ARGS, admin_role_arns=(CI, ADMIN))).eks.plain_inputs["accessEntries"]
    assert forward == backward
