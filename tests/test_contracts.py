"""The serving contracts: validation, the vLLM command line and environment."""

from __future__ import annotations

import pytest

from kimi_k3.errors import UserError
from kimi_k3.serving.contracts import ApiContract, EngineProfile, ImageContract, ServingContract, WeightsContract, contract_summary
from tests.seed_deployment import SEED_ARGS, SEED_ENV, flag_values

REVISION = "0123456789abcdef0123456789abcdef01234567"
DIGEST = "sha256:" + "ab" * 32

def hf_contract(**engine) -> ServingContract:
    return ServingContract(
        image=ImageContract.parse(f"vllm/vllm-openai@{DIGEST}"),
        weights=WeightsContract(revision=REVISION),
        engine=EngineProfile(**engine),
    )


def s3_contract(**weights) -> ServingContract:
    return ServingContract(
        image=ImageContract.parse("vllm/vllm-openai:kimi-k3"),
        weights=WeightsContract(revision=REVISION, source="s3", s3_uri="s3://model-bucket/kimi-k3/rev-0123/", **weights),
    )


# --- image ----------------------------------------------------------------------


def test_image_pinned_by_digest_is_pulled_if_not_present():
    image = ImageContract.parse(f"vllm/vllm-openai:kimi-k3@{DIGEST}")
    assert image.image == f"vllm/vllm-openai:kimi-k3@{DIGEST}"
    assert image.digest == DIGEST
    assert image.pull_policy == "IfNotPresent"


def test_floating_tag_is_always_pulled():
    image = ImageContract.parse("vllm/vllm-openai:kimi-k3")
    assert image.digest is None
    assert image.pull_policy == "Always"


@pytest.mark.parametrize("ref", ["vllm/vllm-openai", "Vllm/Bad:tag", "repo@sha256:1234"])
def test_image_without_tag_or_digest_is_refused(ref):
    with pytest.raises(UserError, match="image contract"):
        ImageContract.parse(ref)


# --- weights --------------------------------------------------------------------


def test_weights_defaults_follow_the_three_contracts():
    w = WeightsContract(revision=REVISION)
    assert (w.model_id, w.source, w.mount_path, w.expected_size_gb) == ("moonshotai/Kimi-K3", "huggingface", "/models/kimi-k3", 1560)
    assert w.s3_bucket is None and w.s3_prefix is None
    assert w.weights_dir == f"/models/kimi-k3/models--moonshotai--Kimi-K3/snapshots/{REVISION}"


def test_s3_uri_is_split_into_bucket_and_prefix():
    w = WeightsContract(revision=REVISION, source="s3", s3_uri="s3://model-bucket/kimi-k3/rev-0123/")
    assert (w.s3_bucket, w.s3_prefix) == ("model-bucket", "kimi-k3/rev-0123/")
    assert w.weights_dir == "/models/kimi-k3"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"revision": "main"}, "revision 'main'"),
        ({"revision": REVISION.upper()}, "40-hex"),
        ({"model_id": "Kimi-K3"}, "model_id"),
        ({"source": "fsx"}, "accepted: huggingface, s3"),
        ({"source": "s3"}, "s3_uri None"),
        ({"source": "s3", "s3_uri": "s3://bucket/prefix"}, "trailing slash"),
        ({"source": "s3", "s3_uri": "s3://bucket/pre*/"}, "no wildcards"),
        ({"s3_uri": "s3://bucket/prefix/"}, "only used when weights.source is s3"),
        ({"mount_path": "models"}, "mount_path"),
        ({"mount_path": "/"}, "mount_path"),
        ({"expected_size_gb": 0}, "expected_size_gb"),
        ({"sha256_manifest": "/etc/passwd"}, "relative"),
        ({"sha256_manifest": "../SUMS"}, "relative"),
        ({"sha256_manifest": "SUMS; rm -rf /"}, "relative"),
    ],
)
def test_bad_weights_are_refused_with_the_field_named(changes, message):
    with pytest.raises(UserError, match="weights contract") as err:
        WeightsContract(**{"revision": REVISION, **changes})
    assert message in str(err.value)


# --- api / engine ---------------------------------------------------------------


def test_api_defaults():
    api = ApiContract()
    assert (api.port, api.served_model_name, api.health_path, api.models_path, api.metrics_path) == (
        8000, "Kimi-K3", "/health", "/v1/models", "/metrics",
    )
    assert api.tool_call_parser == api.reasoning_parser == "kimi_k3"


@pytest.mark.parametrize("changes", [{"port": 80}, {"port": 70000}, {"served_model_name": "Kimi K3"}, {"health_path": "health"}, {"tool_call_parser": "x y"}])
def test_bad_api_is_refused(changes):
    with pytest.raises(UserError, match="api contract"):
        ApiContract(**changes)


def test_a_str_for_extra_args_is_refused_as_the_profile_is_built():
    with pytest.raises(UserError, match=r"^EngineProfile: extra_args '--foo' \(str\) is not accepted; expected a sequence of str"):
        EngineProfile(extra_args="--foo")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"gpu_memory_utilization": 0.99}, "gpu_memory_utilization"),
        ({"max_model_len": 2_000_000}, "max_model_len"),
        ({"kv_cache_dtype": "int4"}, "kv_cache_dtype"),
        ({"tensor_parallel_size": 0}, "tensor_parallel_size"),
        ({"extra_args": ("--api-key=secret",)}, "pod spec"),
        ({"extra_args": ("--max-model-len", "1024")}, "set by the contract"),
        ({"extra_args": ("--trust-remote-code",)}, "set by the contract"),
    ],
)
def test_bad_engine_profile_is_refused(changes, message):
    with pytest.raises(UserError, match="engine profile") as err:
        EngineProfile(**changes)
    assert message in str(err.value)


def test_gpus_per_pod_requires_tp_times_pp_to_fill_whole_nodes():
    assert hf_contract().gpus_per_pod(8) == 8
    assert hf_contract(pipeline_parallel_size=2).nodes_per_replica(8) == 2
    with pytest.raises(UserError, match=r"tensor_parallel_size=4 must equal the 8 GPUs of one node.*TP x PP = 4"):
        hf_contract(tensor_parallel_size=4).gpus_per_pod(8)


# --- the command line -----------------------------------------------------------


def test_every_seed_argument_is_kept_for_hugging_face_weights():
    args = hf_contract().vllm_args()
    got, seed = flag_values(args), flag_values(SEED_ARGS)
    for flag, value in seed.items():
        assert flag in got, f"seed flag {flag} missing"
        assert got[flag] == value, f"{flag}: {got[flag]!r} != seed {value!r}"
    assert SEED_ENV.items() <= hf_contract().vllm_env().items()


def test_recipe_and_pinning_arguments():
    got = flag_values(hf_contract().vllm_args())
    assert got["--revision"] == got["--tokenizer-revision"] == got["--code-revision"] == REVISION
    assert got["--download-dir"] == "/models/kimi-k3"
    assert (got["--gpu-memory-utilization"], got["--max-model-len"], got["--kv-cache-dtype"]) == ("0.95", "262144", "fp8")
    assert (got["--host"], got["--port"]) == ("0.0.0.0", "8000")
    assert "--api-key" not in got and "--pipeline-parallel-size" not in got


def test_s3_weights_load_from_the_stable_mount_path():
    contract = s3_contract()
    got = flag_values(contract.vllm_args())
    assert got["--model"] == "/models/kimi-k3"
    assert "--revision" not in got and "--download-dir" not in got
    seed = flag_values(SEED_ARGS)
    del seed["--model"]
    assert seed.items() <= got.items()
    env = contract.vllm_env()
    assert env["HF_HUB_OFFLINE"] == "1" and "HF_HUB_CACHE" not in env


def test_extra_args_come_last_and_engine_values_flow_through():
    contract = hf_contract(extra_args=("--max-num-seqs", "64", "--enable-chunked-prefill"), gpu_memory_utilization=0.9, max_model_len=131072, kv_cache_dtype="auto", pipeline_parallel_size=2, ready_timeout_s=5400)
    args = contract.vllm_args()
    assert args[-3:] == ["--max-num-seqs", "64", "--enable-chunked-prefill"]
    got = flag_values(args)
    assert (got["--gpu-memory-utilization"], got["--max-model-len"], got["--kv-cache-dtype"], got["--pipeline-parallel-size"]) == ("0.9", "131072", "auto", "2")
    assert contract.vllm_env()["VLLM_ENGINE_READY_TIMEOUT_S"] == "5400"


def test_parsers_can_be_turned_off():
    contract = ServingContract(ImageContract.parse("a/b:c"), WeightsContract(revision=REVISION), ApiContract(tool_call_parser=None, reasoning_parser=None))
    got = flag_values(contract.vllm_args())
    assert not {"--tool-call-parser", "--enable-auto-tool-choice", "--reasoning-parser"} & got.keys()


def test_env_pins_the_hugging_face_cache_and_ready_timeout():
    env = hf_contract().vllm_env()
    assert env == {
        "VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION": "1",
        "VLLM_ENGINE_READY_TIMEOUT_S": "3600",
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": "/models/kimi-k3",
        "VLLM_ENABLE_STARTUP_PLAN": "1",
        "FASTSAFETENSORS_ODIRECT": "0",
    }
    assert "FASTSAFETENSORS_ODIRECT" not in hf_contract(load_format="auto").vllm_env()  # vLLM's own loader reads through mmap


def test_probe_budget_covers_the_engine_ready_timeout():
    contract = hf_contract(ready_timeout_s=3600)
    assert contract.startup_budget_s() == 4200
    threshold = contract.probe_failure_threshold(period_s=10)
    assert threshold == 420 and threshold * 10 >= 3600
    assert hf_contract(ready_timeout_s=3601).probe_failure_threshold(period_s=10, margin_s=0) == 361


def test_contract_type_errors_are_user_errors():
    with pytest.raises(UserError, match=r"ServingContract: weights .moonshotai/Kimi-K3. \(str\) is not accepted; expected a WeightsContract"):
        ServingContract(ImageContract.parse("a/b:c"), "moonshotai/Kimi-K3")  # type: ignore[arg-type]


def test_summary_for_stack_outputs():
    assert contract_summary(hf_contract()) == {
        "image": f"vllm/vllm-openai@{DIGEST}",
        "imageDigest": DIGEST,
        "modelId": "moonshotai/Kimi-K3",
        "modelRevision": REVISION,
        "weightsSource": "huggingface",
        "servedModelName": "Kimi-K3",
        "port": 8000,
    }
