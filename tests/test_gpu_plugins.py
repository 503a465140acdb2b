"""GpuNodePlugins: pinned Helm releases that actually schedule on the GPU nodes.

Every test runs the component under the offline engine and reads the recorded
``kubernetes:helm.sh/v3:Release`` inputs, i.e. exactly what ``pulumi up`` would
hand to Helm. Values are checked against the charts' own ``values.yaml`` copies in
``tests/data`` so a misspelt key fails here instead of being ignored by Helm.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from kimi_k3 import offline
from kimi_k3.addons.gpu_plugins import DcgmExporterArgs, EfaDevicePluginArgs, GpuNodePlugins, GpuNodePluginsArgs, NvidiaDevicePluginArgs
from kimi_k3.core import catalog, labels
from kimi_k3.errors import UserError
from tests.chart_values import chart_defaults, unknown_keys, values_copy_version
from tests.conftest import NOW
from tests.k8s_checks import validate_manifest

RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
GPU_TOLERATION = dict(labels.GPU_TOLERATION)
CHARTS = {
    "nvidia-device-plugin": catalog.NVIDIA_DEVICE_PLUGIN_CHART,
    "efa-device-plugin": catalog.EFA_DEVICE_PLUGIN_CHART,
    "dcgm-exporter": catalog.DCGM_EXPORTER_CHART,
}


def plan(**changes: Any) -> tuple[offline.PlanResult, GpuNodePlugins, k8s.Provider]:
    """Run the component with default args (EFA on) plus ``changes``; return plan, component and provider."""
    engine = offline.OfflineEngine(now=NOW, region="us-east-1")
    built: dict[str, Any] = {}

    def program() -> None:
        provider = k8s.Provider("cluster-k8s", kubeconfig="{}")
        args = GpuNodePluginsArgs(efa=EfaDevicePluginArgs(enabled=True))
        built["provider"] = provider
        built["component"] = GpuNodePlugins("gpu", dataclasses.replace(args, **changes), opts=pulumi.ResourceOptions(providers={"kubernetes": provider}))

    result = engine.run(program)
    return result, built["component"], built["provider"]


@pytest.fixture(scope="module")
def default_plan() -> tuple[offline.PlanResult, GpuNodePlugins, k8s.Provider]:
    return plan()


def values(result: offline.PlanResult, suffix: str) -> dict:
    return result.one(RELEASE, f"gpu-{suffix}").plain_inputs["values"]


# --- what gets installed -------------------------------------------------------


@pytest.mark.parametrize("suffix", sorted(CHARTS))
def test_release_is_the_pinned_official_chart_in_our_namespace(default_plan, suffix):
    result, _, _ = default_plan
    release = result.one(RELEASE, f"gpu-{suffix}").plain_inputs
    chart, repo, version = CHARTS[suffix].name, CHARTS[suffix].repository, CHARTS[suffix].version
    assert release["chart"] == chart
    assert release["name"] == chart
    assert release["repositoryOpts"] == {"repo": repo}
    assert release["version"].lstrip("v") == version
    assert release["namespace"] == "gpu-plugins"
    assert release["createNamespace"] is False


def test_efa_version_is_spelt_the_way_eks_charts_publishes_it(default_plan):
    # aws/eks-charts stable/aws-efa-k8s-device-plugin/Chart.yaml: `version: v0.5.30`.
    result, _, _ = default_plan
    assert result.one(RELEASE, "gpu-efa-device-plugin").plain_inputs["version"] == "v" + catalog.EFA_DEVICE_PLUGIN_CHART.version.lstrip("v")


def test_namespace_is_privileged_and_valid(default_plan):
    result, component, _ = default_plan
    (namespace,) = [m for m in result.kubernetes_objects() if m["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == "gpu-plugins"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    validate_manifest(namespace, "1.34")
    assert component.namespace is not None


@pytest.mark.parametrize("suffix", sorted(CHARTS))
def test_every_plugin_tolerates_the_gpu_taint(default_plan, suffix):
    result, _, _ = default_plan
    assert values(result, suffix)["tolerations"] == [GPU_TOLERATION]
    assert GPU_TOLERATION == {"key": labels.GPU_TAINT_KEY, "operator": "Exists", "effect": labels.GPU_TAINT_EFFECT}


def test_nvidia_plugin_requires_gpu_node_label_instead_of_nfd_labels(default_plan):
    result, _, _ = default_plan
    terms = values(result, "nvidia-device-plugin")["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": labels.GPU_PRESENT_LABEL, "operator": "In", "values": ["true"]}]}]
    assert labels.GPU_NODE_LABELS[labels.GPU_PRESENT_LABEL] == "true"  # the node group sets what we select on


@pytest.mark.parametrize("suffix", ["efa-device-plugin", "dcgm-exporter"])
def test_efa_and_dcgm_run_on_gpu_nodes_only(default_plan, suffix):
    result, _, _ = default_plan
    assert values(result, suffix)["nodeSelector"] == {labels.GPU_PRESENT_LABEL: "true"}


@pytest.mark.parametrize("suffix", ["nvidia-device-plugin", "dcgm-exporter"])
def test_priority_class_is_system_node_critical(default_plan, suffix):
    # The EFA chart hard-codes system-node-critical in its DaemonSet template (no value for it).
    result, _, _ = default_plan
    assert values(result, suffix)["priorityClassName"] == "system-node-critical"


def test_custom_node_selector_reaches_every_plugin():
    result, _, _ = plan(node_selector={labels.GPU_NODE_POOL_LABEL: labels.GPU_NODE_POOL})
    expected = [{"key": labels.GPU_NODE_POOL_LABEL, "operator": "In", "values": [labels.GPU_NODE_POOL]}]
    nvidia = values(result, "nvidia-device-plugin")["affinity"]["nodeAffinity"]
    assert nvidia["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"] == expected
    assert values(result, "efa-device-plugin")["nodeSelector"] == {labels.GPU_NODE_POOL_LABEL: labels.GPU_NODE_POOL}
    assert values(result, "dcgm-exporter")["nodeSelector"] == {labels.GPU_NODE_POOL_LABEL: labels.GPU_NODE_POOL}


def test_children_use_the_given_provider_and_hang_under_the_component(default_plan):
    result, component, provider = default_plan
    parent = result.one("kimi-k3:index:GpuNodePlugins", "gpu")
    children = result.children_of(parent)
    assert sorted(r.type for r in children) == [NAMESPACE, RELEASE, RELEASE, RELEASE]
    for resource in (component.namespace, component.nvidia_device_plugin, component.efa_device_plugin, component.dcgm_exporter):
        assert resource is not None
        assert resource.get_provider(resource._type) is provider


# --- switches and user values ---------------------------------------------------


def test_efa_and_dcgm_follow_their_switches():
    result, component, _ = plan(efa=EfaDevicePluginArgs(enabled=False), dcgm=DcgmExporterArgs(enabled=False))
    assert [r.name for r in result.by_type(RELEASE)] == ["gpu-nvidia-device-plugin"]
    assert component.efa_device_plugin is None and component.dcgm_exporter is None


def test_efa_is_off_by_default_and_dcgm_on():
    args = GpuNodePluginsArgs()
    assert args.efa.enabled is False
    assert args.dcgm.enabled is True
    assert args.nvidia.enabled is True


def test_nvidia_plugin_can_be_turned_off():
    result, component, _ = plan(nvidia=NvidiaDevicePluginArgs(enabled=False))
    assert "gpu-nvidia-device-plugin" not in [r.name for r in result.by_type(RELEASE)]
    assert component.nvidia_device_plugin is None


@pytest.mark.parametrize("enabled", [True, False])
def test_dcgm_service_monitor_follows_its_arg(enabled):
    result, _, _ = plan(dcgm=DcgmExporterArgs(service_monitor=enabled))
    assert values(result, "dcgm-exporter")["serviceMonitor"] == {"enabled": enabled}


def test_dcgm_service_monitor_is_off_by_default(default_plan):
    # The chart defaults to true, which fails the install on a cluster without the Prometheus Operator CRD.
    result, _, _ = default_plan
    assert values(result, "dcgm-exporter")["serviceMonitor"]["enabled"] is False
    assert chart_defaults("dcgm-exporter")["serviceMonitor"]["enabled"] is True


def test_versions_are_overridable():
    result, _, _ = plan(
        nvidia=NvidiaDevicePluginArgs(version="0.19.0"),
        efa=EfaDevicePluginArgs(enabled=True, version="0.5.12"),
        dcgm=DcgmExporterArgs(version="4.7.1"),
    )
    assert result.one(RELEASE, "gpu-nvidia-device-plugin").plain_inputs["version"] == "0.19.0"
    assert result.one(RELEASE, "gpu-efa-device-plugin").plain_inputs["version"] == "v0.5.12"
    assert result.one(RELEASE, "gpu-dcgm-exporter").plain_inputs["version"] == "4.7.1"


def test_extra_values_are_deep_merged_and_win():
    result, _, _ = plan(
        nvidia=NvidiaDevicePluginArgs(extra_values={"priorityClassName": "my-class", "resources": {"limits": {"memory": "64Mi"}}}),
        dcgm=DcgmExporterArgs(extra_values={"serviceMonitor": {"interval": "15s"}, "tolerations": [{"operator": "Exists"}]}),
    )
    nvidia = values(result, "nvidia-device-plugin")
    assert nvidia["priorityClassName"] == "my-class"
    assert nvidia["resources"] == {"limits": {"memory": "64Mi"}}
    assert nvidia["tolerations"] == [GPU_TOLERATION]  # untouched keys stay ours
    dcgm = values(result, "dcgm-exporter")
    assert dcgm["serviceMonitor"] == {"enabled": False, "interval": "15s"}  # merged, not replaced
    assert dcgm["tolerations"] == [{"operator": "Exists"}]  # lists are replaced, as Helm does


def test_existing_namespace_is_used_without_declaring_it():
    result, component, _ = plan(namespace="kube-system", create_namespace=False)
    assert result.by_type(NAMESPACE) == []
    assert component.namespace is None
    assert {r.plain_inputs["namespace"] for r in result.by_type(RELEASE)} == {"kube-system"}


# --- values checked against the charts' own defaults ----------------------------

VALUES_COPIES = {
    "nvidia-device-plugin": "nvidia-device-plugin",
    "efa-device-plugin": "aws-efa-k8s-device-plugin",
    "dcgm-exporter": "dcgm-exporter",
}


@pytest.mark.parametrize("suffix", sorted(VALUES_COPIES))
def test_every_value_we_set_exists_in_the_chart(default_plan, suffix):
    result, _, _ = default_plan
    assert unknown_keys(values(result, suffix), chart_defaults(VALUES_COPIES[suffix])) == []


@pytest.mark.parametrize("suffix", sorted(VALUES_COPIES))
def test_values_copy_matches_the_pinned_chart_version(default_plan, suffix):
    result, _, _ = default_plan
    pinned = result.one(RELEASE, f"gpu-{suffix}").plain_inputs["version"].lstrip("v")
    copy = values_copy_version(VALUES_COPIES[suffix])
    assert pinned == copy, (
        f"{VALUES_COPIES[suffix]} is pinned to {pinned} but tests/data/{VALUES_COPIES[suffix]}.values.yaml is from {copy}: "
        "update the copy (and its row in tests/data/README.md) together with the pin in components/core/catalog.py"
    )


@pytest.mark.parametrize(
    "suffix, typo, path",
    [
        ("nvidia-device-plugin", {"toleration": [GPU_TOLERATION]}, "toleration"),
        ("efa-device-plugin", {"nodeSelectors": {"a": "b"}}, "nodeSelectors"),
        ("dcgm-exporter", {"serviceMonitor": {"enable": True}}, "serviceMonitor.enable"),
    ],
)
def test_a_misspelt_value_is_caught(suffix, typo, path):
    field_name, sub = {
        "nvidia-device-plugin": ("nvidia", NvidiaDevicePluginArgs(extra_values=typo)),
        "efa-device-plugin": ("efa", EfaDevicePluginArgs(enabled=True, extra_values=typo)),
        "dcgm-exporter": ("dcgm", DcgmExporterArgs(extra_values=typo)),
    }[suffix]
    result, _, _ = plan(**{field_name: sub})
    assert unknown_keys(values(result, suffix), chart_defaults(VALUES_COPIES[suffix])) == [path]


# --- refused before anything is declared ----------------------------------------


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"efa": EfaDevicePluginArgs(enabled=True, version="0.5.9")}, "0.5.10 or newer"),
        ({"nvidia": NvidiaDevicePluginArgs(version="latest")}, "'latest' is not accepted"),
        ({"namespace": "kube-system"}, "create_namespace=False"),
        ({"namespace": "GPU_plugins"}, "not a valid Kubernetes namespace"),
        ({"node_selector": {}}, "node_selector is empty"),
        ({"providers": {}}, "Kubernetes provider"),
    ],
)
def test_bad_args_are_refused_before_any_resource(changes, message):
    changes = dict(changes)
    engine = offline.OfflineEngine(now=NOW, region="us-east-1")

    def program() -> None:
        provider = k8s.Provider("cluster-k8s", kubeconfig="{}")
        args = GpuNodePluginsArgs(efa=EfaDevicePluginArgs(enabled=True))
        providers = changes.pop("providers", {"kubernetes": provider})
        GpuNodePlugins("gpu", dataclasses.replace(args, **changes), opts=pulumi.ResourceOptions(providers=providers))

    with pytest.raises(UserError, match=message):
        engine.run(program)
    assert [r.type for r in engine.resources] == ["pulumi:providers:kubernetes"]


def test_extra_values_that_are_not_a_mapping_are_refused_as_the_args_are_built():
    with pytest.raises(UserError, match=r"^DcgmExporterArgs: extra_values \['tolerations'\] \(list\) is not accepted; expected a mapping of str"):
        DcgmExporterArgs(extra_values=["tolerations"])  # type: ignore[arg-type]


def test_old_efa_version_is_fine_when_efa_is_off():
    result, _, _ = plan(efa=EfaDevicePluginArgs(enabled=False, version="0.5.9"))
    assert "gpu-efa-device-plugin" not in [r.name for r in result.by_type(RELEASE)]
