"""The engine profiles against vLLM's Kimi K3 recipe, and every flag and variable the pods get against vLLM 0.27.1.

The recipe (vllm-project/recipes ``models/moonshotai/Kimi-K3.yaml`` @ 6f19519b) and the names of
vLLM 0.27.1 (extracted from its wheel by ``tools/vllm_cli_names.py``) are vendored in
``tests/data`` (see its README). The pods are rendered for real (settings → contract →
component under the offline engine) and their containers read back.
"""

from __future__ import annotations

import json

import pulumi
import pytest
import yaml

from kimi_k3 import offline
from kimi_k3.errors import SettingsError, UserError
from kimi_k3.serving import engine_profiles
from kimi_k3.serving.engine_flags import ALIASES, MANAGED_ENV, MANAGED_FLAGS, flag_groups, flag_of
from kimi_k3.serving.engine_profiles import RECIPE_COMMIT, RECIPES
from kimi_k3.serving.lws import EFA_ENV, VllmLeaderWorkerSet, VllmLeaderWorkerSetArgs
from kimi_k3.serving.pod_kit import kit_env_names
from kimi_k3.serving.vllm import VllmServer, VllmServerArgs
from kimi_k3.stack.settings.serving import CREDENTIAL_ENV
from tests.builders import in_cluster, load_stack_settings
from tests.conftest import DATA, NOW

RECIPE = yaml.safe_load((DATA / "vllm-recipes-Kimi-K3.yaml").read_text())
VLLM = json.loads((DATA / "vllm-0.27.1-names.json").read_text())

STACKS = {
    "blackwell/single_node_tp": dict(gpuInstanceType="p6-b300.48xlarge"),
    "blackwell/multi_node_tp_pp": dict(gpuInstanceType="p6-b200.48xlarge", pipelineParallelSize=2, efaEnabled=True),
    "hopper/multi_node_tp_pp": dict(gpuInstanceType="p5en.48xlarge", pipelineParallelSize=2, efaEnabled=True),
}
"""One stack per profile, every engine key left to the profile (the dev stack pins maxModelLen: unset here)."""

UNSET = dict(maxModelLen=None, kvCacheDtype=None, gpuMemoryUtilization=None)


def settings_for(profile: str, **changes):
    return load_stack_settings(**{**UNSET, **STACKS[profile], **changes})


def recipe_composition(generation: str, strategy: str) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """The recipe's own composition: base args, default features, strategy args, then the hardware override (last flag wins)."""
    items = list(RECIPE["model"]["base_args"])
    for feature, spec in RECIPE["features"].items():
        if feature not in RECIPE["opt_in_features"]:
            items += spec["args"]
    strategy_spec = RECIPE["strategy_overrides"].get(strategy, {})
    hardware = RECIPE["hardware_overrides"][generation]
    items += strategy_spec.get("extra_args", []) + hardware.get("extra_args", [])
    flags: dict[str, tuple[str, ...]] = {}
    for flag, values in flag_groups(tuple(items)):
        flags.pop(flag, None)
        flags[flag] = values
    env = {**hardware.get("extra_env", {}), **strategy_spec.get("extra_env", {})}
    return flags, env


def _same(got: tuple[str, ...] | None, want: tuple[str, ...]) -> bool:
    """Equal values, numbers compared as numbers (the recipe writes 0.90, the contract 0.9)."""
    if got is None or len(got) != len(want):
        return False
    for a, b in zip(got, want, strict=True):
        try:
            if float(a) != float(b):
                return False
        except ValueError:
            if a != b:
                return False
    return True


def emitted(contract) -> dict[str, tuple[str, ...]]:
    return dict(flag_groups(tuple(contract.vllm_args())))


# --- the profiles are the recipe's -------------------------------------------------------------


def test_the_profiles_come_from_the_vendored_recipe_commit():
    assert RECIPE["model"]["min_vllm_version"] == engine_profiles.MIN_VLLM_VERSION == VLLM["vllm_version"]
    assert RECIPE_COMMIT.startswith("6f19519b") and len(RECIPE_COMMIT) == 40
    assert set(RECIPES) == set(STACKS)
    assert RECIPE["model"]["model_id"] == "moonshotai/Kimi-K3"


@pytest.mark.parametrize("profile", sorted(STACKS))
def test_every_recipe_flag_and_variable_reaches_the_engine(profile):
    recipe = RECIPES[profile]
    flags, env = recipe_composition(recipe.generation, recipe.strategy)
    contract = settings_for(profile).serving.contract
    assert contract.engine.profile_name == profile
    got = emitted(contract)
    deviations = {"--gpu-memory-utilization"} if recipe.generation == "hopper" else set()
    for flag, values in flags.items():
        if flag in deviations:
            continue
        assert _same(got.get(flag), values), (profile, flag, got.get(flag), values)
    # Written down, with the numbers: the 0.90 over the Hopper override's 0.97.
    if recipe.generation == "hopper":
        assert flags["--gpu-memory-utilization"] == ("0.97",) and got["--gpu-memory-utilization"] == ("0.9",)
        assert any("0.97" in d and "0.90" in d for d in recipe.deviations)
        assert flags["--max-num-batched-tokens"] == ("4096",)  # the Hopper override beats the strategy's 8192
    vllm_env = contract.vllm_env()
    for name, value in env.items():
        assert vllm_env.get(name) == value, (profile, name)


def test_the_pipeline_parallel_profiles_raise_the_step_timeout_the_recipe_asks_for():
    for profile in ("blackwell/multi_node_tp_pp", "hopper/multi_node_tp_pp"):
        contract = settings_for(profile).serving.contract
        assert contract.vllm_env()["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] == "1800"
        assert contract.execute_model_timeout_s == 1800
        assert emitted(contract)["--gpu-memory-utilization"] == ("0.9",)
    single = settings_for("blackwell/single_node_tp").serving.contract
    assert "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" not in single.vllm_env() and single.execute_model_timeout_s == 300


def test_fp8_kv_cache_comes_with_the_recipes_attention_config_on_blackwell_only():
    blackwell = settings_for("blackwell/single_node_tp").serving.contract
    assert emitted(blackwell)["--kv-cache-dtype"] == ("fp8",)
    assert json.loads(emitted(blackwell)["--attention-config"][0]) == {"use_prefill_query_quantization": True, "mla_prefill_backend": "flashinfer"}
    auto = settings_for("blackwell/single_node_tp", kvCacheDtype="auto").serving.contract
    assert "--attention-config" not in emitted(auto)  # the pairing is for FP8 KV
    hopper = settings_for("hopper/multi_node_tp_pp").serving.contract
    assert emitted(hopper)["--kv-cache-dtype"] == ("auto",) and emitted(hopper)["--attention-backend"] == ("FLASHMLA",)


def test_explicit_keys_still_win_over_the_profile():
    contract = settings_for("blackwell/single_node_tp", maxModelLen=131072, gpuMemoryUtilization="0.9").serving.contract
    assert emitted(contract)["--max-model-len"] == ("131072",) and emitted(contract)["--gpu-memory-utilization"] == ("0.9",)


def test_an_extra_argument_replaces_a_tuning_flag_of_the_profile_once():
    contract = settings_for("hopper/multi_node_tp_pp", vllmExtraArgs=["--max-num-seqs", "16", "--no-disable-custom-all-reduce"]).serving.contract
    args = contract.vllm_args()
    assert args.count("--max-num-seqs") == 1 and args[args.index("--max-num-seqs") + 1] == "16"
    assert "--disable-custom-all-reduce" not in args and "--no-disable-custom-all-reduce" in args


# --- opt-ins ------------------------------------------------------------------------------------


def test_decode_context_parallel_is_the_recipes_single_node_opt_in():
    contract = settings_for("blackwell/single_node_tp", decodeContextParallel=True).serving.contract
    got = emitted(contract)
    feature = dict(flag_groups(tuple(RECIPE["features"]["decode_context_parallelism"]["args"])))
    assert {flag: got[flag] for flag in feature} == feature
    assert got["--attention-config"] == feature["--attention-config"]  # TRTLLM_RAGGED prefill replaces the FP8-KV flashinfer pairing
    assert RECIPE["features"]["decode_context_parallelism"]["strategies"] == ["single_node_tp"]
    for profile in ("blackwell/multi_node_tp_pp", "hopper/multi_node_tp_pp"):
        with pytest.raises(SettingsError, match="kimi-k3:decodeContextParallel.*single-node TP8 profile only"):
            settings_for(profile, decodeContextParallel=True)
    with pytest.raises(SettingsError, match="kimi-k3:decodeContextParallel.*pairs decode context parallelism with FP8 KV"):
        settings_for("blackwell/single_node_tp", decodeContextParallel=True, kvCacheDtype="auto")


def test_text_only_by_default_and_media_only_from_allowed_hosts():
    default = settings_for("blackwell/single_node_tp").serving.contract
    assert "--language-model-only" in default.vllm_args() and "--allowed-media-domains" not in default.vllm_args()
    assert RECIPE["features"]["text_only"]["args"] == ["--language-model-only"]
    media = settings_for("blackwell/single_node_tp", mediaPolicy="allowlist", mediaAllowedDomains=["images.example.com", "cdn.example.org"], mediaInlineMiB=20)
    got = emitted(media.serving.contract)
    assert got["--allowed-media-domains"] == ("images.example.com", "cdn.example.org") and "--language-model-only" not in got
    assert media.serving.contract.vllm_env()["VLLM_MEDIA_URL_ALLOW_REDIRECTS"] == "0"  # an allowed host cannot redirect elsewhere
    assert media.serving.front.inline_media_bytes == 20 * 1024 * 1024
    for changes, key, message in [
        (dict(mediaPolicy="allowlist"), "kimi-k3:mediaAllowedDomains", "vLLM fetches media from any host"),
        (dict(mediaPolicy="allowlist", mediaAllowedDomains=["*.example.com"]), "kimi-k3:mediaAllowedDomains", "no scheme, port, path or wildcard"),
        (dict(mediaPolicy="allowlist", mediaAllowedDomains=["https://images.example.com"]), "kimi-k3:mediaAllowedDomains", "compares the host exactly"),
        (dict(mediaAllowedDomains=["images.example.com"]), "kimi-k3:mediaAllowedDomains", "only used when mediaPolicy is allowlist"),
        (dict(mediaPolicy="everything"), "kimi-k3:mediaPolicy", "accepted: text-only, allowlist"),
        (dict(mediaInlineMiB=8), "kimi-k3:mediaInlineMiB", "needs mediaPolicy allowlist"),
    ]:
        with pytest.raises(SettingsError, match=message) as caught:
            settings_for("blackwell/single_node_tp", **changes)
        assert caught.value.key == key


# --- servingEnv -----------------------------------------------------------------------------------


def test_serving_env_adds_and_overrides_the_profile_but_not_what_the_library_sets():
    contract = settings_for("hopper/multi_node_tp_pp", servingEnv=["NCCL_DEBUG=INFO", "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS=3600"]).serving.contract
    env = contract.vllm_env()
    assert env["NCCL_DEBUG"] == "INFO" and env["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] == "3600"
    assert contract.execute_model_timeout_s == 3600  # and the liveness window follows it
    for name in sorted(MANAGED_ENV):
        # a managed name that holds a credential is refused as one, with the setting to use (issue 24)
        why = "looks like a credential" if CREDENTIAL_ENV.search(name) else "is set by the contract"
        with pytest.raises(SettingsError, match=f"kimi-k3:servingEnv.*{name} {why}") as caught:
            settings_for("blackwell/single_node_tp", servingEnv=[f"{name}=x"])
        assert caught.value.key == "kimi-k3:servingEnv"
    for bad, message in [("NO_EQUALS", "expected NAME=value"), ("=x", "expected NAME=value"), ("1BAD=x", "not a variable name"),
                         ("LWS_GROUP_SIZE=3", "LWS_\\* variables are set by"), ("A=1", "A is set twice")]:
        with pytest.raises(SettingsError, match=message):
            settings_for("blackwell/single_node_tp", servingEnv=[bad, "A=1"] if bad == "A=1" else [bad])


def test_the_kits_variables_are_all_managed():
    contract = settings_for("blackwell/single_node_tp").serving.contract
    profile_env = {name for name, _ in contract.engine.env}
    assert kit_env_names(contract) - profile_env <= set(MANAGED_ENV)
    assert set(EFA_ENV) <= set(MANAGED_ENV)


# --- every flag and variable against vLLM 0.27.1 ----------------------------------------------------

THIRD_PARTY_ENV = {
    "HOME": "POSIX", "USER": "POSIX (getpass.getuser)", "XDG_CACHE_HOME": "XDG base directories", "XDG_CONFIG_HOME": "XDG base directories",
    "HF_HOME": "huggingface_hub", "HF_HUB_OFFLINE": "huggingface_hub", "HF_HUB_CACHE": "huggingface_hub", "HF_TOKEN": "huggingface_hub",
    "TRITON_CACHE_DIR": "Triton", "TORCHINDUCTOR_CACHE_DIR": "PyTorch Inductor", "PYTORCH_CUDA_ALLOC_CONF": "PyTorch CUDA caching allocator",
    "CUDA_CACHE_PATH": "CUDA JIT cache", "DO_NOT_TRACK": "read by vLLM's VLLM_DO_NOT_TRACK (vllm/envs.py)",
    "TRITON_CACHE_AUTOTUNING": "Triton (vLLM 0.27.1 sets it by default in vllm/env_override.py)",
    "DG_JIT_CACHE_DIR": "DeepGEMM (vLLM 0.27.1 vllm/utils/deep_gemm.py sets its default)",
    "FLASHINFER_WORKSPACE_BASE": "FlashInfer (flashinfer-python 0.6.16.post3 flashinfer/jit/env.py)",
    "FASTSAFETENSORS_ODIRECT": "fastsafetensors (>= 0.4 common.py is_odirect_enabled; 0.3.2 reads buffered and ignores it)",
    "CACHE_RESTORED_MARKER": "this project's cache restore (kimi_k3.weights.podmain)",
    "NCCL_CUMEM_ENABLE": "NCCL", "NCCL_SOCKET_IFNAME": "NCCL", "GLOO_SOCKET_IFNAME": "PyTorch Gloo",
    "FI_PROVIDER": "libfabric", "FI_EFA_USE_DEVICE_RDMA": "libfabric EFA provider", "FI_EFA_FORK_SAFE": "libfabric EFA provider", "FI_EFA_USE_HUGE_PAGE": "libfabric EFA provider",
    "GROUP_GATE_PORT": "this project's leader/worker scripts", "DIST_MASTER_PORT": "this project's worker probes and preStop",
    "GROUP_JOIN_TIMEOUT_S": "this project's leader/worker scripts",
}
"""Variables the pods set that are not vLLM's, with who reads them."""

NOT_IN_VLLM_0_27_1 = {
    "VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION": "the AWS deployment guide's reference environment for the kimi-k3 image; vLLM 0.27.1 reads it nowhere (not in vllm/envs.py nor anywhere in the wheel), so it is harmless there",
}
"""Kept on purpose although the pinned release does not read them."""


def render_engine_pods(profile: str, **changes) -> list[dict]:
    """The engine containers of the profile's stack, rendered by the component the platform picks."""
    s = settings_for(profile, **changes)
    contract = s.serving.contract
    common = dict(contract=contract, api_key=pulumi.Output.secret("k"), instance_type=s.capacity.instance_type, replicas=1)

    def program() -> None:
        if contract.engine.pipeline_parallel_size > 1:
            VllmLeaderWorkerSet("kimi", VllmLeaderWorkerSetArgs(**common), opts=in_cluster())
        else:
            VllmServer("kimi", VllmServerArgs(**common), opts=in_cluster())

    plan = offline.OfflineEngine(now=NOW).run(program)
    containers = []
    for manifest in plan.kubernetes_objects():
        if manifest["kind"] == "Deployment":
            containers += manifest["spec"]["template"]["spec"]["containers"]
        elif manifest["kind"] == "LeaderWorkerSet":
            template = manifest["spec"]["leaderWorkerTemplate"]
            containers += template["leaderTemplate"]["spec"]["containers"] + template["workerTemplate"]["spec"]["containers"]
    return [c for c in containers if c["name"] != "api-proxy"]


VARIANTS = [
    ("blackwell/single_node_tp", {}),
    ("blackwell/single_node_tp", dict(decodeContextParallel=True, mediaPolicy="allowlist", mediaAllowedDomains=["images.example.com"])),
    ("blackwell/multi_node_tp_pp", {}),
    ("hopper/multi_node_tp_pp", {}),
]


def _known_flag(flag: str) -> bool:
    if flag in VLLM["flags"]:
        return True
    return flag.startswith("--no-") and VLLM["flags"].get(f"--{flag[5:]}", {}).get("boolean", False)


@pytest.mark.parametrize(("profile", "changes"), VARIANTS, ids=[f"{p}{'+opt-ins' if c else ''}" for p, c in VARIANTS])
def test_every_flag_and_variable_the_pods_get_exists_in_vllm_0_27_1(profile, changes):
    containers = render_engine_pods(profile, **changes)
    engine = [c for c in containers if c["name"] == "vllm"]
    assert engine, containers
    for container in engine:
        for flag, values in flag_groups(tuple(container["args"])):
            assert _known_flag(flag), f"{flag} is not a vllm serve flag of vLLM 0.27.1"
            choices = {"--moe-backend": "moe_backend", "--dcp-comm-backend": "dcp_comm_backend", "--attention-backend": "attention_backend",
                       "--kv-cache-dtype": "kv_cache_dtype", "--tool-call-parser": "tool_call_parser", "--reasoning-parser": "reasoning_parser"}
            if flag in choices:
                assert values[0] in VLLM["choices"][choices[flag]], (flag, values)
            if flag == "--attention-config":
                config = json.loads(values[0])
                assert set(config) <= set(VLLM["choices"]["attention_config"]), config
                assert config["mla_prefill_backend"].upper() in VLLM["choices"]["mla_prefill_backend"]
            if flag in ("--load-format",):
                assert values in (("fastsafetensors",), ("auto",)) and values[0] in VLLM["choices"]["load_format"]
            if flag == "--cudagraph-capture-sizes":
                sizes = [int(v) for v in values]
                assert sizes == sorted(set(sizes)) and sizes[0] == 1 and sizes[-1] <= 512, sizes
    for container in containers:
        for env in container.get("env", []):
            name = env["name"]
            assert name in VLLM["env_vars"] or name in THIRD_PARTY_ENV or name in NOT_IN_VLLM_0_27_1, f"{name} is neither vLLM 0.27.1's nor a known third party's"


def test_the_names_file_is_what_the_extractor_reads_from_the_wheel():
    # The vendored document names its wheel and sources (sha256); the extractor's constants read those files.
    from tools import vllm_cli_names

    assert VLLM["wheel"] == "vllm-0.27.1-cp38-abi3-manylinux_2_28_x86_64.whl" and len(VLLM["wheel_sha256"]) == 64
    assert set(vllm_cli_names.FLAG_FILES) | {vllm_cli_names.ENVS_FILE} <= set(VLLM["sources"])
    assert len(VLLM["flags"]) > 250 and len(VLLM["env_vars"]) > 250
    assert VLLM["flags"]["--shutdown-timeout"] == {"aliases": [], "boolean": False}
    assert VLLM["flags"]["--language-model-only"]["boolean"] is True


def test_every_flag_the_contract_manages_exists_and_every_alias_of_them_is_recognised():
    for flag in MANAGED_FLAGS:
        assert flag in VLLM["flags"], flag
    tuned = {flag for recipe in RECIPES.values() for flag, _ in flag_groups(recipe.tuning_for(recipe.kv_cache_dtype, recipe.decode_context_parallel))}
    for flag, entry in VLLM["flags"].items():
        if flag in MANAGED_FLAGS or flag in tuned:
            for alias in entry["aliases"]:
                assert ALIASES.get(alias) == flag and flag_of(alias) == flag, alias


def test_a_stack_on_one_p5en_node_gets_the_contracts_refusal_not_a_profile_error():
    with pytest.raises(UserError, match="needs at least 2 p5en.48xlarge nodes"):
        load_stack_settings(gpuInstanceType="p5en.48xlarge", **UNSET)
