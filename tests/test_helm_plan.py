"""Helm releases in the plan: ``helm/<release>.values.yaml`` with chart, version, repository and the exact values."""

from __future__ import annotations

import json

import pulumi
import pulumi_kubernetes as k8s
import yaml

from kimi_k3 import offline
from kimi_k3.cli import main
from tests.conftest import NOW

NOW_FLAG = ("--now", "2026-12-01T08:00:00Z")


def _header(text: str) -> dict[str, str]:
    return dict(line[2:].split(": ", 1) for line in text.splitlines() if line.startswith("# ") and ": " in line and line[2:].split(": ", 1)[0] in ("chart", "version", "repository"))


def test_each_release_of_the_dev_plan_has_its_values_file(tmp_path):
    assert main(["plan", "dev", "--quiet", "--out", str(tmp_path), *NOW_FLAG]) == 0
    releases = [r for r in json.loads((tmp_path / "resources.json").read_text()) if r["type"] == "kubernetes:helm.sh/v3:Release"]
    files = sorted(p.name for p in (tmp_path / "helm").iterdir())
    assert files == sorted(f"{r['inputs']['name']}.values.yaml" for r in releases) == ["dcgm-exporter.values.yaml", "nvidia-device-plugin.values.yaml"]
    for release in releases:
        text = (tmp_path / "helm" / f"{release['inputs']['name']}.values.yaml").read_text()
        inputs = release["inputs"]
        assert _header(text) == {"chart": inputs["chart"], "version": inputs["version"], "repository": inputs["repositoryOpts"]["repo"]}
        assert yaml.safe_load(text) == inputs["values"]  # the exact values, comments aside
        assert f"helm template {inputs['name']} {inputs['chart']} --repo {inputs['repositoryOpts']['repo']} --version {inputs['version']}" in text
    # the charts' own objects are not pretended to be in manifests/
    assert not any("nvidia-device-plugin" in p.name for p in (tmp_path / "manifests").iterdir())


def _releases() -> None:
    provider = k8s.Provider("k8s", kubeconfig="{}")
    opts = pulumi.ResourceOptions(provider=provider)
    token = pulumi.Output.secret("s3cr3t-token")
    k8s.helm.v3.Release("a", k8s.helm.v3.ReleaseArgs(name="metrics", namespace="one", chart="metrics", version="1.0.0",
                        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo="https://charts.example.org"),
                        values={"auth": {"token": token}, "replicas": 2}), opts=opts)
    k8s.helm.v3.Release("b", k8s.helm.v3.ReleaseArgs(name="metrics", namespace="two", chart="oci://registry.example.org/charts/metrics",
                        version="1.0.0", values={}), opts=opts)
    k8s.helm.v3.Release("c", k8s.helm.v3.ReleaseArgs(name="solo", namespace="one", chart="solo", version="0.1.0",
                        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo="https://charts.example.org")), opts=opts)


def test_secrets_are_redacted_clashing_names_qualified_and_bytes_stable(tmp_path):
    first = offline.OfflineEngine(now=NOW).run(_releases)
    files = first.helm_values()
    assert list(files) == ["one-metrics.values.yaml", "solo.values.yaml", "two-metrics.values.yaml"]
    metrics = files["one-metrics.values.yaml"]
    assert "s3cr3t-token" not in metrics
    # a secret inside makes the whole values input secret (the SDK lifts the dict into one secret Output):
    # its shape stays, every leaf is redacted
    assert yaml.safe_load(metrics) == {"auth": {"token": offline.SECRET_MARK}, "replicas": offline.SECRET_MARK}
    assert "# repository: (none: the chart is an OCI reference or a local path)" in files["two-metrics.values.yaml"]
    assert yaml.safe_load(files["solo.values.yaml"]) == {}
    second = offline.OfflineEngine(now=NOW).run(_releases)
    assert second.helm_values() == files
    # a plan directory holds exactly one plan: a release that is gone leaves no stale file
    (tmp_path / "helm").mkdir()
    (tmp_path / "helm" / "old.values.yaml").write_text("x: 1\n")
    offline.write_plan(first, tmp_path)
    assert sorted(p.name for p in (tmp_path / "helm").iterdir()) == list(files)
    assert all((tmp_path / "helm" / name).read_text() == text for name, text in files.items())
