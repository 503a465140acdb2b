"""Issue 34: the snapshot agent's image (images/engine-snapshot-agent/Dockerfile) carries what engine_snapshot.REQUIREMENTS and
snapshot_agent.IMAGE_NEEDS name, every version pinned, with the build/push commands the README of the file gives.

The image is not built here (no container builder on this machine): prod's ``engineSnapshotAgentImage`` digest stays a placeholder
until it is built and pushed, as ``weightsStagingImage``'s did (docs/weights.md)."""

from __future__ import annotations

import re

from kimi_k3.weights import engine_snapshot, snapshot_agent, startup_figures
from tests.conftest import ROOT

DOCKERFILE = ROOT / "images" / "engine-snapshot-agent" / "Dockerfile"


def arg(name: str) -> str:
    (value,) = re.findall(rf"^ARG {name}=(\S+)$", DOCKERFILE.read_text(), flags=re.M)
    return value


def test_criu_is_pinned_at_or_above_the_floor_and_built_with_its_cuda_plugin():
    version = tuple(int(part) for part in arg("CRIU_VERSION").split("."))
    assert version >= engine_snapshot.MIN_CRIU
    text = DOCKERFILE.read_text()
    assert '--branch "v${CRIU_VERSION}" https://github.com/checkpoint-restore/criu.git' in text
    assert re.search(r"make -C /src/criu .*\bcuda_plugin\b", text) and "find /out -name 'cuda_plugin*.so'" in text  # the build fails without it


def test_cuda_checkpoint_is_pinned_to_the_measured_commit_and_its_sha256():
    commit = arg("CUDA_CHECKPOINT_COMMIT")
    assert re.fullmatch(r"[0-9a-f]{40}", commit)
    assert startup_figures.__doc__ is not None and f"NVIDIA/cuda-checkpoint @{commit[:8]}" in (ROOT / "components" / "weights" / "startup_figures.py").read_text()  # the commit measured
    text = DOCKERFILE.read_text()
    assert re.search(r"--checksum=sha256:[0-9a-f]{64} \\\n\s+https://raw\.githubusercontent\.com/NVIDIA/cuda-checkpoint/\$\{CUDA_CHECKPOINT_COMMIT\}/bin/x86_64_Linux/cuda-checkpoint", text)
    assert text.splitlines()[0] == "# syntax=docker/dockerfile:1.7"  # ADD --checksum needs the 1.6+ frontend


def test_it_carries_nsenter_python3_and_runs_the_agent_loop_from_the_configmap():
    text = DOCKERFILE.read_text()
    assert "util-linux" in text and "nsenter --version" in text and "python3 --version" in text
    assert re.search(r"^ARG BASE=python:3\.\d+-slim-bookworm$", text, flags=re.M)
    assert 'CMD ["python3", "-m", "kimi_k3.weights.podmain", "snapshot-agent"]' in text
    for need in ("CRIU", "cuda-checkpoint", "nsenter", "python3"):
        assert need in snapshot_agent.IMAGE_NEEDS
    assert any("CRIU >=" in r and "CUDA plugin" in r and "cuda-checkpoint" in r for r in engine_snapshot.REQUIREMENTS)


def test_the_build_and_push_commands_pin_the_digest_into_the_stack_key():
    text = DOCKERFILE.read_text()
    tag = f"criu-{arg('CRIU_VERSION')}"
    assert f'docker build -t "$REPO:{tag}" images/engine-snapshot-agent' in text
    assert f'docker push "$REPO:{tag}"' in text
    assert f'pulumi config set kimi-k3:engineSnapshotAgentImage "$REPO@$(crane digest "$REPO:{tag}")"' in text
