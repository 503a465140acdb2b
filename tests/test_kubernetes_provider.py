"""One Kubernetes-provider convention: the provider comes through ``opts``; without one, every
Kubernetes-touching component refuses before declaring anything (never the ambient kubeconfig)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pytest

from kimi_k3 import offline
from kimi_k3.addons.gpu_plugins import GpuNodePlugins, GpuNodePluginsArgs
from kimi_k3.addons.load_balancer_controller import LoadBalancerController, LoadBalancerControllerArgs
from kimi_k3.addons.lws_controller import LwsController, LwsControllerArgs
from kimi_k3.cluster.kubernetes_provider import kubernetes_provider
from kimi_k3.errors import ComponentInputError
from kimi_k3.hyperpod.endpoint import HyperPodInferenceEndpoint, HyperPodInferenceEndpointArgs
from kimi_k3.serving.lws import VllmLeaderWorkerSet, VllmLeaderWorkerSetArgs
from kimi_k3.serving.vllm import VllmServer, VllmServerArgs
from tests.builders import serving_contract
from tests.conftest import NOW

LBC_ARGS = LoadBalancerControllerArgs(cluster_name="kimi-k3-dev", region="us-east-1", vpc_id="vpc-0a1b2c3d4e5f60718")
KUBERNETES_COMPONENTS = {
    "GpuNodePlugins": lambda opts: GpuNodePlugins("gpu-plugins", GpuNodePluginsArgs(), opts=opts),
    "LoadBalancerController": lambda opts: LoadBalancerController("lbc", LBC_ARGS, opts=opts),
    "LwsController": lambda opts: LwsController("lws", LwsControllerArgs(), opts=opts),
    "VllmServer": lambda opts: VllmServer("kimi", VllmServerArgs(contract=serving_contract(), api_key=pulumi.Output.secret("k")), opts=opts),
    "VllmLeaderWorkerSet": lambda opts: VllmLeaderWorkerSet(
        "kimi",
        VllmLeaderWorkerSetArgs(
            contract=serving_contract("s3", tensor_parallel_size=8, pipeline_parallel_size=2), api_key=pulumi.Output.secret("k"),
            instance_type="p5en.48xlarge", cluster_name="kimi-k3-dev", aws_region="us-east-1",
        ),
        opts=opts,
    ),
    "HyperPodInferenceEndpoint": lambda opts: HyperPodInferenceEndpoint(
        "kimik3", HyperPodInferenceEndpointArgs(contract=serving_contract(sha256_manifest=None)), opts=opts
    ),
}


@pytest.mark.parametrize("component", sorted(KUBERNETES_COMPONENTS))
def test_without_a_kubernetes_provider_nothing_is_declared(component):
    engine = offline.OfflineEngine(now=NOW, region="us-east-1")
    with pytest.raises(ComponentInputError) as caught:
        engine.run(lambda: KUBERNETES_COMPONENTS[component](None))
    assert caught.value.component == component
    assert [e["property_path"] for e in caught.value.errors] == ["opts.providers"]
    assert "ambient kubeconfig" in str(caught.value)
    assert engine.resources == []


@pytest.mark.parametrize("component", sorted(KUBERNETES_COMPONENTS))
@pytest.mark.parametrize("how", ["providers map", "providers list", "provider", "parent"])
def test_the_provider_in_opts_reaches_every_kubernetes_child(component, how):
    engine = offline.OfflineEngine(now=NOW, region="us-east-1")

    def program() -> None:
        provider = k8s.Provider("target", kubeconfig="{}")
        if how == "parent":
            holder = pulumi.ComponentResource("test:index:Holder", "holder", None, pulumi.ResourceOptions(providers={"kubernetes": provider}))
            opts = pulumi.ResourceOptions(parent=holder)
        else:
            opts = {
                "providers map": pulumi.ResourceOptions(providers={"kubernetes": provider}),
                "providers list": pulumi.ResourceOptions(providers=[provider]),
                "provider": pulumi.ResourceOptions(provider=provider),
            }[how]
        KUBERNETES_COMPONENTS[component](opts)

    result = engine.run(program)
    kubernetes = [(r.type, r.provider) for r in result.resources if r.type.startswith("kubernetes:")]
    assert kubernetes, [r.type for r in result.resources]
    assert all("pulumi:providers:kubernetes::target::" in p for _, p in kubernetes), kubernetes


def test_an_aws_provider_alone_is_not_a_kubernetes_provider():
    engine = offline.OfflineEngine(now=NOW, region="us-east-1")
    found: list[object] = []

    def program() -> None:
        import pulumi_aws as aws

        found.append(kubernetes_provider(pulumi.ResourceOptions(provider=aws.Provider("aws", region="us-east-1"))))
        found.append(kubernetes_provider(None))

    engine.run(program)
    assert found == [None, None]
