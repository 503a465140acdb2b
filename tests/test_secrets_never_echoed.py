"""Secrets (issue 24, point 3): a ``secure:`` value that is no ciphertext, credentials in the engine's
environment or arguments, and a planted marker secret that no message, plan file or manifest shows."""

from __future__ import annotations

import base64
import json

import pytest

from kimi_k3 import offline
from kimi_k3.cli import main
from kimi_k3.cli.plan import render_summary
from kimi_k3.stack import project as stack_project
from tests.cli_helpers import one_line_error
from tests.conftest import NOW
from tests.user_project import copy_library_project, library_stack

MARKER = "MARKER-s3cr3t-7f3a9c"
"""A recognisable secret: found anywhere in the output, it leaked."""
PLAN_NOW = ("--now", "2026-12-01T08:00:00Z")


def _ciphertext(seed: str) -> str:
    """A value shaped like the passphrase provider's ciphertext (v1:<nonce>:<ciphertext>)."""
    return f"v1:{base64.b64encode(b'nonce-' + seed.encode()).decode()}:{base64.b64encode(b'ciphertext of ' + seed.encode() + b' ' * 16).decode()}"


def _plan_refused(tmp_path, capsys, text: str) -> str:
    project = copy_library_project(tmp_path / "p", {"dev": text})
    out = tmp_path / "out"
    assert main(["plan", "dev", "--program", str(project), "--quiet", "--out", str(out), *PLAN_NOW]) == 2
    err = one_line_error(capsys)
    assert MARKER not in err and "Traceback" not in err and not out.exists()
    return err


@pytest.mark.parametrize("plain", [MARKER, "0123456789abcdef" * 4])  # the second: `openssl rand -hex 32`
def test_a_secure_value_that_is_no_ciphertext_is_refused_naming_the_key_not_the_value(tmp_path, capsys, plain):
    err = _plan_refused(tmp_path, capsys, library_stack("dev") + f"  kimi-k3:apiKey:\n    secure: {plain}\n")
    assert "config kimi-k3:apiKey: the secure: value is not Pulumi ciphertext" in err
    assert plain not in err and "pulumi config set --secret kimi-k3:apiKey" in err


@pytest.mark.parametrize(
    ("item", "instead"),
    [
        (f"AWS_SECRET_ACCESS_KEY={MARKER}", "EKS Pod Identity"),
        (f"AWS_ACCESS_KEY_ID={MARKER}", "EKS Pod Identity"),
        (f"HF_TOKEN={MARKER}", "kimi-k3:huggingFaceToken"),
        (f"HUGGING_FACE_HUB_TOKEN={MARKER}", "kimi-k3:huggingFaceToken"),
        (f"VLLM_API_KEY={MARKER}", "kimi-k3:apiKey"),
        (f"WANDB_API_KEY={MARKER}", "kimi-k3:apiKey"),
        (f"GITHUB_TOKEN={MARKER}", "a Kubernetes Secret of your own"),
    ],
)
def test_credentials_in_the_engines_environment_are_refused_with_the_setting_to_use(tmp_path, capsys, item, instead):
    err = _plan_refused(tmp_path, capsys, library_stack("dev") + f"  kimi-k3:servingEnv:\n    - NCCL_DEBUG=INFO\n    - {item}\n")
    name = item.split("=")[0]
    assert f"config kimi-k3:servingEnv: '{name}=***' is not accepted; {name} looks like a credential" in err and instead in err


@pytest.mark.parametrize(
    "extra",
    [
        f"  kimi-k3:vllmExtraArgs:\n    - --api-key\n    - {MARKER}\n",
        f"  kimi-k3:vllmExtraArgs:\n    - --api-key={MARKER}\n",
        f"  kimi-k3:hyperpodL2CacheUrl: redis://user:{MARKER}@cache:6379\n",
        f"  kimi-k3:apiKey: {MARKER}\n",  # a secret written as plain text
        f"  kimi-k3:apiKey:\n    secure: {MARKER}\n  kimi-k3:apiKey:\n    secure: {MARKER}\n",  # twice
    ],
)
def test_other_refusals_around_secrets_never_show_the_value(tmp_path, capsys, extra):
    err = _plan_refused(tmp_path, capsys, library_stack("dev") + extra)
    assert "config kimi-k3:" in err or "config key kimi-k3:" in err


def test_a_yaml_1_1_spelling_of_a_secret_is_refused_without_showing_it(tmp_path, capsys):
    err = _plan_refused(tmp_path, capsys, library_stack("dev") + "  kimi-k3:huggingFaceToken: 0755\n")
    assert "config kimi-k3:huggingFaceToken: its value is spelled in a way YAML 1.1 and YAML 1.2 (Pulumi) read differently (not shown" in err
    assert "0755" not in err


def test_a_planted_secret_appears_in_no_plan_file_manifest_or_output(tmp_path, capsys):
    """The stack's secrets as ``pulumi up`` decrypts them (the marker as their plain text): the plan's files,
    its manifests, its Helm values and the summary never hold the marker, nor the ciphertexts."""
    api, token = _ciphertext("api"), _ciphertext("hf")
    text = library_stack("dev") + f"  kimi-k3:apiKey:\n    secure: {api}\n  kimi-k3:huggingFaceToken:\n    secure: {token}\n"
    root = copy_library_project(tmp_path / "p", {"dev": text})
    project = stack_project.load_project(root)
    decrypted = {"kimi-k3:apiKey": f"{MARKER}-api", "kimi-k3:huggingFaceToken": f"{MARKER}-hf"}
    result = offline.run_project(project, "dev", now=NOW, config_overrides=decrypted)
    assert result.settings is not None and result.settings.serving.api_key.value == f"{MARKER}-api"  # the marker was the secret
    out = tmp_path / "out"
    offline.write_plan(result, out)
    summary = render_summary(result, out, 0)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) > 10
    for path in files:
        data = path.read_bytes()
        assert MARKER.encode() not in data, path
        assert api.encode() not in data and token.encode() not in data, path
    assert MARKER not in summary + json.dumps(result.plain_outputs()) + capsys.readouterr().out
    assert all(MARKER not in w for w in result.warnings)
