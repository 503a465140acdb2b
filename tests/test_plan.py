"""The offline plan: `kimi-k3 plan STACK` runs the real program and writes what it declares."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from kimi_k3 import offline
from kimi_k3.cli import main
from kimi_k3.stack import settings
from kimi_k3.stack.platform import Platform
from tests.conftest import NOW, ROOT, fixture_for
from tests.refusals import assert_refused_before_declaring
from tests.user_project import copy_library_project, library_stack

PINNED = ("--now", "2026-12-01T08:00:00Z")
"""A fixed --now: these tests are not about the date (tests/test_time_travel.py plans without one, the clock moved)."""


def _plan(tmp_path, *args: str) -> int:
    return main(["plan", *args, "--out", str(tmp_path), *PINNED])


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_plan_writes_resources_outputs_and_manifests(stack, tmp_path, capsys):
    assert _plan(tmp_path, stack) == 0
    summary = capsys.readouterr().out
    resources = json.loads((tmp_path / "resources.json").read_text())
    assert isinstance(resources, list) and resources
    for entry in resources:
        assert set(entry) >= {"type", "name", "parent", "inputs"}
        assert entry["parent"] is None or set(entry["parent"]) == {"type", "name"}
    names = {(r["type"], r["name"]) for r in resources}
    assert all((r["parent"]["type"], r["parent"]["name"]) in names for r in resources if r["parent"])
    assert ("kimi-k3:index:Platform", "kimi-k3") in names
    for path in (tmp_path / "manifests").glob("*.yaml"):
        manifest = yaml.safe_load(path.read_text())
        assert manifest["apiVersion"] and manifest["kind"] and manifest["metadata"]["name"], path
    outputs = json.loads((tmp_path / "outputs.json").read_text())
    stack_settings = settings.load_stack(stack)
    assert outputs["region"] == stack_settings.region
    # the summary gives the key facts
    for fact in (stack_settings.region, stack_settings.capacity.reservation_id, outputs["capacityBlock"]["availabilityZone"], "GPU nodes", f"({outputs['gpusTotal']} GPUs)"):
        assert fact in summary


def test_plan_default_output_directory_is_in_the_planned_project(monkeypatch, tmp_path, capsys):
    project = copy_library_project(tmp_path / "project")
    monkeypatch.chdir(project / "stacks")  # the nearest Pulumi.yaml upwards is the project's
    assert main(["plan", "dev", "--quiet", *PINNED]) == 0
    assert (project / "build" / "plan" / "dev" / "resources.json").is_file()
    assert "Resources (" not in capsys.readouterr().out  # --quiet leaves the tree out


def test_plan_never_writes_secret_values(tmp_path, capsys):
    """Neither the placeholder for an absent secret (the committed stacks hold none) nor a secure: ciphertext is written."""
    from tests.user_project import copy_library_project, library_stack

    ciphertext = "v1:ZGV2LXBsYWNlaG9sZGVy:cmVwbGFjZS13aXRoLXB1bHVtaS1jb25maWctc2V0LS1zZWNyZXQ="
    with_secret = library_stack("dev") + f"  kimi-k3:apiKey:\n    secure: {ciphertext}\n"
    project = copy_library_project(tmp_path / "user", {"dev": with_secret})
    for stack_args in (["dev"], ["dev", "--program", str(project)]):
        out = tmp_path / "out" / str(len(stack_args))
        assert main(["plan", *stack_args, "--out", str(out), *PINNED]) == 0
        written = "".join(p.read_text() for p in out.rglob("*") if p.is_file()) + capsys.readouterr().out
        assert settings.SECRET_PLACEHOLDER_PREFIX not in written
        assert ciphertext not in written


def test_committed_stacks_hold_no_secret():
    """A committed secure: value is no provider's ciphertext: CI sets the secrets (tools/ci-stack-secrets.sh)."""
    for path in sorted((ROOT / "stacks").glob("Pulumi.*.yaml")):
        config = yaml.safe_load(path.read_text())["config"]
        assert not [k for k, v in config.items() if isinstance(v, dict) and "secure" in v], path.name


def test_plan_summary_shows_the_reservation_window_and_state(tmp_path, capsys):
    assert _plan(tmp_path, "dev", "--now", "2026-12-08T09:00:00Z", "--reservation-state", "active", "--reservation-az", "us-east-1c", "--reservation-start", "2026-12-07T11:30:00Z") == 0
    out = capsys.readouterr().out
    assert "active (offline fixture), AZ us-east-1c" in out
    assert "2026-12-07 11:30 UTC -> 2026-12-14 11:30 UTC" in out


def test_plan_bad_config_is_one_line_and_writes_nothing(tmp_path, capsys):
    project = copy_library_project(tmp_path / "project", {"dev": library_stack("dev").replace("cr-0a1b2c3d4e5f60718", "cr-12345")})
    out = tmp_path / "out"
    assert main(["plan", "dev", "--program", str(project), "--out", str(out), *PINNED]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "kimi-k3:capacityReservationId" in err and "'cr-12345'" in err and "17 lowercase hex" in err
    assert not out.exists()


def test_plan_with_an_expired_reservation_keeps_the_gpu_nodes_at_zero_and_warns(tmp_path, capsys):
    assert _plan(tmp_path / "x", "dev", "--reservation-state", "expired") == 0
    assert "is expired" in capsys.readouterr().out
    resources = json.loads((tmp_path / "x" / "resources.json").read_text())
    (group,) = [r for r in resources if r["type"] == "aws:eks/nodeGroup:NodeGroup" and r["name"].endswith("gpu-ng")]
    assert group["inputs"]["scalingConfig"]["desiredSize"] == 0


def test_plan_as_a_process_has_no_traceback_for_user_mistakes(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "kimi_k3.cli", "plan", "dev", "--out", str(tmp_path), "--reservation-state", "payment-failed"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("kimi-k3: error: Capacity Block cr-0a1b2c3d4e5f60718 is payment-failed")


def test_main_program_declares_what_the_platform_declares(dev_plan):
    """__main__.py (run by plan) is only settings -> Platform -> exports: building Platform directly gives the same resources."""
    s = dev_plan.settings
    engine = offline.OfflineEngine(now=NOW, region=s.region, reservation=dev_plan.reservation)
    values, secret_keys = settings.read_stack_file("dev")
    direct = engine.run(lambda: Platform("kimi-k3", s, now=NOW), config=values, secret_keys=secret_keys)
    def declared(result):  # registration order is asynchronous: compare by identity
        return sorted((r.type, r.name, r.parent_urn, json.dumps(offline.redact(r.inputs), sort_keys=True)) for r in result.resources)

    assert declared(direct) == declared(dev_plan)


def test_main_program_reads_config_through_pulumi(dev_plan):
    """Under a real engine the program reads config from Pulumi's runtime, not from the stack file."""
    captured = {}

    def program():
        captured["settings"] = settings.from_pulumi()

    values, secret_keys = settings.read_stack_file("dev")
    values["kimi-k3:maxModelLen"] = "131072"
    offline.OfflineEngine(now=NOW).run(program, config=values, secret_keys=secret_keys, stack="dev")
    assert captured["settings"].serving.contract.engine.max_model_len == 131072
    assert captured["settings"].serving.api_key.placeholder


def test_program_warnings_reach_the_engine(dev_plan):
    assert any("floating tag" in w for w in dev_plan.warnings)


def test_every_resource_is_parented_under_the_platform(dev_plan):
    platform = dev_plan.one("kimi-k3:index:Platform", "kimi-k3")
    assert platform.parent_urn is None or "pulumi:pulumi:Stack" in platform.parent_urn
    urns = {r.urn for r in dev_plan.resources}
    for resource in dev_plan.resources:
        if resource is not platform:
            assert resource.parent_urn in urns, f"{resource.type} {resource.name} is not parented inside the stack's components"


def test_a_wrong_reservation_declares_nothing():
    s = settings.load_stack("dev")
    engine = offline.OfflineEngine(now=NOW, region=s.region, reservation=fixture_for(s, instance_type="p5en.48xlarge"))
    assert_refused_before_declaring(lambda: Platform("kimi-k3", s, now=NOW), "reserves p5en.48xlarge, but kimi-k3:gpuInstanceType is p6-b300.48xlarge", engine=engine)


def test_block_az_outside_explicit_azs_declares_nothing():
    values, secret_keys = settings.read_stack_file("dev")
    values["kimi-k3:availabilityZones"] = json.dumps(["us-east-1b", "us-east-1c"])
    s = settings.from_values(values, secret_keys)
    engine = offline.OfflineEngine(now=NOW, region=s.region, reservation=fixture_for(s, availability_zone="us-east-1a"))
    assert_refused_before_declaring(lambda: Platform("kimi-k3", s, now=NOW), "us-east-1a, which the network does not cover", engine=engine)


def test_network_azs_start_with_the_blocks_az(tmp_path):
    result = offline.run_stack("prod", now=NOW, reservation=lambda s: fixture_for(s, availability_zone="us-west-2c"))
    assert result.outputs["availabilityZones"] == ["us-west-2c", "us-west-2a", "us-west-2b"]


def test_fixture_start_is_the_next_block_start():
    start = offline.next_block_start(NOW)
    assert (start.hour, start.minute) == (11, 30) and start > NOW
