"""The replacement rules table: one known immutable-field case per resource type that has rules, its coverage, the diff.

Each case is a change the real provider replaces on (pulumi-kubernetes' forceNew table and the
API server's update validation; terraform-provider-aws ForceNew), next to one it updates in place.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

import pulumi_kubernetes as k8s
import pytest

from kimi_k3.offline import diff as plan_diff
from kimi_k3.offline.replacement_rules import RULES, rules_for
from kimi_k3.offline.review import describe
from kimi_k3.offline.state import PreviousState, ResourceState

# (type, property path (dotted), before, after): a change the provider replaces the resource on
IMMUTABLE = [
    ("kubernetes:apps/v1:StatefulSet", "spec.volumeClaimTemplates", [{"spec": {"resources": {"requests": {"storage": "1955G"}}}}], [{"spec": {"resources": {"requests": {"storage": "2400G"}}}}]),
    ("kubernetes:apps/v1:Deployment", "spec.selector.matchLabels", {"app": "a"}, {"app": "b"}),
    ("kubernetes:apps/v1:DaemonSet", "spec.selector.matchLabels", {"app": "a"}, {"app": "b"}),
    ("kubernetes:batch/v1:Job", "spec.template.spec.containers", [{"image": "a"}], [{"image": "b"}]),
    ("kubernetes:core/v1:Service", "spec.clusterIP", "10.100.0.10", "None"),
    ("kubernetes:core/v1:PersistentVolumeClaim", "spec.storageClassName", "gp3", "io2"),
    ("kubernetes:core/v1:ConfigMap", "data.nginx\\.conf", "a", "b"),
    ("kubernetes:core/v1:Secret", "stringData", {"[secret]": "aaaa"}, {"[secret]": "bbbb"}),
    ("kubernetes:storage.k8s.io/v1:StorageClass", "provisioner", "kubernetes.io/no-provisioner", "ebs.csi.aws.com"),
    ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "roleRef.name", "a", "b"),
    ("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "roleRef.name", "a", "b"),
    ("kubernetes:policy/v1:PodDisruptionBudget", "metadata.name", "a", "b"),
    ("kubernetes:core/v1:Namespace", "metadata.name", "a", "b"),
    ("kubernetes:core/v1:ServiceAccount", "metadata.namespace", "a", "b"),
    ("kubernetes:batch/v1:CronJob", "metadata.name", "a", "b"),
    ("aws:ec2/securityGroupRule:SecurityGroupRule", "fromPort", 0, 443),
    ("kubernetes:networking.k8s.io/v1:NetworkPolicy", "metadata.name", "a", "b"),
    ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "metadata.name", "a", "b"),
    ("kubernetes:rbac.authorization.k8s.io/v1:Role", "metadata.namespace", "a", "b"),
    ("kubernetes:helm.sh/v3:Release", "namespace", "a", "b"),
    ("aws:eks/nodeGroup:NodeGroup", "subnetIds", ["subnet-a"], ["subnet-b"]),
    ("aws:ec2/launchTemplate:LaunchTemplate", "name", "a", "b"),
    ("aws:autoscaling/schedule:Schedule", "scheduledActionName", "a", "b"),
    ("aws:scheduler/schedule:Schedule", "name", "a", "b"),
    ("aws:eks/addon:Addon", "addonName", "coredns", "kube-proxy"),
    ("aws:eks/podIdentityAssociation:PodIdentityAssociation", "serviceAccount", "a", "b"),
    ("aws:iam/role:Role", "path", "/", "/kimi/"),
    ("aws:iam/rolePolicy:RolePolicy", "role", "a", "b"),
    ("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "policyArn", "arn:aws:iam::aws:policy/A", "arn:aws:iam::aws:policy/B"),
    ("aws:ec2/securityGroup:SecurityGroup", "vpcId", "vpc-a", "vpc-b"),
    ("aws:ec2/subnet:Subnet", "cidrBlock", "10.0.0.0/20", "10.0.16.0/20"),
    ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "securityGroupId", "sg-a", "sg-b"),
]

# (type, property path, before, after): a change the provider applies in place
MUTABLE = [
    ("kubernetes:apps/v1:StatefulSet", "spec.template.spec.containers", [{"image": "a"}], [{"image": "b"}]),
    ("kubernetes:apps/v1:StatefulSet", "spec.replicas", 2, 3),
    ("kubernetes:apps/v1:StatefulSet", "spec.persistentVolumeClaimRetentionPolicy.whenDeleted", "Delete", "Retain"),
    ("kubernetes:core/v1:PersistentVolumeClaim", "spec.resources.requests.storage", "1Gi", "2Gi"),
    ("aws:eks/nodeGroup:NodeGroup", "releaseVersion", "1.34.2-20251120", "1.34.2-20251215"),
    ("aws:ec2/launchTemplate:LaunchTemplate", "userData", "a", "b"),
    ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "cidrIpv4", "10.100.0.0/16", "10.101.0.0/16"),
    ("aws:autoscaling/schedule:Schedule", "startTime", "2026-12-01T11:30:00Z", "2026-12-01T12:05:00Z"),
]


@dataclass
class Registered:
    """What the diff reads of a new run's registration."""

    urn: str
    type: str
    name: str
    inputs: dict
    custom: bool = True
    outputs: dict = field(default_factory=dict)
    id: str | None = None
    parent_urn: str | None = None
    dependencies: list = field(default_factory=list)
    ignore_changes: list = field(default_factory=list)


def nest(path: str, value) -> dict:
    keys = [k.replace("\\.", ".") for k in re.split(r"(?<!\\)\.", path)]
    tree = value
    for key in reversed(keys):
        tree = {key: tree}
    return tree


def one_change(type_: str, path: str, before, after, **extra) -> plan_diff.ResourceChange:
    urn = f"urn:pulumi:prod::kimi-k3::{type_}::thing"
    previous = PreviousState("prod", {urn: ResourceState(urn, type_, "thing", True, nest(path, before), id="id-0123456789")})
    (change,) = plan_diff.diff(previous, [Registered(urn, type_, "thing", nest(path, after), **extra)])
    return change


@pytest.mark.parametrize(("type_", "path", "before", "after"), IMMUTABLE, ids=[c[0] for c in IMMUTABLE])
def test_a_known_immutable_field_replaces(type_, path, before, after):
    change = one_change(type_, path, before, after)
    assert change.action == plan_diff.REPLACE and change.replace_because


def test_every_type_with_rules_has_an_immutable_case():
    assert {case[0] for case in IMMUTABLE} == set(RULES)
    for rules in RULES.values():
        assert rules.source and rules.replace_on


@pytest.mark.parametrize(("type_", "path", "before", "after"), MUTABLE, ids=[f"{c[0]}:{c[1]}" for c in MUTABLE])
def test_a_mutable_field_updates_in_place(type_, path, before, after):
    assert one_change(type_, path, before, after).action == plan_diff.UPDATE


def test_a_pvc_spec_field_beyond_the_provider_list_is_refused_by_the_api_server():
    change = one_change("kubernetes:core/v1:PersistentVolumeClaim", "spec.volumeMode", "Filesystem", "Block")
    assert change.action == plan_diff.UPDATE and [plan_diff.render_path(p) for p in change.refused] == ["spec.volumeMode"]


def test_the_stateful_set_rule_is_the_complement_of_what_kubernetes_lets_an_update_change():
    # ValidateStatefulSetUpdate (kubernetes/kubernetes pkg/apis/apps/validation): only these spec fields may change
    updatable = {"replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy", "minReadySeconds"}
    spec_fields = {
        re.sub(r"_(\w)", lambda m: m[1].upper(), name)
        for name in inspect.signature(k8s.apps.v1.StatefulSetSpecArgs.__init__).parameters if not name.startswith("_") and name != "self"
    }
    replacing = {p.split(".")[1] for p in RULES["kubernetes:apps/v1:StatefulSet"].replace_on if p.startswith("spec.")}
    assert replacing | updatable == spec_fields and not replacing & updatable


def test_a_type_without_rules_is_not_known_and_a_custom_resource_has_the_metadata_rule_only():
    change = one_change("aws:ec2/vpc:Vpc", "cidrBlock", "10.0.0.0/16", "10.1.0.0/16")
    assert change.action == plan_diff.CHANGE and change.rules is None
    assert "(replacement rules not known)" in describe(change)
    custom = rules_for("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    assert custom is not None and not custom.beyond_known
    assert one_change("kubernetes:monitoring.coreos.com/v1:PrometheusRule", "spec.groups", [1], [2]).action == plan_diff.UPDATE
    assert one_change("kubernetes:monitoring.coreos.com/v1:PrometheusRule", "metadata.name", "a", "b").action == plan_diff.REPLACE


def test_ignored_paths_are_no_change():
    change = one_change("aws:eks/nodeGroup:NodeGroup", "scalingConfig.desiredSize", 0, 2, ignore_changes=["scalingConfig.desiredSize"])
    assert change.action == plan_diff.UNCHANGED


def test_a_replaced_launch_template_replaces_the_node_group_that_names_its_id():
    lt, ng = "urn:pulumi:prod::kimi-k3::aws:ec2/launchTemplate:LaunchTemplate::lt", "urn:pulumi:prod::kimi-k3::aws:eks/nodeGroup:NodeGroup::ng"
    group = {"launchTemplate": {"id": "lt-0a1b2c3d4e5f60718", "version": "1"}, "subnetIds": ["subnet-a"]}
    previous = PreviousState("prod", {
        lt: ResourceState(lt, "aws:ec2/launchTemplate:LaunchTemplate", "lt", True, {"name": "a"}, id="lt-0a1b2c3d4e5f60718"),
        ng: ResourceState(ng, "aws:eks/nodeGroup:NodeGroup", "ng", True, group, id="cluster:ng"),
    })
    changes = plan_diff.diff(previous, [
        Registered(lt, "aws:ec2/launchTemplate:LaunchTemplate", "lt", {"name": "b"}), Registered(ng, "aws:eks/nodeGroup:NodeGroup", "ng", group),
    ])
    node_group = changes.get(ng)
    assert node_group is not None and node_group.action == plan_diff.REPLACE and node_group.cascade_from == lt
    assert [plan_diff.render_path(p) for p in node_group.replace_because] == ["launchTemplate.id"]


# Types the library declares (dev, prod, hyperpod) whose replacement rules are not encoded: the review says "not known".
NOT_KNOWN = {
    "aws-native:sagemaker:Cluster", "aws:codebuild/project:Project", "aws:cloudwatch/eventRule:EventRule", "aws:cloudwatch/eventTarget:EventTarget", "aws:cloudwatch/logGroup:LogGroup",
    "aws:cloudwatch/metricAlarm:MetricAlarm", "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup", "aws:ec2/eip:Eip", "aws:ec2/flowLog:FlowLog",
    "aws:ec2/internetGateway:InternetGateway", "aws:ec2/natGateway:NatGateway", "aws:ec2/route:Route", "aws:ec2/routeTable:RouteTable",
    "aws:ec2/routeTableAssociation:RouteTableAssociation", "aws:ec2/vpc:Vpc", "aws:ec2/vpcEndpoint:VpcEndpoint",
    "aws:ecr/pullThroughCacheRule:PullThroughCacheRule", "aws:kms/alias:Alias", "aws:kms/key:Key", "aws:s3/bucket:Bucket",
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "aws:s3/bucketObjectv2:BucketObjectv2",
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls", "aws:s3/bucketPolicy:BucketPolicy",
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketVersioning:BucketVersioning", "aws:sns/topic:Topic", "aws:sns/topicPolicy:TopicPolicy", "aws:sns/topicSubscription:TopicSubscription",
    "eks:index:Cluster", "pulumi:providers:aws-native", "pulumi:providers:kubernetes",
}
METADATA_ONLY = {
    "kubernetes:inference.sagemaker.aws.amazon.com/v1:InferenceEndpointConfig", "kubernetes:monitoring.coreos.com/v1:PrometheusRule",
    "kubernetes:monitoring.coreos.com/v1:ServiceMonitor",
}


def test_every_type_the_stacks_declare_has_rules_or_is_listed_not_known(dev_plan, prod_plan, hyperpod_plan):
    declared = {r.type for plan in (dev_plan, prod_plan, hyperpod_plan) for r in plan.resources if not r.type.startswith("kimi-k3:")}
    known = {t for t in declared if (rules_for(t) is not None and rules_for(t).beyond_known)}
    partial = {t for t in declared if rules_for(t) is not None and not rules_for(t).beyond_known}
    assert partial == METADATA_ONLY
    assert declared - known - partial == NOT_KNOWN
    assert known <= set(RULES)
