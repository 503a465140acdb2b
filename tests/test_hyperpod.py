"""HyperPod path: the serving contract rendered as an ``InferenceEndpointConfig``.

The rendered objects are validated against the CRD schema of the Inference
Operator (``tests/data/inferenceendpointconfig-v1.schema.json``), plus a strict
walk that refuses fields the schema does not define (the API server would prune
them silently), and compared with the reference manifest of the AWS deployment guide.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from kimi_k3 import cli, offline
from kimi_k3.core import catalog
from kimi_k3.errors import UserError
from kimi_k3.hyperpod.endpoint import (
    OPERATOR_DEFAULT_DEPLOY_S,
    HyperPodInferenceEndpoint,
    HyperPodInferenceEndpointArgs,
    render_inference_endpoint_config,
)
from kimi_k3.serving.contracts import ServingContract
from kimi_k3.stack.settings import load_stack
from tests.builders import in_cluster, serving_contract
from tests.cli_helpers import assert_one_line_error
from tests.conftest import DATA, NOW
from tests.k8s_checks import validate_manifest
from tests.seed_deployment import SEED_ARGS, SEED_ENV

REVISION = "3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20"
S3_URI = f"s3://acme-weights/moonshotai/Kimi-K3/{REVISION}/"
CR_TYPE = "kubernetes:inference.sagemaker.aws.amazon.com/v1:InferenceEndpointConfig"

# The flags of SEED_ARGS that take a value.
SEED_FLAGS_WITH_VALUE = {"--model", "--load-format", "--tool-call-parser", "--reasoning-parser", "--served-model-name", "--moe-backend", "--tensor-parallel-size"}
SCHEMA = json.loads((DATA / "inferenceendpointconfig-v1.schema.json").read_text())


def contract(source: str = "huggingface", **engine: Any) -> ServingContract:
    return serving_contract(source, revision=REVISION, image="vllm/vllm-openai:kimi-k3", s3_uri=S3_URI, sha256_manifest=None, **engine)


def unknown_fields(value: Any, schema: dict, path: str = "") -> list[str]:
    """Paths in ``value`` that ``schema`` does not define (structural schemas prune them)."""
    found: list[str] = []
    if isinstance(value, dict) and "properties" in schema:
        for key, item in value.items():
            if key not in schema["properties"]:
                found.append(f"{path}.{key}")
            else:
                found += unknown_fields(item, schema["properties"][key], f"{path}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found += unknown_fields(item, schema["items"], f"{path}[{index}]")
    return found


def check(manifest: dict) -> None:
    validate_manifest(manifest, "1.34")
    assert unknown_fields(manifest["spec"], SCHEMA["properties"]["spec"], "spec") == []


def env_of(manifest: dict) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in manifest["spec"]["worker"]["environmentVariables"]}


@pytest.fixture(scope="module")
def hf() -> dict:
    return render_inference_endpoint_config(contract(), api_key_secret="kimik3-api-key", hf_token_secret="hf-token")


@pytest.fixture(scope="module")
def s3() -> dict:
    return render_inference_endpoint_config(contract("s3"), api_key_secret="kimik3-api-key", s3_region="us-west-2")


# --- schema --------------------------------------------------------------------


def test_hugging_face_object_validates_against_the_crd(hf):
    check(hf)
    assert (hf["apiVersion"], hf["kind"]) == ("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig")
    assert hf["metadata"] == {"name": "kimik3", "namespace": "default"}


def test_s3_object_validates_against_the_crd(s3):
    check(s3)


def test_the_strict_walk_catches_a_misspelt_field(hf):
    broken = json.loads(json.dumps(hf))
    broken["spec"]["worker"]["modelInvocationPort"]["contianerPort"] = 8000
    assert unknown_fields(broken["spec"], SCHEMA["properties"]["spec"], "spec") == ["spec.worker.modelInvocationPort.contianerPort"]


# --- the guide's manifest ------------------------------------------------------


@pytest.mark.parametrize("fixture", ["hf", "s3"])
def test_every_seed_argument_is_kept(fixture, request):
    manifest = request.getfixturevalue(fixture)
    args = manifest["spec"]["worker"]["args"]
    mount = manifest["spec"]["worker"]["modelVolumeMount"]["mountPath"]
    i = 0
    while i < len(SEED_ARGS):
        flag = SEED_ARGS[i]
        assert args.count(flag) == 1, flag
        if flag in SEED_FLAGS_WITH_VALUE:
            # The guide let vLLM download the model itself; here the operator stages the pinned revision at the mount.
            expected = mount if flag == "--model" else SEED_ARGS[i + 1]
            assert args[args.index(flag) + 1] == expected, flag
            i += 2
        else:
            i += 1


@pytest.mark.parametrize("fixture", ["hf", "s3"])
def test_every_seed_env_var_is_kept(fixture, request):
    env = env_of(request.getfixturevalue(fixture))
    for name, value in SEED_ENV.items():
        assert env[name] == value


def test_seed_shape_is_kept(hf):
    spec = hf["spec"]
    assert spec["modelName"] == "Kimi-K3"
    assert spec["instanceType"] == "ml.p6-b300.48xlarge"
    assert spec["invocationEndpoint"] == "v1/chat/completions"
    assert spec["replicas"] == 1
    assert spec["worker"]["image"] == "vllm/vllm-openai:kimi-k3"
    assert spec["worker"]["modelInvocationPort"] == {"containerPort": 8000, "name": "http"}
    assert spec["worker"]["modelVolumeMount"]["name"] == "model-weights"


# --- the contract on HyperPod ---------------------------------------------------


@pytest.mark.parametrize("fixture", ["hf", "s3"])
def test_vllm_loads_the_staged_directory_offline(fixture, request):
    manifest = request.getfixturevalue(fixture)
    worker = manifest["spec"]["worker"]
    assert worker["modelVolumeMount"]["mountPath"] == catalog.MODEL_MOUNT_PATH
    assert worker["args"][worker["args"].index("--model") + 1] == catalog.MODEL_MOUNT_PATH
    for flag in ("--revision", "--download-dir", "--tokenizer-revision", "--code-revision"):
        assert flag not in worker["args"]
    env = env_of(manifest)
    assert env["HF_HUB_OFFLINE"] == "1"
    assert "HF_HUB_CACHE" not in env


def test_metrics_are_scraped_on_the_api_port(hf):
    assert hf["spec"]["metrics"] == {"enabled": True, "modelMetrics": {"port": 8000, "path": "/metrics"}}


def test_hugging_face_source_pins_the_revision_and_prefetches(hf):
    source = hf["spec"]["modelSourceConfig"]
    assert source["modelSourceType"] == "huggingface"
    assert source["prefetchEnabled"] is True
    assert source["huggingFaceModel"] == {"modelId": "moonshotai/Kimi-K3", "commitSHA": REVISION, "tokenSecretRef": {"name": "hf-token", "key": "key"}}


def test_no_token_secret_ref_without_a_token_secret():
    manifest = render_inference_endpoint_config(contract())
    assert "tokenSecretRef" not in manifest["spec"]["modelSourceConfig"]["huggingFaceModel"]


def test_s3_source_names_bucket_prefix_and_region(s3):
    assert s3["spec"]["modelSourceConfig"] == {
        "modelSourceType": "s3",
        "s3Storage": {"bucketName": "acme-weights", "region": "us-west-2"},
        "modelLocation": f"moonshotai/Kimi-K3/{REVISION}",
        "prefetchEnabled": False,
    }


@pytest.mark.parametrize("fixture", ["hf", "s3"])
def test_deploy_time_covers_the_engine_start(fixture, request):
    manifest = request.getfixturevalue(fixture)
    budget = manifest["spec"]["maxDeployTimeInSeconds"]
    assert budget >= catalog.ENGINE_READY_TIMEOUT_S + 600
    assert budget > OPERATOR_DEFAULT_DEPLOY_S
    probe = manifest["spec"]["worker"]["probes"]["startupProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] >= catalog.ENGINE_READY_TIMEOUT_S


def test_deploy_time_follows_the_engine_ready_timeout_and_the_download():
    longer = render_inference_endpoint_config(contract("s3", ready_timeout_s=3 * 3600), s3_region="us-east-1")
    assert longer["spec"]["maxDeployTimeInSeconds"] >= 3 * 3600
    hf_budget = render_inference_endpoint_config(contract())["spec"]["maxDeployTimeInSeconds"]
    s3_budget = render_inference_endpoint_config(contract("s3"), s3_region="us-east-1")["spec"]["maxDeployTimeInSeconds"]
    assert hf_budget > s3_budget  # the operator downloads ~1.7 TB from Hugging Face first


def test_gpu_request_equals_limit_equals_the_instance_gpus(hf):
    resources = hf["spec"]["worker"]["resources"]
    assert resources == {"requests": {"nvidia.com/gpu": 8}, "limits": {"nvidia.com/gpu": 8}}


def test_api_key_comes_from_a_secret_ref_never_a_value(hf):
    entry = next(e for e in hf["spec"]["worker"]["environmentVariables"] if e["name"] == "VLLM_API_KEY")
    assert entry == {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "kimik3-api-key", "key": "key"}}}
    assert "VLLM_API_KEY" not in env_of(render_inference_endpoint_config(contract()))
    assert not any("--api-key" in a for a in hf["spec"]["worker"]["args"])


def test_health_checks_use_the_contract_health_path(hf):
    assert hf["spec"]["loadBalancer"] == {"healthCheckPath": "/health"}
    for probe in hf["spec"]["worker"]["probes"].values():
        assert probe["httpGet"] == {"path": "/health", "port": 8000}


# --- refusals --------------------------------------------------------------------


def test_multi_node_replica_is_refused_with_the_eks_advice():
    with pytest.raises(UserError, match="LeaderWorkerSet"):
        render_inference_endpoint_config(contract(pipeline_parallel_size=2))


def test_an_instance_that_cannot_hold_the_model_is_refused():
    with pytest.raises(UserError, match="multi-node"):
        render_inference_endpoint_config(contract(), instance_type="ml.p5en.48xlarge")


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"instance_type": "p6-b300.48xlarge"}, "instance_type"),
        ({"replicas": 0}, "replicas"),
        ({"name": "Kimi_K3"}, "name"),
        ({"api_key_secret": "Not A Name"}, "api_key_secret"),
        ({"invocation_endpoint": "/v1/chat/completions"}, "invocation_endpoint"),
    ],
)
def test_bad_arguments_are_refused(changes, message):
    with pytest.raises(UserError, match=message):
        render_inference_endpoint_config(contract(), **changes)


def test_s3_weights_need_a_region_and_no_hf_token():
    with pytest.raises(UserError, match="s3_region"):
        render_inference_endpoint_config(contract("s3"))
    with pytest.raises(UserError, match="hf_token_secret"):
        render_inference_endpoint_config(contract("s3"), s3_region="us-east-1", hf_token_secret="hf-token")


# --- the Pulumi component ----------------------------------------------------------


def run_component(**changes: Any) -> tuple[offline.PlanResult, dict]:
    built: dict[str, Any] = {}

    def program() -> None:
        provider = k8s.Provider("hyperpod-k8s", kubeconfig="{}")
        args = HyperPodInferenceEndpointArgs(contract=contract(), api_key_secret="kimik3-api-key")
        built["provider"] = provider
        built["component"] = HyperPodInferenceEndpoint(
            "kimik3", dataclasses.replace(args, **changes), opts=pulumi.ResourceOptions(providers={"kubernetes": provider})
        )

    return offline.OfflineEngine(now=NOW, region="us-east-1").run(program), built


def test_component_declares_the_rendered_object_through_the_given_provider():
    result, built = run_component(namespace="inference")
    component = built["component"]
    parent = result.one("kimi-k3:index:HyperPodInferenceEndpoint", "kimik3")
    (resource,) = result.children_of(parent)
    assert resource.type == CR_TYPE and resource.name == "kimik3-endpoint-config"
    (manifest,) = [m for m in result.kubernetes_objects() if m["kind"] == "InferenceEndpointConfig"]
    expected = render_inference_endpoint_config(contract(), name="kimik3", namespace="inference", api_key_secret="kimik3-api-key")
    assert offline.redact_numbers(manifest) == expected == component.manifest
    check(manifest)
    cr = component.endpoint_config
    assert cr.get_provider(cr._type) is built["provider"]


def test_component_without_a_provider_declares_nothing():
    engine = offline.OfflineEngine(now=NOW, region="us-east-1")
    args = HyperPodInferenceEndpointArgs(contract=contract())
    with pytest.raises(Exception, match="Kubernetes provider"):
        engine.run(lambda: HyperPodInferenceEndpoint("kimik3", args))
    assert not [r for r in engine.resources if r.type in (CR_TYPE, "kimi-k3:index:HyperPodInferenceEndpoint")]


def test_component_refuses_a_multi_node_contract_before_declaring():
    engine = offline.OfflineEngine(now=NOW, region="us-east-1")

    def program() -> None:
        HyperPodInferenceEndpoint("kimik3", HyperPodInferenceEndpointArgs(contract=contract(pipeline_parallel_size=2)), opts=in_cluster("hyperpod-k8s"))

    with pytest.raises(Exception, match="LeaderWorkerSet"):
        engine.run(program)
    assert not engine.resources or all(r.type.startswith("pulumi:providers:") for r in engine.resources)


# --- settings and CLI ------------------------------------------------------------


def test_serving_contract_follows_the_stack_settings():
    """The contract the stack serves is built from the stack file's serving keys (defaults where unset)."""
    from kimi_k3.serving.engine_profiles import RECIPES
    from kimi_k3.stack.config_keys import CONFIG_KEYS
    from kimi_k3.stack.settings import read_stack_file

    values, _ = read_stack_file("prod")

    def key(name):
        raw = values.get(f"kimi-k3:{name}")
        return CONFIG_KEYS[name].default if raw is None else raw

    built = load_stack("prod").serving.contract
    assert str(built.image.reference) == key("servingImage")
    assert (built.weights.model_id, built.weights.revision, built.weights.source, built.weights.s3_uri or "") == (
        key("modelId"), key("modelRevision"), key("weightsSource"), key("weightsS3Uri"))
    assert (built.weights.sha256_manifest or "") == key("weightsSha256Manifest")
    e = built.engine
    assert (e.tensor_parallel_size, e.pipeline_parallel_size, e.max_model_len, e.kv_cache_dtype, e.ready_timeout_s) == (
        int(key("tensorParallelSize")), int(key("pipelineParallelSize")), int(key("maxModelLen")),
        key("kvCacheDtype") or RECIPES[e.profile_name].kv_cache_dtype,  # empty: the engine profile's
        int(key("engineReadyTimeoutSeconds")),
    )


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_cli_writes_a_file_that_validates(stack, tmp_path, capsys):
    out = tmp_path / "kimi-k3.yaml"
    assert cli.main(["hyperpod", stack, "--out", str(out)]) == 0
    manifest = yaml.safe_load(out.read_text())
    check(manifest)
    settings = load_stack(stack)
    assert manifest["spec"]["modelSourceConfig"]["modelSourceType"] == settings.serving.contract.weights.source
    assert manifest["spec"]["worker"]["image"] == settings.serving.contract.image.image
    assert env_of(manifest)["VLLM_API_KEY"] == {"secretKeyRef": {"name": "kimik3-api-key", "key": "key"}}
    if settings.serving.contract.weights.source == "s3":
        assert manifest["spec"]["modelSourceConfig"]["s3Storage"]["region"] == settings.region
    err = capsys.readouterr().err
    assert f"kubectl apply -f {out}" in err and "kubectl create secret generic kimik3-api-key" in err


def test_cli_prints_yaml_for_kubectl_apply_stdin(capsys):
    assert cli.main(["hyperpod", "dev", "--no-api-key", "--namespace", "inference"]) == 0
    manifest = yaml.safe_load(capsys.readouterr().out)
    check(manifest)
    assert manifest["metadata"]["namespace"] == "inference"
    assert "VLLM_API_KEY" not in env_of(manifest)


def test_cli_bad_stack_is_one_line_and_exit_2(capsys):
    assert cli.main(["hyperpod", "no-such-stack"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "no-such-stack" in assert_one_line_error(err)
