"""One DCGM host engine per GPU node, and the EFA plugin's image from the stack's own region.

The DCGM exporter connects (``-r``) to the host engine the EKS node monitoring agent runs on
every GPU node (its ``dcgm-server`` DaemonSet, vendored from the agent's chart), instead of
starting a second one; checked against the vendored chart defaults of both. The EFA device
plugin's image comes from the EKS add-on registry of the stack's region (the EKS user
guide's table, vendored as package data), not the chart's us-west-2 default.
"""

from __future__ import annotations

import re

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from kimi_k3 import offline
from kimi_k3.addons.gpu_plugins import (
    EFA_IMAGE_PATH,
    NODE_MONITORING_AGENT_DCGM_PORT,
    DcgmExporterArgs,
    EfaDevicePluginArgs,
    GpuNodePlugins,
    GpuNodePluginsArgs,
)
from kimi_k3.addons.image_registries import registries, registry_for
from kimi_k3.errors import UserError
from tests.chart_values import chart_defaults, unknown_keys
from tests.conftest import DATA, NOW, fixture_for

RELEASE = "kubernetes:helm.sh/v3:Release"


def _values(args: GpuNodePluginsArgs, suffix: str) -> dict:
    def program() -> None:
        provider = k8s.Provider("cluster-k8s", kubeconfig="{}")
        GpuNodePlugins("gpu", args, opts=pulumi.ResourceOptions(providers={"kubernetes": provider}))

    result = offline.OfflineEngine(now=NOW).run(program)
    return result.one(RELEASE, f"gpu-{suffix}").plain_inputs["values"]


def _agent_dcgm_server() -> dict:
    """The node monitoring agent's dcgm-server container, from its chart template (template expressions blanked)."""
    text = re.sub(r"\{\{-?[^}]*\}\}", "X", (DATA / "eks-node-monitoring-agent-v1.7.0.dcgm-daemonset.yaml").read_text())
    daemonset = yaml.safe_load("\n".join(line for line in text.splitlines() if line.strip() != "X"))
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    return container


# --- DCGM: the exporter uses the agent's host engine ------------------------------------------------


def test_the_exporter_connects_to_the_nodes_host_engine_on_the_nodes_ip():
    values = _values(GpuNodePluginsArgs(), "dcgm-exporter")
    assert values["arguments"] == ["-r", f"$(NODE_IP):{NODE_MONITORING_AGENT_DCGM_PORT}"]
    (env,) = values["extraEnv"]
    # the kubelet expands $(NODE_IP) in args from the container's own env: it must be defined there
    assert env == {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}


def test_the_host_engine_is_where_the_agent_runs_it():
    server = _agent_dcgm_server()
    assert server["command"] == ["/usr/bin/nv-hostengine"]
    assert server["args"] == ["-n", "-b", "ALL"]  # listens on every interface of its pod
    (port,) = server["ports"]
    assert port == {"containerPort": NODE_MONITORING_AGENT_DCGM_PORT, "hostPort": NODE_MONITORING_AGENT_DCGM_PORT}  # on the node's IP


def test_the_chart_takes_these_values_and_documents_the_remote_option():
    values = _values(GpuNodePluginsArgs(), "dcgm-exporter")
    defaults = chart_defaults("dcgm-exporter")
    assert unknown_keys({"arguments": values["arguments"], "extraEnv": values["extraEnv"]}, defaults) == []
    assert defaults["arguments"] == [] and defaults["extraEnv"] == []  # nothing of the chart's is replaced
    assert 'Use "-r", "<HOST>:<PORT>"' in (DATA / "dcgm-exporter.values.yaml").read_text()


def test_without_the_agent_the_exporter_embeds_its_own_engine():
    values = _values(GpuNodePluginsArgs(dcgm=DcgmExporterArgs(host_engine_port=None)), "dcgm-exporter")
    assert "arguments" not in values and "extraEnv" not in values


@pytest.mark.parametrize("port", [0, 70000])
def test_a_bad_host_engine_port_is_refused(port):
    with pytest.raises(UserError, match="dcgm.host_engine_port"):
        _values(GpuNodePluginsArgs(dcgm=DcgmExporterArgs(host_engine_port=port)), "dcgm-exporter")


def test_a_bool_host_engine_port_is_refused_at_the_door():
    with pytest.raises(UserError, match=r"DcgmExporterArgs: host_engine_port True \(bool\) is not accepted; expected an int"):
        DcgmExporterArgs(host_engine_port=True)  # type: ignore[arg-type]


# --- EFA: the image of the stack's region -----------------------------------------------------------


def test_the_registry_table_reads_every_region_of_the_page():
    table = registries()
    assert len(table) == 38
    assert table["us-east-1"] == "602401143452.dkr.ecr.us-east-1.amazonaws.com"
    assert table["af-south-1"] == "877085696533.dkr.ecr.af-south-1.amazonaws.com"  # opt-in regions have their own account
    assert table["cn-north-1"].endswith(".amazonaws.com.cn")


@pytest.mark.parametrize("region", ["us-east-1", "us-west-2", "eu-south-2"])
def test_the_efa_image_comes_from_the_regions_registry_with_the_charts_path(region):
    values = _values(GpuNodePluginsArgs(efa=EfaDevicePluginArgs(enabled=True, region=region)), "efa-device-plugin")
    default = chart_defaults("aws-efa-k8s-device-plugin")["image"]["repository"]
    assert default.split("/", 1)[1] == EFA_IMAGE_PATH  # only the registry host changes
    assert values["image"] == {"repository": f"{registry_for(region)}/{EFA_IMAGE_PATH}"}
    assert unknown_keys({"image": values["image"]}, chart_defaults("aws-efa-k8s-device-plugin")) == []


def test_without_a_region_the_charts_image_stays_and_an_unlisted_region_is_refused():
    assert "image" not in _values(GpuNodePluginsArgs(efa=EfaDevicePluginArgs(enabled=True)), "efa-device-plugin")
    with pytest.raises(UserError, match="efa.region"):
        _values(GpuNodePluginsArgs(efa=EfaDevicePluginArgs(enabled=True, region="xx-nowhere-1")), "efa-device-plugin")


def test_the_stack_pulls_the_efa_image_from_its_own_region():
    overrides = {"kimi-k3:efaEnabled": "true", "aws:region": "us-west-2", "kimi-k3:availabilityZones": ["us-west-2a", "us-west-2b"],
                 "kimi-k3:dockerHubPullThroughSecretArn": ""}  # the dev stack's secret is in us-east-1
    result = offline.run_stack("dev", now=NOW, reservation=lambda s: fixture_for(s, availability_zone="us-west-2a"), config_overrides=overrides)
    (efa,) = [r for r in result.by_type(RELEASE) if r.plain_inputs["chart"] == "aws-efa-k8s-device-plugin"]
    assert efa.plain_inputs["values"]["image"]["repository"] == "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin"
