"""``kimi-k3 plan --program DIR``: someone's own Pulumi program, planned by the same offline engine.

The README's "own program" project is written into a fresh directory from the README
text and planned with the command the README gives; small programs of another
project check what the Pulumi CLI would hand them (``Pulumi.yaml`` defaults,
``stackConfigDir``, declared keys); and a non-editable ``pip install`` of the package
plans the user's stack, not anything inside site-packages or this repository.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from kimi_k3.cli import main
from kimi_k3.core import clock
from tests.conftest import ROOT
from tests.own_program_mistakes import readme_files
from tests.user_project import copy_library_project, library_stack, write_project

NOW = ("--now", "2026-12-01T08:00:00Z")
SECURE = {"secure": "v1:dGlueS1wbGFjZWhvbGRlcg==:cmVwbGFjZS13aXRoLXB1bHVtaS1jb25maWctc2V0LS1zZWNyZXQ="}


def _readme_blocks() -> dict[str, str]:
    """The README's own-program project: one parser, the mistakes table's."""
    return readme_files()


def test_the_readme_program_plans_as_written_in_a_fresh_directory(tmp_path):
    files = _readme_blocks()
    assert set(files) == {"Pulumi.yaml", "Pulumi.dev.yaml", "__main__.py", "command", "install"}
    project, stack = yaml.safe_load(files["Pulumi.yaml"]), yaml.safe_load(files["Pulumi.dev.yaml"])
    # what the issue asks of that project: another project name, aws:region, a secure: apiKey
    assert project["name"] != "kimi-k3" and stack["config"]["aws:region"]
    assert set(stack["config"][f"{project['name']}:apiKey"]) == {"secure"}
    fresh = tmp_path / "my-llm"
    fresh.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "__main__.py"):
        (fresh / name).write_text(files[name])
    argv = shlex.split(files["command"])
    # The install line makes .venv in the program's directory with kimi-k3 in it: this checkout's virtualenv stands in for it.
    assert argv[0] == ".venv/bin/kimi-k3" and "python3.11 -m venv .venv" in files["install"]
    (fresh / ".venv").symlink_to(sys.prefix)
    # as written, in a fresh shell: nothing activated, no virtualenv on PATH
    fresh_shell = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    proc = subprocess.run([*argv, *NOW], capture_output=True, text=True, cwd=fresh, env=fresh_shell, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    plan = fresh / "build" / "plan" / "dev"
    resources = json.loads((plan / "resources.json").read_text())
    types = {r["type"] for r in resources}
    assert {"kimi-k3:index:Network", "kimi-k3:index:Cluster", "kimi-k3:index:CapacityBlockNodeGroup", "kimi-k3:index:VllmServer"} <= types
    assert all(r["urn"].startswith("urn:pulumi:dev::my-llm::") for r in resources)
    assert json.loads((plan / "outputs.json").read_text())["endpoint"].endswith(":8000/v1")
    deployment = yaml.safe_load(next((plan / "manifests").glob("deployment-*.yaml")).read_text())
    assert deployment["spec"]["replicas"] == 2  # --reservation-count 2 shaped the block the program looked up
    secret = next(r for r in resources if r["type"] == "kubernetes:core/v1:Secret")
    # the key, the proxy's digest of it and the router's
    assert secret["inputs"]["stringData"] == {"key": "[secret]", "key-check.conf": "[secret]", "key-sha256": "[secret]"}
    assert "passed" in proc.stdout and "project my-llm, stack dev" in proc.stdout
    # the example account in the program's admin role is warned, as the stack path warns for a stack file
    assert ("ClusterArgs.admin_role_arns[0] holds 'arn:aws:iam::123456789012:role/platform-admin' (AWS documentation's example account "
            "123456789012): an example value left in the program; replace it with your own") in proc.stdout


def test_a_program_with_a_components_package_of_its_own_plans_offline(tmp_path):
    """The README program in a directory that also holds the user's own ``components/`` package, which it imports:
    the library's import name (``kimi_k3``) does not shadow it, nor it the library."""
    files = _readme_blocks()
    fresh = tmp_path / "my-llm"
    (fresh / "components").mkdir(parents=True)
    (fresh / "components" / "__init__.py").write_text('"""The user\'s own components."""\n')
    (fresh / "components" / "naming.py").write_text('def endpoint_output() -> str:\n    return "endpoint"\n')
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        (fresh / name).write_text(files[name])
    program = files["__main__.py"].replace('pulumi.export("endpoint",', "from components.naming import endpoint_output\npulumi.export(endpoint_output(),")
    assert program != files["__main__.py"]
    (fresh / "__main__.py").write_text(program)
    argv = shlex.split(files["command"])
    proc = subprocess.run([sys.executable, "-m", "kimi_k3.cli", *argv[1:], *NOW], capture_output=True, text=True, cwd=fresh, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((fresh / "build" / "plan" / "dev" / "outputs.json").read_text())["endpoint"].endswith(":8000/v1")


def test_the_library_refuses_to_be_imported_under_its_folder_name():
    """``import components`` from this checkout would load a second copy of the library: refused with one line."""
    proc = subprocess.run([sys.executable, "-c", "import components"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "ImportError: the kimi-k3-aws library is imported as kimi_k3, not components (components/ is only its source folder; see docs/architecture.md)"
    )


def test_outside_any_project_plan_stops_and_plans_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "dev", *NOW]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"kimi-k3: error: no Pulumi.yaml in {tmp_path.resolve()} or its parents: cd into your Pulumi project, or pass --program DIR"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("make", ["missing", "empty-dir"])
def test_a_program_dir_without_a_project_names_the_flag(tmp_path, capsys, make):
    target = tmp_path / "prog"
    if make == "empty-dir":
        target.mkdir()
    assert main(["plan", "dev", "--program", str(target), *NOW]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"--program {target}" in err


TINY_PULUMI_YAML = """\
name: tiny
runtime: python
stackConfigDir: config
config:
  greeting: hello          # a plain value of the project's namespace: a default
  aws:region: eu-west-1    # a plain value of another namespace: a value
  size:
    type: integer
    default: 1
  token:
    type: string
    secret: true
"""

TINY_PROGRAM = """\
import pulumi
from kimi_k3 import lookup_capacity_block

config = pulumi.Config()
block = lookup_capacity_block("cr-0123456789abcdef0")
pulumi.export("greeting", config.require("greeting"))
pulumi.export("size", config.require_int("size"))
pulumi.export("region", pulumi.Config("aws").require("region"))
pulumi.export("tokenIsSecret", config.require_secret("token").apply(lambda _: True))
pulumi.export("block", {"id": block.reservation_id, "az": block.availability_zone, "count": block.instance_count,
                        "state": block.state, "type": block.instance_type})
"""


def _tiny(tmp_path, stack_config: dict) -> Path:
    return write_project(tmp_path / "tiny", pulumi_yaml=TINY_PULUMI_YAML, program=TINY_PROGRAM,
                         stacks={"dev": yaml.safe_dump({"config": stack_config})}, stack_dir="config")


def test_another_projects_program_gets_what_the_pulumi_cli_would_hand_it(tmp_path, capsys):
    project = _tiny(tmp_path, {"tiny:size": 3, "tiny:token": SECURE})
    out = tmp_path / "out"
    flags = ("--reservation-az", "eu-west-1c", "--reservation-count", "3", "--reservation-state", "active")
    assert main(["plan", "dev", "--program", str(project), "--out", str(out), *NOW, *flags]) == 0
    outputs = json.loads((out / "outputs.json").read_text())
    assert outputs["greeting"] == "hello"           # Pulumi.yaml default
    assert outputs["size"] == 3                     # the stack's value over the default
    assert outputs["region"] == "eu-west-1"         # Pulumi.yaml value of another namespace
    assert outputs["tokenIsSecret"] == "[secret]"   # the secure: value stayed a secret
    # whatever cr- id the program asks is answered, shaped by the rehearsal flags
    assert outputs["block"] == {"id": "cr-0123456789abcdef0", "az": "eu-west-1c", "count": 3, "state": "active", "type": "p6-b300.48xlarge"}
    printed = capsys.readouterr().out
    assert "project tiny, stack dev" in printed and "cr-0123456789abcdef0 — active (offline fixture), AZ eu-west-1c" in printed


@pytest.mark.parametrize(
    ("stack_config", "expected"),
    [
        ({"tiny:token": "plain"}, "config tiny:token: '<plain text value>' is not accepted; Pulumi.yaml declares it secret"),
        ({"tiny:token": SECURE, "tiny:size": "three"}, "config tiny:size: 'three' is not accepted; Pulumi.yaml declares it integer"),
    ],
)
def test_what_pulumi_up_refuses_before_the_program_runs_is_one_line(tmp_path, capsys, stack_config, expected):
    out = tmp_path / "out"
    assert main(["plan", "dev", "--program", str(_tiny(tmp_path, stack_config)), "--out", str(out), *NOW]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and expected in err
    assert not out.exists()


def test_a_declared_secret_the_stack_file_lacks_is_a_placeholder_and_a_warning(tmp_path, capsys):
    """Secrets stay out of committed stack files (CI sets them): offline a placeholder stands in, and the plan says so."""
    out = tmp_path / "out"
    assert main(["plan", "dev", "--program", str(_tiny(tmp_path, {"tiny:size": 3})), "--out", str(out), *NOW]) == 0
    printed = capsys.readouterr().out
    assert "tiny:token is not in stack dev's file: `pulumi up` refuses a missing value" in printed
    assert "pulumi config set --secret tiny:token -s dev" in printed
    assert json.loads((out / "outputs.json").read_text())["tokenIsSecret"] == "[secret]"


def test_another_projects_stack_is_not_held_to_kimi_k3_settings(tmp_path, capsys):
    """A foreign project with no kimi-k3:* keys plans; hyperpod (which needs kimi-k3 settings) says why it cannot."""
    project = _tiny(tmp_path, {"tiny:token": SECURE})
    assert main(["plan", "dev", "--program", str(project), "--quiet", "--out", str(tmp_path / "out"), *NOW]) == 0
    capsys.readouterr()
    assert main(["hyperpod", "dev", "--program", str(project)]) == 2
    assert "sets no kimi-k3:* keys" in capsys.readouterr().err


def _user_copy_of_the_program(tmp_path) -> Path:
    """A user's directory with this repository's program and a stack of their own (region us-east-2)."""
    dev = library_stack("dev").replace("aws:region: us-east-1", "aws:region: us-east-2").replace("secretsmanager:us-east-1:", "secretsmanager:us-east-2:").replace("kimi-k3:maxModelLen: 262144", "kimi-k3:maxModelLen: 131072")
    return copy_library_project(tmp_path / "user", {"dev": dev, "prod": library_stack("prod").replace("kimi-k3:maxModelLen: 262144", "kimi-k3:maxModelLen: 65536")})


def test_hyperpod_and_preflight_read_the_stack_of_the_current_project(tmp_path, monkeypatch, capsys):
    from kimi_k3.capacity import aws as capacity_aws
    from kimi_k3.errors import UserError

    user = _user_copy_of_the_program(tmp_path)
    monkeypatch.chdir(user)
    monkeypatch.setattr(clock, "program_now", lambda: datetime(2026, 12, 1, 8, 0, tzinfo=UTC))  # not about the date
    assert main(["hyperpod", "prod"]) == 0
    assert "65536" in capsys.readouterr().out  # the user's maxModelLen, not the repository's 262144

    def reached(region):
        raise UserError(f"would call AWS in {region}")

    monkeypatch.setattr(capacity_aws, "make_clients", reached)
    assert main(["capacity", "preflight", "dev"]) == 2
    assert "would call AWS in us-east-2" in capsys.readouterr().err  # the user's region
    monkeypatch.chdir(tmp_path)
    assert main(["capacity", "preflight", "dev", "--program", str(user)]) == 2
    assert "would call AWS in us-east-2" in capsys.readouterr().err


def _tree_state(directory: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in directory.rglob("*")} if directory.exists() else {}


@pytest.mark.slow  # pip builds the wheel in an isolated environment (11-41 s): make test-travel and CI's nightly pass run it
def test_after_a_regular_pip_install_plan_plans_the_users_stack_and_writes_nothing_into_the_repository(tmp_path):
    """``pip install --no-deps --target``, then ``python -m kimi_k3.cli plan dev`` from the user's directory."""
    source, site = tmp_path / "source", tmp_path / "site"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "components", source / "components", ignore=shutil.ignore_patterns("__pycache__"))
    (source / "kimi_k3").symlink_to("components")
    # pip builds the wheel in an isolated environment with [build-system]'s setuptools and wheel from the index
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert install.returncode == 0, install.stderr
    user = _user_copy_of_the_program(tmp_path)
    repository_build = _tree_state(ROOT / "build")
    # -S: no site-packages .pth files, so the editable install of this checkout is not on the path;
    # the dependencies come from the virtualenv's site-packages, after the installed package.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), sysconfig.get_paths()["purelib"]])}
    where = subprocess.run([sys.executable, "-S", "-c", "import kimi_k3; print(kimi_k3.__file__)"], capture_output=True, text=True, env=env, cwd=user)
    assert where.stdout.strip() == str(site / "kimi_k3" / "__init__.py")
    proc = subprocess.run([sys.executable, "-S", "-m", "kimi_k3.cli", "plan", "dev", "--quiet", *NOW],
                          capture_output=True, text=True, env=env, cwd=user, timeout=300)
    assert proc.returncode == 0, proc.stderr
    outputs = json.loads((user / "build" / "plan" / "dev" / "outputs.json").read_text())
    assert outputs["region"] == "us-east-2"  # the user's stack
    assert f"({user / 'policy' / 'config' / 'dev.json'}, environment dev)" in proc.stdout  # the user's policy config, its environment's
    assert not (site / "build").exists() and not (site / "stacks").exists()
    assert _tree_state(ROOT / "build") == repository_build


# --- the README program's mistakes stop with one line (issue 24, point 6) ---------------------------


def _readme_program_mutated(tmp_path, stack_edit=None, program_edit=None):
    """The README's project written as it stands, with one edit to its stack file or its program."""
    files = _readme_blocks()
    directory = tmp_path / "my-llm"
    directory.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "__main__.py"):
        text = files[name]
        for target, edit in (("Pulumi.dev.yaml", stack_edit), ("__main__.py", program_edit)):
            if name == target and edit is not None:
                assert edit[0] in text, edit[0]
                text = text.replace(*edit)
        (directory / name).write_text(text)
    return directory, shlex.split(files["command"])[1:]


@pytest.mark.parametrize(
    ("stack_edit", "program_edit", "expected"),
    [
        ((re.search(r"  my-llm:apiKey:\n    secure: .*\n", _readme_blocks()["Pulumi.dev.yaml"])[0], ""), None,  # type: ignore[index]
         "Missing required configuration variable 'my-llm:apiKey' please set a value using the command `pulumi config set --secret my-llm:apiKey <value>`"),
        (("aws:region: us-east-1", "aws:region: us-west-2"), None,
         "Network 'llm-net': availability_zones ['us-west-2a', 'us-east-1b'] is not accepted; not all in region us-west-2, the AWS provider's region (aws:region)"),
        (None, ("replicas=block.instance_count,", "replicas=block.instance_count + 1,"),
         "VllmServer 'kimi-k3': replicas 3 is not accepted; at most 2: the Capacity Block cr-0a1b2c3d4e5f60718 reserves 2 p6-b300.48xlarge nodes"),
    ],
    ids=["missing-api-key", "region-not-the-azs", "more-replicas-than-nodes"],
)
def test_the_readme_programs_mistakes_stop_with_one_line(tmp_path, capsys, monkeypatch, stack_edit, program_edit, expected):
    directory, argv = _readme_program_mutated(tmp_path, stack_edit, program_edit)
    monkeypatch.chdir(directory)
    assert main([*argv, *NOW]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kimi-k3: error: ") and "Traceback" not in err, err
    assert expected in err
    assert not (directory / "build").exists()


def test_the_readme_gives_the_exact_install_command():
    """A regular (non-editable) install of the checkout, as the pip test above does it."""
    install = _readme_blocks()["install"]
    command = next(line for line in install.splitlines() if "pip install" in line)
    assert "pip install /path/to/kimi-k3-aws" in command and " -e " not in command and "python3.11 -m venv" in command
