"""Issue 21, point 3: the first prod ``up`` can finish.

* a private-only endpoint needs a declared path to the API on 443 (EKS user guide, "Cluster API server
  endpoint"): prod settings refuse a stack without one, the offline plan rule refuses any plan without one;
* the in-VPC CodeBuild runner and ``kimi-k3 first-deploy``'s commands;
* a custom resource needs its CRD installed (or read) before it: the offline rule, and prod's plan installing
  kube-prometheus-stack and the ``monitoring`` namespace before the monitoring objects.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from kimi_k3 import offline
from kimi_k3.cli import first_deploy
from kimi_k3.cluster import deploy_runner
from kimi_k3.errors import SettingsError, UserError
from kimi_k3.offline import rules
from kimi_k3.offline.state import state_document
from kimi_k3.offline.timeline import Timeline
from kimi_k3.stack.settings import from_values
from tests.builders import PROD_OVERRIDES, load_stack_settings, stack_config
from tests.conftest import NOW, fixture_for

RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"


@dataclass
class Reg:
    """A registration as the rules read it (``RecordedResource``'s fields)."""

    type: str
    urn: str
    inputs: dict = field(default_factory=dict)
    dependencies: list = field(default_factory=list)
    parent_urn: str | None = None
    custom: bool = True
    provider: str = ""
    outputs: dict = field(default_factory=dict)


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:prod::kimi-k3::{type_}::{name}"


# --------------------------------------------------------------------------- the path to a private endpoint


def private_prod(**changes) -> dict[str, str]:
    values = stack_config()
    values.update(PROD_OVERRIDES)
    values.pop("kimi-k3:clusterApiIngressCidrs")
    values.update({f"kimi-k3:{k}": v for k, v in changes.items()})
    return values


def test_prod_refuses_a_private_endpoint_nothing_can_reach_naming_the_keys_to_set():
    with pytest.raises(SettingsError) as err:
        from_values(private_prod(), {"kimi-k3:apiKey"}, stack="prod")
    message = str(err.value)
    assert "\n" not in message
    for key in ("kimi-k3:deployRunner", "kimi-k3:clusterApiIngressCidrs", "kimi-k3:clusterApiIngressSecurityGroupIds", "443", "EKS user guide"):
        assert key in message


def test_each_declared_path_is_accepted_and_bad_values_are_one_line():
    assert from_values(private_prod(clusterApiIngressCidrs='["10.100.0.0/16"]'), {"kimi-k3:apiKey"}, stack="prod").cluster.api_ingress_cidrs == ("10.100.0.0/16",)
    groups = from_values(private_prod(clusterApiIngressSecurityGroupIds='["sg-0a1b2c3d4e5f67890"]'), {"kimi-k3:apiKey"}, stack="prod")
    assert groups.cluster.api_ingress_security_group_ids == ("sg-0a1b2c3d4e5f67890",)
    with pytest.raises(SettingsError, match="clusterApiIngressSecurityGroupIds: 'sg-nope'"):
        from_values(private_prod(clusterApiIngressSecurityGroupIds='["sg-nope"]'), {"kimi-k3:apiKey"}, stack="prod")
    with pytest.raises(SettingsError, match="whole internet"):
        from_values(private_prod(clusterApiIngressCidrs='["0.0.0.0/0"]'), {"kimi-k3:apiKey"}, stack="prod")
    with pytest.raises(SettingsError, match="deployRunnerRoleArn"):
        from_values(private_prod(deployRunner="codebuild"), {"kimi-k3:apiKey"}, stack="prod")
    with pytest.raises(SettingsError, match="only used with kimi-k3:deployRunner"):
        from_values(private_prod(clusterApiIngressCidrs='["10.100.0.0/16"]', deployRunnerSourceUrl="https://github.com/a/b.git"), {"kimi-k3:apiKey"}, stack="prod")


def test_the_plan_rule_refuses_a_private_endpoint_whose_cluster_security_group_admits_nothing_on_443():
    cluster = Reg("eks:index:Cluster", urn("eks:index:Cluster", "c"), {"endpointPublicAccess": False}, outputs={"clusterSecurityGroupId": "sg-1"})
    (refusal,) = rules.private_endpoint_admits_a_client([cluster])
    assert "kimi-k3:deployRunner" in refusal[1] and rules.PRIVATE_ENDPOINT_SOURCE in refusal[1]
    elsewhere = Reg(rules.INGRESS_RULE_TYPES[0], urn(rules.INGRESS_RULE_TYPES[0], "x"), {"securityGroupId": "sg-2", "fromPort": 443, "toPort": 443})
    assert rules.private_endpoint_admits_a_client([cluster, elsewhere])
    ssh = Reg(rules.INGRESS_RULE_TYPES[0], urn(rules.INGRESS_RULE_TYPES[0], "y"), {"securityGroupId": "sg-1", "fromPort": 22, "toPort": 22})
    assert rules.private_endpoint_admits_a_client([cluster, ssh])
    api = Reg(rules.INGRESS_RULE_TYPES[0], urn(rules.INGRESS_RULE_TYPES[0], "z"), {"securityGroupId": "sg-1", "fromPort": 443, "toPort": 443})
    assert rules.private_endpoint_admits_a_client([cluster, api]) == []
    public = Reg("eks:index:Cluster", urn("eks:index:Cluster", "p"), {"endpointPublicAccess": True})
    assert rules.private_endpoint_admits_a_client([public]) == []


def test_an_offline_plan_of_a_private_stack_without_a_path_is_refused():
    """Outside prod the settings let it through; the plan does not (the engine's plan rule)."""
    values = stack_config(clusterEndpointPublicAccess=False, clusterPublicAccessCidrs=[])
    settings = from_values(values, {"kimi-k3:apiKey"})
    with pytest.raises(rules.ApplyTimeRuleError, match="private_endpoint|private only and its cluster security group admits nothing on 443"):
        offline.run_stack("dev", now=NOW, reservation=fixture_for, config_overrides={"kimi-k3:clusterEndpointPublicAccess": "false", "kimi-k3:clusterPublicAccessCidrs": "[]"})
    assert settings.cluster.endpoint_public_access is False


# --------------------------------------------------------------------------- the runner and the first deploy


def test_prod_declares_the_runner_admitted_on_443_and_the_provider_waits_for_the_rule(prod_plan):
    sg = prod_plan.one("aws:ec2/securityGroup:SecurityGroup", "kimi-k3-deploy-runner-sg")
    (rule,) = prod_plan.by_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    eks = prod_plan.one("eks:index:Cluster")
    inputs = rule.plain_inputs
    assert inputs["referencedSecurityGroupId"] == sg.outputs.get("id", sg.id) or inputs["referencedSecurityGroupId"] == sg.id
    assert inputs["securityGroupId"] == eks.outputs["clusterSecurityGroupId"]
    assert (inputs["fromPort"], inputs["toPort"], inputs["ipProtocol"]) == (443, 443, "tcp")
    provider = prod_plan.one("pulumi:providers:kubernetes")
    assert rule.urn in provider.dependencies
    project = prod_plan.one("aws:codebuild/project:Project").plain_inputs
    assert project["vpcConfig"]["securityGroupIds"] == [sg.id]
    assert len(project["vpcConfig"]["subnets"]) == 3
    assert project["environment"]["privilegedMode"] is False
    secrets = {e["name"]: e for e in project["environment"]["environmentVariables"] if e["type"] == "SECRETS_MANAGER"}
    assert set(secrets) == set(deploy_runner.SECRET_KEYS)
    assert "pulumi up --yes --non-interactive --stack \"$STACK\" --policy-pack policy" in project["source"]["buildspec"]


def test_the_runner_role_can_only_log_attach_to_its_subnets_read_its_secret_and_assume_the_deploy_role(prod_plan):
    policy = json.loads(prod_plan.one("aws:iam/rolePolicy:RolePolicy", "kimi-k3-deploy-runner-policy").plain_inputs["policy"])
    actions = sorted(a for s in policy["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
    assert not [a for a in actions if "*" in a]
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert by_sid["AssumeDeployRole"]["Resource"] == "arn:aws:iam::210987654321:role/github-actions-deploy"
    assert by_sid["DeploySecret"]["Resource"].startswith("arn:aws:secretsmanager:us-west-2:210987654321:secret:kimi-k3/prod/deploy")
    condition = by_sid["VpcNetworkInterfacePermission"]["Condition"]
    assert condition["StringEquals"]["ec2:AuthorizedService"] == "codebuild.amazonaws.com" and len(condition["ArnEquals"]["ec2:Subnet"]) == 3
    assert by_sid["BuildLogs"]["Resource"][0].endswith("log-group:/aws/codebuild/kimi-k3-prod-deploy") or "kimi-k3-prod-deploy" in by_sid["BuildLogs"]["Resource"][0]
    allowed = {"logs:CreateLogStream", "logs:PutLogEvents", "secretsmanager:GetSecretValue", "sts:AssumeRole", "ec2:CreateNetworkInterfacePermission"}
    assert set(actions) - allowed <= {a for a in actions if a.startswith("ec2:")}, actions
    trust = json.loads(prod_plan.one("aws:iam/role:Role", "kimi-k3-deploy-runner-role").plain_inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "codebuild.amazonaws.com"}
    assert statement["Condition"]["ArnLike"]["aws:SourceArn"].endswith(":project/kimi-k3-prod-deploy")


def test_first_deploy_targets_the_network_and_the_runner_only_and_prints_the_build(prod_plan):
    state = state_document(prod_plan)
    targets = first_deploy.target_urns(state["resources"])
    types = {t.split("::")[-2].rsplit("$", 1)[-1] for t in targets}
    assert "aws:codebuild/project:Project" in types and "aws:ec2/vpc:Vpc" in types and "aws:ec2/natGateway:NatGateway" in types
    assert not any("eks:index:Cluster" in t or "kubernetes:" in t or "Cluster$" in t for t in targets)
    chosen = set(targets)
    for resource in state["resources"]:
        if resource["urn"] in chosen:
            assert set(resource.get("dependencies") or ()) <= chosen, resource["urn"]
    lines = first_deploy.commands(state)
    text = "\n".join(lines)
    assert text.count("--target ") == len(targets)
    assert "aws codebuild start-build --region us-west-2 --project-name kimi-k3-prod-deploy" in text
    assert "role/kimi-k3-prod-deploy-runner" in text and "aws iam update-assume-role-policy --role-name github-actions-deploy" in text
    assert "aws logs tail /aws/codebuild/kimi-k3-prod-deploy" in text


def test_first_deploy_refuses_a_plan_without_a_runner(dev_plan):
    with pytest.raises(UserError, match="deployRunner codebuild"):
        first_deploy.target_urns(state_document(dev_plan)["resources"])


# --------------------------------------------------------------------------- CRDs before their objects


def _timeline(*registrations: Reg) -> Timeline:
    timeline = Timeline(NOW)
    for registration in registrations:
        timeline.add(registration)
    return timeline


def test_the_crd_rule_refuses_a_custom_resource_nothing_installs_and_accepts_an_installed_or_read_one():
    rule_type = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
    orphan = Reg(rule_type, urn(rule_type, "rules"))
    timeline = _timeline(orphan)
    message = rules.custom_resource_has_its_crd(orphan, timeline.moment(orphan.urn), timeline)
    assert message and "no CustomResourceDefinition serves PrometheusRule (monitoring.coreos.com)" in message and "no matches for kind" in message

    release = Reg(RELEASE, urn(RELEASE, "kps"), {"chart": "kube-prometheus-stack"})
    unordered = Reg(rule_type, urn(rule_type, "rules"))
    timeline = _timeline(release, unordered)
    assert "before kps installs its CRD" in rules.custom_resource_has_its_crd(unordered, timeline.moment(unordered.urn), timeline)

    ordered = Reg(rule_type, urn(rule_type, "rules"), dependencies=[release.urn])
    timeline = _timeline(release, ordered)
    assert rules.custom_resource_has_its_crd(ordered, timeline.moment(ordered.urn), timeline) is None

    timeline = _timeline()
    timeline.reads.append((rules.CRD, "prometheusrules.monitoring.coreos.com"))
    timeline.add(orphan)
    assert rules.custom_resource_has_its_crd(orphan, timeline.moment(orphan.urn), timeline) is None

    built_in = Reg("kubernetes:apps/v1:Deployment", urn("kubernetes:apps/v1:Deployment", "d"))
    timeline = _timeline(built_in)
    assert rules.custom_resource_has_its_crd(built_in, timeline.moment(built_in.urn), timeline) is None


def test_the_crd_rule_reads_what_a_chart_renders_from_its_values_and_a_local_charts_crds():
    dcgm = Reg(RELEASE, urn(RELEASE, "dcgm"), {"chart": "dcgm-exporter", "values": {"serviceMonitor": {"enabled": True}}})
    timeline = _timeline(dcgm)
    assert "ServiceMonitor" in rules.custom_resource_has_its_crd(dcgm, timeline.moment(dcgm.urn), timeline)
    off = Reg(RELEASE, urn(RELEASE, "dcgm-off"), {"chart": "dcgm-exporter", "values": {"serviceMonitor": {"enabled": False}}})
    timeline = _timeline(off)
    assert rules.custom_resource_has_its_crd(off, timeline.moment(off.urn), timeline) is None
    kinds = rules.local_chart_crds("components/data/charts/HyperPodHelmChart")
    assert ("inference.sagemaker.aws.amazon.com", "InferenceEndpointConfig") in kinds


def test_prod_installs_the_operator_and_its_namespace_before_every_object_of_its_kinds(prod_plan):
    release = prod_plan.one(RELEASE, "kimi-k3-prometheus-operator-release")
    inputs = release.plain_inputs
    assert (inputs["chart"], inputs["version"], inputs["name"], inputs["namespace"]) == ("kube-prometheus-stack", "88.3.0", "kube-prometheus-stack", "monitoring")
    assert inputs["repositoryOpts"]["repo"] == "https://prometheus-community.github.io/helm-charts"
    assert inputs["values"]["crds"]["enabled"] is True
    namespace = prod_plan.one(NAMESPACE, "kimi-k3-prometheus-operator-namespace")
    assert namespace.plain_inputs["metadata"]["name"] == "monitoring"
    timeline = Timeline(NOW)
    for resource in prod_plan.resources:
        timeline.add(resource)
    assert timeline.moment(release.urn).starts >= timeline.moment(namespace.urn).done
    dependants = [*prod_plan.by_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule"), *prod_plan.by_type("kubernetes:monitoring.coreos.com/v1:ServiceMonitor"),
                  prod_plan.one(RELEASE, "kimi-k3-gpu-plugins-dcgm-exporter"), prod_plan.one("kubernetes:core/v1:ConfigMap", "kimi-k3-monitoring-dashboard")]
    assert len(dependants) == 4
    for resource in dependants:
        assert timeline.moment(resource.urn).starts >= timeline.moment(release.urn).done, resource.name
    assert timeline.moment(release.urn).done - timeline.moment(release.urn).starts == timedelta(minutes=2)


def test_without_the_install_the_stack_reads_the_crds_and_declares_no_operator():
    plan = offline.run_stack(
        "prod", now=NOW, reservation=lambda s: fixture_for(s, availability_zone="us-west-2b", state="active"),
        config_overrides={"kimi-k3:prometheusOperatorInstall": "false"},
    )
    assert not [r for r in plan.by_type(RELEASE) if r.plain_inputs["chart"] == "kube-prometheus-stack"]
    assert not plan.by_type("kimi-k3:index:PrometheusOperator")


def test_the_settings_take_the_chart_version_and_refuse_a_bad_one():
    assert load_stack_settings("prod", prometheusOperatorChartVersion="88.5.3").monitoring.operator_chart_version == "88.5.3"
    with pytest.raises(SettingsError, match="prometheusOperatorChartVersion"):
        load_stack_settings("prod", prometheusOperatorChartVersion="latest")


def test_the_buildspec_installs_the_pinned_cli_assumes_the_deploy_role_and_runs_up_with_the_policy_pack():
    import yaml

    spec = yaml.safe_load(deploy_runner.buildspec("prod"))
    assert spec["version"] == 0.2 and spec["phases"]["install"]["runtime-versions"] == {"python": "3.11"}
    install, build = spec["phases"]["install"]["commands"], spec["phases"]["build"]["commands"]
    assert any("get.pulumi.com" in c and "$PULUMI_VERSION" in c for c in install) and "make venv" in install
    assert any("credential_source = EcsContainer" in c and "$DEPLOY_ROLE_ARN" in c for c in build)
    assert build.index("export AWS_PROFILE=kimi-k3-deploy") < build.index('tools/ci-stack-secrets.sh "$STACK"') < len(build) - 1
    assert deploy_runner.PULUMI_CLI_VERSION == "3.272.0"


def test_the_first_deploy_command_prints_from_a_written_plan(prod_plan, tmp_path, capsys):
    from kimi_k3.cli import main

    (tmp_path / "state.json").write_text(json.dumps(state_document(prod_plan)))
    assert main(["first-deploy", "prod", "--plan", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# First deploy of stack prod (us-west-2)") and "pulumi up --stack prod --yes" in out
    assert main(["first-deploy", "dev", "--plan", str(tmp_path)]) == 2
    assert main(["first-deploy", "prod", "--plan", str(tmp_path / "missing")]) == 2


def test_the_namespace_rule_refuses_an_object_into_a_namespace_nothing_creates_or_reads():
    config_map = "kubernetes:core/v1:ConfigMap"
    orphan = Reg(config_map, urn(config_map, "dashboard"), {"metadata": {"name": "d", "namespace": "monitoring"}})
    timeline = _timeline(orphan)
    message = rules.namespaced_object_has_its_namespace(orphan, timeline.moment(orphan.urn), timeline)
    assert message and "namespace monitoring is neither created by the plan nor read" in message and "NamespaceLifecycle" in message
    namespace = Reg(NAMESPACE, urn(NAMESPACE, "ns"), {"metadata": {"name": "monitoring"}})
    unordered = Reg(config_map, urn(config_map, "dashboard"), {"metadata": {"name": "d", "namespace": "monitoring"}})
    timeline = _timeline(namespace, unordered)
    assert "after this object's create call" in rules.namespaced_object_has_its_namespace(unordered, timeline.moment(unordered.urn), timeline)
    ordered = Reg(config_map, urn(config_map, "dashboard"), {"metadata": {"name": "d", "namespace": "monitoring"}}, dependencies=[namespace.urn])
    timeline = _timeline(namespace, ordered)
    assert rules.namespaced_object_has_its_namespace(ordered, timeline.moment(ordered.urn), timeline) is None
    timeline = _timeline()
    timeline.reads.append((NAMESPACE, "monitoring"))
    timeline.add(orphan)
    assert rules.namespaced_object_has_its_namespace(orphan, timeline.moment(orphan.urn), timeline) is None
    for reg in (
        Reg(config_map, urn(config_map, "in-kube-system"), {"metadata": {"name": "x", "namespace": "kube-system"}}),
        Reg(RELEASE, urn(RELEASE, "creates"), {"chart": "x", "namespace": "own", "createNamespace": True}),
    ):
        timeline = _timeline(reg)
        assert rules.namespaced_object_has_its_namespace(reg, timeline.moment(reg.urn), timeline) is None
    release = Reg(RELEASE, urn(RELEASE, "into-missing"), {"chart": "x", "namespace": "missing"})
    timeline = _timeline(release)
    assert "namespace missing" in rules.namespaced_object_has_its_namespace(release, timeline.moment(release.urn), timeline)


def test_a_dashboard_namespace_of_its_own_is_read_as_pre_existing():
    plan = offline.run_stack(
        "prod", now=NOW, reservation=lambda s: fixture_for(s, availability_zone="us-west-2b", state="active"),
        config_overrides={"kimi-k3:grafanaDashboardNamespace": "grafana"},
    )
    assert plan.one("kubernetes:core/v1:ConfigMap", "kimi-k3-monitoring-dashboard").plain_inputs["metadata"]["namespace"] == "grafana"
